//! The supervisor's side: prepare everything that can fail early, create the
//! namespaces with one `clone`, write the identity maps, and wait.

use std::ffi::CString;
use std::io::{PipeReader, PipeWriter, Write};
use std::os::fd::{AsFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use vg_policy::{FsView, Identity, LandlockRules};

use crate::error::{SandboxError, SetupError};
use crate::protocol::Message;
use crate::{init, seccomp, sys};

/// Signals the supervisor passes on to the sandboxed command.
pub const FORWARDED_SIGNALS: &[libc::c_int] = &[
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGWINCH,
    libc::SIGCONT,
];

/// Every namespace the sandbox gets. All are created by a single `clone`.
pub const NAMESPACES: &[(&str, libc::c_int)] = &[
    ("user", libc::CLONE_NEWUSER),
    ("mount", libc::CLONE_NEWNS),
    ("pid", libc::CLONE_NEWPID),
    ("network", libc::CLONE_NEWNET),
    ("ipc", libc::CLONE_NEWIPC),
    ("uts", libc::CLONE_NEWUTS),
    ("cgroup", libc::CLONE_NEWCGROUP),
];

/// What to run and how to confine it.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    pub hostname: String,
    /// The command; `argv[0]` is looked up in the sandbox's PATH when it has no `/`.
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub workdir: PathBuf,
    pub view: FsView,
    pub identity: Identity,
    /// The uid and gid the command has inside its user namespace, mapped to
    /// `identity`'s on the host. `None`: the same numbers as on the host. An image's
    /// root user is `Some((0, 0))`: root inside, an unprivileged user outside.
    pub inside: Option<(u32, u32)>,
    /// Send every exec and exit to the supervisor ([`Sandbox::exec_listener`]).
    pub trace_exec: bool,
    /// `RLIMIT_NPROC` for the sandbox user, counted within the sandbox's own user
    /// namespace (Linux 5.14+ keeps per-namespace counts): a process cap where no
    /// cgroup is available.
    pub rlimit_nproc: Option<u64>,
    /// Mount points inside the sandbox whose filling up is reported as a limit hit.
    pub watch_full: Vec<PathBuf>,
    /// Give the command a pseudo-terminal of the sandbox's own devpts as its stdio
    /// (the `stdio` passed to spawn is then not used); the supervisor gets the
    /// master from [`Sandbox::tty_master`].
    pub tty: bool,
    pub network: SandboxNetwork,
}

/// The sandbox's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxNetwork {
    /// A private network namespace with loopback only.
    #[default]
    Loopback,
    /// A private network namespace whose only way out is a TUN interface; the
    /// supervisor gets the other end from [`Sandbox::tun`] and decides what passes.
    Tun(TunConfig),
    /// The host's network namespace: no network isolation at all.
    Host,
}

/// How the sandbox's TUN interface is addressed. Everything not on loopback is
/// routed through `gateway` on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunConfig {
    pub name: &'static str,
    pub address: std::net::Ipv4Addr,
    pub netmask: std::net::Ipv4Addr,
    pub gateway: std::net::Ipv4Addr,
    pub mtu: u16,
}

impl SandboxNetwork {
    /// Whether the sandbox gets its own network namespace.
    pub fn private(self) -> bool {
        !matches!(self, Self::Host)
    }
}

/// The namespaces a sandbox with `network` gets, by name and clone flag.
pub fn namespaces(
    network: SandboxNetwork,
) -> impl Iterator<Item = &'static (&'static str, libc::c_int)> {
    NAMESPACES
        .iter()
        .filter(move |(_, flag)| *flag != libc::CLONE_NEWNET || network.private())
}

/// Tells init to send SIGTERM to every process in the sandbox (a timeout). Not a
/// forwarded signal, and processes inside cannot send it to init: the kernel drops
/// signals to a namespace's init that it has no handler for.
pub const TERMINATE_ALL: libc::c_int = libc::SIGPWR;

/// Everything the child needs, prepared before `clone` so the child allocates little
/// and every host-side check has already happened.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub ops: Vec<vg_policy::MountOp>,
    pub landlock: LandlockRules,
    pub seccomp: Vec<vg_seccomp::SockFilter>,
    pub argv: Vec<CString>,
    pub envp: Vec<CString>,
    pub path_dirs: Vec<CString>,
    pub hostname: Vec<u8>,
    pub workdir: PathBuf,
    pub identity: Identity,
    /// `identity` as seen inside the user namespace.
    pub inside: (u32, u32),
    pub switch_identity: bool,
    pub stdio: [RawFd; 3],
    pub trace_exec: bool,
    pub rlimit_nproc: Option<u64>,
    pub watch_full: Vec<CString>,
    pub tty: bool,
    pub network: SandboxNetwork,
    /// With an image in a run started as root: the image as an idmapped mount.
    pub image_lower: Option<OwnedFd>,
    /// The child's end of the socket that carries the seccomp listener.
    pub notify_sock: Option<std::os::fd::OwnedFd>,
}

