//! gVisor's trace points, read from its remote sink: each exec and exit the
//! sentry reports, for the session's `commands.log`.
