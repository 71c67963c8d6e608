//! Persistent sandboxes: `sandbox create`, `exec`, `ls`, `stop`, `rm`, idle time-out.

use std::time::Duration;

use serde_json::Value;

use super::harness::{
    Output, RecordsHome, Runner, Vg, Workspace, each_identity, unique, wait_until,
};
use super::live::{events, vg};

/// A sandbox that is removed (stopped first) when the test ends, pass or fail.
struct Sandbox<'a> {
    runner: Runner,
    ws: &'a Workspace,
    home: &'a RecordsHome,
    name: String,
}

impl<'a> Sandbox<'a> {
    fn create(runner: Runner, ws: &'a Workspace, home: &'a RecordsHome, options: &[&str]) -> Self {
        let name = format!("p{}", unique());
        let mut args = vec!["sandbox", "create", name.as_str()];
        args.extend_from_slice(options);
        vg(runner, ws, home, &args).assert_success();
        Sandbox {
            runner,
            ws,
            home,
            name,
        }
    }

    fn exec(&self, command: &[&str]) -> Output {
        let mut args = vec!["sandbox", "exec", self.name.as_str(), "--"];
        args.extend_from_slice(command);
        vg(self.runner, self.ws, self.home, &args)
    }

    fn vg(&self, args: &[&str]) -> Output {
        vg(self.runner, self.ws, self.home, args)
    }

    fn listed(&self) -> Value {
        let out = self.vg(&["sandbox", "ls", "--json"]);
        out.assert_success();
        let all: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
        all.into_iter()
            .find(|e| e["name"] == self.name.as_str())
            .unwrap_or(Value::Null)
    }
}

impl Drop for Sandbox<'_> {
    fn drop(&mut self) {
        let _ = vg(
            self.runner,
            self.ws,
            self.home,
            &["sandbox", "rm", "-f", &self.name],
        );
    }
}

#[test]
fn commands_share_the_sandbox_and_each_is_recorded_with_its_status() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let sandbox = Sandbox::create(runner, &ws, &home, &[]);
        assert_eq!(sandbox.listed()["state"], "running");
        // State in the sandbox's private /tmp, and a process, outlive the command.
        sandbox
            .exec(&[
                "sh",
                "-c",
                "echo kept > /tmp/state; sleep 60 & echo $! > /tmp/pid",
            ])
            .assert_success();
        let out = sandbox.exec(&[
            "sh",
            "-c",
            "cat /tmp/state; kill -0 $(cat /tmp/pid) && echo alive",
        ]);
        out.assert_success();
        assert_eq!(out.stdout, "kept\nalive\n", "{out}");
        // The command's own status, stdout and stderr apart, stdin passed on.
        let out = sandbox.exec(&["sh", "-c", "echo out; echo err >&2; exit 3"]);
        out.assert_code(3);
        assert_eq!(
            (out.stdout.as_str(), out.stderr.as_str()),
            ("out\n", "err\n")
        );
        let mut piped = Vg::new(runner, ws.path());
        piped
            .records_home(&home)
            .args(["sandbox", "exec", &sandbox.name, "--", "tr", "a-z", "A-Z"])
            .stdin("shout\n");
        let out = piped.run();
        out.assert_success();
        assert_eq!(out.stdout, "SHOUT\n");
        // Per command: an environment variable and a working directory.
        let out = sandbox.vg(&[
            "sandbox",
            "exec",
            "-e",
            "GREETING=hi",
            "-w",
            "/tmp",
            &sandbox.name,
            "--",
            "sh",
            "-c",
            "echo $GREETING; pwd",
        ]);
        assert_eq!(out.stdout, "hi\n/tmp\n", "{out}");
        // The host's own environment never reaches it.
        let out = sandbox.exec(&["sh", "-c", "echo ${VECTRAGUARD_SANDBOX_HOST:-unset}"]);
        assert_eq!(out.stdout, "unset\n");

        let dir = home.only_session();
        let commands: Vec<Value> = events(&dir)
            .into_iter()
            .filter(|e| e["type"] == "command")
            .collect();
        let ended: Vec<i64> = commands
            .iter()
            .filter(|e| e["event"] == "ended")
            .map(|e| e["exit_code"].as_i64().unwrap())
            .collect();
        assert_eq!(ended, [0, 0, 3, 0, 0, 0], "{commands:?}");
        let started = commands.iter().find(|e| e["event"] == "started").unwrap();
        assert_eq!(started["by_uid"], runner.invoker().uid, "{started}");
        let log = std::fs::read_to_string(dir.join("commands.log")).unwrap();
        assert!(log.contains("-- tr a-z A-Z"), "{log}");
        assert!(
            std::fs::read_to_string(dir.join("stdout.log"))
                .unwrap()
                .contains("SHOUT")
        );

        sandbox
            .vg(&["sandbox", "stop", &sandbox.name])
            .assert_success();
        assert_eq!(sandbox.listed()["state"], "stopped");
        sandbox
            .exec(&["true"])
            .assert_code(125)
            .assert_stderr_contains("is stopped");
        let meta = super::harness::session_metadata(&dir);
        assert_eq!(meta["status"], "timeout", "{meta}");
        // Nothing of it survives: a new one by the same name starts empty.
        sandbox
            .vg(&["sandbox", "rm", &sandbox.name])
            .assert_success();
        assert_eq!(sandbox.listed(), Value::Null);
        vg(runner, &ws, &home, &["sandbox", "create", &sandbox.name]).assert_success();
        sandbox
            .exec(&["cat", "/tmp/state"])
            .assert_code(1)
            .assert_stderr_contains("No such file");
    });
}

