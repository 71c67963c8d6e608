//! Risk classification as data: rules that rate an exec or a new network destination
//! LOW, MEDIUM, HIGH or CRITICAL with a reason, for the decisions a person is asked to
//! make while a session runs (`--ask LEVEL`).
//!
//! `level` (levels and their time-outs), `script` (the shell script inside `sh -c`),
//! `wrappers` (programs that run other programs: `sudo`, `chroot DIR`, `busybox`),
//! `rule` (a rule as data), `classify` (rating facts with rules), `defaults` (the
//! built-in rules), `config` (`[[risk.rules]]` in configuration files).

pub mod ask;
pub mod classify;
pub mod config;
pub mod defaults;
pub mod level;
pub mod rule;
pub mod script;
pub mod wrappers;

pub use ask::{Approval, Ask, AskError};
pub use classify::{Assessment, Classifier, DestFacts, ExecFacts};
pub use level::Level;
pub use rule::{Rule, RuleError, RuleSpec};

#[cfg(test)]
mod tests;
