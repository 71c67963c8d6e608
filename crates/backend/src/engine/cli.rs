//! What runs the engine's client: probing it, checking an image, preparing a run,
//! stopping, removing and inspecting a container. Each call has a time-out, so a
//! hung daemon is an error naming it rather than a hung session.

use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Engine;
use super::plan::{ContainerPlan, ImageConfig, PlanError, env_file_contents, run_args};

/// How long a query of the engine (`info`, `image inspect`, `rm`) may take.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(30);

/// What failed, and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{engine} is not installed (no `{program}` on PATH): install it (Debian: `apt-get install {package}`), or choose another backend", program = engine.program(), package = package(*engine))]
    NotInstalled { engine: Engine },
    #[error(
        "{engine} is installed but its daemon is not reachable: start it (`systemctl start docker`, or `dockerd &` as root) ({detail})"
    )]
    NotRunning { engine: Engine, detail: String },
    #[error(
        "{engine} refused access to its daemon: add the user to the `docker` group (`usermod -aG docker USER`, then log in again), or run as root ({detail})"
    )]
    PermissionDenied { engine: Engine, detail: String },
    #[error("the image {image} is not in {engine}'s image store: `{program} pull {image}`, or `{program} load -i FILE` for an archive, then run again", program = engine.program())]
    ImageMissing { engine: Engine, image: String },
    #[error("`{program} {what}` failed ({status}): {stderr}", program = engine.program())]
    Failed {
        engine: Engine,
        what: String,
        status: ExitStatus,
        stderr: String,
    },
    #[error("`{program} {what}` did not answer within {after:?}: is the {engine} daemon hung?", program = engine.program())]
    TimedOut {
        engine: Engine,
        what: String,
        after: Duration,
    },
    #[error("cannot {what} for {engine}: {source}")]
    Io {
        engine: Engine,
        what: String,
        source: io::Error,
    },
    #[error("`{program} {what}` printed what we cannot read: {detail}", program = engine.program())]
    Parse {
        engine: Engine,
        what: String,
        detail: String,
    },
    #[error("the container plan for {engine}: {source}")]
    Plan { engine: Engine, source: PlanError },
}

const fn package(engine: Engine) -> &'static str {
    match engine {
        Engine::Docker => "docker.io",
        Engine::Podman => "podman",
    }
}

/// What [`probe`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineInfo {
    pub engine: Engine,
    /// The server's version (Docker's daemon; Podman's own).
    pub server_version: String,
    /// The engine runs without root (its containers live in a user namespace).
    pub rootless: bool,
    /// The OCI runtime it uses by default (`runc`, `crun`, ...).
    pub default_runtime: String,
    /// Which resource limits its cgroups can hold.
    pub limits: LimitSupport,
}

/// Which limits an engine can enforce on this host. Docker ignores a limit its
/// kernel lacks, with a warning on the client's stderr (the command's stderr to
/// us): [`check_limits`] refuses such a plan instead.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitSupport {
    pub memory: bool,
    /// Swap accounting, which `--memory-swap` needs.
    pub swap: bool,
    pub pids: bool,
    pub cpus: bool,
}

/// Refuses a plan asking for a limit the engine cannot hold here (pure).
pub fn check_limits(plan: &ContainerPlan, l: LimitSupport) -> Result<(), PlanError> {
    let asked = [
        ("memory limit", plan.memory.is_some(), l.memory),
        (
            "swap limit (part of the memory limit)",
            plan.memory.is_some(),
            l.swap,
        ),
        ("process limit", plan.pids.is_some(), l.pids),
        ("CPU limit", plan.cpus.is_some(), l.cpus),
    ];
    match asked
        .into_iter()
        .find(|(_, wanted, held)| *wanted && !*held)
    {
        Some((what, ..)) => Err(PlanError::Unenforceable {
            what,
            engine: plan.engine,
        }),
        None => Ok(()),
    }
}

/// The output of one client call.
struct Output {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: String,
}

fn reader(mut from: impl Read + Send + 'static) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        // A read error ends the output; the exit status still tells what happened.
        let _ = from.read_to_end(&mut buf);
        buf
    })
}

