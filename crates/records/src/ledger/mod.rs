//! The ledger: one append-only file per records folder, `ledger.log`, that
//! chains every session's start and end (with the final head of its
//! `integrity.log`) and every removal by `logs rm` or `logs prune`. Each
//! session's own chain proves its files match what was recorded; the ledger
//! proves which sessions there were, so a session folder deleted, replaced
//! or rewritten outside Vectra Guard shows in `logs verify --all`.
//!
//! ```text
//! <seq> <time> <kind> <session id> [<records> <head>] <link>
//! 0 2026-11-25T13:00:00.123Z adopt session-20261124T090000Z-1a2b3c 41 5f1c…e9 a41b…07
//! 1 2026-11-25T13:00:01.456Z start session-20261125T130001Z-9af4c3 03aa…51
//! 2 2026-11-25T13:00:02.789Z end session-20261125T130001Z-9af4c3 17 9d0e…12 c3f8…4a
//! 3 2026-11-25T13:05:00.000Z rm session-20261124T090000Z-1a2b3c 77c2…fe
//! ```
//!
//! The link is the chain's own convention ([`crate::chain::link`]):
//! `sha256(previous link || "<the line without its link>")`, starting from
//! `sha256("vectraguard-ledger-v1")`. Kinds:
//!
//! - `adopt`: a session found when the ledger was created (recorded before the
//!   ledger existed), with its head then, or without one if it was running or
//!   had no readable chain. The ledger vouches for it from that line on only.
//! - `start`: a session folder was created.
//! - `end`: the session finished (or its writer was dropped unfinished), with
//!   the number of lines of its `integrity.log` and the last link.
//!
//!   Neither is fsynced: both sit on every run's path (an fsync costs about
//!   as much as the rest of the ledger's work together), and a killed or
//!   crashed process loses nothing written (the page cache is the kernel's).
//!   Only a power cut or kernel crash can lose them, and then `verify --all`
//!   shows the session as unended (a note) or, without its start, as not in
//!   the ledger (a problem to look at after such a crash).
//! - `rm`, `prune`: removed by `logs rm` / `logs prune`, written (and fsynced)
//!   before the folder is removed, so a removal cut short is "removed, but the
//!   folder is still there", never "deleted outside Vectra Guard".
//! - `discard`: a session folder whose records could not be started, removed
//!   at once.
//!
//! Appends run under an exclusive `flock` of the ledger (sessions end
//! concurrently, from several processes), read the last entry from the tail
//! and write their lines with one `write(2)`. A torn last line (a crash or a
//! full disk mid-append) is never repaired in place: the next append starts
//! on a new line and links to the last whole entry, and verification reports
//! the fragment as torn. A ledger with no entry at all is refused (appending
//! would silently restart the chain).
//!
//! Limits: like `integrity.log`, the ledger is not keyed and lives in the
//! user's own folder, so someone with the user's rights can rewrite it
//! wholesale. The head that `logs verify --all` prints, kept elsewhere and
//! given back with `--anchor`, catches that.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use crate::chain::{Hash, IntegrityLine, link, sha256};
use crate::error::RecordsError;
use crate::layout::{self, hex_decode_32, hex_encode};
use crate::metadata::Status;

mod audit;
mod check;

pub use audit::{Audit, Finding, SessionCheck, audit, check_one};
pub use check::{Chain, ChainProblem, State};

/// The ledger's file name, in the records folder beside the session folders.
pub const LEDGER: &str = "ledger.log";

const GENESIS_LABEL: &[u8] = b"vectraguard-ledger-v1";

/// How much of the ledger's (or an `integrity.log`'s) end is read to find its
/// last entry; lines are about 200 bytes.
const TAIL_BYTES: u64 = 4096;

/// How long an append waits for another process's append to finish. An
/// append holds the lock for microseconds (an fsync at most); this only ends
/// the wait when a holder is stopped.
const LOCK_WAIT: Duration = Duration::from_secs(10);

pub fn genesis() -> Hash {
    sha256(GENESIS_LABEL)
}

