//! The host of a persistent sandbox: the supervisor process that keeps it, serves
//! its exec channel and records each command it starts.
//!
//! [`create`] starts the session as `sandbox run` would (the same plan, layers,
//! record, tracer, mediator and control channel), with init serving commands instead
//! of running one. [`Host::serve`] then waits for the sandbox to end — `sandbox stop`,
//! `vectraguard stop`, or the idle time-out — and completes the record. Meanwhile each
//! connection to `exec.sock` starts one command: its output is relayed into the
//! record and on to the client's descriptors, and its start and end are `command`
//! events; the tracer records every program it executes, as for any session.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow};
use vg_records::Event;
use vg_records::event::kind::COMMAND;
use vg_sandbox::spawner::{SpawnCommand, SpawnError, SpawnStdio, Spawner};
use vg_sandbox::{Stopper, Termination};

use super::protocol::{ClientLine, EXEC_SOCKET, ExecRequest, HostLine, MAX_REQUEST, VERSION};
use crate::exit::{Error, Outcome};
use crate::plan::Plan;
use crate::record::Recorder;
use crate::running::Running;

/// How long a command's last output may take to be relayed after it ended; past it
/// (a process it left running holds its stdout) the client is answered anyway.
const OUTPUT_GRACE: Duration = Duration::from_millis(250);

/// What every command of the sandbox starts from, and its limits.
struct Base {
    env: Vec<(String, String)>,
    workdir: PathBuf,
    /// `--timeout`, for each command.
    timeout: Option<Duration>,
    kill_grace: Duration,
    /// The uid owning the session's folder: with root, the only one let in.
    owner: u32,
    /// Why `sandbox exec -t` is refused on this backend (`None`: it is served).
    no_terminal: Option<&'static str>,
}

/// Why a backend's persistent sandbox cannot give a command a terminal (pure):
/// gVisor's commands start through `runsc exec`, whose terminal would be runsc's
/// host terminal, which its programs do not take for one of theirs (no name under
/// `/dev/pts`, not a controlling terminal); our relay inside serves `sandbox run -t`
/// only. The native sandbox's and a container's init make one of their devpts.
fn terminal_refusal(backend: vg_policy::Backend) -> Option<&'static str> {
    match backend {
        vg_policy::Backend::Gvisor => Some(
            "a terminal (-t) is not available in a gvisor persistent sandbox yet; run the command without -t",
        ),
        vg_policy::Backend::Native | vg_policy::Backend::Docker | vg_policy::Backend::Podman => {
            None
        }
    }
}

/// Commands running, and when the last one ended: what the idle time-out watches.
struct Activity {
    running: AtomicUsize,
    since: Mutex<Instant>,
}

impl Activity {
    fn begin(self: &Arc<Self>) -> ActiveGuard {
        self.running.fetch_add(1, Ordering::SeqCst);
        ActiveGuard(Arc::clone(self))
    }

    /// How long nothing has run, or `None` while something does.
    fn idle_for(&self) -> Option<Duration> {
        (self.running.load(Ordering::SeqCst) == 0).then(|| {
            self.since
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .elapsed()
        })
    }
}

struct ActiveGuard(Arc<Activity>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        *self.0.since.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What starts the sandbox's commands: its init (natively, a container's init), or
/// `runsc exec` (gVisor).
enum Starter {
    Init(Spawner),
    Gvisor(super::gvisor::Starter),
}

/// A command one of them started.
enum Started {
    Init(vg_sandbox::spawner::Child),
    Gvisor(super::gvisor::Started),
}

/// Signals a [`Started`] command from any thread.
#[derive(Clone)]
enum Signaller {
    Init(vg_sandbox::spawner::Signaller),
    Gvisor(super::gvisor::Signaller),
}

