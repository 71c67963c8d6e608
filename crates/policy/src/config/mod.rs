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
//! so that flags again outrank files.
//!
//! A project file is untrusted input: it lives in a repository that sandboxed code can
//! write. It may therefore only reach inside its own directory (see
//! [`ConfigSource::Project`]); anything wider belongs in the user's file or on the
//! command line, where the user wrote it.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fmt;
use std::fs;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use toml::Spanned;

use crate::env::EnvAssignment;
use crate::limits::{self, LimitError, Limits};
use crate::mount::{MountSpec, MountSpecError};
use crate::network::{Action, AddHost, NetworkMode, Rule};
use crate::paths::{is_within, normalize_absolute};

mod document;
mod raw;
#[cfg(test)]
mod tests;

use document::*;
use raw::*;

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
    /// `add_hosts` (a pin lets a name reach private addresses). It may not state who
    /// runs the session (`agent`, `description`), which the record shows as fact. Its
    /// limits only cap what applies without it ([`Limits::tightened_by`]), and all its
    /// settings rank below the user's files, profiles included.
    Project,
    /// The user's own file (`$XDG_CONFIG_HOME/vectraguard/config.toml`).
    User,
    /// A file named with `--config`: the user chose it, so it is trusted like `User`.
    Explicit,
}

/// Everything a configuration layer can set, already validated and typed. Flags are
/// turned into a `Settings` too, so that all layers merge the same way.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    pub name: Option<String>,
    pub agent: Option<String>,
    pub description: Option<String>,
    /// Absolute, normalised path inside the sandbox.
    pub workdir: Option<PathBuf>,
    /// A user name or `uid[:gid]`, checked for shape only.
    pub user: Option<String>,
    pub network: Option<NetworkMode>,
    /// In precedence order (first match wins); see the module documentation.
    pub network_rules: Vec<Rule>,
    /// `--add-host` pins, in order; for the same name the last one wins.
    pub add_hosts: Vec<AddHost>,
    pub mounts: Vec<MountSpec>,
    /// Absolute, normalised paths mounted read-only in place.
    pub read_only: Vec<PathBuf>,
    pub env: Vec<EnvAssignment>,
    /// Absolute paths; relative ones in a file were resolved against its directory.
    pub env_files: Vec<PathBuf>,
    pub limits: Limits,
}

impl Settings {
    /// Merges a higher-precedence layer into this one: a scalar set in `higher` replaces
    /// ours, lists are appended (ours first), so later `env` entries override earlier
    /// ones when applied in order. Network rules are the exception: `higher`'s go first,
    /// because the first matching rule decides.
    pub fn overlay(&mut self, higher: Settings) {
        // Destructured so that a new field cannot be forgotten here.
        let Settings {
            name,
            agent,
            description,
            workdir,
            user,
            network,
            network_rules,
            add_hosts,
            mounts,
            read_only,
            env,
            env_files,
            limits,
        } = higher;
        replace_if_set(&mut self.name, name);
        replace_if_set(&mut self.agent, agent);
        replace_if_set(&mut self.description, description);
        replace_if_set(&mut self.workdir, workdir);
        replace_if_set(&mut self.user, user);
        replace_if_set(&mut self.network, network);
        // The first matching rule decides, so the higher layer's go in front; for pins
        // the last one of a name wins, so theirs go after ours.
        self.network_rules.splice(0..0, network_rules);
        self.add_hosts.extend(add_hosts);
        self.mounts.extend(mounts);
        self.read_only.extend(read_only);
        self.env.extend(env);
        self.env_files.extend(env_files);
        self.limits.overlay(limits);
    }
}

fn replace_if_set<T>(slot: &mut Option<T>, higher: Option<T>) {
    if higher.is_some() {
        *slot = higher;
    }
}

/// Only the network rules and pins of `settings`, to merge them apart from the rest.
fn network_part(settings: &Settings) -> Settings {
    Settings {
        network_rules: settings.network_rules.clone(),
        add_hosts: settings.add_hosts.clone(),
        ..Settings::default()
    }
}

