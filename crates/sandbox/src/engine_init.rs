//! Vectra Guard's own init inside a Docker or Podman container, so that the
//! container's execs reach the same tracer as the native sandbox's.
//!
//! The engines' clients give no way to hand us a seccomp listener, so the container's
//! entrypoint is this program (bound read-only into the container, see
//! `vg_backend::engine::ExecRecording`), started in [`MODE`]. As the container's
//! PID 1 it:
//! 1. compiles the same filter as the native sandbox's (`vg_seccomp`'s default
//!    profile with `trace_exec`, and `trace_exit` when the session reads exits that
//!    way), stacked on top of the engine's seccomp profile;
//! 2. connects to the supervisor's socket, bound read-only into the container;
//! 3. installs the filter with a user-notification listener (the container already
//!    has `no_new_privs`; it is set again, which costs nothing) and sends the listener
//!    over the socket; the kernel refuses any later listener in the same chain
//!    (`EBUSY`), so nothing the command starts can take the execs over;
//! 4. makes itself non-dumpable (no process of the container can read or write its
//!    memory) and waits for the supervisor's go, which comes only once the
//!    supervisor has checked the peer, holds the listener, and has removed the socket
//!    (with the mediated network, also made `tun0` in the container's network
//!    namespace and started the mediator on it: `crate::engine_net`);
//! 5. forks the command with the image's argv, environment and working directory
//!    unchanged, and stays as PID 1: it reaps orphans, passes the signals the engine
//!    sends on to the command's process group, and exits with the command's status
//!    (`128+N` for a signal, as the engines' own inits do).
//!
//! Every step fails closed: the command is not run, and the step that failed is
//! named on stderr (the session's `stderr.log`), exit status 125.
//!
//! The supervisor's end is [`Handshake`]: it accepts one connection, checks the peer
//! with `SO_PEERCRED` (a process of another pid namespace, the container's user where
//! that is known), checks that the descriptor is a seccomp listener, removes the
//! socket, and says go.

use std::ffi::{CString, OsString};
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::init::{Exec, exec_command};

mod persistent;
pub mod terminal;
use crate::spec::FORWARDED_SIGNALS;
use crate::sys;
pub use persistent::{SpawnerFacts, check_spawner};
pub use terminal::check_terminal;

/// The program's first argument that starts it as the container's init.
pub const MODE: &str = "__vectraguard-container-init";

/// The hand-over socket's name in its folder.
pub const SOCKET_NAME: &str = "init.sock";

/// What the init sends with the listener.
const HELLO: &[u8] = b"vectraguard-exec-listener/1";

/// What the init sends with the listener and its terminal's master (`-t`).
const HELLO_TERMINAL: &[u8] = b"vectraguard-exec-listener+terminal/1";

/// The init's flag that gives the command a terminal (see [`terminal`]).
const TERMINAL_FLAG: &str = "--terminal";

/// The supervisor's go.
const GO: u8 = b'g';

/// How long the supervisor waits for the listener once the init has connected: it
/// sends it right away, so a peer that does not is refused rather than waited for.
const HANDOVER_TIMEOUT: Duration = Duration::from_secs(10);

/// How the kernel names a seccomp listener's file (`/proc/self/fd/N`).
const LISTENER_LINK: &[u8] = b"anon_inode:seccomp notify";

/// The init's arguments after the program's name: [`MODE`], the socket (a path
/// inside the container), whether exits go to the listener, then the command.
pub fn init_args(socket: &str, trace_exit: bool, command: &[String]) -> Vec<String> {
    let mut args = vec![
        MODE.to_owned(),
        "--socket".to_owned(),
        socket.to_owned(),
        "--exits".to_owned(),
        if trace_exit { "trap" } else { "pidfd" }.to_owned(),
        "--".to_owned(),
    ];
    args.extend(command.iter().cloned());
    args
}

/// [`init_args`] for a command on a terminal of the container's own devpts, whose
/// master the init sends with its listener (see [`terminal`]).
pub fn terminal_init_args(socket: &str, trace_exit: bool, command: &[String]) -> Vec<String> {
    let mut args = init_args(socket, trace_exit, command);
    // Before `--`: the command's own arguments stay the command's.
    let at = args.iter().position(|a| a == "--").unwrap_or(args.len());
    args.insert(at, TERMINAL_FLAG.to_owned());
    args
}

