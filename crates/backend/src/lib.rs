//! The execution backends other than the native sandbox, as translations of the
//! same plan: [`gvisor`] runs the command under gVisor's application kernel through
//! `runsc` and an OCI bundle this crate writes; [`engine`] runs it in a Docker or
//! Podman container through their CLIs. Pure where it can be (the bundle's
//! `config.json` and the engines' arguments are values, tested as such); what runs
//! a program or reads the host says so in its name.
#![forbid(unsafe_code)]

pub mod engine;
pub mod gvisor;
