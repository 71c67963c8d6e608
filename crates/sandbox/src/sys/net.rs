//! Network interfaces: loopback, the TUN device, addresses and routes (ioctls).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::check;

const IFF_UP_RUNNING: libc::c_short = 0x1 | 0x40; // IFF_UP | IFF_RUNNING

/// Brings the loopback interface of the current network namespace up.
pub fn loopback_up() -> io::Result<()> {
    let sock = ioctl_socket()?;
    let mut req = ifreq("lo");
    // SAFETY: req is a valid ifreq naming "lo"; the ioctl fills ifru_flags.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) })?;
    // SAFETY: ifru_flags is the union member SIOCGIFFLAGS just filled.
    unsafe { req.ifr_ifru.ifru_flags |= IFF_UP_RUNNING };
    // SAFETY: req is a valid ifreq with the new flags.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) }).map(drop)
}

/// A socket to address the interface ioctls to (any socket of the namespace serves).
fn ioctl_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket takes integers.
    let sock =
        check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: the kernel just returned this descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(sock) })
}

/// An `ifreq` naming `name` (at most 15 bytes).
fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain data.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req
        .ifr_name
        .iter_mut()
        .zip(name.bytes().take(libc::IFNAMSIZ - 1))
    {
        *dst = src as libc::c_char;
    }
    req
}

/// A `sockaddr` holding an IPv4 address, as the interface ioctls expect.
fn sockaddr_v4(addr: std::net::Ipv4Addr) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        // AF_INET is 2: it fits.
        sin_family: libc::sa_family_t::try_from(libc::AF_INET).unwrap_or_default(),
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(addr).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr have the same size; both are plain data.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

/// Creates the TUN interface `name` in the caller's network namespace and returns its
/// non-blocking packet descriptor. Every read and write is one IP packet after a
/// 10-byte `virtio_net_hdr` (IFF_VNET_HDR), through which the writer can tell the
/// kernel that a TCP checksum need not be computed (the packet never leaves the host).
///
/// The open must happen inside the sandbox's network namespace (the device belongs to
/// the namespace of whoever opened `/dev/net/tun`) and before the file-system identity
/// changes, since `/dev/net/tun` is checked against the host's permissions.
pub fn tun_create(name: &str) -> io::Result<OwnedFd> {
    let path = c"/dev/net/tun";
    // SAFETY: path is a valid C string; open returns a new descriptor or -1.
    let fd = check(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: the kernel just returned this descriptor.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = ifreq(name);
    // 0x5001: it fits the 16-bit flags field.
    req.ifr_ifru.ifru_flags =
        libc::c_short::try_from(libc::IFF_TUN | libc::IFF_NO_PI | libc::IFF_VNET_HDR)
            .unwrap_or_default();
    // SAFETY: req is a valid ifreq naming the interface with the TUN flags set.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &req) })?;
    Ok(fd)
}

/// Gives interface `name` an IPv4 address, netmask and MTU, brings it up, and routes
/// everything else through `gateway` on it.
pub fn iface_configure(
    name: &str,
    addr: std::net::Ipv4Addr,
    netmask: std::net::Ipv4Addr,
    mtu: i32,
    gateway: std::net::Ipv4Addr,
) -> io::Result<()> {
    let sock = ioctl_socket()?;
    let set = |request: libc::c_ulong, req: &libc::ifreq| {
        // SAFETY: req is a valid ifreq with the union member this request reads set.
        check(unsafe { libc::ioctl(sock.as_raw_fd(), request, req) }).map(drop)
    };
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_addr = sockaddr_v4(addr);
    set(libc::SIOCSIFADDR, &req)?;
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_netmask = sockaddr_v4(netmask);
    set(libc::SIOCSIFNETMASK, &req)?;
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_mtu = mtu;
    set(libc::SIOCSIFMTU, &req)?;
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_flags = IFF_UP_RUNNING;
    set(libc::SIOCSIFFLAGS, &req)?;

    // SAFETY: rtentry is plain data; rt_dev stays null (the gateway is on-link).
    let mut route: libc::rtentry = unsafe { std::mem::zeroed() };
    route.rt_dst = sockaddr_v4(std::net::Ipv4Addr::UNSPECIFIED);
    route.rt_genmask = sockaddr_v4(std::net::Ipv4Addr::UNSPECIFIED);
    route.rt_gateway = sockaddr_v4(gateway);
    route.rt_flags = libc::RTF_UP | libc::RTF_GATEWAY;
    // SAFETY: route is a valid rtentry for a default route through an on-link gateway.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCADDRT, &route) }).map(drop)
}

/// Sets an integer `SOL_SOCKET` option.
fn set_socket_int(
    fd: std::os::fd::BorrowedFd<'_>,
    option: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    let len = libc::socklen_t::try_from(std::mem::size_of::<libc::c_int>())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: the option value is a c_int that outlives the call, `len` its size.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            option,
            (&raw const value).cast(),
            len,
        )
    })
    .map(drop)
}

/// Sets a socket's receive buffer with `SO_RCVBUFFORCE`: like `SO_RCVBUF`, but past
/// `net.core.rmem_max`; the kernel allows it only with `CAP_NET_ADMIN` over the
/// socket's network namespace (EPERM otherwise, and the socket is left as it was).
pub fn set_receive_buffer_force(
    fd: std::os::fd::BorrowedFd<'_>,
    bytes: libc::c_int,
) -> io::Result<()> {
    set_socket_int(fd, libc::SO_RCVBUFFORCE, bytes)
}

/// Sets a socket's `SO_PEEK_OFF`: where the next `MSG_PEEK` read starts, counted from
/// the head of its receive queue (the kernel moves it on by what each peek returns,
/// and back by what a plain read takes off the queue).
pub fn set_peek_offset(fd: std::os::fd::BorrowedFd<'_>, offset: libc::c_int) -> io::Result<()> {
    set_socket_int(fd, libc::SO_PEEK_OFF, offset)
}

/// Drops up to `len` bytes from the head of a TCP socket's receive queue without
/// copying them (`MSG_TRUNC`), never blocking; returns how many were dropped.
pub fn discard(fd: std::os::fd::BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    // SAFETY: with MSG_TRUNC, TCP drops the bytes without writing to the buffer, so a
    // null buffer is never dereferenced.
    let n = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            std::ptr::null_mut(),
            len,
            libc::MSG_TRUNC | libc::MSG_DONTWAIT,
        )
    };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}
