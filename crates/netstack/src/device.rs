//! The TUN descriptor as a smoltcp device. Packets are read by the mediator's loop
//! (which inspects each before the stack sees it) and queued here; packets the stack
//! sends are written to the TUN descriptor at once.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Write};

use smoltcp::phy::{self, Checksum, DeviceCapabilities, Medium};
use smoltcp::time::Instant;

pub(crate) struct TunDevice {
    file: File,
    mtu: usize,
    rx: VecDeque<Vec<u8>>,
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
    pub fn read_packet(&mut self) -> io::Result<Option<Vec<u8>>> {
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.resize(self.mtu, 0);
        match (&self.file).read(&mut buf) {
            Ok(n) => {
                buf.truncate(n);
                Ok(Some(buf))
            }
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
    pub fn enqueue(&mut self, packet: Vec<u8>) {
        self.rx.push_back(packet);
    }

    /// Gives a buffer back for reuse.
    pub fn recycle(&mut self, buf: Vec<u8>) {
        if self.spare.len() < 64 {
            self.spare.push(buf);
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
        // The kernel fills in checksums of what it sends us, so only compute ours.
        caps.checksum.ipv4 = Checksum::Tx;
        caps.checksum.tcp = Checksum::Tx;
        caps.checksum.udp = Checksum::Tx;
        caps.checksum.icmpv4 = Checksum::Tx;
        caps
    }
}

pub(crate) struct RxToken<'a> {
    packet: Vec<u8>,
    spare: &'a mut Vec<Vec<u8>>,
}

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        let result = f(&self.packet);
        if self.spare.len() < 64 {
            self.spare.push(self.packet);
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
        self.buf.resize(len, 0);
        let result = f(self.buf);
        let mut file = self.file;
        if file.write(self.buf).is_err() {
            *self.dropped += 1;
        }
        result
    }
}
