//! The tracer's side of the approval gate: an exec the gate holds is answered on a
//! thread of its own (`Verdict::Defer`) once decided, and recorded then: as an
//! ordinary `exec` line when approved, as `denied=` when not.

use std::sync::{Arc, Mutex};

use vg_records::Event;
use vg_records::event::kind::APPROVAL;
use vg_sandbox::trace::{Deferred, Expected, TraceEvent, Verdict};

use super::commands::CommandsLog;
use super::{Shared, lock};
use crate::gate::{Gate, Screened};

/// What an approval of `event` lets run.
fn expected(event: &TraceEvent) -> Option<Expected> {
    match event {
        TraceEvent::Exec {
            cwd,
            path,
            argv,
            truncated,
            ..
        } => Some(Expected {
            path: path.clone(),
            cwd: cwd.as_os_str().as_encoded_bytes().to_vec(),
            argv: argv.clone(),
            truncated: *truncated,
        }),
        _ => None,
    }
}

/// Decides one traced event with the gate, recording it as it goes.
pub(super) fn screen(
    gate: &Arc<Gate>,
    log: &Arc<Mutex<CommandsLog>>,
    shared: &Arc<Shared>,
    event: TraceEvent,
) -> Verdict {
    match gate.screen(event) {
        Screened::Pass(event) => lock(log).record(shared, event),
        Screened::Refused(event, reason) => {
            if let Err(e) = shared.writer.event(
                Event::new(APPROVAL)
                    .with("event", "refused")
                    .with("reason", reason),
            ) {
                shared.fail("events.jsonl", e);
            }
            lock(log).denied(shared, event);
            Verdict::Deny(libc::EPERM)
        }
        Screened::Held(held) => {
            let log = Arc::clone(log);
            let shared = Arc::clone(shared);
            let gate = Arc::clone(gate);
            let expected = expected(&held.event);
            let request = held.id();
            let reporter = Arc::clone(&shared);
            let report = move |why: String| {
                crate::diag::warning(format_args!(
                    "killed an approved exec (request {}): {why}",
                    request.unwrap_or(0)
                ));
                if let Err(e) = reporter.writer.event(
                    Event::new(APPROVAL)
                        .with("event", "mismatch")
                        .with("request", request)
                        .with("reason", why)
                        .with("action", "killed"),
                ) {
                    reporter.fail("events.jsonl", e);
                }
            };
            let deferred = Deferred::new(move || {
                let (event, decision) = held.wait();
                if decision.approved() {
                    lock(&log).record(&shared, event)
                } else {
                    gate.denied(&event, &decision.who);
                    lock(&log).denied(&shared, event);
                    Verdict::Deny(libc::EPERM)
                }
            });
            Verdict::Defer(match expected {
                Some(expected) => deferred.verified(expected, report),
                None => deferred,
            })
        }
    }
}
