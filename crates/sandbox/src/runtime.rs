//! A sandbox that another runtime builds: gVisor's `runsc`, or a container engine's
//! client. The supervisor starts a small keeper process where the native sandbox
//! has its init, so that everything above — the relays, the record, time-outs,
//! stops, signals, `Outcome` — is the same [`Sandbox`] for every backend.
//!
//! The keeper has no namespaces of its own: the runtime makes the isolation. It
//! enters the session's cgroup first (so the runtime and everything it starts, the
//! gVisor sentry included, is held by the memory, CPU and pid limits), starts the
//! runtime's command with the session's stdio, drops root first when asked, and
//! then behaves as init does: it reports ready with the enforced layers, turns the
//! forwarded signals into the runtime's own signal command (`runsc kill`, `docker
//! kill`), [`TERMINATE_ALL`] into its terminate-everything command, and reports the
//! runtime's exit status, which is the command's. Each process it starts dies with
//! it (`PR_SET_PDEATHSIG`), so a SIGKILL to the keeper ends the runtime too.
//!
//! With [`RuntimeSpec::tun`] (gVisor under `--network allow`), the keeper first
//! makes a user and network namespace of its own, as the runtime's user, whose only
//! way out is a TUN interface, and sends that interface's packet side to the
//! supervisor as native init does ([`Sandbox::tun`]): the runtime and everything it
//! starts live in that namespace, so whatever leaves the sandbox goes through the
//! supervisor's mediator.

use std::ffi::CString;
use std::io::{PipeReader, PipeWriter, Read, Write};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::PathBuf;

use crate::error::{SandboxError, SetupError};
use crate::init::{Exec, exec_command};
use crate::protocol::Message;
use crate::spawn::Sandbox;
use crate::spec::{FORWARDED_SIGNALS, TERMINATE_ALL};
use crate::sys;

/// How to run and steer a runtime's command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeSpec {
    /// The runtime's command; `argv[0]` is an absolute path (no `PATH` search).
    pub argv: Vec<String>,
    /// Its whole environment.
    pub env: Vec<(String, String)>,
    /// Where it runs.
    pub cwd: PathBuf,
    /// Switch to this uid and gid (no supplementary groups) before starting it; only
    /// for a supervisor running as root.
    pub identity: Option<(u32, u32)>,
    /// The `key=value` lines reported ready: what the runtime was asked to enforce.
    pub enforced: String,
    /// Sends a signal to the command: each argument equal to [`SIGNAL_PLACEHOLDER`]
    /// is replaced by the signal's number.
    pub signal: Vec<String>,
    /// Sends SIGTERM to every process of the sandbox (a time-out, a stop).
    pub terminate_all: Vec<String>,
    /// The command's pid as the sandbox numbers it, when the runtime fixes it (gVisor:
    /// 1), reported as init reports the command's.
    pub command_pid: Option<i32>,
    /// Run the runtime (and its signal commands) in a user and network namespace
    /// the keeper makes, whose only interface besides loopback is this TUN
    /// interface; the keeper is root of that user namespace (mapped to the
    /// runtime's user, [`Self::identity`] or ours) and sends the interface's packet
    /// side first, for [`Sandbox::tun`].
    pub tun: Option<crate::spec::TunConfig>,
    /// Run the runtime (and its signal commands) in a user and network namespace
    /// the keeper makes, as for [`Self::tun`], with loopback only when there is no
    /// TUN interface: what the runtime binds in its network namespace (runsc's
    /// control socket, an abstract unix socket that checks no caller) is then out
    /// of reach of the host's other users, who could otherwise run commands in the
    /// sandbox, unrecorded, signal or destroy it.
    pub private_network: bool,
    /// The runtime's console socket (`runsc run --console-socket`): the keeper
    /// listens there before starting the runtime, takes the terminal's master side
    /// the runtime sends, and passes it to the supervisor (after the TUN interface)
    /// for [`Sandbox::tty_master`]. The runtime then gets `/dev/null` as its own
    /// stdio: the user's terminal is never handed to it.
    pub console: Option<PathBuf>,
}

