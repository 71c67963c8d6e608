//! A client of the OCI distribution API (v2), read side: manifests by tag or
//! digest, blobs streamed, with token or basic authentication.
//!
//! HTTPS by default; plain HTTP only for a registry on this machine's loopback
//! (`localhost`, `127.0.0.0/8`, `[::1]`), as Docker does for insecure local
//! registries. Authorization is never sent along a redirect (blobs are often served
//! from another host).

pub mod auth;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ureq::http::{Response, StatusCode};

use crate::error::{ImageError, Result};
use crate::manifest::{ACCEPTED, MAX_JSON_BYTES};
use crate::reference::Reference;
use auth::{Challenge, Credentials};

/// How long to wait for a connection or for the next bytes of a response.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const READ_TIMEOUT: Duration = Duration::from_secs(120);

/// A registry session for one repository.
pub struct Client {
    agent: ureq::Agent,
    base: String,
    registry: String,
    repository: String,
    credentials: Option<Credentials>,
    /// The Docker config file the credentials come from (or would).
    config_file: Option<PathBuf>,
    /// A credential helper the config names for this registry (not run).
    helper: Option<String>,
    /// The `Authorization` value that worked (a bearer token, or basic).
    authorization: Option<String>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base)
            .field("repository", &self.repository)
            .finish_non_exhaustive()
    }
}

/// A blob being downloaded.
pub struct BlobStream {
    pub reader: Box<dyn Read + Send>,
    /// Content-Length, when the server sends one.
    pub length: Option<u64>,
}

impl Client {
    /// A client for the registry and repository of `reference`, with credentials
    /// from Docker's config file if it has some for that registry.
    pub fn new(reference: &Reference, docker_config: Option<&Path>) -> Result<Self> {
        let registry = reference.registry.clone();
        let mut credentials = None;
        let mut helper = None;
        if let Some(file) = docker_config {
            let found =
                auth::docker_auth(file, &registry).map_err(|message| ImageError::Registry {
                    registry: registry.clone(),
                    message,
                })?;
            credentials = found.credentials;
            helper = found.helper;
        }
        let scheme = if reference.is_loopback_registry() {
            "http"
        } else {
            "https"
        };
        let agent: ureq::Agent = ureq::Agent::config_builder()
            // A registry reached over HTTPS may not redirect to plain HTTP.
            .https_only(scheme == "https")
            .http_status_as_error(false)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_recv_response(Some(READ_TIMEOUT))
            .timeout_per_read(Some(READ_TIMEOUT))
            .user_agent(concat!("vectraguard/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Ok(Self {
            agent,
            base: format!(
                "{scheme}://{}/v2/{}",
                reference.api_host(),
                reference.repository
            ),
            registry,
            repository: reference.repository.clone(),
            credentials,
            config_file: docker_config.map(Path::to_path_buf),
            helper,
            authorization: None,
        })
    }

    fn error(&self, message: impl Into<String>) -> ImageError {
        ImageError::Registry {
            registry: self.registry.clone(),
            message: message.into(),
        }
    }

