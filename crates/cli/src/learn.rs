//! `--learn NAME` (`sandbox run`, `sandbox shell`, `agent start`): what is checked
//! before the run, so that nothing runs whose profile could not be saved (the name,
//! the profile folder, an existing profile that does not load, a question nobody
//! could answer), and after it: what was learned, the differences from the profile
//! it replaces, the question (or `--yes`), the save, and the folders it grants that
//! do not exist yet.

use std::io::{BufRead, IsTerminal, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, Result, bail};
use vg_learn::{Header, ProfileStore, SaveOutcome, StoreError};
use vg_records::quote::escape_hidden;
use vg_session::learn::Learned;

use crate::cli::SandboxOptions;

/// A learning run's profile, checked before the run.
pub struct Learning {
    store: ProfileStore,
    name: String,
    replace: bool,
    home: Option<PathBuf>,
}

/// The checks of `--learn NAME`, before anything runs; `None` without `--learn`.
pub fn before(options: &SandboxOptions) -> Result<Option<Learning>> {
    let Some(name) = &options.learn else {
        return Ok(None);
    };
    let home = vg_session::host::invoker_home();
    let Some(user_home) = home.clone() else {
        bail!(
            "--learn {name}: cannot find your home folder in /etc/passwd, where learned profiles are kept"
        );
    };
    let xdg = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from);
    let store = ProfileStore::for_user(&user_home, xdg.as_deref());
    let path = store.path_of(name)?;
    writable(store.dir())?;
    match store.read(name) {
        Ok(_) if !options.yes && !std::io::stdin().is_terminal() => bail!(
            "--learn {name}: a learned profile '{name}' exists ({}) and there is no terminal to ask whether to replace it: add --yes to replace it, or choose another name",
            path.display()
        ),
        Ok(_) | Err(StoreError::Missing { .. }) => {}
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!(
                "--learn {name}: the existing profile cannot be replaced"
            )));
        }
    }
    Ok(Some(Learning {
        store,
        name: name.clone(),
        replace: options.yes,
        home,
    }))
}

/// The profile folder exists (made 0700 if not) and takes a new file.
fn writable(dir: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| {
            format!(
                "--learn: cannot create the profile folder {} (make it writable, or set XDG_CONFIG_HOME to a folder that is)",
                dir.display()
            )
        })?;
    let probe = dir.join(format!(".vectraguard-write-check-{}", std::process::id()));
    std::fs::File::create(&probe)
        .and_then(|_| std::fs::remove_file(&probe))
        .with_context(|| {
            format!(
                "--learn: cannot write in the profile folder {} (make it writable, or set XDG_CONFIG_HOME to a folder that is)",
                dir.display()
            )
        })
}

impl Learning {
    /// Says, once the run is planned (so not before an error that stops it), that
    /// learning trusts the command.
    pub fn warn(&self) {
        vg_session::diag::warning(format_args!(
            "learning mode trusts the command: your home and the host's other non-secret folders are visible to it read-only (writes go to a throwaway layer) and every public destination is allowed; do not learn from code you do not trust"
        ));
    }

    /// Shows what the run learned and saves it: at once when there was no such
    /// profile or with `--yes`, else after showing the differences and asking.
    pub fn after(&self, learned: &Learned) -> Result<()> {
        let mut err = std::io::stderr().lock();
        show(&mut err, learned, self.home.as_deref())?;
        let header = Header {
            name: self.name.clone(),
            command: learned.command.clone(),
            learned_at: SystemTime::now(),
            session_id: learned.session.clone(),
        };
        let mut outcome = vg_learn::save(&self.store, &learned.profile, &header, self.replace)?;
        if let SaveOutcome::Exists { path, diff } = &outcome {
            writeln!(
                err,
                "vectraguard: the profile '{}' exists ({}); what would change:",
                self.name,
                path.display()
            )?;
            write!(err, "{diff}")?;
            if !ask(&mut err, "replace it? [y/N] ")? {
                writeln!(
                    err,
                    "vectraguard: kept the profile '{}' as it was (learn again with --yes to replace it)",
                    self.name
                )?;
                return Ok(());
            }
            outcome = vg_learn::save(&self.store, &learned.profile, &header, true)?;
        }
        let path = match &outcome {
            SaveOutcome::Created { path } => path,
            SaveOutcome::Replaced { path, diff } => {
                if !self.replace {
                    // Shown before the question already.
                } else {
                    writeln!(err, "vectraguard: replacing the profile '{}':", self.name)?;
                    write!(err, "{diff}")?;
                }
                path
            }
            SaveOutcome::Exists { .. } => return Ok(()),
        };
        for dir in &learned.profile.to_create {
            create_granted(&learned.profile.home, dir).with_context(|| {
                format!(
                    "the profile was saved, but its folder {} could not be created (create it yourself before using --profile {})",
                    dir.display(),
                    self.name
                )
            })?;
        }
        writeln!(
            err,
            "vectraguard: saved the profile '{}' to {}; use it with --profile {}",
            self.name,
            path.display(),
            self.name
        )?;
        Ok(())
    }
}