/// Makes `command` run in the user and network namespace of the keeper `keeper`
/// (a host pid) made for [`RuntimeSpec::tun`], where the runtime runs: a command
/// that must reach it there (`runsc exec`, whose control socket is an abstract
/// unix socket of that network namespace). `command` must run as the runtime's
/// user (the namespace's owner), or as root.
pub fn in_keeper_namespaces(
    command: &mut std::process::Command,
    keeper: i32,
) -> std::io::Result<()> {
    let open = |ns: &str| {
        std::fs::File::open(format!("/proc/{keeper}/ns/{ns}")).map(std::os::fd::OwnedFd::from)
    };
    sys::join_before_exec(command, open("user")?, open("net")?);
    Ok(())
}

/// What a runtime's persistent sandbox runs as its first process (gVisor's, whose
/// commands come through `runsc exec`): it only reaps the processes the sandbox's
/// kernel gives it (those whose parent ended), so that none is left a zombie, and
/// waits forever. It installs no signal handler and opens nothing.
pub fn reap_forever() -> ! {
    loop {
        match sys::waitpid(-1, 0) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
            // No child yet: look again soon (an orphan given to us is reaped
            // within this pause).
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(100)),
        }
    }
}

/// Stands for the signal's number in [`RuntimeSpec::signal`].
pub const SIGNAL_PLACEHOLDER: &str = "{signal}";

/// The keeper's plan, as C strings made before `fork`.
struct Prepared {
    main: Vec<CString>,
    envp: Vec<CString>,
    cwd: CString,
    identity: Option<(u32, u32)>,
    enforced: String,
    /// One command per forwarded signal, in [`FORWARDED_SIGNALS`]' order.
    signals: Vec<Vec<CString>>,
    /// The signal command with SIGCONT, run after a forwarded SIGHUP or SIGTERM.
    cont: Vec<CString>,
    terminate_all: Vec<CString>,
    devnull: std::fs::File,
    stdio: [RawFd; 3],
    command_pid: Option<i32>,
    tun: Option<crate::spec::TunConfig>,
    private_network: bool,
    console: Option<PathBuf>,
    /// The keeper's end of the socket the TUN and terminal descriptors are sent on.
    notify: Option<std::os::fd::OwnedFd>,
}

fn cstrings<'a>(
    args: impl IntoIterator<Item = &'a str>,
    what: &str,
) -> Result<Vec<CString>, SetupError> {
    args.into_iter()
        .map(|a| {
            CString::new(a).map_err(|_| SetupError::Runtime(format!("{what} contains a NUL byte")))
        })
        .collect()
}

impl Prepared {
    fn new(spec: &RuntimeSpec, stdio: [RawFd; 3]) -> Result<Self, SetupError> {
        match spec.argv.first() {
            Some(program) if program.starts_with('/') => {}
            _ => {
                return Err(SetupError::Runtime(
                    "the runtime's command must start with an absolute path".into(),
                ));
            }
        }
        for command in [&spec.signal, &spec.terminate_all] {
            if command.first().is_none_or(|p| !p.starts_with('/')) {
                return Err(SetupError::Runtime(
                    "the runtime's signal commands must start with an absolute path".into(),
                ));
            }
        }
        let signal_command = |sig: libc::c_int| {
            let number = sig.to_string();
            cstrings(
                spec.signal.iter().map(|a| {
                    if a == SIGNAL_PLACEHOLDER {
                        number.as_str()
                    } else {
                        a.as_str()
                    }
                }),
                "the signal command",
            )
        };
        let signals = FORWARDED_SIGNALS
            .iter()
            .map(|&sig| signal_command(sig))
            .collect::<Result<_, _>>()?;
        let cont = signal_command(libc::SIGCONT)?;
        let env: Vec<String> = spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        Ok(Prepared {
            main: cstrings(
                spec.argv.iter().map(String::as_str),
                "the runtime's command",
            )?,
            envp: cstrings(env.iter().map(String::as_str), "the runtime's environment")?,
            cwd: CString::new(spec.cwd.as_os_str().as_encoded_bytes()).map_err(|_| {
                SetupError::Runtime("the runtime's folder contains a NUL byte".into())
            })?,
            identity: spec.identity,
            enforced: spec.enforced.clone(),
            signals,
            cont,
            terminate_all: cstrings(
                spec.terminate_all.iter().map(String::as_str),
                "the terminate command",
            )?,
            devnull: std::fs::File::options()
                .read(true)
                .write(true)
                .open("/dev/null")
                .map_err(SetupError::Fork)?,
            stdio,
            command_pid: spec.command_pid,
            tun: spec.tun,
            private_network: spec.private_network || spec.tun.is_some(),
            console: spec.console.clone(),
            notify: None,
        })
    }
}

