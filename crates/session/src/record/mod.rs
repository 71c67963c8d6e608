//! The record of one sandbox session, written while it runs.
//!
//! [`Session::create`] writes `metadata.json` (status `running`) before the sandbox
//! exists. Once it does, [`Session::attach`] starts the threads that feed the record:
//! one relay per output stream (sandbox pipe → log file and the user's terminal) and
//! the exec tracer (seccomp notifications → `commands.log`). [`Session::finish`] waits
//! for them and completes the record with how the session ended.
//!
//! Recording is part of the policy: when a record cannot be written (disk full,
//! folder removed), the sandbox is stopped rather than left running unrecorded.

use std::fs::File;
use std::io::PipeReader;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use vg_records::event::kind::LIMIT_HIT;
use vg_records::{CommandExit, End, Event, Metadata, SessionStore, SessionWriter, Status};
use vg_sandbox::trace;
use vg_sandbox::{Killer, Outcome, SandboxError, Termination};

mod commands;
mod gvisor;
mod held;
mod layers;
pub mod metadata;
pub mod observe;
mod relay;

use crate::limits::OutputCaps;
use commands::CommandsLog;

/// Writes into a running session's record from any thread: what a persistent
/// sandbox's commands print, and its events. A failure to write stops the sandbox,
/// as for every other part of the record. It holds the record weakly: once the
/// session ends, nothing more is written (and the end is not kept waiting).
#[derive(Clone)]
pub struct Recorder {
    shared: std::sync::Weak<Shared>,
    caps: OutputCaps,
    dir: std::path::PathBuf,
    /// gVisor's trace, for a persistent gVisor sandbox's commands.
    gvisor: std::sync::Weak<gvisor::GvisorLog>,
}

impl Recorder {
    /// Relays a command's stdout and stderr into the record (each up to the output
    /// cap) and on to `show` (the client's stdout and stderr). The relays end when the
    /// command's last writer closes its end — which a process it left running may
    /// hold long after it ended: [`Relays::finish`] lets the client go then.
    pub fn relay_output(
        &self,
        stdout: PipeReader,
        stderr: PipeReader,
        show: [std::os::fd::OwnedFd; 2],
    ) -> Relays {
        let mut relays = Relays::default();
        let Some(shared) = self.shared.upgrade() else {
            return relays;
        };
        let [out, err] = show;
        for (pipe, stream, to) in [(stdout, Stream::Stdout, out), (stderr, Stream::Stderr, err)] {
            let client: relay::ClientOutput = Arc::new(Mutex::new(Some(File::from(to))));
            relays.clients.push(Arc::clone(&client));
            let shared = Arc::clone(&shared);
            let cap = self.caps;
            relays.threads.push(std::thread::spawn(move || {
                relay(pipe, stream, &shared, cap, false, ShowTo::Client(client))
            }));
        }
        relays
    }

    /// Relays a command's terminal (its master side) into `stdout.log` and on to
    /// `show`, until the terminal's last user closes it.
    pub fn relay_terminal(
        &self,
        master: std::os::fd::OwnedFd,
        show: std::os::fd::OwnedFd,
    ) -> Relays {
        let mut relays = Relays::default();
        let Some(shared) = self.shared.upgrade() else {
            return relays;
        };
        let cap = self.caps;
        let client: relay::ClientOutput = Arc::new(Mutex::new(Some(File::from(show))));
        relays.clients.push(Arc::clone(&client));
        relays.threads.push(std::thread::spawn(move || {
            relay(
                File::from(master),
                Stream::Stdout,
                &shared,
                cap,
                false,
                ShowTo::Client(client),
            )
        }));
        relays
    }

    /// Appends `event` to `events.jsonl` (and the hash chain).
    pub fn event(&self, event: Event) {
        if let Some(shared) = self.shared.upgrade()
            && let Err(e) = shared.writer.event(event)
        {
            shared.fail("events.jsonl", e);
        }
    }

    /// The session's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A command a persistent gVisor sandbox's host started through `runsc exec`
    /// as `pid` (inside): its lineage is kept from now on (its `exec` line is
    /// gVisor's exec point of the launcher's execve). False when the record has
    /// no gVisor trace. `since` is [`Self::gvisor_mark`] taken before it was
    /// started.
    pub fn gvisor_started(&self, pid: i32, since: u64) -> bool {
        match self.gvisor.upgrade() {
            Some(gvisor) => {
                gvisor.started(pid, since);
                true
            }
            None => false,
        }
    }

    /// What a persistent gVisor sandbox's host takes just before it starts a
    /// command: only the exits reported after it can be that command's (a pid is
    /// used again once gVisor's ran out).
    pub fn gvisor_mark(&self) -> u64 {
        self.gvisor.upgrade().map_or(0, |gvisor| gvisor.mark())
    }

    /// The wait status gVisor's trace points reported for `pid` after `since` (see
    /// [`Self::gvisor_mark`]), waiting up to `wait` for the tracer to read it.
    pub fn gvisor_status(&self, pid: i32, since: u64, wait: std::time::Duration) -> Option<i32> {
        self.gvisor.upgrade()?.status(pid, since, wait)
    }

    /// The live processes the command running as `pid` started, however
    /// reparented since (see `gvisor::Lineage`), as far as the trace points have
    /// been read: `pid` first; none once it ended or without a gVisor trace.
    pub fn gvisor_lineage(&self, pid: i32) -> Vec<i32> {
        self.gvisor
            .upgrade()
            .map_or_else(Vec::new, |gvisor| gvisor.lineage_of(pid))
    }
}

/// The relays of one command of a persistent sandbox.
#[derive(Default)]
pub struct Relays {
    threads: Vec<JoinHandle<()>>,
    clients: Vec<relay::ClientOutput>,
}

impl Relays {
    /// Once the command ended: waits up to `grace` for what it wrote to be relayed,
    /// then lets the client's descriptors go. Relays still held open by processes it
    /// left behind go on recording, unseen.
    pub fn finish(self, grace: std::time::Duration) {
        let end = std::time::Instant::now() + grace;
        while self.threads.iter().any(|t| !t.is_finished()) && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        for client in &self.clients {
            *client
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        }
    }
}

/// How long a container's tracer may go on once its engine client is gone, before
/// the container is ended: the tracer reports the last exits once they are reaped
/// (within milliseconds once the container's PID 1 is gone, which ends the rest).
const ENGINE_TRACER_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Network events written per session; the rest are counted in one last event.
const MAX_NETWORK_EVENTS: u64 = 100_000;

