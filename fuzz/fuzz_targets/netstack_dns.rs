//! The sandbox's DNS server (`dns.rs`) given one datagram, under a fixed policy; an
//! allowed name is answered as if the host had resolved it to the input's addresses.
//! Input: selector byte (bit 0: the approval gate holds unlisted names), then the
//! datagram.
//!
//! Properties: a reply is a DNS response with the query's id; only an allowed name
//! gets an address, and only a synthetic one.
#![no_main]

use hickory_proto::op::{Message, MessageType};
use hickory_proto::rr::RData;
use libfuzzer_sys::fuzz_target;
use vg_netstack::NetEvent;
use vg_netstack::fuzzing::{DnsOutcome, dns_query, is_synthetic};
use vg_policy::network::{Action, AddHost, NetworkPolicy, Rule};

#[path = "common.rs"]
mod common;

fn policy() -> NetworkPolicy {
    let rule = |a, s| Rule::parse(a, s).expect("rule");
    NetworkPolicy::new(
        vec![
            rule(Action::Deny, "*.evil.test"),
            rule(Action::Allow, "*.example.com"),
            rule(Action::Allow, "pinned.test:443"),
            rule(Action::Deny, "example.org:80"),
            rule(Action::Allow, "example.org"),
            rule(Action::Allow, "https://api.example.net/v1/**"),
        ],
        vec![AddHost::parse("pinned.test:203.0.113.7").expect("add-host")],
    )
}

fuzz_target!(|data: &[u8]| {
    let (sel, datagram) = common::selector(data);
    let resolved = vec![std::net::IpAddr::from([93, 184, 215, 14])];
    let outcome = dns_query(datagram, &policy(), sel & 1 == 1, resolved);
    let DnsOutcome::Reply(reply, event) = outcome else {
        return;
    };
    let NetEvent::Dns { verdict, .. } = event else {
        panic!("a DNS reply recorded as {event:?}");
    };
    if reply.is_empty() {
        return;
    }
    let request = Message::from_vec(datagram).expect("a replied datagram parses");
    let reply = Message::from_vec(&reply).expect("our reply parses");
    assert_eq!(reply.metadata.id, request.metadata.id);
    assert_eq!(reply.metadata.message_type, MessageType::Response);
    for answer in &reply.answers {
        assert!(verdict.allowed, "an answer for a refused name: {answer:?}");
        match answer.data {
            RData::A(a) => assert!(is_synthetic(a.0), "real address {a} handed out"),
            ref other => panic!("an answer that is not A: {other:?}"),
        }
    }
});
