//! Terminals: pseudo-terminals, termios, window sizes, the guardian that restores a terminal.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use libc::{c_int, pid_t};

use super::{check, close_all_except, exit_now, fork};

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
    let slave = match pty_peer(master.as_fd(), libc::O_RDWR) {
        Ok(slave) => slave,
        // gVisor's kernel (runsc 20221219) has no TIOCGPTPEER: the slave by its
        // number, in the devpts whose `/dev/ptmx` was just opened. Only here, where
        // the master is our own: a descriptor someone else sent is checked with
        // `pty_peer` alone, never looked up by path.
        Err(e) if e.raw_os_error() == Some(libc::ENOTTY) => {
            let number = pty_number(master.as_fd())?;
            let path = std::ffi::CString::new(format!("/dev/pts/{number}"))
                .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            // SAFETY: a live C string and flags.
            let slave = check(unsafe {
                libc::open(
                    path.as_ptr(),
                    libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
                )
            })?;
            // SAFETY: the kernel just returned this descriptor.
            unsafe { OwnedFd::from_raw_fd(slave) }
        }
        Err(e) => return Err(e),
    };
    Ok((master, slave))
}

/// Opens the slave side of the pseudo-terminal whose master is `master`, through the
/// master's own devpts (`TIOCGPTPEER`, no path lookup), with `access` (`O_RDONLY`,
/// `O_RDWR`) and never as a controlling terminal. Fails unless `master` is a pty
/// master (`ENOTTY`), and while its slave is locked (`EIO`).
pub fn pty_peer(master: BorrowedFd<'_>, access: c_int) -> io::Result<OwnedFd> {
    // SAFETY: TIOCGPTPEER takes open flags by value and returns a new descriptor.
    let slave = check(unsafe {
        libc::ioctl(
            master.as_raw_fd(),
            libc::TIOCGPTPEER,
            access | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: the kernel just returned this descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(slave) })
}

/// The number of the pseudo-terminal whose master is `fd` (`TIOCGPTN`, its
/// `/dev/pts/N`); fails for anything but a pty master.
pub fn pty_number(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let mut n: libc::c_uint = 0;
    // SAFETY: TIOCGPTN writes one unsigned int into a live local.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGPTN, &mut n) })?;
    Ok(n)
}

/// The file status flags of `fd` (`F_GETFL`: its access mode, `O_PATH`…).
pub fn status_flags(fd: BorrowedFd<'_>) -> io::Result<c_int> {
    // SAFETY: F_GETFL takes no argument and returns the flags.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })
}

/// The foreground process group of the terminal whose master (or replica) is `fd`
/// (`TIOCGPGRP`).
pub fn foreground_group(fd: BorrowedFd<'_>) -> io::Result<pid_t> {
    let mut group: pid_t = 0;
    // SAFETY: TIOCGPGRP writes one pid_t into a live local.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGPGRP, &mut group) })?;
    Ok(group)
}

/// Makes `group` the foreground process group of the terminal `fd` (`TIOCSPGRP`).
pub fn set_foreground_group(fd: BorrowedFd<'_>, group: pid_t) -> io::Result<()> {
    // SAFETY: TIOCSPGRP reads one pid_t from a live local.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSPGRP, &group) }).map(drop)
}

/// Makes the terminal `fd` this session's controlling terminal (`TIOCSCTTY`),
/// after giving up the one it had (`TIOCNOTTY` on `old`, errors ignored).
pub fn take_controlling_terminal(old: BorrowedFd<'_>, fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: TIOCNOTTY takes no argument.
    let _ = unsafe { libc::ioctl(old.as_raw_fd(), libc::TIOCNOTTY) };
    // SAFETY: TIOCSCTTY with the integer argument 0 (do not steal).
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSCTTY, 0) }).map(drop)
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
/// supervisor is killed with SIGKILL. With `modes_off`, it first writes those bytes to
/// that terminal (the sequences turning off what a sandboxed program switched on).
/// Returns the guardian's pid.
///
/// # Safety
///
/// The process must have one thread: the guardian is forked and allocates.
pub unsafe fn spawn_terminal_guardian(
    tty: BorrowedFd<'_>,
    saved: &libc::termios,
    wait: OwnedFd,
    modes_off: Option<(BorrowedFd<'_>, &[u8])>,
) -> io::Result<pid_t> {
    // SAFETY: our caller guarantees a single thread (see # Safety).
    match unsafe { fork() }? {
        Some(pid) => Ok(pid),
        None => {
            let keep: Vec<i32> = [tty.as_raw_fd(), wait.as_raw_fd()]
                .into_iter()
                .chain(modes_off.map(|(out, _)| out.as_raw_fd()))
                .collect();
            // SAFETY: the guardian never returns from this function (it ends in
            // exit_now), so nothing that owned a descriptor it closes is used again.
            unsafe { close_all_except(&keep) };
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
                // SAFETY: resuming output first (a suspended terminal would never drain,
                // and the modes' reset could not be written); TCSAFLUSH below drops
                // unread raw input too.
                unsafe { libc::tcflow(tty.as_raw_fd(), libc::TCOON) };
                if let Some((out, bytes)) = modes_off {
                    write_all_raw(out, bytes);
                }
                // SAFETY: saved is a valid termios.
                unsafe { libc::tcsetattr(tty.as_raw_fd(), libc::TCSAFLUSH, saved) };
            }
            exit_now(0)
        }
    }
}

/// Writes all of `bytes` to `fd`, giving up at the first error other than EINTR: for
/// the guardian, which has no one left to report to.
fn write_all_raw(fd: BorrowedFd<'_>, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: writing from a live buffer of `bytes.len()` bytes.
        let n = unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
        match usize::try_from(n) {
            Ok(0) => return,
            Ok(n) => bytes = &bytes[n.min(bytes.len())..],
            Err(_) if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}
