//! The approval gate's hook in the mediator: a DNS question for a name no rule allows
//! (default deny), or a connection's SYN to an address no rule allows, may be held for
//! a person's decision instead of refused at once. Private, link-local and loopback
//! addresses and this machine's own are never offered: an approval becomes an allow
//! rule, and a rule naming such an address would open it.
//!
//! The mediator only holds and waits; rating the name, asking, recording, and adding
//! the rule an approval makes are the session's (`vg-session`'s gate), behind these
//! traits, so this crate depends on nothing above it. An approval must change the
//! policy (a live rule through the [`crate::PolicyHandle`]) before its ticket says so:
//! the held questions are then answered by the policy in force, like any other.

use std::sync::Arc;

/// The sandbox's socket that asked: its protocol (`udp` for a DNS question, `tcp` for
/// a SYN) and local port, so that the session can name the process that owns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source {
    pub protocol: &'static str,
    pub port: u16,
}

/// Asked about destinations the policy does not allow: a name at its DNS question
/// (`port` unknown), or a public address at its SYN (`port` known).
pub trait DestinationGate: Send {
    /// `None`: refuse now, as without a gate. `Some`: hold the question (or the SYN)
    /// until the ticket is decided; `wake` must be called once it is.
    fn ask(
        &self,
        host: &str,
        port: Option<u16>,
        source: Source,
        wake: Arc<dyn Fn() + Send + Sync>,
    ) -> Option<Box<dyn DestinationTicket>>;
}

/// One held name.
pub trait DestinationTicket: Send {
    /// `true` once decided (either way; the policy in force says which).
    fn decided(&self) -> bool;
}

/// Names held at once; past it a question is refused without asking, so a sandbox
/// spraying names cannot pile up requests.
pub const MAX_HELD_NAMES: usize = 32;
/// Questions (retransmissions, A and AAAA) kept per held name.
pub const MAX_QUERIES_PER_NAME: usize = 16;
/// Connections to addresses held at once.
pub const MAX_HELD_SYNS: usize = 32;
