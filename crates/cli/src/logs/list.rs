//! `logs list`: one line (or JSON object) per session, oldest first.

use std::io::{IsTerminal, Write};
use std::time::SystemTime;

use anyhow::Result;
use serde_json::{Value, json};
use vg_records::layout::parse_session_name;
use vg_records::time::format_rfc3339;
use vg_records::{ListEntry, ListFilter, SessionStore, Status, Summary};

use super::format::{self, Table};
use super::{ListArgs, StatusFilter, explain};

/// Sessions shown on a terminal without `--all` or `--limit`.
pub const TERMINAL_ROWS: usize = 20;
/// Widest NAME and AGENT cells unless `--no-trunc`.
const MAX_LABEL: usize = 24;
/// Terminal width assumed when `$COLUMNS` is not exported.
const DEFAULT_COLUMNS: usize = 120;
/// The COMMAND column is never cut below this.
const MIN_COMMAND: usize = 20;

pub fn list(store: &SessionStore, args: &ListArgs, out: &mut dyn Write) -> Result<i32> {
    let filter = ListFilter {
        agent: args.agent.clone(),
        name: args.name.clone(),
        since: args.since,
        status: match args.status {
            Some(StatusFilter::Is(s)) => Some(s),
            _ => None,
        },
    };
    let mut entries = store.list(&filter).map_err(explain)?;
    if args.status == Some(StatusFilter::Damaged) {
        entries.retain(|e| matches!(e, ListEntry::Damaged { .. }));
    }
    let hidden =
        entries
            .len()
            .saturating_sub(shown(args.limit, args.all, std::io::stdout().is_terminal()));
    // Oldest first: the newest are at the end.
    entries.drain(..hidden);
    let now = SystemTime::now();
    if args.json {
        let array: Vec<Value> = entries.iter().map(entry_json).collect();
        serde_json::to_writer_pretty(&mut *out, &array)?;
        writeln!(out)?;
        return Ok(0);
    }
    if entries.is_empty() {
        writeln!(out, "{}", nothing_found(store, args))?;
        return Ok(0);
    }
    let mut table = Table::new(vec![
        "SESSION",
        "NAME",
        "AGENT",
        "STATUS",
        "EXIT",
        "STARTED (UTC)",
        "DURATION",
        "COMMAND",
    ]);
    for e in &entries {
        table.push(row(e, now, !args.no_trunc));
    }
    if let Some(columns) = fit_width(args.no_trunc) {
        table.fit_last(columns, MIN_COMMAND);
    }
    table.write(out, "")?;
    if hidden > 0 {
        crate::report::note(format_args!(
            "{hidden} older session(s) not shown; `vectraguard logs list --all` lists every one"
        ));
    }
    for e in &entries {
        if let ListEntry::Damaged {
            session_id, reason, ..
        } = e
        {
            crate::report::note(format_args!(
                "{session_id} is damaged ({}); `vectraguard logs verify {session_id}` \
                 checks its files, `vectraguard logs rm {session_id}` removes it",
                format::safe(reason)
            ));
        }
    }
    Ok(0)
}

/// How many of the newest sessions to show: `--limit`, else everything unless
/// the table goes to a terminal, where a long history would scroll away.
fn shown(limit: Option<usize>, all: bool, terminal: bool) -> usize {
    match (all, limit) {
        (true, _) => usize::MAX,
        (false, Some(n)) => n,
        (false, None) if terminal => TERMINAL_ROWS,
        (false, None) => usize::MAX,
    }
}

/// The line printed instead of an empty table.
fn nothing_found(store: &SessionStore, args: &ListArgs) -> String {
    let filtered = args.agent.is_some()
        || args.name.is_some()
        || args.since.is_some()
        || args.status.is_some();
    let root = store.root().display();
    if filtered {
        format!(
            "no sessions under {root} match these filters; `vectraguard logs list` shows them all"
        )
    } else {
        format!(
            "no sessions recorded yet under {root}; `vectraguard sandbox run` records one per run"
        )
    }
}

/// How wide the table may be: the terminal's width when printing to one
/// (`$COLUMNS`, else a common default), no limit otherwise so that piped
/// output keeps whole commands.
fn fit_width(no_trunc: bool) -> Option<usize> {
    if no_trunc {
        return None;
    }
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0);
    match columns {
        Some(c) => Some(c),
        None if std::io::stdout().is_terminal() => Some(DEFAULT_COLUMNS),
        None => None,
    }
}

fn label(value: Option<&str>, cut: bool) -> String {
    let text = format::safe(value.unwrap_or("-")).into_owned();
    if cut {
        format::truncate(&text, MAX_LABEL).into_owned()
    } else {
        text
    }
}

