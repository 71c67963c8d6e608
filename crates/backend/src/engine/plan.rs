//! One container run as a value ([`ContainerPlan`]) and the engine client's
//! arguments for it ([`run_args`], pure).
//!
//! The flags, and why:
//! - `--rm` unless [`ContainerPlan::keep`]: the container goes with the session
//!   (kept for `sandbox create`; then [`super::remove`] removes it).
//! - `--pull never`: a missing image is an error naming the fix, never a pull
//!   from a registry the user did not name for this run.
//! - `--cap-drop ALL`, `--security-opt no-new-privileges`, `--user UID:GID`:
//!   no capabilities, no gaining any through set-id files, not root.
//! - `--security-opt seccomp=PATH`: our rule model ([`super::seccomp_profile`]).
//! - `--read-only` and tmpfs mounts, sized, with a mode (Podman's `--mount
//!   type=tmpfs`; Docker's `--tmpfs` with `exec` and the user as the owner, see
//!   `mount_arg`): the image's root cannot be changed; writes go where the plan
//!   allows, and programs written there run, as natively.
//! - `--network none|host`, `--cgroupns private`, `--ipc private`: nothing shared
//!   with the host beyond what the plan asks for.
//! - `--memory N --memory-swap N`: the same cap with and without swap, so no
//!   swap beyond the memory limit; `--pids-limit`, `--cpus`. Zero means
//!   "unlimited" to the engines, so it is refused here rather than passed on.
//! - `--env-file FILE`: values never appear on the command line (where `ps`
//!   shows them) and are never interpreted (the file's format has no quoting or
//!   expansion: one `NAME=VALUE` per line); `-e NAME` taking the value from the
//!   client's own environment was not chosen because that environment also
//!   steers the client (`DOCKER_HOST`, `DOCKER_CONFIG`, `CONTAINERS_CONF`, ...).
//! - `--mount type=bind,src=..,dst=..[,readonly]`: the `--mount` syntax is
//!   comma-separated (Docker reads it as CSV), so a path with `,`, `"` or a
//!   control character is refused with [`PlanError::MountPath`]; `=` is carried.
//!   A read-only bind is recursive and only its top is read-only with runc and
//!   Docker before 25: a submount under the source stays writable. The options
//!   that change this are spelt differently by each client version
//!   (`bind-nonrecursive` warns on Docker's 28 client, `bind-recursive=` is
//!   unknown to 20.10's), and a client's warning lands on the command's stderr,
//!   so none is passed: bind sources should have no writable submounts.
//! - No flag that makes the client print a warning: the client writes warnings to
//!   its own stderr, which is the command's stderr we relay.
//! - `--init` when [`ContainerPlan::init`]: the engine's init (Docker's
//!   `docker-init`, i.e. tini; Podman's `catatonit`) is PID 1, reaps orphans and
//!   passes signals on; without it the command is PID 1, where the kernel drops
//!   signals it has no handler for and zombies pile up until the end. Both come
//!   from the host's packages (`tini` with docker.io; `catatonit` for Podman),
//!   and a missing one fails the run with the engine's message. Not with
//!   [`ContainerPlan::record_execs`]: our own init is PID 1 then (see
//!   [`ExecRecording`]), so that no process of the container stands outside its
//!   filter (a dumpable engine init's memory is writable through `/proc` by any
//!   process of the same user).
//! - `--log-driver none`: we relay stdout and stderr ourselves; the engine's log
//!   driver would keep a second copy of the output (secrets included) on disk.
//!   Attaching still works.
//! - `--no-healthcheck`: an image's health check would run commands inside the
//!   session that the session did not ask for.
//! - `-i` (stdin attached) and `-t` (a terminal): without `-t` the container's
//!   stdout and stderr stay two streams, relayed byte for byte (the client's own
//!   stdout and stderr; tested with binary data, 1 MiB and more). Signals sent to
//!   the client are passed on to the container (the attached client's default
//!   `--sig-proxy`); SIGKILL cannot be, so a time-out ends the container with
//!   [`super::stop`], and a client killed outright leaves it running until then.
//! - Exit status: the client exits with the command's status (`128+N` for a
//!   signal, 137 when the memory limit's OOM kill ends it), 125 when the engine
//!   failed (image missing, bad option), 126/127 when the command cannot be run
//!   (with `--init` under Podman, catatonit reports a missing command as 1).
//! - `--stop-timeout S`, `--label K=V`, `--name`, `--entrypoint`, `--workdir`.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::Engine;

/// Docker's smallest memory limit (`docker run` refuses less).
pub const MIN_MEMORY: u64 = 6 * 1024 * 1024;

/// A mount in the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineMount {
    /// A host path bound at `dst`.
    Bind {
        src: PathBuf,
        dst: PathBuf,
        read_only: bool,
    },
    /// A fresh tmpfs of at most `size` bytes at `dst`, its root with `mode`, owned
    /// by the container's user when `user_owned` (as the native sandbox's private
    /// folders are), else by root. Programs in it may be run, as natively.
    Tmpfs {
        dst: PathBuf,
        size: u64,
        mode: u32,
        user_owned: bool,
    },
}

/// The container's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineNetwork {
    /// Its own network namespace with only a loopback interface.
    None,
    /// The host's network namespace.
    Host,
}

impl EngineNetwork {
    fn as_arg(self) -> &'static str {
        match self {
            EngineNetwork::None => "none",
            EngineNetwork::Host => "host",
        }
    }
}

