//! Seccomp policy for the Vectra Guard sandbox, as data.
//!
//! - [`rules`]: the policy model. A [`Filter`] is a list of [`SyscallRule`]s,
//!   each "if these argument [`Cond`]itions hold, take this [`Action`]",
//!   checked in order per syscall, with a default action for everything else
//!   and fixed handling of foreign arches and x32 numbers.
//!   [`Filter::action_for`] / [`Filter::evaluate`] define what a filter means.
//! - [`profile`]: [`default_profile`], Docker's default allowlist minus
//!   capability-gated and extra dangerous syscalls, plus argument checks for
//!   `clone`, `ioctl`, `socket`, `personality`.
//!   With [`ProfileOptions`] it hands execs, file calls and refusals to a
//!   user-notification listener; [`notified_call`] classifies what arrives there.
//! - [`bpf`]: [`compile`] turns a `Filter` into a classic BPF program
//!   (`Vec<SockFilter>`, layout-compatible with `struct sock_filter`) for
//!   another crate to install with `seccomp(2)`.
//! - [`interp`]: a small BPF interpreter so tests can check that the compiled
//!   program and the model agree, before anything is installed.
//!
//! This crate never touches the kernel and contains no `unsafe`.
#![forbid(unsafe_code)]

pub mod bpf;
pub mod data;
pub mod interp;
pub mod profile;
pub mod rules;
pub mod syscalls;

pub use bpf::{BPF_MAXINSNS, CompileError, SockFilter, compile};
pub use data::SeccompData;
pub use interp::InterpError;
pub use profile::{
    NotifiedCall, ProfileOptions, TRACED_FILE_SYSCALLS, default_profile, gvisor_exec_profile,
    notified_call, syscall_names_denied_beyond_docker,
};
pub use rules::{Action, Cmp, Cond, Filter, SyscallRule, Width};
pub use syscalls::Syscall;
