//! `logs verify`: recomputes the hash chain of a session folder and says
//! precisely which file, line or byte range no longer matches what was
//! recorded.

use std::collections::HashMap;
use std::fmt;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use serde::Serialize;

use crate::chain::{Hash, IntegrityLine, digest, genesis};
use crate::error::RecordsError;
use crate::layout::{self, RecordFile};

/// One discrepancy between a session's files and its `integrity.log`.
/// Line numbers count from 1; byte ranges are `start..end` (end exclusive).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "problem", rename_all = "kebab-case")]
pub enum Problem {
    Missing {
        file: String,
    },
    LineChanged {
        file: String,
        line: u64,
    },
    LinesRemoved {
        file: String,
        line: u64,
        count: u64,
    },
    LinesAdded {
        file: String,
        line: u64,
        count: u64,
    },
    BytesChanged {
        file: String,
        start: u64,
        end: u64,
    },
    Truncated {
        file: String,
        at: u64,
        expected: u64,
        /// For line files: the first line that is gone.
        first_missing_line: Option<u64>,
    },
    Unrecorded {
        file: String,
        at: u64,
        bytes: u64,
        /// The session never finished: a crash between writing data and
        /// recording it leaves such a tail.
        unfinished: bool,
    },
    IntegrityMissing,
    IntegrityLineChanged {
        line: u64,
    },
    IntegrityLinesRemoved {
        line: u64,
        count: u64,
    },
    IntegrityTruncated {
        lines: u64,
        expected: u64,
    },
    MetadataChanged,
    /// `metadata.json`'s last version was written but its `integrity.log` line never
    /// followed: the supervisor stopped between the two writes (killed, or the disk
    /// filled), or that last line was removed. Its content cannot be verified.
    MetadataUnchained {
        records: u64,
    },
}

fn lines_span(line: u64, count: u64) -> String {
    if count == 1 {
        format!("line {line} was")
    } else {
        format!("lines {line} to {} were", line + count - 1)
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Missing { file } => write!(f, "{file} is missing"),
            Problem::LineChanged { file, line } => write!(f, "{file} line {line} was changed"),
            Problem::LinesRemoved { file, line, count } => {
                write!(f, "{file} {} removed", lines_span(*line, *count))
            }
            Problem::LinesAdded { file, line, count } => write!(
                f,
                "{file} {} never recorded (added after the fact)",
                lines_span(*line, *count)
            ),
            Problem::BytesChanged { file, start, end } => {
                write!(
                    f,
                    "{file} bytes {start} to {} were changed",
                    end.saturating_sub(1)
                )
            }
            Problem::Truncated {
                file,
                at,
                expected,
                first_missing_line,
            } => {
                write!(f, "{file} was truncated at byte {at} (expected {expected})")?;
                if let Some(l) = first_missing_line {
                    write!(f, "; line {l} onward is missing")?;
                }
                Ok(())
            }
            Problem::Unrecorded {
                file,
                at,
                bytes,
                unfinished,
            } => {
                write!(
                    f,
                    "{file} has {bytes} bytes that were never recorded (appended after the fact at byte {at})"
                )?;
                if *unfinished {
                    write!(
                        f,
                        "; the session did not finish, so its supervisor stopping during this write (killed, or the disk full) explains this"
                    )?;
                }
                Ok(())
            }
            Problem::IntegrityMissing => {
                write!(
                    f,
                    "integrity.log is missing; the records cannot be verified"
                )
            }
            Problem::IntegrityLineChanged { line } => {
                write!(f, "integrity.log line {line} was changed")
            }
            Problem::IntegrityLinesRemoved { line, count } => {
                write!(f, "integrity.log {} removed", lines_span(*line, *count))
            }
            Problem::IntegrityTruncated { lines, expected } => write!(
                f,
                "integrity.log was truncated: it has {lines} lines, expected at least {expected}"
            ),
            Problem::MetadataChanged => write!(f, "metadata.json was changed"),
            Problem::MetadataUnchained { records } => write!(
                f,
                "metadata.json's last version was never recorded in integrity.log (it claims the {records} records before it): the supervisor stopped between writing it and recording it, or integrity.log's last line was removed; its content is unverified"
            ),
        }
    }
}

