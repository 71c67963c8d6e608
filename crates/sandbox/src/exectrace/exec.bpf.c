// SPDX-License-Identifier: GPL-2.0
// Exec recorder for every sandbox of this machine: each successful exec and each
// process exit in a recorded sandbox's pid namespace (or one nested in it), written
// to that session's ring buffer, which its supervisor drains. Nothing here waits
// for user space: the exec is already committed when `sched_process_exec` fires,
// and what is read is the kernel's own copy (the path it was given, the argv in
// the new program's memory), so no other thread can change it between our read and
// what runs.
//
// Loaded once per boot and pinned (exectrace/loaded.rs): a session only adds its
// namespace to SESSIONS, keyed by the id the kernel gave its pid namespace
// (ns_common.ns_id, Linux 6.18+), which no other namespace is ever given while
// the machine runs, with the slot of its ring buffer in RINGS. (The inode number, which is
// reused at once, could name another sandbox's or a container's namespace once a
// session's supervisor had died without removing its entry.)
//
// Fail closed: an exec of a recorded namespace that cannot be put in its ring
// buffer (full, or no ring) or read is killed with SIGKILL before its first
// instruction (the signal is taken on the return to user space) and counted; the
// supervisor records the count.
//
// Kernel structures are declared by hand, reduced to the fields read, and
// relocated at load time against the running kernel's BTF (CO-RE).

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

#define PRESERVE __attribute__((preserve_access_index))

// ns_id is in an anonymous union in the kernel's struct; CO-RE finds it by name.
struct ns_common { __u64 ns_id; } PRESERVE;
struct pid_namespace { unsigned int level; struct ns_common ns; } PRESERVE;
struct upid { int nr; struct pid_namespace *ns; } PRESERVE;
struct pid { unsigned int level; struct upid numbers[1]; } PRESERVE;
struct qstr { unsigned int len; const unsigned char *name; } PRESERVE;
struct hlist_bl_node { struct hlist_bl_node *next, **pprev; } PRESERVE;
struct dentry { struct hlist_bl_node d_hash; struct dentry *d_parent; struct qstr d_name; } PRESERVE;
struct super_block { unsigned int s_dev; unsigned long s_flags; unsigned long s_magic; } PRESERVE;
struct vfsmount { struct dentry *mnt_root; struct super_block *mnt_sb; int mnt_flags; } PRESERVE;
struct mount { struct mount *mnt_parent; struct dentry *mnt_mountpoint; struct vfsmount mnt; } PRESERVE;
struct path { struct vfsmount *mnt; struct dentry *dentry; } PRESERVE;
struct fs_struct { struct path root; struct path pwd; } PRESERVE;
struct mm_struct { unsigned long arg_start; unsigned long arg_end; } PRESERVE;
struct vm_area_struct { struct file *vm_file; } PRESERVE;
// Where the new program's first instruction is (x86-64's name for it).
struct pt_regs { unsigned long ip; } PRESERVE;
struct file;
struct fdtable { unsigned int max_fds; struct file **fd; } PRESERVE;
struct files_struct { struct fdtable *fdt; } PRESERVE;
typedef struct { int counter; } atomic_t;
struct signal_struct { atomic_t live; unsigned int flags; int group_exit_code; } PRESERVE;
struct task_struct {
	int pid;
	int tgid;
	int exit_code;
	struct task_struct *real_parent;
	struct task_struct *group_leader;
	struct pid *thread_pid;
	struct fs_struct *fs;
	struct files_struct *files;
	struct mm_struct *mm;
	struct signal_struct *signal;
} PRESERVE;
struct inode { struct super_block *i_sb; unsigned long i_ino; } PRESERVE;
struct file { struct path f_path; struct inode *f_inode; } PRESERVE;
struct linux_binprm { struct file *file; const char *filename; const char *interp; int argc; } PRESERVE;

