// SPDX-License-Identifier: GPL-2.0
// Exec recorder for one sandbox: every successful exec and every process exit in
// the sandbox's pid namespace (or one nested in it), written to a ring buffer the
// supervisor drains. Nothing here waits for user space: the exec is already
// committed when `sched_process_exec` fires, and what is read is the kernel's own
// copy (the path it was given, the argv in the new program's memory), so no other
// thread can change it between our read and what runs.
//
// Fail closed: an exec that cannot be put in the ring buffer (full) or read is
// killed with SIGKILL before its first instruction (the signal is taken on the
// return to user space) and counted; the supervisor records the count.
//
// Kernel structures are declared by hand, reduced to the fields read, and
// relocated at load time against the running kernel's BTF (CO-RE).

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

#define PRESERVE __attribute__((preserve_access_index))

struct ns_common { unsigned int inum; } PRESERVE;
struct pid_namespace { unsigned int level; struct ns_common ns; } PRESERVE;
struct upid { int nr; struct pid_namespace *ns; } PRESERVE;
struct pid { unsigned int level; struct upid numbers[1]; } PRESERVE;
struct qstr { unsigned int len; const unsigned char *name; } PRESERVE;
struct dentry { struct dentry *d_parent; struct qstr d_name; } PRESERVE;
struct vfsmount { struct dentry *mnt_root; } PRESERVE;
struct mount { struct mount *mnt_parent; struct dentry *mnt_mountpoint; struct vfsmount mnt; } PRESERVE;
struct path { struct vfsmount *mnt; struct dentry *dentry; } PRESERVE;
struct fs_struct { struct path root; struct path pwd; } PRESERVE;
struct mm_struct { unsigned long arg_start; unsigned long arg_end; } PRESERVE;
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
	struct mm_struct *mm;
	struct signal_struct *signal;
} PRESERVE;
struct linux_binprm { const char *filename; const char *interp; int argc; } PRESERVE;

// The sandbox's pid namespace: its inode number and level, written by the
// supervisor between the clone of the sandbox's init and the byte that lets it
// go (before that, inum 0 matches no namespace).
struct config { __u32 inum; __u32 level; };
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} CONFIG SEC(".maps");

#define SIGNAL_GROUP_EXIT 0x00000004
#define SIGKILL 9

// Keep in step with exectrace.rs.
#define KIND_EXEC 1
#define KIND_EXIT 2
#define PATH_CAP 4096
#define CWD_CAP 4096
#define NAME_CAP 256
// Steps of the walk up from the cwd: names and mounts crossed.
#define MAX_DEPTH 512
#define ARGV_CAP 65536
#define FLAG_CWD_DEEP 1   // the walk stopped before the root: never sent (killed)
#define FLAG_ARGV_CUT 2   // argv is longer than ARGV_CAP: what fits was read
#define FLAG_OUTSIDE_ROOT 4 // the cwd is not under the task's root

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
	__u32 pad;
	char path[PATH_CAP];
	char interp[PATH_CAP];
	// Sized for the walk's last name wherever it starts (masked offsets).
	char cwd[CWD_CAP + NAME_CAP];
	char argv[ARGV_CAP];
};

struct exit_event {
	__u32 kind;
	__u32 host_pid;
	__s32 pid;
	__s32 status; // a wait status
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} EVENTS SEC(".maps");

// One event being assembled per CPU, indexed by the CPU's number (a per-CPU
// array's values are limited to 32 KiB). A trace point's program runs with
// migration disabled and does not nest on its CPU. max_entries is set to the
// number of possible CPUs at load.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct exec_event);
} SCRATCH SEC(".maps");

// 0: execs killed (ring full or unreadable); 1: exits lost (ring full).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} LOST SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&LOST, &which);
	if (n)
		__sync_fetch_and_add(n, 1);
}

// The task's pid in the sandbox's namespace, or 0 when it is not in it (nor in
// one nested in it). A task's pid namespace is fixed at its fork, and every child
// of a task in the sandbox is in it or in a namespace nested in it, so nothing
// started inside can leave this filter.
static __always_inline int pid_inside(struct task_struct *task)
{
	__u32 zero = 0;
	struct config *c = bpf_map_lookup_elem(&CONFIG, &zero);
	if (!c || !c->inum)
		return 0;
	__u32 NS_INUM = c->inum, NS_LEVEL = c->level & 63;
	struct pid *pid = BPF_CORE_READ(task, thread_pid);
	if (!pid)
		return 0;
	unsigned int level = BPF_CORE_READ(pid, level);
	if (level < NS_LEVEL)
		return 0;
	struct upid up;
	// numbers[] is a flexible array: index it by its own relocated offset.
	__u64 off = bpf_core_field_offset(struct pid, numbers) + (__u64)NS_LEVEL * sizeof(struct upid);
	if (bpf_probe_read_kernel(&up, sizeof(up), (char *)pid + off))
		return 0;
	if (!up.ns)
		return 0;
	if (BPF_CORE_READ(up.ns, ns.inum) != NS_INUM)
		return 0;
	return up.nr;
}

static __always_inline struct mount *real_mount(struct vfsmount *m)
{
	return (struct mount *)((char *)m - bpf_core_field_offset(struct mount, mnt));
}

