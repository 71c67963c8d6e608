//! Finding secrets' placeholders and values in bytes that stream past, frame by frame,
//! without holding whole bodies.
//!
//! - [`Detector`] (requests): reports an unbound placeholder. It forwards each frame
//!   as it comes and keeps a copy of the last `longest − 1` bytes to catch a placeholder
//!   split across frames; the frame that completes one is never forwarded, so the
//!   upstream never receives a whole placeholder.
//! - [`Replacer`] (responses): overwrites each secret value with its placeholder (same
//!   length, so framing stays valid). Since no part of a value may reach the sandbox, a
//!   frame's tail that could be the start of a value is held back until the next frame
//!   shows whether it is; other bytes flow at once, so a server-sent event is not delayed.
//!   A held tail of at most [`RELEASABLE`] bytes goes after a pause; the replacer
//!   remembers it, so that bytes completing the value still become the rest of the
//!   placeholder: a server dripping a value byte by byte gets at most its first
//!   [`RELEASABLE`] bytes through.

use bytes::{Bytes, BytesMut};
use memchr::memmem::Finder;

/// Held-back bytes at most this long may be released after a pause (see
/// [`Replacer::release_after_pause`]): revealing two characters of a value of at least
/// eight is harmless, while holding them could stall a streaming protocol forever. The
/// limit is on the possible start of a value as a whole, released bytes included: once
/// two were released, the next that continue the value are held.
pub(crate) const RELEASABLE: usize = 2;

/// Byte strings to look for, each with what it is replaced by (same length) and the
/// index of the secret it belongs to.
pub(crate) struct Patterns {
    items: Vec<Pattern>,
    longest: usize,
}

struct Pattern {
    finder: Finder<'static>,
    replacement: Vec<u8>,
    secret: usize,
}

impl Drop for Pattern {
    fn drop(&mut self) {
        // A replacement may be a secret's value.
        zeroize::Zeroize::zeroize(&mut self.replacement);
    }
}

impl Patterns {
    /// `(needle, replacement, secret index)`; empty needles are skipped. A replacement
    /// of another length than its needle is ignored (detection only).
    pub(crate) fn new<'a>(items: impl IntoIterator<Item = (&'a [u8], &'a [u8], usize)>) -> Self {
        let items: Vec<Pattern> = items
            .into_iter()
            .filter(|(needle, _, _)| !needle.is_empty())
            .map(|(needle, replacement, secret)| Pattern {
                finder: Finder::new(needle).into_owned(),
                replacement: if replacement.len() == needle.len() {
                    replacement.to_vec()
                } else {
                    Vec::new()
                },
                secret,
            })
            .collect();
        let longest = items
            .iter()
            .map(|p| p.finder.needle().len())
            .max()
            .unwrap_or(0);
        Self { items, longest }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The secret of the first pattern found anywhere in `hay`.
    pub(crate) fn find_any(&self, hay: &[u8]) -> Option<usize> {
        self.items
            .iter()
            .find(|p| p.finder.find(hay).is_some())
            .map(|p| p.secret)
    }

    /// The earliest match at or after `from`, the longest of those starting there:
    /// (position, pattern index). Longest, so that a value that begins with another
    /// value is replaced whole rather than leaving its end in clear.
    fn earliest(&self, hay: &[u8], from: usize) -> Option<(usize, usize)> {
        let rest = hay.get(from..)?;
        self.items
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let pos = p.finder.find(rest)?;
                Some((from + pos, std::cmp::Reverse(p.finder.needle().len()), i))
            })
            .min()
            .map(|(pos, _, i)| (pos, i))
    }

    /// Overwrites every match in `buf` with its replacement, left to right, calling
    /// `on_match` with each match's secret. Returns the end of the last match (0 if none).
    pub(crate) fn replace_in_place(&self, buf: &mut [u8], on_match: impl FnMut(usize)) -> usize {
        self.replace(buf, true, on_match)
    }

    /// [`Patterns::replace_in_place`] on a stream's bytes so far (`complete` false):
    /// stops before a match that more bytes could still turn into a longer or earlier
    /// one, a needle that starts at or before it and runs past the end of `buf`; the
    /// caller holds the bytes from there on.
    fn replace(&self, buf: &mut [u8], complete: bool, mut on_match: impl FnMut(usize)) -> usize {
        let mut from = 0;
        while let Some((pos, i)) = self.earliest(buf, from) {
            let undecided_from =
                buf.len() - self.pending_prefix(buf.get(from..).unwrap_or_default());
            if !complete && undecided_from <= pos {
                break;
            }
            let Some(p) = self.items.get(i) else { break };
            let len = p.finder.needle().len();
            if p.replacement.len() == len
                && let Some(slot) = buf.get_mut(pos..pos + len)
            {
                slot.copy_from_slice(&p.replacement);
            }
            on_match(p.secret);
            from = pos + len;
        }
        from
    }

    /// Whether `buf` contains any needle.
    pub(crate) fn matches(&self, buf: &[u8]) -> bool {
        self.items.iter().any(|p| p.finder.find(buf).is_some())
    }

    /// The length of the longest suffix of `tail` that is a proper prefix of a needle:
    /// bytes that may be the start of a match completed by what comes next.
    fn pending_prefix(&self, tail: &[u8]) -> usize {
        let mut best = 0;
        for p in &self.items {
            let needle = p.finder.needle();
            let Some(&first) = needle.first() else {
                continue;
            };
            let window_start = tail.len().saturating_sub(needle.len() - 1);
            let window = tail.get(window_start..).unwrap_or_default();
            // Earliest candidate first: the longest suffix.
            for at in memchr::memchr_iter(first, window) {
                let suffix = window.get(at..).unwrap_or_default();
                if suffix.len() > best && needle.starts_with(suffix) {
                    best = suffix.len();
                    break;
                }
            }
        }
        best
    }
}

