//! The session's end of the control channel.
//!
//! `ControlServer::bind` makes `control.sock` inside the session's 0700 folder
//! (so no other user can reach it even between `bind` and `chmod`), sets it
//! to 0600, and serves it from one accepting thread plus one short-lived
//! thread per client (at most [`MAX_CLIENTS`]). Each connection's peer uid is
//! checked with `SO_PEERCRED` (owner or root, else `not-permitted`); reads and
//! writes time out, so a stuck client holds only its own thread, never the
//! session. Dropping the server stops the thread and removes the socket.

use std::collections::HashMap;
use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::broker::PendingView;
use crate::peer::{Peer, peer_of};
use crate::protocol::{
    ControlError, MAX_LINE, NetRule, Op, Reply, Request, Response, RuleAction, Scope,
    SessionStatus, VERSION, Verdict,
};
use crate::short_path::with_socket_path;

/// Clients served at once; one more is answered `busy`.
pub const MAX_CLIENTS: usize = 8;

/// How long a client may take to send a whole request line, or to take one answer.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// What the session does for each request. `peer` is the verified caller, to
/// record who changed a rule or decided a request.
pub trait Handler: Send + Sync + 'static {
    fn status(&self) -> Result<SessionStatus, ControlError>;
    fn stop(&self, kill: bool, peer: &Peer) -> Result<(), ControlError>;
    fn net_rules(&self) -> Result<Vec<NetRule>, ControlError>;
    fn net_add(
        &self,
        action: RuleAction,
        target: &str,
        peer: &Peer,
    ) -> Result<NetRule, ControlError>;
    fn approvals(&self) -> Result<Vec<PendingView>, ControlError>;
    fn decide(
        &self,
        id: u64,
        decision: Verdict,
        scope: Scope,
        peer: &Peer,
    ) -> Result<(), ControlError>;
}

/// Why the socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error(
        "control channel: {dir} is open to other users (mode {mode:o}); a session folder must be 0700"
    )]
    OpenDirectory { dir: PathBuf, mode: u32 },
    #[error("control channel: cannot inspect {path}: {source}")]
    Inspect { path: PathBuf, source: io::Error },
    #[error(
        "control channel: {path} exists and is not a socket; refusing to replace it (remove it if it is stale)"
    )]
    NotASocket { path: PathBuf },
    #[error("control channel: {path} is served by a running session already")]
    InUse { path: PathBuf },
    #[error("control channel: cannot create {path}: {source}")]
    Create { path: PathBuf, source: io::Error },
}

/// A served control socket; dropping it stops serving and removes the socket.
pub struct ControlServer {
    path: PathBuf,
    /// The socket file we made, so that drop never removes a replacement.
    inode: (u64, u64),
    stopping: Arc<AtomicBool>,
    clients: Arc<Clients>,
    /// The listening socket (a second descriptor of it), shut down to wake the
    /// blocked `accept` when the server stops.
    listening: socket2::Socket,
    acceptor: Option<JoinHandle<()>>,
}

/// The connections being served, so that dropping the server ends them at
/// once instead of leaving them (and the handler) alive until their time-out.
struct Clients {
    /// `None` once the server is stopping: no connection is registered after.
    open: Mutex<Option<(u64, HashMap<u64, UnixStream>)>>,
}

