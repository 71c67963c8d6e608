//! Session records written by `sandbox run`: every exec, the streams, the metadata,
//! crash safety and tamper evidence, checked on the files a real run leaves behind.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::harness::session_metadata as metadata;
use super::harness::{
    RecordsHome, Runner, Vg, Workspace, assert_no_process_left, each_identity,
    host_processes_running, unique, wait_until,
};

/// One line of `commands.log`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Line {
    Exec {
        pid: u32,
        ppid: u32,
        cwd: String,
        /// The quoted argv, exactly as written after ` -- `.
        argv: String,
    },
    Exit {
        pid: u32,
        status: String,
    },
}

fn field<'a>(words: &[&'a str], key: &str) -> &'a str {
    words
        .iter()
        .find_map(|w| w.strip_prefix(key).and_then(|w| w.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key}= in {words:?}"))
}

fn parse_commands(text: &str) -> Vec<Line> {
    text.lines()
        .map(|line| {
            let (head, argv) = line.split_once(" -- ").unwrap_or((line, ""));
            let words: Vec<&str> = head.split(' ').collect();
            assert!(
                words[0].ends_with('Z') && words[0].contains('T'),
                "no timestamp: {line}"
            );
            match words[1] {
                "exec" => Line::Exec {
                    pid: field(&words, "pid").parse().unwrap(),
                    ppid: field(&words, "ppid").parse().unwrap(),
                    cwd: field(&words, "cwd").to_owned(),
                    argv: argv.to_owned(),
                },
                "exit" => Line::Exit {
                    pid: field(&words, "pid").parse().unwrap(),
                    status: words[3].to_owned(),
                },
                other => panic!("unknown record {other:?} in {line}"),
            }
        })
        .collect()
}

fn read(dir: &Path, file: &str) -> Vec<u8> {
    std::fs::read(dir.join(file)).unwrap_or_else(|e| panic!("{}/{file}: {e}", dir.display()))
}

/// The position of the exec whose argv is `argv`, and its line.
fn exec_of<'a>(lines: &'a [Line], argv: &str) -> (usize, &'a Line) {
    lines
        .iter()
        .enumerate()
        .find(|(_, l)| matches!(l, Line::Exec { argv: a, .. } if a == argv))
        .unwrap_or_else(|| panic!("no exec of `{argv}` in {lines:#?}"))
}

