//! A persistent gVisor sandbox (`sandbox create --backend gvisor`): the commands
//! `sandbox exec` starts in it, through `runsc exec`.
//!
//! Why `runsc exec`: runsc gives no other way into a running sandbox. Our own init
//! inside, serving the spawner protocol as in a container, would need a channel
//! that carries the commands' stdio: gVisor imports a donated host unix socket, but
//! its host socket endpoint refuses every control message (`SCM_RIGHTS` included;
//! `pkg/sentry/socket/unix/transport/host.go`, `HostConnectedEndpoint.Send`), so
//! the output would have to be relayed in-band by code inside the sandbox. `runsc
//! exec` hands its own stdin, stdout and stderr to the sentry as the new process's
//! (`control.ExecArgs.FilePayload`): the pipes the host gives it carry the bytes the
//! command writes, unchanged, to the record's relays.
//!
//! What runsc leaves to us, and how it is held:
//! - the process: `--process FILE`, a JSON OCI process: our launcher
//!   (`vg_sandbox::gvisor_launch`) with the command's argv and whole environment
//!   as its arguments, the folder, the user and empty capability sets (no exec can
//!   give any back); runsc 20221219 carries no `noNewPrivileges` for an exec and
//!   installs no filter, so the launcher sets `no_new_privs` and its filter, then
//!   executes the command;
//! - its pid inside: `--internal-pid-file`, written once it started (a command
//!   that could not be started writes none);
//! - its end: runsc's own exit status says a signal `N` as `128 + N`, like a shell;
//!   the exact wait status comes from gVisor's exit trace point for that pid;
//! - signals and time-outs: `runsc kill --pid PID SIGNAL` (runsc signals one process,
//!   not a process group);
//! - the sandbox's first process, which ends the sandbox when it ends: our own
//!   program in [`PAUSE_MODE`], as a user no command runs as ([`pause_identity`]),
//!   since gVisor does not shield a pid namespace's init from its members' signals
//!   (`pkg/sentry/kernel/task_signals.go`): a command may signal or trace only
//!   processes of its own user, and has no capability to do more.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// The first argument that starts this program as a persistent gVisor sandbox's
/// first process, which does nothing but wait (see [`pause`]).
pub const PAUSE_MODE: &str = "__vectraguard-gvisor-pause";

/// The first process of a persistent gVisor sandbox: ignores the I/O signals a
/// command may have gVisor send it, reaps what it is given and waits forever
/// (`vg_sandbox::gvisor_launch::keep_sandbox`); the sandbox ends when runsc is
/// told to end it.
pub fn pause() -> ! {
    vg_sandbox::gvisor_launch::keep_sandbox()
}

/// The user and group the first process runs as inside gVisor: neither the
/// commands' (`command`), nor 0 (the host user's files), nor 65534 (every other
/// host user's files, set-user-ID ones among them): a command, even through a
/// set-user-ID program, can then neither signal nor trace it (pure).
pub fn pause_identity(command: (u32, u32)) -> (u32, u32) {
    let taken = |id: u32, own: u32| id == own || id == 0 || id == 65534;
    let pick = |own: u32| (1..65534).rev().find(|id| !taken(*id, own)).unwrap_or(1);
    (pick(command.0), pick(command.1))
}

/// How to reach one running gVisor sandbox with runsc's own commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecTarget {
    pub runsc: PathBuf,
    /// This program inside the sandbox (its loader's command line when it has
    /// one), which each command is started through (`vg_sandbox::gvisor_launch`).
    pub launcher: Vec<String>,
    /// runsc's state folder (`--root`).
    pub state: PathBuf,
    /// The container's id.
    pub id: String,
    /// runsc's user, when we are root and runsc is not (see `Bundle::runtime`).
    pub run_as: Option<(u32, u32)>,
    /// Who the commands are inside gVisor.
    pub user: (u32, u32),
    /// runsc runs in the keeper's user and network namespace (every network but the
    /// host's): its control socket (an abstract unix socket) is only reachable there.
    pub keeper_namespaces: bool,
}

impl ExecTarget {
    fn flags(&self) -> Vec<String> {
        vec![
            self.runsc.display().to_string(),
            "--root".into(),
            self.state.display().to_string(),
            "--rootless".into(),
            "--ignore-cgroups".into(),
        ]
    }

