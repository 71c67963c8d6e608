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

mod project_access;
pub use project_access::{Exposed, ProjectAccess};

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
    /// A project file's mounts, read-only paths and env files, which apply only once
    /// [`Settings::admit_project_access`] has checked them against the rest.
    pub project_access: ProjectAccess,
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
            project_access,
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
        self.project_access.extend(project_access);
    }

    /// Applies the project file's host access (ahead of the trusted layers' own, where
    /// a project file's settings rank) if it stays within `trusted`, what the sandbox
    /// sees without it; see [`ProjectAccess::check`].
    pub fn admit_project_access(&mut self, trusted: &[Exposed]) -> Result<(), ConfigError> {
        let access = std::mem::take(&mut self.project_access);
        access.check(trusted)?;
        self.mounts.splice(0..0, access.mounts);
        self.read_only.splice(0..0, access.read_only);
        self.env_files.splice(0..0, access.env_files);
        Ok(())
    }
}

/// `settings` of the project file at `file` with its host access set apart.
fn quarantined(file: &Path, mut settings: Settings) -> Settings {
    settings.project_access = ProjectAccess {
        file: Some(file.to_path_buf()),
        mounts: std::mem::take(&mut settings.mounts),
        read_only: std::mem::take(&mut settings.read_only),
        env_files: std::mem::take(&mut settings.env_files),
    };
    settings
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
        settings.overlay(quarantined(&file.path, file.settings.clone()));
        if let Some(profile) = profile_of(file).and_then(|n| file.profiles.get(n)) {
            settings.overlay(quarantined(&file.path, profile.clone()));
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

// ---------------------------------------------------------------------------------------
// Raw, spanned form of a file. Values keep their byte spans so that errors found while
// validating them can name the line.

type Text = Option<Spanned<String>>;
/// A limit: `memory = "512m"`, `pids = 100`, `cpus = 0.5`.
type Scalar = Option<Spanned<RawScalar>>;

#[derive(Deserialize)]
#[serde(untagged, expecting = "a string or a number")]
enum RawScalar {
    Int(i64),
    Float(f64),
    Str(String),
}

impl RawScalar {
    fn text(&self) -> String {
        match self {
            RawScalar::Int(i) => i.to_string(),
            RawScalar::Float(f) => f.to_string(),
            RawScalar::Str(s) => s.clone(),
        }
    }
}
type TextList = Vec<Spanned<String>>;

/// The keys of a `[profiles.NAME]` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table of settings")]
struct RawSettings {
    name: Text,
    agent: Text,
    description: Text,
    workdir: Text,
    user: Text,
    network: Text,
    #[serde(default)]
    network_rules: TextList,
    #[serde(default)]
    add_hosts: TextList,
    #[serde(default)]
    mounts: TextList,
    #[serde(default)]
    read_only: TextList,
    env: Option<RawEnv>,
    #[serde(default)]
    env_files: TextList,
    memory: Scalar,
    cpus: Scalar,
    pids: Scalar,
    timeout: Scalar,
    max_output: Scalar,
    disk: Scalar,
    kill_grace: Scalar,
    ptys: Scalar,
    best_effort_limits: Option<Spanned<bool>>,
}

/// The top level: the keys of a profile plus `profile` and `profiles`. (A separate
/// struct rather than `#[serde(flatten)]`, which would lose spans and unknown-key errors.)
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table of settings")]
struct RawFile {
    name: Text,
    agent: Text,
    description: Text,
    workdir: Text,
    user: Text,
    network: Text,
    #[serde(default)]
    network_rules: TextList,
    #[serde(default)]
    add_hosts: TextList,
    #[serde(default)]
    mounts: TextList,
    #[serde(default)]
    read_only: TextList,
    env: Option<RawEnv>,
    #[serde(default)]
    env_files: TextList,
    memory: Scalar,
    cpus: Scalar,
    pids: Scalar,
    timeout: Scalar,
    max_output: Scalar,
    disk: Scalar,
    kill_grace: Scalar,
    ptys: Scalar,
    best_effort_limits: Option<Spanned<bool>>,
    profile: Text,
    #[serde(default)]
    profiles: BTreeMap<String, RawSettings>,
}

impl RawFile {
    fn split(self) -> (RawSettings, Text, BTreeMap<String, RawSettings>) {
        let RawFile {
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
            memory,
            cpus,
            pids,
            timeout,
            max_output,
            disk,
            kill_grace,
            ptys,
            best_effort_limits,
            profile,
            profiles,
        } = self;
        let settings = RawSettings {
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
            memory,
            cpus,
            pids,
            timeout,
            max_output,
            disk,
            kill_grace,
            ptys,
            best_effort_limits,
        };
        (settings, profile, profiles)
    }
}

/// `env` as an array of `"KEY=VALUE"`/`"KEY"` strings or as a table `KEY = "VALUE"`.
enum RawEnv {
    List(TextList),
    Table(Vec<(Spanned<String>, Spanned<String>)>),
}

impl<'de> Deserialize<'de> for RawEnv {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EnvVisitor;

        impl<'de> Visitor<'de> for EnvVisitor {
            type Value = RawEnv;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of \"KEY=VALUE\" strings or a table of KEY = \"VALUE\"")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawEnv, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(RawEnv::List(items))
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawEnv, A::Error> {
                let mut pairs = Vec::new();
                while let Some(pair) = map.next_entry()? {
                    pairs.push(pair);
                }
                Ok(RawEnv::Table(pairs))
            }
        }

        deserializer.deserialize_any(EnvVisitor)
    }
}

// ---------------------------------------------------------------------------------------
// Errors from the TOML layer (syntax, unknown keys, wrong types).

/// Turns a toml error into a `ConfigError` with a line, the key concerned and a hint.
fn toml_error(mut error: toml::de::Error, text: &str, file: &Path) -> ConfigError {
    let line = error.span().map_or(0, |span| line_of(text, span.start));
    // Without its input, toml's Display ends with "in `a.b`", the path of the key whose
    // value failed: the only public way to learn which key a type error is about.
    error.set_input(None);
    let rendered = error.to_string();
    let key_path = rendered
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("in `")?.strip_suffix('`'))
        .map(str::to_owned);
    let message = error.message();
    let invalid = |message: String, hint: String| ConfigError::Invalid {
        file: file.to_path_buf(),
        line,
        message,
        hint,
    };

    // serde's wording: "unknown field `x`, expected one of `a`, `b`".
    if let Some((key, expected)) = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split_once('`'))
    {
        let valid = expected
            .trim_start_matches(", ")
            .trim_start_matches("expected one of ")
            .trim_start_matches("expected ")
            .replace('`', "");
        let place = key_path.map_or_else(String::new, |p| format!(" in [{p}]"));
        let guess = [key.replace('-', "_"), format!("{}s", key.replace('-', "_"))]
            .into_iter()
            .find(|candidate| valid.split(", ").any(|v| v == candidate));
        let hint = match guess {
            Some(guess) => format!("did you mean '{guess}'? valid keys: {valid}"),
            None => format!("valid keys: {valid}"),
        };
        return invalid(format!("unknown key '{key}'{place}"), hint);
    }
    match key_path {
        Some(path) => invalid(
            format!("invalid value for '{path}': {message}"),
            key_hint(setting_key(&path)).to_owned(),
        ),
        None => invalid(
            format!("invalid TOML: {message}"),
            "check the syntax on this line: strings need quotes, arrays use [ ], tables use { } or [name] headers".to_owned(),
        ),
    }
}

