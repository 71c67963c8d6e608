//! The file an exec runs, as an approval gate needs to know it: by identity (device,
//! inode, and change time, so that a file rewritten in place is another file), and
//! for a `#!` script, the interpreter the kernel will really start.
//!
//! Files are looked up from the sandbox's root (`openat2(RESOLVE_IN_ROOT)`), opened
//! with `O_PATH` (opening a FIFO or a device for reading could block or act), and
//! read only when they are regular files, through a fresh read-only descriptor.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;

use super::elf;
use crate::sys;

/// The kernel reads this much of a file to find its `#!` line (`BINPRM_BUF_SIZE`).
const SHEBANG_BYTES: usize = 256;
/// How many interpreters deep the kernel follows `#!`: a script, then up to four more
/// scripts as interpreters, then a program (`exec_binprm` fails a sixth handler with
/// `ELOOP`).
const MAX_INTERPRETERS: usize = 5;

/// A file by what it is, not by name: a file rewritten in place, or replaced by
/// another at the same path, has another identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileIdentity {
    pub dev: u64,
    pub ino: u64,
    /// Change time (seconds, nanoseconds): any write, chmod or link changes it.
    pub ctime: (i64, i64),
}

impl FileIdentity {
    fn of(st: &libc::stat) -> Self {
        FileIdentity {
            dev: st.st_dev,
            ino: st.st_ino,
            ctime: (st.st_ctime, st.st_ctime_nsec),
        }
    }

    /// The identity of the program a process runs now (`/proc/PID/exe`).
    pub fn running(host_pid: libc::pid_t) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(format!("/proc/{host_pid}/exe")).ok()?;
        Some(FileIdentity {
            dev: m.dev(),
            ino: m.ino(),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }
}

/// The sandbox's root directory, as the tracer reached it (through an exec'ing
/// process: the supervisor may not look into init, which is not dumpable).
#[derive(Debug, Clone)]
pub struct SandboxRoot(pub(super) Arc<OwnedFd>);

impl PartialEq for SandboxRoot {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SandboxRoot {}

impl SandboxRoot {
    /// A descriptor of its own on the root.
    pub fn open(&self) -> std::io::Result<std::fs::File> {
        self.0.try_clone().map(std::fs::File::from)
    }
}

/// Device and inode of what `/proc/PID/WHAT` links to (`exe`, `cwd`).
pub(super) fn linked_id(host_pid: impl std::fmt::Display, what: &str) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(format!("/proc/{host_pid}/{what}")).ok()?;
    Some((m.dev(), m.ino()))
}

/// A regular file an exec names, held open (`O_PATH`) while it is decided.
#[derive(Debug, Clone)]
pub struct ExecFile {
    pub identity: FileIdentity,
    pub size: u64,
    /// It has an execute bit: only such a file can be executed, and read here.
    executable: bool,
    fd: Arc<OwnedFd>,
}

impl PartialEq for ExecFile {
    fn eq(&self, other: &Self) -> bool {
        self.identity == other.identity
    }
}

impl Eq for ExecFile {}

impl ExecFile {
    /// `fd` (any kind of descriptor) if it is a regular file.
    pub(super) fn from_fd(fd: OwnedFd) -> Option<Self> {
        let st = sys::fstat(fd.as_fd()).ok()?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return None;
        }
        Some(ExecFile {
            identity: FileIdentity::of(&st),
            size: u64::try_from(st.st_size).unwrap_or(0),
            executable: st.st_mode & 0o111 != 0,
            fd: Arc::new(fd),
        })
    }

    /// Looks `path` up inside the sandbox, from its `root` (a relative path from
    /// `cwd`, the working directory as seen inside).
    pub fn open_in(root: BorrowedFd<'_>, cwd: &[u8], path: &[u8]) -> Option<Self> {
        Self::from_fd(open_path_in(root, cwd, path).ok()?)
    }

