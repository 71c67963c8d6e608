//! A sandbox's TCP SYN: where the connection would really go, whether the policy allows
//! it, and the host's own connection to the destination that the SYN waits for.

use std::io;
use std::net::{IpAddr, SocketAddr, SocketAddrV4};
use std::os::fd::AsFd;
use std::time::{Duration, Instant, SystemTime};

use mio::Interest;
use mio::net::TcpStream;
use vg_policy::network::{Destination, HostName, NetworkPolicy};

use super::flow::{Flow, FlowKey, FlowState, SniCheck, Upstream, describe};
use super::{CONNECT_TIMEOUT, MAX_FLOWS, Stack, token};
use crate::addr;
use crate::budget;
use crate::device::Packet;
use crate::event::{NetEvent, Verdict, verdict};

impl Stack {
    /// Where a connection to `dst` would really go, and whether the policy allows it.
    fn decide(
        &self,
        policy: &NetworkPolicy,
        dst: SocketAddrV4,
    ) -> (Option<HostName>, IpAddr, Verdict) {
        let (ip, port) = (*dst.ip(), dst.port());
        if addr::is_link(ip) {
            return (
                None,
                IpAddr::V4(ip),
                Verdict::deny("the mediator's own address"),
            );
        }
        if !addr::is_synthetic(ip) {
            let dest = Destination {
                name: None,
                addr: IpAddr::V4(ip),
                pinned: false,
            };
            return (None, IpAddr::V4(ip), self.guarded(policy, &dest, port));
        }
        let Some(entry) = self.book.lookup(ip) else {
            return (
                None,
                IpAddr::V4(ip),
                Verdict::deny("address not handed out by our DNS"),
            );
        };
        let name = Some(entry.name.clone());
        let mut first_denial = None;
        for &real in &entry.addrs {
            let dest = Destination {
                name: Some(entry.name.clone()),
                addr: real,
                pinned: entry.pinned,
            };
            let d = self.guarded(policy, &dest, port);
            if d.allowed {
                return (name, real, d);
            }
            first_denial.get_or_insert((real, d));
        }
        match first_denial {
            Some((real, d)) => (name, real, d),
            None => (
                name,
                IpAddr::V4(ip),
                Verdict::deny("the name has no address"),
            ),
        }
    }

    /// The policy's decision, with this machine's own addresses closed too (see
    /// [`NetworkPolicy::decide_connect_from`]).
    fn guarded(&self, policy: &NetworkPolicy, dest: &Destination, port: u16) -> Verdict {
        verdict(policy.decide_connect_from(&self.host_addrs, dest, port))
    }

    /// A SYN: decide, and connect or refuse. With `ask`, a public address no rule
    /// allows is held for the approval gate first.
    pub(super) fn new_connection(&mut self, key: FlowKey, syn: Packet, ask: bool) {
        let policy = self.policy.current();
        let (host, real, mut verdict) = self.decide(&policy, key.dst);
        let name = host.as_ref().map(ToString::to_string);
        let syn = if ask && !verdict.allowed && name.is_none() {
            match self.hold_syn(&policy, key, real, syn) {
                Some(syn) => syn,
                None => return,
            }
        } else {
            syn
        };
        let dest = policy.destination(host.clone(), real);
        let scheme = policy.inspection(&dest, key.dst.port());
        if verdict.allowed && scheme.is_some() && self.interceptor.is_none() {
            // A method and path rule this session cannot enforce: never pass it through.
            verdict = Verdict::deny("inspection unavailable in this session");
        }
        if verdict.allowed && self.flows.len() >= MAX_FLOWS {
            verdict = Verdict::deny(format!("more than {MAX_FLOWS} connections open"));
        }
        let buffers = match verdict.allowed.then(|| self.budget.grant()) {
            Some(Some(each)) => each,
            Some(None) => {
                verdict = Verdict::deny(format!(
                    "connection buffers used up ({} MiB per session)",
                    budget::TOTAL >> 20
                ));
                0
            }
            None => 0,
        };
        let id = self.next_flow_id();
        let port = key.dst.port();
        self.emit(NetEvent::Connect {
            id,
            time: SystemTime::now(),
            protocol: "tcp",
            name: name.clone(),
            address: real,
            port,
            verdict: verdict.clone(),
        });
        if !verdict.allowed {
            // No socket listens for it: the stack answers with a reset.
            return self.device.enqueue(syn);
        }
        let remote = SocketAddr::new(real, port);
        let inspect = self.interceptor.as_ref().zip(scheme);
        let (stream, sni) = match inspect {
            Some((interceptor, scheme)) => {
                let conn = crate::intercept::Intercepted {
                    connection: id,
                    name: host,
                    addr: real,
                    port,
                    scheme,
                };
                (
                    inspector_pair(interceptor.as_ref(), conn, 2 * buffers)
                        .map(Upstream::Inspector),
                    None,
                )
            }
            // Passed through: a ClientHello must name the host it was allowed for.
            None => (
                TcpStream::connect(remote).map(|stream| {
                    budget::size_host_socket(stream.as_fd(), buffers == budget::FULL);
                    Upstream::Tcp(stream)
                }),
                host.map(|expect| SniCheck {
                    expect,
                    held: Vec::new(),
                }),
            ),
        };
        let mut stream = match stream {
            Ok(s) => s,
            Err(e) => {
                self.budget.release(buffers);
                return self.connect_failed(id, &key, name, remote, syn, &e);
            }
        };
        if let Err(e) = self.poll.registry().register(
            stream.source(),
            token(id),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            self.budget.release(buffers);
            return self.connect_failed(id, &key, name, remote, syn, &e);
        }
        self.by_key.insert(key, id);
        self.flows.insert(
            id,
            Flow {
                id,
                key,
                name,
                remote,
                stream,
                sni,
                unsent: Vec::new(),
                // A full-size read buffer per waiting SYN would be 64 KiB each.
                state: FlowState::Connecting {
                    syn: Some(syn.compact()),
                },
                buffers,
                started: Instant::now(),
                readable: false,
                writable: false,
                established: false,
                host_eof: false,
                sandbox_fin_passed: false,
                bypass: false,
                bytes_out: 0,
                bytes_in: 0,
                error: None,
            },
        );
    }

