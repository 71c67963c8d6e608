//! Entry points for the fuzz targets in `fuzz/` (not part of the API): the parsers of
//! what the sandbox sends, reached without a TUN device or a network.

use std::net::{IpAddr, Ipv4Addr};

use vg_policy::network::NetworkPolicy;

pub use crate::stack::fuzz::feed_packets;

/// What [`dns_query`] did with one datagram.
#[derive(Debug)]
pub enum DnsOutcome {
    /// Dropped: not a DNS query.
    Dropped,
    /// Held for the approval gate.
    Held(String),
    /// Answered at once, or after a host lookup answered with `resolved`.
    Reply(Vec<u8>, crate::NetEvent),
}

/// The sandbox's DNS server given one datagram: answered at once, or, for an allowed
/// name, answered as if the host's lookup had returned `resolved` (nothing is looked
/// up). `hold_unlisted` is the approval gate's mode.
pub fn dns_query(
    datagram: &[u8],
    policy: &NetworkPolicy,
    hold_unlisted: bool,
    resolved: Vec<IpAddr>,
) -> DnsOutcome {
    let mut book = crate::book::Book::default();
    match crate::dns::handle(datagram, policy, &mut book, hold_unlisted) {
        crate::dns::Handling::Drop => DnsOutcome::Dropped,
        crate::dns::Handling::Hold(name) => DnsOutcome::Held(name.to_string()),
        crate::dns::Handling::Reply(reply, event) => DnsOutcome::Reply(reply, event),
        crate::dns::Handling::Resolve(pending) => {
            let (reply, event) = crate::dns::answer(&pending, Ok(resolved), &mut book);
            DnsOutcome::Reply(reply, event)
        }
    }
}

/// Whether `addr` is one of the synthetic addresses the DNS server hands out.
pub fn is_synthetic(addr: Ipv4Addr) -> bool {
    crate::addr::is_synthetic(addr)
}

/// What the first bytes of a passed-through connection say (`sni.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FirstBytes {
    Incomplete,
    NotTls,
    ClientHello(Option<String>),
    Malformed(&'static str),
}

/// [`crate::sni::client_hello`].
pub fn client_hello(bytes: &[u8]) -> FirstBytes {
    match crate::sni::client_hello(bytes) {
        crate::sni::FirstBytes::Incomplete => FirstBytes::Incomplete,
        crate::sni::FirstBytes::NotTls => FirstBytes::NotTls,
        crate::sni::FirstBytes::ClientHello(name) => FirstBytes::ClientHello(name),
        crate::sni::FirstBytes::Malformed(why) => FirstBytes::Malformed(why),
    }
}
