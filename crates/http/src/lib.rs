//! HTTP inspection: what may be *said* to a host, not only whether it may be reached.
//!
//! A connection to a host named by a method and path rule (`allow GET
//! https://api.github.com/repos/acme/**`) is handed by the mediator to the
//! [`Inspector`] instead of being relayed ([`vg_netstack::intercept`]). The inspector:
//!
//! - terminates the sandbox's TLS with a leaf certificate minted for the name by the
//!   session's own CA (`ca.rs`, `leaf.rs`), refusing a ClientHello whose SNI is not the
//!   name the connection was made to (`server.rs`);
//! - decides each request (HTTP/1.1 or HTTP/2) with the live policy, after checking that
//!   its Host is the connection's name, and refuses with a 403 that says why
//!   (`exchange.rs`);
//! - puts secrets' values in place of their placeholders in the headers of requests
//!   to the hosts they are bound to, and refuses any request carrying a placeholder
//!   elsewhere; turns values coming back into placeholders (`secret.rs`, `scan.rs`);
//! - forwards allowed requests over its own connection to the destination, verified
//!   against the host's trust store (`upstream.rs`, `trust.rs`), streaming bodies both
//!   ways (`body.rs`), WebSocket upgrades included;
//! - reports each request once it ended, and each failed handshake ([`HttpEvent`]).
//!
//! It runs on a small tokio runtime of its own, started by the first connection.
//!
//! What it does not see: a placeholder inside a masked WebSocket frame from the client,
//! or encoded other than percent-encoding (URL, header values) or Basic credentials
//! (e.g. base64 inside a JSON body). Coming back, a value is recognised as it is and in
//! base64 (standard or URL-safe, any alignment: the `Basic user:value` echo), from the
//! hosts it is bound to; not in any other form — upper or lower case, hex, reversed,
//! split by escapes (`\/` in JSON), wrapped base64 lines, inside an archive or
//! encrypted. A request that carried a secret asks for `Accept-Encoding: identity`, and
//! a compressed answer to it is refused (502) rather than passed unscanned; a value
//! stored by one request and fetched compressed by another that carried no secret is
//! not caught. WebSocket compression is refused when secrets are configured, so that
//! frames from the server stay scannable.
//!
//! Upgrades other than WebSocket (`h2c`, `TLS/1.x`) are refused: what follows them
//! could not be inspected. Requests naming another method or path in
//! `X-HTTP-Method-Override`, `X-HTTP-Method`, `X-Method-Override`, `X-Original-URL` or
//! `X-Rewrite-URL` must be allowed under those too.
//!
//! Resources are bounded: [`MAX_CONNECTIONS`] sandbox connections,
//! [`MAX_UPSTREAM_CONNECTIONS`] upstream connections for the session (at most
//! [`MAX_UPSTREAM_PER_CONNECTION`] per sandbox connection; a request that finds none
//! free within a time-out gets a 503), HTTP/2 streams and flow-control windows of
//! fixed, small sizes, and HTTP/1.1 buffers.

#![forbid(unsafe_code)]

mod body;
mod ca;
mod error;
mod event;
mod exchange;
/// Entry points for the fuzz targets in `fuzz/`; not part of the API.
#[doc(hidden)]
pub mod fuzzing;
mod leaf;
mod scan;
mod secret;
mod server;
mod trust;
mod upstream;

#[cfg(test)]
mod tests;

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;
use rustls_pki_types::CertificateDer;
use tokio::sync::Semaphore;
use vg_netstack::PolicyHandle;
use vg_netstack::intercept::{Intercepted, Interceptor};

pub use error::Error;
pub use event::{Exchange, HttpEvent, TlsFailure, redact_query};
pub use secret::{Secret, placeholder_for};

use body::Events;
use ca::SessionCa;
use event::EventSink;
use leaf::{LeafCache, Resolver};
use secret::SecretSet;
use trust::Trust;

/// Inspected connections open at once; more are refused (closed) until some end.
pub const MAX_CONNECTIONS: usize = 256;
/// Connections to upstreams open at once, for the whole session: an HTTP/2 sandbox
/// connection may have many requests open, each needing its own HTTP/1.1 upstream.
pub const MAX_UPSTREAM_CONNECTIONS: usize = 256;
/// Connections to upstreams open at once for one sandbox connection.
pub const MAX_UPSTREAM_PER_CONNECTION: usize = 8;
/// Upstream connections of a session whose host socket gets the large receive buffer
/// (`vg_netstack::size_host_socket`), as the mediator's first connections do; later
/// ones get small fixed buffers, so that all of them together hold a bounded amount
/// in the host's kernel whatever the sandbox reads or sends.
pub const FAST_UPSTREAM_CONNECTIONS: usize = 16;
/// How long [`Inspector::shutdown`] waits for the inspector's tasks to end.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(2);
/// Worker threads of the inspector's runtime.
const WORKERS: usize = 2;