    /// The names in the directory `path` inside the sandbox (looked up from `root`).
    pub fn list_dir_in(root: BorrowedFd<'_>, path: &[u8]) -> std::io::Result<Vec<Vec<u8>>> {
        use std::os::unix::ffi::OsStrExt;
        let c_path = CString::new(path).map_err(|_| std::io::ErrorKind::InvalidInput)?;
        let dir = sys::openat2(
            root,
            &c_path,
            libc::O_PATH | libc::O_DIRECTORY,
            sys::RESOLVE_IN_ROOT,
        )?;
        std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))?
            .map(|entry| entry.map(|e| e.file_name().as_bytes().to_vec()))
            .collect()
    }

    /// The file's own (`O_PATH`) descriptor.
    pub(super) fn descriptor(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// A descriptor to read the file's contents (never blocking, never a terminal),
    /// for a file the kernel could execute: one with no execute bit is never read
    /// (`PermissionDenied`), see [`head_of`].
    pub fn reader(&self) -> std::io::Result<std::fs::File> {
        if !self.executable {
            return Err(std::io::ErrorKind::PermissionDenied.into());
        }
        reader_of(self.fd.as_fd())
    }

    /// The first bytes of the file, as the kernel reads them to decide how to run it.
    fn head(&self) -> Option<Vec<u8>> {
        read_head(&self.reader().ok()?, SHEBANG_BYTES)
    }
}

/// `path` inside the sandbox, looked up from its `root` (a relative path from `cwd`,
/// the working directory as seen inside), opened `O_PATH`.
fn open_path_in(root: BorrowedFd<'_>, cwd: &[u8], path: &[u8]) -> std::io::Result<OwnedFd> {
    let mut full = Vec::new();
    if !path.starts_with(b"/") {
        full.extend_from_slice(cwd);
        if !full.ends_with(b"/") {
            full.push(b'/');
        }
    }
    full.extend_from_slice(path);
    let c_path = CString::new(full).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    // `RESOLVE_IN_ROOT` fails a walk through `..` with EAGAIN when anything on the
    // machine is renamed meanwhile (the sandbox can rename in a loop): tried again,
    // a few times, before the caller refuses.
    let mut tries = 0;
    loop {
        match sys::openat2(root, &c_path, libc::O_PATH, sys::RESOLVE_IN_ROOT) {
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && tries < LOOKUP_TRIES => {
                tries += 1;
            }
            done => return done,
        }
    }
}

/// How many times a lookup that met a rename is tried again ([`open_path_in`]).
const LOOKUP_TRIES: u32 = 8;

/// Why what an exec starts could not be read: the exec is refused, as one whose
/// file could not be looked up is, rather than recorded without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unread {
    /// The supervisor had no descriptor left.
    NoDescriptor,
    /// A file the kernel could execute could not be read: execute-only to this
    /// supervisor (the kernel reads a script without read permission), held by a
    /// lease, an I/O error.
    Unreadable,
    /// An interpreter or loader named relative to a working directory that has no
    /// name here.
    NoCwd,
    /// An interpreter named through a `/proc` link to a directory or to a file
    /// that cannot be named from outside.
    ThroughProcLink,
    /// An interpreter found whose own file has no name within `PATH_MAX` from the
    /// sandbox's root (a link can reach one from a short name): it could be
    /// re-pointed unseen, as for an exec's own path (`trace.rs`).
    Unnamed,
    /// A program's own loader (`PT_INTERP`) named through a descriptor or a `/proc`
    /// link: the file behind it (a deleted payload, a memfd) would go unnamed.
    LoaderThroughProcLink,
    /// An interpreter or loader the supervisor could not look up for another reason
    /// than its absence (permission, a name too long from the working directory,
    /// too many links, renames meanwhile): what the kernel finds by that name cannot
    /// be known, and it could be a descriptor's file (session-24 red team: a
    /// relative name from a working directory 4,090 bytes deep, a non-dumpable
    /// process's `/proc/PID/fd` to an unprivileged supervisor, `..` walks failed
    /// with EAGAIN by renames in a loop, each ran a deleted payload unnamed).
    NotLookedUp,
    /// An interpreter that is not there as the supervisor looks it up: the kernel
    /// fails the exec (`ENOENT`), and so does the tracer, without asking the kernel,
    /// since a name can reach a file for the process that it cannot for the
    /// supervisor (`/proc/self/...`, which names the supervisor's own process).
    Missing,
}

