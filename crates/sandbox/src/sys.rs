//! Raw system calls. This is the only module of Vectra Guard with `unsafe` code: tiny
//! functions that pass checked arguments to the kernel and turn `-1` into `io::Error`.
//! Everything above this layer is safe Rust.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use libc::{c_int, c_long, c_uint, c_ulong, pid_t};

fn check(ret: c_int) -> io::Result<c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn check_long(ret: c_long) -> io::Result<c_long> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn owned(ret: c_long) -> io::Result<OwnedFd> {
    let fd = check_long(ret)?;
    let fd = RawFd::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `clone(2)` without a new stack: like `fork`, but with namespace flags. Returns
/// `Some(pid)` in the parent and `None` in the child.
///
/// The caller must be single-threaded: the child is a copy of the calling thread only.
pub fn clone_fork(flags: c_int) -> io::Result<Option<pid_t>> {
    let flags = c_ulong::try_from(flags | libc::SIGCHLD)
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: a null stack makes clone behave like fork (the child runs on a copy of our
    // stack); the pointer arguments are null because no CLONE_*TID/SETTLS flag is given.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<c_int>(),
            std::ptr::null_mut::<c_int>(),
            0 as c_ulong,
        )
    };
    let pid = check_long(ret)?;
    Ok(if pid == 0 {
        None
    } else {
        Some(pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ERANGE))?)
    })
}

/// Plain `fork(2)`; same single-thread rule as [`clone_fork`].
pub fn fork() -> io::Result<Option<pid_t>> {
    // SAFETY: fork has no memory-safety preconditions; callers fork only while
    // single-threaded, so the child cannot inherit a lock held by another thread.
    let pid = check(unsafe { libc::fork() })?;
    Ok(if pid == 0 { None } else { Some(pid) })
}

pub fn unshare(flags: c_int) -> io::Result<()> {
    // SAFETY: unshare takes a flag word only.
    check(unsafe { libc::unshare(flags) }).map(drop)
}

/// `mount(2)` for propagation changes and classic filesystem mounts.
pub fn mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: c_ulong,
    data: Option<&CStr>,
) -> io::Result<()> {
    let p = |s: Option<&CStr>| s.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: every pointer is either null or a NUL-terminated string that outlives the call.
    check(unsafe {
        libc::mount(
            p(source),
            target.as_ptr(),
            p(fstype),
            flags,
            p(data).cast::<libc::c_void>(),
        )
    })
    .map(drop)
}

pub fn umount2(target: &CStr, flags: c_int) -> io::Result<()> {
    // SAFETY: target is a valid C string.
    check(unsafe { libc::umount2(target.as_ptr(), flags) }).map(drop)
}

pub fn pivot_root(new_root: &CStr, put_old: &CStr) -> io::Result<()> {
    // SAFETY: both arguments are valid C strings.
    check_long(unsafe { libc::syscall(libc::SYS_pivot_root, new_root.as_ptr(), put_old.as_ptr()) })
        .map(drop)
}

pub const FSCONFIG_SET_FLAG: c_uint = 0;
pub const FSCONFIG_SET_STRING: c_uint = 1;
pub const FSCONFIG_CMD_CREATE: c_uint = 6;
pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub const MOUNT_ATTR_NODEV: u64 = 0x4;
pub const MOUNT_ATTR_NOEXEC: u64 = 0x8;
pub const OPEN_TREE_CLONE: c_uint = 1;
pub const AT_RECURSIVE: c_uint = 0x8000;
const MOVE_MOUNT_F_EMPTY_PATH: c_uint = 0x4;
const MOVE_MOUNT_T_EMPTY_PATH: c_uint = 0x40;
pub const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
pub const RESOLVE_NO_SYMLINKS: u64 = 0x04;
pub const RESOLVE_BENEATH: u64 = 0x08;
pub const RESOLVE_IN_ROOT: u64 = 0x10;

/// Opens a new filesystem context (`fsopen(2)`), e.g. for tmpfs, proc or devpts.
pub fn fsopen(fstype: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: fstype is a valid C string; FSOPEN_CLOEXEC = 1.
    owned(unsafe { libc::syscall(libc::SYS_fsopen, fstype.as_ptr(), 1 as c_uint) })
}

/// `fsconfig(2)`: sets a string option (`value: Some`) or a flag (`None`).
pub fn fsconfig_set(fs: BorrowedFd<'_>, key: &CStr, value: Option<&CStr>) -> io::Result<()> {
    let (cmd, val) = match value {
        Some(v) => (FSCONFIG_SET_STRING, v.as_ptr()),
        None => (FSCONFIG_SET_FLAG, std::ptr::null()),
    };
    // SAFETY: fs is an open fs context; key/value are valid C strings or null.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            cmd,
            key.as_ptr(),
            val,
            0 as c_int,
        )
    })
    .map(drop)
}

