//! What learning needs to know about the host and the sandbox the profile is for: the
//! home, the workspaces, what the default view already shows, and what exists on the
//! host (asked through [`HostProbe`], so tests use a fake).

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use vg_policy::sensitive::Sensitive;
use vg_policy::view::{LEARN_READ_ONLY, SYSTEM_DIRS};

/// What a host path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostKind {
    Dir,
    /// Anything that is not a directory (a file, a socket, a device).
    File,
}

/// What the host has at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// Nothing (or nothing the invoker may see).
    Missing,
    /// There, at its own real path.
    Found(HostKind),
    /// Reached through a symlink, at this real path (for a missing path: below a
    /// symlinked folder). A mount needs the real path, and inside the sandbox the
    /// link itself is not there, so such a path is not granted.
    Elsewhere(PathBuf),
}

/// Asks the host about paths.
pub trait HostProbe {
    fn probe(&self, path: &Path) -> Probe;
}

/// The real host file system, as the invoker sees it.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealHost;

impl HostProbe for RealHost {
    fn probe(&self, path: &Path) -> Probe {
        match fs::symlink_metadata(path) {
            Ok(_) => match fs::canonicalize(path) {
                Ok(real) if real == path => match fs::metadata(path) {
                    Ok(meta) if meta.is_dir() => Probe::Found(HostKind::Dir),
                    Ok(_) => Probe::Found(HostKind::File),
                    Err(_) => Probe::Missing,
                },
                Ok(real) => Probe::Elsewhere(real),
                // A dangling link: it leads nowhere a mount could use.
                Err(_) => Probe::Missing,
            },
            Err(e) if e.kind() == ErrorKind::NotFound => missing_below(path),
            Err(_) => Probe::Missing,
        }
    }
}

/// A missing path is `Elsewhere` when its nearest existing ancestor is reached
/// through a symlink: a folder created there would be too.
fn missing_below(path: &Path) -> Probe {
    let Some(existing) = path.ancestors().skip(1).find(|a| a.exists()) else {
        return Probe::Missing;
    };
    match fs::canonicalize(existing) {
        Ok(real) if real != existing => match path.strip_prefix(existing) {
            Ok(rest) => Probe::Elsewhere(real.join(rest)),
            Err(_) => Probe::Missing,
        },
        _ => Probe::Missing,
    }
}

/// The sandbox the profile will be used in, and the host it comes from.
pub struct LearnContext<'a> {
    /// The sandbox user's home: the same path inside the sandbox and on the host.
    pub home: PathBuf,
    /// Writable in every run already (the workspace, `--mount`s).
    pub workspaces: Vec<PathBuf>,
    /// Visible read-only in the default view (the system folders): reading them needs
    /// nothing, and writing them is never granted.
    pub system: Vec<PathBuf>,
    /// The sandbox's own folders (`/tmp`, `/proc`, `/dev`, `/sys`): nothing to grant,
    /// whatever was done there.
    pub private: Vec<PathBuf>,
    /// Outside the home, what learning's view showed read-only (its extra folders and
    /// the user's read-only mounts): reads below them are granted read-only; writes
    /// there failed, and anything elsewhere was not in the view at all, so neither is
    /// ever granted (a command names any path it likes: only what it could use counts).
    pub visible: Vec<PathBuf>,
    /// Places never granted besides [`vg_policy::sensitive`]'s: Vectra Guard's own
    /// folders where they are not the default ones, and the real paths of sensitive
    /// locations that are symlinks (`~/.gnupg -> dotfiles/gnupg`).
    pub withheld: Vec<Withheld>,
    pub host: &'a dyn HostProbe,
}

impl<'a> LearnContext<'a> {
    /// The default view's folders ([`default_system`], [`default_private`]) and
    /// learning's ([`default_visible`]); nothing withheld beyond the sensitive places.
    pub fn new(home: PathBuf, workspaces: Vec<PathBuf>, host: &'a dyn HostProbe) -> Self {
        Self {
            home,
            workspaces,
            system: default_system(),
            private: default_private(),
            visible: default_visible(),
            withheld: Vec::new(),
            host,
        }
    }
}

/// A place a learned profile never grants (see [`LearnContext::withheld`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withheld {
    pub path: PathBuf,
    pub category: Sensitive,
    /// Readable, but never granted for writing (a shell startup file's real path).
    pub write_only: bool,
}

impl Withheld {
    /// Never granted, for reading or writing.
    pub fn new(path: impl Into<PathBuf>, category: Sensitive) -> Self {
        Self {
            path: path.into(),
            category,
            write_only: false,
        }
    }

    /// Whether it matters for an access that writes (`write`) or only reads.
    pub fn applies(&self, write: bool) -> bool {
        write || !self.write_only
    }
}

/// The folders learning's view shows read-only outside the home
/// ([`LEARN_READ_ONLY`]).
pub fn default_visible() -> Vec<PathBuf> {
    LEARN_READ_ONLY.iter().map(PathBuf::from).collect()
}

/// The system folders every sandbox sees read-only ([`SYSTEM_DIRS`]).
pub fn default_system() -> Vec<PathBuf> {
    SYSTEM_DIRS.iter().map(PathBuf::from).collect()
}

/// The folders each sandbox has of its own.
pub fn default_private() -> Vec<PathBuf> {
    ["/tmp", "/proc", "/dev", "/sys"]
        .iter()
        .map(PathBuf::from)
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_real_host_tells_folders_files_links_and_absence() {
        let root = std::env::temp_dir().join(format!("vg-learn-probe-{}", std::process::id()));
        fs::create_dir_all(root.join("dir/sub")).unwrap();
        let root = fs::canonicalize(&root).unwrap();
        fs::write(root.join("file"), "x").unwrap();
        std::os::unix::fs::symlink(root.join("dir"), root.join("link")).unwrap();
        std::os::unix::fs::symlink(root.join("absent"), root.join("dangling")).unwrap();
        let probe = |rel: &str| RealHost.probe(&root.join(rel));
        let results = [
            probe("dir"),
            probe("file"),
            probe("nothing"),
            probe("link"),
            probe("link/sub"),
            probe("link/new/deeper"),
            probe("dangling"),
            probe("dir/new"),
        ];
        fs::remove_dir_all(&root).unwrap();
        assert_eq!(
            results,
            [
                Probe::Found(HostKind::Dir),
                Probe::Found(HostKind::File),
                Probe::Missing,
                Probe::Elsewhere(root.join("dir")),
                Probe::Elsewhere(root.join("dir/sub")),
                Probe::Elsewhere(root.join("dir/new/deeper")),
                Probe::Missing,
                Probe::Missing,
            ]
        );
    }

    #[test]
    fn the_default_view_folders() {
        struct Nothing;
        impl HostProbe for Nothing {
            fn probe(&self, _: &Path) -> Probe {
                Probe::Missing
            }
        }
        let cx = LearnContext::new("/home/u".into(), vec!["/w".into()], &Nothing);
        assert!(cx.system.contains(&PathBuf::from("/usr")));
        assert!(cx.system.contains(&PathBuf::from("/etc")));
        assert_eq!(cx.private, default_private());
        assert!(cx.private.contains(&PathBuf::from("/tmp")));
    }
}
