//! `sandbox create --backend gvisor`: a persistent gVisor sandbox whose commands
//! start through `runsc exec` (`vg_backend::gvisor::exec`), all of them recorded in
//! the one session from gVisor's trace points, as root and as the unprivileged test
//! user; and `mcp serve` with gVisor sandboxes.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::harness::{
    Output, RecordsHome, Runner, Vg, Workspace, assert_no_process_left, each_identity,
    session_metadata, unique, wait_until,
};
use super::live::vg;

/// A persistent gVisor sandbox, removed when the test ends, pass or fail.
struct Sandbox<'a> {
    runner: Runner,
    ws: &'a Workspace,
    home: &'a RecordsHome,
    name: String,
}

impl<'a> Sandbox<'a> {
    fn create(runner: Runner, ws: &'a Workspace, home: &'a RecordsHome, options: &[&str]) -> Self {
        let name = format!("g{}", unique());
        let mut args = vec!["sandbox", "create", name.as_str(), "--backend", "gvisor"];
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

    /// What marks this sandbox's runsc processes on the host: its bundle folder's
    /// name holds the host's pid.
    fn runsc_marker(&self) -> String {
        let pid = self.listed()["host_pid"].as_i64().unwrap_or_default();
        assert!(pid > 0, "no host pid listed for {}", self.name);
        format!("vectraguard-gvisor-vg-{pid}-")
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

/// The `exec` line of `argv` (quoted as `commands.log` quotes it) and its pid.
fn exec_pid(log: &str, argv: &str) -> Option<String> {
    log.lines()
        .find(|l| l.contains(" exec ") && l.ends_with(&format!(" -- {argv}")))
        .and_then(|l| l.split_whitespace().find_map(|f| f.strip_prefix("pid=")))
        .map(str::to_owned)
}

/// The `exit` line of `pid`, after `pid=`: `status=N` or `signal=N`.
fn exit_of(log: &str, pid: &str) -> Option<String> {
    log.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(1) == Some(&"exit") && f.get(2) == Some(&format!("pid={pid}").as_str()))
        .and_then(|f| f.get(3).map(|s| (*s).to_owned()))
}

#[test]
fn commands_share_the_sandbox_and_every_exec_and_exit_is_recorded_exactly() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let sandbox = Sandbox::create(runner, &ws, &home, &[]);
        assert_eq!(sandbox.listed()["state"], "running");
        sandbox
            .exec(&["sh", "-c", "echo kept > /tmp/state"])
            .assert_success();
        let out = sandbox.exec(&[
            "sh",
            "-c",
            "cat /tmp/state; printf 'a\\tb\\001\\n'; printf 'to stderr\\n' >&2; exit 7",
        ]);
        out.assert_code(7);
        assert_eq!(out.stdout, "kept\na\tb\u{1}\n", "{out}");
        assert!(out.stderr.contains("to stderr\n"), "{out}");
        // A signal and the same number as an exit code are told apart.
        sandbox
            .exec(&["sh", "-c", "kill -TERM $$"])
            .assert_code(143);
        sandbox.exec(&["sh", "-c", "exit 143"]).assert_code(143);
        let missing = sandbox.exec(&["no-such-program"]);
        missing.assert_code(127);
        missing.assert_stderr_contains("no-such-program");
        // The sandbox's identity, folder and clean environment, as natively.
        let out = sandbox.exec(&[
            "sh",
            "-c",
            "echo uid=$(id -u); echo cwd=$(pwd); echo caps=$(grep CapEff /proc/self/status | cut -f2); echo secret=${VG_NOT_PASSED:-unset}",
        ]);
        out.assert_success();
        assert_eq!(out.field("uid"), "0", "{out}");
        assert_eq!(out.field("cwd"), ws.path().display().to_string(), "{out}");
        assert_eq!(out.field("caps"), "0000000000000000", "{out}");
        assert_eq!(out.field("secret"), "unset", "{out}");
        // One session holds every command, its children and their ends.
        let dir = home.only_session();
        let meta = session_metadata(&dir);
        assert_eq!(meta["layers"]["backend"], "gvisor", "{meta}");
        assert_eq!(meta["layers"]["persistent_exec"], "runsc-exec", "{meta}");
        let log = std::fs::read_to_string(dir.join("commands.log")).unwrap();
        let pid = |argv: &str| {
            exec_pid(&log, argv).unwrap_or_else(|| panic!("no exec of {argv}:\n{log}"))
        };
        let top = pid(
            "sh -c 'cat /tmp/state; printf '\\''a\\tb\\001\\n'\\''; printf '\\''to stderr\\n'\\'' >&2; exit 7'",
        );
        assert_eq!(exit_of(&log, &top).as_deref(), Some("status=7"), "{log}");
        let child = pid("cat /tmp/state");
        assert!(
            log.contains(&format!(" exec pid={child} ppid={top} ")),
            "{log}"
        );
        let killed = pid("sh -c 'kill -TERM $$'");
        assert_eq!(
            exit_of(&log, &killed).as_deref(),
            Some("signal=15"),
            "{log}"
        );
        let exited = pid("sh -c 'exit 143'");
        assert_eq!(
            exit_of(&log, &exited).as_deref(),
            Some("status=143"),
            "{log}"
        );
        let stdout = std::fs::read(dir.join("stdout.log")).unwrap();
        let want: &[u8] = b"kept\na\tb\x01\n";
        assert!(
            stdout.windows(want.len()).any(|w| w == want),
            "{}",
            String::from_utf8_lossy(&stdout)
        );
        // Stop ends runsc and its sandbox; the record is complete and verifies.
        let marker = sandbox.runsc_marker();
        sandbox
            .vg(&["sandbox", "stop", &sandbox.name])
            .assert_success();
        assert_eq!(sandbox.listed()["state"], "stopped");
        assert_no_process_left(&marker, &"runsc after sandbox stop");
        sandbox
            .vg(&["logs", "verify", "last"])
            .assert_success()
            .assert_stdout_contains("intact");
        sandbox
            .vg(&["sandbox", "rm", &sandbox.name])
            .assert_success();
        assert_eq!(sandbox.listed(), Value::Null);
    });
}

