//! End-to-end tests of the seccomp tracer in real sandboxes: execs, file calls
//! (`trace_files`) and refusals (`report_refusals`).
//!
//! A sandbox is only spawned by a process with one thread (`spawn_in` refuses
//! otherwise), so this binary has no libtest harness: `main` runs each case in turn,
//! joining every thread it started before the next. As root it runs each case with
//! root as the supervisor (the sandboxed command runs as the test user,
//! `$VG_TEST_USER`, default `vgtest`, created when missing), then runs itself again
//! through `setpriv` as that user for the unprivileged supervisor.
//!
//! `cargo test -p vg-sandbox --test trace [-- FILTER]`; the timing of 10,000 opens
//! with and without `trace_files` runs only when asked:
//! `cargo test -p vg-sandbox --test trace -- --ignored bench`.

// The whole file is test code (clippy's allow-*-in-tests only covers `#[test]`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use vg_policy::view::{HostEntry, HostLayout, NodeKind, SECRET_PATHS, SYSTEM_DIRS, ViewOptions};
use vg_policy::{FsView, Identity};
use vg_sandbox::trace::{ExitStatus, Exits, FileAccess, TraceEvent, Verdict};
use vg_sandbox::{SandboxNetwork, SandboxSpec, Termination};

/// Set in the copy of this binary that runs as the unprivileged user.
const UNPRIVILEGED: &str = "VG_TRACE_TEST_UNPRIVILEGED";
const PYTHON: &str = "/usr/bin/python3";

struct Case {
    name: &'static str,
    run: fn(&Identity),
    /// Only when asked (`--ignored`): a measurement, not a check.
    ignored: bool,
}

const CASES: &[Case] = &[
    Case {
        name: "shell_file_calls_are_traced_with_absolute_paths",
        run: shell_file_calls_are_traced_with_absolute_paths,
        ignored: false,
    },
    Case {
        name: "every_traced_file_call_reports_its_paths",
        run: every_traced_file_call_reports_its_paths,
        ignored: false,
    },
    Case {
        name: "refusals_fail_with_eperm_and_are_reported",
        run: refusals_fail_with_eperm_and_are_reported,
        ignored: false,
    },
    Case {
        name: "without_the_options_nothing_new_is_reported",
        run: without_the_options_nothing_new_is_reported,
        ignored: false,
    },
    Case {
        name: "file_tracing_needs_exec_tracing",
        run: file_tracing_needs_exec_tracing,
        ignored: false,
    },
    Case {
        name: "exits_are_reported_with_their_status",
        run: exits_are_reported_with_their_status,
        ignored: false,
    },
    Case {
        name: "the_end_is_known_before_init_is_reaped",
        run: the_end_is_known_before_init_is_reaped,
        ignored: false,
    },
    Case {
        name: "bench_10000_opens",
        run: bench_10000_opens,
        ignored: true,
    },
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for case in CASES {
            println!("{}: test", case.name);
        }
        return;
    }
    let ignored = args
        .iter()
        .any(|a| a == "--ignored" || a == "--include-ignored");
    let exact = args.iter().any(|a| a == "--exact");
    let filter = args.iter().find(|a| !a.starts_with('-'));
    let selected: Vec<&Case> = CASES
        .iter()
        .filter(|c| !c.ignored || ignored)
        .filter(|c| {
            filter.is_none_or(|f| {
                if exact {
                    c.name == f
                } else {
                    c.name.contains(f.as_str())
                }
            })
        })
        .collect();
    let unprivileged = std::env::var_os(UNPRIVILEGED).is_some();
    let who = if unprivileged {
        "unprivileged"
    } else if is_root() {
        "root"
    } else {
        "unprivileged"
    };
    let identity = sandbox_identity();
    let mut failed = Vec::new();
    for case in &selected {
        let result = std::panic::catch_unwind(|| (case.run)(&identity));
        let verdict = if result.is_ok() { "ok" } else { "FAILED" };
        println!("test {} (supervisor: {who}) ... {verdict}", case.name);
        if result.is_err() {
            failed.push(format!("{} ({who})", case.name));
        }
    }
    if is_root() && !unprivileged && !selected.is_empty() {
        let copy = reachable_copy();
        let status = Command::new("setpriv")
            .arg(format!("--reuid={}", identity.uid))
            .arg(format!("--regid={}", identity.gid))
            .arg("--clear-groups")
            .arg("--")
            .arg(&copy)
            .args(&args)
            .env(UNPRIVILEGED, "1")
            .env("HOME", &identity.home)
            .status()
            .expect("run setpriv");
        if copy != std::env::current_exe().unwrap() {
            let _ = std::fs::remove_file(&copy);
        }
        if !status.success() {
            failed.push("the unprivileged run".into());
        }
    }
    println!(
        "\ntest result: {}. {} passed; {} failed",
        if failed.is_empty() { "ok" } else { "FAILED" },
        selected.len() - failed.len().min(selected.len()),
        failed.len()
    );
    if !failed.is_empty() {
        eprintln!("failed: {}", failed.join(", "));
        std::process::exit(1);
    }
}

