//! The MCP tools of seed 002: `code_execute`, `code_install_package`,
//! `code_write_file`, `code_read_file`, `code_list_files`, `code_destroy_sandbox`.
//!
//! One [`CodeTools`] serves one client connection. Without `sandbox_id`, its calls
//! share one persistent sandbox, made on first use; with it, they run in that named
//! sandbox. Every command the tools start runs through the sandbox's exec channel, so
//! it is confined, rated by the approval gate (`--ask`, held until someone decides with
//! `vectraguard approve`), and recorded like any other.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerInfo};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;
use tokio::sync::Mutex;
use vg_session::persistent::{Captured, Ended};

use crate::paths::{self, GUARD};
use crate::sandboxes::{self, Sandbox, Settings};

/// The longest code, and file, a call may carry.
pub const MAX_INPUT: usize = 1024 * 1024;
/// `timeout` when a call gives none, and the most it may ask for.
const DEFAULT_TIMEOUT: u64 = 30;
const MAX_TIMEOUT: u64 = 600;
/// How long a file tool may take (a FIFO in the workspace never ends a read).
const FILE_TIMEOUT: Duration = Duration::from_secs(DEFAULT_TIMEOUT);

/// `code_list_files`' script: one line per entry of `$p`, type (f, d, l, p, s, c,
/// b), size and name, sorted by name. POSIX `sh`, `test` and `stat -c %s` only, so
/// that it runs on BusyBox images as on GNU systems (GNU `find -printf` would not).
const LIST: &str = r#"[ -d "$p" ] || { echo "$p is not a folder" >&2; exit 2; }
for f in "$p"/* "$p"/.[!.]* "$p"/..?*; do
[ -e "$f" ] || [ -L "$f" ] || continue
if [ -L "$f" ]; then y=l; elif [ -d "$f" ]; then y=d; elif [ -f "$f" ]; then y=f
elif [ -p "$f" ]; then y=p; elif [ -S "$f" ]; then y=s; elif [ -c "$f" ]; then y=c
elif [ -b "$f" ]; then y=b; else y=u; fi
printf '%s %s %s\n' "$y" "$(stat -c %s "$f")" "${f##*/}"
done | sort -k3
"#;