#[test]
fn an_unused_sandbox_stops_at_its_idle_timeout_and_a_command_at_its_timeout() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let sandbox = Sandbox::create(
            runner,
            &ws,
            &home,
            &["--idle-timeout", "2s", "--timeout", "1s"],
        );
        // A command's --timeout ends that command, not the sandbox.
        let started = std::time::Instant::now();
        sandbox.exec(&["sleep", "30"]).assert_code(124);
        assert!(started.elapsed() < Duration::from_secs(20));
        sandbox.exec(&["true"]).assert_success();
        // While a command runs the sandbox is not idle.
        assert_eq!(sandbox.listed()["state"], "running");
        assert!(
            wait_until(Duration::from_secs(20), || sandbox.listed()["state"]
                == "stopped"),
            "still {}",
            sandbox.listed()
        );
        let dir = home.only_session();
        assert!(
            events(&dir).iter().any(|e| e["event"] == "idle-stop"),
            "no idle-stop event"
        );
    });
}

#[test]
fn bad_input_is_refused_with_a_clear_error_and_the_sandbox_keeps_serving() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        vg(
            runner,
            &ws,
            &home,
            &["sandbox", "exec", "nosuch", "--", "true"],
        )
        .assert_code(125)
        .assert_stderr_contains("no sandbox named");
        vg(runner, &ws, &home, &["sandbox", "create", "bad name"])
            .assert_code(125)
            .assert_stderr_contains("sandbox name");
        vg(
            runner,
            &ws,
            &home,
            &["sandbox", "create", "x", "--idle-timeout", "soon"],
        )
        .assert_code(125)
        .assert_stderr_contains("--idle-timeout");
        let sandbox = Sandbox::create(runner, &ws, &home, &[]);
        vg(runner, &ws, &home, &["sandbox", "create", &sandbox.name])
            .assert_code(125)
            .assert_stderr_contains("is running");
        sandbox
            .exec(&["no-such-program"])
            .assert_code(127)
            .assert_stderr_contains("no-such-program: No such file");
        sandbox
            .vg(&[
                "sandbox",
                "exec",
                "-w",
                "/nowhere",
                &sandbox.name,
                "--",
                "true",
            ])
            .assert_code(125)
            .assert_stderr_contains("cannot change to the working directory /nowhere");
        sandbox
            .vg(&[
                "sandbox",
                "exec",
                "-e",
                "NOEQUALS",
                &sandbox.name,
                "--",
                "true",
            ])
            .assert_code(125)
            .assert_stderr_contains("KEY=VALUE");
        sandbox
            .vg(&["sandbox", "rm", &sandbox.name])
            .assert_code(125)
            .assert_stderr_contains("is running");
        sandbox.exec(&["true"]).assert_success();
    });
}

