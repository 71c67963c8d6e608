//! Real components on loopback: an HTTPS upstream with its own test CA, the inspector
//! driven through `intercept` on one end of a socket pair, and rustls/hyper clients on
//! the other end that trust the session's CA.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode, Version};
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UnixStream};
use tokio::sync::{Notify, mpsc};
use tokio_rustls::client::TlsStream;
use vg_netstack::PolicyHandle;
use vg_netstack::intercept::{Intercepted, Interceptor};
use vg_policy::network::{HostName, NetworkPolicy, Rule, Scheme};

use crate::body::BoxError;
use crate::{HttpEvent, Inspector, Options, Secret};

pub(crate) type TestBody = BoxBody<Bytes, BoxError>;

pub(crate) const WAIT: Duration = Duration::from_secs(20);
/// Between the bytes of `/drip` and `/ws?drip=`: longer than the inspector's pause.
pub(crate) const DRIP: Duration = Duration::from_millis(50);

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A CA for upstream servers, like a public one.
pub(crate) struct Pki {
    issuer: Issuer<'static, KeyPair>,
    pub(crate) ca: CertificateDer<'static>,
}

impl Pki {
    pub(crate) fn new(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        let ca = params.self_signed(&key).unwrap().der().clone();
        Self {
            issuer: Issuer::new(params, key),
            ca,
        }
    }

    /// A server configuration for `api.test`, `other.test` and 127.0.0.1.
    pub(crate) fn server_config(&self, alpn: &[&[u8]]) -> Arc<ServerConfig> {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec![
            "api.test".to_owned(),
            "other.test".to_owned(),
            "127.0.0.1".to_owned(),
        ])
        .unwrap();
        params.is_ca = IsCa::ExplicitNoCa;
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key)
            .unwrap();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }
}

/// What the upstream saw of one request.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) method: String,
    pub(crate) uri: String,
    pub(crate) version: Version,
    pub(crate) headers: HeaderMap,
    /// The first MiB of the body.
    pub(crate) body: Vec<u8>,
    pub(crate) body_len: u64,
    /// Whether the body ended properly (not cut).
    pub(crate) complete: bool,
}

/// A test upstream on 127.0.0.1. Paths:
/// - `/echo`: the request's `authorization` back, in a header and the body;
/// - `/reason`: the request's `authorization` back as the HTTP/1 reason phrase;
/// - `/gzip`: a body with `content-encoding: gzip`, whatever was asked for;
/// - `/drip?v=V`: V one byte per frame, 50 ms apart;
/// - `/slow`: `ok` after 300 ms;
/// - `/sse`: one event (or `data: T` for `?tail=T`), then another once
///   [`Upstream::sse_gate`] is notified;
/// - `/download/N`: N bytes;
/// - `/ws`: a 101 upgrade, then an echo with a prefix (and `/ws?secret=V` sends V first,
///   `/ws?drip=V` one byte at a time, 50 ms apart);
/// - anything else: `ok METHOD PATH` after reading the whole body.
pub(crate) struct Upstream {
    pub(crate) addr: SocketAddr,
    seen: tokio::sync::Mutex<mpsc::UnboundedReceiver<Seen>>,
    pub(crate) sse_gate: Arc<Notify>,
    pub(crate) accepted: Arc<AtomicUsize>,
    /// The most connections that were open at once.
    pub(crate) max_open: Arc<AtomicUsize>,
}

