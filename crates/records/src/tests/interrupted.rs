//! What a supervisor that stops mid-write (SIGKILL, a full disk) leaves: `verify`
//! explains it as an interrupted record, and still calls anything else tampering.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::{TempDir, sample_meta, store};
use crate::{End, Event, Problem, VerifyReport, verify};

/// An unfinished session (status `running`) with some of every kind of record.
fn unfinished_session() -> (TempDir, PathBuf) {
    let (tmp, store) = store("interrupted");
    let w = store.create(sample_meta()).unwrap();
    w.append_stdout(b"before the stop\n").unwrap();
    w.event(Event::new("tick")).unwrap();
    let dir = w.dir().to_owned();
    // Dropped without `finish`: what a killed supervisor leaves.
    std::mem::forget(w);
    assert!(verify(&dir).unwrap().is_intact());
    (tmp, dir)
}

fn append(path: &Path, bytes: &[u8]) {
    OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

fn interrupted(dir: &Path) -> Vec<Problem> {
    match verify(dir).unwrap() {
        VerifyReport::Interrupted { problems, .. } => problems,
        other => panic!("expected an interrupted record, got {other:?}"),
    }
}

#[test]
fn data_written_but_not_chained_is_an_interruption() {
    let (_tmp, dir) = unfinished_session();
    append(&dir.join("stdout.log"), b"half a line");
    append(&dir.join("events.jsonl"), b"{\"type\":\"tick\"");
    let problems = interrupted(&dir);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems.iter().all(|p| matches!(
            p,
            Problem::Unrecorded {
                unfinished: true,
                ..
            }
        )),
        "{problems:?}"
    );
}

#[test]
fn a_torn_last_integrity_line_is_an_interruption() {
    let (_tmp, dir) = unfinished_session();
    append(&dir.join("stdout.log"), b"more");
    append(&dir.join("integrity.log"), b"7 stdout.log 16 4 abc");
    let problems = interrupted(&dir);
    assert!(
        problems.contains(&Problem::IntegrityLineChanged { line: 5 }),
        "{problems:?}"
    );
}

#[test]
fn a_last_metadata_never_chained_is_an_interruption_whose_content_is_unverified() {
    let (_tmp, store) = store("interrupted-meta");
    let w = store.create(sample_meta()).unwrap();
    w.append_stdout(b"out\n").unwrap();
    let dir = w.dir().to_owned();
    w.finish(End::exited(0)).unwrap();
    // The final metadata.json was replaced, then the supervisor died before its line.
    let text = fs::read_to_string(dir.join("integrity.log")).unwrap();
    let kept: Vec<&str> = text.lines().collect();
    let records = kept.len() - 1;
    fs::write(
        dir.join("integrity.log"),
        format!("{}\n", kept[..records].join("\n")),
    )
    .unwrap();
    let problems = interrupted(&dir);
    assert_eq!(
        problems,
        [Problem::MetadataUnchained {
            records: records as u64
        }]
    );
    assert!(problems[0].to_string().contains("unverified"));
}

#[test]
fn other_damage_to_an_unfinished_record_is_still_tampering() {
    let (_tmp, dir) = unfinished_session();
    append(&dir.join("stdout.log"), b"tail");
    let log = dir.join("stdout.log");
    let mut content = fs::read(&log).unwrap();
    content[0] = b'X';
    fs::write(&log, content).unwrap();
    let report = verify(&dir).unwrap();
    assert!(
        matches!(report, VerifyReport::Tampered { .. }),
        "{report:?}"
    );
}

#[test]
fn bytes_appended_to_a_finished_record_are_tampering() {
    let (_tmp, store) = store("interrupted-done");
    let w = store.create(sample_meta()).unwrap();
    let dir = w.dir().to_owned();
    w.finish(End::exited(0)).unwrap();
    append(&dir.join("stdout.log"), b"added later");
    let report = verify(&dir).unwrap();
    assert!(
        matches!(report, VerifyReport::Tampered { .. }),
        "{report:?}"
    );
}
