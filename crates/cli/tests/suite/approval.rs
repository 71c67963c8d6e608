//! The approval gate (`--ask LEVEL`): a risky exec is held in the kernel until
//! `vectraguard approve`/`deny` or its time-out decides, and every request and
//! decision is recorded.

use std::time::Duration;

use serde_json::Value;

use super::harness::{RecordsHome, Runner, Workspace, each_identity, unique, wait_until};
use super::live::{counting_server, events, start_live, vg};

/// A script whose one risky step (`rm -rf` outside the workspace, CRITICAL) is the
/// only exec the gate holds; what happened is left in `result` in the workspace.
const SCRIPT: &str = r#"#!/bin/sh
mkdir -p /tmp/victim && echo data > /tmp/victim/file
echo started > started
sh ./child.sh
echo "rm=$?" > rm-status
if [ -e /tmp/victim/file ]; then echo survived > result; else echo deleted > result; fi
"#;

/// The grandchild: run by `child.sh`, itself run by `run.sh`.
const CHILD: &str = "#!/bin/sh\necho child > child-ran\nrm -rf /tmp/victim\n";

fn workspace() -> Workspace {
    let ws = Workspace::new();
    ws.write("run.sh", SCRIPT);
    ws.write("child.sh", CHILD);
    ws
}

/// Waits until `session` holds a request; returns the first one.
pub(super) fn first_pending(
    runner: Runner,
    ws: &Workspace,
    home: &RecordsHome,
    session: &str,
) -> Value {
    let mut found = Value::Null;
    let held = wait_until(Duration::from_secs(20), || {
        let out = vg(runner, ws, home, &["approvals", session, "--json"]);
        let list: Vec<Value> = serde_json::from_str(&out.stdout).unwrap_or_default();
        match list.into_iter().next() {
            Some(first) => {
                found = first;
                true
            }
            None => false,
        }
    });
    assert!(held, "nothing was held for approval");
    found
}

fn approvals_of(dir: &std::path::Path) -> Vec<Value> {
    events(dir)
        .into_iter()
        .filter(|e| e["type"] == "approval")
        .collect()
}

#[test]
fn a_held_grandchild_runs_only_once_approved_and_never_when_denied() {
    each_identity(|runner| {
        for verdict in ["approve", "deny"] {
            let ws = workspace();
            let home = RecordsHome::new(runner);
            let name = format!("gate-{verdict}-{}", unique());
            let (running, socket) = start_live(
                runner,
                &ws,
                &home,
                &name,
                &["--ask", "high"],
                &["sh", "./run.sh"],
            );
            let dir = socket.parent().unwrap().to_path_buf();
            let pending = first_pending(runner, &ws, &home, &name);
            // Only the risky grandchild is held: its parents already ran.
            assert_eq!(pending["level"], "CRITICAL", "{pending}");
            assert_eq!(pending["subject"]["kind"], "exec", "{pending}");
            assert_eq!(
                pending["subject"]["argv"],
                serde_json::json!(["rm", "-rf", "/tmp/victim"]),
                "{pending}"
            );
            let parents: Vec<&str> = pending["subject"]["parents"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["command"].as_str().unwrap())
                .collect();
            assert_eq!(parents, ["sh ./child.sh", "sh ./run.sh"], "{pending}");
            assert!(
                ws.exists("child-ran"),
                "the child had not run before its own exec"
            );
            assert!(
                !ws.exists("result"),
                "the script went on past the held exec"
            );
            let listed = vg(runner, &ws, &home, &["ps", "--json"]);
            let ps: Vec<Value> = serde_json::from_str(&listed.stdout).unwrap();
            assert_eq!(ps[0]["pending_approvals"], 1, "{listed}");

            let id = pending["id"].to_string();
            vg(runner, &ws, &home, &[verdict, &name, &id]).assert_success();
            running.finish(Duration::from_secs(20)).assert_success();

            let (result, status) = match verdict {
                "approve" => ("deleted", "rm=0"),
                _ => ("survived", "rm=126"),
            };
            assert_eq!(ws.read("result").as_deref().map(str::trim), Some(result));
            assert_eq!(ws.read("rm-status").as_deref().map(str::trim), Some(status));

            let approvals = approvals_of(&dir);
            let decided: Vec<&Value> = approvals
                .iter()
                .filter(|e| e["event"] == "decided")
                .collect();
            assert_eq!(decided.len(), 1, "{approvals:?}");
            let expected = if verdict == "approve" {
                "approve"
            } else {
                "deny"
            };
            assert_eq!(decided[0]["decision"], expected, "{approvals:?}");
            assert_eq!(decided[0]["who"]["by"], "client", "{approvals:?}");
            assert_eq!(decided[0]["who"]["uid"], runner.invoker().uid);
            assert_eq!(decided[0]["scope"], "once");
            assert!(approvals.iter().any(|e| e["event"] == "asked"));
            let commands = std::fs::read_to_string(dir.join("commands.log")).unwrap();
            let rm_line = commands
                .lines()
                .find(|l| l.ends_with("-- rm -rf /tmp/victim"))
                .unwrap_or_else(|| panic!("no rm line in\n{commands}"));
            assert_eq!(
                rm_line.contains(" denied=1 "),
                verdict == "deny",
                "{commands}"
            );
            // Shown by `logs show --approvals`.
            vg(runner, &ws, &home, &["logs", "show", &name, "--approvals"])
                .assert_success()
                .assert_stdout_contains("rm -rf /tmp/victim");
        }
    });
}