/// Inline in the schema, as seed 002 shows it (an `enum` on the property itself).
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum Language {
    Python,
    Javascript,
    Shell,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ExecuteRequest {
    /// Programming language
    pub language: Language,
    /// Code to execute
    pub code: String,
    /// Execution timeout in seconds (default 30)
    pub timeout: Option<u64>,
    /// Enable network access (requires approval); with `allowed_domains`
    #[serde(default)]
    pub network_enabled: bool,
    /// Allowlisted domains (when network enabled)
    pub allowed_domains: Option<Vec<String>>,
    /// A persistent sandbox to run in (`vectraguard sandbox ls`); default: this
    /// connection's own
    pub sandbox_id: Option<String>,
    /// Seconds to wait for the result (default 50, under the 60 s most clients
    /// wait): past it the call returns a `handle` that `code_result` polls, while the
    /// code runs on (or waits for approval)
    pub wait: Option<u64>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ResultRequest {
    /// The `handle` a `code_execute` returned
    pub handle: String,
    /// Seconds to wait for it to end (default 50)
    pub wait: Option<u64>,
}

#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum Registry {
    Pypi,
    Npm,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct InstallRequest {
    /// The package, optionally with a version (`requests`, `requests==2.32.3`, `left-pad@1.3.0`)
    pub package: String,
    /// Where it comes from: pypi (default) or npm
    pub registry: Option<Registry>,
    pub sandbox_id: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct WriteRequest {
    /// A path inside /workspace (relative to it, or absolute)
    pub path: String,
    /// The file's new contents (UTF-8 text)
    pub content: String,
    pub sandbox_id: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ReadRequest {
    /// A path inside /workspace (relative to it, or absolute)
    pub path: String,
    pub sandbox_id: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ListRequest {
    /// A folder inside /workspace (default: /workspace)
    pub path: Option<String>,
    pub sandbox_id: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct DestroyRequest {
    /// The sandbox to remove; default: this connection's own
    pub sandbox_id: Option<String>,
}

/// The tools of one client connection.
#[derive(Clone)]
pub struct CodeTools {
    settings: Arc<Settings>,
    /// This connection's own sandbox, once made.
    own: Arc<Mutex<Option<Sandbox>>>,
    /// Calls that outlasted their `wait`, by handle.
    running: Arc<Mutex<HashMap<String, Running>>>,
    /// Built once per connection, not per call.
    tool_router: ToolRouter<CodeTools>,
}

type Running = tokio::task::JoinHandle<Result<CallToolResult, McpError>>;

/// Unfinished calls one connection may leave to poll.
const MAX_RUNNING: usize = 64;
/// `wait` when a call gives none.
const DEFAULT_WAIT: u64 = 50;

/// The answer of a call still running: its handle.
fn still_running(handle: &str) -> CallToolResult {
    let body = serde_json::json!({
        "running": true,
        "handle": handle,
        "hint": "call code_result with this handle to wait for the result",
    });
    let mut result = CallToolResult::success(vec![ContentBlock::text(
        serde_json::to_string_pretty(&body).unwrap_or_default(),
    )]);
    result.structured_content = Some(body);
    result
}

fn invalid(message: impl Into<String>) -> McpError {
    McpError::invalid_params(message.into(), None)
}

fn internal(error: &anyhow::Error) -> McpError {
    McpError::internal_error(format!("{error:#}"), None)
}

/// Runs blocking work off the runtime's threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> Result<T, McpError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(internal(&e)),
        Err(e) => Err(McpError::internal_error(e.to_string(), None)),
    }
}

fn timeout_of(seconds: Option<u64>) -> Result<Duration, McpError> {
    match seconds.unwrap_or(DEFAULT_TIMEOUT) {
        0 => Err(invalid("timeout must be at least 1 second")),
        s if s > MAX_TIMEOUT => Err(invalid(format!("timeout is at most {MAX_TIMEOUT} seconds"))),
        s => Ok(Duration::from_secs(s)),
    }
}

/// A plain host name: no pattern (`*`), no address (a rule naming an address would
/// open it even where the private-address guard otherwise refuses it), no port.
fn host_name_ok(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host.contains('.')
        && host.bytes().any(|b| b.is_ascii_alphabetic())
        && host.parse::<std::net::IpAddr>().is_err()
        && host
            .split('.')
            .all(|label| !label.is_empty() && !label.starts_with('-'))
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
}

/// A package spec that cannot be taken for an option, a path or a URL.
fn package_ok(spec: &str) -> bool {
    let first_ok = spec
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '@');
    first_ok
        && spec.len() <= 200
        && !spec.contains("://")
        && spec.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    '.' | '_'
                        | '-'
                        | '='
                        | '<'
                        | '>'
                        | '!'
                        | '~'
                        | '@'
                        | '/'
                        | '['
                        | ']'
                        | ','
                        | '^'
                        | '*'
                )
        })
        && !spec.contains("..")
}

