//! A started session: a handle to signal it, read what it is, and wait for its
//! [`Outcome`]. Waiting finishes the record (stops the mediator, joins the relays
//! and the tracer, writes the end) and gives the terminal back.

use std::fs::File;
use std::os::fd::AsFd;
use std::time::Instant;

use vg_sandbox::terminal::{RawTerminal, SavedTerminals};
use vg_sandbox::{Killer, Sandbox};

use crate::etc::Generated;
use crate::exit::{Error, Outcome, exit_code};
use crate::limits::Enforced;
use crate::plan::Plan;
use crate::record::Session;
use crate::watchdog::Watchdog;

/// How the running session's stdio and record are kept.
pub(crate) enum Mode {
    Recorded {
        /// Boxed: it is by far the larger variant.
        session: Box<Session>,
        /// Our terminal in raw mode (`-t` on a terminal), restored after the record
        /// is complete.
        raw: Option<RawTerminal>,
        /// The sandbox terminal's master side, for resizing (once it is there).
        terminal: Option<crate::record::TerminalSlot>,
        stdin_is_terminal: bool,
    },
    Unrecorded {
        /// Our terminals' settings, restored once the sandbox is gone.
        saved: SavedTerminals,
        mediator: Option<vg_netstack::Mediator>,
    },
}

/// A running session, as [`Running::state`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    /// The session's id, when it is recorded.
    pub session: Option<String>,
    /// The sandbox's init, as a host pid.
    pub pid: i32,
    /// Whether init reported every layer in place and started the command (known
    /// only for a recorded session, which waits for that report).
    pub started: Option<bool>,
    /// Why the record could not be written, once it could not: the sandbox is then
    /// being stopped.
    pub record_failure: Option<String>,
}

/// How long a persistent container's start may take until its init has handed over
/// its command channel (an engine's client start plus the container's, seconds
/// for rootless Podman on a loaded machine).
const ENGINE_SPAWNER_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The container's command channel from the record's tracer, waited for at most
/// [`ENGINE_SPAWNER_WAIT`], and no longer than the engine's client runs: a client
/// that failed (a flag its daemon refused) has nothing more to hand over, and the
/// tracer, waiting on the hand-over socket, would keep the channel open until then.
fn receive_until_exit<T>(
    channel: &std::sync::mpsc::Receiver<T>,
    client: &vg_sandbox::Killer,
) -> Result<T, std::sync::mpsc::RecvTimeoutError> {
    use std::sync::mpsc::RecvTimeoutError;
    const TICK: std::time::Duration = std::time::Duration::from_millis(100);
    let deadline = std::time::Instant::now() + ENGINE_SPAWNER_WAIT;
    loop {
        match channel.recv_timeout(TICK) {
            Err(RecvTimeoutError::Timeout) => {}
            done => return done,
        }
        // One more look after the exit: the hand-over may have raced it.
        if client.has_exited() {
            return channel
                .try_recv()
                .map_err(|_| RecvTimeoutError::Disconnected);
        }
        if std::time::Instant::now() >= deadline {
            return Err(RecvTimeoutError::Timeout);
        }
    }
}

/// A running session. Dropping it without [`Running::wait`] leaves the record
/// `running` (reported as `interrupted` once this process is gone).
pub struct Running {
    sandbox: Sandbox,
    mode: Mode,
    enforced: Enforced,
    /// Holds the memory cap where no cgroup does.
    watchdog: Option<Watchdog>,
    // Dropped last, after the sandbox is gone: the plan holds the image's lease;
    // a backend's own files (gVisor's bundle) go with the generated ones.
    _generated: (Option<Generated>, crate::backend::Held),
    plan: Plan,
}

impl Running {
    pub(crate) fn new(
        sandbox: Sandbox,
        plan: Plan,
        enforced: Enforced,
        generated: (Option<Generated>, crate::backend::Held),
        mode: Mode,
    ) -> Self {
        // Started after the spawn, so that its thread inherits the blocked signals.
        let watchdog = enforced.watchdog.and_then(|limit| {
            match Watchdog::start(sandbox.pid(), limit, sandbox.stopper()) {
                Ok(watchdog) => Some(watchdog),
                Err(e) => {
                    // Fail closed: a cap that nothing holds must not be recorded as held.
                    crate::diag::error(format_args!(
                        "cannot start the memory watchdog's thread ({e}); stopping the sandbox"
                    ));
                    let _ = sandbox.killer().kill();
                    None
                }
            }
        });
        Self {
            sandbox,
            mode,
            enforced,
            watchdog,
            _generated: generated,
            plan,
        }
    }

    /// The session's id, when it is recorded.
    pub fn id(&self) -> Option<&str> {
        match &self.mode {
            Mode::Recorded { session, .. } => Some(session.id()),
            Mode::Unrecorded { .. } => None,
        }
    }

