//! The trace-point reader against the real gVisor: `runsc` (Debian's package)
//! runs commands with the session config of `pod_init_config`, and the sink
//! must receive each exec and exit. Fails, never skips, without runsc.

// Integration tests are their own crate, outside clippy's test allowance.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::thread;

use vg_backend::gvisor::trace::{GvisorEvent, Served, Sink, pod_init_config};

const SCRIPT: &str = r#"/bin/true; /bin/echo hi; sh -c "exit 3""#;

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("vg-gvisor-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn require_runsc() {
    match Command::new("runsc").arg("--version").output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "`runsc --version` failed ({}): {}; install the `runsc` package (apt-get install runsc)",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => panic!(
            "runsc cannot be run ({e}): install the `runsc` package (apt-get install runsc), \
             which this test needs"
        ),
    }
}

/// Runs `runsc` with the trace session and `args` after the global flags;
/// returns its exit code, what serve returned and the events (the command's
/// stdout must be `stdout`).
fn traced(dir: &Path, args: &[&str], stdout: &str) -> (i32, Served, Vec<GvisorEvent>) {
    let sock = dir.join("trace.sock");
    let sink = Sink::bind(&sock).unwrap();
    let stop = sink.stop_handle();
    let cfg = dir.join("pod-init.json");
    std::fs::write(&cfg, pod_init_config(&sock).unwrap().to_string()).unwrap();
    let (tx, rx) = mpsc::channel();
    let serving = thread::spawn(move || {
        sink.serve(move |e| {
            let _ = tx.send(e);
        })
    });
    let out = Command::new("runsc")
        .arg("--rootless")
        .arg("--network=none")
        .arg("--root")
        .arg(dir.join("state"))
        .arg("--pod-init-config")
        .arg(&cfg)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    stop.stop();
    let served = serving.join().unwrap().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        stdout,
        "runsc's stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let code = out
        .status
        .code()
        .unwrap_or_else(|| panic!("runsc ended by {}", out.status));
    (code, served, rx.iter().collect())
}

fn strings(v: &[OsString]) -> Vec<String> {
    v.iter().map(|a| a.to_string_lossy().into_owned()).collect()
}

/// Each exec's argv, in order, with its pid and ppid; each exit by pid;
/// anything else as text. Clones are checked apart ([`clones`]).
type Summary = (
    Vec<(i32, Option<i32>, Vec<String>)>,
    BTreeMap<i32, i32>,
    Vec<String>,
);

fn summary(events: &[GvisorEvent]) -> Summary {
    let mut execs = Vec::new();
    let mut exits = BTreeMap::new();
    let mut other = Vec::new();
    for e in events {
        match e {
            GvisorEvent::Exec {
                pid, ppid, argv, ..
            } => execs.push((*pid, *ppid, strings(argv))),
            GvisorEvent::Exit { pid, status, .. } => {
                assert!(exits.insert(*pid, *status).is_none(), "two exits of {pid}");
            }
            GvisorEvent::Clone { .. } => {}
            other_event => other.push(format!("{other_event:?}")),
        }
    }
    (execs, exits, other)
}

/// Each clone's (creator, child), in order.
fn clones(events: &[GvisorEvent]) -> Vec<(i32, i32)> {
    events
        .iter()
        .filter_map(|e| match e {
            GvisorEvent::Clone { creator, child } => Some((*creator, *child)),
            _ => None,
        })
        .collect()
}

/// The script's execs and exits: the shell as pid 1, three children of it.
fn check_script_run(code: i32, served: Served, events: &[GvisorEvent], first: &[&str]) {
    assert_eq!(code, 3, "the shell's status is the last command's");
    assert!(served.connected);
    let (execs, exits, other) = summary(events);
    assert!(other.is_empty(), "unexpected events: {other:?}");
    let argvs: Vec<Vec<String>> = execs.iter().map(|(_, _, a)| a.clone()).collect();
    let first: Vec<String> = first.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        argvs,
        [
            first,
            vec!["/bin/true".to_string()],
            vec!["/bin/echo".into(), "hi".into()],
            vec!["sh".into(), "-c".into(), "exit 3".into()],
        ]
    );
    assert_eq!((execs[0].0, execs[0].1), (1, None));
    for (pid, ppid, argv) in &execs[1..] {
        assert_eq!(*ppid, Some(1), "{argv:?}");
        assert!(*pid > 1);
    }
    // Every child's exit, as wait(2) statuses; pid 1's exit is runsc's status.
    let child_exits: Vec<(i32, i32)> = execs[1..]
        .iter()
        .map(|(pid, _, _)| (*pid, exits[pid]))
        .collect();
    assert_eq!(
        child_exits,
        [(execs[1].0, 0), (execs[2].0, 0), (execs[3].0, 3 << 8)]
    );
    assert_eq!(exits.len(), 3, "exits: {exits:?}");
    // Each child was reported made by the shell before it ran its program.
    let children: Vec<(i32, i32)> = execs[1..].iter().map(|(pid, _, _)| (1, *pid)).collect();
    assert_eq!(clones(events), children);
    // The exec points' details: the sentry's resolved path, cwd, root.
    let GvisorEvent::Exec {
        path,
        cwd,
        uid,
        gid,
        time,
        ..
    } = events
        .iter()
        .find(|e| matches!(e, GvisorEvent::Exec { pid, .. } if *pid == execs[2].0))
        .unwrap()
    else {
        unreachable!()
    };
    assert!(path.ends_with("bin/echo"), "{path:?}");
    assert!(cwd.is_absolute(), "{cwd:?}");
    assert_eq!((*uid, *gid), (Some(0), Some(0)));
    assert!(time.is_some());
}

