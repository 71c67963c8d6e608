//! Image references, normalised as Docker does: `ubuntu` is
//! `docker.io/library/ubuntu:latest`, `127.0.0.1:5000/x/y:tag` names a registry
//! with a port, and `name@sha256:…` pins a digest.

use std::fmt;
use std::str::FromStr;

use crate::digest::Digest;
use crate::error::ImageError;

/// The registry of names without a host.
pub const DOCKER_HUB: &str = "docker.io";
/// Where Docker Hub's registry API actually answers.
const DOCKER_HUB_API: &str = "registry-1.docker.io";
const DEFAULT_TAG: &str = "latest";
/// Docker's limit on the length of a repository name, host included.
const MAX_NAME_LEN: usize = 255;

/// A normalised image reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reference {
    /// Registry host, with its port if any (`docker.io`, `127.0.0.1:5000`).
    pub registry: String,
    /// Repository path in the registry (`library/ubuntu`).
    pub repository: String,
    /// The tag; `latest` when neither a tag nor a digest was given.
    pub tag: Option<String>,
    /// A pinned manifest digest.
    pub digest: Option<Digest>,
}

impl Reference {
    /// Parses and normalises a reference.
    pub fn parse(input: &str) -> Result<Self, ImageError> {
        let bad = |reason: String| ImageError::BadReference {
            input: input.to_owned(),
            reason,
        };
        if input.is_empty() {
            return Err(bad("it is empty".into()));
        }
        if input.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("it contains spaces or control characters".into()));
        }
        let (rest, digest) = match input.split_once('@') {
            Some((rest, d)) => (
                rest,
                Some(Digest::parse(d).map_err(|e| bad(e.to_string()))?),
            ),
            None => (input, None),
        };
        // A tag follows the last ':' that comes after the last '/' (a ':' before it
        // is a registry port).
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
            None => (rest, None),
        };
        if let Some(tag) = tag {
            check_tag(tag).map_err(bad)?;
        }
        let (registry, path) = split_registry(name);
        if let Some(registry) = registry {
            check_registry(registry).map_err(bad)?;
        }
        let registry = match registry {
            None | Some("index.docker.io") => DOCKER_HUB.to_owned(),
            Some(r) => r.to_owned(),
        };
        if path.is_empty() {
            return Err(bad("the repository name is missing".into()));
        }
        for component in path.split('/') {
            check_path_component(component).map_err(bad)?;
        }
        let repository = if registry == DOCKER_HUB && !path.contains('/') {
            format!("library/{path}")
        } else {
            path.to_owned()
        };
        if registry.len() + 1 + repository.len() > MAX_NAME_LEN {
            return Err(bad(format!(
                "the name is longer than {MAX_NAME_LEN} characters"
            )));
        }
        let tag = match (tag, &digest) {
            (Some(t), _) => Some(t.to_owned()),
            (None, None) => Some(DEFAULT_TAG.to_owned()),
            (None, Some(_)) => None,
        };
        Ok(Self {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// `registry/repository`, the name without tag or digest.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// What to ask the registry's manifest endpoint for: the digest if pinned, else
    /// the tag.
    pub fn manifest_ref(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(d), _) => d.to_string(),
            (None, Some(t)) => t.clone(),
            (None, None) => DEFAULT_TAG.to_owned(),
        }
    }

    /// The host that serves the registry API for this reference.
    pub fn api_host(&self) -> &str {
        if self.registry == DOCKER_HUB {
            DOCKER_HUB_API
        } else {
            &self.registry
        }
    }

    /// Whether the registry is on this machine's loopback, which (as Docker does) is
    /// spoken to over plain HTTP: a local test or mirror registry has no certificate.
    pub fn is_loopback_registry(&self) -> bool {
        let host = host_without_port(&self.registry);
        host == "localhost"
            || host == "[::1]"
            || host
                .parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    /// Whether `input` (as typed, before normalisation) names its registry host:
    /// `127.0.0.1:5000/x`, `docker.io/library/x`, `localhost/x`. A bare `x` or
    /// `team/x` does not: Docker reads it as Docker Hub, but typed by someone who
    /// built or imported `x` here, it is a local name.
    pub fn names_registry(input: &str) -> bool {
        let rest = input.split_once('@').map_or(input, |(rest, _)| rest);
        split_registry(rest).0.is_some()
    }

    /// The same image with a different tag and no digest (`image load --tag`).
    pub fn with_tag(&self, tag: &str) -> Self {
        Self {
            tag: Some(tag.to_owned()),
            digest: None,
            ..self.clone()
        }
    }
}

