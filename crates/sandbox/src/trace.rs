//! Exec tracing through seccomp user notification.
//!
//! The sandbox's filter sends `execve` and `execveat` to a listener that the
//! supervisor holds, outside the sandbox. For each one we read what the program is
//! about to run (path, argv, cwd, pid, parent) and hand it to a callback, whose
//! [`Verdict`] lets the system call continue or fails it. How each program ended is
//! read from its pidfd once it has been reaped, or, on kernels that cannot tell that
//! (before Linux 6.15), from its `exit_group`, which the filter then sends too (see
//! [`Exits`]). This is the single decision
//! point, outside the sandbox, where an approval gate holds a program before it
//! starts: the traced process waits, blocked in `execve`, until the callback returns.
//!
//! Reading another process's memory is racy by nature (a second thread could change
//! argv after we read it); the record is what the kernel was asked, read at the moment
//! of the call, and the notification is re-validated so a recycled pid is never
//! attributed the wrong program.
//!
//! Two more kinds of notification come on the same listener when the profile asks
//! for them (`vg_seccomp::ProfileOptions`), classified by [`vg_seccomp::notified_call`]:
//! - the path-based file calls (`trace_files`): each path is read while the call
//!   waits, the call is let go, then reported as [`TraceEvent::File`]. This is
//!   observation, not enforcement (see `trace/access.rs`): a call whose path cannot be
//!   read is let go unreported, since the kernel, the view and Landlock decide it
//!   on their own either way;
//! - refusals (`report_refusals`): failed with `EPERM`, as the filter would have, then
//!   reported as [`TraceEvent::Denied`].
//!
//! Anything else that arrives is failed with `EPERM`, never let go: only a refusal
//! can reach the listener that way, and letting it run would escape the filter.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use vg_seccomp::NotifiedCall;

use crate::sys;

mod access;
mod elf;
mod file;
pub mod ran;
mod resolve;
mod verify;

pub use access::FileAccess;
pub use file::{ExecFile, FileIdentity, SandboxRoot, Script};
use resolve::{Base, FileId, Presence};
pub use verify::Expected;

/// The paths of the system's ELF loaders, which an exec line does not name
/// (`trace/elf.rs`); the BPF recorder's list too.
pub fn system_loaders() -> &'static [&'static [u8]] {
    elf::SYSTEM_LOADERS
}

/// Upper bounds that keep a hostile argv from costing unbounded time or memory, set
/// at the kernel's own: one argument is at most 128 KiB (`MAX_ARG_STRLEN`), and argv
/// with the environment at most a quarter of the stack limit, never over 6 MiB — so
/// an exec the kernel would run is always read whole (what is rated is all of it).
const MAX_ARGS: usize = 1 << 20;
const MAX_ARG_BYTES: usize = 128 * 1024;
const MAX_TOTAL_BYTES: usize = 8 * 1024 * 1024;
/// The kernel refuses an exec path this long or longer (`ENAMETOOLONG`).
const PATH_MAX: usize = 4096;

/// One traced event. Pids are as seen inside the sandbox.
// Most events are execs, each moved a few times: boxing the large variant would
// only add an allocation to each.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceEvent {
    Exec {
        pid: i32,
        ppid: i32,
        /// The working directory as seen inside the sandbox.
        cwd: PathBuf,
        /// The file executed, named honestly: the path passed to `execve`, or for
        /// `execveat` the descriptor's file or the path joined to its directory.
        path: Vec<u8>,
        /// The file `path` reached, by its own path inside the sandbox, when that is
        /// not what `path` names (a symlink on the way; see [`ran`]).
        ran: Option<Vec<u8>>,
        argv: Vec<Vec<u8>>,
        /// argv was cut at one of the bounds above.
        truncated: bool,
        /// The file that runs, held open while the event is decided; only when the
        /// tracer was asked to inspect execs (see [`serve`]).
        file: Option<ExecFile>,
        /// When that file is a `#!` script: what the kernel will really start.
        script: Option<Script>,
        /// What the kernel starts first in place of the file's own code, as the file
        /// names it: for a `#!` script, the last interpreter of its chain (both
        /// recorders); for an ELF program whose loader (`PT_INTERP`) is not the
        /// system's as the sandbox found it, that loader (seccomp notification).
        interpreter: Option<Vec<u8>>,
        /// A script's last interpreter's own file, when `interpreter` reaches it
        /// through a link (as [`ran`] for `path`): `interp_ran=`.
        interp_ran: Option<Vec<u8>>,
        /// The sandbox's root directory (with `file`), to look other files up inside.
        root: Option<SandboxRoot>,
        /// The working directory by device and inode (with `file`): what was decided
        /// runs there, or not at all.
        cwd_id: Option<(u64, u64)>,
        /// When the exec happened, where that is earlier than when it is handed on
        /// (the BPF recorder's ring is drained every few milliseconds); `None`: now.
        at: Option<std::time::SystemTime>,
    },
    Exit {
        pid: i32,
        status: ExitStatus,
        /// When the process ended, as for an exec's `at`.
        at: Option<std::time::SystemTime>,
    },
    /// The program a traced exec started is not the file its `Exec` event named:
    /// another thread changed the path between our read and the kernel's. `ran` is
    /// the program that did run, as the kernel names it.
    Mismatch { pid: i32, ran: Vec<u8> },
    /// An exec that could not be read (e.g. the process's memory is unreadable to
    /// the supervisor): it was refused with EPERM rather than run unrecorded.
    Refused { host_pid: u32, reason: String },
    /// A traced file call (the sandbox's `trace_files`) named `path`, reported after
    /// the call was let go: an attempt, whose outcome is not known here (it may
    /// still fail: no such file, or refused by the view or Landlock). One event per
    /// path: a rename is `Remove` of its old name and `Create` of its new one.
    File {
        /// The process's pid inside the sandbox (0 when it cannot be found).
        pid: i32,
        /// The system call, e.g. `"openat"`.
        syscall: &'static str,
        /// Absolute as seen inside the sandbox, normalised lexically (no `.`, `..` or
        /// `//`); symbolic links are not resolved.
        path: PathBuf,
        access: FileAccess,
        /// The program that made the call; see [`TraceEvent::Denied::exe`].
        exe: Option<Vec<u8>>,
        /// The sandbox's root directory, to look `path` up inside: opened through a
        /// process that made a traced call, while its call waited. The sandbox's
        /// init is not dumpable, so an unprivileged supervisor cannot open
        /// `/proc/INIT/root` itself. `None` until one could be opened.
        root: Option<SandboxRoot>,
    },
    /// A system call the seccomp filter refuses (the sandbox's `report_refusals`),
    /// failed with EPERM before this event is reported.
    Denied {
        /// The process's pid inside the sandbox (0 when it cannot be found).
        pid: i32,
        /// The system call's number (x86_64).
        nr: i64,
        /// Its name, or `syscall_<nr>` for a number without one.
        syscall: String,
        /// The program that made the call: the path its process's last traced exec
        /// named; for a process that has not executed anything since its fork, its
        /// nearest ancestor's. `None` when the tracer does not know it.
        exe: Option<Vec<u8>>,
    },
}

/// How a traced program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it (seen only through [`Exits::Pidfd`]: a program killed by a
    /// signal never calls `exit_group`).
    Signal(i32),
}

impl ExitStatus {
    /// From a wait status, as `waitpid` and `PIDFD_INFO_EXIT` report it.
    pub fn from_wait_status(status: i32) -> Self {
        if libc::WIFSIGNALED(status) {
            ExitStatus::Signal(libc::WTERMSIG(status))
        } else {
            ExitStatus::Code(libc::WEXITSTATUS(status))
        }
    }
}

/// How the exits of traced programs reach the supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exits {
    /// The filter sends `exit_group` to the listener (every kernel): each traced
    /// program waits for a second round trip as it exits, and while it waits the
    /// program it runs is compared with the file its exec line named (which a
    /// path changed by another thread or process during the exec would make
    /// differ). Where pidfds keep exit statuses, a program killed by a signal
    /// (which never calls `exit_group`) has its exit read from its pidfd.
    Trap,
    /// Only from each traced process's pidfd once it has been reaped
    /// ([`Exits::pidfd_available`]): no program waits for the supervisor as it
    /// exits; what ran is compared with the exec line only if the same process
    /// executes again.
    Pidfd,
}

impl Exits {
    /// Whether the kernel keeps a reaped process's exit status for the holders of
    /// its pidfds (`PIDFD_INFO_EXIT`, Linux 6.15+).
    pub fn pidfd_available() -> bool {
        crate::probe::kernel_at_least(6, 15)
    }
}

