//! Paths beneath a directory descriptor: `openat2` with resolve restrictions, creating, chowning, stat.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use libc::{c_int, c_uint};

use super::{check, owned};

pub const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
pub const RESOLVE_NO_SYMLINKS: u64 = 0x04;
pub const RESOLVE_BENEATH: u64 = 0x08;
pub const RESOLVE_IN_ROOT: u64 = 0x10;

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

/// Changes the owner of the open file `fd`.
pub fn fchown(fd: BorrowedFd<'_>, uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: fd is open; plain integer arguments.
    check(unsafe { libc::fchown(fd.as_raw_fd(), uid, gid) }).map(drop)
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

/// `fstat` on a descriptor (O_PATH descriptors included).
pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    // SAFETY: stat is plain data filled by the kernel.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open and st is a valid out-pointer.
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st)
}

/// Whether the mount `fd` (any descriptor, `O_PATH` included) is on is read-only.
pub fn on_read_only_mount(fd: BorrowedFd<'_>) -> io::Result<bool> {
    // SAFETY: buf is plain data filled by the kernel.
    let mut buf: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open and buf a valid out-pointer.
    check(unsafe { libc::fstatvfs(fd.as_raw_fd(), &mut buf) })?;
    Ok(buf.f_flag & libc::ST_RDONLY != 0)
}

fn statfs(path: &CStr) -> io::Result<libc::statfs> {
    // SAFETY: buf is plain data filled by the kernel.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: path is a valid C string and buf a valid statfs.
    check(unsafe { libc::statfs(path.as_ptr(), &mut buf) })?;
    Ok(buf)
}

/// Free blocks available to unprivileged users on the filesystem holding `path`.
pub fn statfs_available(path: &CStr) -> io::Result<u64> {
    statfs(path).map(|buf| buf.f_bavail)
}

/// The type (`statfs`'s magic number) of the filesystem holding `path`.
#[cfg(vg_exec_bpf)]
pub fn fs_type(path: &CStr) -> io::Result<i64> {
    statfs(path).map(|buf| buf.f_type)
}
