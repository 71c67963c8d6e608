//! The sandbox's DNS server. Every question is answered here: a name the policy
//! cannot allow gets NXDOMAIN without anything leaving the machine, so DNS cannot
//! carry data out; an allowed name is resolved on the host and answered with a
//! synthetic address (see [`crate::addr`]) that stands for that name alone.

use std::net::{IpAddr, Ipv4Addr};
use std::time::SystemTime;

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{DNSClass, RData, Record, RecordType};
use vg_policy::network::{HostName, NetworkPolicy};

use crate::book::Book;
use crate::event::{NetEvent, Verdict};

/// Seconds a sandbox may cache an answer. Synthetic addresses never change during a
/// session, so this only bounds how stale the host-side resolution can get.
const TTL: u32 = 30;

/// What to do with one datagram sent to the DNS server.
pub(crate) enum Handling {
    /// Send this reply now (and record the event).
    Reply(Vec<u8>, NetEvent),
    /// The name is allowed: resolve it on the host, then [`answer`].
    Resolve(Pending),
    /// Not a DNS message at all: drop it.
    Drop,
    /// No rule allows the name and holding is asked for: ask the gate first.
    Hold(HostName),
}

/// An allowed `A` question waiting for the host's resolver.
pub(crate) struct Pending {
    pub request: Message,
    pub name: HostName,
    pub verdict: Verdict,
}

/// `hold_unlisted`: return [`Handling::Hold`] for a name no rule matched instead of
/// refusing it.
pub(crate) fn handle(
    datagram: &[u8],
    policy: &NetworkPolicy,
    book: &mut Book,
    hold_unlisted: bool,
) -> Handling {
    let Ok(request) = Message::from_vec(datagram) else {
        return Handling::Drop;
    };
    if request.metadata.message_type != MessageType::Query {
        return Handling::Drop;
    }
    let asked = request
        .queries
        .first()
        .map(|q| (wire_name(q), q.query_type().to_string()))
        .unwrap_or_default();
    // Events name what was asked, canonical once it parsed as a name.
    let event =
        |name: &str, verdict: Verdict, rcode: ResponseCode, addresses: Vec<IpAddr>| NetEvent::Dns {
            time: SystemTime::now(),
            name: name.to_owned(),
            qtype: asked.1.clone(),
            verdict,
            addresses,
            rcode: mnemonic(rcode),
        };
    let query = match request.queries.as_slice() {
        [q] if request.metadata.op_code == OpCode::Query && q.query_class() == DNSClass::IN => q,
        _ => {
            let reply = respond(&request, ResponseCode::NotImp, None);
            return Handling::Reply(
                reply,
                event(
                    &asked.0,
                    Verdict::deny("unsupported query"),
                    ResponseCode::NotImp,
                    vec![],
                ),
            );
        }
    };
    let name = match HostName::parse_wire(&asked.0) {
        Ok(name) => name,
        Err(_) => {
            let reply = respond(&request, ResponseCode::NXDomain, None);
            return Handling::Reply(
                reply,
                event(
                    &asked.0,
                    Verdict::deny("invalid name"),
                    ResponseCode::NXDomain,
                    vec![],
                ),
            );
        }
    };
    let decided = policy.decide_name(&name);
    if hold_unlisted && decided.reason == vg_policy::network::Reason::DefaultDeny {
        return Handling::Hold(name);
    }
    let verdict = crate::event::verdict(decided);
    if !verdict.allowed {
        let reply = respond(&request, ResponseCode::NXDomain, None);
        return Handling::Reply(
            reply,
            event(name.as_str(), verdict, ResponseCode::NXDomain, vec![]),
        );
    }
    if query.query_type() != RecordType::A {
        // IPv6 and other record types are never handed out: IPv4 through the
        // mediator is the only way out. An empty answer makes clients use `A`.
        let reply = respond(&request, ResponseCode::NoError, None);
        return Handling::Reply(
            reply,
            event(name.as_str(), verdict, ResponseCode::NoError, vec![]),
        );
    }
    if let Some(pinned) = policy.pinned(&name) {
        let synthetic = book.assign(&name, vec![pinned], true);
        let rcode = if synthetic.is_some() {
            ResponseCode::NoError
        } else {
            ResponseCode::ServFail
        };
        let reply = respond(&request, rcode, synthetic);
        return Handling::Reply(reply, event(name.as_str(), verdict, rcode, vec![pinned]));
    }
    Handling::Resolve(Pending {
        request,
        name,
        verdict,
    })
}