/// Counts a connection open while it lives.
struct OpenGuard(Arc<AtomicUsize>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Upstream {
    /// Serves HTTPS with `config`, or plain HTTP/1.1 without.
    pub(crate) async fn start(config: Option<Arc<ServerConfig>>) -> Self {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        let sse_gate = Arc::new(Notify::new());
        let accepted = Arc::new(AtomicUsize::new(0));
        let max_open = Arc::new(AtomicUsize::new(0));
        let open = Arc::new(AtomicUsize::new(0));
        let (gate, count, max) = (
            Arc::clone(&sse_gate),
            Arc::clone(&accepted),
            Arc::clone(&max_open),
        );
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                count.fetch_add(1, Ordering::SeqCst);
                let now = open.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(now, Ordering::SeqCst);
                let guard = OpenGuard(Arc::clone(&open));
                let (tx, gate, config) = (tx.clone(), Arc::clone(&gate), config.clone());
                tokio::spawn(async move {
                    let _guard = guard;
                    let service = service_fn(move |req| serve(req, tx.clone(), Arc::clone(&gate)));
                    let Some(config) = config else {
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(tcp), service)
                            .with_upgrades()
                            .await;
                        return;
                    };
                    let Ok(tls) = tokio_rustls::TlsAcceptor::from(config).accept(tcp).await else {
                        return;
                    };
                    if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
                        let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                            .serve_connection(TokioIo::new(tls), service)
                            .await;
                    } else {
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(tls), service)
                            .with_upgrades()
                            .await;
                    }
                });
            }
        });
        Self {
            addr,
            seen: tokio::sync::Mutex::new(rx),
            sse_gate,
            accepted,
            max_open,
        }
    }

    pub(crate) async fn seen(&self) -> Seen {
        let mut rx = self.seen.lock().await;
        tokio::time::timeout(WAIT, rx.recv())
            .await
            .expect("the upstream saw no request")
            .unwrap()
    }

    pub(crate) fn nothing_seen(&self) -> bool {
        self.seen
            .try_lock()
            .is_ok_and(|mut rx| rx.try_recv().is_err())
    }
}

fn full(text: impl Into<Bytes>) -> TestBody {
    Full::new(text.into())
        .map_err(|never| match never {})
        .boxed()
}

async fn serve(
    mut req: Request<Incoming>,
    tx: mpsc::UnboundedSender<Seen>,
    gate: Arc<Notify>,
) -> Result<Response<TestBody>, Infallible> {
    let mut seen = Seen {
        method: req.method().to_string(),
        uri: req.uri().to_string(),
        version: req.version(),
        headers: req.headers().clone(),
        body: Vec::new(),
        body_len: 0,
        complete: true,
    };
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or_default().to_owned();
    if path == "/ws" {
        let upgrade = hyper::upgrade::on(&mut req);
        let _ = tx.send(seen);
        tokio::spawn(async move {
            let Ok(upgraded) = upgrade.await else { return };
            let mut io = TokioIo::new(upgraded);
            if let Some(secret) = query.strip_prefix("secret=") {
                let _ = io.write_all(secret.as_bytes()).await;
            }
            if let Some(value) = query.strip_prefix("drip=") {
                for b in value.bytes() {
                    let _ = io.write_all(&[b]).await;
                    let _ = io.flush().await;
                    tokio::time::sleep(DRIP).await;
                }
            }
            let mut buf = [0u8; 1024];
            while let Ok(n) = io.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let mut reply = b"echo: ".to_vec();
                reply.extend_from_slice(&buf[..n]);
                if io.write_all(&reply).await.is_err() {
                    break;
                }
            }
        });
        let mut response = Response::new(full(Bytes::new()));
        *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        response
            .headers_mut()
            .insert("connection", "upgrade".parse().unwrap());
        response
            .headers_mut()
            .insert("upgrade", "websocket".parse().unwrap());
        return Ok(response);
    }
    let mut body = req.into_body();
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                if let Some(data) = frame.data_ref() {
                    seen.body_len += data.len() as u64;
                    let room = (1usize << 20).saturating_sub(seen.body.len());
                    seen.body.extend_from_slice(&data[..room.min(data.len())]);
                }
            }
            Err(_) => {
                seen.complete = false;
                break;
            }
        }
    }
    let authorization = seen
        .headers
        .get("authorization")
        .cloned()
        .unwrap_or_else(|| "none".parse().unwrap());
    let method = seen.method.clone();
    let complete = seen.complete;
    let _ = tx.send(seen);
    if !complete {
        return Ok(Response::new(full("cut")));
    }
    let response = match path.as_str() {
        "/echo" => {
            let mut text = authorization.as_bytes().to_vec();
            text.push(b'\n');
            let mut response = Response::new(full(text));
            response.headers_mut().insert("x-echo", authorization);
            response
        }
        "/reason" => {
            let mut response = Response::new(full("reason"));
            response
                .extensions_mut()
                .insert(hyper::ext::ReasonPhrase::try_from(authorization.as_bytes()).unwrap());
            response
        }
        "/gzip" => {
            let mut response = Response::new(full(&b"\x1f\x8b\x08\x00compressed"[..]));
            response
                .headers_mut()
                .insert("content-encoding", "gzip".parse().unwrap());
            response
        }
        "/drip" => {
            let value = query.strip_prefix("v=").unwrap_or_default().to_owned();
            let (frames, rx) = mpsc::channel(1);
            tokio::spawn(async move {
                for b in value.into_bytes() {
                    if frames.send(Bytes::from(vec![b])).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(DRIP).await;
                }
            });
            Response::new(ChannelBody(rx).boxed())
        }
        "/slow" => {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Response::new(full("ok"))
        }
        "/sse" => {
            let (frames, rx) = mpsc::channel(4);
            let first = match query.strip_prefix("tail=") {
                Some(tail) => Bytes::from(format!("data: {tail}")),
                None => Bytes::from_static(b"data: one\n\n"),
            };
            tokio::spawn(async move {
                let _ = frames.send(first).await;
                gate.notified().await;
                let _ = frames.send(Bytes::from_static(b"data: two\n\n")).await;
            });
            let mut response = Response::new(ChannelBody(rx).boxed());
            response
                .headers_mut()
                .insert("content-type", "text/event-stream".parse().unwrap());
            response
        }
        _ if path.starts_with("/download/") => {
            let n: u64 = path["/download/".len()..].parse().unwrap();
            let mut response = Response::new(Chunks::new(n, 256 * 1024).boxed());
            response
                .headers_mut()
                .insert("content-length", n.to_string().parse().unwrap());
            response
        }
        _ => Response::new(full(format!("ok {method} {path}"))),
    };
    Ok(response)
}

