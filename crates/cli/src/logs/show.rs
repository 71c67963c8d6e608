//! `logs show`: a session's summary, one of its files, or a JSON document.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::time::SystemTime;

use anyhow::{Result, bail};
use serde_json::{Value, json};
use vg_records::layout::{self, RecordFile};
use vg_records::{Metadata, RecordsError, SessionStore, Status, read_metadata};

use super::views::{EventFilter, LineView, read_lines};
use super::{ShowArgs, explain, follow, format, summary};

/// What `logs show` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Metadata, then the commands (or, with --json, the metadata).
    Summary,
    Lines(LineView),
    /// stdout.log or stderr.log, byte for byte.
    Stream(RecordFile),
}

impl View {
    /// The single view asked for; `--json` alone may combine line views.
    fn from_args(args: &ShowArgs) -> Result<Self> {
        if args.stdout {
            return Ok(View::Stream(RecordFile::Stdout));
        }
        if args.stderr {
            return Ok(View::Stream(RecordFile::Stderr));
        }
        let events = events_filter(args).map(LineView::Events);
        match (args.commands, events) {
            (true, Some(_)) if args.follow => bail!(
                "--follow follows one file: choose --commands or --{}",
                events_flag(args)
            ),
            (true, Some(_)) => bail!(
                "--commands and --{} print one file each: choose one, or add --json to get both",
                events_flag(args)
            ),
            (true, None) => Ok(View::Lines(LineView::Commands)),
            (false, Some(e)) => Ok(View::Lines(e)),
            (false, None) => Ok(View::Summary),
        }
    }
}

fn events_flag(args: &ShowArgs) -> &'static str {
    if args.network {
        "network"
    } else if args.approvals {
        "approvals"
    } else if args.violations {
        "violations"
    } else {
        "events"
    }
}

fn events_filter(args: &ShowArgs) -> Option<EventFilter> {
    if args.events {
        Some(EventFilter::All)
    } else if args.network {
        Some(EventFilter::Network)
    } else if args.approvals {
        Some(EventFilter::Approvals)
    } else if args.violations {
        Some(EventFilter::Violations)
    } else {
        None
    }
}

pub fn show(store: &SessionStore, args: &ShowArgs, out: &mut dyn Write) -> Result<i32> {
    let dir = store.resolve(&args.session).map_err(explain)?;
    if args.json && !args.follow {
        write_json(&dir, args, out)?;
        return Ok(0);
    }
    let view = View::from_args(args)?;
    if args.follow {
        return follow::follow(&dir, view, args.json, out);
    }
    match view {
        View::Summary => {
            let (meta, status) = load(&dir)?;
            summary::write(out, &dir, &meta, status, SystemTime::now())?;
            writeln!(out)?;
            summary::write_commands(out, &dir, meta.start_time)?;
        }
        View::Lines(LineView::Events(EventFilter::Network)) => {
            let lines = read_lines(&layout::file_path(&dir, RecordFile::Events))?;
            super::network::write_table(out, &lines)?;
        }
        View::Lines(lines) => {
            for line in read_lines(&layout::file_path(&dir, file_of(lines)))? {
                if let Some(text) = lines.text(&line) {
                    writeln!(out, "{text}")?;
                }
            }
        }
        View::Stream(file) => copy_stream(&dir, file, out)?,
    }
    Ok(0)
}

pub fn file_of(view: LineView) -> RecordFile {
    match view {
        LineView::Commands => RecordFile::Commands,
        LineView::Events(_) => RecordFile::Events,
    }
}

/// The metadata and the effective status (interrupted when the supervisor
/// is gone).
fn load(dir: &Path) -> Result<(Metadata, Status)> {
    let meta = read_metadata(dir).map_err(explain)?;
    let status = meta.effective_status(layout::boot_id().as_deref());
    Ok((meta, status))
}

fn copy_stream(dir: &Path, file: RecordFile, out: &mut dyn Write) -> Result<()> {
    let path = layout::file_path(dir, file);
    let read_err = |source| {
        explain(RecordsError::Read {
            path: path.clone(),
            source,
        })
    };
    let mut f = File::open(&path).map_err(read_err)?;
    // A read error and a write error are told apart: only the latter may be
    // a closed pipe, which `run` treats as the reader being done.
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = io::Read::read(&mut f, &mut buf).map_err(read_err)?;
        if n == 0 {
            return Ok(());
        }
        out.write_all(&buf[..n])?;
    }
}

/// `{"session_id", "dir", "status", "duration_ms", "metadata": {...},
/// "terminal_recording", "commands": [...], "events": [...]}`; `status` is
/// the effective status, `metadata` the file as recorded,
/// `terminal_recording` whether `tty.cast` exists, and the arrays are
/// present only when asked for with --commands and --events/--network.
fn write_json(dir: &Path, args: &ShowArgs, out: &mut dyn Write) -> Result<()> {
    let (meta, status) = load(dir)?;
    let mut doc = json!({
        "session_id": meta.session_id,
        "dir": dir.display().to_string(),
        "status": status.as_str(),
        "duration_ms": meta
            .end_time
            .map(|end| format::millis(format::elapsed(meta.start_time, end))),
        "metadata": serde_json::to_value(&meta)?,
        "terminal_recording": layout::file_path(dir, RecordFile::Cast).exists(),
    });
    let mut views = Vec::new();
    if args.commands {
        views.push(("commands", LineView::Commands));
    }
    if let Some(filter) = events_filter(args) {
        views.push(("events", LineView::Events(filter)));
    }
    for (key, view) in views {
        let lines = read_lines(&layout::file_path(dir, file_of(view)))?;
        let array: Vec<Value> = lines
            .iter()
            .enumerate()
            .filter_map(|(i, l)| view.json(i + 1, l))
            .collect();
        doc[key] = Value::Array(array);
    }
    serde_json::to_writer_pretty(&mut *out, &doc)?;
    writeln!(out)?;
    Ok(())
}