    /// The sandbox's init, as a host pid.
    pub fn pid(&self) -> i32 {
        self.sandbox.pid()
    }

    /// What was planned and is being enforced.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Stops or signals the sandbox from any thread, also while [`Running::wait`]
    /// waits.
    pub fn killer(&self) -> Killer {
        self.sandbox.killer()
    }

    /// Sends `signal` to the sandbox's init, which passes the forwarded signals on
    /// to the command's process group.
    pub fn signal(&self, signal: i32) -> std::io::Result<()> {
        self.sandbox.killer().signal(signal)
    }

    /// For a persistent sandbox: what starts its commands (once; later calls get
    /// `None`, as does a sandbox that is not persistent).
    pub fn spawner(&mut self) -> Option<std::io::Result<vg_sandbox::spawner::Spawner>> {
        if !self.plan.spec.persistent {
            return None;
        }
        // A container's init hands its channel over to the record's tracer.
        if let Some(channel) = self._generated.1.engine_spawner.take() {
            return Some(match receive_until_exit(&channel, &self.sandbox.killer()) {
                Ok(Ok((sock, init))) => vg_sandbox::spawner::Spawner::from_channel(sock, init),
                Ok(Err(why)) => Err(std::io::Error::other(why)),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    Err(std::io::Error::other(format!(
                        "the container's init did not hand over its command channel within {}s (the engine's client or the container is stuck; `vectraguard sandbox stop` it and try again)",
                        ENGINE_SPAWNER_WAIT.as_secs()
                    )))
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(std::io::Error::other(
                    "the container ended before its init handed over its command channel (its log, `sandboxes/NAME.log`, and the session's stderr.log say why)",
                )),
            });
        }
        self.sandbox.spawner()
    }

    /// For a persistent gVisor sandbox: how `runsc exec` reaches it, and the
    /// keeper's host pid (once; later calls get `None`).
    pub(crate) fn gvisor_exec(&mut self) -> Option<(vg_backend::gvisor::exec::ExecTarget, i32)> {
        let target = self._generated.1.gvisor_exec.take()?;
        Some((target, self.sandbox.pid()))
    }

    /// A handle to write into the record while the session runs (recorded only).
    pub fn recorder(&self) -> Option<crate::record::Recorder> {
        match &self.mode {
            Mode::Recorded { session, .. } => session.recorder(self.plan.limits.output_caps()),
            Mode::Unrecorded { .. } => None,
        }
    }

    /// Ends the session from any thread as `vectraguard stop` does (SIGTERM to every
    /// process, SIGKILL after the grace, or at once).
    pub fn stopper(&self) -> vg_sandbox::Stopper {
        self.sandbox.stopper()
    }

    /// What can be read of the session while it runs.
    pub fn state(&self) -> State {
        let (started, record_failure) = match &self.mode {
            Mode::Recorded { session, .. } => (Some(session.started()), session.failure()),
            Mode::Unrecorded { .. } => (None, None),
        };
        State {
            session: self.id().map(str::to_owned),
            pid: self.pid(),
            started,
            record_failure,
        }
    }