/// Runs `ENGINE args...` with no stdin, waiting at most `timeout`.
fn call(engine: Engine, args: &[&str], timeout: Duration) -> Result<Output, EngineError> {
    let what = args.join(" ");
    let mut child = match Command::new(engine.program())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(EngineError::NotInstalled { engine });
        }
        Err(source) => {
            return Err(EngineError::Io {
                engine,
                what: format!("run `{} {what}`", engine.program()),
                source,
            });
        }
    };
    let out = child.stdout.take().map(reader);
    let err = child.stderr.take().map(reader);
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                // Killing and reaping our own child; its readers end with its pipes.
                let _ = child.kill();
                let _ = child.wait();
                return Err(EngineError::TimedOut {
                    engine,
                    what,
                    after: timeout,
                });
            }
            Err(source) => {
                return Err(EngineError::Io {
                    engine,
                    what: format!("wait for `{} {what}`", engine.program()),
                    source,
                });
            }
        }
    };
    let join =
        |h: Option<thread::JoinHandle<Vec<u8>>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
    let stdout = join(out);
    let stderr = String::from_utf8_lossy(&join(err)).trim().to_owned();
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}

/// The failure of a call that had to succeed, told apart by its message: no
/// daemon, no permission, or anything else (with the engine's own words).
fn failure(engine: Engine, what: &[&str], out: Output) -> EngineError {
    let lower = out.stderr.to_lowercase();
    if engine == Engine::Docker && lower.contains("permission denied") {
        EngineError::PermissionDenied {
            engine,
            detail: out.stderr,
        }
    } else if engine == Engine::Docker
        && (lower.contains("cannot connect to the docker daemon")
            || lower.contains("is the docker daemon running"))
    {
        EngineError::NotRunning {
            engine,
            detail: out.stderr,
        }
    } else {
        EngineError::Failed {
            engine,
            what: what.join(" "),
            status: out.status,
            stderr: out.stderr,
        }
    }
}

fn json_of(engine: Engine, what: &[&str], stdout: &[u8]) -> Result<Value, EngineError> {
    serde_json::from_slice(stdout).map_err(|e| EngineError::Parse {
        engine,
        what: what.join(" "),
        detail: e.to_string(),
    })
}

/// Whether the engine can run containers: its client is installed, its daemon
/// (Docker) answers, and what it is (version, rootless, default runtime).
pub fn probe(engine: Engine) -> Result<EngineInfo, EngineError> {
    if let Some(info) = docker_socket(engine)
        .and_then(|socket| super::api::info(&socket, QUERY_TIMEOUT))
        .and_then(|info| parse_info(engine, &info))
    {
        return Ok(info);
    }
    let args = ["info", "--format", "{{json .}}"];
    let out = call(engine, &args, QUERY_TIMEOUT)?;
    if !out.status.success() {
        return Err(failure(engine, &args, out));
    }
    let info = json_of(engine, &args, &out.stdout)?;
    let mut parsed = parse_info(engine, &info).ok_or_else(|| EngineError::Parse {
        engine,
        what: args.join(" "),
        detail: "no server version in its answer".into(),
    })?;
    // Podman does not report swap accounting: on cgroup v1 it is the memsw files
    // (cgroup v2 always has it with the memory controller).
    if engine == Engine::Podman && info["host"]["cgroupVersion"] == "v1" {
        parsed.limits.swap &=
            Path::new("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes").exists();
    }
    Ok(parsed)
}

/// Which limits the engine can hold for a run: what [`probe`] says, except for
/// Podman run by root on this host, whose answer is the host's cgroup controllers
/// (its cgroups are made by root from the same hierarchy), read directly: `podman
/// info` takes about half a second, most of it asking dpkg for the versions of
/// conmon, runc and slirp4netns, which a run does not need.
pub fn limit_support(engine: Engine) -> Result<LimitSupport, EngineError> {
    let remote = ["CONTAINER_HOST", "CONTAINER_CONNECTION"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()));
    // Podman is rootless for any other user: then only its own answer will do.
    let root = vg_sandbox::real_ids().0 == 0;
    if engine == Engine::Podman
        && root
        && !remote
        && client_path(engine).is_some()
        && let Some(limits) = host_cgroup_limits(Path::new("/sys/fs/cgroup"))
    {
        return Ok(limits);
    }
    Ok(probe(engine)?.limits)
}