/// When [`serve`]'s `between` hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Between {
    /// A notification was just answered; the next may already wait.
    Answered,
    /// No notification came for [`IDLE`] since the hook last left a backlog.
    Idle,
}

/// How long the tracer waits for the next notification before it calls `between`
/// with [`Between::Idle`]: short, since what is batched is outside the record's
/// chain until then (a supervisor killed meanwhile leaves it unchained, which
/// `logs verify` explains), yet longer than an exec-heavy sandbox leaves between
/// its execs, so that they rarely wait on that work.
pub const IDLE: std::time::Duration = std::time::Duration::from_millis(5);

/// What happens to a traced system call.
#[derive(Debug)]
pub enum Verdict {
    /// Run it as if there were no filter.
    Continue,
    /// Fail it with this errno (e.g. `EPERM` for a refused program). Only `Exec`
    /// events can be refused; an exit always proceeds.
    Deny(i32),
    /// Decide later (an approval gate): the process stays blocked in `execve`
    /// while the tracer goes on serving every other process, and the verdict this
    /// returns, on a thread of its own, is applied then. A `Defer` it returns in
    /// turn counts as `Deny(EPERM)`.
    Defer(Deferred),
}

/// A verdict still to be reached; see [`Verdict::Defer`].
pub struct Deferred {
    decide: Box<dyn FnOnce() -> Verdict + Send>,
    verify: Option<(Expected, verify::OnMismatch)>,
}

impl Deferred {
    pub fn new(decide: impl FnOnce() -> Verdict + Send + 'static) -> Self {
        Self {
            decide: Box::new(decide),
            verify: None,
        }
    }

    /// If the verdict lets the exec go, check that the program that starts is
    /// `expected` (see `trace/verify.rs`); if not, it is killed and `mismatch` is
    /// told why.
    pub fn verified(
        mut self,
        expected: Expected,
        mismatch: impl FnOnce(String) + Send + 'static,
    ) -> Self {
        self.verify = Some((expected, Box::new(mismatch)));
        self
    }
}

impl std::fmt::Debug for Deferred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Deferred")
    }
}

impl PartialEq for Verdict {
    /// Deferred verdicts are never equal: they are not known yet.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Verdict::Continue, Verdict::Continue) => true,
            (Verdict::Deny(a), Verdict::Deny(b)) => a == b,
            _ => false,
        }
    }
}

/// Serves notifications until every sandboxed process is gone.
///
/// `Exit` events are reported only for processes whose `Exec` was reported: a
/// forked subshell that never executes a program is not a command. `exits` must be
/// what the sandbox's filter was built for ([`crate::SandboxSpec::exits`]). With
/// [`Exits::Pidfd`] an exit is reported once its process has been reaped: before the
/// next notification is handled (so that a parent's next exec comes after its
/// child's exit), or within [`IDLE`] in a quiet sandbox. With `inspect`,
/// each `Exec` also carries its file and, for a `#!` script, its interpreter chain
/// (an approval gate rates and checks them; plain recording does not need them).
///
/// `between` runs after each notification was answered (the process let go) and
/// its events reported, with [`Between::Answered`]: work done there costs the traced
/// process no time. It returns whether it left work for a quiet moment (a backlog,
/// e.g. chain entries to batch); if it did, it runs again with [`Between::Idle`]
/// once no notification came for [`IDLE`], and the tracer then waits without limit.
///
/// `File` and `Denied` events are reported after their call was answered, and so are
/// `Exec` events without `inspect` (recorded, not decided: the exec never waits for
/// the callback); the verdict `on_event` returns for them is ignored.
pub fn serve(
    listener: OwnedFd,
    inspect: bool,
    exits: Exits,
    on_event: impl FnMut(TraceEvent) -> Verdict,
    between: impl FnMut(Between) -> bool,
) {
    let _ = serve_with(listener, None, None, inspect, exits, on_event, between);
}

/// [`serve`], with the execs and exits recorded by `recorder` (the BPF recorder,
/// [`crate::Sandbox::exec_recorder`]) rather than sent to the listener, which then
/// brings only file calls and refusals, and tells when the sandbox is gone.
///
/// Its events are handed on as they arrive (the tracer wakes for them), and before
/// each notification, so that an exec comes before the file calls its program
/// makes; and, once every sandboxed process is gone, the last of them (each
/// process's exit is in the ring buffer before its filter is released, which is
/// what ends the listener). Their verdicts are ignored: they have happened.
///
/// With `ended`, the sandbox's init: its exit ends the serving too, as the listener's
/// hang-up does. Init holds the filter as well, and before Linux 6.11 a filter is
/// released only when its process is reaped, so the hang-up would wait for the
/// supervisor's reap of init, which may come after it has waited for this tracer
/// ([`crate::Sandbox::wait_then`]). Init exits last: every other process of the
/// sandbox is gone by then.
///
/// Returns the recorder, drained, for the caller to let go of when it suits it: its
/// ring buffer's unmapping takes about a third of a millisecond, which the record's
/// completion need not wait for.
#[must_use = "dropping the recorder unmaps its ring: do it where it costs nothing"]
pub fn serve_with(
    listener: OwnedFd,
    mut recorder: Option<crate::exectrace::ExecRecorder>,
    ended: Option<crate::Killer>,
    inspect: bool,
    exits: Exits,
    mut on_event: impl FnMut(TraceEvent) -> Verdict,
    mut between: impl FnMut(Between) -> bool,
) -> Option<crate::exectrace::ExecRecorder> {
    // Shared with the threads that answer deferred verdicts; a reply after every
    // sandboxed process is gone fails harmlessly (ENOENT).
    let listener = std::sync::Arc::new(listener);
    let watchers = verify::Watchers::default();
    let fd = listener.as_fd();
    // Best effort: without it (before Linux 6.6) tracing is only slower.
    let _ = sys::notif_sync_wakeup(fd);
    // Each live traced process holds a pidfd here, and reading an exec opens a few
    // more: at the usual soft limit of 1,024 a build running 1,000 processes at once
    // would have its execs refused for want of a descriptor. The sandbox was cloned
    // before this thread started, so it keeps the limits it was given.
    let _ = sys::raise_open_files_limit();
    let mut ring_poll = RING_POLL_BUSY;
    let mut tracked = Tracked {
        inspect,
        exits: (exits == Exits::Pidfd || Exits::pidfd_available()).then(ExitWatch::new),
        ..Tracked::default()
    };
    let mut backlog = false;
    // No notification for IDLE: the tracer then also wakes for exits. While the
    // sandbox is busy they are collected before each notification instead, which
    // costs no wake-up of its own (and a process is often not reaped yet the
    // instant its pidfd says it exited).
    let mut quiet = false;
    loop {
        let watching = tracked
            .exits
            .as_ref()
            .filter(|_| !tracked.by_host_pid.is_empty());
        let timeout = [
            backlog.then_some(IDLE),
            watching.filter(|_| !quiet).map(|_| IDLE),
            tracked.exits.as_ref().and_then(ExitWatch::retry_in),
            recorder.as_ref().map(|_| ring_poll),
        ]
        .into_iter()
        .flatten()
        .min();
        let also = watching
            .filter(|_| quiet)
            .and_then(|w| w.epoll.as_ref())
            .map(AsFd::as_fd);
        // With the recorder no exec reaches the listener, so no pidfd is watched.
        let also = recorder
            .as_ref()
            .map(crate::exectrace::ExecRecorder::fd)
            .or(also);
        let polled = sys::poll_hup_within(
            fd,
            also,
            ended.as_ref().map(|init| init.pidfd.as_fd()),
            timeout,
        );
        if let Some(recorder) = recorder.as_mut() {
            ring_poll = if recorded(recorder, &mut tracked, &mut on_event) > 0 {
                RING_POLL_BUSY
            } else {
                (ring_poll * 2).min(RING_POLL_IDLE)
            };
        }
        match polled {
            Ok(sys::Polled::Readable) => {}
            Ok(sys::Polled::AlsoReadable) => {
                report_exits(&mut tracked, &mut on_event);
                backlog = between(Between::Answered);
                continue;
            }
            Ok(sys::Polled::TimedOut) => {
                report_exits(&mut tracked, &mut on_event);
                quiet = true;
                backlog = between(Between::Idle);
                continue;
            }
            Ok(sys::Polled::HungUp) | Err(_) => {
                // Every sandboxed process is exiting: the last exits, each once reaped.
                report_last_exits(&mut tracked, &mut on_event);
                if let Some(recorder) = recorder.as_mut() {
                    recorded(recorder, &mut tracked, &mut on_event);
                }
                return recorder;
            }
        }
        quiet = false;
        report_exits(&mut tracked, &mut on_event);
        let Ok(notif) = sys::notif_recv(fd) else {
            // ENOENT: the task died before we received it; go on.
            continue;
        };
        match vg_seccomp::notified_call(i64::from(notif.nr)) {
            NotifiedCall::Exec | NotifiedCall::Exit => {}
            NotifiedCall::File(syscall) => {
                serve_file(fd, &notif, syscall.name, &mut tracked, &mut on_event);
                tracked.let_go();
                backlog = between(Between::Answered);
                continue;
            }
            NotifiedCall::Refused => {
                serve_refusal(fd, &notif, &mut tracked, &mut on_event);
                tracked.let_go();
                backlog = between(Between::Answered);
                continue;
            }
        }
        let described = describe(&notif, &mut tracked);
        // Only report what belongs to a live, unchanged notification.
        let event = match described {
            Described::Event(event) => Some(event),
            Described::Fail(errno) => {
                // The kernel would fail it the same way; failing it here also means a
                // file created between our look and the exec cannot run unrecorded.
                let _ = sys::notif_fail(fd, notif.id, errno);
                continue;
            }
            Described::Unrecordable(reason) => {
                // Fail closed: a program that cannot be recorded does not run.
                let _ = sys::notif_fail(fd, notif.id, libc::EPERM);
                on_event(TraceEvent::Refused {
                    host_pid: notif.pid,
                    reason,
                });
                continue;
            }
            Described::Nothing => None,
        };
        match event {
            Some(event @ TraceEvent::Exec { .. }) if !tracked.inspect => {
                // Recorded, not decided: let it go first, as an exit. The kernel
                // accepts the answer only while the call waits, which also tells
                // that what was read belongs to this call.
                if sys::notif_continue(fd, notif.id).is_ok() {
                    on_event(event);
                }
            }
            Some(event @ TraceEvent::Exec { .. }) if sys::notif_id_valid(fd, notif.id) => {
                match on_event(event) {
                    Verdict::Defer(deferred) => {
                        answer_later(&listener, &watchers, notif.id, notif.pid, deferred);
                    }
                    verdict => answer(fd, notif.id, verdict),
                }
            }
            Some(event @ TraceEvent::Exit { .. }) => {
                // Nothing to decide about an exit: let the process go first, so
                // that recording it costs the sandbox no time. The kernel accepts
                // the answer only while the call waits, which also tells that what
                // was looked up belongs to this call (no second check needed).
                if sys::notif_continue(fd, notif.id).is_ok() {
                    on_event(event);
                }
            }
            _ => {
                let _ = sys::notif_continue(fd, notif.id);
            }
        }
        tracked.let_go();
        for found in std::mem::take(&mut tracked.found) {
            on_event(found);
        }
        backlog = between(Between::Answered);
    }
}