impl Unread {
    /// The reason the exec is refused with.
    pub(super) fn reason(self) -> &'static str {
        match self {
            Unread::NoDescriptor => super::OUT_OF_DESCRIPTORS,
            Unread::Unreadable => {
                "Vectra Guard cannot read the file to name what it starts (an execute-only file, or one held by a lease): give it read permission"
            }
            Unread::NoCwd => {
                "its #! line or its loader (PT_INTERP) names a file relative to a working directory that cannot be named from the sandbox's root (deeper than PATH_MAX, removed, or below a folder Vectra Guard may not search): name it by a path from the root"
            }
            Unread::ThroughProcLink => {
                "its #! line names its interpreter through a /proc link whose file cannot be named (name the interpreter by its path)"
            }
            Unread::NotLookedUp => {
                "its #! line or its loader (PT_INTERP) names a file Vectra Guard cannot look up in the sandbox (permission, a name too long from the working directory, too many links): name it by a path from the root"
            }
            Unread::LoaderThroughProcLink => {
                "its loader (PT_INTERP) is named through a descriptor or a /proc link, whose file cannot be named (link it against a loader by its path)"
            }
            Unread::Missing => "its #! line names an interpreter that is not there",
            Unread::Unnamed => {
                "its #! line names an interpreter whose file has no name that fits in PATH_MAX from the sandbox's root: name it by a shallower path"
            }
        }
    }
}

fn unread(e: &std::io::Error) -> Unread {
    if super::resolve::is_out_of_descriptors(e) {
        Unread::NoDescriptor
    } else {
        Unread::Unreadable
    }
}

/// Descriptors to read the files execs name, by device and inode, kept for the
/// session: opening one through `/proc/self/fd` (an `O_PATH` descriptor cannot be
/// read) costs about 10 µs, more than the rest of the read, and most execs run the
/// same few programs. What is read through one is always the file's current content:
/// a kept descriptor keeps its inode, so no other file can take its number meanwhile.
#[derive(Default)]
pub(super) struct Readers {
    files: HashMap<(u64, u64), std::fs::File>,
}

impl Readers {
    /// Files kept at most (each a descriptor of the tracer's): past it, all are
    /// dropped and kept anew.
    const MAX: usize = 32;

    /// A reader of the file `fd` (`O_PATH`, whose `stat` is `st`) is open on.
    fn reader(&mut self, fd: BorrowedFd<'_>, st: &libc::stat) -> Result<&std::fs::File, Unread> {
        let key = (st.st_dev, st.st_ino);
        if !self.files.contains_key(&key) {
            if self.files.len() >= Self::MAX {
                self.files.clear();
            }
            let file = match reader_of(fd) {
                Err(e) if super::resolve::is_out_of_descriptors(&e) && !self.files.is_empty() => {
                    // The kept ones go before an exec is refused for want of one.
                    self.files.clear();
                    reader_of(fd)
                }
                opened => opened,
            }
            .map_err(|e| unread(&e))?;
            self.files.insert(key, file);
        }
        self.files.get(&key).ok_or(Unread::Unreadable)
    }
}

/// Which of the system's loaders ([`elf::SYSTEM_LOADERS`]) the sandbox cannot have
/// changed, found at its first exec (before anything of the sandbox's ran): a
/// program naming one of them runs the system's loader, which its line does not
/// repeat. Any other is named (session-21 red team: in an `--image` run, whose root
/// is a writable layer, a loader copied over the system's ran unnamed).
pub(super) enum SystemLoaders {
    /// The sandbox's root is read-only (the native sandbox's): a system loader path
    /// that resolves onto a read-only mount cannot change (checked once a path).
    Fixed(HashMap<Vec<u8>, bool>),
    /// The root can be written (an image's layer): each system loader path by the
    /// file it named at the first exec; one replaced since is named.
    AsFound(HashMap<Vec<u8>, (u64, u64, (i64, i64))>),
}

impl SystemLoaders {
    /// What the sandbox with root directory `root` has, before its first exec.
    pub(super) fn new(root: BorrowedFd<'_>) -> Self {
        if sys::on_read_only_mount(root).unwrap_or(false) {
            return Self::Fixed(HashMap::new());
        }
        Self::AsFound(
            elf::SYSTEM_LOADERS
                .iter()
                .filter_map(|path| Some((path.to_vec(), identity_in(root, path)?)))
                .collect(),
        )
    }

    /// Whether a program naming `loader` runs the system's loader, as the sandbox
    /// (`root`) found it.
    fn trusted(&mut self, root: Option<BorrowedFd<'_>>, loader: &[u8]) -> bool {
        if !elf::is_system_loader(loader) {
            return false;
        }
        let Some(root) = root else {
            // Nothing can be looked up inside: by its name.
            return true;
        };
        match self {
            Self::Fixed(checked) => *checked.entry(loader.to_vec()).or_insert_with(|| {
                open_path_in(root, b"/", loader)
                    .and_then(|fd| sys::on_read_only_mount(fd.as_fd()))
                    .unwrap_or(false)
            }),
            Self::AsFound(found) => found
                .get(loader)
                .is_some_and(|then| identity_in(root, loader).as_ref() == Some(then)),
        }
    }
}

