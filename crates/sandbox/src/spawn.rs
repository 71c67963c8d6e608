//! The supervisor's side: prepare everything that can fail early, create the
//! namespaces with one `clone`, write the identity maps, and wait.

use std::io::{PipeReader, PipeWriter, Write};
use std::os::fd::{AsFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use vg_policy::Identity;

use crate::error::{SandboxError, SetupError};
use crate::prepared::Prepared;
use crate::protocol::Message;
use crate::spec::{
    FORWARDED_SIGNALS, SandboxNetwork, SandboxSpec, TERMINATE_ALL, Termination, namespaces,
};
use crate::sys;

/// A running sandbox.
#[derive(Debug)]
pub struct Sandbox {
    pid: libc::pid_t,
    /// Held open for the sandbox's lifetime: init treats its closing as our death.
    _alive: PipeWriter,
    report: PipeReader,
    notify: Option<std::os::fd::OwnedFd>,
    /// Messages read early by [`Sandbox::ready`], handled again by [`Sandbox::wait`].
    early: Vec<Message>,
    /// What [`Sandbox::wait`] has read of the report pipe since.
    received: Vec<u8>,
    /// Init said it is [`Message::Alone`]: it is exiting, and is still to be reaped.
    alone: bool,
    /// Refers to init for as long as we hold it, so signals never hit a recycled pid.
    pidfd: Arc<OwnedFd>,
    /// A stop asked for by a [`Stopper`], acted on by [`Sandbox::wait_with`].
    stop: Arc<AtomicU8>,
    /// The BPF exec recorder, until the tracer takes it ([`Sandbox::exec_recorder`]).
    recorder: Option<crate::exectrace::ExecRecorder>,
    exec_trace: ExecTrace,
}

/// How the sandbox's execs are recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecTrace {
    /// Not at all (`trace_exec` off).
    Off,
    /// By the BPF recorder ([`crate::exectrace`]).
    Bpf,
    /// By seccomp notification; with the reason the BPF recorder was asked for and
    /// could not be used.
    SeccompNotify { bpf_unavailable: Option<String> },
}

impl ExecTrace {
    /// The `layers.exec_trace` value.
    pub fn name(&self) -> &'static str {
        match self {
            ExecTrace::Off => "off",
            ExecTrace::Bpf => "bpf",
            ExecTrace::SeccompNotify { .. } => "seccomp-notify",
        }
    }
}

/// SIGTERM to SIGKILL for a [`Stopper`]'s stop in [`Sandbox::wait_until`].
const DEFAULT_GRACE: Duration = Duration::from_secs(5);

const STOP_NONE: u8 = 0;
const STOP_TERM: u8 = 1;
const STOP_KILL: u8 = 2;

/// Asks the waiting supervisor to end the sandbox as its deadline would (SIGTERM
/// to every process, SIGKILL after the grace), or at once with SIGKILL. Going
/// through [`Sandbox::wait_with`] rather than signalling init directly keeps one
/// termination path: the grace timer, and `Outcome::stopped` for the record.
#[derive(Debug, Clone)]
pub struct Stopper {
    stop: Arc<AtomicU8>,
}

impl Stopper {
    /// Requests the stop and wakes the supervisor's `sigwait` with a SIGCHLD to
    /// this process (blocked in every thread, so only the waiter takes it).
    pub fn stop(&self, kill: bool) -> std::io::Result<()> {
        let level = if kill { STOP_KILL } else { STOP_TERM };
        self.stop.fetch_max(level, Ordering::SeqCst);
        sys::kill(std::process::id() as libc::pid_t, libc::SIGCHLD)
    }
}

/// Stops a sandbox from any thread: signals its init, and when init dies the kernel
/// kills every process in the sandbox's PID namespace.
#[derive(Debug, Clone)]
pub struct Killer {
    pub(crate) pidfd: Arc<OwnedFd>,
}

impl Killer {
    /// Sends `signal` to the sandbox's init (which forwards the forwarded signals to
    /// the command's process group).
    pub fn signal(&self, signal: libc::c_int) -> std::io::Result<()> {
        sys::pidfd_send_signal(self.pidfd.as_fd(), signal)
    }

