//! `vectraguard logs`: listing, showing, following, verifying and removing session
//! records. The sessions are written with the `vg-records` library itself, by a thread
//! whose filesystem identity is the runner's invoker, so they belong to the user who
//! then reads them, as the records of their own `sandbox run` would.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use serde_json::Value;
use vg_records::time::format_compact;
use vg_records::{
    CommandExit, CommandRecord, End, Event, Metadata, Origin, SessionStore, SessionWriter,
};

use super::harness::{Output, RecordsHome, Runner, Vg, as_invoker, bin, each_identity, wait_until};

// ---------------------------------------------------------------------------------------
// Fixtures.

fn meta(name: &str, agent: &str, argv: &[&str]) -> Metadata {
    let mut m = Metadata::new(Origin::Cli);
    m.name = Some(name.into());
    m.agent = Some(agent.into());
    m.command = argv.iter().map(|a| (*a).to_owned()).collect();
    m.cwd_inside = Some("/work".into());
    m.cwd_outside = Some("/home/u/project".into());
    m.mounts = vec!["/home/u/project:/work".into()];
    m.set_env_keys(["PATH=/usr/bin", "API_TOKEN=never-recorded"]);
    m.network.mode = Some("none".into());
    m.layers.landlock_abi = Some(7);
    m.layers.seccomp = Some("filter".into());
    m.layers.namespaces = vec!["user".into(), "mount".into(), "pid".into()];
    m.layers.no_new_privs = Some(true);
    m.description = Some("fixture session".into());
    m
}

/// Starts recording a session; the caller finishes (or drops) the writer.
fn start(runner: Runner, home: &RecordsHome, meta: Metadata) -> SessionWriter {
    let logs = home.logs();
    as_invoker(runner, move || {
        SessionStore::open(&logs).unwrap().create(meta).unwrap()
    })
}

/// Finishes a writer with the invoker's identity (metadata.json is rewritten).
fn finish(runner: Runner, w: SessionWriter, end: End) {
    as_invoker(runner, move || {
        w.finish(end).unwrap();
    });
}

/// Drops a writer unfinished, as an error path would: the record says interrupted.
fn abandon(runner: Runner, w: SessionWriter) {
    as_invoker(runner, move || drop(w));
}

/// A finished session: one command per `commands` entry, `stdout` in one chunk.
fn session(
    runner: Runner,
    home: &RecordsHome,
    meta: Metadata,
    commands: &[&str],
    code: i32,
) -> String {
    let w = start(runner, home, meta);
    for (i, c) in commands.iter().enumerate() {
        let pid = 100 + u32::try_from(i).unwrap();
        w.record_command(&CommandRecord::new(pid, 1, "/work", c.split(' ')))
            .unwrap();
        w.record_exit(pid, CommandExit::Code(code)).unwrap();
    }
    w.append_stdout(b"hello\n").unwrap();
    let id = w.id().to_owned();
    finish(runner, w, End::exited(code));
    id
}

/// A folder with a session's name but unreadable metadata.
fn damaged(runner: Runner, home: &RecordsHome, started: SystemTime) -> String {
    let id = format!("session-{}-dddddd", format_compact(started));
    let dir = home.logs().join(&id);
    as_invoker(runner, || {
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("metadata.json"), b"{ not json").unwrap();
    });
    id
}

fn ago(secs: u64) -> SystemTime {
    SystemTime::now() - Duration::from_secs(secs)
}

const DAY: u64 = 86_400;

// ---------------------------------------------------------------------------------------
// Invocations.

/// `vectraguard logs ARGS...` by `runner`, with `home` as VECTRAGUARD_HOME.
fn logs(runner: Runner, home: &RecordsHome, args: &[&str]) -> Output {
    Vg::new(runner, home.path())
        .arg("logs")
        .args(args)
        .records_home(home)
        .run()
}

/// Like [`logs`], with stdout as raw bytes (the harness decodes it as text).
fn logs_raw(runner: Runner, home: &RecordsHome, args: &[&str]) -> std::process::Output {
    runner
        .host_command(bin())
        .arg("logs")
        .args(args)
        .env("VECTRAGUARD_HOME", home.path())
        .current_dir(home.path())
        .output()
        .unwrap()
}

#[track_caller]
fn json(out: &Output) -> Value {
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e})\n{out}"))
}

