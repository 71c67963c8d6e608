//! A flow's pump: completing the host's connection, then moving bytes both ways between
//! the stack's socket and the host's, passing on each side's close.

use std::io::{self, Read, Write};
use std::os::fd::AsFd;

use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp;
use smoltcp::wire::{IpAddress, IpListenEndpoint};

use super::Stack;
use super::flow::{Flow, FlowState, Upstream, describe};
use crate::device::{Sent, TunDevice};

impl Stack {
    /// Moves bytes for every flow; true if the stack has new work (data or state).
    pub(super) fn pump_flows(&mut self) -> bool {
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
        match flow.stream.connected() {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                flow.writable = false;
                return (true, false);
            }
            Err(e) => {
                flow.error = Some(describe(&e));
                return (false, true);
            }
        }
        flow.stream.set_nodelay();
        let mut socket = self.spare_sockets.take(flow.buffers);
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
        // A destination's data goes to the sandbox past the stack (see
        // `crate::bypass`) when its socket can be peeked from an offset; the HTTP
        // inspector's socket pair, and kernels before 6.9, take the stack's way.
        if let (Upstream::Tcp(stream), FlowState::Connecting { syn: Some(syn) }) =
            (&flow.stream, &flow.state)
            && let Some((mss, shift)) = crate::bypass::syn_offer(syn.bytes())
            && vg_sandbox::peek::set_offset(stream.as_fd(), 0).is_ok()
        {
            self.device.bypass_insert(
                flow.key.ends(),
                crate::bypass::Bypass::new(mss, shift, usize::from(crate::addr::MTU)),
            );
            flow.bypass = true;
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
        // Sandbox → destination: first what was held for the server name check.
        if flow.sni.is_some() {
            match check_sni(flow, socket) {
                Ok(moved) => progressed |= moved,
                Err(problem) => {
                    flow.error = Some(problem);
                    socket.abort();
                    return (false, true);
                }
            }
        }
        if flow.sni.is_none() && !flow.unsent.is_empty() && flow.writable {
            match (&flow.stream).write(&flow.unsent) {
                Ok(n) => {
                    flow.bytes_out += n as u64;
                    flow.unsent.drain(..n);
                    progressed |= n > 0;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => flow.writable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    flow.error = Some(describe(&e));
                    socket.abort();
                    return (false, true);
                }
            }
        }
        while flow.sni.is_none() && flow.unsent.is_empty() && flow.writable && socket.can_recv() {
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
        if flow.established
            && sandbox_done
            && !socket.can_recv()
            && flow.unsent.is_empty()
            && !flow.sandbox_fin_passed
        {
            flow.sni = None;
            flow.stream.shutdown_write();
            flow.sandbox_fin_passed = true;
        }
        // Destination → sandbox.
        if flow.bypass {
            match push_bypass(&mut self.device, flow, socket) {
                Ok(moved) => progressed |= moved,
                Err(e) => {
                    flow.error = Some(describe(&e));
                    socket.abort();
                    return (false, true);
                }
            }
        }
        while !flow.bypass && flow.readable && !flow.host_eof && socket.can_send() {
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
}

/// Sends what a bypassed flow may toward the sandbox, straight from the host socket's
/// queue (see [`crate::bypass`]): drops what the sandbox acknowledged, goes back to the
/// first unacknowledged byte when asked, peeks segments while the window allows, and
/// lets the stack close once the destination's end of stream was acknowledged.
/// Returns whether anything moved.
fn push_bypass(
    device: &mut TunDevice,
    flow: &mut Flow,
    socket: &mut tcp::Socket<'_>,
) -> io::Result<bool> {
    let ends = flow.key.ends();
    let Upstream::Tcp(stream) = &flow.stream else {
        return Ok(false);
    };
    let fd = stream.as_fd();
    let Some(state) = device.bypass_get(ends) else {
        return Ok(false);
    };
    let mut progressed = false;
    let acked = state.to_discard();
    if acked > 0 {
        let n = vg_sandbox::peek::discard(fd, usize::try_from(acked).unwrap_or(usize::MAX))?;
        if n == 0 {
            return Err(io::Error::other(
                "bytes the sandbox acknowledged were no longer queued",
            ));
        }
        state.discarded(n as u64);
        progressed = true;
    }
    if state.take_rewind() {
        vg_sandbox::peek::set_offset(fd, 0)?;
        flow.readable = true;
        progressed = true;
    }
    // Data only once the handshake is done, and until the stack's FIN.
    let open = matches!(
        socket.state(),
        tcp::State::Established | tcp::State::CloseWait
    );
    let now = std::time::Instant::now();
    while open && flow.readable {
        match device.bypass_send(ends, now, |buf| stream.peek(buf)) {
            Sent::Nothing | Sent::End => break,
            Sent::Segment { new } => {
                flow.bytes_in += new;
                progressed = true;
            }
            Sent::WouldBlock => flow.readable = false,
            Sent::Failed(e) => return Err(e),
        }
    }
    if open && !flow.host_eof && device.bypass_get(ends).is_some_and(|s| s.finished()) {
        flow.host_eof = true;
        socket.close();
        progressed = true;
    }
    Ok(progressed)
}

/// Takes the sandbox's first bytes off its socket until its ClientHello (if it sends
/// one) can be read, then releases them to `flow.unsent`, or names why the connection
/// must be cut. Returns whether bytes moved.
fn check_sni(flow: &mut Flow, socket: &mut tcp::Socket<'_>) -> Result<bool, String> {
    let Some(check) = flow.sni.as_mut() else {
        return Ok(false);
    };
    let mut moved = false;
    while socket.can_recv() && check.held.len() < crate::sni::MAX_HELLO {
        let room = crate::sni::MAX_HELLO - check.held.len();
        let held = &mut check.held;
        let n = socket
            .recv(|buf| {
                let n = buf.len().min(room);
                held.extend_from_slice(&buf[..n]);
                (n, n)
            })
            .unwrap_or(0);
        if n == 0 {
            break;
        }
        moved = true;
    }
    let verdict = match crate::sni::client_hello(&check.held) {
        crate::sni::FirstBytes::Incomplete => return Ok(moved),
        crate::sni::FirstBytes::NotTls | crate::sni::FirstBytes::ClientHello(None) => Ok(()),
        crate::sni::FirstBytes::ClientHello(Some(sni)) => {
            let same = vg_policy::network::HostName::parse(sni.trim_end_matches('.'))
                .is_ok_and(|n| n == check.expect);
            if same {
                Ok(())
            } else {
                Err(format!(
                    "TLS server name '{}' is not '{}', the name this connection was allowed for (domain fronting?); cut",
                    sni.escape_debug(),
                    check.expect
                ))
            }
        }
        crate::sni::FirstBytes::Malformed(problem) => {
            Err(format!("unreadable TLS ClientHello ({problem}); cut"))
        }
    };
    verdict?;
    flow.unsent = std::mem::take(&mut check.held);
    flow.sni = None;
    Ok(true)
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
