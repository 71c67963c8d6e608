//! gVisor's trace points as `commands.log` lines: each exec and exit the sentry
//! reports (`vg_backend::gvisor::trace`), written by the same `CommandsLog` as the
//! native tracer's. What gVisor does not report is said in `events.jsonl`, never
//! left as a silent gap.

use std::collections::VecDeque;
use std::os::unix::ffi::OsStringExt;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use vg_backend::gvisor::trace::GvisorEvent;
use vg_records::{CommandExit, Event};
use vg_sandbox::TraceEvent;

use super::commands::CommandsLog;
use super::{Shared, lock};

/// The event kind for what gVisor's trace points missed.
pub const TRACE_GAP: &str = "trace-gap";

/// How many exits [`GvisorLog`] keeps for a persistent sandbox's host to find.
const RECENT_EXITS: usize = 4096;

/// gVisor's `commands.log` and the exits its trace points reported lately: a
/// persistent sandbox's host writes the `exec` line of each command it starts
/// through `runsc exec` (created without an exec, so no trace point names it) and
/// finds its exact wait status here.
pub(crate) struct GvisorLog {
    pub(super) log: Arc<Mutex<CommandsLog>>,
    /// (pid, wait status), newest last; only changed with `log` locked, so that an
    /// exit is both here and in the log, or in neither, for whoever holds `log`.
    exits: Mutex<VecDeque<(i32, i32)>>,
    arrived: Condvar,
}

impl GvisorLog {
    pub(super) fn new(log: CommandsLog) -> Self {
        Self {
            log: Arc::new(Mutex::new(log)),
            exits: Mutex::new(VecDeque::new()),
            arrived: Condvar::new(),
        }
    }

    fn exits(&self) -> std::sync::MutexGuard<'_, VecDeque<(i32, i32)>> {
        self.exits.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A command the host started as `pid`: its `exec` line (the program as the
    /// command line names it, as for the container's first process), and its `exit`
    /// line at once when gVisor already reported its end.
    pub(super) fn started(
        &self,
        shared: &Shared,
        pid: i32,
        argv: &[String],
        cwd: &std::path::Path,
    ) {
        let mut log = lock(&self.log);
        log.record(
            shared,
            TraceEvent::Exec {
                pid,
                ppid: 0,
                cwd: cwd.to_owned(),
                path: argv.first().cloned().unwrap_or_default().into_bytes(),
                argv: argv.iter().map(|a| a.clone().into_bytes()).collect(),
                truncated: false,
                file: None,
                script: None,
                root: None,
                cwd_id: None,
            },
        );
        let status = self
            .exits()
            .iter()
            .rev()
            .find(|(p, _)| *p == pid)
            .map(|e| e.1);
        if let Some(status) = status {
            log.exited(shared, pid, exit_of(status));
        }
        log.flush(shared);
    }

    /// The wait status gVisor reported for `pid`, waiting up to `wait` for it.
    pub(super) fn status(&self, pid: i32, wait: Duration) -> Option<i32> {
        let end = Instant::now() + wait;
        let mut exits = self.exits();
        loop {
            if let Some(at) = exits.iter().rposition(|(p, _)| *p == pid) {
                return exits.remove(at).map(|e| e.1);
            }
            let left = end.checked_duration_since(Instant::now())?;
            exits = self
                .arrived
                .wait_timeout(exits, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

fn exit_of(status: i32) -> CommandExit {
    if libc::WIFSIGNALED(status) {
        CommandExit::Signal(libc::WTERMSIG(status))
    } else {
        CommandExit::Code(libc::WEXITSTATUS(status))
    }
}

pub(super) fn record(gvisor: &GvisorLog, shared: &Shared, event: GvisorEvent) {
    let log = &gvisor.log;
    match event {
        GvisorEvent::Exec {
            pid,
            ppid,
            argv,
            path,
            cwd,
            ..
        } => {
            lock(log).record(
                shared,
                TraceEvent::Exec {
                    pid,
                    ppid: ppid.unwrap_or(0),
                    cwd,
                    path: path.into_os_string().into_vec(),
                    argv: argv.into_iter().map(OsStringExt::into_vec).collect(),
                    truncated: false,
                    file: None,
                    script: None,
                    root: None,
                    cwd_id: None,
                },
            );
        }
        GvisorEvent::Exit { pid, status, .. } => {
            let mut log = lock(log);
            log.exited(shared, pid, exit_of(status));
            let mut exits = gvisor.exits();
            if exits.len() >= RECENT_EXITS {
                exits.pop_front();
            }
            exits.push_back((pid, status));
            drop(exits);
            drop(log);
            gvisor.arrived.notify_all();
        }
        GvisorEvent::UnreportedExec { pid, ppid } => gap(
            shared,
            Event::new(TRACE_GAP)
                .with("pid", pid)
                .with("ppid", ppid.unwrap_or(0))
                .with(
                    "reason",
                    "gVisor ran a program without reporting it: its arguments, environment or folder are not UTF-8, or too large to send",
                ),
        ),
        GvisorEvent::Dropped(count) => gap(
            shared,
            Event::new(TRACE_GAP)
                .with("dropped", count)
                .with("reason", "gVisor dropped trace points it could not send in time"),
        ),
        GvisorEvent::Undecodable(why) => gap(
            shared,
            Event::new(TRACE_GAP).with("reason", format!("an undecodable trace message: {why}")),
        ),
    }
}

fn gap(shared: &Shared, event: Event) {
    if let Err(e) = shared.writer.event(event) {
        shared.fail("events.jsonl", e);
    }
}
