//! Helpers shared by the unit tests of the `config` modules.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use super::{ConfigError, ConfigFile, ConfigSource, Settings, parse};
use crate::env::EnvAssignment;
use crate::mount::MountSpec;
use crate::network::Rule;

pub(super) fn user_file(text: &str) -> Result<ConfigFile, ConfigError> {
    parse(text, Path::new("/p/vectraguard.toml"), ConfigSource::User)
}

pub(super) fn project_file(text: &str) -> Result<ConfigFile, ConfigError> {
    parse(
        text,
        Path::new("/p/vectraguard.toml"),
        ConfigSource::Project,
    )
}

/// (line, rendered message) of an `Invalid` error.
pub(super) fn invalid(result: Result<ConfigFile, ConfigError>) -> (usize, String) {
    match result {
        Err(e @ ConfigError::Invalid { line, .. }) => (line, e.to_string()),
        other => panic!("expected an Invalid error, got {other:?}"),
    }
}

pub(super) fn mount(spec: &str) -> MountSpec {
    MountSpec::parse(spec).unwrap()
}

pub(super) fn env(item: &str) -> EnvAssignment {
    EnvAssignment::parse(item).unwrap()
}

/// A fresh directory under the system temp dir, removed on drop.
pub(super) struct TempDir(pub(super) PathBuf);

impl TempDir {
    pub(super) fn new() -> Self {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let unique = format!(
            "vg-config-test-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let dir = std::env::temp_dir().join(unique);
        fs::create_dir_all(&dir).unwrap();
        Self(fs::canonicalize(dir).unwrap())
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

pub(super) fn rule(line: &str) -> Rule {
    Rule::parse_line(line).unwrap()
}

pub(super) fn rule_texts(settings: &Settings) -> Vec<&str> {
    settings
        .network_rules
        .iter()
        .map(|r| r.text.as_str())
        .collect()
}
