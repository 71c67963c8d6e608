//! Tests across modules: writing, verifying and managing real session
//! folders in temporary directories.

mod cast;
mod crash;
mod interrupted;
mod ledger;
mod store;
mod tamper;
mod write;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::{Metadata, Origin, SessionStore};

/// A unique folder under the system temp dir, removed on drop.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let p = std::env::temp_dir().join(format!(
            "vg-records-{tag}-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&p).unwrap();
        Self(p)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn sample_meta() -> Metadata {
    let mut m = Metadata::new(Origin::Cli);
    m.name = Some("build".into());
    m.agent = Some("codex".into());
    m.command = vec!["make".into(), "-j4".into()];
    m.cwd_outside = Some("/home/u/project".into());
    m.cwd_inside = Some("/work".into());
    m.image = Some("debian:12".into());
    m.mounts = vec!["/home/u/project:/work".into()];
    m.set_env_keys(["PATH=/usr/bin", "TOKEN=secret-value"]);
    m.network.mode = Some("none".into());
    m.layers.landlock_abi = Some(7);
    m.layers.seccomp = Some("filter".into());
    m.layers.namespaces = vec!["user".into(), "mount".into(), "pid".into()];
    m.layers.no_new_privs = Some(true);
    m.description = Some("test session".into());
    m
}

/// A store in a fresh temp folder (the folder is returned to keep it alive).
pub(crate) fn store(tag: &str) -> (TempDir, SessionStore) {
    let tmp = TempDir::new(tag);
    let store = SessionStore::open(&tmp.path().join("logs")).unwrap();
    (tmp, store)
}