/// Hands on what the BPF recorder saw, keeping each exec's path to name the
/// program behind a file call or a refusal ([`Tracked::live_exe`]).
fn recorded(
    recorder: &mut crate::exectrace::ExecRecorder,
    tracked: &mut Tracked,
    on_event: &mut impl FnMut(TraceEvent) -> Verdict,
) -> usize {
    recorder.drain(|decoded| {
        match &decoded.event {
            TraceEvent::Exec { path, .. } => {
                tracked.recorded_exes.insert(decoded.host_pid, path.clone());
            }
            TraceEvent::Exit { .. } => {
                tracked.recorded_exes.remove(&decoded.host_pid);
            }
            _ => {}
        }
        on_event(decoded.event);
    })
}

/// How often the BPF recorder's ring buffer is drained: it wakes the tracer only
/// once a quarter full (`exec.bpf.c`), so the tracer looks every `RING_POLL_BUSY`
/// while events come, backing off to `RING_POLL_IDLE` in a quiet sandbox. This is
/// how long an exec line may wait to be written (it is timed when the exec
/// happened: the program stamps each event), not how long an exec waits.
const RING_POLL_BUSY: std::time::Duration = std::time::Duration::from_millis(5);
const RING_POLL_IDLE: std::time::Duration = std::time::Duration::from_millis(25);

/// A traced file call: its paths and who made it read while it waits, then let
/// go, then reported.
///
/// Who made it (the pid inside, the program) is looked up while the call waits
/// too: once let go, the process may exit before the lookup (a loaded machine
/// delays this thread for milliseconds), which would leave the record with pid 0
/// and no program. The lookups are a map read and an ioctl or two.
fn serve_file(
    fd: std::os::fd::BorrowedFd<'_>,
    notif: &sys::SeccompNotif,
    syscall: &'static str,
    tracked: &mut Tracked,
    on_event: &mut impl FnMut(TraceEvent) -> Verdict,
) {
    let named = libc::pid_t::try_from(notif.pid)
        .map(|task| access::read(task, i64::from(notif.nr), &notif.args))
        .unwrap_or_default();
    // The sandbox's root, once, from the first process that lets us open it (not
    // init, which is not dumpable): opened while the call waits, kept only if it
    // still waited after, so that it is this sandbox's and not a reused pid's.
    let root = (tracked.root.is_none() && !named.is_empty())
        .then(|| std::fs::File::open(format!("/proc/{}/root", notif.pid)).ok())
        .flatten();
    let who = (!named.is_empty()).then(|| {
        let pid = tracked.pid_inside(notif.pid);
        (pid, tracked.exe_of(notif.pid, pid))
    });
    // Let go whatever was read: observation only, the kernel decides the call. The
    // kernel accepts the answer only while the call still waits, which also tells
    // that what was read is this call's (not a dead task's, its pid since reused).
    let waited = sys::notif_continue(fd, notif.id).is_ok();
    let (Some((pid, exe)), true) = (who, waited) else {
        return;
    };
    if let Some(root) = root {
        tracked.root = Some(OwnedFd::from(root));
    }
    let root = tracked.shared_root();
    for access::Named { path, access } in named {
        let _ = on_event(TraceEvent::File {
            pid,
            syscall,
            path: PathBuf::from(std::ffi::OsString::from_vec(path)),
            access,
            exe: exe.clone(),
            root: root.clone(),
        });
    }
}

/// A call the filter refuses: failed with EPERM, then reported. Never let go.
fn serve_refusal(
    fd: std::os::fd::BorrowedFd<'_>,
    notif: &sys::SeccompNotif,
    tracked: &mut Tracked,
    on_event: &mut impl FnMut(TraceEvent) -> Verdict,
) {
    // Who made the call, looked up while it waits: once answered, the process may
    // exit before the lookup (as a program whose call failed often does at once).
    let pid = tracked.pid_inside(notif.pid);
    let exe = tracked.exe_of(notif.pid, pid);
    // Accepted only while the call waits: otherwise the task is gone and the call
    // never happened; it also tells that what was looked up is this task's.
    if sys::notif_fail(fd, notif.id, libc::EPERM).is_err() {
        return;
    }
    let nr = i64::from(notif.nr);
    let syscall = u32::try_from(nr)
        .ok()
        .and_then(vg_seccomp::syscalls::by_number)
        .map_or_else(|| format!("syscall_{nr}"), |s| s.name.to_owned());
    let _ = on_event(TraceEvent::Denied {
        pid,
        nr,
        syscall,
        exe,
    });
}

/// Applies a verdict reached now.
fn answer(fd: std::os::fd::BorrowedFd<'_>, id: u64, verdict: Verdict) {
    let _ = match verdict {
        Verdict::Continue => sys::notif_continue(fd, id),
        Verdict::Deny(errno) => sys::notif_fail(fd, id, errno),
        Verdict::Defer(_) => sys::notif_fail(fd, id, libc::EPERM),
    };
}

