//! Resource limits and the end of a session: processes, memory, disk, time and
//! output, each pushed past its limit, as root and as an unprivileged user.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::harness::session_metadata as metadata;
use super::harness::{
    PYTHON, RecordsHome, Runner, Vg, Workspace, assert_no_process_left, each_identity, py, unique,
};

pub(super) fn events(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub(super) fn limit_hits(dir: &Path, limit: &str) -> Vec<Value> {
    events(dir)
        .into_iter()
        .filter(|e| e["type"] == "limit-hit" && e["limit"] == limit)
        .collect()
}

/// Whether cgroups can enforce memory limits for this runner on this host: as root
/// with cgroup v1 here; a delegated cgroup v2 subtree elsewhere is not assumed.
pub(super) fn cgroups_for(runner: Runner) -> bool {
    runner == Runner::Root
        && (Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists()
            || Path::new("/sys/fs/cgroup/cgroup.controllers").exists())
}

#[test]
fn a_fork_bomb_is_contained_by_the_process_limit() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let marker = format!("77.{}", unique());
        // Forks sleepers until the kernel refuses, then reports how many it got.
        let bomb = py(&format!(
            r#"
n = 0
try:
    while n < 10000:
        if os.fork() == 0:
            os.execv("/bin/sleep", ["sleep", "{marker}"])
        n += 1
except OSError as e:
    report("refused", errno.errorcode.get(e.errno))
report("forked", n)
"#
        ));
        let out = Vg::sandbox(runner, &ws, &["--pids", "40"], &[PYTHON, "-c", &bomb])
            .records_home(&home)
            .run();
        out.assert_success();
        assert_eq!(out.field("refused"), "EAGAIN", "{out}");
        let forked: u32 = out.field("forked").parse().unwrap();
        assert!(
            forked < 40,
            "the process limit let {forked} processes through\n{out}"
        );
        // Every sleeper died with the session.
        assert_no_process_left(&format!("sleep {marker}"), &out);
        let dir = home.only_session();
        let meta = metadata(&dir);
        assert_eq!(meta["limits"]["pids"], 40);
        let by = meta["limits"]["enforced_by"]["pids"]
            .as_str()
            .unwrap()
            .to_owned();
        if cgroups_for(runner) {
            assert!(by.starts_with("cgroup"), "{by}");
            assert!(
                !limit_hits(&dir, "pids").is_empty(),
                "no pids event: {:?}",
                events(&dir)
            );
        } else {
            assert_eq!(by, "rlimit-nproc");
        }
        // A classic shell fork bomb ends at the timeout, and the host is fine.
        let out = Vg::sandbox(
            runner,
            &ws,
            &["--pids", "64", "--timeout", "2s", "--kill-grace", "1s"],
            &["sh", "-c", "b() { b | b & }; b; sleep 30"],
        )
        .records_home(&home)
        .run();
        // 124 at the timeout; or the limit left the top-level shell itself unable to
        // fork its `sleep` (sh exits 2, "Cannot fork"): the limit holding either way.
        let shell_out_of_processes = out.code() == Some(2) && out.stderr.contains("Cannot fork");
        assert!(
            matches!(out.code(), Some(124) | Some(0)) || shell_out_of_processes,
            "unexpected end of the fork bomb\n{out}"
        );
        let host = std::process::Command::new("/bin/true").status().unwrap();
        assert!(host.success());
    });
}

#[test]
fn a_memory_hog_is_oom_killed_or_the_limit_is_refused() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let hog = "b = bytearray(400 << 20); print('survived')";
        let out = Vg::sandbox(runner, &ws, &["--memory", "64m"], &[PYTHON, "-c", hog])
            .records_home(&home)
            .run();
        if cgroups_for(runner) {
            out.assert_code(137);
            assert!(!out.stdout.contains("survived"), "{out}");
            out.assert_stderr_contains("memory limit");
            let dir = home.only_session();
            assert_eq!(metadata(&dir)["status"], "signalled");
            assert_eq!(metadata(&dir)["limits"]["memory_bytes"], 64 << 20);
            let hits = limit_hits(&dir, "memory");
            assert_eq!(hits.len(), 1, "{:?}", events(&dir));
            assert!(hits[0]["oom_kills"].as_u64().unwrap() >= 1);
        } else {
            // Nothing here can enforce it: refused before anything runs...
            out.assert_code(125);
            out.assert_stderr_contains("--memory");
            out.assert_stderr_contains("--best-effort-limits");
            assert!(home.sessions().is_empty(), "a refused run left a record");
            // ...unless the user accepts the supervisor's watchdog alone (best
            // effort: it polls), which is recorded.
            let out = Vg::sandbox(
                runner,
                &ws,
                &["--memory", "64m", "--best-effort-limits"],
                &["true"],
            )
            .records_home(&home)
            .run();
            out.assert_success()
                .assert_stderr_contains("enforced only by the supervisor's watchdog");
            let meta = metadata(&home.only_session());
            let by = meta["limits"]["enforced_by"]["memory"].as_str().unwrap();
            assert!(by.starts_with("watchdog (best effort"), "{by}");
        }
    });
}

