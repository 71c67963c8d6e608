//! A persistent sandbox (`sandbox create`) on Docker or Podman: the container's init
//! runs no command of its own but serves the same spawner protocol as the native
//! persistent sandbox's init (`zygote.rs`), so every command `sandbox exec` starts is
//! forked by our init inside the container, under its exec listener, and recorded in
//! the one session as natively. The engine's own `exec` is never used: it would start
//! processes outside our init's filter and record.
//!
//! The channel: once the supervisor said go, the init makes a `SOCK_SEQPACKET` pair,
//! sends one end over the hand-over connection and keeps the other. Nothing else in
//! the container ever holds either end: the hand-over socket's path was removed
//! before the go, the init is non-dumpable (no `pidfd_getfd`, no `/proc/1/fd`), and
//! each command it forks closes every descriptor of init's but its stdio
//! (`zygote::start`). The supervisor checks that what it got is a seqpacket socket
//! whose other end the init itself made ([`check_spawner`]).

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;

use crate::sys;

/// What the init sends with its end of the channel.
pub(super) const HELLO: &[u8] = b"vectraguard-spawner/1";

/// The init's flag that makes it serve commands instead of running one.
pub(super) const FLAG: &str = "--persistent";

/// The init's side, after the go: makes the channel and sends the supervisor its
/// end; the init then serves requests on ours (`zygote::serve`) until the
/// supervisor hangs up or the engine stops the container (`SIGTERM`). An error
/// names the step that failed.
pub(super) fn hand_over(stream: UnixStream) -> Result<OwnedFd, (&'static str, std::io::Error)> {
    let (ours, theirs) = sys::seqpacket_pair().map_err(|e| ("make its command channel", e))?;
    crate::fdpass::send(stream.as_fd(), HELLO, &[theirs.as_fd()])
        .map_err(|e| ("hand its command channel to the supervisor", e))?;
    Ok(ours)
}

/// What the supervisor knows of the channel it received (pure input of
/// [`check_spawner`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpawnerFacts {
    /// `SO_TYPE` of the descriptor (`None`: not a socket).
    pub socket_type: Option<i32>,
    /// The pid, in the supervisor's namespace, that made the channel's other end.
    pub maker: i32,
    /// The init's pid, from the hand-over connection.
    pub init: i32,
}

/// Whether the descriptor is the init's own channel: a seqpacket socket whose
/// other end the init made (a pair made by another process of the container, which
/// could then listen in, is refused).
pub fn check_spawner(facts: &SpawnerFacts) -> Result<(), String> {
    match facts.socket_type {
        Some(libc::SOCK_SEQPACKET) => {}
        Some(other) => {
            return Err(format!(
                "the init's channel is a socket of type {other}, not a seqpacket socket"
            ));
        }
        None => return Err("the init's channel is not a socket".into()),
    }
    if facts.maker != facts.init || facts.init <= 0 {
        return Err(format!(
            "the init's channel was made by pid {}, not by the init (pid {})",
            facts.maker, facts.init
        ));
    }
    Ok(())
}

/// The supervisor's side, after its go: the init's end of the channel, checked.
pub(super) fn receive(stream: &UnixStream, init: i32) -> Result<OwnedFd, String> {
    let mut buf = [0u8; 64];
    let (n, fds) = crate::fdpass::recv(stream.as_fd(), &mut buf)
        .map_err(|e| format!("no command channel came from pid {init}: {e}"))?;
    let [channel] = <[OwnedFd; 1]>::try_from(fds).map_err(|fds| {
        format!(
            "pid {init} sent {} descriptors instead of its command channel",
            fds.len()
        )
    })?;
    if &buf[..n] != HELLO {
        return Err(format!(
            "pid {init} did not say it sent its command channel"
        ));
    }
    let maker = sys::peer_cred(channel.as_fd()).map(|(pid, ..)| pid);
    check_spawner(&SpawnerFacts {
        socket_type: sys::socket_type(channel.as_fd()).ok(),
        maker: maker.unwrap_or(0),
        init,
    })?;
    Ok(channel)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn only_the_init_s_own_seqpacket_channel_is_taken() {
        let ok = SpawnerFacts {
            socket_type: Some(libc::SOCK_SEQPACKET),
            maker: 77,
            init: 77,
        };
        assert_eq!(check_spawner(&ok), Ok(()));
        let stream = SpawnerFacts {
            socket_type: Some(libc::SOCK_STREAM),
            ..ok
        };
        assert!(
            check_spawner(&stream)
                .unwrap_err()
                .contains("not a seqpacket")
        );
        let file = SpawnerFacts {
            socket_type: None,
            ..ok
        };
        assert!(check_spawner(&file).unwrap_err().contains("not a socket"));
        let other = SpawnerFacts { maker: 78, ..ok };
        let e = check_spawner(&other).unwrap_err();
        assert!(e.contains("pid 78") && e.contains("pid 77"), "{e}");
        let unknown = SpawnerFacts {
            maker: 0,
            init: 0,
            ..ok
        };
        assert!(check_spawner(&unknown).is_err());
    }

    #[test]
    fn a_channel_made_by_this_process_is_received() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let (_keep, sent) = sys::seqpacket_pair().unwrap();
        crate::fdpass::send(theirs.as_fd(), HELLO, &[sent.as_fd()]).unwrap();
        let got = receive(&ours, i32::try_from(std::process::id()).unwrap());
        assert!(got.is_ok(), "{got:?}");
    }

    #[test]
    fn a_channel_made_by_someone_else_or_of_another_kind_is_refused() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let (_keep, sent) = sys::seqpacket_pair().unwrap();
        crate::fdpass::send(theirs.as_fd(), HELLO, &[sent.as_fd()]).unwrap();
        let e = receive(&ours, 1).unwrap_err();
        assert!(e.contains("not by the init (pid 1)"), "{e}");
        let (stream_a, _stream_b) = UnixStream::pair().unwrap();
        crate::fdpass::send(theirs.as_fd(), HELLO, &[stream_a.as_fd()]).unwrap();
        let me = i32::try_from(std::process::id()).unwrap();
        let e = receive(&ours, me).unwrap_err();
        assert!(e.contains("not a seqpacket"), "{e}");
        crate::fdpass::send(theirs.as_fd(), b"other", &[sent.as_fd()]).unwrap();
        assert!(receive(&ours, me).unwrap_err().contains("did not say"));
        std::io::Write::write_all(&mut &theirs, b"x").unwrap();
        drop(theirs);
        // A byte with no descriptor, then the end: refused either way.
        assert!(receive(&ours, me).is_err());
    }
}