    /// `runsc exec` of the process in `process` (see [`Self::process`]), its pid
    /// inside written to `pid_file`, runsc's own errors as JSON lines to
    /// `error_log` (they also go to its stderr, the command's).
    pub fn exec_argv(&self, process: &Path, pid_file: &Path, error_log: &Path) -> Vec<String> {
        let mut argv = self.flags();
        argv.extend([
            format!("--log={}", error_log.display()),
            "exec".into(),
            "--process".into(),
            process.display().to_string(),
            "--internal-pid-file".into(),
            pid_file.display().to_string(),
            self.id.clone(),
        ]);
        argv
    }

    /// `runsc state`: the container's OCI state (see [`is_running`]).
    pub fn state_argv(&self) -> Vec<String> {
        let mut argv = self.flags();
        argv.extend(["state".into(), self.id.clone()]);
        argv
    }

    /// `runsc ps`: the sandbox's processes as a table (see [`processes`]).
    pub fn ps_argv(&self) -> Vec<String> {
        let mut argv = self.flags();
        argv.extend(["ps".into(), self.id.clone()]);
        argv
    }

    /// `runsc kill` of one process (a pid inside the sandbox).
    pub fn kill_argv(&self, pid: i32, signal: i32) -> Vec<String> {
        let mut argv = self.flags();
        argv.extend([
            "kill".into(),
            "--pid".into(),
            pid.to_string(),
            self.id.clone(),
            signal.to_string(),
        ]);
        argv
    }

    /// The OCI process of one command: the launcher, which executes `argv` with
    /// exactly `env` (given as its arguments: the launcher's own environment is
    /// empty, so no loader variable acts on it), in `cwd`, as [`Self::user`], with
    /// no capabilities.
    pub fn process(&self, argv: &[String], env: &[(String, String)], cwd: &Path) -> Value {
        let none: Vec<String> = Vec::new();
        let mut args = self.launcher.clone();
        args.extend(vg_sandbox::gvisor_launch::args(argv, env));
        json!({
            "terminal": false,
            "user": {"uid": self.user.0, "gid": self.user.1},
            "args": args,
            "env": none,
            "cwd": cwd,
            "capabilities": {
                "bounding": none, "effective": none, "inheritable": none,
                "permitted": none, "ambient": none,
            },
            "noNewPrivileges": true,
        })
    }
}

/// Whether `runsc state`'s output says the container runs (its first process
/// started): only then does `runsc exec` reach it (pure).
pub fn is_running(state: &str) -> bool {
    serde_json::from_str::<Value>(state).is_ok_and(|v| v["status"] == "running")
}

/// The (pid, parent pid) pairs of `runsc ps`'s table (`UID PID PPID …`), its
/// header and any line it cannot read left out (pure).
pub fn processes(table: &str) -> Vec<(i32, i32)> {
    table
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace().skip(1);
            let pid = fields.next()?.parse().ok()?;
            let ppid = fields.next()?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect()
}

/// `root` and every process descended from it, parents before their children:
/// what a command's signal reaches, since runsc signals one process at a time and
/// a native command's signal goes to its process group (pure).
pub fn descendants(processes: &[(i32, i32)], root: i32) -> Vec<i32> {
    let mut out = vec![root];
    let mut i = 0;
    while let Some(&parent) = out.get(i) {
        i += 1;
        for &(pid, ppid) in processes {
            if ppid == parent && pid != parent && !out.contains(&pid) {
                out.push(pid);
            }
        }
    }
    out
}

/// runsc's error message in its error log (JSON lines, `{"msg": …}`): the last.
pub fn error_message(log: &str) -> Option<String> {
    log.lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find_map(|v| v["msg"].as_str().map(str::to_owned))
}

/// Why `runsc exec` could not start a command, from runsc's error text: the errno
/// a native start would have failed with, negated for the working directory, as
/// `Termination::ExecFailed` says it (pure).
pub fn start_errno(message: &str) -> i32 {
    let lower = message.to_ascii_lowercase();
    let errno = errno_named(&lower);
    if lower.contains("working directory") {
        -errno
    } else {
        errno
    }
}

