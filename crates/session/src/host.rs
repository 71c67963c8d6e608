//! Facts read from the host: the layout of system directories and who is who.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use vg_policy::Identity;
use vg_policy::identity::{PasswdEntry, parse_passwd};
use vg_policy::view::{HostEntry, HostLayout, NodeKind, SECRET_PATHS, SYSTEM_DIRS};

/// Which system directories exist (and which are symlinks), and which secrets.
pub fn layout() -> HostLayout {
    let system_dirs = SYSTEM_DIRS
        .iter()
        .filter_map(|d| {
            let path = PathBuf::from(d);
            let meta = std::fs::symlink_metadata(&path).ok()?;
            if meta.file_type().is_symlink() {
                Some((
                    path.clone(),
                    HostEntry::Symlink(std::fs::read_link(&path).ok()?),
                ))
            } else if meta.is_dir() {
                Some((path, HostEntry::Dir))
            } else {
                None
            }
        })
        .collect();
    let secrets = SECRET_PATHS
        .iter()
        .filter_map(|p| {
            let meta = std::fs::symlink_metadata(p).ok()?;
            let kind = if meta.is_dir() {
                NodeKind::Dir
            } else {
                NodeKind::File
            };
            Some((PathBuf::from(p), kind))
        })
        .collect();
    HostLayout {
        system_dirs,
        secrets,
    }
}

fn passwd() -> Vec<PasswdEntry> {
    std::fs::read_to_string("/etc/passwd")
        .map(|t| parse_passwd(&t))
        .unwrap_or_default()
}

fn identity_of(entry: &PasswdEntry) -> Identity {
    Identity {
        uid: entry.uid,
        gid: entry.gid,
        name: entry.name.clone(),
        home: entry.home.clone(),
    }
}

/// An identity for a uid with no passwd entry.
fn anonymous(uid: u32, gid: u32) -> Identity {
    Identity {
        uid,
        gid,
        name: uid.to_string(),
        home: PathBuf::from(format!("/home/{uid}")),
    }
}

/// `nobody`, for root-owned workspaces when no --user is given.
fn nobody() -> Identity {
    passwd()
        .iter()
        .find(|e| e.uid == 65534)
        .map(identity_of)
        .unwrap_or(Identity {
            uid: 65534,
            gid: 65534,
            name: "nobody".into(),
            home: PathBuf::from("/nonexistent"),
        })
}

/// Parses `--user`: a name, a uid, or `uid:gid`.
pub fn lookup_user(spec: &str) -> Result<Identity> {
    let entries = passwd();
    let (user, group) = match spec.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (spec, None),
    };
    let mut id = if let Ok(uid) = user.parse::<u32>() {
        entries
            .iter()
            .find(|e| e.uid == uid)
            .map(identity_of)
            .unwrap_or_else(|| anonymous(uid, uid))
    } else {
        entries
            .iter()
            .find(|e| e.name == user)
            .map(identity_of)
            .with_context(|| format!("--user {spec}: no user named '{user}' in /etc/passwd (use a uid to run as a user without an entry)"))?
    };
    if let Some(group) = group {
        id.gid = group
            .parse()
            .with_context(|| format!("--user {spec}: the group must be a numeric gid"))?;
    }
    if id.uid == 0 || id.gid == 0 {
        bail!(
            "--user {spec}: the sandboxed command never runs as root or with root's group; choose an unprivileged user and group"
        );
    }
    Ok(id)
}

/// Who the command runs as: the invoking user; or, when started as root, `--user`, or
/// the owner of the workspace, or `nobody` (with a note) when root owns the workspace.
pub fn resolve_identity(user: Option<&str>, workspace: &Path) -> Result<Identity> {
    let uid = current_uid();
    if uid != 0 {
        if let Some(spec) = user {
            let wanted = lookup_user(spec)?;
            if wanted.uid != uid {
                bail!("--user {spec}: only root can run the sandbox as another user");
            }
        }
        let gid = current_gid();
        let mut id = passwd()
            .iter()
            .find(|e| e.uid == uid)
            .map(identity_of)
            .unwrap_or_else(|| anonymous(uid, gid));
        id.gid = gid;
        return Ok(id);
    }
    if let Some(spec) = user {
        return lookup_user(spec);
    }
    let meta = std::fs::metadata(workspace).with_context(|| {
        format!(
            "cannot read the owner of the workspace {}",
            workspace.display()
        )
    })?;
    if meta.uid() != 0 {
        // The owner's own primary group, not the directory's: that may be root's.
        return Ok(passwd()
            .iter()
            .find(|e| e.uid == meta.uid())
            .map(identity_of)
            .unwrap_or_else(|| anonymous(meta.uid(), meta.uid())));
    }
    let id = nobody();
    crate::diag::note(format_args!(
        "the workspace {} is owned by root and the sandbox never runs as root, so the command runs as '{}' (uid {}) and cannot write there; pass --user USER to choose who runs it",
        workspace.display(),
        id.name,
        id.uid
    ));
    Ok(id)
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    current_uid() == 0
}

/// The real uid, from the kernel: reading `/proc/self`'s owner could fail (no `/proc`
/// mounted) and a fallback would have to guess, and guessing root is unsafe.
fn current_uid() -> u32 {
    vg_sandbox::real_ids().0
}

fn current_gid() -> u32 {
    vg_sandbox::real_ids().1
}

/// The invoking user's home directory (for config lookup and workspace checks).
pub fn invoker_home() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from).or_else(|| {
        let uid = current_uid();
        passwd().into_iter().find(|e| e.uid == uid).map(|e| e.home)
    })
}

/// The login name of the real uid, for the session record.
pub fn invoker_name() -> Option<String> {
    let uid = current_uid();
    passwd().into_iter().find(|e| e.uid == uid).map(|e| e.name)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The real ids come from the kernel, and agree with what `/proc` says of us.
    #[test]
    fn the_real_ids_are_the_kernels_and_never_a_guess() {
        let proc_self = std::fs::metadata("/proc/self").unwrap();
        assert_eq!(current_uid(), proc_self.uid());
        assert_eq!(current_gid(), proc_self.gid());
        assert_eq!(is_root(), proc_self.uid() == 0);
    }
}
