//! One request from the sandbox, in order: its host must be the connection's; it may
//! not ask for a tunnel (CONNECT, an upgrade other than WebSocket); the rules must allow
//! its method and path, and those it names in method or path override headers; it must
//! carry no other host's placeholder; then the bound secrets go into its headers and it
//! goes upstream, and the response comes back with secret values turned into
//! placeholders — refused if it is compressed and the request carried a secret. A
//! refused request is never forwarded, and nothing is connected for it.
//!
//! What goes back to the sandbox is rebuilt from the upstream's status, headers and
//! body only: nothing else hyper attaches to a response (the upstream's HTTP/1 reason
//! phrase, which could quote a secret) is passed on.

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::uri::{Authority, Uri};
use http::{Method, Request, StatusCode, Version};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use vg_policy::network::{HostName, HttpRequest, Reason, Scheme, canonical};

use crate::body::{BoxError, Record, RequestBody, ResponseBody};
use crate::event::{Exchange, redact_query};
use crate::scan::{Patterns, Replacer};
use crate::secret::mask_values;
use crate::server::Conn;
use crate::upstream::{Sender, Slot, Unavailable};

pub(crate) type Response = http::Response<BoxBody<Bytes, BoxError>>;

/// The `reason` of a request refused for carrying another host's placeholder.
pub(crate) const EXFILTRATION: &str = "secret placeholder to an unbound host";
/// The `reason` of an upgrade request other than a WebSocket handshake.
pub(crate) const UPGRADE_REFUSED: &str = "upgrade not allowed";
/// The `reason` of a request whose method or path override header cannot be read.
pub(crate) const OVERRIDE_REFUSED: &str = "override not understood";

/// Headers that make many frameworks run another method than the request's.
const METHOD_OVERRIDES: [&str; 3] = [
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];
/// Headers that make some frameworks and servers route another path than the request's.
const PATH_OVERRIDES: [&str; 2] = ["x-original-url", "x-rewrite-url"];

/// Serves one request; every outcome is a response (and, once it ends, a record).
pub(crate) async fn handle(
    conn: Arc<Conn>,
    req: Request<Incoming>,
) -> Result<Response, Infallible> {
    let path_and_query = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let record = Record::new(
        Exchange {
            connection: conn.info.connection,
            time: SystemTime::now(),
            version: version_text(req.version()),
            method: req.method().as_str().to_owned(),
            scheme: conn.info.scheme,
            host: conn.host.clone(),
            port: conn.info.port,
            path: redact_query(&path_and_query),
            status: None,
            bytes_out: 0,
            bytes_in: 0,
            duration: std::time::Duration::ZERO,
            decision: "deny",
            rule: None,
            reason: String::new(),
            secrets: Vec::new(),
            exfiltration: None,
            error: None,
        },
        Arc::clone(&conn.shared.events),
    );
    Ok(match forward(&conn, req, &path_and_query, &record).await {
        Ok(response) => response,
        Err(refusal) => refusal.respond(&record),
    })
}

/// A response made here instead of the upstream's.
struct Refusal {
    status: StatusCode,
    text: String,
    reason: Option<&'static str>,
    error: Option<String>,
}

impl Refusal {
    fn forbidden(text: String, reason: &'static str) -> Self {
        Self {
            status: StatusCode::FORBIDDEN,
            text,
            reason: Some(reason),
            error: None,
        }
    }

    fn bad_gateway(what: String, error: String) -> Self {
        Self {
            status: StatusCode::BAD_GATEWAY,
            text: format!("vectraguard: {what}: {error}"),
            reason: None,
            error: Some(error),
        }
    }

    /// No upstream connection: a 503 if all that may be open are busy, else a 502.
    fn unavailable(what: String, e: Unavailable) -> Self {
        match e {
            Unavailable::Busy(error) => Self {
                status: StatusCode::SERVICE_UNAVAILABLE,
                text: format!("vectraguard: {what}: {error}"),
                reason: None,
                error: Some(error),
            },
            Unavailable::Failed(error) => Self::bad_gateway(what, error),
        }
    }

    fn respond(self, record: &Record) -> Response {
        record.update(|ex| {
            ex.status = Some(self.status.as_u16());
            if let Some(reason) = self.reason {
                ex.decision = "deny";
                ex.reason = reason.to_owned();
            }
            if self.error.is_some() {
                ex.error = self.error;
            }
        });
        text_response(self.status, self.text)
    }
}

