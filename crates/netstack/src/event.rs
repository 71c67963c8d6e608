//! What the mediator reports: every DNS query, every connection attempt (allowed or
//! not), and every allowed connection's end with its byte counts.

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

/// Whether something was let through, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    /// The text of the rule that decided, e.g. `allow *.github.com:443`.
    pub rule: Option<String>,
    /// Short reason: `rule`, `default deny`, `private address`, `dns rebinding`, ...
    pub reason: String,
}

impl Verdict {
    pub fn deny(reason: impl Into<String>) -> Self {
        Self {
            allowed: false,
            rule: None,
            reason: reason.into(),
        }
    }

    pub fn decision(&self) -> &'static str {
        if self.allowed { "allow" } else { "deny" }
    }
}

/// The policy's decision as recorded.
pub(crate) fn verdict(d: vg_policy::network::Decision) -> Verdict {
    Verdict {
        allowed: d.allowed,
        rule: d.rule.map(|r| r.text),
        reason: d.reason.as_str().to_owned(),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetEvent {
    /// A DNS question from the sandbox, answered by the mediator.
    Dns {
        time: SystemTime,
        /// The name as asked (canonical when it could be parsed).
        name: String,
        /// `A`, `AAAA`, ...
        qtype: String,
        verdict: Verdict,
        /// The real addresses behind the answer (never shown to the sandbox).
        addresses: Vec<IpAddr>,
        /// DNS response code sent back: `NoError`, `NXDomain`, ...
        rcode: String,
    },
    /// A connection attempt or a packet the sandbox tried to send out.
    Connect {
        id: u64,
        time: SystemTime,
        /// `tcp`, `udp`, `icmp`, `ipv6` or `ip` (another protocol).
        protocol: &'static str,
        /// The name behind a synthetic address, when the sandbox used our DNS.
        name: Option<String>,
        /// The real destination (for a synthetic address: the resolved one).
        address: IpAddr,
        port: u16,
        verdict: Verdict,
    },
    /// An allowed connection ended.
    Closed {
        id: u64,
        time: SystemTime,
        protocol: &'static str,
        name: Option<String>,
        address: IpAddr,
        port: u16,
        /// From the sandbox to the destination.
        bytes_out: u64,
        /// From the destination to the sandbox.
        bytes_in: u64,
        duration: Duration,
        /// Why it ended other than by a normal close, e.g. `connection refused`.
        error: Option<String>,
    },
}