impl Starter {
    fn spawn(&self, command: SpawnCommand) -> Result<Started, SpawnError> {
        match self {
            Starter::Init(spawner) => spawner.spawn(command).map(Started::Init),
            Starter::Gvisor(starter) => match command.stdio {
                SpawnStdio::Fds(fds) => starter
                    .spawn(&command.argv, &command.env, &command.cwd, fds)
                    .map(Started::Gvisor),
                SpawnStdio::Terminal(_) => Err(SpawnError::Usage(
                    "a terminal (-t) is not available in a gvisor persistent sandbox".into(),
                )),
            },
        }
    }
}

impl Started {
    fn id(&self) -> u64 {
        match self {
            Started::Init(child) => child.id,
            Started::Gvisor(started) => started.id,
        }
    }

    fn pid(&self) -> i32 {
        match self {
            Started::Init(child) => child.pid,
            Started::Gvisor(started) => started.pid,
        }
    }

    fn terminal(&self) -> Option<&OwnedFd> {
        match self {
            Started::Init(child) => child.terminal.as_ref(),
            Started::Gvisor(_) => None,
        }
    }

    fn signaller(&self) -> Signaller {
        match self {
            Started::Init(child) => Signaller::Init(child.signaller()),
            Started::Gvisor(started) => Signaller::Gvisor(started.signaller()),
        }
    }

    fn wait(self) -> Option<Termination> {
        match self {
            Started::Init(child) => child.wait(),
            Started::Gvisor(started) => started.wait(),
        }
    }
}

impl Signaller {
    fn signal(&self, signal: i32) -> std::io::Result<()> {
        match self {
            Signaller::Init(s) => s.signal(signal),
            Signaller::Gvisor(s) => s.signal(signal),
        }
    }
}

/// Everything a connection needs.
struct Shared {
    base: Base,
    starter: Starter,
    recorder: Recorder,
    activity: Arc<Activity>,
}

/// A running persistent sandbox.
pub struct Host {
    running: Running,
    socket: PathBuf,
    stopping: Arc<AtomicBool>,
}

/// Starts the persistent sandbox `plan` describes (its request was `persistent`);
/// returns once it can start commands. With `idle_timeout`, it stops itself after
/// that long with no command running.
pub fn create(plan: Plan, idle_timeout: Option<Duration>) -> Result<Host, Error> {
    if !plan.spec.persistent {
        return Err(anyhow!("internal: a persistent sandbox needs a persistent plan").into());
    }
    let no_terminal = terminal_refusal(plan.backend);
    let base_env = plan.spec.env.clone();
    let workdir = plan.spec.workdir.clone();
    let (timeout, kill_grace) = (plan.limits.timeout, plan.limits.kill_grace);
    let mut running = crate::start::start(plan)?;
    let id = running.id().unwrap_or_default().to_owned();
    // Every layer must be in place before anyone is told the sandbox is ready: a
    // layer that failed ends the session, and its error is the answer.
    if running.state().started != Some(true) {
        return Err(match running.wait() {
            Err(e) => e,
            Ok(_) => Error::from(anyhow!("the sandbox ended before it was ready")).in_session(&id),
        });
    }
    let in_session = |e: anyhow::Error| Error::from(e).in_session(&id);
    let stop_now = |running: &Running| {
        let _ = running.stopper().stop(true);
    };
    let recorder = running
        .recorder()
        .ok_or_else(|| anyhow!("internal: a persistent sandbox is always recorded"))
        .map_err(in_session)?;
    let starter = match running.gvisor_exec() {
        Some((target, keeper)) => {
            let starter = super::gvisor::Starter::new(target, keeper, recorder.clone());
            Some(starter.wait_running().map(|()| Starter::Gvisor(starter)))
        }
        None => running.spawner().map(|spawner| spawner.map(Starter::Init)),
    };
    let starter = match starter {
        Some(Ok(starter)) => starter,
        Some(Err(e)) => {
            stop_now(&running);
            return Err(in_session(anyhow!("cannot start serving commands: {e}")));
        }
        None => {
            stop_now(&running);
            return Err(in_session(anyhow!(
                "internal: the sandbox does not serve commands"
            )));
        }
    };
    let dir = recorder.dir().to_owned();
    let owner = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&dir).map(|m| m.uid()).unwrap_or(0)
    };
    let socket = dir.join(EXEC_SOCKET);
    let listener = match bind(&socket) {
        Ok(listener) => listener,
        Err(e) => {
            stop_now(&running);
            return Err(in_session(e));
        }
    };
    let activity = Arc::new(Activity {
        running: AtomicUsize::new(0),
        since: Mutex::new(Instant::now()),
    });
    let context = Arc::new(Shared {
        base: Base {
            env: base_env,
            workdir,
            timeout,
            kill_grace,
            owner,
            no_terminal,
        },
        starter,
        recorder,
        activity: Arc::clone(&activity),
    });
    let stopping = Arc::new(AtomicBool::new(false));
    let accepting = Arc::clone(&stopping);
    std::thread::Builder::new()
        .name("vg-exec-accept".into())
        .spawn(move || accept(&listener, &context, &accepting))
        .map_err(|e| in_session(anyhow!("cannot start the exec channel's thread: {e}")))?;
    if let Some(idle) = idle_timeout {
        let stopper = running.stopper();
        let recorder = running.recorder();
        let done = Arc::clone(&stopping);
        std::thread::Builder::new()
            .name("vg-idle".into())
            .spawn(move || watch_idle(&activity, idle, &stopper, recorder.as_ref(), &done))
            .map_err(|e| in_session(anyhow!("cannot start the idle timer's thread: {e}")))?;
    }
    Ok(Host {
        running,
        socket,
        stopping,
    })
}

