//! Stack sockets of ended connections, kept for the next ones.
//!
//! A new smoltcp socket needs its two rings allocated, and the allocator hands back
//! memory of ended connections that must be cleared: with 512 KiB each way that
//! clearing (`memset`) was a fifth of the mediator's time on a run of short
//! connections. A closed socket's rings are reused as they are: smoltcp resets a
//! socket's state and ring positions when it listens again, and only ever hands out
//! bytes written after that, so nothing of the earlier connection can reach the next.

use smoltcp::socket::tcp;

/// Closed sockets kept at most. Each holds its rings outside the session's buffer
/// budget (the budget counts open connections), so this bounds what is kept:
/// 2 × 2 × 512 KiB with full buffers.
pub(super) const MAX_SPARE: usize = 2;

/// Closed sockets, by their ring size (each way).
#[derive(Default)]
pub(super) struct SocketPool {
    spare: Vec<(usize, tcp::Socket<'static>)>,
}

impl SocketPool {
    /// Keeps `socket`, whose rings are `buffers` bytes each way, if it is closed
    /// (closed or in TIME-WAIT: it takes no packet any more) and there is room; an
    /// open socket is dropped rather than kept, so a socket still holding a
    /// connection is never handed out again.
    pub fn put(&mut self, buffers: usize, socket: tcp::Socket<'static>) {
        if !socket.is_open() && self.spare.len() < MAX_SPARE {
            self.spare.push((buffers, socket));
        }
    }

    /// A socket with rings of `buffers` bytes each way: a kept one, or a new one.
    /// Either is closed; `listen` resets it before it takes a connection.
    pub fn take(&mut self, buffers: usize) -> tcp::Socket<'static> {
        match self.spare.iter().position(|(b, _)| *b == buffers) {
            Some(i) => self.spare.swap_remove(i).1,
            None => tcp::Socket::new(
                tcp::SocketBuffer::new(vec![0; buffers]),
                tcp::SocketBuffer::new(vec![0; buffers]),
            ),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.spare.len()
    }
}

#[cfg(test)]
mod tests {
    use smoltcp::iface::{Config, Interface, SocketSet};
    use smoltcp::phy::{Loopback, Medium};
    use smoltcp::time::Instant;
    use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr, IpListenEndpoint};

    use super::*;

    fn endpoint(port: u16) -> IpListenEndpoint {
        IpListenEndpoint {
            addr: Some(IpAddress::v4(198, 18, 1, 1)),
            port,
        }
    }

    #[test]
    fn closed_sockets_are_reused_by_size_and_bounded() {
        let mut pool = SocketPool::default();
        let a = pool.take(4096);
        assert_eq!(a.recv_capacity(), 4096);
        assert_eq!(a.send_capacity(), 4096);
        pool.put(4096, a);
        pool.put(1024, pool_socket(1024));
        pool.put(4096, pool_socket(4096));
        assert_eq!(pool.len(), MAX_SPARE, "bounded");
        // A size that was kept comes back; one that was not (dropped over the bound)
        // is made new, with its own size.
        let b = pool.take(1024);
        assert_eq!(b.recv_capacity(), 1024);
        assert_eq!(pool.len(), 1);
        let c = pool.take(2048);
        assert_eq!(c.send_capacity(), 2048);
        assert_eq!(pool.len(), 1);
    }

    #[test]
    fn open_sockets_are_never_kept() {
        let mut pool = SocketPool::default();
        let mut listening = pool.take(4096);
        listening.listen(endpoint(80)).unwrap();
        assert!(listening.is_open());
        pool.put(4096, listening);
        assert_eq!(pool.len(), 0, "a listening socket would take another SYN");
        // Aborted, it is closed and may be kept.
        let mut aborted = pool.take(4096);
        aborted.listen(endpoint(81)).unwrap();
        aborted.abort();
        pool.put(4096, aborted);
        assert_eq!(pool.len(), 1);
    }