/// Outcome of [`verify`]. `records` counts the lines of `integrity.log`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "lowercase")]
pub enum VerifyReport {
    Intact {
        records: u64,
    },
    Tampered {
        records: u64,
        problems: Vec<Problem>,
    },
    /// The record was never finished and every problem is what a supervisor that
    /// stopped mid-write leaves (killed, or out of disk space): data or a last
    /// `integrity.log` line written but not chained, a last `metadata.json` never
    /// chained. Everything chained verifies; `problems` names what is incomplete.
    Interrupted {
        records: u64,
        problems: Vec<Problem>,
    },
}

impl VerifyReport {
    pub fn is_intact(&self) -> bool {
        matches!(self, VerifyReport::Intact { .. })
    }

    /// Intact, or cut short by its supervisor's end with nothing else wrong.
    pub fn is_interrupted(&self) -> bool {
        matches!(self, VerifyReport::Interrupted { .. })
    }

    /// The report of a session known to have finished (the ledger has its end):
    /// no tail of it is explained away as a crash's.
    #[must_use]
    pub fn known_finished(mut self) -> Self {
        if let VerifyReport::Tampered { problems, .. } = &mut self {
            for p in problems {
                if let Problem::Unrecorded { unfinished, .. } = p {
                    *unfinished = false;
                }
            }
        }
        self
    }

    pub fn problems(&self) -> &[Problem] {
        match self {
            VerifyReport::Intact { .. } => &[],
            VerifyReport::Tampered { problems, .. }
            | VerifyReport::Interrupted { problems, .. } => problems,
        }
    }
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerifyReport::Intact { records } => write!(f, "intact ({records} records)"),
            VerifyReport::Tampered { problems, .. } => {
                write!(f, "tampered:")?;
                for p in problems {
                    write!(f, "\n  {p}")?;
                }
                Ok(())
            }
            VerifyReport::Interrupted { problems, .. } => {
                write!(f, "interrupted (everything chained verifies):")?;
                for p in problems {
                    write!(f, "\n  {p}")?;
                }
                Ok(())
            }
        }
    }
}

/// A data record from `integrity.log`. `trusted` is false when its own
/// integrity line was reported changed: its region is then not judged again.
struct Rec {
    offset: u64,
    len: u64,
    digest: Hash,
    trusted: bool,
}

impl Rec {
    fn end(&self) -> u64 {
        self.offset.saturating_add(self.len)
    }
}

/// The parts of `metadata.json` verification looks at, parsed leniently.
#[derive(serde::Deserialize, Default)]
struct MetaPeek {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    integrity: Option<HeadPeek>,
}

#[derive(serde::Deserialize)]
struct HeadPeek {
    records: u64,
}

fn read_err(path: &Path) -> impl FnOnce(io::Error) -> RecordsError + '_ {
    move |source| RecordsError::Read {
        path: path.to_owned(),
        source,
    }
}

/// Whether `dir`'s `metadata.json` is, byte for byte, the last version its
/// `integrity.log` chained. `logs verify --all` trusts a `running` status (and
/// leaves the session's chain unchecked) only then: the chained versions name the
/// real supervisor, so a `metadata.json` edited to name some live process does
/// not pass. (The chain itself is not checked here; an unended session's chain
/// is not anchored anyway.)
pub fn metadata_is_chained(dir: &Path) -> Result<bool, RecordsError> {
    let ipath = dir.join(layout::INTEGRITY);
    let text = match fs::read_to_string(&ipath) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(read_err(&ipath)(e)),
    };
    let last = text
        .lines()
        .rev()
        .filter_map(IntegrityLine::parse)
        .find(|l| RecordFile::from_name(&l.file) == Some(RecordFile::Metadata))
        .map(|l| l.digest);
    let mpath = dir.join(layout::METADATA);
    let content = match fs::read(&mpath) {
        Ok(c) => c,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(read_err(&mpath)(e)),
    };
    Ok(last == Some(digest(&content)))
}