/// [`limit_support`], with Docker's answer kept in `cache` (a folder of the user's,
/// see [`super::api::LimitsCache`]) for the daemon that gave it: a session with the
/// same daemon reads it there instead of asking `info` again. Asked (and kept)
/// again once another process listens on the socket, after a reboot, or when the
/// daemon cannot be told apart (not visible in this pid namespace); another
/// engine, or no cache, is [`limit_support`].
pub fn limit_support_cached(
    engine: Engine,
    cache: Option<&Path>,
) -> Result<LimitSupport, EngineError> {
    let cached = cache
        .zip(docker_socket(engine))
        .and_then(|(dir, socket)| Some((super::api::LimitsCache::open(dir)?, socket)))
        .and_then(|(cache, socket)| Some((cache, super::api::DaemonId::of(&socket)?, socket)));
    let Some((cache, daemon, socket)) = cached else {
        return limit_support(engine);
    };
    if let Some(limits) = cache.get(&daemon) {
        return Ok(limits);
    }
    let limits = limit_support(engine)?;
    // Kept only when the daemon that answered is the one asked about.
    if super::api::DaemonId::of(&socket).as_ref() == Some(&daemon) {
        cache.put(&daemon, limits);
    }
    Ok(limits)
}

/// The limits root's cgroups can hold on this host, from the cgroup file system
/// mounted at `root`: cgroup v2's root controllers, or v1's hierarchies (a hybrid
/// layout's empty v2 hierarchy holds nothing, as Podman reports it). `None` when
/// neither can be read.
fn host_cgroup_limits(root: &Path) -> Option<LimitSupport> {
    if let Ok(list) = fs::read_to_string(root.join("cgroup.controllers")) {
        let has = |c: &str| list.split_whitespace().any(|x| x == c);
        return Some(LimitSupport {
            memory: has("memory"),
            swap: has("memory"),
            pids: has("pids"),
            cpus: has("cpu"),
        });
    }
    // A v1 controller is there when its hierarchy is mounted (the root group has
    // no `pids.max`); swap accounting when the memory root has the memsw files.
    let file = |f: &str| root.join(f).is_file();
    let limits = LimitSupport {
        memory: file("memory/cgroup.procs"),
        swap: file("memory/memory.memsw.limit_in_bytes"),
        pids: file("pids/cgroup.procs"),
        cpus: file("cpu/cgroup.procs"),
    };
    (limits != LimitSupport::default()).then_some(limits)
}

/// [`EngineInfo`] from `ENGINE info --format '{{json .}}'`; `None` without a
/// server version (Docker's client prints its own half when the daemon is down).
fn parse_info(engine: Engine, info: &Value) -> Option<EngineInfo> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let parsed = match engine {
        Engine::Docker => EngineInfo {
            engine,
            server_version: text(&info["ServerVersion"]),
            rootless: info["SecurityOptions"]
                .as_array()
                .is_some_and(|o| o.iter().any(|s| s == "name=rootless")),
            default_runtime: text(&info["DefaultRuntime"]),
            limits: LimitSupport {
                memory: info["MemoryLimit"].as_bool() == Some(true),
                swap: info["SwapLimit"].as_bool() == Some(true),
                pids: info["PidsLimit"].as_bool() == Some(true),
                cpus: info["CpuCfsQuota"].as_bool() == Some(true),
            },
        },
        Engine::Podman => EngineInfo {
            engine,
            server_version: text(&info["version"]["Version"]),
            rootless: info["host"]["security"]["rootless"]
                .as_bool()
                .unwrap_or(false),
            default_runtime: text(&info["host"]["ociRuntime"]["name"]),
            limits: {
                let has = |c: &str| {
                    info["host"]["cgroupControllers"]
                        .as_array()
                        .is_some_and(|l| l.iter().any(|x| x == c))
                };
                LimitSupport {
                    memory: has("memory"),
                    swap: has("memory"),
                    pids: has("pids"),
                    cpus: has("cpu"),
                }
            },
        },
    };
    (!parsed.server_version.is_empty()).then_some(parsed)
}

/// Whether `image` is in the engine's store (never pulls).
pub fn image_present(engine: Engine, image: &str) -> Result<bool, EngineError> {
    if image.starts_with('-') {
        return Ok(false);
    }
    let args = ["image", "inspect", "--format", "{{.Id}}", image];
    let out = call(engine, &args, QUERY_TIMEOUT)?;
    if out.status.success() {
        return Ok(true);
    }
    let lower = out.stderr.to_lowercase();
    if lower.contains("no such image") || lower.contains("image not known") {
        return Ok(false);
    }
    Err(failure(engine, &args, out))
}