    /// GET `url`, authenticating once if the registry asks for it.
    fn get(&mut self, url: &str, accept: Option<&str>) -> Result<Response<ureq::Body>> {
        let mut authenticated = false;
        loop {
            let mut req = self.agent.get(url);
            if let Some(a) = accept {
                req = req.header("Accept", a);
            }
            if let Some(auth) = &self.authorization {
                req = req.header("Authorization", auth);
            }
            let resp = req.call().map_err(|e| self.unreachable(url, &e))?;
            if resp.status() != StatusCode::UNAUTHORIZED || authenticated {
                return Ok(resp);
            }
            let challenge = resp
                .headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok())
                .and_then(auth::parse_challenge)
                .ok_or_else(|| {
                    self.error("it answered 401 Unauthorized without saying how to authenticate")
                })?;
            self.authenticate(&challenge)?;
            authenticated = true;
        }
    }

    /// The Docker config file credentials are read from, for messages.
    fn config_name(&self) -> String {
        self.config_file.as_deref().map_or_else(
            || "the Docker config file".to_owned(),
            |f| f.display().to_string(),
        )
    }

    fn unreachable(&self, url: &str, e: &ureq::Error) -> ImageError {
        self.error(format!(
            "cannot reach {url}: {e}; check the image name and the network (registries are \
             spoken to over HTTPS, and over plain HTTP only on localhost)"
        ))
    }

    /// Answers a challenge: fetches a bearer token, or uses basic credentials.
    fn authenticate(&mut self, challenge: &Challenge) -> Result<()> {
        match challenge.scheme.as_str() {
            "basic" => {
                let creds = self.credentials.as_ref().ok_or_else(|| {
                    let found = match (&self.config_file, &self.helper) {
                        (Some(f), Some(h)) => format!(
                            "{} only names the credential helper docker-credential-{h}, which vectraguard does not run",
                            f.display()
                        ),
                        (Some(f), None) => format!("{} has none for it", f.display()),
                        (None, _) => "no Docker config file was found".to_owned(),
                    };
                    self.error(format!(
                        "it requires a user name and password, and {found}; log in with \
                         `docker login {}`, or put them under `auths` in \
                         $DOCKER_CONFIG/config.json (default ~/.docker/config.json)",
                        self.registry
                    ))
                })?;
                self.authorization = Some(creds.basic_header());
                Ok(())
            }
            "bearer" => {
                let realm = challenge
                    .params
                    .get("realm")
                    .ok_or_else(|| self.error("its bearer challenge has no realm"))?
                    .clone();
                let scope = challenge
                    .params
                    .get("scope")
                    .cloned()
                    .unwrap_or_else(|| format!("repository:{}:pull", self.repository));
                let mut req = self.agent.get(&realm).query("scope", &scope);
                if let Some(service) = challenge.params.get("service") {
                    req = req.query("service", service);
                }
                if let Some(creds) = &self.credentials {
                    // Credentials never cross the network in clear text: only to an
                    // HTTPS token service, or one on this machine's loopback.
                    if !realm.starts_with("https://") && !loopback_url(&realm) {
                        return Err(self.error(format!(
                            "its token service {realm} is not HTTPS; vectraguard will not send your credentials there"
                        )));
                    }
                    req = req.header("Authorization", &creds.basic_header());
                }
                let mut resp = req.call().map_err(|e| self.unreachable(&realm, &e))?;
                if !resp.status().is_success() {
                    return Err(self.error(format!(
                        "its token service {realm} refused access ({}); {}",
                        resp.status(),
                        if self.credentials.is_some() {
                            format!("check the credentials in {}", self.config_name())
                        } else {
                            format!(
                                "the image may be private: log in with `docker login {}`",
                                self.registry
                            )
                        }
                    )));
                }
                #[derive(serde::Deserialize)]
                struct Token {
                    token: Option<String>,
                    access_token: Option<String>,
                }
                let body = resp
                    .body_mut()
                    .with_config()
                    .limit(MAX_JSON_BYTES)
                    .read_to_vec()
                    .map_err(|e| self.error(format!("reading a token from {realm}: {e}")))?;
                let t: Token = serde_json::from_slice(&body)
                    .map_err(|e| self.error(format!("a bad token answer from {realm}: {e}")))?;
                let token = t
                    .token
                    .or(t.access_token)
                    .filter(|t| !t.is_empty())
                    .ok_or_else(|| self.error(format!("{realm} returned no token")))?;
                self.authorization = Some(format!("Bearer {token}"));
                Ok(())
            }
            other => Err(self.error(format!(
                "it asks for {other} authentication, which this version does not speak"
            ))),
        }
    }

    /// A manifest or index by tag or digest: its bytes and Content-Type.
    pub fn manifest(&mut self, reference: &str) -> Result<(Vec<u8>, Option<String>)> {
        let url = format!("{}/manifests/{reference}", self.base);
        let mut resp = self.get(&url, Some(ACCEPTED))?;
        match resp.status() {
            s if s.is_success() => {}
            StatusCode::NOT_FOUND => {
                return Err(self.error(format!(
                    "{}:{reference} was not found (no such repository or tag)",
                    self.repository
                )));
            }
            // Basic credentials sent and still refused: they are wrong.
            StatusCode::UNAUTHORIZED
                if self
                    .authorization
                    .as_deref()
                    .is_some_and(|a| a.starts_with("Basic ")) =>
            {
                return Err(self.error(format!(
                    "it refused the user name and password in {} ({}); check them, or log \
                     in again with `docker login {}`",
                    self.config_name(),
                    resp.status(),
                    self.registry
                )));
            }
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                let advice = if self.credentials.is_some() {
                    format!(
                        "the credentials in {} do not give access to it",
                        self.config_name()
                    )
                } else {
                    format!(
                        "log in with `docker login {}` if it is private",
                        self.registry
                    )
                };
                return Err(self.error(format!(
                    "access to {} denied ({}); {advice}",
                    self.repository,
                    resp.status(),
                )));
            }
            s => return Err(self.error(format!("GET {url} answered {s}"))),
        }
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = resp
            .body_mut()
            .with_config()
            .limit(MAX_JSON_BYTES)
            .read_to_vec()
            .map_err(|e| self.error(format!("reading {url}: {e}")))?;
        Ok((body, content_type))
    }

    /// Starts downloading a blob.
    pub fn blob(&mut self, digest: &crate::Digest) -> Result<BlobStream> {
        let url = format!("{}/blobs/{digest}", self.base);
        let resp = self.get(&url, None)?;
        if !resp.status().is_success() {
            return Err(self.error(format!(
                "blob {digest} of {}: {}",
                self.repository,
                resp.status()
            )));
        }
        let length = resp
            .headers()
            .get("content-length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        Ok(BlobStream {
            reader: Box::new(resp.into_body().into_reader()),
            length,
        })
    }
}

/// Whether `url` is an `http://` URL on this machine's loopback.
fn loopback_url(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod loopback_tests {
    use super::loopback_url;

    #[test]
    fn only_loopback_http_urls_count() {
        for url in [
            "http://127.0.0.1:5000/token",
            "http://localhost/t",
            "http://[::1]:80/t",
        ] {
            assert!(loopback_url(url), "{url}");
        }
        for url in [
            "http://auth.example.com/token",
            "http://127.0.0.1.evil.com/t",
            "https://127.0.0.1/t",
            "http://10.0.0.1/t",
        ] {
            assert!(!loopback_url(url), "{url}");
        }
    }
}