impl Host {
    /// The session's id.
    pub fn id(&self) -> &str {
        self.running.id().unwrap_or_default()
    }

    /// The host pid of the sandbox's init.
    pub fn pid(&self) -> i32 {
        self.running.pid()
    }

    /// Serves commands until the sandbox is stopped, then completes the record.
    pub fn serve(self) -> Result<Outcome, Error> {
        let Host {
            running,
            socket,
            stopping,
        } = self;
        let outcome = running.wait();
        stopping.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then returns; the socket goes with it.
        let _ = vg_control::short_path::with_socket_path(&socket, |p| UnixStream::connect(p));
        let _ = std::fs::remove_file(&socket);
        outcome
    }
}

/// Makes `exec.sock` in the session's 0700 folder, readable and writable by its
/// owner only.
fn bind(path: &Path) -> anyhow::Result<UnixListener> {
    let listener = vg_control::short_path::with_socket_path(path, |p| UnixListener::bind(p))
        .with_context(|| format!("exec channel: cannot create {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("exec channel: cannot restrict {}", path.display()))?;
    Ok(listener)
}

fn accept(listener: &UnixListener, context: &Arc<Shared>, stopping: &AtomicBool) {
    for stream in listener.incoming() {
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else {
            continue;
        };
        let context = Arc::clone(context);
        let _ = std::thread::Builder::new()
            .name("vg-exec".into())
            .spawn(move || serve_client(stream, &context));
    }
}

fn watch_idle(
    activity: &Activity,
    idle: Duration,
    stopper: &Stopper,
    recorder: Option<&Recorder>,
    done: &AtomicBool,
) {
    let tick = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(5));
    while !done.load(Ordering::SeqCst) {
        std::thread::sleep(tick);
        if activity.idle_for().is_some_and(|quiet| quiet >= idle) {
            if let Some(recorder) = recorder {
                recorder.event(Event::new(COMMAND).with("event", "idle-stop").with(
                    "idle_ms",
                    u64::try_from(idle.as_millis()).unwrap_or(u64::MAX),
                ));
            }
            let _ = stopper.stop(false);
            return;
        }
    }
}

fn send(stream: &UnixStream, line: &HostLine) {
    if let Ok(mut text) = serde_json::to_string(line) {
        text.push('\n');
        let _ = (&*stream).write_all(text.as_bytes());
    }
}

fn refuse(stream: &UnixStream, message: impl Into<String>) {
    send(
        stream,
        &HostLine::Error {
            message: message.into(),
            code: crate::exit::EXIT_FAILURE,
        },
    );
}

/// Reads the request line and the descriptors sent with it.
fn read_request(stream: &UnixStream) -> Result<(ExecRequest, Vec<OwnedFd>, Vec<u8>), String> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut line = Vec::new();
    let mut fds = Vec::new();
    loop {
        let (n, got) = vg_sandbox::fdpass::recv(stream.as_fd(), &mut buf)
            .map_err(|e| format!("cannot read the request: {e}"))?;
        fds.extend(got);
        if n == 0 {
            return Err("the client hung up before its request".into());
        }
        line.extend_from_slice(&buf[..n]);
        if let Some(end) = line.iter().position(|b| *b == b'\n') {
            let rest = line.split_off(end + 1);
            let request: ExecRequest =
                serde_json::from_slice(&line).map_err(|e| format!("malformed request: {e}"))?;
            if request.v != VERSION {
                return Err(format!(
                    "this sandbox speaks version {VERSION} of the exec channel, not {}",
                    request.v
                ));
            }
            return Ok((request, fds, rest));
        }
        if line.len() > MAX_REQUEST {
            return Err(format!("the request is over {MAX_REQUEST} bytes"));
        }
    }
}