#[test]
fn runsc_do_reports_each_exec_and_exit() {
    require_runsc();
    let dir = TempDir::new("do");
    let (code, served, events) = traced(&dir.0, &["do", "sh", "-c", SCRIPT], "hi\n");
    check_script_run(code, served, &events, &["sh", "-c", SCRIPT]);
}

#[test]
fn runsc_run_bundle_reports_each_exec_and_exit() {
    require_runsc();
    let dir = TempDir::new("run");
    let bundle = dir.0.join("bundle");
    std::fs::create_dir(&bundle).unwrap();
    // runsc's own default spec, on the host's root read-only.
    let out = Command::new("runsc")
        .args(["spec", "--bundle"])
        .arg(&bundle)
        .args(["--", "sh", "-c", SCRIPT])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let spec_path = bundle.join("config.json");
    let mut spec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&spec_path).unwrap()).unwrap();
    spec["root"] = serde_json::json!({"path": "/", "readonly": true});
    spec["process"]["terminal"] = false.into();
    std::fs::write(&spec_path, spec.to_string()).unwrap();
    let bundle_arg = bundle.to_str().unwrap();
    let id = format!("vg-trace-test-{}", std::process::id());
    let (code, served, events) = traced(&dir.0, &["run", "--bundle", bundle_arg, &id], "hi\n");
    check_script_run(code, served, &events, &["sh", "-c", SCRIPT]);
}

/// gVisor cannot send an exec whose environment is not UTF-8: the reader
/// still learns that the process executed something.
#[test]
fn an_exec_the_sentry_cannot_send_arrives_as_unreported() {
    require_runsc();
    let dir = TempDir::new("hidden");
    let script = "X=\"$(printf 'a\\377')\" /bin/true; /bin/echo after";
    let (code, served, events) = traced(&dir.0, &["do", "sh", "-c", script], "after\n");
    assert_eq!(code, 0);
    assert!(served.connected);
    let unreported: Vec<(i32, Option<i32>)> = events
        .iter()
        .filter_map(|e| match e {
            GvisorEvent::UnreportedExec { pid, ppid } => Some((*pid, *ppid)),
            _ => None,
        })
        .collect();
    assert_eq!(unreported.len(), 1, "{events:?}");
    assert_eq!(unreported[0].1, Some(1));
    let (execs, exits, _) = summary(&events);
    // The process is known by its exit; the exec after it is reported.
    assert_eq!(exits.get(&unreported[0].0), Some(&0));
    let argvs: Vec<&Vec<String>> = execs.iter().map(|(_, _, a)| a).collect();
    assert_eq!(argvs[1..], [&vec!["/bin/echo".to_string(), "after".into()]]);
    assert!(
        !execs
            .iter()
            .any(|(_, _, a)| a.iter().any(|s| s.contains('\u{fffd}'))),
        "{execs:?}"
    );
}

/// An exec point larger than the sentry's socket send buffer cannot be sent:
/// it is dropped and counted, and the exec still shows as unreported.
#[test]
fn an_exec_too_large_to_send_is_counted_as_dropped() {
    require_runsc();
    let dir = TempDir::new("large");
    // The buffer is net.core.wmem_default; the environment (which the exec
    // point always carries) goes past it in strings of 100 KB, each under
    // gVisor's 128 KiB limit for one.
    let wmem: usize = std::fs::read_to_string("/proc/sys/net/core/wmem_default")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let vars = wmem / 100_000 + 1;
    assert!(
        vars < 20,
        "net.core.wmem_default {wmem} is past gVisor's 2 MiB exec limit"
    );
    let exports: Vec<String> = (1..=vars).map(|i| format!("V{i}=$v")).collect();
    let script = format!(
        "v=$(head -c 100000 /dev/zero | tr '\\0' x); (export {}; /bin/true); /bin/echo after",
        exports.join(" ")
    );
    let (code, served, events) = traced(&dir.0, &["do", "sh", "-c", &script], "after\n");
    assert_eq!(code, 0);
    assert!(served.connected);
    let (execs, exits, other) = summary(&events);
    assert!(
        !execs.iter().any(|(_, _, a)| a == &["/bin/true"]),
        "{execs:?}"
    );
    let [dropped, unreported] = &events
        .iter()
        .filter(|e| {
            !matches!(
                e,
                GvisorEvent::Exec { .. } | GvisorEvent::Exit { .. } | GvisorEvent::Clone { .. }
            )
        })
        .collect::<Vec<_>>()[..]
    else {
        panic!("{other:?}")
    };
    assert_eq!(**dropped, GvisorEvent::Dropped(1));
    let GvisorEvent::UnreportedExec { pid, ppid } = unreported else {
        panic!("{other:?}")
    };
    // The subshell (which may exec /bin/true itself) is the shell's child.
    assert!(ppid.is_some(), "{other:?}");
    assert_eq!(exits.get(pid), Some(&0));
}
