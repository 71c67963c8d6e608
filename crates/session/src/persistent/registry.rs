//! Persistent sandboxes by name: one file each, `$VECTRAGUARD_HOME/sandboxes/NAME.json`,
//! written by the sandbox's host, and its log `NAME.log`.
//!
//! Whether a sandbox still runs is read from the machine, never trusted from the file:
//! its host process must be alive (same pid and start time) in the same boot. A
//! sandbox does not survive a reboot (its processes and `/tmp` are gone) and `ls`
//! says so.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// One persistent sandbox, as its host wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub name: String,
    /// The session recording it (its folder holds `exec.sock` while it runs).
    pub session: Option<String>,
    pub session_dir: Option<PathBuf>,
    pub host_pid: i32,
    /// The host's start time (clock ticks since boot), so a reused pid is not it.
    pub host_start: u64,
    pub boot_id: String,
    /// RFC 3339, UTC.
    pub created: String,
    pub idle_timeout_ms: Option<u64>,
    pub image: Option<String>,
    /// The workspace on the host.
    pub workspace: Option<String>,
    /// When the host ended, if it could say.
    pub ended: Option<String>,
}

/// What became of a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// Its host is still starting it.
    Starting,
    Running,
    /// Stopped (by `sandbox stop`, its idle time-out, or a failure).
    Stopped,
    /// The machine restarted since: nothing of it is left.
    LostInReboot,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Starting => "starting",
            State::Running => "running",
            State::Stopped => "stopped",
            State::LostInReboot => "gone (the machine restarted)",
        }
    }
}

/// The folder of the registry.
pub fn root() -> Result<PathBuf> {
    Ok(crate::home::vectraguard_home("persistent sandboxes", "sandboxes/")?.join("sandboxes"))
}

fn own_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX)
}

/// Makes the registry folder (0700) if need be, and refuses one that another user
/// could change: its entries say where commands are sent.
pub fn ensure_private(root: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)
        .with_context(|| format!("cannot create {}", root.display()))?;
    let meta = std::fs::symlink_metadata(root)
        .with_context(|| format!("cannot inspect {}", root.display()))?;
    if !meta.is_dir() || meta.uid() != own_uid() || meta.mode() & 0o022 != 0 {
        bail!(
            "{} must be a folder of yours that no one else can write (it is mode {:o}, owner uid {}): fix or remove it",
            root.display(),
            meta.mode() & 0o7777,
            meta.uid()
        );
    }
    Ok(())
}

/// Opens a registry file for writing: new, 0600, never through a symlink.
fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Opens the host's log for appending (0600, never through a symlink).
pub fn open_log(root: &Path, name: &str) -> Result<std::fs::File> {
    let path = log_path(root, name);
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))
}

/// A name is a hostname label: it becomes the sandbox's hostname and session name.
pub fn check_name(name: &str) -> Result<()> {
    crate::plan::checked_hostname(name)
        .map(drop)
        .with_context(|| format!("sandbox name {name:?}"))
}

fn file(root: &Path, name: &str) -> PathBuf {
    root.join(format!("{name}.json"))
}

/// The host's log (its stderr).
pub fn log_path(root: &Path, name: &str) -> PathBuf {
    root.join(format!("{name}.log"))
}

/// This machine's boot, as the kernel names it.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// A live process's start time in clock ticks since boot (`/proc/PID/stat`, field
/// 22); `None` when it is gone or has ended and waits to be reaped (a zombie).
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    if matches!(fields.next(), Some("Z" | "X")) {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

impl Entry {
    /// Whether it runs now.
    pub fn state(&self) -> State {
        if self.boot_id != boot_id() {
            return State::LostInReboot;
        }
        if start_time(self.host_pid) != Some(self.host_start) {
            return State::Stopped;
        }
        match &self.session_dir {
            Some(dir) if dir.join(super::protocol::EXEC_SOCKET).exists() => State::Running,
            Some(_) if self.ended.is_some() => State::Stopped,
            _ => State::Starting,
        }
    }
}

/// Claims `name` for a new sandbox (failing if one by that name exists, running or
/// not: remove it first) and writes its first entry.
pub fn claim(root: &Path, entry: &Entry) -> Result<()> {
    ensure_private(root)?;
    let path = file(root, &entry.name);
    let created = create_private(&path);
    let mut out = match created {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let state = read(root, &entry.name).map(|e| e.state());
            match state {
                Ok(State::Running | State::Starting) => bail!(
                    "a sandbox named {:?} is running: use another name, or `vectraguard sandbox rm {0}` first",
                    entry.name
                ),
                _ => bail!(
                    "a stopped sandbox named {:?} exists: `vectraguard sandbox rm {0}` first (its record stays in `vectraguard logs`)",
                    entry.name
                ),
            }
        }
        Err(e) => return Err(e).with_context(|| format!("cannot create {}", path.display())),
    };
    out.write_all(&serde_json::to_vec_pretty(entry)?)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Rewrites `entry` (atomically: a reader never sees half of it).
pub fn update(root: &Path, entry: &Entry) -> Result<()> {
    let path = file(root, &entry.name);
    let tmp = root.join(format!(".{}.json.tmp", entry.name));
    // A leftover (or planted) file there is removed, never written through.
    let _ = std::fs::remove_file(&tmp);
    create_private(&tmp)
        .and_then(|mut f| f.write_all(&serde_json::to_vec_pretty(entry)?))
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))
}