fn cstring(s: impl AsRef<[u8]>, what: &str) -> Result<CString, SandboxError> {
    CString::new(s.as_ref()).map_err(|_| SandboxError::Usage(format!("{what} contains a NUL byte")))
}

impl Prepared {
    fn new(spec: &SandboxSpec, stdio: [RawFd; 3]) -> Result<Self, SandboxError> {
        let invoker = sys::getuid();
        if spec.identity.uid == 0 {
            return Err(SandboxError::Usage(
                "the sandboxed command never runs as root: choose an unprivileged --user".into(),
            ));
        }
        if invoker != 0 && (spec.identity.uid != invoker || spec.identity.gid != sys::getgid()) {
            return Err(SandboxError::Usage(
                "--user needs root: an unprivileged user can only run the sandbox as itself".into(),
            ));
        }
        let argv = spec
            .argv
            .iter()
            .map(|a| cstring(a, "an argument"))
            .collect::<Result<Vec<_>, _>>()?;
        if argv.is_empty() {
            return Err(SandboxError::Usage("no command to run".into()));
        }
        let envp = spec
            .env
            .iter()
            .map(|(k, v)| cstring(format!("{k}={v}"), "an environment variable"))
            .collect::<Result<Vec<_>, _>>()?;
        let path = spec
            .env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str())
            .unwrap_or(vg_policy::env::SANDBOX_PATH);
        let path_dirs = path
            .split(':')
            .filter(|d| !d.is_empty())
            .map(|d| cstring(d, "PATH"))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            ops: spec.view.ops.clone(),
            landlock: spec.view.landlock_rules(),
            seccomp: seccomp::compile(spec.trace_exec)?,
            argv,
            envp,
            path_dirs,
            hostname: spec.hostname.as_bytes().to_vec(),
            workdir: spec.workdir.clone(),
            identity: spec.identity.clone(),
            inside: spec
                .inside
                .unwrap_or((spec.identity.uid, spec.identity.gid)),
            switch_identity: invoker == 0,
            stdio,
            trace_exec: spec.trace_exec,
            rlimit_nproc: spec.rlimit_nproc,
            tty: spec.tty,
            network: spec.network,
            watch_full: spec
                .watch_full
                .iter()
                .map(|p| cstring(p.as_os_str().as_encoded_bytes(), "a watched path"))
                .collect::<Result<_, _>>()?,
            image_lower: match spec.view.ops.first() {
                Some(vg_policy::MountOp::ImageRoot { lower, .. }) if invoker == 0 => Some(
                    crate::idmap::image_for(lower, (spec.identity.uid, spec.identity.gid))?,
                ),
                _ => None,
            },
            notify_sock: None,
        })
    }
}

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
    /// Refers to init for as long as we hold it, so signals never hit a recycled pid.
    pidfd: Arc<OwnedFd>,
}

/// Stops a sandbox from any thread: signals its init, and when init dies the kernel
/// kills every process in the sandbox's PID namespace.
#[derive(Debug, Clone)]
pub struct Killer {
    pidfd: Arc<OwnedFd>,
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
}