impl Clients {
    fn new() -> Self {
        Self {
            open: Mutex::new(Some((0, HashMap::new()))),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<(u64, HashMap<u64, UnixStream>)>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a connection; `Err(true)` when at the limit, `Err(false)`
    /// when stopping.
    fn register(&self, stream: &UnixStream) -> Result<u64, bool> {
        let mut open = self.lock();
        let Some((next, streams)) = open.as_mut() else {
            return Err(false);
        };
        if streams.len() >= MAX_CLIENTS {
            return Err(true);
        }
        let copy = stream.try_clone().map_err(|_| false)?;
        let id = *next;
        *next += 1;
        streams.insert(id, copy);
        Ok(id)
    }

    fn unregister(&self, id: u64) {
        if let Some((_, streams)) = self.lock().as_mut() {
            streams.remove(&id);
        }
    }

    /// Ends every connection and refuses new ones.
    fn close(&self) {
        if let Some((_, streams)) = self.lock().take() {
            for stream in streams.values() {
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

impl ControlServer {
    /// Serves `path` for `owner_uid` (and root) with `handler`.
    pub fn bind(path: &Path, owner_uid: u32, handler: Arc<dyn Handler>) -> Result<Self, BindError> {
        let dir = path.parent().unwrap_or(Path::new("."));
        let dir_meta = fs::metadata(dir).map_err(|source| BindError::Inspect {
            path: dir.into(),
            source,
        })?;
        let mode = dir_meta.mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(BindError::OpenDirectory {
                dir: dir.into(),
                mode,
            });
        }
        remove_stale(path)?;
        let listener = with_socket_path(path, |p| UnixListener::bind(p)).map_err(|source| {
            BindError::Create {
                path: path.into(),
                source,
            }
        })?;
        let created = || -> io::Result<(u64, u64)> {
            fs::set_permissions(path, fs::Permissions::from_mode(0o600))?;
            let meta = fs::symlink_metadata(path)?;
            Ok((meta.dev(), meta.ino()))
        };
        let inode = created().map_err(|source| {
            let _ = fs::remove_file(path);
            BindError::Create {
                path: path.into(),
                source,
            }
        })?;
        let listening = listener
            .try_clone()
            .map(|l| socket2::Socket::from(std::os::fd::OwnedFd::from(l)))
            .map_err(|source| {
                let _ = fs::remove_file(path);
                BindError::Create {
                    path: path.into(),
                    source,
                }
            })?;
        let stopping = Arc::new(AtomicBool::new(false));
        let clients = Arc::new(Clients::new());
        let (flag, served) = (Arc::clone(&stopping), Arc::clone(&clients));
        let acceptor = std::thread::Builder::new()
            .name("vg-control".into())
            .spawn(move || accept_loop(&listener, owner_uid, &handler, &flag, &served))
            .map_err(|source| {
                let _ = fs::remove_file(path);
                BindError::Create {
                    path: path.into(),
                    source,
                }
            })?;
        Ok(Self {
            path: path.into(),
            inode,
            stopping,
            clients,
            listening,
            acceptor: Some(acceptor),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.clients.close();
        // Wake the blocked accept (it fails once the socket is shut down); it sees
        // the flag and returns. Cheaper than connecting to ourselves, which also
        // needed the socket's path to still resolve.
        let _ = self.listening.shutdown(std::net::Shutdown::Both);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        if let Ok(meta) = fs::symlink_metadata(&self.path)
            && (meta.dev(), meta.ino()) == self.inode
        {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Removes a socket left by a session whose supervisor died; refuses anything
/// else at `path`.
fn remove_stale(path: &Path) -> Result<(), BindError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(BindError::Inspect {
                path: path.into(),
                source,
            });
        }
    };
    if !meta.file_type().is_socket() {
        return Err(BindError::NotASocket { path: path.into() });
    }
    match with_socket_path(path, |p| UnixStream::connect(p)) {
        Ok(_) => Err(BindError::InUse { path: path.into() }),
        Err(error) if error.kind() == io::ErrorKind::ConnectionRefused => fs::remove_file(path)
            .map_err(|source| BindError::Create {
                path: path.into(),
                source,
            }),
        Err(source) => Err(BindError::Inspect {
            path: path.into(),
            source,
        }),
    }
}

fn accept_loop(
    listener: &UnixListener,
    owner_uid: u32,
    handler: &Arc<dyn Handler>,
    stopping: &AtomicBool,
    clients: &Arc<Clients>,
) {
    for stream in listener.incoming() {
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        // A failed accept (the client gave up, descriptors short) loses only
        // that client.
        let Ok(mut stream) = stream else { continue };
        let _ = stream.set_read_timeout(Some(IO_TIMEOUT));
        let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
        let id = match clients.register(&stream) {
            Ok(id) => id,
            Err(true) => {
                let _ = answer(&mut stream, &Response::error(ControlError::Busy));
                continue;
            }
            Err(false) => return,
        };
        let handler = Arc::clone(handler);
        let served = Arc::clone(clients);
        let spawned = std::thread::Builder::new()
            .name("vg-control-client".into())
            .spawn(move || {
                serve_client(stream, owner_uid, handler.as_ref());
                served.unregister(id);
            });
        if spawned.is_err() {
            clients.unregister(id);
        }
    }
}

/// Serves one connection: requests one line at a time until end of file, an
/// oversized line, or a time-out.
fn serve_client(stream: UnixStream, owner_uid: u32, handler: &dyn Handler) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let peer = match peer_of(&stream) {
        Ok(peer) => peer,
        Err(error) => {
            let _ = answer(
                &mut writer,
                &Response::error(ControlError::Internal {
                    message: format!("cannot read the client's credentials: {error}"),
                }),
            );
            return;
        }
    };
    if peer.uid != owner_uid && peer.uid != 0 {
        let _ = answer(
            &mut writer,
            &Response::error(ControlError::NotPermitted { uid: peer.uid }),
        );
        return;
    }
    let mut reader = BufReader::new(Deadline {
        stream,
        deadline: Instant::now(),
    });
    loop {
        // The whole line within IO_TIMEOUT, not each read: a client trickling
        // a byte at a time cannot hold its slot for long.
        reader.get_mut().deadline = Instant::now() + IO_TIMEOUT;
        let mut line = Vec::new();
        let limit = u64::try_from(MAX_LINE).unwrap_or(u64::MAX);
        match (&mut reader).take(limit).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if !line.ends_with(b"\n") && line.len() >= MAX_LINE {
            let _ = answer(
                &mut writer,
                &Response::error(ControlError::TooLarge { limit: MAX_LINE }),
            );
            return;
        }
        let response = match parse(&line) {
            Ok(request) => match dispatch(handler, request.op, &peer) {
                Ok(reply) => Response::ok(reply),
                Err(error) => Response::error(error),
            },
            Err(error) => Response::error(error),
        };
        if answer(&mut writer, &response).is_err() {
            return;
        }
    }
}

/// A stream whose reads fail once `deadline` has passed.
struct Deadline {
    stream: UnixStream,
    deadline: Instant,
}

impl Read for Deadline {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

fn parse(line: &[u8]) -> Result<Request, ControlError> {
    // The version first, so that a newer client gets "unsupported version"
    // rather than a parse error about an operation it thinks exists.
    #[derive(serde::Deserialize)]
    struct Versioned {
        v: Option<u32>,
    }
    let versioned: Versioned =
        serde_json::from_slice(line).map_err(|error| ControlError::Malformed {
            message: error.to_string(),
        })?;
    match versioned.v {
        Some(VERSION) => {}
        Some(got) => {
            return Err(ControlError::UnsupportedVersion {
                got,
                supported: VERSION,
            });
        }
        None => {
            return Err(ControlError::Malformed {
                message: "missing protocol version \"v\"".into(),
            });
        }
    }
    serde_json::from_slice(line).map_err(|error| ControlError::Malformed {
        message: error.to_string(),
    })
}

fn dispatch(handler: &dyn Handler, op: Op, peer: &Peer) -> Result<Reply, ControlError> {
    Ok(match op {
        Op::Status => Reply::Status(handler.status()?),
        Op::Stop { kill } => {
            handler.stop(kill, peer)?;
            Reply::Stopping
        }
        Op::NetRules => Reply::NetRules {
            rules: handler.net_rules()?,
        },
        Op::NetAdd { action, target } => Reply::RuleAdded {
            rule: handler.net_add(action, &target, peer)?,
        },
        Op::Approvals => Reply::Approvals {
            pending: handler.approvals()?,
        },
        Op::Decide {
            id,
            decision,
            scope,
        } => {
            handler.decide(id, decision, scope, peer)?;
            Reply::Decided { id }
        }
    })
}

fn answer(stream: &mut UnixStream, response: &Response) -> io::Result<()> {
    let mut line = serde_json::to_vec(response).map_err(io::Error::other)?;
    line.push(b'\n');
    stream.write_all(&line)
}
