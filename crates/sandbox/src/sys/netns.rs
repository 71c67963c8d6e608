//! Another process's network namespace: its descriptor, the user namespace that
//! owns it, and a TUN interface made there by a short-lived forked helper, so that
//! the caller never enters that namespace itself.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use libc::c_int;

use super::check;

/// `SO_PEERPIDFD` (Linux 6.5): a pidfd of a unix socket's peer, the process that
/// connected (asm-generic value, as on x86-64 and arm64).
const SO_PEERPIDFD: c_int = 77;

/// `NS_GET_USERNS`, `_IO(0xb7, 0x1)`: the user namespace owning a namespace.
const NS_GET_USERNS: libc::c_ulong = 0xb701;

/// A pidfd of the process that connected to `sock` (`SO_PEERPIDFD`): the very
/// process, never another one that got its pid later.
pub fn peer_pidfd(sock: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let fd = super::fd::sockopt_int(sock, SO_PEERPIDFD)?;
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    // SAFETY: the kernel just made this descriptor for us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `NS_GET_ID`, `_IOR(0xb7, 0xd, __u64)`: a namespace's id.
#[cfg(vg_exec_bpf)]
const NS_GET_ID: libc::c_ulong = 0x8008_b70d;

/// The id the kernel gave a namespace (`NS_GET_ID`, Linux 6.18+ for pid
/// namespaces): never given to another while the machine runs.
#[cfg(vg_exec_bpf)]
pub fn ns_get_id(ns: BorrowedFd<'_>) -> io::Result<u64> {
    let mut id = 0u64;
    // SAFETY: the ioctl writes one u64 into id.
    check(unsafe { libc::ioctl(ns.as_raw_fd(), NS_GET_ID, &mut id) })?;
    Ok(id)
}

/// The user namespace that owns the namespace `ns` (`NS_GET_USERNS`).
pub fn ns_owner(ns: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: an ioctl without an argument on a live namespace descriptor.
    let fd = check(unsafe { libc::ioctl(ns.as_raw_fd(), NS_GET_USERNS) })?;
    // SAFETY: the kernel just made this descriptor for us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What the helper of [`tun_in_namespace`] was doing when it failed.
pub const TUN_STEPS: [&str; 5] = [
    "join the user namespace that owns the container's network namespace",
    "join the container's network namespace",
    "create the TUN interface there",
    "configure the TUN interface",
    "send the TUN interface back",
];

/// The TUN interface's settings, as [`super::iface_configure`] takes them.
#[derive(Debug, Clone, Copy)]
pub struct TunSettings<'a> {
    pub name: &'a str,
    pub address: std::net::Ipv4Addr,
    pub netmask: std::net::Ipv4Addr,
    pub mtu: i32,
    pub gateway: std::net::Ipv4Addr,
}

/// Creates and configures the TUN interface `tun.name` in the network namespace
/// `netns` (after joining `userns` first when given: the user namespace that owns
/// it, where ours has no capabilities), and returns its packet descriptor.
///
/// The work is done by a forked child, which joins the namespaces, makes the
/// interface as the native sandbox's init does, sends the descriptor over a
/// socket pair, and exits: the calling process (which may have threads) never
/// leaves its own namespaces. On failure the error says the step (an index into
/// [`TUN_STEPS`]) and the child's errno.
pub fn tun_in_namespace(
    userns: Option<BorrowedFd<'_>>,
    netns: BorrowedFd<'_>,
    tun: TunSettings<'_>,
) -> Result<OwnedFd, (usize, io::Error)> {
    let setup = |e: io::Error| (usize::MAX, e);
    let (ours, theirs) = super::seqpacket_pair().map_err(setup)?;
    // SAFETY: the child only makes system calls on memory it already has (stack
    // values and the borrowed descriptors): no allocation, no lock, nothing a
    // thread of the parent could have held at the fork; it ends in `_exit`.
    let forked = unsafe { super::fork() }.map_err(setup)?;
    let Some(child) = forked else {
        drop(ours);
        if let Err((step, e)) = helper(userns, netns, tun, theirs.as_fd()) {
            let mut report = [0u8; 5];
            report[0] = u8::try_from(step).unwrap_or(u8::MAX);
            report[1..].copy_from_slice(&e.raw_os_error().unwrap_or(0).to_le_bytes());
            // SAFETY: writes five bytes from a live stack buffer.
            unsafe { libc::write(theirs.as_raw_fd(), report.as_ptr().cast(), report.len()) };
            super::exit_now(1);
        }
        super::exit_now(0);
    };
    drop(theirs);
    // One message: the descriptor, or the report of the step that failed. The
    // child's end closes when it exits, so this read always returns.
    let mut report = [0u8; 5];
    let got = loop {
        match super::recv_msg(ours.as_fd(), &mut report) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => break other,
        }
    };
    let _ = loop {
        match super::waitpid(child, 0) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => break other,
        }
    };
    match got {
        Ok((_, fds)) if fds.len() == 1 => fds
            .into_iter()
            .next()
            .ok_or_else(|| setup(io::Error::from_raw_os_error(libc::EPROTO))),
        Ok((5, _)) => {
            let errno = i32::from_le_bytes([report[1], report[2], report[3], report[4]]);
            Err((usize::from(report[0]), io::Error::from_raw_os_error(errno)))
        }
        Ok(_) => Err(setup(io::Error::from_raw_os_error(libc::EPROTO))),
        Err(e) => Err(setup(e)),
    }
}