/// Device, inode and change time of the file `path` names inside the sandbox.
fn identity_in(root: BorrowedFd<'_>, path: &[u8]) -> Option<(u64, u64, (i64, i64))> {
    let fd = open_path_in(root, b"/", path).ok()?;
    let st = sys::fstat(fd.as_fd()).ok()?;
    Some((st.st_dev, st.st_ino, (st.st_ctime, st.st_ctime_nsec)))
}

/// A descriptor to read the file `fd` (`O_PATH`) is open on, never blocking, never a
/// terminal: through `/proc/self/fd`, since an `O_PATH` descriptor cannot be read.
fn reader_of(fd: BorrowedFd<'_>) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// A reader of the file `fd` (`O_PATH`) is open on, with its first `len` bytes;
/// only for a file the kernel could execute, a regular file with an execute bit (even
/// root needs one). Nothing else is read: the path is the sandbox's to choose, and
/// the supervisor may be root. A FIFO could block the tracer (and every exec with
/// it), a device could act, and reading a file such as `/proc/kmsg` (mode 0400, in
/// the sandbox's own `/proc`) would consume the host's kernel log.
///
/// `None` for a file the kernel could not execute; an error for one it could that
/// cannot be read here.
fn head_of(fd: BorrowedFd<'_>, len: usize) -> Result<Option<(std::fs::File, Vec<u8>)>, Unread> {
    if executable(fd)?.is_none() {
        return Ok(None);
    }
    let file = reader_of(fd).map_err(|e| unread(&e))?;
    let head = read_head(&file, len).ok_or(Unread::Unreadable)?;
    Ok(Some((file, head)))
}

/// `fd`'s `stat`, if it is a file the kernel could execute (see [`head_of`]).
fn executable(fd: BorrowedFd<'_>) -> Result<Option<libc::stat>, Unread> {
    let st = sys::fstat(fd).map_err(|e| unread(&e))?;
    let runnable = st.st_mode & libc::S_IFMT == libc::S_IFREG && st.st_mode & 0o111 != 0;
    Ok(runnable.then_some(st))
}

/// The file's first `len` bytes (fewer if it is shorter), in one `pread`: a regular
/// file's read stops short only at its end.
fn read_head(file: &std::fs::File, len: usize) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0; len];
    let n = file.read_at(&mut buf, 0).ok()?;
    buf.truncate(n);
    Some(buf)
}

/// How much of an executed file the recorder reads at once: a `#!` line (the kernel
/// reads [`SHEBANG_BYTES`]) and, for an ELF program, its header, program headers
/// and loader path as linkers lay them out (the rest is read only when they lie
/// further on).
const HEAD_BYTES: usize = 1024;

/// What the kernel starts for the file `opened` (`O_PATH`) is open on, before or in
/// place of that file's own code: for a `#!` script, the last interpreter of its
/// chain, as the chain's last `#!` line names it (each looked up as
/// [`last_interpreter`] says); for an ELF program, its loader (`PT_INTERP`) when that
/// is not the system's as the sandbox found it ([`SystemLoaders`]). Only files the
/// kernel could execute are read ([`head_of`]).
///
/// This is the recorder's reading, done for every exec while it waits, so it is kept
/// to one read of the file's head for most programs, through a descriptor kept in
/// `readers`; those opened for a chain's interpreters are left in `closing`, for the
/// caller to close once the exec was let go.
pub(super) fn interpreter_of(
    host_pid: libc::pid_t,
    root: Option<BorrowedFd<'_>>,
    opened: BorrowedFd<'_>,
    kept: &mut Kept,
    closing: &mut Vec<OwnedFd>,
) -> Result<Option<Started>, Unread> {
    let Some(st) = executable(opened)? else {
        return Ok(None);
    };
    let file = kept.readers.reader(opened, &st)?;
    let head = read_head(file, HEAD_BYTES).ok_or(Unread::Unreadable)?;
    Ok(match shebang(&head) {
        Some((first, _)) => Some(last_interpreter(
            host_pid,
            root,
            first,
            &mut kept.loaders,
            closing,
        )?),
        None => match own_loader(file, &head, root, &mut kept.loaders) {
            Some(loader) => Some(Started {
                name: checked_loader(host_pid, root, loader)?,
                reached: None,
            }),
            None => None,
        },
    })
}