    /// Forwards signals to the sandbox until it ends (ending it at the timeout),
    /// completes the record and returns how the session ended.
    pub fn wait(self) -> Result<Outcome, Error> {
        let Self {
            sandbox,
            mode,
            enforced,
            watchdog,
            _generated: mut held_files,
            plan,
        } = self;
        let limits = &plan.limits;
        // A persistent sandbox's time-out applies to each of its commands.
        let deadline = limits
            .timeout
            .filter(|_| !plan.spec.persistent)
            .map(|t| (Instant::now() + t, limits.kill_grace));
        let hits = || {
            enforced
                .cgroup
                .as_ref()
                .map(|cg| cg.hits())
                .unwrap_or_default()
        };
        let memory_hit;
        let mut violations = crate::record::observe::Summary::default();
        let mut learned = None;
        let (outcome, session, cgroup_hits, denied) = match mode {
            Mode::Recorded {
                session,
                raw,
                terminal,
                stdin_is_terminal,
            } => {
                let id = session.id().to_owned();
                let dir = session.dir().to_path_buf();
                // The record is completed while init exits (see `wait_then`),
                // nothing of the sandbox running any more: the session is lent to
                // the signal handler until then, and taken to complete the record.
                let session = std::cell::RefCell::new(Some(session));
                let (result, finished) = sandbox.wait_then(
                    deadline,
                    limits.kill_grace,
                    &mut |sig| {
                        session.borrow().as_ref().is_some_and(|session| {
                            resize(
                                session,
                                terminal.as_ref().and_then(|slot| slot.get()),
                                sig,
                                stdin_is_terminal,
                            )
                        })
                    },
                    |result| {
                        // Taken once: `then` runs once, after the last signal.
                        let Some(session) = session.borrow_mut().take() else {
                            return Err(Error::from(anyhow::anyhow!(
                                "the session's record was completed twice"
                            )));
                        };
                        if let Ok(outcome) = &*result {
                            held_files.1.client_ended(outcome.termination);
                        }
                        let memory_hit = watchdog.and_then(Watchdog::finish);
                        if let Some(hit) = &memory_hit {
                            killed_by_watchdog(result);
                            session
                                .event(watchdog_event(hit))
                                .map_err(|e| Error::from(e).in_session(&id))?;
                        }
                        let cgroup_hits = hits();
                        let denied = result
                            .as_ref()
                            .ok()
                            .filter(|o| {
                                matches!(o.termination, vg_sandbox::Termination::ExecFailed(_))
                            })
                            .and_then(|o| o.command_pid)
                            .and_then(|pid| session.gate_denial(pid));
                        let (_, observed) = session
                            .finish(result, &cgroup_hits)
                            .map_err(|e| Error::from(e).in_session(&id))?;
                        Ok::<_, Error>((memory_hit, cgroup_hits, denied, observed))
                    },
                );
                let (hit, cgroup_hits, denied, observed) = finished?;
                memory_hit = hit;
                drop(raw);
                let outcome =
                    result.map_err(|e| Error::from(anyhow::Error::from(e)).in_session(&id))?;
                violations = observed.summary;
                learned = match (&plan.learn, observed.learned) {
                    (Some(learn), Some(accesses)) => Some(
                        crate::learn::learned(&plan, learn, &id, &dir, accesses)
                            .map_err(|e| Error::from(e).in_session(&id))?,
                    ),
                    _ => None,
                };
                (outcome, Some(id), cgroup_hits, denied)
            }
            Mode::Unrecorded { saved, mediator } => {
                let (outcome, hit) =
                    sandbox.wait_then(deadline, limits.kill_grace, &mut |_| false, |outcome| {
                        if let Ok(outcome) = &*outcome {
                            held_files.1.client_ended(outcome.termination);
                        }
                        let memory_hit = watchdog.and_then(Watchdog::finish);
                        if memory_hit.is_some() {
                            killed_by_watchdog(outcome);
                        }
                        if let Some(mediator) = mediator {
                            let _ = mediator.stop();
                        }
                        // Nothing of the sandbox runs any more: restore now.
                        drop(saved);
                        memory_hit
                    });
                memory_hit = hit;
                let outcome = outcome.map_err(anyhow::Error::from)?;
                (outcome, None, hits(), None)
            }
        };
        Ok(Outcome {
            session,
            exit_code: exit_code(&outcome),
            termination: outcome.termination,
            timed_out: outcome.timed_out,
            stopped: outcome.stopped.is_some(),
            timeout: limits.timeout,
            program: plan.spec.argv.first().cloned().unwrap_or_default(),
            cgroup_hits,
            gvisor_host_pids: plan.limits.gvisor_pids.map(|p| p.host),
            limit_hits: outcome.limit_hits,
            memory_watchdog: memory_hit,
            denied,
            violations,
            learned,
        })
    }
}

/// The watchdog ended the sandbox through its `Stopper` (SIGKILL): that is a memory
/// limit's kill, as the OOM killer's would be (status `signalled`, 137), not a stop.
fn killed_by_watchdog(result: &mut Result<vg_sandbox::Outcome, vg_sandbox::SandboxError>) {
    if let Ok(outcome) = result
        && outcome.stopped == Some(true)
    {
        outcome.stopped = None;
    }
}

/// The `limit-hit` event of a watchdog's kill.
fn watchdog_event(hit: &crate::watchdog::Hit) -> vg_records::Event {
    vg_records::Event::new(vg_records::event::kind::LIMIT_HIT)
        .at(hit.at)
        .with("limit", "memory")
        .with("enforced_by", "watchdog")
        .with("limit_bytes", hit.limit)
        .with("measured_bytes", hit.measured)
        .with("processes", hit.processes)
}

/// A resized window: resize the sandbox's terminal (the kernel tells its foreground
/// job) instead of signalling the shell. True when `sig` was handled so.
fn resize(session: &Session, terminal: Option<&File>, sig: i32, stdin_is_terminal: bool) -> bool {
    match (terminal, sig == libc::SIGWINCH && stdin_is_terminal) {
        (Some(master), true) => {
            if let Ok(size) =
                vg_sandbox::terminal::copy_size(std::io::stdin().as_fd(), master.as_fd())
            {
                session.resized(size);
            }
            true
        }
        _ => false,
    }
}