fn text_response(status: StatusCode, mut text: String) -> Response {
    text.push('\n');
    let mut response = http::Response::new(
        Full::new(Bytes::from(text))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

async fn forward(
    conn: &Arc<Conn>,
    mut req: Request<Incoming>,
    path_and_query: &str,
    record: &Arc<Record>,
) -> Result<Response, Refusal> {
    let authority = admit(conn, &req, path_and_query, record)?;
    let method = req.method().clone();
    let url = conn.url(req.uri().path());
    let cannot = |e: String| Refusal::bad_gateway(format!("could not forward {method} {url}"), e);
    let unavailable =
        |e: Unavailable| Refusal::unavailable(format!("could not forward {method} {url}"), e);

    // `admit` refused every upgrade but a WebSocket handshake.
    let upgrade = req.version() == Version::HTTP_11 && is_upgrade(req.headers());
    let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut req));
    let (mut parts, body) = req.into_parts();
    strip_hop_by_hop(&mut parts.headers, upgrade);
    // Interim responses are ours to give; the body is sent as soon as it comes.
    parts.headers.remove(header::EXPECT);
    if upgrade && !conn.shared.secrets.is_empty() {
        // Compressed WebSocket frames would hide secret values from the response scan.
        parts.headers.remove("sec-websocket-extensions");
    }
    let injected = conn.secrets.inject(&mut parts.headers).map_err(&cannot)?;
    if !injected.is_empty() {
        let names = injected
            .iter()
            .map(|i| conn.shared.secrets.name(*i).to_owned())
            .collect();
        record.update(|ex| ex.secrets = names);
        // A compressed response would hide an echoed value from the scan.
        parts.headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
    }

    let sender = conn.upstream.sender().await.map_err(&unavailable)?;
    let body = RequestBody::new(body, Arc::clone(&conn.secrets), Arc::clone(record));
    let shape = Shape {
        scheme: conn.info.scheme,
        authority: &authority,
        path_and_query,
    };
    let request = shape
        .apply(Request::from_parts(parts, body), &sender)
        .map_err(&cannot)?;
    let (mut sent, mut reuse) = send(sender, request).await;
    // Never sent (a kept-alive connection the server had just closed): once more on a
    // new connection.
    if let Err(e) = &mut sent
        && let Some(unsent) = e.take_message()
    {
        // The dead connection lets go of its slot first.
        drop(reuse.take());
        let sender = conn.upstream.fresh().await.map_err(&unavailable)?;
        let again = shape.apply(unsent, &sender).map_err(&cannot)?;
        (sent, reuse) = send(sender, again).await;
    }
    let mut response = match sent {
        Ok(response) => response,
        Err(e) => {
            // A body cut for carrying another host's placeholder fails the send.
            if let Some(name) = record.read(|ex| ex.exfiltration.clone()) {
                return Err(Refusal::forbidden(
                    foreign_text(&name, conn.shared.secrets.hosts_text_of(&name)),
                    EXFILTRATION,
                ));
            }
            return Err(Refusal::bad_gateway(
                format!("upstream failed for {method} {url}"),
                describe(&e.into_error()),
            ));
        }
    };

    let status = response.status();
    record.update(|ex| ex.status = Some(status.as_u16()));
    let upstream_failed = || format!("upstream failed for {method} {url}");
    let patterns = Arc::clone(conn.secrets.responses());
    if status == StatusCode::SWITCHING_PROTOCOLS {
        let Some(client_upgrade) = client_upgrade else {
            return Err(Refusal::bad_gateway(
                upstream_failed(),
                "it switched protocols, which was not asked for".to_owned(),
            ));
        };
        if !upgrade_tokens(response.headers()).eq_ignore_ascii_case("websocket") {
            return Err(Refusal::bad_gateway(
                upstream_failed(),
                "it switched to another protocol than WebSocket".to_owned(),
            ));
        }
        let server_upgrade = hyper::upgrade::on(&mut response);
        // The upstream connection, now the tunnel's, holds its slot until it ends.
        let slot = reuse.map(|h1| h1.slot);
        let (parts, _) = response.into_parts();
        let mut headers = parts.headers;
        strip_hop_by_hop(&mut headers, true);
        mask_values(&patterns, &mut headers);
        tokio::spawn(tunnel(
            client_upgrade,
            server_upgrade,
            Arc::clone(record),
            patterns,
            slot,
        ));
        return Ok(rebuilt(
            status,
            Version::HTTP_11,
            headers,
            Empty::new().map_err(|never| match never {}).boxed(),
        ));
    }
    if !injected.is_empty()
        && let Some(coding) = unscannable_coding(&method, status, response.headers())
    {
        return Err(Refusal::bad_gateway(
            format!("refused the response to {method} {url}"),
            format!(
                "it is encoded ({coding}) although the request, which carried a secret, asked for identity: a secret value in it could not be masked"
            ),
        ));
    }
    let (parts, body) = response.into_parts();
    let mut headers = parts.headers;
    strip_hop_by_hop(&mut headers, false);
    mask_values(&patterns, &mut headers);
    let version = if conn.sandbox_h2 {
        Version::HTTP_2
    } else {
        Version::HTTP_11
    };
    let reuse = reuse.map(|h1| (Arc::clone(&conn.upstream), h1));
    let body = ResponseBody::new(body, Replacer::new(patterns), Arc::clone(record), reuse);
    Ok(rebuilt(status, version, headers, body.boxed()))
}

