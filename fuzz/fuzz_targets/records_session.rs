//! A session folder as `logs verify` and `logs show` read it (`verify.rs`, `store.rs`,
//! `chain.rs`, `event.rs`, `time.rs`): `integrity.log`, `metadata.json`,
//! `events.jsonl`, `commands.log`, the output logs, any of which may have been edited.
//! Input: `common::split` parts, the contents of those files in that order.
//!
//! Properties: `verify` reports, never fails, on any content; an event line that
//! parses is written back as a line that reads back as itself; a time that parses
//! prints as a time that reads back as itself; lines split the same however the reads cut them.
#![no_main]

use std::fs;

use libfuzzer_sys::fuzz_target;
use vg_records::chain::IntegrityLine;
use vg_records::time::{format_rfc3339, parse_rfc3339};
use vg_records::{Event, LineBuffer, read_metadata, verify};

#[path = "common.rs"]
mod common;

const FILES: [&str; 7] = [
    "integrity.log",
    "metadata.json",
    "events.jsonl",
    "commands.log",
    "stdout.log",
    "stderr.log",
    "tty.cast",
];

fuzz_target!(|data: &[u8]| {
    let parts = common::split(data);
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, content) in FILES.iter().zip(&parts) {
        fs::write(dir.path().join(name), content).expect("write");
    }
    verify(dir.path()).expect("a readable folder is reported on, not an error");
    let _ = read_metadata(dir.path());

    if let Some(text) = parts.first().and_then(|p| std::str::from_utf8(p).ok()) {
        for line in text.lines() {
            let _ = IntegrityLine::parse(line);
        }
    }
    if let Some(text) = parts.get(2).and_then(|p| std::str::from_utf8(p).ok()) {
        for line in text.lines() {
            // Written back (times to the millisecond), an event reads as itself.
            if let Ok(event) = serde_json::from_str::<Event>(line) {
                let written = event.to_line().expect("an event line");
                let again: Event = serde_json::from_slice(&written)
                    .unwrap_or_else(|e| panic!("{line:?} written as {written:?}: {e}"));
                assert_eq!(again.to_line().expect("an event line"), written, "{line:?}");
            }
            if let Ok(time) = parse_rfc3339(line) {
                let shown = format_rfc3339(time);
                let again =
                    parse_rfc3339(&shown).unwrap_or_else(|e| panic!("{line:?} → {shown:?}: {e}"));
                assert_eq!(format_rfc3339(again), shown, "{line:?}");
            }
        }
    }
    if let (Some(stream), Some(cuts)) = (parts.get(3), parts.get(4)) {
        let mut whole = LineBuffer::default();
        let mut expected = whole.push(stream);
        expected.extend(whole.finish());
        let mut cut = LineBuffer::default();
        let mut lines = Vec::new();
        for frame in common::frames(stream, cuts) {
            lines.extend(cut.push(frame));
        }
        lines.extend(cut.finish());
        assert_eq!(lines, expected);
    }
});
