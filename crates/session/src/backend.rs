//! The session's backends: what runs the planned sandbox. The native sandbox is the
//! default; gVisor runs the same plan through `runsc` (`vg_backend::gvisor`). Each
//! backend gets the same `Plan`: what one cannot enforce is refused here, naming
//! the backend and the fix, never ignored.

use std::os::fd::RawFd;

use anyhow::{Result, bail};
use vg_policy::Backend;
use vg_sandbox::cgroup::Cgroup;
use vg_sandbox::{SandboxNetwork, SandboxSpec};

/// What a backend cannot do, checked while planning (pure).
pub fn check(
    backend: Backend,
    spec: &SandboxSpec,
    learn: bool,
    gate: bool,
    inspection: bool,
    violations_all: bool,
) -> Result<()> {
    let refuse = |what: &str, fix: &str| -> Result<()> {
        bail!("--backend {backend}: {what} is not available on this backend; {fix}")
    };
    match backend {
        Backend::Native => Ok(()),
        Backend::Gvisor => {
            // Before the network: learning opens it.
            if learn {
                return refuse("learning mode (--learn)", "use --backend native");
            }
            if matches!(spec.network, SandboxNetwork::Tun(_)) {
                return refuse(
                    "the mediated network (--network allow, rules)",
                    "use --network none, or --backend native for rules",
                );
            }
            // runsc runs rootless, and its rootless sandbox always gets a network
            // namespace of its own: `--network=host` there is the host kernel's stack
            // in an empty namespace, no network at all, while the record would say
            // "host".
            if matches!(spec.network, SandboxNetwork::Host) {
                return refuse(
                    "the host's network (--network host)",
                    "use --network none, or --backend native",
                );
            }
            if inspection {
                return refuse("HTTPS inspection and secrets", "use --backend native");
            }
            if spec.tty {
                return refuse(
                    "a terminal (sandbox shell, run -t)",
                    "run without -t, or use --backend native",
                );
            }
            if spec.persistent {
                return refuse(
                    "a persistent sandbox (sandbox create)",
                    "use --backend native",
                );
            }
            if gate {
                return refuse(
                    "holding execs for approval (--ask)",
                    "use --ask never, or --backend native",
                );
            }
            if violations_all {
                return refuse(
                    "reporting refused file accesses (--violations all)",
                    "remove it, or use --backend native",
                );
            }
            Ok(())
        }
        Backend::Docker | Backend::Podman => bail!(
            "--backend {backend} is not available in this build yet; use --backend native or gvisor"
        ),
    }
}

/// Limits whose native mechanism does not hold another backend. The memory
/// watchdog (where no cgroup can be made) cannot see gVisor's memory: an asked cap
/// is refused, the default one recorded as not held.
///
/// The process cap by `RLIMIT_NPROC` (the default cap, or the fallback where no
/// pids cgroup can be made) counts host processes per user namespace: it means
/// nothing for gVisor, whose sandboxed processes are the sentry's own. A cap the
/// user asked for is refused; the default one is recorded as not enforced.
pub fn limits(
    backend: Backend,
    asked_memory: bool,
    asked_pids: bool,
    plan: &mut crate::limits::Plan,
    enforced: &mut crate::limits::Enforced,
) -> Result<()> {
    if backend == Backend::Native {
        return Ok(());
    }
    // Terminals come from the sentry's own devpts, not the host's pool.
    enforced
        .enforced_by
        .insert("ptys", format!("{backend}'s own terminals"));
    // The watchdog sums the resident memory of the sandbox's processes, which does
    // not see the pages of gVisor's memory file: only a cgroup holds gVisor.
    if let Some(limit) = enforced.watchdog.take() {
        if asked_memory && !plan.best_effort {
            bail!(
                "--backend {backend}: --memory needs a memory cgroup (none could be made here); run as root or with a delegated cgroup v2 subtree, pass --best-effort-limits to run without the cap, or use --backend native"
            );
        }
        let _ = limit;
        plan.limits.memory = None;
        enforced.enforced_by.insert(
            "memory",
            format!(
                "none (no memory cgroup; the watchdog cannot see the {backend} backend's memory)"
            ),
        );
    }
    if enforced.rlimit_nproc.is_none() {
        return Ok(());
    }
    if asked_pids {
        bail!(
            "--backend {backend}: --pids needs a pids cgroup here (none could be made); run as root or with a delegated cgroup, drop --pids, or use --backend native"
        );
    }
    enforced.rlimit_nproc = None;
    plan.limits.pids = None;
    enforced.enforced_by.insert(
        "pids",
        format!("none (no pids cgroup; the {backend} backend's processes are not host processes)"),
    );
    Ok(())
}

/// A started backend's own state, kept until the session ends.
#[derive(Debug, Default)]
pub struct Held {
    /// gVisor's bundle folder, removed when dropped.
    pub bundle: Option<vg_backend::gvisor::Bundle>,
    /// gVisor's trace sink (execs and exits), until the record's tracer takes it.
    pub sink: Option<vg_backend::gvisor::trace::Sink>,
}