/// Reaches a deferred verdict on its own thread and applies it, if the process is
/// still waiting (it may have been killed meanwhile: the id is then invalid).
fn answer_later(
    listener: &std::sync::Arc<OwnedFd>,
    watchers: &verify::Watchers,
    id: u64,
    host_pid: u32,
    deferred: Deferred,
) {
    let held = std::sync::Arc::clone(listener);
    let watchers = watchers.clone();
    let spawned = std::thread::Builder::new()
        .name("vg-held-exec".into())
        .stack_size(128 * 1024)
        .spawn(move || {
            let Deferred { decide, verify } = deferred;
            let verdict = decide();
            let fd = held.as_fd();
            if !sys::notif_id_valid(fd, id) {
                return;
            }
            let (Verdict::Continue, Some((expected, on_mismatch))) = (&verdict, verify) else {
                answer(fd, id, verdict);
                return;
            };
            // A task still watched for an exec that failed: its watcher checks this one.
            let (expected, on_mismatch) =
                match verify::hand_over(&watchers, host_pid, expected, on_mismatch) {
                    Ok(()) => return answer(fd, id, Verdict::Continue),
                    Err(back) => back,
                };
            // Traced from before the exec is let go, so that it stops at the exec;
            // an exec that cannot be watched does not run (fail closed).
            let watch = match verify::watch(host_pid, &watchers) {
                Ok(watch) => watch,
                Err(e) => {
                    answer(fd, id, Verdict::Deny(libc::EPERM));
                    on_mismatch(format!(
                        "the process could not be traced to check the exec ({e}), so it was refused"
                    ));
                    return;
                }
            };
            answer(fd, id, Verdict::Continue);
            verify::confirm(watch, expected, on_mismatch);
        });
    if spawned.is_err() {
        // Fail closed: an exec that cannot be held is not run.
        let _ = sys::notif_fail(listener.as_fd(), id, libc::EAGAIN);
    }
}

/// Processes that executed a program, by host pid: their pid inside the sandbox, and
/// a pidfd that tells whether the entry still describes the same process (a host
/// pid is only reused after its process is gone, and then the pidfd says so).
///
/// Looking things up here and through pidfds instead of `/proc/PID/...` is most of
/// what keeps tracing cheap: the first lookup of a new process's `/proc` entries
/// costs tens of microseconds.
#[derive(Default)]
struct Tracked {
    by_host_pid: HashMap<u32, Entry>,
    /// With the BPF recorder: the path of each live process's last exec, by host
    /// pid (its exit, which comes before its pid can be reused, removes it).
    recorded_exes: HashMap<u32, Vec<u8>>,
    /// Mismatches found, reported after the notification at hand.
    found: Vec<TraceEvent>,
    /// Entries of processes that exited, dropped (their pidfds closed) once the
    /// notification at hand is answered.
    retired: Vec<Entry>,
    /// Descriptors opened to read an exec and no longer needed, closed likewise.
    closing: Vec<OwnedFd>,
    /// Descriptors kept to read executed files, and the system's loaders as the
    /// sandbox had them at its first exec (see [`file::Kept`]).
    kept: file::Kept,
    /// Size at which to drop entries of processes that died without calling exit
    /// (killed by a signal).
    sweep_at: usize,
    /// The sandbox's root directory, to check that an exec's path exists. Every
    /// sandboxed process has the same root: none can chroot or pivot_root.
    root: Option<OwnedFd>,
    /// The sandbox's pid namespace (`ns/pid` of the first process seen: none can
    /// make another, seccomp refuses `CLONE_NEWPID`), opened once: one ioctl on it
    /// turns a host pid into the pid inside (Linux 6.8+).
    pidns: PidNs,
    /// Our own `/proc/self/fdinfo`, opened once: reading a pidfd's entry from it is
    /// how a process's pid inside the sandbox is found where that ioctl is missing.
    fdinfo: Option<OwnedFd>,
    /// Whether `Exec` events carry their file and script (see [`serve`]).
    inspect: bool,
    /// `root`, shared with the events that carry it.
    shared_root: Option<SandboxRoot>,
    /// The host pid of the sandbox's init, where the search for a process's program
    /// stops (see [`Tracked::exe_of`]); looked up once.
    init_host: Option<u32>,
    /// Where exits are read from pidfds: how they are found.
    exits: Option<ExitWatch>,
    /// Host pids of processes whose pidfds join `exits`' set once the notification
    /// at hand is answered.
    to_watch: Vec<u32>,
}

/// Exits read from tracked processes' pidfds ([`Exits::Pidfd`]).
struct ExitWatch {
    /// The pidfds of tracked processes, each known by its host pid: readable once
    /// its process exited. `None` if the set could not be made; the exits are then
    /// found by the sweep in [`Tracked::insert`] and at the end.
    epoll: Option<sys::Epoll>,
    /// Reused for the tokens of readable pidfds.
    ready: Vec<u64>,
    /// Host pids of processes that exited and were not reaped yet (the kernel keeps
    /// an exit status for pidfds only from then): asked again after `retry`.
    unreaped: Vec<u32>,
    /// Grows while no unreaped process is reaped, so that a parent that never
    /// reaps its child does not keep the tracer awake.
    retry: std::time::Duration,
    /// When the unreaped are next asked about, if there are more than
    /// [`ExitWatch::ASKED_EACH_TIME`]: a sandbox full of zombies must not cost each
    /// exec one question per zombie.
    retry_at: std::time::Instant,
}

impl ExitWatch {
    const FIRST_RETRY: std::time::Duration = std::time::Duration::from_millis(1);
    const LAST_RETRY: std::time::Duration = std::time::Duration::from_secs(1);
    const ASKED_EACH_TIME: usize = 64;

    fn new() -> Self {
        Self {
            epoll: sys::Epoll::new().ok(),
            ready: Vec::new(),
            unreaped: Vec::new(),
            retry: Self::FIRST_RETRY,
            retry_at: std::time::Instant::now(),
        }
    }

    /// When to look again at processes not reaped yet.
    fn retry_in(&self) -> Option<std::time::Duration> {
        (!self.unreaped.is_empty()).then(|| {
            self.retry_at
                .saturating_duration_since(std::time::Instant::now())
        })
    }
}

/// Reports the exits of tracked processes that have been reaped since the last
/// call ([`Exits::Pidfd`]). Their pidfds are closed once the notification at hand
/// is answered.
fn report_exits(tracked: &mut Tracked, on_event: &mut impl FnMut(TraceEvent) -> Verdict) {
    // Out of `tracked` while its entries are looked up and removed.
    let Some(mut watch) = tracked.exits.take() else {
        return;
    };
    // The newest unreaped are asked about every time: a parent that just reaped its
    // child is about to start the next program, whose exec line must come after
    // that exit. The rest (zombies left by parents that do not reap) are asked about
    // when their time comes.
    let now = std::time::Instant::now();
    let had_none = watch.unreaped.is_empty();
    let all = watch.unreaped.len() <= ExitWatch::ASKED_EACH_TIME || now >= watch.retry_at;
    let mut pids = if all {
        std::mem::take(&mut watch.unreaped)
    } else {
        let newest = watch.unreaped.len() - ExitWatch::ASKED_EACH_TIME;
        watch.unreaped.split_off(newest)
    };
    let waited = pids.len();
    if let Some(epoll) = watch.epoll.as_mut() {
        watch.ready.clear();
        let _ = epoll.ready(&mut watch.ready);
        pids.extend(watch.ready.iter().filter_map(|t| u32::try_from(*t).ok()));
    }
    let mut progress = false;
    for (i, host_pid) in pids.into_iter().enumerate() {
        let Some(entry) = tracked.by_host_pid.get(&host_pid) else {
            continue;
        };
        if i >= waited
            && let Some(epoll) = &watch.epoll
        {
            // Level-triggered: it would be readable again at every look.
            let _ = epoll.remove(entry.pidfd.as_fd());
        }
        match entry.ended() {
            Ok(None) => {
                // Exited (its pidfd said so), not reaped yet.
                watch.unreaped.push(host_pid);
                continue;
            }
            Ok(Some(status)) => {
                progress |= i < waited;
                on_event(entry.exit(status));
            }
            // Nothing to learn about this process any more.
            Err(_) => {}
        }
        if let Some(entry) = tracked.by_host_pid.remove(&host_pid) {
            tracked.retired.push(entry);
        }
    }
    if (all && waited > 0) || (had_none && !watch.unreaped.is_empty()) {
        watch.retry = if progress || waited == 0 {
            ExitWatch::FIRST_RETRY
        } else {
            (watch.retry * 2).min(ExitWatch::LAST_RETRY)
        };
        watch.retry_at = now + watch.retry;
    }
    tracked.exits = Some(watch);
}

/// How long the tracer waits, once the listener hangs up, for the last processes'
/// exit statuses: the kernel lets go of a task's filter as it starts to exit, before
/// it is killed (what the command left running is killed as it exits) and reaped.
const LAST_EXITS: std::time::Duration = std::time::Duration::from_secs(2);

