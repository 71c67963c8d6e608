//! Signal sets, masks and synchronous waits.

use std::io;

use libc::{c_int, pid_t};

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

/// One signal taken by a synchronous wait: its number, and who sent it and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waited {
    pub signal: c_int,
    /// `si_pid`, as this process's pid namespace sees it: 0 for the kernel or a
    /// process outside the namespace, but also whatever a sender put there with
    /// `rt_sigqueueinfo` (`SI_QUEUE`): only [`Waited::code`] tells.
    pub sender: pid_t,
    /// `si_code`: `SI_USER` for `kill`/`pidfd_send_signal`, whose sender the kernel
    /// fills in; negative for senders that chose the fields; positive for the
    /// kernel's own (I/O notifications, a child's end…).
    pub code: c_int,
}

impl Waited {
    fn of(info: &libc::siginfo_t) -> Self {
        Self {
            signal: info.si_signo,
            // SAFETY: si_pid reads the union's first member; for signals with no
            // sender it is 0 (the kernel zeroes the siginfo it makes).
            sender: unsafe { info.si_pid() },
            code: info.si_code,
        }
    }
}

/// Waits for one of the (blocked) signals in `set`; returns its number and sender pid.
pub fn sigwait(set: &libc::sigset_t) -> io::Result<(c_int, pid_t)> {
    sigwait_info(set).map(|w| (w.signal, w.sender))
}

/// Waits for one of the (blocked) signals in `set`; returns it with its sender and
/// how it was sent.
pub fn sigwait_info(set: &libc::sigset_t) -> io::Result<Waited> {
    // SAFETY: info is plain data filled by the kernel.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: set and info are valid for the call.
        let ret = unsafe { libc::sigwaitinfo(set, &mut info) };
        if ret >= 0 {
            return Ok(Waited::of(&info));
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

/// Like [`sigwait`], giving up after `timeout`: `Ok(None)` when no signal came.
pub fn sigtimedwait(
    set: &libc::sigset_t,
    timeout: std::time::Duration,
) -> io::Result<Option<c_int>> {
    sigtimedwait_info(set, timeout).map(|w| w.map(|w| w.signal))
}

/// [`sigtimedwait`], with the signal's sender and how it was sent.
pub fn sigtimedwait_info(
    set: &libc::sigset_t,
    timeout: std::time::Duration,
) -> io::Result<Option<Waited>> {
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: info is plain data filled by the kernel.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: set, info and ts are valid for the call.
        let ret = unsafe { libc::sigtimedwait(set, &mut info, &ts) };
        if ret >= 0 {
            return Ok(Some(Waited::of(&info)));
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EAGAIN) => return Ok(None),
            Some(libc::EINTR) => continue,
            _ => return Err(err),
        }
    }
}

/// Ignores `sig` (a signal this process must survive whoever has it sent).
pub fn ignore_signal(sig: c_int) -> io::Result<()> {
    // SAFETY: SIG_IGN is a valid disposition for any catchable signal.
    if unsafe { libc::signal(sig, libc::SIG_IGN) } == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