/// Starts the runtime's command under a keeper (see the module documentation),
/// with the given stdin, stdout and stderr, placed in `cgroup` before it runs.
///
/// As [`crate::spawn_in`]: call it while the process has one thread; it blocks the
/// forwarded signals and SIGCHLD in the calling thread, for [`Sandbox::wait`].
pub fn spawn_runtime(
    spec: &RuntimeSpec,
    stdio: [RawFd; 3],
    cgroup: Option<&crate::cgroup::Cgroup>,
) -> Result<Sandbox, SandboxError> {
    crate::spawn::one_thread()?;
    let mut prepared = Prepared::new(spec, stdio)?;
    let mut notify_parent = None;
    if spec.tun.is_some() || spec.console.is_some() {
        let (parent, child) = sys::seqpacket_pair().map_err(SetupError::Fork)?;
        prepared.notify = Some(child);
        notify_parent = Some(parent);
    }
    let signals = sys::sigset(&[FORWARDED_SIGNALS, &[libc::SIGCHLD, TERMINATE_ALL]].concat());
    sys::sigmask_set(&signals).map_err(SetupError::SignalMask)?;
    let entry = match cgroup {
        Some(cg) => cg.entry_files().map_err(SetupError::Cgroup)?,
        None => None,
    };
    let (sync_r, mut sync_w) = std::io::pipe().map_err(SetupError::Fork)?;
    let (report_r, report_w) = std::io::pipe().map_err(SetupError::Fork)?;
    // SAFETY: the keeper allocates, so the supervisor must have one thread here:
    // checked above, as `spawn_in` does.
    #[allow(unsafe_code)]
    let forked = unsafe { sys::fork() }.map_err(SetupError::Fork)?;
    let pid = match forked {
        None => {
            drop(sync_w);
            drop(report_r);
            keeper_main(&prepared, entry.unwrap_or_default(), sync_r, report_w)
        }
        Some(pid) => pid,
    };
    drop(sync_r);
    drop(report_w);
    drop(prepared.notify.take());
    let supervisor_moves = entry.is_none();
    drop(entry);
    let pidfd = match sys::pidfd_open(pid) {
        Ok(fd) => fd,
        Err(e) => {
            let _ = sys::kill(pid, libc::SIGKILL);
            let _ = sys::waitpid(pid, 0);
            return Err(SetupError::Pidfd(e).into());
        }
    };
    let released = match cgroup {
        Some(cg) if supervisor_moves => cg.attach(pid).map_err(SetupError::Cgroup),
        _ => Ok(()),
    }
    .and_then(|()| sync_w.write_all(b"1").map_err(SetupError::Fork));
    if let Err(e) = released {
        let _ = sys::kill(pid, libc::SIGKILL);
        let _ = sys::waitpid(pid, 0);
        return Err(e.into());
    }
    Ok(Sandbox::from_keeper(
        pid,
        pidfd,
        sync_w,
        report_r,
        notify_parent,
    ))
}

