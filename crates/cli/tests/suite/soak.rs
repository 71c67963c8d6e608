//! Soak: many sessions back to back and at once (commands, the mediated network,
//! shells under a real terminal, limits), then a check that none of them left a
//! process, a cgroup or a record that does not verify; and a persistent sandbox's
//! host process (one supervisor for many commands) checked for leaked descriptors,
//! threads and memory. The in-process library variant is vg-session's
//! `examples/soak.rs` (run by `crates/session/tests/soak.rs`).
//!
//! The short variant always runs; `VECTRAGUARD_SOAK=1` runs the long one (1,000
//! sessions back to back and rounds of 32 at once per identity).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::harness::{
    Output, RecordsHome, Runner, Vg, Workspace, assert_no_process_left, each_identity,
    require_tools, session_metadata, unique, wait_until,
};
use super::limits::cgroups_for;
use super::mediated_network::HttpServer;
use super::shell::{TMUX, Tmux, shell_args_tagged, vectraguard_command};

/// Set to `1` for the long variant.
pub(super) const LONG: &str = "VECTRAGUARD_SOAK";

pub(super) fn long() -> bool {
    std::env::var(LONG).is_ok_and(|v| v == "1")
}

/// How much of each kind one identity runs.
struct Sizes {
    back_to_back: usize,
    at_once: usize,
    rounds: usize,
    shells: usize,
    execs: usize,
}

fn sizes() -> Sizes {
    if long() {
        Sizes {
            back_to_back: 1000,
            at_once: 32,
            rounds: 4,
            shells: 20,
            execs: 1000,
        }
    } else {
        Sizes {
            back_to_back: 24,
            at_once: 8,
            rounds: 1,
            shells: 2,
            execs: 40,
        }
    }
}

/// Bytes the loopback server answers with.
const BODY: usize = 20_000;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Exec,
    Network,
    Limits,
    Timeout,
}

const KINDS: [Kind; 4] = [Kind::Exec, Kind::Network, Kind::Limits, Kind::Timeout];

impl Kind {
    fn exit_code(self) -> i32 {
        match self {
            Kind::Timeout => 124,
            _ => 0,
        }
    }
}

/// `sandbox run` for session `n` of `kind`; its command lines carry `marker`.
fn session(
    runner: Runner,
    ws: &Workspace,
    home: &RecordsHome,
    port: u16,
    kind: Kind,
    n: usize,
    marker: &str,
) -> Vg {
    let tag = format!("{marker}-{n}");
    let allow = format!("web.test:{port}");
    let (options, script): (Vec<&str>, String) = match kind {
        // Many short-lived processes, each exec and exit recorded.
        Kind::Exec => (
            vec![],
            format!(
                "for i in 1 2 3 4 5 6 7 8; do /bin/true; done; echo {tag} | cat; ls / >/dev/null"
            ),
        ),
        Kind::Network => (
            vec!["--add-host", "web.test:127.0.0.1", "--allow", &allow],
            format!("curl -sS http://web.test:{port}/ | wc -c; echo {tag}"),
        ),
        Kind::Limits => {
            let mut o = vec!["--pids", "64", "--max-output", "4k"];
            if cgroups_for(runner) {
                o.extend(["--memory", "256m"]);
            }
            (
                o,
                format!("head -c 100000 /dev/zero | tr '\\0' x; echo; echo {tag} >&2"),
            )
        }
        Kind::Timeout => (
            vec!["--timeout", "1s"],
            format!("echo {tag}; exec sleep 30"),
        ),
    };
    let mut options = options;
    options.push("--no-network-notes");
    let mut vg = Vg::sandbox(runner, ws, &options, &["sh", "-c", &script]);
    vg.records_home(home);
    vg
}

/// Checks what one `sandbox run` of `kind` printed and exited with.
fn check_run(kind: Kind, out: &Output) {
    assert_eq!(out.code(), Some(kind.exit_code()), "{out}");
    if kind == Kind::Network {
        assert!(out.stdout.starts_with(&format!("{BODY}\n")), "{out}");
    }
}

