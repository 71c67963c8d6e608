//! Seccomp: installing a filter and serving its user-notification listener.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use libc::{c_uint, c_ulong};

use super::{check, check_long, owned};

pub const SECCOMP_FILTER_FLAG_NEW_LISTENER: c_uint = 1 << 3;
/// Once the supervisor has received a notification, only a fatal signal interrupts
/// the waiting task (Linux 5.19): otherwise any signal restarts the system call and
/// a held exec would be asked about again.
pub const SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV: c_uint = 1 << 5;

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
