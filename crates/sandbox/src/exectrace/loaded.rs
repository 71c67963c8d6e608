//! The BPF recorder, loaded once per boot and shared by every session.
//!
//! Loading it costs about 45 ms (reading the kernel's BTF for the relocations,
//! the verifier), too much for each session's start. So the first recorded session
//! loads `exec.bpf.c`'s programs, attaches them and pins the attachments and the
//! two maps sessions share in a bpf file system of our own ([`BPF_FS`], root's
//! only), in a folder named after the object file, so that another build never
//! uses programs whose records it would misread. Every later session opens the
//! pins, takes a free slot (a lock file under [`SLOTS`], held while it lives) and
//! that slot's ring buffer in `RINGS`, and, once its sandbox's pid namespace
//! exists, adds the namespace to `SESSIONS`, keyed by the namespace's id
//! (`NS_GET_ID`), which the kernel never gives to another namespace while the
//! machine runs. Its end removes that entry.
//!
//! Rings stay in their slots for the sessions after: adding a map to a map of
//! maps (or removing one) waits for an RCU grace period, 10-20 ms here, which
//! every start would otherwise wait for. Only the first [`KEPT_RINGS`] slots keep
//! theirs (2 MiB of kernel memory each); a session in a slot past them removes its
//! ring as it ends. A reused ring can hold the last events of its slot's earlier
//! session (one whose supervisor was killed): every event names its session, and
//! only this session's are read.
//!
//! A supervisor killed before it could remove its entry leaves it behind: it
//! matches no namespace any more, and the next session's start removes every entry
//! whose supervisor is gone. While a session lives it holds the attachments open,
//! so that its execs stay recorded whatever becomes of the pins (a pin removed,
//! the file system unmounted).

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use aya::programs::RawTracePoint;
use aya::programs::links::FdLink;

use super::{Decoded, decode};
use crate::sys;
use crate::trace::TraceEvent;

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/exec.bpf.o"));

/// Where the recorder is pinned: a bpf file system mounted there by the first
/// session of the boot (mode 0700: root's only).
const BPF_FS: &str = "/run/vectraguard/bpf";
/// Held while the pins are checked, made or swept, so that two sessions starting
/// at once do not both load the recorder.
const LOCK: &str = "/run/vectraguard/bpf.lock";
/// The slots' lock files, in a folder per build (`slots-VERSION/N`).
const SLOTS: &str = "/run/vectraguard";
/// How many slots keep their ring buffer once their session has ended.
const KEPT_RINGS: u32 = 4;
/// The pins in a version's folder: the two shared maps, then the two attachments
/// (pinned last, so a folder holding them all is a whole load).
const PINS: [&str; 4] = ["SESSIONS", "RINGS", "record_exec", "record_exit"];
/// `exec.bpf.c`'s RING_SIZE and MAX_SESSIONS.
const RING_SIZE: u32 = 2 << 20;
const MAX_SESSIONS: u32 = 4096;

/// `exec.bpf.c`'s `struct session`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Session {
    lost: [u64; 3],
    slot: u32,
    owner: Owner,
}

/// A supervisor, as a session's entry names it: its pid and start time (so a
/// recycled pid is not taken for it), and its pid namespace, where the pid means
/// something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owner {
    pid: u64,
    start: u64,
    pidns: u64,
}

const SESSION_SIZE: usize = 56;

impl Session {
    fn to_bytes(self) -> [u8; SESSION_SIZE] {
        let mut b = [0u8; SESSION_SIZE];
        for (i, n) in self.lost.iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&n.to_ne_bytes());
        }
        b[24..28].copy_from_slice(&self.slot.to_ne_bytes());
        b[32..40].copy_from_slice(&self.owner.pid.to_ne_bytes());
        b[40..48].copy_from_slice(&self.owner.start.to_ne_bytes());
        b[48..56].copy_from_slice(&self.owner.pidns.to_ne_bytes());
        b
    }

    fn from_bytes(b: &[u8; SESSION_SIZE]) -> Self {
        let u64_at = |at: usize| u64::from_ne_bytes(b[at..at + 8].try_into().unwrap_or_default());
        Self {
            lost: [u64_at(0), u64_at(8), u64_at(16)],
            slot: u32::from_ne_bytes(b[24..28].try_into().unwrap_or_default()),
            owner: Owner {
                pid: u64_at(32),
                start: u64_at(40),
                pidns: u64_at(48),
            },
        }
    }
}

