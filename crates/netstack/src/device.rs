//! The TUN descriptor as a smoltcp device. Packets are read by the mediator's loop
//! (which inspects each before the stack sees it) and queued here; packets the stack
//! sends are written to the TUN descriptor at once.
//!
//! Each packet on the descriptor follows a 10-byte `virtio_net_hdr`. On the way in it
//! is all zeros (no offloads are enabled, so the kernel hands over complete packets).
//! On the way out, TCP segments are marked "checksum needed" with the pseudo-header
//! sum in place, as a network card's offload would get them: the sandbox's kernel
//! then accepts them without either side summing every byte, which is most of what
//! a bulk transfer would otherwise cost.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Write};

use smoltcp::phy::{self, Checksum, DeviceCapabilities, Medium};
use smoltcp::time::Instant;

/// `sizeof(struct virtio_net_hdr)`.
const VNET_HDR_LEN: usize = 10;
const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;
/// Offset of the checksum field in a TCP header.
const TCP_CHECKSUM_OFFSET: usize = 16;

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
}

pub(crate) struct TunDevice {
    file: File,
    mtu: usize,
    rx: VecDeque<Packet>,
    /// Emptied buffers, reused so a bulk transfer does not allocate per packet.
    spare: Vec<Vec<u8>>,
    tx: Vec<u8>,
    /// Packets the kernel would not take (the TUN queue was full); TCP resends them.
    pub dropped_tx: u64,
}

impl TunDevice {
    pub fn new(file: File, mtu: u16) -> Self {
        Self {
            file,
            mtu: usize::from(mtu),
            rx: VecDeque::new(),
            spare: Vec::new(),
            tx: Vec::new(),
            dropped_tx: 0,
        }
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    /// Reads one packet from the sandbox; `Ok(None)` when none is waiting.
    pub fn read_packet(&mut self) -> io::Result<Option<Packet>> {
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.resize(VNET_HDR_LEN + self.mtu, 0);
        match (&self.file).read(&mut buf) {
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
            dropped_tx,
            ..
        } = self;
        Some((
            RxToken { packet, spare },
            TxToken {
                file,
                buf: tx,
                dropped: dropped_tx,
            },
        ))
    }

    fn transmit(&mut self, _: Instant) -> Option<Self::TxToken<'_>> {
        Some(TxToken {
            file: &self.file,
            buf: &mut self.tx,
            dropped: &mut self.dropped_tx,
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
    dropped: &'a mut u64,
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        // Only the header needs clearing: the stack writes every byte of the packet.
        self.buf.resize(VNET_HDR_LEN + len, 0);
        self.buf[..VNET_HDR_LEN].fill(0);
        let result = f(&mut self.buf[VNET_HDR_LEN..]);
        offload_tcp_checksum(self.buf);
        let mut file = self.file;
        if file.write(self.buf).is_err() {
            *self.dropped += 1;
        }
        result
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
    use super::*;

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
