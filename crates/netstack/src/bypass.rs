//! The send path toward the sandbox for a connection's data from its destination,
//! past the stack's send ring.
//!
//! Through smoltcp, every byte of a download was copied three times in the mediator:
//! from the host socket into the stack's send ring (`recv`), from the ring into a
//! packet (the stack), from the packet into the sandbox's kernel (the TUN write).
//! Here the middle copy goes: the bytes stay queued in the host socket's kernel buffer
//! until the sandbox acknowledges them, each segment is peeked (`MSG_PEEK` from the
//! socket's `SO_PEEK_OFF`) straight into the packet that carries it, behind headers
//! written here; a resend peeks again from the acknowledged point, and acknowledged
//! bytes are dropped from the queue without a copy (`MSG_TRUNC`).
//!
//! smoltcp keeps the rest of the connection: the handshake, the sandbox's data toward
//! the destination (and its ACKs and window), both closes and resets. It is never
//! given data to send, so its own sequence numbers stop at its ISS + 1 (+ 1 for its
//! FIN). The sandbox sees one sequence space: this path's data from the stack's ISS + 1
//! on, the stack's FIN after it. So the stack's segments leave with their sequence
//! number moved on by the data sent here ([`Bypass::on_stack_segment`]), and the
//! sandbox's acknowledgements reach the stack moved back ([`Bypass::on_sandbox_ack`]):
//! an ACK of this path's data is, to the stack, an ACK of nothing new. The stack is
//! told to close only once every byte sent here was acknowledged, so its FIN always
//! follows the data.
//!
//! Losses (a TUN write the kernel refused, a segment the sandbox's kernel dropped) are
//! repaired by going back to the first unacknowledged byte: after three duplicate
//! ACKs, after a write failed, or when the retransmission timer expires. Offsets are
//! counted in 64 bits from the connection's first data byte; on the wire they wrap.

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

/// IPv4 and TCP headers of this path's segments, without options.
pub(crate) const HEADERS: usize = 40;
/// The retransmission timer's first (and after progress, again) value: Linux's floor.
pub(crate) const RTO_MIN: Duration = Duration::from_millis(200);
/// The retransmission timer's ceiling as it backs off.
pub(crate) const RTO_MAX: Duration = Duration::from_secs(10);
/// Duplicate ACKs that mean a segment was lost.
const DUP_ACKS: u8 = 3;
/// The largest window scale TCP allows (RFC 7323).
const MAX_SHIFT: u8 = 14;
/// A TCP segment's MSS when the SYN names none (RFC 9293).
const DEFAULT_MSS: usize = 536;

const FLAG_FIN: u8 = 0x01;
const FLAG_SYN: u8 = 0x02;
const FLAG_RST: u8 = 0x04;
const FLAG_PSH: u8 = 0x08;
const FLAG_ACK: u8 = 0x10;

/// A connection as the sandbox sees it: (its end, the destination's end).
pub(crate) type Ends = (SocketAddrV4, SocketAddrV4);

/// The low 32 bits of an offset: its place in the wrapping sequence space.
fn low32(x: u64) -> u32 {
    u32::try_from(x & u64::from(u32::MAX)).unwrap_or(0)
}