/// A response for the sandbox from the upstream's status and (masked) headers, with
/// fresh parts: none of the upstream response's extensions, such as hyper's
/// `ReasonPhrase` (which the sandbox's side would write in the status line), go back.
fn rebuilt(
    status: StatusCode,
    version: Version,
    headers: HeaderMap,
    body: BoxBody<Bytes, BoxError>,
) -> Response {
    let mut response = http::Response::new(body);
    *response.status_mut() = status;
    *response.version_mut() = version;
    *response.headers_mut() = headers;
    response
}

/// The coding of a response body that the scan could not read, if it has one: a
/// `Content-Encoding` other than identity, or a transfer coding other than chunked.
/// None for a response without a body.
fn unscannable_coding(method: &Method, status: StatusCode, headers: &HeaderMap) -> Option<String> {
    if method == Method::HEAD
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return None;
    }
    for (name, title, plain) in [
        (header::CONTENT_ENCODING, "Content-Encoding", "identity"),
        (header::TRANSFER_ENCODING, "Transfer-Encoding", "chunked"),
    ] {
        for value in headers.get_all(name) {
            let text = String::from_utf8_lossy(value.as_bytes());
            if text
                .split(',')
                .map(str::trim)
                .any(|t| !t.is_empty() && !t.eq_ignore_ascii_case(plain))
            {
                return Some(format!("{title}: {}", text.escape_debug()));
            }
        }
    }
    None
}