/// The sandbox groups (`vectraguard-PID-N`) of the supervisors `pids` that still
/// exist below this process's own cgroups (where the supervisors made them).
pub(super) fn cgroups_of(pids: &BTreeSet<u32>) -> Vec<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let root = Path::new("/sys/fs/cgroup");
    let mut left = Vec::new();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
        let (Some(controllers), Some(path)) = (controllers, path) else {
            continue;
        };
        let base = match controllers.split(',').next().filter(|c| !c.is_empty()) {
            Some(c) => root.join(c.trim_start_matches("name=")),
            None if root.join("cgroup.controllers").exists() => root.to_owned(),
            None => root.join("unified"),
        };
        let Ok(entries) = std::fs::read_dir(base.join(path.trim_start_matches('/'))) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name
                .strip_prefix("vectraguard-")
                .and_then(|r| r.split('-').next())
                .and_then(|p| p.parse::<u32>().ok());
            if pid.is_some_and(|p| pids.contains(&p)) {
                left.push(e.path());
            }
        }
    }
    left
}

/// The supervisor's pid recorded in a session's metadata.
pub(super) fn supervisor_pid(dir: &Path) -> Option<u32> {
    session_metadata(dir)["supervisor"]["pid"]
        .as_u64()
        .and_then(|p| u32::try_from(p).ok())
}

/// `logs verify` on every session in `home`; returns their supervisors' pids.
fn verify_all(runner: Runner, ws: &Workspace, home: &RecordsHome) -> BTreeSet<u32> {
    let mut pids = BTreeSet::new();
    for dir in home.sessions() {
        let id = dir.file_name().unwrap().to_str().unwrap().to_owned();
        let out = Vg::new(runner, ws.path())
            .records_home(home)
            .args(["logs", "verify", &id])
            .run();
        assert!(
            out.code() == Some(0) && out.stdout.contains("intact"),
            "{out}"
        );
        pids.extend(supervisor_pid(&dir));
    }
    pids
}

#[test]
fn many_sessions_back_to_back_and_at_once_leave_no_process_cgroup_or_broken_record() {
    if !require_tools(&[TMUX, ("/usr/bin/curl", "curl")]) {
        return;
    }
    let sizes = sizes();
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let server = HttpServer::start(vec![b'y'; BODY]);
        let marker = format!("soak{}", unique());
        let started = Instant::now();
        for n in 0..sizes.back_to_back {
            let kind = KINDS[n % KINDS.len()];
            let out = session(runner, &ws, &home, server.port, kind, n, &marker).run();
            check_run(kind, &out);
        }
        for round in 0..sizes.rounds {
            std::thread::scope(|s| {
                let runs: Vec<_> = (0..sizes.at_once)
                    .map(|i| {
                        let n = sizes.back_to_back + round * sizes.at_once + i;
                        let kind = KINDS[n % KINDS.len()];
                        let vg = session(runner, &ws, &home, server.port, kind, n, &marker);
                        (kind, s.spawn(move || vg.run()))
                    })
                    .collect();
                for (kind, run) in runs {
                    check_run(kind, &run.join().unwrap());
                }
            });
        }
        for n in 0..sizes.shells {
            let tag = format!("{marker}s{n}");
            let (args, prompt) = shell_args_tagged(&tag);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let tmux = Tmux::start(
                ws.path(),
                &vectraguard_command(runner, &home, &args),
                80,
                24,
            );
            tmux.wait_for(&prompt);
            tmux.line(&format!(
                "for i in 1 2 3; do /bin/true; done; echo {tag}-done; exit"
            ));
            tmux.wait_gone();
        }
        let elapsed = started.elapsed();
        let expected = sizes.back_to_back + sizes.rounds * sizes.at_once + sizes.shells;
        assert_no_process_left(&marker, &runner);

        let sessions = home.sessions();
        assert_eq!(sessions.len(), expected, "[{runner}]");
        let statuses: Vec<String> = sessions
            .iter()
            .map(|d| {
                session_metadata(d)["status"]
                    .as_str()
                    .unwrap_or("?")
                    .to_owned()
            })
            .collect();
        let timeouts = (0..expected - sizes.shells)
            .filter(|n| KINDS[n % KINDS.len()] == Kind::Timeout)
            .count();
        let count = |status: &str| statuses.iter().filter(|s| *s == status).count();
        assert_eq!(
            (count("timeout"), count("exited")),
            (timeouts, expected - timeouts),
            "[{runner}] {statuses:?}"
        );
        // Pids are reused over a thousand processes: one set, however many sessions.
        let pids = verify_all(runner, &ws, &home);
        assert!(!pids.is_empty(), "[{runner}] no supervisor pid recorded");
        let left = cgroups_of(&pids);
        assert!(left.is_empty(), "[{runner}] cgroups left behind: {left:?}");
        eprintln!(
            "soak [{runner}]: {expected} sessions ({} back to back, {}x{} at once, {} shells) in {:.1} s",
            sizes.back_to_back,
            sizes.rounds,
            sizes.at_once,
            sizes.shells,
            elapsed.as_secs_f64()
        );
    });
}