impl Owner {
    /// This process.
    fn this() -> Result<Self, String> {
        let pidns = namespace_id("/proc/self/ns/pid")?;
        let pid = u64::from(std::process::id());
        let start = start_time(pid).ok_or("cannot read this process's start time")?;
        Ok(Self { pid, start, pidns })
    }

    /// Whether the supervisor is gone, as far as this process can tell: only an
    /// entry from this pid namespace can be judged (elsewhere its pid means
    /// another process, or none), and it is gone when its pid names no process or
    /// one started at another time.
    fn gone(&self, judge: &Owner) -> bool {
        self.pidns == judge.pidns && start_time(self.pid) != Some(self.start)
    }
}

/// Process `pid`'s start time (`/proc/PID/stat`'s 22nd field), if it lives.
fn start_time(pid: u64) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may hold spaces and parentheses.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// The id of the namespace at `path` (`NS_GET_ID`).
fn namespace_id(path: &str) -> Result<u64, String> {
    let ns = File::open(path).map_err(|e| format!("cannot open {path}: {e}"))?;
    sys::ns_get_id(ns.as_fd()).map_err(|e| {
        format!("this kernel does not give pid namespaces an id (NS_GET_ID on {path}: {e}); the BPF recorder needs Linux 6.18 or later")
    })
}

fn c_path(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| format!("{} holds a NUL", path.display()))
}

/// The name of this build's folder: the object file's FNV-1a hash (`build.rs`).
fn version() -> &'static str {
    env!("VG_EXEC_BPF_VERSION")
}

/// The loaded and attached recorder, and this session's ring buffer; see the
/// module's comment.
pub struct ExecRecorder {
    /// The attachments, held so that the programs stay attached while the
    /// session lives whatever becomes of their pins.
    _links: [OwnedFd; 2],
    sessions: OwnedFd,
    rings: OwnedFd,
    ring: sys::Ring,
    /// The slot's number and its lock, held while the session lives.
    slot: (u32, File),
    owner: Owner,
    /// The system's loaders' paths, as a loader's file is named (found at the
    /// first loader seen).
    system_loaders: Option<Vec<Vec<u8>>>,
    /// In an image run, the files the image's own system loaders' paths reached
    /// before anything of the sandbox ran ([`ExecRecorder::know_overlays`]).
    image_loaders: Vec<(u64, u64)>,
    /// The overlays' folders inside and their lower folders on the host.
    lower: Vec<(Vec<u8>, OwnedFd)>,
    /// This session's key, once its namespace is watched.
    key: Option<u64>,
    reported: [u64; 3],
}

impl std::fmt::Debug for ExecRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExecRecorder")
    }
}

impl ExecRecorder {
    /// Opens the recorder (loading and pinning it first if this boot has not)
    /// and takes a slot and its ring buffer, matching no task yet. Needs
    /// `CAP_BPF`, `CAP_PERFMON` and `CAP_SYS_ADMIN` (root), the kernel's BTF and
    /// namespace ids (Linux 6.18+).
    pub fn load() -> Result<Self, String> {
        let realtime = std::fs::read_to_string("/sys/kernel/realtime").ok();
        if let Some(why) = super::unsafe_kernel(realtime.as_deref()) {
            return Err(why.to_owned());
        }
        let owner = Owner::this()?;
        let dir = pinned(&owner)?;
        let get = |name: &str| {
            sys::bpf_obj_get(&c_path(&dir.join(name))?)
                .map_err(|e| format!("cannot open the exec recorder's {name}: {e}"))
        };
        let links = [get(PINS[2])?, get(PINS[3])?];
        let sessions = get(PINS[0])?;
        let rings = get(PINS[1])?;
        let slots = slots_of(&dir);
        let slot = free_slot(&slots)?;
        free_rings(rings.as_fd(), &slots, slot.0);
        // Its start position now, its data pages by `map_ring` once init is
        // building (see `sys::Ring::map_data`).
        let ring = sys::Ring::open(ring_of(rings.as_fd(), slot.0)?, RING_SIZE as usize)
            .map_err(|e| format!("cannot map the session's ring buffer: {e}"))?;
        Ok(Self {
            _links: links,
            sessions,
            rings,
            ring,
            slot,
            owner,
            system_loaders: None,
            image_loaders: Vec::new(),
            lower: Vec::new(),
            key: None,
            reported: [0; 3],
        })
    }

