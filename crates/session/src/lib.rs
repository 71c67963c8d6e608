//! One sandbox session's lifecycle, as a library that front ends (the `vectraguard`
//! CLI, later agents and servers) drive from code.

pub mod diag;
pub mod etc;
pub mod exit;
pub mod home;
pub mod host;
pub mod image;
pub mod limits;
pub mod network;
pub mod notes;
pub mod record;