/// A program's own loader (`PT_INTERP`, not the system's), named as the program
/// names it, once the supervisor's own lookup found it as a file of the sandbox:
/// named through a descriptor or a `/proc` link (`/dev/fd/3`, `/proc/self/fd/3`, a
/// symlink to one), or not to be looked up for another reason than its absence, it
/// could be a file no name reaches (a deleted payload, a memfd), and the exec is
/// refused (session-24 red team). Never named by the file that lookup found: the
/// kernel opens the loader after the answer, and a link flipped in between made
/// such a name the system loader's while a payload ran. A link flipped in that
/// window to a descriptor still gets through (round 3: 3-16 % of tries); the line
/// then names the program's own spelling, never the system's loader.
fn checked_loader(
    host_pid: libc::pid_t,
    root: Option<BorrowedFd<'_>>,
    loader: Vec<u8>,
) -> Result<Vec<u8>, Unread> {
    if super::resolve::descriptor_link(host_pid, &loader).is_some() {
        return Err(Unread::LoaderThroughProcLink);
    }
    let Some(root) = root else {
        return Ok(loader);
    };
    // Found as a file of the sandbox, not through a descriptor: the line names it
    // as the program does.
    look_up(host_pid, root, &loader, Unread::LoaderThroughProcLink)?;
    Ok(loader)
}

/// `name` (a `#!` line's interpreter or a program's loader) looked up as the kernel
/// looks it up for the exec'ing process `host_pid`: from the sandbox's root, a
/// relative name from its working directory (by the name that reaches that from the
/// root). Through a `/proc` link, `through`; not there, [`Unread::Missing`] (the
/// kernel fails a missing file with ENOENT, and a name can reach a file for the
/// process that it cannot for the supervisor: `/dev/./fd/3`, through `/proc/self`);
/// any other failure, [`Unread::NotLookedUp`].
fn look_up(
    host_pid: libc::pid_t,
    root: BorrowedFd<'_>,
    name: &[u8],
    through: Unread,
) -> Result<OwnedFd, Unread> {
    let base = if name.starts_with(b"/") {
        Vec::new()
    } else {
        super::resolve::inside_dir(host_pid, root, super::resolve::Base::Cwd)
            .ok_or(Unread::NoCwd)?
    };
    open_path_in(root, &base, name).map_err(|e| match e.raw_os_error() {
        Some(libc::EXDEV) => through,
        _ if super::resolve::is_out_of_descriptors(&e) => Unread::NoDescriptor,
        Some(libc::ENOENT | libc::ENOTDIR) => Unread::Missing,
        _ => Unread::NotLookedUp,
    })
}

/// What the kernel starts first for an exec ([`interpreter_of`]).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Started {
    /// As the `#!` line (or `PT_INTERP`) names it.
    pub name: Vec<u8>,
    /// A `#!` chain's last interpreter's own file, by its path from the sandbox's
    /// root as the kernel names it, when it was found there; the caller compares it
    /// with `name` (a link on the way makes them differ, `interp_ran=`).
    pub reached: Option<Vec<u8>>,
}

/// What the tracer keeps from one exec to the next to read them.
#[derive(Default)]
pub(super) struct Kept {
    pub readers: Readers,
    /// Set at the sandbox's first exec ([`SystemLoaders::new`]); until then (and
    /// where the sandbox's root cannot be reached) loaders are trusted by name.
    pub loaders: Option<SystemLoaders>,
}

/// The loader an ELF program `file` (whose first bytes are `head`) names, when it is
/// not the system's as the sandbox found it.
fn own_loader(
    file: &std::fs::File,
    head: &[u8],
    root: Option<BorrowedFd<'_>>,
    loaders: &mut Option<SystemLoaders>,
) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let read_at = |offset: u64, len: usize| {
        let mut buf = vec![0; len];
        let n = file.read_at(&mut buf, offset).ok()?;
        buf.truncate(n);
        Some(buf)
    };
    elf::loaders(head, read_at)
        .into_iter()
        .find(|loader| match loaders {
            Some(loaders) => !loaders.trusted(root, loader),
            None => !elf::is_system_loader(loader),
        })
}

