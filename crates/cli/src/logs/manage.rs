//! `logs verify`, `logs rm` and `logs prune`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Result, bail};
use serde_json::{Value, json};
use vg_records::{Audit, Finding, SessionStore, Status, VerifyReport, read_metadata};
use vg_records::{layout, ledger};

use crate::report::{self, State};

use super::{EXIT_TAMPERED, PruneArgs, RmArgs, VerifyArgs, explain, format};

/// The folder name of a session folder: its id.
fn id_of(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

pub fn verify(store: &SessionStore, args: &VerifyArgs, out: &mut dyn Write) -> Result<i32> {
    let Some(session) = args.session.as_deref().filter(|_| !args.all) else {
        return verify_all(store, args, out);
    };
    let dir = store.resolve(session).map_err(explain)?;
    let report = vg_records::verify(&dir).map_err(explain)?;
    // The ledger's word on it: a head other than the one ledgered at its end.
    // A ledger that cannot be read does not stop the session's own check.
    let ledger = ledger::check_one(store.root(), &dir).unwrap_or_else(|e| {
        report::warning(format_args!(
            "{e}; the session was checked against its own chain only"
        ));
        None
    });
    let id = id_of(&dir);
    if args.json {
        let mut v = verify_json(&id, &dir, &report);
        if let Some(f) = &ledger {
            v["result"] = "tampered".into();
            v["ledger"] = finding_json(f);
        }
        serde_json::to_writer_pretty(&mut *out, &v)?;
        writeln!(out)?;
    } else {
        match &report {
            VerifyReport::Intact { records } if ledger.is_none() => writeln!(
                out,
                "{id}: {} ({records} records)",
                report::status("intact", State::Good)
            )?,
            VerifyReport::Interrupted { records, problems } if ledger.is_none() => {
                // Nothing was altered: the record stops where its supervisor did.
                let (label, why) = match running_pid(&dir) {
                    Some(pid) => (
                        "unfinished",
                        format!(
                            "still being written (supervisor pid {pid} is running), so its last records are not chained yet"
                        ),
                    ),
                    None => (
                        "interrupted",
                        "its supervisor stopped before finishing it (killed, or the disk was full); everything it recorded before that verifies".to_owned(),
                    ),
                };
                writeln!(
                    out,
                    "{id}: {} ({records} records): {why}. Incomplete:",
                    report::status(label, State::Warn)
                )?;
                for p in problems {
                    writeln!(out, "  {p}")?;
                }
            }
            _ => {
                writeln!(
                    out,
                    "{id}: {}: the records no longer match what was recorded:",
                    report::status("TAMPERED", State::Bad)
                )?;
                for p in report.problems() {
                    writeln!(out, "  {p}")?;
                }
                if let Some(f) = &ledger {
                    writeln!(out, "  ledger: {f}")?;
                }
            }
        }
    }
    Ok(
        if (report.is_intact() || report.is_interrupted()) && ledger.is_none() {
            0
        } else {
            EXIT_TAMPERED
        },
    )
}

fn finding_json(f: &Finding) -> Value {
    let mut v = serde_json::to_value(f).unwrap_or_else(|_| json!({}));
    if let Some(obj) = v.as_object_mut() {
        obj.insert("message".into(), f.to_string().into());
    }
    v
}

/// `logs verify --all`: the ledger, every session, and the two against each other.
fn verify_all(store: &SessionStore, args: &VerifyArgs, out: &mut dyn Write) -> Result<i32> {
    let audit = ledger::audit(store.root(), args.anchor.as_ref()).map_err(explain)?;
    let problems = audit.problems();
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &audit_json(&audit))?;
        writeln!(out)?;
        return Ok(if problems == 0 { 0 } else { EXIT_TAMPERED });
    }
    let chain = &audit.chain;
    let path = audit.ledger.display();
    match chain.head() {
        None if chain.problems.is_empty() => writeln!(
            out,
            "ledger {path}: {} (no session has been recorded or removed since the ledger \
             was introduced; if there was one, it was deleted)",
            report::status("none yet", State::Warn)
        )?,
        head => {
            let state = if chain.problems.is_empty() {
                report::status("intact", State::Good)
            } else {
                report::status("TAMPERED", State::Bad)
            };
            writeln!(
                out,
                "ledger {path}: {state} ({} entries)",
                chain.entries.len()
            )?;
            for p in &chain.problems {
                writeln!(out, "  {p}")?;
            }
            for line in &chain.torn {
                writeln!(
                    out,
                    "  line {line} is an append cut short by a crash; the next entry goes past it"
                )?;
            }
            if let Some((seq, hash)) = head {
                writeln!(
                    out,
                    "ledger head: {seq} {} (keep it elsewhere; check later with --anchor)",
                    layout::hex_encode(&hash)
                )?;
            }
        }
    }
    if let Some(anchor) = &audit.anchor_missing {
        writeln!(
            out,
            "{}: no ledger line carries the anchor {anchor}: the ledger was rewritten or replaced since",
            report::status("ANCHOR MISSING", State::Bad)
        )?;
    } else if args.anchor.is_some() {
        writeln!(out, "anchor: found in the ledger")?;
    }
    let (mut intact, mut notes) = (0usize, 0usize);
    for s in &audit.sessions {
        let tampered = s
            .records
            .as_ref()
            .filter(|r| !r.is_intact() && !r.is_interrupted());
        let word = if s.is_problem() {
            report::status("PROBLEM", State::Bad)
        } else if matches!(s.finding, Finding::Intact { .. })
            && s.records.as_ref().is_none_or(VerifyReport::is_intact)
        {
            intact += 1;
            report::status("ok", State::Good)
        } else {
            notes += 1;
            report::status("note", State::Warn)
        };
        writeln!(out, "{}: {word}: {}", s.session_id, s.finding)?;
        if let Some(r) = tampered {
            writeln!(out, "  its records no longer match what was recorded:")?;
            for p in r.problems() {
                writeln!(out, "    {p}")?;
            }
        } else if let Some(r) = s.records.as_ref().filter(|r| r.is_interrupted()) {
            writeln!(
                out,
                "  its supervisor stopped before finishing it; incomplete:"
            )?;
            for p in r.problems() {
                writeln!(out, "    {p}")?;
            }
        }
    }
    let n = audit.sessions.len();
    writeln!(
        out,
        "{n} {}: {intact} intact, {notes} with a note, {} with a problem",
        if n == 1 { "session" } else { "sessions" },
        audit.sessions.iter().filter(|s| s.is_problem()).count()
    )?;
    if problems == 0 {
        writeln!(out, "{}", report::status("all records intact", State::Good))?;
        Ok(0)
    } else {
        writeln!(
            out,
            "{}",
            report::status(
                &format!(
                    "{problems} integrity {} found",
                    if problems == 1 { "problem" } else { "problems" }
                ),
                State::Bad
            )
        )?;
        Ok(EXIT_TAMPERED)
    }
}

