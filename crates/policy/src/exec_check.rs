//! When a recorded program is checked against its `exec` line (`exec_check = …` in
//! the user config or a profile).
//!
//! The tracer reads an exec's path from the process's memory while the call waits;
//! another thread (or a process sharing that memory) can change it before the kernel
//! reads it, so the program that runs can differ from the line. What ran is compared
//! with the line while the process still runs it: at its exit, which makes every
//! program wait for a second round trip to the supervisor as it exits, or only if the
//! same process executes again. Neither catches a program killed by a signal before
//! the check, which a hostile program can arrange, so the check is a safeguard for the
//! record rather than a barrier.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ExecCheck {
    /// At the process's next exec only; exits are read from pidfds, so no program
    /// waits as it exits (Linux 6.15+; older kernels check at exit).
    #[default]
    NextExec,
    /// At its exit too (or its next exec): every traced program's `exit_group` goes
    /// to the supervisor, which compares what runs while the program waits.
    Exit,
}

impl ExecCheck {
    pub const ALL: [ExecCheck; 2] = [Self::NextExec, Self::Exit];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::NextExec => "next-exec",
            Self::Exit => "exit",
        }
    }
}

impl fmt::Display for ExecCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown `exec_check` value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown exec_check {0:?}: use \"next-exec\" (the default) or \"exit\"")]
pub struct UnknownExecCheck(pub String);

impl FromStr for ExecCheck {
    type Err = UnknownExecCheck;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| UnknownExecCheck(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_others_are_refused() {
        for check in ExecCheck::ALL {
            assert_eq!(check.as_str().parse::<ExecCheck>(), Ok(check));
        }
        assert_eq!(ExecCheck::default(), ExecCheck::NextExec);
        let err = "at-exit".parse::<ExecCheck>().unwrap_err().to_string();
        assert!(
            err.contains("\"at-exit\"") && err.contains("\"exit\""),
            "{err}"
        );
    }
}