/// The init's arguments for a persistent sandbox: no command, the init serves the
/// commands the supervisor starts (see `persistent.rs`).
pub fn persistent_init_args(socket: &str, trace_exit: bool) -> Vec<String> {
    let mut args = init_args(socket, trace_exit, &[]);
    // In place of `--` and the command.
    args.pop();
    args.push(persistent::FLAG.to_owned());
    args
}

/// What [`init_args`] said, read back by the init.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitArgs {
    pub socket: PathBuf,
    pub trace_exit: bool,
    /// [`persistent_init_args`]: serve commands (and `argv` is empty).
    pub persistent: bool,
    /// [`terminal_init_args`]: the command runs on a terminal of the container's.
    pub terminal: bool,
    pub argv: Vec<OsString>,
}

/// Reads the arguments [`init_args`] wrote (`args` starts with [`MODE`]).
pub fn parse_args(args: &[OsString]) -> Result<InitArgs, String> {
    let mut it = args.iter();
    if it.next().map(OsString::as_os_str) != Some(MODE.as_ref()) {
        return Err(format!("the first argument is not {MODE}"));
    }
    let (mut socket, mut trace_exit, mut persistent, mut terminal) = (None, None, false, false);
    loop {
        let Some(flag) = it.next() else {
            return Err("the arguments end before `--` and the command".into());
        };
        let value = || it.clone().next().cloned();
        match flag.to_str() {
            Some("--") => break,
            // No value.
            Some(TERMINAL_FLAG) => {
                terminal = true;
                continue;
            }
            // Last, in place of `--` and the command.
            Some(persistent::FLAG) if it.clone().next().is_none() => {
                persistent = true;
                break;
            }
            Some("--socket") => socket = value().map(PathBuf::from),
            Some("--exits") => {
                trace_exit = match value().as_ref().and_then(|v| v.to_str()) {
                    Some("trap") => Some(true),
                    Some("pidfd") => Some(false),
                    other => return Err(format!("unknown --exits value {other:?}")),
                }
            }
            _ => return Err(format!("unknown argument {flag:?}")),
        }
        it.next();
    }
    let argv: Vec<OsString> = it.cloned().collect();
    match (socket, trace_exit) {
        // A persistent init's commands get their terminals from the spawner
        // protocol, each its own.
        (Some(_), Some(_)) if persistent && terminal => {
            Err(format!("{TERMINAL_FLAG} is not for a persistent init"))
        }
        (Some(socket), Some(trace_exit))
            if socket.is_absolute() && (persistent || !argv.is_empty()) =>
        {
            Ok(InitArgs {
                socket,
                trace_exit,
                persistent,
                terminal,
                argv,
            })
        }
        (Some(_), Some(_)) if argv.is_empty() => Err("no command after `--`".into()),
        _ => Err("--socket (an absolute path) and --exits are required".into()),
    }
}

