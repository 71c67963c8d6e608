//! The TUN descriptor as a smoltcp device. Packets are read by the mediator's loop
//! (which inspects each before the stack sees it) and queued here; packets the stack
//! sends are written to the TUN descriptor, small ones at once and large ones by a
//! writer thread of their own (see [`TunWriter`]).
//!
//! Each packet on the descriptor follows a 10-byte `virtio_net_hdr`. On the way in it
//! is all zeros (no offloads are enabled, so the kernel hands over complete packets).
//! On the way out, TCP segments are marked "checksum needed" with the pseudo-header
//! sum in place, as a network card's offload would get them: the sandbox's kernel
//! then accepts them without either side summing every byte, which is most of what
//! a bulk transfer would otherwise cost.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread::JoinHandle;

use smoltcp::phy::{self, Checksum, DeviceCapabilities, Medium};
use smoltcp::time::Instant;

use crate::bypass::{self, Bypass, Ends, HEADERS};

/// `sizeof(struct virtio_net_hdr)`.
const VNET_HDR_LEN: usize = 10;
const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
/// Offset of the checksum field in a TCP header.
const TCP_CHECKSUM_OFFSET: usize = 16;
/// Packets at least this long go to the writer thread (a bulk transfer's segments);
/// shorter ones (handshakes, ACKs, small requests) are written at once when nothing
/// is queued, so they gain no hand-over latency.
const WRITER_MIN_LEN: usize = 16 * 1024;
/// Packet buffers the writer thread may hold at once (queued or being written), each
/// of MTU size: at most 4 MiB per session, made only as a transfer needs them. When
/// all are taken, the stack waits for the writer, which only ever waits for the
/// kernel, so this is the back-pressure. 64, not 16 (session 19): with 16 the
/// mediator waited for the writer about 500 times per GiB, and the median download
/// took 1.4-1.5 times as long (`bench/network-ab.sh`); 32 and 128 were slower than
/// 64 too.
const WRITER_BUFFERS: usize = 64;

/// One packet read from the sandbox, still in its read buffer.
pub(crate) struct Packet {
    /// Always full size, so that reusing it never clears 64 KiB.
    buf: Vec<u8>,
    len: usize,
}

impl Packet {
    /// The packet in a buffer of its own size, for one held a while (a SYN waiting
    /// for its connection). Reused later, the buffer grows back to full size.
    pub fn compact(mut self) -> Self {
        self.buf.truncate(self.len);
        self.buf.shrink_to_fit();
        self
    }

    pub fn bytes(&self) -> &[u8] {
        self.buf.get(VNET_HDR_LEN..self.len).unwrap_or_default()
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        self.buf.get_mut(VNET_HDR_LEN..self.len).unwrap_or_default()
    }
}

/// What one [`TunDevice::bypass_send`] did.
#[derive(Debug)]
pub(crate) enum Sent {
    /// Nothing may be sent now (window, end of stream, or not a bypassed connection).
    Nothing,
    /// A segment went, with this many bytes sent for the first time.
    Segment {
        new: u64,
    },
    /// The host socket has nothing more for now.
    WouldBlock,
    /// The host socket's end of stream was reached.
    End,
    Failed(io::Error),
}

pub(crate) struct TunDevice {
    file: Arc<File>,
    mtu: usize,
    rx: VecDeque<Packet>,
    /// Emptied buffers, reused so a bulk transfer does not allocate per packet.
    spare: Vec<Vec<u8>>,
    tx: Vec<u8>,
    writer: TunWriter,
    /// Connections whose data toward the sandbox bypasses the stack (see [`bypass`]).
    bypass: HashMap<Ends, Bypass>,
    /// The writer's count of lost packets when last looked at.
    drops_seen: u64,
}

impl TunDevice {
    /// The device, with its writer thread started.
    pub fn new(file: File, mtu: u16) -> io::Result<Self> {
        let file = Arc::new(file);
        Ok(Self {
            writer: TunWriter::start(Arc::clone(&file))?,
            file,
            mtu: usize::from(mtu),
            rx: VecDeque::new(),
            spare: Vec::new(),
            tx: Vec::new(),
            bypass: HashMap::new(),
            drops_seen: 0,
        })
    }