// ---------------------------------------------------------------------------------------
// Cases.

fn shell_file_calls_are_traced_with_absolute_paths(id: &Identity) {
    let script = "set -e
mkdir /tmp/t
cd /tmp/t
echo hi > a.txt
cat a.txt > /dev/null
cat /tmp/t/../t/./a.txt > /dev/null
mv a.txt ../t/./b.txt
mkdir sub
rmdir ./sub
(: > c.txt)
rm b.txt c.txt
cd ..
rmdir t";
    let run = run(id, &["/bin/sh", "-c", script], Options::FILES);
    run.assert_success();

    use FileAccess::{Create, Read, Remove};
    assert_eq!(
        run.files_under("/tmp/t"),
        [
            ("/tmp/t", Create, "/usr/bin/mkdir"),
            // The shell's own redirection: the program is the shell.
            ("/tmp/t/a.txt", Create, "/bin/sh"),
            ("/tmp/t/a.txt", Read, "/usr/bin/cat"),
            ("/tmp/t/a.txt", Read, "/usr/bin/cat"),
            ("/tmp/t/a.txt", Remove, "/usr/bin/mv"),
            ("/tmp/t/b.txt", Create, "/usr/bin/mv"),
            ("/tmp/t/sub", Create, "/usr/bin/mkdir"),
            ("/tmp/t/sub", Remove, "/usr/bin/rmdir"),
            // A subshell that executes nothing runs the shell's program.
            ("/tmp/t/c.txt", Create, "/bin/sh"),
            ("/tmp/t/b.txt", Remove, "/usr/bin/rm"),
            ("/tmp/t/c.txt", Remove, "/usr/bin/rm"),
            ("/tmp/t", Remove, "/usr/bin/rmdir"),
        ]
        .map(Expected::from)
    );
    // Each event names the pid of the process whose exec named that program.
    for event in &run.events {
        if let TraceEvent::File {
            pid,
            exe: Some(exe),
            path,
            ..
        } = event
            && path.starts_with("/tmp/t")
            && exe.as_slice() != b"/bin/sh"
        {
            let exec_pids = run.exec_pids(exe);
            assert!(
                exec_pids.contains(pid),
                "{path:?}: {pid} not in {exec_pids:?}"
            );
        }
    }
    assert!(run.denied().is_empty(), "{:?}", run.denied());
    // The events carry the sandbox's root, for the supervisor to look paths up
    // inside: opened through the calling process, since init is not dumpable and an
    // unprivileged supervisor cannot open its root.
    for event in &run.events {
        if let TraceEvent::File { path, root, .. } = event
            && path.starts_with("/tmp/t")
        {
            let root = root
                .as_ref()
                .unwrap_or_else(|| panic!("{path:?}: no root in {event:?}"));
            assert!(root.open().unwrap().metadata().unwrap().is_dir());
        }
    }
}

