//! Network modes. Only `none` is implemented by this version; the others are parsed so
//! that asking for them gives a clear error instead of being silently ignored.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NetworkMode {
    /// A private network namespace with loopback only.
    #[default]
    None,
    /// Mediated egress by rules (not available yet).
    Allow,
    /// The host's network (not available yet).
    Host,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NetworkError {
    #[error("unknown network mode '{0}': use none, allow or host")]
    Unknown(String),
    #[error(
        "network mode '{0}' is not available in this version of vectraguard: only 'none' (loopback only) is enforced; remove --network/--allow or use --network none"
    )]
    Unsupported(NetworkMode),
}

impl NetworkMode {
    pub fn parse(s: &str) -> Result<Self, NetworkError> {
        match s {
            "none" => Ok(Self::None),
            "allow" => Ok(Self::Allow),
            "host" => Ok(Self::Host),
            other => Err(NetworkError::Unknown(other.to_owned())),
        }
    }

    /// Rejects modes this build cannot enforce (fail closed, never ignore).
    pub fn ensure_supported(self) -> Result<Self, NetworkError> {
        match self {
            Self::None => Ok(self),
            other => Err(NetworkError::Unsupported(other)),
        }
    }
}

impl fmt::Display for NetworkMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::None => "none",
            Self::Allow => "allow",
            Self::Host => "host",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_none_is_supported() {
        assert_eq!(
            NetworkMode::parse("none").unwrap().ensure_supported(),
            Ok(NetworkMode::None)
        );
        assert!(
            NetworkMode::parse("host")
                .unwrap()
                .ensure_supported()
                .is_err()
        );
        assert!(
            NetworkMode::parse("allow")
                .unwrap()
                .ensure_supported()
                .is_err()
        );
        assert!(NetworkMode::parse("bridge").is_err());
    }
}