fn errno_named(lower: &str) -> i32 {
    if lower.contains("no such file or directory") || lower.contains("not found") {
        libc::ENOENT
    } else if lower.contains("permission denied") {
        libc::EACCES
    } else if lower.contains("exec format error") {
        libc::ENOEXEC
    } else if lower.contains("not a directory") {
        libc::ENOTDIR
    } else {
        libc::EINVAL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_process_is_a_user_no_command_and_no_file_owner_is() {
        for command in [(0, 0), (1000, 1000), (65533, 65533), (65534, 65534), (1, 2)] {
            let (uid, gid) = pause_identity(command);
            for (id, own) in [(uid, command.0), (gid, command.1)] {
                assert_ne!(id, own, "{command:?}");
                assert_ne!(id, 0);
                assert_ne!(id, 65534);
            }
        }
        assert_eq!(pause_identity((0, 0)), (65533, 65533));
        assert_eq!(pause_identity((65533, 0)), (65532, 65533));
    }

    #[test]
    fn runsc_is_told_the_whole_process_and_where_to_write_its_pid() {
        let target = ExecTarget {
            runsc: "/usr/bin/runsc".into(),
            launcher: vec!["/ld.so".into(), "/.vectraguard/vectraguard".into()],
            state: "/tmp/b/state".into(),
            id: "vg-1".into(),
            run_as: None,
            user: (0, 0),
            keeper_namespaces: false,
        };
        let argv = target.exec_argv(
            Path::new("/x/p.json"),
            Path::new("/x/pid"),
            Path::new("/x/e.log"),
        );
        assert_eq!(
            argv,
            [
                "/usr/bin/runsc",
                "--root",
                "/tmp/b/state",
                "--rootless",
                "--ignore-cgroups",
                "--log=/x/e.log",
                "exec",
                "--process",
                "/x/p.json",
                "--internal-pid-file",
                "/x/pid",
                "vg-1"
            ]
        );
        assert_eq!(
            target.kill_argv(7, 15)[5..],
            ["kill", "--pid", "7", "vg-1", "15"]
        );
        let p = target.process(
            &["sh".into(), "-c".into(), "true".into()],
            &[("A".into(), "b=c".into())],
            Path::new("/w"),
        );
        assert_eq!(
            p["args"],
            json!([
                "/ld.so",
                "/.vectraguard/vectraguard",
                vg_sandbox::gvisor_launch::MODE,
                "1",
                "A=b=c",
                "sh",
                "-c",
                "true"
            ])
        );
        assert_eq!(p["env"], json!([]));
        assert_eq!(p["cwd"], "/w");
        assert_eq!(p["user"], json!({"uid": 0, "gid": 0}));
        for set in [
            "bounding",
            "effective",
            "inheritable",
            "permitted",
            "ambient",
        ] {
            assert_eq!(p["capabilities"][set], json!([]), "{set}");
        }
        assert_eq!(p["terminal"], false);
    }

    #[test]
    fn a_signal_reaches_the_command_and_everything_it_started() {
        let table = "UID       PID       PPID      C         TTY       STIME     TIME      CMD\n\
0         1         0         0         ?         10:37     0s        sleep\n\
0         15        0         0         ?         10:51     10ms      sh\n\
0         16        15        0         ?         10:51     0s        sleep\n\
0         17        16        0         ?         10:51     20ms      sleep\n\
0         18        0         0         ?         10:51     0s        other\n";
        let procs = processes(table);
        assert_eq!(procs, [(1, 0), (15, 0), (16, 15), (17, 16), (18, 0)]);
        assert_eq!(descendants(&procs, 15), [15, 16, 17]);
        // The first process and other commands are never reached.
        assert_eq!(descendants(&procs, 18), [18]);
        assert_eq!(descendants(&[], 5), [5]);
    }

    #[test]
    fn only_a_running_container_takes_commands() {
        assert!(is_running(
            "{\"id\":\"vg\",\"status\":\"running\",\"pid\":3}"
        ));
        assert!(!is_running("{\"id\":\"vg\",\"status\":\"created\"}"));
        assert!(!is_running("loading container: file does not exist"));
    }

    #[test]
    fn runsc_s_last_error_is_read_from_its_json_log() {
        let log = "{\"msg\":\"first\",\"level\":\"error\"}\nnot json\n{\"msg\":\"failed to load /x: permission denied\",\"level\":\"error\",\"time\":\"t\"}\n";
        assert_eq!(
            error_message(log).as_deref(),
            Some("failed to load /x: permission denied")
        );
        assert_eq!(error_message(""), None);
    }

    #[test]
    fn a_start_failure_keeps_the_errno_a_native_start_would_have() {
        assert_eq!(
            start_errno(
                "executing processes for container: executing command \"/nope\" in sandbox: failed to load /nope: no such file or directory"
            ),
            libc::ENOENT
        );
        assert_eq!(
            start_errno("failed to load /x: permission denied"),
            libc::EACCES
        );
        assert_eq!(start_errno("something else"), libc::EINVAL);
        assert_eq!(
            start_errno(
                "executing command \"true\" in sandbox: failed to find initial working directory \"/nonexist\": no such file or directory"
            ),
            -libc::ENOENT
        );
    }
}