/// One parsed configuration file.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigFile {
    pub path: PathBuf,
    pub source: ConfigSource,
    /// The top-level settings.
    pub settings: Settings,
    /// The `[profiles.NAME]` tables.
    pub profiles: BTreeMap<String, Settings>,
    /// The `profile` key: the profile to use when `--profile` is not given.
    pub default_profile: Option<String>,
    /// Line of the `profile` key, to point at it when that profile does not exist.
    default_profile_line: usize,
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
        "unknown profile '{name}' (requested with --profile): {} (hint: define [profiles.{name}] in {PROJECT_FILE_NAME} or {USER_FILE_HINT}, or use a known profile)",
        known_profiles(known)
    )]
    UnknownProfile { name: String, known: Vec<String> },
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

/// The nearest `vectraguard.toml` in `cwd` or one of its ancestors.
pub fn discover_project(cwd: &Path) -> Option<PathBuf> {
    cwd.ancestors()
        .map(|dir| dir.join(PROJECT_FILE_NAME))
        .find(|candidate| candidate.is_file())
}

/// `$XDG_CONFIG_HOME/vectraguard/config.toml`, or `~/.config/vectraguard/config.toml`
/// when `XDG_CONFIG_HOME` is unset or not absolute (the XDG spec says to ignore it then).
pub fn user_config_path(home: &Path, xdg_config_home: Option<&Path>) -> PathBuf {
    let base = match xdg_config_home {
        Some(dir) if dir.is_absolute() => dir.to_path_buf(),
        _ => home.join(".config"),
    };
    base.join("vectraguard").join("config.toml")
}

/// Reads and parses one file. The file's directory is made absolute and canonical (the
/// file itself is not followed: a symlinked project file must not move the project).
pub fn load(path: &Path, source: ConfigSource) -> Result<ConfigFile, ConfigError> {
    let read_error = |error| ConfigError::Read {
        path: path.to_path_buf(),
        error,
    };
    let text = fs::read_to_string(path).map_err(read_error)?;
    let absolute = std::path::absolute(path).map_err(read_error)?;
    let path = match (absolute.parent(), absolute.file_name()) {
        (Some(dir), Some(name)) => fs::canonicalize(dir).map_err(read_error)?.join(name),
        _ => absolute,
    };
    parse(&text, &path, source)
}

/// Parses the text of a file located at `path` (absolute; relative paths inside the file
/// are resolved against its directory). Pure, except that for `ConfigSource::Project`
/// the host paths that exist are resolved on disk, to catch symlinks out of the project.
pub fn parse(text: &str, path: &Path, source: ConfigSource) -> Result<ConfigFile, ConfigError> {
    let raw: RawFile = toml::from_str(text).map_err(|e| toml_error(e, text, path))?;
    let document = Document::new(text, path, source)?;
    let (top, profile, raw_profiles) = raw.split();
    let settings = document.settings(top)?;
    let mut profiles = BTreeMap::new();
    for (name, raw_profile) in raw_profiles {
        profiles.insert(name, document.settings(raw_profile)?);
    }
    let default_profile_line = profile
        .as_ref()
        .map_or(0, |p| line_of(text, p.span().start));
    let default_profile = document.label(profile, "profile")?;
    Ok(ConfigFile {
        path: path.to_path_buf(),
        source,
        settings,
        profiles,
        default_profile,
        default_profile_line,
    })
}