/// Everything one container run needs, as plain data.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerPlan {
    pub engine: Engine,
    /// An image in the engine's store (never pulled: `--pull never`).
    pub image: String,
    /// `None`: the image's entrypoint, with [`Self::argv`] as its arguments (or
    /// the image's Cmd when `argv` is empty), Docker's rules. `Some("")`: no
    /// entrypoint, `argv` is the whole command. `Some(program)`: that program.
    pub entrypoint: Option<String>,
    pub argv: Vec<String>,
    /// The environment, in order (the image's `ENV` stays underneath; the engine
    /// adds `HOSTNAME`, and `HOME`/`PATH` when neither sets them).
    pub env: Vec<(String, String)>,
    /// Absolute path inside the container.
    pub workdir: PathBuf,
    /// `(uid, gid)` inside.
    pub user: (u32, u32),
    pub mounts: Vec<EngineMount>,
    /// `--read-only`: the image's root cannot be written.
    pub read_only: bool,
    pub network: EngineNetwork,
    /// Bytes; swap included (no swap beyond it).
    pub memory: Option<u64>,
    pub pids: Option<u64>,
    pub cpus: Option<f64>,
    /// The container's name (`[a-zA-Z0-9][a-zA-Z0-9_.-]+`).
    pub name: String,
    /// Kept after its command ends (`sandbox create`); otherwise `--rm`.
    pub keep: bool,
    pub labels: Vec<(String, String)>,
    /// The seccomp JSON profile to apply (see [`super::seccomp_profile`]);
    /// `None` leaves the engine's default profile (never `unconfined`).
    pub seccomp_profile: Option<PathBuf>,
    /// The engine's init as PID 1 (`--init`).
    pub init: bool,
    /// Stdin attached (`-i`); otherwise the container's stdin is empty.
    pub stdin: bool,
    /// A terminal (`-t`): stdout and stderr then become one stream.
    pub tty: bool,
    /// Seconds between the stop signal and SIGKILL when the engine stops it.
    pub stop_timeout: Option<u32>,
    /// Our own init as the entrypoint, recording every exec (replaces the engine's
    /// init and the entrypoint; see [`ExecRecording`]).
    pub record_execs: Option<ExecRecording>,
}

/// Where our init's files are in the container: a folder of their own at the root,
/// a fresh tmpfs ([`INIT_DIR_SIZE`], mode 0555) holding only the read-only binds
/// below, so that nothing the image has there shows through (the loader looks in
/// `glibc-hwcaps/…`, `tls/` and `x86_64/` under its library path before the path
/// itself: an image's files there would replace our libraries).
pub const INIT_DIR: &str = "/.vectraguard";
/// The size of [`INIT_DIR`]'s tmpfs: it holds only mount points.
pub const INIT_DIR_SIZE: u64 = 64 * 1024;
/// The file glibc's loader reads for libraries to load into every program, even one
/// it is asked to start directly: an empty file is bound over the image's, which
/// would load the image's code into our init before its filter.
pub const LOADER_PRELOAD_FILE: &str = "/etc/ld.so.preload";
/// The program, in [`INIT_DIR`].
pub const INIT_PROGRAM: &str = "/.vectraguard/vectraguard";
/// Its loader and libraries, each under its own name.
pub const INIT_LIB: &str = "/.vectraguard/lib";
/// The folder of the hand-over socket.
pub const INIT_RUN: &str = "/.vectraguard/run";

/// Vectra Guard's own init (`vg_sandbox::engine_init`) as the container's PID 1:
/// it installs our seccomp filter with a listener, hands the listener to the
/// supervisor over a socket, and runs [`Self::command`] once told to go.
///
/// Why through the host's loader: the init is this very program, linked against the
/// host's glibc, and an image may have no glibc (busybox, distroless) or another
/// version. Binding the host's loader and the libraries it mapped for us, and
/// starting the program through that loader (`ld.so --inhibit-cache --library-path
/// DIR PROGRAM`), runs it in any image without a second, static build to ship and
/// keep in step; `--inhibit-cache` and `--library-path` keep the image's
/// `/etc/ld.so.cache` and `LD_LIBRARY_PATH` out of it, a tmpfs at [`INIT_DIR`] the
/// image's files under it, and `/dev/null` bound over [`LOADER_PRELOAD_FILE`] the
/// image's preload list. The loader still reads `LD_PRELOAD`, `LD_AUDIT` and
/// `GLIBC_TUNABLES` from the environment, which would load the image's code into the
/// init before its filter or change how the loader runs: an environment with those
/// (or the loader's other code- or run-changing variables) is refused
/// ([`check_loader_environment`]). A static program needs no loader and is started
/// directly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRecording {
    /// This program on the host.
    pub program: PathBuf,
    /// Its dynamic loader on the host (`None`: a static program).
    pub loader: Option<PathBuf>,
    /// The libraries the loader maps for it, on the host.
    pub libraries: Vec<PathBuf>,
    /// The host folder of the hand-over socket (bound read-only at [`INIT_RUN`]).
    pub socket_dir: PathBuf,
    /// The init's arguments after the program (see `vg_sandbox::engine_init::init_args`).
    pub init_args: Vec<String>,
}

/// What an image's configuration says of its command and environment (`ENGINE image
/// inspect`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageConfig {
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    /// `NAME=VALUE`.
    pub env: Vec<String>,
}

/// The command the engine would run, by Docker's rules (pure): `entrypoint` `None`
/// keeps the image's entrypoint, with `argv` as its arguments or the image's `Cmd`
/// when `argv` is empty; `Some("")` clears it (`argv` is the whole command);
/// `Some(program)` replaces it (and the image's `Cmd` with it).
pub fn resolve_command(
    entrypoint: Option<&str>,
    argv: &[String],
    image: &ImageConfig,
) -> Result<Vec<String>, PlanError> {
    let command: Vec<String> = match entrypoint {
        Some("") => argv.to_vec(),
        Some(program) => std::iter::once(program.to_owned())
            .chain(argv.iter().cloned())
            .collect(),
        None if argv.is_empty() => image.entrypoint.iter().chain(&image.cmd).cloned().collect(),
        None => image.entrypoint.iter().chain(argv).cloned().collect(),
    };
    if command.is_empty() {
        return Err(PlanError::NoCommand);
    }
    Ok(command)
}

