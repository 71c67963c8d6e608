//! The sandboxes behind the tools: persistent sandboxes made and removed with the
//! same `vectraguard sandbox create|rm` a person uses (this program, run as a child),
//! commands run through their exec channel (`vg_session::persistent`), network rules
//! added through their control channel. Blocking: callers run it off the async
//! runtime's threads.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use std::os::unix::fs::DirBuilderExt;

use anyhow::{Context, Result, anyhow, bail};
use vg_session::persistent::registry::{self, State};
use vg_session::persistent::{Captured, ExecOptions};

/// How the server makes its sandboxes.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The `vectraguard` program.
    pub exe: PathBuf,
    /// Options given to every `sandbox create` (limits, `--ask`, `--image`…).
    pub create_options: Vec<String>,
    /// The most output kept of each stream of a command.
    pub max_output: usize,
    /// Registry hosts each package manager may reach (`code_install_package`).
    pub pypi_hosts: Vec<String>,
    pub npm_hosts: Vec<String>,
    /// The index `pip` installs from, and npm's registry.
    pub pypi_index: String,
    pub npm_registry: String,
    /// Whether commands and new destinations are held for approval (`--ask` other
    /// than `never`): then a call's `allowed_domains` are not allowed outright but
    /// asked about, name by name, when the code first looks them up.
    pub approval: bool,
    /// The sandboxes this server made: the only ones a call's `sandbox_id` may name
    /// (others may have another `--ask`, or belong to the person, not the agent).
    pub made: Arc<Mutex<HashSet<String>>>,
    /// Sandboxes made ahead of need (`--pool N`), so that a connection's first call
    /// does not wait for one.
    pub pool: Arc<Pool>,
}

/// Ready sandboxes, kept at `size` by a thread of their own.
#[derive(Debug, Default)]
pub struct Pool {
    size: usize,
    ready: Mutex<std::collections::VecDeque<Sandbox>>,
    /// Wakes the filler when one was taken.
    taken: std::sync::Condvar,
}