/// What a ledger line says happened to a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Adopt,
    Start,
    End,
    Rm,
    Prune,
    Discard,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Adopt => "adopt",
            Kind::Start => "start",
            Kind::End => "end",
            Kind::Rm => "rm",
            Kind::Prune => "prune",
            Kind::Discard => "discard",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "adopt" => Kind::Adopt,
            "start" => Kind::Start,
            "end" => Kind::End,
            "rm" => Kind::Rm,
            "prune" => Kind::Prune,
            "discard" => Kind::Discard,
            _ => return None,
        })
    }

    fn is_removal(self) -> bool {
        matches!(self, Kind::Rm | Kind::Prune | Kind::Discard)
    }

    /// Whether its lines carry a head: `end` always, `adopt` when it had one.
    fn head_allowed(self) -> bool {
        matches!(self, Kind::End | Kind::Adopt)
    }
}

/// A session's chain head: the number of `integrity.log` lines and the link of
/// the last one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub records: u64,
    pub hash: Hash,
}

impl fmt::Display for Head {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} records, head {}",
            self.records,
            hex_encode(&self.hash)
        )
    }
}

/// One parsed ledger line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub seq: u64,
    pub time: String,
    pub kind: Kind,
    pub session: String,
    pub head: Option<Head>,
    /// The link this line carries.
    pub hash: Hash,
}

impl Entry {
    /// The text the link covers: the line without its link.
    fn prefix(seq: u64, time: &str, kind: Kind, session: &str, head: Option<&Head>) -> String {
        match head {
            Some(h) => format!(
                "{seq} {time} {} {session} {} {}",
                kind.as_str(),
                h.records,
                hex_encode(&h.hash)
            ),
            None => format!("{seq} {time} {} {session}", kind.as_str()),
        }
    }

    /// Parses a line without its newline; `None` unless it is a whole entry.
    pub fn parse(line: &str) -> Option<Self> {
        let words: Vec<&str> = line.split(' ').collect();
        let (seq, time, kind, session, head, hash) = match words.as_slice() {
            [seq, time, kind, session, hash] => (seq, time, kind, session, None, hash),
            [seq, time, kind, session, records, head, hash] => (
                seq,
                time,
                kind,
                session,
                Some(Head {
                    records: records.parse().ok()?,
                    hash: hex_decode_32(head)?,
                }),
                hash,
            ),
            _ => return None,
        };
        let kind = Kind::parse(kind)?;
        if head.is_some() && !kind.head_allowed() || head.is_none() && kind == Kind::End {
            return None;
        }
        layout::parse_session_name(session)?;
        crate::time::parse_rfc3339(time).ok()?;
        Some(Self {
            seq: seq.parse().ok()?,
            time: (*time).to_owned(),
            kind,
            session: (*session).to_owned(),
            head,
            hash: hex_decode_32(hash)?,
        })
    }

    /// The link this line should carry after `prev`.
    pub fn expected_hash(&self, prev: &Hash) -> Hash {
        link(
            prev,
            &Self::prefix(
                self.seq,
                &self.time,
                self.kind,
                &self.session,
                self.head.as_ref(),
            ),
        )
    }
}

/// The head of the session folder `dir`: its `integrity.log`'s line count and
/// last link, read from the file's end. `None` when it has no whole line.
pub fn session_head(dir: &Path) -> io::Result<Option<Head>> {
    let file = File::open(dir.join(layout::INTEGRITY))?;
    let len = file.metadata()?.len();
    let last = last_line(&file, len, false, IntegrityLine::parse)?;
    Ok(last.map(|l| Head {
        records: l.seq.saturating_add(1),
        hash: l.hash,
    }))
}