/// The dynamic loader's variables that load code into a program or keep it from
/// running (glibc's `LD_TRACE_LOADED_OBJECTS` lists the libraries instead).
pub const LOADER_VARIABLES: [&str; 5] = [
    "LD_PRELOAD",
    "LD_AUDIT",
    "LD_TRACE_LOADED_OBJECTS",
    "LD_PROFILE",
    // The loader's tunables (its own parser has had memory-safety bugs, and some
    // change which library folders it searches).
    "GLIBC_TUNABLES",
];

/// Refuses an environment (the image's, then the session's) that would change what
/// the loader starting our init runs (see [`ExecRecording`]), whatever the value.
pub fn check_loader_environment(
    image_env: &[String],
    env: &[(String, String)],
) -> Result<(), PlanError> {
    let names = image_env
        .iter()
        .map(|kv| kv.split_once('=').map_or(kv.as_str(), |(k, _)| k))
        .chain(env.iter().map(|(k, _)| k.as_str()));
    for name in names {
        if LOADER_VARIABLES.contains(&name) {
            return Err(PlanError::LoaderVariable(name.to_owned()));
        }
    }
    Ok(())
}

impl ContainerPlan {
    /// A plan with our defaults: read-only root, no network, init, stdin
    /// attached, removed at the end, no limits, no mounts, the engine's seccomp
    /// profile until one is set.
    pub fn new(engine: Engine, image: &str, argv: Vec<String>, name: &str) -> Self {
        Self {
            engine,
            image: image.to_owned(),
            entrypoint: Some(String::new()),
            argv,
            env: Vec::new(),
            workdir: PathBuf::from("/"),
            user: (65534, 65534),
            mounts: Vec::new(),
            read_only: true,
            network: EngineNetwork::None,
            memory: None,
            pids: None,
            cpus: None,
            name: name.to_owned(),
            keep: false,
            labels: Vec::new(),
            seccomp_profile: None,
            init: true,
            stdin: true,
            tty: false,
            stop_timeout: None,
            record_execs: None,
        }
    }
}

/// A plan the engines cannot carry faithfully.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error(
        "container name {0:?} is not valid for Docker or Podman: use letters, digits, `_`, `.` and `-`, starting with a letter or digit, at least two characters"
    )]
    Name(String),
    #[error(
        "image name {0:?} is not valid: it must be non-empty, not start with `-`, and contain no spaces or control characters"
    )]
    Image(String),
    #[error("no command to run: with the entrypoint cleared, give the command after `--`")]
    NoCommand,
    #[error(
        "the entrypoint {0:?} cannot be given to {1}: it must not start with `[` (Podman reads that as a JSON list) or contain control characters"
    )]
    Entrypoint(String, Engine),
    #[error("argument {index} of the command contains a NUL byte, which no program can receive")]
    ArgvNul { index: usize },
    #[error(
        "environment variable name {0:?} cannot be passed to the engine: it must be non-empty, not start with `#`, and contain no `=`, whitespace or NUL"
    )]
    EnvName(String),
    #[error(
        "the value of environment variable {0} contains a line break or NUL, which the engines' environment files cannot carry: remove it from the value"
    )]
    EnvValue(String),
    #[error("the environment is not empty, but no environment file was given to pass it in")]
    EnvFileMissing,
    #[error("{what} {path:?} cannot be given to the engine: {why}")]
    MountPath {
        what: &'static str,
        path: PathBuf,
        why: &'static str,
    },
    #[error(
        "{what} must be an absolute path inside the container, valid UTF-8, without control characters: {path:?}"
    )]
    InsidePath { what: &'static str, path: PathBuf },
    #[error(
        "label {0:?} is not valid: the key must be non-empty without `=`, and neither part may contain control characters"
    )]
    Label(String),
    #[error(
        "a memory limit of {0} bytes is below the engines' minimum of {MIN_MEMORY} bytes (6 MiB)"
    )]
    Memory(u64),
    #[error("a {what} of 0 means no limit to the engines: give at least 1, or no limit")]
    Zero { what: &'static str },
    #[error("--cpus {0} is not a positive number")]
    Cpus(f64),
    #[error("tmpfs mode {0:o} is not a file mode (at most 7777 octal)")]
    TmpfsMode(u32),
    #[error(
        "the container's environment sets {0}, which would load other code into the init that records its execs (or keep it from running): remove it from the image or the environment, run with --no-record, or use --backend native"
    )]
    LoaderVariable(String),
    #[error(
        "{engine} cannot enforce the {what} on this host (its kernel or cgroups lack it): drop the limit, or use the native backend"
    )]
    Unenforceable { what: &'static str, engine: Engine },
}

fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

/// Docker's rule for container names, `[a-zA-Z0-9][a-zA-Z0-9_.-]+`.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.len() >= 2
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// A path inside the container, as the client's argument.
fn inside_path<'a>(what: &'static str, path: &'a Path) -> Result<&'a str, PlanError> {
    match path.to_str() {
        Some(s) if path.is_absolute() && !has_control(s) => Ok(s),
        _ => Err(PlanError::InsidePath {
            what,
            path: path.to_owned(),
        }),
    }
}

