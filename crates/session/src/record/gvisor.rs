//! gVisor's trace points as `commands.log` lines: each exec and exit the sentry
//! reports (`vg_backend::gvisor::trace`), written by the same `CommandsLog` as the
//! native tracer's. What gVisor does not report is said in `events.jsonl`, never
//! left as a silent gap.

use std::os::unix::ffi::OsStringExt;
use std::sync::{Arc, Mutex};

use vg_backend::gvisor::trace::GvisorEvent;
use vg_records::{CommandExit, Event};
use vg_sandbox::TraceEvent;

use super::commands::CommandsLog;
use super::{Shared, lock};

/// The event kind for what gVisor's trace points missed.
pub const TRACE_GAP: &str = "trace-gap";

pub(super) fn record(log: &Arc<Mutex<CommandsLog>>, shared: &Shared, event: GvisorEvent) {
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
            let exit = if libc::WIFSIGNALED(status) {
                CommandExit::Signal(libc::WTERMSIG(status))
            } else {
                CommandExit::Code(libc::WEXITSTATUS(status))
            };
            lock(log).exited(shared, pid, exit);
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