/// ATTACK: a command looks for the exec and control sockets of its own sandbox (to
/// start commands or approve its own requests): the records folder is not in its view.
#[test]
fn a_command_cannot_reach_its_sandboxs_sockets() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let sandbox = Sandbox::create(runner, &ws, &home, &[]);
        let dir = home.only_session();
        let probe = format!(
            "import socket\nfor name in ('exec.sock', 'control.sock'):\n    s = socket.socket(socket.AF_UNIX)\n    try:\n        s.connect('{}/' + name)\n        print(name, 'reached')\n    except OSError as e:\n        print(name, 'refused', e.errno)\n",
            dir.display()
        );
        let out = sandbox.exec(&["python3", "-c", &probe]);
        out.assert_success();
        assert!(!out.stdout.contains("reached"), "{out}");
        assert_eq!(out.stdout.lines().count(), 2, "{out}");
    });
}

#[test]
fn a_command_gets_a_terminal_of_its_own_with_t() {
    if !super::harness::require_tools(&[("/usr/bin/script", "util-linux")]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let sandbox = Sandbox::create(runner, &ws, &home, &[]);
        // `script` gives the client a terminal on stdin, as a person's would be.
        let mut run = Vg::new(runner, ws.path());
        run.records_home(&home)
            .args([
                "sandbox",
                "exec",
                "-t",
                &sandbox.name,
                "--",
                "sh",
                "-c",
                "tty; echo to-stderr >&2; echo rc=$?; echo in-tty",
            ])
            .through_shell("exec script -qec \"$(printf '%q ' \"$@\")\" /dev/null");
        let out = run.run();
        out.assert_success();
        assert!(out.stdout.contains("/dev/pts/"), "{out}");
        assert!(out.stdout.contains("in-tty"), "{out}");
        // Its stderr is the terminal too (it was once closed at exec: red team).
        assert!(
            out.stdout.contains("to-stderr") && out.stdout.contains("rc=0"),
            "{out}"
        );
        // Without a terminal on stdin, -t is refused.
        sandbox
            .vg(&["sandbox", "exec", "-t", &sandbox.name, "--", "true"])
            .assert_code(125)
            .assert_stderr_contains("-t needs a terminal");
    });
}

/// Looks through /proc for the host's secret while commands start, and tries to
/// reach other processes' descriptors and memory (red team: a command being started
/// was a readable copy of init, which holds the host's environment and socket).
const SPY: &str = r#"
import glob, os, sys, time
found = set()
end = time.time() + float(sys.argv[1])
me = str(os.getpid())
while time.time() < end:
    for d in glob.glob("/proc/[0-9]*"):
        pid = d.rsplit("/", 1)[1]
        if pid == me:
            continue
        try:
            if b"VG_HOST_SECRET" in open(d + "/environ", "rb").read():
                found.add("environ")
        except OSError:
            pass
        try:
            os.listdir(d + "/fd")
            if os.stat(d).st_uid == os.getuid() and pid != "1":
                for fd in os.listdir(d + "/fd"):
                    if os.readlink(d + "/fd/" + fd).startswith("socket:"):
                        found.add("socket " + pid)
        except OSError:
            pass
with open("/tmp/spy.log", "w") as f:
    f.write(" ".join(sorted(found)))
"#;