/// Verifies the session folder `dir`. I/O failures (unreadable folder) are
/// errors; any mismatch is a [`Problem`] in the report.
pub fn verify(dir: &Path) -> Result<VerifyReport, RecordsError> {
    let ipath = dir.join(layout::INTEGRITY);
    let text = match fs::read(&ipath) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if !dir.is_dir() {
                return Err(read_err(dir)(e));
            }
            return Ok(VerifyReport::Tampered {
                records: 0,
                problems: vec![Problem::IntegrityMissing],
            });
        }
        Err(e) => return Err(read_err(&ipath)(e)),
    };
    let mut problems = Vec::new();
    let mut per_file: HashMap<RecordFile, Vec<Rec>> = HashMap::new();
    // (seq, digest) of the last metadata.json record.
    let mut last_meta: Option<(u64, Hash)> = None;

    let mut lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    let complete = lines.pop().is_some_and(<[u8]>::is_empty);
    let line_count = u64::try_from(lines.len()).unwrap_or(u64::MAX);
    if !complete {
        // A last line without its newline: cut short mid-line.
        problems.push(Problem::IntegrityLineChanged {
            line: line_count + 1,
        });
    }

    let mut prev: Option<Hash> = Some(genesis());
    let mut next_seq: u64 = 0;
    for (idx, raw) in lines.iter().enumerate() {
        let line_no = u64::try_from(idx).unwrap_or(u64::MAX) + 1;
        let parsed = std::str::from_utf8(raw).ok().and_then(IntegrityLine::parse);
        let Some(l) = parsed else {
            problems.push(Problem::IntegrityLineChanged { line: line_no });
            prev = None;
            next_seq += 1;
            continue;
        };
        let file = RecordFile::from_name(&l.file);
        let mut trusted = file.is_some();
        if l.seq > next_seq {
            problems.push(Problem::IntegrityLinesRemoved {
                line: next_seq + 1,
                count: l.seq - next_seq,
            });
        } else if l.seq < next_seq {
            trusted = false;
        } else if let Some(p) = prev
            && l.expected_hash(&p) != l.hash
        {
            trusted = false;
        }
        if !trusted {
            problems.push(Problem::IntegrityLineChanged { line: line_no });
        }
        prev = Some(l.hash);
        next_seq = next_seq.max(l.seq + 1);
        match file {
            Some(RecordFile::Metadata) => last_meta = Some((l.seq, l.digest)),
            Some(f) => per_file.entry(f).or_default().push(Rec {
                offset: l.offset,
                len: l.len,
                digest: l.digest,
                trusted,
            }),
            None => {}
        }
    }

    // metadata.json: its last version must be the last one recorded.
    let mpath = dir.join(layout::METADATA);
    let mut unfinished = true;
    let mut unchained_meta = false;
    match fs::read(&mpath) {
        Ok(content) => {
            let peek: MetaPeek = serde_json::from_slice(&content).unwrap_or_default();
            unfinished = peek.status.as_deref().is_none_or(|s| s == "running");
            let expected_lines = peek.integrity.map(|h| h.records.saturating_add(1));
            match expected_lines {
                Some(exp)
                    if exp == line_count + 1
                        && last_meta.is_none_or(|(_, d)| d != digest(&content)) =>
                {
                    unchained_meta = true;
                    problems.push(Problem::MetadataUnchained {
                        records: line_count,
                    });
                }
                Some(exp)
                    if exp > line_count && last_meta.is_none_or(|(_, d)| d != digest(&content)) =>
                {
                    problems.push(Problem::IntegrityTruncated {
                        lines: line_count,
                        expected: exp,
                    });
                }
                _ => {
                    if last_meta.is_none_or(|(_, d)| d != digest(&content)) {
                        problems.push(Problem::MetadataChanged);
                    }
                }
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => problems.push(Problem::Missing {
            file: layout::METADATA.into(),
        }),
        Err(e) => return Err(read_err(&mpath)(e)),
    }

    for file in RecordFile::APPENDED.into_iter().chain(RecordFile::OPTIONAL) {
        let recs = per_file.remove(&file).unwrap_or_default();
        let path = dir.join(file.name());
        let f = match File::open(&path) {
            Ok(f) => f,
            // Only sessions run with a terminal have tty.cast: missing, it
            // is a problem only when the chain says it was written.
            Err(e)
                if e.kind() == io::ErrorKind::NotFound && file.is_optional() && recs.is_empty() =>
            {
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                problems.push(Problem::Missing {
                    file: file.name().into(),
                });
                continue;
            }
            Err(e) => return Err(read_err(&path)(e)),
        };
        if file.is_line_file() {
            let content = fs::read(&path).map_err(read_err(&path))?;
            check_lines(file.name(), &content, &recs, unfinished, &mut problems);
        } else {
            check_stream(file.name(), &f, &recs, unfinished, &mut problems)
                .map_err(read_err(&path))?;
        }
    }

    // What a supervisor that stopped mid-write leaves: a torn last integrity line,
    // data not yet chained, a last metadata.json not yet chained. A record whose
    // last metadata says it finished has no data after it, so only an unchained
    // metadata.json is explained there.
    let explained = |p: &Problem| match p {
        Problem::Unrecorded { unfinished, .. } => *unfinished,
        Problem::IntegrityLineChanged { line } => !complete && *line == line_count + 1,
        Problem::MetadataUnchained { .. } => true,
        _ => false,
    };
    Ok(if problems.is_empty() {
        VerifyReport::Intact {
            records: line_count,
        }
    } else if (unfinished || unchained_meta) && problems.iter().all(explained) {
        VerifyReport::Interrupted {
            records: line_count,
            problems,
        }
    } else {
        VerifyReport::Tampered {
            records: line_count,
            problems,
        }
    })
}

fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

fn to_u64(v: usize) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// Raw stream files: each chunk is checked in place, without reading the
/// whole file into memory.
fn check_stream(
    name: &str,
    f: &File,
    recs: &[Rec],
    unfinished: bool,
    problems: &mut Vec<Problem>,
) -> io::Result<()> {
    let file_len = f.metadata()?.len();
    let expected = recs.iter().map(Rec::end).max().unwrap_or(0);
    let mut changed: Vec<(u64, u64)> = Vec::new();
    let mut buf = Vec::new();
    for r in recs {
        if r.end() > file_len {
            break; // reported as truncation below
        }
        buf.resize(to_usize(r.len), 0);
        f.read_exact_at(&mut buf, r.offset)?;
        if r.trusted && digest(&buf) != r.digest {
            match changed.last_mut() {
                Some(last) if last.1 == r.offset => last.1 = r.end(),
                _ => changed.push((r.offset, r.end())),
            }
        }
    }
    for (start, end) in changed {
        problems.push(Problem::BytesChanged {
            file: name.into(),
            start,
            end,
        });
    }
    if file_len < expected {
        problems.push(Problem::Truncated {
            file: name.into(),
            at: file_len,
            expected,
            first_missing_line: None,
        });
    } else if file_len > expected {
        problems.push(Problem::Unrecorded {
            file: name.into(),
            at: expected,
            bytes: file_len - expected,
            unfinished,
        });
    }
    Ok(())
}

/// Line files: one record per line. Checked in place first; at the first
/// mismatch the rest is aligned line by line so that a changed, removed or
/// inserted line is named as such rather than shifting everything after it.
fn check_lines(
    name: &str,
    content: &[u8],
    recs: &[Rec],
    unfinished: bool,
    problems: &mut Vec<Problem>,
) {
    let len = to_u64(content.len());
    let expected = recs.iter().map(Rec::end).max().unwrap_or(0);
    let line_at = |offset: u64| {
        let off = to_usize(offset).min(content.len());
        to_u64(content[..off].iter().filter(|&&b| b == b'\n').count()) + 1
    };
    let first_bad = recs.iter().position(|r| {
        r.end() > len
            || (r.trusted && digest(&content[to_usize(r.offset)..to_usize(r.end())]) != r.digest)
    });
    let Some(k) = first_bad else {
        if len > expected {
            let tail = &content[to_usize(expected)..];
            let count = to_u64(
                tail.split(|&b| b == b'\n')
                    .filter(|l| !l.is_empty())
                    .count(),
            );
            if tail.ends_with(b"\n") && count > 0 && !unfinished {
                problems.push(Problem::LinesAdded {
                    file: name.into(),
                    line: line_at(expected),
                    count,
                });
            } else {
                problems.push(Problem::Unrecorded {
                    file: name.into(),
                    at: expected,
                    bytes: len - expected,
                    unfinished,
                });
            }
        }
        return;
    };
    let start = recs[k].offset;
    let tail = content.get(to_usize(start)..).unwrap_or_default();
    if recs[k].end() > len && !tail.contains(&b'\n') {
        // Everything before the cut is intact and no whole line follows
        // it: a plain truncation.
        problems.push(Problem::Truncated {
            file: name.into(),
            at: len,
            expected,
            first_missing_line: Some(line_at(start)),
        });
        return;
    }
    align(name, tail, &recs[k..], line_at(start), problems);
}

/// Index of the first element of `positions` greater than `after`.
fn next_after(map: &HashMap<Hash, Vec<usize>>, key: &Hash, after: usize) -> Option<usize> {
    let v = map.get(key)?;
    v.get(v.partition_point(|&p| p <= after)).copied()
}

fn align(name: &str, tail: &[u8], recs: &[Rec], first_line: u64, problems: &mut Vec<Problem>) {
    let actual: Vec<Hash> = tail.split_inclusive(|&b| b == b'\n').map(digest).collect();
    let mut exp_pos: HashMap<Hash, Vec<usize>> = HashMap::new();
    for (i, r) in recs.iter().enumerate() {
        exp_pos.entry(r.digest).or_default().push(i);
    }
    let mut act_pos: HashMap<Hash, Vec<usize>> = HashMap::new();
    for (j, h) in actual.iter().enumerate() {
        act_pos.entry(*h).or_default().push(j);
    }
    let (n, m) = (recs.len(), actual.len());
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if !recs[i].trusted || recs[i].digest == actual[j] {
            i += 1;
            j += 1;
            continue;
        }
        let removed = next_after(&exp_pos, &actual[j], i).map(|p| p - i);
        let added = next_after(&act_pos, &recs[i].digest, j).map(|p| p - j);
        match (removed, added) {
            (Some(r), a) if a.is_none_or(|a| r < a) => {
                problems.push(Problem::LinesRemoved {
                    file: name.into(),
                    line: first_line + to_u64(i),
                    count: to_u64(r),
                });
                i += r;
            }
            (r, Some(a)) if r.is_none_or(|r| a < r) => {
                problems.push(Problem::LinesAdded {
                    file: name.into(),
                    line: first_line + to_u64(j),
                    count: to_u64(a),
                });
                j += a;
            }
            _ => {
                problems.push(Problem::LineChanged {
                    file: name.into(),
                    line: first_line + to_u64(j),
                });
                i += 1;
                j += 1;
            }
        }
    }
    if i < n {
        problems.push(Problem::LinesRemoved {
            file: name.into(),
            line: first_line + to_u64(i),
            count: to_u64(n - i),
        });
    }
    if j < m {
        problems.push(Problem::LinesAdded {
            file: name.into(),
            line: first_line + to_u64(j),
            count: to_u64(m - j),
        });
    }
}