#[test]
fn an_unanswered_request_is_denied_when_its_time_out_passes() {
    each_identity(|runner| {
        let ws = workspace();
        let home = RecordsHome::new(runner);
        // No terminal and no client: the run must end on its own.
        let out = super::harness::Vg::sandbox(
            runner,
            &ws,
            &["--ask", "critical", "--approval-timeout", "1s"],
            &["sh", "./run.sh"],
        )
        .records_home(&home)
        .run();
        out.assert_success();
        assert_eq!(
            ws.read("result").as_deref().map(str::trim),
            Some("survived")
        );
        let dir = home.only_session();
        let decided: Vec<Value> = approvals_of(&dir)
            .into_iter()
            .filter(|e| e["event"] == "decided")
            .collect();
        // One request, however many PATH directories the shell tried.
        assert_eq!(decided.len(), 1, "{decided:?}");
        assert_eq!(decided[0]["who"]["by"], "timeout", "{decided:?}");
        assert_eq!(decided[0]["decision"], "deny", "{decided:?}");
        // The command itself denied: exit 126, and the reason is said, not EPERM.
        let home = RecordsHome::new(runner);
        super::harness::Vg::sandbox(
            runner,
            &ws,
            &["--ask", "high", "--approval-timeout", "1s"],
            &["sh", "-c", "rm -rf /tmp/victim"],
        )
        .records_home(&home)
        .run()
        .assert_code(126)
        .assert_stderr_contains("the approval gate denied it because nobody answered");
        let meta = super::harness::session_metadata(&home.only_session());
        assert!(
            meta["error"]
                .as_str()
                .is_some_and(|e| e.contains("the approval gate denied the command")),
            "{meta}"
        );
    });
}

#[test]
fn a_session_scope_approval_answers_the_same_exec_again_without_asking() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write(
            "twice.sh",
            "#!/bin/sh\nfor i in 1 2; do mkdir -p /tmp/v; rm -rf /tmp/v && echo ok >> done; done\n",
        );
        let home = RecordsHome::new(runner);
        let name = format!("scope-{}", unique());
        let (running, socket) = start_live(
            runner,
            &ws,
            &home,
            &name,
            &["--ask", "high"],
            &["sh", "./twice.sh"],
        );
        let pending = first_pending(runner, &ws, &home, &name);
        let id = pending["id"].to_string();
        vg(
            runner,
            &ws,
            &home,
            &["approve", &name, &id, "--scope", "session"],
        )
        .assert_success()
        .assert_stdout_contains("every identical request");
        running.finish(Duration::from_secs(20)).assert_success();
        assert_eq!(ws.read("done").as_deref(), Some("ok\nok\n"));
        let decided: Vec<Value> = approvals_of(socket.parent().unwrap())
            .into_iter()
            .filter(|e| e["event"] == "decided")
            .collect();
        assert_eq!(decided.len(), 2, "{decided:?}");
        assert_eq!(decided[1]["remembered_from"], pending["id"], "{decided:?}");
    });
}

