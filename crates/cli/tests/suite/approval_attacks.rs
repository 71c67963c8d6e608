//! Attacks on the approval gate: ways a hostile script tried to get a risky program
//! past `--ask` (each found by a red team, each failing on the gate before its fix).

use std::time::Duration;

use serde_json::Value;

use super::approval::first_pending;
use super::harness::{RecordsHome, Vg, Workspace, each_identity, unique};
use super::live::{events, start_live, vg};

fn approval_events(dir: &std::path::Path, event: &str) -> Vec<Value> {
    events(dir)
        .into_iter()
        .filter(|e| e["type"] == "approval" && e["event"] == event)
        .collect()
}

/// ATTACK: a script whose `#!` line is itself the risky command. The kernel runs
/// `/bin/rm -rf ./wipe /tmp/victim`, which must be rated as that, not as `./wipe`.
#[test]
fn a_shebang_line_that_is_a_risky_command_is_asked_about() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write_mode("wipe", "#!/bin/rm -rf\n", 0o755);
        let home = RecordsHome::new(runner);
        Vg::sandbox(
            runner,
            &ws,
            &["--ask", "high", "--approval-timeout", "1s"],
            &[
                "sh",
                "-c",
                "mkdir -p /tmp/victim; ./wipe /tmp/victim; [ -d /tmp/victim ] && echo survived > result",
            ],
        )
        .records_home(&home)
        .run()
        .assert_success();
        assert_eq!(ws.read("result").as_deref(), Some("survived\n"));
        assert!(ws.exists("wipe"), "rm ran on the script itself");
        let decided = approval_events(&home.only_session(), "decided");
        assert_eq!(decided.len(), 1, "{decided:?}");
        assert_eq!(decided[0]["level"], "CRITICAL", "{decided:?}");
        assert!(
            decided[0]["reason"]
                .as_str()
                .is_some_and(|r| r.contains("#! line runs: /bin/rm -rf ./wipe /tmp/victim")),
            "{decided:?}"
        );
    });
}

/// ATTACK: `rm` under another name — a copy, a symlink, or busybox's applet — is still
/// `rm`; each is held and, unanswered, denied.
#[test]
fn rm_under_another_name_is_rated_as_rm() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        // In a file: a `sh -c` script naming them would be rated (and held) itself.
        ws.write(
            "run.sh",
            "cp /bin/rm ./copy; ln -s /bin/rm ./link\n\
             for d in 1 2 3; do mkdir -p /tmp/victim$d; done\n\
             ./copy -rf /tmp/victim1; ./link -rf /tmp/victim2; busybox rm -rf /tmp/victim3\n\
             ls -d /tmp/victim* > left\n",
        );
        let out = Vg::sandbox(
            runner,
            &ws,
            &["--ask", "critical", "--approval-timeout", "1s"],
            &["sh", "./run.sh"],
        )
        .records_home(&home)
        .run();
        out.assert_success();
        let dir = home.only_session();
        assert_eq!(
            ws.read("left").as_deref(),
            Some("/tmp/victim1\n/tmp/victim2\n/tmp/victim3\n"),
            "{}\n{}",
            std::fs::read_to_string(dir.join("commands.log")).unwrap_or_default(),
            std::fs::read_to_string(dir.join("events.jsonl")).unwrap_or_default()
        );
        let decided = approval_events(&home.only_session(), "decided");
        let rules: Vec<&str> = decided.iter().filter_map(|e| e["rule"].as_str()).collect();
        assert_eq!(
            rules,
            ["rm-rf-outside", "rm-rf-outside", "rm-rf-outside"],
            "{decided:?}"
        );
    });
}

/// The race a LOW rating invites: a second thread flips the path between `true` (what
/// is rated) and `rm` (what the kernel may then run) while argv[0] stays `true`.
const LOW_SWAPPER: &str = r#"
import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("/tmp/keep", exist_ok=True)
for _ in range(60):
    pid = os.fork()
    if pid == 0:
        path = ctypes.create_string_buffer(b"/usr/bin/true", 16)
        def flip():
            while True:
                ctypes.memmove(path, b"/usr/bin/rm\0", 12)
                ctypes.memmove(path, b"/usr/bin/true", 13)
        threading.Thread(target=flip, daemon=True).start()
        argv = (ctypes.c_char_p * 4)(b"true", b"-rf", b"/tmp/keep", None)
        libc.execve(path, argv, None)
        os._exit(99)
    os.waitpid(pid, 0)
with open("result", "w") as f:
    f.write("keep=%s\n" % os.path.isdir("/tmp/keep"))
"#;

/// ATTACK: rated LOW as `true`, run as `rm`: every exec under `--ask` is checked at
/// its exec stop, so what runs is what was rated.
#[test]
fn a_low_rated_exec_swapped_as_it_runs_is_killed() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write("swap.py", LOW_SWAPPER);
        let home = RecordsHome::new(runner);
        Vg::sandbox(
            runner,
            &ws,
            &["--ask", "critical", "--approval-timeout", "1s"],
            &["python3", "./swap.py"],
        )
        .records_home(&home)
        .run()
        .assert_success();
        assert_eq!(ws.read("result").as_deref(), Some("keep=True\n"));
        let killed = approval_events(&home.only_session(), "mismatch");
        assert!(!killed.is_empty(), "the race was never caught");
        assert!(killed.iter().all(|e| e["action"] == "killed"), "{killed:?}");
    });
}