/// The last interpreter of a `#!` chain whose first is `interpreter`, as the kernel
/// finds each: from `root`, a relative name from the working directory of the
/// exec'ing process `host_pid` (by the name that reaches it from `root`), a
/// descriptor link (`/proc/self/fd/N`, `/dev/fd/N`) as that process resolves it
/// (then named by its file), up to the kernel's depth; or the loader of the program
/// that ends the chain, when it is not the system's. One that is not there fails the
/// exec ([`Unread::Missing`]).
fn last_interpreter(
    host_pid: libc::pid_t,
    root: Option<BorrowedFd<'_>>,
    mut interpreter: Vec<u8>,
    loaders: &mut Option<SystemLoaders>,
    closing: &mut Vec<OwnedFd>,
) -> Result<Started, Unread> {
    let unreached = |name| Started {
        name,
        reached: None,
    };
    let Some(root) = root else {
        return Ok(unreached(interpreter));
    };
    let mut reached = None;
    // Each interpreter is opened, the last (the program that runs) for its loader.
    for _ in 0..MAX_INTERPRETERS {
        let found = if let Some(link) = super::resolve::descriptor_link(host_pid, &interpreter) {
            use super::resolve::Presence;
            match link.presence {
                Presence::Present => {
                    interpreter = link.exe;
                    link.opened.ok_or(Unread::Unreadable)?
                }
                Presence::Missing => return Err(Unread::Missing),
                _ => return Err(Unread::ThroughProcLink),
            }
        } else {
            // A relative name by the name that reaches it from the sandbox's root
            // (checked, as an exec's own relative path is).
            look_up(host_pid, root, &interpreter, Unread::ThroughProcLink)?
        };
        // Its own name, as the kernel names a file of the sandbox's mount namespace
        // from its root (see `resolve.rs`).
        reached = Some(
            super::resolve::read_link(&format!("/proc/self/fd/{}", found.as_raw_fd()))
                .ok_or(Unread::Unnamed)?,
        );
        let head = head_of(found.as_fd(), HEAD_BYTES);
        closing.push(found);
        let Some((file, head)) = head? else {
            break;
        };
        let next = shebang(&head);
        // The program that finally runs: its own loader, not the system's, starts
        // first (session-21 red team: `#!/tmp/python3`, a copy with a loader of
        // its own).
        let loader = next
            .is_none()
            .then(|| own_loader(&file, &head, Some(root), loaders))
            .flatten();
        closing.push(OwnedFd::from(file));
        match (next, loader) {
            (Some((next, _)), _) => {
                // Not opened yet: what was reached is the one before.
                interpreter = next;
                reached = None;
            }
            (None, Some(loader)) => {
                return Ok(unreached(checked_loader(host_pid, Some(root), loader)?));
            }
            (None, None) => break,
        }
    }
    Ok(Started {
        name: interpreter,
        reached,
    })
}

/// What a `#!` script really runs: the command the kernel starts, and the program
/// file that finally runs (the last interpreter of the chain).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// `INTERPRETER [ARG] PATH ARGV[1..]`, nested interpreters first.
    pub argv: Vec<Vec<u8>>,
    /// The program that runs, when it could be found; `None` makes the kernel fail
    /// the exec, or run something nobody could check (so a gate refuses it).
    pub file: Option<ExecFile>,
}

/// The interpreter chain of `file`, run as `path` with `argv`, when it is a script.
pub(super) fn script_of(
    root: BorrowedFd<'_>,
    cwd: &[u8],
    path: &[u8],
    argv: &[Vec<u8>],
    file: &ExecFile,
) -> Option<Script> {
    let mut current = file.clone();
    let mut current_path = path.to_vec();
    let mut current_argv = argv.to_vec();
    let mut script = None;
    for _ in 0..MAX_INTERPRETERS {
        let Some((interpreter, arg)) = current.head().as_deref().and_then(shebang) else {
            break;
        };
        let mut next = vec![interpreter.clone()];
        next.extend(arg);
        next.push(current_path);
        next.extend(current_argv.into_iter().skip(1));
        let found = ExecFile::open_in(root, cwd, &interpreter);
        script = Some(Script {
            argv: next.clone(),
            file: found.clone(),
        });
        let Some(found) = found else {
            break;
        };
        current = found;
        current_path = interpreter;
        current_argv = next;
    }
    script
}