    /// From now on, record the tasks of process `pid`'s pid namespace (init's,
    /// before its go) and of the namespaces nested in it. First removes what
    /// supervisors that died left behind.
    pub fn watch_namespace_of(&mut self, pid: libc::pid_t) -> Result<(), String> {
        if self.key.is_some() {
            return Err("the exec recorder already watches a namespace".into());
        }
        let id = namespace_id(&format!("/proc/{pid}/ns/pid"))?;
        sweep(self.sessions.as_fd(), &self.owner);
        let session = Session {
            lost: [0; 3],
            slot: self.slot.0,
            owner: self.owner,
        };
        sys::bpf_map_update(
            self.sessions.as_fd(),
            &id.to_ne_bytes(),
            &session.to_bytes(),
            sys::BPF_NOEXIST,
        )
        .map_err(|e| format!("cannot add the session to the exec recorder: {e}"))?;
        self.key = Some(id);
        Ok(())
    }

    /// Maps the ring buffer's data pages: called by `spawn_in` after init's go and
    /// before it is placed, so before anything of the command's can run; a failure
    /// stops the start there.
    pub fn map_ring(&mut self) -> Result<(), String> {
        self.ring
            .map_data()
            .map_err(|e| format!("cannot map the session's ring buffer: {e}"))
    }

    /// The ring buffer's descriptor, readable when events wait.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.ring.as_fd()
    }

    /// Hands every waiting event of this session's to `on_event`, then what was
    /// lost; returns how many events there were.
    pub fn drain(&mut self, mut on_event: impl FnMut(Decoded)) -> usize {
        // `spawn_in` has mapped it; were it not, the record says so rather than
        // showing a session without execs.
        if let Err(reason) = self.map_ring() {
            on_event(told(format!(
                "{reason}: this session's execs were not read"
            )));
            return 1;
        }
        let mut count = 0;
        let key = self.key;
        // Both clocks read once per drain, at its first event.
        let mut now = None;
        loop {
            let mut decoded = None;
            let more = self.ring.next(|item| {
                // An earlier session's, left in the slot's ring (or written by
                // its namespace as its entry was being removed).
                if super::session_of(item).is_some_and(|s| Some(s) != key) {
                    return;
                }
                decoded = Some(decode(item).unwrap_or_else(|| Decoded {
                    loader: None,
                    boot_ns: None,
                    host_pid: 0,
                    event: TraceEvent::Refused {
                        host_pid: 0,
                        reason: "the exec recorder sent a record this program cannot read".into(),
                    },
                }));
            });
            if !more {
                break;
            }
            if let Some(mut decoded) = decoded {
                count += 1;
                self.name_loader(&mut decoded);
                if let Some(boot_ns) = decoded.boot_ns {
                    let clocks = *now
                        .get_or_insert_with(|| (std::time::SystemTime::now(), sys::boottime_ns()));
                    if let (
                        TraceEvent::Exec { at, .. } | TraceEvent::Exit { at, .. },
                        (real, Some(boot)),
                    ) = (&mut decoded.event, clocks)
                    {
                        *at = Some(super::wall_time(real, boot, boot_ns));
                    }
                }
                on_event(decoded);
            }
        }
        let Some(key) = self.key else {
            return count;
        };
        let mut value = [0u8; SESSION_SIZE];
        if !matches!(
            sys::bpf_map_lookup(self.sessions.as_fd(), &key.to_ne_bytes(), &mut value),
            Ok(true)
        ) {
            return count;
        }
        let lost = Session::from_bytes(&value).lost;
        for (which, what) in [
            "programs were killed at their exec: the exec recorder's ring buffer was full or their exec could not be read",
            "exits were not recorded: the exec recorder's ring buffer was full",
            "programs that had to be killed at their exec ran unrecorded: the kernel refused the exec recorder's kill",
        ]
        .into_iter()
        .enumerate()
        {
            let slot = &mut self.reported[which];
            if lost[which] > *slot {
                let n = lost[which] - *slot;
                *slot = lost[which];
                on_event(told(format!("{n} {what}")));
            }
        }
        count
    }
}