/// The `session_id`s of a `logs list --json` array, in order.
#[track_caller]
fn listed(out: &Output) -> Vec<String> {
    out.assert_success();
    json(out)
        .as_array()
        .unwrap_or_else(|| panic!("not an array\n{out}"))
        .iter()
        .map(|s| s["session_id"].as_str().unwrap().to_owned())
        .collect()
}

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

// ---------------------------------------------------------------------------------------
// Tests.

#[test]
fn list_without_records_says_so() {
    each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let out = logs(runner, &home, &["list"]);
        out.assert_success().assert_stdout_contains(&format!(
            "no sessions recorded yet under {}",
            home.logs().display()
        ));
        assert_eq!(
            json(&logs(runner, &home, &["list", "--json"])),
            Value::Array(vec![])
        );
    });
}

#[test]
fn list_shows_a_table_and_json_and_filters() {
    each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let mut old_meta = meta("nightly", "codex", &["make", "all"]);
        old_meta.start_time = ago(3 * DAY);
        let old = session(runner, &home, old_meta, &["make all"], 0);
        let build = session(
            runner,
            &home,
            meta("build", "codex", &["make", "-j4"]),
            &["make -j4"],
            0,
        );
        let test = session(
            runner,
            &home,
            meta("test", "claude", &["cargo", "test"]),
            &["cargo test"],
            3,
        );
        let w = start(runner, &home, meta("crash", "codex", &["sleep", "9"]));
        let crashed = w.id().to_owned();
        abandon(runner, w);
        let broken = damaged(runner, &home, SystemTime::now());

        // The table: every session, the damaged one with its reason.
        let out = logs(runner, &home, &["list"]);
        out.assert_success();
        let header = out.lines()[0];
        for col in [
            "SESSION", "NAME", "AGENT", "STATUS", "EXIT", "STARTED", "DURATION", "COMMAND",
        ] {
            assert!(header.contains(col), "no {col} column\n{out}");
        }
        let rows: Vec<&str> = out.lines()[1..].to_vec();
        let ids: Vec<String> = rows
            .iter()
            .map(|r| r.split(' ').next().unwrap().to_owned())
            .collect();
        let all = sorted(vec![
            old.clone(),
            build.clone(),
            test.clone(),
            crashed.clone(),
            broken.clone(),
        ]);
        // Oldest first by start time; these all start within a second or two, so
        // compare the set (ordering within a second is by the recorded time).
        assert_eq!(sorted(ids.clone()), all, "{out}");
        let row = |id: &str| *rows.iter().find(|r| r.starts_with(id)).unwrap();
        for (id, words) in [
            (&build, &["build", "codex", "exited", " 0 ", "make -j4"][..]),
            (&test, &["test", "claude", "exited", " 3 ", "cargo test"]),
            (&crashed, &["crash", "interrupted", "sleep 9"]),
            (
                &broken,
                &["damaged", "metadata.json is not valid session metadata"],
            ),
        ] {
            for w in words {
                assert!(
                    row(id).contains(w),
                    "{id}: no {w:?} in {:?}\n{out}",
                    row(id)
                );
            }
        }
        out.assert_stderr_contains(&format!("{broken} is damaged"))
            .assert_stderr_contains(&format!("vectraguard logs rm {broken}"));

        // JSON: the same sessions, with stable keys.
        let out = logs(runner, &home, &["list", "--json"]);
        assert_eq!(sorted(listed(&out)), all);
        let v = json(&out);
        let by_id = |id: &str| {
            v.as_array()
                .unwrap()
                .iter()
                .find(|s| s["session_id"] == id)
                .unwrap()
                .clone()
        };
        let t = by_id(&test);
        assert_eq!(
            (t["status"].as_str(), t["exit_code"].as_i64()),
            (Some("exited"), Some(3))
        );
        assert_eq!(
            (t["name"].as_str(), t["agent"].as_str()),
            (Some("test"), Some("claude"))
        );
        assert_eq!(t["command"], "cargo test");
        assert!(
            t["duration_ms"].is_u64() && t["start_time"].is_string(),
            "{t}"
        );
        assert_eq!(by_id(&crashed)["status"], "interrupted");
        let d = by_id(&broken);
        assert_eq!(
            (d["kind"].as_str(), d["status"].as_str()),
            (Some("damaged"), Some("damaged"))
        );
        assert!(
            d["reason"].as_str().unwrap().contains("metadata.json"),
            "{d}"
        );

        // Filters.
        let ids = |args: &[&str]| {
            let mut a = vec!["list", "--json"];
            a.extend_from_slice(args);
            // Same-second sessions list by recorded time; compare as sets.
            sorted(listed(&logs(runner, &home, &a)))
        };
        assert_eq!(
            ids(&["--agent", "codex"]),
            sorted(vec![old.clone(), build.clone(), crashed.clone()])
        );
        assert_eq!(ids(&["--name", "test"]), [test]);
        assert_eq!(ids(&["--status", "interrupted"]), [crashed.as_str()]);
        assert_eq!(ids(&["--status", "damaged"]), [broken.as_str()]);
        assert_eq!(
            ids(&["--agent", "codex", "--since", "1d"]),
            sorted(vec![build.clone(), crashed.clone()])
        );
        assert_eq!(ids(&["--since", "2000-01-01T00:00:00Z"]).len(), 5);
        assert!(ids(&["--agent", "nobody"]).is_empty());
        logs(runner, &home, &["list", "--agent", "nobody"])
            .assert_success()
            .assert_stdout_contains("match these filters");

        // Bad values are usage errors that say what is accepted.
        logs(runner, &home, &["list", "--status", "finished"])
            .assert_code(125)
            .assert_stderr_contains(
                "running, exited, signalled, timeout, failed-to-start, interrupted, damaged",
            );
        logs(runner, &home, &["list", "--since", "last tuesday"]).assert_code(125);
    });
}

