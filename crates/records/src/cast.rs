//! `tty.cast`: the terminal stream of a session run with a terminal, in
//! [asciicast v2](https://docs.asciinema.org/manual/asciicast/v2/), so that
//! `vectraguard logs replay` and standard players (asciinema, its web
//! player) can both play it:
//!
//! ```text
//! {"version":2,"width":80,"height":24,"timestamp":1766139053,"env":{"SHELL":"/bin/bash","TERM":"xterm-256color"}}
//! [0.016012,"o","$ "]
//! [1.250347,"i","ls\r"]
//! [1.251003,"o","ls\r\nMakefile  src\r\n$ "]
//! [3.500000,"r","120x40"]
//! ```
//!
//! Line 1 is the header; every later line is one event `[time,code,data]`
//! (compact JSON, like the header; players accept any JSON spacing):
//! `time` is seconds since the recording started (microsecond precision),
//! `code` is `o` (output), `i` (keystrokes) or `r` (resize to `WxH`), and
//! `data` is text. Each line is one record of the hash chain, like a line
//! of `events.jsonl`.
//!
//! The terminal hands over bytes, not text: a UTF-8 sequence may be split
//! between two reads, so [`Utf8Carry`] keeps an incomplete tail for the next
//! chunk; bytes that can never be UTF-8 become U+FFFD, as asciinema does.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

/// The asciicast version written and read.
pub const VERSION: u64 = 2;

/// Event codes.
pub mod code {
    pub const OUTPUT: &str = "o";
    pub const INPUT: &str = "i";
    pub const RESIZE: &str = "r";
}

/// Turns a byte stream into text chunk by chunk, carrying an incomplete
/// trailing UTF-8 sequence (at most 3 bytes) over to the next chunk.
#[derive(Debug, Clone, Default)]
pub struct Utf8Carry {
    pending: Vec<u8>,
}

impl Utf8Carry {
    /// The text of `pending bytes + data`, minus an incomplete trailing
    /// sequence, which is kept. Invalid bytes become U+FFFD (one per
    /// maximal invalid sequence, as `String::from_utf8_lossy`).
    pub fn decode(&mut self, data: &[u8]) -> String {
        let joined;
        let bytes = if self.pending.is_empty() {
            data
        } else {
            let mut b = std::mem::take(&mut self.pending);
            b.extend_from_slice(data);
            joined = b;
            &joined[..]
        };
        let mut text = String::with_capacity(bytes.len());
        let mut chunks = bytes.utf8_chunks().peekable();
        while let Some(chunk) = chunks.next() {
            text.push_str(chunk.valid());
            let invalid = chunk.invalid();
            if invalid.is_empty() {
                continue;
            }
            // At the very end, a sequence cut short (rather than a wrong
            // byte) may be completed by the next chunk.
            let cut_short = chunks.peek().is_none()
                && std::str::from_utf8(invalid).is_err_and(|e| e.error_len().is_none());
            if cut_short {
                self.pending.extend_from_slice(invalid);
            } else {
                text.push(char::REPLACEMENT_CHARACTER);
            }
        }
        text
    }

