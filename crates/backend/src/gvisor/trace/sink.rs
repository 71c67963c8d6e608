//! The listening socket the sentry connects to, and the loop that reads it.

use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, bail};
use prost::Message;
use socket2::{Domain, SockAddr, Socket, Type};

use super::GvisorEvent;
use super::decode::Tracker;
use super::wire::{Handshake, PROTOCOL_VERSION};

/// The largest record read. The sentry cannot send more than its socket's
/// send buffer (`net.core.wmem_default`, 208 KiB by default) in one record;
/// a larger one, possible only where that was raised, is reported as
/// [`GvisorEvent::Undecodable`] and skipped.
pub const MAX_MESSAGE: usize = 1 << 20;

/// How long the connection may take to send its handshake: runsc sends it
/// right after connecting.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The remote sink's listening socket (`AF_UNIX`, `SOCK_SEQPACKET`). Dropping
/// it (or the end of [`Sink::serve`]) removes its path.
#[derive(Debug)]
pub struct Sink {
    listener: Socket,
    path: PathBuf,
    /// The socket file made by `bind`, to remove only that one.
    inode: (u64, u64),
    stop: StopHandle,
    /// [`MAX_MESSAGE`], but for tests.
    max_message: usize,
}

/// Stops a [`Sink::serve`] running on another thread; see [`Sink::serve`].
#[derive(Debug, Clone)]
pub struct StopHandle(Arc<Mutex<StopState>>);

#[derive(Debug)]
struct StopState {
    stopped: bool,
    /// A second descriptor of the listening socket, to shut it down.
    listener: Socket,
    /// A second descriptor of the connection being read.
    connection: Option<Socket>,
}

/// What a [`Sink::serve`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    /// Whether a sentry connected and completed the handshake: `false` when
    /// serve was stopped before (runsc failed before starting the sandbox,
    /// or was never run).
    pub connected: bool,
    /// Records of a message type this reader does not decode, skipped.
    pub skipped: u64,
}