// A recorded session, by its pid namespace's id. Added by its supervisor between
// the clone of the sandbox's init and the byte that lets it go, once its ring is
// in RINGS, so that nothing of the sandbox's runs before it is matched; removed as
// the session ends, or, when its supervisor died without removing it, by the next
// session's start (the owner fields, read only by user space).
struct session {
	// 0: execs killed (ring full or unreadable, or no ring); 1: exits lost (ring
	// full); 2: execs whose kill the kernel refused (bpf_send_signal failed: they
	// ran unrecorded).
	__u64 lost[3];
	__u32 slot;       // its ring buffer's key in RINGS
	__u32 pad;
	__u64 owner_pid;  // the supervisor, in its own pid namespace
	__u64 owner_start;  // its start time (/proc/PID/stat's 22nd field)
	__u64 owner_pidns;  // the id of the supervisor's pid namespace
};
#define MAX_SESSIONS 4096
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SESSIONS);
	__type(key, __u64);
	__type(value, struct session);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} SESSIONS SEC(".maps");

// The ring buffers (RING_SIZE bytes), by slot: a session holds one slot (a lock
// file) while it lives, and a ring stays in its slot for the sessions after it,
// since adding one to this map waits for an RCU grace period (milliseconds). A
// ring can so hold what an earlier session's namespace wrote last: each event
// names its session, and the supervisor keeps only its own. Made by the
// supervisor, which pins this map before the programs are loaded: a map of maps is
// created from a template of its inner map, which the loader cannot describe.
struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, MAX_SESSIONS);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} RINGS SEC(".maps");

// Every level a pid namespace can have: the kernel nests them at most 32 deep
// below the machine's (MAX_PID_NS_LEVEL), so no task is out of reach.
#define MAX_LEVEL 33

#define SIGNAL_GROUP_EXIT 0x00000004
#define SIGKILL 9

// Keep in step with exectrace.rs.
#define KIND_EXEC 1
// 2 MiB: an exec's record is its header and what its regions hold, a few hundred
// bytes (up to 86 KiB with a long argv); a session's start maps the ring (twice
// its size), which costs about 0.1 ms a MiB.
#define RING_SIZE (2 << 20)
#define KIND_EXIT 2
#define PATH_CAP 4096
#define CWD_CAP 4096
#define NAME_CAP 256
// Steps of a walk up (names and mounts crossed). The verifier goes through each
// step of the loop at load, which costs each session's start about 0.3 ms a step
// (both walks): a deeper cwd is recorded with its last names, marked "(deeper)".
#define MAX_DEPTH 32
#define ARGV_CAP 65536
// What a record keeps of argv when the ring cannot take all of it: twice what a
// commands.log line keeps (vg_records::MAX_RECORDED_ARGV_BYTES, 16 KiB), so that
// what is read, without each argument's NUL, still holds more than the line keeps
// and the line states the argv's full size (exectrace.rs `complete`; with 16 KiB
// read, a line of many arguments stated the size read: session-23 red team).
#define ARGV_TIGHT 32768
#define FLAG_VIA_FD 1     // the path goes through a descriptor: name the file by its own path
#define FLAG_ARGV_CUT 2   // argv is longer than ARGV_CAP: what fits was read
#define FLAG_LOADER_READ_ONLY 128 // the loader's file is on a read-only mount
#define FLAG_LOADER_UNCOMPARED (1 << 24) // the program is on an overlay: the "loader" is
                                         // the first instruction's file, perhaps its own
// A walk's end, for the cwd (shifted by 0), the file (by 8) and the loader (by 16):
#define FLAG_OUTSIDE_ROOT 4 // it reached the top of the mounts without the root
#define FLAG_DETACHED 16    // it ended at a name of no directory (memfd, anon)
#define FLAG_DELETED 32     // its first name was removed
#define FLAG_DEEP 64        // it stopped after MAX_DEPTH steps or CWD_CAP bytes
#define FILE_FLAGS(f) ((f) << 8)
#define LOADER_FLAGS(f) ((f) << 16)
// Which region a walk fills.
#define CWD 0
#define FILE 1
#define LOADER 2