pub use relay::relay_terminal_input;
use relay::{ShowTo, Stream, relay, relay_input};

/// How the sandbox's output reaches us.
pub enum Output {
    /// stdout and stderr pipes.
    Pipes(PipeReader, PipeReader),
    /// A terminal (of the given size, when ours has one): init sends its master (a
    /// container's init, with its listener).
    Tty {
        size: Option<vg_sandbox::terminal::Size>,
        /// A container engine's client's own output (its errors, and our init's
        /// before the command runs): recorded as stderr.
        client: Option<PipeReader>,
    },
}

fn lock(log: &Mutex<CommandsLog>) -> MutexGuard<'_, CommandsLog> {
    log.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// State shared by the threads that write one session's record.
struct Shared {
    writer: Arc<SessionWriter>,
    killer: Killer,
    /// The first recording failure; once set, the sandbox is being stopped.
    broken: OnceLock<String>,
    /// The approval prompt on the user's terminal, which the relays make way for.
    prompt: Option<Arc<crate::prompt::TerminalPrompt>>,
}

impl Shared {
    /// A record could not be written: say so once and stop the sandbox, since it
    /// must not go on unrecorded.
    fn fail(&self, what: &str, error: impl std::fmt::Display) {
        let error = error.to_string();
        self.stop(
            format!("cannot write the session record ({what}: {error})"),
            &error,
        );
    }

    /// A layer of the sandbox could not be put in place before its command ran:
    /// said once, the sandbox stopped (nothing of the command's has run).
    fn fail_layer(&self, layer: &str, error: impl std::fmt::Display) {
        let error = error.to_string();
        self.stop(format!("{layer}: {error}"), &error);
    }

    fn stop(&self, message: String, error: &str) {
        if self.broken.set(message.clone()).is_ok() {
            crate::diag::error(format_args!("{message}; stopping the sandbox"));
            if disk_full(error) {
                crate::diag::note(format_args!(
                    "the disk holding {} is full: the record ends where it filled (`vectraguard logs verify` reports it as interrupted, everything before verifies); free space there or set VECTRAGUARD_HOME to a disk with room",
                    self.writer.dir().display()
                ));
            }
            let _ = self.killer.kill();
        }
    }
}

/// Whether a write error's message is the kernel's for a full disk or quota (the
/// errors reach [`Shared::fail`] as text from several crates).
fn disk_full(error: &str) -> bool {
    [libc::ENOSPC, libc::EDQUOT]
        .into_iter()
        .any(|e| error.contains(&std::io::Error::from_raw_os_error(e).to_string()))
}

/// What the tracer's thread leaves: the commands it logged and what it observed.
type Traced = (Arc<Mutex<CommandsLog>>, Option<observe::Observed>);

/// What a tracer serves: the sandbox's exec listener, the BPF recorder when execs go
/// there, and the sandbox's init when the sandbox ends with it (not a container's).
struct Traceable {
    listener: std::os::fd::OwnedFd,
    recorder: Option<vg_sandbox::exectrace::ExecRecorder>,
    init: Option<Killer>,
}

/// The tracer's thread: serves the sandbox's exec listener into `commands.log` (and
/// the observer and the gate, when there are), until every sandboxed process is gone.
fn serve_listener(
    Traceable {
        listener,
        recorder,
        init,
    }: Traceable,
    shared: &Arc<Shared>,
    gate: Option<Arc<crate::gate::Gate>>,
    mut observer: Option<Box<observe::Observer>>,
    caps: OutputCaps,
    exits: trace::Exits,
) -> (Traced, Option<vg_sandbox::exectrace::ExecRecorder>) {
    let log = CommandsLog::new(caps.shown);
    let log = Arc::new(Mutex::new(match gate {
        Some(_) => log,
        None => log.batching(),
    }));
    let recorder = trace::serve_with(
        listener,
        recorder,
        init,
        gate.is_some(),
        exits,
        |event| {
            // File accesses and refused calls were answered already.
            if let Some(observer) = observer.as_mut()
                && observer.observe(shared, &event)
            {
                return trace::Verdict::Continue;
            }
            match &gate {
                Some(gate) => held::screen(gate, &log, shared, event),
                None => lock(&log).record(shared, event),
            }
        },
        // What can wait is written and chained in batches, while the sandbox runs or
        // once it is idle.
        |moment| lock(&log).between(shared, moment),
    );
    lock(&log).flush(shared);
    let observed = observer.map(|o| o.finish(shared));
    ((log, observed), recorder)
}

/// A container's exec listener still to be handed over (`vg_sandbox::engine_init`).
pub struct EngineTrace {
    pub handshake: vg_sandbox::engine_init::Handshake,
    /// The container's user as the host sees it, where known (see
    /// `vg_sandbox::engine_init::check_peer`).
    pub expected_uid: Option<u32>,
    /// Ends the container, for a session whose engine client is gone while the
    /// container still runs (its processes would keep the tracer serving).
    pub end_container: Box<dyn FnOnce() + Send>,
    /// The mediated network's interface, made in the container's network namespace
    /// before the init's go (`vg_sandbox::engine_net`).
    pub tun: Option<vg_sandbox::TunConfig>,
    /// A persistent container's: where its init's command channel goes once
    /// handed over (or why it was not).
    pub spawner: Option<SpawnerSender>,
}

/// A persistent container's init's command channel and the init's pid (whose
/// terminals must be of its devpts), or why it was not handed over.
pub type SpawnerHandover = Result<(std::os::fd::OwnedFd, i32), String>;

/// The sending end of [`EngineTrace::spawner`].
pub type SpawnerSender = std::sync::mpsc::SyncSender<SpawnerHandover>;

/// The receiving end of [`EngineTrace::spawner`].
pub type SpawnerChannel = std::sync::mpsc::Receiver<SpawnerHandover>;

/// The sandbox's terminal's master side, for resizing: set once the terminal is
/// there (natively at once; a container's once its init handed it over).
pub type TerminalSlot = Arc<OnceLock<File>>;

/// How long a container's init may take to hand its terminal over, from the
/// session's start (the engine starting the container included): past it, the
/// session is stopped rather than left with the user's terminal in raw mode and
/// nothing to type into.
const ENGINE_TERMINAL_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