impl Sink {
    /// Creates the listening socket at `path`, mode 0600: the user running
    /// this is the one runsc connects as (runsc connects itself, before it
    /// starts the sandbox), and no other user may feed it events. Refuses a
    /// `path` that exists. Put it in a directory only this user can write.
    pub fn bind(path: &Path) -> anyhow::Result<Sink> {
        if path.symlink_metadata().is_ok() {
            bail!(
                "{} exists: the gVisor trace sink needs a new path (remove the stale file or choose another)",
                path.display()
            );
        }
        let addr = SockAddr::unix(path).with_context(|| {
            format!(
                "{} cannot be a unix socket's address (over 107 bytes?): choose a shorter path",
                path.display()
            )
        })?;
        let listener = Socket::new(Domain::UNIX, Type::SEQPACKET.cloexec(), None)
            .context("creating the gVisor trace sink's socket (AF_UNIX, SOCK_SEQPACKET)")?;
        let stop = StopHandle(Arc::new(Mutex::new(StopState {
            stopped: false,
            listener: listener
                .try_clone()
                .context("duplicating the sink's socket")?,
            connection: None,
        })));
        listener
            .bind(&addr)
            .with_context(|| format!("binding the gVisor trace sink to {}", path.display()))?;
        let meta = path
            .symlink_metadata()
            .with_context(|| format!("reading the socket file {} just made", path.display()))?;
        // From here on the Sink removes its path when dropped, on error too.
        let sink = Sink {
            listener,
            path: path.to_path_buf(),
            inode: (meta.dev(), meta.ino()),
            stop,
            max_message: MAX_MESSAGE,
        };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("making {} private (mode 0600)", path.display()))?;
        sink.listener
            .listen(8)
            .with_context(|| format!("listening on {}", path.display()))?;
        Ok(sink)
    }

    /// The path runsc connects to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A handle that stops [`Sink::serve`] from another thread.
    pub fn stop_handle(&self) -> StopHandle {
        self.stop.clone()
    }

    /// Accepts the sentry's connection, answers its handshake, and gives
    /// `on_event` every event until the sentry hangs up (the sandbox ended),
    /// then returns. One sandbox makes one connection, so one is served.
    ///
    /// Meant for a thread of its own, started before `runsc` (whose start
    /// waits for the handshake). When the `runsc` child has exited, call
    /// [`StopHandle::stop`]: a serve still waiting for a connection returns
    /// `connected: false`; one reading a connection reads what is already
    /// queued and returns at its end, so nothing the sentry sent is lost.
    /// Stopping earlier ends the record early the same way.
    ///
    /// Malformed records reach `on_event` as [`GvisorEvent::Undecodable`] and
    /// reading goes on. Errors: the socket failing, or a connection whose
    /// handshake is missing, malformed or of an unsupported version (the
    /// sandbox's events are then not received: the record is incomplete).
    pub fn serve(self, mut on_event: impl FnMut(GvisorEvent)) -> anyhow::Result<Served> {
        let Some(conn) = self.accept()? else {
            return Ok(Served {
                connected: false,
                skipped: 0,
            });
        };
        handshake(&conn)?;
        let mut tracker = Tracker::default();
        // One byte more than the limit: a record that fills it was larger
        // (the kernel drops a seqpacket record's excess).
        let mut buf = vec![0u8; self.max_message + 1];
        loop {
            let n = match recv(&conn, &mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => return Err(e).context("reading the gVisor trace sink's connection"),
            };
            if n > self.max_message {
                on_event(GvisorEvent::Undecodable(format!(
                    "a record over the {}-byte limit, skipped",
                    self.max_message
                )));
                continue;
            }
            tracker.feed(&buf[..n], &mut on_event);
        }
        Ok(Served {
            connected: true,
            skipped: tracker.skipped,
        })
    }

    /// The next connection, or `None` once stopped.
    fn accept(&self) -> anyhow::Result<Option<Socket>> {
        loop {
            match self.listener.accept() {
                Ok((conn, _)) => {
                    let mut state = self.stop.0.lock().unwrap_or_else(PoisonError::into_inner);
                    let clone = conn
                        .try_clone()
                        .context("duplicating the sentry's connection")?;
                    if state.stopped {
                        // Stopped while this was accepted: read what is queued.
                        let _ = clone.shutdown(std::net::Shutdown::Read);
                    }
                    state.connection = Some(clone);
                    return Ok(Some(conn));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let state = self.stop.0.lock().unwrap_or_else(PoisonError::into_inner);
                    if state.stopped {
                        return Ok(None);
                    }
                    return Err(e).with_context(|| {
                        format!(
                            "accepting the sentry's connection on {}",
                            self.path.display()
                        )
                    });
                }
            }
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        remove_if_ours(&self.path, self.inode);
    }
}

impl StopHandle {
    /// Stops [`Sink::serve`] as it documents; harmless when called again or
    /// after serve returned.
    pub fn stop(&self) {
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        state.stopped = true;
        // Shutting down a listening socket wakes its accept (EINVAL); a
        // connection shut down for reading yields its queued records, then
        // the end. Errors mean it was already shut down or closed.
        let _ = state.listener.shutdown(std::net::Shutdown::Read);
        if let Some(conn) = &state.connection {
            let _ = conn.shutdown(std::net::Shutdown::Read);
        }
    }
}

fn remove_if_ours(path: &Path, inode: (u64, u64)) {
    if let Ok(m) = path.symlink_metadata()
        && (m.dev(), m.ino()) == inode
    {
        let _ = std::fs::remove_file(path);
    }
}