/// The recorded exit of `pid` after position `after`.
fn exit_of(lines: &[Line], after: usize, pid: u32) -> String {
    lines[after..]
        .iter()
        .find_map(|l| match l {
            Line::Exit { pid: p, status } if *p == pid => Some(status.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no exit of pid {pid} in {lines:#?}"))
}

fn pid_of(line: &Line) -> u32 {
    match line {
        Line::Exec { pid, .. } | Line::Exit { pid, .. } => *pid,
    }
}

#[test]
fn every_program_executed_is_recorded_in_order_with_its_exit_status() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        ws.write_mode(
            "job.sh",
            "#!/bin/sh\n\
             printf 'a\\nb\\n' | grep b | wc -l\n\
             ( cd /tmp && /bin/ls -d . )\n\
             sleep 0.2 &\n\
             /bin/echo 'two words' \"it's\"\n\
             wait\n\
             /bin/false || true\n\
             sh -c 'exit 7'\n\
             echo done\n",
            0o755,
        );
        let out = Vg::new(runner, ws.path())
            .args(["sandbox", "run", "job.sh"])
            .records_home(&home)
            .run();
        out.assert_success();
        let dir = home.only_session();
        let text = String::from_utf8(read(&dir, "commands.log")).unwrap();
        let lines = parse_commands(&text);

        let script = format!("/bin/sh {}", ws.join("job.sh").display());
        let (first, top) = exec_of(&lines, &script);
        assert_eq!(first, 0, "the command itself comes first:\n{text}");
        let top_pid = pid_of(top);
        let (grep, grep_line) = exec_of(&lines, "grep b");
        let (wc, wc_line) = exec_of(&lines, "wc -l");
        let (ls, ls_line) = exec_of(&lines, "/bin/ls -d .");
        let (sleep, sleep_line) = exec_of(&lines, "sleep 0.2");
        let (echo, _) = exec_of(&lines, "/bin/echo 'two words' 'it'\\''s'");
        let (fals, false_line) = exec_of(&lines, "/bin/false");
        let (sh7, sh7_line) = exec_of(&lines, "sh -c 'exit 7'");
        // Sequential commands are recorded in the order they ran.
        // The background sleep runs alongside the echo, but `wait` ends it before false.
        for (a, b) in [
            (grep, ls),
            (wc, ls),
            (ls, sleep),
            (ls, echo),
            (sleep, fals),
            (echo, fals),
            (fals, sh7),
        ] {
            assert!(a < b, "out of order:\n{text}");
        }
        // The subshell's command ran in /tmp, the others in the workspace; every
        // command is a child of the script, found by its pid inside the sandbox.
        let Line::Exec { cwd, .. } = ls_line else {
            unreachable!()
        };
        assert_eq!(cwd, "/tmp", "{text}");
        for line in [grep_line, wc_line, sleep_line, false_line, sh7_line] {
            let Line::Exec { ppid, cwd, .. } = line else {
                unreachable!()
            };
            assert_eq!(*ppid, top_pid, "{text}");
            assert_eq!(cwd, &ws.arg(""), "{text}");
        }
        assert_eq!(exit_of(&lines, ls, pid_of(ls_line)), "status=0", "{text}");
        assert_eq!(exit_of(&lines, sleep, pid_of(sleep_line)), "status=0");
        assert_eq!(exit_of(&lines, fals, pid_of(false_line)), "status=1");
        assert_eq!(exit_of(&lines, sh7, pid_of(sh7_line)), "status=7");
        assert_eq!(exit_of(&lines, first, top_pid), "status=0");
        // Shell builtins (echo, printf, cd) are not programs: never recorded.
        assert!(!text.contains(" -- echo"), "{text}");
    });
}

#[test]
fn a_program_killed_right_after_exec_is_recorded_with_its_signal() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        // The inner shell is killed as soon as it runs; the outer one then dies by a
        // signal too, which only init sees.
        let inner = "sh -c 'kill -KILL $$'";
        let out = Vg::sandbox(
            runner,
            &ws,
            &[],
            &["sh", "-c", &format!("{inner}; kill -TERM $$")],
        )
        .records_home(&home)
        .run();
        out.assert_code(143);
        let dir = home.only_session();
        let text = String::from_utf8(read(&dir, "commands.log")).unwrap();
        let lines = parse_commands(&text);
        let (i, top) = exec_of(
            &lines,
            &vg_records::quote_argv(["sh", "-c", &format!("{inner}; kill -TERM $$")]),
        );
        assert_eq!(exit_of(&lines, i, pid_of(top)), "signal=15", "{text}");
        exec_of(
            &lines,
            &vg_records::quote_argv(["sh", "-c", "kill -KILL $$"]),
        );
        let meta = metadata(&dir);
        assert_eq!(meta["status"], "signalled");
        assert_eq!(meta["signal"], 15);
        assert_eq!(meta["exit_code"], 143);
    });
}

#[test]
fn stdout_and_stderr_are_shown_and_recorded_byte_exact() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        // Binary data, every byte value, invalid UTF-8 and NULs, several MiB.
        let script = r#"
import hashlib, sys
data = bytes(range(256)) + b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(120000))
err = bytes(reversed(data[:70000])) + b"\xff\xfe\x00"
open("expected.out", "wb").write(data)
open("expected.err", "wb").write(err)
for i in range(0, len(data), 65521):
    sys.stdout.buffer.write(data[i:i + 65521]); sys.stdout.flush()
    if i % (65521 * 8) == 0:
        sys.stderr.buffer.write(err[:10]); sys.stderr.flush(); err = err[10:]
