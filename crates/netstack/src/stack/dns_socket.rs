//! The stack's DNS socket at the gateway: questions in, answers out. What to answer is
//! `crate::dns`; names that need the host's resolver wait in `pending_dns`.

use smoltcp::socket::udp;

use super::{HeldName, Stack};
use crate::dns::{self, Handling};
use crate::gate::{MAX_HELD_NAMES, MAX_QUERIES_PER_NAME};
use crate::resolve::Resolved;

impl Stack {
    pub(super) fn serve_dns(&mut self) {
        loop {
            let socket = self.sockets.get_mut::<udp::Socket>(self.dns_socket);
            let Ok((datagram, meta)) = socket.recv() else {
                return;
            };
            let datagram = datagram.to_vec();
            self.answer_dns(datagram, meta, self.gate.is_some());
        }
    }

    /// Answers one question; with `hold`, a name no rule allows goes to the gate.
    fn answer_dns(&mut self, datagram: Vec<u8>, meta: udp::UdpMetadata, hold: bool) {
        {
            let policy = self.policy.current();
            match dns::handle(&datagram, &policy, &mut self.book, hold) {
                Handling::Hold(name) => self.hold_name(name.to_string(), datagram, meta),
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

    /// Holds a question for `name` while the gate asks about it; the same name asked
    /// again (a retransmission, the AAAA twin) waits with it.
    fn hold_name(&mut self, name: String, datagram: Vec<u8>, meta: udp::UdpMetadata) {
        if let Some(held) = self.held_names.get_mut(&name) {
            if held.queries.len() < MAX_QUERIES_PER_NAME {
                held.queries.push((datagram, meta));
            }
            return;
        }
        let ticket = match &self.gate {
            Some(gate) if self.held_names.len() < MAX_HELD_NAMES => {
                let waker = std::sync::Arc::clone(&self.waker);
                let source = crate::gate::Source {
                    protocol: "udp",
                    port: meta.endpoint.port,
                };
                gate.ask(
                    &name,
                    None,
                    source,
                    std::sync::Arc::new(move || {
                        let _ = waker.wake();
                    }),
                )
            }
            _ => None,
        };
        match ticket {
            Some(ticket) => {
                self.held_names.insert(
                    name,
                    HeldName {
                        ticket,
                        queries: vec![(datagram, meta)],
                    },
                );
            }
            // Not held (below the threshold, or too many held): refused as usual.
            None => self.answer_dns(datagram, meta, false),
        }
    }

    /// Answers the questions of every held name that was decided, with the policy
    /// in force now (an approval added its rule before deciding).
    pub(super) fn release_held_names(&mut self) {
        let decided: Vec<String> = self
            .held_names
            .iter()
            .filter(|(_, held)| held.ticket.decided())
            .map(|(name, _)| name.clone())
            .collect();
        for name in decided {
            if let Some(held) = self.held_names.remove(&name) {
                for (datagram, meta) in held.queries {
                    self.answer_dns(datagram, meta, false);
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
