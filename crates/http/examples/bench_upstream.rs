//! A fast HTTPS server on the loopback, for `bench/https.sh`: the upstream the inspector
//! is measured against, so it must never be the bottleneck.
//!
//! ```text
//! cargo run --release -p vg-http --example bench_upstream -- api.test ca.pem [PORT]
//! curl --cacert ca.pem --resolve api.test:PORT:127.0.0.1 https://api.test:PORT/small
//! ```
//!
//! Makes a CA of its own and a leaf for NAME (plus `localhost` and `127.0.0.1`), writes
//! the CA's certificate (PEM) to the path given, listens on 127.0.0.1:PORT (any free
//! port when none is given) and prints the port on a line of its own. Speaks HTTP/1.1
//! with keep-alive and HTTP/2, by ALPN:
//!
//! - `GET /bytes?n=N`: N zero bytes with a Content-Length, streamed in 1 MiB frames of
//!   one shared buffer (nothing is copied or generated per request);
//! - `GET /small`: a few bytes;
//! - anything else: 404.
//!
//! Runs until killed.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::ServerConfig;
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The frame size of `/bytes`.
const CHUNK: usize = 1 << 20;
/// Flow-control windows for HTTP/2, so that a window never stalls a download.
const H2_WINDOW: u32 = 16 << 20;

/// `left` bytes of `chunk`, a frame at a time.
struct Zeros {
    chunk: Bytes,
    left: u64,
}

impl Body for Zeros {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let n = usize::try_from(self.left).map_or(self.chunk.len(), |l| l.min(self.chunk.len()));
        self.left -= n as u64;
        Poll::Ready(Some(Ok(Frame::data(self.chunk.slice(..n)))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

type Reply = Response<Either<Full<Bytes>, Zeros>>;

fn text(status: StatusCode, body: &'static str) -> Reply {
    let mut response = Response::new(Either::Left(Full::new(Bytes::from_static(body.as_bytes()))));
    *response.status_mut() = status;
    response
}

fn respond(chunk: &Bytes, req: &Request<Incoming>) -> Reply {
    match req.uri().path() {
        "/small" => text(StatusCode::OK, "ok\n"),
        "/bytes" => {
            let n = req
                .uri()
                .query()
                .unwrap_or("")
                .split('&')
                .find_map(|kv| kv.strip_prefix("n="))
                .and_then(|n| n.parse::<u64>().ok());
            let Some(n) = n else {
                return text(StatusCode::BAD_REQUEST, "usage: /bytes?n=N\n");
            };
            let mut response = Response::new(Either::Right(Zeros {
                chunk: chunk.clone(),
                left: n,
            }));
            let headers = response.headers_mut();
            headers.insert(CONTENT_LENGTH, n.into());
            headers.insert(
                CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/octet-stream"),
            );
            response
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

/// A CA of our own, and a leaf it signed for `name`, `localhost` and `127.0.0.1`.
fn certificates(name: &str) -> Result<(String, ServerConfig), Error> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name
        .push(DnType::CommonName, "Vectra Guard benchmark upstream CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_pem = ca.self_signed(&ca_key)?.pem();
    let issuer = Issuer::new(ca, ca_key);

    let key = KeyPair::generate()?;
    let mut leaf = CertificateParams::new(vec![
        name.to_owned(),
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
    ])?;
    leaf.distinguished_name.push(DnType::CommonName, name);
    leaf.is_ca = IsCa::ExplicitNoCa;
    leaf.use_authority_key_identifier_extension = true;
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = leaf.signed_by(&key, &issuer)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok((ca_pem, config))
}

async fn serve<I>(io: I, h2: bool, chunk: Bytes)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req: Request<Incoming>| {
        let response = respond(&chunk, &req);
        async move { Ok::<_, Infallible>(response) }
    });
    let io = TokioIo::new(io);
    let _ = if h2 {
        hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .initial_stream_window_size(H2_WINDOW)
            .initial_connection_window_size(H2_WINDOW)
            .max_frame_size(1 << 20)
            .serve_connection(io, service)
            .await
    } else {
        hyper::server::conn::http1::Builder::new()
            .keep_alive(true)
            .serve_connection(io, service)
            .await
    };
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (name, ca_path, port) = match args.as_slice() {
        [name, ca] => (name, ca, 0),
        [name, ca, port] => (name, ca, port.parse()?),
        _ => return Err("usage: bench_upstream NAME CA.pem [PORT]".into()),
    };
    let (ca_pem, config) = certificates(name)?;
    std::fs::write(ca_path, ca_pem)?;
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    println!("{}", listener.local_addr()?.port());
    let chunk = Bytes::from(vec![0u8; CHUNK]);
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let chunk = chunk.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
            serve(tls, h2, chunk).await;
        });
    }
}