/// The entry of `name`.
pub fn read(root: &Path, name: &str) -> Result<Entry> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let path = file(root, name);
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .and_then(|mut f| {
            let owner = f.metadata()?.uid();
            let mut text = Vec::new();
            f.read_to_end(&mut text)?;
            Ok((owner, text))
        });
    let text = match opened {
        Ok((owner, _)) if owner != own_uid() => bail!(
            "{} belongs to another user (uid {owner}): not trusted",
            path.display()
        ),
        Ok((_, text)) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "no sandbox named {name:?}: `vectraguard sandbox ls` lists them, `vectraguard sandbox create {name}` makes one"
        ),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    serde_json::from_slice(&text).with_context(|| format!("{} is damaged", path.display()))
}

/// Every entry, by name.
pub fn list(root: &Path) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", root.display())),
    };
    for entry in entries {
        let name = entry?.file_name();
        let Some(name) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        if let Ok(found) = read(root, name) {
            out.push(found);
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Forgets `name` (its entry and log; the session record stays).
pub fn remove(root: &Path, name: &str) -> Result<()> {
    let path = file(root, name);
    std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
    let _ = std::fs::remove_file(log_path(root, name));
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn entry(name: &str) -> Entry {
        Entry {
            name: name.into(),
            session: None,
            session_dir: None,
            host_pid: i32::try_from(std::process::id()).unwrap(),
            host_start: start_time(i32::try_from(std::process::id()).unwrap()).unwrap(),
            boot_id: boot_id(),
            created: "2026-11-25T00:00:00Z".into(),
            idle_timeout_ms: None,
            image: None,
            workspace: None,
            ended: None,
        }
    }

    #[test]
    fn a_registry_others_can_write_is_refused_and_symlinks_are_never_followed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("sandboxes");
        std::fs::create_dir(&root).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = claim(&root, &entry("x")).unwrap_err().to_string();
        assert!(err.contains("no one else can write"), "{err}");
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700)).unwrap();
        // A planted link where the update's temporary file goes, and as the log.
        let target = dir.path().join("victim");
        std::fs::write(&target, "keep").unwrap();
        std::os::unix::fs::symlink(&target, root.join(".x.json.tmp")).unwrap();
        std::os::unix::fs::symlink(&target, log_path(&root, "x")).unwrap();
        let x = entry("x");
        claim(&root, &x).unwrap();
        update(&root, &x).unwrap();
        assert!(open_log(&root, "x").is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        let mode = std::fs::metadata(root.join("x.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_name_is_claimed_once_and_its_state_read_from_the_machine() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("sandboxes");
        let mut dev = entry("dev");
        claim(&root, &dev).unwrap();
        assert_eq!(read(&root, "dev").unwrap().state(), State::Starting);
        let again = claim(&root, &dev).unwrap_err().to_string();
        assert!(again.contains("is running"), "{again}");
        dev.host_start += 1;
        update(&root, &dev).unwrap();
        assert_eq!(read(&root, "dev").unwrap().state(), State::Stopped);
        dev.boot_id = "another-boot".into();
        update(&root, &dev).unwrap();
        assert_eq!(read(&root, "dev").unwrap().state(), State::LostInReboot);
        assert!(
            claim(&root, &dev)
                .unwrap_err()
                .to_string()
                .contains("sandbox rm")
        );
        assert_eq!(list(&root).unwrap().len(), 1);
        remove(&root, "dev").unwrap();
        assert!(
            read(&root, "dev")
                .unwrap_err()
                .to_string()
                .contains("no sandbox named")
        );
        assert!(list(&root).unwrap().is_empty());
    }
}
