//! The network policy as data: the mode, and for `allow` the ordered rules and pinned
//! names that the mediating network stack consults for every DNS query and connection.
//!
//! - [`HostName`]: a canonical DNS name (lowercase ASCII, IDNA applied, no trailing dot),
//!   so that a rule and a query can only be compared one way.
//! - [`Rule`]: `allow`/`deny` of a name, `*.` wildcard, `*`, IP address or [`Cidr`], on
//!   all ports or a [`PortRange`].
//! - [`NetworkPolicy`]: first match wins, default deny; private, loopback, link-local and
//!   metadata addresses ([`is_special`]) stay closed unless a rule names them by address
//!   or the name was pinned with `--add-host` ([`AddHost`]).
//!
//! Precedence of rules from the layers (first match wins, so earlier outranks later):
//! flags, then a `--config` file, then the user's file, then the project file, each
//! file's selected profile before its top level (see [`crate::config::resolve_profile`]).
//! A project file may only add deny rules, so its place at the end cannot open anything.

use std::fmt;

mod addr;
mod http;
mod name;
mod policy;
mod rule;

pub use addr::{Cidr, canonical, is_special};
pub use http::{HttpRequest, HttpScope, Methods, PathGlob, Scheme, canonical_path, path_problem};
pub use name::HostName;
pub use policy::{Decision, Destination, NetworkPolicy, OwnAddresses, Reason, RuleMatch};
pub use rule::{Action, AddHost, PortRange, Rule, Target};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NetworkMode {
    /// A private network namespace with loopback only.
    #[default]
    None,
    /// Egress mediated by a [`NetworkPolicy`].
    Allow,
    /// The host's network: an explicit opt-out of network isolation.
    Host,
}

/// Every way network input can be wrong. The offending text is quoted (control
/// characters escaped, long input shortened) and each message says what to write instead.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum NetworkError {
    #[error("unknown network mode '{0}': use none, allow or host")]
    Unknown(String),
    #[error("invalid host name '{input}': {problem}")]
    Name { input: String, problem: String },
    #[error("invalid network '{input}': {problem}")]
    Cidr { input: String, problem: String },
    #[error("invalid network rule '{input}': {problem}")]
    Rule { input: String, problem: String },
    #[error(
        "invalid --add-host '{input}': {problem} (write NAME:IP, e.g. db.internal:10.0.0.5 or db.internal:[fd00::5])"
    )]
    AddHost { input: String, problem: String },
}

impl NetworkMode {
    pub fn parse(s: &str) -> Result<Self, NetworkError> {
        match s {
            "none" => Ok(Self::None),
            "allow" => Ok(Self::Allow),
            "host" => Ok(Self::Host),
            other => Err(NetworkError::Unknown(shown(other))),
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

/// Input as it may be quoted in an error: control characters escaped (a NUL or an
/// escape sequence must not reach the terminal) and at most `MAX_SHOWN` characters.
fn shown(input: &str) -> String {
    const MAX_SHOWN: usize = 100;
    let mut out: String = input
        .chars()
        .take(MAX_SHOWN)
        .flat_map(char::escape_debug)
        .collect();
    if input.chars().nth(MAX_SHOWN).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_display() {
        for mode in [NetworkMode::None, NetworkMode::Allow, NetworkMode::Host] {
            assert_eq!(NetworkMode::parse(&mode.to_string()), Ok(mode));
        }
        assert_eq!(NetworkMode::default(), NetworkMode::None);
        let err = NetworkMode::parse("bridge").unwrap_err().to_string();
        assert!(
            err.contains("'bridge'") && err.contains("none, allow or host"),
            "{err}"
        );
        assert!(NetworkMode::parse("Host").is_err(), "modes are lowercase");
    }

    #[test]
    fn shown_escapes_and_shortens() {
        assert_eq!(shown("a\0b\x1b[2J"), "a\\0b\\u{1b}[2J");
        let long = "x".repeat(500);
        assert_eq!(shown(&long).chars().count(), 101);
        assert!(shown(&long).ends_with('…'));
        assert_eq!(shown("bücher.de"), "bücher.de");
    }

    #[test]
    fn policy_types_are_send_and_sync() {
        fn check<T: Send + Sync + Clone + fmt::Debug + PartialEq>() {}
        check::<NetworkPolicy>();
        check::<Rule>();
        check::<Decision>();
        check::<Destination>();
        check::<NetworkError>();
    }
}
