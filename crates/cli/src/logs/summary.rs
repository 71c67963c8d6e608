//! The human summary of `logs show SESSION`: what ran, where, under which
//! enforced layers, how it ended, then the commands it executed.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::path::Path;
use std::time::SystemTime;

use anyhow::Result;
use vg_records::layout::{self, RecordFile};
use vg_records::{CommandExit, CommandLogLine, Layers, Limits, Metadata, Status};

use super::format::{self, Table};
use super::views::read_lines;
use crate::report::{self, State};

/// Width of the label column.
const LABEL: usize = 13;

/// Writes `label  value`, continuation lines aligned under the value.
fn field(out: &mut dyn Write, label: &str, lines: &[String]) -> io::Result<()> {
    let mut label = label;
    for line in lines {
        writeln!(out, "{label:<LABEL$}{line}")?;
        label = "";
    }
    Ok(())
}

fn one(out: &mut dyn Write, label: &str, value: impl Into<String>) -> io::Result<()> {
    field(out, label, &[value.into()])
}

fn text_or_dash(value: Option<&str>) -> String {
    format::safe(value.unwrap_or("-")).into_owned()
}

/// Extra fields a newer writer recorded, as `key: json`.
fn extras(map: &BTreeMap<String, serde_json::Value>) -> Vec<String> {
    map.iter()
        .map(|(k, v)| format::safe(&format!("{k}: {v}")).into_owned())
        .collect()
}

pub fn write(
    out: &mut dyn Write,
    dir: &Path,
    m: &Metadata,
    status: Status,
    now: SystemTime,
) -> io::Result<()> {
    one(out, "Session", format::safe(&m.session_id))?;
    one(out, "Name", text_or_dash(m.name.as_deref()))?;
    one(out, "Agent", text_or_dash(m.agent.as_deref()))?;
    one(out, "Origin", m.origin.as_str())?;
    match &m.script {
        Some(script) => one(out, "Script", format::safe(script))?,
        None => one(out, "Command", vg_records::quote_argv(&m.command))?,
    }
    if let Some(d) = &m.description {
        one(out, "Description", format::safe(d))?;
    }
    one(out, "User", user(m))?;
    if let Some(image) = &m.image {
        let shown = match &m.image_digest {
            Some(digest) => format!("{image} ({digest})"),
            None => image.clone(),
        };
        one(out, "Image", format::safe(&shown))?;
    }
    one(
        out,
        "Workdir",
        format!(
            "{} inside, {} outside",
            text_or_dash(m.cwd_inside.as_deref()),
            text_or_dash(m.cwd_outside.as_deref())
        ),
    )?;
    field(out, "Mounts", &list_or(&m.mounts, "none"))?;
    let keys = if m.env_keys.is_empty() {
        "none".to_owned()
    } else {
        format::safe(&m.env_keys.join(", ")).into_owned()
    };
    one(out, "Env keys", keys)?;
    field(out, "Network", &network(m))?;
    field(out, "Limits", &limits(&m.limits))?;
    field(out, "Layers", &layers(&m.layers))?;
    write_timing(out, m, status, now)?;
    write_outcome(out, m, status)?;
    one(out, "Version", format::safe(&m.version))?;
    one(out, "Records", dir.display().to_string())?;
    if layout::file_path(dir, RecordFile::Cast).exists() {
        let id = dir
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        one(
            out,
            "Terminal",
            format!(
                "recorded ({}); replay it with `vectraguard logs replay {}`",
                layout::CAST,
                format::safe(&id)
            ),
        )?;
    }
    Ok(())
}

fn list_or(items: &[String], empty: &str) -> Vec<String> {
    if items.is_empty() {
        return vec![empty.to_owned()];
    }
    items.iter().map(|i| format::safe(i).into_owned()).collect()
}

fn user(m: &Metadata) -> String {
    let u = &m.user;
    let ids = match (u.uid, u.gid) {
        (Some(uid), Some(gid)) => format!("uid {uid}, gid {gid}"),
        (Some(uid), None) => format!("uid {uid}"),
        _ => "ids unknown".to_owned(),
    };
    format!("{} ({ids})", text_or_dash(u.name.as_deref()))
}

