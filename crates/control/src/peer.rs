//! Who is at the other end of a connection: `SO_PEERCRED`, the kernel's record
//! of the connecting process's credentials at `connect(2)` time. The one unsafe
//! block of this crate; `UnixStream::peer_cred` would replace it once stable.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

/// The credentials of a connected peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

/// The peer's credentials as the kernel recorded them when it connected.
pub fn peer_of(stream: &UnixStream) -> std::io::Result<Peer> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: u32::MAX,
    };
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<libc::ucred>())
        .map_err(|_| std::io::Error::other("ucred size does not fit socklen_t"))?;
    #[allow(unsafe_code)]
    // SAFETY: the descriptor is a live socket borrowed from `stream`; `cred` and
    // `len` are valid, writable and `len` holds `cred`'s exact size, so the
    // kernel writes at most that many bytes into it.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &raw mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Peer {
        pid: cred.pid,
        uid: cred.uid,
        gid: cred.gid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_pair_reports_this_process() {
        let (a, _b) = UnixStream::pair().unwrap();
        let peer = peer_of(&a).unwrap();
        assert_eq!(peer.pid, i32::try_from(std::process::id()).unwrap());
        // SAFETY-free way to get our uid: the owner of a file we create.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"").unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(peer.uid, std::fs::metadata(&file).unwrap().uid());
    }
}
