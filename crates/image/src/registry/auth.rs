//! Registry authentication: `WWW-Authenticate` challenges (Bearer tokens from the
//! registry's token service, or Basic) and credentials from Docker's
//! `~/.docker/config.json` (`auths.<registry>.auth`, base64 `user:password`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use base64::Engine as _;

use crate::reference::DOCKER_HUB;

/// A user name and password (or token) for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Credentials({}, <redacted>)", self.username)
    }
}

impl Credentials {
    /// The value of an `Authorization: Basic` header.
    pub fn basic_header(&self) -> String {
        let raw = format!("{}:{}", self.username, self.password);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
    }
}

/// What Docker's config file says about a registry.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct DockerAuth {
    pub credentials: Option<Credentials>,
    /// The config names a credential helper for this registry (or for all), which
    /// this version does not run.
    pub helper: Option<String>,
}

/// Reads `config.json` (a missing file means no credentials) and finds `registry`
/// in it.
pub fn docker_auth(config_file: &Path, registry: &str) -> Result<DockerAuth, String> {
    let text = match std::fs::read(config_file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(DockerAuth::default()),
        Err(e) => return Err(format!("{}: {e}", config_file.display())),
    };
    parse_docker_config(&text, registry).map_err(|e| {
        format!(
            "{}: {e}; fix the file or point DOCKER_CONFIG to another folder",
            config_file.display()
        )
    })
}

/// [`docker_auth`] on the file's bytes (public for the fuzz targets in `fuzz/`).
#[doc(hidden)]
pub fn parse_docker_config(text: &[u8], registry: &str) -> Result<DockerAuth, String> {
    #[derive(serde::Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    struct Config {
        #[serde(default)]
        auths: BTreeMap<String, AuthEntry>,
        creds_store: Option<String>,
        #[serde(default)]
        cred_helpers: BTreeMap<String, String>,
    }
    #[derive(serde::Deserialize, Default)]
    struct AuthEntry {
        auth: Option<String>,
        username: Option<String>,
        password: Option<String>,
    }
    let config: Config = serde_json::from_slice(text).map_err(|e| e.to_string())?;
    let wanted = aliases(registry);
    let entry = config
        .auths
        .iter()
        .find(|(key, _)| wanted.contains(&normalise_key(key)))
        .map(|(_, e)| e);
    let credentials = match entry {
        Some(AuthEntry {
            auth: Some(auth), ..
        }) if !auth.is_empty() => {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(auth.trim())
                .map_err(|e| format!("the auth of {registry} is not base64: {e}"))?;
            let decoded = String::from_utf8(decoded)
                .map_err(|_| format!("the auth of {registry} is not UTF-8"))?;
            let (u, p) = decoded
                .split_once(':')
                .ok_or_else(|| format!("the auth of {registry} is not user:password"))?;
            Some(Credentials {
                username: u.to_owned(),
                password: p.to_owned(),
            })
        }
        Some(AuthEntry {
            username: Some(u),
            password: Some(p),
            ..
        }) => Some(Credentials {
            username: u.clone(),
            password: p.clone(),
        }),
        _ => None,
    };
    let helper = config
        .cred_helpers
        .iter()
        .find(|(key, _)| wanted.contains(&normalise_key(key)))
        .map(|(_, h)| h.clone())
        .or(config.creds_store);
    Ok(DockerAuth {
        credentials,
        helper,
    })
}

/// The keys Docker uses for a registry: Docker Hub has several spellings.
fn aliases(registry: &str) -> Vec<String> {
    if registry == DOCKER_HUB {
        ["index.docker.io", "docker.io", "registry-1.docker.io"]
            .map(String::from)
            .to_vec()
    } else {
        vec![registry.to_owned()]
    }
}

/// `https://index.docker.io/v1/` → `index.docker.io`.
fn normalise_key(key: &str) -> String {
    let k = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    k.split('/').next().unwrap_or(k).to_owned()
}

/// A parsed `WWW-Authenticate` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// `bearer` or `basic`, lowercased.
    pub scheme: String,
    pub params: BTreeMap<String, String>,
}

/// Parses `Bearer realm="…",service="…",scope="repository:x:pull,push"`: quoted
/// values may hold commas.
pub fn parse_challenge(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
    if scheme.is_empty() {
        return None;
    }
    let mut params = BTreeMap::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() {
            break;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => value.extend(chars.next()),
                    '"' => break,
                    c => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.peek() {
                if *c == ',' {
                    break;
                }
                value.push(*c);
                chars.next();
            }
        }
        params.insert(key.trim().to_ascii_lowercase(), value.trim().to_owned());
    }
    Some(Challenge {
        scheme: scheme.to_ascii_lowercase(),
        params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bearer_and_basic_challenges() {
        let c = parse_challenge(
            r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/ubuntu:pull,push""#,
        )
        .unwrap();
        assert_eq!(c.scheme, "bearer");
        assert_eq!(c.params["realm"], "https://auth.docker.io/token");
        assert_eq!(c.params["service"], "registry.docker.io");
        assert_eq!(c.params["scope"], "repository:library/ubuntu:pull,push");
        let c = parse_challenge(r#"Basic realm="Registry Realm""#).unwrap();
        assert_eq!(c.scheme, "basic");
        assert_eq!(c.params["realm"], "Registry Realm");
        let c = parse_challenge("Bearer realm=http://x/token, service=reg").unwrap();
        assert_eq!(c.params["realm"], "http://x/token");
        assert_eq!(c.params["service"], "reg");
        assert!(parse_challenge("").is_none());
    }

    #[test]
    fn finds_credentials_in_docker_config() {
        let auth = base64::engine::general_purpose::STANDARD.encode("alice:s3cr:et");
        let cfg = format!(
            r#"{{"auths": {{"https://index.docker.io/v1/": {{"auth": "{auth}"}},
                 "127.0.0.1:5000": {{"auth": "{auth}"}},
                 "http://reg.example.com/v2/": {{"username": "bob", "password": "pw"}}}},
               "credHelpers": {{"gcr.io": "gcloud"}}}}"#
        );
        let hub = parse_docker_config(cfg.as_bytes(), "docker.io").unwrap();
        let c = hub.credentials.unwrap();
        assert_eq!(
            (c.username.as_str(), c.password.as_str()),
            ("alice", "s3cr:et")
        );
        assert_eq!(c.basic_header(), format!("Basic {auth}"));
        assert!(!format!("{c:?}").contains("s3cr"));
        assert!(
            parse_docker_config(cfg.as_bytes(), "127.0.0.1:5000")
                .unwrap()
                .credentials
                .is_some()
        );
        let bob = parse_docker_config(cfg.as_bytes(), "reg.example.com").unwrap();
        assert_eq!(bob.credentials.unwrap().username, "bob");
        let gcr = parse_docker_config(cfg.as_bytes(), "gcr.io").unwrap();
        assert_eq!(
            (gcr.credentials, gcr.helper.as_deref()),
            (None, Some("gcloud"))
        );
        assert_eq!(
            parse_docker_config(cfg.as_bytes(), "quay.io").unwrap(),
            DockerAuth::default()
        );
        assert!(parse_docker_config(br#"{"auths": {"x": {"auth": "!!"}}}"#, "x").is_err());
        assert!(parse_docker_config(b"not json", "x").is_err());
    }
}