/// The sandbox's init enters its cgroup itself, first of all (cgroup v1), instead of
/// being moved there while it sets up: the cap must hold for what the command does
/// from its first instructions. `dd` allocates its 256 MiB block as it starts and
/// fills it with its first read; under a 32 MiB cap it is killed before it writes.
#[test]
fn a_command_that_allocates_as_it_starts_is_held_by_the_memory_cap() {
    each_identity(|runner| {
        if !cgroups_for(runner) {
            // Covered by a_memory_hog_is_oom_killed_or_the_limit_is_refused.
            return;
        }
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let dd = ["dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"];
        let out = Vg::sandbox(runner, &ws, &["--memory", "32m"], &dd)
            .records_home(&home)
            .run();
        out.assert_code(137);
        out.assert_stderr_contains("memory limit");
        let dir = home.only_session();
        let hits = limit_hits(&dir, "memory");
        assert_eq!(hits.len(), 1, "{:?}", events(&dir));
        // The same command with room for its block completes: the kill above was
        // the cap's, not dd's.
        let out = Vg::sandbox(runner, &ws, &["--memory", "512m"], &dd)
            .records_home(&home)
            .run();
        out.assert_success();
    });
}

#[test]
fn filling_tmp_ends_in_enospc_at_the_disk_limit() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let fill = py(r#"
try:
    with open("/tmp/fill", "wb") as f:
        for _ in range(64):
            f.write(b"x" * (1 << 20))
            f.flush()
    report("result", "OK")
except OSError as e:
    report("result", errno.errorcode.get(e.errno))
report("size", os.path.getsize("/tmp/fill"))
"#);
        let out = Vg::sandbox(runner, &ws, &["--disk", "8m"], &[PYTHON, "-c", &fill])
            .records_home(&home)
            .run();
        out.assert_success();
        assert_eq!(out.field("result"), "ENOSPC", "{out}");
        let size: u64 = out.field("size").parse().unwrap();
        assert!((6 << 20..=8 << 20).contains(&size), "size {size}\n{out}");
        let dir = home.only_session();
        assert_eq!(metadata(&dir)["limits"]["disk_bytes"], 8 << 20);
        let hits = limit_hits(&dir, "disk");
        assert_eq!(hits.len(), 1, "{:?}", events(&dir));
        assert_eq!(hits[0]["path"], "/tmp");
    });
}

#[test]
fn a_busy_loop_ends_at_the_timeout_with_124() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let u = unique();
        let out = Vg::sandbox(
            runner,
            &ws,
            &["--timeout", "1s"],
            &["sh", "-c", &format!("sleep 78.{u} & while :; do :; done")],
        )
        .records_home(&home)
        .run();
        out.assert_code(124).assert_stderr_contains("timeout");
        assert_no_process_left(&format!("sleep 78.{u}"), &out);
        let dir = home.only_session();
        let meta = metadata(&dir);
        assert_eq!(meta["status"], "timeout");
        assert_eq!(meta["exit_code"], 124);
        assert_eq!(limit_hits(&dir, "timeout").len(), 1);
        // A command that ignores SIGTERM is killed after the grace period.
        let started = std::time::Instant::now();
        Vg::sandbox(
            runner,
            &ws,
            &["--timeout", "500ms", "--kill-grace", "1s"],
            &["sh", "-c", "trap '' TERM; while :; do :; done"],
        )
        .records_home(&home)
        .run()
        .assert_code(124);
        assert!(started.elapsed() < Duration::from_secs(20));
    });
}

#[test]
fn detached_processes_do_not_survive_the_session() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let u = unique();
        let script = format!(
            "setsid sleep 79.{u} & (sleep 80.{u} &) & nohup sleep 81.{u} >/dev/null 2>&1 & exit 0"
        );
        let out = Vg::sandbox(runner, &ws, &[], &["sh", "-c", &script]).run();
        out.assert_success();
        for n in [79, 80, 81] {
            assert_no_process_left(&format!("sleep {n}.{u}"), &out);
        }
    });
}

