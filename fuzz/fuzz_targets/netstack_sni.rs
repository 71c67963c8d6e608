//! The server name in a passed-through connection's ClientHello (`sni.rs`), read from
//! the first bytes however they arrive.
//!
//! Property: a complete ClientHello's every prefix reads as incomplete or as the same
//! hello (the reader never decides early on a different name).
#![no_main]

use libfuzzer_sys::fuzz_target;
use vg_netstack::fuzzing::{FirstBytes, client_hello};

fuzz_target!(|data: &[u8]| {
    let full = client_hello(data);
    if let FirstBytes::ClientHello(_) = &full {
        // A few cut points spread over the input, plus every record boundary region.
        let step = (data.len() / 16).max(1);
        for cut in (0..data.len())
            .step_by(step)
            .chain(data.len().saturating_sub(8)..data.len())
        {
            let prefix = client_hello(&data[..cut]);
            assert!(
                prefix == FirstBytes::Incomplete || prefix == full,
                "prefix of {cut} bytes read as {prefix:?}, the whole as {full:?}"
            );
        }
    }
});