fn serve_client(stream: UnixStream, context: &Shared) {
    let base = &context.base;
    let peer = match vg_control::peer::peer_of(&stream) {
        Ok(peer) if peer.uid == base.owner || peer.uid == 0 => peer,
        _ => return refuse(&stream, "not permitted: only the sandbox's owner and root"),
    };
    let (request, fds, rest) = match read_request(&stream) {
        Ok(got) => got,
        Err(message) => return refuse(&stream, message),
    };
    let Ok::<[OwnedFd; 3], _>([stdin, stdout, stderr]) = fds.try_into() else {
        return refuse(
            &stream,
            "a request carries exactly three descriptors: stdin, stdout, stderr",
        );
    };
    if request.argv.is_empty() {
        return refuse(&stream, "no command to run");
    }
    if let (Some(_), Some(why)) = (request.tty, base.no_terminal) {
        return refuse(&stream, why);
    }
    let _active = context.activity.begin();
    let mut env = base.env.clone();
    for (key, value) in &request.env {
        env.retain(|(k, _)| k != key);
        env.push((key.clone(), value.clone()));
    }
    let cwd = request
        .cwd
        .clone()
        .map_or_else(|| base.workdir.clone(), PathBuf::from);
    let (stdin, kind) = stdin_kind(stdin);
    if let Some(why) = stdin_refusal(kind) {
        return refuse(&stream, why);
    }
    // The sandbox never holds a terminal of the host: a client's terminal stdin is
    // relayed by the client through a pipe, and refused here otherwise.
    let stdin = if vg_sandbox::terminal::is_terminal(&stdin) {
        match std::fs::File::open("/dev/null") {
            Ok(null) => OwnedFd::from(null),
            Err(e) => return refuse(&stream, format!("cannot open /dev/null: {e}")),
        }
    } else if stdin_relayed(kind) && request.tty.is_none() {
        // Copied until the file ends or the command's side is closed (EPIPE).
        let (from_host, to_command) = match std::io::pipe() {
            Ok(pipe) => pipe,
            Err(e) => return refuse(&stream, format!("cannot create the input pipe: {e}")),
        };
        let spawned = std::thread::Builder::new()
            .name("vg-exec-stdin".into())
            .spawn(move || copy(stdin, to_command.into()));
        if let Err(e) = spawned {
            return refuse(&stream, format!("cannot start the input relay: {e}"));
        }
        from_host.into()
    } else {
        stdin
    };
    let (stdio, pipes, keys) = if let Some((rows, cols)) = request.tty {
        (SpawnStdio::Terminal(size(rows, cols)), None, Some(stdin))
    } else {
        let pipes = vg_sandbox::output_pipe().and_then(|out| Ok((out, vg_sandbox::output_pipe()?)));
        let ((out_r, out_w), (err_r, err_w)) = match pipes {
            Ok(p) => p,
            Err(e) => return refuse(&stream, format!("cannot create the output pipes: {e}")),
        };
        (
            SpawnStdio::Fds([stdin, out_w.into(), err_w.into()]),
            Some((out_r, err_r)),
            None,
        )
    };
    let child = match context.starter.spawn(SpawnCommand {
        argv: request.argv.clone(),
        env,
        cwd: cwd.clone(),
        stdio,
    }) {
        Ok(child) => child,
        Err(e) => {
            let (message, code) = match &e {
                SpawnError::Failed(io) => (
                    format!("{}: {io}", request.argv[0]),
                    Termination::ExecFailed(io.raw_os_error().unwrap_or(libc::ENOENT)).exit_code(),
                ),
                other => (other.to_string(), crate::exit::EXIT_FAILURE),
            };
            context.recorder.event(
                Event::new(COMMAND)
                    .with("event", "failed")
                    .with("argv", request.argv.clone())
                    .with("cwd", cwd.display().to_string())
                    .with("error", message.clone()),
            );
            return send(&stream, &HostLine::Error { message, code });
        }
    };
    context.recorder.event(
        Event::new(COMMAND)
            .with("event", "started")
            .with("request", child.id())
            .with("pid", child.pid())
            .with("argv", request.argv.clone())
            .with("cwd", cwd.display().to_string())
            .with("tty", request.tty.is_some())
            .with("by_uid", peer.uid)
            .with("by_pid", peer.pid),
    );
    let mut relays = crate::record::Relays::default();
    let terminal = child.terminal().and_then(|m| m.try_clone().ok());
    match (pipes, &terminal) {
        (Some((out_r, err_r)), _) => {
            relays = context
                .recorder
                .relay_output(out_r, err_r, [stdout, stderr]);
        }
        (None, Some(master)) => {
            // Sized by init before the command started (`SpawnStdio::Terminal`).
            if let (Some(_), Ok(to_master)) = (request.tty, master.try_clone()) {
                relays = context.recorder.relay_terminal(to_master, stdout);
                // The client's keys arrive on a pipe; the thread ends with the client.
                if let (Some(keys), Ok(to_master)) = (keys, master.try_clone()) {
                    let _ = std::thread::Builder::new()
                        .name("vg-exec-input".into())
                        .spawn(move || copy(keys, to_master));
                }
            }
        }
        (None, None) => {}
    }
    send(
        &stream,
        &HostLine::Started {
            id: child.id(),
            pid: child.pid(),
        },
    );
    // The client's signals and window sizes; its hangup is the terminal's (SIGHUP).
    let signaller = child.signaller();
    if let Ok(reader) = stream.try_clone() {
        let master = terminal.as_ref().and_then(|m| m.try_clone().ok());
        let signaller = signaller.clone();
        let _ = std::thread::Builder::new()
            .name("vg-exec-client".into())
            .spawn(move || client_lines(reader, &rest, &signaller, master.as_ref()));
    }
    let timed_out = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicBool::new(false));
    let asked = request.timeout_ms.map(Duration::from_millis);
    let limit = match (asked, base.timeout) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    if let Some(limit) = limit {
        let (timed_out, finished) = (Arc::clone(&timed_out), Arc::clone(&finished));
        let grace = base.kill_grace;
        let signaller = signaller.clone();
        let _ = std::thread::Builder::new()
            .name("vg-exec-timeout".into())
            .spawn(move || {
                if sleep_unless(limit, &finished) {
                    return;
                }
                timed_out.store(true, Ordering::SeqCst);
                let _ = signaller.signal(libc::SIGTERM);
                if !sleep_unless(grace, &finished) {
                    let _ = signaller.signal(libc::SIGKILL);
                }
            });
    }
    let id = child.id();
    let termination = child.wait();
    finished.store(true, Ordering::SeqCst);
    drop(terminal);
    relays.finish(OUTPUT_GRACE);
    let timed_out = timed_out.load(Ordering::SeqCst);
    let line = match termination {
        Some(Termination::ExecFailed(errno)) => {
            let (message, code) = if errno < 0 {
                (
                    format!(
                        "cannot change to the working directory {}: {}",
                        cwd.display(),
                        std::io::Error::from_raw_os_error(-errno)
                    ),
                    crate::exit::EXIT_FAILURE,
                )
            } else {
                (
                    format!(
                        "{}: {}",
                        request.argv[0],
                        std::io::Error::from_raw_os_error(errno)
                    ),
                    Termination::ExecFailed(errno).exit_code(),
                )
            };
            context.recorder.event(
                Event::new(COMMAND)
                    .with("event", "failed")
                    .with("request", id)
                    .with("exit_code", code)
                    .with("error", message.clone()),
            );
            HostLine::Error { message, code }
        }
        Some(t) => {
            let signal = match t {
                Termination::Signalled(sig) => Some(sig),
                _ => None,
            };
            let code = if timed_out {
                crate::exit::EXIT_TIMEOUT
            } else {
                t.exit_code()
            };
            context.recorder.event(
                Event::new(COMMAND)
                    .with("event", "ended")
                    .with("request", id)
                    .with("exit_code", code)
                    .with("signal", signal)
                    .with("timed_out", timed_out),
            );
            HostLine::Exited {
                code,
                signal,
                timed_out,
            }
        }
        None => HostLine::Error {
            message: "the sandbox was stopped before the command ended".into(),
            code: crate::exit::EXIT_TIMEOUT,
        },
    };
    send(&stream, &line);
}