#[test]
fn bad_decisions_exit_125_and_leave_the_session_running() {
    each_identity(|runner| {
        let ws = workspace();
        ws.write(
            "two.sh",
            "#!/bin/sh\nrm -rf /tmp/a; echo \"a=$?\" >> out\nrm -rf /tmp/b; echo \"b=$?\" >> out\n",
        );
        let home = RecordsHome::new(runner);
        let name = format!("bad-{}", unique());
        let (running, _socket) = start_live(
            runner,
            &ws,
            &home,
            &name,
            &["--ask", "high"],
            &["sh", "./two.sh"],
        );
        let pending = first_pending(runner, &ws, &home, &name);
        let id = pending["id"].to_string();
        for (args, message) in [
            (vec!["approve", "no-such-session", "1"], "no-such-session"),
            (
                vec!["approve", name.as_str(), "999"],
                "no approval request 999",
            ),
            (vec!["deny", name.as_str(), "x"], "invalid value"),
            (
                vec!["approve", name.as_str(), id.as_str(), "--scope", "forever"],
                "use once or session",
            ),
            (vec!["approvals", "no-such-session"], "no-such-session"),
        ] {
            vg(runner, &ws, &home, &args)
                .assert_code(125)
                .assert_stderr_contains(message);
        }
        // Still held, still answerable; then no longer, while the session goes on.
        vg(runner, &ws, &home, &["deny", &name, &id]).assert_success();
        let second = wait_until(Duration::from_secs(20), || {
            let out = vg(runner, &ws, &home, &["approvals", &name, "--json"]);
            out.stdout.contains("/tmp/b")
        });
        assert!(second, "the second exec was never held");
        vg(runner, &ws, &home, &["approve", &name, &id])
            .assert_code(125)
            .assert_stderr_contains("already decided");
        let next = first_pending(runner, &ws, &home, &name)["id"].to_string();
        vg(runner, &ws, &home, &["approve", &name, &next]).assert_success();
        running.finish(Duration::from_secs(20)).assert_success();
        assert_eq!(ws.read("out").as_deref(), Some("a=126\nb=0\n"));
    });
}

#[test]
fn ask_is_checked_before_anything_runs() {
    each_identity(|runner| {
        let ws = workspace();
        let home = RecordsHome::new(runner);
        for (options, message) in [
            (
                vec!["--ask", "sometimes"],
                "unknown approval level 'sometimes'",
            ),
            (vec!["--ask", "high", "--no-record"], "remove --no-record"),
            (vec!["--approval-timeout", "soon"], "--approval-timeout"),
        ] {
            super::harness::Vg::sandbox(runner, &ws, &options, &["sh", "./run.sh"])
                .records_home(&home)
                .run()
                .assert_code(125)
                .assert_stderr_contains(message);
            assert!(!ws.exists("started"), "{options:?} ran the command");
        }
        ws.write("vectraguard.toml", "ask = \"sometimes\"\n");
        super::harness::Vg::sandbox(runner, &ws, &[], &["sh", "./run.sh"])
            .records_home(&home)
            .run()
            .assert_code(125)
            .assert_stderr_contains("invalid ask 'sometimes'");
        assert!(!ws.exists("started"));
        std::fs::remove_file(ws.join("vectraguard.toml")).unwrap();
        // Without --ask nothing is held: a decision is refused with a reason.
        let name = format!("noask-{}", unique());
        let (running, _) = start_live(runner, &ws, &home, &name, &[], &["sleep", "30"]);
        vg(runner, &ws, &home, &["approve", &name, "1"])
            .assert_code(125)
            .assert_stderr_contains("started without --ask");
        vg(runner, &ws, &home, &["stop", &name]).assert_success();
        running.finish(Duration::from_secs(20));
    });
}

/// The race an approval invites: a second thread rewrites the argv between the
/// tracer's read (what is approved) and the kernel's (what runs).
const SWAPPER: &str = r#"
import ctypes, os, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("/tmp/keep", exist_ok=True)
os.makedirs("/tmp/okay", exist_ok=True)
for _ in range(40):
    pid = os.fork()
    if pid == 0:
        target = ctypes.create_string_buffer(b"/tmp/okay")
        def flip():
            while True:
                ctypes.memmove(target, b"/tmp/keep", 9)
                ctypes.memmove(target, b"/tmp/okay", 9)
        threading.Thread(target=flip, daemon=True).start()
        argv = (ctypes.c_char_p * 4)(b"rm", b"-rf", ctypes.cast(target, ctypes.c_char_p), None)
        libc.execve(b"/usr/bin/rm", argv, None)
        os._exit(99)
    os.waitpid(pid, 0)
    os.makedirs("/tmp/okay", exist_ok=True)
