//! Which mechanism runs a session's command: the native sandbox (the default) or
//! one of the other backends. The same request and plan drive every backend; what a
//! backend cannot enforce is refused when the session is planned, never ignored.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Vectra Guard's own sandbox: namespaces, Landlock, seccomp, capabilities.
    #[default]
    Native,
    /// gVisor's application kernel (`runsc`), from an OCI bundle Vectra Guard writes.
    Gvisor,
    /// A Docker container, through the `docker` client.
    Docker,
    /// A Podman container, through the `podman` client.
    Podman,
}

impl Backend {
    pub const ALL: [Backend; 4] = [Self::Native, Self::Gvisor, Self::Docker, Self::Podman];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::Gvisor => "gvisor",
            Self::Docker => "docker",
            Self::Podman => "podman",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown backend name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown backend {0:?}: use native (the default), gvisor, docker or podman")]
pub struct UnknownBackend(pub String);

impl FromStr for Backend {
    type Err = UnknownBackend;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|b| b.as_str() == s)
            // `runsc` is what people type for gVisor.
            .or((s == "runsc").then_some(Self::Gvisor))
            .ok_or_else(|| UnknownBackend(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_are_refused_with_the_choices() {
        for b in Backend::ALL {
            assert_eq!(b.as_str().parse::<Backend>(), Ok(b));
        }
        assert_eq!("runsc".parse::<Backend>(), Ok(Backend::Gvisor));
        let e = "lxc".parse::<Backend>().unwrap_err().to_string();
        assert!(
            e.contains("\"lxc\"") && e.contains("gvisor, docker or podman"),
            "{e}"
        );
        assert_eq!(Backend::default(), Backend::Native);
    }
}
