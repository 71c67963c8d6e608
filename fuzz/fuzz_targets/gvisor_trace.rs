//! gVisor's trace points as its remote sink receives them (`gvisor/trace/`: the
//! header in `wire.rs`, the protobuf messages and the process tracking in
//! `decode.rs`): what the sentry reports is shaped by the sandboxed program (its
//! argv, paths, working directory, process tree).
//!
//! The input is cut into records, each prefixed by its length (two bytes), and fed
//! to one connection's decoder in turn. Property: a record whose header is not whole
//! or claims a size it does not have emits exactly one `Undecodable`, and nothing
//! else of it is read; no record emits more than its dropped count and one event.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vg_backend::gvisor::trace::{GvisorEvent, fuzz_feed};

/// The header's size (`wire::HEADER_SIZE`): size, type, dropped count.
const HEADER_SIZE: usize = 8;

fuzz_target!(|data: &[u8]| {
    let mut records = Vec::new();
    let mut rest = data;
    while let [a, b, tail @ ..] = rest {
        let len = usize::from(u16::from_le_bytes([*a, *b])).min(tail.len());
        let (record, next) = tail.split_at(len);
        records.push(record);
        rest = next;
    }
    let emitted = fuzz_feed(&records);
    assert_eq!(emitted.len(), records.len());
    for (record, events) in records.iter().zip(&emitted) {
        let claimed = record
            .get(..2)
            .map(|s| usize::from(u16::from_le_bytes([s[0], s[1]])));
        let whole = record.len() >= HEADER_SIZE
            && claimed.is_some_and(|c| (HEADER_SIZE..=record.len()).contains(&c));
        if !whole {
            assert!(
                matches!(events.as_slice(), [GvisorEvent::Undecodable(_)]),
                "{record:?}: {events:?}"
            );
        }
        assert!(events.len() <= 2, "{record:?}: {events:?}");
        if events.len() == 2 {
            assert!(matches!(events[0], GvisorEvent::Dropped(_)), "{events:?}");
        }
    }
});
