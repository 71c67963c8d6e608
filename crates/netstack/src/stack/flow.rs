//! A mediated TCP connection (a flow): its key, state and counters, and its end: the
//! record of how it ended and the release of its sockets and buffers.

use std::io;
use std::net::{SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant, SystemTime};

use mio::net::{TcpStream, UnixStream};
use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp;

use super::Stack;
use crate::device::Packet;
use crate::dns;
use crate::event::NetEvent;

/// A TCP connection from the sandbox: source and destination as the sandbox sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct FlowKey {
    pub(super) src: SocketAddrV4,
    pub(super) dst: SocketAddrV4,
}

impl FlowKey {
    /// The connection's key in the device's bypass table.
    pub(super) fn ends(&self) -> crate::bypass::Ends {
        (self.src, self.dst)
    }
}

pub(super) enum FlowState {
    /// The host's connection to the destination is under way; the sandbox's SYN waits.
    Connecting { syn: Option<Packet> },
    /// Relaying between the stack's socket and the host's connection.
    Open { socket: SocketHandle },
}

/// Where a flow's bytes go: the destination itself, or the HTTP inspector's end of a
/// socket pair (see [`crate::intercept`]).
pub(super) enum Upstream {
    Tcp(TcpStream),
    Inspector(UnixStream),
}

impl Upstream {
    pub(super) fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Self::Tcp(s) => s,
            Self::Inspector(s) => s,
        }
    }

    pub(super) fn take_error(&self) -> io::Result<Option<io::Error>> {
        match self {
            Self::Tcp(s) => s.take_error(),
            Self::Inspector(s) => s.take_error(),
        }
    }

    /// `Ok` once connected (`NotConnected` while a TCP connect is under way).
    pub(super) fn connected(&self) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.peer_addr().map(drop),
            Self::Inspector(_) => Ok(()),
        }
    }

    pub(super) fn set_nodelay(&self) {
        if let Self::Tcp(s) = self {
            let _ = s.set_nodelay(true);
        }
    }

    pub(super) fn shutdown_write(&self) {
        let _ = match self {
            Self::Tcp(s) => s.shutdown(std::net::Shutdown::Write),
            Self::Inspector(s) => s.shutdown(std::net::Shutdown::Write),
        };
    }

    /// An abortive close: the far end sees a reset (TCP) rather than an orderly end.
    pub(super) fn reset_on_close(&self) {
        if let Self::Tcp(s) = self {
            let _ = socket2::SockRef::from(s).set_linger(Some(Duration::ZERO));
        }
    }
}

impl io::Read for &Upstream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Upstream::Tcp(s) => (&*s).read(buf),
            Upstream::Inspector(s) => (&*s).read(buf),
        }
    }
}

impl io::Write for &Upstream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Upstream::Tcp(s) => (&*s).write(buf),
            Upstream::Inspector(s) => (&*s).write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A passed-through connection's first bytes, held until its ClientHello's server name
/// is known to be the name the connection was allowed for (see [`crate::sni`]).
pub(super) struct SniCheck {
    pub(super) expect: vg_policy::network::HostName,
    pub(super) held: Vec<u8>,
}

pub(super) struct Flow {
    pub(super) id: u64,
    pub(super) key: FlowKey,
    pub(super) name: Option<String>,
    pub(super) remote: SocketAddr,
    pub(super) stream: Upstream,
    /// Set until the ClientHello was checked.
    pub(super) sni: Option<SniCheck>,
    /// Bytes from the sandbox taken off its socket but not yet written on.
    pub(super) unsent: Vec<u8>,
    pub(super) state: FlowState,
    /// The stack socket's buffer size each way, granted by [`Stack::budget`].
    pub(super) buffers: usize,
    pub(super) started: Instant,
    pub(super) readable: bool,
    pub(super) writable: bool,
    pub(super) established: bool,
    pub(super) host_eof: bool,
    pub(super) sandbox_fin_passed: bool,
    /// Its data toward the sandbox goes past the stack (see [`crate::bypass`]).
    pub(super) bypass: bool,
    pub(super) bytes_out: u64,
    pub(super) bytes_in: u64,
    pub(super) error: Option<String>,
}

impl Stack {
    /// Records the end of `flow` and lets go of its resources.
    pub(super) fn end_flow(&mut self, mut flow: Flow) {
        self.by_key.remove(&flow.key);
        let _ = self.poll.registry().deregister(flow.stream.source());
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
                    self.device.bypass_remove(flow.key.ends());
                } else {
                    if flow.error.is_some() && s.is_open() {
                        s.abort();
                    }
                    // Its last segments (a reset, a FIN's ACK) still need their
                    // numbers moved: the bypass state goes with the socket.
                    self.retired.push((socket, flow.buffers, flow.key.ends()));
                }
                // A reset from the sandbox reaches the destination as a reset, not as
                // an orderly close that would make a cut upload look complete.
                if flow.error.is_some() && !flow.sandbox_fin_passed {
                    flow.stream.reset_on_close();
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
    pub(super) fn shutdown(&mut self) {
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

/// An error as a short phrase for the records.
pub(super) fn describe(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused".into(),
        io::ErrorKind::ConnectionReset => "connection reset".into(),
        io::ErrorKind::TimedOut => "connection timed out".into(),
        _ => e.to_string(),
    }
}