/// One connection's send state on this path.
#[derive(Debug)]
pub(crate) struct Bypass {
    /// The sequence number of the first data byte: the stack's ISS + 1, from its
    /// SYN-ACK. Nothing is sent or rewritten before it is known.
    base: Option<u32>,
    /// Bytes the sandbox acknowledged.
    una: u64,
    /// Bytes sent (the next byte to send); `una..nxt` are in flight.
    nxt: u64,
    /// The most bytes ever sent: what was taken from the destination.
    high: u64,
    /// Acknowledged bytes already dropped from the host socket.
    discarded: u64,
    /// The sandbox's receive window from `una`, in bytes.
    window: u64,
    /// The window scale the sandbox's SYN offered, and the one in force once the
    /// stack's SYN-ACK accepted it.
    offered_shift: Option<u8>,
    peer_shift: u8,
    /// The largest payload per segment: the sandbox's MSS, within the MTU.
    mss: usize,
    /// The acknowledgement number and window field of the stack's last segment, which
    /// this path's segments repeat (the window field already scaled by the stack).
    ack: u32,
    win_field: u16,
    dup_acks: u8,
    /// Duplicate ACKs go back again only once `una` passed this (everything sent when
    /// it last went back), so a stream of them cannot make every byte in flight be
    /// sent over and over.
    recover: u64,
    /// When the retransmission (or, with a closed window, the probe) timer fires.
    deadline: Option<Instant>,
    rto: Duration,
    /// Go back to `una` before sending again.
    rewind: bool,
    /// Send one byte into a closed window, to learn when it opens.
    probe: bool,
    /// The destination's end of stream is at `nxt`.
    eof: bool,
    ip_id: u16,
}

/// What the next segment carries: at most `len` bytes from offset `nxt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    pub len: usize,
}

impl Bypass {
    /// A connection whose SYN offered `mss` and window scale `shift`, on a link of
    /// `mtu` bytes.
    pub fn new(mss: Option<u16>, shift: Option<u8>, mtu: usize) -> Self {
        let mss = mss.map_or(DEFAULT_MSS, usize::from);
        Self {
            base: None,
            una: 0,
            nxt: 0,
            high: 0,
            discarded: 0,
            window: 0,
            offered_shift: shift,
            peer_shift: 0,
            mss: mss.min(mtu.saturating_sub(HEADERS)).max(1),
            ack: 0,
            win_field: 0,
            dup_acks: 0,
            recover: 0,
            deadline: None,
            rto: RTO_MIN,
            rewind: false,
            probe: false,
            eof: false,
            ip_id: 0,
        }
    }

    /// A segment the stack sends to the sandbox, with the flags, numbers and (for a
    /// SYN) window scale option it carries; returns its sequence number on the wire.
    pub fn on_stack_segment(
        &mut self,
        flags: u8,
        seq: u32,
        ack: u32,
        window: u16,
        shift: Option<u8>,
    ) -> u32 {
        if flags & FLAG_SYN != 0 {
            // The SYN-ACK: this path's data starts after it. A window scale in it
            // means the sandbox's offer was taken, and a SYN's own window is unscaled.
            self.base = Some(seq.wrapping_add(1));
            self.peer_shift = match shift {
                Some(_) => self.offered_shift.unwrap_or(0).min(MAX_SHIFT),
                None => 0,
            };
            let own = shift.unwrap_or(0).min(MAX_SHIFT);
            self.ack = ack;
            self.win_field = u16::try_from(u32::from(window) >> own).unwrap_or(u16::MAX);
            return seq;
        }
        if flags & FLAG_ACK != 0 {
            self.ack = ack;
            self.win_field = window;
        }
        // After everything ever sent: a pure ACK's number is then never behind what
        // the sandbox received (it would drop it as old), and when the stack's FIN
        // goes, everything was acknowledged, so this is the end of the data.
        match self.base {
            Some(_) => seq.wrapping_add(low32(self.high)),
            None => seq,
        }
    }