/// A body fed through a channel, one frame per message.
pub(crate) struct ChannelBody(pub(crate) mpsc::Receiver<Bytes>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

/// `total` bytes of a repeated pattern, in frames of `chunk` bytes, of unknown size
/// (sent chunked over HTTP/1.1).
pub(crate) struct Chunks {
    left: u64,
    chunk: Bytes,
}

impl Chunks {
    pub(crate) fn new(total: u64, chunk: usize) -> Self {
        let pattern: Vec<u8> = (0..chunk).map(|i| b"abcdefghijklmnop"[i % 16]).collect();
        Self {
            left: total,
            chunk: Bytes::from(pattern),
        }
    }
}

impl Body for Chunks {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let n = self.left.min(self.chunk.len() as u64);
        self.left -= n;
        Poll::Ready(Some(Ok(Frame::data(
            self.chunk.slice(..usize::try_from(n).unwrap()),
        ))))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// An inspector for `rules` with its events.
pub(crate) struct Setup {
    pub(crate) inspector: Inspector,
    events: mpsc::UnboundedReceiver<HttpEvent>,
    next_connection: u64,
}

impl Setup {
    pub(crate) fn new(
        rules: &[String],
        secrets: Vec<Secret>,
        roots: Vec<CertificateDer<'static>>,
    ) -> Self {
        Self::with_bundles(rules, secrets, roots, crate::trust::Trust::system_bundles())
    }

    pub(crate) fn with_bundles(
        rules: &[String],
        secrets: Vec<Secret>,
        roots: Vec<CertificateDer<'static>>,
        bundles: Vec<std::path::PathBuf>,
    ) -> Self {
        let policy = NetworkPolicy::new(
            rules.iter().map(|r| Rule::parse_line(r).unwrap()).collect(),
            Vec::new(),
        );
        let (tx, events) = mpsc::unbounded_channel();
        let inspector = Inspector::with_bundles(
            Options {
                policy: PolicyHandle::new(policy),
                extra_upstream_roots: roots,
                secrets,
                events: Arc::new(move |e| {
                    let _ = tx.send(e);
                }),
            },
            bundles,
        )
        .unwrap();
        Self {
            inspector,
            events,
            next_connection: 1,
        }
    }

    /// Hands a new connection to `name` (or none) at 127.0.0.1:`port` to the inspector;
    /// returns the sandbox's end.
    pub(crate) fn connect(&mut self, name: Option<&str>, port: u16, scheme: Scheme) -> UnixStream {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let connection = self.next_connection;
        self.next_connection += 1;
        self.inspector.intercept(
            Intercepted {
                connection,
                name: name.map(|n| HostName::parse(n).unwrap()),
                addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
                port,
                scheme,
            },
            theirs,
        );
        ours.set_nonblocking(true).unwrap();
        UnixStream::from_std(ours).unwrap()
    }

    /// A TLS client over a new connection, trusting the session's CA.
    pub(crate) async fn tls(
        &mut self,
        name: Option<&str>,
        port: u16,
        sni: &str,
        alpn: &[&[u8]],
    ) -> std::io::Result<TlsStream<UnixStream>> {
        let stream = self.connect(name, port, Scheme::Https);
        let mut roots = RootCertStore::empty();
        roots.add(self.inspector.ca_der().clone()).unwrap();
        tls_client(stream, roots, sni, alpn).await
    }

    pub(crate) async fn event(&mut self) -> HttpEvent {
        tokio::time::timeout(WAIT, self.events.recv())
            .await
            .expect("no event came")
            .unwrap()
    }

    pub(crate) async fn exchange(&mut self) -> crate::Exchange {
        match self.event().await {
            HttpEvent::Exchange(e) => e,
            other => panic!("expected an exchange, got {other:?}"),
        }
    }

    pub(crate) async fn tls_failure(&mut self) -> crate::TlsFailure {
        match self.event().await {
            HttpEvent::Tls(e) => e,
            other => panic!("expected a TLS failure, got {other:?}"),
        }
    }

    /// The events already emitted, and whether the callback was dropped (no sender of
    /// the channel is left).
    pub(crate) fn events_so_far(&mut self) -> (Vec<HttpEvent>, bool) {
        let mut events = Vec::new();
        loop {
            match self.events.try_recv() {
                Ok(event) => events.push(event),
                Err(mpsc::error::TryRecvError::Empty) => return (events, false),
                Err(mpsc::error::TryRecvError::Disconnected) => return (events, true),
            }
        }
    }

    /// Waits a little and says whether any event came.
    pub(crate) async fn no_more_events(&mut self) -> bool {
        tokio::time::timeout(Duration::from_millis(200), self.events.recv())
            .await
            .is_err()
    }
}

pub(crate) async fn tls_client(
    stream: UnixStream,
    roots: RootCertStore,
    sni: &str,
    alpn: &[&[u8]],
) -> std::io::Result<TlsStream<UnixStream>> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let name = ServerName::try_from(sni.to_owned()).unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, stream)
        .await
}

