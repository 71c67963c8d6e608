//! The session's backends: what runs the planned sandbox. The native sandbox is the
//! default; gVisor runs the same plan through `runsc` (`vg_backend::gvisor`), Docker
//! and Podman as a container through their clients (`vg_backend::engine`), each
//! under the keeper of `vg_sandbox::runtime`. Each backend gets the same `Plan`:
//! what one cannot enforce is refused here, naming the backend and the fix, never
//! ignored.

use std::os::fd::RawFd;

use anyhow::{Result, bail};
use vg_policy::Backend;
use vg_sandbox::cgroup::Cgroup;
use vg_sandbox::{SandboxNetwork, SandboxSpec};

/// What a backend cannot do, checked while planning (pure): the first refusal in
/// the table below, naming the backend and the fix. Learning comes first: it opens
/// the network, which would otherwise be refused instead.
pub fn check(
    backend: Backend,
    spec: &SandboxSpec,
    learn: bool,
    gate: bool,
    inspection: bool,
    violations_all: bool,
) -> Result<()> {
    if backend == Backend::Native {
        return Ok(());
    }
    // (asked for, what, the fix): what only the native sandbox has.
    let refusals = [
        (learn, "learning mode (--learn)", "use --backend native"),
        // gVisor and the engines run the mediated network behind the same mediator
        // (see `gvisor`, `vg_sandbox::engine_net`). A container's interface is made
        // before our init's go, so the engines need our init: the recorded run's.
        (
            engine_of(backend).is_some()
                && matches!(spec.network, SandboxNetwork::Tun(_))
                && !spec.trace_exec,
            "the mediated network (--network allow, rules) without a record (--no-record)",
            "remove --no-record (the container's network is attached by the recording init), or use --backend native or gvisor",
        ),
        // runsc runs rootless, and its rootless sandbox always gets a network
        // namespace of its own: `--network=host` there is the host kernel's stack in
        // an empty namespace, no network at all, while the record would say "host".
        (
            backend == Backend::Gvisor && matches!(spec.network, SandboxNetwork::Host),
            "the host's network (--network host)",
            "use --network none, or --backend native",
        ),
        // gVisor's mediator hands connections to the same inspector. A container's
        // mediator could too, but the session CA must be added to the image's own
        // trust bundle, which is in the engine's store (not on this host's disk,
        // where `inspection::bundles` reads it): refused rather than trusted by
        // nothing, or bound over the image's roots with the host's.
        (
            inspection && backend != Backend::Gvisor,
            "HTTPS inspection and secrets",
            "use --backend native or gvisor",
        ),
        // gVisor's terminal comes from runsc's console socket (see `gvisor`); a
        // container's from our recording init, which opens it in the container's
        // devpts and hands it over with its listener (`engine_init::terminal`). The
        // engine's own terminal would reach the user unrecorded: never used.
        (
            engine_of(backend).is_some() && spec.tty && !spec.trace_exec,
            "a terminal (sandbox shell, run -t) without exec records",
            "record execs (the container's terminal comes from the recording init), or use --backend native or gvisor",
        ),
        // A recorded container's execs reach the native tracer (our init hands its
        // listener over), which holds them; gVisor's trace points only report.
        (
            gate && backend == Backend::Gvisor,
            "holding execs for approval (--ask)",
            "use --ask never, or --backend native, docker or podman",
        ),
        (
            violations_all,
            "reporting refused file accesses (--violations all)",
            "remove it, or use --backend native",
        ),
    ];
    match refusals.iter().find(|(asked, ..)| *asked) {
        Some((_, what, fix)) => {
            bail!("--backend {backend}: {what} is not available on this backend; {fix}")
        }
        None => Ok(()),
    }
}

fn engine_of(backend: Backend) -> Option<vg_backend::engine::Engine> {
    match backend {
        Backend::Docker => Some(vg_backend::engine::Engine::Docker),
        Backend::Podman => Some(vg_backend::engine::Engine::Podman),
        Backend::Native | Backend::Gvisor => None,
    }
}

/// With a container engine, the image named by `--image`, in the engine's own store.
pub fn engine_image(
    backend: Option<Backend>,
    request: &crate::request::Request,
) -> Result<Option<String>> {
    let Some(engine) = backend.and_then(engine_of) else {
        return Ok(None);
    };
    match &request.image {
        Some(image) => Ok(Some(image.name.clone())),
        None => bail!(
            "--backend {}: name an image of {}'s store with --image NAME (`{} images` lists them); the host's folders are shown only by the native and gvisor backends",
            engine.backend_name(),
            engine.display_name(),
            engine.program()
        ),
    }
}

/// The container the engine runs: the same plan as the native sandbox's where an
/// engine can hold it — the workspace and `--mount`s, private `/tmp`, `$HOME` and
/// `--tmpfs` folders of `--disk` bytes on a read-only root, the sandbox's user
/// (never root), the clean environment, no capabilities, `no-new-privileges`, our
/// seccomp rules (written at start), the network, and the limits, which the
/// engine's own cgroups hold.
pub fn container(
    backend: Backend,
    image: &str,
    entrypoint: Option<String>,
    spec: &SandboxSpec,
    mounts: &[vg_policy::view::ResolvedMount],
    limits: &crate::limits::Plan,
    tmpfs: &[std::path::PathBuf],
) -> Result<vg_backend::engine::ContainerPlan> {
    use vg_backend::engine::{ContainerPlan, EngineMount, EngineNetwork};
    let Some(engine) = engine_of(backend) else {
        bail!("--backend {backend} is not a container engine");
    };
    let name = container_name()?;
    let mut plan = ContainerPlan::new(engine, image, spec.argv.clone(), &name);
    // The image's entrypoint stays unless --entrypoint replaces it (as `docker run`).
    plan.entrypoint = entrypoint;
    plan.env = spec.env.clone();
    plan.workdir = spec.workdir.clone();
    // With a terminal, the command's input comes from its terminal, which our init
    // opens in the container; the engine's client gets none of ours.
    plan.stdin = !spec.tty;
    plan.user = (spec.identity.uid, spec.identity.gid);
    plan.network = match spec.network {
        SandboxNetwork::Loopback => EngineNetwork::None,
        SandboxNetwork::Host => EngineNetwork::Host,
        // A namespace with only loopback, where the supervisor makes the mediated
        // network's interface before our init's go (`vg_sandbox::engine_net`).
        SandboxNetwork::Tun(_) => EngineNetwork::None,
    };
    let disk = limits.disk;
    plan.mounts = [std::path::PathBuf::from("/tmp"), spec.identity.home.clone()]
        .into_iter()
        .chain(tmpfs.iter().cloned())
        .map(|dst| EngineMount::Tmpfs {
            dst,
            size: disk,
            mode: 0o1777,
            user_owned: true,
        })
        .collect();
    // A `--tmpfs` hides a bind at the same place, as natively (the MCP server's
    // `/workspace`); the engines refuse two mounts at one destination, so the hidden
    // bind is left out: the container sees what the native sandbox shows.
    plan.mounts.extend(
        mounts
            .iter()
            .filter(|m| !tmpfs.contains(&m.container))
            .map(|m| EngineMount::Bind {
                src: m.host.clone(),
                dst: m.container.clone(),
                read_only: m.read_only,
            }),
    );
    plan.memory = limits.limits.memory;
    plan.pids = limits.limits.pids;
    plan.cpus = limits.limits.cpus;
    plan.labels = vec![("vectraguard".into(), "1".into())];
    Ok(plan)
}