fn every_traced_file_call_reports_its_paths(id: &Identity) {
    // Python without site or the script's folder, so that only the calls below touch
    // /tmp/p.
    let script = r#"
import os
os.chdir("/tmp")
os.mkdir("p")
d = os.open("p", os.O_RDONLY | os.O_DIRECTORY)
os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=d))
os.truncate("p/f", 0)
os.link("p/f", "p/g")
os.symlink("/elsewhere/target", "l", dir_fd=d)
os.rename("g", "h", src_dir_fd=d, dst_dir_fd=d)
os.mkdir("sub", dir_fd=d)
os.rmdir("sub", dir_fd=d)
os.close(os.open("p/./h", os.O_RDONLY | os.O_TRUNC))
os.close(os.open("p/h", os.O_PATH | os.O_WRONLY))
os.close(os.open("/tmp/p//h", os.O_RDWR | os.O_APPEND))
for n in ("f", "h", "l"):
    os.unlink(n, dir_fd=d)
os.close(d)
os.chdir("p")
os.rmdir("../p/")
"#;
    let run = run(id, &[PYTHON, "-I", "-S", "-c", script], Options::FILES);
    run.assert_success();
    use FileAccess::{Create, Read, Remove, Write};
    let py = PYTHON;
    assert_eq!(
        run.files_under("/tmp/p"),
        [
            ("/tmp/p", Create, py),
            ("/tmp/p", Read, py),
            ("/tmp/p/f", Create, py),
            ("/tmp/p/f", Write, py),
            ("/tmp/p/f", Read, py),
            ("/tmp/p/g", Create, py),
            ("/tmp/p/l", Create, py),
            ("/tmp/p/g", Remove, py),
            ("/tmp/p/h", Create, py),
            ("/tmp/p/sub", Create, py),
            ("/tmp/p/sub", Remove, py),
            ("/tmp/p/h", Write, py),
            ("/tmp/p/h", Read, py),
            ("/tmp/p/h", Write, py),
            ("/tmp/p/f", Remove, py),
            ("/tmp/p/h", Remove, py),
            ("/tmp/p/l", Remove, py),
            ("/tmp/p", Remove, py),
        ]
        .map(Expected::from)
    );
    let syscalls: Vec<&str> = run
        .events
        .iter()
        .filter_map(|e| match e {
            TraceEvent::File { syscall, path, .. } if path.starts_with("/tmp/p") => Some(*syscall),
            _ => None,
        })
        .collect();
    // The calls themselves, as this Python makes them.
    for wanted in [
        "mkdir", "openat", "truncate", "renameat", "unlinkat", "rmdir",
    ] {
        assert!(syscalls.contains(&wanted), "{wanted} not in {syscalls:?}");
    }
    assert!(
        syscalls.iter().any(|s| *s == "link" || *s == "linkat"),
        "{syscalls:?}"
    );
    assert!(syscalls.contains(&"symlinkat"), "{syscalls:?}");
}

fn refusals_fail_with_eperm_and_are_reported(id: &Identity) {
    let run = run(id, &[PYTHON, "-I", "-S", "-c", REFUSALS], Options::REFUSALS);
    run.assert_success();
    // Failed as the filter fails them: never run. unshare(CLONE_NEWUSER) in particular
    // would succeed if the tracer let it go.
    assert_eq!(run.stdout, REFUSALS_OUTPUT, "{run:?}");
    let python = run.exec_pids(PYTHON.as_bytes());
    assert_eq!(python.len(), 1, "{run:?}");
    let denied = run.denied();
    let names: Vec<&str> = denied.iter().map(|(_, name, _, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "unshare",
            "mount",
            "ptrace",
            "sethostname",
            "clone",
            "syscall_999"
        ],
        "{run:?}"
    );
    for (pid, name, nr, exe) in &denied {
        assert_eq!(*pid, python[0], "{name}");
        assert_eq!(exe.as_deref(), Some(PYTHON.as_bytes()), "{name}");
        if name == "syscall_999" {
            assert_eq!(*nr, 999);
        }
    }
    assert_eq!(denied[0].2, libc::SYS_unshare);
    assert!(run.files_under("/").is_empty());
}