/// Descriptors, threads and resident memory of process `pid`.
#[derive(Debug, Clone, Copy)]
struct Usage {
    fds: usize,
    threads: usize,
    rss_kib: u64,
}

fn usage(pid: u32) -> Usage {
    let count = |what: &str| {
        std::fs::read_dir(format!("/proc/{pid}/{what}"))
            .unwrap_or_else(|e| panic!("/proc/{pid}/{what}: {e}"))
            .count()
    };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    Usage {
        fds: count("fd"),
        threads: count("task"),
        rss_kib,
    }
}

/// Resident memory a long-lived supervisor may gain over the measured commands
/// (allocator fragmentation, caches that fill once), however many there are.
const RSS_SLACK_KIB: u64 = 16 * 1024;

#[test]
fn a_persistent_sandboxs_host_does_not_leak_over_many_commands() {
    if !require_tools(&[("/usr/bin/curl", "curl")]) {
        return;
    }
    let execs = sizes().execs;
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let server = HttpServer::start(vec![b'y'; BODY]);
        let port = server.port;
        let name = format!("soak{}", unique());
        let allow = format!("web.test:{port}");
        let vg = |args: &[&str]| {
            Vg::new(runner, ws.path())
                .records_home(&home)
                .args(args)
                .run()
        };
        vg(&[
            "sandbox",
            "create",
            &name,
            "--add-host",
            "web.test:127.0.0.1",
            "--allow",
            &allow,
            "--no-network-notes",
        ])
        .assert_success();
        let host = supervisor_pid(&home.only_session()).expect("the host's pid");
        let curl = format!("curl -sS http://web.test:{port}/ | wc -c");
        let commands: [&str; 3] = [
            &curl,
            "for i in 1 2 3 4 5 6 7 8; do /bin/true; done; echo done",
            "head -c 100000 /dev/zero | tr '\\0' x | wc -c",
        ];
        let expected = [
            format!("{BODY}\n"),
            "done\n".to_owned(),
            "100000\n".to_owned(),
        ];
        let exec = |n: usize| {
            let out = vg(&["sandbox", "exec", &name, "--", "sh", "-c", commands[n % 3]]);
            out.assert_success();
            assert_eq!(out.stdout, expected[n % 3], "{out}");
        };
        // Warm-up: each kind twice.
        (0..6).for_each(exec);
        let before = usage(host);
        let started = Instant::now();
        (0..execs).for_each(exec);
        let elapsed = started.elapsed();
        // A command's threads end once it has; give the last a moment.
        let mut after = usage(host);
        wait_until(Duration::from_secs(5), || {
            after = usage(host);
            after.fds <= before.fds && after.threads <= before.threads
        });
        eprintln!(
            "persistent host [{runner}]: {execs} commands in {:.1} s; before {before:?}, after {after:?}",
            elapsed.as_secs_f64()
        );
        assert!(
            after.fds <= before.fds,
            "[{runner}] the host leaked descriptors: {before:?} -> {after:?}"
        );
        assert!(
            after.threads <= before.threads,
            "[{runner}] the host leaked threads: {before:?} -> {after:?}"
        );
        assert!(
            after.rss_kib <= before.rss_kib + RSS_SLACK_KIB,
            "[{runner}] the host's memory grew: {before:?} -> {after:?}"
        );
        vg(&["sandbox", "rm", "-f", &name]).assert_success();
        assert!(
            wait_until(Duration::from_secs(5), || !Path::new(&format!(
                "/proc/{host}"
            ))
            .exists()),
            "[{runner}] the host outlived `sandbox rm`"
        );
        let left = cgroups_of(&BTreeSet::from([host]));
        assert!(left.is_empty(), "[{runner}] cgroups left behind: {left:?}");
    });
}
