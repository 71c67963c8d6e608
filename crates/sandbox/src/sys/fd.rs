//! Descriptors: closing, duplicating, close-on-exec, pipes, polling, passing descriptors over unix sockets.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use libc::{c_int, c_long, c_uint};

use super::{check, check_long};

/// Closes descriptors `first..=last`.
///
/// # Safety
///
/// No object that owns a descriptor in that range (an `OwnedFd`, `File`, pipe end…)
/// may be used or dropped afterwards: it would act on a closed number, or on whatever
/// the kernel reuses it for.
pub unsafe fn close_range(first: c_uint, last: c_uint) -> io::Result<()> {
    // SAFETY: close_range takes integers; ownership is the caller's (see # Safety).
    check_long(unsafe { libc::syscall(libc::SYS_close_range, first, last, 0 as c_uint) }).map(drop)
}

/// `dup2(2)`: makes `to` a copy of `from`, closing what `to` was first.
///
/// # Safety
///
/// As for [`close_range`] on `to`: no object owning descriptor `to` may be used or
/// dropped afterwards.
pub unsafe fn dup2(from: RawFd, to: RawFd) -> io::Result<()> {
    // SAFETY: dup2 takes integers; an invalid `from` is reported as EBADF; ownership
    // of `to` is the caller's (see # Safety).
    check(unsafe { libc::dup2(from, to) }).map(drop)
}

/// True when the other end of a pipe we read from has been closed.
pub fn peer_closed(fd: BorrowedFd<'_>) -> bool {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: pfd is a valid pollfd array of length 1; timeout 0 never blocks.
    let ret = unsafe { libc::poll(&mut pfd, 1, 0) };
    ret == 1 && pfd.revents & libc::POLLHUP != 0
}

/// Marks every descriptor from `first` up close-on-exec.
pub fn cloexec_from(first: c_uint) -> io::Result<()> {
    // SAFETY: close_range takes integers; CLOSE_RANGE_CLOEXEC (4) only sets flags.
    match check_long(unsafe {
        libc::syscall(libc::SYS_close_range, first, c_uint::MAX, 4 as c_uint)
    }) {
        Ok(_) => Ok(()),
        // gVisor's kernel (runsc 20221219) knows close_range without its
        // CLOSE_RANGE_CLOEXEC flag: each open descriptor, as /proc names them.
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) => {
            let open: Vec<c_int> = std::fs::read_dir("/proc/self/fd")?
                .flatten()
                .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
                .filter(|fd| u32::try_from(*fd).is_ok_and(|fd| fd >= first))
                .collect();
            for fd in open {
                // SAFETY: F_SETFD with an integer flag on a descriptor number; a
                // number closed meanwhile (the directory's own) fails with EBADF.
                let ret = unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
                if ret == -1 && io::Error::last_os_error().raw_os_error() != Some(libc::EBADF) {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// A connected pair of `AF_UNIX` datagram-preserving sockets (close-on-exec).
pub fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: fds is a valid out-array of two ints.
    check(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    // SAFETY: the kernel just returned these two descriptors.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

const CMSG_SPACE_ONE_FD: usize = 24; // CMSG_SPACE(sizeof(int)) on 64-bit Linux
const INT_LEN: c_uint = 4; // sizeof(int)

/// A message header for a one-byte payload plus room for one SCM_RIGHTS descriptor;
/// the caller keeps `iov` and `control` alive while the header is used.
fn one_fd_msghdr(
    iov: &mut libc::iovec,
    control: &mut [u64; CMSG_SPACE_ONE_FD / 8],
) -> libc::msghdr {
    // SAFETY: msghdr is plain data; the pointers set below refer to the caller's buffers.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = CMSG_SPACE_ONE_FD;
    msg
}

/// Sends one descriptor over a unix socket (SCM_RIGHTS) with a one-byte payload.
pub fn send_fd(sock: BorrowedFd<'_>, fd: BorrowedFd<'_>) -> io::Result<()> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = [0u64; CMSG_SPACE_ONE_FD / 8];
    let msg = one_fd_msghdr(&mut iov, &mut control);
    // SAFETY: msg_control has room for one cmsg carrying one int (CMSG_SPACE above),
    // so CMSG_FIRSTHDR is non-null and CMSG_DATA points inside `control`.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(INT_LEN) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<c_int>(), fd.as_raw_fd());
    }
    // SAFETY: msg is fully initialised and its buffers outlive the call.
    check_long(unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, 0) } as c_long).map(drop)
}

/// Receives one descriptor sent with [`send_fd`]; `None` when the peer closed first.
pub fn recv_fd(sock: BorrowedFd<'_>) -> io::Result<Option<OwnedFd>> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = [0u64; CMSG_SPACE_ONE_FD / 8];
    let mut msg = one_fd_msghdr(&mut iov, &mut control);
    // SAFETY: msg's buffers are live and sized as declared; MSG_CMSG_CLOEXEC only
    // sets a flag on received descriptors.
    let n = check_long(
        unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) } as c_long,
    )?;
    if n == 0 {
        return Ok(None);
    }
    // SAFETY: the kernel filled msg_control; CMSG_FIRSTHDR checks controllen before
    // returning a header, and we check level/type/len before reading the int.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
            || (*cmsg).cmsg_len < libc::CMSG_LEN(INT_LEN) as usize
        {
            return Err(io::Error::from_raw_os_error(libc::EBADMSG));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<c_int>());
        Ok(Some(OwnedFd::from_raw_fd(fd)))
    }
}