fn without_the_options_nothing_new_is_reported(id: &Identity) {
    let script = "mkdir /tmp/t && cd /tmp/t && echo hi > a && cat a && mv a b && rm b && cd / && rmdir /tmp/t";
    let run = run(id, &["/bin/sh", "-c", script], Options::EXEC_ONLY);
    run.assert_success();
    assert_eq!(run.stdout, "hi\n");
    for program in [
        "/usr/bin/mkdir",
        "/usr/bin/cat",
        "/usr/bin/mv",
        "/usr/bin/rm",
    ] {
        assert_eq!(
            run.exec_pids(program.as_bytes()).len(),
            1,
            "{program}: {run:?}"
        );
    }
    assert!(run.files_under("/").is_empty(), "{run:?}");
    // Refusals are still refused, by the filter alone, and not reported.
    let run = self::run(
        id,
        &[PYTHON, "-I", "-S", "-c", REFUSALS],
        Options::EXEC_ONLY,
    );
    run.assert_success();
    assert_eq!(run.stdout, REFUSALS_OUTPUT, "{run:?}");
    assert!(run.denied().is_empty(), "{run:?}");
    assert!(
        run.enforced.contains("seccomp_notify=exec,exit\n"),
        "{}",
        run.enforced
    );
}

/// Each traced program's exit comes with how it ended, after its exec and before
/// the next program its parent starts; through pidfds also a death by a signal and
/// the exit of a process its parent reaps late.
fn exits_are_reported_with_their_status(id: &Identity) {
    // The last child is reaped 300 ms after it exited: a zombie meanwhile.
    let script = "/bin/true; /bin/false; /bin/sh -c 'kill -KILL $$'; \
        /usr/bin/python3 -I -S -c 'import os,time
p = os.fork()
if p == 0: os.execv(\"/bin/sh\", [\"sh\", \"-c\", \"exit 5\"])
time.sleep(0.3)
os.waitpid(p, 0)'; /bin/sleep 0.2";
    for exits in [Exits::Pidfd, Exits::Trap] {
        if exits == Exits::Pidfd && !Exits::pidfd_available() {
            continue;
        }
        let run = run(
            id,
            &["/bin/sh", "-c", script],
            Options {
                exits,
                ..Options::EXEC_ONLY
            },
        );
        run.assert_success();
        let exit_of = |program: &str| -> Vec<(usize, ExitStatus)> {
            let pids = run.exec_pids(program.as_bytes());
            run.events
                .iter()
                .enumerate()
                .filter_map(|(i, e)| match e {
                    TraceEvent::Exit { pid, status, .. } if pids.contains(pid) => {
                        Some((i, *status))
                    }
                    _ => None,
                })
                .collect()
        };
        let exec_at = |program: &str| {
            run.events
                .iter()
                .position(
                    |e| matches!(e, TraceEvent::Exec { path, .. } if path == program.as_bytes()),
                )
                .unwrap_or_else(|| panic!("no exec of {program}: {run:?}"))
        };
        let true_exit = exit_of("/bin/true");
        assert_eq!(true_exit.len(), 1, "{exits:?} {run:?}");
        assert_eq!(true_exit[0].1, ExitStatus::Code(0), "{run:?}");
        assert!(exec_at("/bin/true") < true_exit[0].0, "{run:?}");
        assert!(true_exit[0].0 < exec_at("/bin/false"), "in order: {run:?}");
        assert_eq!(
            exit_of("/bin/false")
                .iter()
                .map(|e| e.1)
                .collect::<Vec<_>>(),
            [ExitStatus::Code(1)],
            "{run:?}"
        );
        assert_eq!(
            exit_of("/bin/sleep")
                .iter()
                .map(|e| e.1)
                .collect::<Vec<_>>(),
            [ExitStatus::Code(0)],
            "{run:?}"
        );
        // Three execs of /bin/sh: the script (exit 0), the one killed, the one that
        // exits 5 while its parent does not reap it yet.
        let mut sh: Vec<ExitStatus> = exit_of("/bin/sh").iter().map(|e| e.1).collect();
        sh.sort_by_key(|s| format!("{s:?}"));
        let mut expected = vec![ExitStatus::Code(0), ExitStatus::Code(5)];
        // A program killed by a signal never calls exit_group: only its pidfd tells.
        if Exits::pidfd_available() {
            expected.push(ExitStatus::Signal(9));
        }
        assert_eq!(sh, expected, "{exits:?}: {run:?}");
        // The script outlives its last program, whichever way exits are found.
        let script_pid = run.exec_pids(b"/bin/sh")[0];
        let script_exit = run
            .events
            .iter()
            .position(|e| matches!(e, TraceEvent::Exit { pid, .. } if *pid == script_pid))
            .unwrap_or_else(|| panic!("no exit of the script: {run:?}"));
        assert!(exit_of("/bin/sleep")[0].0 < script_exit, "{run:?}");
    }
}

fn file_tracing_needs_exec_tracing(id: &Identity) {
    for options in [
        Options {
            exec: false,
            files: true,
            refusals: false,
            exits: Exits::Trap,
        },
        Options {
            exec: false,
            files: false,
            refusals: true,
            exits: Exits::Trap,
        },
    ] {
        wait_single_threaded();
        let spec = spec(id, &["/bin/true"], options);
        let null = std::fs::File::open("/dev/null").unwrap();
        let fd = null.as_raw_fd();
        let Err(err) = vg_sandbox::spawn(&spec, [fd, fd, fd]) else {
            panic!("{options:?}: spawned without trace_exec");
        };
        assert!(err.to_string().contains("trace_exec"), "{err}");
    }
}

/// Times 10,000 `open`+`close` pairs inside a traced sandbox, with and without
/// `trace_files`, measured by the sandboxed program itself.
/// `wait_then` runs its work once nothing of the sandbox runs any more, before init is
/// reaped: init ends what the command left running (a sleep holding stdout, whose
/// pipe is then at its end) and says so, and the tracer, told init's end, is done
/// without init being reaped (before Linux 6.11 a seccomp filter is released only
/// when its process is reaped, and init holds the listener's). Init is reaped when
/// `wait_then` returns.
fn the_end_is_known_before_init_is_reaped(id: &Identity) {
    use std::time::{Duration, Instant};
    wait_single_threaded();
    let spec = spec(
        id,
        &["/bin/sh", "-c", "sleep 30 & echo started"],
        Options::EXEC_ONLY,
    );
    let null = std::fs::File::open("/dev/null").unwrap();
    let (mut out_r, out_w) = std::io::pipe().unwrap();
    let mut sandbox = vg_sandbox::spawn(
        &spec,
        [null.as_raw_fd(), out_w.as_raw_fd(), null.as_raw_fd()],
    )
    .unwrap();
    drop((out_w, null));
    let init = sandbox.pid();
    let listener = sandbox.exec_listener().expect("the exec listener");
    let killer = sandbox.killer();
    let tracer = std::thread::spawn(move || {
        let _recorder = vg_sandbox::trace::serve_with(
            listener,
            None,
            Some(killer),
            false,
            Exits::Trap,
            |_| Verdict::Continue,
            |_| false,
        );
    });
    let (to, stdout) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out_r.read_to_string(&mut s);
        let _ = to.send(s);
    });
    let init_proc = PathBuf::from(format!("/proc/{init}"));
    let (outcome, (stdout, tracer_done, init_unreaped)) =
        sandbox.wait_then(None, Duration::from_secs(5), &mut |_| false, |_| {
            let stdout = stdout.recv_timeout(Duration::from_secs(10)).ok();
            let deadline = Instant::now() + Duration::from_secs(10);
            while !tracer.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            (stdout, tracer.is_finished(), init_proc.exists())
        });
    tracer.join().unwrap();
    assert_eq!(outcome.unwrap().termination, Termination::Exited(0));
    assert_eq!(
        stdout.as_deref(),
        Some("started\n"),
        "the sleep outlived the end"
    );
    assert!(tracer_done, "the tracer waited for init to be reaped");
    assert!(
        init_unreaped,
        "init was reaped before the work on the result"
    );
    assert!(!init_proc.exists(), "init is not reaped after wait_then");
}