/// How the sandboxed command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    Exited(i32),
    Signalled(i32),
    /// `execve` failed with this errno.
    ExecFailed(i32),
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
    let mut prepared = Prepared::new(spec, stdio)?;
    let mut notify_parent = None;
    if spec.trace_exec || spec.tty || matches!(spec.network, SandboxNetwork::Tun(_)) {
        let (parent, child) = sys::seqpacket_pair().map_err(SetupError::Fork)?;
        prepared.notify_sock = Some(child);
        notify_parent = Some(parent);
    }
    let signals = sys::sigset(&[FORWARDED_SIGNALS, &[libc::SIGCHLD, TERMINATE_ALL]].concat());
    sys::sigmask_set(&signals).map_err(|e| SetupError::Internal(format!("signal mask: {e}")))?;

    let (sync_r, mut sync_w) = std::io::pipe().map_err(SetupError::Fork)?;
    let (report_r, report_w) = std::io::pipe().map_err(SetupError::Fork)?;
    // The cgroup namespace is made by init once the supervisor has moved it into the
    // sandbox's cgroup (before the go byte), so that its root is that cgroup and
    // /proc/self/cgroup shows "/" rather than the path on the host.
    let flags = namespaces(spec.network)
        .filter(|(_, f)| *f != libc::CLONE_NEWCGROUP)
        .fold(0, |acc, (_, f)| acc | f);
    let pid = match sys::clone_fork(flags) {
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
            init::child_main(&prepared, sync_r, report_w)
        }
        Ok(Some(pid)) => pid,
    };
    let pidfd = match sys::pidfd_open(pid) {
        Ok(fd) => Arc::new(fd),
        Err(e) => {
            let _ = sys::kill(pid, libc::SIGKILL);
            let _ = sys::waitpid(pid, 0);
            return Err(SetupError::Internal(format!(
                "pidfd_open (Linux 5.3 or later is required): {e}"
            ))
            .into());
        }
    };
    drop(sync_r);
    drop(report_w);
    drop(prepared.notify_sock.take());
    let placed = match cgroup {
        Some(cg) => cg.attach(pid).map_err(SetupError::Cgroup),
        None => Ok(()),
    };
    if let Err(e) = placed.and_then(|()| write_id_maps(pid, &prepared.identity, prepared.inside)) {
        let _ = sys::kill(pid, libc::SIGKILL);
        let _ = sys::waitpid(pid, 0);
        return Err(e.into());
    }
    // On failure the child reads end-of-file and gives up (ParentGone).
    sync_w.write_all(b"1").map_err(SetupError::Fork)?;
    Ok(Sandbox {
        pid,
        notify: notify_parent,
        _alive: sync_w,
        report: report_r,
        early: Vec::new(),
        pidfd,
    })
}

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
        let message = Message::read_one(&mut self.report).ok().flatten()?;
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
        self.wait_with(deadline, &mut |_| false)
    }

    /// Like [`Self::wait_until`]; `on_signal` sees each forwarded signal first and
    /// returns true when it handled it (e.g. SIGWINCH for a terminal), so that it is
    /// not passed on.
    pub fn wait_with(
        mut self,
        deadline: Option<(Instant, Duration)>,
        on_signal: &mut dyn FnMut(libc::c_int) -> bool,
    ) -> Result<Outcome, SandboxError> {
        let signals = sys::sigset(&[FORWARDED_SIGNALS, &[libc::SIGCHLD]].concat());
        let mut timed_out = false;
        let mut next = deadline.map(|(at, _)| at);
        let init_status = loop {
            let sig = match next {
                None => {
                    sys::sigwait(&signals)
                        .map_err(|e| SandboxError::Lost(e.to_string()))?
                        .0
                }
                Some(at) => {
                    let left = at.saturating_duration_since(Instant::now());
                    match sys::sigtimedwait(&signals, left)
                        .map_err(|e| SandboxError::Lost(e.to_string()))?
                    {
                        Some(sig) => sig,
                        None if Instant::now() < at => continue,
                        None => {
                            if timed_out {
                                // The grace period is over.
                                let _ = sys::pidfd_send_signal(self.pidfd.as_fd(), libc::SIGKILL);
                                next = None;
                            } else {
                                timed_out = true;
                                let _ = sys::pidfd_send_signal(self.pidfd.as_fd(), TERMINATE_ALL);
                                next = deadline.map(|(_, grace)| Instant::now() + grace);
                            }
                            continue;
                        }
                    }
                }
            };
            if sig != libc::SIGCHLD && on_signal(sig) {
                continue;
            }
            if sig == libc::SIGCHLD {
                if let Some((_, status)) = sys::waitpid(self.pid, libc::WNOHANG)
                    .map_err(|e| SandboxError::Lost(e.to_string()))?
                {
                    break status;
                }
                continue;
            }
            let _ = sys::kill(self.pid, sig);
        };
        let mut messages = std::mem::take(&mut self.early);
        messages.extend(Message::read_all(&mut self.report).unwrap_or_default());
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
                        limit_hits,
                    });
                }
                Message::Exited(status) => {
                    return Ok(Outcome {
                        termination: decode_status(status),
                        command_pid,
                        enforced,
                        timed_out,
                        limit_hits,
                    });
                }
            }
        }
        if timed_out {
            // Killed at the end of the grace period, before the command ended.
            return Ok(Outcome {
                termination: Termination::Signalled(libc::SIGKILL),
                command_pid,
                enforced,
                timed_out,
                limit_hits,
            });
        }
        Err(SandboxError::Lost(match decode_status(init_status) {
            Termination::Signalled(sig) => format!("init was killed by signal {sig}"),
            Termination::Exited(code) => format!("init exited with status {code}"),
            Termination::ExecFailed(_) => "unknown".into(),
        }))
    }
}

fn decode_status(status: i32) -> Termination {
    if libc::WIFSIGNALED(status) {
        Termination::Signalled(libc::WTERMSIG(status))
    } else {
        Termination::Exited(libc::WEXITSTATUS(status))
    }
}

impl Termination {
    /// The exit status Vectra Guard reports, shell-style.
    pub fn exit_code(self) -> i32 {
        match self {
            Self::Exited(code) => code,
            Self::Signalled(sig) => 128 + sig,
            Self::ExecFailed(libc::ENOENT | libc::ENOTDIR) => 127,
            Self::ExecFailed(_) => 126,
        }
    }
}