fn row(entry: &ListEntry, now: SystemTime, cut: bool) -> Vec<String> {
    match entry {
        ListEntry::Session(s) => vec![
            s.session_id.clone(),
            label(s.name.as_deref(), cut),
            label(s.agent.as_deref(), cut),
            s.status.to_string(),
            s.exit_code.map_or("-".into(), |c| c.to_string()),
            format::utc_seconds(s.start_time),
            session_duration(s, now).map_or("-".into(), format::duration),
            format::safe(&s.command).into_owned(),
        ],
        ListEntry::Damaged {
            session_id, reason, ..
        } => vec![
            session_id.clone(),
            "-".into(),
            "-".into(),
            "damaged".into(),
            "-".into(),
            parse_session_name(session_id).map_or("-".into(), format::utc_seconds),
            "-".into(),
            format::safe(reason).into_owned(),
        ],
    }
}

/// How long the session ran; for a running one, how long it has run so far.
fn session_duration(s: &Summary, now: SystemTime) -> Option<std::time::Duration> {
    match (s.end_time, s.status) {
        (Some(end), _) => Some(format::elapsed(s.start_time, end)),
        (None, Status::Running) => Some(format::elapsed(s.start_time, now)),
        (None, _) => None,
    }
}

/// One element of `logs list --json`. Every object has every key (null
/// when unknown), so consumers can rely on the shape.
fn entry_json(entry: &ListEntry) -> Value {
    match entry {
        ListEntry::Session(s) => json!({
            "session_id": s.session_id,
            "kind": "session",
            "status": s.status.as_str(),
            "name": s.name,
            "agent": s.agent,
            "origin": s.origin.as_str(),
            "command": s.command,
            "image": s.image,
            "description": s.description,
            "start_time": format_rfc3339(s.start_time),
            "end_time": s.end_time.map(format_rfc3339),
            "duration_ms": s.end_time.map(|end| format::millis(format::elapsed(s.start_time, end))),
            "exit_code": s.exit_code,
            "pid": s.pid,
            "dir": s.dir.display().to_string(),
            "reason": Value::Null,
        }),
        ListEntry::Damaged {
            session_id,
            dir,
            reason,
        } => json!({
            "session_id": session_id,
            "kind": "damaged",
            "status": "damaged",
            "name": Value::Null,
            "agent": Value::Null,
            "origin": Value::Null,
            "command": Value::Null,
            "image": Value::Null,
            "description": Value::Null,
            "start_time": parse_session_name(session_id).map(format_rfc3339),
            "end_time": Value::Null,
            "duration_ms": Value::Null,
            "exit_code": Value::Null,
            "pid": Value::Null,
            "dir": dir.display().to_string(),
            "reason": reason,
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::{Duration, UNIX_EPOCH};

    use vg_records::Origin;

    use super::*;

    fn summary() -> Summary {
        Summary {
            session_id: "session-20251219T101053Z-9af4c3".into(),
            dir: PathBuf::from("/r/logs/session-20251219T101053Z-9af4c3"),
            name: Some("build\x1b[2J".into()),
            agent: None,
            origin: Origin::Cli,
            command: "make -j4".into(),
            argv: vec!["make".into(), "-j4".into()],
            image: None,
            description: None,
            start_time: UNIX_EPOCH + Duration::from_millis(1_766_139_053_123),
            end_time: Some(UNIX_EPOCH + Duration::from_millis(1_766_139_058_000)),
            status: Status::Exited,
            exit_code: Some(2),
            pid: None,
        }
    }

    #[test]
    fn a_terminal_shows_the_newest_twenty_unless_told_otherwise() {
        assert_eq!(shown(None, false, true), TERMINAL_ROWS);
        assert_eq!(shown(None, false, false), usize::MAX);
        assert_eq!(shown(None, true, true), usize::MAX);
        assert_eq!(shown(Some(3), false, true), 3);
        assert_eq!(shown(Some(3), false, false), 3);
    }

    #[test]
    fn rows_are_safe_and_compact() {
        let r = row(&ListEntry::Session(summary()), SystemTime::now(), true);
        assert_eq!(
            r,
            [
                "session-20251219T101053Z-9af4c3",
                "build\\u{1b}[2J",
                "-",
                "exited",
                "2",
                "2025-12-19 10:10:53",
                "4.8s",
                "make -j4"
            ]
        );
        let damaged = ListEntry::Damaged {
            session_id: "session-20251219T101053Z-000000".into(),
            dir: PathBuf::from("/x"),
            reason: "metadata.json is missing".into(),
        };
        let r = row(&damaged, SystemTime::now(), true);
        assert_eq!(r[3], "damaged");
        assert_eq!(r[5], "2025-12-19 10:10:53");
        assert_eq!(r[7], "metadata.json is missing");
    }

    #[test]
    fn json_objects_have_the_same_keys_whatever_the_kind() {
        let s = entry_json(&ListEntry::Session(summary()));
        let d = entry_json(&ListEntry::Damaged {
            session_id: "session-20251219T101053Z-000000".into(),
            dir: PathBuf::from("/x"),
            reason: "bad".into(),
        });
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&s), keys(&d));
        assert_eq!(s["duration_ms"], 4877);
        assert_eq!(s["start_time"], "2025-12-19T10:10:53.123Z");
        assert_eq!(d["status"], "damaged");
        assert_eq!(d["start_time"], "2025-12-19T10:10:53.000Z");
    }
}