struct exec_event {
	__u32 kind;
	__u32 flags;
	__s32 pid;       // inside the sandbox
	__s32 ppid;      // inside the sandbox, 0 when the parent is outside
	__u32 host_pid;
	__u32 path_len;  // bytes of path, without the NUL
	__u32 cwd_len;   // bytes of cwd: names from the cwd up, each ending in NUL
	__u32 argv_len;  // bytes of argv read
	__u64 argv_full; // arg_end - arg_start
	__u32 interp_len; // bytes of interp when it differs from the path (a #! script)
	__u32 file_len;  // bytes of file: names from the program's file up (a #!
	                 // script's when its path is its descriptor's, else its
	                 // interpreter's)
	__u32 argc;      // the new program's argc (argv's size when it is cut)
	__u32 loader_len; // bytes of loader: names from the ELF loader's file up (the
	                  // program the kernel started first: PT_INTERP's), if any
	__u64 session;   // the session's key (its pid namespace's id)
	__u64 time;      // when the exec completed (CLOCK_BOOTTIME, ns)
	__u64 loader_dev; // the loader's file: its file system's device (the kernel's
	__u64 loader_ino; // encoding) and inode, to tell an image's own loader by identity
	// The regions, filled here; the record sent has them one after another, each
	// as long as its length says (path, interp, cwd, file, loader, argv).
	char path[PATH_CAP];
	char interp[PATH_CAP];
	// Sized for the walk's last name wherever it starts (masked offsets).
	char cwd[CWD_CAP + NAME_CAP];
	char file[CWD_CAP + NAME_CAP];
	char loader[CWD_CAP + NAME_CAP];
};

#define HEADER_SIZE __builtin_offsetof(struct exec_event, path)
// Where the next region may start in a record: the regions before argv end by
// 88 + 2 * 4096 + 3 * 4352 bytes, below this mask.
#define OFF_MASK 0x7fff

// One exec being assembled, and its record, per CPU.
struct scratch {
	struct exec_event e;
	__u8 out[OFF_MASK + 1 + ARGV_CAP];
};

struct exit_event {
	__u32 kind;
	__u32 host_pid;
	__s32 pid;
	__s32 status; // a wait status
	__u64 session;
	__u64 time;   // when the process ended (CLOCK_BOOTTIME, ns)
};

// One exec being assembled per CPU, indexed by the CPU's number (a per-CPU
// array's values are limited to 32 KiB). A trace point's program runs with
// migration disabled and does not nest on its CPU. max_entries is set to the
// number of possible CPUs at load.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} SCRATCH SEC(".maps");

// Copies a region's `len` bytes (at most `cap`) into the record at `off`;
// returns where the next starts.
static __always_inline __u32 put(__u8 *out, __u32 off, const void *from, __u32 len, const __u32 cap)
{
	off &= OFF_MASK;
	if (len > cap)
		len = cap;
	if (len)
		bpf_probe_read_kernel(out + off, len, from);
	return off + len;
}

static __always_inline void count(struct session *s, __u32 which)
{
	if (which < 3)
		__sync_fetch_and_add(&s->lost[which], 1);
}

// The task's pid at `level` when its pid namespace there has id `id`, else 0.
static __always_inline int pid_at(struct task_struct *task, __u32 level, __u64 id)
{
	struct pid *pid = BPF_CORE_READ(task, thread_pid);
	if (!pid || level >= MAX_LEVEL)
		return 0;
	if (BPF_CORE_READ(pid, level) < level)
		return 0;
	struct upid up;
	// numbers[] is a flexible array: index it by its own relocated offset.
	__u64 off = bpf_core_field_offset(struct pid, numbers) + (__u64)level * sizeof(struct upid);
	if (bpf_probe_read_kernel(&up, sizeof(up), (char *)pid + off) || !up.ns)
		return 0;
	if (BPF_CORE_READ(up.ns, ns.ns_id) != id)
		return 0;
	return up.nr;
}

// The recorded session the task belongs to, if any: the outermost of its pid
// namespaces (one per level, from the machine's down to its own) that is in
// SESSIONS. Its pid there is returned (0: none), with the session and its key. A
// task's pid namespaces are fixed at its fork, and every child of a task in a
// sandbox is in its namespace or one nested in it, so nothing started inside can
// leave this filter.
struct found {
	struct session *s;
	__u64 id;
	__u32 level;
};