    /// Holds `syn` for the gate when its address is public, not this machine's, and
    /// refused only because no rule allows it; gives the SYN back when not held.
    fn hold_syn(
        &mut self,
        policy: &NetworkPolicy,
        key: FlowKey,
        real: IpAddr,
        syn: Packet,
    ) -> Option<Packet> {
        let port = key.dst.port();
        let dest = Destination {
            name: None,
            addr: real,
            pinned: false,
        };
        let unlisted = policy
            .decide_connect_from(&self.host_addrs, &dest, port)
            .reason
            == vg_policy::network::Reason::DefaultDeny;
        if !unlisted
            || addr::is_synthetic(*key.dst.ip())
            || vg_policy::network::is_special(real)
            || self.host_addrs.contains(real)
            || self.held_syns.len() >= crate::gate::MAX_HELD_SYNS
        {
            return Some(syn);
        }
        let Some(gate) = &self.gate else {
            return Some(syn);
        };
        let waker = std::sync::Arc::clone(&self.waker);
        let wake = std::sync::Arc::new(move || {
            let _ = waker.wake();
        });
        let source = crate::gate::Source {
            protocol: "tcp",
            port: key.src.port(),
        };
        match gate.ask(&real.to_string(), Some(port), source, wake) {
            Some(ticket) => {
                self.held_syns.insert(
                    key,
                    super::HeldSyn {
                        ticket,
                        syn: syn.compact(),
                    },
                );
                None
            }
            None => Some(syn),
        }
    }

    /// Decides again, with the policy in force now, each held SYN whose ticket was
    /// decided (an approval added its rule first); never asks twice.
    pub(super) fn release_held_syns(&mut self) {
        let decided: Vec<FlowKey> = self
            .held_syns
            .iter()
            .filter(|(_, held)| held.ticket.decided())
            .map(|(key, _)| *key)
            .collect();
        for key in decided {
            if let Some(held) = self.held_syns.remove(&key) {
                self.new_connection(key, held.syn, false);
            }
        }
    }

    fn connect_failed(
        &mut self,
        id: u64,
        key: &FlowKey,
        name: Option<String>,
        remote: SocketAddr,
        syn: Packet,
        error: &io::Error,
    ) {
        self.device.enqueue(syn);
        self.emit(NetEvent::Closed {
            id,
            time: SystemTime::now(),
            protocol: "tcp",
            name,
            address: remote.ip(),
            port: key.dst.port(),
            bytes_out: 0,
            bytes_in: 0,
            duration: Duration::ZERO,
            error: Some(describe(error)),
        });
    }

    pub(super) fn expire_connects(&mut self) {
        let late: Vec<u64> = self
            .flows
            .values()
            .filter(|f| {
                matches!(f.state, FlowState::Connecting { .. })
                    && f.started.elapsed() > CONNECT_TIMEOUT
            })
            .map(|f| f.id)
            .collect();
        for id in late {
            if let Some(mut flow) = self.flows.remove(&id) {
                flow.error = Some("connection timed out".into());
                self.end_flow(flow);
            }
        }
    }
}

/// A socket pair whose far end goes to the inspector: the flow relays to our end.
fn inspector_pair(
    interceptor: &dyn crate::intercept::Interceptor,
    conn: crate::intercept::Intercepted,
    size: usize,
) -> io::Result<mio::net::UnixStream> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    // Socket buffers of twice the flow's stack buffers (1 MiB for the first
    // connections, 64 KiB once the session's budget is tight): fewer wake-ups of both
    // threads per megabyte on a bulk download, and bounded kernel memory however many
    // connections the sandbox opens (best effort; the kernel caps them).
    for end in [&ours, &theirs] {
        let sock = socket2::SockRef::from(end);
        let _ = sock.set_send_buffer_size(size);
        let _ = sock.set_recv_buffer_size(size);
    }
    ours.set_nonblocking(true)?;
    interceptor.intercept(conn, theirs);
    Ok(mio::net::UnixStream::from_std(ours))
}
