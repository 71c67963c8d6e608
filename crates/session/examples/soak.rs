//! Runs many recorded sessions through `vg_session` in this one process, back to back,
//! and checks that the process hosting them does not leak:
//! `cargo run -p vg-session --example soak -- [SESSIONS]`.
//!
//! The supervisor is a library, so a program can host session after session. A
//! sandbox can only be started while the process has one thread (`clone` copies only
//! the calling thread), so sessions in one process run one after the other, each
//! ending its threads before the next starts; sessions at once are separate
//! processes (the CLI's soak test runs them). After a warm-up (the first sessions of
//! each kind, which start the allocator's arenas and lazily created statics), the
//! descriptors (`/proc/self/fd`), threads (`/proc/self/task`) and resident memory
//! (`VmRSS`) of this process are measured, then measured again after the rest:
//! descriptors and threads must come back to the same count, memory within a small
//! bound. Every session must also end as its kind expects, leave no process of its
//! PID namespace and no cgroup behind, and its record must verify. Last, a session
//! started while another thread runs must be refused with a clear error, not hang.
//!
//! The sessions rotate through kinds: an exec-heavy script, the mediated network
//! (`--network allow` to a loopback HTTP server under a pinned name), and limits
//! (`--memory` and `--pids` when a cgroup can be made, `--timeout`, `--max-output`).
//! Prints the figures as `key=value` lines; exits 1 on a leak or a wrong session.

use std::collections::BTreeSet;
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
    let sessions = arg(1, 60)?;
    let workspace = tempfile::tempdir().context("a workspace")?;
    let records = tempfile::tempdir().context("a records folder")?;
    let served = tempfile::tempdir().context("a folder to serve")?;
    std::fs::write(served.path().join("body"), [b'y'; BODY_LEN])?;
    // The loopback server is a process of its own: no thread of ours may run while a
    // sandbox starts.
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let _server = Server(
        std::process::Command::new("python3")
            .args(["-m", "http.server", "--bind", "127.0.0.1", "--directory"])
            .arg(served.path())
            .arg(port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .context("python3 -m http.server")?,
    );
    let up = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        ensure!(
            up.elapsed() < Duration::from_secs(10),
            "the loopback server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let ctx = Ctx {
        // Mounts name real paths: /tmp may be a symlink.
        workspace: std::fs::canonicalize(workspace.path())?,
        records: records.path().to_owned(),
        port,
        cgroups: cgroups_available(),
    };
    println!("cgroups={}", ctx.cgroups);

    // Warm-up: each kind twice.
    let started = Instant::now();
    for (i, kind) in KINDS.iter().chain(KINDS.iter()).enumerate() {
        session(&ctx, *kind, i).with_context(|| format!("warm-up session {i} ({kind:?})"))?;
    }
    let before = usage()?;
    let mut peak_rss = before.rss_kib;
    for i in 0..sessions {
        let kind = KINDS[i % KINDS.len()];
        session(&ctx, kind, i).with_context(|| format!("session {i} ({kind:?})"))?;
        peak_rss = peak_rss.max(usage()?.rss_kib);
    }
    let after = usage()?;
    let elapsed = started.elapsed();
    let recorded = SessionStore::at(&ctx.records)
        .list(&vg_records::ListFilter::default())?
        .len();
    println!(
        "sessions={recorded} measured={sessions} seconds={:.1}",
        elapsed.as_secs_f64()
    );
    for (label, u) in [("before", before), ("after", after)] {
        println!(
            "{label}: fds={} threads={} rss_kib={}",
            u.fds, u.threads, u.rss_kib
        );
    }
    println!("peak_rss_kib={peak_rss}");
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
    refused_with_a_thread(&ctx)
}

/// A session started while another thread runs is refused, naming the cause.
fn refused_with_a_thread(ctx: &Ctx) -> Result<()> {
    let (stop, wait) = std::sync::mpsc::channel::<()>();
    let other = std::thread::spawn(move || wait.recv());
    let outcome = session(ctx, Kind::Exec, 9999);
    drop(stop);
    let _ = other.join();
    match outcome {
        Ok(()) => bail!("a session started while another thread ran"),
        Err(e) if format!("{e:#}").contains("while the supervisor has one thread") => {
            println!("refused with a thread: {e:#}");
            Ok(())
        }
        Err(e) => Err(e.context("a session started with another thread running")),
    }
}

/// The loopback server, killed on drop.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
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
            s.network_rules.push(Rule::parse(
                Action::Allow,
                &format!("web.test:{}", ctx.port),
            )?);
            // Fails the session unless every byte came through the mediator.
            format!(
                "b=$(curl -sS http://web.test:{}/body | wc -c); echo net-{n} $b; test \"$b\" -eq {BODY_LEN}",
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
    let id = running
        .id()
        .context("a recorded session has an id")?
        .to_owned();
    // Held open so that the namespace, and so its inode number, cannot be freed and
    // reused by another sandbox while we look for its processes.
    let ns_path = format!("/proc/{}/ns/pid", running.pid());
    let held = std::fs::File::open(&ns_path).ok();
    let pidns = std::fs::read_link(&ns_path).ok();
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
    drop(held);
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
    vg_sandbox::cgroup::Cgroup::create(
        &format!("vectraguard-{}-probe", std::process::id()),
        &limits,
    )
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