/// What a hostile command tries against the sandbox's first process, which keeps
/// the sandbox: gVisor does not shield a pid namespace's init from its members,
/// so it runs as a user no command is.
#[test]
fn a_command_cannot_stop_the_sandbox_by_signalling_or_tracing_its_first_process() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let sandbox = Sandbox::create(runner, &ws, &home, &[]);
        let out = sandbox.exec(&[
            "sh",
            "-c",
            "for s in PWR TERM KILL STOP INT HUP; do kill -$s 1 2>/dev/null && echo sent=$s; done; \
             kill -KILL -1 2>/dev/null; \
             echo environ=$(tr '\\0' ' ' < /proc/1/environ); \
             printf x | dd of=/proc/1/mem bs=1 seek=4096 2>/dev/null && echo mem=written || echo mem=refused; \
             ls /proc/1/fd >/dev/null 2>&1 && echo fds=open || echo fds=closed; \
             echo x > /.vectraguard/vectraguard 2>/dev/null && echo program=written || echo program=kept; \
             sleep 0.3; echo done=1",
        ]);
        assert!(!out.stdout.contains("sent="), "{out}");
        // Its environment holds nothing (gVisor's own HOME), its memory is closed.
        assert_eq!(out.field("environ"), "HOME=/", "{out}");
        assert_eq!(out.field("mem"), "refused", "{out}");
        assert_eq!(out.field("fds"), "closed", "{out}");
        assert_eq!(out.field("program"), "kept", "{out}");
        // Through a program's own ptrace too.
        let traced = sandbox.exec(&[
            "python3",
            "-c",
            "import ctypes; libc = ctypes.CDLL(None, use_errno=True); \
             print('attach=%d' % libc.ptrace(16, 1, 0, 0))",
        ]);
        if traced.code() == Some(0) {
            assert_eq!(traced.field("attach"), "-1", "{traced}");
        }
        sandbox.exec(&["true"]).assert_success();
        assert_eq!(sandbox.listed()["state"], "running");
    });
}

/// runsc's control socket is an abstract unix socket that checks no caller: bound
/// in the host's network namespace (`--network none`), any local user could run a
/// command in the sandbox through it (its start unrecorded), signal or destroy it.
/// It is bound in a network namespace of runsc's own, and the commands still start.
#[test]
fn runsc_s_control_socket_is_not_in_the_host_s_network_namespace() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let sandbox = Sandbox::create(runner, &ws, &home, &[]);
        sandbox.exec(&["true"]).assert_success();
        let pid = sandbox.listed()["host_pid"].as_i64().unwrap_or_default();
        assert!(pid > 0, "no host pid listed for {}", sandbox.name);
        // The container's id is `vg-<host pid>-…`; runsc names its socket after it.
        let socket = format!("@runsc-sandbox.vg-{pid}-");
        let table = std::fs::read_to_string("/proc/net/unix").unwrap();
        let seen: Vec<&str> = table.lines().filter(|l| l.contains(&socket)).collect();
        assert!(seen.is_empty(), "{socket} is on the host: {seen:?}");
        sandbox.exec(&["true"]).assert_success();
    });
}

