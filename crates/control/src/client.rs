//! The front ends' end of the control channel.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use crate::broker::PendingView;
use crate::protocol::{
    Body, ControlError, NetRule, Op, Reply, Request, Response, RuleAction, Scope, SessionStatus,
    Verdict,
};

/// How long the client waits for an answer.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Why a request to a session failed; each names the session and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("session {session} is not running (it has no control socket; see `vectraguard ps`)")]
    NotRunning { session: String },
    #[error("session {session} is not running (its supervisor is gone)")]
    Gone { session: String },
    #[error("session {session} belongs to another user; only its owner and root may control it")]
    NotPermitted { session: String },
    #[error("session {session}: {error}")]
    Refused {
        session: String,
        error: ControlError,
    },
    #[error("session {session}: the control channel failed: {source}")]
    Io { session: String, source: io::Error },
    #[error("session {session}: unexpected answer on the control channel: {message}")]
    Protocol { session: String, message: String },
}

/// A connection to one running session.
pub struct ControlClient {
    session: String,
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl ControlClient {
    /// Connects to the socket at `path` (`session-…/control.sock`).
    pub fn connect(path: &Path) -> Result<Self, ClientError> {
        let session = session_name(path);
        let stream = crate::short_path::with_socket_path(path, |p| UnixStream::connect(p))
            .map_err(|source| match source.kind() {
                io::ErrorKind::NotFound => ClientError::NotRunning {
                    session: session.clone(),
                },
                io::ErrorKind::ConnectionRefused => ClientError::Gone {
                    session: session.clone(),
                },
                io::ErrorKind::PermissionDenied => ClientError::NotPermitted {
                    session: session.clone(),
                },
                _ => ClientError::Io {
                    session: session.clone(),
                    source,
                },
            })?;
        let io_error = |source| ClientError::Io {
            session: session.clone(),
            source,
        };
        stream.set_read_timeout(Some(TIMEOUT)).map_err(io_error)?;
        stream.set_write_timeout(Some(TIMEOUT)).map_err(io_error)?;
        let writer = stream.try_clone().map_err(io_error)?;
        Ok(Self {
            session,
            reader: BufReader::new(stream),
            writer,
        })
    }

    /// The session's id, from the socket's folder.
    pub fn session(&self) -> &str {
        &self.session
    }

    pub fn status(&mut self) -> Result<SessionStatus, ClientError> {
        match self.call(Op::Status)? {
            Reply::Status(status) => Ok(status),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Asks the session to end. A session that ends before its answer is
    /// written (the supervisor drops the socket as soon as the sandbox is gone,
    /// which a quick stop can make happen first) hangs up instead: that is the
    /// stop done, not a failure.
    pub fn stop(&mut self, kill: bool) -> Result<(), ClientError> {
        match self.call(Op::Stop { kill }) {
            Ok(Reply::Stopping) | Err(ClientError::Gone { .. }) => Ok(()),
            Ok(other) => Err(self.unexpected(&other)),
            Err(error) => Err(error),
        }
    }

    pub fn net_rules(&mut self) -> Result<Vec<NetRule>, ClientError> {
        match self.call(Op::NetRules)? {
            Reply::NetRules { rules } => Ok(rules),
            other => Err(self.unexpected(&other)),
        }
    }

    pub fn net_add(&mut self, action: RuleAction, target: &str) -> Result<NetRule, ClientError> {
        let op = Op::NetAdd {
            action,
            target: target.into(),
        };
        match self.call(op)? {
            Reply::RuleAdded { rule } => Ok(rule),
            other => Err(self.unexpected(&other)),
        }
    }

    pub fn approvals(&mut self) -> Result<Vec<PendingView>, ClientError> {
        match self.call(Op::Approvals)? {
            Reply::Approvals { pending } => Ok(pending),
            other => Err(self.unexpected(&other)),
        }
    }

    pub fn decide(&mut self, id: u64, decision: Verdict, scope: Scope) -> Result<(), ClientError> {
        let op = Op::Decide {
            id,
            decision,
            scope,
        };
        match self.call(op)? {
            Reply::Decided { .. } => Ok(()),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Sends one request and reads its answer.
    pub fn call(&mut self, op: Op) -> Result<Reply, ClientError> {
        let mut line = serde_json::to_vec(&Request::new(op)).map_err(|error| self.io(error))?;
        line.push(b'\n');
        if let Err(error) = self.writer.write_all(&line) {
            // A session that refuses a client (busy, not permitted) answers
            // as soon as it accepts and hangs up: that answer is still there.
            return match self.read_reply() {
                Err(ClientError::Io { .. } | ClientError::Gone { .. }) => Err(self.io(error)),
                answer => answer,
            };
        }
        self.read_reply()
    }

    /// Reads one answer; public for tests that write raw lines.
    pub fn read_reply(&mut self) -> Result<Reply, ClientError> {
        let mut answer = String::new();
        let read = self
            .reader
            .read_line(&mut answer)
            .map_err(|source| ClientError::Io {
                session: self.session.clone(),
                source,
            })?;
        if read == 0 {
            return Err(ClientError::Gone {
                session: self.session.clone(),
            });
        }
        let response: Response =
            serde_json::from_str(&answer).map_err(|error| ClientError::Protocol {
                session: self.session.clone(),
                message: error.to_string(),
            })?;
        match response.body {
            Body::Ok(reply) => Ok(reply),
            Body::Error(ControlError::NotPermitted { .. }) => Err(ClientError::NotPermitted {
                session: self.session.clone(),
            }),
            Body::Error(error) => Err(ClientError::Refused {
                session: self.session.clone(),
                error,
            }),
        }
    }

    /// Writes raw bytes, for tests of the server's input handling.
    pub fn write_raw(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        self.writer.write_all(bytes).map_err(|e| self.io(e))
    }

    fn io(&self, error: impl Into<io::Error>) -> ClientError {
        ClientError::Io {
            session: self.session.clone(),
            source: error.into(),
        }
    }

    fn unexpected(&self, reply: &Reply) -> ClientError {
        ClientError::Protocol {
            session: self.session.clone(),
            message: format!("{reply:?}"),
        }
    }
}

/// The session a socket belongs to: its folder's name.
fn session_name(path: &Path) -> String {
    path.parent().and_then(Path::file_name).map_or_else(
        || path.display().to_string(),
        |name| name.to_string_lossy().into_owned(),
    )
}

/// Whether `error` means the session is simply not running.
pub fn is_not_running(error: &ClientError) -> bool {
    matches!(
        error,
        ClientError::NotRunning { .. } | ClientError::Gone { .. }
    )
}
