//! Image references (`reference.rs`), as typed by a user or named in an archive.
//!
//! Property: a parsed reference's canonical form parses back to the same reference.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vg_image::Reference;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = Reference::names_registry(text);
    let Ok(reference) = Reference::parse(text) else {
        return;
    };
    let _ = (
        reference.name(),
        reference.manifest_ref(),
        reference.api_host(),
    );
    let _ = reference.is_loopback_registry();
    let canonical = reference.to_string();
    let again = Reference::parse(&canonical)
        .unwrap_or_else(|e| panic!("{text:?} → {canonical:?} does not parse: {e}"));
    assert_eq!(again, reference, "{text:?} → {canonical:?}");
});