    /// Two sockets of one interface on smoltcp's loopback device, run until
    /// `done` holds (or a bounded number of rounds).
    fn run(
        iface: &mut Interface,
        dev: &mut Loopback,
        sockets: &mut SocketSet<'static>,
        mut done: impl FnMut(&mut SocketSet<'static>) -> bool,
    ) {
        for ms in 0..200 {
            iface.poll(Instant::from_millis(ms), dev, sockets);
            if done(sockets) {
                return;
            }
        }
        panic!("the loopback connection did not get there");
    }

    /// A socket that held another connection's unread and unsent bytes carries none
    /// of them into the next connection.
    #[test]
    fn a_reused_socket_carries_nothing_of_its_last_connection() {
        let mut dev = Loopback::new(Medium::Ip);
        let mut iface = Interface::new(
            Config::new(HardwareAddress::Ip),
            &mut dev,
            Instant::from_millis(0),
        );
        iface.update_ip_addrs(|a| {
            a.push(IpCidr::new(IpAddress::v4(10, 0, 0, 1), 24)).unwrap();
        });
        let mut sockets = SocketSet::new(Vec::new());
        let mut pool = SocketPool::default();

        let connect = |sockets: &mut SocketSet<'static>,
                       iface: &mut Interface,
                       dev: &mut Loopback,
                       server: tcp::Socket<'static>,
                       port: u16| {
            let mut server = server;
            server
                .listen(IpListenEndpoint {
                    addr: Some(IpAddress::v4(10, 0, 0, 1)),
                    port: 80,
                })
                .unwrap();
            let s = sockets.add(server);
            let mut client = tcp::Socket::new(
                tcp::SocketBuffer::new(vec![0; 4096]),
                tcp::SocketBuffer::new(vec![0; 4096]),
            );
            client
                .connect(iface.context(), (IpAddress::v4(10, 0, 0, 1), 80), port)
                .unwrap();
            let c = sockets.add(client);
            run(iface, dev, sockets, |set| {
                set.get::<tcp::Socket>(s).state() == tcp::State::Established
                    && set.get::<tcp::Socket>(c).state() == tcp::State::Established
            });
            (s, c)
        };

        // First connection: the client sends bytes the server never reads, and the
        // server queues bytes the client never takes, then the server's side is cut.
        let (s, c) = connect(&mut sockets, &mut iface, &mut dev, pool.take(4096), 4000);
        sockets
            .get_mut::<tcp::Socket>(c)
            .send_slice(b"old request")
            .unwrap();
        run(&mut iface, &mut dev, &mut sockets, |set| {
            set.get::<tcp::Socket>(s).recv_queue() > 0
        });
        sockets
            .get_mut::<tcp::Socket>(s)
            .send_slice(b"old answer")
            .unwrap();
        sockets.get_mut::<tcp::Socket>(s).abort();
        iface.poll(Instant::from_millis(300), &mut dev, &mut sockets);
        let smoltcp::socket::Socket::Tcp(old) = sockets.remove(s) else {
            panic!("not a TCP socket");
        };
        sockets.remove(c);
        pool.put(4096, old);
        assert_eq!(pool.len(), 1);

        // Second connection on the kept socket: only its own bytes, both ways.
        let (s, c) = connect(&mut sockets, &mut iface, &mut dev, pool.take(4096), 4001);
        assert_eq!(pool.len(), 0, "the kept socket was used");
        assert_eq!(sockets.get::<tcp::Socket>(s).recv_queue(), 0);
        assert_eq!(sockets.get::<tcp::Socket>(s).send_queue(), 0);
        sockets
            .get_mut::<tcp::Socket>(c)
            .send_slice(b"new")
            .unwrap();
        sockets
            .get_mut::<tcp::Socket>(s)
            .send_slice(b"fresh")
            .unwrap();
        run(&mut iface, &mut dev, &mut sockets, |set| {
            set.get::<tcp::Socket>(s).recv_queue() == 3
                && set.get::<tcp::Socket>(c).recv_queue() == 5
        });
        let mut buf = [0u8; 64];
        let n = sockets
            .get_mut::<tcp::Socket>(s)
            .recv_slice(&mut buf)
            .unwrap();
        assert_eq!(&buf[..n], b"new");
        let n = sockets
            .get_mut::<tcp::Socket>(c)
            .recv_slice(&mut buf)
            .unwrap();
        assert_eq!(&buf[..n], b"fresh");
    }

    /// Red team (session 16, held): a socket kept from an orderly close (TIME-WAIT, the
    /// sandbox's last bytes never read) listens for its next destination only: a
    /// connection to its last one is not taken, and the one it takes starts empty.
    #[test]
    fn a_socket_kept_from_time_wait_takes_only_its_next_destination() {
        let mut dev = Loopback::new(Medium::Ip);
        let mut iface = Interface::new(
            Config::new(HardwareAddress::Ip),
            &mut dev,
            Instant::from_millis(0),
        );
        iface.update_ip_addrs(|a| {
            a.push(IpCidr::new(IpAddress::v4(10, 0, 0, 1), 24)).unwrap();
        });
        let mut sockets = SocketSet::new(Vec::new());
        let mut pool = SocketPool::default();
        let server_at = |port| IpListenEndpoint {
            addr: Some(IpAddress::v4(10, 0, 0, 1)),
            port,
        };
        let client = |iface: &mut Interface, port: u16, local: u16| {
            let mut c = tcp::Socket::new(
                tcp::SocketBuffer::new(vec![0; 4096]),
                tcp::SocketBuffer::new(vec![0; 4096]),
            );
            c.connect(iface.context(), (IpAddress::v4(10, 0, 0, 1), port), local)
                .unwrap();
            c
        };
        let state = |set: &SocketSet<'static>, h| set.get::<tcp::Socket>(h).state();

        // The first connection, to port 80: the client's bytes stay unread, the server
        // closes first and ends in TIME-WAIT.
        let mut server = pool.take(4096);
        server.listen(server_at(80)).unwrap();
        let s = sockets.add(server);
        let c = sockets.add(client(&mut iface, 80, 5000));
        run(&mut iface, &mut dev, &mut sockets, |set| {
            state(set, s) == tcp::State::Established && state(set, c) == tcp::State::Established
        });
        sockets
            .get_mut::<tcp::Socket>(c)
            .send_slice(b"old upload")
            .unwrap();
        run(&mut iface, &mut dev, &mut sockets, |set| {
            set.get::<tcp::Socket>(s).recv_queue() > 0
        });
        sockets.get_mut::<tcp::Socket>(s).close();
        sockets.get_mut::<tcp::Socket>(c).close();
        run(&mut iface, &mut dev, &mut sockets, |set| {
            state(set, s) == tcp::State::TimeWait
        });
        assert!(
            sockets.get::<tcp::Socket>(s).can_recv(),
            "unread bytes kept"
        );
        let smoltcp::socket::Socket::Tcp(old) = sockets.remove(s) else {
            panic!("not a TCP socket");
        };
        sockets.remove(c);
        pool.put(4096, old);
        assert_eq!(pool.len(), 1, "a TIME-WAIT socket is closed: kept");

        // Reused for port 443: a connection to port 80 again is not taken by it.
        let mut server = pool.take(4096);
        assert_eq!(pool.len(), 0);
        server.listen(server_at(443)).unwrap();
        let s = sockets.add(server);
        let stale = sockets.add(client(&mut iface, 80, 5001));
        run(&mut iface, &mut dev, &mut sockets, |set| {
            state(set, stale) == tcp::State::Closed
        });
        assert_eq!(state(&sockets, s), tcp::State::Listen);
        let c = sockets.add(client(&mut iface, 443, 5002));
        run(&mut iface, &mut dev, &mut sockets, |set| {
            state(set, s) == tcp::State::Established && state(set, c) == tcp::State::Established
        });
        let server = sockets.get::<tcp::Socket>(s);
        assert_eq!(
            server.remote_endpoint().map(|e| e.port),
            Some(5002),
            "the new connection's peer"
        );
        assert_eq!(server.local_endpoint().map(|e| e.port), Some(443));
        assert_eq!(server.recv_queue(), 0);
        assert_eq!(server.send_queue(), 0);
        sockets
            .get_mut::<tcp::Socket>(c)
            .send_slice(b"new")
            .unwrap();
        run(&mut iface, &mut dev, &mut sockets, |set| {
            set.get::<tcp::Socket>(s).recv_queue() == 3
        });
        let mut buf = [0u8; 64];
        let n = sockets
            .get_mut::<tcp::Socket>(s)
            .recv_slice(&mut buf)
            .unwrap();
        assert_eq!(&buf[..n], b"new");
    }

    fn pool_socket(buffers: usize) -> tcp::Socket<'static> {
        SocketPool::default().take(buffers)
    }
}