/// The generated `/etc` files a container gets (`etc.rs` writes them): with the
/// mediated network, `/etc/resolv.conf`, which names the mediator's DNS, bound
/// read-only over the image's (the engine's own would name none, or the host's
/// servers). The engine keeps its own `/etc/hosts` and `/etc/hostname`.
pub fn engine_etc(
    container: &mut vg_backend::engine::ContainerPlan,
    network: SandboxNetwork,
    generated: &[vg_policy::MountOp],
) {
    if !matches!(network, SandboxNetwork::Tun(_)) {
        return;
    }
    for op in generated {
        if let vg_policy::MountOp::Bind { src, dst, .. } = op
            && dst == std::path::Path::new("/etc/resolv.conf")
        {
            container
                .mounts
                .push(vg_backend::engine::EngineMount::Bind {
                    src: src.clone(),
                    dst: dst.clone(),
                    read_only: true,
                });
        }
    }
}

/// Which limits the user asked for (not defaults), for [`limits`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Asked {
    pub memory: bool,
    pub pids: bool,
    pub ptys: bool,
}

/// Host tasks gVisor may use per process inside ([`gvisor_pids`]). Measured with
/// runsc 20221219 on the ptrace platform (README, "gVisor and the process cap"):
/// about 5 per sleeping process; a fork flood capped at 64 inside reached 62 per
/// process after 50 s and 86 after 90 s, since every stub process gains a thread
/// for each sentry thread that ever ran it.
pub const GVISOR_HOST_TASKS_PER_PROCESS: u64 = 128;

/// Host tasks of gVisor itself with nothing running inside: runsc, the gofer and
/// the sentry (37 measured), with room for the sentry's threads.
pub const GVISOR_HOST_TASKS_BASE: u64 = 1024;

/// gVisor's two process caps: `inside`, held by its kernel (`RLIMIT_NPROC` of the
/// sandbox's processes, `vg_backend::gvisor::bundle::process_limits`), and `host`,
/// the pids cgroup's cap on gVisor's own host threads and processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GvisorPids {
    pub inside: u64,
    pub host: u64,
    /// The host's task space (`kernel.pid_max`, `kernel.threads-max`), when the
    /// host cap was lowered to half of it.
    pub clamped_to: Option<u64>,
}

impl GvisorPids {
    /// What the record's `enforced_by` says of `pids` and `pids_host`, with the
    /// cgroup `held` by (its version), or none (pure).
    pub fn enforced_by(&self, held: Option<&str>) -> (String, String) {
        let inside = format!("gvisor-rlimit-nproc ({} tasks inside)", self.inside);
        let host = match (held, self.clamped_to) {
            (Some(version), None) => format!(
                "{version} ({} host tasks for gVisor itself: {GVISOR_HOST_TASKS_BASE} + {GVISOR_HOST_TASKS_PER_PROCESS} per process inside)",
                self.host
            ),
            (Some(version), Some(max)) => format!(
                "{version} ({} host tasks for gVisor itself: half of this host's {max}; gVisor may need more before {} processes run inside, and the sandbox then ends)",
                self.host, self.inside
            ),
            (None, _) => {
                "none (no pids cgroup here: gVisor's own host tasks are not capped)".to_owned()
            }
        };
        (inside, host)
    }
}

/// gVisor's caps for `inside` processes, on a host whose task space is
/// `host_max` ([`host_task_max`]). A host pids cgroup counts gVisor's own host
/// tasks (the sentry's threads, the gofer, and on the ptrace platform a stub
/// process per address space with a thread per sentry thread that ran it), never
/// the sandbox's processes: sized for `inside` processes, so that gVisor's own
/// tasks do not end the sandbox before its kernel's cap refuses a fork, but never
/// more than half of the host's task space, so that a flood inside cannot take
/// the host's (pure).
pub fn gvisor_pids(inside: u64, host_max: Option<u64>) -> GvisorPids {
    let wanted = inside
        .saturating_mul(GVISOR_HOST_TASKS_PER_PROCESS)
        .saturating_add(GVISOR_HOST_TASKS_BASE);
    let half = host_max.map(|max| (max / 2).max(GVISOR_HOST_TASKS_BASE));
    match half {
        Some(half) if half < wanted => GvisorPids {
            inside,
            host: half,
            clamped_to: host_max,
        },
        _ => GvisorPids {
            inside,
            host: wanted,
            clamped_to: None,
        },
    }
}

/// What the record's `layers` say of user namespaces on gVisor: refused by the
/// bundle's filter (`vg_backend::gvisor::bundle::seccomp`), which runsc installs on
/// the first process and every process it starts inherits, and, in a persistent
/// sandbox, by the launcher's on each command (`vg_seccomp::gvisor_exec_profile`):
/// runsc 20221219 installs no filter on a process `runsc exec` starts
/// (`runsc/boot/loader.go`) (pure).
pub fn user_namespaces(persistent: bool) -> &'static str {
    if persistent {
        "denied-by-oci-seccomp-and-exec-launcher"
    } else {
        "denied-by-oci-seccomp"
    }
}

