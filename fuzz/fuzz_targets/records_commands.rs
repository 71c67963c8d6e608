//! `commands.log` lines (`commands.rs`), read back by `logs show` and `verify` from a
//! file the session's tracer wrote from what the sandbox ran (and that may have been
//! edited since).
//!
//! Property: an `exec` line's argv is what its quoted command unquotes to.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vg_records::{CommandLogLine, unquote_argv};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for line in text.split_inclusive('\n') {
        if let Some(CommandLogLine::Exec(exec)) = CommandLogLine::parse(line) {
            assert_eq!(
                unquote_argv(&exec.command).as_ref(),
                Some(&exec.argv),
                "{line:?}"
            );
        }
    }
});