with open("result", "w") as f:
    f.write("keep=%s\n" % os.path.isdir("/tmp/keep"))
"#;

/// ATTACK: approve `rm -rf /tmp/okay` for the session while a thread keeps swapping
/// the argument for `/tmp/keep`; whatever the kernel reads after the approval, only
/// the approved argv may run (the rest is killed at its exec, before it runs).
#[test]
fn an_argv_swapped_after_approval_never_runs() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write("swap.py", SWAPPER);
        let home = RecordsHome::new(runner);
        let name = format!("swap-{}", unique());
        let (running, socket) = start_live(
            runner,
            &ws,
            &home,
            &name,
            &["--ask", "high"],
            &["python3", "./swap.py"],
        );
        // Approve the honest argv for the session, deny the swapped one for the session.
        let mut answered = (false, false);
        let done = wait_until(Duration::from_secs(60), || {
            let out = vg(runner, &ws, &home, &["approvals", &name, "--json"]);
            let list: Vec<Value> = serde_json::from_str(&out.stdout).unwrap_or_default();
            for p in list {
                let id = p["id"].to_string();
                let honest = p["subject"]["argv"][2] == "/tmp/okay";
                let verdict = if honest { "approve" } else { "deny" };
                vg(
                    runner,
                    &ws,
                    &home,
                    &[verdict, &name, &id, "--scope", "session"],
                );
                if honest {
                    answered.0 = true;
                } else {
                    answered.1 = true;
                }
            }
            ws.exists("result")
        });
        assert!(done, "the attacker never finished");
        running.finish(Duration::from_secs(30)).assert_success();
        assert_eq!(ws.read("result").as_deref(), Some("keep=True\n"));
        let mismatches = approvals_of(socket.parent().unwrap())
            .into_iter()
            .filter(|e| e["event"] == "mismatch")
            .count();
        // The race was run (and lost by the attacker) at least once.
        assert!(mismatches > 0, "no swap was ever caught: {answered:?}");
    });
}

/// A loopback server counting connections, and a script connecting to it by a name
/// no rule allows (`--add-host` only pins where the name points).
fn destination_session(
    runner: Runner,
    options: &[&str],
) -> (
    Workspace,
    RecordsHome,
    String,
    super::harness::Running,
    std::path::PathBuf,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    let ws = Workspace::new();
    let home = RecordsHome::new(runner);
    let (port, accepted) = counting_server();
    ws.write(
        "net.sh",
        format!(
            "#!/bin/bash\nif (exec 3<>/dev/tcp/echo.test/{port}) 2>/dev/null; then echo connected; else echo refused; fi\n"
        ),
    );
    let name = format!("dest-{}", unique());
    let mut all = vec!["--network", "allow", "--add-host", "echo.test:127.0.0.1"];
    all.extend_from_slice(options);
    let (running, socket) = start_live(runner, &ws, &home, &name, &all, &["bash", "./net.sh"]);
    (ws, home, name, running, socket, accepted)
}

#[test]
fn a_held_destination_connects_once_approved_and_not_when_denied() {
    each_identity(|runner| {
        for verdict in ["approve", "deny"] {
            let (ws, home, name, running, socket, accepted) =
                destination_session(runner, &["--ask", "high"]);
            let pending = first_pending(runner, &ws, &home, &name);
            assert_eq!(pending["subject"]["kind"], "destination", "{pending}");
            assert_eq!(pending["subject"]["name"], "echo.test", "{pending}");
            // The process that asked, found from its socket.
            assert_eq!(pending["subject"]["asked_by"], "bash ./net.sh", "{pending}");
            assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 0);
            let id = pending["id"].to_string();
            // Later than the resolver's 4 s it once gave up after, while the
            // question was held (a busy machine's answer came too late too).
            std::thread::sleep(Duration::from_secs(5));
            vg(runner, &ws, &home, &[verdict, &name, &id]).assert_success();
            let out = running.finish(Duration::from_secs(30));
            out.assert_success();
            let dir = socket.parent().unwrap();
            let added: Vec<Value> = events(dir)
                .into_iter()
                .filter(|e| e["type"] == "network" && e["event"] == "rule-added")
                .collect();
            if verdict == "approve" {
                assert_eq!(out.lines(), ["connected"], "{out}");
                assert!(accepted.load(std::sync::atomic::Ordering::SeqCst) > 0);
                assert_eq!(added.len(), 1, "{added:?}");
                assert_eq!(added[0]["rule"], "allow echo.test", "{added:?}");
                assert_eq!(added[0]["by"], "approval", "{added:?}");
                assert_eq!(added[0]["request"], pending["id"], "{added:?}");
            } else {
                assert_eq!(out.lines(), ["refused"], "{out}");
                assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 0);
                assert!(added.is_empty(), "{added:?}");
            }
        }
    });
}

