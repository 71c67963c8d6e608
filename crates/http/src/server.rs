//! The sandbox's side of an inspected connection: TLS with a leaf of the session's CA
//! (after checking that the ClientHello asks for the host the connection is to), then
//! HTTP/2 or HTTP/1.1 as negotiated, each request handed to [`crate::exchange`].

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::LazyConfigAcceptor;
use vg_netstack::intercept::Intercepted;
use vg_policy::network::{HostName, Scheme, canonical};

use crate::Shared;
use crate::event::{HttpEvent, TlsFailure};
use crate::exchange;
use crate::secret::ConnSecrets;
use crate::upstream::{CONNECTION_WINDOW, H1_BUFFER, SEND_BUFFER, STREAM_WINDOW, Target, Upstream};

/// For the client's ClientHello, then for the rest of the handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// Concurrent requests on one HTTP/2 connection.
pub(crate) const MAX_STREAMS: u32 = 32;
/// How long an HTTP/1 request's head may take to arrive (and an idle kept-alive
/// connection may wait for the next): a connection trickling its headers must not hold
/// one of the session's connections for ever (red team, second pass).
pub(crate) const HEADER_TIMEOUT: Duration = if cfg!(test) {
    Duration::from_secs(1)
} else {
    Duration::from_secs(30)
};

/// One inspected connection, shared by its requests.
pub(crate) struct Conn {
    pub(crate) shared: Arc<Shared>,
    pub(crate) info: Intercepted,
    /// The name, or the address: for events and messages.
    pub(crate) host: String,
    pub(crate) secrets: Arc<ConnSecrets>,
    pub(crate) upstream: Arc<Upstream>,
    pub(crate) sandbox_h2: bool,
}

impl Conn {
    fn new(shared: Arc<Shared>, info: Intercepted, sandbox_h2: bool) -> Self {
        let secrets = Arc::new(shared.secrets.for_connection(info.name.as_ref(), info.addr));
        let upstream = Arc::new(Upstream::new(
            Target {
                name: info.name.clone(),
                addr: info.addr,
                port: info.port,
                scheme: info.scheme,
                offer_h2: sandbox_h2,
            },
            Arc::clone(&shared.trust),
            Arc::clone(&shared.upstream_permits),
            Arc::clone(&shared.fast_upstream_permits),
        ));
        Self {
            host: host_text(&info),
            shared,
            info,
            secrets,
            upstream,
            sandbox_h2,
        }
    }

    /// `scheme://host[:port]path`, for messages.
    pub(crate) fn url(&self, path: &str) -> String {
        let host = match (&self.info.name, self.info.addr) {
            (Some(name), _) => name.to_string(),
            (None, IpAddr::V6(v6)) => format!("[{v6}]"),
            (None, v4) => v4.to_string(),
        };
        let port = if self.info.port == self.info.scheme.default_port() {
            String::new()
        } else {
            format!(":{}", self.info.port)
        };
        format!("{}://{host}{port}{path}", self.info.scheme)
    }
}

pub(crate) fn host_text(info: &Intercepted) -> String {
    match &info.name {
        Some(name) => name.to_string(),
        None => info.addr.to_string(),
    }
}

