//! Quoting of command lines (`quote.rs`): an argv from inside the sandbox is written
//! quoted into `commands.log` and read back. Input: selector byte (bit 0: unquote the
//! text as read from a file, else quote `common::split` parts as an argv).
//!
//! Properties: quoting then unquoting gives back the argv, word by word and whole;
//! a quoted word holds no control or invisible character.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vg_records::{escape_hidden, quote_arg, quote_argv, unquote_argv, unquote_word};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let (sel, rest) = common::selector(data);
    if sel & 1 == 1 {
        if let Ok(text) = std::str::from_utf8(rest) {
            let _ = unquote_word(text);
            let _ = unquote_argv(text);
            let _ = escape_hidden(text);
        }
        return;
    }
    let argv: Vec<&[u8]> = common::split(rest);
    for word in &argv {
        let quoted = quote_arg(word);
        assert!(
            !quoted.chars().any(char::is_control),
            "{word:?} quoted as {quoted:?}"
        );
        assert_eq!(
            unquote_word(&quoted),
            Some((word.to_vec(), "")),
            "{word:?} quoted as {quoted:?}"
        );
    }
    let line = quote_argv(argv.iter().copied());
    let expected: Vec<Vec<u8>> = argv.iter().map(|w| w.to_vec()).collect();
    assert_eq!(unquote_argv(&line), Some(expected), "{line:?}");
});