#[test]
fn commands_cannot_read_the_host_or_each_other_through_proc() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write("spy.py", SPY);
        let home = RecordsHome::new(runner);
        let name = format!("p{}", unique());
        Vg::new(runner, ws.path())
            .records_home(&home)
            .env("VG_HOST_SECRET", "hunter2")
            .args(["sandbox", "create", &name])
            .run()
            .assert_success();
        let sandbox = Sandbox {
            runner,
            ws: &ws,
            home: &home,
            name,
        };
        sandbox
            .exec(&["sh", "-c", "python3 ./spy.py 4 >/dev/null 2>&1 &"])
            .assert_success();
        for _ in 0..15 {
            sandbox.exec(&["true"]).assert_success();
        }
        std::thread::sleep(Duration::from_secs(4));
        let out = sandbox.exec(&["cat", "/tmp/spy.log"]);
        out.assert_success();
        assert_eq!(out.stdout, "", "{out}");
    });
}

/// A static program that sends signal argv[3] to pid argv[2] with sender pid 0 in its
/// siginfo, as a signal from outside the pid namespace has: "sigio" has the kernel
/// send it as an I/O notification (`F_SETOWN`, `F_SETSIG`), "queue" forges it with
/// `rt_sigqueueinfo` (`SI_QUEUE`, `si_pid` 0).
const SENDERLESS: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
  if (argc < 4) return 2;
  int target = atoi(argv[2]), sig = atoi(argv[3]);
  if (!strcmp(argv[1], "sigio")) {
    int p[2];
    int ok = pipe(p) == 0 && fcntl(p[0], F_SETOWN, target) == 0 &&
             fcntl(p[0], F_SETSIG, sig) == 0 &&
             fcntl(p[0], F_SETFL, O_ASYNC | O_NONBLOCK) == 0 && write(p[1], "x", 1) == 1;
    printf("sigio=%s\n", ok ? "sent" : "refused");
  } else {
    siginfo_t si; memset(&si, 0, sizeof si);
    si.si_signo = sig; si.si_code = SI_QUEUE; si.si_pid = 0;
    long r = syscall(SYS_rt_sigqueueinfo, target, sig, &si);
    printf("queue=%s\n", r == 0 ? "sent" : "refused");
  }
  return 0;
}
"#;

/// [`SENDERLESS`] built into `ws` as `./senderless` (executable by every user).
pub(super) fn build_senderless(ws: &Workspace) {
    let program = ws.join("senderless");
    super::harness::build_static_c(SENDERLESS, &program, &[]);
    std::fs::set_permissions(
        &program,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
}

/// Red team (session 15): the stop signal sent to init with no sender, which the
/// init took for the supervisor's (sender 0: outside the namespace): by the kernel
/// as an I/O notification, or forged with `rt_sigqueueinfo`. Both stopped the
/// sandbox; only a `kill` from outside does now.
#[test]
fn a_command_cannot_stop_its_sandbox_with_a_stop_signal_that_names_no_sender() {
    each_identity(|runner| {
        let ws = Workspace::new();
        build_senderless(&ws);
        let home = RecordsHome::new(runner);
        let sandbox = Sandbox::create(runner, &ws, &home, &[]);
        for how in ["sigio", "queue"] {
            let out = sandbox.exec(&["./senderless", how, "1", &libc::SIGPWR.to_string()]);
            out.assert_success();
            assert_eq!(out.field(how), "sent", "{runner} {how}\n{out}");
            std::thread::sleep(Duration::from_millis(300));
            sandbox.exec(&["true"]).assert_success();
            assert_eq!(sandbox.listed()["state"], "running", "{runner} {how}");
        }
    });
}

/// The init's stop signal sent from inside (a blocked signal reaches PID 1 from its
/// own namespace) must not stop the sandbox: only the supervisor's does.
#[test]
fn a_command_cannot_stop_its_sandbox_by_signalling_init() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let sandbox = Sandbox::create(runner, &ws, &home, &[]);
        sandbox
            .exec(&[
                "sh",
                "-c",
                "kill -PWR 1; kill -TERM 1; kill -KILL 1; sleep 0.3",
            ])
            .assert_success();
        sandbox.exec(&["true"]).assert_success();
        assert_eq!(sandbox.listed()["state"], "running");
    });
}