fn bench_10000_opens(id: &Identity) {
    let script = r#"
import os, time
for _ in range(100):
    os.close(os.open("/etc/hostname", os.O_RDONLY))
t = time.perf_counter()
for _ in range(10000):
    os.close(os.open("/etc/hostname", os.O_RDONLY))
print(f"{(time.perf_counter() - t) * 1e6 / 10000:.2f}")
"#;
    for (label, options) in [
        ("trace_exec only", Options::EXEC_ONLY),
        ("trace_exec + trace_files", Options::FILES),
    ] {
        let mut per_open = Vec::new();
        let mut events = 0;
        for _ in 0..5 {
            let run = run(id, &[PYTHON, "-I", "-S", "-c", script], options);
            run.assert_success();
            per_open.push(run.stdout.trim().parse::<f64>().unwrap());
            events = run.files_under("/etc/hostname").len();
        }
        per_open.sort_by(f64::total_cmp);
        println!(
            "bench: {label}: {per_open:?} µs per open+close (median {:.2}), {events} File events for /etc/hostname",
            per_open[per_open.len() / 2]
        );
    }
}

/// Refused calls made through ctypes; each prints its errno (1: EPERM).
const REFUSALS: &str = r#"
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def errno(ret):
    return 0 if ret == 0 else ctypes.get_errno()
