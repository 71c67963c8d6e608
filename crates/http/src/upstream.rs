//! The inspector's own connection to the real server, made on the first allowed request
//! of a sandbox connection: TCP to the address the policy allowed, TLS verified against
//! the host's trust store under the connection's name, then HTTP/2 or HTTP/1.1 as
//! negotiated. HTTP/2 is one shared connection; HTTP/1.1 connections are reused one
//! request at a time (an HTTP/2 sandbox may have several requests open at once).
//!
//! Each connection holds a [`Slot`] for as long as it is open (an upgraded one until
//! its tunnel ends): a permit of its sandbox connection's
//! [`crate::MAX_UPSTREAM_PER_CONNECTION`] and one of the session's
//! [`crate::MAX_UPSTREAM_CONNECTIONS`]. A request that finds no connection free and no
//! slot waits for either, up to [`PERMIT_WAIT`]. Buffers and HTTP/2 windows are small
//! and fixed, so that what one connection or stream holds in memory is bounded.

use std::net::{IpAddr, SocketAddr};
use std::pin::pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use vg_policy::network::{HostName, Scheme};

use crate::body::RequestBody;
use crate::trust::Trust;

pub(crate) type H2Sender = http2::SendRequest<RequestBody>;

/// For TCP connect and the TLS handshake, each.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a request waits for an upstream connection when all it may open are busy.
pub(crate) const PERMIT_WAIT: Duration = Duration::from_secs(30);
/// Idle HTTP/1.1 connections kept per sandbox connection.
const IDLE_MAX: usize = 4;
/// HTTP/2 flow control, both sides, fixed: what a peer may send before we read it.
pub(crate) const STREAM_WINDOW: u32 = 256 * 1024;
pub(crate) const CONNECTION_WINDOW: u32 = 1024 * 1024;
/// HTTP/2 data queued for sending, per stream.
pub(crate) const SEND_BUFFER: usize = 256 * 1024;
/// HTTP/1.1 read and write buffers (also the largest head accepted).
pub(crate) const H1_BUFFER: usize = 256 * 1024;

/// What one upstream connection holds while it is open.
pub(crate) struct Slot {
    _connection: OwnedSemaphorePermit,
    _session: OwnedSemaphorePermit,
    /// One of the session's [`crate::FAST_UPSTREAM_CONNECTIONS`], taken at connect if
    /// one is free: the host socket's receive buffer is then the large one.
    fast: Option<OwnedSemaphorePermit>,
}

/// An HTTP/1.1 connection, with its slot (shared with the task driving it).
pub(crate) struct H1Sender {
    pub(crate) send: http1::SendRequest<RequestBody>,
    pub(crate) slot: Arc<Slot>,
}

pub(crate) enum Sender {
    H1(H1Sender),
    H2(H2Sender),
}

/// Why no connection could be had.
pub(crate) enum Unavailable {
    /// Every connection this request may open is in use (a 503).
    Busy(String),
    /// Connecting failed (a 502).
    Failed(String),
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
    /// [`crate::MAX_UPSTREAM_PER_CONNECTION`] permits.
    permits: Arc<Semaphore>,
    /// The session's [`crate::MAX_UPSTREAM_CONNECTIONS`] permits.
    session_permits: Arc<Semaphore>,
    /// The session's [`crate::FAST_UPSTREAM_CONNECTIONS`] permits.
    fast_permits: Arc<Semaphore>,
    /// Notified when a connection becomes usable without a new slot.
    returned: Notify,
}

#[derive(Default)]
struct Idle {
    h2: Option<H2Sender>,
    h1: Vec<H1Sender>,
}

impl Upstream {
    pub(crate) fn new(
        target: Target,
        trust: Arc<Trust>,
        session_permits: Arc<Semaphore>,
        fast_permits: Arc<Semaphore>,
    ) -> Self {
        Self {
            target,
            trust,
            idle: Mutex::default(),
            connecting: tokio::sync::Mutex::new(()),
            permits: Arc::new(Semaphore::new(crate::MAX_UPSTREAM_PER_CONNECTION)),
            session_permits,
            fast_permits,
            returned: Notify::new(),
        }
    }