/// The reply to a [`Pending`] question once the host resolved it (or failed to).
pub(crate) fn answer(
    pending: &Pending,
    resolved: Result<Vec<IpAddr>, ResolveFailure>,
    book: &mut Book,
) -> (Vec<u8>, NetEvent) {
    let (rcode, synthetic, addresses) = match resolved {
        Ok(addrs) if !addrs.is_empty() => match book.assign(&pending.name, addrs.clone(), false) {
            Some(synthetic) => (ResponseCode::NoError, Some(synthetic), addrs),
            None => (ResponseCode::ServFail, None, addrs),
        },
        Ok(_) | Err(ResolveFailure::NoSuchName) => (ResponseCode::NXDomain, None, vec![]),
        Err(ResolveFailure::Other) => (ResponseCode::ServFail, None, vec![]),
    };
    let reply = respond(&pending.request, rcode, synthetic);
    let event = NetEvent::Dns {
        time: SystemTime::now(),
        name: pending.name.to_string(),
        qtype: "A".to_owned(),
        verdict: pending.verdict.clone(),
        addresses,
        rcode: mnemonic(rcode),
    };
    (reply, event)
}

/// The response code as DNS tools print it.
fn mnemonic(rcode: ResponseCode) -> String {
    match rcode {
        ResponseCode::NoError => "NOERROR".into(),
        ResponseCode::NXDomain => "NXDOMAIN".into(),
        ResponseCode::ServFail => "SERVFAIL".into(),
        ResponseCode::NotImp => "NOTIMP".into(),
        ResponseCode::Refused => "REFUSED".into(),
        other => other.to_string(),
    }
}

/// Why the host could not resolve a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResolveFailure {
    NoSuchName,
    Other,
}

/// The question's name as sent, label by label. A label holding a dot or a byte
/// outside printable ASCII is kept visibly escaped so that it can never be read as a
/// different, allowed name (`allowed.com` as one label of `allowed\.com.evil.com`).
fn wire_name(query: &Query) -> String {
    let labels: Vec<String> = query
        .name()
        .iter()
        .map(|label| {
            label
                .iter()
                .map(|&b| match b {
                    b'.' | b'\\' => format!("\\{}", char::from(b)),
                    0x21..=0x7e => char::from(b).to_string(),
                    _ => format!("\\{b:03}"),
                })
                .collect()
        })
        .collect();
    labels.join(".")
}