/// Spawns `spec` on `backend` with the given stdio, in `cgroup`.
pub fn spawn(
    backend: Backend,
    spec: &SandboxSpec,
    stdio: [RawFd; 3],
    cgroup: Option<&Cgroup>,
    record_execs: bool,
    held: &mut Held,
) -> Result<vg_sandbox::Sandbox> {
    match backend {
        Backend::Native => Ok(vg_sandbox::spawn_in(spec, stdio, cgroup)?),
        Backend::Gvisor => {
            let (bundle, runtime, sink) = gvisor(spec, record_execs)?;
            held.bundle = Some(bundle);
            held.sink = sink;
            Ok(vg_sandbox::runtime::spawn_runtime(&runtime, stdio, cgroup)?)
        }
        Backend::Docker | Backend::Podman => bail!("--backend {backend} is not available"),
    }
}

/// gVisor's bundle and runsc's command for `spec`.
fn gvisor(
    spec: &SandboxSpec,
    record_execs: bool,
) -> Result<(
    vg_backend::gvisor::Bundle,
    vg_sandbox::runtime::RuntimeSpec,
    Option<vg_backend::gvisor::trace::Sink>,
)> {
    use vg_backend::gvisor;
    let runsc = gvisor::find_runsc(std::env::var_os("PATH").as_deref())?;
    // runsc runs rootless as the sandbox's host user, whose files the gofer shows
    // as owned by uid 0 (that user is root in runsc's user namespace; everyone
    // else's files show as nobody's). So the command runs as uid 0 of gVisor's
    // kernel, with every capability set empty, the bounding set too (no exec
    // gives any back) and no_new_privs: it owns what the host user owns, and
    // nothing more. An image's user is kept as the image says.
    let (uid, gid) = spec.inside.unwrap_or((0, 0));
    let process = gvisor::Process {
        argv: spec.argv.clone(),
        env: spec.env.clone(),
        cwd: spec.workdir.clone(),
        uid,
        gid,
        hostname: spec.hostname.clone(),
    };
    // Started as root, runsc runs as the identity the native sandbox would take:
    // neither the sentry nor its file proxy is ever root on the host.
    let identity = crate::host::is_root().then_some((spec.identity.uid, spec.identity.gid));
    // Unpredictable: another user cannot make the folder's name first (a refused
    // start).
    let id = format!("vg-{}-{}-{}", std::process::id(), unique(), random_hex()?);
    let bundle = gvisor::Bundle::write(&std::env::temp_dir(), &id, &process, &spec.view, identity)?;
    let network = match spec.network {
        SandboxNetwork::Loopback => gvisor::Network::None,
        SandboxNetwork::Host => gvisor::Network::Host,
        SandboxNetwork::Tun(_) => bail!("--backend gvisor: the mediated network is not available"),
    };
    let enforced = format!(
        "backend=gvisor\nruntime={}\nplatform=ptrace\nnetwork={}\ncapabilities=\nno_new_privs=1\nuser={uid}:{gid}\nhost_user={}\nviolations={VIOLATIONS}\n",
        runsc.display(),
        match network {
            gvisor::Network::None => "none",
            gvisor::Network::Host => "host",
        },
        identity.map_or_else(|| "self".to_owned(), |(u, _)| u.to_string()),
    );
    // A recorded run's execs and exits come from gVisor's trace points, sent to a
    // socket in the bundle folder (0700, still ours) that listens before runsc
    // starts: runsc refuses to start when it cannot connect.
    let sink = if record_execs {
        let path = bundle.trace_socket();
        let sink = gvisor::trace::Sink::bind(&path)?;
        let config = gvisor::trace::pod_init_config(&path)?;
        std::fs::write(bundle.trace_config(), serde_json::to_vec(&config)?)
            .map_err(|e| anyhow::anyhow!("cannot write gVisor's trace configuration: {e}"))?;
        Some(sink)
    } else {
        None
    };
    // Only now, with everything written, to runsc's user.
    bundle.hand_over()?;
    let mut runtime = bundle.runtime(&runsc, network, identity, sink.is_some(), enforced);
    // runsc's own debug log, for diagnosing the backend (a folder the user chooses).
    if let Some(dir) = std::env::var_os("VECTRAGUARD_GVISOR_DEBUG_LOG") {
        let dir = std::path::PathBuf::from(dir);
        runtime.argv.insert(1, "--debug".into());
        runtime
            .argv
            .insert(2, format!("--debug-log={}/", dir.display()));
    }
    Ok((bundle, runtime, sink))
}

/// What the record says of refused accesses on gVisor: its kernel refuses writes to
/// read-only places and the system calls it does not implement itself, and reports
/// none of them, so the record has no `violation` events, and says so rather than
/// look like a run that was never refused anything.
const VIOLATIONS: &str = "not-recorded";

/// Eight random hexadecimal digits.
fn random_hex() -> Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 4];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| {
            anyhow::anyhow!("cannot read /dev/urandom for the gVisor bundle's name: {e}")
        })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A number unique within this process.
fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