static __always_inline int session_of(struct task_struct *task, struct found *f)
{
	struct pid *pid = BPF_CORE_READ(task, thread_pid);
	if (!pid)
		return 0;
	unsigned int level = BPF_CORE_READ(pid, level);
	__u64 base = bpf_core_field_offset(struct pid, numbers);
	for (__u32 l = 0; l < MAX_LEVEL; l++) {
		if (l > level)
			return 0;
		struct upid up;
		if (bpf_probe_read_kernel(&up, sizeof(up), (char *)pid + base + (__u64)l * sizeof(struct upid)) || !up.ns)
			return 0;
		__u64 id = BPF_CORE_READ(up.ns, ns.ns_id);
		struct session *s = bpf_map_lookup_elem(&SESSIONS, &id);
		if (s) {
			f->s = s;
			f->id = id;
			f->level = l;
			return up.nr;
		}
	}
	return 0;
}

static __always_inline struct mount *real_mount(struct vfsmount *m)
{
	return (struct mount *)((char *)m - bpf_core_field_offset(struct mount, mnt));
}

// The names from (d, vm) up to the task's root, crossing mounts, each followed
// by a NUL, into the event's cwd (FILE 0) or file (FILE 1) region; deeper than
// MAX_DEPTH steps or CWD_CAP bytes, the names nearest the end, flagged. Returns
// false when a name cannot be read. The offset reached is
// kept in the event (map memory, which the verifier does not track), so that the
// paths through one step look alike to it and the loop is verified in a few
// instructions per step.
static __always_inline int walk(struct fs_struct *fs, struct dentry *d,
				struct vfsmount *vm, struct exec_event *e, const int WHICH)
{
	struct dentry *root = BPF_CORE_READ(fs, root.dentry);
	struct vfsmount *root_mnt = BPF_CORE_READ(fs, root.mnt);
	struct mount *m = real_mount(vm);
	__u32 shift = WHICH * 8;
	__u32 *len = WHICH == LOADER ? &e->loader_len : WHICH == FILE ? &e->file_len : &e->cwd_len;
	char *region = WHICH == LOADER ? e->loader : WHICH == FILE ? e->file : e->cwd;
	*len = 0;
	if (!BPF_CORE_READ(d, d_hash.pprev) && d != BPF_CORE_READ(d, d_parent))
		e->flags |= FLAG_DELETED << shift;
	for (int i = 0; i < MAX_DEPTH; i++) {
		if (d == root && vm == root_mnt)
			return 1;
		struct dentry *parent = BPF_CORE_READ(d, d_parent);
		int last = 0;
		if (d == BPF_CORE_READ(vm, mnt_root)) {
			struct mount *up = BPF_CORE_READ(m, mnt_parent);
			if (up == m) {
				e->flags |= FLAG_OUTSIDE_ROOT << shift;
				return 1;
			}
			d = BPF_CORE_READ(m, mnt_mountpoint);
			m = up;
			vm = (struct vfsmount *)((char *)up + bpf_core_field_offset(struct mount, mnt));
			continue;
		}
		if (d == parent) {
			// Its own parent yet no mount's root: a file of no directory.
			e->flags |= FLAG_DETACHED << shift;
			last = 1;
		}
		__u32 off = *len;
		if (off >= CWD_CAP)
			break;
		const unsigned char *name = BPF_CORE_READ(d, d_name.name);
		long n = bpf_probe_read_kernel_str(&region[off & (CWD_CAP - 1)], NAME_CAP, name);
		if (n <= 0)
			return 0;
		*len = off + n;
		if (last)
			return 1;
		d = parent;
	}
	e->flags |= FLAG_DEEP << shift;
	return 1;
}

struct vma_file {
	struct file *file;
};

// bpf_find_vma's callback: the file mapped where the loader was.
static long file_of_vma(struct task_struct *task, struct vm_area_struct *vma, void *ctx)
{
	((struct vma_file *)ctx)->file = BPF_CORE_READ(vma, vm_file);
	return 0;
}

#define OVERLAYFS_SUPER_MAGIC 0x794c7630
#define MNT_READONLY 0x40
#define SB_RDONLY 1