#[test]
fn a_command_s_time_out_ends_it_and_what_it_started_and_the_sandbox_serves_on() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let sandbox = Sandbox::create(runner, &ws, &home, &["--timeout", "2s"]);
        let started = Instant::now();
        let out = sandbox.exec(&["sh", "-c", "sleep 60 & sleep 60; echo not-reached"]);
        out.assert_code(124);
        assert!(!out.stdout.contains("not-reached"), "{out}");
        assert!(started.elapsed() < Duration::from_secs(30), "{out}");
        // Nothing of it is left, not even a zombie: only the first process and the
        // listing itself.
        let mut ps = sandbox.exec(&["ps", "-eo", "pid=,stat=,comm="]);
        let gone = wait_until(Duration::from_secs(5), || {
            ps = sandbox.exec(&["ps", "-eo", "pid=,stat=,comm="]);
            ps.code() == Some(0) && !ps.stdout.contains("sleep")
        });
        assert!(gone, "{ps}");
        sandbox.exec(&["true"]).assert_success();
    });
}

/// A command that keeps forking while its time-out is sent: runsc signals one
/// process at a time, after one `runsc ps`, so a child forked between that table
/// and its parent's stop was left running. Natively the process group's signal
/// reaches it.
#[test]
fn a_time_out_reaches_children_forked_while_it_is_sent() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let sandbox = Sandbox::create(runner, &ws, &home, &["--timeout", "1s"]);
        for _ in 0..3 {
            let out = sandbox.exec(&["sh", "-c", "while :; do sleep 1000 & sleep 0.05; done"]);
            out.assert_code(124);
            let mut ps = sandbox.exec(&["ps", "-eo", "pid=,ppid=,args="]);
            let gone = wait_until(Duration::from_secs(5), || {
                ps = sandbox.exec(&["ps", "-eo", "pid=,ppid=,args="]);
                ps.code() == Some(0) && !ps.stdout.contains("sleep 1000")
            });
            assert!(gone, "{ps}");
        }
        sandbox.exec(&["true"]).assert_success();
    });
}

/// What a command leaves behind it by ending the processes between: a subshell's
/// background child (`(sleep &)`), a double fork into a session of its own
/// (`setsid`), a parent killed under its child, a child in a pid namespace of its
/// own. gVisor gives each to the first process (or the namespace's), where `runsc
/// ps` no longer ties it to the command, and has no child subreaper: the time-out
/// reaches them through the lineage the trace's clone points keep (it missed them
/// before). What a command leaves behind when it ends by itself lives on, as
/// natively, until `sandbox stop`, which leaves no runsc process.
#[test]
fn a_time_out_reaches_what_the_command_left_to_the_first_process() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let sandbox = Sandbox::create(runner, &ws, &home, &["--timeout", "2s"]);
        let left = |ps: &Output| {
            [
                "sleep 1004",
                "sleep 1005",
                "sleep 1006",
                "sleep 1007",
                "sleep 1008",
            ]
            .into_iter()
            .filter(|s| ps.stdout.contains(s))
            .collect::<Vec<_>>()
        };
        let out = sandbox.exec(&[
            "sh",
            "-c",
            "(sleep 1004 &); \
             sh -c 'setsid sh -c \"sleep 1005 & sleep 1006\" &'; \
             sh -c 'sleep 1007 & kill -9 $$'; \
             unshare -Urpf sh -c '(sleep 1008 &); sleep 1009' & \
             sleep 0.5; ps -eo pid=,ppid=,args=; sleep 60",
        ]);
        out.assert_code(124);
        // They ran, given to the first process (1) or the namespace's.
        assert_eq!(left(&out).len(), 5, "{out}");
        assert!(
            out.stdout
                .lines()
                .any(|l| l.contains("sleep 1004") && l.split_whitespace().nth(1) == Some("1")),
            "{out}"
        );
        let mut ps = sandbox.exec(&["ps", "-eo", "pid=,ppid=,args="]);
        let gone = wait_until(Duration::from_secs(5), || {
            ps = sandbox.exec(&["ps", "-eo", "pid=,ppid=,args="]);
            ps.code() == Some(0) && left(&ps).is_empty() && !ps.stdout.contains("sleep 1009")
        });
        assert!(gone, "left after the time-out: {ps}");
        // A command that ended by itself leaves its background process, as natively;
        // stop ends it with the sandbox.
        sandbox
            .exec(&["sh", "-c", "(sleep 1004 &); setsid sh -c 'sleep 1005 &'"])
            .assert_success();
        let ps = sandbox.exec(&["ps", "-eo", "pid=,ppid=,args="]);
        assert_eq!(left(&ps), ["sleep 1004", "sleep 1005"], "{ps}");
        let marker = sandbox.runsc_marker();
        sandbox
            .vg(&["sandbox", "stop", &sandbox.name])
            .assert_success();
        assert_no_process_left(&marker, &"runsc after sandbox stop");
    });
}

