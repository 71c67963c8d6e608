//! The relays between the sandbox and the user: output streams to the log files and
//! our stdout/stderr (hashing on a second thread), `--max-output` (what is shown and
//! recorded), `--max-record` (what is recorded: past it the output is still shown),
//! and the terminal's input.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::thread::JoinHandle;

use vg_records::event::kind::LIMIT_HIT;
use vg_records::{Event, RecordFile, StreamRecord};

use super::Shared;
use crate::limits::OutputCaps;

/// Relay buffer: large reads keep per-chunk costs (hashing, two writes) small.
const RELAY_BUFFER: usize = 1 << 20;

/// Which output stream a relay carries.
#[derive(Debug, Clone, Copy)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Copies our stdin to the sandbox's terminal, and the keystrokes to tty.cast.
///
/// The thread is never joined (it waits in read(2) on our stdin), so it holds the
/// record only weakly: once the session is finished, keystrokes go nowhere.
/// At most `max_record` bytes of keystrokes are recorded (a pipe on our stdin can
/// be endless); past them, one `limit-hit` event, and the input still goes through.
pub(super) fn relay_input(mut to: File, shared: &std::sync::Weak<Shared>, max_record: u64) {
    let mut stdin = std::io::stdin();
    let mut buf = vec![0u8; 4096];
    let mut record_cap = OutputCap::new(Some(max_record));
    loop {
        // Once the session is over, nothing more is read: what is typed then is for
        // whoever asks next (learning's question), not for a sandbox that is gone.
        match vg_sandbox::terminal::wait_readable(stdin.as_fd(), 100) {
            Ok(true) if shared.strong_count() > 0 => {}
            Ok(false) if shared.strong_count() > 0 => continue,
            _ => return,
        }
        let n = match stdin.read(&mut buf) {
            Ok(0) => {
                // Our input ended (a pipe, not a terminal): say so the terminal way,
                // with the EOF character, or the program would wait forever.
                let _ = to.write_all(b"\x04");
                return;
            }
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        let Some(shared) = shared.upgrade() else {
            return;
        };
        // Keys answering the approval prompt are not the sandbox's (nor recorded).
        let keys = match &shared.prompt {
            Some(prompt) => prompt.intercept(&buf[..n]),
            None => &buf[..n],
        };
        if keys.is_empty() {
            continue;
        }
        let recorded = match record_cap.admit(keys.len()) {
            Admit::All => keys,
            Admit::Part(kept) => {
                if let Err(e) = shared.writer.event(
                    Event::new(LIMIT_HIT)
                        .with("limit", "record")
                        .with("stream", "input")
                        .with("bytes", record_cap.limit),
                ) {
                    shared.fail("events.jsonl", e);
                }
                &keys[..kept]
            }
            Admit::Nothing => &[],
        };
        if !recorded.is_empty()
            && let Err(e) = shared.writer.cast_input(recorded)
        {
            shared.fail("tty.cast", e);
        }
        if to.write_all(keys).is_err() {
            return;
        }
    }
}

/// Copies our stdin, a terminal, to the pipe that is the sandbox's stdin in a run
/// without `-t`, so that the sandbox never holds the user's terminal: it cannot write
/// to the screen past the record, or change the terminal's modes or line discipline.
/// The terminal's end of input (Ctrl-D at the start of a line) closes the pipe.
///
/// The thread is never joined (it waits in read(2) on our stdin) and holds nothing
/// but the pipe, whose end it closes when our input ends or the sandbox stops reading.
pub fn relay_terminal_input(
    mut to: std::io::PipeWriter,
    prompt: Option<std::sync::Arc<crate::prompt::TerminalPrompt>>,
) {
    // In the background, a read would stop all of Vectra Guard; let it fail instead.
    if vg_sandbox::terminal::no_stop_on_background_read().is_err() {
        return;
    }
    let mut stdin = std::io::stdin();
    let mut buf = vec![0u8; 4096];
    loop {
        // Stops, reading nothing more, once the sandbox's end of the pipe is gone.
        match vg_sandbox::terminal::wait_input_or_gone(stdin.as_fd(), to.as_fd()) {
            Ok(true) => {}
            _ => return,
        }
        match stdin.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                // Keys answering the approval prompt are not the sandbox's.
                let keys = match &prompt {
                    Some(prompt) => prompt.intercept(&buf[..n]),
                    None => &buf[..n],
                };
                if !keys.is_empty() && to.write_all(keys).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Copies one output stream of the sandbox to its log file and to our own stdout or
/// stderr, chunk by chunk, until every writer inside the sandbox is gone.
///
/// Two threads share the work so that hashing overlaps the copying: this one reads
/// a chunk and appends it to the log, the other (started at the first chunk) hashes
/// it into the record's chain and then shows it. Whatever the user sees is already
/// in the log file.
/// Where a relay shows what it records: our own stdout or stderr, or a descriptor a
/// client handed over (a persistent sandbox's command), which the client's side can
/// take away (`None`) while the relay goes on recording.
pub(super) enum ShowTo {
    Ours,
    Client(ClientOutput),
}

/// A client's stdout or stderr, shared with whoever may detach it.
pub type ClientOutput = Arc<std::sync::Mutex<Option<File>>>;

pub(super) fn relay(
    mut from: impl Read,
    stream: Stream,
    shared: &Arc<Shared>,
    caps: OutputCaps,
    cast: bool,
    show: ShowTo,
) {
    let mut show = Some(show);
    let file = match stream {
        Stream::Stdout => RecordFile::Stdout,
        Stream::Stderr => RecordFile::Stderr,
    };
    let mut cap = OutputCap::new(caps.shown);
    let mut record_cap = OutputCap::new(Some(caps.recorded));
    // Set when our own stdout/stderr is closed (`vectraguard ... | head`): then we stop
    // reading, so the writer in the sandbox gets SIGPIPE as it would outside.
    let host_closed = Arc::new(AtomicBool::new(false));
    // Two chunks in flight at most; spent buffers come back for reuse.
    let (spare_tx, spare_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let mut to_show: Option<(SyncSender<Chunk>, JoinHandle<()>)> = None;
    loop {
        let mut buf = spare_rx
            .try_recv()
            .unwrap_or_else(|_| vec![0u8; RELAY_BUFFER]);
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if host_closed.load(Ordering::Relaxed) {
            break;
        }
        // Over --max-output: keep draining, so that the command runs on, but keep
        // nothing past the limit, and say so once, where the output stops.
        let n = match cap.admit(n) {
            Admit::All => n,
            Admit::Part(kept) => {
                buf.truncate(kept);
                buf.extend_from_slice(cap.marker(file, cast).as_bytes());
                if let Err(e) = shared.writer.event(
                    Event::new(LIMIT_HIT)
                        .with("limit", "output")
                        .with("stream", stream_name(file))
                        .with("bytes", cap.limit),
                ) {
                    shared.fail("events.jsonl", e);
                }
                let len = buf.len();
                buf.resize(RELAY_BUFFER.max(len), 0);
                len
            }
            Admit::Nothing => {
                let _ = spare_tx.send(buf);
                continue;
            }
        };
        // Over --max-record: shown still, recorded no more (a marker says where).
        let (recorded, other) = match record_cap.admit(n) {
            Admit::All => (true, None),
            Admit::Part(kept) => {
                let mut data = buf[..kept].to_vec();
                data.extend_from_slice(record_cap.record_marker(file, cast).as_bytes());
                if let Err(e) = shared.writer.event(
                    Event::new(LIMIT_HIT)
                        .with("limit", "record")
                        .with("stream", stream_name(file))
                        .with("bytes", record_cap.limit),
                ) {
                    shared.fail("events.jsonl", e);
                }
                (true, Some(data))
            }
            Admit::Nothing => (false, None),
        };
        let record = if recorded {
            match shared
                .writer
                .write_stream(file, other.as_deref().unwrap_or(&buf[..n]))
            {
                Ok(record) => Some(record),
                Err(e) => {
                    shared.fail(file.name(), e);
                    None
                }
            }
        } else {
            None
        };
        let (tx, _) = to_show.get_or_insert_with(|| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Chunk>(2);
            let shared = Arc::clone(shared);
            let spare = spare_tx.clone();
            let closed = Arc::clone(&host_closed);
            let show = show.take().unwrap_or(ShowTo::Ours);
            (
                tx,
                std::thread::spawn(move || {
                    chain_and_show(&rx, &spare, stream, &shared, &closed, cast, show)
                }),
            )
        });
        if tx.send((buf, n, record, other)).is_err() {
            break;
        }
    }
    if let Some((tx, shower)) = to_show {
        drop(tx);
        let _ = shower.join();
    }
}

fn stream_name(file: RecordFile) -> &'static str {
    file.name().trim_end_matches(".log")
}

/// What `--max-output` lets through of each chunk.
struct OutputCap {
    limit: u64,
    passed: u64,
}

#[derive(Debug, PartialEq, Eq)]
enum Admit {
    All,
    /// The first `n` bytes, then the limit is reached.
    Part(usize),
    Nothing,
}

impl OutputCap {
    fn new(limit: Option<u64>) -> Self {
        Self {
            limit: limit.unwrap_or(u64::MAX),
            passed: 0,
        }
    }

    fn admit(&mut self, n: usize) -> Admit {
        let left = self.limit.saturating_sub(self.passed);
        let n64 = n as u64;
        if self.passed > self.limit {
            return Admit::Nothing;
        }
        if n64 <= left {
            self.passed += n64;
            return Admit::All;
        }
        // One past the limit marks the cap as reached (and the marker as written).
        self.passed = self.limit + 1;
        Admit::Part(usize::try_from(left).unwrap_or(0))
    }

    /// The notice that replaces the rest of the stream; with `crlf` for a terminal,
    /// whose output processing is off while ours is in raw mode.
    fn marker(&self, file: RecordFile, crlf: bool) -> String {
        crlf_if(
            format!(
                "\n[vectraguard: {} truncated at {} bytes (--max-output); the command keeps running]\n",
                stream_name(file),
                self.limit
            ),
            crlf,
        )
    }

    /// The notice that ends the record of a stream at `--max-record`, in the record
    /// only: the user goes on seeing the output.
    fn record_marker(&self, file: RecordFile, crlf: bool) -> String {
        crlf_if(
            format!(
                "\n[vectraguard: {} recording stopped at {} bytes (--max-record); the output went on to the terminal, unrecorded]\n",
                stream_name(file),
                self.limit
            ),
            crlf,
        )
    }
}

fn crlf_if(text: String, crlf: bool) -> String {
    if crlf {
        text.replace('\n', "\r\n")
    } else {
        text
    }
}

/// A chunk of output: its buffer, how much of it is data, its unchained record
/// (none once `--max-record` is reached), and what was recorded when that differs
/// from the data (the last part before the record cap, with its marker).
type Chunk = (Vec<u8>, usize, Option<StreamRecord>, Option<Vec<u8>>);

fn chain_and_show(
    chunks: &std::sync::mpsc::Receiver<Chunk>,
    spare: &std::sync::mpsc::Sender<Vec<u8>>,
    stream: Stream,
    shared: &Shared,
    host_closed: &AtomicBool,
    cast: bool,
    show: ShowTo,
) {
    let host = match (&show, stream) {
        (ShowTo::Client(_), _) => Err(std::io::ErrorKind::Unsupported.into()),
        (ShowTo::Ours, Stream::Stdout) => std::io::stdout().as_fd().try_clone_to_owned(),
        (ShowTo::Ours, Stream::Stderr) => std::io::stderr().as_fd().try_clone_to_owned(),
    };
    let client = match show {
        ShowTo::Client(client) => Some(client),
        ShowTo::Ours => None,
    };
    // A closed terminal or pipe on our side must not stop the recording.
    let mut host: Option<File> = host.ok().map(File::from);
    for (buf, n, record, other) in chunks {
        let chunk = &buf[..n];
        if let Some(record) = record {
            let recorded = other.as_deref().unwrap_or(chunk);
            if let Err(e) = shared
                .writer
                .chain_stream(record, &vg_records::chain::digest(recorded))
            {
                shared.fail("integrity.log", e);
            }
            if cast && let Err(e) = shared.writer.cast_output(recorded) {
                shared.fail("tty.cast", e);
            }
        }
        // Not over the approval prompt: the kernel holds the sandbox's output meanwhile.
        if let Some(prompt) = &shared.prompt {
            prompt.wait_clear();
        }
        if let Some(out) = host.as_mut()
            && out.write_all(chunk).is_err()
        {
            host = None;
            host_closed.store(true, Ordering::Relaxed);
        }
        // A client gone (or detached) only stops being shown the output.
        if let Some(client) = &client {
            let mut out = client
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if out.as_mut().is_some_and(|f| f.write_all(chunk).is_err()) {
                *out = None;
            }
        }
        let _ = spare.send(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_cap_passes_up_to_the_limit_then_nothing() {
        let mut cap = OutputCap::new(Some(10));
        assert_eq!(cap.admit(4), Admit::All);
        assert_eq!(cap.admit(6), Admit::All);
        assert_eq!(cap.admit(1), Admit::Part(0));
        assert_eq!(cap.admit(5), Admit::Nothing);
        let mut cap = OutputCap::new(Some(10));
        assert_eq!(cap.admit(25), Admit::Part(10));
        assert_eq!(cap.admit(1), Admit::Nothing);
        assert!(
            cap.marker(RecordFile::Stdout, false)
                .contains("stdout truncated at 10 bytes")
        );
        let record = OutputCap::new(Some(65536));
        let marker = record.record_marker(RecordFile::Stderr, true);
        assert!(
            marker.contains("stderr recording stopped at 65536 bytes (--max-record)"),
            "{marker}"
        );
        assert!(marker.starts_with("\r\n") && marker.ends_with("]\r\n"));
        let mut unlimited = OutputCap::new(None);
        assert_eq!(unlimited.admit(usize::MAX / 2), Admit::All);
    }
}
