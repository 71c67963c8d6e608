//! Packets from the sandbox: what each one may do before the stack sees it. A TCP SYN
//! opens a flow (`connect.rs`); DNS to the mediator and packets of open flows go on to
//! the stack; other UDP, ICMP, IPv6, fragments and other protocols are refused and
//! recorded once per destination.

use std::net::{IpAddr, SocketAddrV4};
use std::time::SystemTime;

use smoltcp::wire::{IpProtocol, Ipv4Packet, TcpPacket, UdpPacket};

use super::flow::{Flow, FlowKey, FlowState};
use super::{MAX_REFUSED_SEEN, READ_BUDGET, Stack};
use crate::addr;
use crate::device::Packet;
use crate::error::Error;
use crate::event::{NetEvent, Verdict};

impl Stack {
    pub(super) fn read_tun(&mut self) -> Result<(), Error> {
        for _ in 0..READ_BUDGET {
            match self.device.read_packet().map_err(Error::ReadTun)? {
                Some(packet) => self.inspect(packet),
                None => {
                    self.tun_readable = false;
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Decides what happens to one packet before the stack sees it.
    fn inspect(&mut self, packet: Packet) {
        let bytes = packet.bytes();
        if bytes.first().map(|b| b >> 4) == Some(6) {
            // The sandbox has no IPv6 route; link-local chatter or a crafted packet.
            // The destination address is bytes 24..40 of the fixed header.
            // Multicast is the kernel's own neighbour discovery on the link, not a
            // program trying to get out; it could not leave anyway.
            if let Some(dst) = bytes.get(24..40).and_then(|b| <[u8; 16]>::try_from(b).ok()) {
                let dst = std::net::Ipv6Addr::from(dst);
                if !dst.is_multicast() {
                    self.refuse_once("ipv6", IpAddr::V6(dst), 0, "IPv6 is not mediated");
                }
            }
            return self.device.recycle(packet);
        }
        let Ok(ip) = Ipv4Packet::new_checked(bytes) else {
            return self.device.recycle(packet);
        };
        let dst = ip.dst_addr();
        if ip.more_frags() || ip.frag_offset() != 0 {
            // Nothing legitimate fragments at this MTU; never reassembled.
            self.refuse_once("ip", IpAddr::V4(dst), 0, "fragmented packet");
            return self.device.recycle(packet);
        }
        match ip.next_header() {
            IpProtocol::Tcp => {
                let Ok(tcp) = TcpPacket::new_checked(ip.payload()) else {
                    return self.device.recycle(packet);
                };
                if tcp.syn() && !tcp.ack() {
                    let key = FlowKey {
                        src: SocketAddrV4::new(ip.src_addr(), tcp.src_port()),
                        dst: SocketAddrV4::new(dst, tcp.dst_port()),
                    };
                    // A retransmitted SYN while the gate asks: the first one waits.
                    if self.held_syns.contains_key(&key) {
                        return self.device.recycle(packet);
                    }
                    match self.by_key.get(&key).and_then(|id| self.flows.get(id)) {
                        // A retransmitted SYN while we connect: the first one waits.
                        Some(Flow {
                            state: FlowState::Connecting { .. },
                            ..
                        }) => return self.device.recycle(packet),
                        Some(_) => {}
                        None => return self.new_connection(key, packet, true),
                    }
                }
                let mut packet = packet;
                self.device.bypass_incoming(&mut packet);
                self.device.enqueue(packet);
            }
            IpProtocol::Udp => {
                let port = UdpPacket::new_checked(ip.payload())
                    .map(|u| u.dst_port())
                    .unwrap_or(0);
                if !(dst == addr::GATEWAY && port == addr::DNS_PORT) {
                    self.refuse_once("udp", IpAddr::V4(dst), port, "only DNS to the mediator");
                }
                // The stack answers refused UDP with "port unreachable", so a client
                // fails at once instead of waiting.
                self.device.enqueue(packet);
            }
            IpProtocol::Icmp if dst == addr::GATEWAY => self.device.enqueue(packet),
            IpProtocol::Icmp => {
                self.refuse_once("icmp", IpAddr::V4(dst), 0, "ICMP is not mediated");
                self.device.recycle(packet);
            }
            _ => {
                self.refuse_once("ip", IpAddr::V4(dst), 0, "protocol not mediated");
                self.device.recycle(packet);
            }
        }
    }

    /// Records a refused packet the first time its destination is seen.
    fn refuse_once(&mut self, protocol: &'static str, address: IpAddr, port: u16, why: &str) {
        if self.refused_seen.len() >= MAX_REFUSED_SEEN
            || !self.refused_seen.insert((protocol, address, port))
        {
            return;
        }
        let id = self.next_flow_id();
        self.emit(NetEvent::Connect {
            id,
            time: SystemTime::now(),
            protocol,
            name: None,
            address,
            port,
            verdict: Verdict::deny(why),
        });
    }
}