pub fn fsconfig_create(fs: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: fs is an open fs context; the other arguments must be null/0 for CMD_CREATE.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0 as c_int,
        )
    })
    .map(drop)
}

/// `fsmount(2)`: turns a configured context into a detached mount with `attrs`.
pub fn fsmount(fs: BorrowedFd<'_>, attrs: u64) -> io::Result<OwnedFd> {
    let attrs = c_uint::try_from(attrs).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: fs is an open, created fs context; FSMOUNT_CLOEXEC = 1.
    owned(unsafe { libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), 1 as c_uint, attrs) })
}

/// `open_tree(2)` on a descriptor itself (AT_EMPTY_PATH) or on `path` beneath `dir`.
pub fn open_tree(dir: BorrowedFd<'_>, path: &CStr, flags: c_uint) -> io::Result<OwnedFd> {
    let mut flags = flags | libc::O_CLOEXEC as c_uint;
    if path.is_empty() {
        flags |= libc::AT_EMPTY_PATH as c_uint;
    }
    // SAFETY: dir is an open descriptor and path a valid C string.
    owned(unsafe { libc::syscall(libc::SYS_open_tree, dir.as_raw_fd(), path.as_ptr(), flags) })
}

/// Attaches the detached mount `from` on top of the object `to` refers to.
pub fn move_mount(from: BorrowedFd<'_>, to: BorrowedFd<'_>) -> io::Result<()> {
    let empty = c"";
    // SAFETY: both descriptors are open; empty paths with the *_EMPTY_PATH flags make
    // the kernel use the descriptors themselves.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            from.as_raw_fd(),
            empty.as_ptr(),
            to.as_raw_fd(),
            empty.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    })
    .map(drop)
}

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

pub const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

/// Makes the detached mount `fd` an idmapped mount: its files' owners are shown
/// through the id mapping of the user namespace `userns`.
pub fn mount_setattr_idmap(fd: BorrowedFd<'_>, userns: BorrowedFd<'_>) -> io::Result<()> {
    let mut attr = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP,
        attr_clr: 0,
        propagation: 0,
        userns_fd: u64::try_from(userns.as_raw_fd())
            .map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?,
    };
    // SAFETY: as in `mount_setattr`: a valid mount_attr of the size passed, empty path
    // with AT_EMPTY_PATH.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH as c_uint,
            &mut attr as *mut MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(drop)
}

/// `mount_setattr(2)` on the mount a descriptor refers to, optionally recursively.
pub fn mount_setattr(fd: BorrowedFd<'_>, recursive: bool, attr_set: u64) -> io::Result<()> {
    let mut attr = MountAttr {
        attr_set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let mut flags = libc::AT_EMPTY_PATH as c_uint;
    if recursive {
        flags |= AT_RECURSIVE;
    }
    // SAFETY: attr is a valid mount_attr of the size we pass; the path is empty and
    // AT_EMPTY_PATH makes the kernel use fd.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            c"".as_ptr(),
            flags,
            &mut attr as *mut MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(drop)
}

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// `openat2(2)` with resolve restrictions.
pub fn openat2(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: c_int,
    resolve: u64,
) -> io::Result<OwnedFd> {
    let how = OpenHow {
        flags: u64::try_from(flags | libc::O_CLOEXEC)
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?,
        mode: 0,
        resolve,
    };
    // SAFETY: how is a valid open_how of the size we pass; path is a valid C string.
    owned(unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    })
}

/// Plain `openat(2)`, used to create mount-point files.
pub fn openat(dir: BorrowedFd<'_>, path: &CStr, flags: c_int, mode: c_uint) -> io::Result<OwnedFd> {
    // SAFETY: dir is open and path a valid C string.
    let fd = check(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            path.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode,
        )
    })?;
    // SAFETY: the kernel just returned this descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Changes the owner of `name` in `dir` (ids of the caller's user namespace), without
/// following a symlink.
pub fn fchownat(dir: BorrowedFd<'_>, name: &CStr, uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: dir is open and name a valid C string.
    check(unsafe {
        libc::fchownat(
            dir.as_raw_fd(),
            name.as_ptr(),
            uid,
            gid,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })
    .map(drop)
}

pub fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: libc::mode_t) -> io::Result<()> {
    // SAFETY: dir is open and name a valid C string.
    check(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) }).map(drop)
}

pub fn symlinkat(target: &CStr, dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    // SAFETY: all strings are valid; dir is open.
    check(unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) }).map(drop)
}

pub fn fchdir(dir: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: dir is an open directory descriptor.
    check(unsafe { libc::fchdir(dir.as_raw_fd()) }).map(drop)
}

pub fn sethostname(name: &[u8]) -> io::Result<()> {
    // SAFETY: the pointer and length describe a live byte slice.
    check(unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) }).map(drop)
}

pub fn setresuid(uid: u32) -> io::Result<()> {
    // SAFETY: plain integer arguments.
    check(unsafe { libc::setresuid(uid, uid, uid) }).map(drop)
}