/// The result every command-running tool returns: what it printed, how it ended,
/// and where it is recorded.
fn outcome(sandbox: &Sandbox, captured: Captured) -> CallToolResult {
    let (exit_code, timed_out, error) = match &captured.ended {
        Ended::Exited { code, timed_out } => (*code, *timed_out, None),
        Ended::Refused { message, code } => (*code, false, Some(message.clone())),
    };
    let body = serde_json::json!({
        "stdout": String::from_utf8_lossy(&captured.stdout),
        "stderr": String::from_utf8_lossy(&captured.stderr),
        "exit_code": exit_code,
        "timed_out": timed_out,
        "output_truncated": captured.truncated,
        "error": error,
        "sandbox_id": sandbox.name,
        "session": sandbox.session,
    });
    let text = serde_json::to_string_pretty(&body).unwrap_or_default();
    let mut result = if exit_code == 0 {
        CallToolResult::success(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::error(vec![ContentBlock::text(text)])
    };
    result.structured_content = Some(body);
    result
}

#[tool_router]
impl CodeTools {
    pub fn new(settings: Arc<Settings>) -> Self {
        Self {
            settings,
            own: Arc::new(Mutex::new(None)),
            running: Arc::new(Mutex::new(HashMap::new())),
            tool_router: Self::tool_router(),
        }
    }

    /// The sandbox a call names, or this connection's own (made now if need be).
    async fn sandbox(&self, id: Option<&str>) -> Result<Sandbox, McpError> {
        if let Some(id) = id {
            let id = id.to_owned();
            let settings = Arc::clone(&self.settings);
            return match tokio::task::spawn_blocking(move || sandboxes::find(&settings, &id)).await
            {
                Ok(Ok(found)) => Ok(found),
                Ok(Err(e)) => Err(invalid(format!("{e:#}"))),
                Err(e) => Err(McpError::internal_error(e.to_string(), None)),
            };
        }
        let mut own = self.own.lock().await;
        if let Some(sandbox) = own.as_ref() {
            let name = sandbox.name.clone();
            // Stopped meanwhile (its idle time-out): a new one takes its place.
            if tokio::task::spawn_blocking(move || sandboxes::running(&name))
                .await
                .unwrap_or(false)
            {
                return Ok(sandbox.clone());
            }
        }
        let settings = Arc::clone(&self.settings);
        let made = blocking(move || match settings.pool.take() {
            Some(ready) => Ok(ready),
            None => sandboxes::create(&settings),
        })
        .await?;
        *own = Some(made.clone());
        Ok(made)
    }

    async fn run(
        &self,
        sandbox: &Sandbox,
        argv: Vec<String>,
        input: Vec<u8>,
        timeout: Option<Duration>,
    ) -> Result<Captured, McpError> {
        self.run_with(sandbox, argv, Vec::new(), input, timeout)
            .await
    }

    async fn run_with(
        &self,
        sandbox: &Sandbox,
        argv: Vec<String>,
        env: Vec<(String, String)>,
        input: Vec<u8>,
        timeout: Option<Duration>,
    ) -> Result<Captured, McpError> {
        let settings = Arc::clone(&self.settings);
        let sandbox = sandbox.clone();
        blocking(move || sandboxes::exec(&settings, &sandbox, argv, env, input, timeout)).await
    }

    /// [`Self::run_with`], with what the sandbox holds meanwhile also put to the
    /// client's user (MCP elicitation), when approval is on and the client can ask.
    async fn run_asking(
        &self,
        peer: Peer<RoleServer>,
        sandbox: &Sandbox,
        argv: Vec<String>,
        env: Vec<(String, String)>,
        timeout: Option<Duration>,
    ) -> Result<Captured, McpError> {
        let asking = (self.settings.approval && crate::elicit::supported(&peer))
            .then(|| tokio::spawn(crate::elicit::ask(peer, sandbox.session_dir.clone())));
        let ran = self.run_with(sandbox, argv, env, Vec::new(), timeout).await;
        if let Some(asking) = asking {
            asking.abort();
        }
        ran
    }

    /// A file tool's command: `script` run by `sh` with `$p` the real path of `path`
    /// (checked inside the sandbox to be in the workspace, `GUARD`), `input` on stdin.
    async fn on_file(
        &self,
        sandbox_id: Option<&str>,
        path: String,
        script: &str,
        input: Vec<u8>,
    ) -> Result<CallToolResult, McpError> {
        let sandbox = self.sandbox(sandbox_id).await?;
        let argv = vec![
            "sh".into(),
            "-c".into(),
            format!("{GUARD}{script}"),
            "sh".into(),
            path,
        ];
        let captured = self.run(&sandbox, argv, input, Some(FILE_TIMEOUT)).await?;
        Ok(outcome(&sandbox, captured))
    }

    #[tool(
        description = "Execute code in an isolated, recorded sandbox. The sandbox persists across calls (same files, same /workspace); network is off unless network_enabled with allowed_domains."
    )]
    async fn code_execute(
        &self,
        context: RequestContext<RoleServer>,
        Parameters(request): Parameters<ExecuteRequest>,
    ) -> Result<CallToolResult, McpError> {
        if request.code.len() > MAX_INPUT {
            return Err(invalid(format!("code is over {MAX_INPUT} bytes")));
        }
        let timeout = timeout_of(request.timeout)?;
        let domains = request.allowed_domains.unwrap_or_default();
        if let Some(bad) = domains.iter().find(|d| !host_name_ok(d)) {
            return Err(invalid(format!(
                "allowed_domains: {bad:?} is not a host name"
            )));
        }
        if !request.network_enabled && !domains.is_empty() {
            return Err(invalid("allowed_domains needs network_enabled: true"));
        }
        let sandbox = self.sandbox(request.sandbox_id.as_deref()).await?;
        // With approval on, the names are asked about (the sandbox's gate holds each
        // when the code first looks it up); without it, the operator chose to let
        // calls open the network themselves.
        if request.network_enabled && !self.settings.approval {
            let (sb, hosts) = (sandbox.clone(), domains.clone());
            blocking(move || sandboxes::allow(&sb, &hosts)).await?;
        }
        // The code is an argument, where the approval gate's rules see it.
        let argv = match request.language {
            Language::Python => vec!["python3".into(), "-c".into(), request.code],
            Language::Javascript => vec!["node".into(), "-e".into(), request.code],
            Language::Shell => vec!["sh".into(), "-c".into(), request.code],
        };
        let wait = Duration::from_secs(request.wait.unwrap_or(DEFAULT_WAIT));
        let tools = self.clone();
        let mut task = tokio::spawn(async move {
            let captured = tools
                .run_asking(context.peer, &sandbox, argv, Vec::new(), Some(timeout))
                .await?;
            Ok(outcome(&sandbox, captured))
        });
        match tokio::time::timeout(wait, &mut task).await {
            Ok(joined) => joined.map_err(|e| McpError::internal_error(e.to_string(), None))?,
            Err(_) => {
                let mut running = self.running.lock().await;
                if running.len() >= MAX_RUNNING {
                    task.abort();
                    return Err(invalid(format!(
                        "{MAX_RUNNING} calls are still running on this connection: poll them with code_result first"
                    )));
                }
                let handle = format!("run-{}", sandboxes::random_hex());
                running.insert(handle.clone(), task);
                Ok(still_running(&handle))
            }
        }
    }

    #[tool(
        description = "The result of a code_execute that returned a handle (it ran longer than its wait): waits up to `wait` seconds, then returns the result, or the handle again."
    )]
    async fn code_result(
        &self,
        Parameters(request): Parameters<ResultRequest>,
    ) -> Result<CallToolResult, McpError> {
        let Some(mut task) = self.running.lock().await.remove(&request.handle) else {
            return Err(invalid(format!(
                "no running call {:?} on this connection (a handle is answered once)",
                request.handle
            )));
        };
        let wait = Duration::from_secs(request.wait.unwrap_or(DEFAULT_WAIT).min(MAX_TIMEOUT));
        match tokio::time::timeout(wait, &mut task).await {
            Ok(joined) => joined.map_err(|e| McpError::internal_error(e.to_string(), None))?,
            Err(_) => {
                self.running
                    .lock()
                    .await
                    .insert(request.handle.clone(), task);
                Ok(still_running(&request.handle))
            }
        }
    }

    #[tool(
        description = "Install a package into the sandbox from PyPI (pip install --user) or npm (into /workspace), reaching only the registry's hosts."
    )]
    async fn code_install_package(
        &self,
        context: RequestContext<RoleServer>,
        Parameters(request): Parameters<InstallRequest>,
    ) -> Result<CallToolResult, McpError> {
        if !package_ok(&request.package) {
            return Err(invalid(format!(
                "{:?} is not a package name (letters, digits, . _ - and a version)",
                request.package
            )));
        }
        let sandbox = self.sandbox(request.sandbox_id.as_deref()).await?;
        let s = &self.settings;
        let (hosts, argv) = match request.registry.unwrap_or(Registry::Pypi) {
            Registry::Pypi => {
                let mut argv: Vec<String> = [
                    "python3",
                    "-m",
                    "pip",
                    "install",
                    "--user",
                    "--disable-pip-version-check",
                    "--no-input",
                    "--index-url",
                ]
                .map(String::from)
                .to_vec();
                argv.push(s.pypi_index.clone());
                // pip refuses a plain-HTTP index it is not told to trust (a local one).
                if s.pypi_index.starts_with("http://") {
                    for host in &s.pypi_hosts {
                        argv.push("--trusted-host".into());
                        argv.push(host.clone());
                    }
                }
                argv.push(request.package);
                (s.pypi_hosts.clone(), argv)
            }
            Registry::Npm => (
                s.npm_hosts.clone(),
                vec![
                    "npm".into(),
                    "install".into(),
                    "--no-audit".into(),
                    "--no-fund".into(),
                    "--registry".into(),
                    s.npm_registry.clone(),
                    request.package,
                ],
            ),
        };
        let sb = sandbox.clone();
        blocking(move || sandboxes::allow(&sb, &hosts)).await?;
        // A distribution's Python refuses `pip install --user` (PEP 668); in the
        // sandbox it goes to the sandbox's own home, where nothing of the host's is.
        let env = vec![("PIP_BREAK_SYSTEM_PACKAGES".to_owned(), "1".to_owned())];
        let captured = self
            .run_asking(
                context.peer,
                &sandbox,
                argv,
                env,
                Some(Duration::from_secs(MAX_TIMEOUT)),
            )
            .await?;
        Ok(outcome(&sandbox, captured))
    }

    #[tool(description = "Write a text file inside /workspace (folders are made as needed).")]
    async fn code_write_file(
        &self,
        Parameters(request): Parameters<WriteRequest>,
    ) -> Result<CallToolResult, McpError> {
        let path = paths::resolve(&request.path).map_err(invalid)?;
        if request.content.len() > MAX_INPUT {
            return Err(invalid(format!("content is over {MAX_INPUT} bytes")));
        }
        let script = "mkdir -p -- \"$(dirname -- \"$p\")\" && cat > \"$p\"";
        self.on_file(
            request.sandbox_id.as_deref(),
            path,
            script,
            request.content.into_bytes(),
        )
        .await
    }

    #[tool(description = "Read a text file inside /workspace.")]
    async fn code_read_file(
        &self,
        Parameters(request): Parameters<ReadRequest>,
    ) -> Result<CallToolResult, McpError> {
        let path = paths::resolve(&request.path).map_err(invalid)?;
        self.on_file(
            request.sandbox_id.as_deref(),
            path,
            "cat -- \"$p\"",
            Vec::new(),
        )
        .await
    }

    #[tool(
        description = "List a folder inside /workspace: one line per entry, type (f file, d folder, l link), size, name."
    )]
    async fn code_list_files(
        &self,
        Parameters(request): Parameters<ListRequest>,
    ) -> Result<CallToolResult, McpError> {
        let path = paths::resolve(request.path.as_deref().unwrap_or("")).map_err(invalid)?;
        let script = LIST;
        self.on_file(request.sandbox_id.as_deref(), path, script, Vec::new())
            .await
    }

    #[tool(
        description = "Stop and remove a sandbox (default: this connection's own); its record stays."
    )]
    async fn code_destroy_sandbox(
        &self,
        Parameters(request): Parameters<DestroyRequest>,
    ) -> Result<CallToolResult, McpError> {
        let name = match request.sandbox_id {
            Some(id) => id,
            None => match self.own.lock().await.take() {
                Some(own) => own.name,
                None => {
                    return Ok(CallToolResult::success(vec![ContentBlock::text(
                        "this connection has no sandbox yet",
                    )]));
                }
            },
        };
        {
            let mut own = self.own.lock().await;
            if own.as_ref().is_some_and(|o| o.name == name) {
                *own = None;
            }
        }
        let settings = Arc::clone(&self.settings);
        let removed = name.clone();
        match tokio::task::spawn_blocking(move || sandboxes::destroy(&settings, &removed)).await {
            Ok(Ok(())) => Ok(CallToolResult::success(vec![ContentBlock::text(format!(
                "removed {name}"
            ))])),
            Ok(Err(e)) => Err(invalid(format!("{e:#}"))),
            Err(e) => Err(McpError::internal_error(e.to_string(), None)),
        }
    }
}