#[test]
fn an_output_flood_is_capped_and_the_command_runs_on() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let out = Vg::sandbox(
            runner,
            &ws,
            &["--max-output", "1m"],
            &[
                "sh",
                "-c",
                "head -c 200000000 /dev/zero | tr '\\0' x; echo finished >&2; touch ran-on",
            ],
        )
        .records_home(&home)
        .run();
        out.assert_success().assert_stderr_contains("finished");
        assert!(
            ws.exists("ran-on"),
            "the command was stopped\n{}",
            out.stderr
        );
        assert!(
            out.stdout.len() < (1 << 20) + 200,
            "{} bytes shown",
            out.stdout.len()
        );
        assert!(
            out.stdout.contains("truncated at 1048576 bytes"),
            "no marker shown"
        );
        let dir = home.only_session();
        let log = std::fs::read(dir.join("stdout.log")).unwrap();
        assert_eq!(&log[..1 << 20], vec![b'x'; 1 << 20].as_slice());
        assert!(String::from_utf8_lossy(&log[1 << 20..]).contains("--max-output"));
        let hits = limit_hits(&dir, "output");
        assert_eq!(hits.len(), 1, "{:?}", events(&dir));
        assert_eq!(hits[0]["stream"], "stdout");
        // The record stays verifiable.
        Vg::new(runner, ws.path())
            .args(["logs", "verify", dir.file_name().unwrap().to_str().unwrap()])
            .records_home(&home)
            .run()
            .assert_success();
    });
}

#[test]
fn bad_limit_values_are_refused_with_the_flag_named() {
    each_identity(|runner| {
        let ws = Workspace::new();
        for (flag, value) in [
            ("--memory", "lots"),
            ("--memory", "0"),
            ("--cpus", "half"),
            ("--pids", "1"),
            ("--timeout", "soon"),
            ("--timeout", "0s"),
            ("--disk", "-1g"),
            ("--max-output", "1x"),
            ("--kill-grace", "5y"),
        ] {
            let out = Vg::sandbox(runner, &ws, &[flag, value], &["touch", "ran"]).run();
            out.assert_code(125).assert_stderr_contains(flag);
            assert!(!ws.exists("ran"), "ran with {flag} {value}\n{out}");
        }
        let out = Vg::sandbox(
            runner,
            &ws,
            &["--max-output", "1m", "--no-record"],
            &["true"],
        )
        .run();
        out.assert_code(125).assert_stderr_contains("--no-record");
    });
}

#[test]
fn the_code_exec_profile_applies_seed_limits() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let mut options = vec!["--profile", "code-exec"];
        if !cgroups_for(runner) {
            options.push("--best-effort-limits");
        }
        Vg::sandbox(runner, &ws, &options, &["true"])
            .records_home(&home)
            .run()
            .assert_success();
        let limits = metadata(&home.only_session())["limits"].clone();
        assert_eq!(limits["memory_bytes"], 512 << 20);
        assert_eq!(limits["cpus"], 0.5);
        assert_eq!(limits["timeout_secs"], 30);
        assert_eq!(limits["max_output_bytes"], 1 << 20);
        assert_eq!(limits["disk_bytes"], 1 << 30);
    });
}

/// Opens pseudo-terminals until the sandbox's devpts refuses (at most 200, so that
/// a missing bound does not take the host's pool), then reports how many it got.
pub(super) const OPEN_PTYS: &str = "import os, errno\nn = 0\nheld = []\ntry:\n    while n < 200:\n        held.append(os.openpty())\n        n += 1\nexcept OSError as e:\n    print('refused=' + errno.errorcode.get(e.errno, str(e.errno)))\nprint('ptys=%d' % n)\n";

#[test]
fn the_sandbox_devpts_is_bounded() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let out = Vg::sandbox(runner, &ws, &["--ptys", "5"], &[PYTHON, "-c", OPEN_PTYS])
            .records_home(&home)
            .run();
        out.assert_success();
        assert_eq!(out.field("ptys"), "5", "{out}");
        let limits = metadata(&home.only_session())["limits"].clone();
        assert_eq!(limits["ptys"], 5);
        assert_eq!(limits["enforced_by"]["ptys"], "devpts-max");
        // The default bound, far below the host's pool.
        let out = Vg::sandbox(runner, &ws, &[], &[PYTHON, "-c", OPEN_PTYS]).run();
        out.assert_success();
        assert_eq!(out.field("ptys"), "64", "{out}");
        // `-t` takes one of them.
        let out = Vg::sandbox(
            runner,
            &ws,
            &["-t", "--ptys", "2"],
            &[PYTHON, "-c", OPEN_PTYS],
        )
        .run();
        out.assert_success().assert_stdout_contains("ptys=1");
        Vg::sandbox(runner, &ws, &["--ptys", "0"], &["true"])
            .run()
            .assert_code(125)
            .assert_stderr_contains("--ptys");
    });
}