impl std::fmt::Debug for EngineTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineTrace")
            .field("handshake", &self.handshake)
            .field("expected_uid", &self.expected_uid)
            .field("tun", &self.tun)
            .finish_non_exhaustive()
    }
}

/// The mediated network of a container, before its init's go: the interface made
/// in the container's network namespace, the mediator started on it. Fails closed:
/// the init gets no go, so nothing runs in the container.
fn engine_network(
    peer: &vg_sandbox::engine_init::Peer<'_>,
    tun: vg_sandbox::TunConfig,
    start: Option<
        impl FnOnce(std::os::fd::OwnedFd) -> Result<vg_netstack::Mediator, vg_netstack::Error>,
    >,
    slot: &Mutex<Option<vg_netstack::Mediator>>,
) -> Result<(), String> {
    let Some(start) = start else {
        return Err("no network policy came with the mediated network".into());
    };
    let fd = vg_sandbox::engine_net::attach_tun(peer.socket, peer.pid, tun).map_err(|e| {
        format!(
            "cannot attach it to the container ({e}), so nothing was run; use --network none, or --backend native or gvisor"
        )
    })?;
    let mediator = start(fd).map_err(|e| format!("cannot start the network mediator: {e}"))?;
    *slot_lock(slot) = Some(mediator);
    Ok(())
}

/// The mediator's slot, also after a thread panicked holding it.
fn slot_lock(
    slot: &Mutex<Option<vg_netstack::Mediator>>,
) -> std::sync::MutexGuard<'_, Option<vg_netstack::Mediator>> {
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The size a terminal gets when ours has none (our stdin is not a terminal).
const DEFAULT_TERMINAL_SIZE: vg_sandbox::terminal::Size =
    vg_sandbox::terminal::Size { rows: 24, cols: 80 };

/// A terminal's record and handles, before its relays start: `tty.cast` begun, the
/// prompt's redraw and the resizer (in `slot`) set. Returns the descriptor our input
/// relay writes to; `None` (the sandbox being stopped) when something failed.
fn open_terminal(
    shared: &Arc<Shared>,
    master: &File,
    size: vg_sandbox::terminal::Size,
    slot: &OnceLock<File>,
) -> Option<File> {
    let term = std::env::var("TERM").unwrap_or_else(|_| "xterm-256color".into());
    if let Err(e) = shared
        .writer
        .start_cast(size.cols, size.rows, &[("TERM", term.as_str())])
    {
        shared.fail("tty.cast", e);
    }
    let (Ok(input), Ok(resizer)) = (master.try_clone(), master.try_clone()) else {
        shared.fail("the terminal", "cannot duplicate its descriptor");
        return None;
    };
    if let Some(prompt) = &shared.prompt
        && let Ok(redraw) = master.try_clone()
    {
        prompt.set_master(redraw);
    }
    let _ = slot.set(resizer);
    Some(input)
}

/// A container's terminal: waits for its init to hand it over (the tracer's thread
/// passes it on, already sized), then relays it as the native one, its output on
/// this thread. No terminal within [`ENGINE_TERMINAL_WAIT`] stops the session; none
/// at all (the hand-over failed, and the tracer recorded why) ends the thread.
fn engine_terminal(
    from: &std::sync::mpsc::Receiver<std::os::fd::OwnedFd>,
    shared: &Arc<Shared>,
    (size, follow): (vg_sandbox::terminal::Size, bool),
    caps: OutputCaps,
    slot: &OnceLock<File>,
) {
    let master = match from.recv_timeout(ENGINE_TERMINAL_WAIT) {
        Ok(master) => File::from(master),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            shared.fail_layer(
                "the terminal",
                format!(
                    "the container's init handed over no terminal within {} s (the engine is slow or stuck); try again, or run without -t",
                    ENGINE_TERMINAL_WAIT.as_secs()
                ),
            );
            return;
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
    };
    let Some(input) = open_terminal(shared, &master, size, slot) else {
        return;
    };
    // Our terminal resized while the container started had no terminal to pass its
    // size to (the resizer's slot was empty until now): the size it has now (the
    // tracer's thread gave it before the go; copied again for a resize since, and
    // recorded). One resized from here on is passed on by the resizer (red team,
    // session 16).
    if follow
        && let Ok(now) = vg_sandbox::terminal::copy_size(std::io::stdin().as_fd(), master.as_fd())
        && now != size
        && let Err(e) = shared.writer.cast_resize(now.cols, now.rows)
    {
        shared.fail("tty.cast", e);
    }
    // Not joined: it sits in read(2) on our stdin until we exit.
    let in_shared = Arc::downgrade(shared);
    std::thread::spawn(move || relay_input(input, &in_shared, caps.recorded));
    relay(master, Stream::Stdout, shared, caps, true, ShowTo::Ours);
}

/// A session being recorded.
pub struct Session {
    writer: Arc<SessionWriter>,
    shared: Option<Arc<Shared>>,
    relays: Vec<JoinHandle<()>>,
    tracer: Option<JoinHandle<Option<Traced>>>,
    /// What the native tracer logged, handed over before its thread ends.
    handed: Option<std::sync::mpsc::Receiver<Traced>>,
    /// Watches file accesses and refused system calls (see `observe.rs`), handed to
    /// the tracer by [`Session::attach`].
    observer: Option<Box<observe::Observer>>,
    /// Relays and records the sandbox's network in `--network allow` mode; started
    /// in [`Session::attach`], or for a container on the tracer's thread once its
    /// interface is made.
    mediator: Arc<Mutex<Option<vg_netstack::Mediator>>>,
    /// The HTTPS inspector the mediator hands connections to, shut down (its last
    /// requests recorded) before the record is finished.
    inspector: Option<Arc<vg_http::Inspector>>,
    /// Network events past [`MAX_NETWORK_EVENTS`], not written.
    network_events_dropped: Arc<std::sync::atomic::AtomicU64>,
    /// Every layer was in place and the command was started.
    started: bool,
    /// The session's control socket, removed when the session ends.
    control: Option<Box<vg_control::ControlServer>>,
    /// The approval gate, with `--ask`.
    gate: Option<Arc<crate::gate::Gate>>,
    /// Its prompt on the user's terminal, when there is one.
    prompt: Option<Arc<crate::prompt::TerminalPrompt>>,
    /// Removes the metadata versions earlier runs kept (`SessionStore::remove_retired`),
    /// joined at the end.
    cleanup: Option<JoinHandle<()>>,
    /// gVisor's trace sink, served by the tracer's thread from [`Session::attach`].
    gvisor_sink: Option<vg_backend::gvisor::trace::Sink>,
    /// Ends that thread's serving once the sandbox is gone.
    gvisor_stop: Option<vg_backend::gvisor::trace::StopHandle>,
    /// What that thread writes, for a persistent gVisor sandbox's commands.
    gvisor_log: Option<Arc<gvisor::GvisorLog>>,
    /// A container's listener hand-over, completed on the tracer's thread.
    engine_handshake: Option<(
        vg_sandbox::engine_init::Handshake,
        Option<u32>,
        Option<SpawnerSender>,
    )>,
    /// The interface to make in the container before its init's go.
    engine_tun: Option<vg_sandbox::TunConfig>,
    /// A container's terminal's relay: joined once the container is gone (see
    /// [`Session::finish`]).
    engine_terminal: Option<JoinHandle<()>>,
    /// Ends a hand-over still waiting, and the container, once the session is over.
    engine_stop: Option<(
        vg_sandbox::engine_init::StopHandle,
        Box<dyn FnOnce() + Send>,
    )>,
}