    /// A connection ready for one request: an open one if there is, else a new one
    /// once a slot is free.
    pub(crate) async fn sender(&self) -> Result<Sender, Unavailable> {
        let deadline = tokio::time::Instant::now() + PERMIT_WAIT;
        loop {
            // Registered before looking, so that a connection returned meanwhile wakes it.
            let mut returned = pin!(self.returned.notified());
            returned.as_mut().enable();
            if let Some(sender) = self.open().await {
                return Ok(sender);
            }
            let slot = tokio::select! {
                slot = self.slot() => slot?,
                () = &mut returned => continue,
                () = tokio::time::sleep_until(deadline) => return Err(self.busy()),
            };
            let _connecting = self.connecting.lock().await;
            if let Some(sender) = self.open().await {
                return Ok(sender);
            }
            return self.connect_with(slot).await;
        }
    }

    /// A new connection, for a request that an open one failed to send.
    pub(crate) async fn fresh(&self) -> Result<Sender, Unavailable> {
        let slot = match tokio::time::timeout(PERMIT_WAIT, self.slot()).await {
            Ok(slot) => slot?,
            Err(_) => return Err(self.busy()),
        };
        let _connecting = self.connecting.lock().await;
        self.connect_with(slot).await
    }

    async fn connect_with(&self, slot: Slot) -> Result<Sender, Unavailable> {
        let sender = self.connect(slot).await.map_err(Unavailable::Failed)?;
        if let Sender::H2(h2) = &sender {
            self.idle().h2 = Some(h2.clone());
            // Requests waiting for a slot can all share it.
            self.returned.notify_waiters();
        }
        Ok(sender)
    }

    /// This sandbox connection's permit, then the session's.
    async fn slot(&self) -> Result<Slot, Unavailable> {
        let closed = |_| Unavailable::Failed("the inspector is shutting down".to_owned());
        let connection = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(closed)?;
        let session = Arc::clone(&self.session_permits)
            .acquire_owned()
            .await
            .map_err(closed)?;
        Ok(Slot {
            _connection: connection,
            _session: session,
            fast: None,
        })
    }

    fn busy(&self) -> Unavailable {
        Unavailable::Busy(format!(
            "no connection to upstream {} became free within {} s (at most {} per connection from the sandbox, {} in all)",
            self.host_text(),
            PERMIT_WAIT.as_secs(),
            crate::MAX_UPSTREAM_PER_CONNECTION,
            crate::MAX_UPSTREAM_CONNECTIONS,
        ))
    }

    /// An HTTP/1.1 connection whose response has been read, for the next request.
    pub(crate) fn reuse(&self, sender: H1Sender) {
        if sender.send.is_closed() {
            return;
        }
        let mut idle = self.idle();
        if idle.h1.len() < IDLE_MAX {
            idle.h1.push(sender);
            drop(idle);
            self.returned.notify_one();
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
            if h1.send.is_closed() {
                continue;
            }
            // Just released: ready at once unless the server closed it meanwhile.
            if let Ok(Ok(())) = tokio::time::timeout(Duration::from_secs(1), h1.send.ready()).await
            {
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

    async fn connect(&self, mut slot: Slot) -> Result<Sender, String> {
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
        // Bounded in the host's kernel, as the mediator's own host sockets are: the
        // response waits there while the sandbox does not read it.
        slot.fast = Arc::clone(&self.fast_permits).try_acquire_owned().ok();
        vg_netstack::size_host_socket(std::os::fd::AsFd::as_fd(&tcp), slot.fast.is_some());
        if t.scheme == Scheme::Http {
            return h1(TokioIo::new(tcp), slot)
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
                .adaptive_window(false)
                .initial_stream_window_size(STREAM_WINDOW)
                .initial_connection_window_size(CONNECTION_WINDOW)
                .max_send_buf_size(SEND_BUFFER)
                .handshake(io)
                .await
                .map_err(|e| handshake_error(&host, &e))?;
            tokio::spawn(async move {
                let _ = conn.await;
                drop(slot);
            });
            Ok(Sender::H2(sender))
        } else {
            h1(io, slot).await.map_err(|e| handshake_error(&host, &e))
        }
    }
}

async fn h1<T>(io: TokioIo<T>, slot: Slot) -> Result<Sender, hyper::Error>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = http1::Builder::new()
        .max_buf_size(H1_BUFFER)
        .handshake(io)
        .await?;
    let slot = Arc::new(slot);
    let held = Arc::clone(&slot);
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
        // An upgraded connection's tunnel holds the slot on (see `H1Sender::slot`).
        drop(held);
    });
    Ok(Sender::H1(H1Sender { send, slot }))
}

fn handshake_error(host: &str, e: &hyper::Error) -> String {
    format!("HTTP handshake with upstream {host} failed: {e}")
}