    /// Ends the whole sandbox at once.
    pub fn kill(&self) -> std::io::Result<()> {
        self.signal(libc::SIGKILL)
    }

    /// Whether the sandbox's init (or another runtime's keeper) has exited, without
    /// reaping it: for a wait that should not outlast the sandbox.
    pub fn has_exited(&self) -> bool {
        sys::pidfd_exited(self.pidfd.as_fd())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub termination: Termination,
    /// The command's pid inside the sandbox, once it was forked.
    pub command_pid: Option<i32>,
    /// `key=value` lines describing the layers in force, as init reported them.
    pub enforced: String,
    /// The deadline of [`Sandbox::wait_until`] passed and the sandbox was stopped.
    pub timed_out: bool,
    /// A [`Stopper`] ended the sandbox (`Some(true)`: with SIGKILL at once).
    pub stopped: Option<bool>,
    /// Limits init saw reached (e.g. a full `/tmp`).
    pub limit_hits: Vec<LimitHit>,
}

/// A limit reached inside the sandbox, as init reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitHit {
    pub limit: String,
    pub detail: String,
    pub at: std::time::SystemTime,
}

/// Starts `spec` in a new sandbox with the given stdin, stdout and stderr.
///
/// Blocks the forwarded signals and SIGCHLD in the calling thread (they are handled
/// by [`Sandbox::wait`]); call it before starting other threads, which must inherit
/// that mask, and because `clone` copies only the calling thread.
pub fn spawn(spec: &SandboxSpec, stdio: [RawFd; 3]) -> Result<Sandbox, SandboxError> {
    spawn_in(spec, stdio, None)
}