pub fn setresgid(gid: u32) -> io::Result<()> {
    // SAFETY: plain integer arguments.
    check(unsafe { libc::setresgid(gid, gid, gid) }).map(drop)
}

pub fn setgroups(groups: &[u32]) -> io::Result<()> {
    // SAFETY: the pointer and length describe a live slice of gid_t.
    check(unsafe { libc::setgroups(groups.len(), groups.as_ptr()) }).map(drop)
}

pub fn getuid() -> u32 {
    // SAFETY: getuid cannot fail.
    unsafe { libc::getuid() }
}

pub fn getgid() -> u32 {
    // SAFETY: getgid cannot fail.
    unsafe { libc::getgid() }
}

pub fn prctl(option: c_int, arg2: c_ulong, arg3: c_ulong) -> io::Result<c_int> {
    // SAFETY: every prctl option we use takes integer arguments only.
    check(unsafe { libc::prctl(option, arg2, arg3, 0 as c_ulong, 0 as c_ulong) })
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Empties the effective, permitted and inheritable capability sets.
pub fn capset_empty() -> io::Result<()> {
    let mut header = CapHeader {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3: two 32-bit words
        pid: 0,
    };
    let data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: header and data have the kernel's layout for version 3 (two data words).
    check_long(unsafe {
        libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapHeader,
            data.as_ptr(),
        )
    })
    .map(drop)
}

pub const SECCOMP_FILTER_FLAG_NEW_LISTENER: c_uint = 1 << 3;

/// The kernel's seccomp `sock_fprog`.
#[repr(C)]
struct SockFprog {
    len: u16,
    filter: *const vg_seccomp::SockFilter,
}

/// Installs a seccomp filter; returns the user-notification listener when
/// `SECCOMP_FILTER_FLAG_NEW_LISTENER` is in `flags`.
pub fn seccomp_set_filter(
    program: &[vg_seccomp::SockFilter],
    flags: c_uint,
) -> io::Result<Option<OwnedFd>> {
    let prog = SockFprog {
        len: u16::try_from(program.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?,
        filter: program.as_ptr(),
    };
    // SAFETY: prog points at `len` instructions with the kernel's sock_filter layout
    // (`vg_seccomp::SockFilter` is repr(C) with that layout) that outlive the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &prog as *const SockFprog,
        )
    };
    let ret = check_long(ret)?;
    if flags & SECCOMP_FILTER_FLAG_NEW_LISTENER != 0 {
        owned(ret).map(Some)
    } else {
        Ok(None)
    }
}

/// Asks whether the kernel supports a seccomp return action.
pub fn seccomp_action_available(action: u32) -> bool {
    // SAFETY: the pointer refers to a live u32 for the duration of the call.
    unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_ACTION_AVAIL,
            0 as c_uint,
            &action as *const u32,
        ) == 0
    }
}

/// Closes descriptors `first..=last`.
pub fn close_range(first: c_uint, last: c_uint) -> io::Result<()> {
    // SAFETY: close_range takes integers; it is used only where no Rust object still
    // owns those descriptors (in init, on the inherited stdio numbers).
    check_long(unsafe { libc::syscall(libc::SYS_close_range, first, last, 0 as c_uint) }).map(drop)
}

pub fn dup2(from: RawFd, to: RawFd) -> io::Result<()> {
    // SAFETY: dup2 takes integers; an invalid `from` is reported as EBADF.
    check(unsafe { libc::dup2(from, to) }).map(drop)
}

pub fn setsid() -> io::Result<()> {
    // SAFETY: setsid takes no arguments.
    check(unsafe { libc::setsid() }).map(drop)
}

/// Replaces the process image. Returns only on failure.
pub fn execve(path: &CStr, argv: &[CString], envp: &[CString]) -> io::Error {
    let mut a: Vec<*const libc::c_char> = argv.iter().map(|s| s.as_ptr()).collect();
    a.push(std::ptr::null());
    let mut e: Vec<*const libc::c_char> = envp.iter().map(|s| s.as_ptr()).collect();
    e.push(std::ptr::null());
    // SAFETY: both arrays are null-terminated arrays of valid C strings that outlive the call.
    unsafe { libc::execve(path.as_ptr(), a.as_ptr(), e.as_ptr()) };
    io::Error::last_os_error()
}

pub fn exit_now(code: c_int) -> ! {
    // SAFETY: _exit ends the process without running destructors or atexit handlers,
    // which is what a forked child must do.
    unsafe { libc::_exit(code) }
}

/// `waitpid(2)`; returns `None` with WNOHANG when nothing changed.
pub fn waitpid(pid: pid_t, flags: c_int) -> io::Result<Option<(pid_t, c_int)>> {
    let mut status: c_int = 0;
    // SAFETY: status points at a live c_int.
    let ret = check(unsafe { libc::waitpid(pid, &mut status, flags) })?;
    Ok((ret != 0).then_some((ret, status)))
}

