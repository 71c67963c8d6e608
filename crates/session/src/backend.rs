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
            if matches!(spec.network, SandboxNetwork::Tun(_)) {
                return refuse(
                    "the mediated network (--network allow, rules)",
                    "use --network none, or --backend native for rules",
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
            if learn {
                return refuse("learning mode (--learn)", "use --backend native");
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

/// A started backend's own state, kept until the session ends.
#[derive(Debug, Default)]
pub struct Held {
    /// gVisor's bundle folder, removed when dropped.
    pub bundle: Option<vg_backend::gvisor::Bundle>,
}

/// Spawns `spec` on `backend` with the given stdio, in `cgroup`.
pub fn spawn(
    backend: Backend,
    spec: &SandboxSpec,
    stdio: [RawFd; 3],
    cgroup: Option<&Cgroup>,
    held: &mut Held,
) -> Result<vg_sandbox::Sandbox> {
    match backend {
        Backend::Native => Ok(vg_sandbox::spawn_in(spec, stdio, cgroup)?),
        Backend::Gvisor => {
            let (bundle, runtime) = gvisor(spec)?;
            held.bundle = Some(bundle);
            Ok(vg_sandbox::runtime::spawn_runtime(&runtime, stdio, cgroup)?)
        }
        Backend::Docker | Backend::Podman => bail!("--backend {backend} is not available"),
    }
}

/// gVisor's bundle and runsc's command for `spec`.
fn gvisor(
    spec: &SandboxSpec,
) -> Result<(vg_backend::gvisor::Bundle, vg_sandbox::runtime::RuntimeSpec)> {
    use vg_backend::gvisor;
    let runsc = gvisor::find_runsc(std::env::var_os("PATH").as_deref())?;
    let (uid, gid) = spec
        .inside
        .unwrap_or((spec.identity.uid, spec.identity.gid));
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
    let id = format!("vg-{}-{}", std::process::id(), unique());
    let bundle = gvisor::Bundle::write(&std::env::temp_dir(), &id, &process, &spec.view, identity)?;
    let network = match spec.network {
        SandboxNetwork::Loopback => gvisor::Network::None,
        SandboxNetwork::Host => gvisor::Network::Host,
        SandboxNetwork::Tun(_) => bail!("--backend gvisor: the mediated network is not available"),
    };
    let enforced = format!(
        "backend=gvisor\nruntime={}\nplatform=ptrace\nnetwork={}\ncapabilities=\nno_new_privs=1\nuser={uid}:{gid}\nhost_user={}\n",
        runsc.display(),
        match network {
            gvisor::Network::None => "none",
            gvisor::Network::Host => "host",
        },
        identity.map_or_else(|| "self".to_owned(), |(u, _)| u.to_string()),
    );
    let mut runtime = bundle.runtime(&runsc, network, identity, false, enforced);
    // runsc's own debug log, for diagnosing the backend (a folder the user chooses).
    if let Some(dir) = std::env::var_os("VECTRAGUARD_GVISOR_DEBUG_LOG") {
        let dir = std::path::PathBuf::from(dir);
        runtime.argv.insert(1, "--debug".into());
        runtime
            .argv
            .insert(2, format!("--debug-log={}/", dir.display()));
    }
    Ok((bundle, runtime))
}

/// A number unique within this process.
fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
