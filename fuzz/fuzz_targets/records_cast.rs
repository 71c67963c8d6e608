//! `tty.cast` (`cast.rs`, asciicast v2): the terminal stream of a session, written from
//! what the sandbox printed and read back by `logs replay`. Input: selector byte (0:
//! parse lines as read from a file; 1: write an event and a header and read them
//! back; 2: decode output cut into reads), then the data.
//!
//! Properties: what is written parses back the same; decoding UTF-8 across reads
//! gives what decoding the whole stream at once gives.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use vg_records::cast::{Utf8Carry, event_line, header_line};
use vg_records::{CastEvent, CastHeader};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let (sel, rest) = common::selector(data);
    match sel % 3 {
        0 => {
            let Ok(text) = std::str::from_utf8(rest) else {
                return;
            };
            for line in text.lines() {
                let _ = CastHeader::parse(line);
                let _ = CastEvent::parse(line);
            }
        }
        1 => {
            let parts = common::split(rest);
            let text = |i: usize| {
                parts
                    .get(i)
                    .map(|p| String::from_utf8_lossy(p).into_owned())
                    .unwrap_or_default()
            };
            let (code, payload) = (text(0), text(1));
            let micros = parts.get(2).map_or(0, |p| {
                p.iter().take(8).fold(0u64, |n, &b| n << 8 | u64::from(b)) % (1 << 40)
            });
            let elapsed = Duration::from_micros(micros);
            let line = event_line(elapsed, &code, &payload).expect("an event line");
            let line = std::str::from_utf8(&line).expect("UTF-8");
            assert!(
                line.ends_with('\n') && line.matches('\n').count() == 1,
                "{line:?}"
            );
            let event = CastEvent::parse(line.trim_end_matches('\n')).expect("parses back");
            assert_eq!(
                (event.code.as_str(), event.data.as_str()),
                (code.as_str(), payload.as_str())
            );
            assert!(
                (event.time - elapsed.as_secs_f64()).abs() < 1e-5,
                "{line:?}"
            );

            let env = [("TERM", code.as_str()), ("SHELL", payload.as_str())];
            let header = header_line(80, 24, micros, &env).expect("a header line");
            let header = std::str::from_utf8(&header).expect("UTF-8");
            let parsed = CastHeader::parse(header.trim_end_matches('\n')).expect("parses back");
            assert_eq!(
                (parsed.width, parsed.height, parsed.timestamp),
                (80, 24, Some(micros))
            );
            assert_eq!(
                parsed.env.get("TERM").map(String::as_str),
                Some(code.as_str())
            );
        }
        _ => {
            let parts = common::split(rest);
            let (Some(stream), cuts) = (parts.first(), parts.get(1).copied().unwrap_or_default())
            else {
                return;
            };
            let mut carry = Utf8Carry::default();
            let mut text = String::new();
            for frame in common::frames(stream, cuts) {
                text.push_str(&carry.decode(frame));
            }
            text.push_str(&carry.flush());
            assert_eq!(
                text,
                String::from_utf8_lossy(stream),
                "{stream:?} cut {cuts:?}"
            );
        }
    }
});