/// Makes `command` join the user namespace `userns` and then the network namespace
/// `netns` just before it executes (after its uid and gid changes), e.g. to reach
/// an abstract unix socket bound in another process's network namespace.
pub fn join_before_exec(command: &mut std::process::Command, userns: OwnedFd, netns: OwnedFd) {
    use std::os::unix::process::CommandExt;
    let hook = move || -> io::Result<()> {
        // SAFETY: setns takes a live namespace descriptor (both are owned by this
        // closure) and a flag.
        check(unsafe { libc::setns(userns.as_raw_fd(), libc::CLONE_NEWUSER) })?;
        // SAFETY: as above.
        check(unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) })?;
        Ok(())
    };
    // SAFETY: the hook runs in the forked child before exec and only makes two
    // system calls, which are async-signal-safe; it allocates nothing and takes
    // no lock.
    unsafe {
        command.pre_exec(hook);
    }
}

/// The forked helper's work (see [`tun_in_namespace`]).
fn helper(
    userns: Option<BorrowedFd<'_>>,
    netns: BorrowedFd<'_>,
    tun: TunSettings<'_>,
    reply: BorrowedFd<'_>,
) -> Result<(), (usize, io::Error)> {
    if let Some(userns) = userns {
        // SAFETY: setns takes a live namespace descriptor and a flag.
        check(unsafe { libc::setns(userns.as_raw_fd(), libc::CLONE_NEWUSER) })
            .map_err(|e| (0, e))?;
    }
    // SAFETY: as above.
    check(unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) }).map_err(|e| (1, e))?;
    let fd = super::tun_create(tun.name).map_err(|e| (2, e))?;
    super::iface_configure(tun.name, tun.address, tun.netmask, tun.mtu, tun.gateway)
        .map_err(|e| (3, e))?;
    super::send_fd(reply, fd.as_fd()).map_err(|e| (4, e))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn settings() -> TunSettings<'static> {
        TunSettings {
            name: "vgnstest0",
            address: std::net::Ipv4Addr::new(198, 18, 0, 2),
            netmask: std::net::Ipv4Addr::new(255, 255, 255, 0),
            mtu: 1500,
            gateway: std::net::Ipv4Addr::new(198, 18, 0, 1),
        }
    }

    /// A process in a network namespace of its own (root only), and that
    /// namespace.
    fn other_namespace() -> Option<(std::process::Child, std::fs::File)> {
        if super::super::getuid() != 0 {
            return None;
        }
        let mut child = std::process::Command::new("unshare")
            .args(["-n", "sleep", "30"])
            .spawn()
            .unwrap();
        let own = std::fs::read_link("/proc/self/ns/net").unwrap();
        let path = format!("/proc/{}/ns/net", child.id());
        for _ in 0..200 {
            if std::fs::read_link(&path).is_ok_and(|ns| ns != own) {
                return Some((child, std::fs::File::open(&path).unwrap()));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("unshare -n never made its namespace");
    }

    #[test]
    fn the_interface_is_made_in_the_other_namespace_and_not_in_ours() {
        let Some((mut child, netns)) = other_namespace() else {
            return;
        };
        let ns = |p: &str| std::fs::read_link(p).unwrap();
        let before = (
            ns("/proc/thread-self/ns/net"),
            ns("/proc/thread-self/ns/user"),
        );
        let fd = tun_in_namespace(None, netns.as_fd(), settings()).unwrap();
        // The caller never left its own namespaces (the helper did the work).
        let after = (
            ns("/proc/thread-self/ns/net"),
            ns("/proc/thread-self/ns/user"),
        );
        let theirs = std::fs::read_to_string(format!("/proc/{}/net/dev", child.id())).unwrap();
        let route = std::fs::read_to_string(format!("/proc/{}/net/route", child.id())).unwrap();
        let ours = std::fs::read_to_string("/proc/self/net/dev").unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(before, after);
        assert!(theirs.contains("vgnstest0:"), "{theirs}");
        assert!(!ours.contains("vgnstest0:"), "{ours}");
        // The default route through the gateway (198.18.0.1, in the kernel's byte
        // order) on the interface, as the native sandbox's init makes it.
        assert!(
            route
                .lines()
                .any(|l| l.starts_with("vgnstest0\t00000000\t010012C6")),
            "{route}"
        );
        // The packet side of a TUN device.
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
        assert_eq!(link, std::path::Path::new("/dev/net/tun"));
    }

    #[test]
    fn a_failed_step_is_named_with_its_errno() {
        let Some((mut child, netns)) = other_namespace() else {
            return;
        };
        // Our own user namespace cannot be joined (EINVAL): the helper stops at the
        // first step and says so; nothing is made.
        let own = std::fs::File::open("/proc/self/ns/user").unwrap();
        let (step, e) = tun_in_namespace(Some(own.as_fd()), netns.as_fd(), settings()).unwrap_err();
        let theirs = std::fs::read_to_string(format!("/proc/{}/net/dev", child.id())).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(TUN_STEPS[step], TUN_STEPS[0]);
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        assert!(!theirs.contains("vgnstest0:"), "{theirs}");
    }
}