/// The folders in `/tmp` whose name starts with `prefix`.
fn tmp_entries(prefix: &str) -> Vec<String> {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with(prefix))
        .collect()
}

/// Each command's folder (0700, holding its whole environment in `process.json`)
/// is in the sandbox's bundle folder, never in `/tmp`, where one was left behind
/// when the process that made it was killed; it goes when its command ends, here
/// because its client was SIGKILLed, and with the bundle when the sandbox stops.
#[test]
fn a_command_s_folder_is_in_the_sandbox_s_bundle_and_goes_with_it() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let sandbox = Sandbox::create(runner, &ws, &home, &[]);
        let marker = sandbox.runsc_marker();
        let bundles = tmp_entries(&marker);
        let [bundle] = &bundles[..] else {
            panic!("one bundle folder {marker}* expected in /tmp: {bundles:?}")
        };
        let bundle = std::env::temp_dir().join(bundle);
        let execs = || -> Vec<String> {
            std::fs::read_dir(&bundle)
                .map(|d| {
                    d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                        .filter(|name| name.starts_with("exec-"))
                        .collect()
                })
                .unwrap_or_default()
        };
        let before = tmp_entries("vectraguard-gvisor-exec-");
        let client = Vg::new(runner, ws.path())
            .records_home(&home)
            .args(["sandbox", "exec", &sandbox.name, "--", "sleep", "1000"])
            .spawn();
        assert!(
            wait_until(Duration::from_secs(30), || execs().len() == 1),
            "no command folder in {}",
            bundle.display()
        );
        assert_eq!(tmp_entries("vectraguard-gvisor-exec-"), before);
        // runsc has read the command's environment: it is no longer on disk.
        let folder = bundle.join(&execs()[0]);
        assert!(
            wait_until(Duration::from_secs(10), || !folder
                .join("process.json")
                .exists()),
            "{} is still there",
            folder.join("process.json").display()
        );
        client.signal("KILL");
        let _ = client.finish(Duration::from_secs(10));
        // The client's hang-up ends the command, and its folder with it.
        assert!(
            wait_until(Duration::from_secs(10), || execs().is_empty()),
            "left: {:?}",
            execs()
        );
        assert_eq!(tmp_entries("vectraguard-gvisor-exec-"), before);
        sandbox.exec(&["true"]).assert_success();
        sandbox
            .vg(&["sandbox", "stop", &sandbox.name])
            .assert_success();
        assert!(
            wait_until(Duration::from_secs(10), || !bundle.exists()),
            "{} outlived the sandbox",
            bundle.display()
        );
    });
}