/// The init's main: never returns. `args` are the program's arguments after its
/// name, starting with [`MODE`].
pub fn main(args: &[OsString]) -> ! {
    let fail = |step: &str, error: &dyn std::fmt::Display| -> ! {
        let _ = writeln!(
            std::io::stderr(),
            "vectraguard: error: the container's recording init could not {step}: {error}; the command was not run (exec records need it: run with --no-record, or use --backend native)"
        );
        sys::exit_now(125)
    };
    let a = parse_args(args).unwrap_or_else(|e| fail("read its arguments", &e));
    // Blocked before anything else: as PID 1 these are received by `sigwait` only
    // (a signal with no handler would otherwise be dropped by the kernel).
    let set = sys::sigset(&[FORWARDED_SIGNALS, &[libc::SIGCHLD]].concat());
    if let Err(e) = sys::sigmask_set(&set) {
        fail("block signals", &e);
    }
    if let Err(e) = sys::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0) {
        fail("set no_new_privs", &e);
    }
    // The command's terminal, from the container's own devpts: opened before anything
    // of the container could hold its `/dev/ptmx` open for us to take by mistake.
    let terminal = a.terminal.then(|| {
        sys::open_pty().unwrap_or_else(|e| fail("open a terminal in the container's /dev/pts", &e))
    });
    let program = crate::seccomp::compile(vg_seccomp::ProfileOptions {
        trace_exec: true,
        trace_exit: a.trace_exit,
        ..vg_seccomp::ProfileOptions::default()
    })
    .unwrap_or_else(|e| fail("compile the seccomp filter", &e));
    let mut sock = UnixStream::connect(&a.socket).unwrap_or_else(|e| {
        fail(
            &format!("connect to the supervisor at {}", a.socket.display()),
            &e,
        )
    });
    let listener = match crate::seccomp::install(&program, true) {
        Ok(Some(listener)) => listener,
        Ok(None) => fail("install the seccomp filter", &"no listener was made"),
        Err(e) => fail("install the seccomp filter", &e),
    };
    let sent = match &terminal {
        Some((master, _)) => crate::fdpass::send(
            sock.as_fd(),
            HELLO_TERMINAL,
            &[listener.as_fd(), master.as_fd()],
        ),
        None => crate::fdpass::send(sock.as_fd(), HELLO, &[listener.as_fd()]),
    };
    if let Err(e) = sent {
        fail("hand the exec listener to the supervisor", &e);
    }
    // Never inherited (the kernel makes it close-on-exec), and not kept either: the
    // master is the supervisor's alone, nothing in the container reads the terminal.
    drop(listener);
    let slave = terminal.map(|(master, slave)| {
        drop(master);
        slave
    });
    if let Err(e) = sys::prctl(libc::PR_SET_DUMPABLE, 0, 0) {
        fail("make itself non-dumpable", &e);
    }
    let mut go = [0u8; 1];
    match sock.read(&mut go) {
        Ok(1) if go[0] == GO => {}
        Ok(_) => fail(
            "get the supervisor's go",
            &"the supervisor refused the hand-over (its record names why)",
        ),
        Err(e) => fail("get the supervisor's go", &e),
    }
    if a.persistent {
        match persistent::hand_over(sock) {
            Ok(channel) => crate::zygote::serve(crate::zygote::Ending::ExitStatus, &channel),
            Err((step, e)) => fail(step, &e),
        }
    }
    drop(sock);
    let argv = cstrings(a.argv.into_iter()).unwrap_or_else(|e| fail("read the command", &e));
    let envp = cstrings(std::env::vars_os().map(|(k, v)| {
        let mut kv = k.into_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        OsString::from_vec(kv)
    }))
    .unwrap_or_else(|e| fail("read the environment", &e));
    // `execvp`'s search, in the image's PATH (as the engine's runtime would).
    let path = std::env::var_os("PATH")
        .unwrap_or_else(|| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    let path_dirs = cstrings(
        path.as_bytes()
            .split(|b| *b == b':')
            .filter(|d| !d.is_empty())
            .map(|d| OsString::from_vec(d.to_vec())),
    )
    .unwrap_or_else(|e| fail("read PATH", &e));
    let (err_r, err_w) = std::io::pipe().unwrap_or_else(|e| fail("make a pipe", &e));
    // SAFETY: this process has one thread (nothing here starts one), so the child
    // may do anything before it execs.
    #[allow(unsafe_code)]
    let forked = unsafe { sys::fork() };
    let main = match forked {
        Ok(Some(pid)) => pid,
        Ok(None) => {
            drop(err_r);
            let exec = Exec {
                argv: &argv,
                envp: &envp,
                path_dirs: &path_dirs,
                cwd: None,
                keep_session: false,
            };
            // The terminal as its stdio and controlling terminal (a session of its
            // own, as natively).
            match &slave {
                Some(slave) => exec_command(&exec, err_w, [slave.as_raw_fd(); 3], true),
                None => exec_command(&exec, err_w, [0, 1, 2], false),
            }
        }
        Err(e) => fail("fork the command", &e),
    };
    drop(err_w);
    // The command's alone: once its last process closes it, the supervisor's relay
    // sees the end.
    drop(slave);
    crate::init::report_exec_failure(err_r, &argv[0]);
    loop {
        let sig = match sys::sigwait(&set) {
            Ok((sig, _)) => sig,
            Err(_) => sys::exit_now(125),
        };
        if sig != libc::SIGCHLD {
            crate::init::forward_signal(main, sig);
            continue;
        }
        while let Ok(Some((pid, status))) = sys::waitpid(-1, libc::WNOHANG) {
            if pid == main {
                // Exiting ends the pid namespace: the kernel kills what is left.
                sys::exit_now(exit_code(status));
            }
        }
    }
}

