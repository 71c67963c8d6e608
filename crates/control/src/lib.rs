//! The control channel of one running session and its approval broker.
//!
//! Every front end (the terminal prompt, the CLI's `ps`/`stop`/`net`/`approve`…,
//! later the dashboard and the MCP server) talks to a running session through
//! one owner-only Unix socket next to its record, `session-…/control.sock`:
//! one versioned JSON object per line each way ([`protocol`]). The supervisor
//! serves it ([`server::ControlServer`]) outside the sandbox, which can never
//! reach it (its own mount namespace and Landlock hide the records folder);
//! the CLI connects with [`client::ControlClient`] and finds running sessions
//! with [`discover`]. [`broker::Broker`] holds gated execs and destinations
//! until a decider answers or the level's time-out denies them.
#![deny(unsafe_code)]

pub mod broker;
pub mod client;
pub mod discover;
pub mod peer;
pub mod protocol;
pub mod server;
pub mod short_path;

pub use broker::{Broker, Decision, Level, Subject, Ticket, Timeouts};
pub use client::{ClientError, ControlClient};
pub use peer::Peer;
pub use protocol::{ControlError, Decider, Scope, Verdict};
pub use server::{ControlServer, Handler};

/// The socket's file name inside a session's folder.
pub const SOCKET_NAME: &str = "control.sock";

/// Where the control socket of the session recorded in `session_dir` lives.
pub fn socket_path(session_dir: &std::path::Path) -> std::path::PathBuf {
    session_dir.join(SOCKET_NAME)
}