/// Reports the exits of every process still tracked, once the listener hung up (every
/// sandboxed process is exiting): the newest first, since a process usually outlives
/// the ones it started (pids inside grow as processes start). Each is waited for
/// until it has been reaped, up to [`LAST_EXITS`] in all.
fn report_last_exits(tracked: &mut Tracked, on_event: &mut impl FnMut(TraceEvent) -> Verdict) {
    if tracked.exits.is_none() {
        return;
    }
    let deadline = std::time::Instant::now() + LAST_EXITS;
    let mut pause = std::time::Duration::from_micros(200);
    let mut waiting: Vec<Entry> = tracked.by_host_pid.drain().map(|(_, e)| e).collect();
    let mut last: Vec<(i32, TraceEvent)> = Vec::new();
    loop {
        waiting.retain(|entry| match entry.ended() {
            Ok(Some(status)) => {
                last.push((entry.ns, entry.exit(status)));
                false
            }
            Ok(None) => true,
            Err(_) => false,
        });
        if waiting.is_empty() || std::time::Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(50));
    }
    last.sort_by_key(|(pid, _)| std::cmp::Reverse(*pid));
    for (_, exit) in last {
        on_event(exit);
    }
}

/// The sandbox's pid namespace, as far as it has been looked for.
#[derive(Default)]
enum PidNs {
    #[default]
    Unknown,
    Open(OwnedFd),
    /// Not to be had (no `/proc` entry, or a kernel without the ioctl): the
    /// process's fdinfo or `/proc` status is read instead.
    Unavailable,
}

/// A traced process: its pid inside, a pidfd, the file its last exec named, and the
/// program it ran when it asked (which it still runs if that exec failed).
struct Entry {
    ns: i32,
    pidfd: OwnedFd,
    file: Option<FileId>,
    before: Option<(u64, u64)>,
    /// A hash of the argv the exec was recorded with: the process shows it once the
    /// exec succeeded, which tells a failed exec from a changed path.
    argv: u64,
    /// The path that exec named (absolute when it could be looked up inside), to name
    /// the program behind a file access or a refusal.
    exe: Vec<u8>,
}

impl Entry {
    /// How its process ended, once it has been reaped (`Ok(None)` before, and where
    /// the kernel keeps no exit status for pidfds); an error when nothing more can be
    /// learned about it.
    fn ended(&self) -> std::io::Result<Option<ExitStatus>> {
        Ok(sys::pidfd_exit_status(self.pidfd.as_fd())?.map(ExitStatus::from_wait_status))
    }

    /// The event of its exit.
    fn exit(&self, status: ExitStatus) -> TraceEvent {
        TraceEvent::Exit {
            pid: self.ns,
            status,
            at: None,
        }
    }
}

fn argv_hash<'a>(argv: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for arg in argv {
        arg.hash(&mut hasher);
    }
    hasher.finish()
}

/// The program a process runs: device and inode, and its change time.
fn running(host_pid: u32) -> Option<((u64, u64), (i64, i64))> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(format!("/proc/{host_pid}/exe")).ok()?;
    Some(((m.dev(), m.ino()), (m.ctime(), m.ctime_nsec())))
}

impl Tracked {
    const FIRST_SWEEP: usize = 256;

    /// Closes what waited for the notification at hand to be answered: closing a
    /// descriptor costs a few microseconds, which the traced process need not wait.
    fn let_go(&mut self) {
        self.retired.clear();
        self.closing.clear();
        if let Some(epoll) = self.exits.as_ref().and_then(|w| w.epoll.as_ref()) {
            for host_pid in self.to_watch.drain(..) {
                if let Some(entry) = self.by_host_pid.get(&host_pid) {
                    let _ = epoll.add(entry.pidfd.as_fd(), u64::from(host_pid));
                }
            }
        }
    }

    /// The sandbox pid of a live tracked process.
    fn ns_pid(&self, host_pid: u32) -> Option<i32> {
        let entry = self.by_host_pid.get(&host_pid)?;
        (!sys::pidfd_exited(entry.pidfd.as_fd())).then_some(entry.ns)
    }

    /// `parent`: the host pid of the process's parent, whose program a forked process
    /// runs until its first exec. `entry.before` is found here.
    fn insert(&mut self, host_pid: u32, parent: u32, mut entry: Entry) {
        // An entry whose process is gone (its exit not reported yet) is another
        // process's that had this host pid: reported, never checked against this one.
        if let Some(old) = self.by_host_pid.get(&host_pid)
            && sys::pidfd_exited(old.pidfd.as_fd())
            && let Some(old) = self.by_host_pid.remove(&host_pid)
        {
            if self.exits.is_some()
                && let Ok(Some(status)) = old.ended()
            {
                self.found.push(old.exit(status));
            }
            self.retired.push(old);
        }
        // The process runs its previous program until this exec: check that one. What
        // it runs now is what that exec named, or (first exec after a fork) its
        // parent's: known without reading /proc, which costs more than the rest.
        entry.before = match self.by_host_pid.remove(&host_pid) {
            Some(old) => {
                self.check(host_pid, &old);
                let before = old.file.as_ref().map(|f| (f.dev, f.ino));
                self.retired.push(old);
                before
            }
            None => self
                .by_host_pid
                .get(&parent)
                .and_then(|p| p.file.as_ref())
                .map(|f| (f.dev, f.ino)),
        };
        if self.exits.is_some() {
            // Watched once the exec is answered (see `let_go`): an exit already
            // past by then is reported all the same (the set is level-triggered).
            self.to_watch.push(host_pid);
        }
        self.by_host_pid.insert(host_pid, entry);
        if self.by_host_pid.len() >= self.sweep_at.max(Self::FIRST_SWEEP) {
            self.sweep();
            self.sweep_at = self.by_host_pid.len() * 2;
        }
    }

    /// Drops the entries of processes that exited unseen: killed by a signal
    /// ([`Exits::Trap`]), or, reaped, when their pidfds could not be watched
    /// ([`Exits::Pidfd`], whose exits are then reported after the notification).
    fn sweep(&mut self) {
        let pidfd = self.exits.is_some();
        let found = &mut self.found;
        self.by_host_pid.retain(|_, e| {
            if !sys::pidfd_exited(e.pidfd.as_fd()) {
                return true;
            }
            if !pidfd {
                return false;
            }
            match e.ended() {
                // A zombie: its exit is reported once its parent reaps it.
                Ok(None) => true,
                Ok(Some(status)) => {
                    found.push(e.exit(status));
                    false
                }
                Err(_) => false,
            }
        });
    }

    /// Forgets an exiting process, returning its sandbox pid if it was tracked.
    fn remove(&mut self, host_pid: u32) -> Option<i32> {
        let ns = self.ns_pid(host_pid);
        if let Some(entry) = self.by_host_pid.remove(&host_pid) {
            if ns.is_some() {
                self.check(host_pid, &entry);
            }
            // Closing a pidfd costs a few microseconds: not while the exit waits.
            self.retired.push(entry);
        }
        ns
    }

    /// Compares the program `host_pid` runs with the file its exec named; a
    /// difference becomes a [`TraceEvent::Mismatch`]. A `#!` script runs as its
    /// interpreter, which is no mismatch.
    fn check(&mut self, host_pid: u32, entry: &Entry) {
        let Some(file) = &entry.file else {
            return;
        };
        let Some((now, changed)) = running(host_pid) else {
            return;
        };
        if now == (file.dev, file.ino) {
            // The named file runs; but one written to (or chmod'ed) since it was
            // read may have run otherwise than its line says: a loader path or a
            // `#!` line rewritten between that read and the kernel's (session-21
            // red team).
            if changed != file.ctime {
                let mut ran =
                    resolve::read_link(&format!("/proc/{host_pid}/exe")).unwrap_or_default();
                ran.extend_from_slice(b" (changed after it was read)");
                self.found.push(TraceEvent::Mismatch { pid: entry.ns, ran });
            }
            return;
        }
        // Or the exec failed and the old program still does.
        if Some(now) == entry.before {
            return;
        }
        // A failed exec leaves the old program, with its old argv: only a process
        // showing the recorded argv made this exec, from another file.
        let shown = std::fs::read(format!("/proc/{host_pid}/cmdline")).unwrap_or_default();
        let shown = shown.strip_suffix(b"\0").unwrap_or(&shown);
        if argv_hash(shown.split(|b| *b == 0)) != entry.argv {
            return;
        }
        if self.is_script(host_pid, &file.path) {
            return;
        }
        let ran = resolve::read_link(&format!("/proc/{host_pid}/exe")).unwrap_or_default();
        self.found.push(TraceEvent::Mismatch { pid: entry.ns, ran });
    }