// The cwd's names from the cwd up to the task's root, crossing mounts, each
// followed by a NUL. Returns false when it takes more than MAX_DEPTH steps or
// CWD_CAP bytes. The offset reached is kept in the event (map memory, which the
// verifier does not track), so that the paths through one step look alike to it
// and the loop is verified in a few instructions per step.
static __always_inline int walk_cwd(struct task_struct *task, struct exec_event *e)
{
	struct fs_struct *fs = BPF_CORE_READ(task, fs);
	struct dentry *root = BPF_CORE_READ(fs, root.dentry);
	struct vfsmount *root_mnt = BPF_CORE_READ(fs, root.mnt);
	struct dentry *d = BPF_CORE_READ(fs, pwd.dentry);
	struct vfsmount *vm = BPF_CORE_READ(fs, pwd.mnt);
	struct mount *m = real_mount(vm);
	e->cwd_len = 0;
	for (int i = 0; i < MAX_DEPTH; i++) {
		if (d == root && vm == root_mnt)
			return 1;
		struct dentry *parent = BPF_CORE_READ(d, d_parent);
		if (d == BPF_CORE_READ(vm, mnt_root) || d == parent) {
			struct mount *up = BPF_CORE_READ(m, mnt_parent);
			if (up == m) {
				// The top of the mount tree, not passing the root.
				e->flags |= FLAG_OUTSIDE_ROOT;
				return 1;
			}
			d = BPF_CORE_READ(m, mnt_mountpoint);
			m = up;
			vm = (struct vfsmount *)((char *)up + bpf_core_field_offset(struct mount, mnt));
			continue;
		}
		__u32 off = e->cwd_len;
		if (off >= CWD_CAP)
			return 0;
		const unsigned char *name = BPF_CORE_READ(d, d_name.name);
		long n = bpf_probe_read_kernel_str(&e->cwd[off & (CWD_CAP - 1)], NAME_CAP, name);
		if (n <= 0)
			return 0;
		e->cwd_len = off + n;
		d = parent;
	}
	return 0;
}

static __always_inline void kill_unrecorded(void)
{
	count(0);
	bpf_send_signal(SIGKILL);
}

SEC("tp_btf/sched_process_exec")
int record_exec(__u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	struct linux_binprm *bprm = (struct linux_binprm *)ctx[2];
	int pid = pid_inside(task);
	if (!pid)
		return 0;
	__u32 cpu = bpf_get_smp_processor_id();
	struct exec_event *e = bpf_map_lookup_elem(&SCRATCH, &cpu);
	if (!e) {
		kill_unrecorded();
		return 0;
	}
	e->kind = KIND_EXEC;
	e->flags = 0;
	e->pid = pid;
	e->ppid = pid_inside(BPF_CORE_READ(task, real_parent));
	e->host_pid = BPF_CORE_READ(task, tgid);

	const char *filename = BPF_CORE_READ(bprm, filename);
	const char *interp = BPF_CORE_READ(bprm, interp);
	long n = bpf_probe_read_kernel_str(e->path, PATH_CAP, filename);
	if (n <= 0) {
		kill_unrecorded();
		return 0;
	}
	e->path_len = n - 1;
	e->interp_len = 0;
	if (interp != filename) {
		n = bpf_probe_read_kernel_str(e->interp, PATH_CAP, interp);
		if (n > 0)
			e->interp_len = n - 1;
	}
	if (!walk_cwd(task, e)) {
		kill_unrecorded();
		return 0;
	}
	struct mm_struct *mm = BPF_CORE_READ(task, mm);
	__u64 start = BPF_CORE_READ(mm, arg_start);
	__u64 end = BPF_CORE_READ(mm, arg_end);
	__u64 full = end > start ? end - start : 0;
	e->argv_full = full;
	__u32 len = full;
	if (full > ARGV_CAP) {
		len = ARGV_CAP;
		e->flags |= FLAG_ARGV_CUT;
	}
	len &= (ARGV_CAP << 1) - 1;
	if (len > ARGV_CAP)
		len = ARGV_CAP;
	if (len && bpf_probe_read_user(e->argv, len, (void *)start)) {
		kill_unrecorded();
		return 0;
	}
	e->argv_len = len;
	__u64 size = __builtin_offsetof(struct exec_event, argv) + (__u64)len;
	if (size > sizeof(*e))
		size = sizeof(*e);
	if (bpf_ringbuf_output(&EVENTS, e, size, 0))
		kill_unrecorded();
	return 0;
}

SEC("tp_btf/sched_process_exit")
int record_exit(__u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	struct signal_struct *sig = BPF_CORE_READ(task, signal);
	// Only the process's last thread: the process has ended.
	if (BPF_CORE_READ(sig, live.counter) != 0)
		return 0;
	int pid = pid_inside(task);
	if (!pid)
		return 0;
	struct exit_event ev = {};
	ev.kind = KIND_EXIT;
	ev.host_pid = BPF_CORE_READ(task, tgid);
	// Inside, by the thread group (the leader's pid).
	ev.pid = pid_inside(BPF_CORE_READ(task, group_leader));
	if (!ev.pid)
		ev.pid = pid;
	// As wait() reports it.
	if (BPF_CORE_READ(sig, flags) & SIGNAL_GROUP_EXIT)
		ev.status = BPF_CORE_READ(sig, group_exit_code);
	else
		ev.status = BPF_CORE_READ(task, group_leader, exit_code);
	if (bpf_ringbuf_output(&EVENTS, &ev, sizeof(ev), 0))
		count(1);
	return 0;
}