#[test]
fn list_cuts_long_commands_to_the_terminal_width() {
    each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let long = "x".repeat(300);
        session(
            runner,
            &home,
            meta("wide", "codex", &["echo", &long]),
            &[],
            0,
        );
        let narrow = Vg::new(runner, home.path())
            .args(["logs", "list"])
            .records_home(&home)
            .env("COLUMNS", "120")
            .run();
        narrow.assert_success();
        let row = narrow.lines()[1];
        assert!(row.ends_with('…') && row.chars().count() <= 120, "{narrow}");
        let full = Vg::new(runner, home.path())
            .args(["logs", "list", "--no-trunc"])
            .records_home(&home)
            .env("COLUMNS", "120")
            .run();
        full.assert_success().assert_stdout_contains(&long);
    });
}

#[test]
fn show_prints_the_summary_and_each_file() {
    each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let w = start(
            runner,
            &home,
            meta("build", "codex", &["sh", "-c", "make; ls"]),
        );
        w.record_command(&CommandRecord::new(101, 1, "/work", ["make", "-j4"]))
            .unwrap();
        w.record_command(&CommandRecord::new(102, 1, "/work/sub dir", ["ls", "-l"]))
            .unwrap();
        w.record_exit(101, CommandExit::Code(2)).unwrap();
        w.event(
            Event::new("network")
                .with("event", "connect")
                .with("connection", 1)
                .with("protocol", "tcp")
                .with("name", "example.com")
                .with("address", "93.184.215.14")
                .with("port", 443)
                .with("decision", "deny")
                .with("reason", "default deny"),
        )
        .unwrap();
        w.event(Event::new("limit-hit").with("limit", "pids"))
            .unwrap();
        let id = w.id().to_owned();
        finish(runner, w, End::exited(2));
        let bare = id.strip_prefix("session-").unwrap();

        // By full id, by the id without `session-`, and by a prefix of either.
        for query in [id.as_str(), bare, &id[..id.len() - 3], &bare[..10]] {
            let out = logs(runner, &home, &["show", query]);
            out.assert_success()
                .assert_stdout_contains(&format!("Session      {id}"));
        }
        let out = logs(runner, &home, &["show", bare]);
        for line in [
            "Name         build",
            "Agent        codex",
            "Command      sh -c 'make; ls'",
            "Workdir      /work inside, /home/u/project outside",
            "Env keys     PATH, API_TOKEN",
            "Layers       Landlock ABI 7",
            "Status       exited",
            "Exit code    2",
            "Commands (2):",
        ] {
            out.assert_stdout_contains(line);
        }
        assert!(!out.stdout.contains("never-recorded"), "{out}");
        let make = out
            .lines()
            .into_iter()
            .find(|l| l.ends_with("make -j4"))
            .unwrap();
        assert!(make.contains(" 101 ") && make.contains(" 2 "), "{out}");
        out.assert_stdout_contains("'/work/sub dir'");

        // commands.log as recorded.
        let out = logs(runner, &home, &["show", bare, "--commands"]);
        out.assert_success();
        let lines = out.lines();
        assert_eq!(lines.len(), 3, "{out}");
        assert!(
            lines[0].ends_with("exec pid=101 ppid=1 cwd=/work -- make -j4"),
            "{out}"
        );
        assert!(lines[2].ends_with("exit pid=101 status=2"), "{out}");

        // Events, readable; --network keeps the network decisions only.
        let out = logs(runner, &home, &["show", bare, "--events"]);
        out.assert_success()
            .assert_stdout_contains("session-start")
            .assert_stdout_contains("decision=deny")
            .assert_stdout_contains("name=example.com")
            .assert_stdout_contains("limit=pids")
            .assert_stdout_contains("session-end");
        // --network is a table: a header and the one connection.
        let out = logs(runner, &home, &["show", bare, "--network"]);
        out.assert_success();
        assert_eq!(out.lines().len(), 2, "{out}");
        assert!(out.lines()[0].starts_with("TIME"), "{out}");
        for cell in [
            "tcp",
            "example.com",
            "93.184.215.14",
            "443",
            "deny",
            "default deny",
        ] {
            out.assert_stdout_contains(cell);
        }

        // JSON: the metadata, and the arrays asked for.
        let v = json(&logs(runner, &home, &["show", bare, "--json"]));
        assert_eq!(
            (v["session_id"].as_str(), v["status"].as_str()),
            (Some(id.as_str()), Some("exited"))
        );
        assert_eq!(v["metadata"]["name"], "build");
        assert_eq!(v["metadata"]["exit_code"], 2);
        assert!(
            v.get("commands").is_none() && v.get("events").is_none(),
            "{v}"
        );
        let v = json(&logs(
            runner,
            &home,
            &["show", bare, "--json", "--commands", "--events"],
        ));
        let cmds = v["commands"].as_array().unwrap();
        assert_eq!(cmds.len(), 3, "{v}");
        assert_eq!(cmds[1]["argv"], serde_json::json!(["ls", "-l"]));
        assert_eq!(cmds[1]["cwd"], "/work/sub dir");
        assert_eq!(
            (cmds[2]["type"].as_str(), cmds[2]["status"].as_i64()),
            (Some("exit"), Some(2))
        );
        let types: Vec<&str> = v["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            ["session-start", "network", "limit-hit", "session-end"]
        );
        let v = json(&logs(runner, &home, &["show", bare, "--json", "--network"]));
        assert_eq!(v["events"].as_array().unwrap().len(), 1, "{v}");

        // One text view at a time; raw streams never mix with JSON.
        logs(runner, &home, &["show", bare, "--commands", "--events"])
            .assert_code(125)
            .assert_stderr_contains("--json");
        logs(runner, &home, &["show", bare, "--stdout", "--json"]).assert_code(125);
    });
}