/// Merges files given in increasing precedence (project, then user, then `--config`),
/// then the selected profile of each file on top. The profile is `requested`
/// (`--profile`) or else the `profile` key of the highest file that has one. The caller
/// overlays the flags on the result.
///
/// A project file is below everything the user wrote, profiles included: its top
/// level and its profile come first, then the trusted files' top levels, the built-in
/// profile and the trusted files' profiles. Its limits can only tighten what applies
/// without it ([`Limits::tightened_by`]), and its network rules come last.
///
/// A profile chosen by a project file's `profile` key is looked up in project files
/// only: otherwise an untrusted repository could switch on a broad profile that the
/// user wrote for other work.
pub fn resolve_profile(
    files: &[&ConfigFile],
    requested: Option<&str>,
) -> Result<Settings, ConfigError> {
    let (name, chosen_by) = match requested {
        Some(name) => (Some(name), None),
        None => match files
            .iter()
            .rev()
            .find_map(|f| Some((f.default_profile.as_deref()?, *f)))
        {
            Some((name, file)) => (Some(name), Some(file)),
            None => (None, None),
        },
    };
    let eligible = |file: &ConfigFile| {
        chosen_by.is_none_or(|c| c.source != ConfigSource::Project)
            || file.source == ConfigSource::Project
    };
    let profile_of = |file: &ConfigFile| name.filter(|_| eligible(file));
    let builtin = name.and_then(builtin_profile);
    if let Some(name) = name
        && builtin.is_none()
        && !files
            .iter()
            .any(|f| profile_of(f).is_some_and(|n| f.profiles.contains_key(n)))
    {
        return Err(unknown_profile(files, name, chosen_by, eligible));
    }
    let (project, trusted): (Vec<&ConfigFile>, Vec<&ConfigFile>) = files
        .iter()
        .copied()
        .partition(|f| f.source == ConfigSource::Project);

    let mut settings = Settings::default();
    for file in &project {
        settings.overlay(file.settings.clone());
        if let Some(profile) = profile_of(file).and_then(|n| file.profiles.get(n)) {
            settings.overlay(profile.clone());
        }
    }
    for file in &trusted {
        settings.overlay(file.settings.clone());
    }
    if let Some(builtin) = &builtin {
        settings.overlay(builtin.clone());
    }
    for file in &trusted {
        if let Some(profile) = profile_of(file).and_then(|n| file.profiles.get(n)) {
            settings.overlay(profile.clone());
        }
    }

    // Limits: the built-in profile, then the user's files, each file's profile right
    // after its top level; a project file's (top level, then profile) only caps them.
    let mut limits = builtin.as_ref().map(|b| b.limits).unwrap_or_default();
    let mut ceiling = Limits::default();
    for file in files {
        let layer = if file.source == ConfigSource::Project {
            &mut ceiling
        } else {
            &mut limits
        };
        layer.overlay(file.settings.limits);
        if let Some(profile) = profile_of(file).and_then(|n| file.profiles.get(n)) {
            layer.overlay(profile.limits);
        }
    }
    settings.limits = limits.tightened_by(&ceiling);

    // Network rules file by file, so that a project profile's rules cannot get in
    // front of the user's (the first match decides).
    let mut network = builtin.as_ref().map(network_part).unwrap_or_default();
    for file in files {
        let mut file_network = network_part(&file.settings);
        if let Some(profile) = profile_of(file).and_then(|n| file.profiles.get(n)) {
            file_network.overlay(network_part(profile));
        }
        network.overlay(file_network);
    }
    settings.network_rules = network.network_rules;
    settings.add_hosts = network.add_hosts;
    Ok(settings)
}

fn unknown_profile(
    files: &[&ConfigFile],
    name: &str,
    chosen_by: Option<&ConfigFile>,
    eligible: impl Fn(&ConfigFile) -> bool,
) -> ConfigError {
    let known: Vec<String> = files
        .iter()
        .filter(|f| eligible(f))
        .flat_map(|f| f.profiles.keys().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    match chosen_by {
        None => ConfigError::UnknownProfile {
            name: name.to_owned(),
            known,
        },
        Some(file) => ConfigError::Invalid {
            file: file.path.clone(),
            line: file.default_profile_line,
            message: format!("profile '{name}' is not defined"),
            hint: if file.source == ConfigSource::Project {
                format!(
                    "{}; a project file can only select a profile defined in a project file",
                    known_profiles(&known)
                )
            } else {
                format!(
                    "{}; add a [profiles.{name}] table or change the profile key",
                    known_profiles(&known)
                )
            },
        },
    }
}

/// Profiles every installation has; a file's profile of the same name adds to it.
pub const BUILTIN_PROFILES: &[&str] = &["code-exec"];

fn builtin_profile(name: &str) -> Option<Settings> {
    match name {
        // Seed 002's limits for running untrusted code snippets.
        "code-exec" => Some(Settings {
            limits: Limits::code_exec(),
            ..Settings::default()
        }),
        _ => None,
    }
}