sys.stderr.buffer.write(err)
"#;
        let shown_out = ws.join("shown.out");
        let shown_err = ws.join("shown.err");
        // --quiet: only the command's own bytes on stderr, not the session line.
        let out = Vg::sandbox(runner, &ws, &["--quiet"], &["python3", "-c", script])
            .through_shell(&format!(
                "\"$@\" > {} 2> {}",
                shown_out.display(),
                shown_err.display()
            ))
            .records_home(&home)
            .run();
        out.assert_success();
        let dir = home.only_session();
        let expected_out = std::fs::read(ws.join("expected.out")).unwrap();
        let expected_err = std::fs::read(ws.join("expected.err")).unwrap();
        assert!(expected_out.len() > 3_000_000);
        assert!(
            read(&dir, "stdout.log") == expected_out,
            "stdout.log differs"
        );
        assert!(
            read(&dir, "stderr.log") == expected_err,
            "stderr.log differs"
        );
        assert!(
            std::fs::read(&shown_out).unwrap() == expected_out,
            "shown stdout differs"
        );
        assert!(
            std::fs::read(&shown_err).unwrap() == expected_err,
            "shown stderr differs"
        );
    });
}

#[test]
fn metadata_describes_the_session_without_secret_values() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let secret = format!("hunter2-{}", unique());
        let out = Vg::sandbox(
            runner,
            &ws,
            &[
                "--name",
                "build-42",
                "--description",
                "nightly build",
                "--env",
                &format!("API_TOKEN={secret}"),
            ],
            &["sh", "-c", "exit 5"],
        )
        .env("VECTRAGUARD_AGENT", "claude-code")
        .records_home(&home)
        .run();
        out.assert_code(5);
        let dir = home.only_session();
        let raw = String::from_utf8(read(&dir, "metadata.json")).unwrap();
        assert!(
            !raw.contains(&secret),
            "an env value leaked into metadata:\n{raw}"
        );
        let meta: Value = serde_json::from_str(&raw).unwrap();
        let name = dir.file_name().unwrap().to_str().unwrap();
        assert_eq!(meta["session_id"], name);
        assert!(
            name.starts_with("session-") && name.len() == "session-20250101T000000Z-abcdef".len()
        );
        assert_eq!(meta["name"], "build-42");
        assert_eq!(meta["agent"], "claude-code");
        assert_eq!(meta["origin"], "agent");
        assert_eq!(meta["description"], "nightly build");
        assert_eq!(meta["command"], serde_json::json!(["sh", "-c", "exit 5"]));
        assert_eq!(meta["status"], "exited");
        assert_eq!(meta["exit_code"], 5);
        assert_eq!(meta["cwd_outside"], ws.arg(""));
        assert_eq!(meta["cwd_inside"], ws.arg(""));
        // The seed format's name for the same directory.
        assert_eq!(meta["cwd"], ws.arg(""));
        assert_eq!(meta["user"]["uid"], runner.invoker().uid);
        assert_eq!(meta["network"]["mode"], "none");
        assert!(
            meta["env_keys"]
                .as_array()
                .unwrap()
                .contains(&"API_TOKEN".into())
        );
        assert!(meta["mounts"][0].as_str().unwrap().starts_with(&ws.arg("")));
        assert!(meta["end_time"].as_str().unwrap() >= meta["start_time"].as_str().unwrap());
        // The layers are what init reported as enforced.
        let layers = &meta["layers"];
        assert!(layers["landlock_abi"].as_u64().unwrap() >= 1, "{layers}");
        assert_eq!(layers["seccomp"], "filter+notify");
        assert_eq!(layers["no_new_privs"], true);
        assert_eq!(layers["capabilities"], serde_json::json!([]));
        for ns in ["user", "mount", "pid", "network", "ipc", "uts", "cgroup"] {
            assert!(
                layers["namespaces"]
                    .as_array()
                    .unwrap()
                    .contains(&ns.into()),
                "{layers}"
            );
        }
        // --agent wins over the environment.
        Vg::sandbox(runner, &ws, &["--agent", "codex"], &["true"])
            .env("VECTRAGUARD_AGENT", "claude-code")
            .records_home(&home)
            .run()
            .assert_success();
        let second = home.sessions().into_iter().find(|d| *d != dir).unwrap();
        assert_eq!(metadata(&second)["agent"], "codex");
    });
}