/// `{"result": "intact"|"tampered", "problems": N, "ledger": {"path", "entries",
/// "head": {"seq", "hash"}|null, "problems": [...], "torn_lines": [...]},
/// "anchor": {"hash", "found"}|null, "sessions": [{"session_id", "state", ...,
/// "message", "records": <logs verify's object>|absent}]}`.
fn audit_json(audit: &Audit) -> Value {
    let chain = &audit.chain;
    let sessions: Vec<Value> = audit
        .sessions
        .iter()
        .map(|s| {
            let mut v = finding_json(&s.finding);
            v["session_id"] = s.session_id.clone().into();
            v["problem"] = s.is_problem().into();
            if let Some(r) = &s.records {
                let dir = audit
                    .ledger
                    .parent()
                    .map(|root| root.join(&s.session_id))
                    .unwrap_or_default();
                v["records"] = verify_json(&s.session_id, &dir, r);
            }
            v
        })
        .collect();
    let chain_problems: Vec<Value> = chain
        .problems
        .iter()
        .map(|p| {
            let mut v = serde_json::to_value(p).unwrap_or_else(|_| json!({}));
            v["message"] = p.to_string().into();
            v
        })
        .collect();
    let problems = audit.problems();
    json!({
        "result": if problems == 0 { "intact" } else { "tampered" },
        "problems": problems,
        "ledger": {
            "path": audit.ledger.display().to_string(),
            "entries": chain.entries.len(),
            "head": chain.head().map(|(seq, hash)| json!({"seq": seq, "hash": layout::hex_encode(&hash)})),
            "problems": chain_problems,
            "torn_lines": chain.torn,
        },
        "anchor": audit.anchor_missing.as_ref().map(|a| json!({"hash": a, "found": false})),
        "sessions": sessions,
    })
}