    fn is_script(&mut self, host_pid: u32, path: &[u8]) -> bool {
        let Some(root) = self.root(libc::pid_t::try_from(host_pid).unwrap_or(0)) else {
            return false;
        };
        // Looked up with O_PATH and read only if the kernel could execute it (a
        // regular file with an execute bit): the path is the sandbox's to choose, and
        // opening a FIFO for reading would block the tracer (and every exec with it),
        // a device could act, reading /proc/kmsg would consume the host's kernel log.
        let Some(file) = ExecFile::open_in(root, b"/", path) else {
            return false;
        };
        let mut head = [0u8; 2];
        use std::os::unix::fs::FileExt;
        file.reader()
            .is_ok_and(|r| matches!(r.read_at(&mut head, 0), Ok(2)) && head == *b"#!")
    }

    /// [`Self::remove`] for the task calling `exit_group`, which may be a thread
    /// other than its process's main one: the process is tracked by its main thread.
    fn remove_exiting(&mut self, host_task: u32) -> Option<i32> {
        if let Some(ns) = self.remove(host_task) {
            return Some(ns);
        }
        if self.by_host_pid.is_empty() {
            return None;
        }
        self.remove(thread_group_of(host_task)?)
    }

    /// The pid inside the sandbox of the thread group `host_pid` belongs to, from
    /// the sandbox's pid namespace; `None` when that way is not available (the
    /// caller reads `/proc` instead) or the task is gone.
    fn inside_pid(&mut self, host_pid: libc::pid_t) -> Option<i32> {
        if let PidNs::Unknown = self.pidns {
            self.pidns = std::fs::File::open(format!("/proc/{host_pid}/ns/pid"))
                .map_or(PidNs::Unavailable, |f| PidNs::Open(OwnedFd::from(f)));
        }
        let PidNs::Open(ns) = &self.pidns else {
            return None;
        };
        match sys::pidns_tgid(ns.as_fd(), host_pid) {
            Ok(pid) => Some(pid),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTTY | libc::EINVAL)) => {
                // Before Linux 6.8: never ask again.
                self.pidns = PidNs::Unavailable;
                None
            }
            Err(_) => None,
        }
    }

    /// The pid inside of an exec'ing process's parent that is not tracked: 0 when it
    /// is not in the sandbox's pid namespace (the sandbox cannot name it either).
    fn parent_inside(&mut self, host_parent: u32) -> Option<i32> {
        let host = libc::pid_t::try_from(host_parent).ok()?;
        if let PidNs::Open(ns) = &self.pidns {
            return match sys::pidns_tgid(ns.as_fd(), host) {
                Ok(pid) => Some(pid),
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTTY | libc::EINVAL)) => {
                    self.pidns = PidNs::Unavailable;
                    ns_pid_of(host_parent)
                }
                Err(_) => None,
            };
        }
        ns_pid_of(host_parent)
    }

    /// The pid inside the sandbox of the process `host_task` belongs to: one ioctl
    /// where the kernel has it, else its `/proc` status; 0 when neither tells.
    fn pid_inside(&mut self, host_task: u32) -> i32 {
        let Ok(host_task) = libc::pid_t::try_from(host_task) else {
            return 0;
        };
        self.inside_pid(host_task)
            .or_else(|| {
                let status = std::fs::read_to_string(format!("/proc/{host_task}/status")).ok()?;
                innermost(&status, "NStgid:")
            })
            .unwrap_or(0)
    }

    /// The path named by the last traced exec of the process `host_task` (a task of
    /// it, whose pid inside is `inside`) belongs to; for a process that has not
    /// executed anything since its fork, its nearest traced ancestor's (what it
    /// runs). A map lookup for a process that executed something (the usual case);
    /// one ioctl more for a thread other than the main one, and a pidfd per
    /// generation for a forked child (Linux 6.13+).
    fn exe_of(&mut self, host_task: u32, inside: i32) -> Option<Vec<u8>> {
        if let Some(exe) = self.live_exe(host_task) {
            return Some(exe);
        }
        let mut host = host_task;
        if let PidNs::Open(ns) = &self.pidns {
            if inside > 0
                && let Ok(tgid) = sys::pidns_host_pid(ns.as_fd(), inside)
                && let Ok(tgid) = u32::try_from(tgid)
                && tgid != host_task
            {
                if let Some(exe) = self.live_exe(tgid) {
                    return Some(exe);
                }
                host = tgid;
            }
            if self.init_host.is_none() {
                self.init_host = sys::pidns_host_pid(ns.as_fd(), 1)
                    .ok()
                    .and_then(|p| u32::try_from(p).ok());
            }
        }
        // A forked process runs its parent's program until it executes one.
        const MAX_GENERATIONS: usize = 8;
        for _ in 0..MAX_GENERATIONS {
            let task = libc::pid_t::try_from(host).ok()?;
            let pidfd = sys::pidfd_open(task).ok()?;
            let parent = sys::pidfd_parent(pidfd.as_fd()).ok()?;
            if parent == 0 || Some(parent) == self.init_host || parent == host {
                return None;
            }
            if let Some(exe) = self.live_exe(parent) {
                return Some(exe);
            }
            host = parent;
        }
        None
    }

    /// The exec path of a tracked process that is still the one tracked.
    fn live_exe(&self, host_pid: u32) -> Option<Vec<u8>> {
        if let Some(exe) = self.recorded_exes.get(&host_pid) {
            return Some(exe.clone());
        }
        let entry = self.by_host_pid.get(&host_pid)?;
        (!sys::pidfd_exited(entry.pidfd.as_fd())).then(|| entry.exe.clone())
    }

    /// [`Tracked::root`] (once opened), shared with the events that carry it.
    fn shared_root(&mut self) -> Option<SandboxRoot> {
        if self.shared_root.is_none() {
            self.shared_root = self
                .root
                .as_ref()
                .and_then(|r| r.try_clone().ok())
                .map(|fd| SandboxRoot(std::sync::Arc::new(fd)));
        }
        self.shared_root.clone()
    }

    fn root(&mut self, host_pid: libc::pid_t) -> Option<std::os::fd::BorrowedFd<'_>> {
        if self.root.is_none() {
            self.root = std::fs::File::open(format!("/proc/{host_pid}/root"))
                .ok()
                .map(OwnedFd::from);
        }
        self.root.as_ref().map(AsFd::as_fd)
    }
}

/// What a notification turned out to be.
#[allow(clippy::large_enum_variant)]
enum Described {
    Event(TraceEvent),
    /// An exec the kernel would fail with this errno without running anything: a
    /// path that does not exist (a PATH probe), or one too long.
    Fail(i32),
    /// An exec that cannot be read, so cannot be recorded.
    Unrecordable(String),
    /// Nothing to report (the exit of a process that never executed anything).
    Nothing,
}

fn describe(n: &sys::SeccompNotif, tracked: &mut Tracked) -> Described {
    match i64::from(n.nr) {
        libc::SYS_exit_group => match tracked.remove_exiting(n.pid) {
            Some(pid) => Described::Event(TraceEvent::Exit {
                pid,
                status: ExitStatus::Code(i32::try_from(n.args[0] & 0xff).unwrap_or(0)),
                at: None,
            }),
            None => Described::Nothing,
        },
        libc::SYS_execve | libc::SYS_execveat => match describe_exec(n, tracked) {
            Ok(Some(event)) => Described::Event(event),
            Ok(None) => Described::Fail(libc::ENOENT),
            Err(Unrecordable::TooLong) => Described::Fail(libc::ENAMETOOLONG),
            Err(Unrecordable::Reason(reason)) => Described::Unrecordable(reason),
        },
        _ => Described::Nothing,
    }
}

/// Why an exec is not described.
enum Unrecordable {
    /// The path is longer than the kernel accepts.
    TooLong,
    Reason(String),
}

impl From<&str> for Unrecordable {
    fn from(reason: &str) -> Self {
        Unrecordable::Reason(reason.to_owned())
    }
}

