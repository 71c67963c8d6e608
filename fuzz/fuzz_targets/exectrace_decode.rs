//! The BPF exec recorder's ring buffer records (`exectrace.rs::decode`): written by
//! our program in the kernel, but carrying what the sandboxed program chose (its
//! paths, working directory, argv, the names of the files it ran), and read from a
//! ring an earlier session's records can be left in.
//!
//! Property: a record that decodes is one whose session can be read
//! (`session_of`), the one the supervisor checks before it decodes; an exec's argv
//! never holds more than the record's argv region.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vg_sandbox::exectrace::{decode, session_of};
use vg_sandbox::trace::TraceEvent;

fuzz_target!(|data: &[u8]| {
    let Some(decoded) = decode(data) else {
        return;
    };
    assert!(session_of(data).is_some(), "{data:?}");
    if let TraceEvent::Exec { argv, .. } = &decoded.event {
        let bytes: usize = argv.iter().map(|a| a.len()).sum();
        assert!(bytes <= data.len(), "{argv:?}");
    }
});