/// [`image_present`], with the missing image as an error naming the fix.
pub fn require_image(engine: Engine, image: &str) -> Result<(), EngineError> {
    if image_present(engine, image)? {
        Ok(())
    } else {
        Err(EngineError::ImageMissing {
            engine,
            image: image.to_owned(),
        })
    }
}

/// The image's entrypoint, command and environment, as the engine will use them;
/// a missing image is [`EngineError::ImageMissing`].
pub fn image_config(engine: Engine, image: &str) -> Result<ImageConfig, EngineError> {
    let missing = || EngineError::ImageMissing {
        engine,
        image: image.to_owned(),
    };
    if image.starts_with('-') {
        return Err(missing());
    }
    match docker_socket(engine).and_then(|s| super::api::image_config(&s, image, QUERY_TIMEOUT)) {
        Some(Ok(config)) => return Ok(parse_image_config(&config)),
        Some(Err(())) => return Err(missing()),
        None => {}
    }
    let args = ["image", "inspect", "--format", "{{json .Config}}", image];
    let out = call(engine, &args, QUERY_TIMEOUT)?;
    if !out.status.success() {
        let lower = out.stderr.to_lowercase();
        if lower.contains("no such image") || lower.contains("image not known") {
            return Err(missing());
        }
        return Err(failure(engine, &args, out));
    }
    let config = json_of(engine, &args, &out.stdout)?;
    Ok(parse_image_config(&config))
}