/// A path in a `--mount` field: the syntax is comma-separated and Docker reads
/// it as CSV, so `,` and `"` cannot be carried; the client sends paths as
/// UTF-8 strings.
fn mount_field<'a>(what: &'static str, path: &'a Path) -> Result<&'a str, PlanError> {
    let err = |why| PlanError::MountPath {
        what,
        path: path.to_owned(),
        why,
    };
    let s = path.to_str().ok_or_else(|| err("it is not valid UTF-8"))?;
    if !path.is_absolute() {
        return Err(err("it must be absolute"));
    }
    if s.contains(',') || s.contains('"') {
        return Err(err(
            "the engines' --mount syntax cannot carry `,` or `\"` in a path; rename it or mount a parent folder",
        ));
    }
    if has_control(s) {
        return Err(err("it contains a control character"));
    }
    Ok(s)
}

/// The environment file's contents: `NAME=VALUE` lines, which both engines read
/// without quoting, escapes or expansion (Docker strips leading whitespace from a
/// line, hence none in names; a line starting with `#` is a comment, hence none
/// there either).
pub fn env_file_contents(env: &[(String, String)]) -> Result<String, PlanError> {
    let mut out = String::new();
    for (name, value) in env {
        if name.is_empty()
            || name.starts_with('#')
            || name.contains('=')
            || name.chars().any(|c| c.is_whitespace() || c == '\0')
        {
            return Err(PlanError::EnvName(name.clone()));
        }
        if value.contains(['\n', '\r', '\0']) {
            return Err(PlanError::EnvValue(name.clone()));
        }
        let _ = writeln!(out, "{name}={value}");
    }
    Ok(out)
}

/// The client's arguments for `ENGINE run ...` (the program itself not
/// included). `env_file` is where [`env_file_contents`] of `plan.env` was
/// written; it is required when the environment is not empty.
pub fn run_args(plan: &ContainerPlan, env_file: Option<&Path>) -> Result<Vec<OsString>, PlanError> {
    let mut a: Vec<OsString> = vec!["run".into()];
    let mut push = |args: &[&str]| a.extend(args.iter().map(OsString::from));
    if !valid_name(&plan.name) {
        return Err(PlanError::Name(plan.name.clone()));
    }
    if plan.image.is_empty()
        || plan.image.starts_with('-')
        || plan
            .image
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(PlanError::Image(plan.image.clone()));
    }
    if !plan.keep {
        push(&["--rm"]);
    }
    push(&["--name", &plan.name, "--pull", "never"]);
    let recorded = match &plan.record_execs {
        Some(rec) => Some(init_command(rec)?),
        None => None,
    };
    let entrypoint = match &recorded {
        Some((entrypoint, _, _)) => Some(entrypoint.as_str()),
        None => plan.entrypoint.as_deref(),
    };
    match entrypoint {
        Some("") if plan.argv.is_empty() => return Err(PlanError::NoCommand),
        Some(e) if e.starts_with('[') || has_control(e) => {
            return Err(PlanError::Entrypoint(e.to_owned(), plan.engine));
        }
        Some(e) => push(&["--entrypoint", e]),
        None => {}
    }
    if let Some(index) = plan.argv.iter().position(|s| s.contains('\0')) {
        return Err(PlanError::ArgvNul { index });
    }
    let (argv, init_mounts) = match recorded {
        Some((_, argv, mounts)) => (argv, mounts),
        None => (plan.argv.clone(), Vec::new()),
    };
    if let Some(index) = argv.iter().position(|s| s.contains('\0')) {
        return Err(PlanError::ArgvNul { index });
    }
    let user = format!("{}:{}", plan.user.0, plan.user.1);
    push(&["--user", &user]);
    push(&[
        "--workdir",
        inside_path("the working directory", &plan.workdir)?,
    ]);
    // Validate even without a file: a bad variable is the caller's error either way.
    env_file_contents(&plan.env)?;
    match env_file {
        Some(file) if !plan.env.is_empty() => {
            a.push("--env-file".into());
            a.push(file.as_os_str().to_owned());
        }
        None if !plan.env.is_empty() => return Err(PlanError::EnvFileMissing),
        _ => {}
    }
    let mut push = |args: &[&str]| a.extend(args.iter().map(OsString::from));
    push(&["--cap-drop", "ALL", "--security-opt", "no-new-privileges"]);
    if let Some(profile) = &plan.seccomp_profile {
        let path = mount_field("the seccomp profile", profile)?;
        push(&["--security-opt", &format!("seccomp={path}")]);
    }
    if plan.read_only {
        push(&["--read-only"]);
    }
    push(&["--network", plan.network.as_arg()]);
    push(&["--cgroupns", "private", "--ipc", "private"]);
    if let Some(memory) = plan.memory {
        if memory < MIN_MEMORY {
            return Err(PlanError::Memory(memory));
        }
        let m = memory.to_string();
        push(&["--memory", &m, "--memory-swap", &m]);
    }
    if let Some(pids) = plan.pids {
        if pids == 0 {
            return Err(PlanError::Zero { what: "pids limit" });
        }
        push(&["--pids-limit", &pids.to_string()]);
    }
    if let Some(cpus) = plan.cpus {
        if !(cpus.is_finite() && cpus > 0.0) {
            return Err(PlanError::Cpus(cpus));
        }
        push(&["--cpus", &cpus.to_string()]);
    }
    // Our init is PID 1 when it records: no other process of the container may
    // stand outside its filter (the engine's init would, and a process of the same
    // user can write a dumpable process's memory through /proc).
    if plan.init && plan.record_execs.is_none() {
        push(&["--init"]);
    }
    push(&["--log-driver", "none", "--no-healthcheck"]);
    if let Some(grace) = plan.stop_timeout {
        push(&["--stop-timeout", &grace.to_string()]);
    }
    for (key, value) in &plan.labels {
        if key.is_empty() || key.contains('=') || has_control(key) || has_control(value) {
            return Err(PlanError::Label(format!("{key}={value}")));
        }
        push(&["--label", &format!("{key}={value}")]);
    }
    for mount in plan.mounts.iter().chain(&init_mounts) {
        let (flag, arg) = mount_arg(mount, plan.engine, plan.user)?;
        push(&[flag, &arg]);
    }
    if plan.stdin {
        push(&["--interactive"]);
    }
    if plan.tty {
        push(&["--tty"]);
    }
    push(&[&plan.image]);
    push(&argv.iter().map(String::as_str).collect::<Vec<_>>());
    Ok(a)
}