CLONE_NEWUSER = 0x10000000
SIGCHLD = 17
print("unshare", errno(libc.unshare(CLONE_NEWUSER)))
print("mount", errno(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)))
print("ptrace", errno(libc.ptrace(0, 0, None, None)))
print("sethostname", errno(libc.sethostname(b"x", 1)))
print("clone", errno(libc.syscall(56, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)))
print("nr999", errno(libc.syscall(999)))
"#;
const REFUSALS_OUTPUT: &str = "unshare 1\nmount 1\nptrace 1\nsethostname 1\nclone 1\nnr999 1\n";

// ---------------------------------------------------------------------------------------
// Running a sandbox and collecting what the tracer saw.

#[derive(Debug, Clone, Copy)]
struct Options {
    exec: bool,
    files: bool,
    refusals: bool,
    exits: Exits,
}

impl Options {
    const EXEC_ONLY: Self = Self {
        exec: true,
        files: false,
        refusals: false,
        exits: Exits::Trap,
    };
    const FILES: Self = Self {
        exec: true,
        files: true,
        refusals: false,
        exits: Exits::Trap,
    };
    const REFUSALS: Self = Self {
        exec: true,
        files: false,
        refusals: true,
        exits: Exits::Trap,
    };
}

struct Run {
    termination: Termination,
    stdout: String,
    stderr: String,
    enforced: String,
    events: Vec<TraceEvent>,
}

/// A `File` event as compared: path, access, program.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Expected {
    path: String,
    access: FileAccess,
    exe: Option<String>,
}

impl From<(&str, FileAccess, &str)> for Expected {
    fn from((path, access, exe): (&str, FileAccess, &str)) -> Self {
        Self {
            path: path.to_owned(),
            access,
            exe: Some(exe.to_owned()),
        }
    }
}

/// Failures show the events one a line, bytes as text.
impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        writeln!(
            f,
            "{:?}, stdout {:?}, stderr {:?}",
            self.termination, self.stdout, self.stderr
        )?;
        for event in &self.events {
            match event {
                TraceEvent::Exec { pid, path, .. } => writeln!(f, "  exec {pid} {}", text(path))?,
                TraceEvent::Exit { pid, status, .. } => writeln!(f, "  exit {pid} {status:?}")?,
                TraceEvent::File {
                    pid,
                    syscall,
                    path,
                    access,
                    exe,
                    ..
                } => writeln!(
                    f,
                    "  file {pid} {syscall} {} {access:?} by {:?}",
                    path.display(),
                    exe.as_deref().map(text)
                )?,
                TraceEvent::Denied {
                    pid, syscall, exe, ..
                } => {
                    writeln!(
                        f,
                        "  denied {pid} {syscall} by {:?}",
                        exe.as_deref().map(text)
                    )?;
                }
                other => writeln!(f, "  {other:?}")?,
            }
        }
        Ok(())
    }
}