impl Session {
    /// Creates the session folder and its initial metadata (status `running`).
    ///
    /// Starts a thread: call it once the sandbox is spawned (`spawn_in` refuses a
    /// supervisor with threads), as `start.rs` does.
    pub fn create(root: &Path, meta: Metadata) -> Result<Self> {
        let store = SessionStore::open(root).with_context(|| {
            format!(
                "cannot record the session under {}: make the folder writable, or set VECTRAGUARD_HOME to a folder that is",
                root.display()
            )
        })?;
        let writer = store.create(meta).map_err(|e| {
            if e.is_disk_full() {
                anyhow::anyhow!(
                    "the disk holding the session records ({}) is full, so nothing was run: free space there, set VECTRAGUARD_HOME to a folder on a disk with room, or pass --no-record to run without a record",
                    root.display()
                )
            } else {
                anyhow::Error::new(e).context(format!(
                    "cannot create a session record under {}: check free space and permissions",
                    root.display()
                ))
            }
        })?;
        // Freeing the blocks of the versions earlier runs kept can wait for the disk
        // (a synchronous discard): on a thread, while the sandbox builds itself, not
        // on the way to the command.
        let cleanup = std::thread::spawn(move || store.remove_retired());
        Ok(Self {
            writer: Arc::new(writer),
            shared: None,
            relays: Vec::new(),
            tracer: None,
            handed: None,
            observer: None,
            mediator: Arc::new(Mutex::new(None)),
            inspector: None,
            network_events_dropped: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            started: false,
            control: None,
            gate: None,
            gvisor_sink: None,
            gvisor_stop: None,
            gvisor_log: None,
            engine_handshake: None,
            engine_tun: None,
            engine_terminal: None,
            engine_stop: None,
            prompt: None,
            cleanup: Some(cleanup),
        })
    }

    /// Who denied the exec of `pid` (the command's), when the approval gate did.
    pub fn gate_denial(&self, pid: i32) -> Option<String> {
        self.gate.as_ref().and_then(|gate| gate.denial_of(pid))
    }

    /// Sets up the approval gate: its `approval` events go to this record. Called
    /// before [`Session::attach`], whose tracer consults it.
    pub fn gate(
        &mut self,
        plan: crate::gate::Plan,
        prompt: Option<Arc<crate::prompt::TerminalPrompt>>,
    ) -> Result<()> {
        let gate = Arc::new(
            crate::gate::Gate::new(plan, &self.writer)
                .context("cannot start the approval gate's timer thread")?,
        );
        if let Some(prompt) = &prompt {
            prompt
                .serve(gate.broker(), self.writer.id().to_owned())
                .context("cannot start the approval prompt's thread")?;
        }
        self.gate = Some(gate);
        self.prompt = prompt;
        Ok(())
    }

    /// Has the tracer report refused accesses (and, learning, every access) to
    /// `observer`. Called before [`Session::attach`].
    pub fn observe(&mut self, observer: observe::Observer) {
        self.observer = Some(Box::new(observer));
    }

    /// The session's folder.
    pub fn dir(&self) -> &Path {
        self.writer.dir()
    }

    /// The session's id (its folder's name).
    pub fn id(&self) -> &str {
        self.writer.id()
    }

    /// Init reported every layer in place and started the command.
    pub fn started(&self) -> bool {
        self.started
    }

    /// Why the record could not be written, once it could not: the sandbox is then
    /// being stopped.
    pub fn failure(&self) -> Option<String> {
        self.shared.as_ref().and_then(|s| s.broken.get().cloned())
    }

    /// A persistent sandbox's way into this record (once attached): each command's
    /// output and events. `caps` cap each command's output.
    pub fn recorder(&self, caps: OutputCaps) -> Option<Recorder> {
        let shared = self.shared.as_ref()?;
        Some(Recorder {
            shared: Arc::downgrade(shared),
            caps,
            dir: shared.writer.dir().to_owned(),
            gvisor: self
                .gvisor_log
                .as_ref()
                .map_or_else(std::sync::Weak::new, Arc::downgrade),
        })
    }

    /// Starts recording a running sandbox: the output relays (and, with a terminal,
    /// the input relay), the layers it reports, and (when `trace` is set) every
    /// program it executes; serves its control channel (`control.sock`). With a
    /// terminal, returns its master side, for resizing.
    /// The execs and exits of a gVisor sandbox come from its trace sink, served from
    /// [`Session::attach`] on the tracer's thread.
    pub fn gvisor_trace(&mut self, sink: vg_backend::gvisor::trace::Sink) {
        self.gvisor_stop = Some(sink.stop_handle());
        self.gvisor_sink = Some(sink);
    }

    /// The execs and exits of a Docker or Podman container come from the listener its
    /// init hands over, served from [`Session::attach`] on the tracer's thread.
    pub fn engine_trace(&mut self, engine: EngineTrace) -> Result<()> {
        let EngineTrace {
            handshake,
            expected_uid,
            end_container,
            tun,
            spawner,
        } = engine;
        self.engine_tun = tun;
        let stop = handshake
            .stop_handle()
            .context("cannot keep a handle on the exec listener's socket")?;
        self.engine_stop = Some((stop, end_container));
        self.engine_handshake = Some((handshake, expected_uid, spawner));
        Ok(())
    }

