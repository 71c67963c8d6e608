//! The HTTP side: axum routes over the index, the records (`vg_records`) and the
//! running sessions' control channels (`vg_control`), behind [`crate::auth`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_stream::wrappers::ReceiverStream;
use vg_control::protocol::{ControlError, RuleAction};
use vg_control::{ClientError, ControlClient, Scope, Verdict as Decision};
use vg_records::layout::{self, RecordFile};
use vg_records::{RecordsError, SessionStore, Status};

use crate::auth::{self, Auth, Facts, Verdict};
use crate::index::{self, Index};
use crate::live::Bus;
use crate::views;

const PAGE: &str = include_str!("../assets/index.html");
const SCRIPT: &str = include_str!("../assets/app.js");
const STYLE: &str = include_str!("../assets/app.css");
const ICON: &str = include_str!("../assets/icon.svg");

/// The most bytes of stdout or stderr one request returns.
const OUTPUT_CHUNK: u64 = 4 * 1024 * 1024;
/// The most bytes of a terminal recording the replay is given (whole lines).
const CAST_CHUNK: u64 = 32 * 1024 * 1024;

/// What every handler shares.
pub struct AppState {
    pub store: SessionStore,
    pub auth: Auth,
    pub index: Arc<RwLock<Index>>,
    pub bus: Bus,
}

type Shared = Arc<AppState>;

/// An API error: a status and a message that says what to do.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(json!({"error": self.message}))).into_response()
    }
}

impl From<RecordsError> for ApiError {
    fn from(e: RecordsError) -> Self {
        let status = match &e {
            RecordsError::UnknownSession { .. } => StatusCode::NOT_FOUND,
            RecordsError::AmbiguousSession { .. } => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self::new(status, e.to_string())
    }
}

impl From<ClientError> for ApiError {
    fn from(e: ClientError) -> Self {
        let status = match &e {
            ClientError::NotRunning { .. } | ClientError::Gone { .. } => StatusCode::CONFLICT,
            ClientError::NotPermitted { .. } => StatusCode::FORBIDDEN,
            ClientError::Refused { error, .. } => match error {
                ControlError::UnknownRequest { .. } => StatusCode::NOT_FOUND,
                ControlError::AlreadyDecided { .. } | ControlError::Unsupported { .. } => {
                    StatusCode::CONFLICT
                }
                ControlError::BadRule { .. } => StatusCode::BAD_REQUEST,
                ControlError::Busy => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::BAD_GATEWAY,
            },
            ClientError::Io { .. } | ClientError::Protocol { .. } => StatusCode::BAD_GATEWAY,
        };
        Self::new(status, e.to_string())
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// Runs blocking work (files, control sockets) off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
        Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the request failed: {e}"),
        ))
    })
}

/// The routes, behind the guard.
pub fn router(state: Shared) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/approvals", get(page))
        .route("/sessions/{id}", get(page))
        .route("/app.js", get(script))
        .route("/app.css", get(style))
        .route("/icon.svg", get(icon))
        .route("/api/sessions", get(sessions))
        .route("/api/sessions/{id}", get(session))
        .route("/api/sessions/{id}/commands", get(commands))
        .route("/api/sessions/{id}/events", get(events))
        .route("/api/sessions/{id}/output/{stream}", get(output))
        .route("/api/sessions/{id}/cast", get(cast))
        .route("/api/sessions/{id}/archive", get(archive))
        .route("/api/sessions/{id}/net", get(net_rules).post(net_add))
        .route("/api/sessions/{id}/stop", post(stop))
        .route("/api/sessions/{id}/approvals/{req}", post(decide))
        .route("/api/approvals", get(approvals))
        .route("/api/live", get(live))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(Arc::clone(&state), guard))
        .with_state(state)
}