// Whether the exec's path goes through a descriptor (execveat's /dev/fd/N[/name],
// or a /proc link): the file is then named by its own path.
static __always_inline int through_descriptor(const char *p)
{
	return (p[0] == '/' && p[1] == 'd' && p[2] == 'e' && p[3] == 'v' && p[4] == '/' &&
		p[5] == 'f' && p[6] == 'd' && p[7] == '/') ||
	       (p[0] == '/' && p[1] == 'p' && p[2] == 'r' && p[3] == 'o' && p[4] == 'c' &&
		p[5] == '/');
}

// The file open at descriptor N of the task, for a path that is exactly
// "/dev/fd/N" or "/proc/self/fd/N" (fexecve's, execveat's AT_EMPTY_PATH), or
// NULL. A #! script's own file is gone from the exec by its trace point (the
// kernel's file is then the interpreter's), but such a descriptor is still open
// in the task: the interpreter is to read the script through it.
static __always_inline struct file *fd_of_path(struct task_struct *task, const char *p)
{
	int at;
	if (p[0] == '/' && p[1] == 'd' && p[2] == 'e' && p[3] == 'v' && p[4] == '/' &&
	    p[5] == 'f' && p[6] == 'd' && p[7] == '/')
		at = 8;
	else if (p[0] == '/' && p[1] == 'p' && p[2] == 'r' && p[3] == 'o' && p[4] == 'c' &&
		 p[5] == '/' && p[6] == 's' && p[7] == 'e' && p[8] == 'l' && p[9] == 'f' &&
		 p[10] == '/' && p[11] == 'f' && p[12] == 'd' && p[13] == '/')
		at = 14;
	else
		return 0;
	__u32 n = 0;
	int i;
	for (i = 0; i < 8; i++) {
		char c = p[at + i];
		if (c == 0)
			break;
		if (c < '0' || c > '9')
			return 0;
		n = n * 10 + (c - '0');
	}
	if (i == 0 || i == 8)
		return 0;
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt || n >= BPF_CORE_READ(fdt, max_fds))
		return 0;
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = 0;
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[n]))
		return 0;
	return f;
}

// The supervisor is not woken for each event: it drains the ring buffer every few
// milliseconds while the sandbox is busy (a wake-up per exec would cost the
// sandbox's CPUs more than recording it), and is woken once the ring is a
// quarter full, long before it could fill.
static __always_inline __u64 wakeup(void *ring)
{
	return bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA) > RING_SIZE / 4 ? BPF_RB_FORCE_WAKEUP
									    : BPF_RB_NO_WAKEUP;
}

static __always_inline void kill_unrecorded(struct session *s)
{
	count(s, 0);
	// It cannot fail here as the kernel stands (a trace point with interrupts on
	// sends at once, and no sandboxed task is the host's init), but if it ever
	// did, the program would run: that is counted and reported, never hidden.
	if (bpf_send_signal(SIGKILL))
		count(s, 2);
}