    pub fn attach(
        &mut self,
        sandbox: &mut vg_sandbox::Sandbox,
        output: Output,
        trace: Option<trace::Exits>,
        caps: OutputCaps,
        network: Option<(
            vg_netstack::PolicyHandle,
            Option<crate::notes::Notes>,
            Option<&crate::inspection::Prepared>,
        )>,
        live: Option<std::sync::Arc<crate::control::LiveNetwork>>,
    ) -> Option<TerminalSlot> {
        let shared = Arc::new(Shared {
            writer: Arc::clone(&self.writer),
            killer: sandbox.killer(),
            broken: OnceLock::new(),
            prompt: self.prompt.clone(),
        });
        // Init sends the TUN interface, the exec listener, then the terminal, then
        // says it is ready.
        let mut start_mediator = network.map(|(policy, mut notes, inspection)| {
            // The inspector's requests, under their own cap.
            let interceptor = inspection.map(|inspection| {
                let events = Arc::clone(&shared);
                let dropped = Arc::clone(&self.network_events_dropped);
                let mut written: u64 = 0;
                inspection.record_to(Box::new(move |event| {
                    if written >= MAX_NETWORK_EVENTS {
                        dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        return;
                    }
                    written += 1;
                    if let Err(e) = events.writer.event(crate::inspection::to_record(event)) {
                        events.fail("events.jsonl", e);
                    }
                }));
                self.inspector = Some(Arc::clone(&inspection.inspector));
                Arc::clone(&inspection.inspector) as Arc<dyn vg_netstack::intercept::Interceptor>
            });
            let events = Arc::clone(&shared);
            let dropped = Arc::clone(&self.network_events_dropped);
            let mut written: u64 = 0;
            let record = Box::new(move |event: vg_netstack::NetEvent| {
                // On the user's stderr, never in stderr.log.
                if let Some(notes) = notes.as_mut() {
                    notes.show(&event);
                }
                // A sandbox looping on denied lookups must not fill the disk: past the
                // cap, events are only counted (the count is recorded at the end).
                if written >= MAX_NETWORK_EVENTS {
                    dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    return;
                }
                written += 1;
                if let Err(e) = events.writer.event(crate::network::to_record(event)) {
                    events.fail("events.jsonl", e);
                }
            });
            // With --ask, names no rule allows are held for a decision.
            let names = match (&self.gate, &live) {
                (Some(gate), Some(live)) => Some(Box::new(crate::gate::DestinationAsker::new(
                    gate,
                    live,
                    &self.writer,
                    sandbox.pid(),
                ))
                    as Box<dyn vg_netstack::gate::DestinationGate>),
                _ => None,
            };
            move |tun| {
                vg_netstack::Mediator::start_with_gate(tun, policy, record, names, interceptor)
            }
        });
        // What does not need init's descriptors starts now, while init builds the
        // sandbox (the supervisor only waits for it here), instead of between the
        // listener's arrival and the command's first exec, when a short command's
        // start competes with it for the CPU: the output relays (their pipes exist
        // since the spawn; the command's output waits in them), the control channel
        // (binding its socket creates a file), and the tracer's thread, which is
        // handed the native sandbox's listener once init sends it.
        let output = match output {
            Output::Pipes(stdout, stderr) => {
                for (pipe, stream) in [(stdout, Stream::Stdout), (stderr, Stream::Stderr)] {
                    let shared = Arc::clone(&shared);
                    self.relays.push(std::thread::spawn(move || {
                        relay(pipe, stream, &shared, caps, false, ShowTo::Ours)
                    }));
                }
                None
            }
            // The terminal's relays need its master, which init sends after the
            // listener: below.
            terminal @ Output::Tty { .. } => Some(terminal),
        };
        // The control channel before init is ready, not after: a failure stops the
        // sandbox through `shared` like any other.
        self.shared = Some(Arc::clone(&shared));
        self.serve_control(sandbox.stopper(), live);
        let native_tracer = trace
            .filter(|_| self.engine_handshake.is_none() && self.gvisor_sink.is_none())
            .map(|exits| {
                let (to, from) = std::sync::mpsc::sync_channel::<(
                    std::os::fd::OwnedFd,
                    Option<Box<vg_sandbox::exectrace::ExecRecorder>>,
                    Killer,
                )>(1);
                let shared = Arc::clone(&shared);
                let gate = self.gate.clone();
                let observer = self.observer.take();
                let (handed_to, handed) = std::sync::mpsc::channel();
                let thread = std::thread::spawn(move || match from.recv() {
                    Ok((listener, recorder, init)) => {
                        let (traced, recorder) = serve_listener(
                            Traceable {
                                listener,
                                recorder: recorder.map(|r| *r),
                                init: Some(init),
                            },
                            &shared,
                            gate,
                            observer,
                            caps,
                            exits,
                        );
                        // What was logged is all the record's last writes need: it
                        // is handed over first, and the recorder let go of after,
                        // while they are made (unmapping its ring takes about a
                        // third of a millisecond). Our share of the record goes
                        // before, so that its writer is the session's alone again.
                        drop(shared);
                        let unsent = handed_to.send(traced).err().map(|unsent| unsent.0);
                        drop(recorder);
                        unsent
                    }
                    // No listener (init failed before sending it): nothing was served,
                    // and this thread's result is dropped (see below).
                    Err(_) => Some((Arc::new(Mutex::new(CommandsLog::new(caps.shown))), None)),
                });
                (to, handed, thread)
            });

        // Asked only with a network to mediate, and not of a container (whose
        // interface is made before its init's go, below): `tun` takes init's next
        // descriptor, which would otherwise be the exec listener.
        if self.engine_tun.is_none()
            && let Some(start) = start_mediator.take()
            && let Some(tun) = sandbox.tun()
        {
            match start(tun) {
                Ok(mediator) => *slot_lock(&self.mediator) = Some(mediator),
                // Without the mediator nothing gets out; the session must not go on
                // as if the network worked.
                Err(e) => shared.fail("network mediator", e),
            }
        }
        if let Some((to, handed, thread)) = native_tracer {
            match sandbox.exec_listener().map(|listener| {
                to.send((
                    listener,
                    sandbox.exec_recorder().map(Box::new),
                    sandbox.killer(),
                ))
            }) {
                Some(Ok(())) => {
                    self.tracer = Some(thread);
                    self.handed = Some(handed);
                }
                // No listener: no tracer, as if its thread had not been started.
                _ => {
                    drop(to);
                    let _ = thread.join();
                }
            }
        }
        // A container's terminal comes with its init's listener, on the tracer's
        // thread; it is sized before the init's go, so that the command's first look
        // finds the size: our terminal's size then (it may have been resized while
        // the engine started the container), else the size taken at the start.
        let terminal_size = match &output {
            Some(Output::Tty { size, .. }) => {
                Some((size.unwrap_or(DEFAULT_TERMINAL_SIZE), size.is_some()))
            }
            None | Some(Output::Pipes(..)) => None,
        };
        let (terminal_to, terminal_from) = match (terminal_size, &self.engine_handshake) {
            (Some(sized), Some(_)) => {
                let (to, from) = std::sync::mpsc::sync_channel(1);
                (Some((to, sized)), Some(from))
            }
            _ => (None, None),
        };
        // A container's init hands its listener over once it runs: accepted on the
        // tracer's thread, then served as the native sandbox's.
        if let (Some(exits), Some((handshake, expected_uid, spawner))) =
            (trace, self.engine_handshake.take())
        {
            let shared = Arc::clone(&shared);
            let gate = self.gate.clone();
            let observer = self.observer.take();
            let network = self
                .engine_tun
                .take()
                .map(|tun| (tun, start_mediator.take()));
            let slot = Arc::clone(&self.mediator);
            self.tracer = Some(std::thread::spawn(move || {
                let attached = handshake.accept_then(expected_uid, |peer| {
                    if let Some((tun, start)) = network {
                        engine_network(peer, tun, start, &slot)
                            .inspect_err(|e| shared.fail_layer("the mediated network", e))?;
                    }
                    if let (Some(master), Some((to, (size, follow)))) =
                        (peer.terminal, &terminal_to)
                    {
                        // Copied here, not only once the terminal thread has it: the
                        // go follows at once, and the command could look before that
                        // thread copied the size (red team, session 16).
                        let copied = *follow
                            && vg_sandbox::terminal::copy_size(std::io::stdin().as_fd(), master)
                                .is_ok();
                        if !copied {
                            let _ = vg_sandbox::terminal::set_size(master, *size);
                        }
                        let master = master
                            .try_clone_to_owned()
                            .map_err(|e| format!("cannot keep the container's terminal: {e}"))?;
                        let _ = to.send(master);
                    }
                    Ok(())
                });
                // A terminal thread still waiting learns there is none.
                drop(terminal_to);
                match attached {
                    Ok(handover) => {
                        if let (Some(to), Some(channel)) = (&spawner, handover.spawner) {
                            let _ = to.send(Ok((channel, handover.pid)));
                        }
                        drop(spawner);
                        // A container's processes do not end with our keeper: its
                        // listener's hang-up alone says they are gone.
                        let (traced, _) = serve_listener(
                            Traceable {
                                listener: handover.listener,
                                recorder: None,
                                init: None,
                            },
                            &shared,
                            gate,
                            observer,
                            caps,
                            exits,
                        );
                        Some(traced)
                    }
                    Err(e) => {
                        if let Some(to) = &spawner {
                            let _ = to.send(Err(e.to_string()));
                        }
                        // Even a container that ended before its init connected is a
                        // failure of the record: our init would have connected before
                        // running anything, so something else ran there (an image's
                        // code the loader took in, say), or nothing did; either way
                        // the record cannot say what ran.
                        shared.fail("exec records", e);
                        Some((Arc::new(Mutex::new(CommandsLog::new(caps.shown))), None))
                    }
                }
            }));
        }
        if let Some(sink) = self.gvisor_sink.take() {
            let shared = Arc::clone(&shared);
            let gvisor = Arc::new(gvisor::GvisorLog::new(CommandsLog::new(caps.shown)));
            self.gvisor_log = Some(Arc::clone(&gvisor));
            self.tracer = Some(std::thread::spawn(move || {
                let served =
                    sink.serve(|event| crate::record::gvisor::record(&gvisor, &shared, event));
                if let Err(e) = served {
                    shared.fail("gVisor's trace points", crate::diag::chain(&e).to_string());
                }
                lock(&gvisor.log).flush(&shared);
                Some((Arc::clone(&gvisor.log), None))
            }));
        }
        let mut resize = None;
        match output {
            // Started above.
            None | Some(Output::Pipes(..)) => {}
            Some(Output::Tty { size, client }) => {
                // Ours is a terminal: its later sizes are followed.
                let follow = size.is_some();
                let size = size.unwrap_or(DEFAULT_TERMINAL_SIZE);
                if let Some(pipe) = client {
                    let shared = Arc::clone(&shared);
                    self.relays.push(std::thread::spawn(move || {
                        relay(pipe, Stream::Stderr, &shared, caps, false, ShowTo::Ours)
                    }));
                }
                let slot = TerminalSlot::default();
                match terminal_from {
                    // Relayed once the container's init has handed it over: on a
                    // thread of its own, joined at the end as the other relays.
                    Some(from) => {
                        let shared = Arc::clone(&shared);
                        let slot = Arc::clone(&slot);
                        self.engine_terminal = Some(std::thread::spawn(move || {
                            engine_terminal(&from, &shared, (size, follow), caps, &slot);
                        }));
                    }
                    None => {
                        if let Some(master) = sandbox.tty_master().map(File::from) {
                            // At once, before the command (started right after init
                            // says it is ready) asks for it; later changes come as
                            // SIGWINCH.
                            let _ = vg_sandbox::terminal::set_size(master.as_fd(), size);
                            if let Some(input) = open_terminal(&shared, &master, size, &slot) {
                                let out_shared = Arc::clone(&shared);
                                self.relays.push(std::thread::spawn(move || {
                                    relay(
                                        master,
                                        Stream::Stdout,
                                        &out_shared,
                                        caps,
                                        true,
                                        ShowTo::Ours,
                                    )
                                }));
                                // Not joined: it sits in read(2) on our stdin until we
                                // exit.
                                let in_shared = Arc::downgrade(&shared);
                                std::thread::spawn(move || {
                                    relay_input(input, &in_shared, caps.recorded)
                                });
                            }
                        }
                    }
                }
                resize = Some(slot);
            }
        }
        if let Some(enforced) = sandbox.ready() {
            self.started = true;
            if let Err(e) = self
                .writer
                .update_metadata(|m| layers::record(&mut m.layers, &enforced))
            {
                shared.fail("metadata.json", e);
            }
        }
        resize
    }

