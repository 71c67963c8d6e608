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

/// A small tmpfs mounted for one test (root only), unmounted when dropped.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(at: PathBuf) -> Self {
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            fs::metadata("/proc/self").unwrap().uid(),
            0,
            "run as root: this test mounts a small tmpfs to fill it"
        );
        fs::create_dir_all(&at).unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs"])
            .arg(&at)
            .status()
            .unwrap();
        assert!(status.success(), "mount -t tmpfs failed");
        Self(at)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// The disk fills while one write chains several records: the whole lines of it
/// that landed are taken back, so the folder's chain is the one the supervisor
/// knows and gives the ledger as the session's last. (Left there, `logs verify`
/// called the session rewritten outside Vectra Guard: a CI failure of
/// `records_filling_the_disk_stop_the_session_and_keep_what_was_written`.)
#[test]
fn a_chaining_write_the_full_disk_cut_short_is_taken_back() {
    let tmp = TempDir::new("full-disk");
    let disk = SmallDisk::mount(tmp.path().join("small"));
    let root = disk.0.join("logs");
    let store = crate::SessionStore::open(&root).unwrap();
    let w = store.create(sample_meta()).unwrap();
    let dir = w.dir().to_owned();
    // Records written while there is room, chained later in one write.
    let records: Vec<_> = (0..60)
        .map(|i| {
            let data = format!("line {i}\n");
            let record = w
                .write_stream(crate::RecordFile::Stdout, data.as_bytes())
                .unwrap();
            (record, crate::chain::digest(data.as_bytes()))
        })
        .collect();
    let integrity = dir.join("integrity.log");
    let before = fs::metadata(&integrity).unwrap().len();
    // Room for a few of the 60 lines in the integrity file's last page, no more.
    let room = 4096 - before % 4096;
    assert!(
        room > 600,
        "integrity.log's last page has {room} bytes free"
    );
    let mut filler = fs::File::create(disk.0.join("filler")).unwrap();
    while filler.write_all(&[0u8; 4096]).is_ok() {}
    drop(filler);
    assert!(w.chain_streams(&records).is_err(), "the disk was not full");
    assert_eq!(
        fs::metadata(&integrity).unwrap().len(),
        before,
        "what landed of the failed write is still there"
    );
    // The supervisor stops: its writer is dropped unfinished, and the ledger's
    // page still has room for the session's end.
    drop(w);
    let finding = crate::ledger::check_one(&root, &dir).unwrap();
    assert!(
        finding.as_ref().is_none_or(|f| !f.is_problem()),
        "{finding:?}"
    );
    assert!(
        !matches!(verify(&dir).unwrap(), VerifyReport::Tampered { .. }),
        "{:?}",
        verify(&dir).unwrap()
    );
}