/// The host's task space: the lower of `kernel.pid_max` and `kernel.threads-max`
/// (a thread takes a pid too); `None` when neither can be read.
pub fn host_task_max() -> Option<u64> {
    ["/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok()?.trim().parse::<u64>().ok())
        .min()
}

/// Limits whose native mechanism does not hold another backend. The memory
/// watchdog (where no cgroup can be made) cannot see gVisor's memory: an asked cap
/// is refused, the default one recorded as not held.
///
/// The process cap by `RLIMIT_NPROC` (the default cap, or the fallback where no
/// pids cgroup can be made) counts host processes per user namespace: it means
/// nothing for a container engine's processes. A cap the user asked for is
/// refused; the default one is recorded as not enforced. gVisor's cap is its own
/// kernel's ([`gvisor_pids`], decided by `limits::plan`).
pub fn limits(
    backend: Backend,
    asked: Asked,
    plan: &mut crate::limits::Plan,
    enforced: &mut crate::limits::Enforced,
) -> Result<()> {
    if backend == Backend::Native {
        return Ok(());
    }
    let Asked {
        memory: asked_memory,
        pids: asked_pids,
        ptys: asked_ptys,
    } = asked;
    match engine_of(backend) {
        // Terminals come from the sentry's own devpts, not the host's pool.
        None => {
            enforced
                .enforced_by
                .insert("ptys", format!("{backend}'s own terminals"));
        }
        // A container's devpts is its own instance, but the engines mount it with
        // no `max=`: only the host's `kernel.pty.max` holds it. An asked cap is
        // refused rather than recorded as held.
        Some(engine) => {
            if asked_ptys {
                bail!(
                    "--backend {backend}: --ptys needs a capped devpts, which {} does not mount; drop --ptys, or use --backend native",
                    engine.display_name()
                );
            }
            enforced.enforced_by.insert(
                "ptys",
                format!("none ({backend}'s devpts has no cap; the host's kernel.pty.max holds)"),
            );
        }
    }
    // The watchdog sums the resident memory of the sandbox's processes, which does
    // not see the pages of gVisor's memory file: only a cgroup holds gVisor.
    if enforced.watchdog.take().is_some() {
        if asked_memory && !plan.best_effort {
            bail!(
                "--backend {backend}: --memory needs a memory cgroup (none could be made here); run as root or with a delegated cgroup v2 subtree, pass --best-effort-limits to run without the cap, or use --backend native"
            );
        }
        plan.limits.memory = None;
        enforced.enforced_by.insert(
            "memory",
            format!(
                "none (no memory cgroup; the watchdog cannot see the {backend} backend's memory)"
            ),
        );
    }
    // gVisor's kernel holds the cap (`RLIMIT_NPROC` in its bundle).
    if enforced.rlimit_nproc.is_none() || plan.gvisor_pids.is_some() {
        return Ok(());
    }
    // As for memory: with --best-effort-limits an asked cap nothing here can hold is
    // recorded as not held rather than refused (the MCP server's sandboxes ask for
    // the `code-exec` profile's caps).
    if asked_pids && !plan.best_effort {
        bail!(
            "--backend {backend}: --pids needs a pids cgroup here (none could be made); run as root or with a delegated cgroup, drop --pids, pass --best-effort-limits to run without the cap, or use --backend native"
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

/// With a container engine, the engine's cgroups hold memory, cpus and pids: the
/// session makes no cgroup of its own (it would hold only the engine's client).
/// The engine is asked first what it can hold here: a default cap it cannot (a
/// rootless engine on cgroup v1) is recorded as not held, an asked one refused.
pub fn engine_limits(plan: &mut crate::plan::Plan) -> Result<()> {
    let asked_pids = plan.settings.limits.pids.is_some();
    let default_memory = plan.limits.memory_source == crate::limits::MemorySource::Default;
    let Some(container) = &mut plan.container else {
        return Ok(());
    };
    let engine = container.engine;
    // The limits the engine holds and the image's config, asked at once (Docker's
    // over its socket: the image's in a millisecond, the limits kept from the last
    // session with the same daemon, else its `info`, 10-15 ms; Podman's image
    // through its client, tens of milliseconds). Both threads are joined before the
    // sandbox is spawned. The engines' folder is hidden from every sandbox
    // (`mounts::check_engines_hidden`, while planning).
    let image = container.image.clone();
    let cache = crate::home::engines_root().ok();
    let (limits, config) = std::thread::scope(|s| {
        let config = s.spawn(|| vg_backend::engine::image_config(engine, &image));
        (
            vg_backend::engine::limit_support_cached(engine, cache.as_deref()),
            config.join(),
        )
    });
    let limits = limits?;
    let config =
        config.map_err(|_| anyhow::anyhow!("the image check of {image} failed unexpectedly"))??;
    if plan.spec.trace_exec {
        container.record_execs = Some(exec_recording(
            container,
            &config,
            plan.spec.exits,
            plan.spec.persistent,
            plan.spec.tty,
        )?);
    } else if plan.spec.persistent {
        // Only our init serves a persistent container's commands, and it runs only
        // where execs are recorded.
        bail!(
            "--backend {}: a persistent sandbox needs its execs recorded, which this configuration turns off; record execs, or use --backend native",
            engine.backend_name()
        );
    }
    let name = engine.backend_name();
    if !limits.memory && default_memory && container.memory.take().is_some() {
        plan.limits.limits.memory = None;
        plan.limits.enforced_by.insert(
            "memory",
            format!("none ({name} cannot hold a memory limit here)"),
        );
    }
    if !limits.pids && !asked_pids && container.pids.take().is_some() {
        plan.limits.limits.pids = None;
        plan.limits.enforced_by.insert(
            "pids",
            format!("none ({name} cannot hold a pids limit here)"),
        );
    }
    // Whatever is left and cannot be held is refused.
    vg_backend::engine::check_limits(container, limits)?;
    let by = format!("{name} (its cgroups)");
    for (limit, set) in [
        ("memory", container.memory.is_some()),
        ("cpus", container.cpus.is_some()),
        ("pids", container.pids.is_some()),
    ] {
        if set {
            plan.limits.enforced_by.insert(limit, by.clone());
        }
    }
    plan.limits.cgroup = None;
    plan.limits.rlimit_nproc = None;
    Ok(())
}

/// Our init as the container's entrypoint, so that its execs are recorded (see
/// `vg_sandbox::engine_init`): the command the engine would have run (the image's
/// entrypoint and command by Docker's rules), this program and the files it needs,
/// and the private folder where the hand-over socket will be. With `tty`, the init
/// gives the command a terminal of the container's devpts.
fn exec_recording(
    container: &vg_backend::engine::ContainerPlan,
    image: &vg_backend::engine::ImageConfig,
    exits: vg_sandbox::trace::Exits,
    persistent: bool,
    tty: bool,
) -> Result<vg_backend::engine::ExecRecording> {
    use vg_backend::engine;
    let name = container.engine.backend_name();
    // A persistent container runs no command of its own: our init serves those
    // `sandbox exec` starts.
    let command = if persistent {
        Vec::new()
    } else {
        engine::resolve_command(container.entrypoint.as_deref(), &container.argv, image)
            .map_err(|e| anyhow::anyhow!("--backend {name}: {e}"))?
    };
    let files = vg_sandbox::engine_init::host_files().map_err(|e| {
        anyhow::anyhow!(
            "--backend {name}: cannot find this program's own files, which record the container's execs: {e}"
        )
    })?;
    if files.loader.is_some() {
        engine::check_loader_environment(&image.env, &container.env)
            .map_err(|e| anyhow::anyhow!("--backend {name}: {e}"))?;
    }
    let socket = format!(
        "{}/{}",
        engine::INIT_RUN,
        vg_sandbox::engine_init::SOCKET_NAME
    );
    Ok(engine::ExecRecording {
        program: files.program,
        loader: files.loader,
        libraries: files.libraries,
        socket_dir: engine_dir(&container.name).join("init"),
        init_args: match (persistent, tty) {
            (true, _) => vg_sandbox::engine_init::persistent_init_args(
                &socket,
                exits == vg_sandbox::trace::Exits::Trap,
            ),
            (false, true) => vg_sandbox::engine_init::terminal_init_args(
                &socket,
                exits == vg_sandbox::trace::Exits::Trap,
                &command,
            ),
            (false, false) => vg_sandbox::engine_init::init_args(
                &socket,
                exits == vg_sandbox::trace::Exits::Trap,
                &command,
            ),
        },
    })
}

/// A container's private folder on the host (0700): its seccomp profile, its
/// environment file, and the folder of the hand-over socket.
fn engine_dir(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("{name}.files"))
}

/// A started backend's own state, kept until the session ends.
#[derive(Debug, Default)]
pub struct Held {
    /// gVisor's bundle folder, removed when dropped.
    pub bundle: Option<vg_backend::gvisor::Bundle>,
    /// gVisor's trace sink (execs and exits), until the record's tracer takes it.
    pub sink: Option<vg_backend::gvisor::trace::Sink>,
    /// A container engine's run: its private files, and the container, removed
    /// when the session ends (also when its client was killed before `--rm` could).
    pub container: Option<EngineRun>,
    /// The hand-over of the container's exec listener, until the record takes it.
    pub engine_trace: Option<crate::record::EngineTrace>,
    /// A persistent container's command channel, which the record's tracer
    /// receives in the hand-over (`Running::spawner` waits for it).
    pub engine_spawner: Option<crate::record::SpawnerChannel>,
    /// A persistent gVisor sandbox's way in for its commands (`runsc exec`).
    pub gvisor_exec: Option<vg_backend::gvisor::exec::ExecTarget>,
}

impl Held {
    /// The engine's client ended as `end` says: a container it certainly removed
    /// (`vg_backend::engine::removed_with_client`) needs no `rm` after the session.
    pub fn client_ended(&mut self, end: vg_sandbox::Termination) {
        if let Some(run) = &mut self.container {
            run.removed = vg_backend::engine::removed_with_client(run.keep, end);
        }
    }
}

/// A container started through an engine's client.
#[derive(Debug)]
pub struct EngineRun {
    engine: vg_backend::engine::Engine,
    name: String,
    /// Run without `--rm` (kept after its command).
    keep: bool,
    /// Its client said it is gone ([`Held::client_ended`]); until then it may not be.
    removed: bool,
    /// Holds the environment file until the client has read it.
    _prepared: vg_backend::engine::PreparedRun,
    dir: std::path::PathBuf,
}

impl Drop for EngineRun {
    fn drop(&mut self) {
        // `--rm` has removed it when the client saw it end; when the client was
        // killed first (or the session ended without learning how it ended), the
        // container may still run. `rm -f` in the background: it costs a client
        // start (tens of milliseconds of CPU, more for Podman), which the session's
        // end need not wait for; nothing of the record depends on it. Not after a
        // client that removed it: that start would only compete with what runs next.
        if !self.removed {
            let _ = std::process::Command::new(self.engine.program())
                .args(["rm", "-f", &self.name])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Spawns `spec` on `backend` with the given stdio, in `cgroup`.
pub fn spawn(
    backend: Backend,
    container: Option<&vg_backend::engine::ContainerPlan>,
    spec: &SandboxSpec,
    stdio: [RawFd; 3],
    cgroup: Option<&Cgroup>,
    record_execs: bool,
    held: &mut Held,
) -> Result<vg_sandbox::Sandbox> {
    match backend {
        Backend::Native => Ok(vg_sandbox::spawn_in(spec, stdio, cgroup)?),
        Backend::Gvisor => {
            let (bundle, runtime, sink, exec) = gvisor(spec, record_execs)?;
            held.bundle = Some(bundle);
            held.sink = sink;
            held.gvisor_exec = exec;
            Ok(vg_sandbox::runtime::spawn_runtime(&runtime, stdio, cgroup)?)
        }
        Backend::Docker | Backend::Podman => {
            let Some(container) = container else {
                bail!("--backend {backend}: no container was planned");
            };
            let (run, runtime, mut trace) = engine(container, spec)?;
            held.container = Some(run);
            if spec.persistent {
                let Some(trace) = trace.as_mut() else {
                    bail!(
                        "--backend {backend}: a persistent sandbox needs Vectra Guard's init in the container, which runs only where execs are recorded"
                    );
                };
                let (tx, rx) = std::sync::mpsc::sync_channel(1);
                trace.spawner = Some(tx);
                held.engine_spawner = Some(rx);
            }
            held.engine_trace = trace;
            Ok(vg_sandbox::runtime::spawn_runtime(&runtime, stdio, cgroup)?)
        }
    }
}

/// The engine's client command for `container`, with our seccomp rules and the
/// environment written to a private folder first.
fn engine(
    container: &vg_backend::engine::ContainerPlan,
    spec: &SandboxSpec,
) -> Result<(
    EngineRun,
    vg_sandbox::runtime::RuntimeSpec,
    Option<crate::record::EngineTrace>,
)> {
    use std::os::unix::fs::DirBuilderExt;
    use vg_backend::engine;
    let (network, persistent) = (spec.network, spec.persistent);
    let program = engine::client_path(container.engine).ok_or_else(|| {
        anyhow::anyhow!(
            "--backend {}: the {} client is not installed; install it (Debian: `apt-get install {}`) or use --backend native",
            container.engine.backend_name(),
            container.engine.display_name(),
            match container.engine {
                engine::Engine::Docker => "docker.io",
                engine::Engine::Podman => "podman",
            }
        )
    })?;
    // The engine was probed, the image found and the limits checked while starting
    // (`engine_limits`).
    let dir = engine_dir(&container.name);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    // The hand-over socket's folder: bound read-only into the container, so open to
    // the container's user (any uid on the host); its parent keeps everyone else on
    // the host out. It listens before the client starts.
    let handshake = match &container.record_execs {
        Some(rec) => std::fs::DirBuilder::new()
            .mode(0o755)
            .create(&rec.socket_dir)
            .and_then(|()| {
                std::fs::set_permissions(
                    &rec.socket_dir,
                    std::os::unix::fs::PermissionsExt::from_mode(0o755),
                )
            })
            .and_then(|()| vg_sandbox::engine_init::Handshake::bind(&rec.socket_dir))
            .map(|handshake| {
                // Our init serves the persistent sandbox's commands (its arguments
                // are `persistent_init_args`, see `exec_recording`), or gives the
                // command a terminal (`terminal_init_args`).
                match (persistent, spec.tty) {
                    (true, _) => handshake.expect_spawner(),
                    (false, true) => handshake.expect_terminal(),
                    (false, false) => handshake,
                }
            })
            .map(Some)
            .map_err(|e| {
                anyhow::anyhow!(
                    "cannot make the socket that receives the container's exec listener in {}: {e}",
                    rec.socket_dir.display()
                )
            })?,
        None => None,
    };
    let tun = match network {
        SandboxNetwork::Tun(tun) => Some(tun),
        SandboxNetwork::Loopback | SandboxNetwork::Host => None,
    };
    // Checked while planning (`check`): without the init nothing would open the
    // command's terminal; the engine's own would bypass the record.
    if spec.tty && handshake.is_none() {
        bail!(
            "--backend {}: a terminal needs Vectra Guard's init in the container (a recorded run)",
            container.engine.backend_name()
        );
    }
    // Checked while planning (`check`); without the init nothing would make the
    // interface, and the container would have no network at all.
    if tun.is_some() && handshake.is_none() {
        bail!(
            "--backend {}: the mediated network needs Vectra Guard's init in the container (a recorded run)",
            container.engine.backend_name()
        );
    }
    let profile = dir.join("seccomp.json");
    let rules = vg_seccomp::default_profile(vg_seccomp::ProfileOptions::default());
    let json = engine::seccomp_profile(&rules)?;
    std::fs::write(&profile, serde_json::to_vec(&json)?)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", profile.display()))?;
    let mut container = container.clone();
    container.seccomp_profile = Some(profile);
    let prepared = engine::prepare_run(&container, &dir)?;
    let args: Vec<String> = prepared
        .command
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut argv = vec![program.display().to_string()];
    argv.extend(args);
    let client = program.display().to_string();
    let name = container.name.clone();
    let runtime = vg_sandbox::runtime::RuntimeSpec {
        argv,
        // The client's own environment (DOCKER_HOST, XDG_RUNTIME_DIR…); the
        // container's is the environment file.
        env: std::env::vars().collect(),
        cwd: dir.clone(),
        identity: None,
        enforced: format!(
            "backend={}
runtime={client}
image={}
capabilities=
no_new_privs=1
seccomp_mode={}
read_only_root=1
user={}:{}
network={}
exec_records={}
init={}
container={}
{}{}",
            container.engine.backend_name(),
            container.image,
            // Our filter, stacked on the engine's profile by our init.
            if handshake.is_some() {
                "engine-profile+filter+notify"
            } else {
                "engine-profile"
            },
            container.user.0,
            container.user.1,
            match (container.network, tun.is_some()) {
                // Said as the native sandbox's: the interface the mediator serves.
                (_, true) => format!("tun\nnetwork_attach={}", vg_sandbox::engine_net::ATTACH),
                (engine::EngineNetwork::None, false) => "none".to_owned(),
                (engine::EngineNetwork::Host, false) => "host".to_owned(),
            },
            // What holds, and only that: no exec runs unless the init's listener
            // was handed over (it waits for our go), and an exec the tracer cannot
            // read is refused.
            if handshake.is_some() {
                "seccomp-notify"
            } else {
                "none"
            },
            if handshake.is_some() {
                "vectraguard"
            } else if container.init {
                "engine"
            } else {
                "none"
            },
            // Rootless Podman runs the container's processes as subordinate uids,
            // whose descriptors we cannot read: an exec of an open descriptor
            // (`fexecve`, `execveat(fd, "")`, `/proc/self/fd/N`) is refused there.
            // Its name, to find it with the engine's own tools while it runs.
            container.name,
            if handshake.is_some() && rootless(container.engine) {
                "exec_records_limits=descriptor-execs-refused\n"
            } else {
                ""
            },
            // Where the terminal comes from: never the engine's own (`--tty`).
            if spec.tty {
                "terminal=container-devpts\n"
            } else {
                ""
            },
        ),
        signal: vec![
            client.clone(),
            "kill".into(),
            "--signal".into(),
            vg_sandbox::runtime::SIGNAL_PLACEHOLDER.into(),
            name.clone(),
        ],
        terminate_all: vec![
            client,
            "kill".into(),
            "--signal".into(),
            "15".into(),
            name.clone(),
        ],
        command_pid: None,
        tun: None,
        private_network: false,
        console: None,
    };
    let trace = handshake.map(|handshake| {
        let program = program.clone();
        let name = name.clone();
        crate::record::EngineTrace {
            handshake,
            expected_uid: expected_peer_uid(container.engine, container.user.0),
            tun,
            spawner: None,
            end_container: Box::new(move || {
                let _ = std::process::Command::new(program)
                    .args(["rm", "-f", &name])
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status();
            }),
        }
    });
    Ok((
        EngineRun {
            engine: container.engine,
            name,
            keep: container.keep,
            removed: false,
            _prepared: prepared,
            dir,
        },
        runtime,
        trace,
    ))
}

/// The uid the container's init has on the host, where it is known: the
/// container's user, except for rootless Podman (run by a user other than root),
/// which maps it to one of that user's subordinate uids.
fn expected_peer_uid(engine: vg_backend::engine::Engine, user: u32) -> Option<u32> {
    (!rootless(engine)).then_some(user)
}

/// Whether the engine runs the container's processes as subordinate uids of ours:
/// Podman run by a user other than root. (Docker's daemon is root's; a rootless
/// Docker daemon reached through `DOCKER_HOST` is not told apart here, and its
/// hand-over is refused by the uid check, failing closed.)
fn rootless(engine: vg_backend::engine::Engine) -> bool {
    engine == vg_backend::engine::Engine::Podman && !crate::host::is_root()
}

/// What [`gvisor`] makes: the bundle, runsc's command, the trace sink of a
/// recorded run and, for a persistent sandbox, the way its commands start.
type GvisorStart = (
    vg_backend::gvisor::Bundle,
    vg_sandbox::runtime::RuntimeSpec,
    Option<vg_backend::gvisor::trace::Sink>,
    Option<vg_backend::gvisor::exec::ExecTarget>,
);

/// This program run inside gVisor with `args`: through the host's loader with its
/// files bound read-only under `/.vectraguard/` (an image has none of them), as a
/// container's recording init is. For a persistent sandbox's first process
/// (`vg_backend::gvisor::exec`) and a command's terminal
/// (`vg_sandbox::gvisor_terminal`).
fn gvisor_own_program(args: &[String], image: bool) -> Result<OwnProgram> {
    use vg_backend::engine::{
        INIT_DIR, INIT_DIR_SIZE, INIT_LIB, INIT_PROGRAM, LOADER_PRELOAD_FILE,
    };
    let files = vg_sandbox::engine_init::host_files().map_err(|e| {
        anyhow::anyhow!(
            "--backend gvisor: cannot find this program's own files, which a persistent sandbox runs as its first process: {e}"
        )
    })?;
    let bind = |src: &std::path::Path, dst: std::path::PathBuf| vg_policy::MountOp::Bind {
        src: src.to_owned(),
        dst,
        read_only: true,
        kind: vg_policy::view::NodeKind::File,
        dev: false,
    };
    let lib = |host: &std::path::Path| -> Result<std::path::PathBuf> {
        host.file_name()
            .map(|name| std::path::Path::new(INIT_LIB).join(name))
            .ok_or_else(|| anyhow::anyhow!("--backend gvisor: {} has no file name", host.display()))
    };
    let mut binds = Vec::new();
    // An image's files must not reach our program through the loader, as in a
    // container (`vg_backend::engine::ExecRecording`): its `/etc/ld.so.preload`,
    // which the loader reads even for a program it is asked to start, and what it
    // has under our folder, where the loader looks before our libraries
    // (`glibc-hwcaps/…`). Its code would run as our first process: the relay of a
    // `-t` command, or a persistent sandbox's keeper and its user of its own (red
    // team, session 16). Without an image the root is the host's.
    if image {
        binds.push(vg_policy::MountOp::Tmpfs {
            dst: INIT_DIR.into(),
            size: INIT_DIR_SIZE,
            mode: 0o555,
            owner: None,
        });
    }
    binds.push(bind(&files.program, INIT_PROGRAM.into()));
    let mut argv = Vec::new();
    if let Some(loader) = &files.loader {
        let ld = lib(loader)?;
        if image {
            binds.push(bind(
                std::path::Path::new("/dev/null"),
                LOADER_PRELOAD_FILE.into(),
            ));
        }
        binds.push(bind(loader, ld.clone()));
        for library in &files.libraries {
            binds.push(bind(library, lib(library)?));
        }
        argv.push(ld.display().to_string());
        argv.extend(["--inhibit-cache", "--library-path", INIT_LIB].map(String::from));
    }
    argv.push(INIT_PROGRAM.to_owned());
    argv.extend(args.iter().cloned());
    Ok(OwnProgram { argv, binds })
}

/// This program inside gVisor: its command line and the read-only binds of its
/// files.
struct OwnProgram {
    argv: Vec<String>,
    binds: Vec<vg_policy::MountOp>,
}

/// gVisor's bundle and runsc's command for `spec`.
fn gvisor(spec: &SandboxSpec, record_execs: bool) -> Result<GvisorStart> {
    use vg_backend::gvisor;
    let runsc = gvisor::find_runsc(std::env::var_os("PATH").as_deref())?;
    // runsc runs rootless as the sandbox's host user, whose files the gofer shows
    // as owned by uid 0 (that user is root in runsc's user namespace; everyone
    // else's files show as nobody's). So the command runs as uid 0 of gVisor's
    // kernel, with every capability set empty, the bounding set too (no exec
    // gives any back) and no_new_privs: it owns what the host user owns, and
    // nothing more. An image's user is kept as the image says.
    let (uid, gid) = spec.inside.unwrap_or((0, 0));
    let mut process = gvisor::Process {
        argv: spec.argv.clone(),
        env: spec.env.clone(),
        cwd: spec.workdir.clone(),
        uid,
        gid,
        hostname: spec.hostname.clone(),
        terminal: spec.tty,
        // gVisor's kernel holds the process cap (`limits::plan`).
        nproc: spec.rlimit_nproc,
        capabilities: &[],
    };
    // A persistent sandbox's commands come later, through `runsc exec`, and their
    // exact ends from the trace points: its first process only keeps it.
    let mut view = std::borrow::Cow::Borrowed(&spec.view);
    let image = matches!(
        spec.view.ops.first(),
        Some(vg_policy::MountOp::ImageRoot { .. })
    );
    let mut pause_user = None;
    let mut terminal_relay_user = None;
    let mut launcher = Vec::new();
    if spec.persistent {
        if !record_execs {
            bail!(
                "--backend gvisor: a persistent sandbox needs its execs recorded (its commands' ends come from gVisor's trace points); record execs, or use --backend native"
            );
        }
        let pause = gvisor_own_program(&[vg_backend::gvisor::exec::PAUSE_MODE.to_owned()], image)?;
        let user = vg_backend::gvisor::exec::pause_identity((uid, gid));
        // The same program, without the mode, launches each command.
        launcher = pause.argv[..pause.argv.len().saturating_sub(1)].to_vec();
        process.argv = pause.argv;
        process.env = Vec::new();
        process.cwd = "/".into();
        (process.uid, process.gid) = user;
        process.terminal = false;
        view.to_mut().ops.extend(pause.binds);
        pause_user = Some(user);
    } else if spec.tty {
        // runsc's terminal is a host one that programs inside do not take for
        // theirs: the command gets one of gVisor's devpts from our relay.
        // It starts as uid 0 with the capabilities to give the command its identity
        // and itself one of its own, which the command can neither signal nor read
        // (`vg_sandbox::gvisor_terminal`, "Who is who").
        let relay_user = vg_backend::gvisor::exec::pause_identity((uid, gid));
        let mut args = vg_sandbox::gvisor_terminal::relay_args((uid, gid), relay_user).to_vec();
        args.extend(spec.argv.iter().cloned());
        let relay = gvisor_own_program(&args, image)?;
        process.argv = relay.argv;
        (process.uid, process.gid) = (0, 0);
        process.capabilities = &vg_sandbox::gvisor_terminal::RELAY_CAPABILITIES;
        view.to_mut().ops.extend(relay.binds);
        terminal_relay_user = Some(relay_user);
    }
    // Started as root, runsc runs as the identity the native sandbox would take:
    // neither the sentry nor its file proxy is ever root on the host.
    let identity = crate::host::is_root().then_some((spec.identity.uid, spec.identity.gid));
    // Unpredictable: another user cannot make the folder's name first (a refused
    // start).
    let salt = gvisor::random_hex().map_err(|e| {
        anyhow::anyhow!("cannot read /dev/urandom for the gVisor bundle's name: {e}")
    })?;
    let id = format!("vg-{}-{}-{salt}", std::process::id(), unique());
    // The mediated network: runsc's host-network passthrough in the keeper's own
    // network namespace, whose only way out is the TUN interface our mediator serves
    // (`vg_sandbox::runtime`).
    let network = match spec.network {
        SandboxNetwork::Loopback => gvisor::Network::None,
        SandboxNetwork::Host => gvisor::Network::Host,
        SandboxNetwork::Tun(tun) => gvisor::Network::Mediated(tun),
    };
    // What a killed `vectraguard` left (a bundle is removed by its maker's end).
    gvisor::sweep_stale(&std::env::temp_dir());
    let bundle = gvisor::Bundle::write(
        &std::env::temp_dir(),
        &id,
        &process,
        &view,
        identity,
        network,
    )?;
    let enforced = format!(
        "backend=gvisor\nruntime={}\nplatform=ptrace\nnetwork={}\n{}capabilities=\nno_new_privs=1\nuser={uid}:{gid}\nhost_user={}\nviolations={VIOLATIONS}\npids={}\nuser_namespaces={}\n",
        runsc.display(),
        network.name(),
        if matches!(network, gvisor::Network::Mediated(_)) {
            // Said in the record: the sentry's sockets are host sockets, in a
            // namespace whose only way out is the TUN interface.
            "gvisor_netstack=host-in-private-namespace\n"
        } else {
            ""
        },
        identity.map_or_else(|| "self".to_owned(), |(u, _)| u.to_string()),
        spec.rlimit_nproc
            .map_or_else(|| "none".to_owned(), |n| format!("gvisor-rlimit-nproc:{n}")),
        user_namespaces(spec.persistent),
    );
    // Said in the record: how the commands get in, and who keeps the sandbox.
    let enforced = match pause_user {
        Some((puid, pgid)) => format!(
            "{enforced}persistent_exec=runsc-exec\nexec_launcher=vectraguard\nexec_no_new_privs=1\nexec_seccomp=io-signals,exit-signals,ptrace\nfirst_process_user={puid}:{pgid}\n"
        ),
        None => enforced,
    };
    let enforced = match terminal_relay_user {
        Some((ruid, rgid)) => format!("{enforced}terminal_relay_user={ruid}:{rgid}\n"),
        None => enforced,
    };
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
    let mut runtime = bundle.runtime(&runsc, identity, sink.is_some(), enforced);
    // runsc's own debug log, for diagnosing the backend (a folder the user chooses).
    if let Some(dir) = std::env::var_os("VECTRAGUARD_GVISOR_DEBUG_LOG") {
        let dir = std::path::PathBuf::from(dir);
        runtime.argv.insert(1, "--debug".into());
        runtime
            .argv
            .insert(2, format!("--debug-log={}/", dir.display()));
    }
    let exec = spec
        .persistent
        .then(|| bundle.exec_target(&runsc, identity, (uid, gid), launcher));
    Ok((bundle, runtime, sink, exec))
}

/// What the record says of refused accesses on gVisor: its kernel refuses writes to
/// read-only places and the system calls it does not implement itself, and reports
/// none of them, so the record has no `violation` events, and says so rather than
/// look like a run that was never refused anything.
const VIOLATIONS: &str = "not-recorded";

/// A number unique within this process.
/// A new container's name, which also names its private folder in the shared temporary
/// folder ([`engine_dir`]): this process and a count, and a random part, so that no
/// other user of the machine can guess it and make that folder first (the run would
/// then fail: a denial of service on every container session).
fn container_name() -> Result<String> {
    let salt = vg_backend::gvisor::random_hex()
        .map_err(|e| anyhow::anyhow!("cannot read /dev/urandom to name the container: {e}"))?;
    Ok(format!(
        "vectraguard-{}-{}-{salt}",
        std::process::id(),
        unique()
    ))
}

fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(network: SandboxNetwork) -> SandboxSpec {
        SandboxSpec {
            hostname: "vg".into(),
            argv: vec!["true".into()],
            env: Vec::new(),
            workdir: "/".into(),
            view: vg_policy::FsView { ops: Vec::new() },
            identity: vg_policy::Identity {
                uid: 1000,
                gid: 1000,
                name: "u".into(),
                home: "/home/u".into(),
            },
            inside: None,
            trace_exec: false,
            exec_by_bpf: false,
            exits: vg_sandbox::trace::Exits::Trap,
            trace_files: false,
            trace_file_changes: false,
            report_refusals: false,
            rlimit_nproc: None,
            watch_full: Vec::new(),
            tty: false,
            network,
            persistent: false,
        }
    }

    /// Red team (session 15): another local user made the private folders the next
    /// containers of this process would have (`/tmp/vectraguard-PID-N.files`, the pid
    /// and a count), so every container session failed with "File exists". The name
    /// has a random part: the folders made in advance are not the container's.
    #[test]
    fn a_container_s_private_folder_cannot_be_claimed_in_advance() {
        let claimed: Vec<_> = (0..unique() + 64)
            .map(|n| engine_dir(&format!("vectraguard-{}-{n}", std::process::id())))
            .filter(|dir| std::fs::create_dir(dir).is_ok())
            .collect();
        let names: Vec<String> = (0..8).map(|_| container_name().unwrap()).collect();
        for dir in &claimed {
            let _ = std::fs::remove_dir(dir);
        }
        for name in &names {
            assert!(!claimed.contains(&engine_dir(name)), "{name}");
            assert!(
                name.starts_with(&format!("vectraguard-{}-", std::process::id())),
                "{name}"
            );
        }
    }

    #[test]
    fn a_container_on_the_mediated_network_gets_the_generated_resolv_conf_only() {
        use vg_backend::engine::{ContainerPlan, Engine, EngineMount};
        let generated: Vec<vg_policy::MountOp> = ["resolv.conf", "hosts", "hostname"]
            .iter()
            .map(|name| vg_policy::MountOp::Bind {
                src: format!("/tmp/etc/{name}").into(),
                dst: format!("/etc/{name}").into(),
                read_only: true,
                kind: vg_policy::view::NodeKind::File,
                dev: false,
            })
            .collect();
        let tun = SandboxNetwork::Tun(vg_sandbox::TunConfig {
            name: "tun0",
            address: std::net::Ipv4Addr::new(198, 18, 0, 2),
            netmask: std::net::Ipv4Addr::new(255, 255, 255, 0),
            gateway: std::net::Ipv4Addr::new(198, 18, 0, 1),
            mtu: 1500,
        });
        let mut plan = ContainerPlan::new(Engine::Docker, "img", vec!["true".into()], "c");
        engine_etc(&mut plan, tun, &generated);
        assert_eq!(
            plan.mounts,
            [EngineMount::Bind {
                src: "/tmp/etc/resolv.conf".into(),
                dst: "/etc/resolv.conf".into(),
                read_only: true,
            }]
        );
        // Other networks keep the engine's own.
        let mut plan = ContainerPlan::new(Engine::Podman, "img", vec!["true".into()], "c");
        engine_etc(&mut plan, SandboxNetwork::Loopback, &generated);
        assert!(plan.mounts.is_empty());
    }

    #[test]
    fn an_engine_s_uncapped_devpts_is_recorded_as_such_and_an_asked_cap_refused() {
        let limits = |backend, ptys| {
            let mut plan =
                crate::limits::plan(&vg_policy::Limits::default(), "t", true, false).unwrap();
            let mut enforced = crate::limits::Enforced {
                cgroup: None,
                rlimit_nproc: None,
                watchdog: None,
                enforced_by: std::collections::BTreeMap::new(),
            };
            let asked = Asked {
                ptys,
                ..Asked::default()
            };
            limits(backend, asked, &mut plan, &mut enforced).map(|()| enforced.enforced_by)
        };
        for backend in [Backend::Docker, Backend::Podman] {
            let by = limits(backend, false).unwrap();
            assert!(by["ptys"].starts_with("none ("), "{backend}: {by:?}");
            let e = limits(backend, true).unwrap_err().to_string();
            assert!(
                e.contains("--ptys") && e.contains("--backend native"),
                "{e}"
            );
        }
        // gVisor's terminals are its sentry's own.
        let by = limits(Backend::Gvisor, true).unwrap();
        assert_eq!(by["ptys"], "gvisor's own terminals");
    }

    #[test]
    fn other_backends_refuse_what_only_the_native_sandbox_has_naming_the_fix() {
        let none = spec(SandboxNetwork::Loopback);
        for backend in Backend::ALL {
            assert!(
                check(backend, &none, false, false, false, false).is_ok(),
                "{backend}"
            );
        }
        let refused = |backend, spec: &SandboxSpec, learn, gate| {
            check(backend, spec, learn, gate, false, false)
                .unwrap_err()
                .to_string()
        };
        let e = refused(Backend::Gvisor, &none, false, true);
        assert!(
            e.starts_with("--backend gvisor: holding execs") && e.contains("--ask never"),
            "{e}"
        );
        // A recorded container's execs reach the native tracer, which can hold them.
        for engine in [Backend::Docker, Backend::Podman] {
            assert!(
                check(engine, &none, false, true, false, false).is_ok(),
                "{engine}"
            );
        }
        // Learning is named first: it is what opened the network.
        let tun = spec(SandboxNetwork::Tun(vg_sandbox::TunConfig {
            name: "tun0",
            address: std::net::Ipv4Addr::new(10, 0, 0, 2),
            netmask: std::net::Ipv4Addr::new(255, 255, 255, 0),
            gateway: std::net::Ipv4Addr::new(10, 0, 0, 1),
            mtu: 1500,
        }));
        assert!(refused(Backend::Docker, &tun, true, false).contains("learning mode"));
        // The engines attach it through the recording init: refused without a record
        // (no exec records), run with one.
        for engine in [Backend::Docker, Backend::Podman] {
            let e = refused(engine, &tun, false, false);
            assert!(
                e.contains("the mediated network") && e.contains("remove --no-record"),
                "{e}"
            );
            let mut recorded = tun.clone();
            recorded.trace_exec = true;
            assert!(check(engine, &recorded, false, false, false, false).is_ok());
        }
        // Without a record, gVisor's keeper still attaches it.
        assert!(check(Backend::Gvisor, &tun, false, false, false, false).is_ok());
        // gVisor runs it behind the same mediator; learning is still refused there.
        assert!(check(Backend::Gvisor, &tun, false, false, false, false).is_ok());
        assert!(refused(Backend::Gvisor, &tun, true, false).contains("learning mode"));
        // A terminal: runsc's console socket on gVisor; on the engines our recording
        // init's, so only where it runs.
        let mut tty = spec(SandboxNetwork::Loopback);
        tty.tty = true;
        assert!(check(Backend::Gvisor, &tty, false, false, false, false).is_ok());
        for engine in [Backend::Docker, Backend::Podman] {
            let e = refused(engine, &tty, false, false);
            assert!(
                e.contains("a terminal") && e.contains("without exec records"),
                "{e}"
            );
            let mut recorded = tty.clone();
            recorded.trace_exec = true;
            assert!(check(engine, &recorded, false, false, false, false).is_ok());
        }
        // HTTPS inspection: the same inspector behind gVisor's mediator; not on the
        // engines.
        assert!(check(Backend::Gvisor, &tun, false, false, true, false).is_ok());
        assert!(
            check(Backend::Podman, &none, false, false, true, false)
                .unwrap_err()
                .to_string()
                .contains("HTTPS inspection")
        );
        // The host's network: refused on gVisor only (rootless runsc has none).
        let host = spec(SandboxNetwork::Host);
        assert!(refused(Backend::Gvisor, &host, false, false).contains("--network host"));
        assert!(check(Backend::Docker, &host, false, false, false, false).is_ok());
        assert!(check(Backend::Native, &tun, true, true, true, true).is_ok());
    }

    /// gVisor's host cap leaves room for its own tasks per process inside, and
    /// never more than half of the host's task space.
    #[test]
    fn gvisor_s_host_cap_is_sized_for_its_own_tasks_and_bounded_by_the_host() {
        assert_eq!(
            gvisor_pids(64, Some(4_194_304)),
            GvisorPids {
                inside: 64,
                host: 1024 + 64 * 128,
                clamped_to: None
            }
        );
        assert_eq!(gvisor_pids(4096, None).host, 1024 + 4096 * 128);
        // This machine's kind: 32768 pids; the default cap's want is 525312.
        assert_eq!(
            gvisor_pids(4096, Some(32_768)),
            GvisorPids {
                inside: 4096,
                host: 16_384,
                clamped_to: Some(32_768)
            }
        );
        // A tiny task space still leaves gVisor its base.
        assert_eq!(gvisor_pids(1, Some(100)).host, 1024);
        assert_eq!(gvisor_pids(u64::MAX, None).host, u64::MAX);
        let (inside, host) = gvisor_pids(64, None).enforced_by(Some("cgroup-v1"));
        assert_eq!(inside, "gvisor-rlimit-nproc (64 tasks inside)");
        assert!(host.starts_with("cgroup-v1 (9216 host tasks"), "{host}");
        let (_, host) = gvisor_pids(4096, Some(32_768)).enforced_by(Some("cgroup-v2"));
        assert!(host.contains("half of this host's 32768"), "{host}");
        let (_, host) = gvisor_pids(64, None).enforced_by(None);
        assert!(host.starts_with("none (no pids cgroup"), "{host}");
    }
}
