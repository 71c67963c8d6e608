//! What the inspector reports to the session: one [`Exchange`] per request, one
//! [`TlsFailure`] per connection whose TLS handshake with the sandbox failed.
//!
//! Nothing here ever holds a secret's value: secrets appear by name, query values are
//! replaced by `REDACTED`, and error texts come from connection and TLS failures, which
//! never quote request headers.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use vg_policy::network::Scheme;

/// Where the inspector's tasks send their events: the session's callback until
/// [`EventSink::close`], nothing after. Every task holds this sink, never the callback
/// itself, so closing it lets go of the callback however many tasks are still alive.
pub(crate) struct EventSink(RwLock<Option<Callback>>);

type Callback = Arc<dyn Fn(HttpEvent) + Send + Sync>;

impl EventSink {
    pub(crate) fn new(callback: Callback) -> Self {
        Self(RwLock::new(Some(callback)))
    }

    /// Calls the callback, unless the sink was closed.
    pub(crate) fn emit(&self, event: HttpEvent) {
        let callback = self.0.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(callback) = &*callback {
            callback(event);
        }
    }

    /// Drops the callback, once the events being emitted were: none is emitted after
    /// this returns.
    pub(crate) fn close(&self) {
        let callback = self
            .0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(callback);
    }
}

/// Sent to [`crate::Options::events`], from the inspector's threads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpEvent {
    Exchange(Exchange),
    Tls(TlsFailure),
}

/// One request on an inspected connection and what became of it, reported once its
/// response ended (or failed, or was refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    /// The mediator's connection id.
    pub connection: u64,
    /// When the request arrived.
    pub time: SystemTime,
    /// The sandbox's side: `"HTTP/1.1"`, `"HTTP/2"` or `"HTTP/1.0"`.
    pub version: &'static str,
    pub method: String,
    pub scheme: Scheme,
    /// The connection's name, or its address when it has none.
    pub host: String,
    pub port: u16,
    /// The path and query with every query value replaced by `REDACTED` ([`redact_query`]).
    pub path: String,
    /// The status the sandbox received, if a response was sent.
    pub status: Option<u16>,
    /// Request body bytes sent upstream.
    pub bytes_out: u64,
    /// Response body bytes sent to the sandbox (for an upgrade: bytes relayed each way).
    pub bytes_in: u64,
    /// From the request's arrival to the end of its response.
    pub duration: Duration,
    /// `"allow"` or `"deny"`.
    pub decision: &'static str,
    /// The rule that decided, in its canonical text.
    pub rule: Option<String>,
    /// Why: the policy's reason (`"rule"`, `"no method and path rule"`…), or
    /// `"host mismatch"`, `"secret placeholder to an unbound host"`, `"connect not supported"`,
    /// `"upgrade not allowed"`, `"override not understood"`. A request refused for a
    /// method or path override header has the reason (and rule) of the decision on the
    /// overriding method and path, and `error` names them.
    pub reason: String,
    /// The secrets whose values were put into the request's headers, by name.
    pub secrets: Vec<String>,
    /// The secret whose placeholder the request carried to a host it is not bound to.
    pub exfiltration: Option<String>,
    /// What went wrong, for a 502 (a compressed response to a request that carried a
    /// secret is one), a 503 (no upstream connection free) or a refusal that needs
    /// explaining.
    pub error: Option<String>,
}

/// A connection that never got to HTTP: its TLS handshake with the sandbox was refused
/// (the SNI names another host) or failed (the client rejected our certificate).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFailure {
    pub connection: u64,
    pub time: SystemTime,
    /// The connection's name, or its address when it has none.
    pub host: String,
    pub port: u16,
    /// The server name the client asked for, if it sent one.
    pub sni: Option<String>,
    pub error: String,
}

/// `path?query` with every query value replaced by `REDACTED`; keys, the path and the
/// separators stay. A parameter without `=` is a key and stays as it is.
///
/// `/search?q=cat&page=2&raw` → `/search?q=REDACTED&page=REDACTED&raw`
pub fn redact_query(path_and_query: &str) -> String {
    let Some((path, query)) = path_and_query.split_once('?') else {
        return path_and_query.to_owned();
    };
    let mut out = String::with_capacity(path_and_query.len() + 16);
    out.push_str(path);
    out.push('?');
    for (i, pair) in query.split('&').enumerate() {
        if i > 0 {
            out.push('&');
        }
        match pair.split_once('=') {
            Some((key, _)) => {
                out.push_str(key);
                out.push_str("=REDACTED");
            }
            None => out.push_str(pair),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_redacted_and_keys_kept() {
        assert_eq!(redact_query("/a/b"), "/a/b");
        assert_eq!(redact_query("/"), "/");
        assert_eq!(
            redact_query("/search?q=cat&page=2&raw"),
            "/search?q=REDACTED&page=REDACTED&raw"
        );
        assert_eq!(redact_query("/x?token=a=b=c"), "/x?token=REDACTED");
        assert_eq!(redact_query("/x?empty=&&k"), "/x?empty=REDACTED&&k");
        assert_eq!(redact_query("/x?"), "/x?");
        assert_eq!(
            redact_query("/x?key=sk-secret%20value&key=2"),
            "/x?key=REDACTED&key=REDACTED"
        );
        assert!(!redact_query("/p?api_key=hunter22").contains("hunter22"));
    }
}