#[test]
fn stdout_and_stderr_come_back_byte_for_byte() {
    each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let all_bytes: Vec<u8> = (0..=255u8).collect();
        let chunks: Vec<Vec<u8>> = vec![
            b"text line\n".to_vec(),
            all_bytes.clone(),
            b"\xff\xfe invalid utf-8 \xc3\x28 \0\0 NULs\r\n".to_vec(),
            vec![0; 5000],
            b"no final newline".to_vec(),
        ];
        let w = start(runner, &home, meta("bytes", "codex", &["cat"]));
        for c in &chunks {
            w.append_stdout(c).unwrap();
        }
        w.append_stderr(b"err\0\xff").unwrap();
        let id = w.id().to_owned();
        finish(runner, w, End::exited(0));

        let out = logs_raw(runner, &home, &["show", &id, "--stdout"]);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stdout, chunks.concat());
        assert!(out.stderr.is_empty(), "{out:?}");
        let out = logs_raw(runner, &home, &["show", &id, "--stderr"]);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stdout, b"err\0\xff");
    });
}

#[test]
fn unknown_ambiguous_and_damaged_sessions_are_clear_errors() {
    each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let a = session(runner, &home, meta("a", "codex", &["true"]), &[], 0);
        let b = session(runner, &home, meta("b", "codex", &["true"]), &[], 0);
        let out = logs(runner, &home, &["show", "session-"]);
        out.assert_code(125)
            .assert_stderr_contains("vectraguard: error:")
            .assert_stderr_contains(&a)
            .assert_stderr_contains(&b)
            .assert_stderr_contains("give more characters");
        for verb in ["show", "verify", "rm"] {
            logs(runner, &home, &[verb, "session-19990101"])
                .assert_code(125)
                .assert_stderr_contains("no session matches \"session-19990101\"")
                .assert_stderr_contains("vectraguard logs list");
        }
        let broken = damaged(runner, &home, ago(60));
        logs(runner, &home, &["show", &broken])
            .assert_code(125)
            .assert_stderr_contains("metadata.json is damaged")
            .assert_stderr_contains(&format!("vectraguard logs verify {broken}"))
            .assert_stderr_contains(&format!("vectraguard logs rm {broken}"));
        // The damaged folder can still be verified (it fails) and removed.
        logs(runner, &home, &["verify", &broken])
            .assert_code(1)
            .assert_stdout_contains("integrity.log is missing");
        logs(runner, &home, &["rm", &broken]).assert_success();
        assert!(!home.logs().join(&broken).exists());
    });
}