/// The exit status a container's init reports for its command's wait status:
/// the code, or `128+N` for a signal.
pub fn exit_code(status: i32) -> i32 {
    crate::spawn::decode_status(status).exit_code()
}

fn cstrings(items: impl Iterator<Item = OsString>) -> Result<Vec<CString>, String> {
    items
        .map(|s| CString::new(s.into_vec()).map_err(|_| "a NUL byte in it".to_owned()))
        .collect()
}

/// The files the init needs on the host: this program, and when it is dynamically
/// linked, its loader and the libraries the loader mapped (bound into the
/// container under their own names, and started through that loader, so that an
/// image without glibc, or with another one, runs it the same).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFiles {
    pub program: PathBuf,
    pub loader: Option<PathBuf>,
    pub libraries: Vec<PathBuf>,
}

/// [`HostFiles`] of the running program.
pub fn host_files() -> std::io::Result<HostFiles> {
    let program = std::fs::read_link("/proc/self/exe")?;
    let mut loader = None;
    let mut libraries = Vec::new();
    for (path, is_loader) in sys::loaded_objects() {
        if is_loader {
            loader = Some(path);
        } else if path != program && !libraries.contains(&path) {
            libraries.push(path);
        }
    }
    Ok(HostFiles {
        program,
        loader,
        libraries,
    })
}

/// What the supervisor knows of the process that connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerFacts {
    /// Its pid in the supervisor's pid namespace (0: not visible there).
    pub pid: i32,
    /// Its uid in the supervisor's user namespace.
    pub uid: u32,
    /// It runs in the supervisor's own pid namespace (a container never does).
    pub same_pid_ns: bool,
}

/// Whether the peer may hand over the container's listener (pure): a process of
/// the container (visible to us, in a pid namespace of its own) running as the
/// container's user where that is known on the host (`expected_uid`; a rootless
/// engine maps it to another uid).
pub fn check_peer(facts: &PeerFacts, expected_uid: Option<u32>) -> Result<(), String> {
    if facts.pid <= 0 {
        return Err(
            "the connecting process is not visible in the supervisor's pid namespace".into(),
        );
    }
    if facts.same_pid_ns {
        return Err(format!(
            "the connecting process (pid {}) runs in the supervisor's own pid namespace, not in the container",
            facts.pid
        ));
    }
    match expected_uid {
        Some(uid) if uid != facts.uid => Err(format!(
            "the connecting process (pid {}) runs as uid {}, not as the container's user {uid}",
            facts.pid, facts.uid
        )),
        _ => Ok(()),
    }
}

/// Why the hand-over failed.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// The session ended before the container's init connected: whatever ran in
    /// the container, if anything did, ran without our filter.
    #[error(
        "the container ended before Vectra Guard's init in it handed over its exec listener, so nothing it ran was recorded"
    )]
    Stopped,
    #[error("the hand-over of the container's exec listener failed: {0}")]
    Failed(String),
}

/// The container's listener, handed over.
#[derive(Debug)]
pub struct Handover {
    /// The seccomp listener, to serve with [`crate::trace::serve`].
    pub listener: OwnedFd,
    /// The init's pid in the supervisor's pid namespace.
    pub pid: i32,
    /// With [`Handshake::expect_spawner`], the init's command channel (for
    /// `spawner::Spawner::from_channel`).
    pub spawner: Option<OwnedFd>,
    /// With [`Handshake::expect_terminal`], the master side of the command's
    /// terminal, checked ([`check_terminal`]).
    pub terminal: Option<OwnedFd>,
}

/// The container's init, checked, still waiting for the go.
#[derive(Debug)]
pub struct Peer<'a> {
    /// Its connection (its pidfd comes from there, `crate::engine_net`).
    pub socket: std::os::fd::BorrowedFd<'a>,
    /// Its pid in the supervisor's pid namespace.
    pub pid: i32,
    /// With [`Handshake::expect_terminal`], the command's terminal (checked): its
    /// size is set before the go, so that the command's first look finds it.
    pub terminal: Option<std::os::fd::BorrowedFd<'a>>,
}

