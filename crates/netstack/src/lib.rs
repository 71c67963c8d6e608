//! The mediated network: the supervisor's end of a sandbox's TUN interface.
//!
//! In `--network allow` mode the sandbox has its own network namespace whose only
//! way out is a TUN interface (see [`addr`]). Every packet it sends arrives here, at a
//! user-space TCP/IP stack (smoltcp), so programs that ignore proxy settings, static
//! binaries and raw sockets are mediated all the same:
//!
//! - DNS questions are answered here (`dns.rs`); the policy decides on names.
//! - A TCP connection is held at its SYN until the policy allows it and the real
//!   destination accepted our own connection from the host; then the two are relayed
//!   byte for byte. A denial is a TCP reset.
//! - A connection to a host that a method and path rule names is handed to the HTTP
//!   inspector ([`intercept`]); a passed-through TLS connection must name, in its
//!   ClientHello, the host it was allowed for (`sni.rs`).
//! - Other UDP, ICMP, IPv6 and other protocols do not leave; each is recorded once.
//!
//! The policy lives here, outside the sandbox, behind a [`PolicyHandle`] that can be
//! swapped while the session runs; each connection's bytes pass through this process.

#![forbid(unsafe_code)]

pub mod addr;
mod book;
mod budget;
mod bypass;
mod device;
mod dns;
mod error;
mod event;
/// Entry points for the fuzz targets in `fuzz/`; not part of the API.
#[doc(hidden)]
pub mod fuzzing;
pub mod gate;
mod host;
pub mod intercept;
mod resolve;
mod sni;
mod stack;

use std::sync::{Arc, RwLock};

pub use budget::size_host_socket;
pub use error::Error;
pub use event::{NetEvent, Verdict};
pub use stack::Mediator;
use vg_policy::network::NetworkPolicy;

/// The policy in force, shared with whoever may change it during the session.
#[derive(Debug, Clone)]
pub struct PolicyHandle(Arc<RwLock<Arc<NetworkPolicy>>>);

impl PolicyHandle {
    pub fn new(policy: NetworkPolicy) -> Self {
        Self(Arc::new(RwLock::new(Arc::new(policy))))
    }

    /// The policy now; later decisions see a replacement, this one stays as it was.
    pub fn current(&self) -> Arc<NetworkPolicy> {
        match self.0.read() {
            Ok(p) => Arc::clone(&p),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Replaces the policy for every decision from now on (connections already
    /// allowed stay open).
    pub fn replace(&self, policy: NetworkPolicy) {
        let policy = Arc::new(policy);
        match self.0.write() {
            Ok(mut p) => *p = policy,
            Err(poisoned) => *poisoned.into_inner() = policy,
        }
    }
}