impl fmt::Display for Reference {
    /// The canonical form: `docker.io/library/ubuntu:22.04`, `…@sha256:…`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

impl FromStr for Reference {
    type Err = ImageError;
    fn from_str(s: &str) -> Result<Self, ImageError> {
        Self::parse(s)
    }
}

/// Docker's rule: the first component is a registry host if it contains a '.' or a
/// ':' or is `localhost`; otherwise the name is on Docker Hub.
/// A name's registry host and the rest, when its first component is a host (a `.` or a
/// `:` in it, or `localhost`). Works on a name with a tag too: a tag follows the last
/// `/`, after the first component.
fn split_registry(name: &str) -> (Option<&str>, &str) {
    match name.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            (Some(first), rest)
        }
        _ => (None, name),
    }
}

fn host_without_port(registry: &str) -> &str {
    if registry.starts_with('[') {
        return registry.find(']').map_or(registry, |i| &registry[..=i]);
    }
    registry.split(':').next().unwrap_or(registry)
}

fn check_registry(registry: &str) -> Result<(), String> {
    let host = host_without_port(registry);
    let port = &registry[host.len()..];
    if !port.is_empty() {
        let digits = port.strip_prefix(':').unwrap_or("");
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 5 {
            return Err(format!("registry {registry:?} has a bad port"));
        }
    }
    if host.starts_with('[') {
        let inner = host.trim_start_matches('[').trim_end_matches(']');
        return inner
            .parse::<std::net::Ipv6Addr>()
            .map(|_| ())
            .map_err(|_| format!("registry {registry:?} is not a valid IPv6 address"));
    }
    let ok = !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if ok {
        Ok(())
    } else {
        Err(format!("registry host {host:?} is not a valid host name"))
    }
}

/// A path component: lowercase letters and digits, separated by `.`, `_`, `__` or
/// runs of `-`.
fn check_path_component(c: &str) -> Result<(), String> {
    if c.is_empty() {
        return Err(
            "the repository name has an empty path component (`//` or a trailing `/`)".into(),
        );
    }
    if c.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(format!("repository names must be lowercase ({c:?})"));
    }
    let bytes = c.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return Err(format!(
            "{c:?}: a repository path component must start and end with a letter or digit"
        ));
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        let valid = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|b| b == b'-');
        if !valid {
            return Err(format!(
                "{c:?}: only letters, digits and the separators '.', '_', '__', '-' are allowed"
            ));
        }
    }
    Ok(())
}

