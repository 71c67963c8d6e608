//! `tty.cast`: the terminal recording written through `SessionWriter`,
//! read back as asciicast v2, and verified like the other line files.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::{TempDir, sample_meta, store};
use crate::{CastEvent, CastHeader, End, RecordsError, SessionWriter, verify};

fn header(dir: &Path) -> Value {
    let text = fs::read_to_string(dir.join("tty.cast")).unwrap();
    serde_json::from_str(text.lines().next().unwrap()).unwrap()
}

/// The events of `tty.cast` (every line after the header).
fn events(dir: &Path) -> Vec<CastEvent> {
    fs::read_to_string(dir.join("tty.cast"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| CastEvent::parse(l).unwrap())
        .collect()
}

fn output_text(events: &[CastEvent]) -> String {
    events
        .iter()
        .filter(|e| e.code == "o")
        .map(|e| e.data.as_str())
        .collect()
}

/// A finished session with a header and seven events.
fn cast_session() -> (TempDir, PathBuf) {
    let (tmp, store) = store("cast");
    let w = store.create(sample_meta()).unwrap();
    w.start_cast(
        80,
        24,
        &[("SHELL", "/bin/bash"), ("TERM", "xterm-256color")],
    )
    .unwrap();
    w.cast_output(b"$ ").unwrap();
    w.cast_input(b"ls\r").unwrap();
    w.cast_output(b"ls\r\n\x1b[1;34msrc\x1b[0m\r\n$ ").unwrap();
    w.cast_resize(120, 40).unwrap();
    w.cast_input(b"exit\r").unwrap();
    w.cast_output(b"exit\r\n").unwrap();
    w.cast_output(b"logout\r\n").unwrap();
    let dir = w.dir().to_owned();
    w.finish(End::exited(0)).unwrap();
    assert!(verify(&dir).unwrap().is_intact());
    (tmp, dir)
}

fn messages(dir: &Path) -> Vec<String> {
    let report = verify(dir).unwrap();
    assert!(!report.is_intact(), "tampering went unnoticed");
    report.problems().iter().map(ToString::to_string).collect()
}

fn edit_lines(path: &Path, f: impl FnOnce(&mut Vec<String>)) {
    let text = fs::read_to_string(path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    f(&mut lines);
    let mut out = lines.join("\n");
    out.push('\n');
    fs::write(path, out).unwrap();
}

#[test]
fn header_has_the_asciicast_v2_shape() {
    let (_tmp, dir) = cast_session();
    let h = header(&dir);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert_eq!(h["version"], 2);
    assert_eq!(h["width"], 80);
    assert_eq!(h["height"], 24);
    let ts = h["timestamp"].as_u64().unwrap();
    assert!(ts <= now && now - ts < 60, "{h}");
    assert_eq!(
        h["env"],
        serde_json::json!({"SHELL": "/bin/bash", "TERM": "xterm-256color"})
    );
    let first = fs::read_to_string(dir.join("tty.cast")).unwrap();
    let parsed = CastHeader::parse(first.lines().next().unwrap()).unwrap();
    assert_eq!((parsed.width, parsed.height), (80, 24));
    let mode = fs::metadata(dir.join("tty.cast"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn events_are_recorded_in_order_with_their_codes() {
    let (_tmp, dir) = cast_session();
    let ev = events(&dir);
    let codes: Vec<&str> = ev.iter().map(|e| e.code.as_str()).collect();
    assert_eq!(codes, ["o", "i", "o", "r", "i", "o", "o"]);
    assert_eq!(ev[1].data, "ls\r");
    assert_eq!(ev[3].data, "120x40");
    assert_eq!(
        output_text(&ev),
        "$ ls\r\n\x1b[1;34msrc\x1b[0m\r\n$ exit\r\nlogout\r\n"
    );
    // Every line is `[time,code,data]` with microsecond times.
    let text = fs::read_to_string(dir.join("tty.cast")).unwrap();
    assert!(text.contains(",\"r\",\"120x40\"]\n"), "{text}");
    for line in text.lines().skip(1) {
        let (time, _) = line[1..].split_once(',').unwrap();
        let (_, frac) = time.split_once('.').unwrap();
        assert_eq!(frac.len(), 6, "{line}");
    }
}

#[test]
fn times_are_relative_and_increasing() {
    let (_tmp, store) = store("cast-times");
    let w = store.create(sample_meta()).unwrap();
    w.start_cast(80, 24, &[]).unwrap();
    w.cast_output(b"a").unwrap();
    std::thread::sleep(Duration::from_millis(30));
    w.cast_output(b"b").unwrap();
    std::thread::sleep(Duration::from_millis(30));
    w.cast_input(b"c").unwrap();
    let dir = w.dir().to_owned();
    w.finish(End::exited(0)).unwrap();
    let t: Vec<f64> = events(&dir).iter().map(|e| e.time).collect();
    assert!(t[0] < 5.0, "{t:?}");
    assert!(t[1] - t[0] >= 0.029, "{t:?}");
    assert!(t[2] - t[1] >= 0.029, "{t:?}");
    assert!(header(&dir).get("env").is_none());
}

#[test]
fn concurrent_writers_keep_times_in_file_order() {
    let (_tmp, store) = store("cast-threads");
    let w = Arc::new(store.create(sample_meta()).unwrap());
    w.start_cast(80, 24, &[]).unwrap();
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let w = Arc::clone(&w);
            std::thread::spawn(move || {
                for _ in 0..50 {
                    if i % 2 == 0 {
                        w.cast_output(b"out").unwrap();
                    } else {
                        w.cast_input(b"in").unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let w = Arc::into_inner(w).unwrap();
    let dir = w.dir().to_owned();
    w.finish(End::exited(0)).unwrap();
    let t: Vec<f64> = events(&dir).iter().map(|e| e.time).collect();
    assert_eq!(t.len(), 200);
    assert!(t.windows(2).all(|p| p[0] <= p[1]), "{t:?}");
    assert!(verify(&dir).unwrap().is_intact());
}

#[test]
fn utf8_split_between_calls_is_one_character() {
    let (_tmp, store) = store("cast-utf8");
    let w = store.create(sample_meta()).unwrap();
    w.start_cast(80, 24, &[]).unwrap();
    let euro = "€".as_bytes();
    w.cast_output(&euro[..1]).unwrap(); // nothing whole yet: no event
    w.cast_input("é".as_bytes()).unwrap(); // input has its own carry
    w.cast_output(&euro[1..2]).unwrap();
    w.cast_output(&[euro[2], b'!']).unwrap();
    w.cast_output("😀".as_bytes().split_at(2).0).unwrap();
    w.cast_output("😀".as_bytes().split_at(2).1).unwrap();
    let dir = w.dir().to_owned();
    w.finish(End::exited(0)).unwrap();
    let ev = events(&dir);
    let view: Vec<(&str, &str)> = ev
        .iter()
        .map(|e| (e.code.as_str(), e.data.as_str()))
        .collect();
    assert_eq!(view, [("i", "é"), ("o", "€!"), ("o", "😀")]);
    assert!(verify(&dir).unwrap().is_intact());
}

#[test]
fn invalid_bytes_become_replacement_characters() {
    let (_tmp, store) = store("cast-invalid");
    let w = store.create(sample_meta()).unwrap();
    w.start_cast(80, 24, &[]).unwrap();
    w.cast_output(b"bad \xff\xfe byte").unwrap();
    w.cast_output(b"\x00\x07\x1b[0m").unwrap();
    // Cut short at the very end: written as U+FFFD when the session ends.
    w.cast_output(b"end \xe2\x82").unwrap();
    let dir = w.dir().to_owned();
    w.finish(End::exited(0)).unwrap();
    let data: Vec<String> = events(&dir).into_iter().map(|e| e.data).collect();
    assert_eq!(
        data,
        [
            "bad \u{fffd}\u{fffd} byte",
            "\x00\x07\x1b[0m",
            "end ",
            "\u{fffd}"
        ]
    );
    // Control characters are escaped: one event per line.
    let text = fs::read_to_string(dir.join("tty.cast")).unwrap();
    assert_eq!(text.lines().count(), 5);
    assert!(text.contains(r#""\u0000\u0007\u001b[0m""#), "{text}");
    assert!(verify(&dir).unwrap().is_intact());
}

#[test]
fn misuse_is_an_error() {
    let (_tmp, store) = store("cast-misuse");
    let w = store.create(sample_meta()).unwrap();
    assert!(matches!(
        w.cast_output(b"x"),
        Err(RecordsError::CastNotStarted { .. })
    ));
    assert!(matches!(
        w.cast_input(b"x"),
        Err(RecordsError::CastNotStarted { .. })
    ));
    assert!(matches!(
        w.cast_resize(1, 1),
        Err(RecordsError::CastNotStarted { .. })
    ));
    assert!(!w.dir().join("tty.cast").exists());
    w.start_cast(80, 24, &[]).unwrap();
    let again = w.start_cast(80, 24, &[]).unwrap_err();
    assert!(matches!(again, RecordsError::CastAlreadyStarted { .. }));
    assert!(again.to_string().contains("already started"), "{again}");
    // Nothing to record: no event.
    w.cast_output(b"").unwrap();
    let dir = w.dir().to_owned();
    w.finish(End::exited(0)).unwrap();
    assert_eq!(events(&dir).len(), 0);
}

#[test]
fn a_session_without_a_terminal_has_no_cast_and_verifies() {
    let (_tmp, store) = store("cast-none");
    let w: SessionWriter = store.create(sample_meta()).unwrap();
    w.append_stdout(b"plain\n").unwrap();
    let dir = w.dir().to_owned();
    w.finish(End::exited(0)).unwrap();
    assert!(!dir.join("tty.cast").exists());
    assert!(verify(&dir).unwrap().is_intact());
}

#[test]
fn edited_cast_line_is_named() {
    let (_tmp, dir) = cast_session();
    edit_lines(&dir.join("tty.cast"), |l| {
        l[3] = l[3].replace("src", "bin");
    });
    assert_eq!(messages(&dir), ["tty.cast line 4 was changed"]);
}

#[test]
fn edited_cast_header_is_named() {
    let (_tmp, dir) = cast_session();
    edit_lines(&dir.join("tty.cast"), |l| {
        l[0] = l[0].replace("\"width\":80", "\"width\":81");
    });
    assert_eq!(messages(&dir), ["tty.cast line 1 was changed"]);
}

#[test]
fn removed_and_added_cast_lines_are_named() {
    let (_tmp, dir) = cast_session();
    edit_lines(&dir.join("tty.cast"), |l| {
        l.remove(2);
    });
    assert_eq!(messages(&dir), ["tty.cast line 3 was removed"]);

    let (_tmp, dir) = cast_session();
    edit_lines(&dir.join("tty.cast"), |l| {
        l.insert(5, r#"[1.0, "o", "forged"]"#.into());
    });
    assert_eq!(
        messages(&dir),
        ["tty.cast line 6 was never recorded (added after the fact)"]
    );
}

#[test]
fn truncated_cast_is_named() {
    let (_tmp, dir) = cast_session();
    let path = dir.join("tty.cast");
    let len = fs::metadata(&path).unwrap().len();
    // Cut in the middle of the last line.
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 5)
        .unwrap();
    assert_eq!(
        messages(&dir),
        [format!(
            "tty.cast was truncated at byte {} (expected {len}); line 8 onward is missing",
            len - 5
        )]
    );
    // Whole lines gone.
    edit_lines(&path, |l| l.truncate(5));
    let msgs = messages(&dir);
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert!(
        msgs[0].starts_with("tty.cast was truncated at byte")
            && msgs[0].ends_with("line 6 onward is missing"),
        "{msgs:?}"
    );
}

#[test]
fn a_recorded_cast_that_is_gone_is_missing() {
    let (_tmp, dir) = cast_session();
    fs::remove_file(dir.join("tty.cast")).unwrap();
    assert_eq!(messages(&dir), ["tty.cast is missing"]);
}

#[test]
fn a_cast_added_after_the_fact_is_named() {
    let (_tmp, store) = store("cast-forged");
    let w = store.create(sample_meta()).unwrap();
    let dir = w.dir().to_owned();
    w.finish(End::exited(0)).unwrap();
    fs::write(
        dir.join("tty.cast"),
        "{\"version\":2,\"width\":80,\"height\":24}\n[0.1, \"o\", \"forged\"]\n",
    )
    .unwrap();
    assert_eq!(
        messages(&dir),
        ["tty.cast lines 1 to 2 were never recorded (added after the fact)"]
    );
}
