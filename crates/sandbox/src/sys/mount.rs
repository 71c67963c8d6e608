//! Mounts: the classic `mount(2)` calls and the new mount API (fsopen, open_tree, move_mount, mount_setattr, idmapped mounts).

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use libc::{c_int, c_uint, c_ulong};

use super::{check, check_long, owned};

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
