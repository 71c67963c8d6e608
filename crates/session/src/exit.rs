//! Exit statuses of a sandboxed run, in one place: the command's own, or these.

/// Vectra Guard itself failed (bad flag, layer unavailable), as Docker.
pub const EXIT_FAILURE: i32 = 125;

/// The session was stopped by `--timeout`, as `timeout(1)`.
pub const EXIT_TIMEOUT: i32 = 124;

/// The command was found but cannot be executed (126), or not found (127), as a
/// shell says it; defined beside `Termination`, whose mapping init uses too.
pub use vg_sandbox::{EXIT_CANNOT_EXECUTE, EXIT_NOT_FOUND};

/// Why a session could not be planned, started or completed, with the exit status
/// it should produce and, once the record exists, the session it was recorded as.
#[derive(Debug, thiserror::Error)]
#[error("{}", crate::diag::chain(error))]
pub struct Error {
    pub code: i32,
    pub error: anyhow::Error,
    /// The session's id when its record was created before the failure.
    pub session: Option<String>,
}

impl Error {
    pub fn new(code: i32, error: anyhow::Error) -> Self {
        Self {
            code,
            error,
            session: None,
        }
    }

    /// The failure happened in the recorded session `id`.
    pub(crate) fn in_session(mut self, id: &str) -> Self {
        self.session.get_or_insert_with(|| id.to_owned());
        self
    }
}

impl From<anyhow::Error> for Error {
    fn from(error: anyhow::Error) -> Self {
        Self::new(EXIT_FAILURE, error)
    }
}

/// How a session ended.
#[derive(Debug)]
pub struct Outcome {
    /// The session's id, when it was recorded.
    pub session: Option<String>,
    /// What to exit with: the command's status, `128+N`, 124, 126, 127 or 125.
    pub exit_code: i32,
    pub termination: vg_sandbox::Termination,
    /// Stopped at its `--timeout`, which was `timeout`.
    pub timed_out: bool,
    pub timeout: Option<std::time::Duration>,
    /// Ended by `vectraguard stop` (exit 124, as a timeout).
    pub stopped: bool,
    /// The program that was executed (for "cannot execute" messages).
    pub program: String,
    /// What the cgroup counted (OOM kills, refused forks).
    pub cgroup_hits: vg_sandbox::cgroup::Hits,
    /// On gVisor, the cgroup's pids cap, which holds gVisor's own host tasks rather
    /// than the sandbox's processes (`backend::gvisor_pids`): a refused fork there
    /// is gVisor's, and ends the sandbox.
    pub gvisor_host_pids: Option<u64>,
    /// Limits init saw reached (a full `/tmp` or `$HOME`).
    pub limit_hits: Vec<vg_sandbox::LimitHit>,
    /// The supervisor's memory watchdog killed the sandbox over its cap.
    pub memory_watchdog: Option<crate::watchdog::Hit>,
    /// The approval gate denied the command itself: by whom, in words.
    pub denied: Option<String>,
    /// What the view and seccomp refused (`violation` events), for the summary line.
    pub violations: crate::record::observe::Summary,
    /// Learning mode: the profile learned from the run, still to be saved.
    pub learned: Option<crate::learn::Learned>,
}

/// Like `timeout(1)`: 124 when the session was stopped at its deadline or by `stop`.
pub fn exit_code(outcome: &vg_sandbox::Outcome) -> i32 {
    if outcome.timed_out || outcome.stopped.is_some() {
        EXIT_TIMEOUT
    } else {
        outcome.termination.exit_code()
    }
}
