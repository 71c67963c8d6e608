//! A session's records as the page shows them: `commands.log` through
//! `vg_records::CommandLogLine`, `events.jsonl` as its JSON objects, and the
//! integrity check of `logs verify` (the chain, then the ledger's word).

use std::path::Path;

use serde::Serialize;
use serde_json::Value;
use vg_records::writer::CommandExit;
use vg_records::{CommandLogLine, ExecLine, VerifyReport, ledger};

/// One exec with its exit, when known.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Exec {
    pub pid: u32,
    pub ppid: u32,
    pub argv: Vec<String>,
    /// The argv quoted for a shell, as `commands.log` has it.
    pub command: String,
    pub cwd: String,
    pub exe: Option<String>,
    /// The file `exe` reached through a symlink, by its own path, quoted for a shell.
    pub ran: Option<String>,
    /// What the kernel started first (a `#!` script's last interpreter, or a
    /// program's loader that is not the system's), quoted for a shell.
    pub interp: Option<String>,
    /// `interp`'s own file when a link made it another, quoted for a shell.
    pub interp_ran: Option<String>,
    /// RFC 3339, UTC.
    pub time: String,
    pub exit: Option<Exit>,
    /// `args,bytes` of the full argv when the line keeps only part of it.
    pub truncated: Option<String>,
}

/// How an exec ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "lowercase")]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// Refused by the approval gate (errno): it never ran.
    Denied(i32),
}

impl From<CommandExit> for Exit {
    fn from(e: CommandExit) -> Self {
        match e {
            CommandExit::Code(c) => Exit::Code(c),
            CommandExit::Signal(s) => Exit::Signal(s),
            CommandExit::Denied(d) => Exit::Denied(d),
        }
    }
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl Exec {
    pub fn of(e: &ExecLine) -> Self {
        Self {
            pid: e.pid,
            ppid: e.ppid,
            argv: e.argv.iter().map(|a| lossy(a)).collect(),
            command: e.command.clone(),
            cwd: lossy(&e.cwd),
            exe: e.exe.as_deref().map(lossy),
            ran: e.ran.as_deref().map(vg_records::quote_arg),
            // Quoted as `commands.log` quotes it: control and invisible characters
            // shown escaped, never raw.
            interp: e.interp.as_deref().map(vg_records::quote_arg),
            interp_ran: e.interp_ran.as_deref().map(vg_records::quote_arg),
            time: vg_records::time::format_rfc3339(e.time),
            exit: e.exit.map(Exit::from),
            truncated: e.truncated.map(|t| format!("{},{}", t.args, t.bytes)),
        }
    }
}

/// The execs of `commands.log`'s text, each `exit` line given to the latest exec
/// of its pid (an exec replaces the program, so the exit is the last one's).
/// Lines that do not parse are skipped and counted.
pub fn execs(text: &str) -> (Vec<Exec>, usize) {
    let mut out: Vec<Exec> = Vec::new();
    let mut unreadable = 0;
    for line in text.lines() {
        match CommandLogLine::parse(line) {
            Some(CommandLogLine::Exec(e)) => out.push(Exec::of(&e)),
            Some(CommandLogLine::Exit { pid, exit, .. }) => {
                if let Some(e) = out.iter_mut().rev().find(|e| e.pid == pid) {
                    e.exit = Some(exit.into());
                }
            }
            None => unreadable += 1,
        }
    }
    (out, unreadable)
}

/// The JSON objects of `events.jsonl`'s text; a line that is not one is kept as
/// `{"type":"unreadable","line":…}` so nothing is hidden.
pub fn events(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| match serde_json::from_str::<Value>(l) {
            Ok(v @ Value::Object(_)) => v,
            _ => serde_json::json!({"type": "unreadable", "line": l}),
        })
        .collect()
}

/// The integrity verdict the page shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Integrity {
    pub ok: bool,
    /// Starts with `verified` or `NOT verified`.
    pub message: String,
    pub problems: Vec<String>,
}

/// `logs verify`'s verdict for one session, in words: the chain, then the
/// ledger's word on its final head.
pub fn integrity(root: &Path, dir: &Path, running: bool) -> Integrity {
    let report = match vg_records::verify(dir) {
        Ok(r) => r,
        Err(e) => {
            return Integrity {
                ok: false,
                message: format!("NOT verified: {e}"),
                problems: Vec::new(),
            };
        }
    };
    let ledger = match ledger::check_one(root, dir) {
        Ok(finding) => finding.map(|f| f.to_string()),
        Err(e) => Some(format!("the ledger cannot be read: {e}")),
    };
    judge(&report, ledger, running)
}

