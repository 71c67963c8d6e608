//! Real HTTPS (and plain HTTP) servers on the host's loopback, for the HTTPS inspection
//! tests: a test CA made for each test ([`TestCa`], its certificate in a PEM file the
//! test user can read, given to vectraguard as `--upstream-ca`), and one server type
//! ([`Server`]) speaking HTTP/1.1 and HTTP/2 (by ALPN, or by preface in plain HTTP),
//! built on hyper, hyper-util and tokio-rustls, with these routes:
//!
//! - `/echo/**` (any method): 200 and a JSON description of what the server received:
//!   `method`, `path`, `query`, `version` (`HTTP/1.1`, `HTTP/2.0`), `headers` (lower-case
//!   names, repeated headers joined by `, `), `body_bytes` and `body` (lossy UTF-8,
//!   the first 64 KiB);
//! - `POST|PUT /upload`: streams the body into `sha256sum`, answers
//!   `{"bytes":N,"sha256":"…"}` (nothing is buffered: gigabytes are fine);
//! - `GET /download?bytes=N`: N bytes of [`pattern`], streamed, with a Content-Length;
//! - `GET /sse?n=K&gap_ms=M`: `text/event-stream`, K events `M` ms apart, each sent as
//!   it is made; the data of each is `{"i":I,"sent_ms":UNIX-MS}`;
//! - `GET /ws`: a WebSocket upgrade (RFC 6455 by hand), then every data frame echoed;
//! - `/git/**`: git's smart HTTP, by `git http-backend` run as a CGI over the bare
//!   repositories made with [`Server::add_git_repo`];
//! - `/simple/` and `/simple/<name>/` (a PEP 503 index) and `/packages/<file>`, serving
//!   the wheels made with [`Server::add_wheel`];
//! - `/status/<code>`: that status, a short text body.
//!
//! Every request is logged ([`Server::seen`]), as are the TLS handshakes (SNI, ALPN)
//! and their failures, so that a test can tell what reached the server and how.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use serde_json::{Value, json};
use sha1::Digest as _;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::harness::{PYTHON, TempDir, unique};

/// Every name a test server's certificate carries besides the ones asked for, so the
/// host-side checks can reach it without a resolver entry.
const ALWAYS_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];

/// The runtime all the servers of this test process run on.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .thread_name("test-https-server")
            .enable_all()
            .build()
            .expect("the test servers' runtime")
    })
}

fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

// ---------------------------------------------------------------------------------------
// The test CA.

