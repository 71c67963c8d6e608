//! The mediated network in a Docker or Podman container.
//!
//! The engine runs the container with `--network none`: a network namespace of its
//! own with only a loopback interface. Before the supervisor says go to our init in
//! the container (`crate::engine_init`), it makes the same TUN interface there as
//! the native sandbox's init makes in its own namespace ([`attach_tun`]): same
//! name, addresses, MTU and default route, its packet side served by the same
//! mediator. The container's processes have no capabilities (the engine drops them
//! all), so they cannot add an interface or a route of their own: tun0 is their
//! only way out.
//!
//! The interface is made by a forked helper (`sys::tun_in_namespace`), never by the
//! supervisor itself, which stays in its own namespaces. The helper joins the
//! namespace of the very process that connected to the hand-over socket (its pidfd,
//! from `SO_PEERPIDFD`), and, where that namespace is owned by another user
//! namespace (rootless Podman's), that user namespace first: only there does it
//! have the capability to make an interface. A namespace that is the supervisor's
//! own is refused: the interface would be the host's.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

use crate::sys;

/// How the interface reached the container, for the record (`network_attach`).
pub const ATTACH: &str = "tun0-in-container-netns";

/// A namespace's identity: the device and inode of its `nsfs` file.
pub type NsId = (u64, u64);

/// What the supervisor knows of its own namespaces and the container's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NsFacts {
    pub own_net: NsId,
    pub their_net: NsId,
    pub own_user: NsId,
    /// The user namespace owning the container's network namespace.
    pub owner_user: NsId,
}

/// Whether the helper joins the owning user namespace before the network
/// namespace (pure). The container's network namespace must not be ours.
pub fn join_owner(facts: &NsFacts) -> Result<bool, String> {
    if facts.own_net == facts.their_net {
        return Err(
            "the container runs in the supervisor's own network namespace (the engine's host network), where an interface would be the host's"
                .into(),
        );
    }
    Ok(facts.owner_user != facts.own_user)
}

/// Makes the TUN interface `tun` in the network namespace of the process that
/// connected to `peer` (pid `pid` in our pid namespace, which must still be that
/// process), and returns its packet side for the mediator. The error says what
/// failed.
pub fn attach_tun(
    peer: BorrowedFd<'_>,
    pid: i32,
    tun: crate::spec::TunConfig,
) -> Result<OwnedFd, String> {
    // The peer's own pidfd; before Linux 6.5, one opened by pid, checked below.
    let (pidfd, by_pid) = match sys::peer_pidfd(peer) {
        Ok(fd) => (fd, false),
        Err(_) => (
            sys::pidfd_open(pid)
                .map_err(|e| format!("cannot open the container's init (pid {pid}): {e}"))?,
            true,
        ),
    };
    let netns = std::fs::File::open(format!("/proc/{pid}/ns/net")).map_err(|e| {
        format!("cannot open the network namespace of the container's init (pid {pid}): {e}")
    })?;
    // Opened while the process behind the pidfd was alive, so /proc/PID was that
    // process; by pid, the connection still open says the peer is still there (our
    // init holds it until our go).
    if sys::pidfd_exited(pidfd.as_fd()) || (by_pid && sys::peer_closed(peer)) {
        return Err(format!("the container's init (pid {pid}) ended"));
    }
    let id = |m: std::fs::Metadata| (m.dev(), m.ino());
    let stat = |path: &str| {
        std::fs::metadata(path)
            .map(id)
            .map_err(|e| format!("cannot read {path}: {e}"))
    };
    let owner = sys::ns_owner(netns.as_fd()).map_err(|e| {
        format!("cannot find the user namespace owning the container's network namespace: {e}")
    })?;
    let facts = NsFacts {
        own_net: stat("/proc/self/ns/net")?,
        their_net: netns
            .metadata()
            .map(id)
            .map_err(|e| format!("cannot read the container's network namespace: {e}"))?,
        own_user: stat("/proc/self/ns/user")?,
        owner_user: std::fs::File::from(
            owner
                .try_clone()
                .map_err(|e| format!("cannot duplicate a descriptor: {e}"))?,
        )
        .metadata()
        .map(id)
        .map_err(|e| format!("cannot read the owning user namespace: {e}"))?,
    };
    let join = join_owner(&facts)?;
    let settings = sys::TunSettings {
        name: tun.name,
        address: tun.address,
        netmask: tun.netmask,
        mtu: i32::from(tun.mtu),
        gateway: tun.gateway,
    };
    sys::tun_in_namespace(join.then(|| owner.as_fd()), netns.as_fd(), settings).map_err(
        |(step, e)| match sys::TUN_STEPS.get(step) {
            Some(step) => format!("cannot {step}: {e}"),
            None => format!("cannot start the helper that makes the TUN interface: {e}"),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_is_joined_only_when_it_is_another_user_namespace() {
        let facts = NsFacts {
            own_net: (4, 1),
            their_net: (4, 2),
            own_user: (4, 10),
            owner_user: (4, 10),
        };
        assert_eq!(join_owner(&facts), Ok(false));
        let rootless = NsFacts {
            owner_user: (4, 11),
            ..facts
        };
        assert_eq!(join_owner(&rootless), Ok(true));
    }

    #[test]
    fn the_supervisor_s_own_network_namespace_is_refused() {
        let host = NsFacts {
            own_net: (4, 1),
            their_net: (4, 1),
            own_user: (4, 10),
            owner_user: (4, 10),
        };
        assert!(join_owner(&host).unwrap_err().contains("host network"));
    }

    #[test]
    fn a_tun_in_our_own_namespace_is_refused_before_anything_is_made() {
        // A peer in our own namespaces (this test process): refused as the host's.
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let tun = crate::spec::TunConfig {
            name: "vgtest0",
            address: std::net::Ipv4Addr::new(10, 0, 0, 2),
            netmask: std::net::Ipv4Addr::new(255, 255, 255, 0),
            gateway: std::net::Ipv4Addr::new(10, 0, 0, 1),
            mtu: 1500,
        };
        let e = attach_tun(a.as_fd(), std::process::id().cast_signed(), tun).unwrap_err();
        assert!(e.contains("host network"), "{e}");
    }
}
