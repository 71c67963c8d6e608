//! The mediator's packet path without a TUN device or a thread, for the fuzz targets
//! (`crate::fuzzing`): a datagram socket pair stands for the TUN descriptor.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixDatagram;
use std::sync::Arc;
use std::sync::mpsc;

use mio::{Poll, Waker};
use vg_policy::network::NetworkPolicy;

use super::{Stack, WAKER};
use crate::PolicyHandle;
use crate::error::Error;
use crate::event::NetEvent;

/// Feeds `packets`, each as read from the TUN descriptor (a `virtio_net_hdr`, then an
/// IP packet), one at a time to a mediator's stack: inspected, then handed to smoltcp
/// and its DNS socket. Returns the events recorded and what the stack sent back.
///
/// Nothing leaves the machine only if `policy` allows no destination: an allowed SYN
/// would be connected for real, and an allowed name looked up.
pub fn feed_packets(
    policy: NetworkPolicy,
    packets: &[&[u8]],
) -> Result<(Vec<NetEvent>, Vec<Vec<u8>>), Error> {
    let (sandbox, tun) = UnixDatagram::pair().map_err(Error::Poller)?;
    sandbox.set_nonblocking(true).map_err(Error::Poller)?;
    tun.set_nonblocking(true).map_err(Error::Poller)?;
    let poll = Poll::new().map_err(Error::Poller)?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(Error::Waker)?);
    let (sent, events) = mpsc::channel();
    let record = Box::new(move |event| {
        let _ = sent.send(event);
    });
    let tun = File::from(OwnedFd::from(tun));
    let mut stack = Stack::new(poll, tun, PolicyHandle::new(policy), record, waker)?;
    let mut replies = Vec::new();
    let mut buf = vec![0; 70_000];
    for packet in packets {
        // A datagram of zero bytes reads as the end of the stream; a TUN never has one.
        if packet.is_empty() || sandbox.send(packet).is_err() {
            continue;
        }
        stack.tun_readable = true;
        stack.read_tun()?;
        stack.advance();
        while let Ok(n) = sandbox.recv(&mut buf) {
            replies.push(buf.get(..n).unwrap_or_default().to_vec());
        }
    }
    stack.shutdown();
    Ok((events.try_iter().collect(), replies))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use hickory_proto::op::{Message, MessageType, OpCode, Query};
    use hickory_proto::rr::{Name, RData, RecordType};
    use vg_policy::network::{Action, AddHost, Rule};

    use super::*;
    use crate::addr;

    /// `virtio_net_hdr`, IPv4 and UDP headers (checksums left to the receiver, which
    /// the stack does not check: see `device.rs`), then `payload`.
    fn udp_packet(dst: [u8; 4], port: u16, payload: &[u8]) -> Vec<u8> {
        let total = u16::try_from(20 + 8 + payload.len()).unwrap();
        let mut p = vec![0; 10];
        p.extend_from_slice(&[0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 17, 0, 0]);
        p[12..14].copy_from_slice(&total.to_be_bytes());
        p.extend_from_slice(&addr::SANDBOX.octets());
        p.extend_from_slice(&dst);
        p.extend_from_slice(&5353u16.to_be_bytes());
        p.extend_from_slice(&port.to_be_bytes());
        p.extend_from_slice(&u16::try_from(8 + payload.len()).unwrap().to_be_bytes());
        p.extend_from_slice(&[0, 0]);
        p.extend_from_slice(payload);
        p
    }

    #[test]
    fn a_dns_query_is_answered_and_other_udp_refused_without_a_tun() {
        let policy = NetworkPolicy::new(
            vec![Rule::parse(Action::Allow, "pinned.test").unwrap()],
            vec![AddHost::parse("pinned.test:127.0.0.1").unwrap()],
        );
        let mut query = Message::new(9, MessageType::Query, OpCode::Query);
        query.add_query(Query::query(
            Name::from_ascii("pinned.test").unwrap(),
            RecordType::A,
        ));
        let query = query.to_vec().unwrap();
        let dns = udp_packet(addr::GATEWAY.octets(), addr::DNS_PORT, &query);
        let other = udp_packet([8, 8, 8, 8], 53, &query);
        let (events, replies) = feed_packets(policy, &[&dns, b"short", &other]).unwrap();

        assert!(matches!(&events[0], NetEvent::Dns { name, verdict, .. }
            if name == "pinned.test" && verdict.allowed));
        assert!(
            matches!(&events[1], NetEvent::Connect { protocol: "udp", port: 53, verdict, .. }
            if !verdict.allowed)
        );
        // The answer, after the virtio, IPv4 and UDP headers: a synthetic address.
        let answer = replies
            .iter()
            .find_map(|r| Message::from_vec(r.get(38..)?).ok())
            .expect("a DNS reply");
        assert_eq!(answer.metadata.id, 9);
        let RData::A(a) = answer.answers[0].data else {
            panic!("not an A record")
        };
        assert!(addr::is_synthetic(a.0));
    }
}