impl Run {
    fn assert_success(&self) {
        assert_eq!(
            self.termination,
            Termination::Exited(0),
            "stderr: {}\n{self:?}",
            self.stderr
        );
    }

    /// The `File` events for paths at or under `prefix`, in order.
    fn files_under(&self, prefix: &str) -> Vec<Expected> {
        self.events
            .iter()
            .filter_map(|e| match e {
                TraceEvent::File {
                    path, access, exe, ..
                } if path.starts_with(prefix) => Some(Expected {
                    path: path.display().to_string(),
                    access: *access,
                    exe: exe
                        .as_ref()
                        .map(|e| String::from_utf8_lossy(e).into_owned()),
                }),
                _ => None,
            })
            .collect()
    }

    /// `(pid, syscall, nr, exe)` of each `Denied` event.
    fn denied(&self) -> Vec<(i32, String, i64, Option<Vec<u8>>)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                TraceEvent::Denied {
                    pid,
                    nr,
                    syscall,
                    exe,
                } => Some((*pid, syscall.clone(), *nr, exe.clone())),
                _ => None,
            })
            .collect()
    }

    /// The pids of the processes that executed `path`.
    fn exec_pids(&self, path: &[u8]) -> Vec<i32> {
        self.events
            .iter()
            .filter_map(|e| match e {
                TraceEvent::Exec { pid, path: p, .. } if p == path => Some(*pid),
                _ => None,
            })
            .collect()
    }
}

/// Waits (a little) until the threads of the case before have left the kernel's count:
/// `join` returns once a thread cleared its tid, a moment before the kernel stops
/// counting it, and a sandbox only starts while its supervisor has one thread.
fn wait_single_threaded() {
    let threads = || {
        std::fs::read_to_string("/proc/self/status")
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|n| n.trim().parse::<u32>().ok())
            .unwrap_or(0)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while threads() > 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

fn run(id: &Identity, argv: &[&str], options: Options) -> Run {
    wait_single_threaded();
    let spec = spec(id, argv, options);
    let null = std::fs::File::open("/dev/null").unwrap();
    let (mut out_r, out_w) = std::io::pipe().unwrap();
    let (mut err_r, err_w) = std::io::pipe().unwrap();
    let mut sandbox = vg_sandbox::spawn(
        &spec,
        [null.as_raw_fd(), out_w.as_raw_fd(), err_w.as_raw_fd()],
    )
    .unwrap_or_else(|e| panic!("spawn {argv:?}: {e}"));
    drop((out_w, err_w, null));
    let listener = sandbox.exec_listener().expect("the exec listener");
    let events = Arc::new(Mutex::new(Vec::new()));
    let tracer = {
        let events = Arc::clone(&events);
        std::thread::spawn(move || {
            vg_sandbox::trace::serve(
                listener,
                false,
                options.exits,
                |event| {
                    events.lock().unwrap().push(event);
                    Verdict::Continue
                },
                |_| false,
            );
        })
    };
    let stdout = std::thread::spawn(move || {
        let mut s = String::new();
        out_r.read_to_string(&mut s).unwrap();
        s
    });
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        err_r.read_to_string(&mut s).unwrap();
        s
    });
    let outcome = sandbox.wait().unwrap();
    tracer.join().unwrap();
    let events = std::mem::take(&mut *events.lock().unwrap());
    Run {
        termination: outcome.termination,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        enforced: outcome.enforced,
        events,
    }
}