/// The setting a key path is about: `mounts` for both `mounts` and
/// `profiles.strict.mounts.0`.
fn setting_key(path: &str) -> &str {
    let mut parts = path.split('.');
    match parts.next() {
        Some("profiles") => parts.nth(1).unwrap_or("profiles"),
        Some(first) => first,
        None => path,
    }
}

/// What each key expects, for type errors.
fn key_hint(key: &str) -> &'static str {
    match key {
        "name" => "name is a string, e.g. name = \"nightly\"",
        "agent" => "agent is a string, e.g. agent = \"dev-assistant\"",
        "description" => "description is a string",
        "workdir" => {
            "workdir is an absolute path inside the sandbox, e.g. workdir = \"/workspace\""
        }
        "user" => "user is a user name or \"uid[:gid]\", e.g. user = \"1000:1000\"",
        "network" => "network is one of \"none\", \"allow\", \"host\"",
        "network_rules" => {
            "network_rules is an array of \"allow TARGET[:PORTS]\" or \"deny TARGET[:PORTS]\" strings, tried in order, e.g. network_rules = [\"allow github.com:443\", \"deny *.evil.com\"]"
        }
        "add_hosts" => {
            "add_hosts is an array of \"NAME:IP\" strings, e.g. add_hosts = [\"db.internal:10.0.0.5\"]"
        }
        "mounts" => {
            "mounts is an array of \"HOST:CONTAINER[:ro]\" strings, e.g. mounts = [\"./src:/workspace\"]"
        }
        "read_only" => "read_only is an array of absolute paths, e.g. read_only = [\"/etc\"]",
        "env" => {
            "env is an array of \"KEY=VALUE\" or \"KEY\" strings, or a table such as env = { NODE_ENV = \"production\" }"
        }
        "env_files" => "env_files is an array of paths, e.g. env_files = [\".env\"]",
        "profile" => "profile names a [profiles.NAME] table, e.g. profile = \"strict\"",
        "profiles" => "each profile is a table: a [profiles.NAME] header followed by keys",
        _ => "see the Configuration section of the documentation",
    }
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

// ---------------------------------------------------------------------------------------
// Validation of values, with the file's context.

/// The file being converted: its text (for lines), path, directory and trust.
struct Document<'a> {
    text: &'a str,
    path: &'a Path,
    /// The file's directory, absolute and normalised; `None` if `path` is relative.
    dir: Option<PathBuf>,
    /// Set for project files only.
    project: Option<ProjectDir>,
}

/// The directory a project file may reach, lexically and with symlinks resolved.
struct ProjectDir {
    lexical: PathBuf,
    resolved: PathBuf,
}

impl<'a> Document<'a> {
    fn new(text: &'a str, path: &'a Path, source: ConfigSource) -> Result<Self, ConfigError> {
        let dir = path.parent().and_then(normalize_absolute);
        let project = match (source, &dir) {
            (ConfigSource::Project, Some(dir)) => Some(ProjectDir {
                lexical: dir.clone(),
                resolved: resolve_symlinks(dir).unwrap_or_else(|| dir.clone()),
            }),
            (ConfigSource::Project, None) => {
                return Err(ConfigError::Invalid {
                    file: path.to_path_buf(),
                    line: 0,
                    message: "cannot tell the project directory: the path is not absolute"
                        .to_owned(),
                    hint: "load project files by their absolute path".to_owned(),
                });
            }
            _ => None,
        };
        Ok(Self {
            text,
            path,
            dir,
            project,
        })
    }

