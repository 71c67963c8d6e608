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
