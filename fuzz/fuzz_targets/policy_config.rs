//! Configuration files (`config/`): a project's `vectraguard.toml` is written by
//! whoever wrote the repository, so every key, table, rule and risk rule in it is
//! untrusted. Input: selector byte (0-2: project, user or `--config` file), then the
//! TOML. A file that parses is then used as the session would: its profile resolved,
//! its risk rules compiled into the classifier.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use vg_policy::config::{self, ConfigSource};
use vg_policy::risk;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let (sel, text) = common::selector(data);
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let source = match sel % 3 {
        0 => ConfigSource::Project,
        1 => ConfigSource::User,
        _ => ConfigSource::Explicit,
    };
    // A folder that does not exist: nothing on disk takes part.
    let path = Path::new("/nonexistent-vectraguard-fuzz/vectraguard.toml");
    let Ok(file) = config::parse(text, path, source) else {
        return;
    };
    let _ = risk::config::classifier(&[&file]);
    let _ = config::resolve_profile(&[&file], None);
    for name in file.profiles.keys() {
        let _ = config::resolve_profile(&[&file], Some(name));
    }
});
