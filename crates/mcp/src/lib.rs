//! Vectra Guard's MCP server (`vectraguard mcp serve`): the code-execution tools of
//! seed 002 over persistent sandboxes, on stdio or on streamable HTTP (loopback only,
//! bearer token). A front end like the CLI: sandboxes are made, used and removed
//! through the same session library and channels (`vg_session::persistent`,
//! `vg_control`).
#![deny(unsafe_code)]

pub mod elicit;
pub mod paths;
pub mod sandboxes;
pub mod tools;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use rmcp::ServiceExt;

pub use sandboxes::Settings;
pub use tools::CodeTools;

/// Serves one client on stdin and stdout until it hangs up; its sandbox is removed then.
pub fn serve_stdio(settings: Settings) -> Result<()> {
    sandboxes::sweep(&settings);
    let settings = Arc::new(settings);
    sandboxes::Pool::fill(&settings);
    let runtime = runtime()?;
    let served = runtime.block_on(async {
        let tools = CodeTools::new(Arc::clone(&settings));
        let service = tools
            .clone()
            .serve(rmcp::transport::stdio())
            .await
            .context("cannot start the MCP session on stdio")?;
        let _ = service.waiting().await;
        tools.cleanup().await;
        Ok(())
    });
    sandboxes::Pool::drain(&settings);
    served
}

/// Serves streamable HTTP on `addr` (a loopback address), each request carrying
/// `Authorization: Bearer TOKEN`; `ready` is told the address once it listens.
pub fn serve_http(
    settings: Settings,
    addr: SocketAddr,
    token: String,
    ready: impl FnOnce(SocketAddr),
) -> Result<()> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    if !addr.ip().is_loopback() {
        bail!(
            "--http {addr}: the MCP server listens on loopback only (127.0.0.1 or [::1]); put a proxy in front to reach it from elsewhere"
        );
    }
    sandboxes::sweep(&settings);
    let settings = Arc::new(settings);
    sandboxes::Pool::fill(&settings);
    let runtime = runtime()?;
    let pool_owner = Arc::clone(&settings);
    let served = runtime.block_on(async move {
        let made = Arc::clone(&settings);
        let service = StreamableHttpService::new(
            move || Ok(CodeTools::new(Arc::clone(&made))),
            LocalSessionManager::default().into(),
            StreamableHttpServerConfig::default(),
        );
        let expected = format!("Bearer {token}");
        let router =
            axum::Router::new()
                .nest_service("/mcp", service)
                .layer(axum::middleware::from_fn(
                    move |request: axum::extract::Request, next: axum::middleware::Next| {
                        let allowed = request
                            .headers()
                            .get(axum::http::header::AUTHORIZATION)
                            .is_some_and(|v| v.as_bytes() == expected.as_bytes());
                        async move {
                            if allowed {
                                next.run(request).await
                            } else {
                                axum::response::IntoResponse::into_response((
                                    axum::http::StatusCode::UNAUTHORIZED,
                                    "vectraguard mcp: missing or wrong bearer token\n",
                                ))
                            }
                        }
                    },
                ));
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        ready(listener.local_addr()?);
        axum::serve(listener, router)
            .with_graceful_shutdown(async {
                // Ctrl-C or SIGTERM: the pool's sandboxes are removed on the way out.
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(mut term) => {
                        tokio::select! {
                            _ = tokio::signal::ctrl_c() => {}
                            _ = term.recv() => {}
                        }
                    }
                    Err(_) => {
                        let _ = tokio::signal::ctrl_c().await;
                    }
                }
            })
            .await
            .context("the HTTP server failed")
    });
    sandboxes::Pool::drain(&pool_owner);
    served
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}
