//! The sandbox policy as plain data.
//!
//! Nothing in this crate touches the kernel: every rule set (the filesystem view, the
//! Landlock access sets, the environment, the network rules) is built here as a value,
//! unit-tested as a value, and only then handed to `vg-sandbox`, which installs it.
#![forbid(unsafe_code)]

pub mod agents;
pub mod backend;
pub mod config;
pub mod env;
pub mod exec_check;
pub mod exec_trace;
pub mod identity;
pub mod landlock;
pub mod limits;
pub mod mount;
pub mod network;
pub mod paths;
pub mod risk;
pub mod secrets;
pub mod sensitive;
pub mod view;
pub mod violation;

pub use backend::Backend;
pub use env::Environment;
pub use exec_check::ExecCheck;
pub use exec_trace::ExecTrace;
pub use identity::Identity;
pub use landlock::LandlockRules;
pub use limits::Limits;
pub use mount::MountSpec;
pub use network::{
    Action, AddHost, Cidr, Decision, Destination, HostName, NetworkMode, NetworkPolicy, PortRange,
    Reason, Rule, RuleMatch, Target,
};
pub use secrets::{SecretSource, SecretSpec};
pub use view::{FsView, HostLayout, LearnView, MountOp, ViewOptions};