    /// Serves `session-…/control.sock` for the session's owner (the owner of its
    /// folder, which is 0700). Without it `stop` and live rules could not reach
    /// the session, so a failure to bind stops the sandbox like a record failure.
    fn serve_control(
        &mut self,
        stopper: vg_sandbox::Stopper,
        network: Option<std::sync::Arc<crate::control::LiveNetwork>>,
    ) {
        use std::os::unix::fs::MetadataExt;
        let dir = self.writer.dir().to_owned();
        let handler = Arc::new(crate::control::SessionControl::new(
            Arc::clone(&self.writer),
            stopper,
            network,
            self.gate.as_ref(),
        ));
        let bound = std::fs::metadata(&dir)
            .map_err(anyhow::Error::from)
            .and_then(|meta| {
                vg_control::ControlServer::bind(&vg_control::socket_path(&dir), meta.uid(), handler)
                    .map_err(anyhow::Error::from)
            });
        match bound {
            Ok(server) => self.control = Some(Box::new(server)),
            Err(e) => {
                if let Some(shared) = &self.shared {
                    shared.fail("control channel", crate::diag::chain(&e).to_string());
                }
            }
        }
    }

    /// Waits for the relays and the tracer, then completes the record from how the
    /// sandbox ended. Returns the session id and what the tracer observed.
    pub fn finish(
        mut self,
        result: &Result<Outcome, SandboxError>,
        hits: &vg_sandbox::cgroup::Hits,
    ) -> Result<(String, observe::Observed)> {
        // Long done (it started with the session): joined so that no thread of ours
        // outlives the session.
        if let Some(cleanup) = self.cleanup.take() {
            let _ = cleanup.join();
        }
        // The session is over: nobody may stop it or change its rules any more.
        drop(self.control.take());
        // The sandbox is gone: connections still open are cut and recorded.
        if let Some(mediator) = slot_lock(&self.mediator).take()
            && let Err(e) = mediator.stop()
            && let Some(shared) = &self.shared
        {
            shared.fail("network mediator", e);
        }
        // Its requests still open are cut and recorded; nothing of it writes after.
        if let Some(inspector) = self.inspector.take() {
            inspector.shutdown();
        }
        let dropped = self
            .network_events_dropped
            .load(std::sync::atomic::Ordering::Relaxed);
        if dropped > 0 {
            self.writer
                .event(
                    Event::new(vg_records::event::kind::NETWORK)
                        .with("event", "dropped")
                        .with("dropped_events", dropped)
                        .with("limit", MAX_NETWORK_EVENTS),
                )
                .context("cannot write events.jsonl")?;
        }
        for relay in self.relays.drain(..) {
            let _ = relay.join();
        }
        // The sandbox is gone: gVisor's sink reads what is queued and returns.
        if let Some(stop) = self.gvisor_stop.take() {
            stop.stop();
        }
        // The engine's client is gone: a hand-over still waiting never comes. The
        // tracer serves until the container's last process is gone, which is soon
        // after the client saw it end; a container left running (its client killed
        // at the time-out's end) is ended, or the tracer would serve it forever.
        if let Some((stop, end_container)) = self.engine_stop.take() {
            stop.stop();
            let until = std::time::Instant::now() + ENGINE_TRACER_GRACE;
            while self.tracer.as_ref().is_some_and(|t| !t.is_finished())
                && std::time::Instant::now() < until
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            if self.tracer.as_ref().is_some_and(|t| !t.is_finished()) {
                end_container();
            }
        }
        // After the container's end: a container's terminal relay reads until the
        // container's last process is gone (one its killed client left running
        // holds the terminal open until it is ended above).
        if let Some(relay) = self.engine_terminal.take() {
            let _ = relay.join();
        }
        // The native tracer hands over what it logged before it lets go of the BPF
        // recorder, and its thread is joined last; any other tracer's result comes
        // with the end of its thread.
        let traced = match self.handed.take().and_then(|handed| handed.recv().ok()) {
            Some(traced) => Some(traced),
            None => self.tracer.take().and_then(|t| t.join().ok()).flatten(),
        };
        let (commands, observed) = match traced {
            Some((log, observed)) => (Some(log), observed.unwrap_or_default()),
            None => (None, observe::Observed::default()),
        };
        let denial = result
            .as_ref()
            .ok()
            .and_then(|o| o.command_pid)
            .and_then(|pid| self.gate_denial(pid));
        // Every process is gone: what is still held is denied (and recorded), and the
        // threads holding those execs let go of the record.
        if let Some(gate) = self.gate.take() {
            gate.close();
        }
        let mut commands = commands.as_ref().map(|log| lock(log));
        if let (Some(log), Some(shared)) = (commands.as_deref_mut(), &self.shared) {
            log.flush(shared);
        }
        let id = self.writer.id().to_owned();
        // The command's exit is seen by the tracer when it calls exit; a command
        // killed by a signal never does, so its status comes from init.
        if let Ok(outcome) = result
            && let Some(pid) = outcome.command_pid
            && let Some(log) = commands.as_deref_mut()
            && log.is_live(pid)
            && let Some(shared) = &self.shared
        {
            let exit = match outcome.termination {
                Termination::Signalled(sig) => Some(CommandExit::Signal(sig)),
                Termination::Exited(code) => Some(CommandExit::Code(code)),
                Termination::ExecFailed(_) => None,
            };
            if let Some(exit) = exit {
                log.exit(shared, pid, exit);
            }
        }
        if let Some(event) = commands.as_deref().and_then(CommandsLog::limit_hit) {
            self.writer
                .event(event)
                .context("cannot write events.jsonl")?;
        }
        drop(commands);
        self.record_limit_hits(result, hits)?;
        let broken = self.shared.as_ref().and_then(|s| s.broken.get().cloned());
        let end = end_of(result, broken, self.started, denial);
        if end.status == Status::FailedToStart
            && let Some(error) = &end.error
        {
            self.writer
                .event(Event::new(vg_records::event::kind::FAILURE).with("error", error.clone()))
                .context("cannot write events.jsonl")?;
        }
        let shared = self.shared.take();
        drop(shared);
        let tracer = self.tracer.take();
        let writer = sole_owner(self.writer)?;
        writer
            .finish(end)
            .context("cannot complete the session record")?;
        // No thread of ours outlives the session.
        if let Some(tracer) = tracer {
            let _ = tracer.join();
        }
        Ok((id, observed))
    }