impl ExecRecorder {
    /// The sandbox's overlays (an image's root, learning's home), each as the
    /// folder inside and its lower folder on the host, which the sandbox cannot
    /// change. On an overlay, files are mapped as the files beneath them, so the
    /// recorder cannot tell a program's own file from a loader by inode
    /// ([`Loader::uncompared`](super::Loader)): the file the program's path names in
    /// the lower folder is compared instead ([`Self::program_in_lower`]). And an
    /// image's root is a writable layer, so no read-only mount vouches for its
    /// system loader: the files its system loaders' paths reach in the image now,
    /// before anything of the sandbox runs, are trusted by identity instead. A
    /// loader mapped from any other file, one replaced or swapped in the layer above
    /// included, is named (a file the kernel mapped, so no race of names can hide
    /// it; session-24 red team F3).
    pub fn know_overlays(&mut self, overlays: &[(&Path, &Path)]) {
        for (inside, lower) in overlays {
            let Ok(dir) = File::open(lower) else {
                continue;
            };
            if *inside == Path::new("/") {
                self.image_loaders = crate::trace::system_loaders()
                    .iter()
                    .filter_map(|path| identity_in(dir.as_fd(), path))
                    .collect();
            }
            self.lower
                .push((inside.as_os_str().as_bytes().to_vec(), OwnedFd::from(dir)));
        }
    }

    /// The identity of the file an exec's program (a script's last interpreter,
    /// as the kernel names it) names in the lower folder of the overlay it is on;
    /// `None` where it names none (a file the sandbox made in the layer above).
    fn program_in_lower(&self, event: &TraceEvent) -> Option<(u64, u64)> {
        let TraceEvent::Exec {
            path,
            cwd,
            interpreter,
            ..
        } = event
        else {
            return None;
        };
        let named = interpreter.as_deref().unwrap_or(path);
        let mut inside = Vec::new();
        if !named.starts_with(b"/") {
            inside.extend_from_slice(cwd.as_os_str().as_bytes());
            inside.push(b'/');
        }
        inside.extend_from_slice(named);
        let (prefix, dir) = self
            .lower
            .iter()
            .filter(|(prefix, _)| {
                Path::new(std::ffi::OsStr::from_bytes(&inside))
                    .starts_with(std::ffi::OsStr::from_bytes(prefix))
            })
            .max_by_key(|(prefix, _)| prefix.len())?;
        let rest = inside.get(prefix.len()..)?;
        identity_in(dir.as_fd(), if rest.is_empty() { b"/" } else { rest })
    }

    /// Names an exec's ELF loader as what it ran (`interp=`, in place of a `#!`
    /// script's interpreter, whose own loader it is then), unless it is one of
    /// the system's loaders (by their paths here, links followed) on a mount the
    /// sandbox cannot write: in a writable root (an image's), every loader is named.
    fn name_loader(&mut self, decoded: &mut Decoded) {
        let Some(loader) = decoded.loader.take() else {
            return;
        };
        if self.image_loaders.contains(&loader.id)
            || (loader.uncompared && self.program_in_lower(&decoded.event) == Some(loader.id))
        {
            return;
        }
        let system = self.system_loaders.get_or_insert_with(|| {
            crate::trace::system_loaders()
                .iter()
                .flat_map(|path| [Some(path.to_vec()), followed(path)])
                .flatten()
                .collect()
        });
        if loader.read_only && system.contains(&loader.path) {
            return;
        }
        if let TraceEvent::Exec {
            interpreter,
            interp_ran,
            ..
        } = &mut decoded.event
        {
            // The loader is named by its own file: nothing to add.
            *interpreter = Some(loader.path);
            *interp_ran = None;
        }
    }
}

/// The identity (the kernel's device encoding, inode) of the file `path` reaches
/// below `dir`, links followed and kept inside it.
fn identity_in(dir: BorrowedFd<'_>, path: &[u8]) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let path = CString::new(path).ok()?;
    let found = sys::openat2(dir, &path, libc::O_PATH, sys::RESOLVE_IN_ROOT).ok()?;
    let meta = File::from(found).metadata().ok()?;
    Some((super::kernel_dev(meta.dev()), meta.ino()))
}

/// `path` with its links followed, as the kernel names the file it reaches; `None`
/// when nothing is there. One `open(O_PATH)` and one `readlink` of the descriptor,
/// where `canonicalize` reads every component's link in turn (about 60 `readlink`s
/// for the list of loaders, at each session's first dynamic exec).
fn followed(path: &[u8]) -> Option<Vec<u8>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(std::ffi::OsStr::from_bytes(path))
        .ok()?;
    let name = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()?;
    Some(name.into_os_string().into_vec())
}

