//! The hash chain kept in `integrity.log`, one line per record written to
//! any file of the session, in write order:
//!
//! ```text
//! <seq> <file> <offset> <len> <blake3(record bytes)> <chain hash>
//! 0 metadata.json 0 812 5f1c…e9 a41b…07
//! 1 events.jsonl 0 96 03aa…51 77c2…fe
//! 2 stdout.log 0 4096 9d0e…12 c3f8…4a
//! ```
//!
//! `seq` counts from 0; `offset`/`len` locate the record in its file
//! (`metadata.json` is replaced whole, so its offset is always 0); hashes are
//! lowercase hex. The chain hash is
//! `sha256(previous chain hash || "<seq> <file> <offset> <len> <digest>")`,
//! starting from `sha256("vectraguard-records-v1")`, so editing, removing or
//! reordering any line breaks every later link.
//!
//! Limits: the chain is not keyed. It proves the files match what was
//! recorded unless someone rewrites `integrity.log` wholesale; publishing the
//! head elsewhere (an event sink) anchors it.

use sha2::{Digest, Sha256};

use crate::layout::{hex_decode_32, hex_encode};

pub type Hash = [u8; 32];

const GENESIS_LABEL: &[u8] = b"vectraguard-records-v1";

pub fn sha256(data: &[u8]) -> Hash {
    Sha256::digest(data).into()
}

/// The digest of one record's bytes: BLAKE3, several times faster than SHA-256
/// on large output, which the stream relays hash in full.
pub fn digest(data: &[u8]) -> Hash {
    blake3::hash(data).into()
}

pub fn genesis() -> Hash {
    sha256(GENESIS_LABEL)
}

/// The text covered by the chain hash of a line (everything but the hash).
fn prefix(seq: u64, file: &str, offset: u64, len: u64, digest: &Hash) -> String {
    format!("{seq} {file} {offset} {len} {}", hex_encode(digest))
}

pub fn link(prev: &Hash, prefix: &str) -> Hash {
    let mut h = Sha256::new();
    h.update(prev);
    h.update(prefix.as_bytes());
    h.finalize().into()
}

/// The writing side: the next sequence number and the current head.
#[derive(Debug, Clone)]
pub struct Chain {
    seq: u64,
    head: Hash,
}

impl Default for Chain {
    fn default() -> Self {
        Self::new()
    }
}

impl Chain {
    pub fn new() -> Self {
        Self {
            seq: 0,
            head: genesis(),
        }
    }

    /// Number of lines written so far.
    pub fn records(&self) -> u64 {
        self.seq
    }

    pub fn head(&self) -> Hash {
        self.head
    }

    /// The `integrity.log` line (with its newline) for a record; the chain
    /// only advances once the caller calls [`Chain::commit`] with the result.
    pub fn line(&self, file: &str, offset: u64, data: &[u8]) -> (String, Hash) {
        let len = u64::try_from(data.len()).unwrap_or(u64::MAX);
        self.line_for(file, offset, len, &digest(data))
    }

    /// Like [`Chain::line`], for a record whose digest was computed already.
    pub fn line_for(&self, file: &str, offset: u64, len: u64, digest: &Hash) -> (String, Hash) {
        let p = prefix(self.seq, file, offset, len, digest);
        let hash = link(&self.head, &p);
        (format!("{p} {}\n", hex_encode(&hash)), hash)
    }

    pub fn commit(&mut self, hash: Hash) {
        self.seq += 1;
        self.head = hash;
    }
}

/// One parsed line of `integrity.log`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntegrityLine {
    pub seq: u64,
    pub file: String,
    pub offset: u64,
    pub len: u64,
    pub digest: Hash,
    pub hash: Hash,
}

impl IntegrityLine {
    /// Parses a line without its newline; `None` when malformed.
    pub fn parse(line: &str) -> Option<Self> {
        let mut it = line.split(' ');
        let l = Self {
            seq: it.next()?.parse().ok()?,
            file: it.next()?.to_owned(),
            offset: it.next()?.parse().ok()?,
            len: it.next()?.parse().ok()?,
            digest: hex_decode_32(it.next()?)?,
            hash: hex_decode_32(it.next()?)?,
        };
        it.next().is_none().then_some(l)
    }

    /// The chain hash this line should carry after `prev`.
    pub fn expected_hash(&self, prev: &Hash) -> Hash {
        link(
            prev,
            &prefix(self.seq, &self.file, self.offset, self.len, &self.digest),
        )
    }

    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_back_and_link() {
        let mut c = Chain::new();
        let mut prev = genesis();
        for (i, data) in [&b"hello\n"[..], b"", b"\xff\x00"].iter().enumerate() {
            let (text, hash) = c.line("stdout.log", 10 * i as u64, data);
            assert!(text.ends_with('\n'));
            let l = IntegrityLine::parse(text.trim_end()).unwrap();
            assert_eq!(l.seq, i as u64);
            assert_eq!(l.digest, digest(data));
            assert_eq!(l.expected_hash(&prev), l.hash);
            assert_eq!(l.hash, hash);
            c.commit(hash);
            prev = hash;
        }
        assert_eq!(c.records(), 3);
        assert_eq!(c.head(), prev);
    }

    #[test]
    fn malformed_lines_are_rejected() {
        let (text, _) = Chain::new().line("commands.log", 0, b"x");
        let good = text.trim_end();
        assert!(IntegrityLine::parse(good).is_some());
        assert!(IntegrityLine::parse(&format!("{good} extra")).is_none());
        assert!(IntegrityLine::parse(&good.replacen('0', "x", 1)).is_none());
        assert!(IntegrityLine::parse("").is_none());
    }
}