fn network(m: &Metadata) -> Vec<String> {
    let mut lines = vec![text_or_dash(m.network.mode.as_deref())];
    lines.extend(m.network.rules.iter().map(|r| format::safe(r).into_owned()));
    lines.extend(extras(&m.network.extra));
    lines
}

fn limits(l: &Limits) -> Vec<String> {
    let mut parts = Vec::new();
    let mut size = |name: &str, v: Option<u64>| {
        if let Some(v) = v {
            parts.push(format!("{name} {}", format::bytes(v)));
        }
    };
    size("memory", l.memory_bytes);
    size("output", l.max_output_bytes);
    size("disk", l.disk_bytes);
    if let Some(c) = l.cpus {
        parts.push(format!("cpus {c}"));
    }
    if let Some(p) = l.pids {
        parts.push(format!("pids {p}"));
    }
    if let Some(t) = l.timeout_secs {
        parts.push(format!(
            "timeout {}",
            format::duration(std::time::Duration::from_secs(t))
        ));
    }
    let mut lines = if parts.is_empty() {
        vec!["none".to_owned()]
    } else {
        vec![parts.join(", ")]
    };
    lines.extend(extras(&l.extra));
    lines
}

/// Every layer, applied or not: the record states what was enforced, so a
/// missing one is shown as such rather than left out.
fn layers(l: &Layers) -> Vec<String> {
    let mut lines = vec![
        match l.landlock_abi {
            Some(abi) => format!("Landlock ABI {abi}"),
            None => "Landlock not applied".to_owned(),
        },
        match &l.seccomp {
            Some(mode) => format!("seccomp {}", format::safe(mode)),
            None => "seccomp not applied".to_owned(),
        },
        if l.namespaces.is_empty() {
            "namespaces: none".to_owned()
        } else {
            format!("namespaces: {}", format::safe(&l.namespaces.join(", ")))
        },
        match l.no_new_privs {
            Some(true) => "no_new_privs set".to_owned(),
            Some(false) => "no_new_privs NOT set".to_owned(),
            None => "no_new_privs unknown".to_owned(),
        },
        match &l.capabilities {
            Some(caps) if caps.is_empty() => "capabilities: none".to_owned(),
            Some(caps) => format!("capabilities: {}", format::safe(&caps.join(", "))),
            None => "capabilities: unknown".to_owned(),
        },
        match &l.cgroup_version {
            Some(v) if l.cgroup_controllers.is_empty() => format!("cgroup {}", format::safe(v)),
            Some(v) => format!(
                "cgroup {}: {}",
                format::safe(v),
                format::safe(&l.cgroup_controllers.join(", "))
            ),
            None => "cgroup: none".to_owned(),
        },
    ];
    lines.extend(extras(&l.extra));
    lines
}

fn write_timing(
    out: &mut dyn Write,
    m: &Metadata,
    status: Status,
    now: SystemTime,
) -> io::Result<()> {
    one(out, "Started", format::utc_millis(m.start_time))?;
    match m.end_time {
        Some(end) => {
            one(out, "Ended", format::utc_millis(end))?;
            one(
                out,
                "Duration",
                format::duration(format::elapsed(m.start_time, end)),
            )
        }
        None if status == Status::Running => one(
            out,
            "Duration",
            format!(
                "{} so far",
                format::duration(format::elapsed(m.start_time, now))
            ),
        ),
        None => one(out, "Ended", "unknown (the record was never finished)"),
    }
}