fn header_str(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Headers every answer carries: no caching, no framing, no sniffing, no
/// referrer (the login URL has the token), and a policy that runs only our
/// own script.
fn harden(headers: &mut HeaderMap) {
    for (name, value) in [
        (header::CACHE_CONTROL, "no-store"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        ),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

/// Every request passes here first: see [`crate::auth`].
async fn guard(State(state): State<Shared>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    // No cookie is read (or ever set): cookies reach every port of this host.
    let facts = Facts {
        method: request.method().as_str(),
        path: request.uri().path(),
        host: auth::request_host(
            request.uri().authority().map(|a| a.as_str()),
            header_str(headers, header::HOST),
        ),
        peer,
        authorization: header_str(headers, header::AUTHORIZATION),
        content_type: header_str(headers, header::CONTENT_TYPE),
        origin: header_str(headers, header::ORIGIN),
        sec_fetch_site: header_str(headers, "sec-fetch-site"),
    };
    let mut response = match state.auth.check(&facts) {
        Verdict::Pass => next.run(request).await,
        Verdict::Unauthorized(why) => (
            StatusCode::UNAUTHORIZED,
            format!("vectraguard dashboard: {why}\n"),
        )
            .into_response(),
        Verdict::Forbidden(why) => (
            StatusCode::FORBIDDEN,
            format!("vectraguard dashboard: {why}\n"),
        )
            .into_response(),
    };
    // Whatever a handler did, this server never asks a browser to keep a cookie.
    response.headers_mut().remove(header::SET_COOKIE);
    harden(response.headers_mut());
    response
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such page")
}

/// The page shell: the same for every page and every visitor, no record data
/// (the script fetches it with the token).
async fn page() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE).into_response()
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}

async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

async fn icon() -> Response {
    ([(header::CONTENT_TYPE, "image/svg+xml")], ICON).into_response()
}

#[derive(Debug, Deserialize, Default)]
struct ListParams {
    agent: Option<String>,
    name: Option<String>,
    status: Option<String>,
    since: Option<String>,
    until: Option<String>,
    limit: Option<usize>,
    cursor: Option<String>,
}

fn nonempty(s: Option<String>) -> Option<String> {
    s.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

fn parse_time(what: &str, s: Option<String>) -> ApiResult<Option<SystemTime>> {
    nonempty(s)
        .map(|s| {
            vg_records::parse_since(&s, SystemTime::now())
                .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("{what}={s}: {e}")))
        })
        .transpose()
}

async fn sessions(
    State(state): State<Shared>,
    Query(p): Query<ListParams>,
) -> ApiResult<Json<index::Page>> {
    let status = nonempty(p.status)
        .map(|s| {
            s.parse::<Status>()
                .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("status={s}: {e}")))
        })
        .transpose()?;
    let q = index::Query {
        agent: nonempty(p.agent),
        name: nonempty(p.name),
        status,
        since: parse_time("since", p.since)?,
        until: parse_time("until", p.until)?,
        limit: p.limit.unwrap_or(index::DEFAULT_LIMIT),
        cursor: nonempty(p.cursor),
    };
    let index = state
        .index
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    index
        .page(&q)
        .map(Json)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))
}

/// The session folder `id` names, through `SessionStore::resolve` (never a path
/// joined from the request).
fn resolve(state: &AppState, id: &str) -> ApiResult<PathBuf> {
    Ok(state.store.resolve(id)?)
}

fn id_of(dir: &std::path::Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

async fn session(State(state): State<Shared>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    blocking(move || {
        let info = state.store.load(&id)?;
        let running = info.status == Status::Running;
        let integrity = views::integrity(state.store.root(), &info.dir, running);
        let has = |f: RecordFile| layout::file_path(&info.dir, f).is_file();
        let m = &info.metadata;
        Ok(Json(json!({
            "id": id_of(&info.dir),
            "status": info.status,
            "running": running,
            "metadata": m,
            "layers": m.layers,
            "limits": m.limits,
            "network": m.network,
            "integrity": integrity,
            "has_cast": has(RecordFile::Cast),
            "sizes": {
                "stdout": std::fs::metadata(layout::file_path(&info.dir, RecordFile::Stdout)).map(|m| m.len()).unwrap_or(0),
                "stderr": std::fs::metadata(layout::file_path(&info.dir, RecordFile::Stderr)).map(|m| m.len()).unwrap_or(0),
            },
        })))
    })
    .await
}

fn read_record(dir: &std::path::Path, file: RecordFile) -> ApiResult<String> {
    let path = layout::file_path(dir, file);
    let read = crate::archive::open_record(&path).and_then(|mut f| {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut b).map(|_| b)
    });
    match read {
        Ok(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot read {}: {e}", path.display()),
        )),
    }
}

async fn commands(State(state): State<Shared>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    blocking(move || {
        let dir = resolve(&state, &id)?;
        let (execs, unreadable) = views::execs(&read_record(&dir, RecordFile::Commands)?);
        Ok(Json(
            json!({"session": id_of(&dir), "execs": execs, "unreadable": unreadable}),
        ))
    })
    .await
}