/// The keeper: never returns.
fn keeper_main(
    p: &Prepared,
    cgroup_entry: Vec<std::fs::File>,
    mut sync: PipeReader,
    mut report: PipeWriter,
) -> ! {
    let supervisor = std::os::unix::process::parent_id();
    let fail = |report: &mut PipeWriter, layer: &str, message: String| -> ! {
        let _ = Message::SetupFailed {
            layer: layer.to_owned(),
            message,
        }
        .send(report);
        sys::exit_now(125)
    };
    if let Err(e) = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0) {
        fail(
            &mut report,
            "runtime",
            format!("cannot set the parent-death signal: {e}"),
        );
    }
    // Into the session's cgroup before anything is started (cgroup v1; on v2 the
    // supervisor has moved us before the byte below).
    for mut tasks in cgroup_entry {
        if let Err(e) = tasks.write_all(b"0") {
            fail(
                &mut report,
                "limits",
                format!("cannot enter the session's cgroup: {e}"),
            );
        }
    }
    let mut go = [0u8; 1];
    if !matches!(sync.read(&mut go), Ok(1)) {
        sys::exit_now(125);
    }
    // With a TUN interface or a console socket, the identity is taken here, by the
    // keeper itself: the namespaces it makes are then owned by the runtime's user,
    // never by root, and the runtime's children are root only of them; the console
    // socket is the runtime's user's to connect to.
    let own_identity = p.private_network || p.console.is_some();
    if own_identity && let Err((layer, message)) = take_identity(p, supervisor) {
        fail(&mut report, layer, message);
    }
    // Only a TUN interface or a terminal is sent to the supervisor.
    let sends = p.tun.is_some() || p.console.is_some();
    let notify = match (&p.notify, sends) {
        (Some(notify), true) => Some(notify.as_fd()),
        (None, true) => fail(
            &mut report,
            "runtime",
            "no socket to send the sandbox's descriptors on".into(),
        ),
        (_, false) => None,
    };
    if p.private_network
        && let Err((layer, message)) = private_network(p, p.tun.zip(notify))
    {
        fail(&mut report, layer, message);
    }
    let console = match &p.console {
        Some(path) => match std::os::unix::net::UnixListener::bind(path)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
        {
            Ok(listener) => Some(listener),
            Err(e) => fail(
                &mut report,
                "terminal",
                format!(
                    "cannot listen on the console socket {}: {e}",
                    path.display()
                ),
            ),
        },
        None => None,
    };
    let identity_in_child = if own_identity { None } else { p.identity };
    let stdio = if console.is_some() {
        [p.devnull.as_raw_fd(); 3]
    } else {
        p.stdio
    };
    let Ok((mut err_r, err_w)) = std::io::pipe() else {
        sys::exit_now(125)
    };
    let keeper = std::process::id();
    // SAFETY: the keeper has one thread (a copy of the supervisor's only one).
    #[allow(unsafe_code)]
    let forked = unsafe { sys::fork() };
    let main = match forked {
        Ok(Some(pid)) => pid,
        Ok(None) => {
            drop(err_r);
            start_child(p, identity_in_child, &p.main, stdio, err_w, true, keeper)
        }
        Err(e) => fail(&mut report, "runtime", format!("cannot fork: {e}")),
    };
    drop(err_w);
    // The stdio belongs to the runtime: without our copies, the supervisor sees
    // end-of-file once the last writer in the sandbox is gone.
    let mut keep = vec![report.as_raw_fd(), err_r.as_raw_fd(), sync.as_raw_fd()];
    keep.push(p.devnull.as_raw_fd());
    keep.extend(notify.map(|n| n.as_raw_fd()));
    keep.extend(console.as_ref().map(AsRawFd::as_raw_fd));
    // SAFETY: the keeper never returns (it ends in exit_now), so descriptors closed
    // here that objects still own are never used or dropped again.
    #[allow(unsafe_code)]
    unsafe {
        sys::close_all_except(&keep)
    };
    let mut errno = [0u8; 4];
    if let Ok(4) = err_r.read(&mut errno) {
        let _ = Message::ExecFailed(i32::from_le_bytes(errno)).send(&mut report);
        sys::exit_now(0);
    }
    drop(err_r);
    if let (Some(listener), Some(notify)) = (&console, notify) {
        match pass_console(listener, notify, main) {
            Ok(()) => {}
            // The runtime ended before it sent a terminal: its status says why.
            Err(Some(status)) => {
                let _ = Message::Exited(status).send(&mut report);
                sys::exit_now(0);
            }
            Err(None) => {
                // Nothing of the command may run on without its terminal relayed:
                // the runtime goes, and its sandbox with it (attached, it dies
                // with the runtime).
                let _ = sys::kill(main, libc::SIGKILL);
                fail(
                    &mut report,
                    "terminal",
                    format!(
                        "the runtime sent no terminal to its console socket within {} s, or it could not be passed on; run without -t to see the runtime's own error",
                        CONSOLE_WAIT.as_secs()
                    ),
                )
            }
        }
    }
    drop(console);
    if let Some(path) = &p.console {
        let _ = std::fs::remove_file(path);
    }
    if Message::Ready(p.enforced.clone())
        .send(&mut report)
        .is_err()
    {
        sys::exit_now(125);
    }
    if let Some(pid) = p.command_pid {
        let _ = Message::Started(pid).send(&mut report);
    }
    let set = sys::sigset(&[FORWARDED_SIGNALS, &[libc::SIGCHLD, TERMINATE_ALL]].concat());
    loop {
        let sig = match sys::sigwait(&set) {
            Ok((sig, _)) => sig,
            Err(_) => sys::exit_now(125),
        };
        if sig == TERMINATE_ALL {
            let _ = run_helper(p, identity_in_child, &p.terminate_all);
            continue;
        }
        if let Some(i) = FORWARDED_SIGNALS.iter().position(|&s| s == sig) {
            let sent = run_helper(p, identity_in_child, &p.signals[i]);
            // As init does (`init::forward_signal`): a stopped command would keep a
            // hang-up or a termination pending, and the session alive, for ever.
            // SIGCONT only once the signal is sent: sent first, it could let the
            // command run on and end before the signal reaches it.
            if matches!(sig, libc::SIGHUP | libc::SIGTERM) {
                if let Some(pid) = sent {
                    let _ = sys::waitpid(pid, 0);
                }
                run_helper(p, identity_in_child, &p.cont);
            }
            continue;
        }
        while let Ok(Some((pid, status))) = sys::waitpid(-1, libc::WNOHANG) {
            if pid == main {
                let _ = Message::Exited(status).send(&mut report);
                sys::exit_now(0);
            }
        }
    }
}

