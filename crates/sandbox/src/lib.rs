//! Linux enforcement of a `vg-policy` sandbox: namespaces, the root filesystem,
//! Landlock, seccomp, capabilities and the PID-1 init.
//!
//! Flow: [`spawn`] (supervisor side, `spawn.rs`) prepares and clones into fresh
//! namespaces; the child (`init.rs`) builds the root filesystem (`rootfs.rs`), drops
//! privileges (`caps.rs`), restricts itself (`landlock.rs`, `seccomp.rs`), forks the
//! command and stays as its init. All raw system calls are in `sys/`, the only module
//! allowed `unsafe` code (the compiler enforces it: `deny` here, `allow` on `sys`).

#![deny(unsafe_code)]

mod caps;
pub mod cgroup;
pub mod engine_init;
pub mod engine_net;
pub mod error;
pub mod exectrace;
pub mod fdpass;
pub mod gvisor_launch;
pub mod gvisor_terminal;
mod idmap;
mod init;
pub mod inside;
pub mod landlock;
pub mod peek;
mod prepared;
pub mod probe;
mod protocol;
mod rootfs;
pub mod runtime;
pub mod seccomp;
pub mod signals;
mod spawn;
pub mod spawner;
mod spec;
#[allow(unsafe_code)]
mod sys;
pub mod terminal;
pub mod trace;
mod zygote;

pub use error::{SandboxError, SetupError};
pub use spawn::{
    ExecTrace, Killer, LimitHit, Outcome, Sandbox, Stopper, namespace_hint, spawn, spawn_in,
};
pub use spec::{
    EXIT_CANNOT_EXECUTE, EXIT_NOT_FOUND, FORWARDED_SIGNALS, NAMESPACES, SandboxNetwork,
    SandboxSpec, TERMINATE_ALL, Termination, TunConfig, namespaces,
};
pub use trace::{TraceEvent, Verdict};

/// This process's real uid and gid, from the kernel (never a guess: a caller deciding
/// "am I root?" must not be told yes because `/proc` was unreadable).
pub fn real_ids() -> (u32, u32) {
    (sys::getuid(), sys::getgid())
}

/// Whether a process `pid` runs, as the kernel says (`kill` with no signal): one we
/// may not signal runs too. Not from `/proc`, where a `hidepid` mount hides other
/// users' processes.
pub fn process_runs(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    pid > 0 && !matches!(sys::kill(pid, 0), Err(e) if e.raw_os_error() == Some(libc::ESRCH))
}

/// Runs `f` on a thread of its own that reaches files as `uid`:`gid` alone (no
/// supplementary group, no file capability): what root does there on another
/// user's behalf, such as removing a folder that user owns, is checked by the
/// kernel as that user's own (a folder's owner cannot make root remove a file
/// planted in it that they could not remove themselves). An error when the thread
/// cannot take that identity; `f` then never runs.
pub fn as_file_owner<T: Send>(
    uid: u32,
    gid: u32,
    f: impl FnOnce() -> T + Send,
) -> std::io::Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            sys::thread_file_identity(uid, gid)?;
            Ok(f())
        })
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("the thread panicked")))
    })
}

/// A pipe for the sandbox's stdout or stderr, with a large buffer so that a fast
/// writer and the supervisor's relay exchange big chunks instead of 64 KiB ones.
pub fn output_pipe() -> std::io::Result<(std::io::PipeReader, std::io::PipeWriter)> {
    const SIZE: libc::c_int = 1 << 20;
    let (r, w) = std::io::pipe()?;
    // Best effort: over the limit of /proc/sys/fs/pipe-max-size the default stays.
    let _ = sys::set_pipe_size(std::os::fd::AsFd::as_fd(&w), SIZE);
    Ok((r, w))
}
