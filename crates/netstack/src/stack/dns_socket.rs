//! The stack's DNS socket at the gateway: questions in, answers out. What to answer is
//! `crate::dns`; names that need the host's resolver wait in `pending_dns`.

use smoltcp::socket::udp;

use super::Stack;
use crate::dns::{self, Handling};
use crate::resolve::Resolved;

impl Stack {
    pub(super) fn serve_dns(&mut self) {
        loop {
            let socket = self.sockets.get_mut::<udp::Socket>(self.dns_socket);
            let Ok((datagram, meta)) = socket.recv() else {
                return;
            };
            let datagram = datagram.to_vec();
            let policy = self.policy.current();
            match dns::handle(&datagram, &policy, &mut self.book) {
                Handling::Drop => {}
                Handling::Reply(reply, event) => {
                    self.reply_dns(&reply, meta);
                    self.emit(event);
                }
                Handling::Resolve(pending) => {
                    let id = self.next_flow_id();
                    let name = pending.name.to_string();
                    if self.resolver.start(id, name) {
                        self.pending_dns.insert(id, (pending, meta));
                    } else {
                        let (reply, event) =
                            dns::answer(&pending, Err(dns::ResolveFailure::Other), &mut self.book);
                        self.reply_dns(&reply, meta);
                        self.emit(event);
                    }
                }
            }
        }
    }

    fn reply_dns(&mut self, reply: &[u8], meta: udp::UdpMetadata) {
        if reply.is_empty() {
            return;
        }
        let socket = self.sockets.get_mut::<udp::Socket>(self.dns_socket);
        // A full send queue drops the reply; the client asks again.
        let _ = socket.send_slice(reply, meta.endpoint);
    }

    pub(super) fn drain_resolved(&mut self) {
        while let Ok(Resolved { id, result }) = self.resolved.try_recv() {
            if let Some((pending, meta)) = self.pending_dns.remove(&id) {
                let (reply, event) = dns::answer(&pending, result, &mut self.book);
                self.reply_dns(&reply, meta);
                self.emit(event);
            }
        }
    }
}