/// What a client's stdin is, as far as [`stdin_refusal`] and [`stdin_relayed`] care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StdinKind {
    Directory,
    /// A path-only descriptor (`O_PATH`) of anything: it gives no input, only a
    /// name of a host file.
    PathOnly,
    /// A file (or block device) of the host, opened: its bytes are the input.
    File,
    /// A pipe, socket or character device (a terminal is replaced before): passed
    /// as it is.
    Stream,
    /// One whose flags or type could not be read.
    Unknown,
}

/// Why a client's stdin is not passed to the command (pure): a folder of the host
/// (`sandbox exec … < DIR`, or an `O_PATH` descriptor of one) would let the command
/// walk the host's files from it (`/proc/self/fd/0/..`, `openat(0, …)`), which in a
/// container nothing else stops (red team, session 15); a path-only descriptor of a
/// file gives no input but lets the command open the host's file again, for writing
/// too (red team, session 16).
fn stdin_refusal(kind: StdinKind) -> Option<&'static str> {
    match kind {
        StdinKind::Directory => Some(
            "stdin is a folder, which would give the command the host's files from it: redirect a file, or nothing (< /dev/null)",
        ),
        StdinKind::PathOnly => Some(
            "stdin is a path-only (O_PATH) descriptor, which gives no input but would let the command open the host's file again: redirect the file itself, or nothing (< /dev/null)",
        ),
        StdinKind::Unknown => Some(
            "stdin cannot be looked at (its flags or type are unreadable): redirect a file, or nothing (< /dev/null)",
        ),
        StdinKind::File | StdinKind::Stream => None,
    }
}

