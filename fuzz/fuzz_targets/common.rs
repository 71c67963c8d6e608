//! Helpers shared by the fuzz targets: cutting one input into several parts.
#![allow(dead_code)]

/// Parts written as a 2-byte big-endian length, then that many bytes; a short last
/// part takes what is left. The seeds in `corpus/` are written the same way.
pub fn split(mut data: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    while data.len() >= 2 {
        let len = usize::from(u16::from_be_bytes([data[0], data[1]]));
        let rest = &data[2..];
        let len = len.min(rest.len());
        parts.push(&rest[..len]);
        data = &rest[len..];
    }
    parts
}

/// The first byte of `data` (0 if none) and the rest: a selector for targets that
/// fuzz several entry points.
pub fn selector(data: &[u8]) -> (u8, &[u8]) {
    match data.split_first() {
        Some((&first, rest)) => (first, rest),
        None => (0, data),
    }
}

/// `body` cut into frames at the positions the `cuts` bytes give (each byte a step
/// of 0-255 bytes; 0 repeats a cut, i.e. an empty frame).
pub fn frames<'a>(body: &'a [u8], cuts: &[u8]) -> Vec<&'a [u8]> {
    let mut frames = Vec::new();
    let mut at = 0;
    for &step in cuts {
        let end = (at + usize::from(step)).min(body.len());
        frames.push(&body[at..end]);
        at = end;
    }
    frames.push(&body[at..]);
    frames
}