/// Our init's entrypoint, arguments and read-only binds (see [`ExecRecording`]).
fn init_command(rec: &ExecRecording) -> Result<(String, Vec<String>, Vec<EngineMount>), PlanError> {
    let inside = |dir: &str, host: &Path| -> Result<PathBuf, PlanError> {
        match host.file_name() {
            Some(name) => Ok(Path::new(dir).join(name)),
            None => Err(PlanError::MountPath {
                what: "a file of the recording init",
                path: host.to_owned(),
                why: "it has no file name",
            }),
        }
    };
    let bind = |src: &Path, dst: PathBuf| EngineMount::Bind {
        src: src.to_owned(),
        dst,
        read_only: true,
    };
    // The tmpfs first: both engines mount a parent before what is mounted in it.
    let mut mounts = vec![
        EngineMount::Tmpfs {
            dst: PathBuf::from(INIT_DIR),
            size: INIT_DIR_SIZE,
            mode: 0o555,
            user_owned: false,
        },
        bind(&rec.program, PathBuf::from(INIT_PROGRAM)),
        bind(&rec.socket_dir, PathBuf::from(INIT_RUN)),
    ];
    let mut argv = Vec::new();
    let entrypoint = match &rec.loader {
        Some(loader) => {
            let ld = inside(INIT_LIB, loader)?;
            mounts.push(bind(
                Path::new("/dev/null"),
                PathBuf::from(LOADER_PRELOAD_FILE),
            ));
            mounts.push(bind(loader, ld.clone()));
            for lib in &rec.libraries {
                mounts.push(bind(lib, inside(INIT_LIB, lib)?));
            }
            argv.extend(
                ["--inhibit-cache", "--library-path", INIT_LIB, INIT_PROGRAM].map(String::from),
            );
            ld.to_string_lossy().into_owned()
        }
        None => INIT_PROGRAM.to_owned(),
    };
    argv.extend(rec.init_args.iter().cloned());
    Ok((entrypoint, argv, mounts))
}