/// [`spawn`], with the sandbox placed in `cgroup` before it runs anything.
pub fn spawn_in(
    spec: &SandboxSpec,
    stdio: [RawFd; 3],
    cgroup: Option<&crate::cgroup::Cgroup>,
) -> Result<Sandbox, SandboxError> {
    // `clone` copies only this thread, and init allocates: the contract below is
    // checked, not assumed, so that a library caller with threads gets an error
    // rather than an init that hangs on a lock copied in its held state.
    one_thread()?;
    // Loaded before the clone, matching nothing until it is told the sandbox's pid
    // namespace (below, before init's go). If it cannot load, execs go to the
    // listener instead: still recorded, each waiting for the supervisor.
    let (mut recorder, exec_trace) = match (spec.trace_exec, spec.exec_by_bpf) {
        (false, _) => (None, ExecTrace::Off),
        (true, false) => (
            None,
            ExecTrace::SeccompNotify {
                bpf_unavailable: None,
            },
        ),
        (true, true) => match crate::exectrace::ExecRecorder::load() {
            Ok(mut recorder) => {
                recorder.know_overlays(&spec.view.overlays());
                (Some(recorder), ExecTrace::Bpf)
            }
            Err(why) => (
                None,
                ExecTrace::SeccompNotify {
                    bpf_unavailable: Some(why),
                },
            ),
        },
    };
    let mut prepared = Prepared::new(spec, stdio, recorder.is_some())?;
    prepared.cpus = sys::affinity(0).ok().zip(sys::current_cpu());
    let mut notify_parent = None;
    if spec.trace_exec
        || spec.tty
        || spec.persistent
        || matches!(spec.network, SandboxNetwork::Tun(_))
    {
        let (parent, child) = sys::seqpacket_pair().map_err(SetupError::Fork)?;
        prepared.notify_sock = Some(child);
        notify_parent = Some(parent);
    }
    let signals = sys::sigset(&[FORWARDED_SIGNALS, &[libc::SIGCHLD, TERMINATE_ALL]].concat());
    sys::sigmask_set(&signals).map_err(SetupError::SignalMask)?;

    // On cgroup v1 init moves itself into the cgroup (see `Cgroup::entry_files`: no
    // RCU grace period on anyone's path); on v2 the supervisor moves it below.
    let entry = match cgroup {
        Some(cg) => cg.entry_files().map_err(SetupError::Cgroup)?,
        None => None,
    };
    let (sync_r, mut sync_w) = std::io::pipe().map_err(SetupError::Fork)?;
    let (report_r, report_w) = std::io::pipe().map_err(SetupError::Fork)?;
    // The cgroup namespace is made by init once the supervisor has moved it into the
    // sandbox's cgroup (the second byte below), so that its root is that cgroup and
    // /proc/self/cgroup shows "/" rather than the path on the host.
    let flags = namespaces(spec.network)
        .filter(|(_, f)| *f != libc::CLONE_NEWCGROUP)
        .fold(0, |acc, (_, f)| acc | f);
    // SAFETY: the child (init) allocates, so the supervisor must have one thread here:
    // `spawn`'s contract is to be called before any thread starts (the CLI starts its
    // relays, tracer and mediator only once `spawn_in` has returned).
    #[allow(unsafe_code)]
    let cloned = unsafe { sys::clone_fork(flags) };
    let pid = match cloned {
        Err(source) => {
            return Err(SetupError::Namespaces {
                hint: namespace_hint(&source),
                source,
            }
            .into());
        }
        Ok(None) => {
            drop(sync_w);
            drop(report_r);
            drop(notify_parent);
            crate::init::child_main(&prepared, entry.unwrap_or_default(), sync_r, report_w)
        }
        Ok(Some(pid)) => pid,
    };
    // Init builds the sandbox while the supervisor prepares the record: work for two
    // CPUs. A new process starts on its parent's CPU unless the scheduler spreads it
    // at once, which it may leave to its next tick (4 ms at 250 Hz), and the two
    // then take turns on one CPU. Best effort: init gives itself back the mask, on
    // this CPU, before anything of the command's runs.
    if let Some((cpus, here)) = prepared.cpus
        && let Some(elsewhere) = cpus.without(here)
    {
        let _ = sys::set_affinity(pid, &elsewhere);
    }
    let pidfd = match sys::pidfd_open(pid) {
        Ok(fd) => Arc::new(fd),
        Err(e) => {
            let _ = sys::kill(pid, libc::SIGKILL);
            let _ = sys::waitpid(pid, 0);
            return Err(SetupError::Pidfd(e).into());
        }
    };
    drop(sync_r);
    drop(report_w);
    drop(prepared.notify_sock.take());
    // Two bytes release init: "go" once its uid/gid maps are written, then
    // "placed" once it is in the sandbox's cgroup. On cgroup v1 init placed itself
    // first of all (through `entry`, which only it holds now). On v2 the supervisor
    // moves it here, which waits for an RCU grace period (milliseconds, more on a busy
    // machine), so it is done while init builds its file system; init waits for the
    // second byte before it makes its cgroup namespace and drops its capabilities,
    // long before anything of the command's can run. On failure init reads
    // end-of-file (ParentGone) or is killed here.
    let supervisor_moves = entry.is_none();
    drop(entry);
    // Nothing of the sandbox's has run: init waits for its go.
    if let Some(recorder) = recorder.as_mut()
        && let Err(e) = recorder.watch_namespace_of(pid)
    {
        let _ = sys::kill(pid, libc::SIGKILL);
        let _ = sys::waitpid(pid, 0);
        return Err(SetupError::ExecRecorder(e).into());
    }
    let released = write_id_maps(pid, &prepared.identity, prepared.inside)
        .and_then(|()| sync_w.write_all(b"1").map_err(SetupError::Fork))
        // While init builds its file system; before it is placed, so before
        // anything of the command's runs.
        .and_then(|()| match recorder.as_mut() {
            Some(recorder) => recorder.map_ring().map_err(SetupError::ExecRecorder),
            None => Ok(()),
        })
        .and_then(|()| match cgroup {
            Some(cg) if supervisor_moves => cg.attach(pid).map_err(SetupError::Cgroup),
            _ => Ok(()),
        })
        .and_then(|()| sync_w.write_all(b"2").map_err(SetupError::Fork));
    // Init may fail its own set-up (a working directory that does not exist, say)
    // while the supervisor is still placing it: then it has already exited, with
    // its reason in the report pipe, and never reads the second byte. Its report,
    // read like any other, says what went wrong; nothing of the command ran.
    let released = match released {
        Err(SetupError::Fork(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(_) if init_has_exited(pid) => Ok(()),
        other => other,
    };
    if let Err(e) = released {
        let _ = sys::kill(pid, libc::SIGKILL);
        let _ = sys::waitpid(pid, 0);
        return Err(e.into());
    }
    Ok(Sandbox {
        pid,
        notify: notify_parent,
        _alive: sync_w,
        report: report_r,
        early: Vec::new(),
        received: Vec::new(),
        alone: false,
        pidfd,
        stop: Arc::new(AtomicU8::new(STOP_NONE)),
        recorder,
        exec_trace,
    })
}

impl Sandbox {
    /// A sandbox whose "init" is another runtime's keeper (`runtime.rs`): it speaks
    /// the same report protocol and sends, on `notify`, only the TUN interface.
    pub(crate) fn from_keeper(
        pid: libc::pid_t,
        pidfd: OwnedFd,
        alive: PipeWriter,
        report: PipeReader,
        notify: Option<OwnedFd>,
    ) -> Self {
        Sandbox {
            pid,
            notify,
            _alive: alive,
            report,
            early: Vec::new(),
            received: Vec::new(),
            alone: false,
            pidfd: Arc::new(pidfd),
            stop: Arc::new(AtomicU8::new(STOP_NONE)),
            recorder: None,
            exec_trace: ExecTrace::SeccompNotify {
                bpf_unavailable: None,
            },
        }
    }
}

/// A sandbox's first process is a copy of the calling thread: with other threads
/// alive, it could wait for ever on a lock one of them held when it was copied.
///
/// A thread that has just ended (joined, or a previous session's detached helper on
/// its way out) stays listed until the kernel has released it, which under load can
/// take a moment: such a thread runs no code and holds no lock, so it gets
/// [`THREAD_EXIT_GRACE`] to go before the start is refused (the soak test, session 20,
/// was refused once for one).
pub(crate) fn one_thread() -> Result<(), SetupError> {
    let deadline = std::time::Instant::now() + THREAD_EXIT_GRACE;
    loop {
        let threads = std::fs::read_dir("/proc/self/task").map_or(1, Iterator::count);
        if threads <= 1 {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            return Err(SetupError::Threads { threads });
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// How long [`one_thread`] waits for threads that are ending.
const THREAD_EXIT_GRACE: std::time::Duration = std::time::Duration::from_millis(250);

fn write_id_maps(pid: libc::pid_t, id: &Identity, inside: (u32, u32)) -> Result<(), SetupError> {
    let write = |file: &'static str, text: String| {
        std::fs::write(format!("/proc/{pid}/{file}"), text)
            .map_err(|source| SetupError::IdMap { file, source })
    };
    if sys::getuid() != 0 {
        // Required before an unprivileged process may write a gid_map.
        write("setgroups", "deny".into())?;
    }
    write("uid_map", format!("{} {} 1\n", inside.0, id.uid))?;
    write("gid_map", format!("{} {} 1\n", inside.1, id.gid))
}

/// Explains the usual reasons a user namespace cannot be created, with the fix.
pub fn namespace_hint(e: &std::io::Error) -> String {
    let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return "Unprivileged user namespaces are disabled: run `sysctl -w kernel.unprivileged_userns_clone=1`".into();
    }
    if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return "User namespaces are disabled: run `sysctl -w user.max_user_namespaces=15000`"
            .into();
    }
    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        return "AppArmor restricts unprivileged user namespaces: run `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` or add an AppArmor profile for vectraguard with `userns,`".into();
    }
    match e.raw_os_error() {
        Some(libc::ENOSPC) => "Too many namespaces exist: raise user.max_user_namespaces".into(),
        Some(libc::EINVAL) => "This kernel lacks one of the namespaces (user, mount, pid, network, ipc, uts, cgroup); `vectraguard doctor` shows which".into(),
        _ => "Run `vectraguard doctor` to see which namespace is unavailable".into(),
    }
}

impl Sandbox {
    /// The host PID of the sandbox's init process.
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// How its execs are recorded.
    pub fn exec_trace(&self) -> &ExecTrace {
        &self.exec_trace
    }

    /// The BPF exec recorder, to serve with the listener
    /// ([`crate::trace::serve_with`]); `None` once taken or when execs go to the
    /// listener.
    pub fn exec_recorder(&mut self) -> Option<crate::exectrace::ExecRecorder> {
        self.recorder.take()
    }

    /// A handle that can stop the sandbox from another thread.
    pub fn killer(&self) -> Killer {
        Killer {
            pidfd: Arc::clone(&self.pidfd),
        }
    }

    /// With [`SandboxNetwork::Tun`], the packet side of the sandbox's TUN interface
    /// (first: init sends it before the exec listener and the terminal). Every packet
    /// the sandbox sends out is read here; nothing leaves unless the reader forwards it.
    pub fn tun(&mut self) -> Option<std::os::fd::OwnedFd> {
        self.next_fd_from_init()
    }

    /// A handle that asks [`Self::wait_with`] to end the sandbox (see [`Stopper`]).
    pub fn stopper(&self) -> Stopper {
        Stopper {
            stop: Arc::clone(&self.stop),
        }
    }

    /// With `trace_exec`, waits for the sandbox to finish setting up and returns the
    /// seccomp listener to serve with [`crate::trace::serve`] (on another thread: the
    /// command's first exec waits for it). `None` if setup failed (see [`Self::wait`]).
    pub fn exec_listener(&mut self) -> Option<std::os::fd::OwnedFd> {
        self.next_fd_from_init()
    }

    /// With `tty`, the master side of the sandbox's terminal (after
    /// [`Self::exec_listener`] when both are used: init sends them in that order).
    pub fn tty_master(&mut self) -> Option<std::os::fd::OwnedFd> {
        self.next_fd_from_init()
    }

    /// For a persistent sandbox, what starts its commands, once init has sent every
    /// descriptor it sends at setup (after [`Self::tun`], [`Self::exec_listener`]).
    /// Takes the socket: later calls get `None`.
    pub fn spawner(&mut self) -> Option<std::io::Result<crate::spawner::Spawner>> {
        let sock = self.notify.take()?;
        Some(crate::spawner::Spawner::new(sock))
    }

    /// The next descriptor init sends over the socket; `None` once init is gone.
    fn next_fd_from_init(&mut self) -> Option<std::os::fd::OwnedFd> {
        let sock = self.notify.as_ref()?;
        sys::recv_fd(sock.as_fd()).ok().flatten()
    }

    /// Waits until every layer is in place and returns the `key=value` lines that
    /// describe what is enforced, before the command starts. `None` when setup failed
    /// or the sandbox died; [`Self::wait`] then says why.
    pub fn ready(&mut self) -> Option<String> {
        if let Some(Message::Ready(text)) = self.early.first() {
            return Some(text.clone());
        }
        if !self.early.is_empty() {
            return None;
        }
        let mut message = Message::read_one(&mut self.report).ok().flatten()?;
        // Why execs wait for the supervisor although the recorder was asked for:
        // the record says so (`layers.exec_trace_bpf_unavailable`).
        if let (
            Message::Ready(text),
            ExecTrace::SeccompNotify {
                bpf_unavailable: Some(why),
            },
        ) = (&mut message, &self.exec_trace)
        {
            text.push_str(&format!(
                "exec_trace_bpf_unavailable={}\n",
                why.replace(['\n', '\r'], " ")
            ));
        }
        let text = match &message {
            Message::Ready(text) => Some(text.clone()),
            _ => None,
        };
        self.early.push(message);
        text
    }

    /// Forwards signals to the sandbox until it ends, then reports how the command ended.
    pub fn wait(self) -> Result<Outcome, SandboxError> {
        self.wait_until(None)
    }

    /// Like [`Self::wait`], ending the sandbox when `deadline` passes: SIGTERM to
    /// every process in it, then SIGKILL after the grace period.
    pub fn wait_until(
        self,
        deadline: Option<(Instant, Duration)>,
    ) -> Result<Outcome, SandboxError> {
        self.wait_with(deadline, DEFAULT_GRACE, &mut |_| false)
    }

    /// Like [`Self::wait_until`]; `on_signal` sees each forwarded signal first and
    /// returns true when it handled it (e.g. SIGWINCH for a terminal), so that it is
    /// not passed on.
    /// `grace` is the time between SIGTERM and SIGKILL for a [`Stopper`]'s stop
    /// when there is no deadline (with one, the deadline's grace applies).
    pub fn wait_with(
        self,
        deadline: Option<(Instant, Duration)>,
        grace: Duration,
        on_signal: &mut dyn FnMut(libc::c_int) -> bool,
    ) -> Result<Outcome, SandboxError> {
        self.wait_then(deadline, grace, on_signal, |_| ()).0
    }

    /// Like [`Self::wait_with`], running `then` on the result as soon as nothing of
    /// the sandbox runs any more, and before init itself is reaped. Init ends the
    /// sandbox's other processes itself when the command has ended and says so
    /// ([`Message::Alone`]); its own end, the teardown of the namespaces (about half
    /// a millisecond), then overlaps `then`'s work, the record's completion, instead
    /// of preceding it. When this returns init has been reaped, as with `wait`.
    pub fn wait_then<R>(
        mut self,
        deadline: Option<(Instant, Duration)>,
        grace: Duration,
        on_signal: &mut dyn FnMut(libc::c_int) -> bool,
        then: impl FnOnce(&mut Result<Outcome, SandboxError>) -> R,
    ) -> (Result<Outcome, SandboxError>, R) {
        let mut result = self
            .until_the_end(deadline, grace, on_signal)
            .and_then(|end| self.outcome(end));
        let after = then(&mut result);
        // Init only exits after `Alone`; on every other path it was reaped already
        // (or waiting failed, and dropping the sandbox leaves it to the kernel).
        if self.alone {
            loop {
                match sys::waitpid(self.pid, 0) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    _ => break,
                }
            }
        }
        (result, after)
    }

    /// Forwards signals, acts on the deadline and on stops, and reads init's
    /// messages until init has been reaped or has said it is [`Message::Alone`].
    fn until_the_end(
        &mut self,
        deadline: Option<(Instant, Duration)>,
        grace: Duration,
        on_signal: &mut dyn FnMut(libc::c_int) -> bool,
    ) -> Result<End, SandboxError> {
        let lost = |e: std::io::Error| SandboxError::Lost(e.to_string());
        let signals = sys::sigset(&[FORWARDED_SIGNALS, &[libc::SIGCHLD]].concat());
        // The signals stay blocked (since `spawn_in`); the descriptor takes them as
        // `sigwait` would, and can be polled with init's report pipe.
        let sigfd = sys::signalfd(&signals).map_err(lost)?;
        let stop_grace = deadline.map_or(grace, |(_, grace)| grace);
        let mut end = End::default();
        let mut next = deadline.map(|(at, _)| at);
        // The stop level acted on so far.
        let mut stopping = STOP_NONE;
        // SIGTERM was sent (at the deadline or a stop); SIGKILL comes at `next`.
        let mut terminating = false;
        // Until init's end of the pipe closes.
        let mut report_open = true;
        loop {
            let asked = self.stop.load(Ordering::SeqCst);
            if asked > stopping {
                stopping = asked;
                end.stopped = Some(asked == STOP_KILL);
                if asked == STOP_KILL {
                    let _ = sys::pidfd_send_signal(self.pidfd.as_fd(), libc::SIGKILL);
                    next = None;
                } else if !terminating {
                    // As at the deadline: SIGTERM to all, SIGKILL after the grace.
                    terminating = true;
                    let _ = sys::pidfd_send_signal(self.pidfd.as_fd(), TERMINATE_ALL);
                    next = Some(Instant::now() + stop_grace);
                }
            }
            let timeout_ms = next.map_or(-1, |at| {
                let left = at.saturating_duration_since(Instant::now());
                // Rounded up: woken before `at`, the loop would only poll again.
                libc::c_int::try_from(left.as_micros().div_ceil(1000)).unwrap_or(libc::c_int::MAX)
            });
            let revents = if report_open {
                sys::poll_read(&[sigfd.as_fd(), self.report.as_fd()], timeout_ms)
            } else {
                sys::poll_read(&[sigfd.as_fd()], timeout_ms)
            }
            .map_err(lost)?;
            if revents.get(1).is_some_and(|&r| r != 0) {
                let mut buf = [0u8; 4096];
                match std::io::Read::read(&mut self.report, &mut buf) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Ok(0) | Err(_) => report_open = false,
                    Ok(n) => {
                        self.received.extend_from_slice(&buf[..n]);
                        if Message::decode_all(&self.received).contains(&Message::Alone) {
                            self.alone = true;
                            return Ok(end);
                        }
                    }
                }
            }
            if let Some(at) = next
                && Instant::now() >= at
            {
                if terminating {
                    // The grace period is over.
                    let _ = sys::pidfd_send_signal(self.pidfd.as_fd(), libc::SIGKILL);
                    next = None;
                } else {
                    end.timed_out = true;
                    terminating = true;
                    let _ = sys::pidfd_send_signal(self.pidfd.as_fd(), TERMINATE_ALL);
                    next = Some(Instant::now() + stop_grace);
                }
            }
            for got in sys::signalfd_read(sigfd.as_fd()) {
                let sig = got.signal;
                if sig == libc::SIGCHLD {
                    if let Some((_, status)) =
                        sys::waitpid(self.pid, libc::WNOHANG).map_err(lost)?
                    {
                        end.init_status = Some(status);
                        return Ok(end);
                    }
                    continue;
                }
                if !on_signal(sig) {
                    let _ = sys::kill(self.pid, sig);
                }
            }
        }
    }

    /// How the command ended, from init's messages: all of them once init was
    /// reaped, or those before [`Message::Alone`], its last.
    fn outcome(&mut self, end: End) -> Result<Outcome, SandboxError> {
        if end.init_status.is_some() {
            let _ = std::io::Read::read_to_end(&mut self.report, &mut self.received);
        }
        let mut messages = std::mem::take(&mut self.early);
        messages.extend(Message::decode_all(&self.received));
        let End {
            init_status,
            timed_out,
            stopped,
        } = end;
        let mut enforced = String::new();
        let mut command_pid = None;
        let mut limit_hits = Vec::new();
        for message in messages {
            match message {
                Message::Ready(text) => enforced = text,
                Message::Started(pid) => command_pid = Some(pid),
                Message::LimitHit {
                    limit,
                    detail,
                    unix_ms,
                } => limit_hits.push(LimitHit {
                    limit,
                    detail,
                    at: std::time::UNIX_EPOCH + Duration::from_millis(unix_ms),
                }),
                Message::SetupFailed { layer, message } => {
                    return Err(SandboxError::Layer { layer, message });
                }
                Message::ExecFailed(errno) => {
                    return Ok(Outcome {
                        termination: Termination::ExecFailed(errno),
                        command_pid,
                        enforced,
                        timed_out,
                        stopped,
                        limit_hits,
                    });
                }
                Message::Exited(status) => {
                    return Ok(Outcome {
                        termination: decode_status(status),
                        command_pid,
                        enforced,
                        timed_out,
                        stopped,
                        limit_hits,
                    });
                }
                Message::Alone => {}
            }
        }
        if timed_out || stopped.is_some() {
            // Killed at the end of the grace period (or by a stop with SIGKILL),
            // before the command ended.
            return Ok(Outcome {
                termination: Termination::Signalled(libc::SIGKILL),
                command_pid,
                enforced,
                timed_out,
                stopped,
                limit_hits,
            });
        }
        Err(SandboxError::Lost(match init_status.map(decode_status) {
            Some(Termination::Signalled(sig)) => format!("init was killed by signal {sig}"),
            Some(Termination::Exited(code)) => format!("init exited with status {code}"),
            _ => "unknown".into(),
        }))
    }
}

/// How waiting for a sandbox ended.
#[derive(Debug, Default)]
struct End {
    /// Init's wait status once reaped; `None` when it said it is alone and is still
    /// to be reaped.
    init_status: Option<i32>,
    timed_out: bool,
    stopped: Option<bool>,
}

pub(crate) fn decode_status(status: i32) -> Termination {
    if libc::WIFSIGNALED(status) {
        Termination::Signalled(libc::WTERMSIG(status))
    } else {
        Termination::Exited(libc::WEXITSTATUS(status))
    }
}

/// Whether `pid` (our child, not yet reaped) has exited: a zombie, or gone.
fn init_has_exited(pid: libc::pid_t) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name's closing parenthesis.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| matches!(state, 'Z' | 'X')),
        Err(_) => true,
    }
}
