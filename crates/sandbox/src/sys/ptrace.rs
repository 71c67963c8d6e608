//! ptrace, for one purpose: stopping an approved exec right after it happens, before
//! the new program runs an instruction, to check it (`trace/verify.rs`).

use std::io;

use libc::{c_int, c_long, pid_t};

use super::check_long;

/// `PTRACE_SEIZE` with `PTRACE_O_TRACEEXEC`: the tracee is not stopped now, and stops
/// at its next successful exec (`PTRACE_EVENT_EXEC`). The calling thread is its tracer.
pub fn ptrace_seize_exec(pid: pid_t) -> io::Result<()> {
    // SAFETY: PTRACE_SEIZE takes a pid and an options word; addr is unused.
    check_long(unsafe {
        libc::ptrace(
            libc::PTRACE_SEIZE,
            pid,
            std::ptr::null_mut::<libc::c_void>(),
            libc::PTRACE_O_TRACEEXEC as c_long,
        )
    })
    .map(drop)
}

/// `PTRACE_DETACH`, delivering `signal` (0: none) as the tracee resumes.
pub fn ptrace_detach(pid: pid_t, signal: c_int) -> io::Result<()> {
    // SAFETY: PTRACE_DETACH takes a pid and a signal number; addr is unused.
    check_long(unsafe {
        libc::ptrace(
            libc::PTRACE_DETACH,
            pid,
            std::ptr::null_mut::<libc::c_void>(),
            signal as c_long,
        )
    })
    .map(drop)
}

/// `PTRACE_INTERRUPT`: stops a seized tracee that is running.
pub fn ptrace_interrupt(pid: pid_t) -> io::Result<()> {
    // SAFETY: PTRACE_INTERRUPT takes only a pid.
    check_long(unsafe {
        libc::ptrace(
            libc::PTRACE_INTERRUPT,
            pid,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_void>(),
        )
    })
    .map(drop)
}