/// Finds needles in a stream of frames; see the module documentation.
pub(crate) struct Detector {
    patterns: std::sync::Arc<Patterns>,
    tail: Vec<u8>,
    scratch: Vec<u8>,
}

impl Detector {
    pub(crate) fn new(patterns: std::sync::Arc<Patterns>) -> Self {
        Self {
            patterns,
            tail: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// The secret whose needle this frame completes, if any.
    pub(crate) fn feed(&mut self, data: &[u8]) -> Option<usize> {
        let keep = self.patterns.longest.saturating_sub(1);
        if self.patterns.is_empty() {
            return None;
        }
        if let Some(found) = self.patterns.find_any(data) {
            return Some(found);
        }
        if !self.tail.is_empty() {
            // Across the boundary: the kept tail and the start of this frame.
            self.scratch.clear();
            self.scratch.extend_from_slice(&self.tail);
            self.scratch
                .extend_from_slice(data.get(..keep.min(data.len())).unwrap_or_default());
            if let Some(found) = self.patterns.find_any(&self.scratch) {
                return Some(found);
            }
        }
        if data.len() >= keep {
            self.tail.clear();
            self.tail
                .extend_from_slice(data.get(data.len() - keep..).unwrap_or_default());
        } else {
            self.tail.extend_from_slice(data);
            let excess = self.tail.len().saturating_sub(keep);
            self.tail.drain(..excess);
        }
        None
    }
}

/// Replaces needles in a stream of frames; see the module documentation.
///
/// Invariant: `released` then `held` is the longest suffix of the input so far that is
/// a proper prefix of a needle (after the last match); `released` went on unchanged
/// after a pause, `held` has not gone yet.
pub(crate) struct Replacer {
    patterns: std::sync::Arc<Patterns>,
    released: Vec<u8>,
    held: Vec<u8>,
}

impl Replacer {
    pub(crate) fn new(patterns: std::sync::Arc<Patterns>) -> Self {
        Self {
            patterns,
            released: Vec::new(),
            held: Vec::new(),
        }
    }

    pub(crate) fn patterns(&self) -> &Patterns {
        &self.patterns
    }

    /// How many bytes are held back.
    pub(crate) fn held(&self) -> usize {
        self.held.len()
    }

    /// Whether the held bytes may go after a pause ([`Replacer::release_after_pause`]).
    pub(crate) fn releasable(&self) -> bool {
        !self.held.is_empty() && self.released.len() + self.held.len() <= RELEASABLE
    }

    /// The bytes of this frame that may go now (possibly empty), after replacement.
    pub(crate) fn feed(&mut self, data: Bytes) -> Bytes {
        if self.patterns.is_empty() {
            return data;
        }
        if self.held.is_empty() && self.released.is_empty() && !self.patterns.matches(&data) {
            // The common case: no copy unless the tail may start a needle.
            let hold = self.patterns.pending_prefix(&data);
            if hold == 0 {
                return data;
            }
            let cut = data.len() - hold;
            self.held
                .extend_from_slice(data.get(cut..).unwrap_or_default());
            return data.slice(..cut);
        }
        // The released bytes are scanned again, as the start of a match, but not sent
        // again: a match they start sends the rest of its replacement.
        let sent = self.released.len();
        let mut buf = BytesMut::with_capacity(sent + self.held.len() + data.len());
        buf.extend_from_slice(&self.released);
        buf.extend_from_slice(&self.held);
        buf.extend_from_slice(&data);
        self.released.clear();
        self.held.clear();
        let end = self.patterns.replace(&mut buf, false, |_| {});
        let hold = self
            .patterns
            .pending_prefix(buf.get(end..).unwrap_or_default());
        let tail = buf.len() - hold;
        if tail < sent {
            // No match (a match is longer than what was released), and the possible
            // start of a needle still begins in what was released: nothing new goes.
            self.released
                .extend_from_slice(buf.get(tail..sent).unwrap_or_default());
            self.held
                .extend_from_slice(buf.get(sent..).unwrap_or_default());
            return Bytes::new();
        }
        let held = buf.split_off(tail);
        self.held.extend_from_slice(&held);
        let _ = buf.split_to(sent);
        buf.freeze()
    }

    /// At the end of the stream: what was held back, with the matches it holds (a
    /// short value held while a longer one could still follow) replaced.
    pub(crate) fn finish(&mut self) -> Bytes {
        let sent = self.released.len();
        let mut buf = std::mem::take(&mut self.released);
        buf.append(&mut self.held);
        self.patterns.replace_in_place(&mut buf, |_| {});
        Bytes::copy_from_slice(buf.get(sent..).unwrap_or_default())
    }

    /// After a pause in the stream: the held bytes if they, with those released before
    /// that they continue, are at most [`RELEASABLE`]. They stay known as released.
    pub(crate) fn release_after_pause(&mut self) -> Option<Bytes> {
        if !self.releasable() {
            return None;
        }
        let out = Bytes::copy_from_slice(&self.held);
        self.released.append(&mut self.held);
        Some(out)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn patterns(pairs: &[(&str, &str)]) -> Arc<Patterns> {
        Arc::new(Patterns::new(
            pairs
                .iter()
                .enumerate()
                .map(|(i, (n, r))| (n.as_bytes(), r.as_bytes(), i)),
        ))
    }

    /// Feeds `input` to a replacer in frames cut at `cuts`, returns the output.
    fn replace_in_frames(p: &Arc<Patterns>, input: &str, cuts: &[usize]) -> String {
        let mut r = Replacer::new(Arc::clone(p));
        let mut out = Vec::new();
        let mut at = 0;
        for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
            out.extend_from_slice(&r.feed(Bytes::copy_from_slice(&input.as_bytes()[at..cut])));
            at = cut;
        }
        out.extend_from_slice(&r.finish());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn values_are_replaced_wherever_frames_cut_them() {
        let p = patterns(&[
            ("SECRETvalue1", "PLACEHOLDER1"),
            ("tok_abcdefgh", "tok_XXXXXXXX"),
        ]);
        let input = "head SECRETvalue1 mid tok_abcdefghSECRETvalue1 SECRETvalu tail";
        let want = "head PLACEHOLDER1 mid tok_XXXXXXXXPLACEHOLDER1 SECRETvalu tail";
        for a in 0..input.len() {
            for b in a..input.len() {
                assert_eq!(replace_in_frames(&p, input, &[a, b]), want, "cuts {a} {b}");
            }
        }
        // One byte per frame.
        let cuts: Vec<usize> = (1..input.len()).collect();
        assert_eq!(replace_in_frames(&p, input, &cuts), want);
    }

    #[test]
    fn a_value_that_begins_with_another_is_replaced_whole_wherever_frames_cut_it() {
        // Found by the http_body_scan fuzz target: the shorter value was replaced and
        // the longer one's end went on in clear, at a frame boundary or always.
        for pairs in [
            [("tok_1234", "PPPPPPPP"), ("tok_12345678", "QQQQQQQQQQQQ")],
            [("tok_12345678", "QQQQQQQQQQQQ"), ("tok_1234", "PPPPPPPP")],
        ] {
            let p = patterns(&pairs);
            let input = "a tok_12345678 b tok_1234 c tok_1234";
            let want = "a QQQQQQQQQQQQ b PPPPPPPP c PPPPPPPP";
            let mut whole = input.as_bytes().to_vec();
            p.replace_in_place(&mut whole, |_| {});
            assert_eq!(String::from_utf8(whole).unwrap(), want);
            for a in 0..input.len() {
                for b in a..input.len() {
                    assert_eq!(replace_in_frames(&p, input, &[a, b]), want, "cuts {a} {b}");
                }
            }
        }
    }

    #[test]
    fn only_a_possible_start_of_a_value_is_held_back() {
        let p = patterns(&[("SECRETvalue1", "PLACEHOLDER1")]);
        let mut r = Replacer::new(Arc::clone(&p));
        // An event that ends in a newline goes at once, untouched and uncopied.
        let event = Bytes::from_static(b"data: one\n\n");
        let out = r.feed(event.clone());
        assert_eq!(out, event);
        assert_eq!(out.as_ptr(), event.as_ptr());
        // A tail that starts the value waits for the next frame.
        assert_eq!(r.feed(Bytes::from_static(b"abc SEC")), "abc ");
        assert_eq!(r.held(), 3);
        assert_eq!(r.release_after_pause(), None, "three bytes stay held");
        assert_eq!(r.feed(Bytes::from_static(b"RETvalue1!")), "PLACEHOLDER1!");
        assert_eq!(r.feed(Bytes::from_static(b"xS")), "x");
        assert_eq!(r.release_after_pause().unwrap(), "S");
        // "S" went, but "ECRE" continues the value: it is held, and not releasable.
        assert_eq!(r.feed(Bytes::from_static(b"ECRE")), "");
        assert!(!r.releasable());
        assert_eq!(r.release_after_pause(), None);
        assert_eq!(r.feed(Bytes::from_static(b"SECRE")), "ECRE");
        assert_eq!(r.finish(), "SECRE", "at the end, the held part goes");
    }

    #[test]
    fn a_value_dripped_after_pauses_is_still_replaced() {
        let p = patterns(&[("SECRETvalue1", "PLACEHOLDER1")]);
        // One byte per frame, a pause after each: at most two bytes of the value go.
        let mut r = Replacer::new(Arc::clone(&p));
        let mut out = Vec::new();
        for b in b"x SECRETvalue1 y" {
            out.extend_from_slice(&r.feed(Bytes::copy_from_slice(&[*b])));
            if let Some(rest) = r.release_after_pause() {
                out.extend_from_slice(&rest);
            }
        }
        out.extend_from_slice(&r.finish());
        assert_eq!(out, b"x SEACEHOLDER1 y");
        // Released bytes that turn out not to start the value change nothing.
        let mut r = Replacer::new(Arc::clone(&p));
        assert_eq!(r.feed(Bytes::from_static(b"SE")), "");
        assert_eq!(r.release_after_pause().unwrap(), "SE");
        assert_eq!(r.feed(Bytes::from_static(b"X SECRET")), "X ");
        assert_eq!(r.feed(Bytes::from_static(b"value1")), "PLACEHOLDER1");
        // A value that restarts within what was released.
        let p = patterns(&[("aab-secret", "xyz-PLACEH")]);
        let mut r = Replacer::new(Arc::clone(&p));
        let mut out = Vec::new();
        for b in b"aaab-secret!" {
            out.extend_from_slice(&r.feed(Bytes::copy_from_slice(&[*b])));
            if let Some(rest) = r.release_after_pause() {
                out.extend_from_slice(&rest);
            }
        }
        out.extend_from_slice(&r.finish());
        assert_eq!(out, b"aaaz-PLACEH!");
    }

    #[test]
    fn detector_finds_needles_split_across_frames() {
        let p = patterns(&[("PLACEHOLDER1", ""), ("zz9", "")]);
        let input = b"some body text PLACEHOLDER1 more";
        for cut in 0..input.len() {
            for cut2 in cut..input.len() {
                let mut d = Detector::new(Arc::clone(&p));
                let frames = [&input[..cut], &input[cut..cut2], &input[cut2..]];
                let found = frames.iter().position(|f| d.feed(f).is_some());
                let end = "some body text PLACEHOLDER1".len();
                // The frame that completes the needle is the one reported.
                let completing = if end <= cut {
                    0
                } else if end <= cut2 {
                    1
                } else {
                    2
                };
                assert_eq!(found, Some(completing), "cuts {cut} {cut2}");
            }
        }
        let mut d = Detector::new(Arc::clone(&p));
        assert_eq!(d.feed(b"PLACEHOLDER"), None);
        assert_eq!(d.feed(b"2 z"), None);
        assert_eq!(d.feed(b"z"), None);
        assert_eq!(d.feed(b"9"), Some(1));
        let mut d = Detector::new(Arc::clone(&p));
        for b in b"xxPLACEHOLDER" {
            assert_eq!(d.feed(&[*b]), None);
        }
        assert_eq!(d.feed(b"1"), Some(0));
    }

    #[test]
    fn no_patterns_is_a_pass_through() {
        let p = patterns(&[]);
        let mut r = Replacer::new(Arc::clone(&p));
        assert_eq!(r.feed(Bytes::from_static(b"abc")), "abc");
        let mut d = Detector::new(p);
        assert_eq!(d.feed(b"abc"), None);
    }
}