/// A static program that tries, against pid argv[1], every way a command could
/// have gVisor send a signal on its behalf: an `O_ASYNC` pipe owned by the pid
/// (`F_SETOWN` with `F_SETSIG` `SIGKILL`; `F_SETOWN`, `F_SETOWN_EX`, `FIOSETOWN`,
/// `SIOCSPGRP` with the default `SIGIO`), a child whose exit signal is `SIGKILL`
/// (`CLONE_PARENT`); then says its `no_new_privs` and its effective uid.
const IO_SIGNALS: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/sockios.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
static const char *io_signal(int how, int target) {
  int p[2], on = 1, ok;
  if (pipe(p)) return "error";
  if (how == 0) ok = fcntl(p[0], F_SETOWN, target) == 0 && fcntl(p[0], F_SETSIG, SIGKILL) == 0;
  else if (how == 1) ok = fcntl(p[0], F_SETOWN, target) == 0;
  else if (how == 2) { struct f_owner_ex o = {F_OWNER_PID, target}; ok = fcntl(p[0], F_SETOWN_EX, &o) == 0; }
  else { int t = target; ok = ioctl(p[0], how == 3 ? FIOSETOWN : SIOCSPGRP, &t) == 0; }
  ok = ok && ioctl(p[0], FIOASYNC, &on) == 0 && write(p[1], "x", 1) == 1;
  return ok ? "sent" : "refused";
}
int main(int argc, char **argv) {
  if (argc < 2) return 2;
  int target = atoi(argv[1]);
  printf("setsig=%s\n", io_signal(0, target));
  printf("setown=%s\n", io_signal(1, target));
  printf("setown_ex=%s\n", io_signal(2, target));
  printf("fiosetown=%s\n", io_signal(3, target));
  printf("siocspgrp=%s\n", io_signal(4, target));
  fflush(stdout);
  long c = syscall(SYS_clone, CLONE_PARENT | SIGKILL, 0, 0, 0, 0);
  if (c == 0) _exit(0);
  printf("exit_signal=%s\n", c > 0 ? "allowed" : "refused");
  printf("nnp=%d\n", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
  printf("euid=%d\n", (int)geteuid());
  return 0;
}
"#;

/// Red team (session 16): runsc starts an exec'd command with no filter and no
/// `no_new_privs`; a command stopped its own sandbox by having gVisor send the
/// first process `SIGKILL` as an I/O signal (`F_SETOWN` 1, `F_SETSIG`). Each
/// command now starts through our launcher: `F_SETSIG` and a chosen exit signal
/// are refused, the I/O signals left (`SIGIO`) are ignored by the first process,
/// `no_new_privs` holds, and the sandbox serves on.
#[test]
fn a_command_cannot_stop_its_sandbox_with_an_io_signal_and_runs_under_no_new_privs() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let program = ws.join("io-signals");
        super::harness::build_static_c(IO_SIGNALS, &program, &[]);
        // Set-user-ID, owned by the host's root (nobody's inside gVisor).
        std::fs::set_permissions(
            &program,
            std::os::unix::fs::PermissionsExt::from_mode(0o4755),
        )
        .unwrap();
        let home = RecordsHome::new(runner);
        let sandbox = Sandbox::create(runner, &ws, &home, &[]);
        let out = sandbox.exec(&["./io-signals", "1"]);
        out.assert_success();
        assert_eq!(out.field("setsig"), "refused", "{runner}\n{out}");
        assert_eq!(out.field("exit_signal"), "refused", "{runner}\n{out}");
        // Sent, and harmless: SIGIO is what the first process ignores.
        for how in ["setown", "setown_ex", "fiosetown", "siocspgrp"] {
            assert_eq!(out.field(how), "sent", "{runner} {how}\n{out}");
        }
        assert_eq!(out.field("nnp"), "1", "{runner}\n{out}");
        // The set-user-ID bit gives the command nothing.
        assert_eq!(out.field("euid"), "0", "{runner}\n{out}");
        std::thread::sleep(Duration::from_millis(300));
        sandbox.exec(&["true"]).assert_success();
        assert_eq!(sandbox.listed()["state"], "running", "{runner}");
        // A shell's children inherit it; the launcher's own descriptors and
        // environment are gone.
        let out = sandbox.exec(&[
            "python3",
            "-c",
            "import ctypes, os, subprocess; l = ctypes.CDLL(None); \
             print('nnp=%d' % l.prctl(39, 0, 0, 0, 0)); \
             c = subprocess.Popen(['sleep', '5']); \
             print('attach=%d' % l.ptrace(16, c.pid, 0, 0)); c.kill(); \
             print('fds=%s' % ' '.join(sorted(os.listdir('/proc/self/fd'), key=int))); \
             print('env=%s' % ','.join(sorted(k for k in os.environ if k.startswith('LD_') or k.startswith('VECTRAGUARD'))))",
        ]);
        if out.code() == Some(0) {
            assert_eq!(out.field("nnp"), "1", "{out}");
            // No command may trace another's launcher before its filter.
            assert_eq!(out.field("attach"), "-1", "{out}");
            // 3: the listing's own folder.
            assert_eq!(out.field("fds"), "0 1 2 3", "{out}");
            assert_eq!(out.field("env"), "", "{out}");
        }
        let meta = session_metadata(&home.only_session());
        assert_eq!(meta["layers"]["exec_no_new_privs"], 1, "{meta}");
    });
}

/// A loader variable in the command's environment acts on the command, never on
/// the launcher before its filter: the launcher's own environment is empty.
#[test]
fn a_loader_variable_does_not_run_before_the_launcher_s_filter() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let sandbox = Sandbox::create(runner, &ws, &home, &[]);
        let out = sandbox.vg(&[
            "sandbox",
            "exec",
            &sandbox.name,
            "--env",
            "LD_DEBUG=libs",
            "--",
            "sh",
            "-c",
            "echo ld=$LD_DEBUG",
        ]);
        out.assert_success();
        assert_eq!(out.field("ld"), "libs", "{out}");
        // The loader's debug output names the command's libraries only: the
        // launcher (bound at /.vectraguard) never read the variable.
        assert!(!out.stderr.contains("/.vectraguard"), "{out}");
    });
}

