//! Risk levels and how long a held action waits for a person before it is denied.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// How dangerous an exec or a destination is. Ordered: `Low < Medium < High < Critical`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    #[default]
    Low,
    Medium,
    High,
    Critical,
}

impl Level {
    pub const ALL: [Level; 4] = [Level::Low, Level::Medium, Level::High, Level::Critical];

    /// Seed 002's time-outs: the more dangerous, the less time an unanswered request is
    /// held before it ends in deny. `None` for LOW, which is approved without asking.
    pub fn timeout(self) -> Option<Duration> {
        match self {
            Level::Critical => Some(Duration::from_secs(30)),
            Level::High => Some(Duration::from_secs(60)),
            Level::Medium => Some(Duration::from_secs(120)),
            Level::Low => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Low => "LOW",
            Level::Medium => "MEDIUM",
            Level::High => "HIGH",
            Level::Critical => "CRITICAL",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown risk level '{0}' (hint: use one of low, medium, high, critical)")]
pub struct LevelError(pub String);

impl FromStr for Level {
    type Err = LevelError;

    /// Case-insensitive, so `--ask high` and `level = "HIGH"` both work.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Level::ALL
            .into_iter()
            .find(|level| level.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| LevelError(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_ordered_parsed_and_shown() {
        assert!(Level::Low < Level::Medium);
        assert!(Level::Medium < Level::High);
        assert!(Level::High < Level::Critical);
        for level in Level::ALL {
            assert_eq!(level.to_string().parse::<Level>(), Ok(level));
            assert_eq!(level.as_str().to_lowercase().parse::<Level>(), Ok(level));
        }
        assert_eq!(
            "severe".parse::<Level>(),
            Err(LevelError("severe".to_owned()))
        );
        assert_eq!(format!("{:<9}|", Level::High), "HIGH     |");
    }

    #[test]
    fn timeouts_follow_seed_002() {
        assert_eq!(Level::Critical.timeout(), Some(Duration::from_secs(30)));
        assert_eq!(Level::High.timeout(), Some(Duration::from_secs(60)));
        assert_eq!(Level::Medium.timeout(), Some(Duration::from_secs(120)));
        assert_eq!(Level::Low.timeout(), None);
    }
}