/// What an [`Inspector`] needs.
pub struct Options {
    /// The live policy: each request is decided with the policy in force when it arrives.
    pub policy: PolicyHandle,
    /// Extra roots for upstream verification (from `--upstream-ca FILE`), added to the
    /// host's trust store.
    pub extra_upstream_roots: Vec<CertificateDer<'static>>,
    pub secrets: Vec<Secret>,
    /// Receives every [`HttpEvent`], on the inspector's threads (or, for a refused
    /// connection, the caller of `intercept`). Dropped by [`Inspector::shutdown`]; it
    /// must not wait for the thread that calls `shutdown`.
    pub events: Arc<dyn Fn(HttpEvent) + Send + Sync>,
}

/// The session's HTTP inspector. Cheap to clone: clones share the CA, the runtime and
/// the open connections. The runtime stops when [`Inspector::shutdown`] is called or
/// the last clone is dropped.
#[derive(Clone)]
pub struct Inspector(Arc<Handle>);

struct Handle {
    shared: Arc<Shared>,
    runtime: Mutex<Runtime>,
    permits: Arc<Semaphore>,
}

enum Runtime {
    NotStarted,
    Running(tokio::runtime::Runtime),
    Stopped,
}

/// What every connection's tasks share.
pub(crate) struct Shared {
    pub(crate) policy: PolicyHandle,
    pub(crate) events: Events,
    pub(crate) secrets: Arc<SecretSet>,
    pub(crate) trust: Arc<Trust>,
    /// One permit per upstream connection open ([`MAX_UPSTREAM_CONNECTIONS`]).
    pub(crate) upstream_permits: Arc<Semaphore>,
    /// One permit per open upstream connection with a large host receive buffer
    /// ([`FAST_UPSTREAM_CONNECTIONS`]).
    pub(crate) fast_upstream_permits: Arc<Semaphore>,
    ca: Arc<SessionCa>,
    leaves: Arc<LeafCache>,
    provider: Arc<CryptoProvider>,
    /// For ClientHellos with a server name (checked to be the connection's).
    pub(crate) server_config: Arc<ServerConfig>,
}

impl Shared {
    /// A server configuration presenting the leaf for the ClientHello's name, or for
    /// `fallback` when it has none.
    pub(crate) fn server_config_for(
        &self,
        fallback: Option<String>,
    ) -> Result<Arc<ServerConfig>, String> {
        server_config(&self.provider, &self.leaves, fallback)
    }
}

/// ring's suites with AES-128-GCM first: inspection encrypts every byte twice, and
/// AES-128 (10 rounds) costs less than AES-256 (14) for the same protection against
/// anything but a quantum adversary. Both sides prefer it: our server picks by its own
/// order, and an upstream server by ours when it honours the client's.
pub(crate) fn crypto_provider() -> CryptoProvider {
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites.sort_by_key(|suite| {
        use rustls::CipherSuite::*;
        match suite.suite() {
            TLS13_AES_128_GCM_SHA256 => 0,
            TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 | TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => 1,
            _ => 2,
        }
    });
    provider
}

fn server_config(
    provider: &Arc<CryptoProvider>,
    leaves: &Arc<LeafCache>,
    fallback: Option<String>,
) -> Result<Arc<ServerConfig>, String> {
    let mut config = ServerConfig::builder_with_provider(Arc::clone(provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("could not set up TLS for the sandbox's side: {e}"))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(Resolver::new(Arc::clone(leaves), fallback)));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    // No session tickets: nothing is written after the handshake, so a client that
    // closes right after it is not mistaken for a failed handshake. Handshakes on the
    // sandbox's side are local and cheap.
    config.send_tls13_tickets = 0;
    // Our order of suites (AES-128-GCM first, see `crypto_provider`), not the client's.
    config.ignore_client_order = true;
    Ok(Arc::new(config))
}

impl Inspector {
    /// Generates the session's CA; its private key stays in this process's memory.
    /// Starts no thread: the runtime starts with the first connection, on the
    /// mediator's thread, whose blocked signals its threads inherit. The host's trust
    /// store is read on the first upstream connection.
    pub fn new(options: Options) -> Result<Self, Error> {
        Self::with_bundles(options, Trust::system_bundles())
    }

    /// [`Inspector::new`], verifying upstreams against the first of `bundles` that has
    /// certificates instead of the host's usual trust store.
    pub(crate) fn with_bundles(options: Options, bundles: Vec<PathBuf>) -> Result<Self, Error> {
        let provider = Arc::new(crypto_provider());
        let secrets = Arc::new(SecretSet::new(options.secrets)?);
        let ca = Arc::new(SessionCa::generate()?);
        let leaves = Arc::new(LeafCache::new(Arc::clone(&ca), provider.key_provider));
        let server_config = server_config(&provider, &leaves, None).map_err(Error::Ca)?;
        let trust = Arc::new(Trust::new(
            Arc::clone(&provider),
            options.extra_upstream_roots,
            bundles,
        ));
        let shared = Arc::new(Shared {
            policy: options.policy,
            events: Arc::new(EventSink::new(options.events)),
            secrets,
            trust,
            upstream_permits: Arc::new(Semaphore::new(MAX_UPSTREAM_CONNECTIONS)),
            fast_upstream_permits: Arc::new(Semaphore::new(FAST_UPSTREAM_CONNECTIONS)),
            ca,
            leaves,
            provider,
            server_config,
        });
        Ok(Self(Arc::new(Handle {
            shared,
            runtime: Mutex::new(Runtime::NotStarted),
            permits: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
        })))
    }