#[test]
fn records_are_owner_only() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        Vg::sandbox(runner, &ws, &[], &["true"])
            .records_home(&home)
            .run()
            .assert_success();
        let dir = home.only_session();
        for path in std::iter::once(home.logs()).chain(std::iter::once(dir.clone())) {
            let m = std::fs::metadata(&path).unwrap();
            assert_eq!(m.permissions().mode() & 0o777, 0o700, "{}", path.display());
            assert_eq!(m.uid(), runner.invoker().uid, "{}", path.display());
        }
        for file in [
            "metadata.json",
            "commands.log",
            "stdout.log",
            "stderr.log",
            "events.jsonl",
        ] {
            let m = std::fs::metadata(dir.join(file)).unwrap();
            assert_eq!(m.permissions().mode() & 0o777, 0o600, "{file}");
            assert_eq!(m.uid(), runner.invoker().uid, "{file}");
        }
        let events = String::from_utf8(read(&dir, "events.jsonl")).unwrap();
        let kinds: Vec<String> = events
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(kinds.first().map(String::as_str), Some("session-start"));
        assert_eq!(kinds.last().map(String::as_str), Some("session-end"));
    });
}

#[test]
fn sigkill_of_the_supervisor_leaves_an_interrupted_verifiable_record() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let u = unique();
        let sleep = format!("sleep 71.{u}");
        let script = format!("echo before; echo oops >&2; exec {sleep}");
        let running = Vg::sandbox(runner, &ws, &[], &["sh", "-c", &script])
            .records_home(&home)
            .spawn();
        let dir = loop_until_session(&home);
        // The tracer chains its lines in batches, at the latest once it is idle for
        // a few milliseconds: a kill before that leaves them unchained (which
        // `logs verify` explains); this test is about a kill after it.
        let started = wait_until(Duration::from_secs(10), || {
            !host_processes_running(&sleep).is_empty()
                && std::fs::read(dir.join("stderr.log")).is_ok_and(|s| s == b"oops\n")
                && commands_chained(&dir)
        });
        assert!(started, "the sandboxed sleep never started");
        running.signal("KILL");
        let out = running.finish(Duration::from_secs(10));
        assert_eq!(out.code(), None, "vectraguard was not killed\n{out}");
        assert_no_process_left(&sleep, &out);

        assert_eq!(read(&dir, "stdout.log"), b"before\n");
        assert_eq!(read(&dir, "stderr.log"), b"oops\n");
        let text = String::from_utf8(read(&dir, "commands.log")).unwrap();
        exec_of(&parse_commands(&text), &sleep);
        let list = Vg::new(runner, ws.path())
            .args(["logs", "list", "--json"])
            .records_home(&home)
            .run();
        list.assert_success();
        let sessions: Value = serde_json::from_str(&list.stdout).unwrap();
        assert_eq!(sessions[0]["status"], "interrupted", "{}", list.stdout);
        let verify = Vg::new(runner, ws.path())
            .args(["logs", "verify", dir.file_name().unwrap().to_str().unwrap()])
            .records_home(&home)
            .run();
        verify.assert_success().assert_stdout_contains("intact");
    });
}

/// Whether `integrity.log` chains all of `commands.log` (and it is not empty).
fn commands_chained(dir: &Path) -> bool {
    let len = std::fs::metadata(dir.join("commands.log")).map_or(0, |m| m.len());
    let end = std::fs::read_to_string(dir.join("integrity.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.get(1) == Some(&"commands.log"))
                .then(|| {
                    f.get(2)?
                        .parse::<u64>()
                        .ok()?
                        .checked_add(f.get(3)?.parse().ok()?)
                })
                .flatten()
        })
        .max();
    len > 0 && end == Some(len)
}