async fn events(State(state): State<Shared>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    blocking(move || {
        let dir = resolve(&state, &id)?;
        let events = views::events(&read_record(&dir, RecordFile::Events)?);
        Ok(Json(json!({"session": id_of(&dir), "events": events})))
    })
    .await
}

#[derive(Debug, Deserialize, Default)]
struct OutputParams {
    from: Option<u64>,
}

async fn output(
    State(state): State<Shared>,
    Path((id, stream)): Path<(String, String)>,
    Query(p): Query<OutputParams>,
) -> ApiResult<Response> {
    let file = match stream.as_str() {
        "stdout" => RecordFile::Stdout,
        "stderr" => RecordFile::Stderr,
        _ => {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "output is stdout or stderr",
            ));
        }
    };
    let (bytes, next) = blocking(move || {
        use std::io::{Read, Seek, SeekFrom};
        let dir = resolve(&state, &id)?;
        let path = layout::file_path(&dir, file);
        let mut f = match crate::archive::open_record(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
            Err(e) => {
                return Err(ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("cannot read {}: {e}", path.display()),
                ));
            }
        };
        let from = p.from.unwrap_or(0);
        let io =
            |e: std::io::Error| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
        f.seek(SeekFrom::Start(from)).map_err(io)?;
        let mut bytes = Vec::new();
        f.take(OUTPUT_CHUNK).read_to_end(&mut bytes).map_err(io)?;
        let next = from + u64::try_from(bytes.len()).unwrap_or(0);
        Ok((bytes, next))
    })
    .await?;
    let mut r = ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], bytes).into_response();
    if let Ok(v) = HeaderValue::from_str(&next.to_string()) {
        r.headers_mut().insert("x-next-offset", v);
    }
    Ok(r)
}

/// Reads at most `cap` bytes of `path`, cut after the last whole line when the
/// file is longer; with the file's size when it was cut. A sandboxed program
/// decides how big its terminal recording gets (up to the record limit, 1 GiB
/// by default, and more once JSON-escaped), so it must never be read whole.
fn read_lines_capped(path: &std::path::Path, cap: u64) -> std::io::Result<(Vec<u8>, Option<u64>)> {
    use std::io::Read;
    let file = crate::archive::open_record(path)?;
    let size = file.metadata()?.len();
    let mut bytes = Vec::new();
    file.take(cap).read_to_end(&mut bytes)?;
    if size <= cap {
        return Ok((bytes, None));
    }
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    bytes.truncate(whole);
    Ok((bytes, Some(size)))
}

async fn cast(State(state): State<Shared>, Path(id): Path<String>) -> ApiResult<Response> {
    let (bytes, cut) = blocking(move || {
        let dir = resolve(&state, &id)?;
        let path = layout::file_path(&dir, RecordFile::Cast);
        if !path.is_file() {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "this session has no terminal recording (only `sandbox shell` and `run -t` sessions do)",
            ));
        }
        read_lines_capped(&path, CAST_CHUNK).map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot read {}: {e}", path.display()),
            )
        })
    })
    .await?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let mut r = ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response();
    // The whole recording stays in the archive and `vectraguard logs`.
    if let Some(size) = cut
        && let Ok(v) = HeaderValue::from_str(&size.to_string())
    {
        r.headers_mut().insert("x-cast-truncated-from", v);
    }
    Ok(r)
}

async fn archive(State(state): State<Shared>, Path(id): Path<String>) -> ApiResult<Response> {
    let dir = blocking(move || resolve(&state, &id)).await?;
    let name = id_of(&dir);
    // Session folder names are `session-<time>-<hex>`; anything else is left out
    // of the header rather than quoted.
    let safe: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let err_tx = tx.clone();
    let top = safe.clone();
    tokio::task::spawn_blocking(move || {
        if let Err(e) = crate::archive::write(&dir, &top, crate::archive::ChannelWriter::new(tx)) {
            let _ = err_tx.blocking_send(Err(e));
        }
    });
    let body = Body::from_stream(ReceiverStream::new(rx));
    let mut r = Response::new(body);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/gzip"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{safe}.tar.gz\"")) {
        r.headers_mut().insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(r)
}

/// Connects to the running session `id` names.
fn connect(state: &AppState, id: &str) -> ApiResult<ControlClient> {
    let dir = resolve(state, id)?;
    Ok(ControlClient::connect(&vg_control::socket_path(&dir))?)
}

