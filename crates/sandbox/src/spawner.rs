//! Commands started in a persistent sandbox (`SandboxSpec::persistent`), as the
//! supervisor asks for them and init answers.
//!
//! A persistent sandbox's init runs no command of its own: it serves requests on the
//! socket it shares with the supervisor (`zygote.rs`), forking each command from
//! itself — already inside every namespace, under Landlock and seccomp, as the sandbox
//! user — so a command started later shares the sandbox's file system, `/tmp`,
//! processes and network policy with the ones before. One message per request or
//! reply (`SOCK_SEQPACKET`); a command's stdio travels with its request (SCM_RIGHTS),
//! a terminal's master side with its reply.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};

use crate::spec::Termination;
use crate::sys;

/// The largest request: argv, environment and working directory together.
pub const MAX_REQUEST: usize = 256 * 1024;

/// Supervisor → init.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Request {
    /// Start a command; its stdio comes with the message unless `tty`, when init
    /// makes a terminal of the sandbox's own devpts for it, of that size (rows,
    /// columns), set before the command starts so that its first look finds it.
    Spawn {
        id: u64,
        tty: Option<(u16, u16)>,
        cwd: CString,
        argv: Vec<CString>,
        env: Vec<CString>,
    },
    /// Send `signal` to the command's process group.
    Signal { id: u64, signal: i32 },
}

/// Init → supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    /// Forked with this pid (inside the sandbox); with `tty`, the master comes along.
    Started { id: u64, pid: i32 },
    /// It could not be started: the errno of `execve`, or of `chdir` negated.
    Failed { id: u64, errno: i32 },
    /// It ended with this wait status.
    Exited { id: u64, status: i32 },
}

fn put(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&u32::try_from(bytes.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Reads what [`put`] wrote.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = tail;
        Some(head)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.u32()?).ok()?;
        self.take(n)
    }
    fn cstring(&mut self) -> Option<CString> {
        CString::new(self.bytes()?).ok()
    }
    fn list(&mut self) -> Option<Vec<CString>> {
        let n = self.u32()?;
        (0..n).map(|_| self.cstring()).collect()
    }
}

impl Request {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Request::Spawn {
                id,
                tty,
                cwd,
                argv,
                env,
            } => {
                out.push(b'X');
                out.extend_from_slice(&id.to_le_bytes());
                match tty {
                    Some((rows, cols)) => {
                        out.push(1);
                        out.extend_from_slice(&rows.to_le_bytes());
                        out.extend_from_slice(&cols.to_le_bytes());
                    }
                    None => out.push(0),
                }
                put(&mut out, cwd.as_bytes());
                for list in [argv, env] {
                    out.extend_from_slice(&u32::try_from(list.len()).unwrap_or(0).to_le_bytes());
                    for item in list {
                        put(&mut out, item.as_bytes());
                    }
                }
            }
            Request::Signal { id, signal } => {
                out.push(b'K');
                out.extend_from_slice(&id.to_le_bytes());
                out.extend_from_slice(&signal.to_le_bytes());
            }
        }
        out
    }

    pub(crate) fn decode(bytes: &[u8]) -> Option<Self> {
        let (tag, rest) = bytes.split_first()?;
        let mut r = Reader(rest);
        match tag {
            b'X' => Some(Request::Spawn {
                id: r.u64()?,
                tty: match r.take(1)?[0] {
                    0 => None,
                    _ => Some((r.u16()?, r.u16()?)),
                },
                cwd: r.cstring()?,
                argv: r.list()?,
                env: r.list()?,
            }),
            b'K' => Some(Request::Signal {
                id: r.u64()?,
                signal: r.i32()?,
            }),
            _ => None,
        }
    }
}

impl Reply {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let (tag, id, value) = match *self {
            Reply::Started { id, pid } => (b'P', id, pid),
            Reply::Failed { id, errno } => (b'F', id, errno),
            Reply::Exited { id, status } => (b'S', id, status),
        };
        let mut out = vec![tag];
        out.extend_from_slice(&id.to_le_bytes());
        out.extend_from_slice(&value.to_le_bytes());
        out
    }

    pub(crate) fn decode(bytes: &[u8]) -> Option<Self> {
        let (tag, rest) = bytes.split_first()?;
        let mut r = Reader(rest);
        let (id, value) = (r.u64()?, r.i32()?);
        match tag {
            b'P' => Some(Reply::Started { id, pid: value }),
            b'F' => Some(Reply::Failed { id, errno: value }),
            b'S' => Some(Reply::Exited { id, status: value }),
            _ => None,
        }
    }
}

/// What a started command's stdio is.
#[derive(Debug)]
pub enum SpawnStdio {
    /// These descriptors as its stdin, stdout and stderr.
    Fds([OwnedFd; 3]),
    /// A terminal of the sandbox's own devpts, of this size; its master side is
    /// [`Child::terminal`].
    Terminal(crate::terminal::Size),
}