pub fn kill(pid: pid_t, signal: c_int) -> io::Result<()> {
    // SAFETY: kill takes integers.
    check(unsafe { libc::kill(pid, signal) }).map(drop)
}

/// A signal set built from a list of signal numbers.
pub fn sigset(signals: &[c_int]) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it before use.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is a valid sigset_t; sigaddset only fails for invalid numbers, which
    // callers do not pass.
    unsafe {
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
    }
    set
}

/// Sets the signal mask of the calling thread.
pub fn sigmask_set(set: &libc::sigset_t) -> io::Result<()> {
    // SAFETY: set is a valid sigset_t; the old mask is not requested.
    let ret = unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, set, std::ptr::null_mut()) };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(ret))
    }
}

/// Adds `set` to the calling thread's signal mask.
pub fn sigmask_block(set: &libc::sigset_t) -> io::Result<()> {
    // SAFETY: set is a valid sigset_t; the old mask is not requested.
    let ret = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, set, std::ptr::null_mut()) };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(ret))
    }
}

/// Waits for one of the (blocked) signals in `set`; returns its number and sender pid.
pub fn sigwait(set: &libc::sigset_t) -> io::Result<(c_int, pid_t)> {
    // SAFETY: info is plain data filled by the kernel.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: set and info are valid for the call.
        let ret = unsafe { libc::sigwaitinfo(set, &mut info) };
        if ret >= 0 {
            // SAFETY: si_pid is valid for the signals we wait for (kill/sigqueue/SIGCHLD).
            let pid = unsafe { info.si_pid() };
            return Ok((ret, pid));
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Restores the default disposition of every catchable signal. Ignored signals (Rust
/// ignores SIGPIPE) would otherwise stay ignored across execve.
pub fn reset_signal_dispositions() {
    for sig in 1..libc::SIGRTMAX() {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: SIG_DFL is always a valid disposition; errors for reserved numbers are
        // irrelevant.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
}

/// The Landlock ABI version of the running kernel, or the errno explaining its absence
/// (ENOSYS: not built in; EOPNOTSUPP: built in but disabled at boot).
pub fn landlock_abi_version() -> Result<i32, io::Error> {
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag (1) the call
    // only returns the ABI number.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1 as c_uint,
        )
    };
    let v = check_long(ret)?;
    i32::try_from(v).map_err(|_| io::Error::from_raw_os_error(libc::ERANGE))
}

pub fn setfsuid(uid: u32) {
    // SAFETY: setfsuid takes an integer; it reports the previous value, not errors.
    unsafe { libc::setfsuid(uid) };
}

pub fn setfsgid(gid: u32) {
    // SAFETY: setfsgid takes an integer; it reports the previous value, not errors.
    unsafe { libc::setfsgid(gid) };
}

/// `fstat` on a descriptor (O_PATH descriptors included).
pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    // SAFETY: stat is plain data filled by the kernel.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open and st is a valid out-pointer.
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st)
}

/// True when the other end of a pipe we read from has been closed.
pub fn peer_closed(fd: BorrowedFd<'_>) -> bool {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: pfd is a valid pollfd array of length 1; timeout 0 never blocks.
    let ret = unsafe { libc::poll(&mut pfd, 1, 0) };
    ret == 1 && pfd.revents & libc::POLLHUP != 0
}

/// Marks every descriptor from `first` up close-on-exec.
pub fn cloexec_from(first: c_uint) -> io::Result<()> {
    // SAFETY: close_range takes integers; CLOSE_RANGE_CLOEXEC (4) only sets flags.
    check_long(unsafe { libc::syscall(libc::SYS_close_range, first, c_uint::MAX, 4 as c_uint) })
        .map(drop)
}

/// A connected pair of `AF_UNIX` datagram-preserving sockets (close-on-exec).
pub fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: fds is a valid out-array of two ints.
    check(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    // SAFETY: the kernel just returned these two descriptors.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

const CMSG_SPACE_ONE_FD: usize = 24; // CMSG_SPACE(sizeof(int)) on 64-bit Linux
const INT_LEN: c_uint = 4; // sizeof(int)

/// A message header for a one-byte payload plus room for one SCM_RIGHTS descriptor;
/// the caller keeps `iov` and `control` alive while the header is used.
fn one_fd_msghdr(
    iov: &mut libc::iovec,
    control: &mut [u64; CMSG_SPACE_ONE_FD / 8],
) -> libc::msghdr {
    // SAFETY: msghdr is plain data; the pointers set below refer to the caller's buffers.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = CMSG_SPACE_ONE_FD;
    msg
}

/// Sends one descriptor over a unix socket (SCM_RIGHTS) with a one-byte payload.
pub fn send_fd(sock: BorrowedFd<'_>, fd: BorrowedFd<'_>) -> io::Result<()> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = [0u64; CMSG_SPACE_ONE_FD / 8];
    let msg = one_fd_msghdr(&mut iov, &mut control);
    // SAFETY: msg_control has room for one cmsg carrying one int (CMSG_SPACE above),
    // so CMSG_FIRSTHDR is non-null and CMSG_DATA points inside `control`.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(INT_LEN) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<c_int>(), fd.as_raw_fd());
    }
    // SAFETY: msg is fully initialised and its buffers outlive the call.
    check_long(unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, 0) } as c_long).map(drop)
}