impl Drop for ExecRecorder {
    /// The session's entry goes, then (past the kept slots) its slot's ring,
    /// before the slot's lock is let go with the fields.
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            let _ = sys::bpf_map_delete(self.sessions.as_fd(), &key.to_ne_bytes());
        }
        if self.slot.0 >= KEPT_RINGS {
            let _ = sys::bpf_map_delete(self.rings.as_fd(), &self.slot.0.to_ne_bytes());
        }
    }
}

/// What the recorder tells the record about itself (an event no process made): a
/// refusal with no process, carrying `reason`.
fn told(reason: String) -> Decoded {
    Decoded {
        loader: None,
        boot_ns: None,
        host_pid: 0,
        event: TraceEvent::Refused {
            host_pid: 0,
            reason,
        },
    }
}

/// The folder of the slots' lock files of the build whose pins are in `dir`.
fn slots_of(dir: &Path) -> PathBuf {
    Path::new(SLOTS).join(format!(
        "slots-{}",
        dir.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ))
}

/// The first slot no live session holds, locked (its lock file's `flock`, let go
/// by the kernel however its holder ends).
fn free_slot(slots: &Path) -> Result<(u32, File), String> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(slots)
        .map_err(|e| format!("cannot make {}: {e}", slots.display()))?;
    for slot in 0..MAX_SESSIONS {
        let path = slots.join(slot.to_string());
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        match file.try_lock() {
            Ok(()) => return Ok((slot, file)),
            Err(std::fs::TryLockError::WouldBlock) => continue,
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(format!("cannot lock {}: {e}", path.display()));
            }
        }
    }
    Err(format!(
        "all {MAX_SESSIONS} of the exec recorder's slots are in use"
    ))
}

/// Removes the rings of slots past the kept ones that no session holds: their
/// session's supervisor was killed before it could remove its own (red team,
/// session 22: 2 MiB of the kernel's memory each, until the slot's next use).
/// Each slot is locked while its ring goes, so no session takes it meanwhile.
fn free_rings(rings: BorrowedFd<'_>, slots: &Path, ours: u32) {
    let slots_held = keys::<4>(rings).into_iter().map(u32::from_ne_bytes);
    for slot in slots_held.filter(|&s| s >= KEPT_RINGS && s != ours) {
        let Ok(file) = File::open(slots.join(slot.to_string())) else {
            continue;
        };
        if file.try_lock().is_ok() {
            let _ = sys::bpf_map_delete(rings, &slot.to_ne_bytes());
        }
    }
}

/// Slot `slot`'s ring buffer: the one left there by the slot's last session, or
/// a new one put there.
fn ring_of(rings: BorrowedFd<'_>, slot: u32) -> Result<OwnedFd, String> {
    let key = slot.to_ne_bytes();
    let mut id = [0u8; 4];
    if matches!(sys::bpf_map_lookup(rings, &key, &mut id), Ok(true))
        && let Ok(ring) = sys::bpf_map_get_fd_by_id(u32::from_ne_bytes(id))
    {
        return Ok(ring);
    }
    let ring = new_ring()?;
    let fd = u32::try_from(ring.as_raw_fd()).map_err(|_| "a negative descriptor")?;
    sys::bpf_map_update(rings, &key, &fd.to_ne_bytes(), 0)
        .map_err(|e| format!("cannot add a ring buffer to the exec recorder: {e}"))?;
    Ok(ring)
}

fn new_ring() -> Result<OwnedFd, String> {
    sys::bpf_map_create(
        "vg_exec_ring",
        sys::BPF_MAP_TYPE_RINGBUF,
        (0, 0),
        RING_SIZE,
        None,
    )
    .map_err(|e| format!("cannot make a ring buffer: {e}"))
}

/// Every key of `map` (at most [`MAX_SESSIONS`]), of `N` bytes.
fn keys<const N: usize>(map: BorrowedFd<'_>) -> Vec<[u8; N]> {
    let mut keys: Vec<[u8; N]> = Vec::new();
    let mut next = [0u8; N];
    while keys.len() < MAX_SESSIONS as usize
        && matches!(
            sys::bpf_map_next_key(map, keys.last().map(|k| &k[..]), &mut next),
            Ok(true)
        )
    {
        keys.push(next);
    }
    keys
}

/// Removes the entry of every session whose supervisor `judge` can tell is
/// gone; returns how many were left.
fn sweep(sessions: BorrowedFd<'_>, judge: &Owner) -> usize {
    let mut left = 0;
    for key in keys::<8>(sessions) {
        let mut value = [0u8; SESSION_SIZE];
        if !matches!(sys::bpf_map_lookup(sessions, &key, &mut value), Ok(true)) {
            continue;
        }
        if Session::from_bytes(&value).owner.gone(judge) {
            let _ = sys::bpf_map_delete(sessions, &key);
        } else {
            left += 1;
        }
    }
    left
}