/// Each command's `exec` line is gVisor's exec point of the launcher's execve:
/// exactly one per command, with its argv, pid and no parent; the launcher is
/// never named; a program not found is 127 with the native message.
#[test]
fn each_command_has_exactly_one_exec_line_and_the_launcher_none() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let sandbox = Sandbox::create(runner, &ws, &home, &[]);
        for _ in 0..3 {
            sandbox.exec(&["true"]).assert_success();
        }
        let out = sandbox.exec(&["sh", "-c", "echo pid=$$"]);
        out.assert_success();
        let missing = sandbox.exec(&["no-such-program", "x"]);
        missing.assert_code(127);
        missing.assert_stderr_contains(
            "vectraguard: cannot run no-such-program: No such file or directory",
        );
        let log = std::fs::read_to_string(home.only_session().join("commands.log")).unwrap();
        let execs: Vec<&str> = log.lines().filter(|l| l.contains(" exec ")).collect();
        assert_eq!(
            execs.iter().filter(|l| l.ends_with(" -- true")).count(),
            3,
            "{log}"
        );
        let sh: Vec<&&str> = execs
            .iter()
            .filter(|l| l.ends_with(" -- sh -c 'echo pid=$$'"))
            .collect();
        assert_eq!(sh.len(), 1, "{log}");
        assert!(
            sh[0].contains(&format!(" exec pid={} ppid=0 ", out.field("pid"))),
            "{log}"
        );
        assert!(!log.contains("no-such-program"), "{log}");
        assert!(!log.contains(vg_sandbox::gvisor_launch::MODE), "{log}");
        // The first process's own exec is the only one of this program.
        assert_eq!(
            execs
                .iter()
                .filter(|l| l.contains("/.vectraguard/"))
                .count(),
            1,
            "{log}"
        );
    });
}

#[test]
fn an_idle_gvisor_sandbox_stops_itself_and_a_terminal_is_refused_naming_the_fix() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let sandbox = Sandbox::create(runner, &ws, &home, &["--idle-timeout", "1s"]);
        let terminal = sandbox.vg(&["sandbox", "exec", "-t", &sandbox.name, "--", "tty"]);
        assert_ne!(terminal.code(), Some(0), "{terminal}");
        terminal.assert_stderr_contains("without -t");
        let marker = sandbox.runsc_marker();
        assert!(
            wait_until(Duration::from_secs(30), || sandbox.listed()["state"]
                == "stopped"),
            "{}",
            sandbox.listed()
        );
        assert_no_process_left(&marker, &"runsc after the idle time-out");
    });
}

/// `mcp serve --backend gvisor`, through the client on the official MCP Python
/// SDK that `mcp.rs` uses: the connection's sandbox is a persistent gVisor
/// sandbox on the mediated network, its calls share it and are recorded in its
/// session.
#[test]
fn the_mcp_server_runs_its_sandboxes_on_gvisor() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join("target/test-tools/mcp/bin/python");
    assert!(
        python.exists(),
        "the MCP Python SDK is missing: scripts/test installs it in target/test-tools/mcp"
    );
    let client = root.join("crates/cli/tests/mcp/client.py");
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let calls = serde_json::json!([
            {"tool": "code_execute", "args": {"language": "shell", "code": "echo kept > /tmp/s; echo $((6*7))"}},
            {"tool": "code_execute", "args": {"language": "shell", "code": "cat /tmp/s; exit 4"}},
            {"tool": "code_destroy_sandbox", "args": {}},
        ]);
        let mut cmd = Vg::new(runner, ws.path());
        cmd.records_home(&home)
            .args(["mcp", "serve", "--ask", "never", "--"])
            .args(["--backend", "gvisor", "--best-effort-limits"])
            .stdin(calls.to_string())
            .through_shell(&format!(
                "exec {} {} stdio \"$@\"",
                python.display(),
                client.display()
            ));
        let out = cmd.run();
        out.assert_success();
        let results: Vec<Value> = out
            .stdout
            .lines()
            .skip(1)
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(results.len(), 3, "{out}");
        let body = |i: usize| &results[i]["structured"];
        assert_eq!(body(0)["stdout"], "42\n", "{}", results[0]);
        assert_eq!(body(1)["stdout"], "kept\n", "{}", results[1]);
        assert_eq!(body(1)["exit_code"], 4, "{}", results[1]);
        assert_eq!(body(0)["sandbox_id"], body(1)["sandbox_id"]);
        assert_eq!(results[2]["is_error"], false, "{}", results[2]);
        let session = body(0)["session"].as_str().unwrap_or_default().to_owned();
        let dir = home.logs().join(&session);
        let meta = session_metadata(&dir);
        assert_eq!(meta["layers"]["backend"], "gvisor", "{meta}");
        assert_eq!(meta["layers"]["network"], "tun", "{meta}");
        let log = std::fs::read_to_string(dir.join("commands.log")).unwrap();
        assert!(log.contains("cat /tmp/s"), "{log}");
        let verify = vg(runner, &ws, &home, &["logs", "verify", &session]);
        verify.assert_success().assert_stdout_contains("intact");
    });
}