/// Whether the request may go upstream: its host is the connection's, the rules allow
/// its method and path, and it carries no other host's placeholder in its headers or
/// URL. Returns the authority it names.
fn admit(
    conn: &Conn,
    req: &Request<Incoming>,
    path_and_query: &str,
    record: &Record,
) -> Result<Authority, Refusal> {
    let authority = conn.check_authority(req).map_err(|problem| Refusal {
        error: Some(problem.clone()),
        ..Refusal::forbidden(format!("vectraguard: refused: {problem}"), "host mismatch")
    })?;
    let method = req.method();
    let url = conn.url(req.uri().path());
    if method == Method::CONNECT {
        return Err(Refusal::forbidden(
            format!("vectraguard: refused CONNECT {url}: tunnels cannot be inspected"),
            "connect not supported",
        ));
    }
    if let Some(problem) = upgrade_problem(req) {
        return Err(Refusal {
            error: Some(problem.clone()),
            ..Refusal::forbidden(
                format!("vectraguard: refused {method} {url}: {problem}"),
                UPGRADE_REFUSED,
            )
        });
    }

    let policy = conn.shared.policy.current();
    let dest = policy.destination(conn.info.name.clone(), conn.info.addr);
    let decide = |method: &str, path: &str| {
        policy.decide_request(
            &dest,
            conn.info.port,
            &HttpRequest {
                scheme: conn.info.scheme,
                method,
                path,
            },
        )
    };
    let why = |decision: &vg_policy::network::Decision| match (&decision.rule, decision.reason) {
        (Some(rule), Reason::Rule) => format!("denied by '{}'", rule.text),
        (_, Reason::AmbiguousPath) => decision.to_string(),
        _ => {
            let rules = policy.request_rules(&dest, conn.info.port);
            let rules = if rules.is_empty() {
                "none".to_owned()
            } else {
                rules.join("; ")
            };
            format!("no rule allows it (rules for this host: {rules})")
        }
    };
    let record_decision = |decision: &vg_policy::network::Decision| {
        record.update(|ex| {
            ex.decision = if decision.allowed { "allow" } else { "deny" };
            ex.rule = decision.rule.as_ref().map(|r| r.text.clone());
            ex.reason = decision.reason.as_str().to_owned();
        });
    };
    // Methods are case-sensitive, but servers may not treat them so.
    let upper = method.as_str().to_ascii_uppercase();
    let path = req.uri().path();
    let decision = decide(&upper, path);
    record_decision(&decision);
    if !decision.allowed {
        return Err(Refusal::forbidden(
            format!("vectraguard: refused {method} {url}: {}", why(&decision)),
            decision.reason.as_str(),
        ));
    }

    // The method and path the upstream may run instead must be allowed too.
    let overrides = overrides(req.headers()).map_err(|problem| {
        record.update(|ex| {
            ex.decision = "deny";
            ex.rule = None;
            ex.reason = OVERRIDE_REFUSED.to_owned();
            ex.error = Some(problem.clone());
        });
        Refusal::forbidden(
            format!("vectraguard: refused {method} {url}: {problem}"),
            OVERRIDE_REFUSED,
        )
    })?;
    for (other_method, other_path, names) in overrides.alternatives(&upper, path) {
        let decision = decide(&other_method, &other_path);
        if decision.allowed {
            continue;
        }
        let asks = format!(
            "with {names} it asks for {other_method} {}",
            conn.url(&other_path)
        );
        record_decision(&decision);
        record.update(|ex| ex.error = Some(asks.clone()));
        return Err(Refusal::forbidden(
            format!(
                "vectraguard: refused {method} {url}: {asks}, and {}",
                why(&decision)
            ),
            decision.reason.as_str(),
        ));
    }

    if let Some(secret) = conn.secrets.find_foreign(req.headers(), path_and_query) {
        let name = conn.shared.secrets.name(secret).to_owned();
        let text = foreign_text(&name, conn.shared.secrets.hosts_text(secret));
        record.update(|ex| ex.exfiltration = Some(name));
        return Err(Refusal::forbidden(text, EXFILTRATION));
    }
    Ok(authority)
}

/// How a request is put for the upstream connection it goes on: origin form and `Host`
/// for HTTP/1.1, absolute form without `Host` for HTTP/2.
struct Shape<'a> {
    scheme: Scheme,
    authority: &'a Authority,
    path_and_query: &'a str,
}

impl Shape<'_> {
    fn apply(
        &self,
        req: Request<RequestBody>,
        sender: &Sender,
    ) -> Result<Request<RequestBody>, String> {
        let (mut parts, body) = req.into_parts();
        let mut uri = Uri::builder();
        match sender {
            Sender::H1(_) => {
                parts.version = Version::HTTP_11;
                let host =
                    HeaderValue::from_str(self.authority.as_str()).map_err(|e| e.to_string())?;
                parts.headers.insert(header::HOST, host);
            }
            Sender::H2(_) => {
                parts.version = Version::HTTP_2;
                parts.headers.remove(header::HOST);
                uri = uri
                    .scheme(match self.scheme {
                        Scheme::Http => http::uri::Scheme::HTTP,
                        Scheme::Https => http::uri::Scheme::HTTPS,
                    })
                    .authority(self.authority.clone());
            }
        }
        parts.uri = uri
            .path_and_query(self.path_and_query)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Request::from_parts(parts, body))
    }
}

type Sent =
    Result<http::Response<Incoming>, hyper::client::conn::TrySendError<Request<RequestBody>>>;

/// Sends `req`; gives back an HTTP/1.1 connection for reuse once the response is read.
async fn send(
    sender: Sender,
    req: Request<RequestBody>,
) -> (Sent, Option<crate::upstream::H1Sender>) {
    match sender {
        Sender::H1(mut h1) => {
            let sent = h1.send.try_send_request(req).await;
            (sent, Some(h1))
        }
        Sender::H2(mut h2) => (h2.try_send_request(req).await, None),
    }
}