/// One command to start in a persistent sandbox.
#[derive(Debug)]
pub struct SpawnCommand {
    /// `argv[0]` is looked up in the `PATH` of `env` when it has no `/`.
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    /// The working directory, inside the sandbox.
    pub cwd: PathBuf,
    pub stdio: SpawnStdio,
}

/// Why a command could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("{0}")]
    Usage(String),
    #[error("the sandbox is gone")]
    Gone,
    /// The command's terminal did not pass the check of a container's
    /// (`engine_init::check_terminal`): the command was killed before it was relayed.
    #[error("the sandbox's init sent a terminal that is refused ({0}); the command was stopped")]
    Terminal(String),
    #[error("cannot start the command: {0}")]
    Failed(std::io::Error),
}

/// A reply from init with the descriptors it carried.
type Delivery = (Reply, Vec<OwnedFd>);
type Waiters = HashMap<u64, mpsc::Sender<Delivery>>;
type Waiting = Arc<Mutex<Waiters>>;

/// Starts commands in a persistent sandbox, from any thread.
#[derive(Clone)]
pub struct Spawner {
    sock: Arc<OwnedFd>,
    waiting: Waiting,
    next: Arc<AtomicU64>,
    /// A container's init (its pid in our namespace), whose terminals are checked
    /// to be of the container's own devpts before they are handed out.
    container_init: Option<i32>,
}

impl Spawner {
    /// Serves init's replies on a thread of its own (started here: call it after the
    /// spawn, so that it inherits the blocked signals).
    pub(crate) fn new(sock: OwnedFd) -> std::io::Result<Self> {
        let sock = Arc::new(sock);
        let waiting: Waiting = Arc::default();
        let reader = (Arc::clone(&sock), Arc::clone(&waiting));
        std::thread::Builder::new()
            .name("vg-spawner".into())
            .spawn(move || read_replies(&reader.0, &reader.1))?;
        Ok(Spawner {
            sock,
            waiting,
            next: Arc::new(AtomicU64::new(1)),
            container_init: None,
        })
    }

    /// Over a container's init's command channel (`engine_init::Handover::spawner`),
    /// as for [`crate::Sandbox::spawner`]: starts the reply thread here. `init` is
    /// that init's pid in our namespace (`Handover::pid`): a terminal it sends must
    /// be one of the container's own ([`crate::engine_init::check_terminal`]).
    pub fn from_channel(sock: OwnedFd, init: i32) -> std::io::Result<Self> {
        let mut spawner = Self::new(sock)?;
        spawner.container_init = Some(init);
        Ok(spawner)
    }

