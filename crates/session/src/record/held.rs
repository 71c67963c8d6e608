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

/// What deciding `event` lets run: its file with its argv, or for a `#!` script the
/// interpreter chain read when it was rated.
fn expected(event: &TraceEvent) -> Option<Expected> {
    let TraceEvent::Exec {
        argv,
        truncated,
        file,
        script,
        cwd_id,
        ..
    } = event
    else {
        return None;
    };
    Some(match script {
        Some(script) => Expected {
            argv: script.argv.clone(),
            truncated: *truncated,
            file: script.file.as_ref().map(|f| f.identity),
            cwd: *cwd_id,
        },
        None => Expected {
            // An empty argv: the kernel gives the program an empty argv[0].
            argv: if argv.is_empty() {
                vec![Vec::new()]
            } else {
                argv.clone()
            },
            truncated: *truncated,
            file: file.as_ref().map(|f| f.identity),
            cwd: *cwd_id,
        },
    })
}

/// What to do when the program that started is not what was decided: record it
/// (it has been killed already).
fn on_mismatch(shared: &Arc<Shared>, request: Option<u64>) -> impl FnOnce(String) + Send + 'static {
    let shared = Arc::clone(shared);
    move |why: String| {
        let what = match request {
            Some(id) => format!("killed an approved exec (request {id}): {why}"),
            None => format!("killed an exec that changed after it was rated: {why}"),
        };
        crate::diag::warning(format_args!("{what}"));
        if let Err(e) = shared.writer.event(
            Event::new(APPROVAL)
                .with("event", "mismatch")
                .with("request", request)
                .with("reason", why)
                .with("action", "killed"),
        ) {
            shared.fail("events.jsonl", e);
        }
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
        Screened::Pass(event) => {
            // Rated below the threshold, it runs at once; but what runs must be what
            // was rated (another thread could swap the path or argv in between).
            let expected = expected(&event);
            let verdict = lock(log).record(shared, event);
            match (verdict, expected) {
                (Verdict::Continue, Some(expected)) => Verdict::Defer(
                    Deferred::new(|| Verdict::Continue)
                        .verified(expected, on_mismatch(shared, None)),
                ),
                (verdict, _) => verdict,
            }
        }
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
            let expected = expected(&held.event);
            let report = on_mismatch(shared, held.id());
            let shared = Arc::clone(shared);
            let gate = Arc::clone(gate);
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