/// ATTACK: an argv of thousands of arguments hides its risky part at the end, past
/// what the tracer once read: it is read whole, rated and held.
#[test]
fn a_risky_argument_after_thousands_of_others_is_rated() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write(
            "long.py",
            "import os\n\
             os.makedirs('/tmp/victim', exist_ok=True)\n\
             try:\n    os.execv('/bin/rm', ['x'] * 5000 + ['-rf', '/tmp/victim'])\n\
             except OSError as e:\n    open('result', 'w').write('refused %d\\n' % e.errno)\n",
        );
        let home = RecordsHome::new(runner);
        Vg::sandbox(
            runner,
            &ws,
            &["--ask", "critical", "--approval-timeout", "1s"],
            &["python3", "./long.py"],
        )
        .records_home(&home)
        .run()
        .assert_success();
        assert_eq!(ws.read("result").as_deref(), Some("refused 1\n"));
        let decided = approval_events(&home.only_session(), "decided");
        assert_eq!(decided.len(), 1, "{decided:?}");
        assert_eq!(decided[0]["rule"], "rm-rf-outside", "{decided:?}");
    });
}

/// ATTACK: a held script's `#!` line is rewritten (in place) before the approval, so
/// that the approved `chmod` would become `rm -rf`: what runs must be what was
/// approved, so it is killed at its exec.
#[test]
fn a_scripts_interpreter_changed_after_it_was_asked_about_never_runs() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write_mode("job", "#!/bin/chmod +x\n", 0o755);
        let home = RecordsHome::new(runner);
        let name = format!("shebang-swap-{}", unique());
        let (running, socket) = start_live(
            runner,
            &ws,
            &home,
            &name,
            &["--ask", "high"],
            &[
                "sh",
                "-c",
                "mkdir -p /tmp/victim; ./job /tmp/victim; echo \"job=$?\" > status; \
                 [ -d /tmp/victim ] && echo survived > result",
            ],
        );
        let pending = first_pending(runner, &ws, &home, &name);
        assert_eq!(pending["rule"], "make-executable", "{pending}");
        // The attacker's move, made while the request waits: same file, new first line.
        std::fs::write(ws.join("job"), "#!/bin/rm -rf\n").unwrap();
        let id = pending["id"].to_string();
        vg(runner, &ws, &home, &["approve", &name, &id]).assert_success();
        running.finish(Duration::from_secs(20)).assert_success();
        assert_eq!(ws.read("result").as_deref(), Some("survived\n"));
        assert_eq!(ws.read("status").as_deref(), Some("job=137\n"));
        let killed = approval_events(socket.parent().unwrap(), "mismatch");
        assert_eq!(killed.len(), 1, "{killed:?}");
    });
}

/// ATTACK (red team): the working directory changes, from another thread, while an
/// exec of `rm -rf victim` waits for approval: approved for the workspace, it would
/// run in /tmp. It is killed at its exec instead.
const CWD_SWAP: &str = r#"
import ctypes, os, threading, time
os.makedirs("/tmp/victim", exist_ok=True)
os.makedirs("victim", exist_ok=True)
pid = os.fork()
if pid == 0:
    def move():
        time.sleep(1.0)
        os.chdir("/tmp")
    threading.Thread(target=move, daemon=True).start()
    # Through ctypes, which lets the other thread run while execve waits.
    libc = ctypes.CDLL(None)
    argv = (ctypes.c_char_p * 4)(b"rm", b"-rf", b"victim", None)
    libc.execv(b"/usr/bin/rm", argv)
    os._exit(99)
_, status = os.waitpid(pid, 0)
open("result", "w").write("tmp=%s ws=%s signal=%d\n" % (
    os.path.isdir("/tmp/victim"), os.path.isdir("victim"), os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0))
"#;

#[test]
fn an_approved_exec_whose_working_directory_changed_never_runs() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write("swap.py", CWD_SWAP);
        let home = RecordsHome::new(runner);
        let name = format!("cwd-swap-{}", unique());
        let (running, socket) = start_live(
            runner,
            &ws,
            &home,
            &name,
            &["--ask", "high"],
            &["python3", "./swap.py"],
        );
        let pending = first_pending(runner, &ws, &home, &name);
        // After the other thread moved.
        std::thread::sleep(Duration::from_millis(1500));
        vg(
            runner,
            &ws,
            &home,
            &["approve", &name, &pending["id"].to_string()],
        )
        .assert_success();
        running.finish(Duration::from_secs(20)).assert_success();
        assert_eq!(
            ws.read("result").as_deref(),
            Some("tmp=True ws=True signal=9\n")
        );
        let killed = approval_events(socket.parent().unwrap(), "mismatch");
        assert!(
            killed.iter().any(|e| e["reason"]
                .as_str()
                .unwrap_or_default()
                .contains("working directory")),
            "{killed:?}"
        );
    });
}

/// Workloads the gate must not break (red team): more arguments than the tracer used
/// to read, and a `#!` script run through a descriptor.
#[test]
fn long_argvs_and_scripts_run_by_descriptor_run_under_the_gate() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write_mode("hello.sh", "#!/bin/sh\necho hello-from-fd\n", 0o755);
        ws.write(
            "fexec.py",
            // Inheritable: the kernel hands the interpreter /dev/fd/N.
            "import os\nfd = os.open('hello.sh', os.O_RDONLY)\nos.set_inheritable(fd, True)\nos.execve(fd, ['hello.sh'], {})\n",
        );
        let home = RecordsHome::new(runner);
        let out = Vg::sandbox(
            runner,
            &ws,
            &["--ask", "critical", "--approval-timeout", "1s"],
            &[
                "sh",
                "-c",
                "seq 1 6000 | xargs /bin/true && echo xargs-ok; python3 ./fexec.py",
            ],
        )
        .records_home(&home)
        .run();
        out.assert_success();
        assert_eq!(out.stdout, "xargs-ok\nhello-from-fd\n", "{out}");
    });
}
