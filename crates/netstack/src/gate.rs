//! The approval gate's hook in the mediator: a DNS question for a name no rule allows
//! (default deny) may be held for a person's decision instead of refused at once.
//!
//! The mediator only holds and waits; rating the name, asking, recording, and adding
//! the rule an approval makes are the session's (`vg-session`'s gate), behind these
//! traits, so this crate depends on nothing above it. An approval must change the
//! policy (a live rule through the [`crate::PolicyHandle`]) before its ticket says so:
//! the held questions are then answered by the policy in force, like any other.

use std::sync::Arc;

/// Asked about names the policy does not allow.
pub trait NameGate: Send {
    /// `None`: refuse now, as without a gate. `Some`: hold the question until the
    /// ticket is decided; `wake` must be called once it is.
    fn ask(&self, name: &str, wake: Arc<dyn Fn() + Send + Sync>) -> Option<Box<dyn NameTicket>>;
}

/// One held name.
pub trait NameTicket: Send {
    /// `true` once decided (either way; the policy in force says which).
    fn decided(&self) -> bool;
}

/// Names held at once; past it a question is refused without asking, so a sandbox
/// spraying names cannot pile up requests.
pub const MAX_HELD_NAMES: usize = 32;
/// Questions (retransmissions, A and AAAA) kept per held name.
pub const MAX_QUERIES_PER_NAME: usize = 16;