/// A hyper client over `io`, HTTP/2 if `h2`.
pub(crate) enum Client {
    H1(hyper::client::conn::http1::SendRequest<TestBody>),
    H2(hyper::client::conn::http2::SendRequest<TestBody>),
}

impl Client {
    pub(crate) async fn new<I>(io: I, h2: bool) -> Self
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let io = TokioIo::new(io);
        if h2 {
            let (sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .unwrap();
            tokio::spawn(conn);
            Self::H2(sender)
        } else {
            let (sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
            tokio::spawn(conn.with_upgrades());
            Self::H1(sender)
        }
    }

    /// Another handle on the same HTTP/2 connection.
    pub(crate) fn fork(&self) -> Self {
        match self {
            Self::H2(s) => Self::H2(s.clone()),
            Self::H1(_) => panic!("HTTP/1.1 connections cannot be shared"),
        }
    }

    pub(crate) async fn send(
        &mut self,
        req: Request<TestBody>,
    ) -> hyper::Result<Response<Incoming>> {
        match self {
            Self::H1(s) => {
                s.ready().await?;
                s.send_request(req).await
            }
            Self::H2(s) => {
                s.ready().await?;
                s.send_request(req).await
            }
        }
    }
}

/// A request for `path` on `authority`, in the form `h2` needs or HTTP/1.1's.
pub(crate) fn request(
    method: &str,
    authority: &str,
    path: &str,
    h2: bool,
) -> http::request::Builder {
    let builder = Request::builder().method(method);
    if h2 {
        builder.uri(format!("https://{authority}{path}"))
    } else {
        builder.uri(path).header("host", authority)
    }
}

pub(crate) fn empty() -> TestBody {
    Empty::new().map_err(|never| match never {}).boxed()
}

pub(crate) fn text(t: &str) -> TestBody {
    full(t.to_owned())
}

pub(crate) async fn read_text(response: Response<Incoming>) -> (StatusCode, HeaderMap, String) {
    let (parts, body) = response.into_parts();
    let bytes = tokio::time::timeout(WAIT, body.collect())
        .await
        .expect("the body did not end")
        .unwrap()
        .to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}
