//! Descriptors passed over unix sockets (SCM_RIGHTS), for front ends that hand a
//! command's stdio to the supervisor of a persistent sandbox.

use std::os::fd::{BorrowedFd, OwnedFd};

use crate::sys;

/// The most descriptors one message carries.
pub const MAX_FDS: usize = 4;

/// Sends `data` with `fds` (at most [`MAX_FDS`]) in one message; returns how much of
/// `data` went (on a stream socket the rest is for the caller to write).
pub fn send(sock: BorrowedFd<'_>, data: &[u8], fds: &[BorrowedFd<'_>]) -> std::io::Result<usize> {
    sys::send_msg(sock, data, fds)
}

/// Receives one message (on a stream socket: what is there, up to `buf`'s size) with
/// the descriptors that came with it. `Ok((0, []))` when the peer closed.
pub fn recv(sock: BorrowedFd<'_>, buf: &mut [u8]) -> std::io::Result<(usize, Vec<OwnedFd>)> {
    sys::recv_msg(sock, buf)
}

/// Whether a descriptor received is a path-only one (`O_PATH`): it reads and writes
/// nothing, but names its file, which whoever holds it may open again through
/// `/proc/self/fd/N` with their own rights.
pub fn is_path_only(fd: BorrowedFd<'_>) -> std::io::Result<bool> {
    Ok(sys::status_flags(fd)? & libc::O_PATH != 0)
}

/// The pid, uid and gid of a connected unix socket's peer, as the kernel recorded
/// them when the peer connected or listened (`SO_PEERCRED`), in this process's
/// namespaces: pid 0 when the peer's is not visible here.
pub fn peer_credentials(sock: BorrowedFd<'_>) -> std::io::Result<(i32, u32, u32)> {
    sys::peer_cred(sock)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    use super::*;

    #[test]
    fn a_peer_is_known_by_its_credentials() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (pid, uid, gid) = peer_credentials(a.as_fd()).unwrap();
        assert_eq!(pid, i32::try_from(std::process::id()).unwrap());
        assert_eq!((uid, gid), crate::real_ids());
    }

    #[test]
    fn descriptors_travel_with_their_message() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (r, mut w) = std::io::pipe().unwrap();
        send(a.as_fd(), b"hello", &[r.as_fd(), w.as_fd()]).unwrap();
        drop(r);
        let mut buf = [0u8; 16];
        let (n, fds) = recv(b.as_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello");
        assert_eq!(fds.len(), 2);
        assert!(!is_path_only(fds[0].as_fd()).unwrap());
        w.write_all(b"x").unwrap();
        let mut got = [0u8; 1];
        std::fs::File::from(fds.into_iter().next().unwrap())
            .read_exact(&mut got)
            .unwrap();
        assert_eq!(&got, b"x");
        drop(a);
        assert_eq!(recv(b.as_fd(), &mut buf).unwrap().0, 0);
    }

    #[test]
    fn a_path_only_descriptor_is_told_from_an_open_one() {
        use std::os::unix::fs::OpenOptionsExt;
        let path_only = std::fs::File::options()
            .read(true)
            .custom_flags(libc::O_PATH)
            .open("/etc/passwd")
            .unwrap();
        assert!(is_path_only(path_only.as_fd()).unwrap());
        let open = std::fs::File::open("/etc/passwd").unwrap();
        assert!(!is_path_only(open.as_fd()).unwrap());
    }
}
