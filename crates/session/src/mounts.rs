//! Step two of planning: the host paths the sandbox sees. Each mount's host side
//! must exist and be its own real path; Vectra Guard's own folders (the records, the
//! image store, the engines' folder) must stay out of every sandbox.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use vg_policy::config::Settings;
use vg_policy::mount::MountSpec;
use vg_policy::paths::is_within;
use vg_policy::view::{NodeKind, ResolvedMount};

use crate::host;

/// Checks every mount's host side and resolves it; without `--mount`, the current
/// directory is the workspace, at the same path inside. `read_only` and `read_write`
/// paths are mounted at the same place, after the mounts.
pub fn resolve_mounts(settings: &Settings, cwd: &Path) -> Result<Vec<ResolvedMount>> {
    let mut specs = settings.mounts.clone();
    if specs.is_empty() {
        if cwd == Path::new("/") {
            bail!(
                "refusing to use / as the workspace: cd into a project directory or pass --mount HOST:CONTAINER"
            );
        }
        if host::invoker_home().as_deref() == Some(cwd) {
            bail!(
                "refusing to use your home directory {} as the workspace (it holds your keys and tokens): cd into a project directory or pass --mount HOST:CONTAINER",
                cwd.display()
            );
        }
        specs.push(MountSpec {
            host: cwd.to_path_buf(),
            container: cwd.to_path_buf(),
            read_only: false,
        });
    }
    for path in &settings.read_only {
        specs.push(MountSpec {
            host: path.clone(),
            container: path.clone(),
            read_only: true,
        });
    }
    // A learned profile's writable folders: beside the workspace, not instead of it.
    for path in &settings.read_write {
        specs.push(MountSpec {
            host: path.clone(),
            container: path.clone(),
            read_only: false,
        });
    }
    specs.iter().map(resolve_mount).collect()
}

fn resolve_mount(spec: &MountSpec) -> Result<ResolvedMount> {
    let named = &spec.host;
    let meta = std::fs::metadata(named).with_context(|| {
        format!(
            "mount source {} does not exist or cannot be read",
            named.display()
        )
    })?;
    let real = std::fs::canonicalize(named)
        .with_context(|| format!("cannot resolve mount source {}", named.display()))?;
    if &real != named {
        bail!(
            "mount source {} resolves through a symlink to {}: name the real path instead",
            named.display(),
            real.display()
        );
    }
    Ok(ResolvedMount {
        host: real,
        container: spec.container.clone(),
        read_only: spec.read_only,
        kind: if meta.is_dir() {
            NodeKind::Dir
        } else {
            NodeKind::File
        },
    })
}

/// The host path `path` as seen inside the sandbox, through the mount that holds it.
pub fn to_container(path: &Path, mounts: &[ResolvedMount]) -> Option<PathBuf> {
    mounts
        .iter()
        .rev()
        .filter(|m| m.kind == NodeKind::Dir && is_within(path, &m.host))
        .max_by_key(|m| m.host.components().count())
        .and_then(|m| {
            path.strip_prefix(&m.host).ok().map(|rest| {
                if rest.as_os_str().is_empty() {
                    m.container.clone()
                } else {
                    m.container.join(rest)
                }
            })
        })
}

pub fn default_workdir(cwd: &Path, mounts: &[ResolvedMount]) -> PathBuf {
    to_container(cwd, mounts)
        .or_else(|| {
            mounts
                .iter()
                .find(|m| m.kind == NodeKind::Dir)
                .map(|m| m.container.clone())
        })
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// The image store must stay out of every sandbox: one that could write it would
/// change the root filesystems later sessions run on (not verified again per run).
pub fn check_images_hidden(mounts: &[ResolvedMount]) -> Result<()> {
    match crate::home::images_root() {
        Ok(store) => check_hidden("the image store", &store, mounts),
        // No home to hold a store: there is nothing to hide.
        Err(_) => Ok(()),
    }
}

/// The engines' folder must stay out of every sandbox too: one that could write it
/// could say a Docker daemon holds limits it does not (it would then drop them).
pub fn check_engines_hidden(mounts: &[ResolvedMount]) -> Result<()> {
    match crate::home::engines_root() {
        Ok(folder) => check_hidden("the engines' folder", &folder, mounts),
        // No home to hold it: nothing is kept there.
        Err(_) => Ok(()),
    }
}

/// The user's configuration folder (`config.toml` and the learned profiles) must never
/// be writable from a sandbox: one that could change it would choose the next
/// sandbox's mounts and network (red team: a learned profile granting
/// `~/.config/vectraguard` read-write let the next run plant `read_write = ["~/.ssh"]`).
pub fn check_config_unwritable(mounts: &[ResolvedMount]) -> Result<()> {
    let Some(home) = host::invoker_home() else {
        return Ok(());
    };
    let xdg = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from);
    let config = vg_policy::config::user_config_path(&home, xdg.as_deref());
    let Some(folder) = config.parent() else {
        return Ok(());
    };
    check_unwritable("your Vectra Guard configuration folder", folder, mounts)?;
    // Its profiles folder too, when it is a symlink to somewhere else.
    let profiles = vg_policy::config::learned_profiles_dir(&home, xdg.as_deref());
    check_unwritable("your learned profiles folder", &profiles, mounts)
}