/// A library that, loaded into any process, leaves a file in `/tmp` naming the
/// process and its user.
const PRELOADED: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void announce(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/hijacked-pid%d-uid%d", getpid(), getuid());
    int fd = open(path, O_CREAT | O_WRONLY, 0644);
    if (fd >= 0) close(fd);
}
"#;

/// Red team (session 16): an image's `/etc/ld.so.preload` loaded its library into
/// our program, which gVisor runs through the host's loader as the sandbox's first
/// process (a persistent sandbox's keeper, with the user of its own that no
/// command can signal; a `-t` command's relay): the image's code ran as it, as it
/// could not in a container. The preload list is empty now (for the commands too,
/// as in a container), and our folder a tmpfs holding only our files.
#[test]
fn an_image_cannot_load_its_code_into_the_sandbox_s_first_process() {
    // An image store is its user's: runsc, as the sandbox's user, reads it.
    let runner = Runner::Unprivileged;
    let ws = Workspace::new();
    let home = RecordsHome::new(runner);
    let root = ws.join("rootfs");
    for dir in [
        "bin",
        "etc",
        "tmp",
        ".vectraguard/lib/glibc-hwcaps/x86-64-v2",
    ] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    std::fs::set_permissions(
        root.join("tmp"),
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .unwrap();
    super::harness::busybox_root_preloading(&root, &["sh", "cat", "ls", "echo"], PRELOADED);
    // Where the loader looks before our libraries.
    std::fs::write(
        root.join(".vectraguard/lib/glibc-hwcaps/x86-64-v2/planted"),
        "image\n",
    )
    .unwrap();
    let tar = ws.join("rootfs.tar");
    super::harness::pack_root(&root, &tar);
    std::fs::set_permissions(&tar, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let image = format!("vectraguard-test/gvisor-preload-{}:1", unique());
    vg(
        runner,
        &ws,
        &home,
        &["image", "import", &tar.to_string_lossy(), "--tag", &image],
    )
    .assert_success();
    let sandbox = Sandbox::create(runner, &ws, &home, &["--image", &image]);
    let out = sandbox.exec(&[
        "sh",
        "-c",
        "echo preload=[$(cat /etc/ld.so.preload)]; ls /tmp; ls -R /.vectraguard/lib",
    ]);
    out.assert_success();
    // Empty for the whole sandbox, as in a container.
    assert!(out.stdout.contains("preload=[]"), "{out}");
    assert!(!out.stdout.contains("hijacked-pid1-"), "{out}");
    assert!(!out.stdout.contains("glibc-hwcaps"), "{out}");
    assert!(!out.stdout.contains("planted"), "{out}");
}

/// The process cap of a persistent gVisor sandbox is gVisor's own kernel's, for
/// its commands together: 300 at once under the default cap, and `--pids 64`
/// refusing the 64th task (the first process, under its own user, is not
/// counted). A command cannot step past the cap through a user namespace (gVisor
/// does not count a task with capabilities there): `runsc exec` installs no
/// seccomp filter, so the launcher installs one that refuses it (red team,
/// session 16: `unshare -U` and 40 processes under `--pids 16`).
#[test]
fn a_persistent_sandbox_s_process_cap_counts_its_commands_inside_gvisor() {
    use super::gvisor::MANY;
    use super::harness::PYTHON;
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let sandbox = Sandbox::create(runner, &ws, &home, &[]);
        let out = sandbox.exec(&[PYTHON, "-c", MANY, "300"]);
        out.assert_success();
        assert!(!out.stdout.contains("refused="), "{out}");
        assert_eq!(out.field("reaped"), "300", "{out}");
        // The sandbox lives on.
        sandbox.exec(&["true"]).assert_success();
        let capped = Sandbox::create(runner, &ws, &home, &["--pids", "64"]);
        let out = capped.exec(&[PYTHON, "-c", MANY, "100"]);
        out.assert_success();
        assert_eq!(out.field("refused"), "63", "{out}");
        assert_eq!(out.field("errno"), "11", "{out}");
        capped.exec(&["true"]).assert_success();
        let session = capped.listed()["session"].as_str().unwrap().to_owned();
        let dir = home
            .sessions()
            .into_iter()
            .find(|d| d.to_string_lossy().ends_with(&session))
            .unwrap();
        let meta = session_metadata(&dir);
        let by = meta["limits"]["enforced_by"]["pids"]
            .as_str()
            .unwrap_or_default();
        assert_eq!(by, "gvisor-rlimit-nproc (64 tasks inside)", "{meta}");
        assert_eq!(
            meta["layers"]["user_namespaces"], "denied-by-oci-seccomp-and-exec-launcher",
            "{meta}"
        );
        // The attack: a user namespace, then more processes than the cap.
        let out = capped.exec(&[
            "sh",
            "-c",
            "unshare -U --map-user=0 sh -c 'for i in $(seq 80); do sleep 30 & done; echo started'",
        ]);
        assert!(!out.stdout.contains("started"), "{out}");
        assert!(
            out.stderr.contains("Operation not permitted"),
            "no EPERM for the user namespace: {out}"
        );
        capped.exec(&["true"]).assert_success();
    });
}

