//! Entry points for the fuzz targets in `fuzz/` (not part of the API): the scanners
//! that find secrets' placeholders and values in streamed bodies.

use std::sync::Arc;

use bytes::Bytes;

use crate::scan::{Detector, Patterns, Replacer};

/// `(needle, replacement)` pairs as [`Patterns`], each its own secret.
fn patterns(pairs: &[(Vec<u8>, Vec<u8>)]) -> Arc<Patterns> {
    Arc::new(Patterns::new(
        pairs
            .iter()
            .enumerate()
            .map(|(i, (n, r))| (n.as_slice(), r.as_slice(), i)),
    ))
}

/// A request body's frames through a [`Detector`]: the index of the frame that
/// completed a needle, with its secret, if one did.
pub fn detect_in_frames(needles: &[Vec<u8>], frames: &[&[u8]]) -> Option<(usize, usize)> {
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = needles.iter().map(|n| (n.clone(), Vec::new())).collect();
    let mut detector = Detector::new(patterns(&pairs));
    frames
        .iter()
        .enumerate()
        .find_map(|(i, frame)| detector.feed(frame).map(|secret| (i, secret)))
}

/// A response body's frames through a [`Replacer`]; after frame `i` when `pauses[i]`,
/// a pause in the stream (held bytes may be released). Returns what went on.
pub fn replace_in_frames(
    pairs: &[(Vec<u8>, Vec<u8>)],
    frames: &[&[u8]],
    pauses: &[bool],
) -> Vec<u8> {
    let mut replacer = Replacer::new(patterns(pairs));
    let mut out = Vec::new();
    for (i, frame) in frames.iter().enumerate() {
        out.extend_from_slice(&replacer.feed(Bytes::copy_from_slice(frame)));
        if pauses.get(i).copied().unwrap_or(false)
            && let Some(released) = replacer.release_after_pause()
        {
            out.extend_from_slice(&released);
        }
    }
    out.extend_from_slice(&replacer.finish());
    out
}

/// The whole body replaced at once, left to right (what framing must not change).
pub fn replace_whole(pairs: &[(Vec<u8>, Vec<u8>)], body: &[u8]) -> Vec<u8> {
    let mut out = body.to_vec();
    patterns(pairs).replace_in_place(&mut out, |_| {});
    out
}
