//! Vectra Guard's live dashboard (`vectraguard dashboard`): a local web page over
//! the same libraries as the CLI. Sessions are listed from an in-memory index of
//! `vg_records` summaries ([`index`]) that a watcher ([`live`]) keeps up to date
//! and that feeds server-sent events; a session's records are read through
//! `vg_records` ([`views`], [`archive`]); running sessions are reached through
//! their control sockets with `vg_control`, so the dashboard can do no more than
//! the user who started it. Who may use it is decided in [`auth`]; the page is
//! plain HTML, CSS and JavaScript embedded in the binary (`assets/`).
#![forbid(unsafe_code)]

pub mod archive;
pub mod auth;
pub mod index;
pub mod live;
pub mod server;
pub mod views;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use anyhow::{Context, Result};
use vg_records::SessionStore;

/// How to serve.
#[derive(Debug, Clone)]
pub struct Options {
    pub listen: SocketAddr,
    /// The records folder (`vg_session::home::records_root`).
    pub root: PathBuf,
}

/// What the caller is told once the dashboard listens.
#[derive(Debug, Clone)]
pub struct Started {
    pub bound: SocketAddr,
    /// `http://HOST:PORT/?token=TOKEN`.
    pub url: String,
}

/// Why serving failed, for the CLI to word.
#[derive(Debug)]
pub enum ServeError {
    /// The address is taken (another dashboard?).
    AddrInUse(SocketAddr),
    Other(anyhow::Error),
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::AddrInUse(addr) => write!(
                f,
                "cannot listen on {addr}: the address is already in use (another dashboard?); \
                 choose another with --listen, e.g. --listen 127.0.0.1:0 for any free port"
            ),
            ServeError::Other(e) => write!(f, "{e:#}"),
        }
    }
}

impl std::error::Error for ServeError {}

/// The URL to print: the bound address, or the loopback one for an unspecified
/// bind (`0.0.0.0`), which the page can always be reached by from this machine.
fn url_of(bound: SocketAddr, token: &str) -> String {
    let ip = match bound.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_owned(),
        ip if ip.is_unspecified() => "[::1]".to_owned(),
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
        std::net::IpAddr::V4(v4) => v4.to_string(),
    };
    format!("http://{ip}:{}/?token={token}", bound.port())
}

/// Serves until SIGINT or SIGTERM; `ready` is called once listening.
pub fn serve(options: Options, ready: impl FnOnce(&Started)) -> Result<(), ServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the dashboard's runtime")
        .map_err(ServeError::Other)?;
    let result = runtime.block_on(run(options, ready));
    // SSE connections never end on their own: do not wait for them.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    result
}

async fn run(options: Options, ready: impl FnOnce(&Started)) -> Result<(), ServeError> {
    let listener = match tokio::net::TcpListener::bind(options.listen).await {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            return Err(ServeError::AddrInUse(options.listen));
        }
        Err(e) => {
            return Err(ServeError::Other(
                anyhow::Error::new(e).context(format!("cannot listen on {}", options.listen)),
            ));
        }
    };
    let bound = listener
        .local_addr()
        .context("cannot read the bound address")
        .map_err(ServeError::Other)?;
    let other = |e: std::io::Error| ServeError::Other(anyhow::Error::new(e));
    let token = auth::random_hex()
        .context("cannot read /dev/urandom for the token")
        .map_err(ServeError::Other)?;
    let auth = auth::Auth::new(token, bound);

    let index = Arc::new(RwLock::new(index::Index::default()));
    let (bus, _) = tokio::sync::broadcast::channel(4096);
    let watcher = live::Watcher::new(
        SessionStore::at(&options.root),
        Arc::clone(&index),
        bus.clone(),
    );
    std::thread::Builder::new()
        .name("vg-dashboard-watch".into())
        .spawn(move || watcher.run())
        .map_err(other)?;

    let started = Started {
        bound,
        url: url_of(bound, auth.token()),
    };
    let state = Arc::new(server::AppState {
        store: SessionStore::at(&options.root),
        auth,
        index,
        bus,
    });
    let app = server::router(state).into_make_service_with_connect_info::<SocketAddr>();
    ready(&started);
    let served = axum::serve(listener, app);
    tokio::select! {
        r = served => r.context("the dashboard's server failed").map_err(ServeError::Other),
        () = stop_signal() => Ok(()),
    }
}

/// SIGINT or SIGTERM.
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut int), Ok(mut term)) => {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        }
        // Without handlers the default action ends the process anyway.
        _ => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_url_can_be_opened_from_this_machine() {
        let t = "ab";
        assert_eq!(
            url_of("127.0.0.1:7420".parse().unwrap(), t),
            "http://127.0.0.1:7420/?token=ab"
        );
        assert_eq!(
            url_of("0.0.0.0:80".parse().unwrap(), t),
            "http://127.0.0.1:80/?token=ab"
        );
        assert_eq!(
            url_of("[::1]:9".parse().unwrap(), t),
            "http://[::1]:9/?token=ab"
        );
        let e = ServeError::AddrInUse("127.0.0.1:7420".parse().unwrap()).to_string();
        assert!(
            e.contains("already in use") && e.contains("--listen 127.0.0.1:0"),
            "{e}"
        );
    }
}