/// `{"session_id", "dir", "result": "intact"|"tampered", "records",
/// "problems": [{"problem": "line-changed", "file", "line", ..., "message"}]}`.
fn verify_json(id: &str, dir: &Path, report: &VerifyReport) -> Value {
    let (result, records) = match report {
        VerifyReport::Intact { records } => ("intact", records),
        VerifyReport::Tampered { records, .. } => ("tampered", records),
        VerifyReport::Interrupted { records, .. } => ("interrupted", records),
    };
    let problems: Vec<Value> = report
        .problems()
        .iter()
        .map(|p| {
            let mut v = serde_json::to_value(p).unwrap_or_else(|_| json!({}));
            if let Some(obj) = v.as_object_mut() {
                obj.insert("message".into(), p.to_string().into());
            }
            v
        })
        .collect();
    json!({
        "session_id": id,
        "dir": dir.display().to_string(),
        "result": result,
        "records": records,
        "problems": problems,
    })
}

/// The supervisor pid of a session that is still running.
fn running_pid(dir: &Path) -> Option<u32> {
    let meta = read_metadata(dir).ok()?;
    (meta.effective_status(layout::boot_id().as_deref()) == Status::Running)
        .then(|| meta.supervisor.map_or(0, |s| s.pid))
}

pub fn remove(store: &SessionStore, args: &RmArgs, out: &mut dyn Write) -> Result<i32> {
    // Resolve and check every session before removing any, so a typo or a
    // running session among several leaves everything in place.
    let mut dirs: Vec<PathBuf> = Vec::new();
    for query in &args.sessions {
        let dir = store.resolve(query).map_err(explain)?;
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    if !args.force
        && let Some((dir, pid)) = dirs.iter().find_map(|d| running_pid(d).map(|pid| (d, pid)))
    {
        bail!(
            "session {} is still running (supervisor pid {pid}), so nothing was removed; \
             wait for it to end, or pass --force to remove its records anyway",
            id_of(dir)
        );
    }
    for dir in &dirs {
        let live = running_pid(dir);
        store.remove_dir(dir, args.force).map_err(explain)?;
        writeln!(out, "removed {}", id_of(dir))?;
        if let Some(pid) = live {
            crate::report::warning(format_args!(
                "{} was still running (supervisor pid {pid}); \
                 what it records from now on is lost",
                id_of(dir)
            ));
        }
    }
    Ok(0)
}

pub fn prune(store: &SessionStore, args: &PruneArgs, out: &mut dyn Write) -> Result<i32> {
    let now = SystemTime::now();
    let cutoff = now
        .checked_sub(args.older_than)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let plan = store.prune_plan(cutoff).map_err(explain)?;
    if plan.is_empty() {
        writeln!(
            out,
            "nothing to prune: no session under {} ended before {}",
            store.root().display(),
            format::utc_millis(cutoff)
        )?;
        return Ok(0);
    }
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    if !args.dry_run {
        // All are checked and ledgered as pruned first, then removed.
        store.prune_dirs(&plan).map_err(explain)?;
    }
    for p in &plan {
        writeln!(
            out,
            "{verb} {} (last active {} ago)",
            p.session_id,
            format::duration(format::elapsed(p.last_activity, now))
        )?;
    }
    let n = plan.len();
    let sessions = if n == 1 { "session" } else { "sessions" };
    if args.dry_run {
        writeln!(
            out,
            "{n} {sessions} would be removed; run without --dry-run to remove them"
        )?;
    } else {
        writeln!(out, "{n} {sessions} removed")?;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use vg_records::Problem;

    use super::*;

    #[test]
    fn an_interrupted_record_is_its_own_result_in_json() {
        let report = VerifyReport::Interrupted {
            records: 7,
            problems: vec![Problem::MetadataUnchained { records: 7 }],
        };
        let v = verify_json("s", Path::new("/s"), &report);
        assert_eq!(v["result"], "interrupted");
        assert_eq!(v["problems"][0]["problem"], "metadata-unchained");
        assert!(
            v["problems"][0]["message"]
                .as_str()
                .unwrap()
                .contains("unverified")
        );
    }

    #[test]
    fn verify_json_carries_each_problem_and_its_message() {
        let report = VerifyReport::Tampered {
            records: 12,
            problems: vec![Problem::LineChanged {
                file: "commands.log".into(),
                line: 3,
            }],
        };
        let v = verify_json("session-x", Path::new("/r/session-x"), &report);
        assert_eq!(v["result"], "tampered");
        assert_eq!(v["records"], 12);
        assert_eq!(
            v["problems"][0],
            json!({"problem": "line-changed", "file": "commands.log", "line": 3,
                   "message": "commands.log line 3 was changed"})
        );
        let v = verify_json("s", Path::new("/s"), &VerifyReport::Intact { records: 4 });
        assert_eq!(
            (v["result"].as_str(), v["problems"].as_array().map(Vec::len)),
            (Some("intact"), Some(0))
        );
    }
}
