//! Secrets in streamed bodies (`scan.rs`): placeholders found in request bodies
//! (`Detector`), secret values replaced in response bodies (`Replacer`), frame by
//! frame. Input: selector byte (bits 0-1: needles, 1-3; bit 2: replacer, else
//! detector; bit 3: pauses), then `common::split` parts: the needles, the body, the
//! frame cuts, the pauses (one byte per frame, odd: a pause after it).
//!
//! Differential properties: however the body is cut into frames, the detector
//! reports the frame that completes the first needle in the whole body, and the
//! replacer's output (without pauses) is the whole body replaced at once; with pauses,
//! the output keeps the body's length.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vg_http::fuzzing::{detect_in_frames, replace_in_frames, replace_whole};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let (sel, rest) = common::selector(data);
    let parts = common::split(rest);
    let n = usize::from(sel & 3).max(1);
    if parts.len() < n + 2 {
        return;
    }
    let needles: Vec<Vec<u8>> = parts[..n].iter().map(|p| p.to_vec()).collect();
    let body = parts[n];
    let frames = common::frames(body, parts[n + 1]);
    if sel & 4 == 0 {
        // Where the first needle in the whole body ends.
        let first_end = needles
            .iter()
            .filter(|needle| !needle.is_empty())
            .filter_map(|needle| {
                body.windows(needle.len())
                    .position(|w| w == needle.as_slice())
                    .map(|at| at + needle.len())
            })
            .min();
        let expected = first_end.map(|end| {
            // The frame holding byte `end - 1`.
            let mut at = 0;
            frames
                .iter()
                .position(|f| {
                    at += f.len();
                    at >= end && !f.is_empty()
                })
                .expect("the body is in the frames")
        });
        let found = detect_in_frames(&needles, &frames).map(|(frame, _)| frame);
        assert_eq!(found, expected, "needles {needles:?}, frames {frames:?}");
        return;
    }
    // Values replaced by placeholders of their own length.
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = needles
        .iter()
        .enumerate()
        .map(|(i, n)| {
            (
                n.clone(),
                vec![b'A' + u8::try_from(i).unwrap_or(0); n.len()],
            )
        })
        .collect();
    if sel & 8 == 0 {
        let streamed = replace_in_frames(&pairs, &frames, &[]);
        let whole = replace_whole(&pairs, body);
        assert_eq!(streamed, whole, "pairs {pairs:?}, frames {frames:?}");
    } else {
        let pauses: Vec<bool> = parts
            .get(n + 2)
            .map(|p| p.iter().map(|b| b & 1 == 1).collect())
            .unwrap_or_default();
        let streamed = replace_in_frames(&pairs, &frames, &pauses);
        assert_eq!(
            streamed.len(),
            body.len(),
            "pairs {pairs:?}, frames {frames:?}"
        );
    }
});
