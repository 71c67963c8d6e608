//! Messages with descriptors over unix sockets, waiting on several descriptors, and
//! signals as a descriptor: what a persistent sandbox's init needs to serve requests.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use libc::{c_int, c_long, c_uint};

use super::{check, check_long};

/// The most descriptors one message carries.
const MAX_FDS: usize = crate::fdpass::MAX_FDS;
/// CMSG_SPACE(MAX_FDS * sizeof(int)) on 64-bit Linux, in u64 words.
const CONTROL_WORDS: usize = (16 + MAX_FDS * 4).div_ceil(8);

/// Sends `data` with up to [`MAX_FDS`] descriptors (SCM_RIGHTS) in one message;
/// returns how much of `data` went (all of it on a datagram socket).
pub fn send_msg(sock: BorrowedFd<'_>, data: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<usize> {
    if fds.len() > MAX_FDS {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut iov = libc::iovec {
        iov_base: data.as_ptr().cast_mut().cast(),
        iov_len: data.len(),
    };
    let mut control = [0u64; CONTROL_WORDS];
    // SAFETY: msghdr is plain data; the pointers set below refer to live buffers.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        let count = c_uint::try_from(fds.len() * 4).unwrap_or(0);
        msg.msg_control = control.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE only computes a size.
        msg.msg_controllen = unsafe { libc::CMSG_SPACE(count) } as usize;
        // SAFETY: msg_control has room for one cmsg of `fds.len()` ints (CONTROL_WORDS
        // covers MAX_FDS), so CMSG_FIRSTHDR is non-null and CMSG_DATA points inside it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(count) as usize;
            let data = libc::CMSG_DATA(cmsg).cast::<c_int>();
            for (i, fd) in fds.iter().enumerate() {
                std::ptr::write_unaligned(data.add(i), fd.as_raw_fd());
            }
        }
    }
    loop {
        // SAFETY: msg is fully initialised and its buffers outlive the call.
        let ret = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        match check_long(ret as c_long) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other.map(|n| usize::try_from(n).unwrap_or(0)),
        }
    }
}

/// Receives one message into `buf` with the descriptors it carries (close-on-exec).
/// `Ok((0, []))` when the peer closed.
pub fn recv_msg(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u64; CONTROL_WORDS];
    // SAFETY: msghdr is plain data; the pointers set below refer to live buffers.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = CONTROL_WORDS * 8;
    let n = loop {
        // SAFETY: msg's buffers are live and sized as declared.
        let ret = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        match check_long(ret as c_long) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => break other?,
        }
    };
    let mut fds = Vec::new();
    // SAFETY: the kernel filled msg_control up to msg_controllen; CMSG_FIRSTHDR and
    // CMSG_NXTHDR stay within it, and each header's length bounds the ints read.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let header = libc::CMSG_LEN(0) as usize;
                let count = ((*cmsg).cmsg_len.saturating_sub(header)) / 4;
                let data = libc::CMSG_DATA(cmsg).cast::<c_int>();
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
        return Err(io::Error::from_raw_os_error(libc::EMSGSIZE));
    }
    Ok((usize::try_from(n).unwrap_or(0), fds))
}

/// Waits until one of `fds` is readable or hung up (or `timeout_ms` passes, -1 for
/// ever); returns each one's `revents`.
pub fn poll_read(fds: &[BorrowedFd<'_>], timeout_ms: c_int) -> io::Result<Vec<i16>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        // SAFETY: pfds is a valid array of pfds.len() pollfd structures.
        let ret = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms) };
        match check(ret) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
            Ok(_) => return Ok(pfds.iter().map(|p| p.revents).collect()),
        }
    }
}

/// A descriptor that reads the signals of `set` (blocked by the caller) as they come.
pub fn signalfd(set: &libc::sigset_t) -> io::Result<OwnedFd> {
    // SAFETY: set is a valid sigset; -1 asks for a new descriptor.
    let fd = check(unsafe { libc::signalfd(-1, set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) })?;
    // SAFETY: the kernel just returned this descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One signal read from a signalfd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalInfo {
    pub signal: c_int,
    /// The sender as this process's pid namespace sees it (`ssi_pid`): 0 for the
    /// kernel or a process outside the namespace, but also whatever a process put
    /// there with `rt_sigqueueinfo` (`SI_QUEUE`): only [`SignalInfo::code`] tells.
    pub sender: u32,
    /// How it was sent (`ssi_code`): `SI_USER` for `kill`/`pidfd_send_signal`, whose
    /// sender the kernel fills in; `SI_QUEUE` and other negative codes for senders
    /// that chose the fields; positive for the kernel's own (I/O notifications, a
    /// child's end…).
    pub code: i32,
}

/// Every pending signal of a signalfd.
pub fn signalfd_read(fd: BorrowedFd<'_>) -> Vec<SignalInfo> {
    let mut out = Vec::new();
    loop {
        // SAFETY: signalfd_siginfo is plain data filled by the kernel.
        let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: info is a valid buffer of `size` bytes.
        let n = unsafe { libc::read(fd.as_raw_fd(), (&raw mut info).cast(), size) };
        if n != size as isize {
            return out;
        }
        out.push(SignalInfo {
            signal: c_int::try_from(info.ssi_signo).unwrap_or(0),
            sender: info.ssi_pid,
            code: info.ssi_code,
        });
    }
}