    /// An ACK from the sandbox (`payload` when the segment also carries data); returns
    /// the acknowledgement number the stack must see.
    pub fn on_sandbox_ack(&mut self, ack: u32, window: u16, payload: bool, now: Instant) -> u32 {
        let Some(base) = self.base else {
            return ack;
        };
        let in_flight = self.nxt - self.una;
        let delta = ack.wrapping_sub(base.wrapping_add(low32(self.una)));
        // Any byte ever sent may be acknowledged, also one sent before going back.
        if u64::from(delta) <= self.high - self.una {
            let window = u64::from(window) << self.peer_shift;
            if delta > 0 {
                self.una += u64::from(delta);
                self.nxt = self.nxt.max(self.una);
                self.dup_acks = 0;
                self.rto = RTO_MIN;
                self.deadline = (self.una < self.nxt).then(|| now + self.rto);
            } else if in_flight > 0 && !payload && window == self.window {
                self.dup_acks = self.dup_acks.saturating_add(1);
                if self.dup_acks == DUP_ACKS && self.una >= self.recover {
                    self.rewind = true;
                }
            }
            if window > 0 {
                self.probe = false;
            }
            self.window = window;
            return base;
        }
        let beyond = ack.wrapping_sub(base.wrapping_add(low32(self.high)));
        if beyond < 1 << 31 {
            // Past this path's data: the stack's FIN, or a bogus ACK for the stack to
            // judge, in its own numbers.
            ack.wrapping_sub(low32(self.high))
        } else {
            // An old ACK, of bytes acknowledged before: to the stack, nothing new.
            base
        }
    }

    /// Acknowledged bytes still to drop from the host socket.
    pub fn to_discard(&self) -> u64 {
        self.una - self.discarded
    }

    /// `n` acknowledged bytes were dropped from the host socket.
    pub fn discarded(&mut self, n: u64) {
        self.discarded = (self.discarded + n).min(self.una);
    }

    /// Whether to go back to the first unacknowledged byte (and clears the request):
    /// the caller then peeks again from the head of the host socket's queue.
    pub fn take_rewind(&mut self) -> bool {
        if !std::mem::take(&mut self.rewind) {
            return false;
        }
        self.nxt = self.una;
        self.eof = false;
        self.dup_acks = 0;
        self.recover = self.high;
        true
    }

    /// Asks for a resend from the first unacknowledged byte (a segment was lost).
    pub fn lost(&mut self) {
        if self.nxt > self.una {
            self.rewind = true;
        }
    }

    /// The next segment's size, or `None` when nothing may be sent now (no base yet,
    /// the end of stream reached, or the window full: then the timer is armed).
    pub fn plan(&mut self, now: Instant) -> Option<Plan> {
        self.base?;
        if self.eof {
            return None;
        }
        let in_flight = self.nxt - self.una;
        let mut room = self.window.saturating_sub(in_flight);
        if room == 0 && in_flight == 0 && self.probe {
            room = 1;
        }
        if room == 0 {
            if self.deadline.is_none() {
                self.deadline = Some(now + self.rto);
            }
            return None;
        }
        let len = usize::try_from(room).unwrap_or(usize::MAX).min(self.mss);
        Some(Plan { len })
    }

    /// The sequence number, acknowledgement number, window field and IP id of the
    /// next segment.
    pub fn numbers(&mut self) -> (u32, u32, u16, u16) {
        self.ip_id = self.ip_id.wrapping_add(1);
        let seq = self.base.unwrap_or(0).wrapping_add(low32(self.nxt));
        (seq, self.ack, self.win_field, self.ip_id)
    }

    /// `n` bytes were sent from `nxt`; returns how many of them were sent for the
    /// first time (taken from the destination).
    pub fn sent(&mut self, n: usize, now: Instant) -> u64 {
        self.nxt += n as u64;
        self.probe = false;
        if self.deadline.is_none() {
            self.deadline = Some(now + self.rto);
        }
        let new = self.nxt.saturating_sub(self.high);
        self.high = self.high.max(self.nxt);
        new
    }

    /// The destination's end of stream was read at `nxt`.
    pub fn end_of_stream(&mut self) {
        self.eof = true;
    }

