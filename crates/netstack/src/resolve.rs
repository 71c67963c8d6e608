//! Resolving allowed names on the host, off the mediator's loop (the system resolver
//! blocks). Each lookup runs on its own short-lived thread; a bound on how many run
//! at once keeps a sandbox from exhausting threads with a flood of queries.

use std::net::{IpAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;

use crate::dns::ResolveFailure;

const MAX_IN_FLIGHT: usize = 32;

pub(crate) struct Resolved {
    pub id: u64,
    pub result: Result<Vec<IpAddr>, ResolveFailure>,
}

pub(crate) struct Resolver {
    done: Sender<Resolved>,
    waker: Arc<mio::Waker>,
    in_flight: Arc<AtomicUsize>,
}

impl Resolver {
    pub fn new(done: Sender<Resolved>, waker: Arc<mio::Waker>) -> Self {
        Self {
            done,
            waker,
            in_flight: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Starts resolving `name`; the result arrives as [`Resolved`] with `id`. Returns
    /// false when too many lookups are already running (answer SERVFAIL).
    pub fn start(&self, id: u64, name: String) -> bool {
        if self.in_flight.fetch_add(1, Ordering::AcqRel) >= MAX_IN_FLIGHT {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        let done = self.done.clone();
        let waker = Arc::clone(&self.waker);
        let in_flight = Arc::clone(&self.in_flight);
        let spawned = std::thread::Builder::new()
            .name("vg-resolve".into())
            .spawn(move || {
                let result = lookup(&name);
                in_flight.fetch_sub(1, Ordering::AcqRel);
                if done.send(Resolved { id, result }).is_ok() {
                    let _ = waker.wake();
                }
            });
        if spawned.is_err() {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }
}

/// The host's answer for `name`, IPv4 first (the sandbox only speaks IPv4, but the
/// mediator may reach the destination over either).
fn lookup(name: &str) -> Result<Vec<IpAddr>, ResolveFailure> {
    match (name, 0).to_socket_addrs() {
        Ok(addrs) => {
            let mut ips: Vec<IpAddr> = Vec::new();
            for a in addrs {
                if !ips.contains(&a.ip()) {
                    ips.push(a.ip());
                }
            }
            ips.sort_by_key(|ip| ip.is_ipv6());
            Ok(ips)
        }
        // The standard library only gives getaddrinfo's message.
        // glibc: "Name or service not known", "No address associated with hostname";
        // musl: "Name does not resolve".
        Err(e)
            if ["not known", "No address", "does not resolve"]
                .iter()
                .any(|m| e.to_string().contains(m)) =>
        {
            Err(ResolveFailure::NoSuchName)
        }
        Err(_) => Err(ResolveFailure::Other),
    }
}
