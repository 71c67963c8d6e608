//! Packets from the sandbox as the mediator reads them from the TUN descriptor
//! (`virtio_net_hdr` + IP packet): inspection (`stack/inspect.rs`), the SYN decision,
//! smoltcp's parsing, the DNS socket. Input: packets as `common::split` parts.
//!
//! Property: under a policy allowing one pinned name on one port, nothing else is
//! ever allowed, by DNS or connection.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vg_netstack::NetEvent;
use vg_policy::network::{Action, AddHost, NetworkPolicy, Rule};

#[path = "common.rs"]
mod common;

fn policy() -> NetworkPolicy {
    let rule = |a, s| Rule::parse(a, s).expect("rule");
    // The only allowed destination is a closed port on loopback: nothing leaves.
    NetworkPolicy::new(
        vec![
            rule(Action::Deny, "*.evil.test"),
            rule(Action::Allow, "pinned.test:1"),
        ],
        vec![AddHost::parse("pinned.test:127.0.0.1").expect("add-host")],
    )
}

fuzz_target!(|data: &[u8]| {
    let packets = common::split(data);
    let (events, _replies) =
        vg_netstack::fuzzing::feed_packets(policy(), &packets).expect("the mediator starts");
    for event in events {
        match event {
            NetEvent::Dns { name, verdict, .. } => {
                assert!(!verdict.allowed || name == "pinned.test", "{name} allowed");
            }
            NetEvent::Connect {
                name,
                address,
                port,
                verdict,
                ..
            } => assert!(
                !verdict.allowed
                    || (name.as_deref() == Some("pinned.test")
                        && address == std::net::IpAddr::from([127, 0, 0, 1])
                        && port == 1),
                "{name:?} {address}:{port} allowed"
            ),
            NetEvent::Closed { .. } => {}
        }
    }
});
