//! How a recorded run learns its programs' execs and exits (`exec_trace = …` in the
//! user config or a profile).
//!
//! Seccomp notification makes each exec wait while the supervisor reads it (about
//! +15-25 % on exec-heavy work on a small VM); the BPF recorder reads the kernel's own
//! copies as the exec completes, with no wait (+2-4 %), but only root can load it.
//! Unset, root's native runs without an image use the BPF recorder and every other
//! run seccomp notification (the session's plan decides). Both record every
//! program; where their records differ is in the README ("What exec tracing
//! records").

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExecTrace {
    /// Seccomp user notification: every user, every backend that records execs.
    Seccomp,
    /// The BPF recorder, natively as root without an approval gate, image runs
    /// included; elsewhere seccomp notification, and the record says why.
    Bpf,
}

impl ExecTrace {
    pub const ALL: [ExecTrace; 2] = [Self::Seccomp, Self::Bpf];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Seccomp => "seccomp",
            Self::Bpf => "bpf",
        }
    }
}

impl fmt::Display for ExecTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown `exec_trace` value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown exec_trace {0:?}: use \"seccomp\" or \"bpf\" (unset: bpf as root natively without an image, seccomp otherwise)"
)]
pub struct UnknownExecTrace(pub String);

impl FromStr for ExecTrace {
    type Err = UnknownExecTrace;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| UnknownExecTrace(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_others_are_refused() {
        for trace in ExecTrace::ALL {
            assert_eq!(trace.as_str().parse::<ExecTrace>(), Ok(trace));
        }
        let err = "ebpf".parse::<ExecTrace>().unwrap_err().to_string();
        assert!(err.contains("\"ebpf\"") && err.contains("\"bpf\""), "{err}");
    }
}