#[test]
fn an_unreadable_records_folder_is_an_error_not_an_empty_list() {
    each_identity(|runner| {
        if runner == Runner::Root {
            return; // root reads any folder
        }
        let home = RecordsHome::new(runner);
        session(runner, &home, meta("a", "codex", &["true"]), &[], 0);
        let chmod = |mode: &str| {
            let status = runner
                .host_command("chmod")
                .arg(mode)
                .arg(home.logs())
                .status()
                .unwrap();
            assert!(status.success());
        };
        chmod("000");
        let out = logs(runner, &home, &["list"]);
        chmod("700");
        out.assert_code(125)
            .assert_stderr_contains("cannot read the session records folder")
            .assert_stderr_contains("VECTRAGUARD_HOME");
    });
}

/// Replaces `old` by `new` in line `n` (from 1) of `path`, keeping its owner.
fn edit_line(path: &Path, n: usize, old: &str, new: &str) {
    let text = fs::read_to_string(path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    assert!(
        lines[n - 1].contains(old),
        "{}: {:?}",
        path.display(),
        lines[n - 1]
    );
    lines[n - 1] = lines[n - 1].replace(old, new);
    fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn verify_tells_intact_from_edited_and_truncated() {
    each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let cmds = ["make build", "make test", "make install"];
        let edited = session(runner, &home, meta("e", "codex", &["make"]), &cmds, 0);
        let cut = session(runner, &home, meta("c", "codex", &["make"]), &cmds, 0);

        let out = logs(runner, &home, &["verify", &edited]);
        out.assert_success().assert_stdout_contains("intact (");
        let v = json(&logs(runner, &home, &["verify", &edited, "--json"]));
        assert_eq!(v["result"], "intact");
        assert!(v["records"].as_u64().unwrap() >= 8, "{v}");

        // An edited command line: named by file and line; exit status 1.
        edit_line(
            &home.logs().join(&edited).join("commands.log"),
            3,
            "make test",
            "make evil",
        );
        let out = logs(runner, &home, &["verify", &edited]);
        out.assert_code(1)
            .assert_stdout_contains("TAMPERED")
            .assert_stdout_contains("commands.log line 3 was changed");
        assert_eq!(out.lines().len(), 2, "only that line is reported\n{out}");
        let v = json(&logs(runner, &home, &["verify", &edited, "--json"]));
        assert_eq!(v["result"], "tampered");
        assert_eq!(v["problems"][0]["file"], "commands.log");
        assert_eq!(v["problems"][0]["line"], 3);

        // A truncated output file: named with the offset.
        let stdout = home.logs().join(&cut).join("stdout.log");
        fs::OpenOptions::new()
            .write(true)
            .open(&stdout)
            .unwrap()
            .set_len(2)
            .unwrap();
        logs(runner, &home, &["verify", &cut])
            .assert_code(1)
            .assert_stdout_contains("stdout.log was truncated at byte 2 (expected 6)");
    });
}