/// A certificate authority made for one test: its certificate is written to `ca.pem` in
/// a directory the test user can read; it signs the certificates of the servers
/// started with [`TestCa::serve`].
pub struct TestCa {
    dir: TempDir,
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl TestCa {
    /// A new CA; `label` goes into its name (and so into error messages).
    pub fn new(label: &str) -> Self {
        let key = KeyPair::generate().expect("generate the test CA's key");
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(
            DnType::CommonName,
            format!("Vectra Guard test CA {label} {}", unique()),
        );
        params
            .distinguished_name
            .push(DnType::OrganizationName, "vectraguard end-to-end tests");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).expect("self-sign the test CA");
        let pem = cert.pem();
        let dir = TempDir::new(&format!("ca-{label}"));
        dir.write("ca.pem", &pem);
        Self {
            dir,
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// [`Self::pem_path`] as a string, for command lines.
    pub fn arg(&self) -> String {
        self.dir.arg("ca.pem")
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A server certificate for `names` (and [`ALWAYS_NAMES`]) signed by this CA, with
    /// its key; the chain is the leaf alone.
    pub fn leaf(&self, names: &[&str]) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        let sans: Vec<String> = names
            .iter()
            .chain(ALWAYS_NAMES.iter())
            .map(|s| (*s).to_owned())
            .collect();
        let mut params = CertificateParams::new(sans).expect("server certificate names");
        params.distinguished_name.push(
            DnType::CommonName,
            names.first().copied().unwrap_or("localhost"),
        );
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().expect("generate a server key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("sign a server certificate");
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        (vec![cert.der().clone()], key)
    }

    /// An HTTPS server on the loopback whose certificate, for `names`, this CA signed.
    pub fn serve(&self, names: &[&str]) -> Server {
        let (chain, key) = self.leaf(names);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("the server certificate");
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Server::start(Some(TlsAcceptor::from(Arc::new(config))))
    }
}

// ---------------------------------------------------------------------------------------
// The server.

/// What a server saw of one TLS handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handshake {
    /// The ClientHello's server name, if it sent one.
    pub sni: Option<String>,
    /// The protocol agreed by ALPN, if any (`h2`, `http/1.1`).
    pub alpn: Option<String>,
}

struct State {
    /// Git repositories (`git/`) and wheels (`packages/`).
    files: TempDir,
    seen: Mutex<Vec<Value>>,
    handshakes: Mutex<Vec<Handshake>>,
    handshake_errors: Mutex<Vec<String>>,
    /// Normalized project name -> wheel file names under `packages/`.
    packages: Mutex<BTreeMap<String, Vec<(String, String)>>>,
}

/// A server on 127.0.0.1 with the routes of this module; stops accepting on drop.
pub struct Server {
    pub port: u16,
    tls: bool,
    state: Arc<State>,
    accept: tokio::task::JoinHandle<()>,
}

impl Server {
    /// The same routes in plain HTTP (HTTP/1.1, or HTTP/2 with prior knowledge).
    pub fn plain() -> Self {
        Self::start(None)
    }

    fn start(tls: Option<TlsAcceptor>) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(State {
            files: TempDir::new("https-server"),
            seen: Mutex::new(Vec::new()),
            handshakes: Mutex::new(Vec::new()),
            handshake_errors: Mutex::new(Vec::new()),
            packages: Mutex::new(BTreeMap::new()),
        });
        let is_tls = tls.is_some();
        let st = Arc::clone(&state);
        let accept = runtime().spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let _ = tcp.set_nodelay(true);
                let st = Arc::clone(&st);
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        None => serve_connection(tcp, st).await,
                        Some(acceptor) => match acceptor.accept(tcp).await {
                            Ok(stream) => {
                                let conn = stream.get_ref().1;
                                lock(&st.handshakes).push(Handshake {
                                    sni: conn.server_name().map(str::to_owned),
                                    alpn: conn
                                        .alpn_protocol()
                                        .map(|p| String::from_utf8_lossy(p).into_owned()),
                                });
                                serve_connection(stream, st).await;
                            }
                            Err(e) => lock(&st.handshake_errors).push(e.to_string()),
                        },
                    }
                });
            }
        });
        Self {
            port,
            tls: is_tls,
            state,
            accept,
        }
    }

    /// `https://NAME:PORT/PATH` (`http://` for a plain server); `path` starts with `/`.
    pub fn url(&self, name: &str, path: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{name}:{}{path}", self.port)
    }

    /// Every request received so far, as `/echo` describes them (without bodies).
    pub fn seen(&self) -> Vec<Value> {
        lock(&self.state.seen).clone()
    }

    /// The requests received so far whose path starts with `prefix`.
    pub fn seen_under(&self, prefix: &str) -> Vec<Value> {
        self.seen()
            .into_iter()
            .filter(|r| r["path"].as_str().is_some_and(|p| p.starts_with(prefix)))
            .collect()
    }

    /// The TLS handshakes completed so far.
    pub fn handshakes(&self) -> Vec<Handshake> {
        lock(&self.state.handshakes).clone()
    }

    /// The TLS handshakes that failed so far, as rustls described them.
    pub fn handshake_errors(&self) -> Vec<String> {
        lock(&self.state.handshake_errors).clone()
    }

    /// Makes a bare repository `/git/NAME.git` with one commit: a `README` holding a
    /// fresh marker, which is returned.
    pub fn add_git_repo(&self, name: &str) -> String {
        let marker = format!("vg-git-marker-{}", unique());
        let root = self.state.files.join("git");
        std::fs::create_dir_all(&root).unwrap();
        let work = self.state.files.join(format!("work-{name}"));
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(work.join("README"), format!("{marker}\n")).unwrap();
        let bare = root.join(format!("{name}.git"));
        let git = |dir: &Path, args: &[&str]| {
            let out = git_command()
                .current_dir(dir)
                .args(args)
                .output()
                .expect("run git");
            assert!(
                out.status.success(),
                "git {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        git(&work, &["init", "-q", "-b", "main"]);
        git(&work, &["add", "README"]);
        git(
            &work,
            &[
                "-c",
                "user.name=vg test",
                "-c",
                "user.email=vg@test.invalid",
                "commit",
                "-q",
                "-m",
                "the test repository",
            ],
        );
        git(
            &root,
            &[
                "clone",
                "-q",
                "--bare",
                work.to_str().unwrap(),
                bare.to_str().unwrap(),
            ],
        );
        marker
    }

    /// Builds a pure-Python wheel `NAME-VERSION-py3-none-any.whl` whose module `NAME`
    /// holds `MARKER = "<fresh marker>"`, serves it from the index, and returns the
    /// marker.
    pub fn add_wheel(&self, name: &str, version: &str) -> String {
        let marker = format!("vg-wheel-marker-{}", unique());
        let dir = self.state.files.mkdir("packages");
        let file = format!("{name}-{version}-py3-none-any.whl");
        let out = Command::new(PYTHON)
            .args(["-c", MAKE_WHEEL, name, version, &marker])
            .arg(dir.join(&file))
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .output()
            .expect("run python3 to build a wheel");
        assert!(
            out.status.success(),
            "building the wheel: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let sha = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        lock(&self.state.packages)
            .entry(normalize(name))
            .or_default()
            .push((file, sha));
        marker
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Builds a wheel: argv = name, version, marker, output path; prints its sha256.
const MAKE_WHEEL: &str = r#"
import base64, hashlib, sys, zipfile
name, version, marker, out = sys.argv[1:5]
dist = f"{name}-{version}.dist-info"
files = {
    f"{name}/__init__.py": f"MARKER = {marker!r}\n",
    f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: a vectraguard test package\n",
    f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: vectraguard-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for path, text in files.items():
        data = text.encode()
        z.writestr(path, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    z.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
with open(out, "rb") as f:
    print(hashlib.sha256(f.read()).hexdigest())
"#;

/// PEP 503 name normalization.
fn normalize(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = if matches!(c, '-' | '_' | '.') {
            '-'
        } else {
            c.to_ascii_lowercase()
        };
        if !(c == '-' && out.ends_with('-')) {
            out.push(c);
        }
    }
    out
}

/// `git` with no system or user configuration, and every repository trusted whoever
/// owns it (the server runs as root over directories the test user owns).
fn git_command() -> Command {
    let mut cmd = Command::new("/usr/bin/git");
    cmd.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "safe.directory")
        .env("GIT_CONFIG_VALUE_0", "*");
    cmd
}

/// The bytes `/download` sends: byte `i` is `(i % 65536) % 251`.
pub fn pattern(len: u64) -> Vec<u8> {
    let block = pattern_block();
    let mut out = Vec::with_capacity(usize::try_from(len).unwrap());
    while (out.len() as u64) < len {
        let take = usize::try_from((len - out.len() as u64).min(block.len() as u64)).unwrap();
        out.extend_from_slice(&block[..take]);
    }
    out
}

fn pattern_block() -> Bytes {
    static BLOCK: OnceLock<Bytes> = OnceLock::new();
    BLOCK
        .get_or_init(|| {
            (0..65536u32)
                .map(|i| u8::try_from(i % 251).unwrap())
                .collect::<Vec<u8>>()
                .into()
        })
        .clone()
}

// ---------------------------------------------------------------------------------------
// Serving.

type ResponseBody = BoxBody<Bytes, io::Error>;

async fn serve_connection<I>(io: I, state: Arc<State>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        let state = Arc::clone(&state);
        async move { Ok::<_, Infallible>(route(state, req).await) }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let _ = builder
        .serve_connection_with_upgrades(TokioIo::new(io), service)
        .await;
}

fn describe(req: &Request<Incoming>) -> Value {
    let mut headers = serde_json::Map::new();
    for (name, value) in req.headers() {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        match headers.get_mut(name.as_str()) {
            Some(Value::String(old)) => {
                old.push_str(", ");
                old.push_str(&value);
            }
            _ => {
                headers.insert(name.as_str().to_owned(), Value::String(value));
            }
        }
    }
    json!({
        "method": req.method().as_str(),
        "path": req.uri().path(),
        "query": req.uri().query().unwrap_or(""),
        "version": format!("{:?}", req.version()),
        "headers": headers,
    })
}

fn query_param(req: &Request<Incoming>, key: &str) -> Option<String> {
    req.uri().query()?.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == key).then(|| v.to_owned())
    })
}

fn full(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<ResponseBody> {
    let mut response = Response::new(
        Full::new(body.into())
            .map_err(|never: Infallible| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert("content-type", HeaderValue::from_str(content_type).unwrap());
    response
}

fn text(status: StatusCode, body: impl Into<String>) -> Response<ResponseBody> {
    full(status, "text/plain; charset=utf-8", body.into())
}

fn json_response(value: &Value) -> Response<ResponseBody> {
    full(StatusCode::OK, "application/json", value.to_string())
}

async fn route(state: Arc<State>, req: Request<Incoming>) -> Response<ResponseBody> {
    lock(&state.seen).push(describe(&req));
    let path = req.uri().path().to_owned();
    let method = req.method().clone();
    let result = if path == "/echo" || path.starts_with("/echo/") {
        echo(req).await
    } else if path == "/upload" && matches!(method, Method::POST | Method::PUT) {
        upload(req).await
    } else if path == "/download" && matches!(method, Method::GET | Method::HEAD) {
        Ok(download(&req))
    } else if path == "/sse" && method == Method::GET {
        Ok(sse(&req))
    } else if path == "/ws" && method == Method::GET {
        Ok(websocket(req))
    } else if let Some(info) = path.strip_prefix("/git/") {
        let info = format!("/{info}");
        git_cgi(&state, req, &info).await
    } else if let Some(project) = path.strip_prefix("/simple/") {
        Ok(simple_index(&state, project))
    } else if let Some(file) = path.strip_prefix("/packages/") {
        Ok(package_file(&state, file))
    } else if let Some(code) = path.strip_prefix("/status/") {
        Ok(
            match code
                .parse::<u16>()
                .ok()
                .and_then(|c| StatusCode::from_u16(c).ok())
            {
                Some(status) => text(status, format!("status {code}\n")),
                None => text(StatusCode::BAD_REQUEST, "bad status\n"),
            },
        )
    } else {
        Ok(text(
            StatusCode::NOT_FOUND,
            format!("no route for {path}\n"),
        ))
    };
    let response =
        result.unwrap_or_else(|e| text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")));
    if method == Method::HEAD {
        // No body, and no length of one: over HTTP/2 a HEAD response announcing a
        // length makes hyper's h2 reset the stream (the length is never sent).
        let (mut parts, _) = response.into_parts();
        parts.headers.remove("content-length");
        return Response::from_parts(parts, empty());
    }
    response
}

fn empty() -> ResponseBody {
    Full::new(Bytes::new())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

fn io_error(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

async fn echo(req: Request<Incoming>) -> io::Result<Response<ResponseBody>> {
    let mut description = describe(&req);
    let mut body = req.into_body();
    let mut kept = Vec::new();
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.map_err(io_error)?.into_data() {
            total += data.len();
            let room = (64 * 1024usize).saturating_sub(kept.len());
            kept.extend_from_slice(&data[..data.len().min(room)]);
        }
    }
    description["body_bytes"] = json!(total);
    description["body"] = json!(String::from_utf8_lossy(&kept));
    Ok(json_response(&description))
}

async fn upload(req: Request<Incoming>) -> io::Result<Response<ResponseBody>> {
    // sha256sum rather than the sha2 crate: the tests are built without optimization,
    // where hashing a gigabyte in Rust would take half a minute.
    let mut hasher = tokio::process::Command::new("/usr/bin/sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut stdin = hasher.stdin.take().expect("piped stdin");
    let mut body = req.into_body();
    let mut bytes = 0u64;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.map_err(io_error)?.into_data() {
            bytes += data.len() as u64;
            stdin.write_all(&data).await?;
        }
    }
    drop(stdin);
    let out = hasher.wait_with_output().await?;
    let sha = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned();
    Ok(json_response(&json!({"bytes": bytes, "sha256": sha})))
}

/// [`pattern`] bytes, in frames of at most 64 KiB, with an exact size.
struct PatternBody {
    remaining: u64,
}

impl Body for PatternBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        if self.remaining == 0 {
            return Poll::Ready(None);
        }
        let block = pattern_block();
        let take = usize::try_from(self.remaining.min(block.len() as u64)).unwrap();
        self.remaining -= take as u64;
        Poll::Ready(Some(Ok(Frame::data(block.slice(..take)))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.remaining)
    }
}

fn download(req: &Request<Incoming>) -> Response<ResponseBody> {
    let Some(n) = query_param(req, "bytes").and_then(|b| b.parse::<u64>().ok()) else {
        return text(StatusCode::BAD_REQUEST, "download?bytes=N\n");
    };
    let mut response = Response::new(PatternBody { remaining: n }.boxed());
    response.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("application/octet-stream"),
    );
    response
}

/// A body fed by a channel: each message is one frame, sent as it comes.
struct ChannelBody {
    rx: tokio::sync::mpsc::Receiver<io::Result<Bytes>>,
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        self.rx
            .poll_recv(cx)
            .map(|message| message.map(|r| r.map(Frame::data)))
    }
}

fn channel_body(capacity: usize) -> (tokio::sync::mpsc::Sender<io::Result<Bytes>>, ResponseBody) {
    let (tx, rx) = tokio::sync::mpsc::channel(capacity);
    (tx, ChannelBody { rx }.boxed())
}

fn sse(req: &Request<Incoming>) -> Response<ResponseBody> {
    let n: u32 = query_param(req, "n")
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let gap: u64 = query_param(req, "gap_ms")
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let (tx, body) = channel_body(1);
    tokio::spawn(async move {
        for i in 0..n {
            let event = format!(
                "id: {i}\nevent: tick\ndata: {{\"i\":{i},\"sent_ms\":{}}}\n\n",
                unix_ms()
            );
            if tx.send(Ok(Bytes::from(event))).await.is_err() {
                return;
            }
            if i + 1 < n {
                tokio::time::sleep(Duration::from_millis(gap)).await;
            }
        }
    });
    let mut response = Response::new(body);
    let h = response.headers_mut();
    h.insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert("cache-control", HeaderValue::from_static("no-cache"));
    response
}

// WebSocket (RFC 6455), just enough to echo.

const WS_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`.
pub fn websocket_accept(key: &str) -> String {
    let digest = sha1::Sha1::digest(format!("{key}{WS_GUID}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(digest.as_slice())
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn websocket(req: Request<Incoming>) -> Response<ResponseBody> {
    let upgrade = header(req.headers(), "upgrade").unwrap_or_default();
    let Some(key) = header(req.headers(), "sec-websocket-key").map(str::to_owned) else {
        return text(StatusCode::BAD_REQUEST, "no Sec-WebSocket-Key\n");
    };
    if !upgrade.eq_ignore_ascii_case("websocket") {
        return text(StatusCode::BAD_REQUEST, "not a WebSocket upgrade\n");
    }
    tokio::spawn(async move {
        if let Ok(upgraded) = hyper::upgrade::on(req).await {
            let _ = websocket_echo(TokioIo::new(upgraded)).await;
        }
    });
    let mut response = Response::new(empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = response.headers_mut();
    h.insert("upgrade", HeaderValue::from_static("websocket"));
    h.insert("connection", HeaderValue::from_static("Upgrade"));
    h.insert(
        "sec-websocket-accept",
        HeaderValue::from_str(&websocket_accept(&key)).unwrap(),
    );
    response
}

/// An unmasked frame (servers do not mask).
fn websocket_frame(first: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![first];
    let len = payload.len();
    if len < 126 {
        out.push(u8::try_from(len).unwrap());
    } else if let Ok(len) = u16::try_from(len) {
        out.push(126);
        out.extend_from_slice(&len.to_be_bytes());
    } else {
        out.push(127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(payload);
    out
}

async fn websocket_echo<S: AsyncRead + AsyncWrite + Unpin>(mut io: S) -> io::Result<()> {
    loop {
        let mut head = [0u8; 2];
        io.read_exact(&mut head).await?;
        let opcode = head[0] & 0x0f;
        let masked = head[1] & 0x80 != 0;
        let mut len = u64::from(head[1] & 0x7f);
        if len == 126 {
            len = u64::from(io.read_u16().await?);
        } else if len == 127 {
            len = io.read_u64().await?;
        }
        if len > 16 << 20 {
            return Err(io_error("WebSocket frame too large"));
        }
        let mut mask = [0u8; 4];
        if masked {
            io.read_exact(&mut mask).await?;
        }
        let mut payload = vec![0u8; usize::try_from(len).unwrap()];
        io.read_exact(&mut payload).await?;
        for (i, b) in payload.iter_mut().enumerate() {
            *b ^= mask[i % 4];
        }
        match opcode {
            0x8 => {
                io.write_all(&websocket_frame(0x88, &payload)).await?;
                io.flush().await?;
                return Ok(());
            }
            0x9 => io.write_all(&websocket_frame(0x8a, &payload)).await?,
            0xa => {}
            _ => io.write_all(&websocket_frame(head[0], &payload)).await?,
        }
        io.flush().await?;
    }
}

// git smart HTTP through `git http-backend` (CGI).

async fn git_cgi(
    state: &State,
    req: Request<Incoming>,
    path_info: &str,
) -> io::Result<Response<ResponseBody>> {
    let mut cmd = tokio::process::Command::from(git_command());
    cmd.arg("http-backend")
        .env("GIT_PROJECT_ROOT", state.files.join("git"))
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("SERVER_SOFTWARE", "vectraguard-tests")
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("REQUEST_METHOD", req.method().as_str())
        .env("PATH_INFO", path_info)
        .env("QUERY_STRING", req.uri().query().unwrap_or(""));
    for (name, value) in req.headers() {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        match name.as_str() {
            "content-type" => cmd.env("CONTENT_TYPE", value),
            "content-length" => cmd.env("CONTENT_LENGTH", value),
            other => cmd.env(
                format!("HTTP_{}", other.to_ascii_uppercase().replace('-', "_")),
                value,
            ),
        };
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let mut body = req.into_body();
    tokio::spawn(async move {
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(data) = frame.into_data()
                && stdin.write_all(&data).await.is_err()
            {
                return;
            }
        }
        // Dropping stdin: end of the request body.
    });
    let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut status = StatusCode::OK;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if stdout.read_line(&mut line).await? == 0 {
            break;
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(io_error(format!("bad CGI header line {line:?}")));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code = value.split_whitespace().next().unwrap_or("500");
            status = code
                .parse::<u16>()
                .ok()
                .and_then(|c| StatusCode::from_u16(c).ok())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        } else {
            headers.push((name.to_owned(), value.to_owned()));
        }
    }
    let (tx, body) = channel_body(4);
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match stdout.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => {
                    if tx
                        .send(Ok(Bytes::copy_from_slice(&buf[..n])))
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    break;
                }
            }
        }
        let _ = child.wait().await;
    });
    let mut response = Response::new(body);
    *response.status_mut() = status;
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            hyper::header::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            response.headers_mut().append(name, value);
        }
    }
    Ok(response)
}

// The package index (PEP 503).

fn simple_index(state: &State, project: &str) -> Response<ResponseBody> {
    let packages = lock(&state.packages);
    let project = project.trim_end_matches('/');
    let html = if project.is_empty() {
        let links: String = packages
            .keys()
            .map(|p| format!("<a href=\"/simple/{p}/\">{p}</a>\n"))
            .collect();
        format!("<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n")
    } else {
        let Some(files) = packages.get(&normalize(project)) else {
            return text(StatusCode::NOT_FOUND, format!("no project {project}\n"));
        };
        let links: String = files
            .iter()
            .map(|(f, sha)| format!("<a href=\"/packages/{f}#sha256={sha}\">{f}</a>\n"))
            .collect();
        format!(
            "<!DOCTYPE html>\n<html><body>\n<h1>Links for {project}</h1>\n{links}</body></html>\n"
        )
    };
    full(StatusCode::OK, "text/html", html)
}

fn package_file(state: &State, file: &str) -> Response<ResponseBody> {
    let known = lock(&state.packages)
        .values()
        .flatten()
        .any(|(f, _)| f == file);
    if !known {
        return text(StatusCode::NOT_FOUND, format!("no file {file}\n"));
    }
    match std::fs::read(state.files.join("packages").join(file)) {
        Ok(bytes) => full(StatusCode::OK, "application/octet-stream", bytes),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
    }
}

// ---------------------------------------------------------------------------------------
// Clients: the real programs, each given METHOD URL [HEADER...] (a header as
// `Name: value`), each printing `status=CODE` and `body=FIRST-LINE-OF-BODY`, or
// `error=WHY` when no response came. The same command lines run on the host (trusting
// the test CA through the environment) and inside the sandbox (trusting the session's
// CA, which vectraguard sets up).

/// A real HTTP client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    Curl,
    PythonUrllib,
    PythonRequests,
    NodeFetch,
    NodeHttps,
}

impl Client {
    pub const ALL: [Client; 5] = [
        Client::Curl,
        Client::PythonUrllib,
        Client::PythonRequests,
        Client::NodeFetch,
        Client::NodeHttps,
    ];

    /// What `require_tools` needs for this client.
    pub fn tools(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Client::Curl => &[("/usr/bin/curl", "curl")],
            Client::PythonUrllib => &[(PYTHON, "python3")],
            Client::PythonRequests => &[
                (PYTHON, "python3"),
                (
                    "/usr/lib/python3/dist-packages/requests",
                    "python3-requests",
                ),
            ],
            Client::NodeFetch | Client::NodeHttps => &[("/usr/bin/node", "nodejs")],
        }
    }

    /// The command line for one request.
    pub fn argv(self, method: &str, url: &str, headers: &[&str]) -> Vec<String> {
        let mut argv: Vec<String> = match self {
            Client::Curl => vec![
                "/bin/bash".into(),
                "-c".into(),
                CURL_CLIENT.into(),
                "bash".into(),
            ],
            Client::PythonUrllib => vec![PYTHON.into(), "-c".into(), PY_URLLIB_CLIENT.into()],
            Client::PythonRequests => vec![PYTHON.into(), "-c".into(), PY_REQUESTS_CLIENT.into()],
            Client::NodeFetch => vec![
                "/usr/bin/node".into(),
                "-e".into(),
                NODE_FETCH_CLIENT.into(),
            ],
            Client::NodeHttps => vec![
                "/usr/bin/node".into(),
                "-e".into(),
                NODE_HTTPS_CLIENT.into(),
            ],
        };
        argv.push(method.to_owned());
        argv.push(url.to_owned());
        argv.extend(headers.iter().map(|h| (*h).to_owned()));
        argv
    }

    /// [`Self::argv`] as one shell command line (each word single-quoted), e.g. to run
    /// several clients in one sandbox.
    pub fn shell(self, method: &str, url: &str, headers: &[&str]) -> String {
        self.argv(method, url, headers)
            .iter()
            .map(|w| shell_quote(w))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// `word` single-quoted for sh.
pub fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// One client's answer, parsed from its output lines with the given prefix.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Answer {
    pub status: Option<u16>,
    pub body: String,
    pub error: Option<String>,
}

impl Answer {
    /// Parses the `status=`/`body=`/`error=` lines (after `prefix`, e.g. `curl.`) of
    /// `stdout`.
    pub fn parse(stdout: &str, prefix: &str) -> Self {
        let mut answer = Answer::default();
        for line in stdout.lines() {
            let Some(rest) = line.strip_prefix(prefix) else {
                continue;
            };
            if let Some(v) = rest.strip_prefix("status=") {
                answer.status = v.trim().parse().ok().filter(|&s| s != 0);
            } else if let Some(v) = rest.strip_prefix("body=") {
                answer.body = v.to_owned();
            } else if let Some(v) = rest.strip_prefix("error=") {
                answer.error = Some(v.to_owned());
            }
        }
        answer
    }

    /// The body as JSON (the `/echo` description), failing the test when it is not.
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("the body is not JSON ({e}): {self:?}"))
    }
}

/// curl: `-I` for HEAD (curl waits for a body after `-X HEAD`).
const CURL_CLIENT: &str = r#"
set -o pipefail
method=$1 url=$2; shift 2
args=(-sS --max-time 60)
if [ "$method" = HEAD ]; then args+=(-I); else args+=(-X "$method"); fi
for h in "$@"; do args+=(-H "$h"); done
if ! curl "${args[@]}" -w '\nstatus=%{http_code}\nversion=%{http_version}\n' "$url" 2>/tmp/.curl-err.$$ | sed '1s/^/body=/'; then
  echo "error=$(tr '\n' ' ' </tmp/.curl-err.$$)"
fi
rm -f /tmp/.curl-err.$$
"#;

const PY_URLLIB_CLIENT: &str = r#"
import sys, urllib.request, urllib.error
method, url = sys.argv[1], sys.argv[2]
headers = dict(h.split(": ", 1) for h in sys.argv[3:])
req = urllib.request.Request(url, method=method, headers=headers)
try:
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, body = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, body = e.code, e.read()
    print("status=%d" % status)
    print("body=" + body.decode(errors="replace").split("\n")[0], flush=True)
except Exception as e:
    print("error=%s: %s" % (type(e).__name__, str(e).replace("\n", " ")), flush=True)
"#;

const PY_REQUESTS_CLIENT: &str = r#"
import sys, requests
method, url = sys.argv[1], sys.argv[2]
headers = dict(h.split(": ", 1) for h in sys.argv[3:])
try:
    r = requests.request(method, url, headers=headers, timeout=60)
    print("status=%d" % r.status_code)
    print("body=" + r.content.decode(errors="replace").split("\n")[0], flush=True)
except Exception as e:
    print("error=%s: %s" % (type(e).__name__, str(e).replace("\n", " ")), flush=True)
"#;

const NODE_FETCH_CLIENT: &str = r#"
const [method, url, ...hs] = process.argv.slice(1);
const headers = Object.fromEntries(hs.map(h => [h.slice(0, h.indexOf(": ")), h.slice(h.indexOf(": ") + 2)]));
fetch(url, { method, headers, signal: AbortSignal.timeout(60000) })
  .then(async r => {
    const body = await r.text();
    console.log("status=" + r.status);
    console.log("body=" + body.split("\n")[0]);
  })
  .catch(e => console.log("error=" + e.name + ": " + e.message + (e.cause ? " (" + (e.cause.code || e.cause.message) + ")" : "")));
"#;

const NODE_HTTPS_CLIENT: &str = r#"
const [method, url, ...hs] = process.argv.slice(1);
const mod = url.startsWith("https:") ? require("https") : require("http");
const headers = Object.fromEntries(hs.map(h => [h.slice(0, h.indexOf(": ")), h.slice(h.indexOf(": ") + 2)]));
const req = mod.request(url, { method, headers, timeout: 60000 }, res => {
  const chunks = [];
  res.on("data", c => chunks.push(c));
  res.on("end", () => {
    console.log("status=" + res.statusCode);
    console.log("body=" + Buffer.concat(chunks).toString().split("\n")[0]);
  });
});
req.on("error", e => console.log("error=" + e.name + ": " + e.message + (e.code ? " (" + e.code + ")" : "")));
req.on("timeout", () => req.destroy(new Error("timed out")));
req.end();
"#;

/// Reads an event stream: `sse.first=` and `sse.last=` (receive times, Unix ms),
/// `sse.events=` (how many) and `sse.sent=` (each event's `sent_ms`, comma-separated).
/// argv: URL. Python's http.client over the default SSL context (whose trust the
/// environment sets: `SSL_CERT_FILE`).
pub const PY_SSE_CLIENT: &str = r#"
import json, ssl, sys, time, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=60) as r:
    received, sent = [], []
    while True:
        line = r.readline()
        if not line:
            break
        if line.startswith(b"data: "):
            received.append(int(time.time() * 1000))
            sent.append(json.loads(line[6:])["sent_ms"])
print("sse.events=%d" % len(received))
print("sse.first=%d" % received[0])
print("sse.last=%d" % received[-1])
print("sse.sent=" + ",".join(map(str, sent)), flush=True)
"#;

/// A WebSocket round trip by hand over Python's ssl module: argv HOST PORT; prints
/// `ws.status=` (the handshake's status line), `ws.accept_ok=`, `ws.echo=`.
pub const PY_WS_CLIENT: &str = r#"
import base64, hashlib, os, socket, ssl, sys
host, port = sys.argv[1], int(sys.argv[2])
raw = socket.create_connection((host, port), timeout=30)
ctx = ssl.create_default_context()
ctx.set_alpn_protocols(["http/1.1"])
s = ctx.wrap_socket(raw, server_hostname=host)
key = base64.b64encode(os.urandom(16)).decode()
s.sendall(("GET /ws HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (host, port, key)).encode())
head = b""
while b"\r\n\r\n" not in head:
    chunk = s.recv(4096)
    if not chunk:
        break
    head += chunk
head, _, rest = head.partition(b"\r\n\r\n")
lines = head.decode().split("\r\n")
print("ws.status=" + lines[0], flush=True)
want = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
print("ws.accept_ok=%s" % any(l.lower() == "sec-websocket-accept: " + want.lower() for l in lines))
msg = b"hello over a websocket"
mask = os.urandom(4)
s.sendall(bytes([0x81, 0x80 | len(msg)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(msg)))
buf = rest
while len(buf) < 2 or len(buf) < 2 + (buf[1] & 0x7f):
    chunk = s.recv(4096)
    if not chunk:
        break
    buf += chunk
print("ws.echo=" + buf[2:2 + (buf[1] & 0x7f)].decode(errors="replace"), flush=True)
s.sendall(bytes([0x88, 0x80]) + mask)
"#;

// ---------------------------------------------------------------------------------------
// The servers checked from the host, with real clients, before any sandbox is
// involved: as the test user (so the CA file is readable by them too).

#[cfg(test)]
mod host_checks {
    use super::super::harness::{Runner, TempDir, require_tools, wait_until};
    use super::*;

    /// Runs `argv` on the host as the test user, with `env`, returning stdout;
    /// failing the test on a non-zero exit.
    fn host(argv: &[String], env: &[(&str, &str)], cwd: Option<&Path>) -> String {
        let mut cmd = Runner::Unprivileged.host_command(&argv[0]);
        cmd.args(&argv[1..]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        let out = cmd.output().expect("start a host client");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{argv:?} failed: {:?}\n--- stdout:\n{stdout}\n--- stderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }

    fn trust(ca: &TestCa) -> Vec<(&'static str, String)> {
        [
            "SSL_CERT_FILE",
            "REQUESTS_CA_BUNDLE",
            "NODE_EXTRA_CA_CERTS",
            "CURL_CA_BUNDLE",
        ]
        .into_iter()
        .map(|k| (k, ca.arg()))
        .collect()
    }

    fn env_refs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
        env.iter().map(|(k, v)| (*k, v.as_str())).collect()
    }

    #[test]
    fn every_client_gets_the_echo_route_over_https_on_the_host() {
        let mut tools = Vec::new();
        for c in Client::ALL {
            tools.extend_from_slice(c.tools());
        }
        if !require_tools(&tools) {
            return;
        }
        let ca = TestCa::new("host");
        let server = ca.serve(&["api.test"]);
        let env = trust(&ca);
        for client in Client::ALL {
            for method in ["GET", "POST", "PUT", "DELETE"] {
                let url = server.url("localhost", "/echo/some/path?q=1&r=two");
                let out = host(
                    &client.argv(
                        method,
                        &url,
                        &["Authorization: Bearer host-check", "X-Test: 1"],
                    ),
                    &env_refs(&env),
                    None,
                );
                let answer = Answer::parse(&out, "");
                assert_eq!(answer.status, Some(200), "{client:?} {method}: {out}");
                let echo = answer.json();
                assert_eq!(echo["method"], method, "{client:?}: {echo}");
                assert_eq!(echo["path"], "/echo/some/path");
                assert_eq!(echo["query"], "q=1&r=two");
                assert_eq!(echo["headers"]["authorization"], "Bearer host-check");
                assert_eq!(echo["headers"]["x-test"], "1");
            }
            let out = host(
                &client.argv("GET", &server.url("localhost", "/status/404"), &[]),
                &env_refs(&env),
                None,
            );
            assert_eq!(
                Answer::parse(&out, "").status,
                Some(404),
                "{client:?}: {out}"
            );
        }
        // HEAD: curl's -I shows the status line as the first line.
        let out = host(
            &Client::Curl.argv("HEAD", &server.url("localhost", "/echo/x"), &[]),
            &env_refs(&env),
            None,
        );
        let answer = Answer::parse(&out, "");
        assert_eq!(answer.status, Some(200), "{out}");
        assert!(answer.body.starts_with("HTTP/"), "{out}");
        assert_eq!(server.seen_under("/echo/x")[0]["method"], "HEAD");

        // Under its own name, through --resolve, HTTP/1.1 and HTTP/2 by ALPN.
        for (flag, version) in [("--http1.1", "HTTP/1.1"), ("--http2", "HTTP/2.0")] {
            let out = host(
                &[
                    "curl".into(),
                    "-sS".into(),
                    flag.into(),
                    "--cacert".into(),
                    ca.arg(),
                    "--resolve".into(),
                    format!("api.test:{}:127.0.0.1", server.port),
                    server.url("api.test", "/echo/v"),
                ],
                &[],
                None,
            );
            let echo: Value = serde_json::from_str(&out).unwrap();
            assert_eq!(echo["version"], version, "{out}");
        }
        let handshakes = server.handshakes();
        assert!(
            handshakes
                .iter()
                .any(|h| h.sni.as_deref() == Some("api.test") && h.alpn.as_deref() == Some("h2")),
            "{handshakes:?}"
        );
    }

    #[test]
    fn upload_download_sse_and_websocket_routes_stream_on_the_host() {
        if !require_tools(&[("/usr/bin/curl", "curl"), (PYTHON, "python3")]) {
            return;
        }
        let ca = TestCa::new("host-stream");
        let server = ca.serve(&["api.test"]);
        let env = trust(&ca);
        let dir = TempDir::new("https-host");
        let curl = |extra: &[&str]| {
            let mut argv: Vec<String> = ["curl", "-sS", "--cacert", &ca.arg()]
                .iter()
                .map(|s| (*s).to_owned())
                .collect();
            argv.extend(extra.iter().map(|s| (*s).to_owned()));
            host(&argv, &[], Some(dir.path()))
        };

        // Upload: 64 MiB streamed from stdin (chunked), hashed by the server.
        let out = host(
            &[
                "/bin/bash".into(),
                "-c".into(),
                format!(
                    "set -o pipefail; head -c 67108864 /dev/zero | tr '\\0' 'v' | curl -sS --cacert {} -T - {}",
                    ca.arg(),
                    server.url("localhost", "/upload")
                ),
            ],
            &[],
            None,
        );
        let result: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(result["bytes"], 67_108_864u64, "{out}");
        let expected = host(
            &[
                "/bin/bash".into(),
                "-c".into(),
                "head -c 67108864 /dev/zero | tr '\\0' 'v' | sha256sum | cut -d' ' -f1".into(),
            ],
            &[],
            None,
        );
        assert_eq!(result["sha256"], expected.trim());

        // Download: the pattern, exactly.
        let url = server.url("localhost", "/download?bytes=3000001");
        curl(&["-o", "dl.bin", &url]);
        let got = std::fs::read(dir.join("dl.bin")).unwrap();
        assert_eq!(got.len(), 3_000_001);
        assert!(
            got == pattern(3_000_001),
            "the download differs from the pattern"
        );

        // SSE: events arrive one by one.
        let out = host(
            &[
                PYTHON.into(),
                "-c".into(),
                PY_SSE_CLIENT.into(),
                server.url("localhost", "/sse?n=4&gap_ms=400"),
            ],
            &env_refs(&env),
            None,
        );
        let field = |k: &str| -> i64 {
            out.lines()
                .find_map(|l| l.strip_prefix(&format!("sse.{k}=")))
                .unwrap()
                .parse()
                .unwrap()
        };
        assert_eq!(field("events"), 4, "{out}");
        // 1.2 s of gaps; half of it as margin for a loaded machine.
        assert!(field("last") - field("first") >= 600, "{out}");

        // WebSocket: handshake and echo.
        let out = host(
            &[
                PYTHON.into(),
                "-c".into(),
                PY_WS_CLIENT.into(),
                "localhost".into(),
                server.port.to_string(),
            ],
            &env_refs(&env),
            None,
        );
        assert!(out.contains("ws.status=HTTP/1.1 101"), "{out}");
        assert!(out.contains("ws.accept_ok=True"), "{out}");
        assert!(out.contains("ws.echo=hello over a websocket"), "{out}");
    }

    #[test]
    fn git_clone_and_pip_install_work_against_the_servers_on_the_host() {
        if !require_tools(&[
            ("/usr/bin/git", "git"),
            ("/usr/lib/git-core/git-http-backend", "git"),
            (PYTHON, "python3"),
            ("/usr/lib/python3/dist-packages/pip", "python3-pip"),
        ]) {
            return;
        }
        let ca = TestCa::new("host-git");
        let git = ca.serve(&["git.test"]);
        let marker = git.add_git_repo("repo");
        let dir = TempDir::new("https-host-git");
        for protocol in ["version=2", "version=0"] {
            let target = format!("clone-{}", &protocol[8..]);
            host(
                &[
                    "/usr/bin/git".into(),
                    "-c".into(),
                    format!("http.sslCAInfo={}", ca.arg()),
                    "-c".into(),
                    format!("http.curloptResolve=git.test:{}:127.0.0.1", git.port),
                    "-c".into(),
                    format!("protocol.{protocol}"),
                    "clone".into(),
                    "-q".into(),
                    git.url("git.test", "/git/repo.git"),
                    target.clone(),
                ],
                &[],
                Some(dir.path()),
            );
            assert_eq!(
                dir.read(format!("{target}/README")).as_deref(),
                Some(format!("{marker}\n").as_str())
            );
        }
        assert!(!git.seen_under("/git/repo.git/git-upload-pack").is_empty());

        let pypi = ca.serve(&["pypi.test"]);
        let marker = pypi.add_wheel("vgdemo", "1.0");
        let target = dir.mkdir("site");
        host(
            &[
                PYTHON.into(),
                "-m".into(),
                "pip".into(),
                "install".into(),
                "--quiet".into(),
                "--no-cache-dir".into(),
                "--disable-pip-version-check".into(),
                "--cert".into(),
                ca.arg(),
                "--index-url".into(),
                pypi.url("localhost", "/simple/"),
                "--target".into(),
                target.to_str().unwrap().into(),
                "vgdemo".into(),
            ],
            &[],
            Some(dir.path()),
        );
        let out = host(
            &[
                PYTHON.into(),
                "-c".into(),
                "import vgdemo; print(vgdemo.MARKER)".into(),
            ],
            &[("PYTHONPATH", target.to_str().unwrap())],
            None,
        );
        assert_eq!(out.trim(), marker);
    }

    #[test]
    fn another_ca_and_plain_http_variants_behave_on_the_host() {
        if !require_tools(&[("/usr/bin/curl", "curl")]) {
            return;
        }
        let ca = TestCa::new("host-trusted");
        let rogue = TestCa::new("host-rogue").serve(&["api.test"]);
        let out = Runner::Unprivileged
            .host_command("curl")
            .args([
                "-sS",
                "--cacert",
                &ca.arg(),
                &rogue.url("localhost", "/echo/"),
            ])
            .output()
            .unwrap();
        // 60: the peer's certificate cannot be verified.
        assert_eq!(out.status.code(), Some(60), "{out:?}");
        assert!(rogue.seen().is_empty());
        // Recorded by the server's task, maybe just after curl gave up.
        assert!(
            wait_until(Duration::from_secs(5), || rogue.handshake_errors().len()
                == 1),
            "{:?}",
            rogue.handshake_errors()
        );

        let plain = Server::plain();
        assert!(plain.url("x.test", "/").starts_with("http://x.test:"));
        let out = host(
            &Client::Curl.argv("GET", &plain.url("localhost", "/echo/plain"), &[]),
            &[],
            None,
        );
        let answer = Answer::parse(&out, "");
        assert_eq!(answer.status, Some(200), "{out}");
        assert_eq!(answer.json()["path"], "/echo/plain");
        let out = host(
            &[
                "curl".into(),
                "-sS".into(),
                "--http2-prior-knowledge".into(),
                plain.url("localhost", "/echo/h2c"),
            ],
            &[],
            None,
        );
        assert!(out.contains(r#""version":"HTTP/2.0""#), "{out}");
    }
}