/// The last line of `file` (of length `len`) that `parse` accepts, reading
/// the tail first and the whole file only if the tail has none. A last line
/// without its newline counts only with `torn_ok`.
fn last_line<T>(
    file: &File,
    len: u64,
    torn_ok: bool,
    parse: impl Fn(&str) -> Option<T>,
) -> io::Result<Option<T>> {
    let mut start = len.saturating_sub(TAIL_BYTES);
    loop {
        let mut buf = vec![0u8; usize::try_from(len - start).unwrap_or(usize::MAX)];
        file.read_exact_at(&mut buf, start)?;
        let text = String::from_utf8_lossy(&buf);
        let mut lines: Vec<&str> = text.split('\n').collect();
        // What follows the last newline: empty, or a line not yet terminated.
        let unterminated = lines.pop().unwrap_or("");
        if torn_ok && let Some(v) = parse(unterminated) {
            return Ok(Some(v));
        }
        // A tail read from the middle of the file starts mid-line.
        let skip = usize::from(start > 0);
        if let Some(v) = lines.iter().skip(skip).rev().find_map(|l| parse(l)) {
            return Ok(Some(v));
        }
        if start == 0 {
            return Ok(None);
        }
        start = 0;
    }
}

/// Whether the first `len` bytes of `file` hold a newline.
fn has_newline(file: &File, len: u64) -> io::Result<bool> {
    let mut buf = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX)];
    file.read_exact_at(&mut buf, 0)?;
    Ok(buf.contains(&b'\n'))
}

/// One line to append.
struct Item<'a> {
    kind: Kind,
    session: &'a str,
    head: Option<Head>,
}

/// The ledger of the records folder `root`. Holds no open file: each append
/// opens, locks, writes and closes.
#[derive(Debug, Clone)]
pub struct Ledger {
    root: PathBuf,
}

impl Ledger {
    pub fn at(root: &Path) -> Self {
        Self {
            root: root.to_owned(),
        }
    }

    pub fn path(&self) -> PathBuf {
        self.root.join(LEDGER)
    }

    /// A session folder was created. Not fsynced (see the module's notes).
    pub fn started(&self, session: &str) -> Result<(), RecordsError> {
        self.append(
            &[Item {
                kind: Kind::Start,
                session,
                head: None,
            }],
            false,
        )
    }

    /// A session finished with `head`. Not fsynced (see the module's notes).
    pub fn ended(&self, session: &str, head: Head) -> Result<(), RecordsError> {
        self.append(
            &[Item {
                kind: Kind::End,
                session,
                head: Some(head),
            }],
            false,
        )
    }

    /// Sessions about to be removed (`rm`, `prune` or `discard`), in one
    /// write; fsynced before the caller removes anything.
    pub fn removing(&self, kind: Kind, sessions: &[&str]) -> Result<(), RecordsError> {
        debug_assert!(kind.is_removal());
        let items: Vec<Item> = sessions
            .iter()
            .map(|session| Item {
                kind,
                session,
                head: None,
            })
            .collect();
        self.append(&items, true)
    }