#[test]
fn rm_refuses_running_sessions_unless_forced() {
    each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let done = session(runner, &home, meta("done", "codex", &["true"]), &[], 0);
        let other = session(runner, &home, meta("other", "codex", &["true"]), &[], 0);
        let live = start(runner, &home, meta("live", "codex", &["sleep", "9"]));
        let live_id = live.id().to_owned();
        let exists = |id: &str| home.logs().join(id).exists();

        // A running session among several: nothing is removed.
        logs(runner, &home, &["rm", &done, &live_id])
            .assert_code(125)
            .assert_stderr_contains(&format!("session {live_id} is still running"))
            .assert_stderr_contains("--force");
        assert!(exists(&done) && exists(&live_id));
        // Likewise with an unknown one.
        logs(runner, &home, &["rm", &done, "session-19990101"]).assert_code(125);
        assert!(exists(&done));

        let out = logs(runner, &home, &["rm", &done, &other]);
        out.assert_success()
            .assert_stdout_contains(&format!("removed {done}"))
            .assert_stdout_contains(&format!("removed {other}"));
        assert!(!exists(&done) && !exists(&other));

        logs(runner, &home, &["rm", "--force", &live_id])
            .assert_success()
            .assert_stderr_contains("was still running");
        assert!(!exists(&live_id));
        abandon(runner, live);
        assert!(!exists(&live_id), "the writer recreated the folder");
    });
}

#[test]
fn prune_removes_old_sessions_only() {
    each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let mut old_meta = meta("old", "codex", &["true"]);
        old_meta.start_time = ago(10 * DAY);
        let w = start(runner, &home, old_meta);
        let old = w.id().to_owned();
        finish(
            runner,
            w,
            End {
                end_time: ago(10 * DAY - 60),
                ..End::exited(0)
            },
        );
        let old_damaged = damaged(runner, &home, ago(9 * DAY));
        let recent = session(runner, &home, meta("recent", "codex", &["true"]), &[], 0);
        let mut live_meta = meta("live", "codex", &["sleep", "9"]);
        live_meta.start_time = ago(20 * DAY);
        let live = start(runner, &home, live_meta);
        let live_id = live.id().to_owned();
        let exists = |id: &str| home.logs().join(id).exists();

        let out = logs(runner, &home, &["prune", "--older-than", "7d", "--dry-run"]);
        out.assert_success()
            .assert_stdout_contains(&format!("would remove {old} (last active 9d"))
            .assert_stdout_contains(&format!("would remove {old_damaged}"))
            .assert_stdout_contains("2 sessions would be removed");
        assert!(exists(&old) && exists(&old_damaged));

        let out = logs(runner, &home, &["prune", "--older-than", "1w"]);
        out.assert_success()
            .assert_stdout_contains(&format!("removed {old}"))
            .assert_stdout_contains(&format!("removed {old_damaged}"));
        assert!(
            !out.stdout.contains(&recent) && !out.stdout.contains(&live_id),
            "{out}"
        );
        assert!(!exists(&old) && !exists(&old_damaged));
        assert!(exists(&recent) && exists(&live_id));

        logs(runner, &home, &["prune", "--older-than", "7d"])
            .assert_success()
            .assert_stdout_contains("nothing to prune");
        logs(runner, &home, &["prune", "--older-than", "a while"]).assert_code(125);
        finish(runner, live, End::exited(0));
    });
}

/// Whether process `pid` has `path` open.
fn has_open(pid: u32, path: &Path) -> bool {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.filter_map(Result::ok)
        .any(|fd| fs::read_link(fd.path()).is_ok_and(|target| target == path))
}