/// The interpreter and its one optional argument from a file's first bytes, as
/// Linux's `load_script` splits them (`fs/binfmt_script.c`), or `None` where it
/// fails the exec (`ENOEXEC`). The kernel looks at the first [`SHEBANG_BYTES`]
/// (NUL-padded when the file is shorter): the line ends at a newline; without one,
/// the interpreter's name must end (a blank or a NUL) within them. The name ends at
/// the first blank or NUL; everything after it and its blanks, up to the line's end
/// (trailing blanks trimmed) or a NUL, is one argument.
fn shebang(head: &[u8]) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let mut buf = [0u8; SHEBANG_BYTES];
    let n = head.len().min(SHEBANG_BYTES);
    buf[..n].copy_from_slice(&head[..n]);
    if !buf.starts_with(b"#!") {
        return None;
    }
    let blank = |c: u8| c == b' ' || c == b'\t';
    let last = SHEBANG_BYTES - 1;
    let non_blank = |from: usize, to: usize| (from..=to).find(|&i| !blank(buf[i]));
    let terminator = |from: usize, to: usize| (from..=to).find(|&i| blank(buf[i]) || buf[i] == 0);
    let mut end = match buf.iter().position(|&c| c == b'\n') {
        Some(newline) => newline,
        None => {
            // No newline: the name must not run past the buffer.
            let start = non_blank(2, last)?;
            terminator(start, last)?;
            last
        }
    };
    while blank(buf[end - 1]) {
        end -= 1;
    }
    let name = non_blank(2, end)?;
    if name == end {
        return None;
    }
    let separator = terminator(name, end);
    let arg = separator
        .filter(|&at| buf[at] != 0)
        .and_then(|at| non_blank(at, end));
    buf[end] = 0;
    if let (Some(at), Some(_)) = (separator, arg) {
        buf[at] = 0;
    }
    let c_string = |from: usize| -> Vec<u8> {
        buf[from..]
            .iter()
            .take_while(|&&c| c != 0)
            .copied()
            .collect()
    };
    // An empty name (a NUL first) fails the exec when the kernel opens it.
    let name = c_string(name);
    (!name.is_empty()).then(|| (name, arg.map(c_string)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_shebang_line_is_an_interpreter_and_one_argument() {
        assert_eq!(
            shebang(b"#!/bin/sh\necho"),
            Some((b"/bin/sh".to_vec(), None))
        );
        assert_eq!(
            shebang(b"#! /bin/rm -rf /\n"),
            Some((b"/bin/rm".to_vec(), Some(b"-rf /".to_vec())))
        );
        assert_eq!(
            shebang(b"#!/usr/bin/env  python3  \t\nx"),
            Some((b"/usr/bin/env".to_vec(), Some(b"python3".to_vec())))
        );
        assert_eq!(shebang(b"#!\n"), None);
        assert_eq!(shebang(b"\x7fELF"), None);
    }

    /// Red team (session 21): the line is split as the kernel splits it, or the
    /// record names another program than the one the kernel starts.
    #[test]
    fn a_shebang_line_is_split_as_the_kernel_splits_it() {
        // A NUL ends the name (and then there is no argument), or the argument.
        assert_eq!(
            shebang(b"#!/x/mid\0 junk\n"),
            Some((b"/x/mid".to_vec(), None))
        );
        assert_eq!(
            shebang(b"#!/x/p\0/usr/bin/python3\n"),
            Some((b"/x/p".to_vec(), None))
        );
        assert_eq!(
            shebang(b"#!/x/p -a\0b\n"),
            Some((b"/x/p".to_vec(), Some(b"-a".to_vec())))
        );
        // No newline in the first 256 bytes: the name must end within them.
        let mut long = b"#!/".to_vec();
        long.extend([b'a'; 300]);
        assert_eq!(shebang(&long), None);
        let mut cut = b"#!/bin/sh ".to_vec();
        cut.extend([b'x'; 300]);
        let expected_arg = vec![b'x'; super::SHEBANG_BYTES - 11];
        assert_eq!(
            shebang(&cut),
            Some((b"/bin/sh".to_vec(), Some(expected_arg)))
        );
        // A short file without a newline: the NUL padding ends it.
        assert_eq!(shebang(b"#!/bin/sh"), Some((b"/bin/sh".to_vec(), None)));
        // Blanks only.
        assert_eq!(shebang(b"#!  \t \n"), None);
        assert_eq!(shebang(b"#!   "), None);
        // A CR is part of the name, as for the kernel.
        assert_eq!(
            shebang(b"#!/bin/sh\r\n"),
            Some((b"/bin/sh\r".to_vec(), None))
        );
    }

    fn write_mode(path: &std::path::Path, text: &str, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn the_interpreter_recorded_is_the_last_of_the_chain_and_only_scripts_have_one() {
        let dir = std::env::temp_dir().join(format!("vg-interp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let inner = dir.join("inner");
        let outer = format!("#!{} -x\necho hi\n", inner.display());
        for (name, text, mode) in [
            ("inner", "#!/bin/sh -e\n", 0o755),
            ("outer", outer.as_str(), 0o711),
            ("missing", "#! /nowhere/at-all  -q \n", 0o700),
            // No execute bit: the kernel could not run it, so it is never read.
            ("unrunnable", "#!/bin/sh\n", 0o644),
        ] {
            write_mode(&dir.join(name), text, mode);
        }
        let root = std::fs::File::open("/").unwrap();
        let opened = |path: &std::path::Path| {
            OwnedFd::from(
                std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_PATH)
                    .open(path)
                    .unwrap(),
            )
        };
        let pid = libc::pid_t::try_from(std::process::id()).unwrap();
        let kept = std::cell::RefCell::new(Kept::default());
        let of = |path: &std::path::Path| {
            interpreter_of(
                pid,
                Some(root.as_fd()),
                opened(path).as_fd(),
                &mut kept.borrow_mut(),
                &mut Vec::new(),
            )
            .map(|started| started.map(|s| s.name))
        };
        // A chain, followed to the program that runs.
        assert_eq!(of(&dir.join("outer")), Ok(Some(b"/bin/sh".to_vec())));
        assert_eq!(of(&inner), Ok(Some(b"/bin/sh".to_vec())));
        // An interpreter that is not there fails the exec, as the kernel would.
        assert_eq!(of(&dir.join("missing")), Err(Unread::Missing));
        assert_eq!(of(&dir.join("unrunnable")), Ok(None));
        // Without the sandbox's root, the first interpreter is named.
        assert_eq!(
            interpreter_of(
                pid,
                None,
                opened(&dir.join("outer")).as_fd(),
                &mut Kept::default(),
                &mut Vec::new()
            ),
            Ok(Some(Started {
                name: inner.as_os_str().as_encoded_bytes().to_vec(),
                reached: None
            }))
        );
        // No script, and something that is no regular file, which is never read.
        assert_eq!(of(std::path::Path::new("/bin/sh")), Ok(None));
        assert_eq!(of(&dir), Ok(None));
        assert_eq!(of(std::path::Path::new("/dev/null")), Ok(None));
        // A file read again through its kept descriptor is read as it is now:
        // rewritten in place, it names its new interpreter.
        let held = kept.borrow().readers.files.len();
        write_mode(&inner, "#!/bin/true\n", 0o755);
        assert_eq!(of(&dir.join("outer")), Ok(Some(b"/bin/true".to_vec())));
        write_mode(&dir.join("outer"), "#!/bin/sh\n", 0o711);
        assert_eq!(of(&dir.join("outer")), Ok(Some(b"/bin/sh".to_vec())));
        assert_eq!(
            kept.borrow().readers.files.len(),
            held,
            "no descriptor more"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_script_chain_is_followed_to_the_program_that_runs() {
        let dir = std::env::temp_dir().join(format!("vg-script-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        write_mode(&dir.join("inner"), "#!/bin/sh -e\n", 0o755);
        write_mode(&dir.join("outer"), "#!inner -x\necho hi\n", 0o755);
        let root = std::fs::File::open("/").unwrap();
        let cwd = dir.as_os_str().as_encoded_bytes();
        let file = ExecFile::open_in(root.as_fd(), cwd, b"outer").unwrap();
        let argv = vec![b"outer".to_vec(), b"a".to_vec()];
        let script = script_of(root.as_fd(), cwd, b"./outer", &argv, &file).unwrap();
        let words: Vec<&[u8]> = script.argv.iter().map(Vec::as_slice).collect();
        assert_eq!(
            words,
            [&b"/bin/sh"[..], b"-e", b"inner", b"-x", b"./outer", b"a"]
        );
        let sh = ExecFile::open_in(root.as_fd(), b"/", b"/bin/sh").unwrap();
        assert_eq!(script.file.unwrap().identity, sh.identity);
        // Not a script.
        assert_eq!(script_of(root.as_fd(), b"/", b"/bin/sh", &argv, &sh), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
