//! Reading a TCP socket's receive queue in place, for the network mediator's send path
//! toward the sandbox: bytes stay queued in the kernel until the sandbox acknowledges
//! them, are read (peeked) straight into the packets that carry them, peeked again
//! from the acknowledged point to resend, and dropped once acknowledged.

use std::io;
use std::os::fd::BorrowedFd;

use crate::sys;

/// Makes the next `MSG_PEEK` read of `fd` start `offset` bytes into its receive queue
/// (each peek then moves on by what it returned). Fails on kernels without
/// `SO_PEEK_OFF` for TCP (before Linux 6.9): the caller then reads the plain way.
pub fn set_offset(fd: BorrowedFd<'_>, offset: u32) -> io::Result<()> {
    let offset = libc::c_int::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "peek offset over 2 GiB"))?;
    sys::set_peek_offset(fd, offset)
}

/// Drops up to `len` bytes from the head of `fd`'s receive queue without copying them;
/// returns how many went (fewer when fewer were queued).
pub fn discard(fd: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    sys::discard(fd, len)
}

/// Fixes `fd`'s receive buffer at `bytes` (the kernel doubles it for its bookkeeping)
/// even past `net.core.rmem_max`, which needs `CAP_NET_ADMIN` over the socket's
/// network namespace: it fails with EPERM without it, leaving the socket as it was.
/// For the mediator's host sockets, whose receive queue is the peeked send buffer
/// toward the sandbox, on hosts whose `rmem_max` is small (Debian's is 208 KiB).
pub fn force_receive_buffer(fd: BorrowedFd<'_>, bytes: usize) -> io::Result<()> {
    let bytes = libc::c_int::try_from(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "receive buffer over 2 GiB"))?;
    sys::set_receive_buffer_force(fd, bytes)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    use super::*;

    /// Peeks go on from the offset, a resend peeks again from the head, and
    /// discarding moves the head and the offset back together.
    #[test]
    fn peeks_from_the_offset_and_discards_from_the_head() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        client.write_all(b"0123456789").unwrap();
        client.shutdown(std::net::Shutdown::Write).unwrap();
        set_offset(server.as_fd(), 0).unwrap();
        let mut buf = [0u8; 4];
        // Wait for all ten bytes (loopback, but not necessarily at once).
        let mut all = [0u8; 16];
        while server.peek(&mut all).unwrap() < 10 {
            set_offset(server.as_fd(), 0).unwrap();
        }
        set_offset(server.as_fd(), 0).unwrap();
        assert_eq!(server.peek(&mut buf).unwrap(), 4);
        assert_eq!(&buf, b"0123");
        assert_eq!(server.peek(&mut buf).unwrap(), 4);
        assert_eq!(&buf, b"4567");
        // Three acknowledged: dropped; the next peek still follows "7".
        assert_eq!(discard(server.as_fd(), 3).unwrap(), 3);
        assert_eq!(server.peek(&mut buf).unwrap(), 2);
        assert_eq!(&buf[..2], b"89");
        // End of stream at the offset.
        assert_eq!(server.peek(&mut buf).unwrap(), 0);
        // Resend from the acknowledged point.
        set_offset(server.as_fd(), 0).unwrap();
        assert_eq!(server.peek(&mut buf).unwrap(), 4);
        assert_eq!(&buf, b"3456");
        // Discarding more than is queued drops what there is.
        assert_eq!(discard(server.as_fd(), 100).unwrap(), 7);
        server.set_nonblocking(true).unwrap();
        assert_eq!(discard(server.as_fd(), 100).unwrap(), 0, "end of stream");
    }

    /// Past `net.core.rmem_max`, with `CAP_NET_ADMIN` (root's, as CI runs the unit
    /// tests): the buffer is what was asked (doubled), not capped at the maximum;
    /// without it, EPERM and the socket as it was.
    #[test]
    fn a_forced_receive_buffer_passes_rmem_max_only_with_the_capability() {
        let rmem_max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let asked = (rmem_max + (1 << 20)).next_power_of_two();
        let net_admin = std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .is_some_and(|caps| caps & (1 << 12) != 0);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let before = socket2::SockRef::from(&client).recv_buffer_size().unwrap();
        let forced = force_receive_buffer(client.as_fd(), asked);
        let after = socket2::SockRef::from(&client).recv_buffer_size().unwrap();
        if net_admin {
            forced.unwrap();
            assert_eq!(after, 2 * asked, "rmem_max {rmem_max}");
        } else {
            assert_eq!(forced.unwrap_err().raw_os_error(), Some(libc::EPERM));
            assert_eq!(after, before);
        }
    }
}