/// An image's `.Config` (pure): absent or `null` lists are empty.
fn parse_image_config(config: &Value) -> ImageConfig {
    let list = |key: &str| -> Vec<String> {
        config[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    ImageConfig {
        entrypoint: list("Entrypoint"),
        cmd: list("Cmd"),
        env: list("Env"),
    }
}

/// An environment file, removed when dropped.
#[derive(Debug)]
struct EnvFile(PathBuf);

impl Drop for EnvFile {
    fn drop(&mut self) {
        // Best effort: the file lives in the caller's private folder.
        let _ = fs::remove_file(&self.0);
    }
}

/// A run ready to start: the client's command (stdio left to the caller, who
/// relays it) and the environment file it reads, removed when this is dropped
/// (keep it until the client has exited).
#[derive(Debug)]
pub struct PreparedRun {
    pub command: Command,
    env_file: Option<EnvFile>,
}

impl PreparedRun {
    /// Where the environment was written, if anywhere.
    pub fn env_file(&self) -> Option<&Path> {
        self.env_file.as_ref().map(|f| f.0.as_path())
    }
}

/// Writes the plan's environment (if any) to a new 0600 file in `private_dir`
/// (a folder only the caller can read, e.g. the session's) and builds the
/// `ENGINE run` command.
pub fn prepare_run(plan: &ContainerPlan, private_dir: &Path) -> Result<PreparedRun, EngineError> {
    static SERIAL: AtomicU64 = AtomicU64::new(0);
    let engine = plan.engine;
    let plan_err = |source| EngineError::Plan { engine, source };
    let env_file = if plan.env.is_empty() {
        None
    } else {
        let contents = env_file_contents(&plan.env).map_err(plan_err)?;
        let path = private_dir.join(format!(
            "engine-env-{}-{}",
            std::process::id(),
            SERIAL.fetch_add(1, Ordering::Relaxed)
        ));
        let io_err = |source| EngineError::Io {
            engine,
            what: format!("write the environment file {}", path.display()),
            source,
        };
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(io_err)?;
        let guard = EnvFile(path.clone());
        file.write_all(contents.as_bytes()).map_err(io_err)?;
        Some(guard)
    };
    let args = run_args(plan, env_file.as_ref().map(|f| f.0.as_path())).map_err(plan_err)?;
    let mut command = Command::new(engine.program());
    command.args(args);
    Ok(PreparedRun { command, env_file })
}

fn no_such_container(stderr: &str) -> bool {
    let lower = stderr.to_lowercase();
    lower.contains("no such container") || lower.contains("no container with name or id")
}

/// Stops the container: its stop signal, then SIGKILL after `grace`. `Ok(false)`
/// when there is no such container (already gone, e.g. removed by `--rm`).
pub fn stop(engine: Engine, name: &str, grace: Duration) -> Result<bool, EngineError> {
    let secs = grace.as_secs().to_string();
    let args = ["stop", "--time", &secs, "--", name];
    let out = call(engine, &args, grace + QUERY_TIMEOUT)?;
    if out.status.success() {
        Ok(true)
    } else if no_such_container(&out.stderr) {
        Ok(false)
    } else {
        Err(failure(engine, &args, out))
    }
}

/// Removes the container, killing it if it runs. `Ok(false)` when there is no
/// such container.
pub fn remove(engine: Engine, name: &str) -> Result<bool, EngineError> {
    let args = ["rm", "--force", "--", name];
    let out = call(engine, &args, QUERY_TIMEOUT)?;
    // Podman's `rm --force` succeeds quietly for a missing container; Docker's fails.
    if no_such_container(&out.stderr) {
        return Ok(false);
    }
    if out.status.success() {
        Ok(!out.stdout.is_empty())
    } else {
        Err(failure(engine, &args, out))
    }
}

/// The status both clients exit with when the engine itself failed (a refused
/// option, a lost connection to the daemon), rather than with the command's.
pub const ENGINE_FAILED: i32 = 125;

/// Whether a container run with `--rm` is certainly gone once its client has ended
/// as `end` says (pure), so that nothing needs to remove it after the session.
///
/// Docker's client with `--rm` waits for the daemon's removal before it exits (the
/// daemon removes it also when its start failed), and Podman's removes the container
/// itself before it exits; both exit with the command's status then. Not so when
/// the client was killed (a time-out's SIGKILL, a stop with SIGKILL: the container
/// may still run), exited with [`ENGINE_FAILED`] (its wait for the container may
/// have broken off), never ran, or the container is kept (`keep`): then it is
/// removed by name, as before.
pub fn removed_with_client(keep: bool, end: vg_sandbox::Termination) -> bool {
    !keep && matches!(end, vg_sandbox::Termination::Exited(code) if code != ENGINE_FAILED)
}

/// A container's state, as the engine reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerState {
    /// `created`, `running`, `exited`, ...
    pub status: String,
    pub running: bool,
    pub exit_code: i64,
    /// The kernel's OOM killer ended it (its memory limit held).
    pub oom_killed: bool,
    /// The engine's error starting it, if any.
    pub error: String,
}

/// The state of a container (`None`: no such container). Useful with
/// [`ContainerPlan::keep`]: a removed container cannot say it was OOM-killed.
pub fn inspect(engine: Engine, name: &str) -> Result<Option<ContainerState>, EngineError> {
    let args = [
        "container",
        "inspect",
        "--format",
        "{{json .State}}",
        "--",
        name,
    ];
    let out = call(engine, &args, QUERY_TIMEOUT)?;
    if !out.status.success() {
        return if no_such_container(&out.stderr) {
            Ok(None)
        } else {
            Err(failure(engine, &args, out))
        };
    }
    let state = json_of(engine, &args, &out.stdout)?;
    Ok(Some(ContainerState {
        status: state["Status"].as_str().unwrap_or_default().to_owned(),
        running: state["Running"].as_bool().unwrap_or(false),
        exit_code: state["ExitCode"].as_i64().unwrap_or(-1),
        oom_killed: state["OOMKilled"].as_bool().unwrap_or(false),
        error: state["Error"].as_str().unwrap_or_default().to_owned(),
    }))
}

/// The names of the containers (running or not) labelled `key=value`: what a
/// clean-up after a crash looks for.
pub fn containers_with_label(
    engine: Engine,
    key: &str,
    value: &str,
) -> Result<Vec<String>, EngineError> {
    let filter = format!("label={key}={value}");
    let args = ["ps", "--all", "--filter", &filter, "--format", "{{.Names}}"];
    let out = call(engine, &args, QUERY_TIMEOUT)?;
    if !out.status.success() {
        return Err(failure(engine, &args, out));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
}

/// The client program's path on `PATH`, if installed (for `doctor`).
/// Docker's socket, where a query may go there instead of through the client (see
/// `api`): only when the client is installed, so that a missing client is still
/// reported as such. Found once per process (the PATH search and the client's
/// config file), though a session asks two queries.
fn docker_socket(engine: Engine) -> Option<PathBuf> {
    static SOCKET: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    if engine != Engine::Docker {
        return None;
    }
    SOCKET
        .get_or_init(|| {
            client_path(engine)?;
            super::api::ClientConfig::from_env().socket()
        })
        .clone()
}

pub fn client_path(engine: Engine) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(OsStr::new(engine.program())))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn image_configs_are_read_with_absent_lists_empty() {
        let config = serde_json::json!({
            "Entrypoint": ["/bin/tini", "--"],
            "Cmd": null,
            "Env": ["PATH=/bin", "A=b=c"],
        });
        assert_eq!(
            parse_image_config(&config),
            ImageConfig {
                entrypoint: vec!["/bin/tini".into(), "--".into()],
                cmd: vec![],
                env: vec!["PATH=/bin".into(), "A=b=c".into()],
            }
        );
        assert_eq!(
            parse_image_config(&serde_json::json!({})),
            ImageConfig::default()
        );
    }

    #[test]
    fn only_a_client_that_ended_by_itself_has_removed_its_container() {
        use vg_sandbox::Termination;
        // The command's own statuses, a signal's 128+N included.
        for code in [0, 1, 3, 126, 127, 137, 143] {
            assert!(
                removed_with_client(false, Termination::Exited(code)),
                "{code}"
            );
        }
        // The engine's own failure, a killed client, a client that never ran.
        assert!(!removed_with_client(
            false,
            Termination::Exited(ENGINE_FAILED)
        ));
        assert!(!removed_with_client(
            false,
            Termination::Signalled(libc::SIGKILL)
        ));
        assert!(!removed_with_client(
            false,
            Termination::Signalled(libc::SIGTERM)
        ));
        assert!(!removed_with_client(
            false,
            Termination::ExecFailed(libc::ENOENT)
        ));
        // A kept container (no `--rm`) is never gone by itself.
        assert!(!removed_with_client(true, Termination::Exited(0)));
    }

    #[test]
    fn failures_are_told_apart_by_the_engines_words() {
        let out = |stderr: &str| Output {
            status: ExitStatus::from_raw(1 << 8),
            stdout: Vec::new(),
            stderr: stderr.into(),
        };
        let e = failure(
            Engine::Docker,
            &["info"],
            out(
                "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock",
            ),
        );
        assert!(matches!(e, EngineError::PermissionDenied { .. }), "{e}");
        assert!(e.to_string().contains("docker` group"));
        let e = failure(
            Engine::Docker,
            &["info"],
            out(
                "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
            ),
        );
        assert!(matches!(e, EngineError::NotRunning { .. }), "{e}");
        assert!(e.to_string().contains("start it"));
        let e = failure(Engine::Podman, &["info"], out("Error: something"));
        assert!(matches!(e, EngineError::Failed { .. }));
        assert!(e.to_string().contains("`podman info` failed"), "{e}");
        let e = EngineError::ImageMissing {
            engine: Engine::Podman,
            image: "x:1".into(),
        };
        assert_eq!(
            e.to_string(),
            "the image x:1 is not in Podman's image store: `podman pull x:1`, or `podman load -i FILE` for an archive, then run again"
        );
        let e = EngineError::NotInstalled {
            engine: Engine::Docker,
        };
        assert!(e.to_string().contains("apt-get install docker.io"), "{e}");
        assert!(no_such_container("Error: No such container: vg-x"));
        assert!(no_such_container(
            "Error: no container with name or ID \"vg-x\" found: no such container"
        ));
        assert!(!no_such_container("Error: permission denied"));
    }

    #[test]
    fn info_is_read_from_each_engines_answer() {
        let docker = serde_json::json!({
            "ServerVersion": "20.10.24+dfsg1",
            "DefaultRuntime": "runc",
            "SecurityOptions": ["name=seccomp,profile=default", "name=rootless"],
            "MemoryLimit": true, "SwapLimit": false, "PidsLimit": true, "CpuCfsQuota": true,
        });
        assert_eq!(
            parse_info(Engine::Docker, &docker),
            Some(EngineInfo {
                engine: Engine::Docker,
                server_version: "20.10.24+dfsg1".into(),
                rootless: true,
                default_runtime: "runc".into(),
                limits: LimitSupport {
                    memory: true,
                    swap: false,
                    pids: true,
                    cpus: true
                },
            })
        );
        // The client's half alone, as printed when the daemon is down.
        let down = serde_json::json!({"ServerVersion": "", "ID": ""});
        assert_eq!(parse_info(Engine::Docker, &down), None);
        let podman = serde_json::json!({
            "host": {"security": {"rootless": false}, "ociRuntime": {"name": "crun"},
                     "cgroupControllers": ["cpu", "memory"]},
            "version": {"Version": "4.3.1"},
        });
        let info = parse_info(Engine::Podman, &podman).unwrap();
        assert_eq!(
            (
                info.server_version.as_str(),
                info.rootless,
                info.default_runtime.as_str()
            ),
            ("4.3.1", false, "crun")
        );
        assert_eq!(
            info.limits,
            LimitSupport {
                memory: true,
                swap: true,
                pids: false,
                cpus: true
            }
        );
    }

    #[test]
    fn limits_the_engine_cannot_hold_are_refused() {
        let all = LimitSupport {
            memory: true,
            swap: true,
            pids: true,
            cpus: true,
        };
        let mut plan = ContainerPlan::new(Engine::Docker, "i", vec!["true".into()], "ab");
        let no_swap = LimitSupport { swap: false, ..all };
        assert_eq!(check_limits(&plan, no_swap), Ok(()), "nothing asked");
        plan.memory = Some(64 << 20);
        assert!(matches!(
            check_limits(&plan, no_swap),
            Err(PlanError::Unenforceable { what, .. }) if what.starts_with("swap")
        ));
        assert_eq!(check_limits(&plan, all), Ok(()));
        plan.pids = Some(10);
        plan.cpus = Some(0.5);
        for (limits, name) in [
            (LimitSupport { pids: false, ..all }, "process"),
            (LimitSupport { cpus: false, ..all }, "CPU"),
            (
                LimitSupport {
                    memory: false,
                    ..all
                },
                "memory",
            ),
        ] {
            let err = check_limits(&plan, limits).unwrap_err();
            assert!(err.to_string().contains(name), "{err}");
        }
    }

    #[test]
    fn roots_cgroup_limits_come_from_the_hosts_hierarchies() {
        let dir = std::env::temp_dir().join(format!("vg-cgroup-limits-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let touch = |f: &str| {
            let path = dir.join(f);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, "").unwrap();
        };
        // Nothing readable: no answer (Podman's own is asked then).
        fs::create_dir_all(&dir).unwrap();
        assert_eq!(host_cgroup_limits(&dir), None);
        // cgroup v1, without swap accounting and without the cpu hierarchy.
        touch("memory/cgroup.procs");
        touch("pids/cgroup.procs");
        let v1 = host_cgroup_limits(&dir).unwrap();
        assert_eq!(
            v1,
            LimitSupport {
                memory: true,
                swap: false,
                pids: true,
                cpus: false
            }
        );
        touch("memory/memory.memsw.limit_in_bytes");
        touch("cpu/cgroup.procs");
        assert!(host_cgroup_limits(&dir).unwrap().swap);
        // cgroup v2: the root's controllers win over anything else there.
        fs::write(dir.join("cgroup.controllers"), "cpuset cpu io pids\n").unwrap();
        assert_eq!(
            host_cgroup_limits(&dir).unwrap(),
            LimitSupport {
                memory: false,
                swap: false,
                pids: true,
                cpus: true
            }
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_environment_file_is_private_and_goes_with_the_run() {
        let dir = std::env::temp_dir().join(format!("vg-backend-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut plan = ContainerPlan::new(Engine::Docker, "img", vec!["true".into()], "vg-t");
        plan.env = vec![("TOKEN".into(), "s3cret value".into())];
        let run = prepare_run(&plan, &dir).unwrap();
        let path = run.env_file().unwrap().to_owned();
        assert_eq!(fs::read_to_string(&path).unwrap(), "TOKEN=s3cret value\n");
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let args: Vec<&OsStr> = run.command.get_args().collect();
        assert!(
            args.windows(2)
                .any(|w| w[0] == "--env-file" && w[1] == path.as_os_str())
        );
        assert!(!args.iter().any(|a| a.to_string_lossy().contains("s3cret")));
        assert_eq!(run.command.get_program(), "docker");
        drop(run);
        assert!(!path.exists());
        plan.env = vec![("A".into(), "x\ny".into())];
        assert!(matches!(
            prepare_run(&plan, &dir),
            Err(EngineError::Plan { .. })
        ));
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            0,
            "nothing left behind"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