fn write_outcome(out: &mut dyn Write, m: &Metadata, status: Status) -> io::Result<()> {
    let pid = m.supervisor.as_ref().map(|s| s.pid);
    let status_text = match (status, m.status, pid) {
        (Status::Running, _, Some(pid)) => format!("running (supervisor pid {pid})"),
        (Status::Interrupted, Status::Running, Some(pid)) => {
            format!("interrupted (supervisor pid {pid} is gone; the record was never finished)")
        }
        (s, _, _) => s.to_string(),
    };
    let state = match (status, m.exit_code) {
        (Status::Exited, Some(0)) => State::Good,
        (Status::Running, _) => State::Plain,
        (Status::Exited, _) => State::Warn,
        _ => State::Bad,
    };
    one(out, "Status", report::status(&status_text, state))?;
    one(
        out,
        "Exit code",
        m.exit_code.map_or("-".to_owned(), |c| c.to_string()),
    )?;
    if let Some(sig) = m.signal {
        one(out, "Signal", sig.to_string())?;
    }
    if let Some(e) = &m.error {
        one(out, "Error", format::safe(e))?;
    }
    Ok(())
}

/// One row of the commands table.
struct Row {
    time: String,
    pid: String,
    exit: Option<CommandExit>,
    cwd: String,
    command: String,
}

fn exit_text(exit: Option<CommandExit>) -> String {
    match exit {
        Some(CommandExit::Code(c)) => c.to_string(),
        Some(CommandExit::Signal(s)) => format!("sig {s}"),
        Some(CommandExit::Denied(_)) => "denied".to_owned(),
        None => "-".to_owned(),
    }
}

/// The rows of `commands.log`, each `exec` with the status its later
/// `exit` line reports (pids may be reused: the latest exec wins).
fn command_rows(lines: &[Vec<u8>], day: &str) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    let mut by_pid: HashMap<u32, usize> = HashMap::new();
    for (i, line) in lines.iter().enumerate() {
        let parsed = std::str::from_utf8(line)
            .ok()
            .and_then(CommandLogLine::parse);
        match parsed {
            Some(CommandLogLine::Exec(e)) => {
                by_pid.insert(e.pid, rows.len());
                rows.push(Row {
                    time: format::time_of_day(e.time, day),
                    pid: e.pid.to_string(),
                    exit: e.exit,
                    cwd: format::safe(&vg_records::quote_arg(&e.cwd)).into_owned(),
                    // What a script or a program's own loader started, which its argv
                    // does not show.
                    command: match &e.interp {
                        Some(interp) => format!(
                            "{}  (runs {})",
                            e.command,
                            format::safe(&vg_records::quote_arg(interp))
                        ),
                        None => e.command,
                    },
                });
            }
            Some(CommandLogLine::Exit { pid, exit, .. }) => {
                if let Some(row) = by_pid.remove(&pid).and_then(|r| rows.get_mut(r)) {
                    row.exit.get_or_insert(exit);
                }
            }
            None => rows.push(Row {
                time: "?".into(),
                pid: "?".into(),
                exit: None,
                cwd: "?".into(),
                command: format!(
                    "(line {} is not a command record: {})",
                    i + 1,
                    format::safe_bytes(line.strip_suffix(b"\n").unwrap_or(line))
                ),
            }),
        }
    }
    rows
}