/// What [`poll_hup_within`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Polled {
    Readable,
    HungUp,
    TimedOut,
    /// Only the second descriptor given to [`poll_hup_within`] is readable.
    AlsoReadable,
}

/// Waits until `fd` is readable or hung up, `also` (when given) is readable, `ended`
/// (when given) is readable, or `timeout` (`None`: no limit) passed. A descriptor
/// both readable and hung up is readable: what is queued is read first. `ended`
/// readable counts as `fd` hung up (for the tracer: the sandbox's init, by pidfd, has
/// exited, and with it every process that could notify).
pub fn poll_hup_within(
    fd: BorrowedFd<'_>,
    also: Option<BorrowedFd<'_>>,
    ended: Option<BorrowedFd<'_>>,
    timeout: Option<std::time::Duration>,
) -> io::Result<Polled> {
    let mut pfds = [Some(fd), also, ended].map(|fd| libc::pollfd {
        // A negative descriptor is skipped by poll: the slots keep their places.
        fd: fd.map_or(-1, |fd| fd.as_raw_fd()),
        events: libc::POLLIN,
        revents: 0,
    });
    let millis = timeout.map_or(-1, |t| c_int::try_from(t.as_millis()).unwrap_or(c_int::MAX));
    loop {
        // SAFETY: pfds is a valid array of 3 pollfd structures.
        let ret = unsafe { libc::poll(pfds.as_mut_ptr(), 3, millis) };
        if ret == 0 {
            return Ok(Polled::TimedOut);
        }
        if ret > 0 {
            let [first, second, third] = pfds.map(|p| p.revents);
            if first & libc::POLLIN != 0 {
                return Ok(Polled::Readable);
            }
            if first != 0 || third != 0 {
                return Ok(Polled::HungUp);
            }
            if second != 0 {
                return Ok(Polled::AlsoReadable);
            }
            continue;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Closes every descriptor from 3 up except those in `keep`.
///
/// # Safety
///
/// As for [`close_range`]: no object owning a closed descriptor (any from 3 up not in
/// `keep`) may be used or dropped afterwards, which in practice means the calling
/// process never returns to code that holds one: it execs or exits.
pub unsafe fn close_all_except(keep: &[RawFd]) {
    let mut keep: Vec<c_uint> = keep
        .iter()
        .filter_map(|&fd| c_uint::try_from(fd).ok())
        .filter(|&fd| fd >= 3)
        .collect();
    keep.sort_unstable();
    let mut next: c_uint = 3;
    for fd in keep {
        if fd > next {
            // SAFETY: passed on to our caller (see # Safety).
            let _ = unsafe { close_range(next, fd - 1) };
        }
        next = fd.saturating_add(1);
    }
    // SAFETY: passed on to our caller (see # Safety).
    let _ = unsafe { close_range(next, c_uint::MAX) };
}

/// Grows a pipe's buffer to `bytes` (best effort: the kernel caps it at
/// `/proc/sys/fs/pipe-max-size` for unprivileged users).
pub fn set_pipe_size(fd: BorrowedFd<'_>, bytes: c_int) -> io::Result<()> {
    // SAFETY: fcntl on a live descriptor with an integer argument.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, bytes) }).map(drop)
}

/// Keeps `fd` open across `execve` (clears close-on-exec).
pub fn keep_on_exec(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor number with an integer argument; a closed one
    // fails with EBADF.
    check(unsafe { libc::fcntl(fd, libc::F_SETFD, 0) }).map(drop)
}

/// Makes reads of `fd` return at once (EAGAIN) when nothing is there.
pub fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: fcntl on a live descriptor with integer arguments.
    let flags = check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    // SAFETY: as above.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) }).map(drop)
}

/// An epoll set of descriptors watched for readability, each known by a token.
pub struct Epoll {
    fd: OwnedFd,
    /// Where [`Epoll::ready`] has the kernel write, reused.
    events: Vec<libc::epoll_event>,
}

impl Epoll {
    /// Tokens [`Epoll::ready`] returns at most per call.
    const BATCH: usize = 64;

    pub fn new() -> io::Result<Self> {
        // SAFETY: epoll_create1 takes a flag and returns a new descriptor or -1.
        let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        Ok(Self {
            // SAFETY: the kernel just returned this descriptor, which nothing else owns.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            events: vec![libc::epoll_event { events: 0, u64: 0 }; Self::BATCH],
        })
    }

    /// Watches `fd` for readability (level-triggered). Closing `fd` stops the watch.
    pub fn add(&self, fd: BorrowedFd<'_>, token: u64) -> io::Result<()> {
        let mut event = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: both descriptors are open; event is a valid epoll_event.
        check(unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd.as_raw_fd(),
                &mut event,
            )
        })
        .map(drop)
    }

    /// Stops watching `fd`.
    pub fn remove(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        // SAFETY: both descriptors are open; DEL ignores the event argument.
        check(unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd.as_raw_fd(),
                std::ptr::null_mut(),
            )
        })
        .map(drop)
    }

    /// Adds the tokens of watched descriptors readable now (up to a batch; call
    /// again for more), without waiting.
    pub fn ready(&mut self, tokens: &mut Vec<u64>) -> io::Result<()> {
        let len = c_int::try_from(self.events.len()).unwrap_or(c_int::MAX);
        // SAFETY: events is a valid array of `len` epoll_events; a zero timeout
        // never blocks.
        let n = check(unsafe {
            libc::epoll_wait(self.fd.as_raw_fd(), self.events.as_mut_ptr(), len, 0)
        })?;
        tokens.extend(
            self.events
                .iter()
                .take(usize::try_from(n).unwrap_or(0))
                .map(|e| e.u64),
        );
        Ok(())
    }
}