    fn open_for_append(&self) -> Result<File, RecordsError> {
        let path = self.path();
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(layout::FILE_MODE)
            // A symlink planted in its place is refused, not followed.
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|source| RecordsError::LedgerOpen {
                path: path.clone(),
                source,
            })?;
        let meta = file.metadata().map_err(|source| RecordsError::LedgerOpen {
            path: path.clone(),
            source,
        })?;
        if !meta.is_file() {
            return Err(RecordsError::LedgerDamaged {
                path,
                reason: "it is not a regular file".into(),
            });
        }
        if meta.len() == 0 && meta.permissions().mode() & 0o777 != layout::FILE_MODE {
            // Just created under a umask: owner-only like every record.
            let _ = file.set_permissions(fs::Permissions::from_mode(layout::FILE_MODE));
        }
        Ok(file)
    }

    fn lock(&self, file: &File) -> Result<(), RecordsError> {
        let deadline = Instant::now() + LOCK_WAIT;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(()),
                Err(fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(fs::TryLockError::WouldBlock) => {
                    return Err(RecordsError::LedgerLocked { path: self.path() });
                }
                Err(fs::TryLockError::Error(source)) => {
                    return Err(RecordsError::LedgerOpen {
                        path: self.path(),
                        source,
                    });
                }
            }
        }
    }

    fn append(&self, items: &[Item], durable: bool) -> Result<(), RecordsError> {
        let path = self.path();
        let write_err = |source| RecordsError::LedgerWrite {
            path: path.clone(),
            source,
        };
        let mut file = self.open_for_append()?;
        self.lock(&file)?;
        let len = file.metadata().map_err(write_err)?.len();
        let mut text = String::new();
        let last = if len == 0 {
            None
        } else {
            let mut byte = [0u8; 1];
            file.read_exact_at(&mut byte, len - 1).map_err(write_err)?;
            if byte[0] != b'\n' {
                // A torn or unterminated last line: ours start on a new one.
                text.push('\n');
            }
            match last_line(&file, len, true, Entry::parse).map_err(write_err)? {
                Some(e) => Some(e),
                // The very first append cut short: a fragment, no newline.
                None if byte[0] != b'\n' && !has_newline(&file, len).map_err(write_err)? => None,
                None => {
                    return Err(RecordsError::LedgerDamaged {
                        path,
                        reason: "none of its lines is a ledger entry".into(),
                    });
                }
            }
        };
        let created = last.is_none();
        let (mut seq, mut prev) =
            last.map_or((0, genesis()), |e| (e.seq.saturating_add(1), e.hash));
        let now = crate::time::format_rfc3339(SystemTime::now());
        let mut push = |kind: Kind, session: &str, head: Option<&Head>| {
            let p = Entry::prefix(seq, &now, kind, session, head);
            let hash = link(&prev, &p);
            text.push_str(&p);
            text.push(' ');
            text.push_str(&hex_encode(&hash));
            text.push('\n');
            prev = hash;
            seq += 1;
        };
        if created {
            // Sessions recorded before the ledger existed are adopted as they are now.
            let ours: Vec<&str> = items.iter().map(|i| i.session).collect();
            for (id, head) in adoptable(&self.root)? {
                if !ours.contains(&id.as_str()) {
                    push(Kind::Adopt, &id, head.as_ref());
                }
            }
        }
        for item in items {
            push(item.kind, item.session, item.head.as_ref());
        }
        file.write_all(text.as_bytes()).map_err(write_err)?;
        if durable || created {
            file.sync_data().map_err(write_err)?;
        }
        if created {
            // The new file's name, too.
            File::open(&self.root)
                .and_then(|d| d.sync_all())
                .map_err(write_err)?;
        }
        Ok(())
    }

    /// Reads and checks the ledger's own chain. A missing or empty ledger has
    /// no entries and no problems.
    pub fn read(&self) -> Result<Chain, RecordsError> {
        let path = self.path();
        let bytes = match fs::symlink_metadata(&path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Chain::default());
            }
            Err(source) => return Err(RecordsError::Read { path, source }),
            Ok(m) if !m.is_file() => {
                return Err(RecordsError::LedgerDamaged {
                    path,
                    reason: "it is not a regular file".into(),
                });
            }
            Ok(_) => fs::read(&path).map_err(|source| RecordsError::Read {
                path: path.clone(),
                source,
            })?,
        };
        Ok(check::check_chain(&bytes))
    }
}