impl CodeTools {
    /// Removes this connection's own sandbox (the client is gone).
    pub async fn cleanup(&self) {
        if let Some(own) = self.own.lock().await.take() {
            let settings = Arc::clone(&self.settings);
            let _ =
                tokio::task::spawn_blocking(move || sandboxes::destroy(&settings, &own.name)).await;
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CodeTools {
    fn get_info(&self) -> ServerInfo {
        ServerInfo::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("vectraguard", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Runs code in Vectra Guard sandboxes: isolated, default-deny, every command recorded. Calls of one connection share a sandbox whose /workspace persists.",
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shells the file tools' scripts must run under: the host's `sh` and, where
    /// installed, BusyBox's (an image's).
    fn shells() -> Vec<Vec<&'static str>> {
        let mut shells = vec![vec!["sh"]];
        if std::path::Path::new("/bin/busybox").exists() {
            shells.push(vec!["/bin/busybox", "sh"]);
        }
        shells
    }

    /// Runs `script` with `$p` (or `$1`) set, under `shell`; BusyBox's applets
    /// (`stat`, `realpath`, `sort`) come first in its `PATH`.
    fn sh(shell: &[&str], script: &str, arg: &str) -> (i32, String, String) {
        let bin = tempfile::tempdir().unwrap();
        if shell[0] == "/bin/busybox" {
            for applet in ["stat", "realpath", "sort", "printf", "["] {
                std::os::unix::fs::symlink("/bin/busybox", bin.path().join(applet)).unwrap();
            }
        }
        let path = format!("{}:/usr/bin:/bin", bin.path().display());
        let out = std::process::Command::new(shell[0])
            .args(&shell[1..])
            .args(["-c", script, "sh", arg])
            .env("PATH", path)
            .env("p", arg)
            .env("LC_ALL", "C")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    #[test]
    fn the_list_script_names_each_entry_s_type_and_size_under_gnu_and_busybox() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("b file"), b"12345").unwrap();
        std::fs::write(d.join(".hidden"), b"").unwrap();
        std::fs::write(d.join("..dots"), b"1").unwrap();
        std::fs::create_dir(d.join("a")).unwrap();
        std::os::unix::fs::symlink("/etc", d.join("c")).unwrap();
        let dir_size = std::fs::metadata(d.join("a")).unwrap().len();
        let want = format!("f 1 ..dots\nf 0 .hidden\nd {dir_size} a\nf 5 b file\nl 4 c\n");
        for shell in shells() {
            let (code, out, err) = sh(&shell, LIST, &d.display().to_string());
            assert_eq!((code, out.as_str()), (0, want.as_str()), "{shell:?}: {err}");
            let (code, out, err) = sh(&shell, LIST, &d.join("b file").display().to_string());
            assert_eq!((code, out.as_str()), (2, ""), "{shell:?}");
            assert!(err.contains("is not a folder"), "{shell:?}: {err}");
            let empty = tempfile::tempdir().unwrap();
            let (code, out, _) = sh(&shell, LIST, &empty.path().display().to_string());
            assert_eq!((code, out.as_str()), (0, ""), "{shell:?}");
        }
    }

    #[test]
    fn the_guard_follows_links_and_keeps_missing_folders_under_gnu_and_busybox() {
        // The guard as it runs, with a temporary folder standing for /workspace.
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap().join("workspace");
        std::fs::create_dir(&ws).unwrap();
        std::os::unix::fs::symlink("/etc", ws.join("out")).unwrap();
        let ws_text = ws.display().to_string();
        let guard = paths::GUARD.replace("/workspace", &ws_text) + "echo \"$p\"";
        for shell in shells() {
            let new = format!("{ws_text}/x/y/z.txt");
            let (code, out, err) = sh(&shell, &guard, &new);
            assert_eq!((code, out.trim()), (0, new.as_str()), "{shell:?}: {err}");
            let (code, _, err) = sh(&shell, &guard, &format!("{ws_text}/out/passwd"));
            assert_eq!(code, 3, "{shell:?}: {err}");
            assert!(err.contains("leads outside"), "{shell:?}: {err}");
            let (code, _, _) = sh(&shell, &guard, &format!("{ws_text}/out/missing/f"));
            assert_eq!(code, 3, "{shell:?}");
        }
    }

    #[test]
    fn package_names_cannot_be_options_paths_or_urls() {
        for ok in [
            "requests",
            "requests==2.32.3",
            "left-pad@1.3.0",
            "@scope/pkg",
            "a[extra]>=1,<2",
        ] {
            assert!(package_ok(ok), "{ok}");
        }
        for bad in [
            "-e .",
            "--index-url=x",
            "../x",
            "/tmp/x",
            "https://x/y.whl",
            "git+https://x",
            "a b",
            "",
        ] {
            assert!(!package_ok(bad), "{bad}");
        }
    }

    #[test]
    fn timeouts_and_hosts_are_checked() {
        assert!(timeout_of(None).is_ok());
        assert!(timeout_of(Some(0)).is_err());
        assert!(timeout_of(Some(MAX_TIMEOUT + 1)).is_err());
        assert!(host_name_ok("pypi.org") && host_name_ok("files.pythonhosted.org"));
        // No patterns, addresses, ports or single labels (red team: `*`, the host's IP).
        for bad in [
            "*",
            "*.example.com",
            "192.0.2.2",
            "::1",
            "localhost",
            "a b",
            "",
            "x:1",
            "-a.b",
        ] {
            assert!(!host_name_ok(bad), "{bad}");
        }
    }
}