/// `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
fn check_tag(tag: &str) -> Result<(), String> {
    let ok = !tag.is_empty()
        && tag.len() <= 128
        && tag
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "tag {tag:?} is not valid: up to 128 letters, digits, '_', '.', '-', not starting with '.' or '-'"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> String {
        Reference::parse(s).unwrap().to_string()
    }

    const D: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn only_names_with_a_host_name_their_registry() {
        for local in [
            "myimage",
            "myimage:dev",
            "team/tool:1.2",
            "ubuntu@sha256:abc",
        ] {
            assert!(!Reference::names_registry(local), "{local}");
        }
        for remote in [
            "docker.io/library/ubuntu",
            "127.0.0.1:5000/x/y:tag",
            "localhost/x",
            "ghcr.io/o/r@sha256:abc",
            "[::1]:5000/x",
        ] {
            assert!(Reference::names_registry(remote), "{remote}");
        }
    }

    #[test]
    fn normalises_like_docker() {
        assert_eq!(canon("ubuntu"), "docker.io/library/ubuntu:latest");
        assert_eq!(canon("ubuntu:22.04"), "docker.io/library/ubuntu:22.04");
        assert_eq!(
            canon("python:3.10-slim"),
            "docker.io/library/python:3.10-slim"
        );
        assert_eq!(canon("alice/tool"), "docker.io/alice/tool:latest");
        assert_eq!(canon("docker.io/ubuntu"), "docker.io/library/ubuntu:latest");
        assert_eq!(
            canon("index.docker.io/ubuntu"),
            "docker.io/library/ubuntu:latest"
        );
        assert_eq!(canon("quay.io/ns/img:v1"), "quay.io/ns/img:v1");
        assert_eq!(canon("localhost/img"), "localhost/img:latest");
        assert_eq!(canon("127.0.0.1:5000/x/y:tag"), "127.0.0.1:5000/x/y:tag");
        assert_eq!(canon("[::1]:5000/x:1"), "[::1]:5000/x:1");
        assert_eq!(
            canon(&format!("ubuntu@{D}")),
            format!("docker.io/library/ubuntu@{D}")
        );
        assert_eq!(
            canon(&format!("ubuntu:22.04@{D}")),
            format!("docker.io/library/ubuntu:22.04@{D}")
        );
        assert_eq!(
            canon("a__b-c---d/f_g.h"),
            "docker.io/a__b-c---d/f_g.h:latest"
        );
    }

    #[test]
    fn parts_and_registry_endpoints() {
        let r = Reference::parse("127.0.0.1:5000/x/y:tag").unwrap();
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str()),
            ("127.0.0.1:5000", "x/y")
        );
        assert_eq!(r.manifest_ref(), "tag");
        assert!(r.is_loopback_registry());
        assert_eq!(r.api_host(), "127.0.0.1:5000");
        let r = Reference::parse(&format!("debian@{D}")).unwrap();
        assert_eq!(r.manifest_ref(), D);
        assert_eq!(r.tag, None);
        assert_eq!(r.api_host(), "registry-1.docker.io");
        assert!(!r.is_loopback_registry());
        assert!(
            Reference::parse("localhost:5000/a")
                .unwrap()
                .is_loopback_registry()
        );
        assert!(
            Reference::parse("[::1]:5000/a")
                .unwrap()
                .is_loopback_registry()
        );
        assert!(
            !Reference::parse("10.0.0.1:5000/a")
                .unwrap()
                .is_loopback_registry()
        );
        assert!(
            !Reference::parse("127.example.com/a")
                .unwrap()
                .is_loopback_registry()
        );
    }

    #[test]
    fn malformed_references_say_why() {
        for (input, why) in [
            ("", "empty"),
            ("Ubuntu", "lowercase"),
            ("ubuntu:", "tag"),
            ("ubuntu:-x", "tag"),
            ("ubuntu:a/b", "bad port"),
            ("ubuntu@sha256:123", "64"),
            (
                "ubuntu@md5:d41d8cd98f00b204e9800998ecf8427e",
                "not supported",
            ),
            ("a//b", "empty path component"),
            ("a/", "empty path component"),
            ("-a", "start and end"),
            ("a$b", "separators"),
            ("a..b", "separators"),
            ("host:port/x", "bad port"),
            ("bad_host.com/x", "host name"),
            ("ubu ntu", "spaces"),
            ("example.com:5000/", "missing"),
        ] {
            let e = Reference::parse(input).unwrap_err().to_string();
            assert!(e.contains(why), "{input:?}: {e}");
        }
        let long = format!("a/{}", "b".repeat(300));
        assert!(
            Reference::parse(&long)
                .unwrap_err()
                .to_string()
                .contains("longer")
        );
    }
}