/// In the keeper (whose parent is `supervisor`): takes the runtime's identity when
/// started as root. The error is the layer and what failed.
fn take_identity(p: &Prepared, supervisor: u32) -> Result<(), (&'static str, String)> {
    let Some((uid, gid)) = p.identity else {
        return Ok(());
    };
    sys::setgroups(&[])
        .and_then(|()| sys::setresgid(gid))
        .and_then(|()| sys::setresuid(uid))
        .map_err(|e| ("privilege drop", format!("cannot switch to uid {uid}: {e}")))?;
    // The identity change cleared the parent-death signal: set again, then make
    // sure the supervisor did not die meanwhile.
    sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0).map_err(|e| {
        (
            "runtime",
            format!("cannot set the parent-death signal: {e}"),
        )
    })?;
    if std::os::unix::process::parent_id() != supervisor {
        sys::exit_now(125);
    }
    Ok(())
}

/// In the keeper, with [`RuntimeSpec::private_network`] (or a TUN interface), once
/// it has the runtime's identity: makes a user namespace whose root is that user
/// and a network namespace it owns with loopback up and, given `tun`, creates and
/// addresses the TUN interface there with the default route through it, and sends
/// its packet side on the notify socket. The error is the layer and what failed.
fn private_network(
    p: &Prepared,
    tun: Option<(crate::spec::TunConfig, std::os::fd::BorrowedFd<'_>)>,
) -> Result<(), (&'static str, String)> {
    let ns = "network namespace";
    let (uid, gid) = (sys::getuid(), sys::getgid());
    sys::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET).map_err(|e| {
        (
            ns,
            format!(
                "cannot make the runtime's user and network namespaces: {e} (hint: {})",
                crate::spawn::namespace_hint(&e)
            ),
        )
    })?;
    // Root of the new user namespace is the runtime's user: the runtime gets the
    // capabilities it needs there, over nothing of the host's.
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text)
            .map_err(|e| (ns, format!("cannot write the keeper's {file}: {e}")))
    };
    // Dropped from root, the keeper is not dumpable, so its /proc files are root's
    // and not its own to write: dumpable only while it writes them.
    let dumpable = |on: bool| {
        sys::prctl(libc::PR_SET_DUMPABLE, libc::c_ulong::from(on), 0)
            .map_err(|e| (ns, format!("cannot set the keeper's dumpable flag: {e}")))
    };
    if p.identity.is_some() {
        dumpable(true)?;
    }
    write("setgroups", "deny".into())?;
    write("uid_map", format!("0 {uid} 1\n"))?;
    write("gid_map", format!("0 {gid} 1\n"))?;
    if p.identity.is_some() {
        dumpable(false)?;
    }
    sys::loopback_up().map_err(|e| (ns, format!("cannot bring up loopback: {e}")))?;
    let Some((tun, notify)) = tun else {
        return Ok(());
    };
    let fd =
        sys::tun_create(tun.name).map_err(|e| (ns, SetupError::Tun { source: e }.to_string()))?;
    sys::iface_configure(
        tun.name,
        tun.address,
        tun.netmask,
        i32::from(tun.mtu),
        tun.gateway,
    )
    .map_err(|e| (ns, format!("cannot configure {}: {e}", tun.name)))?;
    sys::send_fd(notify, fd.as_fd()).map_err(|e| {
        (
            ns,
            format!("cannot send the TUN interface to the supervisor: {e}"),
        )
    })
}