/// The supervisor's end: a socket the container's init connects to once.
#[derive(Debug)]
pub struct Handshake {
    listener: UnixListener,
    path: PathBuf,
    stopped: Arc<AtomicBool>,
    /// A persistent sandbox's init sends its command channel after the go.
    spawner: bool,
    /// The init sends its command's terminal with the listener.
    terminal: bool,
}

/// Ends a [`Handshake::accept`] that waits (the session is over).
#[derive(Debug, Clone)]
pub struct StopHandle {
    fd: Arc<OwnedFd>,
    stopped: Arc<AtomicBool>,
}

impl StopHandle {
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        let _ = sys::shutdown(self.fd.as_fd());
    }
}

impl Handshake {
    /// Listens at `dir/`[`SOCKET_NAME`]. `dir` is bound read-only into the container,
    /// and must be reachable by no one else on the host (its parent is private):
    /// the socket itself is open to every user (`0666`) because the container's user
    /// may be any uid on the host, and connecting needs write permission on it.
    pub fn bind(dir: &Path) -> std::io::Result<Self> {
        let path = dir.join(SOCKET_NAME);
        let listener = UnixListener::bind(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))?;
        Ok(Self {
            listener,
            path,
            stopped: Arc::new(AtomicBool::new(false)),
            spawner: false,
            terminal: false,
        })
    }

    /// The init is a persistent sandbox's ([`persistent_init_args`]): after the go,
    /// [`Handshake::accept`] takes its command channel too, and fails without it.
    #[must_use]
    pub fn expect_spawner(mut self) -> Self {
        self.spawner = true;
        self
    }

    /// The init gives its command a terminal ([`terminal_init_args`]): it sends the
    /// master with its listener, and the hand-over fails without it or when it is not
    /// a terminal of the container's own ([`check_terminal`]).
    #[must_use]
    pub fn expect_terminal(mut self) -> Self {
        self.terminal = true;
        self
    }

    pub fn stop_handle(&self) -> std::io::Result<StopHandle> {
        Ok(StopHandle {
            fd: Arc::new(self.listener.as_fd().try_clone_to_owned()?),
            stopped: Arc::clone(&self.stopped),
        })
    }

    /// Waits for the init, checks it, takes its listener, removes the socket (so
    /// nothing in the container can use it afterwards), and says go. Refused: the
    /// init gets no go and does not run the command.
    pub fn accept(self, expected_uid: Option<u32>) -> Result<Handover, HandshakeError> {
        self.accept_then(expected_uid, |_| Ok(()))
    }

    /// [`Handshake::accept`], with `before_go` run once the peer and its listener
    /// are checked and before the go: what must be in place before anything in the
    /// container runs (its network, `crate::engine_net`). Its error refuses the
    /// hand-over.
    pub fn accept_then(
        self,
        expected_uid: Option<u32>,
        before_go: impl FnOnce(&Peer<'_>) -> Result<(), String>,
    ) -> Result<Handover, HandshakeError> {
        let failed = |what: String| HandshakeError::Failed(what);
        let stream = loop {
            match self.listener.accept() {
                Ok((stream, _)) => break stream,
                Err(_) if self.stopped.load(Ordering::SeqCst) => {
                    return Err(HandshakeError::Stopped);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(failed(format!("accept: {e}"))),
            }
        };
        let expect_spawner = self.spawner;
        let expect_terminal = self.terminal;
        // One connection only: the socket goes (see `Drop`) before anything else is
        // read.
        drop(self);
        let (pid, uid, _) = sys::peer_cred(stream.as_fd())
            .map_err(|e| failed(format!("cannot read the peer's credentials: {e}")))?;
        let same_pid_ns = pid > 0 && same_pid_namespace(pid);
        check_peer(
            &PeerFacts {
                pid,
                uid,
                same_pid_ns,
            },
            expected_uid,
        )
        .map_err(failed)?;
        stream
            .set_read_timeout(Some(HANDOVER_TIMEOUT))
            .map_err(|e| failed(format!("cannot set a time-out: {e}")))?;
        let mut buf = [0u8; 64];
        let (n, mut fds) = crate::fdpass::recv(stream.as_fd(), &mut buf)
            .map_err(|e| failed(format!("no listener came from pid {pid}: {e}")))?;
        let (hello, wanted) = if expect_terminal {
            (HELLO_TERMINAL, "its listener and its terminal")
        } else {
            (HELLO, "its listener")
        };
        if fds.len() != 1 + usize::from(expect_terminal) {
            return Err(failed(format!(
                "pid {pid} sent {} descriptors instead of {wanted}",
                fds.len()
            )));
        }
        if &buf[..n] != hello {
            return Err(failed(format!("pid {pid} did not say it sent {wanted}")));
        }
        let terminal = expect_terminal.then(|| fds.pop()).flatten();
        let Some(listener) = fds.pop() else {
            return Err(failed(format!("pid {pid} sent no listener")));
        };
        let link = std::fs::read_link(format!("/proc/self/fd/{}", listener.as_raw_fd()))
            .map_err(|e| failed(format!("cannot look at the descriptor: {e}")))?;
        if link.as_os_str().as_bytes() != LISTENER_LINK {
            return Err(failed(format!(
                "pid {pid} sent {} instead of a seccomp listener",
                link.display()
            )));
        }
        if let Some(master) = &terminal {
            check_terminal(master.as_fd(), pid).map_err(|e| {
                failed(format!(
                    "pid {pid} sent a terminal that is not a pseudo-terminal of the container's: {e}"
                ))
            })?;
        }
        before_go(&Peer {
            socket: stream.as_fd(),
            pid,
            terminal: terminal.as_ref().map(AsFd::as_fd),
        })
        .map_err(failed)?;
        (&stream)
            .write_all(&[GO])
            .map_err(|e| failed(format!("cannot say go: {e}")))?;
        let spawner = if expect_spawner {
            Some(persistent::receive(&stream, pid).map_err(failed)?)
        } else {
            None
        };
        Ok(Handover {
            listener,
            pid,
            spawner,
            terminal,
        })
    }
}

impl Drop for Handshake {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Whether `pid` is in our own pid namespace.
fn same_pid_namespace(pid: i32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let id = |p: &str| std::fs::metadata(p).map(|m| (m.dev(), m.ino())).ok();
    match (id(&format!("/proc/{pid}/ns/pid")), id("/proc/self/ns/pid")) {
        (Some(theirs), Some(ours)) => theirs == ours,
        // Not knowing counts as the same: refused.
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn arguments_read_back_as_written() {
        let command = vec!["sh".to_owned(), "-c".into(), "echo --socket".into()];
        let args = init_args("/.vectraguard/run/init.sock", true, &command);
        let parsed = parse_args(&os(&args.iter().map(String::as_str).collect::<Vec<_>>()));
        assert_eq!(
            parsed,
            Ok(InitArgs {
                socket: "/.vectraguard/run/init.sock".into(),
                trace_exit: true,
                persistent: false,
                terminal: false,
                argv: os(&["sh", "-c", "echo --socket"]),
            })
        );
        let args = init_args("/s", false, &["--".into()]);
        let parsed = parse_args(&os(&args.iter().map(String::as_str).collect::<Vec<_>>())).unwrap();
        assert!(!parsed.trace_exit);
        assert_eq!(parsed.argv, os(&["--"]));
    }

    #[test]
    fn a_persistent_init_s_arguments_read_back_with_no_command() {
        let args = persistent_init_args("/.vectraguard/run/init.sock", false);
        let parsed = parse_args(&os(&args.iter().map(String::as_str).collect::<Vec<_>>()));
        assert_eq!(
            parsed,
            Ok(InitArgs {
                socket: "/.vectraguard/run/init.sock".into(),
                trace_exit: false,
                persistent: true,
                terminal: false,
                argv: Vec::new(),
            })
        );
        // Only last: a command after it is not a persistent init's.
        let bad = [
            MODE,
            "--socket",
            "/s",
            "--exits",
            "trap",
            "--persistent",
            "x",
        ];
        assert!(parse_args(&os(&bad)).is_err());
        // A command's own `--persistent` argument stays the command's.
        let args = init_args("/s", true, &["--persistent".into()]);
        let parsed = parse_args(&os(&args.iter().map(String::as_str).collect::<Vec<_>>())).unwrap();
        assert!(!parsed.persistent);
        assert_eq!(parsed.argv, os(&["--persistent"]));
    }

    #[test]
    fn a_terminal_init_s_arguments_read_back() {
        let command = vec!["sh".to_owned(), "--terminal".into()];
        let args = terminal_init_args("/s", false, &command);
        let parsed = parse_args(&os(&args.iter().map(String::as_str).collect::<Vec<_>>()));
        assert_eq!(
            parsed,
            Ok(InitArgs {
                socket: "/s".into(),
                trace_exit: false,
                persistent: false,
                terminal: true,
                // The command's own `--terminal` stays the command's.
                argv: os(&["sh", "--terminal"]),
            })
        );
        // Not for a persistent init, whose commands ask for theirs one by one.
        let bad = [
            MODE,
            "--socket",
            "/s",
            "--exits",
            "trap",
            TERMINAL_FLAG,
            "--persistent",
        ];
        assert!(parse_args(&os(&bad)).unwrap_err().contains("persistent"));
    }

    #[test]
    fn bad_arguments_are_refused() {
        for bad in [
            &[][..],
            &["other"][..],
            &[MODE, "--socket", "/s", "--exits", "trap"][..],
            &[MODE, "--socket", "/s", "--exits", "trap", "--"][..],
            &[MODE, "--socket", "rel", "--exits", "trap", "--", "x"][..],
            &[MODE, "--exits", "trap", "--", "x"][..],
            &[MODE, "--socket", "/s", "--exits", "maybe", "--", "x"][..],
            &[
                MODE, "--socket", "/s", "--exits", "trap", "--what", "--", "x",
            ][..],
        ] {
            assert!(parse_args(&os(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_a_container_process_of_the_expected_user_may_hand_over() {
        let ok = PeerFacts {
            pid: 4242,
            uid: 1000,
            same_pid_ns: false,
        };
        assert_eq!(check_peer(&ok, Some(1000)), Ok(()));
        assert_eq!(check_peer(&ok, None), Ok(()));
        let e = check_peer(&ok, Some(1001)).unwrap_err();
        assert!(e.contains("uid 1000") && e.contains("user 1001"), "{e}");
        let host = PeerFacts {
            same_pid_ns: true,
            ..ok
        };
        assert!(
            check_peer(&host, None)
                .unwrap_err()
                .contains("own pid namespace")
        );
        let hidden = PeerFacts { pid: 0, ..ok };
        assert!(
            check_peer(&hidden, None)
                .unwrap_err()
                .contains("not visible")
        );
    }

    #[test]
    fn exit_codes_are_the_engines_init_s() {
        assert_eq!(exit_code(3 << 8), 3);
        assert_eq!(exit_code(libc::SIGKILL), 137);
        assert_eq!(exit_code(libc::SIGTERM), 143);
    }

    #[test]
    fn this_test_program_s_files_are_found() {
        let files = host_files().unwrap();
        assert!(files.program.is_absolute());
        // Test binaries are linked dynamically against glibc here.
        let loader = files.loader.clone().expect("a loader");
        assert!(loader.is_absolute() && loader.exists(), "{loader:?}");
        assert!(
            files
                .libraries
                .iter()
                .any(|l| l.file_name().is_some_and(|n| n == "libc.so.6")),
            "{files:?}"
        );
        assert!(!files.libraries.contains(&loader));
    }

    #[test]
    fn a_handshake_from_our_own_pid_namespace_is_refused_and_the_socket_removed() {
        let dir = std::env::temp_dir().join(format!("vg-hs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let hs = Handshake::bind(&dir).unwrap();
        let path = dir.join(SOCKET_NAME);
        let client = std::thread::spawn(move || {
            let mut s = UnixStream::connect(&path).unwrap();
            let mut b = [0u8; 1];
            // No go: the connection is closed.
            matches!(s.read(&mut b), Ok(0) | Err(_))
        });
        let e = hs.accept(None).unwrap_err();
        assert!(e.to_string().contains("own pid namespace"), "{e}");
        assert!(client.join().unwrap());
        assert!(!dir.join(SOCKET_NAME).exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// What `VG_HOSTILE_TERMINAL` names: a process posing as a container's init, in
    /// a pid namespace of its own (started by
    /// `a_hostile_init_s_terminal_is_refused` through `unshare`), hands over a real
    /// seccomp listener and, as its terminal, something else than a pty master of a
    /// devpts of its own. Does nothing in a normal test run.
    #[test]
    fn hostile_init_child() {
        let (Some(mode), Some(socket)) = (
            std::env::var_os("VG_HOSTILE_TERMINAL"),
            std::env::var_os("VG_HOSTILE_SOCKET"),
        ) else {
            return;
        };
        sys::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0).unwrap();
        let program = crate::seccomp::compile(vg_seccomp::ProfileOptions {
            trace_exec: true,
            ..vg_seccomp::ProfileOptions::default()
        })
        .unwrap();
        let sock = UnixStream::connect(socket).unwrap();
        let listener = crate::seccomp::install(&program, true).unwrap().unwrap();
        // This process's mount namespace is the host's: its pty is one of the host's.
        let (master, slave) = sys::open_pty().unwrap();
        let null = std::fs::File::options()
            .read(true)
            .write(true)
            .open("/dev/null")
            .unwrap();
        let fake: Vec<std::os::fd::BorrowedFd<'_>> = match mode.to_str().unwrap() {
            "host-master" => vec![master.as_fd()],
            "slave" => vec![slave.as_fd()],
            "null" => vec![null.as_fd()],
            "listener" => vec![listener.as_fd()],
            _ => Vec::new(),
        };
        let mut fds = vec![listener.as_fd()];
        fds.extend(fake);
        crate::fdpass::send(sock.as_fd(), HELLO_TERMINAL, &fds).unwrap();
        let mut go = [0u8; 1];
        // Refused: the connection closes without a go.
        assert!(matches!((&sock).read(&mut go), Ok(0) | Err(_)));
    }

    /// A container's init that sends anything but a terminal of its own devpts as
    /// its terminal (the host's, a slave, a file, its listener again, nothing) gets
    /// no go: the supervisor never relays the user's keys into it.
    #[test]
    fn a_hostile_init_s_terminal_is_refused() {
        let unshare = |args: &[&str]| {
            let mut c = std::process::Command::new("unshare");
            c.args(["--user", "--map-root-user", "--pid", "--fork", "--"])
                .args(args);
            c
        };
        assert!(
            unshare(&["true"]).status().is_ok_and(|s| s.success()),
            "unshare (util-linux) cannot make a user and pid namespace here: this test needs one"
        );
        let exe = std::env::current_exe().unwrap();
        for (mode, why) in [
            ("host-master", "this host's own terminals"),
            ("slave", "not a pseudo-terminal master"),
            ("null", "1:3, not a pseudo-terminal master"),
            ("listener", "not a character device"),
            (
                "none",
                "sent 1 descriptors instead of its listener and its terminal",
            ),
        ] {
            let dir = std::env::temp_dir().join(format!("vg-hs-tty-{}-{mode}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let hs = Handshake::bind(&dir).unwrap().expect_terminal();
            let stop = hs.stop_handle().unwrap();
            let mut child = unshare(&[
                exe.to_str().unwrap(),
                "--exact",
                "engine_init::tests::hostile_init_child",
                "--test-threads=1",
            ])
            .env("VG_HOSTILE_TERMINAL", mode)
            .env("VG_HOSTILE_SOCKET", dir.join(SOCKET_NAME))
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
            // Never waits for a child that failed before connecting.
            let watchdog = std::thread::spawn(move || {
                let status = child.wait().unwrap();
                stop.stop();
                status
            });
            let e = hs.accept(None).unwrap_err().to_string();
            assert!(e.contains(why), "{mode}: {e}");
            assert!(
                watchdog.join().unwrap().success(),
                "{mode}: the child failed"
            );
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }

    #[test]
    fn a_stopped_handshake_returns() {
        let dir = std::env::temp_dir().join(format!("vg-hs-stop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let hs = Handshake::bind(&dir).unwrap();
        let stop = hs.stop_handle().unwrap();
        let waiting = std::thread::spawn(move || hs.accept(None));
        std::thread::sleep(Duration::from_millis(50));
        stop.stop();
        assert!(matches!(
            waiting.join().unwrap(),
            Err(HandshakeError::Stopped)
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