async fn net_rules(State(state): State<Shared>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    blocking(move || {
        let rules = connect(&state, &id)?.net_rules()?;
        Ok(Json(json!({"rules": rules})))
    })
    .await
}

#[derive(Debug, Deserialize)]
struct NetBody {
    action: RuleAction,
    target: String,
}

async fn net_add(
    State(state): State<Shared>,
    Path(id): Path<String>,
    Json(body): Json<NetBody>,
) -> ApiResult<Json<Value>> {
    blocking(move || {
        let rule = connect(&state, &id)?.net_add(body.action, body.target.trim())?;
        Ok(Json(json!({"rule": rule})))
    })
    .await
}

#[derive(Debug, Deserialize, Default)]
struct StopBody {
    #[serde(default)]
    kill: bool,
}

async fn stop(
    State(state): State<Shared>,
    Path(id): Path<String>,
    Json(body): Json<StopBody>,
) -> ApiResult<Json<Value>> {
    blocking(move || {
        connect(&state, &id)?.stop(body.kill)?;
        Ok(Json(json!({"stopping": true})))
    })
    .await
}

#[derive(Debug, Deserialize)]
struct DecideBody {
    decision: Decision,
    #[serde(default)]
    scope: Scope,
}

async fn decide(
    State(state): State<Shared>,
    Path((id, req)): Path<(String, u64)>,
    Json(body): Json<DecideBody>,
) -> ApiResult<Json<Value>> {
    blocking(move || {
        connect(&state, &id)?.decide(req, body.decision, body.scope)?;
        Ok(Json(json!({"decided": req})))
    })
    .await
}

async fn approvals(State(state): State<Shared>) -> ApiResult<Json<Value>> {
    blocking(move || {
        let running = state
            .index
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .running();
        let mut pending = Vec::new();
        let mut unreachable = Vec::new();
        for (id, dir) in running {
            let listed = ControlClient::connect(&vg_control::socket_path(&dir))
                .and_then(|mut c| c.approvals());
            match listed {
                Ok(list) => {
                    for p in list {
                        let mut v = serde_json::to_value(&p).unwrap_or(Value::Null);
                        if let Some(o) = v.as_object_mut() {
                            o.insert("session".into(), Value::from(id.clone()));
                        }
                        pending.push(v);
                    }
                }
                // Ended meanwhile, or never asked (no `--ask`): nothing held.
                Err(e) if vg_control::client::is_not_running(&e) => {}
                Err(e) => unreachable.push(e.to_string()),
            }
        }
        Ok(Json(
            json!({"pending": pending, "unreachable": unreachable}),
        ))
    })
    .await
}

async fn live(State(state): State<Shared>) -> Response {
    let mut rx = state.bus.subscribe();
    let (tx, out) = tokio::sync::mpsc::channel::<Result<SseEvent, std::convert::Infallible>>(256);
    tokio::spawn(async move {
        loop {
            let event = match rx.recv().await {
                Ok(e) => SseEvent::default().event(e.kind).data(e.data.to_string()),
                // Too slow a reader missed events: tell the page to reload.
                Err(broadcast::error::RecvError::Lagged(n)) => SseEvent::default()
                    .event("resync")
                    .data(json!({"missed": n}).to_string()),
                Err(broadcast::error::RecvError::Closed) => break,
            };
            if tx.send(Ok(event)).await.is_err() {
                break;
            }
        }
    });
    Sse::new(ReceiverStream::new(out))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Red-team finding: `/cast` read the whole recording into memory (twice,
    /// with the lossy copy); a sandboxed program can make it gigabytes.
    #[test]
    fn a_terminal_recording_is_read_up_to_its_cap_in_whole_lines() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("tty.cast");
        let line = "[0.1, \"o\", \"\\u001b[2J\"]\n";
        std::fs::write(&path, line.repeat(1000)).unwrap();
        let size = u64::try_from(line.len() * 1000).unwrap();
        let (all, cut) = read_lines_capped(&path, size).unwrap();
        assert_eq!((all.len(), cut), (line.len() * 1000, None));
        let cap = 10 * u64::try_from(line.len()).unwrap() + 5;
        let (some, cut) = read_lines_capped(&path, cap).unwrap();
        assert_eq!(cut, Some(size));
        assert_eq!(some, line.repeat(10).as_bytes());
        // One line longer than the cap: nothing rather than half a line.
        let (none, cut) = read_lines_capped(&path, 3).unwrap();
        assert!(none.is_empty());
        assert_eq!(cut, Some(size));
    }
}
