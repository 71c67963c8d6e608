//! The mediator's loop: read packets from the sandbox, decide, relay, record.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::socket::{tcp, udp};
use smoltcp::wire::{
    HardwareAddress, IpAddress, IpCidr, IpListenEndpoint, IpProtocol, Ipv4Packet, TcpPacket,
    UdpPacket,
};
use vg_policy::network::{Destination, NetworkPolicy, OwnAddresses};

use crate::PolicyHandle;
use crate::addr;
use crate::book::Book;
use crate::budget::{self, BufferBudget};
use crate::device::{Packet, TunDevice};
use crate::dns::{self, Handling, Pending};
use crate::event::{NetEvent, Verdict, verdict};
use crate::resolve::{Resolved, Resolver};

const TUN: Token = Token(0);
const WAKER: Token = Token(1);
/// Flow `id` is registered as `Token(FIRST_FLOW + id)`.
const FIRST_FLOW: usize = 2;

/// How long the host's connection to a destination may take before the sandbox's
/// connection is refused.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// Packets read from the TUN interface before the stack runs again.
const READ_BUDGET: usize = 128;
/// Connections open at once. Beyond this, new ones are refused (and recorded), so a
/// sandbox cannot make the mediator hold unbounded sockets and buffers.
const MAX_FLOWS: usize = 256;
/// Distinct refused non-TCP destinations remembered for recording each only once.
const MAX_REFUSED_SEEN: usize = 4096;