    /// One `limit-hit` event per limit the session ran into.
    fn record_limit_hits(
        &self,
        result: &Result<Outcome, SandboxError>,
        hits: &vg_sandbox::cgroup::Hits,
    ) -> Result<()> {
        let mut events = Vec::new();
        if let Ok(outcome) = result {
            if outcome.timed_out {
                let meta = self.writer.metadata();
                let limit = meta.limits.extra.get("timeout_ms").cloned();
                // It fired at the deadline, not when the session ended after the grace.
                let at = limit
                    .as_ref()
                    .and_then(serde_json::Value::as_u64)
                    .map(|ms| meta.start_time + std::time::Duration::from_millis(ms));
                let mut event = Event::new(LIMIT_HIT)
                    .with("limit", "timeout")
                    .with("timeout_ms", limit.unwrap_or_default());
                if let Some(at) = at {
                    event = event.at(at);
                }
                events.push(event);
            }
            for hit in &outcome.limit_hits {
                events.push(
                    Event::new(LIMIT_HIT)
                        .at(hit.at)
                        .with("limit", hit.limit.clone())
                        .with("path", hit.detail.clone()),
                );
            }
        }
        if hits.oom_kills > 0 {
            // Which cgroup, and the cap (the default one or an asked-for one).
            let limits = self.writer.metadata().limits;
            let by = limits
                .extra
                .get("enforced_by")
                .and_then(|by| by.get("memory"))
                .cloned()
                .unwrap_or_default();
            events.push(
                Event::new(LIMIT_HIT)
                    .with("limit", "memory")
                    .with("enforced_by", by)
                    .with("limit_bytes", limits.memory_bytes)
                    .with("oom_kills", hits.oom_kills),
            );
        }
        if hits.pids_max > 0 {
            let mut event = Event::new(LIMIT_HIT)
                .with("limit", "pids")
                .with("refused_forks", hits.pids_max);
            // On gVisor the cgroup holds gVisor's own host tasks, not the sandbox's
            // processes (`backend::gvisor_pids`): the hit says so.
            if let Some(host) = self
                .writer
                .metadata()
                .limits
                .extra
                .get("enforced_by")
                .and_then(|by| by.get("pids_host"))
            {
                event = event.with("enforced_by", host.clone());
            }
            events.push(event);
        }
        for event in events {
            self.writer
                .event(event)
                .context("cannot write events.jsonl")?;
        }
        Ok(())
    }