    /// Starts `command`; returns once init forked it (or could not start it).
    pub fn spawn(&self, command: SpawnCommand) -> Result<Child, SpawnError> {
        let cstrings = |items: Vec<String>, what: &str| {
            items
                .into_iter()
                .map(|s| {
                    CString::new(s)
                        .map_err(|_| SpawnError::Usage(format!("{what} contains a NUL byte")))
                })
                .collect::<Result<Vec<_>, _>>()
        };
        if command.argv.is_empty() {
            return Err(SpawnError::Usage("no command to run".into()));
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let env = command
            .env
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let tty = match command.stdio {
            SpawnStdio::Terminal(size) => Some((size.rows, size.cols)),
            SpawnStdio::Fds(_) => None,
        };
        let request = Request::Spawn {
            id,
            tty,
            cwd: CString::new(command.cwd.into_os_string().into_encoded_bytes()).map_err(|_| {
                SpawnError::Usage("the working directory contains a NUL byte".into())
            })?,
            argv: cstrings(command.argv, "an argument")?,
            env: cstrings(env, "an environment variable")?,
        }
        .encode();
        if request.len() > MAX_REQUEST {
            return Err(SpawnError::Usage(format!(
                "the command line and environment take {} bytes; at most {MAX_REQUEST} fit in one request",
                request.len()
            )));
        }
        let (tx, rx) = mpsc::channel();
        self.lock().insert(id, tx);
        let fds: Vec<BorrowedFd<'_>> = match &command.stdio {
            SpawnStdio::Fds(fds) => fds.iter().map(AsFd::as_fd).collect(),
            SpawnStdio::Terminal(_) => Vec::new(),
        };
        if let Err(e) = sys::send_msg(self.sock.as_fd(), &request, &fds) {
            self.lock().remove(&id);
            return Err(match e.raw_os_error() {
                Some(libc::EPIPE | libc::ECONNRESET) => SpawnError::Gone,
                _ => SpawnError::Failed(e),
            });
        }
        drop(command.stdio);
        match rx.recv() {
            Ok((Reply::Started { pid, .. }, mut fds)) => {
                let child = Child {
                    id,
                    pid,
                    terminal: fds.pop(),
                    replies: rx,
                    spawner: self.clone(),
                };
                let checked = match (&child.terminal, self.container_init) {
                    (Some(master), Some(init)) => {
                        crate::engine_init::check_terminal(master.as_fd(), init)
                    }
                    (None, _) if tty.is_some() => Err("none came with the command".into()),
                    _ => Ok(()),
                };
                match checked {
                    Ok(()) => Ok(child),
                    Err(why) => {
                        // Nothing of it is relayed: it goes before it could use a
                        // terminal nobody watches.
                        let _ = child.signal(libc::SIGKILL);
                        Err(SpawnError::Terminal(why))
                    }
                }
            }
            Ok((Reply::Failed { errno, .. }, _)) => {
                self.lock().remove(&id);
                Err(SpawnError::Failed(std::io::Error::from_raw_os_error(errno)))
            }
            Ok((Reply::Exited { .. }, _)) | Err(_) => {
                self.lock().remove(&id);
                Err(SpawnError::Gone)
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiters> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn read_replies(sock: &OwnedFd, waiting: &Waiting) {
    let mut buf = vec![0u8; 64];
    loop {
        let (n, fds) = match sys::recv_msg(sock.as_fd(), &mut buf) {
            Ok((0, _)) | Err(_) => break,
            Ok(got) => got,
        };
        let Some(reply) = Reply::decode(&buf[..n]) else {
            continue;
        };
        let id = match reply {
            Reply::Started { id, .. } | Reply::Failed { id, .. } | Reply::Exited { id, .. } => id,
        };
        let mut all = waiting.lock().unwrap_or_else(PoisonError::into_inner);
        let sender = match reply {
            Reply::Started { .. } => all.get(&id).cloned(),
            _ => all.remove(&id),
        };
        drop(all);
        if let Some(sender) = sender {
            let _ = sender.send((reply, fds));
        }
    }
    // Init is gone: every waiter learns it (its channel closes).
    waiting
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
}

/// A command started by a [`Spawner`].
pub struct Child {
    pub id: u64,
    /// Its pid inside the sandbox.
    pub pid: i32,
    /// With [`SpawnStdio::Terminal`], the terminal's master side.
    pub terminal: Option<OwnedFd>,
    replies: mpsc::Receiver<Delivery>,
    spawner: Spawner,
}

impl Child {
    /// Sends `signal` to the command's process group.
    pub fn signal(&self, signal: i32) -> std::io::Result<()> {
        self.signaller().signal(signal)
    }

    /// A handle that signals this command from another thread.
    pub fn signaller(&self) -> Signaller {
        Signaller {
            id: self.id,
            sock: Arc::clone(&self.spawner.sock),
        }
    }

    /// Waits until it ends; `None` when the sandbox ended first. A command that could
    /// not be started ends as `ExecFailed` with the errno of its `execve`, or, negated,
    /// of its change to the working directory.
    pub fn wait(self) -> Option<Termination> {
        loop {
            match self.replies.recv() {
                Ok((Reply::Exited { status, .. }, _)) => {
                    return Some(crate::spawn::decode_status(status));
                }
                Ok((Reply::Failed { errno, .. }, _)) => {
                    return Some(Termination::ExecFailed(errno));
                }
                Ok((Reply::Started { .. }, _)) => {}
                Err(_) => return None,
            }
        }
    }
}

/// Signals one [`Child`] from any thread.
#[derive(Clone)]
pub struct Signaller {
    id: u64,
    sock: Arc<OwnedFd>,
}

impl Signaller {
    pub fn signal(&self, signal: i32) -> std::io::Result<()> {
        let request = Request::Signal {
            id: self.id,
            signal,
        }
        .encode();
        sys::send_msg(self.sock.as_fd(), &request, &[]).map(drop)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies_survive_the_wire() {
        let spawn = Request::Spawn {
            id: 7,
            tty: Some((30, 100)),
            cwd: CString::new("/work").unwrap(),
            argv: vec![CString::new("sh").unwrap(), CString::new("-c").unwrap()],
            env: vec![CString::new("A=b").unwrap()],
        };
        assert_eq!(Request::decode(&spawn.encode()), Some(spawn.clone()));
        let Request::Spawn {
            id, cwd, argv, env, ..
        } = spawn
        else {
            unreachable!()
        };
        let plain = Request::Spawn {
            id,
            tty: None,
            cwd,
            argv,
            env,
        };
        assert_eq!(Request::decode(&plain.encode()), Some(plain));
        let signal = Request::Signal { id: 9, signal: 2 };
        assert_eq!(Request::decode(&signal.encode()), Some(signal));
        for reply in [
            Reply::Started { id: 1, pid: 5 },
            Reply::Failed { id: 2, errno: 2 },
            Reply::Exited { id: 3, status: 256 },
        ] {
            assert_eq!(Reply::decode(&reply.encode()), Some(reply));
        }
        assert_eq!(Request::decode(b"X\x01"), None);
        assert_eq!(Reply::decode(b""), None);
    }
}
