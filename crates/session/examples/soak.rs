//! Runs many recorded sessions through `vg_session` in this one process, back to back
//! and several at once, and checks that the process hosting them does not leak:
//! `cargo run -p vg-session --example soak -- [SEQUENTIAL] [CONCURRENT] [ROUNDS]`.
//!
//! The supervisor is a library, so a front end that keeps running (a persistent
//! sandbox's host, the MCP server) hosts session after session. After a warm-up (the
//! first sessions of each kind, which start the allocator's arenas and lazily created
//! statics), the descriptors (`/proc/self/fd`), threads (`/proc/self/task`) and
//! resident memory (`VmRSS`) of this process are measured, then measured again after
//! the rest: descriptors and threads must come back to the same count, memory within a
//! small bound. Every session must also end as its kind expects, leave no process of
//! its PID namespace and no cgroup behind, and its record must verify.
//!
//! The sessions rotate through kinds: an exec-heavy script, the mediated network
//! (`--network allow` to a loopback HTTP server under a pinned name), and limits
//! (`--memory` and `--pids` when a cgroup can be made, `--timeout`, `--max-output`).
//! Prints the figures as `key=value` lines; exits 1 on a leak or a wrong session.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use vg_policy::{Action, AddHost, NetworkMode, Rule};
use vg_records::SessionStore;
use vg_session::{Plan, Recording, Request, image};

/// Bytes the loopback server answers every request with.
const BODY_LEN: usize = 20_000;
/// Resident memory the process may gain between the measurements (allocator
/// fragmentation, caches that fill up once), whatever the number of sessions.
const RSS_SLACK_KIB: u64 = 24 * 1024;

fn main() -> ExitCode {
    match soak() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("soak: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Exec,
    Network,
    Limits,
    Timeout,
}

const KINDS: [Kind; 4] = [Kind::Exec, Kind::Network, Kind::Limits, Kind::Timeout];

struct Ctx {
    workspace: PathBuf,
    records: PathBuf,
    port: u16,
    /// A cgroup can be made here (root on this host, or a delegated v2 subtree).
    cgroups: bool,
}

/// The process's own counts.
#[derive(Debug, Clone, Copy)]
struct Usage {
    fds: usize,
    threads: usize,
    rss_kib: u64,
}

fn usage() -> Result<Usage> {
    let count = |dir: &str| -> Result<usize> {
        Ok(std::fs::read_dir(dir)
            .with_context(|| format!("reading {dir}"))?
            .count())
    };
    let status = std::fs::read_to_string("/proc/self/status")?;
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("VmRSS in /proc/self/status")?;
    // read_dir holds one descriptor of its own while it counts.
    Ok(Usage {
        fds: count("/proc/self/fd")? - 1,
        threads: count("/proc/self/task")?,
        rss_kib,
    })
}

fn arg(n: usize, default: usize) -> Result<usize> {
    match std::env::args().nth(n) {
        Some(a) => usize::from_str(&a).with_context(|| format!("argument {n}: {a:?}")),
        None => Ok(default),
    }
}

fn soak() -> Result<()> {
    let sequential = arg(1, 60)?;
    let concurrent = arg(2, 8)?;
    let rounds = arg(3, 2)?;
    let workspace = tempfile::tempdir().context("a workspace")?;
    let records = tempfile::tempdir().context("a records folder")?;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || serve(conn));
        }
    });
    let ctx = Ctx {
        // Mounts name real paths: /tmp may be a symlink.
        workspace: std::fs::canonicalize(workspace.path())?,
        records: records.path().to_owned(),
        port,
        cgroups: cgroups_available(),
    };
    println!("cgroups={}", ctx.cgroups);

    // Warm-up: each kind once alone and once at the concurrency used below.
    let started = Instant::now();
    for (i, kind) in KINDS.iter().enumerate() {
        session(&ctx, *kind, i).with_context(|| format!("warm-up session {i} ({kind:?})"))?;
    }
    concurrently(&ctx, concurrent, 1000)?;
    let before = usage()?;
    for i in 0..sequential {
        let kind = KINDS[i % KINDS.len()];
        session(&ctx, kind, i).with_context(|| format!("session {i} ({kind:?})"))?;
    }
    let after_sequential = usage()?;
    for round in 0..rounds {
        concurrently(&ctx, concurrent, 2000 + round * concurrent)?;
    }
    // Threads of finished sessions are joined before `wait` returns, but a relay's
    // last thread may still be on its way out: give them a moment.
    let mut after = usage()?;
    for _ in 0..50 {
        if after.threads <= before.threads && after.fds <= before.fds {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        after = usage()?;
    }
    let elapsed = started.elapsed();
    let sessions = SessionStore::at(&ctx.records)
        .list(&vg_records::ListFilter::default())?
        .len();
    println!(
        "sessions={sessions} sequential={sequential} concurrent={concurrent} rounds={rounds} seconds={:.1}",
        elapsed.as_secs_f64()
    );
    for (label, u) in [
        ("before", before),
        ("after_sequential", after_sequential),
        ("after", after),
    ] {
        println!(
            "{label}: fds={} threads={} rss_kib={}",
            u.fds, u.threads, u.rss_kib
        );
    }
    ensure!(
        after.fds <= before.fds,
        "descriptors leaked: {} before, {} after",
        before.fds,
        after.fds
    );
    ensure!(
        after.threads <= before.threads,
        "threads leaked: {} before, {} after",
        before.threads,
        after.threads
    );
    ensure!(
        after.rss_kib <= before.rss_kib + RSS_SLACK_KIB,
        "resident memory grew by {} KiB (more than {RSS_SLACK_KIB} KiB)",
        after.rss_kib.saturating_sub(before.rss_kib)
    );
    ensure!(
        leftover_cgroups().is_empty(),
        "cgroups left behind: {:?}",
        leftover_cgroups()
    );
    Ok(())
}

