//! Process descriptors: signals and questions that can never reach a recycled pid.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use libc::{c_int, c_ulong, pid_t};

use super::{check, check_long};

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

const PIDFD_INFO_EXIT: u64 = 8;

/// How the process behind a pidfd ended, as a wait status, once it has been reaped
/// (`PIDFD_INFO_EXIT`, Linux 6.15+): `None` while it runs or is a zombie, and on a
/// kernel without it. Works for any process, not only our children.
pub fn pidfd_exit_status(pidfd: BorrowedFd<'_>) -> io::Result<Option<c_int>> {
    let mut info = PidfdInfo {
        mask: PIDFD_INFO_EXIT,
        ..PidfdInfo::default()
    };
    // SAFETY: info is a pidfd_info of the size encoded in the ioctl number.
    let got = check(unsafe {
        libc::ioctl(
            pidfd.as_raw_fd(),
            PIDFD_GET_INFO,
            &mut info as *mut PidfdInfo,
        )
    });
    match got {
        Ok(_) => Ok((info.mask & PIDFD_INFO_EXIT != 0).then_some(info.exit_code)),
        // A reaped process whose exit was not kept: nothing more to learn.
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `_IOR(0xb7, 0x9, int)`: `NS_GET_TGID_IN_PIDNS` (Linux 6.8+).
const NS_GET_TGID_IN_PIDNS: c_ulong = 0x8004_B709;

/// The thread group id, in the pid namespace `pidns` (an `ns/pid` descriptor), of
/// the task that is `pid` in ours: one ioctl, where reading a pidfd's fdinfo or
/// `/proc/PID/status` costs a procfs file (open, read, close). `ESRCH` when no such
/// task is visible there; `ENOTTY`/`EINVAL` before Linux 6.8.
pub fn pidns_tgid(pidns: BorrowedFd<'_>, pid: pid_t) -> io::Result<i32> {
    let arg = c_ulong::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    // SAFETY: this ioctl takes the pid as a plain integer argument and returns the
    // translated one (or -1); it reads and writes no memory of ours.
    let tgid = check(unsafe { libc::ioctl(pidns.as_raw_fd(), NS_GET_TGID_IN_PIDNS, arg) })?;
    // The kernel reports "not in that namespace" as 0 on some versions.
    if tgid == 0 {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(tgid)
}

/// `_IOR(0xb7, 0x6, int)`: `NS_GET_PID_FROM_PIDNS` (Linux 6.8+).
const NS_GET_PID_FROM_PIDNS: c_ulong = 0x8004_B706;

/// The pid in our pid namespace of the task that is `pid` in `pidns` (an `ns/pid`
/// descriptor of a namespace below ours): one ioctl. `ESRCH` when there is no such
/// task; `ENOTTY`/`EINVAL` before Linux 6.8.
pub fn pidns_host_pid(pidns: BorrowedFd<'_>, pid: i32) -> io::Result<pid_t> {
    let arg = c_ulong::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    // SAFETY: this ioctl takes the pid as a plain integer argument and returns the
    // translated one (or -1); it reads and writes no memory of ours.
    let host = check(unsafe { libc::ioctl(pidns.as_raw_fd(), NS_GET_PID_FROM_PIDNS, arg) })?;
    if host == 0 {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(host)
}
