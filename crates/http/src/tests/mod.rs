//! The inspector end to end, with real TLS and HTTP on both sides (loopback only).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

mod rules;
mod secrets;
mod streaming;
mod tls;
mod upgrade;
mod upstream;
