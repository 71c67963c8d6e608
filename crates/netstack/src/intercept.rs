//! The HTTP inspection hook in the mediator: a connection to a host that a method and
//! path rule names (`allow GET https://api.example.com/**`) is not connected to its
//! destination here. The mediator accepts the sandbox's side as for any allowed
//! connection and relays its bytes to one end of a socket pair; the other end goes to
//! the [`Interceptor`] (the session's `vg-http` inspector), which terminates TLS with
//! the session's CA, decides each request, and makes its own connection upstream.
//!
//! This crate depends on nothing above it: the inspector is behind this trait.

use std::net::IpAddr;
use std::os::unix::net::UnixStream;

use vg_policy::network::{HostName, Scheme};

/// An allowed connection handed to the inspector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intercepted {
    /// The mediator's connection id (the `connection` of its `network` events).
    pub connection: u64,
    /// The name the sandbox looked up through our resolver, if it used one.
    pub name: Option<HostName>,
    /// The real destination the policy allowed: where the inspector connects.
    pub addr: IpAddr,
    pub port: u16,
    /// What the rule that made the host inspected speaks on this port.
    pub scheme: Scheme,
}

/// Takes inspected connections. Called on the mediator's thread: it must not block.
pub trait Interceptor: Send + Sync {
    /// `stream` carries the sandbox's bytes (blocking mode; the implementation may make
    /// it non-blocking). Dropping it closes the sandbox's connection.
    fn intercept(&self, conn: Intercepted, stream: UnixStream);
}