SEC("raw_tp/sched_process_exec")
int record_exec(__u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	struct linux_binprm *bprm = (struct linux_binprm *)ctx[2];
	struct found f;
	int pid = session_of(task, &f);
	if (!pid)
		return 0;
	struct session *s = f.s;
	__u32 slot = s->slot;
	void *ring = bpf_map_lookup_elem(&RINGS, &slot);
	__u32 cpu = bpf_get_smp_processor_id();
	struct scratch *sc = bpf_map_lookup_elem(&SCRATCH, &cpu);
	if (!sc || !ring) {
		kill_unrecorded(s);
		return 0;
	}
	struct exec_event *e = &sc->e;
	e->kind = KIND_EXEC;
	e->flags = 0;
	e->session = f.id;
	e->time = bpf_ktime_get_boot_ns();
	e->pid = pid;
	// The parent process: a child forked by a thread other than the main one has
	// that thread as its real_parent, whose id names no process.
	e->ppid = pid_at(BPF_CORE_READ(task, real_parent, group_leader), f.level, f.id);
	e->host_pid = BPF_CORE_READ(task, tgid);

	const char *filename = BPF_CORE_READ(bprm, filename);
	const char *interp = BPF_CORE_READ(bprm, interp);
	long n = bpf_probe_read_kernel_str(e->path, PATH_CAP, filename);
	if (n <= 0) {
		kill_unrecorded(s);
		return 0;
	}
	e->path_len = n - 1;
	e->interp_len = 0;
	if (interp != filename) {
		n = bpf_probe_read_kernel_str(e->interp, PATH_CAP, interp);
		if (n > 0)
			e->interp_len = n - 1;
	}
	struct fs_struct *fs = BPF_CORE_READ(task, fs);
	if (!walk(fs, BPF_CORE_READ(fs, pwd.dentry), BPF_CORE_READ(fs, pwd.mnt), e, CWD)) {
		kill_unrecorded(s);
		return 0;
	}
	e->file_len = 0;
	// The program's file, always walked: the path given may reach it through a
	// link to a descriptor (a symlink to /proc/self/fd/N holding a memfd), which
	// the given path does not name; the supervisor names it by the file when the
	// path goes through a descriptor or the file has no path left (deleted, memfd).
	int via_fd = through_descriptor(e->path);
	struct file *file = BPF_CORE_READ(bprm, file);
	if (e->interp_len) {
		// A #! script: bprm->file is its interpreter's by now. The script is
		// named by its descriptor's file when run through one; otherwise the
		// interpreter's file is walked, and names the program only when no path
		// names it (a memfd reached through #!/proc/self/fd/N: the script's #!
		// line then names a link that says nothing once the process is gone).
		struct file *script = via_fd ? fd_of_path(task, e->path) : 0;
		if (script)
			file = script;
		else
			via_fd = 0;
	}
	if (file) {
		if (via_fd)
			e->flags |= FLAG_VIA_FD;
		if (!walk(fs, BPF_CORE_READ(file, f_path.dentry), BPF_CORE_READ(file, f_path.mnt), e, FILE)) {
			kill_unrecorded(s);
			return 0;
		}
	}
	struct mm_struct *mm = BPF_CORE_READ(task, mm);
	// The ELF loader the kernel started (a dynamic program's PT_INTERP, or a #!
	// script's interpreter's), so that a payload run as a program's loader is on
	// its line: the file mapped where the task's first instruction is, when it is
	// not the program's own (the kernel's file, an interpreter's for a script),
	// started first, and is named. Compared by inode. An overlay's file is mapped
	// as the file beneath it, another inode, and the file mapped at the program's
	// code (start_code) is no proof of the program either: a loader mapped over
	// it passed for it (session-25 red team). So for a program on an overlay the
	// first instruction's file is always sent, marked FLAG_LOADER_UNCOMPARED, and
	// user space compares its identity with the file the program's path names in
	// the overlay's lower folder, which the sandbox cannot change. (Not AT_BASE,
	// the loader's load address: 0 for a loader linked at a fixed address,
	// session-22 red team; nor a comparison with AT_ENTRY, the entry the
	// program's header claims, which can be the loader's own, session-23 red
	// team.) An address in no file (anonymous memory, the vDSO) kills the exec:
	// what runs cannot be named.
	e->loader_len = 0;
	e->loader_dev = 0;
	e->loader_ino = 0;
	// The exec's task is the current one here; these helpers take it typed.
	struct task_struct *current = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(current);
	__u64 ip = BPF_CORE_READ(regs, ip);
	struct vma_file vf = {};
	if (bpf_find_vma(current, ip, file_of_vma, &vf, 0) || !vf.file) {
		kill_unrecorded(s);
		return 0;
	}
	// Out of the struct first: a CO-RE read would relocate vma_file's own field
	// against the kernel's types, where it is not.
	struct file *first = vf.file;
	struct file *kernels = BPF_CORE_READ(bprm, file);
	struct inode *own_inode = BPF_CORE_READ(kernels, f_inode);
	int uncompared = BPF_CORE_READ(own_inode, i_sb, s_magic) == OVERLAYFS_SUPER_MAGIC;
	if (uncompared)
		e->flags |= FLAG_LOADER_UNCOMPARED;
	if (uncompared || BPF_CORE_READ(first, f_inode) != own_inode) {
		struct inode *loader_inode = BPF_CORE_READ(first, f_inode);
		e->loader_dev = BPF_CORE_READ(loader_inode, i_sb, s_dev);
		e->loader_ino = BPF_CORE_READ(loader_inode, i_ino);
		struct vfsmount *lm = BPF_CORE_READ(first, f_path.mnt);
		if ((BPF_CORE_READ(lm, mnt_flags) & MNT_READONLY) ||
		    (BPF_CORE_READ(lm, mnt_sb, s_flags) & SB_RDONLY))
			e->flags |= FLAG_LOADER_READ_ONLY;
		if (!walk(fs, BPF_CORE_READ(first, f_path.dentry), lm, e, LOADER)) {
			kill_unrecorded(s);
			return 0;
		}
	}
	__u64 start = BPF_CORE_READ(mm, arg_start);
	__u64 end = BPF_CORE_READ(mm, arg_end);
	__u64 full = end > start ? end - start : 0;
	e->argv_full = full;
	e->argc = BPF_CORE_READ(bprm, argc);
	__u32 len = full;
	if (full > ARGV_CAP) {
		len = ARGV_CAP;
		e->flags |= FLAG_ARGV_CUT;
	}
	len &= (ARGV_CAP << 1) - 1;
	if (len > ARGV_CAP)
		len = ARGV_CAP;
	e->argv_len = len;
	// The record: the header, then the regions one after another, argv read
	// straight into its place.
	__u8 *out = sc->out;
	__builtin_memcpy(out, e, HEADER_SIZE);
	__u32 off = HEADER_SIZE;
	off = put(out, off, e->path, e->path_len, PATH_CAP);
	off = put(out, off, e->interp, e->interp_len, PATH_CAP);
	off = put(out, off, e->cwd, e->cwd_len, CWD_CAP + NAME_CAP);
	off = put(out, off, e->file, e->file_len, CWD_CAP + NAME_CAP);
	off = put(out, off, e->loader, e->loader_len, CWD_CAP + NAME_CAP);
	off &= OFF_MASK;
	if (len && bpf_probe_read_user(out + off, len, (void *)start)) {
		kill_unrecorded(s);
		return 0;
	}
	__u64 size = off + len;
	if (!bpf_ringbuf_output(ring, out, size, wakeup(ring)))
		return 0;
	// The ring is tight (a flood of long command lines faster than it is
	// drained): a line keeps at most 16 KiB of argv anyway, so ARGV_TIGHT goes
	// rather than the exec being killed (session-23 red team: 8 loops of 55 KiB
	// arguments lost up to half their execs).
	if (len > ARGV_TIGHT) {
		e->argv_len = ARGV_TIGHT;
		e->flags |= FLAG_ARGV_CUT;
		__builtin_memcpy(out, e, HEADER_SIZE);
		if (!bpf_ringbuf_output(ring, out, off + ARGV_TIGHT, wakeup(ring)))
			return 0;
	}
	kill_unrecorded(s);
	return 0;
}

