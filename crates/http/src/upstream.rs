//! The inspector's own connection to the real server, made on the first allowed request
//! of a sandbox connection: TCP to the address the policy allowed, TLS verified against
//! the host's trust store under the connection's name, then HTTP/2 or HTTP/1.1 as
//! negotiated. HTTP/2 is one shared connection; HTTP/1.1 connections are reused one
//! request at a time (an HTTP/2 sandbox may have several requests open at once).

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use vg_policy::network::{HostName, Scheme};

use crate::body::RequestBody;
use crate::trust::Trust;

pub(crate) type H1Sender = http1::SendRequest<RequestBody>;
pub(crate) type H2Sender = http2::SendRequest<RequestBody>;

/// For TCP connect and the TLS handshake, each.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// Idle HTTP/1.1 connections kept per sandbox connection.
const IDLE_MAX: usize = 4;

pub(crate) enum Sender {
    H1(H1Sender),
    H2(H2Sender),
}

/// Where to connect and how.
pub(crate) struct Target {
    pub(crate) name: Option<HostName>,
    pub(crate) addr: IpAddr,
    pub(crate) port: u16,
    pub(crate) scheme: Scheme,
    /// What the sandbox's side negotiated: offer `h2` upstream only then.
    pub(crate) offer_h2: bool,
}

pub(crate) struct Upstream {
    target: Target,
    trust: Arc<Trust>,
    idle: Mutex<Idle>,
    /// Held while connecting, so concurrent requests share one HTTP/2 connection.
    connecting: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Idle {
    h2: Option<H2Sender>,
    h1: Vec<H1Sender>,
}

impl Upstream {
    pub(crate) fn new(target: Target, trust: Arc<Trust>) -> Self {
        Self {
            target,
            trust,
            idle: Mutex::default(),
            connecting: tokio::sync::Mutex::new(()),
        }
    }

    /// A connection ready for one request: an open one if there is, else a new one.
    /// The error says what failed, for a 502.
    pub(crate) async fn sender(&self) -> Result<Sender, String> {
        if let Some(sender) = self.open().await {
            return Ok(sender);
        }
        let _connecting = self.connecting.lock().await;
        if let Some(sender) = self.open().await {
            return Ok(sender);
        }
        let sender = self.connect().await?;
        if let Sender::H2(h2) = &sender {
            self.idle().h2 = Some(h2.clone());
        }
        Ok(sender)
    }

    /// A new connection, for a request that an open one failed to send.
    pub(crate) async fn fresh(&self) -> Result<Sender, String> {
        let _connecting = self.connecting.lock().await;
        let sender = self.connect().await?;
        if let Sender::H2(h2) = &sender {
            self.idle().h2 = Some(h2.clone());
        }
        Ok(sender)
    }

    /// An HTTP/1.1 connection whose response has been read, for the next request.
    pub(crate) fn reuse(&self, sender: H1Sender) {
        if sender.is_closed() {
            return;
        }
        let mut idle = self.idle();
        if idle.h1.len() < IDLE_MAX {
            idle.h1.push(sender);
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Idle> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn open(&self) -> Option<Sender> {
        {
            let mut idle = self.idle();
            match &idle.h2 {
                Some(h2) if !h2.is_closed() => return Some(Sender::H2(h2.clone())),
                Some(_) => idle.h2 = None,
                None => {}
            }
        }
        loop {
            let mut h1 = self.idle().h1.pop()?;
            if h1.is_closed() {
                continue;
            }
            // Just released: ready at once unless the server closed it meanwhile.
            if let Ok(Ok(())) = tokio::time::timeout(Duration::from_secs(1), h1.ready()).await {
                return Some(Sender::H1(h1));
            }
        }
    }

    fn host_text(&self) -> String {
        match &self.target.name {
            Some(name) => format!("{name}:{}", self.target.port),
            None => SocketAddr::new(self.target.addr, self.target.port).to_string(),
        }
    }

    async fn connect(&self) -> Result<Sender, String> {
        let t = &self.target;
        let at = SocketAddr::new(t.addr, t.port);
        let host = self.host_text();
        let tcp = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(at)).await {
            Err(_) => {
                return Err(format!(
                    "upstream {host} ({at}) did not answer within {} s",
                    CONNECT_TIMEOUT.as_secs()
                ));
            }
            Ok(Err(e)) => return Err(format!("could not connect to upstream {host} ({at}): {e}")),
            Ok(Ok(tcp)) => tcp,
        };
        let _ = tcp.set_nodelay(true);
        if t.scheme == Scheme::Http {
            return h1(TokioIo::new(tcp))
                .await
                .map_err(|e| handshake_error(&host, &e));
        }
        let configs = self
            .trust
            .configs()
            .map_err(|e| format!("cannot verify upstream {host}: {e}"))?;
        let config = if t.offer_h2 { &configs.h2 } else { &configs.h1 };
        let server_name = match &t.name {
            Some(name) => ServerName::try_from(name.as_str().to_owned())
                .map_err(|e| format!("upstream name {name} is not usable for TLS: {e}"))?,
            None => ServerName::IpAddress(t.addr.into()),
        };
        let connector = tokio_rustls::TlsConnector::from(Arc::clone(config));
        let tls = match tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(server_name, tcp))
            .await
        {
            Err(_) => {
                return Err(format!(
                    "TLS handshake with upstream {host} did not finish within {} s",
                    CONNECT_TIMEOUT.as_secs()
                ));
            }
            Ok(Err(e)) => return Err(format!("TLS handshake with upstream {host} failed: {e}")),
            Ok(Ok(tls)) => tls,
        };
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let io = TokioIo::new(tls);
        if h2 {
            let (sender, conn) = http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .adaptive_window(true)
                .max_frame_size(1 << 20)
                .handshake(io)
                .await
                .map_err(|e| handshake_error(&host, &e))?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(Sender::H2(sender))
        } else {
            h1(io).await.map_err(|e| handshake_error(&host, &e))
        }
    }
}

async fn h1<T>(io: TokioIo<T>) -> Result<Sender, hyper::Error>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = http1::Builder::new().handshake(io).await?;
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    Ok(Sender::H1(sender))
}

fn handshake_error(host: &str, e: &hyper::Error) -> String {
    format!("HTTP handshake with upstream {host} failed: {e}")
}