#[test]
fn an_unanswered_destination_is_refused_and_a_denied_name_is_never_asked_about() {
    each_identity(|runner| {
        // Nobody answers: refused when the time-out passes.
        let (ws, home, _name, running, socket, accepted) =
            destination_session(runner, &["--ask", "high", "--approval-timeout", "1s"]);
        let out = running.finish(Duration::from_secs(30));
        assert_eq!(out.lines(), ["refused"], "{out}");
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 0);
        let decided: Vec<Value> = approvals_of(socket.parent().unwrap())
            .into_iter()
            .filter(|e| e["event"] == "decided")
            .collect();
        assert_eq!(decided.len(), 1, "{decided:?}");
        assert_eq!(decided[0]["who"]["by"], "timeout", "{decided:?}");
        drop((ws, home));
        // A rule that denies the name decides at once: nothing is asked.
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        ws.write(
            "net.sh",
            "#!/bin/bash\nif (exec 3<>/dev/tcp/echo.test/9) 2>/dev/null; then echo connected; else echo refused; fi\n",
        );
        let out = super::harness::Vg::sandbox(
            runner,
            &ws,
            &[
                "--network",
                "allow",
                "--add-host",
                "echo.test:127.0.0.1",
                "--ask",
                "high",
                "--deny",
                "echo.test",
            ],
            &["bash", "./net.sh"],
        )
        .records_home(&home)
        .run();
        assert_eq!(out.lines(), ["refused"], "{out}");
        let socket = home.only_session().join("control.sock");
        assert!(approvals_of(socket.parent().unwrap()).is_empty());
    });
}

/// A process that made itself undumpable (which stops ptrace by others of its uid)
/// still gets its approved exec checked: the supervisor owns the sandbox's user
/// namespace, so it may trace it; the approved program runs.
#[test]
fn an_undumpable_process_is_still_checked_and_its_approved_exec_runs() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write(
            "undumpable.py",
            "import ctypes, os\nctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\nos.makedirs('/tmp/v', exist_ok=True)\npid = os.fork()\nif pid == 0:\n    os.execv('/usr/bin/rm', ['rm', '-rf', '/tmp/v'])\nos.waitpid(pid, 0)\nopen('result', 'w').write(str(os.path.isdir('/tmp/v')))\n",
        );
        let home = RecordsHome::new(runner);
        let name = format!("undump-{}", unique());
        let (running, socket) = start_live(
            runner,
            &ws,
            &home,
            &name,
            &["--ask", "high"],
            &["python3", "./undumpable.py"],
        );
        let id = first_pending(runner, &ws, &home, &name)["id"].to_string();
        vg(runner, &ws, &home, &["approve", &name, &id]).assert_success();
        running.finish(Duration::from_secs(20)).assert_success();
        let approvals = approvals_of(socket.parent().unwrap());
        assert!(
            approvals.iter().all(|e| e["event"] != "mismatch"),
            "{approvals:?}"
        );
        assert_eq!(ws.read("result").as_deref(), Some("False"), "{approvals:?}");
    });
}