/// A running mediator (one thread). Dropping it without [`Mediator::stop`] stops it too.
pub struct Mediator {
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl Mediator {
    /// Starts serving the sandbox's TUN descriptor `tun` (non-blocking). Events are
    /// passed to `events` on the mediator's thread, in order.
    pub fn start(
        tun: OwnedFd,
        policy: PolicyHandle,
        events: Box<dyn FnMut(NetEvent) + Send>,
    ) -> io::Result<Self> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let stop = Arc::new(AtomicBool::new(false));
        let stack = Stack::new(poll, File::from(tun), policy, events, Arc::clone(&waker))?;
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("vg-network".into())
            .spawn(move || stack.run(&flag))?;
        Ok(Self {
            waker,
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the mediator: open connections are cut and recorded as ended.
    pub fn stop(mut self) -> io::Result<()> {
        self.finish()
    }

    fn finish(&mut self) -> io::Result<()> {
        self.stop.store(true, Ordering::Release);
        let _ = self.waker.wake();
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(io::Error::other("the network mediator panicked")),
            None => Ok(()),
        }
    }
}

impl Drop for Mediator {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// A TCP connection from the sandbox: source and destination as the sandbox sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FlowKey {
    src: SocketAddrV4,
    dst: SocketAddrV4,
}

enum FlowState {
    /// The host's connection to the destination is under way; the sandbox's SYN waits.
    Connecting { syn: Option<Packet> },
    /// Relaying between the stack's socket and the host's connection.
    Open { socket: SocketHandle },
}

struct Flow {
    id: u64,
    key: FlowKey,
    name: Option<String>,
    remote: SocketAddr,
    stream: TcpStream,
    state: FlowState,
    /// The stack socket's buffer size each way, granted by [`Stack::budget`].
    buffers: usize,
    started: Instant,
    readable: bool,
    writable: bool,
    established: bool,
    host_eof: bool,
    sandbox_fin_passed: bool,
    bytes_out: u64,
    bytes_in: u64,
    error: Option<String>,
}

struct Stack {
    poll: Poll,
    device: TunDevice,
    iface: Interface,
    sockets: SocketSet<'static>,
    dns_socket: SocketHandle,
    flows: HashMap<u64, Flow>,
    by_key: HashMap<FlowKey, u64>,
    next_id: u64,
    /// Sockets of ended flows, removed after the stack had a chance to send their
    /// last segment (a FIN's ACK or a reset), with their buffer grant.
    retired: Vec<(SocketHandle, usize)>,
    /// What the open flows' stack buffers may take together.
    budget: BufferBudget,
    book: Book,
    policy: PolicyHandle,
    events: Box<dyn FnMut(NetEvent) + Send>,
    resolver: Resolver,
    resolved: Receiver<Resolved>,
    pending_dns: HashMap<u64, (Pending, udp::UdpMetadata)>,
    refused_seen: HashSet<(&'static str, IpAddr, u16)>,
    /// This machine's own addresses (see [`Stack::guarded`]).
    host_addrs: OwnAddresses,
    tun_readable: bool,
}

fn now() -> smoltcp::time::Instant {
    smoltcp::time::Instant::now()
}

fn token(id: u64) -> Token {
    Token(FIRST_FLOW.saturating_add(usize::try_from(id).unwrap_or(usize::MAX - FIRST_FLOW)))
}

impl Stack {
    fn new(
        poll: Poll,
        tun: File,
        policy: PolicyHandle,
        events: Box<dyn FnMut(NetEvent) + Send>,
        waker: Arc<Waker>,
    ) -> io::Result<Self> {
        let mut device = TunDevice::new(tun, addr::MTU);
        poll.registry().register(
            &mut SourceFd(&device.file().as_raw_fd()),
            TUN,
            Interest::READABLE,
        )?;
        let mut iface = Interface::new(Config::new(HardwareAddress::Ip), &mut device, now());
        iface.update_ip_addrs(|addrs| {
            let _ = addrs.push(IpCidr::new(
                IpAddress::Ipv4(addr::GATEWAY),
                addr::PREFIX_LEN,
            ));
        });
        // Accept packets for every destination: each is a connection to mediate.
        iface.set_any_ip(true);
        let mut sockets = SocketSet::new(Vec::new());
        let mut dns = udp::Socket::new(
            udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 64], vec![0; 64 * 1024]),
            udp::PacketBuffer::new(vec![udp::PacketMetadata::EMPTY; 64], vec![0; 64 * 1024]),
        );
        dns.bind(IpListenEndpoint {
            addr: Some(IpAddress::Ipv4(addr::GATEWAY)),
            port: addr::DNS_PORT,
        })
        .map_err(|e| io::Error::other(format!("DNS socket: {e}")))?;
        let dns_socket = sockets.add(dns);
        let (done, resolved) = mpsc::channel();
        Ok(Self {
            poll,
            device,
            iface,
            sockets,
            dns_socket,
            flows: HashMap::new(),
            by_key: HashMap::new(),
            next_id: 1,
            retired: Vec::new(),
            budget: BufferBudget::new(budget::TOTAL),
            book: Book::default(),
            policy,
            events,
            resolver: Resolver::new(done, waker),
            resolved,
            pending_dns: HashMap::new(),
            refused_seen: HashSet::new(),
            host_addrs: crate::host::addresses(),
            tun_readable: true,
        })
    }

    fn run(mut self, stop: &AtomicBool) -> io::Result<()> {
        let mut events = Events::with_capacity(256);
        while !stop.load(Ordering::Acquire) {
            let timeout = if self.tun_readable {
                Some(Duration::ZERO)
            } else {
                let stack = self
                    .iface
                    .poll_delay(now(), &self.sockets)
                    .map(|d| Duration::from_micros(d.total_micros()));
                // Wake at least every second to expire slow connects.
                Some(stack.map_or(Duration::from_secs(1), |d| d.min(Duration::from_secs(1))))
            };
            match self.poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            for event in &events {
                match event.token() {
                    TUN => self.tun_readable = true,
                    WAKER => {}
                    Token(t) => {
                        let id = u64::try_from(t - FIRST_FLOW).unwrap_or(u64::MAX);
                        if let Some(flow) = self.flows.get_mut(&id) {
                            if event.is_readable() || event.is_read_closed() || event.is_error() {
                                flow.readable = true;
                            }
                            if event.is_writable() || event.is_write_closed() || event.is_error() {
                                flow.writable = true;
                            }
                        }
                    }
                }
            }
            self.drain_resolved();
            self.read_tun()?;
            self.advance();
            self.expire_connects();
        }
        self.shutdown();
        Ok(())
    }

    /// Runs the stack and the relays until neither has anything more to do now.
    fn advance(&mut self) {
        loop {
            self.iface.poll(now(), &mut self.device, &mut self.sockets);
            for (handle, buffers) in self.retired.drain(..) {
                self.sockets.remove(handle);
                self.budget.release(buffers);
            }
            self.serve_dns();
            if !self.pump_flows() {
                break;
            }
        }
    }

    fn emit(&mut self, event: NetEvent) {
        (self.events)(event);
    }

    // -----------------------------------------------------------------------------
    // Packets from the sandbox.

    fn read_tun(&mut self) -> io::Result<()> {
        for _ in 0..READ_BUDGET {
            match self.device.read_packet()? {
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
                    match self.by_key.get(&key).and_then(|id| self.flows.get(id)) {
                        // A retransmitted SYN while we connect: the first one waits.
                        Some(Flow {
                            state: FlowState::Connecting { .. },
                            ..
                        }) => return self.device.recycle(packet),
                        Some(_) => {}
                        None => return self.new_connection(key, packet),
                    }
                }
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

    fn next_flow_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Where a connection to `dst` would really go, and whether the policy allows it.
    fn decide(
        &self,
        policy: &NetworkPolicy,
        dst: SocketAddrV4,
    ) -> (Option<String>, IpAddr, Verdict) {
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
        let name = Some(entry.name.to_string());
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

    fn new_connection(&mut self, key: FlowKey, syn: Packet) {
        let policy = self.policy.current();
        let (name, real, mut verdict) = self.decide(&policy, key.dst);
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
        let mut stream = match TcpStream::connect(remote) {
            Ok(s) => s,
            Err(e) => {
                self.budget.release(buffers);
                return self.connect_failed(id, &key, name, remote, syn, &e);
            }
        };
        if let Err(e) = self.poll.registry().register(
            &mut stream,
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
                bytes_out: 0,
                bytes_in: 0,
                error: None,
            },
        );
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

    fn expire_connects(&mut self) {
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

    // -----------------------------------------------------------------------------
    // DNS.

    fn serve_dns(&mut self) {
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

    fn drain_resolved(&mut self) {
        while let Ok(Resolved { id, result }) = self.resolved.try_recv() {
            if let Some((pending, meta)) = self.pending_dns.remove(&id) {
                let (reply, event) = dns::answer(&pending, result, &mut self.book);
                self.reply_dns(&reply, meta);
                self.emit(event);
            }
        }
    }

    // -----------------------------------------------------------------------------
    // Relaying.

    /// Moves bytes for every flow; true if the stack has new work (data or state).
    fn pump_flows(&mut self) -> bool {
        let ids: Vec<u64> = self.flows.keys().copied().collect();
        let mut progressed = false;
        for id in ids {
            let Some(mut flow) = self.flows.remove(&id) else {
                continue;
            };
            let (keep, moved) = match flow.state {
                FlowState::Connecting { .. } => self.pump_connecting(&mut flow),
                FlowState::Open { socket } => self.pump_open(&mut flow, socket),
            };
            progressed |= moved;
            if keep {
                self.flows.insert(id, flow);
            } else {
                self.end_flow(flow);
            }
        }
        progressed
    }

    /// Checks whether the host's connection completed. Returns (keep, progressed).
    fn pump_connecting(&mut self, flow: &mut Flow) -> (bool, bool) {
        if !flow.writable {
            return (true, false);
        }
        match flow.stream.take_error() {
            Ok(Some(e)) | Err(e) => {
                flow.error = Some(describe(&e));
                return (false, true);
            }
            Ok(None) => {}
        }
        match flow.stream.peer_addr() {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                flow.writable = false;
                return (true, false);
            }
            Err(e) => {
                flow.error = Some(describe(&e));
                return (false, true);
            }
        }
        let _ = flow.stream.set_nodelay(true);
        let mut socket = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; flow.buffers]),
            tcp::SocketBuffer::new(vec![0; flow.buffers]),
        );
        socket.set_nagle_enabled(false);
        socket.set_ack_delay(None);
        let listen = IpListenEndpoint {
            addr: Some(IpAddress::Ipv4(*flow.key.dst.ip())),
            port: flow.key.dst.port(),
        };
        if let Err(e) = socket.listen(listen) {
            flow.error = Some(format!("cannot accept the connection: {e}"));
            return (false, true);
        }
        let handle = self.sockets.add(socket);
        if let FlowState::Connecting { syn: Some(syn) } =
            std::mem::replace(&mut flow.state, FlowState::Open { socket: handle })
        {
            // The SYN that waited is what the new socket accepts.
            self.device.enqueue(syn);
        }
        (true, true)
    }

    fn pump_open(&mut self, flow: &mut Flow, handle: SocketHandle) -> (bool, bool) {
        let socket = self.sockets.get_mut::<tcp::Socket>(handle);
        let mut progressed = false;
        // The stack has run since the waiting SYN was fed to this socket. Back in (or
        // still in) `Listen` means the sandbox reset the half-open connection (a
        // connect abandoned or timed out): a listening socket would take the next
        // SYN to this address from anyone, so the flow ends here.
        if socket.state() == tcp::State::Listen {
            flow.error = Some("abandoned by the sandbox before it was established".into());
            return (false, true);
        }
        // Belt and braces: the connection must be the one this flow was decided for.
        if socket.remote_endpoint().is_some_and(|r| {
            r.addr != IpAddress::Ipv4(*flow.key.src.ip()) || r.port != flow.key.src.port()
        }) {
            flow.error = Some("answered a different connection; cut".into());
            socket.abort();
            return (false, true);
        }
        if socket.state() == tcp::State::Established {
            flow.established = true;
        }
        // Sandbox → destination.
        while flow.writable && socket.can_recv() {
            let stream = &flow.stream;
            match transfer(socket.recv(|buf| counted((&*stream).write(buf)))) {
                Transfer::Moved(n) => {
                    flow.bytes_out += n as u64;
                    progressed |= n > 0;
                }
                // A write of nothing: the socket takes no more for now.
                Transfer::End | Transfer::Blocked => flow.writable = false,
                Transfer::Failed(e) => {
                    flow.error = Some(describe(&e));
                    socket.abort();
                    return (false, true);
                }
                Transfer::Stopped => break,
            }
        }
        // The sandbox closed its side and everything it sent was passed on.
        let sandbox_done = matches!(
            socket.state(),
            tcp::State::CloseWait
                | tcp::State::LastAck
                | tcp::State::Closing
                | tcp::State::TimeWait
        );
        if flow.established && sandbox_done && !socket.can_recv() && !flow.sandbox_fin_passed {
            let _ = flow.stream.shutdown(Shutdown::Write);
            flow.sandbox_fin_passed = true;
        }
        // Destination → sandbox.
        while flow.readable && !flow.host_eof && socket.can_send() {
            let stream = &flow.stream;
            match transfer(socket.send(|buf| counted((&*stream).read(buf)))) {
                Transfer::Moved(n) => {
                    flow.bytes_in += n as u64;
                    progressed |= n > 0;
                }
                Transfer::End => {
                    flow.host_eof = true;
                    socket.close();
                    progressed = true;
                }
                Transfer::Blocked => flow.readable = false,
                Transfer::Failed(e) => {
                    flow.error = Some(describe(&e));
                    socket.abort();
                    return (false, true);
                }
                Transfer::Stopped => break,
            }
        }
        match socket.state() {
            // Data the sandbox sent before closing is passed on before the flow ends
            // (the destination may be slow to take it).
            tcp::State::TimeWait | tcp::State::Closed if socket.can_recv() => (true, progressed),
            tcp::State::TimeWait => (false, progressed),
            // Reset by the sandbox, or never got past the handshake.
            tcp::State::Closed => {
                if !flow.host_eof && !flow.sandbox_fin_passed && flow.error.is_none() {
                    flow.error = Some(if flow.established {
                        "reset by the sandbox".into()
                    } else {
                        "handshake not completed".into()
                    });
                }
                (false, progressed)
            }
            _ => (true, progressed),
        }
    }

    /// Records the end of `flow` and lets go of its resources.
    fn end_flow(&mut self, mut flow: Flow) {
        self.by_key.remove(&flow.key);
        let _ = self.poll.registry().deregister(&mut flow.stream);
        match std::mem::replace(&mut flow.state, FlowState::Connecting { syn: None }) {
            FlowState::Connecting { syn: Some(syn) } => {
                // Never connected: refuse the waiting SYN with a reset.
                self.device.enqueue(syn);
                self.budget.release(flow.buffers);
            }
            FlowState::Connecting { syn: None } => self.budget.release(flow.buffers),
            FlowState::Open { socket } => {
                let s = self.sockets.get_mut::<tcp::Socket>(socket);
                if s.state() == tcp::State::Listen {
                    // Nothing to send, and it must not take another SYN meanwhile.
                    self.sockets.remove(socket);
                    self.budget.release(flow.buffers);
                } else {
                    if flow.error.is_some() && s.is_open() {
                        s.abort();
                    }
                    self.retired.push((socket, flow.buffers));
                }
                // A reset from the sandbox reaches the destination as a reset, not as
                // an orderly close that would make a cut upload look complete.
                if flow.error.is_some() && !flow.sandbox_fin_passed {
                    let _ = socket2::SockRef::from(&flow.stream).set_linger(Some(Duration::ZERO));
                }
            }
        }
        self.emit(NetEvent::Closed {
            id: flow.id,
            time: SystemTime::now(),
            protocol: "tcp",
            name: flow.name,
            address: flow.remote.ip(),
            port: flow.remote.port(),
            bytes_out: flow.bytes_out,
            bytes_in: flow.bytes_in,
            duration: flow.started.elapsed(),
            error: flow.error,
        });
    }

    /// The session is over: record every open connection as cut.
    fn shutdown(&mut self) {
        let flows: Vec<Flow> = self.flows.drain().map(|(_, f)| f).collect();
        for mut flow in flows {
            if flow.error.is_none() && !(flow.host_eof && flow.sandbox_fin_passed) {
                flow.error = Some("session ended".into());
            }
            self.end_flow(flow);
        }
        for (_, (pending, _)) in self.pending_dns.drain().collect::<Vec<_>>() {
            let (_, event) = dns::answer(&pending, Err(dns::ResolveFailure::Other), &mut self.book);
            self.emit(event);
        }
    }
}

/// What one move of bytes between a stack socket and a host socket did.
enum Transfer {
    /// This many bytes (0 after an interrupted call: try again).
    Moved(usize),
    /// The host socket read end-of-file or wrote nothing.
    End,
    /// The host socket would block: wait for its readiness.
    Blocked,
    Failed(io::Error),
    /// The stack socket cannot take or give bytes in its state.
    Stopped,
}

/// For smoltcp's `send`/`recv` closures: the byte count they need, and the result.
fn counted(r: io::Result<usize>) -> (usize, io::Result<usize>) {
    match r {
        Ok(n) => (n, Ok(n)),
        Err(e) => (0, Err(e)),
    }
}

fn transfer<E>(r: Result<io::Result<usize>, E>) -> Transfer {
    match r {
        Ok(Ok(0)) => Transfer::End,
        Ok(Ok(n)) => Transfer::Moved(n),
        Ok(Err(e)) if e.kind() == io::ErrorKind::WouldBlock => Transfer::Blocked,
        Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => Transfer::Moved(0),
        Ok(Err(e)) => Transfer::Failed(e),
        Err(_) => Transfer::Stopped,
    }
}

/// An error as a short phrase for the records.
fn describe(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused".into(),
        io::ErrorKind::ConnectionReset => "connection reset".into(),
        io::ErrorKind::TimedOut => "connection timed out".into(),
        _ => e.to_string(),
    }
}