/// Creates a folder the profile grants read-write that did not exist, empty, mode
/// 0700, one level at a time below the home, refusing to go through a symlink (the
/// sandbox user owns the home and could point one anywhere). Run as root, each
/// folder made is given to the owner of the folder it was made in, so that the
/// sandbox user can write it next time.
///
/// Every step is taken from the descriptor of the folder above, never by path again
/// (red team: the home's owner runs processes of their own; checking a path and then
/// creating and chowning by that path let one swap a folder for a symlink in between,
/// so that root made, and gave away, a folder anywhere on the host). A folder is opened
/// with `O_NOFOLLOW`, the next one made and opened inside it through
/// `/proc/self/fd/N/NAME` (the folder N is, whatever happens to its path), and chowned
/// through its own descriptor.
fn create_granted(home: &Path, dir: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let Ok(below) = dir.strip_prefix(home) else {
        bail!(
            "{} is not in the home folder {}",
            dir.display(),
            home.display()
        );
    };
    let open_dir = |path: &Path| {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
    };
    let mut shown = home.to_path_buf();
    // Not a folder, or a symlink: said plainly (both fail the same way below).
    let refuse = |at: &Path| match std::fs::symlink_metadata(at) {
        Ok(meta) if meta.file_type().is_symlink() => {
            anyhow::anyhow!("{} is a symlink: not followed", at.display())
        }
        _ => anyhow::anyhow!("{} exists and is not a folder", at.display()),
    };
    let not_a_dir =
        |e: &std::io::Error| matches!(e.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP));
    let mut at = match open_dir(home) {
        Ok(fd) => fd,
        Err(e) if not_a_dir(&e) => return Err(refuse(home)),
        Err(e) => return Err(e.into()),
    };
    for part in below.components() {
        let std::path::Component::Normal(name) = part else {
            bail!("{} is not a plain path", dir.display());
        };
        shown.push(name);
        let inside = PathBuf::from(format!("/proc/self/fd/{}", at.as_raw_fd())).join(name);
        at = match open_dir(&inside) {
            Ok(next) => next,
            Err(e) if not_a_dir(&e) => return Err(refuse(&shown)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let parent = at.metadata()?;
                // mkdir never follows a symlink in its last component, and the open
                // after it refuses one: a swap in between fails the save.
                std::fs::DirBuilder::new().mode(0o700).create(&inside)?;
                let made = open_dir(&inside).map_err(|e| {
                    if not_a_dir(&e) {
                        refuse(&shown)
                    } else {
                        e.into()
                    }
                })?;
                if vg_sandbox::real_ids().0 == 0 {
                    std::os::unix::fs::fchown(&made, Some(parent.uid()), Some(parent.gid()))?;
                }
                made
            }
            Err(e) => return Err(e.into()),
        };
    }
    Ok(())
}