    /// Sends the data of connection `ends` toward the sandbox past the stack from now on.
    pub fn bypass_insert(&mut self, ends: Ends, state: Bypass) {
        self.bypass.insert(ends, state);
    }

    pub fn bypass_remove(&mut self, ends: Ends) {
        self.bypass.remove(&ends);
    }

    pub fn bypass_get(&mut self, ends: Ends) -> Option<&mut Bypass> {
        self.bypass.get_mut(&ends)
    }

    /// A packet from the sandbox, before the stack sees it: the ACK of a bypassed
    /// connection is taken in, and moved into the stack's numbers.
    pub fn bypass_incoming(&mut self, packet: &mut Packet) {
        if self.bypass.is_empty() {
            return;
        }
        let table = &mut self.bypass;
        let now = std::time::Instant::now();
        bypass::incoming(|e| table.get_mut(&e), packet.bytes_mut(), now);
    }

    /// When the earliest bypassed connection's timer fires.
    pub fn bypass_deadline(&self) -> Option<std::time::Instant> {
        self.bypass.values().filter_map(Bypass::deadline).min()
    }

    /// Fires the timers due at `now`, and sends every bypassed connection back to its
    /// first unacknowledged byte if the writer lost a packet since last asked (it may
    /// have been one of theirs). True if any connection has something to redo.
    pub fn bypass_check(&mut self, now: std::time::Instant) -> bool {
        let mut fired = false;
        let drops = self.writer.dropped.load(Ordering::Relaxed);
        let lost = drops != self.drops_seen;
        self.drops_seen = drops;
        for state in self.bypass.values_mut() {
            fired |= state.expire(now);
            if lost {
                state.lost();
                fired = true;
            }
        }
        fired
    }

    /// Sends the next segment of connection `ends` toward the sandbox, if it may send
    /// one: `peek` reads its payload from the host socket (without taking it off) into
    /// the packet.
    pub fn bypass_send(
        &mut self,
        ends: Ends,
        now: std::time::Instant,
        peek: impl FnOnce(&mut [u8]) -> io::Result<usize>,
    ) -> Sent {
        let Self { bypass, writer, .. } = self;
        let Some(state) = bypass.get_mut(&ends) else {
            return Sent::Nothing;
        };
        let Some(plan) = state.plan(now) else {
            return Sent::Nothing;
        };
        let mut buf = writer.buffer();
        let start = VNET_HDR_LEN + HEADERS;
        buf.resize(start + plan.len, 0);
        let n = match peek(&mut buf[start..]) {
            Ok(0) => {
                writer.free.push(buf);
                state.end_of_stream();
                return Sent::End;
            }
            Ok(n) => n.min(plan.len),
            Err(e) => {
                writer.free.push(buf);
                return match e.kind() {
                    io::ErrorKind::WouldBlock => Sent::WouldBlock,
                    io::ErrorKind::Interrupted => Sent::Segment { new: 0 },
                    _ => Sent::Failed(e),
                };
            }
        };
        buf.truncate(start + n);
        buf[..VNET_HDR_LEN].fill(0);
        if bypass::write_headers(&mut buf[VNET_HDR_LEN..], ends, state.numbers(), n).is_none() {
            writer.free.push(buf);
            return Sent::Nothing;
        }
        offload_tcp_checksum(&mut buf);
        writer.push(buf);
        Sent::Segment {
            new: state.sent(n, now),
        }
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    /// Reads one packet from the sandbox; `Ok(None)` when none is waiting.
    pub fn read_packet(&mut self) -> io::Result<Option<Packet>> {
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.resize(VNET_HDR_LEN + self.mtu, 0);
        match (&*self.file).read(&mut buf) {
            Ok(len) => Ok(Some(Packet { buf, len })),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.spare.push(buf);
                Ok(None)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                self.spare.push(buf);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Hands a packet to the stack.
    pub fn enqueue(&mut self, packet: Packet) {
        self.rx.push_back(packet);
    }

    /// Hands the packets the stack sent in its last run to the writer thread; called
    /// after every run of the stack.
    pub fn flush(&mut self) {
        self.writer.flush();
    }

    /// Gives a packet's buffer back for reuse.
    pub fn recycle(&mut self, packet: Packet) {
        if self.spare.len() < 64 {
            self.spare.push(packet.buf);
        }
    }
}

impl phy::Device for TunDevice {
    type RxToken<'a> = RxToken<'a>;
    type TxToken<'a> = TxToken<'a>;

    fn receive(&mut self, _: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        let packet = self.rx.pop_front()?;
        let Self {
            file,
            spare,
            tx,
            writer,
            bypass,
            ..
        } = self;
        Some((
            RxToken { packet, spare },
            TxToken {
                file,
                buf: tx,
                writer,
                bypass,
            },
        ))
    }

    fn transmit(&mut self, _: Instant) -> Option<Self::TxToken<'_>> {
        Some(TxToken {
            file: &self.file,
            buf: &mut self.tx,
            writer: &mut self.writer,
            bypass: &mut self.bypass,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ip;
        caps.max_transmission_unit = self.mtu;
        // The kernel fills in checksums of what it sends us, so only compute ours,
        // and not even those for TCP (see the module documentation).
        caps.checksum.ipv4 = Checksum::Tx;
        caps.checksum.tcp = Checksum::None;
        caps.checksum.udp = Checksum::Tx;
        caps.checksum.icmpv4 = Checksum::Tx;
        caps
    }
}

pub(crate) struct RxToken<'a> {
    packet: Packet,
    spare: &'a mut Vec<Vec<u8>>,
}

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        let result = f(self.packet.bytes());
        if self.spare.len() < 64 {
            self.spare.push(self.packet.buf);
        }
        result
    }
}

pub(crate) struct TxToken<'a> {
    file: &'a File,
    buf: &'a mut Vec<u8>,
    writer: &'a mut TunWriter,
    bypass: &'a mut HashMap<Ends, Bypass>,
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        let direct = len < WRITER_MIN_LEN && self.writer.idle();
        let mut queued = None;
        let buf = if direct {
            &mut *self.buf
        } else {
            queued.insert(self.writer.buffer())
        };
        // Only the header needs clearing: the stack writes every byte of the packet.
        buf.resize(VNET_HDR_LEN + len, 0);
        buf[..VNET_HDR_LEN].fill(0);
        let result = f(&mut buf[VNET_HDR_LEN..]);
        if !self.bypass.is_empty() {
            let table = &mut *self.bypass;
            bypass::outgoing(|e| table.get_mut(&e), &mut buf[VNET_HDR_LEN..]);
        }
        offload_tcp_checksum(buf);
        match queued {
            Some(buf) => self.writer.push(buf),
            None => self.writer.write_now(self.file, self.buf),
        }
        result
    }
}

