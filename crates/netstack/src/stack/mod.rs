//! The mediator's loop: read packets from the sandbox, decide, relay, record.
//!
//! `mod.rs` holds the mediator's thread and the poll loop; `inspect.rs` what each packet
//! from the sandbox may do; `connect.rs` the decision on a TCP SYN and the host's
//! connection; `relay.rs` a flow's pump; `flow.rs` a flow and its end; `dns_socket.rs`
//! the DNS socket.

mod connect;
mod dns_socket;
mod flow;
pub(crate) mod fuzz;
mod inspect;
mod pool;
mod relay;

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::socket::udp;
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr, IpListenEndpoint};
use vg_policy::network::OwnAddresses;

use self::flow::{Flow, FlowKey};
use self::pool::SocketPool;
use crate::PolicyHandle;
use crate::addr;
use crate::book::Book;
use crate::budget::{self, BufferBudget};
use crate::device::TunDevice;
use crate::dns::Pending;
use crate::error::Error;
use crate::event::NetEvent;
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
    thread: Option<JoinHandle<Result<(), Error>>>,
}

impl Mediator {
    /// Starts serving the sandbox's TUN descriptor `tun` (non-blocking). Events are
    /// passed to `events` on the mediator's thread, in order.
    pub fn start(
        tun: OwnedFd,
        policy: PolicyHandle,
        events: Box<dyn FnMut(NetEvent) + Send>,
    ) -> Result<Self, Error> {
        Self::start_with_gate(tun, policy, events, None, None)
    }

    /// [`Mediator::start`], holding the DNS questions for names no rule allows for
    /// `gate` to decide (the approval gate, `--ask`), and handing connections to hosts
    /// a method and path rule names to `interceptor` (HTTP inspection).
    pub fn start_with_gate(
        tun: OwnedFd,
        policy: PolicyHandle,
        events: Box<dyn FnMut(NetEvent) + Send>,
        gate: Option<Box<dyn crate::gate::DestinationGate>>,
        interceptor: Option<Arc<dyn crate::intercept::Interceptor>>,
    ) -> Result<Self, Error> {
        let poll = Poll::new().map_err(Error::Poller)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(Error::Waker)?);
        let stop = Arc::new(AtomicBool::new(false));
        let mut stack = Stack::new(poll, File::from(tun), policy, events, Arc::clone(&waker))?;
        stack.gate = gate;
        stack.interceptor = interceptor;
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("vg-network".into())
            .spawn(move || stack.run(&flag))
            .map_err(Error::Thread)?;
        Ok(Self {
            waker,
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the mediator: open connections are cut and recorded as ended.
    pub fn stop(mut self) -> Result<(), Error> {
        self.finish()
    }

    fn finish(&mut self) -> Result<(), Error> {
        self.stop.store(true, Ordering::Release);
        let _ = self.waker.wake();
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(Error::Panicked),
            None => Ok(()),
        }
    }
}

impl Drop for Mediator {
    fn drop(&mut self) {
        let _ = self.finish();
    }
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
    retired: Vec<(SocketHandle, usize, crate::bypass::Ends)>,
    /// Closed sockets of ended flows, their rings reused by the next flows.
    spare_sockets: SocketPool,
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
    /// The approval gate for names no rule allows, with `--ask`.
    gate: Option<Box<dyn crate::gate::DestinationGate>>,
    /// The HTTP inspector, for hosts a method and path rule names.
    interceptor: Option<std::sync::Arc<dyn crate::intercept::Interceptor>>,
    /// Questions held for it, by name.
    held_names: HashMap<String, HeldName>,
    /// SYNs to addresses held for it, by connection.
    held_syns: HashMap<FlowKey, HeldSyn>,
    waker: Arc<Waker>,
}

/// A connection's SYN held by the gate.
struct HeldSyn {
    ticket: Box<dyn crate::gate::DestinationTicket>,
    syn: crate::device::Packet,
}

/// A name held by the gate, with the questions waiting for it.
struct HeldName {
    ticket: Box<dyn crate::gate::DestinationTicket>,
    queries: Vec<(Vec<u8>, udp::UdpMetadata)>,
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
    ) -> Result<Self, Error> {
        let mut device = TunDevice::new(tun, addr::MTU).map_err(Error::Thread)?;
        poll.registry()
            .register(
                &mut SourceFd(&device.file().as_raw_fd()),
                TUN,
                Interest::READABLE,
            )
            .map_err(Error::WatchTun)?;
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
        .map_err(Error::DnsSocket)?;
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
            spare_sockets: SocketPool::default(),
            budget: BufferBudget::new(budget::TOTAL),
            book: Book::default(),
            policy,
            events,
            resolver: Resolver::new(done, Arc::clone(&waker)),
            resolved,
            pending_dns: HashMap::new(),
            refused_seen: HashSet::new(),
            host_addrs: crate::host::addresses(),
            tun_readable: true,
            gate: None,
            interceptor: None,
            held_names: HashMap::new(),
            held_syns: HashMap::new(),
            waker,
        })
    }

    fn run(mut self, stop: &AtomicBool) -> Result<(), Error> {
        let mut events = Events::with_capacity(256);
        while !stop.load(Ordering::Acquire) {
            let timeout = if self.tun_readable {
                Some(Duration::ZERO)
            } else {
                let stack = self
                    .iface
                    .poll_delay(now(), &self.sockets)
                    .map(|d| Duration::from_micros(d.total_micros()));
                // The bypassed connections' timers.
                let resend = self
                    .device
                    .bypass_deadline()
                    .map(|d| d.saturating_duration_since(std::time::Instant::now()));
                let stack = match (stack, resend) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                // Wake at least every second to expire slow connects.
                Some(stack.map_or(Duration::from_secs(1), |d| d.min(Duration::from_secs(1))))
            };
            match self.poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::Wait(e)),
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
            self.release_held_names();
            self.release_held_syns();
            self.read_tun()?;
            self.device.bypass_check(std::time::Instant::now());
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
            self.device.flush();
            for (handle, buffers, ends) in self.retired.drain(..) {
                self.device.bypass_remove(ends);
                let gone = self.sockets.remove(handle);
                self.budget.release(buffers);
                if let smoltcp::socket::Socket::Tcp(socket) = gone {
                    self.spare_sockets.put(buffers, socket);
                }
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

    fn next_flow_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}