/// The `Commands` section: a table of what ran, with exit statuses.
pub fn write_commands(out: &mut dyn Write, dir: &Path, start: SystemTime) -> Result<()> {
    let path = layout::file_path(dir, RecordFile::Commands);
    if !path.exists() {
        writeln!(
            out,
            "Commands: commands.log is missing (`vectraguard logs verify` checks the records)"
        )?;
        return Ok(());
    }
    let rows = command_rows(&read_lines(&path)?, &format::utc_date(start));
    if rows.is_empty() {
        writeln!(out, "Commands: none recorded")?;
        return Ok(());
    }
    writeln!(out, "Commands ({}):", rows.len())?;
    let mut table = Table::new(vec!["TIME (UTC)", "PID", "EXIT", "CWD", "COMMAND"]);
    for r in rows {
        table.push(vec![r.time, r.pid, exit_text(r.exit), r.cwd, r.command]);
    }
    table.write(out, "  ")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use vg_records::{Origin, layout::ProcessIdentity};

    use super::*;

    fn sample() -> Metadata {
        let mut m = Metadata::new(Origin::Agent);
        m.session_id = "session-20251219T101053Z-9af4c3".into();
        m.name = Some("build".into());
        m.agent = Some("codex".into());
        m.command = vec!["make".into(), "-j4".into()];
        m.description = Some("nightly \x1b[31mbuild".into());
        m.cwd_inside = Some("/work".into());
        m.cwd_outside = Some("/home/u/p".into());
        m.mounts = vec!["/home/u/p:/work".into(), "/data:/data:ro".into()];
        m.env_keys = vec!["PATH".into(), "TOKEN".into()];
        m.network.mode = Some("none".into());
        m.limits.memory_bytes = Some(1 << 30);
        m.limits.timeout_secs = Some(90);
        m.layers.landlock_abi = Some(7);
        m.layers.namespaces = vec!["user".into(), "mount".into()];
        m.layers.capabilities = Some(Vec::new());
        m.start_time = UNIX_EPOCH + Duration::from_millis(1_766_139_053_123);
        m.end_time = Some(m.start_time + Duration::from_millis(4_900));
        m.status = Status::Signalled;
        m.exit_code = Some(137);
        m.signal = Some(9);
        m
    }

    fn render(m: &Metadata, status: Status) -> String {
        let mut out = Vec::new();
        write(&mut out, Path::new("/r/s"), m, status, SystemTime::now()).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn summary_names_every_part_of_the_record() {
        let text = render(&sample(), Status::Signalled);
        for line in [
            "Session      session-20251219T101053Z-9af4c3",
            "Agent        codex",
            "Origin       agent",
            "Command      make -j4",
            "Description  nightly \\u{1b}[31mbuild",
            "Workdir      /work inside, /home/u/p outside",
            "Mounts       /home/u/p:/work\n             /data:/data:ro",
            "Env keys     PATH, TOKEN",
            "Network      none",
            "Limits       memory 1 GiB, timeout 1m30s",
            "Layers       Landlock ABI 7\n             seccomp not applied\n             namespaces: user, mount\n             no_new_privs unknown\n             capabilities: none\n             cgroup: none",
            "Started      2025-12-19 10:10:53.123 UTC",
            "Duration     4.9s",
            "Status       signalled",
            "Exit code    137",
            "Signal       9",
            "Records      /r/s",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }

    #[test]
    fn a_crashed_supervisor_is_reported() {
        let mut m = sample();
        m.status = Status::Running;
        m.end_time = None;
        m.supervisor = Some(ProcessIdentity {
            pid: 4242,
            start_ticks: 1,
            boot_id: None,
        });
        let text = render(&m, Status::Interrupted);
        assert!(
            text.contains("Status       interrupted (supervisor pid 4242 is gone"),
            "{text}"
        );
        assert!(text.contains("Ended        unknown"), "{text}");
    }

    #[test]
    fn exits_are_paired_with_their_exec() {
        let lines: Vec<Vec<u8>> = [
            "2025-12-19T10:10:53.200Z exec pid=5 ppid=1 cwd=/work -- sh -c 'make; ls'\n",
            "2025-12-19T10:10:53.300Z exec pid=6 ppid=5 cwd=/work -- make\n",
            "2025-12-19T10:10:54.000Z exit pid=6 status=2\n",
            "2025-12-20T00:00:01.000Z exec pid=6 ppid=5 cwd='/a b' status=0 -- ls\n",
            "garbage\n",
            "2025-12-20T00:00:02.000Z exit pid=5 signal=9\n",
        ]
        .iter()
        .map(|l| l.as_bytes().to_vec())
        .collect();
        let rows = command_rows(&lines, "2025-12-19");
        let view: Vec<(String, String, String, String)> = rows
            .into_iter()
            .map(|r| (r.time, exit_text(r.exit), r.cwd, r.command))
            .collect();
        assert_eq!(
            view[0],
            (
                "10:10:53.200".into(),
                "sig 9".into(),
                "/work".into(),
                "sh -c 'make; ls'".into()
            )
        );
        assert_eq!(view[1].1, "2");
        assert_eq!(
            view[2],
            (
                "2025-12-20 00:00:01.000".into(),
                "0".into(),
                "'/a b'".into(),
                "ls".into()
            )
        );
        assert_eq!(view[3].3, "(line 5 is not a command record: garbage)");
        assert_eq!(view.len(), 4);
    }
}