/// Receives one descriptor sent with [`send_fd`]; `None` when the peer closed first.
pub fn recv_fd(sock: BorrowedFd<'_>) -> io::Result<Option<OwnedFd>> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = [0u64; CMSG_SPACE_ONE_FD / 8];
    let mut msg = one_fd_msghdr(&mut iov, &mut control);
    // SAFETY: msg's buffers are live and sized as declared; MSG_CMSG_CLOEXEC only
    // sets a flag on received descriptors.
    let n = check_long(
        unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) } as c_long,
    )?;
    if n == 0 {
        return Ok(None);
    }
    // SAFETY: the kernel filled msg_control; CMSG_FIRSTHDR checks controllen before
    // returning a header, and we check level/type/len before reading the int.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
            || (*cmsg).cmsg_len < libc::CMSG_LEN(INT_LEN) as usize
        {
            return Err(io::Error::from_raw_os_error(libc::EBADMSG));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<c_int>());
        Ok(Some(OwnedFd::from_raw_fd(fd)))
    }
}

/// The kernel's `struct seccomp_notif` (x86_64 layout).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SeccompNotif {
    pub id: u64,
    pub pid: u32,
    pub flags: u32,
    pub nr: i32,
    pub arch: u32,
    pub instruction_pointer: u64,
    pub args: [u64; 6],
}

#[repr(C)]
struct SeccompNotifResp {
    id: u64,
    val: i64,
    error: i32,
    flags: u32,
}

const SECCOMP_IOCTL_NOTIF_RECV: c_ulong = 0xc050_2100;
const SECCOMP_IOCTL_NOTIF_SEND: c_ulong = 0xc018_2101;
const SECCOMP_IOCTL_NOTIF_ID_VALID: c_ulong = 0x4008_2102;
const SECCOMP_USER_NOTIF_FLAG_CONTINUE: u32 = 1;

/// Waits for the next user notification.
pub fn notif_recv(listener: BorrowedFd<'_>) -> io::Result<SeccompNotif> {
    let mut notif = SeccompNotif::default();
    // SAFETY: notif is a zeroed seccomp_notif of the size encoded in the ioctl number.
    check(unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            SECCOMP_IOCTL_NOTIF_RECV,
            &mut notif as *mut SeccompNotif,
        )
    })?;
    Ok(notif)
}

/// Lets the notified system call proceed as if there were no filter.
pub fn notif_continue(listener: BorrowedFd<'_>, id: u64) -> io::Result<()> {
    notif_send(
        listener,
        SeccompNotifResp {
            id,
            val: 0,
            error: 0,
            flags: SECCOMP_USER_NOTIF_FLAG_CONTINUE,
        },
    )
}

/// Fails the notified system call with `errno` without running it.
pub fn notif_fail(listener: BorrowedFd<'_>, id: u64, errno: i32) -> io::Result<()> {
    notif_send(
        listener,
        SeccompNotifResp {
            id,
            val: 0,
            error: -errno.abs(),
            flags: 0,
        },
    )
}

fn notif_send(listener: BorrowedFd<'_>, mut resp: SeccompNotifResp) -> io::Result<()> {
    // SAFETY: resp is a seccomp_notif_resp of the size encoded in the ioctl number.
    check(unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            SECCOMP_IOCTL_NOTIF_SEND,
            &mut resp as *mut SeccompNotifResp,
        )
    })
    .map(drop)
}

/// True while notification `id` is still pending (its task has not died or moved on).
pub fn notif_id_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
    let mut id = id;
    // SAFETY: the ioctl reads one u64 from a live local.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            SECCOMP_IOCTL_NOTIF_ID_VALID,
            &mut id as *mut u64,
        ) == 0
    }
}