/// Every session folder under `root` with its current head (none while its
/// supervisor runs, or without a readable chain), by name.
fn adoptable(root: &Path) -> Result<Vec<(String, Option<Head>)>, RecordsError> {
    let store = crate::store::SessionStore::at(root);
    let boot = layout::boot_id();
    let mut out = Vec::new();
    for (name, dir) in store.session_dirs()? {
        let running = crate::store::read_metadata(&dir)
            .is_ok_and(|m| m.effective_status(boot.as_deref()) == Status::Running);
        let head = if running {
            None
        } else {
            session_head(&dir).ok().flatten()
        };
        out.push((name, head));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::TempDir;

    const A: &str = "session-20261125T130001Z-aaaaaa";
    const B: &str = "session-20261125T130002Z-bbbbbb";

    fn head(n: u8) -> Head {
        Head {
            records: u64::from(n),
            hash: [n; 32],
        }
    }

    fn ledger(tag: &str) -> (TempDir, Ledger) {
        let tmp = TempDir::new(tag);
        let l = Ledger::at(tmp.path());
        (tmp, l)
    }

    fn text(l: &Ledger) -> String {
        fs::read_to_string(l.path()).unwrap()
    }

    #[test]
    fn entries_chain_and_say_what_became_of_each_session() {
        let (_tmp, l) = ledger("chain");
        l.started(A).unwrap();
        l.started(B).unwrap();
        l.ended(A, head(7)).unwrap();
        l.removing(Kind::Prune, &[A, B]).unwrap();
        let chain = l.read().unwrap();
        assert_eq!(chain.problems, vec![]);
        assert!(chain.torn.is_empty());
        let seqs: Vec<u64> = chain.entries.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![0, 1, 2, 3, 4]);
        assert_eq!(chain.entries[2].head, Some(head(7)));
        let states = chain.states();
        assert!(matches!(
            states[A],
            State::Removed { kind: Kind::Prune, head: Some(h), .. } if h == head(7)
        ));
        assert!(matches!(states[B], State::Removed { head: None, .. }));
        assert_eq!(chain.head().map(|h| h.0), Some(4));
        let last = chain.entries[4].hash;
        assert!(chain.contains(&last) && !chain.contains(&[0; 32]));
        assert_eq!(
            fs::metadata(l.path()).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn lines_parse_back_only_when_whole() {
        let (_tmp, l) = ledger("parse");
        l.ended(A, head(3)).unwrap();
        let t = text(&l);
        let line = t.trim_end();
        let e = Entry::parse(line).unwrap();
        assert_eq!(
            (e.kind, e.session.as_str(), e.head),
            (Kind::End, A, Some(head(3)))
        );
        assert_eq!(e.expected_hash(&genesis()), e.hash);
        for cut in 1..line.len() {
            assert!(Entry::parse(&line[..cut]).is_none(), "{}", &line[..cut]);
        }
        assert!(Entry::parse(&format!("{line} x")).is_none());
        // `end` needs a head; `start` may not have one.
        assert!(Entry::parse(&line.replacen(" end ", " start ", 1)).is_none());
        assert!(Entry::parse(&line.replacen(A, "../etc", 1)).is_none());
    }

    #[test]
    fn an_edited_a_removed_and_a_garbled_line_are_named() {
        let (_tmp, l) = ledger("tamper");
        for _ in 0..4 {
            l.started(A).unwrap();
        }
        let original = text(&l);
        let lines: Vec<&str> = original.lines().collect();
        let write = |lines: &[String]| fs::write(l.path(), lines.join("\n") + "\n").unwrap();
        let mut edited: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        edited[1] = edited[1].replacen(A, B, 1);
        write(&edited);
        let chain = l.read().unwrap();
        assert_eq!(chain.problems, vec![ChainProblem::LineChanged { line: 2 }]);
        // An anchor at or after the edit no longer holds; one before it does.
        assert!(chain.contains(&chain.entries[0].hash));
        assert!(!chain.contains(&chain.entries[1].hash));
        assert!(!chain.contains(&chain.entries[3].hash));
        let mut removed: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        removed.remove(1);
        write(&removed);
        assert_eq!(
            l.read().unwrap().problems,
            vec![ChainProblem::LinesRemoved { line: 2, count: 1 }]
        );
        let mut garbled: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        garbled[2] = "hello".into();
        write(&garbled);
        assert_eq!(
            l.read().unwrap().problems,
            vec![ChainProblem::NotAnEntry { line: 3 }]
        );
        // A line cut short in the middle is not a torn append either.
        let mut cut: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        cut[1].truncate(20);
        write(&cut);
        assert_eq!(
            l.read().unwrap().problems,
            vec![ChainProblem::NotAnEntry { line: 2 }]
        );
    }

    #[test]
    fn a_torn_last_line_is_explained_and_the_next_append_goes_past_it() {
        let (_tmp, l) = ledger("torn");
        l.started(A).unwrap();
        l.ended(A, head(2)).unwrap();
        let whole = text(&l);
        let last = whole.trim_end().lines().last().unwrap().to_owned();
        // A crash in the middle of the second append.
        let torn = &whole[..whole.len() - last.len() / 2];
        fs::write(l.path(), torn).unwrap();
        let chain = l.read().unwrap();
        assert_eq!(
            (chain.problems.clone(), chain.torn.clone()),
            (vec![], vec![2])
        );
        l.started(B).unwrap();
        let chain = l.read().unwrap();
        assert_eq!(
            (chain.problems.clone(), chain.torn.clone()),
            (vec![], vec![2])
        );
        let e = chain.entries.last().unwrap();
        assert_eq!((e.seq, e.session.as_str()), (1, B));
        // The whole line without its newline is an entry: the next append ends it.
        fs::write(l.path(), whole.trim_end()).unwrap();
        l.started(B).unwrap();
        let chain = l.read().unwrap();
        assert_eq!(chain.problems, vec![]);
        assert!(chain.torn.is_empty());
        assert_eq!(
            chain.entries.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [0, 1, 2]
        );
    }

    #[test]
    fn a_first_append_cut_short_does_not_block_the_next() {
        let (_tmp, l) = ledger("torn-first");
        fs::write(l.path(), "0 2026-11-25T13:00:00.000Z sta").unwrap();
        l.started(A).unwrap();
        let chain = l.read().unwrap();
        assert_eq!(
            (chain.problems.clone(), chain.torn.clone()),
            (vec![], vec![1])
        );
        assert_eq!(chain.entries.len(), 1);
    }

    #[test]
    fn a_ledger_with_no_entry_or_that_is_not_a_file_is_refused() {
        let (_tmp, l) = ledger("refuse");
        fs::write(l.path(), "not a ledger\n").unwrap();
        let e = l.started(A).unwrap_err();
        assert!(matches!(e, RecordsError::LedgerDamaged { .. }), "{e}");
        assert_eq!(text(&l), "not a ledger\n", "the file was changed");
        assert_eq!(
            l.read().unwrap().problems,
            vec![ChainProblem::NotAnEntry { line: 1 }]
        );
        fs::remove_file(l.path()).unwrap();
        fs::create_dir(l.path()).unwrap();
        assert!(matches!(
            l.started(A).unwrap_err(),
            RecordsError::LedgerOpen { .. } | RecordsError::LedgerDamaged { .. }
        ));
        assert!(l.read().is_err());
        fs::remove_dir(l.path()).unwrap();
        let target = l.root.join("elsewhere");
        std::os::unix::fs::symlink(&target, l.path()).unwrap();
        assert!(matches!(
            l.started(A).unwrap_err(),
            RecordsError::LedgerOpen { .. }
        ));
        assert!(!target.exists(), "the symlink was followed");
    }

    #[test]
    fn concurrent_appends_all_land_in_one_chain() {
        let (_tmp, l) = ledger("threads");
        std::thread::scope(|s| {
            for t in 0..8u8 {
                let l = l.clone();
                s.spawn(move || {
                    for i in 0..40u8 {
                        if i % 2 == 0 {
                            l.started(A).unwrap();
                        } else {
                            l.ended(B, head(t)).unwrap();
                        }
                    }
                });
            }
        });
        let chain = l.read().unwrap();
        assert_eq!(chain.problems, vec![]);
        assert_eq!(chain.entries.len(), 320);
        assert_eq!(chain.head().map(|h| h.0), Some(319));
    }

    #[test]
    fn an_append_waits_for_the_lock() {
        let (_tmp, l) = ledger("lock");
        l.started(A).unwrap();
        let holder = File::open(l.path()).unwrap();
        holder.lock().unwrap();
        std::thread::scope(|s| {
            let t = s.spawn(|| l.started(B));
            std::thread::sleep(Duration::from_millis(200));
            assert_eq!(text(&l).lines().count(), 1, "appended under another's lock");
            holder.unlock().unwrap();
            t.join().unwrap().unwrap();
        });
        assert_eq!(l.read().unwrap().entries.len(), 2);
    }
}