/// Reads an exec about to happen; `Ok(None)` when its path does not exist.
fn describe_exec(
    n: &sys::SeccompNotif,
    tracked: &mut Tracked,
) -> Result<Option<TraceEvent>, Unrecordable> {
    let host_pid = libc::pid_t::try_from(n.pid).map_err(|_| "pid out of range")?;
    if tracked.kept.loaders.is_none() {
        // The sandbox's first exec: nothing of its own has run yet.
        let loaders = tracked.root(host_pid).map(file::SystemLoaders::new);
        tracked.kept.loaders = loaders;
    }
    let (base, path_ptr, argv_ptr, empty_path_ok) = if i64::from(n.nr) == libc::SYS_execve {
        (Base::Cwd, n.args[0], n.args[1], false)
    } else {
        let dirfd = i32::try_from(n.args[0] as i64).unwrap_or(libc::AT_FDCWD);
        let flags = i32::try_from(n.args[4] as i64).unwrap_or(0);
        let base = if dirfd == libc::AT_FDCWD {
            Base::Cwd
        } else {
            Base::Fd(dirfd)
        };
        (base, n.args[1], n.args[2], flags & libc::AT_EMPTY_PATH != 0)
    };
    let (path, too_long) = read_cstring(host_pid, path_ptr, PATH_MAX)
        .ok_or("cannot read the path from the process's memory")?;
    if too_long {
        return Err(Unrecordable::TooLong);
    }
    let mut looked_up =
        resolve::lookup(host_pid, tracked.root(host_pid), base, &path, empty_path_ok);
    match looked_up.presence {
        Presence::Missing => return Ok(None),
        Presence::ThroughProcLink => {
            return Err(
                "its path goes through a /proc link whose file cannot be named (run the file by its path, or with execveat(fd, \"\", AT_EMPTY_PATH))".into(),
            );
        }
        Presence::NoDescriptor => return Err(OUT_OF_DESCRIPTORS.into()),
        Presence::Unnamed => {
            return Err(
                "it executes an open descriptor whose file cannot be named from outside (the supervisor cannot read the process's descriptors)".into(),
            );
        }
        Presence::NoBase => {
            return Err(
                "its path is relative to a directory that cannot be named from the sandbox's root (deeper than PATH_MAX, removed, or below a folder Vectra Guard may not search), so what it starts cannot be read (run it by its absolute path)".into(),
            );
        }
        Presence::Present => {}
    }
    // An exec from a thread other than the main one: once it succeeds, the kernel
    // gives the thread its process's pid, so the exec (and the exit to come) belong to
    // the process, by its thread group id.
    let who = identify(host_pid, tracked)?;
    let (pid, parent) = (who.pid, who.parent);
    let ppid = tracked
        .ns_pid(parent)
        .or_else(|| tracked.parent_inside(parent))
        .unwrap_or(0);
    let (argv, truncated) = read_argv(host_pid, argv_ptr, (path_ptr, &path));
    // The kernel names the directory from the sandbox's own root (the supervisor's
    // root is not above it), so this is the path as seen inside.
    let cwd = resolve::read_link(&format!("/proc/{host_pid}/cwd")).unwrap_or_default();
    // The file the lookup reached, by its own path (named from the sandbox's root,
    // as the cwd above), when the path as given names another.
    // A file with no name to read (deeper than PATH_MAX from the root, which a
    // link can reach from a short path) could be re-pointed unseen: refused, as a
    // path that cannot be named is (session-23 red team).
    let ran = match &looked_up.opened {
        Some(fd) => match resolve::read_link(&format!("/proc/self/fd/{}", fd.as_raw_fd())) {
            Some(reached) => ran::other_file(&cwd, &looked_up.exe, &reached),
            None => {
                return Err(
                    "the file its path reaches has no name that fits in PATH_MAX from the sandbox's root: run it from a shallower folder".into(),
                );
            }
        },
        None => None,
    };
    let (file, script, root) = if tracked.inspect {
        let file = looked_up.opened.take().and_then(ExecFile::from_fd);
        // The kernel names the script to its interpreter as it names the exec: the
        // path as passed, or through its directory descriptor (`/dev/fd/N[/PATH]`).
        let kernel_name = match base {
            Base::Fd(fd) if path.is_empty() => format!("/dev/fd/{fd}").into_bytes(),
            Base::Fd(fd) if !path.starts_with(b"/") => {
                let mut name = format!("/dev/fd/{fd}/").into_bytes();
                name.extend_from_slice(&path);
                name
            }
            _ => path.clone(),
        };
        let script = match (&file, tracked.root(host_pid)) {
            (Some(file), Some(root)) => file::script_of(root, &cwd, &kernel_name, &argv, file),
            _ => None,
        };
        let _ = tracked.root(host_pid);
        (file, script, tracked.shared_root())
    } else {
        (None, None, None)
    };
    // What a `#!` script really starts is recorded with it: a payload run as a
    // script's interpreter (`#!/tmp/x`) is named, not hidden behind the script.
    // (With an approval gate too: its chain above is what it rates, and what runs is
    // checked against it at the exec; this is what the record names, read the same
    // way as without a gate.)
    let opened = match (&file, &looked_up.opened) {
        (Some(file), _) => Some(file.descriptor()),
        (None, opened) => opened.as_ref().map(AsFd::as_fd),
    };
    let started = match opened {
        Some(opened) => {
            let mut read = Vec::new();
            let mut kept = std::mem::take(&mut tracked.kept);
            let root = tracked.root(host_pid);
            let found = file::interpreter_of(host_pid, root, opened, &mut kept, &mut read);
            tracked.kept = kept;
            // Closed once the exec was let go, not while it waits.
            tracked.closing.extend(read);
            match found {
                Ok(found) => found,
                // Failed with ENOENT, as the kernel would, run by no one.
                Err(file::Unread::Missing) => return Ok(None),
                Err(unread) => return Err(unread.reason().into()),
            }
        }
        None => None,
    };
    let (interpreter, interp_ran) = match started {
        Some(file::Started { name, reached }) => {
            let other = reached.and_then(|r| ran::other_file(&cwd, &name, &r));
            (Some(name), other)
        }
        None => (None, None),
    };
    let cwd_id = tracked
        .inspect
        .then(|| file::linked_id(host_pid, "cwd"))
        .flatten();
    if let Some(opened) = looked_up.opened.take() {
        tracked.closing.push(opened);
    }
    if let Some(pidfd) = who.pidfd {
        let hash = if argv.is_empty() {
            argv_hash([looked_up.exe.as_slice()])
        } else {
            argv_hash(argv.iter().map(Vec::as_slice))
        };
        let exe = looked_up
            .file
            .as_ref()
            .map_or_else(|| looked_up.exe.clone(), |f| f.path.clone());
        let entry = Entry {
            ns: pid,
            pidfd,
            file: looked_up.file,
            before: None,
            argv: hash,
            exe,
        };
        tracked.insert(who.host_tgid, parent, entry);
    }
    Ok(Some(TraceEvent::Exec {
        pid,
        ppid,
        cwd: PathBuf::from(std::ffi::OsString::from_vec(cwd)),
        path: looked_up.exe,
        ran,
        argv,
        truncated,
        file,
        script,
        interpreter,
        interp_ran,
        root,
        cwd_id,
        at: None,
    }))
}

/// Why an exec is refused when the tracer is out of descriptors: each live traced
/// process holds one, and reading an exec opens a few more.
const OUT_OF_DESCRIPTORS: &str = "Vectra Guard's tracer has no file descriptor left to record it (each running process in the sandbox holds one): raise the open-files limit (`ulimit -n`) of the shell that starts vectraguard, or run fewer processes at once";

/// The process of a task that is calling exec.
struct Identity {
    /// Its pid inside the sandbox: the thread group's, which the exec'ing thread
    /// takes once the exec succeeds.
    pid: i32,
    /// The parent's host pid.
    parent: u32,
    /// The thread group's host pid, by which it is tracked.
    host_tgid: u32,
    pidfd: Option<OwnedFd>,
}