/// One record into `buf`, retried when a signal interrupts the wait.
fn recv(conn: &Socket, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match (&*conn).read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// The sentry's handshake, then ours (`common.proto`'s rules: each side
/// goes on if the other's version is at least its oldest supported).
fn handshake(conn: &Socket) -> anyhow::Result<()> {
    conn.set_read_timeout(Some(HANDSHAKE_TIMEOUT))
        .context("setting the handshake's time-out")?;
    let mut buf = [0u8; 1024];
    let n = recv(conn, &mut buf).context("reading the sentry's handshake")?;
    if n == 0 {
        bail!("the sentry hung up before its handshake");
    }
    if n == buf.len() {
        bail!("the sentry's handshake is over {} bytes", buf.len() - 1);
    }
    let theirs = Handshake::decode(&buf[..n]).context("decoding the sentry's handshake")?;
    if theirs.version < PROTOCOL_VERSION {
        bail!(
            "the sentry speaks trace protocol version {}, older than version {PROTOCOL_VERSION} this reader needs",
            theirs.version
        );
    }
    let ours = Handshake {
        version: PROTOCOL_VERSION,
    }
    .encode_to_vec();
    conn.write_all_record(&ours)
        .context("sending the handshake to the sentry")?;
    conn.set_read_timeout(None)
        .context("clearing the handshake's time-out")?;
    Ok(())
}

/// Sends one whole record (a seqpacket send is all or nothing).
trait WriteRecord {
    fn write_all_record(self, data: &[u8]) -> io::Result<()>;
}

impl WriteRecord for &Socket {
    fn write_all_record(self, data: &[u8]) -> io::Result<()> {
        loop {
            match self.send(data) {
                Ok(n) if n == data.len() => return Ok(()),
                Ok(n) => {
                    return Err(io::Error::other(format!(
                        "sent {n} of {} bytes",
                        data.len()
                    )));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gvisor::trace::wire::{self, kind};
    use std::os::unix::fs::FileTypeExt;
    use std::sync::mpsc;
    use std::thread;

    fn temp_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "vg-trace-{}-{:?}",
            std::process::id(),
            thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A fake sentry: connects, sends `hello`, reads the answer.
    fn connect(path: &Path, hello: &[u8]) -> (Socket, io::Result<Handshake>) {
        let s = Socket::new(Domain::UNIX, Type::SEQPACKET, None).unwrap();
        s.connect(&SockAddr::unix(path).unwrap()).unwrap();
        (&s).write_all_record(hello).unwrap();
        let mut buf = [0u8; 64];
        let answer = match recv(&s, &mut buf) {
            Ok(0) => Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => Handshake::decode(&buf[..n]).map_err(|e| io::Error::other(e.to_string())),
            Err(e) => Err(e),
        };
        (s, answer)
    }

    fn hello(version: u32) -> Vec<u8> {
        Handshake { version }.encode_to_vec()
    }

    fn serve_on_thread(
        sink: Sink,
    ) -> (
        thread::JoinHandle<anyhow::Result<Served>>,
        mpsc::Receiver<GvisorEvent>,
    ) {
        let (tx, rx) = mpsc::channel();
        let t = thread::spawn(move || {
            sink.serve(move |e| {
                let _ = tx.send(e);
            })
        });
        (t, rx)
    }

    #[test]
    fn bind_makes_a_private_seqpacket_socket_refuses_an_existing_path_and_cleans_up() {
        let dir = temp_dir();
        let path = dir.join("s.sock");
        let sink = Sink::bind(&path).unwrap();
        let meta = path.symlink_metadata().unwrap();
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let err = Sink::bind(&path).unwrap_err().to_string();
        assert!(err.contains("exists"), "{err}");
        drop(sink);
        assert!(path.symlink_metadata().is_err(), "the socket file was left");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn handshake_events_and_the_end_of_the_connection() {
        let dir = temp_dir();
        let path = dir.join("s.sock");
        let mut sink = Sink::bind(&path).unwrap();
        sink.max_message = 64;
        let (serving, rx) = serve_on_thread(sink);
        let (sentry, answer) = connect(&path, &hello(1));
        assert_eq!(answer.unwrap().version, 1);
        let exit = wire::ExitNotifyParentInfo {
            context_data: Some(wire::ContextData {
                thread_group_id: 7,
                ..Default::default()
            }),
            exit_status: 9,
        };
        (&sentry)
            .write_all_record(&wire::record(
                kind::SENTRY_EXIT_NOTIFY_PARENT,
                0,
                &exit.encode_to_vec(),
            ))
            .unwrap();
        (&sentry)
            .write_all_record(&wire::record(99, 0, b"future"))
            .unwrap();
        // Over the limit: reported, and the reading goes on.
        (&sentry).write_all_record(&[0u8; 65]).unwrap();
        (&sentry).write_all_record(&[0u8; 64]).unwrap();
        (&sentry)
            .write_all_record(&wire::record(
                kind::SENTRY_EXIT_NOTIFY_PARENT,
                1,
                &exit.encode_to_vec(),
            ))
            .unwrap();
        drop(sentry);
        let served = serving.join().unwrap().unwrap();
        assert_eq!(
            served,
            Served {
                connected: true,
                skipped: 1
            }
        );
        let events: Vec<GvisorEvent> = rx.iter().collect();
        let exit_event = GvisorEvent::Exit {
            time: None,
            pid: 7,
            status: 9,
        };
        assert_eq!(
            events,
            [
                exit_event.clone(),
                GvisorEvent::Undecodable("a record over the 64-byte limit, skipped".into()),
                // 64 bytes are read: a header of zeros is malformed.
                GvisorEvent::Undecodable(
                    "a header claiming 0 bytes in a record of 64 (at least 8)".into()
                ),
                GvisorEvent::Dropped(1),
                exit_event,
            ]
        );
        assert!(path.symlink_metadata().is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_old_or_garbled_handshake_is_an_error() {
        let dir = temp_dir();
        // Version 0 written out (proto3 would leave the default out, and an
        // empty record reads as a hang-up).
        for (n, bad) in [vec![0x08, 0x00], vec![0xff, 0xff, 0xff]]
            .into_iter()
            .enumerate()
        {
            let path = dir.join(format!("s{n}.sock"));
            let (serving, _rx) = serve_on_thread(Sink::bind(&path).unwrap());
            let (_sentry, answer) = connect(&path, &bad);
            assert!(answer.is_err(), "answered {answer:?}");
            let err = format!("{:#}", serving.join().unwrap().unwrap_err());
            let expected = if n == 0 {
                "older than version 1"
            } else {
                "decoding the sentry's handshake"
            };
            assert!(err.contains(expected), "{err}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn stop_before_any_connection_returns_unconnected() {
        let dir = temp_dir();
        let sink = Sink::bind(&dir.join("s.sock")).unwrap();
        let stop = sink.stop_handle();
        let (serving, _rx) = serve_on_thread(sink);
        thread::sleep(Duration::from_millis(50));
        stop.stop();
        let served = serving.join().unwrap().unwrap();
        assert!(!served.connected);
        stop.stop();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn stop_during_a_connection_reads_what_is_queued_then_returns() {
        let dir = temp_dir();
        let path = dir.join("s.sock");
        let sink = Sink::bind(&path).unwrap();
        let stop = sink.stop_handle();
        let (serving, rx) = serve_on_thread(sink);
        let (sentry, answer) = connect(&path, &hello(2));
        assert_eq!(answer.unwrap().version, 1);
        for dropped in 1..=3 {
            (&sentry)
                .write_all_record(&wire::record(42, dropped, b""))
                .unwrap();
        }
        stop.stop();
        // The sentry still holds its end open: only the stop ends serve.
        let served = serving.join().unwrap().unwrap();
        assert_eq!(served.skipped, 3);
        let drops: Vec<GvisorEvent> = rx.iter().collect();
        assert_eq!(
            drops,
            [
                GvisorEvent::Dropped(1),
                GvisorEvent::Dropped(1),
                GvisorEvent::Dropped(1)
            ]
        );
        // Later points fail at once instead of blocking the sandbox.
        let err = (&sentry).write_all_record(b"late").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