impl AsFd for Epoll {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The credentials (pid, uid, gid) of a connected unix socket's peer, as the kernel
/// recorded them at `connect(2)`, in this process's namespaces.
pub fn peer_cred(sock: BorrowedFd<'_>) -> io::Result<(libc::pid_t, u32, u32)> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: u32::MAX,
    };
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<libc::ucred>())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `sock` is a live descriptor; `cred` and `len` are writable and `len`
    // is `cred`'s exact size, so the kernel writes at most that much.
    check(unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &raw mut len,
        )
    })?;
    Ok((cred.pid, cred.uid, cred.gid))
}

/// A socket's type (`SOCK_STREAM`, `SOCK_SEQPACKET`…): `getsockopt(SO_TYPE)`.
pub fn socket_type(sock: BorrowedFd<'_>) -> io::Result<c_int> {
    sockopt_int(sock, libc::SO_TYPE)
}

/// A `SOL_SOCKET` option whose value is one `int` (`SO_TYPE`, `SO_PEERPIDFD`…).
pub fn sockopt_int(sock: BorrowedFd<'_>, option: c_int) -> io::Result<c_int> {
    let mut value: c_int = 0;
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<c_int>())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `sock` is a live descriptor; `value` and `len` are writable and `len`
    // is `value`'s exact size, so the kernel writes at most that much.
    check(unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            option,
            (&raw mut value).cast(),
            &raw mut len,
        )
    })?;
    Ok(value)
}

/// Shuts a socket down both ways: a thread blocked in `accept` on a listening
/// socket returns (`EINVAL`).
pub fn shutdown(sock: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: `sock` is a live descriptor; shutdown takes no pointers.
    check(unsafe { libc::shutdown(sock.as_raw_fd(), libc::SHUT_RDWR) }).map(drop)
}