fn loop_until_session(home: &RecordsHome) -> PathBuf {
    let found = wait_until(Duration::from_secs(10), || home.sessions().len() == 1);
    assert!(found, "no session folder appeared");
    home.only_session()
}

#[test]
fn verify_names_an_edited_line_and_a_truncated_file() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        Vg::sandbox(
            runner,
            &ws,
            &[],
            &["sh", "-c", "/bin/echo one; /bin/echo two; /bin/echo three"],
        )
        .records_home(&home)
        .run()
        .assert_success();
        let dir = home.only_session();
        let id = dir.file_name().unwrap().to_str().unwrap().to_owned();
        let verify = |runner: Runner| {
            Vg::new(runner, ws.path())
                .args(["logs", "verify", &id])
                .records_home(&home)
                .run()
        };
        verify(runner).assert_success();

        // An edited command line: `two` becomes `TWO`, same length.
        let commands = dir.join("commands.log");
        let original = std::fs::read_to_string(&commands).unwrap();
        std::fs::write(
            &commands,
            original.replace("/bin/echo two", "/bin/echo TWO"),
        )
        .unwrap();
        let out = verify(runner);
        out.assert_code(1);
        assert!(
            out.stdout.contains("commands.log") || out.stderr.contains("commands.log"),
            "verify does not name the edited file\n{out}"
        );
        std::fs::write(&commands, &original).unwrap();
        verify(runner).assert_success();

        // A truncated stream.
        let stdout = dir.join("stdout.log");
        let data = std::fs::read(&stdout).unwrap();
        std::fs::write(&stdout, &data[..data.len() - 3]).unwrap();
        let out = verify(runner);
        out.assert_code(1);
        assert!(
            out.stdout.contains("stdout.log") || out.stderr.contains("stdout.log"),
            "verify does not name the truncated file\n{out}"
        );
    });
}

#[test]
fn a_command_that_cannot_start_is_recorded_as_failed_to_start() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let out = Vg::sandbox(runner, &ws, &[], &["/no/such/program"])
            .records_home(&home)
            .run();
        out.assert_code(127);
        let meta = metadata(&home.only_session());
        assert_eq!(meta["status"], "failed-to-start", "{meta}");
        assert_eq!(meta["exit_code"], 127);
        assert!(
            meta["error"].as_str().unwrap().contains("No such file"),
            "{meta}"
        );
    });
}

#[test]
fn an_unwritable_records_folder_is_refused_before_anything_runs() {
    each_identity(|runner| {
        let ws = Workspace::new();
        // A records home below a regular file can never be created, even by root.
        let blocker = ws.write("not-a-dir", "x");
        let out = Vg::sandbox(runner, &ws, &[], &["touch", &ws.arg("ran")])
            .env("VECTRAGUARD_HOME", &blocker.display().to_string())
            .run();
        out.assert_code(125);
        out.assert_stderr_contains("VECTRAGUARD_HOME");
        assert!(!ws.exists("ran"), "the command ran without a record\n{out}");
    });
}

#[test]
fn the_sandbox_cannot_reach_its_own_records() {
    each_identity(|runner| {
        let ws = Workspace::new();
        // Records inside the workspace would let the sandbox rewrite its own history.
        let home = ws.mkdir("records");
        let out = Vg::sandbox(runner, &ws, &[], &["touch", &ws.arg("ran")])
            .env("VECTRAGUARD_HOME", &home.display().to_string())
            .run();
        out.assert_code(125);
        out.assert_stderr_contains("records");
        assert!(!ws.exists("ran"), "the command ran\n{out}");
        // And the records of other sessions are not visible inside (private /tmp, home).
        let home = RecordsHome::new(runner);
        Vg::sandbox(runner, &ws, &[], &["true"])
            .records_home(&home)
            .run()
            .assert_success();
        let probe = Vg::sandbox(
            runner,
            &ws,
            &[],
            &[
                "sh",
                "-c",
                &format!("ls {} 2>&1 || echo hidden", home.logs().display()),
            ],
        )
        .records_home(&home)
        .run();
        probe.assert_success().assert_stdout_contains("hidden");
    });
}