/// This build's folder of pins, the recorder loaded and pinned there first if
/// it is not yet (or only partly: a load that died).
fn pinned(owner: &Owner) -> Result<PathBuf, String> {
    let run = Path::new(BPF_FS).parent().unwrap_or(Path::new("/run"));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(run)
        .map_err(|e| format!("cannot make {}: {e}", run.display()))?;
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(LOCK)
        .map_err(|e| format!("cannot open {LOCK}: {e}"))?;
    lock.lock()
        .map_err(|e| format!("cannot lock {LOCK}: {e}"))?;
    mount_bpf_fs()?;
    let dir = Path::new(BPF_FS).join(version());
    if PINS.iter().all(|pin| dir.join(pin).exists()) {
        return Ok(dir);
    }
    let _ = remove_pins(&dir);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    if let Err(e) = load_and_pin(&dir) {
        let _ = remove_pins(&dir);
        return Err(e);
    }
    remove_other_versions(&dir, owner);
    Ok(dir)
}

/// Mounts a bpf file system at [`BPF_FS`] unless one is there.
fn mount_bpf_fs() -> Result<(), String> {
    let path = c_path(Path::new(BPF_FS))?;
    if sys::fs_type(&path).is_ok_and(|t| t == sys::BPF_FS_MAGIC) {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(BPF_FS)
        .or_else(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                Ok(())
            } else {
                Err(e)
            }
        })
        .map_err(|e| format!("cannot make {BPF_FS}: {e}"))?;
    sys::mount(
        Some(c"vectraguard"),
        &path,
        Some(c"bpf"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        Some(c"mode=0700"),
    )
    .map_err(|e| {
        format!("cannot mount a bpf file system at {BPF_FS} to keep the exec recorder loaded: {e}")
    })
}

/// Loads the programs, attaches them, and pins the shared maps and the
/// attachments in `dir`.
fn load_and_pin(dir: &Path) -> Result<(), String> {
    std::fs::metadata("/sys/kernel/btf/vmlinux")
        .map_err(|e| format!("the kernel's BTF (/sys/kernel/btf/vmlinux) cannot be read: {e}"))?;
    let cpus = aya::util::nr_cpus()
        .ok()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or("cannot count this machine's possible CPUs")?;
    // A map of maps is made from a template of what it holds, which the loader
    // cannot describe: made here, pinned, and found there by the loader.
    let template = new_ring()?;
    let rings = sys::bpf_map_create(
        "RINGS",
        sys::BPF_MAP_TYPE_HASH_OF_MAPS,
        (4, 4),
        MAX_SESSIONS,
        Some(template.as_fd()),
    )
    .map_err(|e| format!("cannot make the exec recorder's map of ring buffers: {e}"))?;
    sys::bpf_obj_pin(rings.as_fd(), &c_path(&dir.join(PINS[1]))?)
        .map_err(|e| format!("cannot pin the exec recorder's map of ring buffers: {e}"))?;
    let mut ebpf = aya::EbpfLoader::new()
        // The verifier's log costs milliseconds; a refusal still gives the error.
        .verifier_log_level(aya::VerifierLogLevel::DISABLE)
        .set_max_entries("SCRATCH", cpus)
        .map_pin_path(dir)
        // RINGS, a map of maps, which aya has no type for: used only by the programs.
        .allow_unsupported_maps()
        .load(OBJECT)
        .map_err(|e| format!("cannot load the exec recorder: {e}"))?;
    for (name, point) in [
        ("record_exec", "sched_process_exec"),
        ("record_exit", "sched_process_exit"),
    ] {
        let program: &mut RawTracePoint = ebpf
            .program_mut(name)
            .ok_or_else(|| format!("the exec recorder has no program {name}"))?
            .try_into()
            .map_err(|e| format!("{name}: {e}"))?;
        program.load().map_err(|e| {
            format!(
                "the kernel refused the exec recorder's {name}: {}",
                super::short_verifier_error(&e.to_string())
            )
        })?;
        let link = program
            .attach(point)
            .map_err(|e| format!("cannot attach the exec recorder to {point}: {e}"))?;
        let link = program
            .take_link(link)
            .map_err(|e| format!("{name}: {e}"))?;
        FdLink::from(link)
            .pin(dir.join(name))
            .map_err(|e| format!("cannot pin the exec recorder's {name}: {e}"))?;
    }
    Ok(())
}