/// Whether a client's stdin reaches the command through a pipe that the host fills
/// (pure): a host file passed as it is could be opened again through
/// `/proc/self/fd/0` with the command's rights, for writing too, which in a
/// container no Landlock rule stops (red team, session 16). A stream opened again is
/// the same stream.
fn stdin_relayed(kind: StdinKind) -> bool {
    kind == StdinKind::File
}

/// `stdin`, given back, and its kind.
fn stdin_kind(stdin: OwnedFd) -> (OwnedFd, StdinKind) {
    use std::os::unix::fs::FileTypeExt;
    let path_only = vg_sandbox::fdpass::is_path_only(stdin.as_fd());
    let file = std::fs::File::from(stdin);
    let kind = match (path_only, file.metadata()) {
        (Ok(true), _) => StdinKind::PathOnly,
        (Ok(false), Ok(meta)) if meta.is_dir() => StdinKind::Directory,
        (Ok(false), Ok(meta))
            if meta.file_type().is_fifo()
                || meta.file_type().is_socket()
                || meta.file_type().is_char_device() =>
        {
            StdinKind::Stream
        }
        (Ok(false), Ok(_)) => StdinKind::File,
        _ => StdinKind::Unknown,
    };
    (OwnedFd::from(file), kind)
}

fn size(rows: u16, cols: u16) -> vg_sandbox::terminal::Size {
    vg_sandbox::terminal::Size { rows, cols }
}

