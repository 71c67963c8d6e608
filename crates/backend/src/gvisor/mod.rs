//! gVisor: `runsc` run directly from an OCI bundle (no Docker daemon).

pub mod trace;