impl Pool {
    pub fn new(size: usize) -> Self {
        Pool {
            size,
            ..Pool::default()
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::VecDeque<Sandbox>> {
        self.ready.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A ready sandbox that still runs, if the pool has one.
    pub fn take(&self) -> Option<Sandbox> {
        let taken = loop {
            let next = self.lock().pop_front()?;
            if running(&next.name) {
                break next;
            }
        };
        self.taken.notify_one();
        Some(taken)
    }

    /// How many are ready.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keeps the pool full, on a thread of its own, until the process ends.
    pub fn fill(settings: &Arc<Settings>) {
        if settings.pool.size == 0 {
            return;
        }
        let settings = Arc::clone(settings);
        let _ = std::thread::Builder::new()
            .name("vg-mcp-pool".into())
            .spawn(move || {
                loop {
                    let missing = settings.pool.size.saturating_sub(settings.pool.len());
                    for _ in 0..missing {
                        match create(&settings) {
                            Ok(made) => settings.pool.lock().push_back(made),
                            // Not now (limits, disk): try again later, never spin.
                            Err(_) => std::thread::sleep(Duration::from_secs(5)),
                        }
                    }
                    let ready = settings.pool.lock();
                    let _ = settings
                        .pool
                        .taken
                        .wait_timeout(ready, Duration::from_secs(30));
                }
            });
    }

    /// Removes the ready sandboxes (the server is ending).
    pub fn drain(settings: &Settings) {
        let ready: Vec<Sandbox> = settings.pool.lock().drain(..).collect();
        for sandbox in ready {
            let _ = destroy(settings, &sandbox.name);
        }
    }
}

impl Settings {
    fn made(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.made.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One sandbox the tools use.
#[derive(Debug, Clone)]
pub struct Sandbox {
    pub name: String,
    pub session: String,
    pub session_dir: PathBuf,
}

/// Where a sandbox's `/workspace` lives on the host: in the temporary folder, where
/// the sandbox's user can reach it (as root that user is `nobody`, who cannot pass
/// through root's home).
fn workspace_of(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("vectraguard-{name}"))
}

/// A new sandbox with a fresh, empty `/workspace`.
pub fn create(settings: &Settings) -> Result<Sandbox> {
    let name = format!("mcp-{}", random_hex());
    let workspace = workspace_of(&name);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&workspace)
        .with_context(|| format!("cannot create {}", workspace.display()))?;
    // As root, the sandbox runs as the workspace's owner, who must not be root.
    if vg_session::host::is_root() {
        std::os::unix::fs::chown(&workspace, Some(65534), Some(65534))
            .with_context(|| format!("cannot hand {} to nobody", workspace.display()))?;
    }
    let mount = format!("{}:{}", workspace.display(), crate::paths::WORKSPACE);
    let out = std::process::Command::new(&settings.exe)
        .args(["sandbox", "create", &name, "--quiet"])
        // The host folder only keeps the server's working directory out of the
        // sandbox; /workspace itself is a private tmpfs of the --disk size.
        .args(["--mount", &mount, "--workdir", crate::paths::WORKSPACE])
        .args(["--tmpfs", crate::paths::WORKSPACE])
        .args(&settings.create_options)
        .current_dir(&workspace)
        // The sandbox's host needs none of the server's secrets.
        .env_remove("VECTRAGUARD_MCP_TOKEN")
        .stdin(std::process::Stdio::null())
        .output()
        .context("cannot run `vectraguard sandbox create`")?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&workspace);
        bail!(
            "cannot create a sandbox: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    settings.made().insert(name.clone());
    find(settings, &name)
}

/// Whether the sandbox `name` runs.
pub fn running(name: &str) -> bool {
    registry::root()
        .and_then(|root| registry::read(&root, name))
        .is_ok_and(|e| e.state() == State::Running)
}

/// The running sandbox `name`, one this server made.
pub fn find(settings: &Settings, name: &str) -> Result<Sandbox> {
    registry::check_name(name)?;
    if !settings.made().contains(name) {
        bail!(
            "{name:?} is not a sandbox of this server's: sandbox_id names only sandboxes this server made (omit it to use this connection's own)"
        );
    }
    let entry = registry::read(&registry::root()?, name)?;
    if entry.state() != State::Running {
        bail!(
            "the sandbox {name:?} is {}; omit sandbox_id to get a new one",
            entry.state().as_str()
        );
    }
    Ok(Sandbox {
        name: name.to_owned(),
        session: entry.session.unwrap_or_default(),
        session_dir: entry
            .session_dir
            .ok_or_else(|| anyhow!("the sandbox {name:?} has no session"))?,
    })
}

/// Runs `argv` in `sandbox` with `env` added and `input` on stdin.
pub fn exec(
    settings: &Settings,
    sandbox: &Sandbox,
    argv: Vec<String>,
    env: Vec<(String, String)>,
    input: Vec<u8>,
    timeout: Option<Duration>,
) -> Result<Captured> {
    vg_session::persistent::exec_captured(
        &sandbox.session_dir,
        ExecOptions {
            argv,
            env,
            cwd: None,
            tty: false,
            timeout,
        },
        input,
        settings.max_output,
    )
}

/// Lets `sandbox` reach `hosts` from now on (live `allow` rules, recorded).
pub fn allow(sandbox: &Sandbox, hosts: &[String]) -> Result<()> {
    if hosts.is_empty() {
        return Ok(());
    }
    let mut client =
        vg_control::ControlClient::connect(&vg_control::socket_path(&sandbox.session_dir))?;
    for host in hosts {
        client
            .net_add(vg_control::protocol::RuleAction::Allow, host)
            .with_context(|| format!("cannot allow {host}"))?;
    }
    Ok(())
}

/// Stops and forgets `name`, and removes its workspace when it is one of ours.
pub fn destroy(settings: &Settings, name: &str) -> Result<()> {
    registry::check_name(name)?;
    if !settings.made().contains(name) {
        bail!("{name:?} is not a sandbox of this server's: it is not removed");
    }
    let out = std::process::Command::new(&settings.exe)
        .args(["sandbox", "rm", "-f", name])
        .stdin(std::process::Stdio::null())
        .output()
        .context("cannot run `vectraguard sandbox rm`")?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let _ = std::fs::remove_dir_all(workspace_of(name));
    settings.made().remove(name);
    Ok(())
}

/// Removes what servers that were killed left behind: the workspaces of sandboxes
/// that no longer run (their records stay).
pub fn sweep(settings: &Settings) {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(name) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix("vectraguard-"))
        else {
            continue;
        };
        if !name.starts_with("mcp-") || registry::check_name(name).is_err() || running(name) {
            continue;
        }
        // Ours to remove only if it is ours at all (the registry is per user).
        if registry::root()
            .and_then(|root| registry::read(&root, name))
            .is_ok()
        {
            // `rm` refuses one still starting (another server making it now).
            let removed = std::process::Command::new(&settings.exe)
                .args(["sandbox", "rm", "-f", name])
                .stdin(std::process::Stdio::null())
                .output()
                .is_ok_and(|out| out.status.success());
            if removed {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

pub fn random_hex() -> String {
    let mut bytes = [0u8; 6];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut bytes);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