/// Who `host_task` is: from a pidfd (fdinfo and `PIDFD_GET_INFO`) where the kernel
/// offers one, else from `/proc` (also for a thread other than the main one, which
/// `pidfd_open` refuses).
fn identify(host_task: libc::pid_t, tracked: &mut Tracked) -> Result<Identity, &'static str> {
    const UNKNOWN: &str = "cannot find the process's pid in the sandbox";
    let host_tgid = u32::try_from(host_task).map_err(|_| UNKNOWN)?;
    let opened = sys::pidfd_open(host_task);
    if let Err(e) = &opened
        && resolve::is_out_of_descriptors(e)
    {
        return Err(OUT_OF_DESCRIPTORS);
    }
    if let Ok(pidfd) = opened
        && let Ok(parent) = sys::pidfd_parent(pidfd.as_fd())
        && let Some(pid) = tracked
            .inside_pid(host_task)
            .or_else(|| pidfd_info_text(&pidfd, tracked).and_then(|info| ns_pid(&info)))
    {
        return Ok(Identity {
            pid,
            parent,
            host_tgid,
            pidfd: Some(pidfd),
        });
    }
    let status = match std::fs::read_to_string(format!("/proc/{host_task}/status")) {
        Ok(status) => status,
        Err(e) if resolve::is_out_of_descriptors(&e) => return Err(OUT_OF_DESCRIPTORS),
        Err(_) => return Err(UNKNOWN),
    };
    let number = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse::<u32>().ok())
    };
    let parent = number("PPid:").ok_or(UNKNOWN)?;
    let host_tgid = number("Tgid:").ok_or(UNKNOWN)?;
    let pid = innermost(&status, "NStgid:").ok_or(UNKNOWN)?;
    let pidfd = libc::pid_t::try_from(host_tgid)
        .ok()
        .and_then(|tgid| sys::pidfd_open(tgid).ok());
    Ok(Identity {
        pid,
        parent,
        host_tgid,
        pidfd,
    })
}

/// The thread group (host pid) of a task that is not its group's leader, or `None`
/// for a leader or a task that is gone. One system call for a leader, the usual case.
fn thread_group_of(host_task: u32) -> Option<u32> {
    let task = libc::pid_t::try_from(host_task).ok()?;
    if sys::pidfd_open(task).is_ok() {
        return None;
    }
    let status = std::fs::read_to_string(format!("/proc/{host_task}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse::<u32>().ok())
        .filter(|&tgid| tgid != host_task)
}

/// The text of our fdinfo entry for `pidfd` (its `NSpid:` line is the process's pid
/// in each pid namespace, innermost last).
fn pidfd_info_text(pidfd: &OwnedFd, tracked: &mut Tracked) -> Option<String> {
    use std::io::Read;
    if tracked.fdinfo.is_none() {
        tracked.fdinfo = std::fs::File::open("/proc/self/fdinfo")
            .ok()
            .map(OwnedFd::from);
    }
    let dir = tracked.fdinfo.as_ref()?;
    let name = std::ffi::CString::new(pidfd.as_raw_fd().to_string()).ok()?;
    let fd = sys::openat(dir.as_fd(), &name, libc::O_RDONLY, 0).ok()?;
    let mut text = String::new();
    std::fs::File::from(fd).read_to_string(&mut text).ok()?;
    Some(text)
}

fn ns_pid_of(host_pid: u32) -> Option<i32> {
    ns_pid(&std::fs::read_to_string(format!("/proc/{host_pid}/status")).ok()?)
}

/// The innermost pid of a task, from the `NSpid:` line of its status file.
fn ns_pid(status: &str) -> Option<i32> {
    innermost(status, "NSpid:")
}

/// The last (innermost pid namespace's) number of a `NSpid:`/`NStgid:` line.
fn innermost(status: &str, key: &str) -> Option<i32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().last())
        .and_then(|v| v.parse().ok())
}

/// Reads a NUL-terminated string, page by page so an unmapped page after the string
/// does not fail the read. Returns the bytes and whether the limit cut it.
fn read_cstring(pid: libc::pid_t, addr: u64, limit: usize) -> Option<(Vec<u8>, bool)> {
    const PAGE: u64 = 4096;
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < limit {
        let chunk = usize::try_from(PAGE - at % PAGE)
            .ok()?
            .min(limit - out.len());
        let mut buf = vec![0u8; chunk];
        let n = sys::read_process_memory(pid, at, &mut buf).ok()?;
        if n == 0 {
            return None;
        }
        if let Some(end) = buf[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&buf[..end]);
            return Some((out, false));
        }
        out.extend_from_slice(&buf[..n]);
        at += n as u64;
    }
    Some((out, true))
}

/// Reads argv; `path` is the exec's path, read already from the address it names:
/// an argument at that address (a shell passes the same string as `argv[0]` for a
/// path it was given) is that string, not read again.
fn read_argv(pid: libc::pid_t, argv_ptr: u64, path: (u64, &[u8])) -> (Vec<Vec<u8>>, bool) {
    const PAGE: u64 = 4096;
    let mut argv = Vec::new();
    let mut total = 0usize;
    if argv_ptr == 0 {
        return (argv, false);
    }
    // The pointer array is read a page at a time (one system call for a usual
    // argv), never past a page boundary, where the next page may be unmapped.
    let mut at = argv_ptr;
    while argv.len() < MAX_ARGS {
        let Ok(room) = usize::try_from((PAGE - at % PAGE).max(8)) else {
            return (argv, true);
        };
        let count = (room / 8).clamp(1, MAX_ARGS - argv.len());
        let mut raw = vec![0u8; count * 8];
        let n = match sys::read_process_memory(pid, at, &mut raw) {
            Ok(n) if n >= 8 => n - n % 8,
            _ => return (argv, true),
        };
        for chunk in raw[..n].chunks_exact(8) {
            let mut ptr = [0u8; 8];
            ptr.copy_from_slice(chunk);
            let p = u64::from_ne_bytes(ptr);
            if p == 0 {
                return (argv, false);
            }
            let limit = MAX_ARG_BYTES.min(MAX_TOTAL_BYTES - total);
            let known = (p == path.0 && path.1.len() < limit).then(|| (path.1.to_vec(), false));
            let Some((arg, cut)) = known.or_else(|| read_cstring(pid, p, limit)) else {
                return (argv, true);
            };
            total += arg.len();
            argv.push(arg);
            if cut || total >= MAX_TOTAL_BYTES || argv.len() >= MAX_ARGS {
                return (argv, true);
            }
        }
        at += n as u64;
    }
    (argv, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn innermost_pid_is_the_last_nspid() {
        assert_eq!(ns_pid("Name:\tsh\nNSpid:\t4242\t7\n"), Some(7));
        assert_eq!(ns_pid("NSpid:\t99\n"), Some(99));
        assert_eq!(ns_pid("Name:\tx\n"), None);
    }

    #[test]
    fn a_task_is_named_by_its_thread_group_in_a_pid_namespace() {
        use std::os::fd::AsFd;
        let ns = std::fs::File::open("/proc/self/ns/pid").unwrap();
        let me = libc::pid_t::try_from(std::process::id()).unwrap();
        assert_eq!(sys::pidns_tgid(ns.as_fd(), me).unwrap(), me);
        // A thread other than the main one: its process's pid, which an exec from
        // it takes.
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            tx.send(our_tid()).unwrap();
            done_rx.recv().unwrap();
        });
        let tid = rx.recv().unwrap();
        assert_ne!(tid, me);
        assert_eq!(sys::pidns_tgid(ns.as_fd(), tid).unwrap(), me);
        // And back: the pid inside (here the same namespace) to ours.
        assert_eq!(sys::pidns_host_pid(ns.as_fd(), me).unwrap(), me);
        assert_eq!(sys::pidns_host_pid(ns.as_fd(), tid).unwrap(), tid);
        done_tx.send(()).unwrap();
        thread.join().unwrap();
        // A pid nobody has.
        let gone = sys::pidns_tgid(ns.as_fd(), libc::pid_t::MAX).unwrap_err();
        assert_eq!(gone.raw_os_error(), Some(libc::ESRCH));
    }

    /// The calling thread's id, from `/proc/thread-self` (no unsafe code outside `sys`).
    fn our_tid() -> libc::pid_t {
        let link = std::fs::read_link("/proc/thread-self").unwrap();
        let name = link.file_name().unwrap().to_str().unwrap();
        name.parse().unwrap()
    }

    #[test]
    fn reads_our_own_argv_like_another_process_would() {
        let pid = libc::pid_t::try_from(std::process::id()).unwrap();
        let args: Vec<std::ffi::CString> = ["prog", "a b", ""]
            .iter()
            .map(|s| std::ffi::CString::new(*s).unwrap())
            .collect();
        let mut ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        let (argv, truncated) = read_argv(pid, ptrs.as_ptr() as u64, (0, b""));
        assert!(!truncated);
        assert_eq!(argv, vec![b"prog".to_vec(), b"a b".to_vec(), Vec::new()]);
        // An argument at the path's address is the path as read (here told
        // otherwise, to see that it is not read again).
        let at = ptrs[1] as u64;
        let (argv, truncated) = read_argv(pid, ptrs.as_ptr() as u64, (at, b"told"));
        assert!(!truncated);
        assert_eq!(argv, vec![b"prog".to_vec(), b"told".to_vec(), Vec::new()]);
    }
}