    /// What is left at the end of the stream: U+FFFD for an incomplete
    /// sequence that never got its last bytes, else nothing.
    pub fn flush(&mut self) -> String {
        if std::mem::take(&mut self.pending).is_empty() {
            String::new()
        } else {
            char::REPLACEMENT_CHARACTER.to_string()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

#[derive(Serialize)]
struct HeaderOut<'a> {
    version: u64,
    width: u16,
    height: u16,
    timestamp: u64,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    env: BTreeMap<&'a str, &'a str>,
}

/// The header line (newline included). `env` usually names SHELL and TERM;
/// a later duplicate key wins.
pub fn header_line(
    width: u16,
    height: u16,
    timestamp: u64,
    env: &[(&str, &str)],
) -> Result<Vec<u8>, serde_json::Error> {
    let mut line = serde_json::to_vec(&HeaderOut {
        version: VERSION,
        width,
        height,
        timestamp,
        env: env.iter().copied().collect(),
    })?;
    line.push(b'\n');
    Ok(line)
}

/// An event line (newline included): `[1.234567,"o","text"]`.
pub fn event_line(elapsed: Duration, code: &str, data: &str) -> Result<Vec<u8>, serde_json::Error> {
    let code = serde_json::to_string(code)?;
    let data = serde_json::to_string(data)?;
    Ok(format!(
        "[{}.{:06},{code},{data}]\n",
        elapsed.as_secs(),
        elapsed.subsec_micros()
    )
    .into_bytes())
}

/// The header of a recording, as read back. Fields other than these are
/// allowed (asciicast defines more) and ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CastHeader {
    pub width: u64,
    pub height: u64,
    pub timestamp: Option<u64>,
    pub env: BTreeMap<String, String>,
}

impl CastHeader {
    /// Parses line 1 (without its newline); the error says what is wrong.
    pub fn parse(line: &str) -> Result<Self, String> {
        let value: Value =
            serde_json::from_str(line).map_err(|e| format!("not valid JSON ({e})"))?;
        let Value::Object(map) = value else {
            return Err("not a JSON object".into());
        };
        match map.get("version").and_then(Value::as_u64) {
            Some(VERSION) => {}
            Some(v) => return Err(format!("asciicast version {v}, expected {VERSION}")),
            None => return Err("no \"version\" number".into()),
        }
        let size = |key: &str| {
            map.get(key)
                .and_then(Value::as_u64)
                .ok_or_else(|| format!("no \"{key}\" number"))
        };
        let env = match map.get("env") {
            Some(Value::Object(env)) => env
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect(),
            _ => BTreeMap::new(),
        };
        Ok(Self {
            width: size("width")?,
            height: size("height")?,
            timestamp: map.get("timestamp").and_then(Value::as_u64),
            env,
        })
    }
}

/// One event, as read back.
#[derive(Debug, Clone, PartialEq)]
pub struct CastEvent {
    /// Seconds since the recording started.
    pub time: f64,
    pub code: String,
    pub data: String,
}

impl CastEvent {
    /// Parses an event line (without its newline); the error says what is
    /// wrong.
    pub fn parse(line: &str) -> Result<Self, String> {
        let value: Value =
            serde_json::from_str(line).map_err(|e| format!("not valid JSON ({e})"))?;
        let Value::Array(items) = value else {
            return Err("not a JSON array [time, code, data]".into());
        };
        let [time, code, data] = items.as_slice() else {
            return Err(format!(
                "{} elements, expected 3: [time, code, data]",
                items.len()
            ));
        };
        let time = time
            .as_f64()
            .filter(|t| t.is_finite() && *t >= 0.0)
            .ok_or("the time is not a number of seconds >= 0")?;
        let (Some(code), Some(data)) = (code.as_str(), data.as_str()) else {
            return Err("the code and the data must be strings".into());
        };
        Ok(Self {
            time,
            code: code.to_owned(),
            data: data.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_split_between_chunks_is_joined() {
        let text = "é€😀";
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            let mut c = Utf8Carry::default();
            let mut out = c.decode(&bytes[..cut]);
            out.push_str(&c.decode(&bytes[cut..]));
            assert_eq!(out, text, "cut at {cut}");
            assert!(c.is_empty());
        }
        // One byte at a time.
        let mut c = Utf8Carry::default();
        let out: String = bytes.iter().map(|b| c.decode(&[*b])).collect();
        assert_eq!(out, text);
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        let mut c = Utf8Carry::default();
        assert_eq!(c.decode(b"a\xffb\xe2\x82c"), "a\u{fffd}b\u{fffd}c");
        assert!(c.is_empty());
        // An incomplete tail is kept, then judged with the next chunk.
        assert_eq!(c.decode(b"x\xe2\x82"), "x");
        assert!(!c.is_empty());
        assert_eq!(c.decode(b"y"), "\u{fffd}y");
        // A lone continuation byte at the end is invalid, not incomplete.
        assert_eq!(c.decode(b"z\x80"), "z\u{fffd}");
        assert_eq!(c.decode(b"\xf0\x9f"), "");
        assert_eq!(c.flush(), "\u{fffd}");
        assert_eq!(c.flush(), "");
        assert_eq!(c.decode(b"\xc0\xaf"), String::from_utf8_lossy(b"\xc0\xaf"));
    }

    #[test]
    fn lines_have_the_asciicast_shape() {
        let h = header_line(
            80,
            24,
            1_766_139_053,
            &[("SHELL", "/bin/sh"), ("TERM", "xterm")],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(h.clone()).unwrap(),
            "{\"version\":2,\"width\":80,\"height\":24,\"timestamp\":1766139053,\
             \"env\":{\"SHELL\":\"/bin/sh\",\"TERM\":\"xterm\"}}\n"
        );
        let parsed = CastHeader::parse(std::str::from_utf8(&h).unwrap().trim_end()).unwrap();
        assert_eq!((parsed.width, parsed.height), (80, 24));
        assert_eq!(parsed.env["TERM"], "xterm");

        let e = event_line(
            Duration::from_micros(1_234_567),
            code::OUTPUT,
            "\x1b[1m\"é\"\r\n",
        )
        .unwrap();
        let text = String::from_utf8(e).unwrap();
        assert_eq!(text, "[1.234567,\"o\",\"\\u001b[1m\\\"é\\\"\\r\\n\"]\n");
        let ev = CastEvent::parse(text.trim_end()).unwrap();
        assert_eq!(ev.time, 1.234567);
        assert_eq!(ev.code, "o");
        assert_eq!(ev.data, "\x1b[1m\"é\"\r\n");
        let zero = event_line(Duration::ZERO, code::RESIZE, "100x30").unwrap();
        assert_eq!(zero, b"[0.000000,\"r\",\"100x30\"]\n");
    }

    #[test]
    fn malformed_lines_are_explained() {
        assert!(CastHeader::parse("[1]").unwrap_err().contains("object"));
        assert!(
            CastHeader::parse(r#"{"version":1,"width":1,"height":1}"#)
                .unwrap_err()
                .contains("version 1")
        );
        assert!(
            CastHeader::parse(r#"{"version":2,"width":1}"#)
                .unwrap_err()
                .contains("height")
        );
        assert!(CastEvent::parse("{").unwrap_err().contains("JSON"));
        assert!(
            CastEvent::parse("[1, \"o\"]")
                .unwrap_err()
                .contains("2 elements")
        );
        assert!(
            CastEvent::parse("[-1, \"o\", \"x\"]")
                .unwrap_err()
                .contains("time")
        );
        assert!(
            CastEvent::parse("[1, \"o\", 5]")
                .unwrap_err()
                .contains("strings")
        );
        assert!(CastEvent::parse("[0.5, \"m\", \"\"]").is_ok());
    }
}
