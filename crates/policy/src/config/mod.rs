//! Configuration files: `vectraguard.toml` in a project, the user's
//! `~/.config/vectraguard/config.toml`, or a file named with `--config`.
//!
//! A file sets the same things as the `sandbox run` flags, at its top level and in named
//! `[profiles.NAME]` tables. Every value is checked while parsing, with the same parsers
//! the flags use, so a mistake is reported with its file and line before anything runs.
//! Layering (project file, then user file, then flags; later wins) is [`Settings::overlay`]
//! and [`resolve_profile`].
//!
//! Network rules are the exception to "later wins": the first rule that matches decides,
//! so a higher layer's rules go in front. The resulting order is: flags; then each file
//! from the most trusted (`--config`, then the user's file) to the project file, each
//! file's selected profile before its top level; then a built-in profile's rules.
//! `add_hosts` pins are appended in the opposite order, and the last pin of a name wins,
//! so that flags again outrank files. `tls_passthrough` and `upstream_ca` are appended;
//! `[secrets.NAME]` tables (top level only, not in profiles) replace a lower layer's
//! secret of the same name.
//!
//! A project file is untrusted input: it lives in a repository that sandboxed code can
//! write. It may therefore only reach inside its own directory (see
//! [`ConfigSource::Project`]); anything wider belongs in the user's file or on the
//! command line, where the user wrote it.
//!
//! Where things are: `file.rs` reads one file (`load`, `parse`, `discover_project`,
//! `user_config_path`); `raw.rs` is its spanned TOML form; `validate.rs` turns each raw
//! value into its typed form with the file's line; `project.rs` is what a project file
//! may not reach or claim; `diagnostics.rs` words TOML errors and per-key hints;
//! `settings.rs` is the typed `Settings` and its overlay; `profile.rs` layers files and
//! profiles (`resolve_profile`, the built-in `code-exec`); `learned.rs` finds and loads
//! learned profiles (`profiles/NAME.toml`, written by `sandbox run --learn NAME`).

mod diagnostics;
mod file;
mod learned;
mod profile;
mod project;
mod project_access;
mod raw;
mod settings;
#[cfg(test)]
mod test_support;
mod validate;

use std::path::{Path, PathBuf};

pub(crate) use diagnostics::line_of;
pub use file::{ConfigFile, discover_project, load, parse, user_config_path};
pub use learned::{
    MAX_PROFILE_NAME, ProfileNameError, add_learned_profile, learned_profile_path,
    learned_profiles_dir, load_learned, parse_learned, validate_profile_name,
};
pub use profile::{BUILTIN_PROFILES, resolve_profile, resolve_profile_over};
pub use project_access::{Exposed, ProjectAccess};
pub use settings::Settings;

/// The name of a project's configuration file, looked up from the working directory up.
pub const PROJECT_FILE_NAME: &str = "vectraguard.toml";

/// Where to put settings that a project file is not allowed to make.
const USER_FILE_HINT: &str = "~/.config/vectraguard/config.toml";

/// Where a configuration file came from, which decides how far it is trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// `vectraguard.toml` in the working directory or an ancestor. The sandbox may have
    /// written it, so its mounts, read-only paths and env files must stay inside the
    /// project directory, it may not set `user`, and it may not copy host variables
    /// (`env = ["KEY"]`), which is how secrets such as tokens would leak in. On the
    /// network it may only narrow: no `network = "host"`, no allow rules, and no
    /// `add_hosts` (a pin lets a name reach private addresses); nor may it weaken HTTPS
    /// inspection or handle credentials (`tls_passthrough`, `upstream_ca`,
    /// `[secrets.NAME]`). It may not state who
    /// runs the session (`agent`, `description`), which the record shows as fact. Its
    /// limits only cap what applies without it ([`Limits::tightened_by`]), and all its
    /// settings rank below the user's files, profiles included.
    ///
    /// [`Limits::tightened_by`]: crate::limits::Limits::tightened_by
    Project,
    /// The user's own file (`$XDG_CONFIG_HOME/vectraguard/config.toml`).
    User,
    /// A file named with `--config`: the user chose it, so it is trusted like `User`.
    Explicit,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "{}: cannot read configuration file: {error} (hint: check that the file exists and is readable, or name another one with --config)",
        path.display()
    )]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    /// A syntax error, an unknown key or a bad value. `line` is 1-based; 0 when unknown.
    #[error("{}: {message} (hint: {hint})", location(file, *line))]
    Invalid {
        file: PathBuf,
        line: usize,
        message: String,
        hint: String,
    },
    #[error(
        "unknown profile '{name}' (requested with --profile): {} (hint: define [profiles.{name}] in {PROJECT_FILE_NAME} or {USER_FILE_HINT}, learn one with `vectraguard sandbox run --learn {name} -- COMMAND` (`vectraguard profile ls` lists the learned profiles), or use a known profile)",
        known_profiles(known)
    )]
    UnknownProfile { name: String, known: Vec<String> },
    /// `--profile NAME` names both a learned profile and a file's table or a built-in
    /// profile: which one was meant cannot be guessed.
    #[error(
        "profile '{name}' is defined twice: {defined}, and the learned profile {} (hint: rename or remove one of them: `vectraguard profile rm {name}` removes the learned one)",
        learned.display()
    )]
    ProfileTwice {
        name: String,
        defined: String,
        learned: PathBuf,
    },
    #[error(
        "{}: cannot read the learned profile '{name}': {error} (hint: check the file's permissions, or remove it with `vectraguard profile rm {name}`)",
        path.display()
    )]
    LearnedRead {
        path: PathBuf,
        name: String,
        error: std::io::Error,
    },
    /// A project file's mount, read-only path or env file reaches further than the
    /// user's own settings let the sandbox see.
    #[error(
        "{}: {what}, which your command line and config do not give it; a project file can only narrow what the sandbox sees, because the sandbox may have written it (hint: if that is intended, pass {flag} yourself or move the setting to {USER_FILE_HINT})",
        file.display()
    )]
    ProjectWidens {
        file: PathBuf,
        what: String,
        flag: String,
    },
}

fn location(file: &Path, line: usize) -> String {
    if line == 0 {
        file.display().to_string()
    } else {
        format!("{}:{line}", file.display())
    }
}

fn known_profiles(known: &[String]) -> String {
    if known.is_empty() {
        "no profiles are defined".to_owned()
    } else {
        format!("known profiles: {}", known.join(", "))
    }
}