    /// The terminal was resized: record it in tty.cast.
    /// Records an event of the session itself (before the sandbox starts).
    pub fn event(&self, event: Event) -> Result<()> {
        self.writer
            .event(event)
            .context("cannot write events.jsonl")
    }

    pub fn resized(&self, size: vg_sandbox::terminal::Size) {
        if let Err(e) = self.writer.cast_resize(size.cols, size.rows)
            && let Some(shared) = &self.shared
        {
            shared.fail("tty.cast", e);
        }
    }

    /// The sandbox could not be started: complete the record as `failed-to-start`.
    pub fn failed_to_start(mut self, error: &anyhow::Error) -> Result<()> {
        if let Some(cleanup) = self.cleanup.take() {
            let _ = cleanup.join();
        }
        let message = crate::diag::chain(error).to_string();
        self.writer
            .event(Event::new(vg_records::event::kind::FAILURE).with("error", message.clone()))
            .context("cannot write events.jsonl")?;
        let writer = sole_owner(self.writer)?;
        writer
            .finish(End::failed_to_start(message))
            .context("cannot complete the session record")?;
        Ok(())
    }
}

/// The writer, once every thread is done with it. The terminal's input relay may
/// hold it for the moment it takes to record a keystroke.
fn sole_owner(mut writer: Arc<SessionWriter>) -> Result<SessionWriter> {
    for _ in 0..1000 {
        match Arc::try_unwrap(writer) {
            Ok(w) => return Ok(w),
            Err(still_shared) => {
                writer = still_shared;
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }
    anyhow::bail!("the session record is still in use")
}

/// How the session ended, as the record states it.
fn end_of(
    result: &Result<Outcome, SandboxError>,
    broken: Option<String>,
    started: bool,
    denial: Option<String>,
) -> End {
    if let Some(reason) = broken {
        let mut end = End::failed_to_start(reason);
        end.status = Status::Interrupted;
        return end;
    }
    match result {
        // A `stop` ends the session as its deadline would (the `stop` event says who).
        Ok(outcome) if outcome.timed_out || outcome.stopped.is_some() => {
            End::timeout(Some(crate::exit::EXIT_TIMEOUT))
        }
        Ok(outcome) => match outcome.termination {
            Termination::Exited(code) => End::exited(code),
            Termination::Signalled(sig) => End::signalled(sig),
            Termination::ExecFailed(errno) => {
                let mut end = End::failed_to_start(match denial {
                    Some(who) => format!("the approval gate denied the command {who}"),
                    None => format!(
                        "cannot execute the command: {}",
                        std::io::Error::from_raw_os_error(errno)
                    ),
                });
                end.exit_code = Some(outcome.termination.exit_code());
                end
            }
        },
        // The command ran, but the sandbox's init died (e.g. chosen by the OOM
        // killer) before it could say how the command ended.
        Err(e @ SandboxError::Lost(_)) if started => {
            let mut end = End::failed_to_start(e.to_string());
            end.status = Status::Interrupted;
            end
        }
        Err(e) => End::failed_to_start(e.to_string()),
    }
}

#[cfg(test)]
mod disk_full_tests {
    #[test]
    fn a_full_disk_is_recognised_in_a_write_error() {
        let full = vg_records::RecordsError::Write {
            path: "/r/s/stdout.log".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        };
        assert!(super::disk_full(&full.to_string()));
        assert!(!super::disk_full(
            "cannot write /r/s/stdout.log: Permission denied (os error 13)"
        ));
    }
}
