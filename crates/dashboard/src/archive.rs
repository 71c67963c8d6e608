//! A session folder as a `.tar.gz`: its regular files only (never a symlink,
//! the control socket or a subfolder), each opened with `O_NOFOLLOW` (a symlink swapped in
//! after the listing is not followed),
//! under `SESSION-ID/` in the archive.

use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use flate2::Compression;
use flate2::write::GzEncoder;

/// Writes `dir` (a session folder resolved by `SessionStore`) as a gzipped tar to
/// `out`; `id` names the archive's top folder.
/// Opens a record file for reading as the file it is: never through a symlink
/// (`O_NOFOLLOW`), never waiting on a FIFO (`O_NONBLOCK`), and only a regular
/// file. The folder is its owner's to change, and a planted `stdout.log ->
/// /etc/shadow` must not be served by a dashboard started by root.
pub fn open_record(path: &Path) -> io::Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    Ok(file)
}

pub fn write(dir: &Path, id: &str, out: impl Write) -> io::Result<()> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    let mut tar = tar::Builder::new(GzEncoder::new(out, Compression::default()));
    for name in names {
        let file = match open_record(&dir.join(&name)) {
            Ok(f) => f,
            // Replaced by something else since the listing: left out.
            Err(_) => continue,
        };
        let meta = file.metadata()?;
        let mut header = tar::Header::new_gnu();
        header.set_size(meta.len());
        header.set_mode(0o600);
        header.set_mtime(
            meta.modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs()),
        );
        header.set_entry_type(tar::EntryType::Regular);
        // A file still being appended to is archived as far as its size said.
        tar.append_data(
            &mut header,
            format!("{id}/{name}"),
            io::Read::take(file, meta.len()),
        )?;
    }
    tar.into_inner()?.finish()?.flush()
}

/// A `Write` that hands each chunk to an async body, for streaming the archive
/// while it is made.
pub struct ChannelWriter {
    tx: tokio::sync::mpsc::Sender<Result<Vec<u8>, io::Error>>,
}

impl ChannelWriter {
    pub fn new(tx: tokio::sync::mpsc::Sender<Result<Vec<u8>, io::Error>>) -> Self {
        Self { tx }
    }
}

impl Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tx
            .blocking_send(Ok(buf.to_vec()))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the download was cancelled"))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn only_the_folders_regular_files_are_archived() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("session-x");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("metadata.json"), b"{}").unwrap();
        std::fs::write(dir.join("stdout.log"), b"hello\n").unwrap();
        std::fs::write(tmp.path().join("secret"), b"host secret").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret"), dir.join("link")).unwrap();
        std::fs::create_dir(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/inner"), b"x").unwrap();
        let mut bytes = Vec::new();
        write(&dir, "session-x", &mut bytes).unwrap();
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&bytes[..]));
        let mut seen = Vec::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let path = entry.path().unwrap().display().to_string();
            let mut body = String::new();
            entry.read_to_string(&mut body).unwrap();
            seen.push((path, body));
        }
        assert_eq!(
            seen,
            [
                ("session-x/metadata.json".to_owned(), "{}".to_owned()),
                ("session-x/stdout.log".to_owned(), "hello\n".to_owned()),
            ]
        );
    }

    /// Red-team finding: `/output`, `/cast`, `/commands` and `/events` followed a
    /// symlink planted in place of a record file (the archive did not).
    #[test]
    fn a_record_file_is_never_read_through_a_symlink_or_a_fifo() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("secret"), b"host secret").unwrap();
        std::fs::write(tmp.path().join("stdout.log"), b"out").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret"), tmp.path().join("stderr.log"))
            .unwrap();
        let fifo = tmp.path().join("events.jsonl");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let mut body = String::new();
        open_record(&tmp.path().join("stdout.log"))
            .unwrap()
            .read_to_string(&mut body)
            .unwrap();
        assert_eq!(body, "out");
        assert!(open_record(&tmp.path().join("stderr.log")).is_err());
        // Without O_NONBLOCK this open would wait for a writer forever.
        assert!(open_record(&fifo).is_err());
    }
}
