//! `--ask LEVEL` and `--approval-timeout`: when the approval gate holds an exec or a
//! destination, and for how long an unanswered request waits before it is denied.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::level::Level;

/// Which ratings are held for a decision.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Ask {
    /// Nothing is held (and nothing is classified).
    #[default]
    Never,
    /// Every exec and every not-yet-allowed destination rated at or above the level.
    AtLeast(Level),
}

impl Ask {
    /// Whether an action rated `level` is held.
    pub fn holds(self, level: Level) -> bool {
        match self {
            Ask::Never => false,
            Ask::AtLeast(threshold) => level >= threshold,
        }
    }

    /// Of two thresholds, the one that holds more (a project file may only ask more).
    pub fn stricter(self, other: Ask) -> Ask {
        match (self, other) {
            (Ask::Never, x) | (x, Ask::Never) => x,
            (Ask::AtLeast(a), Ask::AtLeast(b)) => Ask::AtLeast(a.min(b)),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Ask::Never => "never",
            Ask::AtLeast(Level::Low) => "low",
            Ask::AtLeast(Level::Medium) => "medium",
            Ask::AtLeast(Level::High) => "high",
            Ask::AtLeast(Level::Critical) => "critical",
        }
    }
}

impl fmt::Display for Ask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown approval level '{0}' (hint: use one of low, medium, high, critical, never)")]
pub struct AskError(pub String);

impl FromStr for Ask {
    type Err = AskError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().eq_ignore_ascii_case("never") {
            return Ok(Ask::Never);
        }
        s.parse::<Level>()
            .map(Ask::AtLeast)
            .map_err(|_| AskError(s.to_owned()))
    }
}

/// The approval settings of one layer (flags, a file, a profile); unset keys leave
/// the lower layer's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Approval {
    pub ask: Option<Ask>,
    /// One time-out for every level, instead of each level's own.
    pub timeout: Option<Duration>,
}

impl Approval {
    /// A higher layer's keys replace ours.
    pub fn overlay(&mut self, higher: Approval) {
        if higher.ask.is_some() {
            self.ask = higher.ask;
        }
        if higher.timeout.is_some() {
            self.timeout = higher.timeout;
        }
    }

    /// What a project file's `ask`/`approval_timeout` may change: it may ask about
    /// more and deny sooner, never less or later (sandboxed code can edit the file).
    pub fn tightened_by(self, project: Approval) -> Approval {
        let ask = match (self.ask, project.ask) {
            (ours, Some(theirs)) => Some(ours.unwrap_or_default().stricter(theirs)),
            (ours, None) => ours,
        };
        let timeout = match (self.timeout, project.timeout) {
            (Some(ours), Some(theirs)) => Some(ours.min(theirs)),
            (None, Some(theirs)) => Some(theirs.min(Level::Critical.timeout().unwrap_or(theirs))),
            (ours, None) => ours,
        };
        Approval { ask, timeout }
    }

    /// The threshold in force: never, unless a layer set one.
    pub fn ask(&self) -> Ask {
        self.ask.unwrap_or_default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_shows_every_threshold() {
        for text in ["never", "low", "medium", "high", "critical"] {
            let ask: Ask = text.parse().unwrap();
            assert_eq!(ask.to_string(), text);
        }
        assert_eq!("HIGH".parse::<Ask>(), Ok(Ask::AtLeast(Level::High)));
        assert_eq!(
            "sometimes".parse::<Ask>().unwrap_err().to_string(),
            "unknown approval level 'sometimes' (hint: use one of low, medium, high, critical, never)"
        );
    }

    #[test]
    fn holds_at_or_above_the_threshold_only() {
        let high = Ask::AtLeast(Level::High);
        assert!(!high.holds(Level::Medium));
        assert!(high.holds(Level::High));
        assert!(high.holds(Level::Critical));
        for level in Level::ALL {
            assert!(!Ask::Never.holds(level));
            assert!(Ask::AtLeast(Level::Low).holds(level));
        }
    }

    #[test]
    fn a_project_may_only_ask_more_and_deny_sooner() {
        let user = Approval {
            ask: Some(Ask::AtLeast(Level::High)),
            timeout: Some(Duration::from_secs(60)),
        };
        // Lowering the threshold and shortening the wait apply.
        let stricter = Approval {
            ask: Some(Ask::AtLeast(Level::Medium)),
            timeout: Some(Duration::from_secs(5)),
        };
        assert_eq!(user.tightened_by(stricter), stricter);
        // Raising it, turning it off or waiting longer do not.
        for looser in [
            Approval {
                ask: Some(Ask::Never),
                timeout: Some(Duration::from_secs(600)),
            },
            Approval {
                ask: Some(Ask::AtLeast(Level::Critical)),
                timeout: None,
            },
        ] {
            assert_eq!(user.tightened_by(looser), user);
        }
        // With nothing set by the user, a project can turn the gate on; its time-out
        // never exceeds the shortest built-in one.
        let project = Approval {
            ask: Some(Ask::AtLeast(Level::High)),
            timeout: Some(Duration::from_secs(3600)),
        };
        assert_eq!(
            Approval::default().tightened_by(project),
            Approval {
                ask: Some(Ask::AtLeast(Level::High)),
                timeout: Some(Duration::from_secs(30)),
            }
        );
        assert_eq!(
            Approval::default()
                .tightened_by(Approval {
                    ask: Some(Ask::Never),
                    timeout: None
                })
                .ask(),
            Ask::Never
        );
    }
}
