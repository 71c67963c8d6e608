//! Exit statuses of a sandboxed run, in one place: the command's own, or these.

/// Vectra Guard itself failed (bad flag, layer unavailable), as Docker.
pub const EXIT_FAILURE: i32 = 125;

/// The session was stopped by `--timeout`, as `timeout(1)`.
pub const EXIT_TIMEOUT: i32 = 124;

/// The command was found but cannot be executed, as a shell.
pub const EXIT_CANNOT_EXECUTE: i32 = 126;

/// The command was not found, as a shell.
pub const EXIT_NOT_FOUND: i32 = 127;
