//! `logs verify`, `logs rm` and `logs prune`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Result, bail};
use serde_json::{Value, json};
use vg_records::layout;
use vg_records::{SessionStore, Status, VerifyReport, read_metadata};

use crate::report::{self, State};

use super::{EXIT_TAMPERED, PruneArgs, RmArgs, VerifyArgs, explain, format};

/// The folder name of a session folder: its id.
fn id_of(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

pub fn verify(store: &SessionStore, args: &VerifyArgs, out: &mut dyn Write) -> Result<i32> {
    let dir = store.resolve(&args.session).map_err(explain)?;
    let report = vg_records::verify(&dir).map_err(explain)?;
    let id = id_of(&dir);
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &verify_json(&id, &dir, &report))?;
        writeln!(out)?;
    } else {
        match &report {
            VerifyReport::Intact { records } => writeln!(
                out,
                "{id}: {} ({records} records)",
                report::status("intact", State::Good)
            )?,
            VerifyReport::Tampered { problems, .. } => {
                writeln!(
                    out,
                    "{id}: {}: the records no longer match what was recorded:",
                    report::status("TAMPERED", State::Bad)
                )?;
                for p in problems {
                    writeln!(out, "  {p}")?;
                }
            }
            VerifyReport::Interrupted { records, problems } => {
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
        }
    }
    Ok(if report.is_intact() || report.is_interrupted() {
        0
    } else {
        EXIT_TAMPERED
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
    for p in &plan {
        if !args.dry_run {
            store.remove_dir(&p.dir, false).map_err(explain)?;
        }
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