/// Writes the stack's large packets to the TUN descriptor on a thread of its own.
///
/// Writing a packet to the TUN descriptor runs the sandbox kernel's receive path in
/// the writer's time (the copy into a socket buffer, TCP, waking the reader): about
/// half of what relaying a download costs the mediator. On its own thread that work
/// overlaps with the stack's (reading the destination's socket, building segments),
/// on another core. Packets keep their order: one goes straight to the descriptor
/// only when nothing is queued or being written.
///
/// The packets one run of the stack sends are handed over together ([`Self::flush`]),
/// so the writer is woken once per run, not once per packet: on a busy machine the
/// wake-ups and the context switches they cost were a tenth of a download's time.
struct TunWriter {
    queue: Option<SyncSender<Vec<Vec<u8>>>>,
    /// Batches the writer is done with, their buffers to reuse.
    returned: Receiver<Vec<Vec<u8>>>,
    /// Emptied buffers, ready for the next packets.
    free: Vec<Vec<u8>>,
    /// Packets of this run of the stack, not handed over yet.
    batch: Vec<Vec<u8>>,
    /// Buffers in existence (in the batch, queued, being written, returned or free).
    buffers: usize,
    /// Packets queued or being written.
    pending: Arc<AtomicUsize>,
    /// Packets the kernel would not take; TCP resends them.
    dropped: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl TunWriter {
    fn start(file: Arc<File>) -> io::Result<Self> {
        // Every batch holds at least one of the WRITER_BUFFERS buffers, so neither
        // channel ever holds more batches than that.
        let (queue, batches) = mpsc::sync_channel::<Vec<Vec<u8>>>(WRITER_BUFFERS);
        let (give_back, returned) = mpsc::sync_channel(WRITER_BUFFERS);
        let pending = Arc::new(AtomicUsize::new(0));
        let dropped = Arc::new(AtomicU64::new(0));
        let (in_flight, lost) = (Arc::clone(&pending), Arc::clone(&dropped));
        let thread = std::thread::Builder::new()
            .name("vg-network-tx".into())
            .spawn(move || {
                for batch in batches {
                    for packet in &batch {
                        if (&*file).write(packet).is_err() {
                            lost.fetch_add(1, Ordering::Relaxed);
                        }
                        in_flight.fetch_sub(1, Ordering::Release);
                    }
                    // Never blocks: there are never more batches than its capacity.
                    let _ = give_back.try_send(batch);
                }
            })?;
        Ok(Self {
            queue: Some(queue),
            returned,
            free: Vec::new(),
            batch: Vec::new(),
            buffers: 0,
            pending,
            dropped,
            thread: Some(thread),
        })
    }

    /// Whether nothing is waiting in the batch, queued or being written, so a
    /// packet written now stays in order.
    fn idle(&self) -> bool {
        self.batch.is_empty() && self.pending.load(Ordering::Acquire) == 0
    }

    /// A buffer for a packet to queue: a free or returned one, a new one while fewer
    /// than [`WRITER_BUFFERS`] exist, or else the next one the writer is done with.
    fn buffer(&mut self) -> Vec<u8> {
        if let Some(buf) = self.free.pop() {
            return buf;
        }
        if let Ok(batch) = self.returned.try_recv() {
            self.reuse(batch);
            if let Some(buf) = self.free.pop() {
                return buf;
            }
        }
        if self.buffers < WRITER_BUFFERS {
            self.buffers += 1;
            return Vec::new();
        }
        // All buffers are in the batch, queued or being written: hand the batch
        // over (the writer would otherwise never return a buffer) and wait for the
        // writer, which returns each batch after one write per packet (none
        // blocks), so this wait is short.
        self.flush();
        match self.returned.recv() {
            Ok(batch) => {
                self.reuse(batch);
                self.free.pop().unwrap_or_default()
            }
            Err(_) => Vec::new(),
        }
    }

    fn reuse(&mut self, mut batch: Vec<Vec<u8>>) {
        self.free.append(&mut batch);
    }

    /// Adds a packet to this run's batch.
    fn push(&mut self, packet: Vec<u8>) {
        self.batch.push(packet);
    }

    /// Hands this run's packets to the writer thread.
    fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        let n = batch.len();
        self.pending.fetch_add(n, Ordering::AcqRel);
        let sent = self.queue.as_ref().map(|q| q.send(batch));
        if !matches!(sent, Some(Ok(()))) {
            // The writer is gone (it cannot panic short of a bug): lost like a full
            // queue's packets; TCP resends.
            self.pending.fetch_sub(n, Ordering::AcqRel);
            self.dropped.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    fn write_now(&mut self, mut file: &File, packet: &[u8]) {
        if file.write(packet).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for TunWriter {
    fn drop(&mut self) {
        // Closing the queue ends the thread once it has written what was queued.
        self.flush();
        self.queue = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Fills in the `virtio_net_hdr` before an outgoing packet: a TCP segment gets
/// NEEDS_CSUM (the kernel treats it as already checked for local delivery, and would
/// finish the sum if it ever had to) with the pseudo-header sum in its checksum field.
fn offload_tcp_checksum(frame: &mut [u8]) {
    let Some((hdr, ip)) = frame.split_at_mut_checked(VNET_HDR_LEN) else {
        return;
    };
    let ihl = usize::from(ip.first().map_or(0, |b| b & 0x0f)) * 4;
    let is_tcp = ip.first().map(|b| b >> 4) == Some(4) && ip.get(9) == Some(&6);
    let Some(total) = ip
        .get(2..4)
        .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
    else {
        return;
    };
    if !is_tcp || ihl < 20 || total < ihl + 20 || total > ip.len() {
        return;
    }
    let tcp_len = total - ihl;
    let mut sum: u32 = 0;
    for pair in ip[12..20].chunks_exact(2) {
        sum += u32::from(u16::from_be_bytes([pair[0], pair[1]]));
    }
    sum += 6;
    sum += u32::try_from(tcp_len).unwrap_or(0);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let folded = u16::try_from(sum).unwrap_or(0);
    let field = ihl + TCP_CHECKSUM_OFFSET;
    ip[field..field + 2].copy_from_slice(&folded.to_be_bytes());
    hdr[0] = VIRTIO_NET_HDR_F_NEEDS_CSUM;
    // csum_start and csum_offset, little-endian (the host's byte order for virtio 1.0).
    hdr[6..8].copy_from_slice(&u16::try_from(ihl).unwrap_or(20).to_le_bytes());
    hdr[8..10].copy_from_slice(
        &u16::try_from(TCP_CHECKSUM_OFFSET)
            .unwrap_or(16)
            .to_le_bytes(),
    );
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixDatagram;

    use smoltcp::phy::{Device, TxToken as _};

    use super::*;

    /// The byte packet `i` is filled with in the test below.
    fn fill(i: usize) -> u8 {
        u8::try_from(i % 251).unwrap_or_default()
    }

    /// Packets the stack sends, small and large mixed, reach the descriptor complete
    /// and in order, whether written at once or by the writer thread in batches, and
    /// the writer never holds more than its buffers.
    #[test]
    fn packets_leave_whole_and_in_order_through_both_paths() {
        let (ours, theirs) = UnixDatagram::pair().unwrap();
        let file = File::from(std::os::fd::OwnedFd::from(ours));
        let mut device = TunDevice::new(file, 65520).unwrap();
        let sizes: Vec<usize> = (0..400)
            .map(|i| match i % 5 {
                0 | 3 => 60_000 + i,
                1 => 40 + i,
                2 => WRITER_MIN_LEN + i,
                _ => WRITER_MIN_LEN - 1,
            })
            .collect();
        let expect = sizes.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; 70_000];
            for (i, &len) in expect.iter().enumerate() {
                let n = theirs.recv(&mut buf).unwrap();
                assert_eq!(n, VNET_HDR_LEN + len, "packet {i}");
                let body = &buf[VNET_HDR_LEN..n];
                assert!(
                    body[..4] == u32::try_from(i).unwrap().to_be_bytes(),
                    "packet {i} out of order"
                );
                assert!(
                    body[4..].iter().all(|&b| b == fill(i)),
                    "packet {i} damaged"
                );
            }
        });
        for (i, &len) in sizes.iter().enumerate() {
            let token = device.transmit(Instant::from_millis(0)).unwrap();
            token.consume(len, |buf| {
                buf[..4].copy_from_slice(&u32::try_from(i).unwrap().to_be_bytes());
                buf[4..].fill(fill(i));
            });
            assert!(device.writer.buffers <= WRITER_BUFFERS);
            // Runs of the stack of 1 to 40 packets: some batches outgrow the
            // buffers and are handed over before their run ends.
            if i % 41 == 40 || i % 13 == 0 {
                device.flush();
            }
        }
        device.flush();
        reader.join().unwrap();
        assert_eq!(device.writer.dropped.load(Ordering::Relaxed), 0);
        drop(device);
    }

    #[test]
    fn tcp_segments_get_the_pseudo_header_sum_and_the_offload_flag() {
        // 20-byte IPv4 header 10.0.0.1 -> 10.0.0.2, protocol TCP, total length 40.
        let mut frame = vec![0u8; VNET_HDR_LEN + 40];
        let ip = &mut frame[VNET_HDR_LEN..];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&40u16.to_be_bytes());
        ip[9] = 6;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
        offload_tcp_checksum(&mut frame);
        assert_eq!(frame[0], VIRTIO_NET_HDR_F_NEEDS_CSUM);
        assert_eq!(&frame[6..10], &[20, 0, 16, 0]);
        // 0x0a00 + 0x0001 + 0x0a00 + 0x0002 + 6 + 20 = 0x141d
        assert_eq!(&frame[VNET_HDR_LEN + 36..VNET_HDR_LEN + 38], &[0x14, 0x1d]);

        let mut udp = frame.clone();
        udp[VNET_HDR_LEN + 9] = 17;
        udp[..VNET_HDR_LEN].fill(0);
        offload_tcp_checksum(&mut udp);
        assert!(
            udp[..VNET_HDR_LEN].iter().all(|&b| b == 0),
            "only TCP is offloaded"
        );
    }
}
