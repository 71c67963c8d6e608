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
    state: Mutex<PoolState>,
    /// Wakes the filler when one was taken, and `drain` when a create finished.
    changed: std::sync::Condvar,
}

#[derive(Debug, Default)]
struct PoolState {
    ready: std::collections::VecDeque<Sandbox>,
    /// The filler is running `sandbox create` now: `drain` waits for it, or the
    /// sandbox it makes would outlive the server.
    creating: bool,
    /// The server is ending: the filler makes no more.
    closed: bool,
    /// `drain` has taken the ready ones and removed them: one made later is the
    /// filler's to remove.
    drained: bool,
}

/// The longest `drain` waits for a create in progress (a create that takes longer
/// is stuck; its sandbox, if it ever starts, is removed by the filler itself).
const DRAIN_WAIT: Duration = Duration::from_secs(60);

impl Pool {
    pub fn new(size: usize) -> Self {
        Pool {
            size,
            ..Pool::default()
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A ready sandbox that still runs, if the pool has one.
    pub fn take(&self) -> Option<Sandbox> {
        let taken = loop {
            let next = self.lock().ready.pop_front()?;
            if running(&next.name) {
                break next;
            }
        };
        self.changed.notify_all();
        Some(taken)
    }

    /// How many are ready.
    pub fn len(&self) -> usize {
        self.lock().ready.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keeps the pool full, on a thread of its own, until [`Pool::drain`].
    pub fn fill(settings: &Arc<Settings>) {
        if settings.pool.size == 0 {
            return;
        }
        let settings = Arc::clone(settings);
        let _ = std::thread::Builder::new()
            .name("vg-mcp-pool".into())
            .spawn(move || Self::keep_full(&settings));
    }

    fn keep_full(settings: &Settings) {
        let pool = &settings.pool;
        loop {
            let mut state = pool.lock();
            if state.closed {
                return;
            }
            if state.ready.len() >= pool.size {
                let _ = pool.changed.wait_timeout(state, Duration::from_secs(30));
                continue;
            }
            state.creating = true;
            drop(state);
            let made = create(settings);
            let mut state = pool.lock();
            state.creating = false;
            let late = match made {
                Ok(made) if state.drained => Some(made),
                Ok(made) => {
                    state.ready.push_back(made);
                    None
                }
                Err(_) => {
                    // Not now (limits, disk): try again later, never spin.
                    drop(state);
                    pool.changed.notify_all();
                    std::thread::sleep(Duration::from_secs(5));
                    continue;
                }
            };
            drop(state);
            pool.changed.notify_all();
            if let Some(late) = late {
                // Made after `drain` stopped waiting: removed here, never left running.
                let _ = destroy(settings, &late.name);
                return;
            }
        }
    }

    /// Removes the ready sandboxes and stops the filler (the server is ending),
    /// after waiting for a create in progress so that its sandbox goes too.
    pub fn drain(settings: &Settings) {
        let pool = &settings.pool;
        let mut state = pool.lock();
        state.closed = true;
        let deadline = std::time::Instant::now() + DRAIN_WAIT;
        while state.creating {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            state = pool
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        let ready: Vec<Sandbox> = state.ready.drain(..).collect();
        state.drained = true;
        drop(state);
        pool.changed.notify_all();
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