/// Serves one connection until it ends.
pub(crate) async fn serve(shared: Arc<Shared>, info: Intercepted, stream: tokio::net::UnixStream) {
    if info.scheme == Scheme::Http {
        let conn = Conn::new(shared, info, false);
        serve_h1(Arc::new(conn), TokioIo::new(stream)).await;
        return;
    }
    let failed = |sni: Option<String>, error: String| {
        shared.events.emit(HttpEvent::Tls(TlsFailure {
            connection: info.connection,
            time: SystemTime::now(),
            host: host_text(&info),
            port: info.port,
            sni,
            error,
        }));
    };
    let acceptor = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), stream);
    let start = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor).await {
        Err(_) => {
            return failed(
                None,
                format!(
                    "no TLS ClientHello within {} s",
                    HANDSHAKE_TIMEOUT.as_secs()
                ),
            );
        }
        Ok(Err(e)) => return failed(None, format!("no valid TLS ClientHello: {e}")),
        Ok(Ok(start)) => start,
    };
    let sni = start.client_hello().server_name().map(str::to_owned);
    if let Err(problem) = check_sni(&info, sni.as_deref()) {
        return failed(sni, problem);
    }
    let config = match &sni {
        Some(_) => Ok(Arc::clone(&shared.server_config)),
        None => shared.server_config_for(Some(info.addr.to_string())),
    };
    let config = match config {
        Ok(config) => config,
        Err(e) => return failed(sni, e),
    };
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, start.into_stream(config)).await {
        Err(_) => {
            return failed(
                sni,
                format!(
                    "the TLS handshake did not finish within {} s",
                    HANDSHAKE_TIMEOUT.as_secs()
                ),
            );
        }
        Ok(Err(e)) => {
            return failed(sni, format!("the TLS handshake failed: {e}"));
        }
        Ok(Ok(tls)) => tls,
    };
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let conn = Arc::new(Conn::new(shared, info, h2));
    if h2 {
        serve_h2(conn, TokioIo::new(tls)).await;
    } else {
        serve_h1(conn, TokioIo::new(tls)).await;
    }
}

/// The ClientHello must ask for the connection's name: a client that looked up one
/// name and asks another of the same address must not reach the second through the
/// first's rules. Without a name, no SNI or the address itself.
fn check_sni(info: &Intercepted, sni: Option<&str>) -> Result<(), String> {
    match (&info.name, sni) {
        (Some(name), Some(sni)) => {
            if HostName::parse(sni).is_ok_and(|s| s == *name) {
                Ok(())
            } else {
                Err(format!(
                    "the client asked for '{}' (SNI), but the connection is to '{name}'",
                    sni.escape_debug()
                ))
            }
        }
        (Some(name), None) => Err(format!(
            "the client sent no server name (SNI), but the connection is to '{name}'"
        )),
        (None, None) => Ok(()),
        (None, Some(sni)) => {
            let same = sni
                .parse::<IpAddr>()
                .is_ok_and(|ip| canonical(ip) == canonical(info.addr));
            if same {
                Ok(())
            } else {
                Err(format!(
                    "the client asked for '{}' (SNI), but the connection is to the address {} without a name looked up",
                    sni.escape_debug(),
                    SocketAddr::new(info.addr, info.port)
                ))
            }
        }
    }
}

async fn serve_h1<I>(conn: Arc<Conn>, io: TokioIo<I>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req| exchange::handle(Arc::clone(&conn), req));
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .keep_alive(true)
        .max_buf_size(H1_BUFFER)
        .serve_connection(io, service)
        .with_upgrades()
        .await;
}

async fn serve_h2<I>(conn: Arc<Conn>, io: TokioIo<I>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req| exchange::handle(Arc::clone(&conn), req));
    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_STREAMS)
        .adaptive_window(false)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_send_buf_size(SEND_BUFFER)
        .serve_connection(io, service)
        .await;
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn info(name: Option<&str>, addr: &str) -> Intercepted {
        Intercepted {
            connection: 1,
            name: name.map(|n| HostName::parse(n).unwrap()),
            addr: addr.parse().unwrap(),
            port: 443,
            scheme: Scheme::Https,
        }
    }

    #[test]
    fn sni_must_name_the_connection() {
        let named = info(Some("api.example.com"), "93.184.216.34");
        assert!(check_sni(&named, Some("api.example.com")).is_ok());
        assert!(check_sni(&named, Some("API.Example.COM.")).is_ok());
        let err = check_sni(&named, Some("evil.example.com")).unwrap_err();
        assert!(
            err.contains("evil.example.com") && err.contains("api.example.com"),
            "{err}"
        );
        assert!(check_sni(&named, None).is_err());
        let bare = info(None, "93.184.216.34");
        assert!(check_sni(&bare, None).is_ok());
        assert!(check_sni(&bare, Some("93.184.216.34")).is_ok());
        assert!(check_sni(&bare, Some("api.example.com")).is_err());
        assert!(check_sni(&bare, Some("93.184.216.35")).is_err());
    }
}