/// ATTACK: a session-scope approval of `./rm -rf /tmp/v` in one directory must not
/// cover `./rm -rf /tmp/v` in another, which is another program.
#[test]
fn a_session_approval_of_a_relative_path_does_not_cover_another_directory() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write_mode("a/rm", std::fs::read("/usr/bin/rm").unwrap(), 0o755);
        ws.write_mode(
            "b/rm",
            "#!/bin/sh\necho impostor > ../impostor-ran\n",
            0o755,
        );
        ws.write(
            "two-dirs.sh",
            "#!/bin/sh\nmkdir -p /tmp/v\n(cd a && ./rm -rf /tmp/v)\n(cd b && ./rm -rf /tmp/v)\necho done > done\n",
        );
        let home = RecordsHome::new(runner);
        let name = format!("reldir-{}", unique());
        let (running, socket) = start_live(
            runner,
            &ws,
            &home,
            &name,
            &["--ask", "high", "--approval-timeout", "3s"],
            &["sh", "./two-dirs.sh"],
        );
        let first = first_pending(runner, &ws, &home, &name);
        assert!(
            first["subject"]["path"]
                .as_str()
                .unwrap()
                .ends_with("/a/./rm"),
            "{first}"
        );
        let id = first["id"].to_string();
        vg(
            runner,
            &ws,
            &home,
            &["approve", &name, &id, "--scope", "session"],
        )
        .assert_success();
        running.finish(Duration::from_secs(30)).assert_success();
        assert!(ws.exists("done"));
        // The other directory's ./rm was asked about (and timed out), never run.
        assert!(
            !ws.exists("impostor-ran"),
            "the impostor ran on a remembered approval"
        );
        let asked = approvals_of(socket.parent().unwrap())
            .into_iter()
            .filter(|e| e["event"] == "asked")
            .count();
        assert_eq!(asked, 2);
    });
}

/// A connection to a public address no rule allows is held at its SYN; denied, it is
/// refused, approved, an `allow ADDRESS:PORT` rule is added. The cloud metadata
/// address is refused without a question.
#[test]
fn a_syn_to_an_unlisted_public_address_is_held_and_the_metadata_service_never_asked() {
    each_identity(|runner| {
        for verdict in ["deny", "approve"] {
            let ws = Workspace::new();
            ws.write(
                "raw.sh",
                "#!/bin/bash\n(exec 3<>/dev/tcp/169.254.169.254/80) 2>/dev/null && echo meta-connected || echo meta-refused\n(exec 3<>/dev/tcp/11.22.33.44/8443) 2>/dev/null && echo connected || echo refused\n",
            );
            let home = RecordsHome::new(runner);
            let name = format!("syn-{verdict}-{}", unique());
            let (running, socket) = start_live(
                runner,
                &ws,
                &home,
                &name,
                &["--network", "allow", "--ask", "high"],
                &["bash", "./raw.sh"],
            );
            let pending = first_pending(runner, &ws, &home, &name);
            assert_eq!(pending["subject"]["kind"], "destination", "{pending}");
            assert_eq!(pending["subject"]["name"], "11.22.33.44", "{pending}");
            assert_eq!(pending["subject"]["port"], 8443, "{pending}");
            assert_eq!(pending["subject"]["asked_by"], "bash ./raw.sh", "{pending}");
            let id = pending["id"].to_string();
            vg(runner, &ws, &home, &[verdict, &name, &id]).assert_success();
            let out = running.finish(Duration::from_secs(40));
            out.assert_success();
            // Approved, the connection goes out (whether anything answers depends on
            // this machine's network); denied, it is refused.
            let lines = out.lines();
            assert_eq!(lines[0], "meta-refused", "{out}");
            if verdict == "deny" {
                assert_eq!(lines[1], "refused", "{out}");
            }
            let dir = socket.parent().unwrap();
            let asked = approvals_of(dir)
                .into_iter()
                .filter(|e| e["event"] == "asked")
                .count();
            assert_eq!(asked, 1, "only the public address is asked about");
            let added: Vec<Value> = events(dir)
                .into_iter()
                .filter(|e| e["type"] == "network" && e["event"] == "rule-added")
                .collect();
            let connects: Vec<Value> = events(dir)
                .into_iter()
                .filter(|e| e["event"] == "connect" && e["address"] == "11.22.33.44")
                .collect();
            assert_eq!(
                connects.len(),
                1,
                "one decision per connection: {connects:?}"
            );
            if verdict == "approve" {
                assert_eq!(added.len(), 1, "{added:?}");
                assert_eq!(added[0]["rule"], "allow 11.22.33.44:8443", "{added:?}");
                assert_eq!(connects[0]["decision"], "allow", "{connects:?}");
            } else {
                assert!(added.is_empty(), "{added:?}");
                assert_eq!(connects[0]["decision"], "deny", "{connects:?}");
            }
        }
    });
}