SEC("raw_tp/sched_process_exit")
int record_exit(__u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	struct signal_struct *sig = BPF_CORE_READ(task, signal);
	// Only the process's last thread: the process has ended.
	if (BPF_CORE_READ(sig, live.counter) != 0)
		return 0;
	struct found f;
	int pid = session_of(task, &f);
	if (!pid)
		return 0;
	__u32 slot = f.s->slot;
	void *ring = bpf_map_lookup_elem(&RINGS, &slot);
	if (!ring) {
		count(f.s, 1);
		return 0;
	}
	struct exit_event ev = {};
	ev.kind = KIND_EXIT;
	ev.session = f.id;
	ev.time = bpf_ktime_get_boot_ns();
	ev.host_pid = BPF_CORE_READ(task, tgid);
	// Inside, by the thread group (the leader's pid).
	ev.pid = pid_at(BPF_CORE_READ(task, group_leader), f.level, f.id);
	if (!ev.pid)
		ev.pid = pid;
	// As wait() reports it.
	if (BPF_CORE_READ(sig, flags) & SIGNAL_GROUP_EXIT)
		ev.status = BPF_CORE_READ(sig, group_exit_code);
	else
		ev.status = BPF_CORE_READ(task, group_leader, exit_code);
	if (bpf_ringbuf_output(ring, &ev, sizeof(ev), wakeup(ring)))
		count(f.s, 1);
	return 0;
}