/// The client's flag and its value for one mount.
fn mount_arg(
    mount: &EngineMount,
    engine: Engine,
    user: (u32, u32),
) -> Result<(&'static str, String), PlanError> {
    Ok(match mount {
        EngineMount::Bind {
            src,
            dst,
            read_only,
        } => {
            let src = mount_field("the bind source", src)?;
            let dst = mount_field("the bind destination", dst)?;
            let mut arg = format!("type=bind,src={src},dst={dst}");
            if *read_only {
                arg.push_str(",readonly");
            }
            ("--mount", arg)
        }
        EngineMount::Tmpfs {
            dst,
            size,
            mode,
            user_owned,
        } => {
            let dst = mount_field("the tmpfs destination", dst)?;
            if *size == 0 {
                return Err(PlanError::Zero { what: "tmpfs size" });
            }
            if *mode > 0o7777 {
                return Err(PlanError::TmpfsMode(*mode));
            }
            // Both engines read the mode as octal digits.
            let mut arg = format!("type=tmpfs,dst={dst},tmpfs-size={size},tmpfs-mode={mode:o}");
            // Podman copies what the image has at `dst` into a new tmpfs unless told
            // not to; Docker never does. A fresh tmpfs must be empty on both: our
            // init's folder must show nothing of the image's (see `INIT_DIR`).
            if engine == Engine::Podman {
                arg.push_str(",notmpcopyup");
            }
            // Docker's `--mount type=tmpfs` is always `noexec` (20.10 has no option
            // against it) and has no owner: with `--workdir` on it, Docker leaves its
            // root at 0755 owned by root, which the user cannot write. Its `--tmpfs`
            // takes the kernel's options: `exec`, and the user as the owner. Podman's
            // `--mount` tmpfs allows programs and keeps the mode (1777 here).
            if engine == Engine::Docker && *user_owned {
                if dst.contains(':') {
                    return Err(PlanError::MountPath {
                        what: "the tmpfs destination",
                        path: PathBuf::from(dst),
                        why: "Docker's --tmpfs separates the destination from its options with `:`",
                    });
                }
                let (uid, gid) = user;
                return Ok((
                    "--tmpfs",
                    format!(
                        "{dst}:rw,exec,nosuid,nodev,size={size},mode={mode:o},uid={uid},gid={gid}"
                    ),
                ));
            }
            ("--mount", arg)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> ContainerPlan {
        let mut p = ContainerPlan::new(
            Engine::Docker,
            "img:1",
            vec!["sh".into(), "-c".into(), "echo $HOME; exit 3".into()],
            "vg-abc",
        );
        p.user = (1000, 1001);
        p.workdir = "/work".into();
        p.memory = Some(64 << 20);
        p.pids = Some(100);
        p.cpus = Some(1.5);
        p.seccomp_profile = Some("/run/vg/seccomp.json".into());
        p.labels = vec![("vectraguard.session".into(), "s1".into())];
        p.stop_timeout = Some(10);
        p.env = vec![("A".into(), "1".into())];
        p.mounts = vec![
            EngineMount::Bind {
                src: "/home/u/w".into(),
                dst: "/work".into(),
                read_only: false,
            },
            EngineMount::Bind {
                src: "/usr/share/a=b".into(),
                dst: "/data".into(),
                read_only: true,
            },
            EngineMount::Tmpfs {
                dst: "/tmp".into(),
                size: 1 << 30,
                mode: 0o1777,
                user_owned: true,
            },
        ];
        p
    }

    fn strings(args: Vec<OsString>) -> Vec<String> {
        args.into_iter()
            .map(|s| s.into_string().unwrap_or_default())
            .collect()
    }

    #[test]
    fn full_plan_as_arguments() {
        let args = strings(run_args(&plan(), Some(Path::new("/run/vg/env"))).unwrap());
        let expected: Vec<&str> = vec![
            "run",
            "--rm",
            "--name",
            "vg-abc",
            "--pull",
            "never",
            "--entrypoint",
            "",
            "--user",
            "1000:1001",
            "--workdir",
            "/work",
            "--env-file",
            "/run/vg/env",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--security-opt",
            "seccomp=/run/vg/seccomp.json",
            "--read-only",
            "--network",
            "none",
            "--cgroupns",
            "private",
            "--ipc",
            "private",
            "--memory",
            "67108864",
            "--memory-swap",
            "67108864",
            "--pids-limit",
            "100",
            "--cpus",
            "1.5",
            "--init",
            "--log-driver",
            "none",
            "--no-healthcheck",
            "--stop-timeout",
            "10",
            "--label",
            "vectraguard.session=s1",
            "--mount",
            "type=bind,src=/home/u/w,dst=/work",
            "--mount",
            "type=bind,src=/usr/share/a=b,dst=/data,readonly",
            "--tmpfs",
            "/tmp:rw,exec,nosuid,nodev,size=1073741824,mode=1777,uid=1000,gid=1001",
            "--interactive",
            "img:1",
            "sh",
            "-c",
            "echo $HOME; exit 3",
        ];
        assert_eq!(args, expected);
    }

    #[test]
    fn defaults_and_switches() {
        let mut p = ContainerPlan::new(Engine::Podman, "localhost/x", vec!["true".into()], "ab");
        let args = strings(run_args(&p, None).unwrap());
        assert!(args.contains(&"--rm".to_owned()));
        assert!(!args.iter().any(|a| a == "--env-file" || a == "--memory"));
        assert!(!args.iter().any(|a| a.starts_with("seccomp=")));
        assert_eq!(args.last().map(String::as_str), Some("true"));
        assert_eq!(
            args.iter().rev().nth(1).map(String::as_str),
            Some("localhost/x")
        );
        p.keep = true;
        p.read_only = false;
        p.init = false;
        p.stdin = false;
        p.tty = true;
        p.network = EngineNetwork::Host;
        p.entrypoint = None;
        p.argv.clear();
        let args = strings(run_args(&p, None).unwrap());
        for absent in [
            "--rm",
            "--read-only",
            "--init",
            "--interactive",
            "--entrypoint",
        ] {
            assert!(!args.iter().any(|a| a == absent), "{absent} in {args:?}");
        }
        assert!(args.windows(2).any(|w| w == ["--network", "host"]));
        assert!(args.contains(&"--tty".to_owned()));
        assert_eq!(args.last().map(String::as_str), Some("localhost/x"));
        p.entrypoint = Some("/bin/prog".into());
        let args = strings(run_args(&p, None).unwrap());
        assert!(args.windows(2).any(|w| w == ["--entrypoint", "/bin/prog"]));
    }

    #[test]
    fn environment_goes_to_the_file_only() {
        let mut p = plan();
        p.env = vec![
            ("SECRET".into(), "hunter2".into()),
            ("SPACES".into(), "  a b  ".into()),
            ("QUOTED".into(), "'$HOME' \"x\" #no-comment \\n".into()),
            ("EMPTY".into(), String::new()),
        ];
        let args = strings(run_args(&p, Some(Path::new("/e"))).unwrap());
        assert!(!args.iter().any(|a| a.contains("hunter2")));
        assert!(!args.iter().any(|a| a == "-e" || a == "--env"));
        assert_eq!(
            env_file_contents(&p.env).unwrap(),
            "SECRET=hunter2\nSPACES=  a b  \nQUOTED='$HOME' \"x\" #no-comment \\n\nEMPTY=\n"
        );
        assert_eq!(run_args(&p, None), Err(PlanError::EnvFileMissing));
        for bad in ["", "#A", "A=B", " A", "A B", "A\0"] {
            p.env = vec![(bad.into(), "v".into())];
            assert_eq!(
                run_args(&p, Some(Path::new("/e"))),
                Err(PlanError::EnvName(bad.into()))
            );
        }
        for bad in ["a\nB=1", "a\r", "a\0"] {
            p.env = vec![("A".into(), bad.into())];
            assert_eq!(
                run_args(&p, Some(Path::new("/e"))),
                Err(PlanError::EnvValue("A".into()))
            );
        }
    }

    #[test]
    fn mount_paths_the_syntax_cannot_carry_are_refused() {
        for (src, dst) in [
            ("/a,b", "/x"),
            ("/a", "/x,readonly=false"),
            ("/a\"b", "/x"),
            ("/a\nb", "/x"),
            ("rel", "/x"),
            ("/a", "rel"),
        ] {
            let mut p = plan();
            p.mounts = vec![EngineMount::Bind {
                src: src.into(),
                dst: dst.into(),
                read_only: true,
            }];
            let err = run_args(&p, Some(Path::new("/e"))).unwrap_err();
            assert!(
                matches!(err, PlanError::MountPath { .. }),
                "{src} {dst}: {err}"
            );
        }
        let mut p = plan();
        p.mounts = vec![EngineMount::Tmpfs {
            dst: "/t,mp".into(),
            size: 1,
            mode: 0o700,
            user_owned: true,
        }];
        assert!(matches!(
            run_args(&p, Some(Path::new("/e"))),
            Err(PlanError::MountPath { .. })
        ));
        // Docker's `--tmpfs DST:OPTIONS` cannot carry a `:` in the destination.
        p.mounts = vec![EngineMount::Tmpfs {
            dst: "/t:mp".into(),
            size: 1,
            mode: 0o700,
            user_owned: true,
        }];
        assert!(matches!(
            run_args(&p, Some(Path::new("/e"))),
            Err(PlanError::MountPath { .. })
        ));
        p.seccomp_profile = Some("/a,b".into());
        assert!(run_args(&p, Some(Path::new("/e"))).is_err());
    }

    #[test]
    fn values_the_engines_read_as_unlimited_are_refused() {
        let e = Some(Path::new("/e"));
        let with = |f: &dyn Fn(&mut ContainerPlan)| {
            let mut p = plan();
            f(&mut p);
            run_args(&p, e)
        };
        assert_eq!(
            with(&|p| p.pids = Some(0)),
            Err(PlanError::Zero { what: "pids limit" })
        );
        assert_eq!(with(&|p| p.memory = Some(0)), Err(PlanError::Memory(0)));
        assert_eq!(
            with(&|p| p.memory = Some(MIN_MEMORY - 1)),
            Err(PlanError::Memory(MIN_MEMORY - 1))
        );
        assert!(with(&|p| p.memory = Some(MIN_MEMORY)).is_ok());
        for cpus in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                with(&|p| p.cpus = Some(cpus)),
                Err(PlanError::Cpus(_))
            ));
        }
        let tmpfs = |size, mode| {
            move |p: &mut ContainerPlan| {
                p.mounts = vec![EngineMount::Tmpfs {
                    dst: "/tmp".into(),
                    size,
                    mode,
                    user_owned: true,
                }]
            }
        };
        assert_eq!(
            with(&tmpfs(0, 0o700)),
            Err(PlanError::Zero { what: "tmpfs size" })
        );
        assert_eq!(with(&tmpfs(1, 0o10000)), Err(PlanError::TmpfsMode(0o10000)));
        assert!(with(&tmpfs(1, 0o7777)).is_ok());
    }

    #[test]
    fn names_images_commands_and_labels_are_checked() {
        let e = Some(Path::new("/e"));
        let with = |f: &dyn Fn(&mut ContainerPlan)| {
            let mut p = plan();
            f(&mut p);
            run_args(&p, e)
        };
        for bad in ["", "a", "-ab", "_ab", "a b", "a/b", "ab:c"] {
            assert_eq!(
                with(&|p| p.name = bad.into()),
                Err(PlanError::Name(bad.into()))
            );
        }
        for good in ["ab", "vg-1.x_y", "A0"] {
            assert!(with(&|p| p.name = good.into()).is_ok(), "{good}");
        }
        for bad in ["", "-v", "a b", "a\n"] {
            assert_eq!(
                with(&|p| p.image = bad.into()),
                Err(PlanError::Image(bad.into()))
            );
        }
        assert_eq!(with(&|p| p.argv.clear()), Err(PlanError::NoCommand));
        assert_eq!(
            with(&|p| p.argv[1] = "a\0b".into()),
            Err(PlanError::ArgvNul { index: 1 })
        );
        assert!(matches!(
            with(&|p| p.entrypoint = Some("[\"sh\"]".into())),
            Err(PlanError::Entrypoint(..))
        ));
        assert!(matches!(
            with(&|p| p.workdir = "work".into()),
            Err(PlanError::InsidePath { .. })
        ));
        for (k, v) in [("", "v"), ("a=b", "v"), ("k", "a\nb")] {
            assert!(matches!(
                with(&|p| p.labels = vec![(k.into(), v.into())]),
                Err(PlanError::Label(_))
            ));
        }
        // Argument text is passed as is, never split or interpreted.
        let args = with(&|p| p.argv = vec!["--rm".into(), "$(x) ; `y`".into()]).unwrap();
        assert_eq!(
            args[args.len() - 2..],
            [OsString::from("--rm"), "$(x) ; `y`".into()]
        );
    }

    fn recording(loader: bool) -> ExecRecording {
        ExecRecording {
            program: "/opt/vg/bin/vectraguard".into(),
            loader: loader.then(|| "/lib64/ld-linux-x86-64.so.2".into()),
            libraries: vec![
                "/lib/x86_64-linux-gnu/libc.so.6".into(),
                "/lib/x86_64-linux-gnu/libgcc_s.so.1".into(),
            ],
            socket_dir: "/tmp/vg-1.files/init".into(),
            init_args: vec![
                "__init".into(),
                "--".into(),
                "sh".into(),
                "-c".into(),
                "x".into(),
            ],
        }
    }

    #[test]
    fn the_recording_init_is_the_entrypoint_through_the_host_s_loader() {
        let mut p = plan();
        p.record_execs = Some(recording(true));
        let args = strings(run_args(&p, Some(Path::new("/e"))).unwrap());
        assert!(
            args.windows(2)
                .any(|w| w == ["--entrypoint", "/.vectraguard/lib/ld-linux-x86-64.so.2"]),
            "{args:?}"
        );
        // Our init is PID 1: not the engine's.
        assert!(!args.iter().any(|a| a == "--init"), "{args:?}");
        // Nothing of the image shows under our folder (its tmpfs is mounted first),
        // and the image's preload list is empty for the loader.
        let mounts: Vec<&String> = args
            .windows(2)
            .filter(|w| w[0] == "--mount")
            .map(|w| &w[1])
            .collect();
        let tmpfs = mounts
            .iter()
            .position(|m| *m == "type=tmpfs,dst=/.vectraguard,tmpfs-size=65536,tmpfs-mode=555");
        let first_bind = mounts.iter().position(|m| m.contains("dst=/.vectraguard/"));
        assert!(tmpfs.is_some() && tmpfs < first_bind, "{mounts:?}");
        // Podman would copy the image's files into it unless told not to.
        let mut podman = p.clone();
        podman.engine = Engine::Podman;
        let args = strings(run_args(&podman, Some(Path::new("/e"))).unwrap());
        assert!(
            args.iter()
                .any(|a| a
                    == "type=tmpfs,dst=/.vectraguard,tmpfs-size=65536,tmpfs-mode=555,notmpcopyup"),
            "{args:?}"
        );
        let args = strings(run_args(&p, Some(Path::new("/e"))).unwrap());
        for mount in [
            "type=bind,src=/dev/null,dst=/etc/ld.so.preload,readonly",
            "type=bind,src=/opt/vg/bin/vectraguard,dst=/.vectraguard/vectraguard,readonly",
            "type=bind,src=/tmp/vg-1.files/init,dst=/.vectraguard/run,readonly",
            "type=bind,src=/lib64/ld-linux-x86-64.so.2,dst=/.vectraguard/lib/ld-linux-x86-64.so.2,readonly",
            "type=bind,src=/lib/x86_64-linux-gnu/libc.so.6,dst=/.vectraguard/lib/libc.so.6,readonly",
            "type=bind,src=/lib/x86_64-linux-gnu/libgcc_s.so.1,dst=/.vectraguard/lib/libgcc_s.so.1,readonly",
        ] {
            assert!(args.windows(2).any(|w| w == ["--mount", mount]), "{mount}");
        }
        // The plan's own mounts stay.
        assert!(
            args.iter()
                .any(|a| a == "type=bind,src=/home/u/w,dst=/work")
        );
        let image = args.iter().position(|a| a == "img:1").unwrap();
        assert_eq!(
            args[image + 1..],
            [
                "--inhibit-cache",
                "--library-path",
                "/.vectraguard/lib",
                "/.vectraguard/vectraguard",
                "__init",
                "--",
                "sh",
                "-c",
                "x"
            ]
        );
    }

    #[test]
    fn a_static_init_is_started_directly() {
        let mut p = plan();
        p.record_execs = Some(recording(false));
        let args = strings(run_args(&p, Some(Path::new("/e"))).unwrap());
        assert!(
            args.windows(2)
                .any(|w| w == ["--entrypoint", "/.vectraguard/vectraguard"])
        );
        assert!(
            !args.iter().any(|a| a.contains("/.vectraguard/lib")),
            "{args:?}"
        );
        assert!(
            args.iter()
                .any(|a| a.starts_with("type=tmpfs,dst=/.vectraguard,")),
            "{args:?}"
        );
        let image = args.iter().position(|a| a == "img:1").unwrap();
        assert_eq!(args[image + 1..], ["__init", "--", "sh", "-c", "x"]);
        // Without recording the engine's init stays.
        p.record_execs = None;
        let args = strings(run_args(&p, Some(Path::new("/e"))).unwrap());
        assert!(args.iter().any(|a| a == "--init"));
        // A bind the syntax cannot carry is refused here too.
        let mut rec = recording(true);
        rec.socket_dir = "/tmp/a,b".into();
        p.record_execs = Some(rec);
        assert!(matches!(
            run_args(&p, Some(Path::new("/e"))),
            Err(PlanError::MountPath { .. })
        ));
    }

    #[test]
    fn the_command_follows_docker_s_rules() {
        let image = ImageConfig {
            entrypoint: vec!["/entry".into(), "-x".into()],
            cmd: vec!["default".into()],
            env: vec![],
        };
        let argv = vec!["a".to_owned(), "b".into()];
        let r = |e: Option<&str>, argv: &[String]| resolve_command(e, argv, &image);
        assert_eq!(r(None, &[]).unwrap(), ["/entry", "-x", "default"]);
        assert_eq!(r(None, &argv).unwrap(), ["/entry", "-x", "a", "b"]);
        assert_eq!(r(Some(""), &argv).unwrap(), ["a", "b"]);
        assert_eq!(r(Some("/p"), &argv).unwrap(), ["/p", "a", "b"]);
        assert_eq!(r(Some("/p"), &[]).unwrap(), ["/p"]);
        assert_eq!(r(Some(""), &[]), Err(PlanError::NoCommand));
        assert_eq!(
            resolve_command(None, &[], &ImageConfig::default()),
            Err(PlanError::NoCommand)
        );
    }

    #[test]
    fn loader_variables_are_refused_from_either_environment() {
        assert_eq!(
            check_loader_environment(&["PATH=/bin".into(), "LD_LIBRARY_PATH=/x".into()], &[]),
            Ok(())
        );
        assert_eq!(
            check_loader_environment(&["LD_PRELOAD=/evil.so".into()], &[]),
            Err(PlanError::LoaderVariable("LD_PRELOAD".into()))
        );
        assert_eq!(
            check_loader_environment(&["LD_TRACE_LOADED_OBJECTS".into()], &[]),
            Err(PlanError::LoaderVariable("LD_TRACE_LOADED_OBJECTS".into()))
        );
        assert_eq!(
            check_loader_environment(&[], &[("LD_AUDIT".into(), String::new())]),
            Err(PlanError::LoaderVariable("LD_AUDIT".into()))
        );
        assert_eq!(
            check_loader_environment(&["GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2".into()], &[]),
            Err(PlanError::LoaderVariable("GLIBC_TUNABLES".into()))
        );
    }
}