/// Blocks until `fd` is readable or hung up; returns true if it is hung up.
pub fn poll_hup(fd: BorrowedFd<'_>) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: pfd is a valid pollfd array of length 1.
        let ret = unsafe { libc::poll(&mut pfd, 1, -1) };
        if ret >= 0 {
            return Ok(
                pfd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
                    && pfd.revents & libc::POLLIN == 0,
            );
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Reads another process's memory (`process_vm_readv`); returns the bytes read.
pub fn read_process_memory(pid: pid_t, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: usize::try_from(addr).map_err(|_| io::Error::from_raw_os_error(libc::EFAULT))?
            as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `local` describes our live buffer; `remote` is only an address in the
    // other process, which the kernel validates.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    let n = check_long(n as c_long)?;
    usize::try_from(n).map_err(|_| io::Error::from_raw_os_error(libc::ERANGE))
}

const IFF_UP_RUNNING: libc::c_short = 0x1 | 0x40; // IFF_UP | IFF_RUNNING

/// Brings the loopback interface of the current network namespace up.
pub fn loopback_up() -> io::Result<()> {
    let sock = ioctl_socket()?;
    let mut req = ifreq("lo");
    // SAFETY: req is a valid ifreq naming "lo"; the ioctl fills ifru_flags.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) })?;
    // SAFETY: ifru_flags is the union member SIOCGIFFLAGS just filled.
    unsafe { req.ifr_ifru.ifru_flags |= IFF_UP_RUNNING };
    // SAFETY: req is a valid ifreq with the new flags.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) }).map(drop)
}

/// A socket to address the interface ioctls to (any socket of the namespace serves).
fn ioctl_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket takes integers.
    let sock =
        check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: the kernel just returned this descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(sock) })
}

/// An `ifreq` naming `name` (at most 15 bytes).
fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain data.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req
        .ifr_name
        .iter_mut()
        .zip(name.bytes().take(libc::IFNAMSIZ - 1))
    {
        *dst = src as libc::c_char;
    }
    req
}

/// A `sockaddr` holding an IPv4 address, as the interface ioctls expect.
fn sockaddr_v4(addr: std::net::Ipv4Addr) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        // AF_INET is 2: it fits.
        sin_family: libc::sa_family_t::try_from(libc::AF_INET).unwrap_or_default(),
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(addr).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr have the same size; both are plain data.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

/// Creates the TUN interface `name` in the caller's network namespace and returns its
/// non-blocking packet descriptor. Every read and write is one IP packet after a
/// 10-byte `virtio_net_hdr` (IFF_VNET_HDR), through which the writer can tell the
/// kernel that a TCP checksum need not be computed (the packet never leaves the host).
///
/// The open must happen inside the sandbox's network namespace (the device belongs to
/// the namespace of whoever opened `/dev/net/tun`) and before the file-system identity
/// changes, since `/dev/net/tun` is checked against the host's permissions.
pub fn tun_create(name: &str) -> io::Result<OwnedFd> {
    let path = c"/dev/net/tun";
    // SAFETY: path is a valid C string; open returns a new descriptor or -1.
    let fd = check(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: the kernel just returned this descriptor.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = ifreq(name);
    // 0x5001: it fits the 16-bit flags field.
    req.ifr_ifru.ifru_flags =
        libc::c_short::try_from(libc::IFF_TUN | libc::IFF_NO_PI | libc::IFF_VNET_HDR)
            .unwrap_or_default();
    // SAFETY: req is a valid ifreq naming the interface with the TUN flags set.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &req) })?;
    Ok(fd)
}

/// Gives interface `name` an IPv4 address, netmask and MTU, brings it up, and routes
/// everything else through `gateway` on it.
pub fn iface_configure(
    name: &str,
    addr: std::net::Ipv4Addr,
    netmask: std::net::Ipv4Addr,
    mtu: i32,
    gateway: std::net::Ipv4Addr,
) -> io::Result<()> {
    let sock = ioctl_socket()?;
    let set = |request: libc::c_ulong, req: &libc::ifreq| {
        // SAFETY: req is a valid ifreq with the union member this request reads set.
        check(unsafe { libc::ioctl(sock.as_raw_fd(), request, req) }).map(drop)
    };
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_addr = sockaddr_v4(addr);
    set(libc::SIOCSIFADDR, &req)?;
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_netmask = sockaddr_v4(netmask);
    set(libc::SIOCSIFNETMASK, &req)?;
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_mtu = mtu;
    set(libc::SIOCSIFMTU, &req)?;
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_flags = IFF_UP_RUNNING;
    set(libc::SIOCSIFFLAGS, &req)?;

    // SAFETY: rtentry is plain data; rt_dev stays null (the gateway is on-link).
    let mut route: libc::rtentry = unsafe { std::mem::zeroed() };
    route.rt_dst = sockaddr_v4(std::net::Ipv4Addr::UNSPECIFIED);
    route.rt_genmask = sockaddr_v4(std::net::Ipv4Addr::UNSPECIFIED);
    route.rt_gateway = sockaddr_v4(gateway);
    route.rt_flags = libc::RTF_UP | libc::RTF_GATEWAY;
    // SAFETY: route is a valid rtentry for a default route through an on-link gateway.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCADDRT, &route) }).map(drop)
}

/// Closes every descriptor from 3 up except those in `keep`.
pub fn close_all_except(keep: &[RawFd]) {
    let mut keep: Vec<c_uint> = keep
        .iter()
        .filter_map(|&fd| c_uint::try_from(fd).ok())
        .filter(|&fd| fd >= 3)
        .collect();
    keep.sort_unstable();
    let mut next: c_uint = 3;
    for fd in keep {
        if fd > next {
            let _ = close_range(next, fd - 1);
        }
        next = fd.saturating_add(1);
    }
    let _ = close_range(next, c_uint::MAX);
}

/// A descriptor that refers to process `pid` for as long as it is held, so that a
/// later signal can never reach a recycled pid.
pub fn pidfd_open(pid: pid_t) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes integers and returns a new descriptor or -1.
    let fd = check_long(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) })?;
    let fd = c_int::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: the kernel just returned this descriptor, which nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sends `signal` to the process behind a pidfd.
pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, signal: c_int) -> io::Result<()> {
    // SAFETY: a live pidfd, a signal number, no siginfo, no flags.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    })
    .map(drop)
}

/// Grows a pipe's buffer to `bytes` (best effort: the kernel caps it at
/// `/proc/sys/fs/pipe-max-size` for unprivileged users).
pub fn set_pipe_size(fd: BorrowedFd<'_>, bytes: c_int) -> io::Result<()> {
    // SAFETY: fcntl on a live descriptor with an integer argument.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, bytes) }).map(drop)
}

/// Whether the process behind a pidfd has exited (its pidfd polls readable).
pub fn pidfd_exited(pidfd: BorrowedFd<'_>) -> bool {
    let mut pfd = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: pfd is a valid pollfd array of length 1; a zero timeout never blocks.
    let ret = unsafe { libc::poll(&mut pfd, 1, 0) };
    ret > 0 && pfd.revents & libc::POLLIN != 0
}

const SECCOMP_IOCTL_NOTIF_SET_FLAGS: c_ulong = 0x4008_2104;
const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;

/// Asks the kernel (6.6+) to hand the CPU straight from a notifying task to the
/// supervisor and back, instead of going through the scheduler: much lower latency
/// per notification. Older kernels refuse it (EINVAL), which only costs speed.
pub fn notif_sync_wakeup(listener: BorrowedFd<'_>) -> io::Result<()> {
    let flags: u64 = SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP;
    // SAFETY: the ioctl takes the flags by value (as its integer argument).
    check(unsafe { libc::ioctl(listener.as_raw_fd(), SECCOMP_IOCTL_NOTIF_SET_FLAGS, flags) })
        .map(drop)
}

/// The kernel's `struct pidfd_info`, first version (64 bytes, Linux 6.13+).
#[repr(C)]
#[derive(Debug, Default)]
struct PidfdInfo {
    mask: u64,
    cgroupid: u64,
    pid: u32,
    tgid: u32,
    ppid: u32,
    ruid: u32,
    rgid: u32,
    euid: u32,
    egid: u32,
    suid: u32,
    sgid: u32,
    fsuid: u32,
    fsgid: u32,
    exit_code: i32,
}

/// `_IOWR(0xFF, 11, struct pidfd_info)`.
const PIDFD_GET_INFO: c_ulong = 0xC040_FF0B;
const PIDFD_INFO_PID: u64 = 1;

/// The parent's pid (in our pid namespace) of the process behind a pidfd, from
/// `PIDFD_GET_INFO` (Linux 6.13+): no `/proc` lookup needed.
pub fn pidfd_parent(pidfd: BorrowedFd<'_>) -> io::Result<u32> {
    let mut info = PidfdInfo {
        mask: PIDFD_INFO_PID,
        ..PidfdInfo::default()
    };
    // SAFETY: info is a pidfd_info of the size encoded in the ioctl number.
    check(unsafe {
        libc::ioctl(
            pidfd.as_raw_fd(),
            PIDFD_GET_INFO,
            &mut info as *mut PidfdInfo,
        )
    })?;
    Ok(info.ppid)
}

/// Like [`sigwait`], giving up after `timeout`: `Ok(None)` when no signal came.
pub fn sigtimedwait(
    set: &libc::sigset_t,
    timeout: std::time::Duration,
) -> io::Result<Option<c_int>> {
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    loop {
        // SAFETY: set and ts are valid for the call; no siginfo is requested.
        let ret = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &ts) };
        if ret >= 0 {
            return Ok(Some(ret));
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EAGAIN) => return Ok(None),
            Some(libc::EINTR) => continue,
            _ => return Err(err),
        }
    }
}

/// Lowers (or sets) both the soft and hard value of a resource limit.
pub fn setrlimit(resource: libc::__rlimit_resource_t, value: u64) -> io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: lim is a valid rlimit.
    check(unsafe { libc::setrlimit(resource, &lim) }).map(drop)
}

/// Free blocks available to unprivileged users on the filesystem holding `path`.
pub fn statfs_available(path: &CStr) -> io::Result<u64> {
    // SAFETY: buf is plain data filled by the kernel.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: path is a valid C string and buf a valid statfs.
    check(unsafe { libc::statfs(path.as_ptr(), &mut buf) })?;
    Ok(buf.f_bavail)
}

// ---------------------------------------------------------------------------------------
// Terminals.