    /// The CA certificate, PEM: for the sandbox's trust bundles and the session record.
    pub fn ca_pem(&self) -> &str {
        self.0.shared.ca.pem()
    }

    /// The CA certificate, DER.
    pub fn ca_der(&self) -> &CertificateDer<'static> {
        self.0.shared.ca.der()
    }

    /// The certificate chain and key presented for `name` (a DNS name in canonical
    /// lower case, or an IP address): minted on first use, then cached.
    pub fn leaf_for(&self, name: &str) -> Result<Arc<CertifiedKey>, Error> {
        self.0.shared.leaves.get(name)
    }

    /// Ends inspection, for the end of the session: later connections are refused,
    /// open ones cut, and the inspector's tasks are waited for (at most 2 s) and
    /// dropped. Requests cut are reported before this returns; once it returned, no
    /// event is ever emitted and the `events` callback has been dropped, so whatever it
    /// holds (the session's record) is free. Idempotent; blocks the calling thread,
    /// which may be a thread of another tokio runtime.
    pub fn shutdown(&self) {
        self.0.shutdown();
    }

    fn tls_failure(&self, conn: &Intercepted, error: String) {
        self.0.shared.events.emit(HttpEvent::Tls(TlsFailure {
            connection: conn.connection,
            time: SystemTime::now(),
            host: server::host_text(conn),
            port: conn.port,
            sni: None,
            error,
        }));
    }
}

impl Handle {
    /// The runtime, started on first use with the calling thread's signal mask.
    fn runtime(&self) -> Result<Option<tokio::runtime::Handle>, String> {
        let mut runtime = self.runtime.lock().unwrap_or_else(PoisonError::into_inner);
        match &*runtime {
            Runtime::Running(rt) => Ok(Some(rt.handle().clone())),
            Runtime::Stopped => Ok(None),
            Runtime::NotStarted => {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(WORKERS)
                    .thread_name("vg-http")
                    .enable_all()
                    .build()
                    .map_err(|e| format!("could not start the HTTP inspection runtime: {e}"))?;
                let handle = rt.handle().clone();
                *runtime = Runtime::Running(rt);
                Ok(Some(handle))
            }
        }
    }

    fn shutdown(&self) {
        let previous = std::mem::replace(
            &mut *self.runtime.lock().unwrap_or_else(PoisonError::into_inner),
            Runtime::Stopped,
        );
        if let Runtime::Running(rt) = previous {
            stop(rt);
        }
        // Tasks that outlived the wait (a callback that blocks) emit nothing more.
        self.shared.events.close();
    }
}

/// Drops every task of `rt` (their connections with them), waiting at most
/// [`SHUTDOWN_WAIT`] for its threads. On a thread of its own: tokio refuses to wait for
/// a runtime from a thread that runs another one.
fn stop(rt: tokio::runtime::Runtime) {
    let (tx, rx) = std::sync::mpsc::sync_channel::<tokio::runtime::Runtime>(1);
    let stopper = std::thread::Builder::new()
        .name("vg-http-stop".to_owned())
        .spawn(move || {
            if let Ok(rt) = rx.recv() {
                rt.shutdown_timeout(SHUTDOWN_WAIT);
            }
        });
    match stopper {
        Ok(stopper) => {
            if let Err(std::sync::mpsc::SendError(rt)) = tx.send(rt) {
                rt.shutdown_background();
            }
            let _ = stopper.join();
        }
        Err(_) => rt.shutdown_background(),
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Interceptor for Inspector {
    fn intercept(&self, conn: Intercepted, stream: std::os::unix::net::UnixStream) {
        let runtime = match self.0.runtime() {
            Ok(Some(runtime)) => runtime,
            // Shut down: the session is ending.
            Ok(None) => return,
            Err(e) => return self.tls_failure(&conn, e),
        };
        let Ok(permit) = Arc::clone(&self.0.permits).try_acquire_owned() else {
            return self.tls_failure(
                &conn,
                format!("refused: {MAX_CONNECTIONS} inspected connections are already open"),
            );
        };
        let _entered = runtime.enter();
        let stream = match stream
            .set_nonblocking(true)
            .and_then(|()| tokio::net::UnixStream::from_std(stream))
        {
            Ok(stream) => stream,
            Err(e) => {
                return self.tls_failure(&conn, format!("could not take the connection: {e}"));
            }
        };
        let shared = Arc::clone(&self.0.shared);
        runtime.spawn(async move {
            server::serve(shared, conn, stream).await;
            drop(permit);
        });
    }
}

impl fmt::Debug for Inspector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inspector")
            .field("secrets", &self.0.shared.secrets.len())
            .finish_non_exhaustive()
    }
}
