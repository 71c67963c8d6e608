//! What a project file asks to expose of the host — mounts, read-only paths, env
//! files — held apart from the trusted layers' own until it is checked against them.
//!
//! Staying inside the project directory is not enough: the project directory can be
//! wider than what the user gave the sandbox (the file is found in an ancestor of the
//! working directory, or the user mounted the project read-only), and the file may
//! have been written by the sandbox or shipped by a hostile repository. So a project
//! file may only re-expose, at no more access, what the user's own layers (flags,
//! user config, or the default workspace) already expose: it narrows, never widens.

use std::path::{Path, PathBuf};

use super::ConfigError;
use crate::mount::MountSpec;
use crate::paths::is_within;

/// A project file's host access, not yet admitted (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProjectAccess {
    /// The project file, for error messages.
    pub file: Option<PathBuf>,
    pub mounts: Vec<MountSpec>,
    pub read_only: Vec<PathBuf>,
    pub env_files: Vec<PathBuf>,
}

/// A host path the trusted layers expose to the sandbox, and whether writably.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposed {
    pub host: PathBuf,
    pub writable: bool,
}

impl ProjectAccess {
    pub fn is_empty(&self) -> bool {
        self.mounts.is_empty() && self.read_only.is_empty() && self.env_files.is_empty()
    }

    pub(super) fn extend(&mut self, higher: ProjectAccess) {
        if higher.file.is_some() {
            self.file = higher.file;
        }
        self.mounts.extend(higher.mounts);
        self.read_only.extend(higher.read_only);
        self.env_files.extend(higher.env_files);
    }

    /// Checks every path against `trusted`, what the sandbox sees without the project
    /// file: a writable mount must lie inside a writable exposed path, anything else
    /// inside some exposed path. Paths are compared after resolving symlinks, so a
    /// link inside an exposed directory cannot point the check elsewhere.
    pub fn check(&self, trusted: &[Exposed]) -> Result<(), ConfigError> {
        let trusted: Vec<Exposed> = trusted
            .iter()
            .filter_map(|t| {
                Some(Exposed {
                    host: std::fs::canonicalize(&t.host).ok()?,
                    writable: t.writable,
                })
            })
            .collect();
        let within = |path: &Path, writable: bool| {
            std::fs::canonicalize(path).is_ok_and(|real| {
                trusted
                    .iter()
                    .any(|t| (t.writable || !writable) && is_within(&real, &t.host))
            })
        };
        let refuse = |what: String, flag: &str| ConfigError::ProjectWidens {
            file: self.file.clone().unwrap_or_default(),
            what,
            flag: flag.to_owned(),
        };
        for m in &self.mounts {
            if !within(&m.host, !m.read_only) {
                let access = if m.read_only { "read-only" } else { "writable" };
                return Err(refuse(
                    format!(
                        "the mount {}:{} would give the sandbox {access} access to {}",
                        m.host.display(),
                        m.container.display(),
                        m.host.display()
                    ),
                    "--mount",
                ));
            }
        }
        for path in &self.read_only {
            if !within(path, false) {
                return Err(refuse(
                    format!("read_only would show the sandbox {}", path.display()),
                    "--read-only",
                ));
            }
        }
        for path in &self.env_files {
            if !within(path, false) {
                return Err(refuse(
                    format!(
                        "env_files would read {} into the sandbox's environment",
                        path.display()
                    ),
                    "--env-file",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("vg-project-access-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("secret.env"), "K=v\n").unwrap();
        std::os::unix::fs::symlink(d.join("secret.env"), d.join("sub/link.env")).unwrap();
        d
    }

    fn mount(host: &Path, read_only: bool) -> MountSpec {
        MountSpec {
            host: host.to_path_buf(),
            container: "/x".into(),
            read_only,
        }
    }

    #[test]
    fn a_project_file_only_re_exposes_what_the_user_exposed() {
        let d = dir("widen");
        let sub = d.join("sub");
        let rw = [Exposed {
            host: sub.clone(),
            writable: true,
        }];
        let ro = [Exposed {
            host: d.clone(),
            writable: false,
        }];
        let access = |mounts: Vec<MountSpec>, read_only: Vec<PathBuf>, env_files: Vec<PathBuf>| {
            ProjectAccess {
                file: Some(d.join("vectraguard.toml")),
                mounts,
                read_only,
                env_files,
            }
        };
        // Inside, at no more access: admitted.
        assert!(
            access(vec![mount(&sub, false)], vec![], vec![])
                .check(&rw)
                .is_ok()
        );
        assert!(
            access(vec![mount(&d, true)], vec![d.clone()], vec![])
                .check(&ro)
                .is_ok()
        );
        // Writable where the user gave read-only.
        let err = access(vec![mount(&d, false)], vec![], vec![])
            .check(&ro)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("writable access") && err.contains("--mount"),
            "{err}"
        );
        // Outside what the user gave: the project directory above the workspace.
        assert!(
            access(vec![mount(&d, true)], vec![], vec![])
                .check(&rw)
                .is_err()
        );
        assert!(access(vec![], vec![d.clone()], vec![]).check(&rw).is_err());
        assert!(
            access(vec![], vec![], vec![d.join("secret.env")])
                .check(&rw)
                .is_err()
        );
        // A symlink inside the workspace does not carry the check outside it.
        assert!(
            access(vec![], vec![], vec![sub.join("link.env")])
                .check(&rw)
                .is_err()
        );
        // Nothing exposed (or a path that does not exist): refused.
        assert!(
            access(vec![mount(&sub, true)], vec![], vec![])
                .check(&[])
                .is_err()
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