/// How long the runtime may take to send its terminal: the supervisor waits for it
/// before its time-out runs, so a runtime that hangs before sending must not hang
/// the session.
const CONSOLE_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Waits for the runtime (`main`) to connect to the console socket and send its
/// terminal's master side, and passes that on to the supervisor. `Err(Some(status))`
/// when the runtime ended first, `Err(None)` when the terminal could not be passed
/// or did not come within [`CONSOLE_WAIT`].
fn pass_console(
    listener: &std::os::unix::net::UnixListener,
    notify: std::os::fd::BorrowedFd<'_>,
    main: libc::pid_t,
) -> Result<(), Option<i32>> {
    let deadline = std::time::Instant::now() + CONSOLE_WAIT;
    while std::time::Instant::now() < deadline {
        match listener.accept() {
            Ok((stream, _)) => {
                // The runtime's socket is blocking for the one message it sends.
                stream.set_nonblocking(false).map_err(|_| None)?;
                let master = sys::recv_fd(stream.as_fd()).ok().flatten().ok_or(None)?;
                return sys::send_fd(notify, master.as_fd()).map_err(|_| None);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return Err(None),
        }
        if let Ok(Some((_, status))) = sys::waitpid(main, libc::WNOHANG) {
            return Err(Some(status));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Err(None)
}

/// Starts one of the signal commands, its stdio on `/dev/null`; reaped with the rest.
fn run_helper(p: &Prepared, identity: Option<(u32, u32)>, argv: &[CString]) -> Option<libc::pid_t> {
    let Ok((err_r, err_w)) = std::io::pipe() else {
        return None;
    };
    let keeper = std::process::id();
    // SAFETY: the keeper has one thread.
    #[allow(unsafe_code)]
    let forked = unsafe { sys::fork() };
    match forked {
        Ok(None) => {
            drop(err_r);
            let null = p.devnull.as_raw_fd();
            start_child(p, identity, argv, [null; 3], err_w, false, keeper)
        }
        Ok(Some(pid)) => Some(pid),
        Err(_) => None,
    }
}

/// In a child of the keeper (`keeper` is its pid): drops root to `identity` when
/// given, dies with the keeper, and executes `argv` (the runtime with `main`).
fn start_child(
    p: &Prepared,
    identity: Option<(u32, u32)>,
    argv: &[CString],
    stdio: [RawFd; 3],
    mut err_w: PipeWriter,
    main: bool,
    keeper: u32,
) -> ! {
    let errno = |e: std::io::Error| e.raw_os_error().unwrap_or(libc::EPERM);
    if let Some((uid, gid)) = identity {
        let dropped = sys::setgroups(&[])
            .and_then(|()| sys::setresgid(gid))
            .and_then(|()| sys::setresuid(uid));
        if let Err(e) = dropped {
            let _ = err_w.write_all(&errno(e).to_le_bytes());
            sys::exit_now(125);
        }
    }
    // After the identity change, which clears the parent-death signal: set before
    // it, a runtime started as root would outlive a killed keeper (and its sandbox
    // would run on, unsupervised). Then make sure the keeper did not die between
    // the fork and here.
    if let Err(e) = sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0) {
        let _ = err_w.write_all(&errno(e).to_le_bytes());
        sys::exit_now(125);
    }
    if std::os::unix::process::parent_id() != keeper {
        sys::exit_now(125);
    }
    let exec = Exec {
        argv,
        envp: &p.envp,
        path_dirs: &[],
        cwd: main.then_some(&p.cwd),
        keep_session: false,
    };
    exec_command(&exec, err_w, stdio, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> RuntimeSpec {
        RuntimeSpec {
            argv: vec!["/usr/bin/runsc".into(), "run".into()],
            env: vec![("PATH".into(), "/usr/bin".into())],
            cwd: "/tmp".into(),
            identity: None,
            enforced: "backend=gvisor\n".into(),
            signal: vec![
                "/usr/bin/runsc".into(),
                "kill".into(),
                "id".into(),
                SIGNAL_PLACEHOLDER.into(),
            ],
            terminate_all: vec![
                "/usr/bin/runsc".into(),
                "kill".into(),
                "--all".into(),
                "id".into(),
                "TERM".into(),
            ],
            command_pid: Some(1),
            tun: None,
            private_network: false,
            console: None,
        }
    }

    #[test]
    fn each_forwarded_signal_gets_its_own_command_with_its_number() {
        let p = Prepared::new(&spec(), [0, 1, 2]).unwrap();
        assert_eq!(p.signals.len(), FORWARDED_SIGNALS.len());
        let term = FORWARDED_SIGNALS
            .iter()
            .position(|&s| s == libc::SIGTERM)
            .unwrap();
        assert_eq!(
            p.signals[term].last().unwrap().to_str().unwrap(),
            libc::SIGTERM.to_string()
        );
        // And SIGCONT's, sent after a hang-up or a termination.
        assert_eq!(
            p.cont.last().unwrap().to_str().unwrap(),
            libc::SIGCONT.to_string()
        );
        assert_eq!(
            p.cont[..p.cont.len() - 1],
            p.signals[term][..p.cont.len() - 1]
        );
    }

    #[test]
    fn relative_programs_and_nul_bytes_are_refused() {
        let mut s = spec();
        s.argv[0] = "runsc".into();
        assert!(Prepared::new(&s, [0, 1, 2]).is_err());
        let mut s = spec();
        s.terminate_all[0] = "runsc".into();
        assert!(Prepared::new(&s, [0, 1, 2]).is_err());
        let mut s = spec();
        s.env.push(("A".into(), "b\0c".into()));
        assert!(Prepared::new(&s, [0, 1, 2]).is_err());
    }
}