/// Opens a new pseudo-terminal in this mount namespace's devpts: the master, and the
/// slave opened through the master (`TIOCGPTPEER`, no path lookup).
pub fn open_pty() -> io::Result<(OwnedFd, OwnedFd)> {
    // SAFETY: a constant C string and flags.
    let master = check(unsafe {
        libc::open(
            c"/dev/ptmx".as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: the kernel just returned this descriptor.
    let master = unsafe { OwnedFd::from_raw_fd(master) };
    let unlock: c_int = 0;
    // SAFETY: TIOCSPTLCK reads one int from a live local.
    check(unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSPTLCK, &unlock) })?;
    // SAFETY: TIOCGPTPEER takes open flags by value and returns a new descriptor.
    let slave = check(unsafe {
        libc::ioctl(
            master.as_raw_fd(),
            libc::TIOCGPTPEER,
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: the kernel just returned this descriptor.
    Ok((master, unsafe { OwnedFd::from_raw_fd(slave) }))
}

/// Makes the terminal on fd 0 the controlling terminal of this (new) session.
pub fn set_controlling_terminal() -> io::Result<()> {
    // SAFETY: TIOCSCTTY on fd 0 with the integer argument 0 (do not steal).
    check(unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) }).map(drop)
}

pub fn is_terminal(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: isatty takes a descriptor.
    unsafe { libc::isatty(fd.as_raw_fd()) == 1 }
}

pub fn tcgetattr(fd: BorrowedFd<'_>) -> io::Result<libc::termios> {
    // SAFETY: termios is plain data filled by the kernel.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: t is a valid termios.
    check(unsafe { libc::tcgetattr(fd.as_raw_fd(), &mut t) })?;
    Ok(t)
}

pub fn tcsetattr(fd: BorrowedFd<'_>, t: &libc::termios) -> io::Result<()> {
    // SAFETY: t is a valid termios; TCSADRAIN lets pending output finish first.
    check(unsafe { libc::tcsetattr(fd.as_raw_fd(), libc::TCSADRAIN, t) }).map(drop)
}

/// Resumes output on terminal `fd` if it was suspended (`tcflow(TCOOFF)`), which would
/// otherwise make a draining `tcsetattr` wait forever.
pub fn tcflow_resume(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: tcflow takes a descriptor and an action.
    check(unsafe { libc::tcflow(fd.as_raw_fd(), libc::TCOON) }).map(drop)
}

/// `t` switched to raw mode (no echo, no line editing, no signals from keys).
pub fn raw_termios(t: &libc::termios) -> libc::termios {
    let mut raw = *t;
    // SAFETY: raw is a valid termios.
    unsafe { libc::cfmakeraw(&mut raw) };
    raw
}

pub fn get_winsize(fd: BorrowedFd<'_>) -> io::Result<libc::winsize> {
    // SAFETY: winsize is plain data filled by the kernel.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, &mut ws) })?;
    Ok(ws)
}

pub fn set_winsize(fd: BorrowedFd<'_>, ws: &libc::winsize) -> io::Result<()> {
    // SAFETY: TIOCSWINSZ reads one winsize.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, ws) }).map(drop)
}

/// Forks a tiny process that restores `saved` on terminal `tty` once `wait` reads
/// end-of-file, i.e. when every holder of its write end is gone, including when the
/// supervisor is killed with SIGKILL. Returns the guardian's pid.
///
/// Must be called while the process has one thread (it forks).
pub fn spawn_terminal_guardian(
    tty: BorrowedFd<'_>,
    saved: &libc::termios,
    wait: OwnedFd,
) -> io::Result<pid_t> {
    match fork()? {
        Some(pid) => Ok(pid),
        None => {
            close_all_except(&[tty.as_raw_fd(), wait.as_raw_fd()]);
            // Ignore the signals a terminal or a process group sends, so that only
            // the end of the supervisor ends the guardian.
            for sig in [
                libc::SIGINT,
                libc::SIGQUIT,
                libc::SIGTERM,
                libc::SIGHUP,
                libc::SIGTSTP,
            ] {
                // SAFETY: setting a standard disposition.
                unsafe { libc::signal(sig, libc::SIG_IGN) };
            }
            let mut byte = [0u8; 1];
            // A byte means the supervisor restored the terminal itself.
            let mut done = false;
            loop {
                // SAFETY: reading into a live one-byte buffer.
                let n = unsafe { libc::read(wait.as_raw_fd(), byte.as_mut_ptr().cast(), 1) };
                if n > 0 {
                    done = true;
                    continue;
                }
                if n == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                    break;
                }
            }
            if !done {
                // SAFETY: resuming output first (a suspended terminal would never drain);
                // saved is a valid termios; TCSAFLUSH drops unread raw input too.
                unsafe {
                    libc::tcflow(tty.as_raw_fd(), libc::TCOON);
                    libc::tcsetattr(tty.as_raw_fd(), libc::TCSAFLUSH, saved)
                };
            }
            exit_now(0)
        }
    }
}