/// What was learned, on stderr: the grants, the destinations, what was not granted.
fn show(out: &mut dyn Write, learned: &Learned, home: Option<&Path>) -> Result<()> {
    let p = &learned.profile;
    let shown = |path: &Path| tilde(path, Some(p.home.as_path()).or(home));
    writeln!(
        out,
        "vectraguard: learned from session {}:",
        learned.session
    )?;
    let mut any = false;
    for grant in &p.grants {
        any = true;
        let created = if grant.missing {
            ", created when saved"
        } else {
            ""
        };
        writeln!(
            out,
            "  {:<10} {}  ({} read, {} written{created})",
            if grant.write {
                "read-write"
            } else {
                "read-only"
            },
            shown(&grant.path),
            grant.evidence.read,
            grant.evidence.written
        )?;
    }
    for rule in &p.rules {
        any = true;
        writeln!(
            out,
            "  {:<10} {}",
            "network",
            escape_hidden(&rule.rule.text)
        )?;
    }
    for pin in &p.add_hosts {
        writeln!(
            out,
            "  {:<10} {}",
            "add-host",
            escape_hidden(&pin.to_string())
        )?;
    }
    if !any {
        writeln!(out, "  nothing beyond the default view")?;
    }
    for used in &p.sensitive {
        let how = match (used.read, used.write) {
            (true, true) => "read and written",
            (false, true) => "written",
            _ => "read",
        };
        writeln!(
            out,
            "  not granted: {} ({how}; {})",
            shown(&used.path),
            used.category
        )?;
    }
    for refusal in &p.refused {
        writeln!(
            out,
            "  not granted: {} ({})",
            shown(&refusal.path),
            escape_hidden(&refusal.reason.describe())
        )?;
    }
    for destination in &p.refused_destinations {
        let d = &destination.destination;
        let name = d.name.clone().unwrap_or_else(|| d.ip.to_string());
        writeln!(
            out,
            "  not allowed: {}:{} ({})",
            escape_hidden(&name),
            d.port,
            escape_hidden(&destination.why)
        )?;
    }
    Ok(())
}

/// Asks on the terminal; anything but y or yes is no.
fn ask(out: &mut dyn Write, question: &str) -> Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    write!(out, "vectraguard: {question}")?;
    out.flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(matches!(
        line.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

/// `path` with the home folder written `~`.
/// Escaped for a terminal: the path may be any text a sandboxed command chose.
pub fn tilde(path: &Path, home: Option<&Path>) -> String {
    let text = match home.and_then(|h| path.strip_prefix(h).ok()) {
        Some(rest) if rest.as_os_str().is_empty() => "~".to_owned(),
        Some(rest) => format!("~/{}", rest.display()),
        None => path.display().to_string(),
    };
    vg_records::quote::escape_hidden(&text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn granted_folders_are_made_below_the_home_without_following_symlinks() {
        let root = std::env::temp_dir().join(format!("vg-create-granted-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let home = root.join("home");
        let outside = root.join("outside");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, home.join("link")).unwrap();
        std::fs::write(home.join("file"), "x").unwrap();

        let made = create_granted(&home, &home.join("a/b/c"));
        let through_link = create_granted(&home, &home.join("link/evil"));
        let through_file = create_granted(&home, &home.join("file/x"));
        let elsewhere = create_granted(&home, &outside.join("x"));
        let dotdot = create_granted(&home, &home.join("a/../../outside/y"));
        let leaf_link = create_granted(&home, &home.join("link"));
        let mode = std::fs::metadata(home.join("a/b/c")).map(|m| m.permissions().mode() & 0o777);
        let owner = std::fs::metadata(home.join("a/b/c")).map(|m| m.uid());
        let home_owner = std::fs::metadata(&home).map(|m| m.uid());
        let escaped = std::fs::read_dir(&outside).map(|d| d.count());
        std::fs::remove_dir_all(&root).unwrap();

        made.unwrap();
        assert_eq!(mode.unwrap(), 0o700);
        assert_eq!(owner.unwrap(), home_owner.unwrap());
        let e = through_link.unwrap_err().to_string();
        assert!(e.contains("is a symlink: not followed"), "{e}");
        let e = through_file.unwrap_err().to_string();
        assert!(e.contains("exists and is not a folder"), "{e}");
        assert!(
            elsewhere
                .unwrap_err()
                .to_string()
                .contains("is not in the home folder")
        );
        assert!(dotdot.unwrap_err().to_string().contains("not a plain path"));
        assert!(leaf_link.unwrap_err().to_string().contains("symlink"));
        assert_eq!(escaped.unwrap(), 0, "nothing was made outside the home");
    }
}