/// When gVisor does die (its own host tasks reach the host cap: here lowered by
/// hand to what it uses already), a `sandbox exec` waiting on a command fails at
/// once saying so, and `sandbox ls` says stopped, never `starting` (red team 2,
/// session 15).
#[test]
fn a_sandbox_that_dies_fails_its_waiting_exec_at_once_and_is_listed_stopped() {
    use super::gvisor::MANY;
    use super::harness::PYTHON;
    let runner = Runner::Root;
    if !super::harness::runners().contains(&runner) {
        return;
    }
    let ws = Workspace::new();
    let home = RecordsHome::new(runner);
    let sandbox = Sandbox::create(runner, &ws, &home, &[]);
    let marker = sandbox.runsc_marker();
    let cgroup =
        super::gvisor::pids_cgroup_of(&marker).expect("no pids cgroup holds gVisor here as root");
    let mut waiting = Vg::new(runner, ws.path());
    waiting
        .args([
            "sandbox",
            "exec",
            sandbox.name.as_str(),
            "--",
            "sleep",
            "300",
        ])
        .records_home(&home);
    let waiting = waiting.spawn();
    std::thread::sleep(Duration::from_secs(2));
    let current: u64 = std::fs::read_to_string(cgroup.join("pids.current"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::fs::write(cgroup.join("pids.max"), (current + 8).to_string()).unwrap();
    let started = Instant::now();
    let many = sandbox.exec(&[PYTHON, "-c", MANY, "100"]);
    let out = waiting.finish(Duration::from_secs(30));
    // Everything a failure needs to be understood from CI's log alone.
    let context = |what: &str| {
        format!(
            "{what}\n--- the waiting exec:\n{out}\n--- the forks:\n{many}\n--- listed: {}\n--- gVisor's cgroup: pids.max {:?} pids.current {:?} pids.events {:?}",
            sandbox.listed(),
            std::fs::read_to_string(cgroup.join("pids.max")),
            std::fs::read_to_string(cgroup.join("pids.current")),
            std::fs::read_to_string(cgroup.join("pids.events")),
        )
    };
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "{}",
        context("the waiting exec hung")
    );
    assert_eq!(out.code(), Some(125), "{}", context("not 125"));
    assert!(
        out.stderr
            .contains("the sandbox hung up before the command ended"),
        "{}",
        context("no hang-up named")
    );
    let stopped = wait_until(Duration::from_secs(30), || {
        sandbox.listed()["state"] == "stopped"
    });
    assert!(stopped, "{}", context("not listed stopped"));
    assert_no_process_left(&marker, &out);
    // The record says which cap was reached: the host's, on gVisor's own tasks.
    let dir = std::path::PathBuf::from(sandbox.listed()["session_dir"].as_str().unwrap());
    let hits = super::limits::limit_hits(&dir, "pids");
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap_or_default();
    assert_eq!(hits.len(), 1, "{hits:?}\n{events}\n{out}\n{many}");
    assert!(
        hits[0]["enforced_by"]
            .as_str()
            .unwrap_or_default()
            .contains("host tasks for gVisor itself"),
        "{hits:?}"
    );
}