    /// Every byte up to the destination's end of stream was acknowledged: the stack
    /// may send its FIN.
    pub fn finished(&self) -> bool {
        self.eof && self.una == self.nxt
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The timer at `now`: a resend of what is in flight, or a probe of a closed
    /// window. Returns whether it fired.
    pub fn expire(&mut self, now: Instant) -> bool {
        if self.deadline.is_none_or(|d| d > now) {
            return false;
        }
        self.deadline = None;
        self.rto = (self.rto * 2).min(RTO_MAX);
        if self.nxt > self.una {
            self.rewind = true;
        } else if self.window == 0 && !self.eof {
            self.probe = true;
        }
        true
    }
}

/// Writes the IPv4 and TCP headers of a data segment from `from` (the destination's
/// end) to `to` (the sandbox's) carrying `len` bytes, into `buf[..HEADERS]`. The TCP
/// checksum is left for the device's offload.
pub(crate) fn write_headers(
    buf: &mut [u8],
    (to, from): Ends,
    (seq, ack, window, id): (u32, u32, u16, u16),
    len: usize,
) -> Option<()> {
    let total = u16::try_from(HEADERS + len).ok()?;
    let ip = buf.get_mut(..HEADERS)?;
    ip[0] = 0x45;
    ip[1] = 0;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[4..6].copy_from_slice(&id.to_be_bytes());
    // Don't fragment.
    ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 6;
    ip[10..12].fill(0);
    ip[12..16].copy_from_slice(&from.ip().octets());
    ip[16..20].copy_from_slice(&to.ip().octets());
    let sum = ip_checksum(&ip[..20]);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let tcp = &mut ip[20..];
    tcp[0..2].copy_from_slice(&from.port().to_be_bytes());
    tcp[2..4].copy_from_slice(&to.port().to_be_bytes());
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    tcp[8..12].copy_from_slice(&ack.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = FLAG_ACK | FLAG_PSH;
    tcp[14..16].copy_from_slice(&window.to_be_bytes());
    tcp[16..20].fill(0);
    Some(())
}

fn ip_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks_exact(2)
        .map(|p| u32::from(u16::from_be_bytes([p[0], p[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !u16::try_from(sum).unwrap_or(0)
}

/// The MSS and window scale options of a TCP header (its options are
/// `tcp[20..data offset]`); malformed options end the walk.
pub(crate) fn syn_options(tcp: &[u8]) -> (Option<u16>, Option<u8>) {
    let end = tcp.get(12).map_or(0, |b| usize::from(b >> 4) * 4);
    let Some(mut opts) = tcp.get(20..end) else {
        return (None, None);
    };
    let (mut mss, mut shift) = (None, None);
    while let Some(&kind) = opts.first() {
        match kind {
            0 => break,
            1 => {
                opts = &opts[1..];
                continue;
            }
            _ => {}
        }
        let Some(len) = opts.get(1).map(|&l| usize::from(l)) else {
            break;
        };
        let Some(body) = opts.get(2..len.max(2)) else {
            break;
        };
        if len < 2 {
            break;
        }
        match (kind, body) {
            (2, [a, b]) => mss = Some(u16::from_be_bytes([*a, *b])),
            (3, [s]) => shift = Some((*s).min(MAX_SHIFT)),
            _ => {}
        }
        opts = &opts[len..];
    }
    (mss, shift)
}

/// The MSS and window scale a sandbox's SYN (an IPv4 packet) offers; `None` if it is
/// not a TCP segment.
pub(crate) fn syn_offer(ip: &[u8]) -> Option<(Option<u16>, Option<u8>)> {
    let (ihl, doff) = tcp_in(ip)?;
    Some(syn_options(ip.get(ihl..ihl + doff)?))
}

/// A TCP segment's place in an IPv4 packet: (header length, TCP header length).
fn tcp_in(ip: &[u8]) -> Option<(usize, usize)> {
    let ihl = usize::from(ip.first()? & 0x0f) * 4;
    if ip.first()? >> 4 != 4 || *ip.get(9)? != 6 || ihl < 20 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
    let doff = usize::from(ip.get(ihl + 12)? >> 4) * 4;
    if doff < 20 || total < ihl + doff || total > ip.len() {
        return None;
    }
    Some((ihl, doff))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| <[u8; 4]>::try_from(s).ok())
        .map_or(0, u32::from_be_bytes)
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .and_then(|s| <[u8; 2]>::try_from(s).ok())
        .map_or(0, u16::from_be_bytes)
}

fn ends_of(ip: &[u8], tcp: &[u8]) -> (SocketAddrV4, SocketAddrV4) {
    let addr = |at: usize| {
        std::net::Ipv4Addr::from(
            ip.get(at..at + 4)
                .and_then(|s| <[u8; 4]>::try_from(s).ok())
                .unwrap_or_default(),
        )
    };
    (
        SocketAddrV4::new(addr(12), u16_at(tcp, 0)),
        SocketAddrV4::new(addr(16), u16_at(tcp, 2)),
    )
}

/// A packet the stack sends (`ip`, an IPv4 packet): if it belongs to a connection on
/// this path, notes its numbers and moves its sequence number on (see the module
/// documentation).
pub(crate) fn outgoing<'a>(find: impl FnOnce(Ends) -> Option<&'a mut Bypass>, ip: &mut [u8]) {
    let Some((ihl, doff)) = tcp_in(ip) else {
        return;
    };
    let (tcp_ip, tcp) = ip.split_at_mut(ihl);
    let (from, to) = ends_of(tcp_ip, tcp);
    let Some(bypass) = find((to, from)) else {
        return;
    };
    let flags = tcp[13];
    let shift = if flags & FLAG_SYN != 0 {
        syn_options(&tcp[..doff]).1
    } else {
        None
    };
    let seq = bypass.on_stack_segment(
        flags,
        u32_at(tcp, 4),
        u32_at(tcp, 8),
        u16_at(tcp, 14),
        shift,
    );
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
}

/// A packet from the sandbox (`ip`, an IPv4 packet) of a connection on this path:
/// takes in its ACK and moves its acknowledgement number back for the stack.
pub(crate) fn incoming<'a>(
    find: impl FnOnce(Ends) -> Option<&'a mut Bypass>,
    ip: &mut [u8],
    now: Instant,
) {
    let Some((ihl, doff)) = tcp_in(ip) else {
        return;
    };
    let total = usize::from(u16_at(ip, 2));
    let (tcp_ip, tcp) = ip.split_at_mut(ihl);
    let flags = tcp[13];
    if flags & FLAG_ACK == 0 || flags & FLAG_SYN != 0 {
        return;
    }
    let Some(bypass) = find(ends_of(tcp_ip, tcp)) else {
        return;
    };
    let payload = total > ihl + doff || flags & (FLAG_FIN | FLAG_RST) != 0;
    let ack = bypass.on_sandbox_ack(u32_at(tcp, 8), u16_at(tcp, 14), payload, now);
    tcp[8..12].copy_from_slice(&ack.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    const ISS: u32 = 0xffff_f000;

    /// A connection whose SYN-ACK went out with ISS, window scale 4 both ways.
    fn open() -> Bypass {
        let mut b = Bypass::new(Some(65480), Some(7), 65520);
        let seq = b.on_stack_segment(FLAG_SYN | FLAG_ACK, ISS, 1000, 65535, Some(4));
        assert_eq!(seq, ISS, "a SYN keeps its number");
        b
    }

    fn t(ms: u64) -> Instant {
        // A fixed origin keeps the timer arithmetic exact.
        static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        *ORIGIN.get_or_init(Instant::now) + Duration::from_millis(ms)
    }

    #[test]
    fn nothing_is_sent_before_the_syn_ack_and_window() {
        let mut b = Bypass::new(Some(1460), None, 65520);
        assert_eq!(b.plan(t(0)), None, "no base yet");
        assert_eq!(b.on_sandbox_ack(5, 100, false, t(0)), 5, "untouched before");
        let mut b = open();
        // The handshake's ACK opens the window: 100 << 7 bytes.
        assert_eq!(
            b.on_sandbox_ack(ISS.wrapping_add(1), 100, false, t(0)),
            ISS.wrapping_add(1)
        );
        assert_eq!(b.plan(t(0)), Some(Plan { len: 12800 }));
    }

    #[test]
    fn segments_are_sized_by_window_and_mss() {
        let mut b = open();
        b.on_sandbox_ack(ISS.wrapping_add(1), 1000, false, t(0)); // 128,000 bytes
        assert_eq!(b.plan(t(0)), Some(Plan { len: 65480 }));
        b.sent(65480, t(0));
        assert_eq!(
            b.plan(t(0)),
            Some(Plan {
                len: 128_000 - 65480
            })
        );
        b.sent(128_000 - 65480, t(0));
        assert_eq!(b.plan(t(0)), None, "window full");
        // An MSS below the MTU's room, and an MTU below the MSS.
        assert_eq!(Bypass::new(Some(1000), None, 65520).mss, 1000);
        assert_eq!(Bypass::new(Some(9000), None, 1500).mss, 1460);
        assert_eq!(Bypass::new(None, None, 65520).mss, DEFAULT_MSS);
    }

    /// Sequence numbers wrap on the wire; offsets do not. The stack sees ACKs of this
    /// path's data as ACKs of nothing new, and its FIN after the data.
    #[test]
    fn numbers_wrap_and_the_stack_sees_its_own_space() {
        let mut b = open();
        let base = ISS.wrapping_add(1);
        b.on_sandbox_ack(base, 0xffff, false, t(0));
        let (seq, ack, _, _) = b.numbers();
        assert_eq!((seq, ack), (base, 1000));
        b.sent(65480, t(0));
        b.sent(65480, t(0));
        let (seq, _, _, _) = b.numbers();
        assert_eq!(seq, base.wrapping_add(130_960), "wrapped past zero");
        assert!(seq < base);
        // Half acknowledged: una moves, the stack sees `base`.
        let half = base.wrapping_add(65480);
        assert_eq!(b.on_sandbox_ack(half, 0xffff, false, t(1)), base);
        assert_eq!(b.to_discard(), 65480);
        b.discarded(65480);
        assert_eq!(b.to_discard(), 0);
        // The stack's pure ACK leaves with its number moved on by all data sent.
        let out = b.on_stack_segment(FLAG_ACK, base, 2000, 300, None);
        assert_eq!(out, base.wrapping_add(130_960));
        assert_eq!(b.numbers().1, 2000, "data segments repeat the stack's ACK");
        // All acknowledged, end of stream: the stack's FIN (its ISS + 1) leaves after
        // the data, and its ACK reaches the stack as ISS + 2.
        let end = base.wrapping_add(130_960);
        assert_eq!(b.on_sandbox_ack(end, 0xffff, false, t(2)), base);
        b.end_of_stream();
        assert!(b.finished());
        assert_eq!(
            b.on_stack_segment(FLAG_FIN | FLAG_ACK, base, 2000, 300, None),
            end
        );
        assert_eq!(
            b.on_sandbox_ack(end.wrapping_add(1), 0xffff, false, t(3)),
            base.wrapping_add(1)
        );
        // An old ACK is nothing new to the stack; one far beyond is the stack's to judge.
        assert_eq!(b.on_sandbox_ack(half, 0xffff, false, t(3)), base);
        assert_eq!(b.to_discard(), 65480, "an old ACK takes nothing back");
    }

    #[test]
    fn offsets_past_four_gib_keep_their_place() {
        let mut b = open();
        let base = ISS.wrapping_add(1);
        b.on_sandbox_ack(base, 0xffff, false, t(0));
        let step = 65480usize;
        let mut acked = 0u64;
        for i in 0..70_000u64 {
            b.sent(step, t(i));
            acked += step as u64;
            let stack = b.on_sandbox_ack(base.wrapping_add(low32(acked)), 0xffff, false, t(i));
            assert_eq!(stack, base);
        }
        assert_eq!(b.una, 70_000 * 65480);
        assert!(b.una > u64::from(u32::MAX));
        assert_eq!(b.to_discard(), b.una);
    }

    #[test]
    fn three_duplicate_acks_or_the_timer_go_back() {
        let mut b = open();
        let base = ISS.wrapping_add(1);
        b.on_sandbox_ack(base, 0xffff, false, t(0));
        for _ in 0..4 {
            b.sent(1000, t(0));
        }
        assert_eq!(b.deadline(), Some(t(0) + RTO_MIN));
        // The first segment arrived; then three duplicates (one with data does not count).
        b.on_sandbox_ack(base.wrapping_add(1000), 0xffff, false, t(1));
        assert_eq!(
            b.deadline(),
            Some(t(1) + RTO_MIN),
            "progress restarts the timer"
        );
        b.on_sandbox_ack(base.wrapping_add(1000), 0xffff, false, t(2));
        b.on_sandbox_ack(base.wrapping_add(1000), 0xffff, true, t(2));
        b.on_sandbox_ack(base.wrapping_add(1000), 0xffff, false, t(2));
        assert!(!b.take_rewind(), "two duplicates so far");
        b.on_sandbox_ack(base.wrapping_add(1000), 0xffff, false, t(2));
        assert!(b.take_rewind());
        assert_eq!(b.nxt, 1000, "back to the first unacknowledged byte");
        // More duplicates of the same ACK do not go back again before recovery.
        for _ in 0..6 {
            b.on_sandbox_ack(base.wrapping_add(1000), 0xffff, false, t(2));
        }
        assert!(!b.rewind, "duplicates during recovery");
        assert_eq!(
            b.high, 4000,
            "what was taken from the destination stays counted"
        );
        assert_eq!(b.sent(1000, t(3)), 0, "a resend is not new");
        assert_eq!(b.sent(2500, t(3)), 500);
        // The timer, backing off.
        assert!(!b.expire(t(100)));
        assert!(b.expire(t(201)));
        assert!(b.take_rewind());
        assert_eq!(b.rto, RTO_MIN * 2);
        // Going back, the stack's segments stay after everything ever sent, and an ACK
        // of bytes sent before going back is taken.
        assert_eq!(
            b.on_stack_segment(FLAG_ACK, base, 1, 1, None),
            base.wrapping_add(4500)
        );
        b.on_sandbox_ack(base.wrapping_add(4500), 0xffff, false, t(250));
        assert_eq!((b.una, b.nxt), (4500, 4500));
        // A failed write goes back at once; with nothing in flight, there is nothing to redo.
        b.sent(10, t(300));
        b.lost();
        assert!(b.take_rewind());
        b.lost();
        assert!(!b.take_rewind());
    }

    #[test]
    fn a_closed_window_is_probed_with_one_byte() {
        let mut b = open();
        let base = ISS.wrapping_add(1);
        b.on_sandbox_ack(base, 0, false, t(0));
        assert_eq!(b.plan(t(0)), None);
        assert_eq!(
            b.deadline(),
            Some(t(0) + RTO_MIN),
            "the probe timer is armed"
        );
        assert!(b.expire(t(200)));
        assert_eq!(b.plan(t(200)), Some(Plan { len: 1 }));
        b.sent(1, t(200));
        // Still closed: the byte was dropped; the timer sends it again.
        b.on_sandbox_ack(base, 0, false, t(210));
        assert!(b.expire(t(600)));
        assert!(b.take_rewind());
        // Opened: the probe ends, normal segments follow.
        b.on_sandbox_ack(base.wrapping_add(1), 10, false, t(700));
        assert_eq!(b.plan(t(700)), Some(Plan { len: 1280 }));
    }

    #[test]
    fn without_a_scale_in_the_syn_ack_windows_are_unscaled() {
        let mut b = Bypass::new(Some(65480), Some(7), 65520);
        b.on_stack_segment(FLAG_SYN | FLAG_ACK, 1, 1, 65535, None);
        b.on_sandbox_ack(2, 100, false, t(0));
        assert_eq!(b.plan(t(0)), Some(Plan { len: 100 }));
        // The stack's own scale divides its SYN-ACK's window for data segments.
        let mut b = Bypass::new(None, Some(2), 65520);
        b.on_stack_segment(FLAG_SYN | FLAG_ACK, 1, 1, 64000, Some(3));
        assert_eq!(b.numbers().2, 8000);
    }

    #[test]
    fn options_are_read_and_malformed_ones_stop_the_walk() {
        let mut tcp = vec![0u8; 20];
        tcp[12] = 8 << 4;
        tcp.extend_from_slice(&[2, 4, 0xff, 0xc8, 1, 3, 3, 7, 0, 0, 0, 0]);
        assert_eq!(syn_options(&tcp), (Some(65480), Some(7)));
        tcp[26] = 3;
        tcp[27] = 20; // a shift over 14 is taken as 14
        assert_eq!(syn_options(&tcp).1, Some(14));
        let mut bad = tcp.clone();
        bad[21] = 0; // a length of zero would loop forever
        assert_eq!(syn_options(&bad), (None, None));
        let mut long = tcp.clone();
        long[21] = 40; // past the header
        assert_eq!(syn_options(&long), (None, None));
        assert_eq!(syn_options(&tcp[..10]), (None, None));
    }

    #[test]
    fn headers_make_a_valid_segment_and_packets_are_rewritten() {
        let sandbox = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 40000);
        let remote = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 5), 80);
        let mut pkt = vec![0u8; HEADERS + 3];
        write_headers(&mut pkt, (sandbox, remote), (7, 9, 11, 1), 3).unwrap();
        assert_eq!(ip_checksum(&pkt[..20]), 0, "the IP header sums to zero");
        assert_eq!(tcp_in(&pkt), Some((20, 20)));
        assert_eq!(ends_of(&pkt[..20], &pkt[20..]), (remote, sandbox));
        assert_eq!(
            (u32_at(&pkt, 24), u32_at(&pkt, 28), u16_at(&pkt, 34)),
            (7, 9, 11)
        );
        assert!(write_headers(&mut pkt, (sandbox, remote), (0, 0, 0, 0), 70_000).is_none());

        // The stack's packet of this connection has its sequence number moved on;
        // the sandbox's has its ACK moved back.
        let mut b = open();
        let base = ISS.wrapping_add(1);
        b.on_sandbox_ack(base, 0xffff, false, t(0));
        b.sent(500, t(0));
        let mut out = vec![0u8; HEADERS];
        write_headers(&mut out, (sandbox, remote), (base, 77, 5, 0), 0).unwrap();
        out[33] = FLAG_ACK;
        outgoing(|e| (e == (sandbox, remote)).then_some(&mut b), &mut out);
        assert_eq!(u32_at(&out, 24), base.wrapping_add(500));
        assert_eq!(b.ack, 77);
        let mut back = vec![0u8; HEADERS];
        write_headers(
            &mut back,
            (remote, sandbox),
            (1, base.wrapping_add(200), 9, 0),
            0,
        )
        .unwrap();
        back[33] = FLAG_ACK;
        incoming(
            |e| (e == (sandbox, remote)).then_some(&mut b),
            &mut back,
            t(1),
        );
        assert_eq!(u32_at(&back, 28), base);
        assert_eq!(b.una, 200);
        // Another connection's packets are left alone.
        let mut other = back.clone();
        other[28..32].copy_from_slice(&base.wrapping_add(300).to_be_bytes());
        incoming(|_| None, &mut other, t(1));
        assert_eq!(u32_at(&other, 28), base.wrapping_add(300));
    }
}
