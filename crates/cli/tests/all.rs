//! End-to-end tests of the `vectraguard` binary: one integration-test binary, with one
//! module per topic under `suite/`. Every test runs the real binary in fresh processes,
//! as root and as an unprivileged user (see `suite::harness::each_identity`).

// The whole crate is test code, helpers included (clippy's allow-*-in-tests only
// covers `#[test]` functions themselves).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
