//! Session records of Vectra Guard: one owner-only folder per sandbox
//! session under `$VECTRAGUARD_HOME/logs/` (default `~/.vectraguard/logs/`):
//!
//! ```text
//! session-20251219T101053Z-9af4c3/
//!   metadata.json   what ran, where, under which enforced layers, how it ended
//!   commands.log    one line per program executed (see `writer`)
//!   stdout.log      byte-exact stdout
//!   stderr.log      byte-exact stderr
//!   events.jsonl    one JSON object per event (see `event`)
//!   tty.cast        the terminal stream, asciicast v2, only for sessions run
//!                   with a terminal (see `cast`)
//!   integrity.log   hash chain over every record of the files above (see `chain`)
//! ledger.log        chains each session's start, final head and removal (see `ledger`)
//! ```
//!
//! Writing ([`SessionWriter`]) is append-only, unbuffered and survives the
//! supervisor being SIGKILLed; [`SessionStore`] lists, resolves, removes and
//! prunes sessions; [`verify()`] checks a folder against its hash chain;
//! [`CommandLogLine`] reads `commands.log` back and [`Follower`] follows a
//! file while a session writes it.
#![forbid(unsafe_code)]

pub mod cast;
pub mod chain;
pub mod commands;
pub mod error;
pub mod event;
pub mod follow;
pub mod invisible;
pub mod layout;
pub mod ledger;
pub mod metadata;
pub mod quote;
pub mod store;
pub mod time;
pub mod verify;
pub mod writer;

#[cfg(test)]
mod tests;

pub use cast::{CastEvent, CastHeader};
pub use commands::{CommandLogLine, ExecLine};
pub use error::RecordsError;
pub use event::{ChannelSink, Event, EventSink};
pub use follow::{Follower, LineBuffer, Poll, Tail};
pub use layout::{ProcessIdentity, RecordFile};
pub use ledger::{Audit, Finding, Ledger, SessionCheck};
pub use metadata::{
    IntegrityHead, Layers, Limits, Metadata, NetworkRecord, Origin, Status, Summary, UserInfo,
};
pub use quote::{escape_hidden, quote_arg, quote_argv, unquote_argv, unquote_word};
pub use store::{
    LAST, ListEntry, ListFilter, Prunable, SessionInfo, SessionStore, read_metadata,
    read_summary_of,
};
pub use time::{parse_duration, parse_since};
pub use verify::{Problem, VerifyReport, verify};
pub use writer::{
    ArgvSize, CommandExit, CommandRecord, End, SessionWriter, StreamRecord, exit_line,
};
