//! Persistent named sandboxes (`sandbox create`, `exec`, `ls`, `stop`, `rm`): one
//! session whose sandbox outlives each command started in it.
//!
//! - [`host`]: the detached supervisor that keeps the sandbox, serves its exec
//!   channel and records every command;
//! - [`client`]: one command run through that channel with the caller's stdio;
//! - [`protocol`]: the channel's messages;
//! - [`registry`]: the names, under `$VECTRAGUARD_HOME/sandboxes/`, and whether each
//!   sandbox still runs.

pub mod client;
mod gvisor;
pub mod host;
pub mod protocol;
pub mod registry;

pub use client::{Captured, Ended, ExecOptions, exec, exec_captured};
pub use host::{Host, create};
