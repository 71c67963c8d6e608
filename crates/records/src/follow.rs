//! Following a session's file while its supervisor writes it, as
//! `tail -f` does, and knowing when nothing more will come.
//!
//! Files are append-only and the writer ends a session by completing
//! `metadata.json` only after every record reached its file. So a reader
//! that sees the session ended *before* reading to the end of a file has
//! read everything: [`Follower::poll`] checks in that order.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::error::RecordsError;
use crate::layout::{self, RecordFile};
use crate::metadata::Status;
use crate::store::read_metadata;

/// Reads what was appended to one file since the previous read.
#[derive(Debug)]
pub struct Tail {
    file: File,
    path: PathBuf,
    offset: u64,
}

impl Tail {
    /// Starts at the beginning of `path`.
    pub fn open(path: &Path) -> Result<Self, RecordsError> {
        let file = File::open(path).map_err(|source| RecordsError::Read {
            path: path.to_owned(),
            source,
        })?;
        Ok(Self {
            file,
            path: path.to_owned(),
            offset: 0,
        })
    }

    /// Appends the bytes written since the previous call to `buf`; returns
    /// how many. A file that shrank was rewritten, which the records never
    /// are: that is an error rather than something to resume from.
    pub fn read_new(&mut self, buf: &mut Vec<u8>) -> Result<usize, RecordsError> {
        let read_err = |source| RecordsError::Read {
            path: self.path.clone(),
            source,
        };
        let len = self.file.metadata().map_err(read_err)?.len();
        if len < self.offset {
            return Err(read_err(io::Error::other(format!(
                "the file shrank from {} to {len} bytes while being followed; \
                 the records were changed (check them with `vectraguard logs verify`)",
                self.offset
            ))));
        }
        let n = self.file.read_to_end(buf).map_err(read_err)?;
        self.offset += u64::try_from(n).unwrap_or(u64::MAX);
        Ok(n)
    }
}

/// Splits a byte stream into complete lines, keeping a partial last line
/// until its newline arrives.
#[derive(Debug, Default)]
pub struct LineBuffer {
    partial: Vec<u8>,
}

impl LineBuffer {
    /// The complete lines (newline included) that `data` finishes.
    pub fn push(&mut self, data: &[u8]) -> Vec<Vec<u8>> {
        self.partial.extend_from_slice(data);
        let Some(last_nl) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return Vec::new();
        };
        let rest = self.partial.split_off(last_nl + 1);
        let done = std::mem::replace(&mut self.partial, rest);
        done.split_inclusive(|&b| b == b'\n')
            .map(<[u8]>::to_vec)
            .collect()
    }

    /// A last line that never got its newline (a crash mid-write).
    pub fn finish(self) -> Option<Vec<u8>> {
        (!self.partial.is_empty()).then_some(self.partial)
    }
}

/// What one [`Follower::poll`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Poll {
    /// Bytes appended since the previous poll.
    pub data: Vec<u8>,
    /// The session has ended (or its supervisor died): `data` was the last
    /// of the file.
    pub ended: bool,
}

/// Follows one file of a session folder until the session ends.
#[derive(Debug)]
pub struct Follower {
    dir: PathBuf,
    tail: Tail,
    boot: Option<String>,
}

impl Follower {
    pub fn new(dir: &Path, file: RecordFile) -> Result<Self, RecordsError> {
        Ok(Self {
            dir: dir.to_owned(),
            tail: Tail::open(&layout::file_path(dir, file))?,
            boot: layout::boot_id(),
        })
    }

    /// Whether the session is still being written: status `running` with
    /// a live supervisor.
    pub fn running(&self) -> Result<bool, RecordsError> {
        let meta = read_metadata(&self.dir)?;
        Ok(meta.effective_status(self.boot.as_deref()) == Status::Running)
    }

    /// Reads what is new; call again (after a pause) until `ended`.
    pub fn poll(&mut self) -> Result<Poll, RecordsError> {
        // Status first, data second: see the module comment.
        let ended = !self.running()?;
        let mut data = Vec::new();
        self.tail.read_new(&mut data)?;
        Ok(Poll { data, ended })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::tests::{sample_meta, store};
    use crate::{CommandRecord, End};

    #[test]
    fn line_buffer_keeps_partial_lines() {
        let mut b = LineBuffer::default();
        assert!(b.push(b"one\ntw").len() == 1);
        assert_eq!(
            b.push(b"o\nthree\nfo"),
            [b"two\n".to_vec(), b"three\n".to_vec()]
        );
        assert!(b.push(b"").is_empty());
        assert_eq!(b.finish(), Some(b"fo".to_vec()));
        assert_eq!(LineBuffer::default().finish(), None);
    }

    #[test]
    fn tail_reads_only_new_bytes_and_rejects_shrinking() {
        let (tmp, _) = store("tail");
        let path = tmp.path().join("f");
        std::fs::write(&path, b"abc").unwrap();
        let mut t = Tail::open(&path).unwrap();
        let mut buf = Vec::new();
        assert_eq!(t.read_new(&mut buf).unwrap(), 3);
        assert_eq!(t.read_new(&mut buf).unwrap(), 0);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, b"de").unwrap();
        assert_eq!(t.read_new(&mut buf).unwrap(), 2);
        assert_eq!(buf, b"abcde");
        std::fs::write(&path, b"x").unwrap();
        let e = t.read_new(&mut buf).unwrap_err().to_string();
        assert!(e.contains("shrank from 5 to 1 bytes"), "{e}");
    }

    /// A writer thread records while the follower polls; the follower ends
    /// with exactly what was written, however the two interleave.
    #[test]
    fn follower_sees_everything_until_the_session_ends() {
        let (_tmp, store) = store("follow");
        let w = store.create(sample_meta()).unwrap();
        let dir = w.dir().to_owned();
        let mut stdout = Follower::new(&dir, RecordFile::Stdout).unwrap();
        let mut commands = Follower::new(&dir, RecordFile::Commands).unwrap();
        let writer = std::thread::spawn(move || {
            for i in 0..50u32 {
                w.append_stdout(format!("chunk {i}\n").as_bytes()).unwrap();
                w.record_command(&CommandRecord::new(i, 1, "/w", ["echo", "x"]))
                    .unwrap();
                if i % 10 == 0 {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            w.finish(End::exited(0)).unwrap();
        });
        let (mut out, mut lines) = (Vec::new(), LineBuffer::default());
        let mut cmd_lines = 0;
        loop {
            let p = stdout.poll().unwrap();
            out.extend_from_slice(&p.data);
            let c = commands.poll().unwrap();
            cmd_lines += lines.push(&c.data).len();
            if p.ended && c.ended {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        writer.join().unwrap();
        let expected: String = (0..50).map(|i| format!("chunk {i}\n")).collect();
        assert_eq!(String::from_utf8(out).unwrap(), expected);
        assert_eq!(cmd_lines, 50);
        assert_eq!(lines.finish(), None);
        assert!(!stdout.running().unwrap());
    }
}