#[test]
fn follow_prints_what_a_running_session_writes_until_it_ends() {
    each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let w = start(runner, &home, meta("follow", "codex", &["sh"]));
        let id = w.id().to_owned();
        let dir: PathBuf = w.dir().to_owned();
        w.record_command(&CommandRecord::new(10, 1, "/work", ["early-command"]))
            .unwrap();
        w.append_stdout(b"early output\n").unwrap();

        let follow = |args: &[&str]| {
            let mut vg = Vg::new(runner, home.path());
            vg.args(["logs", "show", &id, "--follow"])
                .args(args)
                .records_home(&home);
            vg.spawn()
        };
        let commands = follow(&[]);
        let stdout = follow(&["--stdout"]);
        let events = follow(&["--events", "--json"]);
        // Write the rest only once every follower is reading its file.
        for (f, file) in [
            (&commands, "commands.log"),
            (&stdout, "stdout.log"),
            (&events, "events.jsonl"),
        ] {
            assert!(
                wait_until(Duration::from_secs(20), || has_open(
                    f.pid(),
                    &dir.join(file)
                )),
                "the follower never opened {file}"
            );
        }
        for i in 0..5 {
            w.record_command(&CommandRecord::new(
                20 + i,
                10,
                "/work",
                [format!("late-command-{i}")],
            ))
            .unwrap();
            w.append_stdout(format!("late output {i}\n").as_bytes())
                .unwrap();
            w.event(Event::new("limit-hit").with("n", i)).unwrap();
            std::thread::sleep(Duration::from_millis(50));
        }
        w.append_stdout(b"partial").unwrap();
        finish(runner, w, End::exited(0));

        let out = commands.finish(Duration::from_secs(30));
        out.assert_success().assert_stdout_contains("early-command");
        for i in 0..5 {
            out.assert_stdout_contains(&format!("-- late-command-{i}"));
        }
        let out = stdout.finish(Duration::from_secs(30));
        out.assert_success();
        let expected: String = std::iter::once("early output\n".to_owned())
            .chain((0..5).map(|i| format!("late output {i}\n")))
            .chain(std::iter::once("partial".to_owned()))
            .collect();
        assert_eq!(out.stdout, expected);
        let out = events.finish(Duration::from_secs(30));
        out.assert_success();
        let types: Vec<String> = out
            .stdout
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        let mut want = vec!["session-start".to_owned()];
        want.extend((0..5).map(|_| "limit-hit".to_owned()));
        want.push("session-end".to_owned());
        assert_eq!(types, want, "{out}");

        // A finished session: everything, then the follower ends at once.
        logs(runner, &home, &["show", &id, "--follow"])
            .assert_success()
            .assert_stdout_contains("late-command-4");
    });
}

#[test]
fn follow_stops_when_the_supervisor_died() {
    each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let id = session(
            runner,
            &home,
            meta("dead", "codex", &["sh"]),
            &["echo hi"],
            0,
        );
        // The record as a supervisor killed with SIGKILL leaves it: still `running`,
        // naming a process that no longer exists.
        let path = home.logs().join(&id).join("metadata.json");
        let mut m: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        let mut child = Command::new("true").spawn().unwrap();
        let dead_pid = child.id();
        child.wait().unwrap();
        m["status"] = "running".into();
        m["end_time"] = Value::Null;
        m["supervisor"] = serde_json::json!({"pid": dead_pid, "start_ticks": 1});
        fs::write(&path, serde_json::to_vec(&m).unwrap()).unwrap();

        logs(runner, &home, &["list"])
            .assert_success()
            .assert_stdout_contains("interrupted");
        let out = Vg::new(runner, home.path())
            .args(["logs", "show", &id, "--follow"])
            .records_home(&home)
            .spawn()
            .finish(Duration::from_secs(30));
        out.assert_success().assert_stdout_contains("-- echo hi");
        logs(runner, &home, &["show", &id])
            .assert_success()
            .assert_stdout_contains("interrupted (supervisor pid");
    });
}

#[test]
fn a_session_named_after_another_ones_suffix_does_not_take_its_place() {
    each_identity(|runner| {
        let ws = super::harness::Workspace::new();
        let home = RecordsHome::new(runner);
        Vg::sandbox(runner, &ws, &[], &["true"])
            .records_home(&home)
            .run()
            .assert_success();
        let first = home.only_session();
        let first = first.file_name().unwrap().to_str().unwrap().to_owned();
        // What the end-of-run line tells the user to type.
        let suffix = first.rsplit('-').next().unwrap().to_owned();
        // A project file (which the sandbox can write) names the next session after it.
        ws.write("vectraguard.toml", format!("name = \"{suffix}\"\n"));
        Vg::sandbox(runner, &ws, &[], &["true"])
            .records_home(&home)
            .run()
            .assert_success();
        assert_eq!(home.sessions().len(), 2);
        let second = home
            .sessions()
            .into_iter()
            .map(|d| d.file_name().unwrap().to_str().unwrap().to_owned())
            .find(|id| *id != first)
            .unwrap();
        for verb in ["show", "rm"] {
            logs(runner, &home, &[verb, &suffix])
                .assert_code(125)
                .assert_stderr_contains(&first)
                .assert_stderr_contains(&second);
        }
        assert_eq!(home.sessions().len(), 2, "logs rm removed a session");
        // The full id still names each one.
        let out = logs(runner, &home, &["show", &first, "--json"]);
        assert_eq!(json(&out)["session_id"], first.as_str(), "{out}");
    });
}