fn spec(id: &Identity, argv: &[&str], options: Options) -> SandboxSpec {
    let view = FsView::default_view(
        &host_layout(),
        &ViewOptions {
            mounts: Vec::new(),
            home: id.home.clone(),
            uid: id.uid,
            gid: id.gid,
            tmp_size: 64 << 20,
            home_size: 64 << 20,
            ptys: 4,
            tmpfs: Vec::new(),
        },
    );
    SandboxSpec {
        hostname: "trace-test".into(),
        argv: argv.iter().map(|a| (*a).to_owned()).collect(),
        env: vec![
            ("PATH".into(), vg_policy::env::SANDBOX_PATH.into()),
            ("HOME".into(), id.home.display().to_string()),
            ("LC_ALL".into(), "C".into()),
        ],
        workdir: PathBuf::from("/"),
        view,
        identity: id.clone(),
        inside: None,
        trace_exec: options.exec,
        exec_by_bpf: false,
        exits: options.exits,
        trace_files: options.files,
        trace_file_changes: false,
        report_refusals: options.refusals,
        rlimit_nproc: None,
        watch_full: Vec::new(),
        tty: false,
        network: SandboxNetwork::Loopback,
        persistent: false,
    }
}

/// The host's system directories and secrets, as the session reads them.
fn host_layout() -> HostLayout {
    let system_dirs = SYSTEM_DIRS
        .iter()
        .filter_map(|d| {
            let path = PathBuf::from(d);
            let meta = std::fs::symlink_metadata(&path).ok()?;
            if meta.file_type().is_symlink() {
                Some((
                    path.clone(),
                    HostEntry::Symlink(std::fs::read_link(&path).ok()?),
                ))
            } else {
                meta.is_dir().then_some((path, HostEntry::Dir))
            }
        })
        .collect();
    let secrets = SECRET_PATHS
        .iter()
        .filter_map(|p| {
            let meta = std::fs::symlink_metadata(p).ok()?;
            let kind = if meta.is_dir() {
                NodeKind::Dir
            } else {
                NodeKind::File
            };
            Some((PathBuf::from(p), kind))
        })
        .collect();
    HostLayout {
        system_dirs,
        secrets,
    }
}

// ---------------------------------------------------------------------------------------
// Who runs what.

fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

fn passwd() -> BTreeMap<String, Identity> {
    std::fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(':').collect();
            let identity = Identity {
                name: (*f.first()?).to_owned(),
                uid: f.get(2)?.parse().ok()?,
                gid: f.get(3)?.parse().ok()?,
                home: PathBuf::from(f.get(5)?),
            };
            Some((identity.name.clone(), identity))
        })
        .collect()
}

/// The user the sandboxed commands run as: the test user as root (created when
/// missing), else ourselves.
fn sandbox_identity() -> Identity {
    let me = std::fs::metadata("/proc/self").unwrap();
    if me.uid() != 0 {
        return passwd()
            .into_values()
            .find(|u| u.uid == me.uid())
            .map(|u| Identity { gid: me.gid(), ..u })
            .unwrap_or_else(|| Identity {
                uid: me.uid(),
                gid: me.gid(),
                name: me.uid().to_string(),
                home: PathBuf::from(format!("/home/{}", me.uid())),
            });
    }
    let name = std::env::var("VG_TEST_USER").unwrap_or_else(|_| "vgtest".into());
    if !passwd().contains_key(&name) {
        // Another test binary may be creating it at the same moment: look again after.
        let _ = Command::new("useradd")
            .args(["--create-home", "--shell", "/bin/sh", &name])
            .env("PATH", vg_policy::env::SANDBOX_PATH)
            .status();
    }
    let user = passwd()
        .remove(&name)
        .unwrap_or_else(|| panic!("no user {name}: create it or set VG_TEST_USER"));
    assert_ne!(user.uid, 0, "VG_TEST_USER={name} must not be root");
    user
}

/// This binary, where the unprivileged user can run it: itself when every folder
/// above it is searchable by others, else a copy in /tmp.
fn reachable_copy() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let searchable = exe
        .ancestors()
        .skip(1)
        .all(|dir| std::fs::metadata(dir).is_ok_and(|m| m.mode() & 0o001 != 0));
    if searchable {
        return exe;
    }
    let copy = Path::new("/tmp").join(format!("vg-trace-test-{}", std::process::id()));
    std::fs::copy(&exe, &copy).unwrap();
    copy
}