/// [`integrity`]'s decision, as a value.
pub fn judge(report: &VerifyReport, ledger: Option<String>, running: bool) -> Integrity {
    let mut problems: Vec<String> = report.problems().iter().map(ToString::to_string).collect();
    match (report, ledger) {
        (VerifyReport::Intact { records }, None) => Integrity {
            ok: true,
            message: format!("verified: intact ({records} records chained)"),
            problems,
        },
        (VerifyReport::Interrupted { records, .. }, None) if running => Integrity {
            ok: true,
            message: format!(
                "verified so far: {records} records chained; still being written, so its last records are not chained yet"
            ),
            problems,
        },
        (VerifyReport::Interrupted { records, .. }, None) => Integrity {
            ok: true,
            message: format!(
                "verified up to where its supervisor stopped ({records} records); the record was never finished"
            ),
            problems,
        },
        (_, ledger) => {
            if let Some(l) = ledger {
                problems.push(format!("ledger: {l}"));
            }
            Integrity {
                ok: false,
                message: "NOT verified: the records no longer match what was recorded (tampered)"
                    .into(),
                problems,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exits_go_to_the_latest_exec_of_their_pid() {
        let log = "\
2025-12-19T10:10:53.100Z exec pid=2 ppid=1 cwd=/w -- sh -c 'ls; exec true'
2025-12-19T10:10:53.200Z exec pid=3 ppid=2 cwd=/w exe=/usr/bin/ls -- ls
2025-12-19T10:10:53.300Z exit pid=3 status=0
2025-12-19T10:10:53.400Z exec pid=2 ppid=1 cwd=/w -- true
2025-12-19T10:10:53.500Z exit pid=2 signal=9
2025-12-19T10:10:53.600Z exec pid=4 ppid=2 cwd=/w denied=1 -- rm -rf /
garbage line
";
        let (execs, unreadable) = execs(log);
        assert_eq!(unreadable, 1);
        assert_eq!(execs.len(), 4);
        assert_eq!(execs[0].argv, ["sh", "-c", "ls; exec true"]);
        assert_eq!(execs[0].exit, None);
        assert_eq!(execs[1].exe.as_deref(), Some("/usr/bin/ls"));
        assert_eq!(execs[1].exit, Some(Exit::Code(0)));
        assert_eq!(execs[2].exit, Some(Exit::Signal(9)));
        assert_eq!(execs[3].exit, Some(Exit::Denied(1)));
        assert_eq!(execs[3].ppid, 2);
        assert_eq!(
            serde_json::to_value(execs[1].exit).unwrap(),
            serde_json::json!({"kind": "code", "value": 0})
        );
    }

    #[test]
    fn events_keep_unreadable_lines_visible() {
        let ev = events("{\"type\":\"network\",\"port\":443}\n\nnot json\n[1]\n");
        assert_eq!(ev.len(), 3);
        assert_eq!(ev[0]["port"], 443);
        assert_eq!(ev[1]["type"], "unreadable");
        assert_eq!(ev[1]["line"], "not json");
        assert_eq!(ev[2]["type"], "unreadable");
    }

    #[test]
    fn the_verdict_follows_logs_verify() {
        let intact = VerifyReport::Intact { records: 7 };
        let j = judge(&intact, None, false);
        assert!(j.ok && j.message.starts_with("verified"), "{j:?}");
        let ledgered = judge(&intact, Some("head differs".into()), false);
        assert!(!ledgered.ok && ledgered.message.starts_with("NOT verified"));
        assert_eq!(ledgered.problems, ["ledger: head differs"]);
        let unfinished = VerifyReport::Interrupted {
            records: 3,
            problems: Vec::new(),
        };
        let j = judge(&unfinished, None, true);
        assert!(j.ok && j.message.starts_with("verified so far"), "{j:?}");
        let tampered = VerifyReport::Tampered {
            records: 3,
            problems: Vec::new(),
        };
        let j = judge(&tampered, None, false);
        assert!(!j.ok && j.message.starts_with("NOT verified"));
    }
}
