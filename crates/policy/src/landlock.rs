//! Landlock access classes, as data. `vg-sandbox` maps each class to the access
//! rights the running kernel's ABI supports.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// List a directory, nothing more.
    ReadDir,
    /// Read files, list directories, execute programs.
    ReadExec,
    /// Everything a workspace needs: create, write, remove, rename, truncate.
    ReadWrite,
    /// Device nodes and terminals: read, write, ioctl; no creation.
    Device,
    /// procfs: read, and write to the process's own files (`/proc/self/...`).
    Proc,
}

/// Path rules in the order they were derived from the view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LandlockRules {
    pub rules: Vec<(PathBuf, Access)>,
}

impl LandlockRules {
    pub fn push(&mut self, path: impl Into<PathBuf>, access: Access) {
        self.rules.push((path.into(), access));
    }

    /// The access granted exactly at `path` by the last rule naming it.
    pub fn access_of(&self, path: impl AsRef<Path>) -> Option<Access> {
        self.rules
            .iter()
            .rev()
            .find(|(p, _)| p == path.as_ref())
            .map(|(_, a)| *a)
    }
}