/// Refuses a run in which a writable mount holds `folder` or lies inside it.
fn check_unwritable(what: &str, folder: &Path, mounts: &[ResolvedMount]) -> Result<()> {
    let root = nearest_real_path(folder);
    for m in mounts.iter().filter(|m| !m.read_only) {
        if is_within(&root, &m.host) || is_within(&m.host, &root) {
            bail!(
                "{what} {} would be writable inside the sandbox through the mount of {}: mount that read-only, or a folder that does not hold it",
                root.display(),
                m.host.display()
            );
        }
    }
    Ok(())
}

/// Refuses a run in which `folder` would be visible: inside a system directory every
/// sandbox reads, or holding or inside a mount. For the records folder, a sandbox that
/// saw it could read other sessions' output or rewrite its own history.
pub fn check_hidden(what: &str, folder: &Path, mounts: &[ResolvedMount]) -> Result<()> {
    let root = nearest_real_path(folder);
    // The system directories are visible (read-only) in every sandbox.
    if let Some(dir) = vg_policy::view::SYSTEM_DIRS
        .iter()
        .find(|d| is_within(&root, Path::new(d)))
    {
        bail!(
            "{what} {} is inside {dir}, which every sandbox can read: set VECTRAGUARD_HOME to a private folder (the default is ~/.vectraguard)",
            root.display()
        );
    }
    for m in mounts {
        if is_within(&root, &m.host) || is_within(&m.host, &root) {
            bail!(
                "{what} {} would be visible inside the sandbox through the mount of {}: set VECTRAGUARD_HOME to a folder outside every mounted path",
                root.display(),
                m.host.display()
            );
        }
    }
    Ok(())
}

/// `path` with symlinks resolved as far as it exists (the records folder may not
/// exist yet).
fn nearest_real_path(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            return rest.iter().rev().fold(real, |p, c| p.join(c));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_writable_mount_never_holds_the_configuration_folder() {
        let mount = |host: &str, read_only: bool| ResolvedMount {
            host: PathBuf::from(host),
            container: PathBuf::from(host),
            read_only,
            kind: NodeKind::Dir,
        };
        let folder = Path::new("/nonexistent-vg/u/.config/vectraguard");
        for (host, read_only, refused) in [
            ("/nonexistent-vg/u/.config/vectraguard", false, true),
            ("/nonexistent-vg/u/.config", false, true),
            (
                "/nonexistent-vg/u/.config/vectraguard/profiles",
                false,
                true,
            ),
            ("/nonexistent-vg/u", false, true),
            ("/nonexistent-vg/u/.config/vectraguard", true, false),
            ("/nonexistent-vg/u/.config/tool", false, false),
            ("/nonexistent-vg/u/.config/vectraguard-x", false, false),
        ] {
            let result = check_unwritable("the folder", folder, &[mount(host, read_only)]);
            assert_eq!(result.is_err(), refused, "{host} read_only={read_only}");
            if let Err(e) = result {
                assert!(e.to_string().contains("read-only"), "{e}");
            }
        }
    }

    #[test]
    fn read_write_paths_go_beside_the_workspace() {
        let root = std::env::temp_dir().join(format!("vg-mounts-test-{}", std::process::id()));
        let (work, cache, conf) = (root.join("work"), root.join("cache"), root.join("conf"));
        for dir in [&work, &cache, &conf] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let root = std::fs::canonicalize(&root).unwrap();
        let settings = Settings {
            read_only: vec![root.join("conf")],
            read_write: vec![root.join("cache")],
            ..Settings::default()
        };
        let mounts = resolve_mounts(&settings, &root.join("work"));
        std::fs::remove_dir_all(&root).unwrap();
        let seen: Vec<(PathBuf, bool)> = mounts
            .unwrap()
            .into_iter()
            .map(|m| (m.container, m.read_only))
            .collect();
        assert_eq!(
            seen,
            [
                (root.join("work"), false),
                (root.join("conf"), true),
                (root.join("cache"), false),
            ]
        );
    }

    #[test]
    fn host_paths_map_through_the_deepest_mount() {
        let mounts = vec![
            ResolvedMount {
                host: "/home/a/p".into(),
                container: "/workspace".into(),
                read_only: false,
                kind: NodeKind::Dir,
            },
            ResolvedMount {
                host: "/home/a/p/sub".into(),
                container: "/other".into(),
                read_only: true,
                kind: NodeKind::Dir,
            },
        ];
        assert_eq!(
            to_container(Path::new("/home/a/p/x.sh"), &mounts),
            Some(PathBuf::from("/workspace/x.sh"))
        );
        assert_eq!(
            to_container(Path::new("/home/a/p/sub/y"), &mounts),
            Some(PathBuf::from("/other/y"))
        );
        assert_eq!(to_container(Path::new("/etc/passwd"), &mounts), None);
        assert_eq!(
            default_workdir(Path::new("/elsewhere"), &mounts),
            PathBuf::from("/workspace")
        );
    }
}