/// Sleeps `span` unless `stop` is set first (checked often); true if it was.
fn sleep_unless(span: Duration, stop: &AtomicBool) -> bool {
    let end = Instant::now() + span;
    while Instant::now() < end {
        if stop.load(Ordering::SeqCst) {
            return true;
        }
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(50)));
    }
    stop.load(Ordering::SeqCst)
}

fn copy(from: OwnedFd, to: OwnedFd) {
    let mut from = std::fs::File::from(from);
    let mut to = std::fs::File::from(to);
    let _ = std::io::copy(&mut from, &mut to);
}

/// Acts on the client's lines until it hangs up, which hangs up the command.
fn client_lines(
    stream: UnixStream,
    already: &[u8],
    signaller: &Signaller,
    master: Option<&OwnedFd>,
) {
    let act = |line: &[u8]| match serde_json::from_slice::<ClientLine>(line) {
        Ok(ClientLine::Signal { signal }) => {
            let _ = signaller.signal(signal);
        }
        Ok(ClientLine::Resize { rows, cols }) => {
            if let Some(master) = master {
                let _ = vg_sandbox::terminal::set_size(master.as_fd(), size(rows, cols));
            }
        }
        Err(_) => {}
    };
    for line in already.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        act(line);
    }
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) if line.len() > 4096 => break,
            Ok(_) => act(&line),
        }
    }
    let _ = signaller.signal(libc::SIGHUP);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_or_a_path_on_stdin_is_refused_a_file_relayed_a_stream_passed() {
        let why = stdin_refusal(StdinKind::Directory).unwrap_or_default();
        assert!(why.contains("stdin is a folder"), "{why}");
        let why = stdin_refusal(StdinKind::PathOnly).unwrap_or_default();
        assert!(why.contains("path-only (O_PATH)"), "{why}");
        let why = stdin_refusal(StdinKind::Unknown).unwrap_or_default();
        assert!(why.contains("cannot be looked at"), "{why}");
        for passed in [StdinKind::File, StdinKind::Stream] {
            assert_eq!(stdin_refusal(passed), None);
        }
        assert!(stdin_relayed(StdinKind::File));
        assert!(!stdin_relayed(StdinKind::Stream));

        use std::os::unix::fs::OpenOptionsExt;
        let kind_of = |file: std::fs::File| stdin_kind(OwnedFd::from(file)).1;
        assert_eq!(
            kind_of(std::fs::File::open("/").unwrap()),
            StdinKind::Directory
        );
        assert_eq!(
            kind_of(std::fs::File::open("/dev/null").unwrap()),
            StdinKind::Stream
        );
        assert_eq!(
            kind_of(std::fs::File::open("/etc/passwd").unwrap()),
            StdinKind::File
        );
        for path in ["/etc/passwd", "/", "/dev/null"] {
            let path_only = std::fs::File::options()
                .read(true)
                .custom_flags(libc::O_PATH)
                .open(path)
                .unwrap();
            assert_eq!(kind_of(path_only), StdinKind::PathOnly, "{path}");
        }
        let (r, _w) = std::io::pipe().unwrap();
        assert_eq!(stdin_kind(r.into()).1, StdinKind::Stream);
    }

    #[test]
    fn only_gvisor_refuses_a_command_s_terminal() {
        assert!(
            terminal_refusal(vg_policy::Backend::Gvisor)
                .is_some_and(|why| why.contains("without -t"))
        );
        for backend in [
            vg_policy::Backend::Native,
            vg_policy::Backend::Docker,
            vg_policy::Backend::Podman,
        ] {
            assert_eq!(terminal_refusal(backend), None, "{backend}");
        }
    }
}