/// `count` sessions at once, one per thread, kinds rotating.
fn concurrently(ctx: &Ctx, count: usize, first: usize) -> Result<()> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..count)
            .map(|i| {
                let n = first + i;
                let kind = KINDS[n % KINDS.len()];
                s.spawn(move || {
                    session(ctx, kind, n).with_context(|| format!("session {n} ({kind:?}), at once"))
                })
            })
            .collect();
        for h in handles {
            h.join()
                .map_err(|_| anyhow::anyhow!("a session thread panicked"))??;
        }
        Ok(())
    })
}

/// Runs one session of `kind` and checks its ending, its record and what it left.
fn session(ctx: &Ctx, kind: Kind, n: usize) -> Result<()> {
    let mut request = Request {
        after_dash_dash: true,
        cwd: ctx.workspace.clone(),
        record: Recording::On {
            root: Some(ctx.records.clone()),
        },
        host_env: Request::process_env(),
        network_notes: false,
        ..Request::default()
    };
    let script = match kind {
        // Many short-lived processes: the tracer records each exec and exit.
        Kind::Exec => format!(
            "for i in 1 2 3 4 5 6 7 8; do /bin/true; done; echo exec-{n} | cat; ls / >/dev/null"
        ),
        Kind::Network => {
            let s = &mut request.settings;
            s.network = Some(NetworkMode::Allow);
            s.add_hosts.push(AddHost::parse("web.test:127.0.0.1")?);
            s.network_rules
                .push(Rule::parse(Action::Allow, &format!("web.test:{}", ctx.port))?);
            format!(
                "curl -sS http://web.test:{}/ | wc -c; echo net-{n}",
                ctx.port
            )
        }
        Kind::Limits => {
            let l = &mut request.settings.limits;
            if ctx.cgroups {
                l.memory = Some(256 << 20);
            }
            l.pids = Some(64);
            l.max_output = Some(4096);
            // More output than the cap: the relay cuts it and the session goes on.
            format!("head -c 100000 /dev/zero | tr '\\0' x; echo; echo limits-{n} >&2")
        }
        Kind::Timeout => {
            request.settings.limits.timeout = Some(Duration::from_millis(300));
            request.settings.limits.kill_grace = Some(Duration::from_millis(200));
            "echo started; exec sleep 30".to_owned()
        }
    };
    request.args = vec!["sh".into(), "-c".into(), script];
    let plan = Plan::new(&request, &mut image::none)?;
    let running = vg_session::start(plan)?;
    let id = running.id().context("a recorded session has an id")?.to_owned();
    let pidns = std::fs::read_link(format!("/proc/{}/ns/pid", running.pid())).ok();
    let outcome = running.wait()?;
    let expected = match kind {
        Kind::Timeout => 124,
        _ => 0,
    };
    ensure!(
        outcome.exit_code == expected,
        "{id}: exit code {} (expected {expected})",
        outcome.exit_code
    );
    let report = SessionStore::at(&ctx.records).verify(&id)?;
    ensure!(report.is_intact(), "{id}: record does not verify: {report}");
    if let Some(ns) = pidns {
        let left = processes_in(&ns);
        if !left.is_empty() {
            bail!("{id}: processes of its PID namespace outlived it: {left:?}");
        }
    }
    Ok(())
}

/// Host pids of the processes whose PID namespace is `ns` (a `pid:[N]` link).
fn processes_in(ns: &Path) -> BTreeSet<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return BTreeSet::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/ns/pid")).is_ok_and(|l| l.as_path() == ns)
        })
        .collect()
}

/// Whether this process can make a cgroup with a memory limit, as a session would.
fn cgroups_available() -> bool {
    let limits = vg_sandbox::cgroup::CgroupLimits {
        memory: Some(64 << 20),
        ..Default::default()
    };
    vg_sandbox::cgroup::Cgroup::create(&format!("vectraguard-{}-probe", std::process::id()), &limits)
        .is_ok()
}

/// Cgroup folders named after this process that are still there.
fn leftover_cgroups() -> Vec<PathBuf> {
    let prefix = format!("vectraguard-{}", std::process::id());
    let mut left = Vec::new();
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    for (controllers, path) in vg_sandbox::cgroup::parse_proc_cgroup(&own) {
        let root = Path::new("/sys/fs/cgroup");
        let sub = match controllers.first() {
            Some(c) => root.join(c),
            None if root.join("cgroup.controllers").exists() => root.to_owned(),
            None => root.join("unified"),
        };
        let dir = sub.join(path.trim_start_matches('/'));
        if let Ok(rd) = std::fs::read_dir(&dir) {
            left.extend(
                rd.filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                    .map(|e| e.path()),
            );
        }
    }
    left
}

/// HTTP/1.0: reads the request head, answers [`BODY_LEN`] bytes and closes.
fn serve(conn: TcpStream) {
    let mut reader = BufReader::new(&conn);
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
        if line == "\r\n" || line == "\n" {
            break;
        }
        line.clear();
    }
    let mut w = &conn;
    let _ = write!(
        w,
        "HTTP/1.0 200 OK\r\nContent-Length: {BODY_LEN}\r\nConnection: close\r\n\r\n"
    );
    let _ = w.write_all(&[b'y'; BODY_LEN]);
}