fn respond(request: &Message, rcode: ResponseCode, a: Option<Ipv4Addr>) -> Vec<u8> {
    let mut reply = Message::new(request.metadata.id, MessageType::Response, OpCode::Query);
    reply.metadata.recursion_desired = request.metadata.recursion_desired;
    reply.metadata.recursion_available = true;
    reply.metadata.response_code = rcode;
    for q in &request.queries {
        reply.add_query(q.clone());
    }
    if let (Some(addr), Some(q)) = (a, request.queries.first()) {
        reply.add_answer(Record::from_rdata(q.name().clone(), TTL, RData::A(A(addr))));
    }
    // A message we built from a parsed one always encodes; an empty reply is dropped
    // by the caller's resolver like a lost datagram.
    reply.to_vec().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::Name;
    use vg_policy::network::{Action, AddHost, Rule};

    fn query(name: &str, qtype: RecordType) -> Vec<u8> {
        let mut m = Message::new(7, MessageType::Query, OpCode::Query);
        m.metadata.recursion_desired = true;
        m.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
        m.to_vec().unwrap()
    }

    fn policy() -> NetworkPolicy {
        NetworkPolicy {
            rules: vec![
                Rule::parse(Action::Allow, "allowed.test").unwrap(),
                Rule::parse(Action::Allow, "pinned.test").unwrap(),
            ],
            hosts: vec![AddHost::parse("pinned.test:127.0.0.1").unwrap()],
            passthrough: Vec::new(),
        }
    }

    #[test]
    fn only_a_name_no_rule_matches_is_held_for_the_gate() {
        let mut book = Book::default();
        let mut p = policy();
        p.rules
            .push(Rule::parse(Action::Deny, "denied.test").unwrap());
        let held = handle(&query("unlisted.test.", RecordType::A), &p, &mut book, true);
        assert!(matches!(held, Handling::Hold(ref n) if n.as_str() == "unlisted.test"));
        // Allowed and explicitly denied names are decided as without a gate.
        let allowed = handle(&query("allowed.test.", RecordType::A), &p, &mut book, true);
        assert!(matches!(allowed, Handling::Resolve(_)));
        let (reply, _) = reply_of(handle(
            &query("denied.test.", RecordType::A),
            &p,
            &mut book,
            true,
        ));
        assert_eq!(reply.metadata.response_code, ResponseCode::NXDomain);
        // Without holding, the unlisted name is refused.
        let (reply, _) = reply_of(handle(
            &query("unlisted.test.", RecordType::A),
            &p,
            &mut book,
            false,
        ));
        assert_eq!(reply.metadata.response_code, ResponseCode::NXDomain);
    }

    fn reply_of(h: Handling) -> (Message, NetEvent) {
        match h {
            Handling::Reply(bytes, ev) => (Message::from_vec(&bytes).unwrap(), ev),
            _ => panic!("expected an immediate reply"),
        }
    }

    #[test]
    fn denied_names_get_nxdomain_without_resolving() {
        let mut book = Book::default();
        for name in ["evil.test.", "allowed.test.evil.test.", "evilallowed.test."] {
            let (reply, ev) = reply_of(handle(
                &query(name, RecordType::A),
                &policy(),
                &mut book,
                false,
            ));
            assert_eq!(
                reply.metadata.response_code,
                ResponseCode::NXDomain,
                "{name}"
            );
            assert!(reply.answers.is_empty());
            assert_eq!(reply.metadata.id, 7);
            let NetEvent::Dns { verdict, .. } = ev else {
                panic!()
            };
            assert!(!verdict.allowed, "{name}");
        }
    }

    #[test]
    fn pinned_names_get_a_synthetic_address() {
        let mut book = Book::default();
        let (reply, ev) = reply_of(handle(
            &query("PINNED.test.", RecordType::A),
            &policy(),
            &mut book,
            false,
        ));
        assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
        let Some(RData::A(A(addr))) = reply.answers.first().map(|r| r.data.clone()) else {
            panic!("no A record: {reply:?}")
        };
        assert!(crate::addr::is_synthetic(addr));
        let entry = book.lookup(addr).unwrap();
        assert_eq!(entry.name.as_str(), "pinned.test");
        assert!(entry.pinned);
        let NetEvent::Dns {
            addresses, verdict, ..
        } = ev
        else {
            panic!()
        };
        assert!(verdict.allowed);
        assert_eq!(addresses, vec!["127.0.0.1".parse::<IpAddr>().unwrap()]);
    }

    #[test]
    fn allowed_names_are_resolved_and_aaaa_is_empty() {
        let mut book = Book::default();
        let pending = match handle(
            &query("allowed.test.", RecordType::A),
            &policy(),
            &mut book,
            false,
        ) {
            Handling::Resolve(p) => p,
            _ => panic!("an allowed name is resolved on the host"),
        };
        let (bytes, _) = answer(&pending, Ok(vec!["192.0.2.7".parse().unwrap()]), &mut book);
        let reply = Message::from_vec(&bytes).unwrap();
        assert_eq!(reply.answers.len(), 1);
        let (bytes, _) = answer(&pending, Err(ResolveFailure::NoSuchName), &mut book);
        let reply = Message::from_vec(&bytes).unwrap();
        assert_eq!(reply.metadata.response_code, ResponseCode::NXDomain);

        let (reply, _) = reply_of(handle(
            &query("allowed.test.", RecordType::AAAA),
            &policy(),
            &mut book,
            false,
        ));
        assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
        assert!(reply.answers.is_empty());
    }

    #[test]
    fn a_dot_inside_a_label_is_not_a_label_boundary() {
        let mut book = Book::default();
        let name = Name::from_labels(vec![b"allowed.test".to_vec(), b"evil".to_vec()]).unwrap();
        let mut m = Message::new(9, MessageType::Query, OpCode::Query);
        m.add_query(Query::query(name, RecordType::A));
        let (reply, ev) = reply_of(handle(&m.to_vec().unwrap(), &policy(), &mut book, false));
        assert_eq!(reply.metadata.response_code, ResponseCode::NXDomain);
        let NetEvent::Dns { name, .. } = ev else {
            panic!()
        };
        assert_eq!(name, "allowed\\.test.evil");
    }

    #[test]
    fn garbage_is_dropped() {
        let mut book = Book::default();
        assert!(matches!(
            handle(b"\x01\x02", &policy(), &mut book, false),
            Handling::Drop
        ));
    }
}
