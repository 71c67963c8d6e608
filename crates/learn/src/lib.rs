//! Learning mode's pure half: from what one traced run used (files, destinations,
//! programs) to a least-privilege profile, and the store of learned profiles.
//!
//! The caller (`sandbox run --learn NAME`) fills [`Observations`] from the trace,
//! describes the sandbox and host in a [`LearnContext`], calls [`learn`], and saves
//! the result with [`save`] (which renders it, [`Learned::to_toml`], and compares it
//! with a previous profile of the same name, [`diff`]). `--profile NAME` then loads
//! the file through `vg_policy::config::add_learned_profile`.
//!
//! Nothing here runs anything; the only host access is [`RealHost`]'s probes and the
//! [`ProfileStore`]'s files.
#![forbid(unsafe_code)]

pub mod context;
pub mod diff;
pub mod learn;
pub mod observe;
pub mod render;
pub mod save;
pub mod store;

pub use context::{HostKind, HostProbe, LearnContext, Probe, RealHost, Withheld};
pub use diff::{ProfileDiff, diff, diff_settings};
pub use learn::{
    Evidence, Grant, Learned, NetGrant, Reason, Refusal, RefusedDestination, SensitiveUse, learn,
};
pub use observe::{Access, Counts, Destination, Observations};
pub use render::{Header, LEARNED_FROM};
pub use save::{SaveOutcome, save};
pub use store::{ProfileEntry, ProfileStore, StoreError, StoredProfile};