/// Removes every pin in `dir`, and `dir`.
fn remove_pins(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        std::fs::remove_file(entry?.path())?;
    }
    std::fs::remove_dir(dir)
}

/// Removes the pins of other builds' recorders that no live session uses
/// (their programs then detach), so that upgrades leave no program attached.
fn remove_other_versions(ours: &Path, judge: &Owner) {
    let Ok(entries) = std::fs::read_dir(BPF_FS) else {
        return;
    };
    for dir in entries.filter_map(Result::ok).map(|e| e.path()) {
        if dir == ours {
            continue;
        }
        let sessions = c_path(&dir.join(PINS[0]))
            .ok()
            .and_then(|p| sys::bpf_obj_get(&p).ok());
        if sessions.is_none_or(|sessions| sweep(sessions.as_fd(), judge) == 0) {
            let _ = remove_pins(&dir);
            if let Some(name) = dir.file_name() {
                let slots = Path::new(SLOTS).join(format!("slots-{}", name.to_string_lossy()));
                let _ = std::fs::remove_dir_all(slots);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pins' folder is named after the object this binary loads: a build whose
    /// program changed never takes an older build's pins for its own.
    #[test]
    fn the_pins_folder_is_named_by_the_object_s_hash() {
        let hash = OBJECT.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        });
        assert_eq!(version(), format!("{hash:016x}"));
    }

    #[test]
    fn a_session_s_entry_reads_back_as_written() {
        let session = Session {
            lost: [1, 2, 3],
            slot: 5,
            owner: Owner {
                pid: 42,
                start: 1_234_567,
                pidns: 9,
            },
        };
        assert_eq!(Session::from_bytes(&session.to_bytes()), session);
    }

    #[test]
    fn a_supervisor_is_gone_when_its_pid_names_another_process_or_none() {
        let me = Owner::this().expect("this process");
        assert!(!me.gone(&me));
        let recycled = Owner {
            start: me.start + 1,
            ..me
        };
        assert!(recycled.gone(&me));
        // Seen from another pid namespace, its pid means nothing here: kept.
        let elsewhere = Owner {
            pidns: me.pidns + 1,
            ..recycled
        };
        assert!(!elsewhere.gone(&me));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = u64::from(child.id());
        child.wait().unwrap();
        let dead = Owner {
            pid,
            start: 1,
            ..me
        };
        assert!(dead.gone(&me));
    }

    #[test]
    fn a_live_process_has_a_start_time_and_no_process_has_none() {
        assert!(start_time(u64::from(std::process::id())).is_some_and(|t| t > 0));
        assert_eq!(start_time(u64::MAX), None);
    }

    /// Held by the tests that load the recorder: one's start would free what the
    /// other left in a slot on purpose.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// A recorder, loaded while the other tests that load one wait. The unit tests
    /// run as root (scripts/test), which the recorder needs.
    fn first_recorder() -> (std::sync::MutexGuard<'static, ()>, ExecRecorder) {
        assert_eq!(
            sys::getuid(),
            0,
            "run as root: the BPF exec recorder needs CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN"
        );
        let serial = SERIAL
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (serial, ExecRecorder::load().expect("the recorder loads"))
    }

    /// `unshare --pid --fork sleep`: a process alone in a new pid namespace. The
    /// caller kills and waits for the `unshare`.
    #[allow(clippy::zombie_processes)]
    fn alone() -> (std::process::Child, libc::pid_t) {
        use std::time::{Duration, Instant};
        let mut unshare = std::process::Command::new("unshare")
            .args(["--pid", "--fork", "--kill-child", "sleep", "60"])
            .spawn()
            .expect("unshare (util-linux)");
        let id = unshare.id();
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let children = std::fs::read_to_string(format!("/proc/{id}/task/{id}/children"))
                .unwrap_or_default();
            if let Some(pid) = children.split_whitespace().next() {
                let pid: libc::pid_t = pid.parse().unwrap();
                // Once it is in its own pid namespace (after unshare's fork).
                if std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok()
                    != std::fs::read_link("/proc/self/ns/pid").ok()
                {
                    return (unshare, pid);
                }
            }
            if Instant::now() > end {
                let _ = unshare.kill();
                let _ = unshare.wait();
                panic!("unshare started no process in a new pid namespace");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn entry(recorder: &ExecRecorder, key: u64) -> Option<Session> {
        let mut value = [0u8; SESSION_SIZE];
        sys::bpf_map_lookup(recorder.sessions.as_fd(), &key.to_ne_bytes(), &mut value)
            .unwrap()
            .then(|| Session::from_bytes(&value))
    }

    /// A supervisor killed before its end leaves its entry; the next session's
    /// start removes it, and keeps those of live supervisors and of supervisors
    /// it cannot judge (another pid namespace's). A session's own entry goes at
    /// its end, and two sessions at once hold two slots.
    #[test]
    fn entries_a_dead_supervisor_left_are_swept_by_the_next_session() {
        let (_serial, first) = first_recorder();
        let me = first.owner;
        let mut dead = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = u64::from(dead.id());
        dead.wait().unwrap();
        // Keys no namespace has (ids count up from a few, one per namespace made).
        let base = u64::MAX - 16 * u64::from(std::process::id());
        let owners = [
            (
                base,
                Owner {
                    pid: dead_pid,
                    start: me.start,
                    ..me
                },
            ),
            (base - 1, me),
            (
                base - 2,
                Owner {
                    pidns: me.pidns ^ 1,
                    pid: dead_pid,
                    ..me
                },
            ),
        ];
        for (key, owner) in owners {
            let session = Session {
                lost: [0; 3],

                slot: first.slot.0,
                owner,
            };
            sys::bpf_map_update(
                first.sessions.as_fd(),
                &key.to_ne_bytes(),
                &session.to_bytes(),
                sys::BPF_NOEXIST,
            )
            .unwrap();
        }
        let mut second = ExecRecorder::load().expect("the recorder loads again");
        let slots = (first.slot.0, second.slot.0);
        let (mut unshare, pid) = alone();
        let watched = second.watch_namespace_of(pid);
        let own = second.key;
        let after: Vec<Option<Session>> =
            owners.iter().map(|(key, _)| entry(&second, *key)).collect();
        for (key, _) in owners {
            let _ = sys::bpf_map_delete(first.sessions.as_fd(), &key.to_ne_bytes());
        }
        let sessions = second.sessions.try_clone().unwrap();
        drop(second);
        let _ = unshare.kill();
        let _ = unshare.wait();
        watched.unwrap();
        assert_ne!(slots.0, slots.1, "two live sessions share a slot");
        assert_eq!(after[0], None, "the dead supervisor's entry stayed");
        assert!(after[1].is_some(), "a live supervisor's entry went");
        assert!(after[2].is_some(), "another pid namespace's entry went");
        let own = own.expect("the session has a key");
        let mut value = [0u8; SESSION_SIZE];
        assert!(
            !sys::bpf_map_lookup(sessions.as_fd(), &own.to_ne_bytes(), &mut value).unwrap(),
            "the session's own entry outlived it"
        );
        drop(first);
    }

    /// A supervisor killed in a slot past the kept ones leaves its ring in the
    /// map of rings; the next session's start frees it (session-22 red team: one
    /// 2 MiB ring per such slot stayed until the slot's next use).
    #[test]
    fn a_ring_left_in_an_unheld_slot_past_the_kept_ones_is_freed_by_the_next_session() {
        let (_serial, first) = first_recorder();
        let slots = slots_of(&Path::new(BPF_FS).join(version()));
        // A slot no session of these tests takes, its lock file made but not held.
        let slot = MAX_SESSIONS - 1 - std::process::id() % 64;
        let lock = slots.join(slot.to_string());
        std::fs::write(&lock, b"").unwrap();
        let ring = ring_of(first.rings.as_fd(), slot).expect("a ring in the slot");
        drop(ring);
        let mut id = [0u8; 4];
        let held = |id: &mut [u8; 4]| {
            sys::bpf_map_lookup(first.rings.as_fd(), &slot.to_ne_bytes(), id).unwrap()
        };
        assert!(held(&mut id), "the ring was not put in its slot");
        let second = ExecRecorder::load().expect("the recorder loads again");
        let after = held(&mut id);
        let _ = sys::bpf_map_delete(first.rings.as_fd(), &slot.to_ne_bytes());
        let _ = std::fs::remove_file(&lock);
        drop((first, second));
        assert!(
            !after,
            "the ring of unheld slot {slot} outlived the next session's start"
        );
    }
}