fn foreign_text(name: &str, hosts: &str) -> String {
    format!(
        "vectraguard: refused: the request carries the placeholder of secret {name}, which is only for {hosts}"
    )
}

/// A hyper error with its causes, which never include header values.
fn describe(e: &hyper::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn version_text(version: Version) -> &'static str {
    match version {
        Version::HTTP_2 => "HTTP/2",
        Version::HTTP_10 => "HTTP/1.0",
        _ => "HTTP/1.1",
    }
}

/// An HTTP/1.1 upgrade request (`Connection: upgrade` and `Upgrade: …`).
fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        && headers
            .get_all(header::CONNECTION)
            .iter()
            .any(|v| tokens(v).any(|t| t.eq_ignore_ascii_case("upgrade")))
}

/// The protocols an `Upgrade` header asks for (or agrees to), lower-cased, as one text.
fn upgrade_tokens(headers: &HeaderMap) -> String {
    headers
        .get_all(header::UPGRADE)
        .iter()
        .flat_map(|v| {
            String::from_utf8_lossy(v.as_bytes())
                .split(',')
                .map(|t| t.trim().to_ascii_lowercase())
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why an upgrade request may not go on, if it is one that may not: only a WebSocket
/// handshake (HTTP/1.1, GET, `Upgrade: websocket`, `Sec-WebSocket-Key`) may, since
/// what follows any other (`h2c`, `TLS/1.2`) could not be inspected. An `Upgrade`
/// header without `Connection: upgrade` asks for nothing; it is not forwarded.
fn upgrade_problem<B>(req: &Request<B>) -> Option<String> {
    let headers = req.headers();
    if !is_upgrade(headers) {
        return None;
    }
    let protocols = upgrade_tokens(headers);
    if protocols != "websocket" {
        return Some(format!(
            "it asks to switch to '{}', and only WebSocket upgrades are allowed",
            protocols.escape_debug()
        ));
    }
    if req.version() != Version::HTTP_11 {
        return Some("a WebSocket handshake must be HTTP/1.1".to_owned());
    }
    if req.method() != Method::GET {
        return Some("a WebSocket handshake must be a GET".to_owned());
    }
    if !headers.contains_key(header::SEC_WEBSOCKET_KEY) {
        return Some("a WebSocket handshake needs a Sec-WebSocket-Key header".to_owned());
    }
    None
}

/// The methods and paths a request names in override headers, with the headers that
/// name them.
#[derive(Default)]
struct Overrides {
    methods: Vec<(String, &'static str)>,
    paths: Vec<(String, &'static str)>,
}

impl Overrides {
    /// Every (method, path, header names) the upstream might run besides `method` and
    /// `path`: each overriding method with each path, the request's or an overriding one.
    fn alternatives(&self, method: &str, path: &str) -> Vec<(String, String, String)> {
        let methods = std::iter::once((method.to_owned(), None))
            .chain(self.methods.iter().map(|(m, n)| (m.clone(), Some(*n))));
        let mut out = Vec::new();
        for (m, method_header) in methods {
            let paths = std::iter::once((path.to_owned(), None))
                .chain(self.paths.iter().map(|(p, n)| (p.clone(), Some(*n))));
            for (p, path_header) in paths {
                if m == method && p == path {
                    continue;
                }
                let names: Vec<&str> = [method_header, path_header].into_iter().flatten().collect();
                out.push((m.clone(), p, names.join(" and ")));
            }
        }
        out
    }
}

/// The overrides a request carries; an error says which header cannot be read.
fn overrides(headers: &HeaderMap) -> Result<Overrides, String> {
    let mut found = Overrides::default();
    let text = |name: &'static str, value: &HeaderValue| {
        value
            .to_str()
            .map(|t| t.trim().to_owned())
            .map_err(|_| format!("its {name} header is not plain text"))
    };
    for name in METHOD_OVERRIDES {
        for value in headers.get_all(name) {
            let method = text(name, value)?;
            if !method.is_empty() {
                found.methods.push((method.to_ascii_uppercase(), name));
            }
        }
    }
    for name in PATH_OVERRIDES {
        for value in headers.get_all(name) {
            let target = text(name, value)?;
            if target.is_empty() {
                continue;
            }
            let path = override_path(&target).ok_or_else(|| {
                format!(
                    "its {name} header '{}' is neither a path nor an absolute URL",
                    target.escape_debug()
                )
            })?;
            found.paths.push((path, name));
        }
    }
    Ok(found)
}

/// The path of an `X-Original-URL` or `X-Rewrite-URL` value: a path (with a query,
/// cut) or an absolute URL.
fn override_path(target: &str) -> Option<String> {
    if target.starts_with('/') {
        let end = target.find(['?', '#']).unwrap_or(target.len());
        return target.get(..end).map(str::to_owned);
    }
    let uri: Uri = target.parse().ok()?;
    uri.scheme()?;
    Some(uri.path().to_owned())
}

fn tokens(value: &HeaderValue) -> impl Iterator<Item = &str> {
    value
        .to_str()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// Removes the headers that concern one connection only (RFC 9110 §7.6.1), and those
/// that `Connection` names; for an upgrade, `Connection: upgrade` and `Upgrade` stay.
/// `Proxy-Authorization` is forwarded: the sandbox does not know there is a proxy.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap, upgrade: bool) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .flat_map(tokens)
        .filter(|t| !(upgrade && t.eq_ignore_ascii_case("upgrade")))
        .filter_map(|t| HeaderName::from_bytes(t.as_bytes()).ok())
        .filter(|n| n != header::PROXY_AUTHORIZATION && n != header::TE)
        .collect();
    for name in named {
        headers.remove(name);
    }
    let te_trailers = headers
        .get_all(header::TE)
        .iter()
        .any(|v| tokens(v).any(|t| t.eq_ignore_ascii_case("trailers")));
    for name in [
        header::CONNECTION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::PROXY_AUTHENTICATE,
    ] {
        headers.remove(name);
    }
    if !upgrade {
        headers.remove(header::UPGRADE);
    }
    for name in ["keep-alive", "proxy-connection"] {
        headers.remove(name);
    }
    if te_trailers {
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
    }
    if upgrade {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    }
}

/// Relays an upgraded connection (a WebSocket): the client's bytes as they are, the
/// server's with secret values turned into placeholders.
async fn tunnel(
    client: OnUpgrade,
    server: OnUpgrade,
    record: Arc<Record>,
    values: Arc<Patterns>,
    slot: Option<Arc<Slot>>,
) {
    // The upstream connection stays counted until the tunnel ends.
    let _slot = slot;
    let (client, server) = tokio::join!(client, server);
    let (client, server) = match (client, server) {
        (Ok(client), Ok(server)) => (TokioIo::new(client), TokioIo::new(server)),
        (Err(e), _) | (_, Err(e)) => {
            record.update(|ex| ex.error = Some(format!("the upgrade failed: {e}")));
            return;
        }
    };
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut server_read, mut server_write) = tokio::io::split(server);
    let nothing = Arc::new(Patterns::new(std::iter::empty()));
    let (up, down) = tokio::join!(
        pump(&mut client_read, &mut server_write, Replacer::new(nothing)),
        pump(&mut server_read, &mut client_write, Replacer::new(values)),
    );
    let count = |result: Result<u64, (u64, std::io::Error)>| match result {
        Ok(n) => (n, None),
        // A peer that closes without TLS close_notify has still said all it had to.
        Err((n, e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => (n, None),
        Err((n, e)) => (n, Some(e)),
    };
    let (sent, up_error) = count(up);
    let (received, down_error) = count(down);
    record.add_out(usize::try_from(sent).unwrap_or(usize::MAX));
    record.add_in(usize::try_from(received).unwrap_or(usize::MAX));
    if let Some(e) = up_error.or(down_error) {
        record.update(|ex| {
            ex.error
                .get_or_insert(format!("the upgraded connection failed: {e}"));
        });
    }
}

/// Copies `from` to `to` through `replacer`; returns the bytes written.
async fn pump<R, W>(
    from: &mut R,
    to: &mut W,
    mut replacer: Replacer,
) -> Result<u64, (u64, std::io::Error)>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut written = 0u64;
    let mut buf = bytes::BytesMut::with_capacity(64 * 1024);
    loop {
        buf.reserve(64 * 1024);
        let read = if replacer.releasable() {
            tokio::select! {
                read = from.read_buf(&mut buf) => read,
                () = tokio::time::sleep(crate::body::PAUSE) => {
                    if let Some(rest) = replacer.release_after_pause() {
                        to.write_all(&rest).await.map_err(|e| (written, e))?;
                        to.flush().await.map_err(|e| (written, e))?;
                        written += rest.len() as u64;
                    }
                    continue;
                }
            }
        } else {
            from.read_buf(&mut buf).await
        };
        let n = match read {
            Ok(n) => n,
            Err(e) => {
                let _ = to.shutdown().await;
                return Err((written, e));
            }
        };
        let out = if n == 0 {
            replacer.finish()
        } else {
            replacer.feed(buf.split().freeze())
        };
        to.write_all(&out).await.map_err(|e| (written, e))?;
        to.flush().await.map_err(|e| (written, e))?;
        written += out.len() as u64;
        if n == 0 {
            let _ = to.shutdown().await;
            return Ok(written);
        }
    }
}

impl Conn {
    /// The authority the request names (`:authority`, an absolute URI's, or `Host`),
    /// if it is the connection's name (or address) and port.
    pub(crate) fn check_authority<B>(&self, req: &Request<B>) -> Result<Authority, String> {
        let host_header = req.headers().get(header::HOST);
        let text = match (req.uri().authority(), host_header) {
            (Some(uri), Some(host))
                if !host
                    .as_bytes()
                    .eq_ignore_ascii_case(uri.as_str().as_bytes()) =>
            {
                return Err(format!(
                    "the request's authority '{uri}' and its Host '{}' differ",
                    String::from_utf8_lossy(host.as_bytes()).escape_debug()
                ));
            }
            (Some(uri), _) => uri.as_str().to_owned(),
            (None, Some(host)) => host
                .to_str()
                .map_err(|_| "the Host header is not plain text".to_owned())?
                .to_owned(),
            (None, None) => {
                return Err(format!(
                    "the request has no Host header (the connection is to '{}')",
                    self.host
                ));
            }
        };
        let mismatch = || {
            format!(
                "Host '{}' does not match the connection's {} '{}'",
                text.escape_debug(),
                if self.info.name.is_some() {
                    "name"
                } else {
                    "address"
                },
                self.host
            )
        };
        let authority: Authority = text.parse().map_err(|_| mismatch())?;
        if authority.as_str().contains('@') {
            return Err(mismatch());
        }
        if let Some(port) = authority.port_u16()
            && port != self.info.port
        {
            return Err(format!(
                "Host '{}' names port {port}, but the connection is to port {}",
                text.escape_debug(),
                self.info.port
            ));
        }
        let host = authority.host();
        let same = match &self.info.name {
            Some(name) => HostName::parse(host).is_ok_and(|h| h == *name),
            None => host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .is_ok_and(|ip| canonical(ip) == canonical(self.info.addr)),
        };
        if same { Ok(authority) } else { Err(mismatch()) }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| {
                (
                    HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    HeaderValue::from_str(v).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn hop_by_hop_headers_are_stripped() {
        let mut h = headers(&[
            ("connection", "keep-alive, x-private"),
            ("keep-alive", "timeout=5"),
            ("x-private", "1"),
            ("transfer-encoding", "chunked"),
            ("te", "gzip, trailers"),
            ("upgrade", "websocket"),
            ("proxy-connection", "keep-alive"),
            ("proxy-authorization", "Basic eDp5"),
            ("authorization", "Bearer x"),
            ("x-kept", "yes"),
        ]);
        strip_hop_by_hop(&mut h, false);
        let mut names: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            ["authorization", "proxy-authorization", "te", "x-kept"]
        );
        assert_eq!(h["te"], "trailers");

        let mut h = headers(&[
            ("connection", "Upgrade"),
            ("upgrade", "websocket"),
            ("sec-websocket-key", "abc"),
        ]);
        assert!(is_upgrade(&h));
        strip_hop_by_hop(&mut h, true);
        assert_eq!(h["connection"], "upgrade");
        assert_eq!(h["upgrade"], "websocket");
        assert_eq!(h["sec-websocket-key"], "abc");
        assert!(!is_upgrade(&headers(&[("upgrade", "websocket")])));
    }
}