#[test]
fn the_file_executed_is_recorded_even_when_argv0_lies() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        Vg::sandbox(
            runner,
            &ws,
            &[],
            &["bash", "-c", "exec -a innocuous /bin/true x"],
        )
        .records_home(&home)
        .run()
        .assert_success();
        let text = String::from_utf8(read(&home.only_session(), "commands.log")).unwrap();
        let line = text
            .lines()
            .find(|l| l.ends_with(" -- innocuous x"))
            .unwrap_or_else(|| panic!("no exec of innocuous:\n{text}"));
        assert!(line.contains(" exe=/bin/true "), "{line}");
    });
}

#[test]
fn records_in_a_directory_every_sandbox_can_read_are_refused() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = Vg::sandbox(runner, &ws, &[], &["touch", &ws.arg("ran")])
            .env("VECTRAGUARD_HOME", &format!("/opt/vg-records-{}", unique()))
            .run();
        out.assert_code(125).assert_stderr_contains("/opt");
        assert!(!ws.exists("ran"), "{out}");
    });
}

#[test]
fn closing_our_output_gives_the_sandboxed_writer_sigpipe() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = Vg::sandbox(runner, &ws, &[], &["yes"])
            .through_shell("\"$@\" | head -c 5 >/dev/null; echo \"status=${PIPESTATUS[0]}\"")
            .run();
        out.assert_success();
        assert_eq!(out.field("status"), "141", "{out}");
    });
}

/// The record is completed once nothing of the sandbox runs any more. Init ends what
/// the command left running and only then says so, and the supervisor writes the
/// record's end while init itself exits: a writer left behind is ended first, so
/// its output is whole in the record, its end is there, and nothing it does comes
/// after. With each exec recorder (as an unprivileged user, asking for the BPF one
/// falls back to seccomp notification).
#[test]
fn what_the_command_leaves_running_is_ended_before_the_record_is_completed() {
    each_identity(|runner| {
        for recorder in ["bpf", "seccomp"] {
            let ws = Workspace::new();
            let home = RecordsHome::new(runner);
            let writer = "sh -c 'while :; do echo tick >> left.log; echo tick; done'";
            let out = Vg::new(runner, ws.path())
                .args(["sandbox", "run", "--", "sh", "-c"])
                .arg(format!(
                    "{writer} & while [ ! -s left.log ]; do :; done; exit 3"
                ))
                .env("VECTRAGUARD_EXEC_TRACE", recorder)
                .records_home(&home)
                .run();
            out.assert_code(3);
            // Nothing writes any more once vectraguard has returned.
            let size = || {
                std::fs::metadata(ws.join("left.log"))
                    .map(|m| m.len())
                    .unwrap()
            };
            let before = size();
            std::thread::sleep(Duration::from_millis(300));
            assert_eq!(
                size(),
                before,
                "the writer outlived the session ({recorder})"
            );
            // Its output is whole: every line it wrote to the pipe (one `write` each).
            let dir = home.only_session();
            let stdout = String::from_utf8(read(&dir, "stdout.log")).unwrap();
            assert!(
                !stdout.is_empty() && stdout.lines().all(|l| l == "tick") && stdout.ends_with('\n'),
                "{recorder}: {stdout:?}"
            );
            // It was ended, and that is recorded.
            let text = String::from_utf8(read(&dir, "commands.log")).unwrap();
            let lines = parse_commands(&text);
            let (at, line) = exec_of(&lines, writer);
            assert_eq!(
                exit_of(&lines, at, pid_of(line)),
                "signal=9",
                "{recorder}:\n{text}"
            );
            Vg::new(runner, ws.path())
                .args(["logs", "verify", "last"])
                .records_home(&home)
                .run()
                .assert_success();
        }
    });
}