    fn error(&self, span: Range<usize>, message: String, hint: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            file: self.path.to_path_buf(),
            line: line_of(self.text, span.start),
            message,
            hint: hint.into(),
        }
    }

    fn settings(&self, raw: RawSettings) -> Result<Settings, ConfigError> {
        let RawSettings {
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
            memory,
            cpus,
            pids,
            timeout,
            max_output,
            disk,
            kill_grace,
            ptys,
            best_effort_limits,
        } = raw;
        let limits = Limits {
            memory: self.limit(memory, "memory", |v| limits::parse_size("memory", v))?,
            cpus: self.limit(cpus, "cpus", limits::parse_cpus)?,
            pids: self.limit(pids, "pids", limits::parse_pids)?,
            timeout: self.limit(timeout, "timeout", |v| limits::parse_duration("timeout", v))?,
            max_output: self.limit(max_output, "max_output", |v| {
                limits::parse_size("max_output", v)
            })?,
            disk: self.limit(disk, "disk", |v| limits::parse_size("disk", v))?,
            kill_grace: self.limit(kill_grace, "kill_grace", |v| {
                limits::parse_duration("kill_grace", v)
            })?,
            ptys: self.limit(ptys, "ptys", limits::parse_ptys)?,
            best_effort: match best_effort_limits {
                Some(v) if self.project.is_some() => {
                    return Err(self.error(
                        v.span(),
                        "'best_effort_limits' cannot be set in a project file: it weakens the limits"
                            .to_owned(),
                        format!("move it to {USER_FILE_HINT} or pass --best-effort-limits"),
                    ));
                }
                Some(v) => Some(v.into_inner()),
                None => None,
            },
        };
        Ok(Settings {
            name: self.label(name, "name")?,
            agent: self.claim(agent, "agent", "--agent")?,
            description: self.claim(description, "description", "--description")?,
            workdir: workdir.map(|w| self.workdir(w)).transpose()?,
            user: user.map(|u| self.user(u)).transpose()?,
            network: network.map(|n| self.network(n)).transpose()?,
            network_rules: network_rules
                .into_iter()
                .map(|r| self.network_rule(r))
                .collect::<Result<_, _>>()?,
            add_hosts: add_hosts
                .into_iter()
                .map(|h| self.add_host(h))
                .collect::<Result<_, _>>()?,
            mounts: mounts
                .into_iter()
                .map(|m| self.mount(m))
                .collect::<Result<_, _>>()?,
            read_only: read_only
                .into_iter()
                .map(|p| self.read_only(p))
                .collect::<Result<_, _>>()?,
            env: match env {
                Some(env) => self.env(env)?,
                None => Vec::new(),
            },
            env_files: env_files
                .into_iter()
                .map(|f| self.env_file(f))
                .collect::<Result<_, _>>()?,
            limits,
            project_access: ProjectAccess::default(),
        })
    }

    fn limit<T>(
        &self,
        value: Scalar,
        key: &str,
        parse: impl FnOnce(&str) -> Result<T, LimitError>,
    ) -> Result<Option<T>, ConfigError> {
        let Some(value) = value else {
            return Ok(None);
        };
        parse(&value.get_ref().text())
            .map(Some)
            .map_err(|e| self.error(value.span(), format!("invalid {key} '{}'", e.value), e.hint))
    }

    /// Free text shown in listings and terminals: no control characters (which could
    /// drive the terminal of whoever runs `logs list`), and non-empty except descriptions.
    fn label(&self, value: Text, key: &str) -> Result<Option<String>, ConfigError> {
        let Some(value) = value else {
            return Ok(None);
        };
        let multiline = key == "description";
        let text = value.get_ref();
        if text
            .chars()
            .any(|c| c.is_control() && !(multiline && (c == '\n' || c == '\t')))
        {
            return Err(self.error(
                value.span(),
                format!("{key} contains a control character"),
                "remove it; this text is printed in terminals and session records",
            ));
        }
        if text.trim().is_empty() && !multiline {
            return Err(self.error(
                value.span(),
                format!("{key} is empty"),
                format!("give {key} a value or remove the key"),
            ));
        }
        Ok(Some(value.into_inner()))
    }

    /// A statement about who runs the session (`agent`, which also makes the origin
    /// `agent`, and `description`): recorded as fact in `metadata.json`, so only the
    /// user may make it, never a project file the sandbox can write.
    fn claim(&self, value: Text, key: &str, flag: &str) -> Result<Option<String>, ConfigError> {
        if let (Some(value), Some(_)) = (&value, &self.project) {
            return Err(self.error(
                value.span(),
                format!(
                    "'{key}' cannot be set in a project file: it is recorded as a fact about the session, and the sandbox can write that file"
                ),
                format!("move it to {USER_FILE_HINT} or pass {flag} on the command line"),
            ));
        }
        self.label(value, key)
    }

    fn workdir(&self, value: Spanned<String>) -> Result<PathBuf, ConfigError> {
        let raw = value.get_ref();
        match normalize_absolute(Path::new(raw)) {
            Some(path) if !raw.contains('\0') => Ok(path),
            _ => Err(self.error(
                value.span(),
                format!("invalid workdir '{raw}': it must be an absolute path without '..'"),
                "workdir is the directory inside the sandbox where the command starts, e.g. workdir = \"/workspace\"",
            )),
        }
    }

    fn user(&self, value: Spanned<String>) -> Result<String, ConfigError> {
        if self.project.is_some() {
            return Err(self.error(
                value.span(),
                "'user' cannot be set in a project file: the sandbox can write that file"
                    .to_owned(),
                format!("move it to {USER_FILE_HINT} or pass it on the command line"),
            ));
        }
        if !valid_user(value.get_ref()) {
            return Err(self.error(
                value.span(),
                format!("invalid user '{}'", value.get_ref()),
                key_hint("user"),
            ));
        }
        Ok(value.into_inner())
    }

    fn network(&self, value: Spanned<String>) -> Result<NetworkMode, ConfigError> {
        let mode = NetworkMode::parse(value.get_ref())
            .map_err(|e| self.error(value.span(), e.to_string(), key_hint("network")))?;
        if mode == NetworkMode::Host && self.project.is_some() {
            return Err(self.error(
                value.span(),
                "'network = \"host\"' cannot be set in a project file: it turns off network isolation, and the sandbox can write that file".to_owned(),
                format!("move it to {USER_FILE_HINT} or pass --network host"),
            ));
        }
        Ok(mode)
    }

    fn network_rule(&self, value: Spanned<String>) -> Result<Rule, ConfigError> {
        let rule = Rule::parse_line(value.get_ref())
            .map_err(|e| self.error(value.span(), e.to_string(), key_hint("network_rules")))?;
        if rule.action == Action::Allow && self.project.is_some() {
            return Err(self.error(
                value.span(),
                format!(
                    "'{}' cannot be set in a project file: the sandbox can write that file, so it could open the network to itself",
                    rule.text
                ),
                format!(
                    "a project file may only add deny rules; move allow rules to {USER_FILE_HINT} or pass --allow on the command line"
                ),
            ));
        }
        Ok(rule)
    }

    fn add_host(&self, value: Spanned<String>) -> Result<AddHost, ConfigError> {
        if self.project.is_some() {
            return Err(self.error(
                value.span(),
                "'add_hosts' cannot be set in a project file: a pinned name may reach private and loopback addresses, and the sandbox can write that file".to_owned(),
                format!("move it to {USER_FILE_HINT} or pass --add-host on the command line"),
            ));
        }
        AddHost::parse(value.get_ref())
            .map_err(|e| self.error(value.span(), e.to_string(), key_hint("add_hosts")))
    }

    fn mount(&self, value: Spanned<String>) -> Result<MountSpec, ConfigError> {
        let raw = value.get_ref();
        let mount_error = |e: MountSpecError| {
            self.error(
                value.span(),
                e.to_string(),
                "mounts are \"HOST:CONTAINER[:ro]\"; a relative HOST is taken from this file's directory, CONTAINER must be absolute",
            )
        };
        let spec = match MountSpec::parse(raw) {
            Ok(spec) => spec,
            // A convenience of files: `./src:/workspace` means next to this file. The
            // spec is parsed again with the resolved host so every other check applies.
            Err(MountSpecError::RelativeHost { path, .. }) => {
                let host = self.host_path(value.span(), &path, "mount host")?;
                let rest = raw.split_once(':').map_or("", |(_, rest)| rest);
                let Some(host) = host.to_str() else {
                    return Err(self.error(
                        value.span(),
                        format!("mount host '{}' is not valid UTF-8", host.display()),
                        "write the absolute path",
                    ));
                };
                MountSpec::parse(&format!("{host}:{rest}")).map_err(mount_error)?
            }
            Err(e) => return Err(mount_error(e)),
        };
        self.confine(value.span(), &spec.host, "mount host", "--mount")?;
        Ok(spec)
    }

    fn read_only(&self, value: Spanned<String>) -> Result<PathBuf, ConfigError> {
        let raw = value.get_ref();
        let Some(path) = normalize_absolute(Path::new(raw)).filter(|_| !raw.contains('\0')) else {
            return Err(self.error(
                value.span(),
                format!("invalid read_only path '{raw}': it must be absolute and without '..'"),
                key_hint("read_only"),
            ));
        };
        // The same checks as `--read-only` (no colons, not a reserved target).
        MountSpec::read_only_path(raw)
            .map_err(|e| self.error(value.span(), e.to_string(), key_hint("read_only")))?;
        self.confine(value.span(), &path, "read_only", "--read-only")?;
        Ok(path)
    }

    fn env(&self, env: RawEnv) -> Result<Vec<EnvAssignment>, ConfigError> {
        let mut out = Vec::new();
        match env {
            RawEnv::List(items) => {
                for item in items {
                    let assignment = EnvAssignment::parse(item.get_ref())
                        .map_err(|e| self.error(item.span(), e.to_string(), key_hint("env")))?;
                    if assignment.value.is_none() && self.project.is_some() {
                        return Err(self.error(
                            item.span(),
                            format!(
                                "env '{}' would copy the host's value, which a project file may not do",
                                assignment.key
                            ),
                            format!(
                                "give it a value (KEY=VALUE), or pass --env {} on the command line or set it in {USER_FILE_HINT}",
                                assignment.key
                            ),
                        ));
                    }
                    out.push(assignment);
                }
            }
            RawEnv::Table(pairs) => {
                for (key, value) in pairs {
                    // Checked alone first: "A=B" = "c" must not turn into A with "B=c".
                    let name_ok = !key.get_ref().contains('=');
                    let parsed =
                        EnvAssignment::parse(&format!("{}={}", key.get_ref(), value.get_ref()));
                    match parsed {
                        Ok(assignment) if name_ok => out.push(assignment),
                        Ok(_) => {
                            return Err(self.error(
                                key.span(),
                                format!("invalid environment variable name '{}'", key.get_ref()),
                                key_hint("env"),
                            ));
                        }
                        Err(e) => {
                            return Err(self.error(key.span(), e.to_string(), key_hint("env")));
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    fn env_file(&self, value: Spanned<String>) -> Result<PathBuf, ConfigError> {
        let path = self.host_path(value.span(), value.get_ref(), "env file")?;
        self.confine(value.span(), &path, "env file", "--env-file")?;
        Ok(path)
    }

    /// A host path written in a file: absolute, or relative to the file's directory.
    fn host_path(&self, span: Range<usize>, raw: &str, what: &str) -> Result<PathBuf, ConfigError> {
        if raw.starts_with('~') {
            return Err(self.error(
                span,
                format!("{what} '{raw}' starts with '~', which is not expanded"),
                "write the absolute path (relative paths are taken from this file's directory)",
            ));
        }
        let joined = match &self.dir {
            Some(dir) if Path::new(raw).is_relative() => dir.join(raw),
            _ => PathBuf::from(raw),
        };
        normalize_absolute(&joined)
            .filter(|_| !raw.is_empty() && !raw.contains('\0'))
            .ok_or_else(|| {
                self.error(
                    span,
                    format!("invalid {what} '{raw}': it must not be empty or contain '..'"),
                    "write an absolute path, or one relative to this file's directory without '..'",
                )
            })
    }

    /// For project files: `path` must lie inside the project directory, both as written
    /// and with symlinks resolved (a repository can contain `link -> ~/.ssh`).
    ///
    /// This is checked when the file is loaded; a concurrent process that swaps a path
    /// for a symlink afterwards is not caught here, so the mounting code should not
    /// follow symlinks it did not expect either.
    fn confine(
        &self,
        span: Range<usize>,
        path: &Path,
        what: &str,
        flag: &str,
    ) -> Result<(), ConfigError> {
        let Some(project) = &self.project else {
            return Ok(());
        };
        let hint = format!(
            "a project file can only reach inside its own directory, because the sandbox may have written it; pass {flag} on the command line or move the setting to {USER_FILE_HINT}"
        );
        if !is_within(path, &project.lexical) {
            return Err(self.error(
                span,
                format!(
                    "{what} '{}' is outside the project directory '{}'",
                    path.display(),
                    project.lexical.display()
                ),
                hint,
            ));
        }
        match resolve_symlinks(path) {
            Some(real) if is_within(&real, &project.resolved) => Ok(()),
            Some(real) => Err(self.error(
                span,
                format!(
                    "{what} '{}' resolves through a symlink to '{}', outside the project directory '{}'",
                    path.display(),
                    real.display(),
                    project.resolved.display()
                ),
                hint,
            )),
            None => Err(self.error(
                span,
                format!(
                    "{what} '{}' cannot be resolved (a dangling symlink or an unreadable entry), so it cannot be confined to the project directory",
                    path.display()
                ),
                hint,
            )),
        }
    }
}

/// `uid`, `uid:gid` or a conventional user name.
fn valid_user(user: &str) -> bool {
    fn id(s: &str) -> bool {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && s.parse::<u32>().is_ok()
    }
    fn name(s: &str) -> bool {
        let mut chars = s.chars();
        matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
            && chars.all(|c| c == '_' || c == '-' || c == '.' || c.is_ascii_alphanumeric())
            && s.len() <= 32
    }
    match user.split_once(':') {
        Some((uid, gid)) => id(uid) && id(gid),
        None => id(user) || name(user),
    }
}

/// Resolves the symlinks of `path` on disk. The part that does not exist yet is kept
/// as written (it cannot be a symlink); `None` when an entry exists but cannot be
/// resolved, such as a dangling symlink, whose target could be anywhere.
fn resolve_symlinks(path: &Path) -> Option<PathBuf> {
    let mut missing: Vec<&OsStr> = Vec::new();
    let mut current = path;
    loop {
        match fs::canonicalize(current) {
            Ok(mut real) => {
                real.extend(missing.iter().rev());
                return Some(real);
            }
            Err(_) if fs::symlink_metadata(current).is_ok() => return None,
            Err(_) => {
                missing.push(current.file_name()?);
                current = current.parent()?;
            }
        }
    }
}

#[cfg(test)]
// Tests may panic: the workspace denies unwrap/expect, and has no clippy.toml exempting tests.
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn user_file(text: &str) -> Result<ConfigFile, ConfigError> {
        parse(text, Path::new("/p/vectraguard.toml"), ConfigSource::User)
    }

    fn project_file(text: &str) -> Result<ConfigFile, ConfigError> {
        parse(
            text,
            Path::new("/p/vectraguard.toml"),
            ConfigSource::Project,
        )
    }

    /// (line, rendered message) of an `Invalid` error.
    fn invalid(result: Result<ConfigFile, ConfigError>) -> (usize, String) {
        match result {
            Err(e @ ConfigError::Invalid { line, .. }) => (line, e.to_string()),
            other => panic!("expected an Invalid error, got {other:?}"),
        }
    }

    fn mount(spec: &str) -> MountSpec {
        MountSpec::parse(spec).unwrap()
    }

    fn env(item: &str) -> EnvAssignment {
        EnvAssignment::parse(item).unwrap()
    }

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> Self {
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

    const EXAMPLE: &str = r#"name = "nightly"
agent = "dev-assistant"
mounts = ["./src:/workspace", "/data:/data:ro"]
env = { NODE_ENV = "production" }
read_only = ["/etc"]
workdir = "/workspace"
user = "1000:1000"
env_files = [".env", "/etc/app.env"]
profile = "strict"

[profiles.strict]
network = "none"
env = ["CI=1"]
"#;

    #[test]
    fn valid_file_parses_to_typed_settings() {
        let file = user_file(EXAMPLE).unwrap();
        let expected = Settings {
            name: Some("nightly".into()),
            agent: Some("dev-assistant".into()),
            description: None,
            workdir: Some("/workspace".into()),
            user: Some("1000:1000".into()),
            network: None,
            network_rules: Vec::new(),
            add_hosts: Vec::new(),
            mounts: vec![mount("/p/src:/workspace"), mount("/data:/data:ro")],
            read_only: vec!["/etc".into()],
            env: vec![env("NODE_ENV=production")],
            env_files: vec!["/p/.env".into(), "/etc/app.env".into()],
            limits: Limits::default(),
            project_access: ProjectAccess::default(),
        };
        assert_eq!(file.settings, expected);
        assert_eq!(file.default_profile.as_deref(), Some("strict"));
        assert_eq!(file.source, ConfigSource::User);
        let strict = &file.profiles["strict"];
        assert_eq!(strict.network, Some(NetworkMode::None));
        assert_eq!(strict.env, vec![env("CI=1")]);
        assert!(strict.mounts.is_empty() && strict.name.is_none());
    }

    #[test]
    fn limits_take_strings_and_numbers_with_line_numbered_errors() {
        let file = user_file(
            "memory = \"512m\"\ncpus = 0.5\npids = 100\ntimeout = \"30s\"\nmax_output = \"1m\"\ndisk = \"2g\"\nkill_grace = 3\nbest_effort_limits = true\n",
        )
        .unwrap();
        let l = file.settings.limits;
        assert_eq!(l.memory, Some(512 << 20));
        assert_eq!(l.cpus, Some(0.5));
        assert_eq!(l.pids, Some(100));
        assert_eq!(l.timeout, Some(std::time::Duration::from_secs(30)));
        assert_eq!(l.max_output, Some(1 << 20));
        assert_eq!(l.disk, Some(2 << 30));
        assert_eq!(l.kill_grace, Some(std::time::Duration::from_secs(3)));
        assert_eq!(l.best_effort, Some(true));
        let (line, msg) = invalid(user_file("\n\nmemory = \"lots\"\n"));
        assert_eq!(line, 3, "{msg}");
        assert!(msg.contains("memory") && msg.contains("512m"), "{msg}");
        let (_, msg) = invalid(user_file("pids = 1\n"));
        assert!(msg.contains("pids"), "{msg}");
    }

    #[test]
    fn a_project_profile_cannot_loosen_the_users_limits() {
        let project =
            project_file("profile = \"p\"\n[profiles.p]\ntimeout = \"1h\"\npids = 50\n").unwrap();
        let user = user_file("timeout = \"1s\"\n").unwrap();
        let s = resolve_profile(&[&project, &user], None).unwrap();
        assert_eq!(s.limits.timeout, Some(std::time::Duration::from_secs(1)));
        // Where the user sets nothing, the project's limit applies.
        assert_eq!(s.limits.pids, Some(50));
    }

    #[test]
    fn a_project_file_cannot_weaken_limits() {
        let (_, msg) = invalid(project_file("best_effort_limits = true\n"));
        assert!(msg.contains("best_effort_limits"), "{msg}");
        assert!(project_file("pids = 50\n").is_ok());
    }

    #[test]
    fn a_project_file_limit_only_tightens_each_key() {
        use crate::limits::{DEFAULT_DISK, DEFAULT_KILL_GRACE, DEFAULT_PIDS, DEFAULT_PTYS};
        use std::time::Duration;
        let day = Duration::from_secs(86400);
        // Key, a loose value, a tight one, and the field it sets.
        type Field = fn(&Limits) -> Option<f64>;
        let get: [(&str, &str, &str, Field); 8] = [
            ("memory", "\"100g\"", "\"1m\"", |l| {
                l.memory.map(|v| v as f64)
            }),
            ("cpus", "64", "0.25", |l| l.cpus),
            ("pids", "1000000", "10", |l| l.pids.map(|v| v as f64)),
            ("timeout", "\"100d\"", "\"1s\"", |l| {
                l.timeout.map(|d| d.as_secs_f64())
            }),
            ("max_output", "\"100g\"", "\"1k\"", |l| {
                l.max_output.map(|v| v as f64)
            }),
            ("disk", "\"100g\"", "\"1m\"", |l| l.disk.map(|v| v as f64)),
            ("kill_grace", "\"3650d\"", "\"100ms\"", |l| {
                l.kill_grace.map(|d| d.as_secs_f64())
            }),
            ("ptys", "4096", "2", |l| l.ptys.map(|v| v as f64)),
        ];
        let builtin = Limits::code_exec();
        let defaults = Limits {
            pids: Some(DEFAULT_PIDS),
            disk: Some(DEFAULT_DISK),
            kill_grace: Some(DEFAULT_KILL_GRACE),
            ptys: Some(DEFAULT_PTYS),
            ..Limits::default()
        };
        for (key, loose, tight, field) in get {
            for place in ["", "profile = \"p\"\n[profiles.p]\n"] {
                let loose_file = project_file(&format!("{place}{key} = {loose}\n")).unwrap();
                let tight_file = project_file(&format!("{place}{key} = {tight}\n")).unwrap();
                let loose_value = field(&loose_file.settings.limits)
                    .or_else(|| field(&loose_file.profiles["p"].limits));
                let tight_value = field(&tight_file.settings.limits)
                    .or_else(|| field(&tight_file.profiles["p"].limits));
                // Over the built-in profile: never above what it (or the default) says.
                let requested = if place.is_empty() { "code-exec" } else { "p" };
                let mut user = user_file("").unwrap();
                if !place.is_empty() {
                    // A trusted profile "p" that is code-exec's limits, to compare alike.
                    user = user_file(
                        "[profiles.p]\nmemory = \"512m\"\ncpus = 0.5\npids = 256\ntimeout = \"30s\"\nmax_output = \"1m\"\ndisk = \"1g\"\n",
                    )
                    .unwrap();
                }
                let base = field(&builtin).or_else(|| field(&defaults));
                let s = resolve_profile(&[&loose_file, &user], Some(requested)).unwrap();
                assert_eq!(field(&s.limits), base, "{key} = {loose} {place:?}");
                let s = resolve_profile(&[&tight_file, &user], Some(requested)).unwrap();
                assert_eq!(field(&s.limits), tight_value, "{key} = {tight} {place:?}");
                // Without a profile: unlimited keys take the project's value, defaulted
                // ones stay at most the default.
                let s = resolve_profile(&[&loose_file], None).unwrap();
                let expected = match field(&defaults) {
                    Some(default) => Some(default),
                    None => loose_value,
                };
                if place.is_empty() {
                    assert_eq!(field(&s.limits), expected, "{key} = {loose}");
                }
            }
        }
        // The finding: code-exec with 100 GiB, 100 days and a grace of ten years.
        let project =
            project_file("memory = \"100g\"\ntimeout = \"100d\"\nkill_grace = \"3650d\"\n")
                .unwrap();
        let s = resolve_profile(&[&project], Some("code-exec")).unwrap();
        assert_eq!(s.limits.memory, builtin.memory);
        assert_eq!(s.limits.timeout, builtin.timeout);
        assert_eq!(s.limits.kill_grace, Some(DEFAULT_KILL_GRACE));
        assert!(s.limits.timeout < Some(100 * day));
        // The user's own file still sets what it likes.
        let user = user_file("memory = \"100g\"\n").unwrap();
        let s = resolve_profile(&[&user], Some("code-exec")).unwrap();
        assert_eq!(s.limits.memory, Some(100 << 30));
    }

    #[test]
    fn a_project_file_cannot_claim_who_runs_the_session() {
        for (key, flag) in [("agent", "--agent"), ("description", "--description")] {
            for text in [
                format!("name = \"n\"\n{key} = \"trusted-bot\"\n"),
                format!("name = \"n\"\n[profiles.p]\n{key} = \"trusted-bot\"\n"),
            ] {
                let (line, msg) = invalid(project_file(&text));
                assert_eq!(line, text.lines().count(), "{msg}");
                assert!(
                    msg.contains(&format!("'{key}' cannot be set in a project file")),
                    "{msg}"
                );
                assert!(msg.contains(USER_FILE_HINT) && msg.contains(flag), "{msg}");
                assert!(user_file(&text).is_ok(), "{text}");
            }
        }
        // A name is only a label (and the hostname): allowed.
        assert!(project_file("name = \"proj\"\n").is_ok());
    }

    #[test]
    fn a_project_profile_stays_below_the_users_top_level() {
        let project = project_file(
            "network = \"allow\"\nworkdir = \"/p\"\n[profiles.p]\nnetwork = \"allow\"\nname = \"project\"\nenv = [\"K=project\"]\n",
        )
        .unwrap();
        let user =
            user_file("network = \"none\"\nname = \"user\"\nenv = [\"K=user\"]\n[profiles.p]\n")
                .unwrap();
        let s = resolve_profile(&[&project, &user], Some("p")).unwrap();
        assert_eq!(s.network, Some(NetworkMode::None));
        assert_eq!(s.name.as_deref(), Some("user"));
        assert_eq!(s.env, vec![env("K=project"), env("K=user")]);
        // Where the user says nothing, the project's values apply.
        assert_eq!(s.workdir, Some(PathBuf::from("/p")));
    }

    #[test]
    fn the_code_exec_profile_is_built_in_and_files_add_to_it() {
        let none: Vec<&ConfigFile> = Vec::new();
        let s = resolve_profile(&none, Some("code-exec")).unwrap();
        assert_eq!(s.limits, Limits::code_exec());
        let file = user_file("[profiles.code-exec]\ntimeout = \"1m\"\n").unwrap();
        let s = resolve_profile(&[&file], Some("code-exec")).unwrap();
        assert_eq!(s.limits.timeout, Some(std::time::Duration::from_secs(60)));
        assert_eq!(s.limits.memory, Limits::code_exec().memory);
    }

    #[test]
    fn env_as_array_and_as_table() {
        let list = user_file("env = [\"A=1\", \"B\", \"C=x=y\"]\n").unwrap();
        assert_eq!(list.settings.env, vec![env("A=1"), env("B"), env("C=x=y")]);
        let table = user_file("[env]\nA = \"1\"\nB = \"\"\n").unwrap();
        assert_eq!(table.settings.env, vec![env("A=1"), env("B=")]);
        let inline = user_file("env = { A = \"1\" }\n").unwrap();
        assert_eq!(inline.settings.env, vec![env("A=1")]);

        let (line, msg) = invalid(user_file("\nenv = [\"1BAD=x\"]\n"));
        assert_eq!(line, 2, "{msg}");
        let (line, msg) = invalid(user_file("env = { \"A=B\" = \"c\" }\n"));
        assert_eq!(line, 1);
        assert!(msg.contains("'A=B'"), "{msg}");
        let (_, msg) = invalid(user_file("env = { A = 1 }\n"));
        assert!(msg.contains("env"), "{msg}");
        let (_, msg) = invalid(user_file("env = \"A=1\"\n"));
        assert!(msg.contains("expected an array"), "{msg}");
    }

    #[test]
    fn relative_paths_are_resolved_against_the_file_directory() {
        let file = parse(
            "mounts = [\"src:/w\", \"./a/./b:/x:ro\"]\nenv_files = [\"conf/.env\"]\n",
            Path::new("/home/u/proj/vectraguard.toml"),
            ConfigSource::User,
        )
        .unwrap();
        assert_eq!(
            file.settings.mounts,
            vec![
                mount("/home/u/proj/src:/w"),
                mount("/home/u/proj/a/b:/x:ro")
            ]
        );
        assert_eq!(
            file.settings.env_files,
            vec![PathBuf::from("/home/u/proj/conf/.env")]
        );
        // '..' and '~' are refused rather than guessed.
        let (line, msg) = invalid(user_file("mounts = [\"../x:/w\"]\n"));
        assert_eq!(line, 1);
        assert!(msg.contains("'..'"), "{msg}");
        let (_, msg) = invalid(user_file("env_files = [\"~/.env\"]\n"));
        assert!(msg.contains("'~'"), "{msg}");
    }

    #[test]
    fn unknown_top_level_key_names_key_line_and_valid_keys() {
        let (line, msg) = invalid(user_file("name = \"a\"\n\nmount = [\"/a:/b\"]\n"));
        assert_eq!(line, 3, "{msg}");
        assert!(
            msg.starts_with("/p/vectraguard.toml:3: unknown key 'mount'"),
            "{msg}"
        );
        assert!(msg.contains("did you mean 'mounts'?"), "{msg}");
        assert!(
            msg.contains("read_only") && msg.contains("profiles"),
            "{msg}"
        );
    }

    #[test]
    fn unknown_key_inside_profile_has_its_line() {
        let text = "name = \"a\"\n[profiles.strict]\nnetwork = \"none\"\nread-only = [\"/etc\"]\n";
        let (line, msg) = invalid(user_file(text));
        assert_eq!(line, 4, "{msg}");
        assert!(
            msg.contains("unknown key 'read-only' in [profiles.strict]"),
            "{msg}"
        );
        assert!(msg.contains("did you mean 'read_only'?"), "{msg}");
        // A profile cannot hold profiles or choose one.
        assert!(!msg.contains("profiles,"), "{msg}");
        let (line, _) = invalid(user_file("[profiles.a]\nprofile = \"b\"\n"));
        assert_eq!(line, 2);
    }

    #[test]
    fn bad_mount_reports_the_line_of_that_value() {
        let text = "mounts = [\n  \"/ok:/ok\",\n  \"/x:rel\",\n]\n";
        let (line, msg) = invalid(user_file(text));
        assert_eq!(line, 3, "{msg}");
        assert!(
            msg.starts_with("/p/vectraguard.toml:3: invalid mount '/x:rel': container path 'rel'"),
            "{msg}"
        );
        assert!(msg.contains("(hint: "), "{msg}");
        let (line, msg) = invalid(user_file("[profiles.p]\nmounts = [\"/x:/proc\"]\n"));
        assert_eq!(line, 2);
        assert!(msg.contains("managed by the sandbox"), "{msg}");
        let (_, msg) = invalid(user_file("read_only = [\"etc\"]\n"));
        assert!(msg.contains("must be absolute"), "{msg}");
    }

    #[test]
    fn bad_network_and_other_values() {
        let (line, msg) = invalid(user_file("name = \"a\"\nnetwork = \"bridge\"\n"));
        assert_eq!(line, 2);
        assert!(msg.contains("unknown network mode 'bridge'"), "{msg}");
        let file = user_file("network = \"host\"\n").unwrap();
        assert_eq!(file.settings.network, Some(NetworkMode::Host));
        let file = user_file("network = \"allow\"\n").unwrap();
        assert_eq!(file.settings.network, Some(NetworkMode::Allow));

        assert!(user_file("workdir = \"rel\"\n").is_err());
        assert!(user_file("user = \"1000:x\"\n").is_err());
        assert!(user_file("user = \"alice\"\n").is_ok());
        assert!(user_file("name = \"\\u001b[2J\"\n").is_err());
        assert!(user_file("name = \"\"\n").is_err());
    }

    #[test]
    fn wrong_type_names_key_and_line() {
        let (line, msg) = invalid(user_file("name = \"a\"\nmounts = \"x\"\n"));
        assert_eq!(line, 2, "{msg}");
        assert!(msg.contains("invalid value for 'mounts'"), "{msg}");
        assert!(msg.contains("HOST:CONTAINER"), "{msg}");
        let (line, msg) = invalid(user_file("[profiles.p]\nname = 3\n"));
        assert_eq!(line, 2, "{msg}");
        assert!(msg.contains("profiles.p.name"), "{msg}");
        let (_, msg) = invalid(user_file("[profiles]\nx = 1\n"));
        assert!(msg.contains("expected a table of settings"), "{msg}");
        let (line, msg) = invalid(user_file("name = \"a\"\nagent = \n"));
        assert_eq!(line, 2, "{msg}");
        assert!(msg.contains("invalid TOML"), "{msg}");
    }

    #[test]
    fn project_files_are_confined_to_their_directory() {
        let ok = project_file(
            "mounts = [\"./src:/w\", \"/p/data:/data:ro\"]\nread_only = [\"/p/docs\"]\nenv_files = [\".env\"]\nenv = [\"A=1\"]\n",
        )
        .unwrap();
        assert_eq!(ok.settings.mounts.len(), 2);

        let (line, msg) = invalid(project_file(
            "name = \"a\"\nmounts = [\"/home/u/.ssh:/s\"]\n",
        ));
        assert_eq!(line, 2);
        assert!(msg.contains("outside the project directory '/p'"), "{msg}");
        assert!(
            msg.contains(USER_FILE_HINT) && msg.contains("--mount"),
            "{msg}"
        );
        // '/pother' is not inside '/p'.
        assert!(project_file("mounts = [\"/pother:/x\"]\n").is_err());
        assert!(project_file("read_only = [\"/etc\"]\n").is_err());
        assert!(project_file("env_files = [\"/home/u/.env\"]\n").is_err());
        // Profiles are checked too.
        let (line, _) = invalid(project_file("[profiles.x]\n\nmounts = [\"/:/host\"]\n"));
        assert_eq!(line, 3);

        let (line, msg) = invalid(project_file("\nuser = \"0\"\n"));
        assert_eq!(line, 2);
        assert!(
            msg.contains("'user' cannot be set in a project file"),
            "{msg}"
        );
        assert!(msg.contains(USER_FILE_HINT), "{msg}");
        let (_, msg) = invalid(project_file("env = [\"GITHUB_TOKEN\"]\n"));
        assert!(msg.contains("copy the host's value"), "{msg}");
        // The same settings are fine in the user's own file.
        assert!(
            user_file("user = \"0\"\nenv = [\"GITHUB_TOKEN\"]\nmounts = [\"/home/u/.ssh:/s\"]\n")
                .is_ok()
        );
    }

    #[test]
    fn project_symlink_out_of_the_project_is_rejected() {
        let outside = TempDir::new();
        let project = TempDir::new();
        std::os::unix::fs::symlink(&outside.0, project.0.join("link")).unwrap();
        std::os::unix::fs::symlink(project.0.join("nowhere"), project.0.join("dangling")).unwrap();
        fs::create_dir(project.0.join("src")).unwrap();
        let path = project.0.join(PROJECT_FILE_NAME);

        let (line, msg) = invalid(parse(
            "mounts = [\"./link/sub:/x\"]\n",
            &path,
            ConfigSource::Project,
        ));
        assert_eq!(line, 1);
        assert!(msg.contains("resolves through a symlink"), "{msg}");
        assert!(parse("env_files = [\"dangling\"]\n", &path, ConfigSource::Project).is_err());
        assert!(
            parse(
                "mounts = [\"./src:/x\", \"./new:/y\"]\n",
                &path,
                ConfigSource::Project
            )
            .is_ok()
        );
    }

    #[test]
    fn overlay_higher_scalars_win_and_lists_append() {
        let mut low = Settings {
            name: Some("low".into()),
            agent: Some("a".into()),
            mounts: vec![mount("/a:/a")],
            env: vec![env("X=1")],
            ..Settings::default()
        };
        low.overlay(Settings {
            name: Some("high".into()),
            network: Some(NetworkMode::None),
            mounts: vec![mount("/b:/b")],
            env: vec![env("X=2")],
            ..Settings::default()
        });
        assert_eq!(low.name.as_deref(), Some("high"));
        assert_eq!(low.agent.as_deref(), Some("a"), "unset in higher: kept");
        assert_eq!(low.network, Some(NetworkMode::None));
        assert_eq!(low.mounts, vec![mount("/a:/a"), mount("/b:/b")]);
        assert_eq!(low.env, vec![env("X=1"), env("X=2")]);
    }

    #[test]
    fn profiles_are_selected_and_layered() {
        let project = project_file(
            "name = \"proj\"\nenv = [\"P=1\"]\n[profiles.strict]\nenv = [\"S=proj\"]\n",
        )
        .unwrap();
        let user = parse(
            "name = \"user\"\nprofile = \"ci\"\n[profiles.strict]\nnetwork = \"none\"\nenv = [\"S=user\"]\n[profiles.ci]\nagent = \"ci-bot\"\n",
            Path::new("/home/u/.config/vectraguard/config.toml"),
            ConfigSource::User,
        )
        .unwrap();
        let files = [&project, &user];

        // Base: project then user; the user's default profile applies.
        let s = resolve_profile(&files, None).unwrap();
        assert_eq!(s.name.as_deref(), Some("user"));
        assert_eq!(s.agent.as_deref(), Some("ci-bot"));

        // --profile wins over the default; each file's table is applied in order.
        let s = resolve_profile(&files, Some("strict")).unwrap();
        assert_eq!(s.network, Some(NetworkMode::None));
        assert_eq!(s.agent, None);
        assert_eq!(s.env, vec![env("P=1"), env("S=proj"), env("S=user")]);

        let err = resolve_profile(&files, Some("nope")).unwrap_err();
        assert!(matches!(err, ConfigError::UnknownProfile { .. }));
        let msg = err.to_string();
        assert!(msg.contains("unknown profile 'nope'"), "{msg}");
        assert!(msg.contains("known profiles: ci, strict"), "{msg}");
        assert!(
            resolve_profile(&[], Some("x"))
                .unwrap_err()
                .to_string()
                .contains("no profiles")
        );
        assert_eq!(resolve_profile(&[], None).unwrap(), Settings::default());
    }

    #[test]
    fn default_profile_errors_point_at_the_profile_key() {
        let file = user_file("name = \"a\"\nprofile = \"missing\"\n[profiles.x]\n").unwrap();
        let (line, msg) = match resolve_profile(&[&file], None) {
            Err(e @ ConfigError::Invalid { line, .. }) => (line, e.to_string()),
            other => panic!("{other:?}"),
        };
        assert_eq!(line, 2);
        assert!(
            msg.contains("profile 'missing' is not defined") && msg.contains("x"),
            "{msg}"
        );

        // A project file cannot switch on a profile the user defined for other work.
        let project = project_file("profile = \"wide\"\n").unwrap();
        let user = parse(
            "[profiles.wide]\nmounts = [\"/home/u:/home/u\"]\n",
            Path::new("/home/u/.config/vectraguard/config.toml"),
            ConfigSource::User,
        )
        .unwrap();
        assert!(resolve_profile(&[&project, &user], None).is_err());
        assert!(resolve_profile(&[&project, &user], Some("wide")).is_ok());
    }

    #[test]
    fn load_reads_files_and_names_unreadable_ones() {
        let dir = TempDir::new();
        let path = dir.0.join("config.toml");
        fs::write(&path, "name = \"x\"\nmounts = [\"sub:/w\"]\n").unwrap();
        let file = load(&path, ConfigSource::Explicit).unwrap();
        assert_eq!(file.path, path);
        assert_eq!(file.settings.mounts[0].host, dir.0.join("sub"));

        let missing = dir.0.join("absent.toml");
        let err = load(&missing, ConfigSource::User).unwrap_err();
        assert!(matches!(err, ConfigError::Read { .. }));
        assert!(
            err.to_string().contains(&missing.display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn discover_project_finds_the_nearest_ancestor_file() {
        let root = TempDir::new();
        let deep = root.0.join("a/b/c");
        fs::create_dir_all(&deep).unwrap();
        // Nothing in the tree yet: only what may lie above the temp dir (normally nothing).
        assert_eq!(discover_project(&deep), discover_project(&root.0));
        fs::write(root.0.join(PROJECT_FILE_NAME), "").unwrap();
        assert_eq!(
            discover_project(&deep),
            Some(root.0.join(PROJECT_FILE_NAME))
        );
        fs::write(root.0.join("a").join(PROJECT_FILE_NAME), "").unwrap();
        assert_eq!(
            discover_project(&deep),
            Some(root.0.join("a").join(PROJECT_FILE_NAME))
        );
        // A directory with the name is not a file.
        fs::create_dir(deep.join(PROJECT_FILE_NAME)).unwrap();
        assert_eq!(
            discover_project(&deep),
            Some(root.0.join("a").join(PROJECT_FILE_NAME))
        );
    }

    #[test]
    fn user_config_path_follows_xdg() {
        let home = Path::new("/home/u");
        assert_eq!(
            user_config_path(home, None),
            PathBuf::from("/home/u/.config/vectraguard/config.toml")
        );
        assert_eq!(
            user_config_path(home, Some(Path::new("/x/cfg"))),
            PathBuf::from("/x/cfg/vectraguard/config.toml")
        );
        assert_eq!(
            user_config_path(home, Some(Path::new("relative"))),
            PathBuf::from("/home/u/.config/vectraguard/config.toml")
        );
    }

    fn rule(line: &str) -> Rule {
        Rule::parse_line(line).unwrap()
    }

    fn rule_texts(settings: &Settings) -> Vec<&str> {
        settings
            .network_rules
            .iter()
            .map(|r| r.text.as_str())
            .collect()
    }

    #[test]
    fn network_rules_and_add_hosts_parse_in_order() {
        let file = user_file(
            "network = \"allow\"\nnetwork_rules = [\"allow github.com:443\", \"deny *.evil.com\", \"allow 10.0.0.0/8\"]\nadd_hosts = [\"db.internal:10.0.0.5\", \"cache=[fd00::6]\"]\n[profiles.p]\nnetwork_rules = [\"allow *.pypi.org\"]\nadd_hosts = [\"x:127.0.0.1\"]\n",
        )
        .unwrap();
        assert_eq!(
            rule_texts(&file.settings),
            [
                "allow github.com:443",
                "deny *.evil.com",
                "allow 10.0.0.0/8"
            ]
        );
        assert_eq!(
            file.settings.add_hosts,
            vec![
                AddHost::parse("db.internal:10.0.0.5").unwrap(),
                AddHost::parse("cache:fd00::6").unwrap()
            ]
        );
        assert_eq!(
            file.profiles["p"].network_rules,
            vec![rule("allow *.pypi.org")]
        );
        assert_eq!(file.profiles["p"].add_hosts.len(), 1);
    }

    #[test]
    fn bad_network_rules_and_hosts_name_the_line_and_value() {
        let (line, msg) = invalid(user_file(
            "network_rules = [\n  \"allow github.com\",\n  \"allow github.com:0\",\n]\n",
        ));
        assert_eq!(line, 3, "{msg}");
        assert!(
            msg.contains("'allow github.com:0'") && msg.contains("port '0'"),
            "{msg}"
        );
        assert!(msg.contains("(hint: network_rules is an array"), "{msg}");
        let (_, msg) = invalid(user_file("network_rules = [\"github.com\"]\n"));
        assert!(msg.contains("write 'allow TARGET[:PORTS]'"), "{msg}");
        let (line, msg) = invalid(user_file("[profiles.p]\n\nadd_hosts = [\"db:nowhere\"]\n"));
        assert_eq!(line, 3, "{msg}");
        assert!(msg.contains("'nowhere' is not an IP address"), "{msg}");
        assert!(msg.contains("(hint: add_hosts is an array"), "{msg}");
        let (line, msg) = invalid(user_file("name = \"a\"\nnetwork_rules = \"allow x.com\"\n"));
        assert_eq!(line, 2, "{msg}");
        assert!(msg.contains("invalid value for 'network_rules'"), "{msg}");
        assert!(msg.contains("\"allow github.com:443\""), "{msg}");
        let (_, msg) = invalid(user_file("network_rule = []\n"));
        assert!(msg.contains("did you mean 'network_rules'?"), "{msg}");
        let (_, msg) = invalid(user_file("add-host = []\n"));
        assert!(msg.contains("did you mean 'add_hosts'?"), "{msg}");
    }

    #[test]
    fn a_project_file_can_only_narrow_the_network() {
        let ok = project_file(
            "network = \"allow\"\nnetwork_rules = [\"deny *.evil.com\", \"deny 10.0.0.0/8\"]\n[profiles.p]\nnetwork = \"none\"\n",
        )
        .unwrap();
        assert_eq!(
            rule_texts(&ok.settings),
            ["deny *.evil.com", "deny 10.0.0.0/8"]
        );

        let (line, msg) = invalid(project_file("name = \"a\"\nnetwork = \"host\"\n"));
        assert_eq!(line, 2);
        assert!(
            msg.contains("'network = \"host\"' cannot be set in a project file"),
            "{msg}"
        );
        assert!(
            msg.contains(USER_FILE_HINT) && msg.contains("--network host"),
            "{msg}"
        );

        let (line, msg) = invalid(project_file(
            "network_rules = [\"deny a.com\",\n \"allow github.com:443\"]\n",
        ));
        assert_eq!(line, 2);
        assert!(
            msg.contains("'allow github.com:443' cannot be set in a project file"),
            "{msg}"
        );
        assert!(
            msg.contains("only add deny rules") && msg.contains("--allow"),
            "{msg}"
        );

        let (line, msg) = invalid(project_file(
            "[profiles.p]\nadd_hosts = [\"db:10.0.0.5\"]\n",
        ));
        assert_eq!(line, 2);
        assert!(
            msg.contains("'add_hosts' cannot be set in a project file"),
            "{msg}"
        );
        assert!(msg.contains("--add-host"), "{msg}");
        // Profiles are checked too.
        assert!(project_file("[profiles.p]\nnetwork_rules = [\"allow *\"]\n").is_err());
        assert!(project_file("[profiles.p]\nnetwork = \"host\"\n").is_err());
        // The user's own file may do all of it.
        assert!(
            user_file(
                "network = \"host\"\nnetwork_rules = [\"allow *\"]\nadd_hosts = [\"db:10.0.0.5\"]\n"
            )
            .is_ok()
        );
    }

    #[test]
    fn overlay_puts_higher_rules_first_and_pins_last() {
        let mut low = Settings {
            network_rules: vec![rule("deny *.evil.com"), rule("allow *")],
            add_hosts: vec![AddHost::parse("db:10.0.0.1").unwrap()],
            ..Settings::default()
        };
        low.overlay(Settings {
            network_rules: vec![rule("allow api.evil.com")],
            add_hosts: vec![AddHost::parse("db:10.0.0.2").unwrap()],
            ..Settings::default()
        });
        assert_eq!(
            rule_texts(&low),
            ["allow api.evil.com", "deny *.evil.com", "allow *"]
        );
        let addrs: Vec<String> = low.add_hosts.iter().map(|h| h.addr.to_string()).collect();
        assert_eq!(addrs, ["10.0.0.1", "10.0.0.2"]);
    }

    #[test]
    fn layered_rules_keep_the_project_behind_the_user_and_flags() {
        let project = project_file(
            "profile = \"p\"\nnetwork_rules = [\"deny project-top.com\"]\n[profiles.p]\nnetwork_rules = [\"deny project-profile.com\"]\n",
        )
        .unwrap();
        let user = parse(
            "network_rules = [\"allow user-top.com\"]\nadd_hosts = [\"db:10.0.0.1\"]\n[profiles.p]\nnetwork_rules = [\"allow user-profile.com\"]\nadd_hosts = [\"db:10.0.0.2\"]\n",
            Path::new("/home/u/.config/vectraguard/config.toml"),
            ConfigSource::User,
        )
        .unwrap();
        let explicit = parse(
            "network_rules = [\"allow explicit-top.com\"]\n",
            Path::new("/etc/vg.toml"),
            ConfigSource::Explicit,
        )
        .unwrap();
        let files = [&project, &user, &explicit];

        // Without a profile: the most trusted file first.
        let none = resolve_profile(&files[1..], None).unwrap();
        assert_eq!(
            rule_texts(&none),
            ["allow explicit-top.com", "allow user-top.com"]
        );

        // With one: each file's profile before its top level, files by trust.
        let mut s = resolve_profile(&files, Some("p")).unwrap();
        let expected = [
            "allow explicit-top.com",
            "allow user-profile.com",
            "allow user-top.com",
            "deny project-profile.com",
            "deny project-top.com",
        ];
        assert_eq!(rule_texts(&s), expected);
        // The project file's own `profile` key selects only its own profile, and its
        // rules still come last.
        let by_project = resolve_profile(&[&project, &user], None).unwrap();
        assert_eq!(
            rule_texts(&by_project),
            [
                "allow user-top.com",
                "deny project-profile.com",
                "deny project-top.com"
            ]
        );
        // The user's profile pin comes after the top-level one, so it wins.
        let addrs: Vec<String> = s.add_hosts.iter().map(|h| h.addr.to_string()).collect();
        assert_eq!(addrs, ["10.0.0.1", "10.0.0.2"]);

        // Flags go on top of everything.
        s.overlay(Settings {
            network_rules: vec![rule("deny user-top.com")],
            ..Settings::default()
        });
        assert_eq!(rule_texts(&s)[0], "deny user-top.com");
        assert_eq!(rule_texts(&s)[1..], expected);
    }
}
