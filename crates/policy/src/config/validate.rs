//! Validation of values, with the file's context: each raw value is checked with the
//! same parser as its flag and turned into its typed form, or into an error that names
//! the file and line. The checks of a project file that concern one value (`user`,
//! `network = "host"`, allow rules, pins, copied host variables, `best_effort_limits`,
//! `tls_passthrough`, `upstream_ca`, `secrets`) sit with that value's parser here; confinement and claims are in `project.rs`.

use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::Spanned;

use super::diagnostics::{key_hint, line_of};
use super::project::{ProjectDir, resolve_symlinks};
use super::raw::{RawEnv, RawSecrets, RawSettings, Scalar, SpannedList, Text};
use super::{ConfigError, ConfigSource, Settings, USER_FILE_HINT};
use crate::env::EnvAssignment;
use crate::limits::{self, LimitError, Limits};
use crate::mount::{MountSpec, MountSpecError};
use crate::network::{Action, AddHost, NetworkMode, Rule, Target};
use crate::paths::normalize_absolute;
use crate::secrets::{self, SecretError, SecretSource, SecretSpec, shown};

/// The file being converted: its text (for lines), path, directory and trust.
pub(super) struct Document<'a> {
    pub(super) text: &'a str,
    pub(super) path: &'a Path,
    /// The file's directory, absolute and normalised; `None` if `path` is relative.
    pub(super) dir: Option<PathBuf>,
    /// Set for project files only.
    pub(super) project: Option<ProjectDir>,
}

impl<'a> Document<'a> {
    pub(super) fn new(
        text: &'a str,
        path: &'a Path,
        source: ConfigSource,
    ) -> Result<Self, ConfigError> {
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

    pub(super) fn error(
        &self,
        span: Range<usize>,
        message: String,
        hint: impl Into<String>,
    ) -> ConfigError {
        ConfigError::Invalid {
            file: self.path.to_path_buf(),
            line: line_of(self.text, span.start),
            message,
            hint: hint.into(),
        }
    }

    pub(super) fn settings(&self, raw: RawSettings) -> Result<Settings, ConfigError> {
        let RawSettings {
            name,
            agent,
            description,
            workdir,
            user,
            network,
            backend,
            exec_check,
            exec_trace,
            network_rules,
            add_hosts,
            tls_passthrough,
            upstream_ca,
            secrets,
            mounts,
            read_only,
            read_write,
            env,
            env_files,
            memory,
            cpus,
            pids,
            timeout,
            max_output,
            max_record,
            disk,
            kill_grace,
            ptys,
            best_effort_limits,
            ask,
            approval_timeout,
        } = raw;
        if let Some(secrets) = secrets {
            self.refuse_in_project(secrets.span(), "secrets", SECRETS_REFUSED, "--secret")?;
            return Err(self.error(
                secrets.span(),
                "'secrets' cannot be set inside a profile: secrets are defined at the top level of a file and apply to every profile".to_owned(),
                "move the table to the top level as [secrets.NAME], outside [profiles.…]",
            ));
        }
        let approval = crate::risk::Approval {
            ask: ask
                .map(|a| {
                    a.get_ref().parse::<crate::risk::Ask>().map_err(|_| {
                        self.error(
                            a.span(),
                            format!("invalid ask '{}'", a.get_ref()),
                            "use one of low, medium, high, critical or never, e.g. ask = \"high\"",
                        )
                    })
                })
                .transpose()?,
            timeout: self.limit(approval_timeout, "approval_timeout", |v| {
                limits::parse_duration("approval_timeout", v)
            })?,
        };
        let limits = Limits {
            memory: self.limit(memory, "memory", |v| limits::parse_memory("memory", v))?,
            cpus: self.limit(cpus, "cpus", limits::parse_cpus)?,
            pids: self.limit(pids, "pids", limits::parse_pids)?,
            timeout: self.limit(timeout, "timeout", |v| limits::parse_duration("timeout", v))?,
            max_output: self.limit(max_output, "max_output", |v| {
                limits::parse_size("max_output", v)
            })?,
            max_record: self.limit(max_record, "max_record", |v| {
                limits::parse_size("max_record", v)
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
            backend: backend.map(|b| self.backend(b)).transpose()?,
            exec_check: exec_check.map(|c| self.exec_check(c)).transpose()?,
            exec_trace: exec_trace.map(|t| self.exec_trace(t)).transpose()?,
            network_rules: network_rules
                .into_iter()
                .map(|r| self.network_rule(r))
                .collect::<Result<_, _>>()?,
            add_hosts: add_hosts
                .into_iter()
                .map(|h| self.add_host(h))
                .collect::<Result<_, _>>()?,
            tls_passthrough: self.tls_passthrough(tls_passthrough)?,
            upstream_ca: self.upstream_ca(upstream_ca)?,
            // The top level's are set by `secrets`; a profile has none.
            secrets: Vec::new(),
            mounts: mounts
                .into_iter()
                .map(|m| self.mount(m))
                .collect::<Result<_, _>>()?,
            read_only: read_only
                .into_iter()
                .map(|p| self.read_only(p))
                .collect::<Result<_, _>>()?,
            read_write: read_write
                .into_iter()
                .map(|p| self.read_write(p))
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
            approval,
            project_access: super::ProjectAccess::default(),
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
    pub(super) fn label(&self, value: Text, key: &str) -> Result<Option<String>, ConfigError> {
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

    fn exec_check(&self, value: Spanned<String>) -> Result<crate::ExecCheck, ConfigError> {
        let check = value
            .get_ref()
            .parse::<crate::ExecCheck>()
            .map_err(|e| self.error(value.span(), e.to_string(), key_hint("exec_check")))?;
        if self.project.is_some() {
            // The sandbox can write the project file: it must not choose how closely
            // its own programs are checked.
            return Err(self.error(
                value.span(),
                "'exec_check' cannot be set in a project file: the sandbox can write that file"
                    .to_owned(),
                format!("move it to {USER_FILE_HINT}"),
            ));
        }
        Ok(check)
    }

    fn exec_trace(&self, value: Spanned<String>) -> Result<crate::ExecTrace, ConfigError> {
        let trace = value
            .get_ref()
            .parse::<crate::ExecTrace>()
            .map_err(|e| self.error(value.span(), e.to_string(), key_hint("exec_trace")))?;
        if self.project.is_some() {
            // The sandbox can write the project file: it must not choose how its own
            // programs are recorded.
            return Err(self.error(
                value.span(),
                "'exec_trace' cannot be set in a project file: the sandbox can write that file"
                    .to_owned(),
                format!("move it to {USER_FILE_HINT}"),
            ));
        }
        Ok(trace)
    }

    fn backend(&self, value: Spanned<String>) -> Result<crate::Backend, ConfigError> {
        let backend = value
            .get_ref()
            .parse::<crate::Backend>()
            .map_err(|e| self.error(value.span(), e.to_string(), key_hint("backend")))?;
        if self.project.is_some() {
            // The sandbox can write the project file: it must not choose what isolates it.
            return Err(self.error(
                value.span(),
                "'backend' cannot be set in a project file: the sandbox can write that file, and the backend decides what isolates it".to_owned(),
                format!("move it to {USER_FILE_HINT} or pass --backend {backend}"),
            ));
        }
        Ok(backend)
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

    /// For project files: `key` may not be set at all (`why` says what it would do).
    fn refuse_in_project(
        &self,
        span: Range<usize>,
        key: &str,
        why: &str,
        flag: &str,
    ) -> Result<(), ConfigError> {
        if self.project.is_none() {
            return Ok(());
        }
        Err(self.error(
            span,
            format!("'{key}' cannot be set in a project file: {why}, and the sandbox can write that file"),
            format!("move it to {USER_FILE_HINT} or pass {flag} on the command line"),
        ))
    }

    fn tls_passthrough(&self, value: SpannedList) -> Result<Vec<Target>, ConfigError> {
        let Some(list) = value else {
            return Ok(Vec::new());
        };
        self.refuse_in_project(
            list.span(),
            "tls_passthrough",
            "it turns off HTTPS inspection, and the method and path rules with it, for the hosts it names",
            "--tls-passthrough",
        )?;
        list.into_inner()
            .into_iter()
            .map(|host| {
                secrets::host_target(host.get_ref()).map_err(|e| {
                    self.error(
                        host.span(),
                        format!("invalid tls_passthrough host '{}': {}", e.input, e.problem),
                        key_hint("tls_passthrough"),
                    )
                })
            })
            .collect()
    }

    fn upstream_ca(&self, value: SpannedList) -> Result<Vec<PathBuf>, ConfigError> {
        let Some(list) = value else {
            return Ok(Vec::new());
        };
        self.refuse_in_project(
            list.span(),
            "upstream_ca",
            "a CA it names is trusted to vouch for every upstream server, so whoever holds that CA's key could read the sandbox's traffic",
            "--upstream-ca",
        )?;
        list.into_inner()
            .into_iter()
            .map(|path| self.host_path(path.span(), path.get_ref(), "upstream_ca file"))
            .collect()
    }

    /// The top level's `[secrets.NAME]` tables, in name order.
    pub(super) fn secrets(&self, raw: RawSecrets) -> Result<Vec<SecretSpec>, ConfigError> {
        let Some(table) = raw else {
            return Ok(Vec::new());
        };
        // The line of the first name, rather than of the table that holds them all.
        let span = table
            .get_ref()
            .keys()
            .next()
            .map_or_else(|| table.span(), Spanned::span);
        self.refuse_in_project(span, "secrets", SECRETS_REFUSED, "--secret")?;
        table
            .into_inner()
            .into_iter()
            .map(|(name, secret)| self.secret(name, secret))
            .collect()
    }

    fn secret(
        &self,
        name: Spanned<String>,
        raw: super::raw::RawSecret,
    ) -> Result<SecretSpec, ConfigError> {
        let missing = |key: &str, example: &str| {
            self.error(
                name.span(),
                format!("secret '{}' has no {key}", shown(name.get_ref())),
                format!(
                    "add {key} = {example} to [secrets.{}]",
                    shown(name.get_ref())
                ),
            )
        };
        let Some(source) = raw.source else {
            return Err(missing(
                "source",
                "\"env:VAR\", \"file:PATH\" or \"cmd:COMMAND\"",
            ));
        };
        let Some(hosts) = raw.hosts else {
            return Err(missing("hosts", "[\"api.example.com\"]"));
        };
        let texts: Vec<String> = hosts
            .get_ref()
            .iter()
            .map(|h| h.get_ref().clone())
            .collect();
        let mut spec =
            SecretSpec::from_parts(name.get_ref(), source.get_ref(), &texts).map_err(|e| {
                let span = match &e {
                    SecretError::Form { .. }
                    | SecretError::Name { .. }
                    | SecretError::Reserved { .. } => name.span(),
                    SecretError::Source { .. } => source.span(),
                    SecretError::NoHosts { .. } => hosts.span(),
                    SecretError::Host { position, .. } => hosts
                        .get_ref()
                        .get(*position)
                        .map_or_else(|| hosts.span(), Spanned::span),
                };
                self.error(span, e.to_string(), key_hint("secrets"))
            })?;
        // Like env_files: a relative path is taken from this file's directory.
        if let SecretSource::File(path) = &spec.source {
            let path = self.host_path(source.span(), &path.to_string_lossy(), "secret file")?;
            spec.source = SecretSource::File(path);
        }
        Ok(spec)
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

    /// Like `read_only`, writable; refused in a project file, whose host access must
    /// stay checkable against the user's (`mounts` inside the project do that).
    fn read_write(&self, value: Spanned<String>) -> Result<PathBuf, ConfigError> {
        if self.project.is_some() {
            return Err(self.error(
                value.span(),
                "'read_write' cannot be set in a project file: it gives the sandbox write access to a host path, and the sandbox may have written that file".to_owned(),
                format!(
                    "move it to {USER_FILE_HINT}, or use mounts = [\"./DIR:/CONTAINER\"] for a folder inside the project"
                ),
            ));
        }
        let raw = value.get_ref();
        let Some(path) = normalize_absolute(Path::new(raw)).filter(|_| !raw.contains('\0')) else {
            return Err(self.error(
                value.span(),
                format!("invalid read_write path '{raw}': it must be absolute and without '..'"),
                key_hint("read_write"),
            ));
        };
        MountSpec::read_write_path(raw)
            .map_err(|e| self.error(value.span(), e.to_string(), key_hint("read_write")))?;
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
}

/// Why a project file may not define secrets.
const SECRETS_REFUSED: &str = "it hands one of your credentials to the hosts it names";

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

#[cfg(test)]
// Tests may panic: the workspace denies unwrap/expect, and has no clippy.toml exempting tests.
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::config::test_support::*;
    use crate::config::{ConfigSource, parse};
    use crate::secrets::SecretSource;

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
    fn tls_passthrough_and_upstream_ca_parse_in_files_and_profiles() {
        let file = user_file(
            "tls_passthrough = [\"Pinned.Example.com\", \"*.corp.example\", \"10.0.0.5\"]\nupstream_ca = [\"certs/ca.pem\", \"/etc/ssl/private-ca.pem\"]\n[profiles.p]\ntls_passthrough = [\"x.test\"]\nupstream_ca = [\"./p.pem\"]\n",
        )
        .unwrap();
        let host = |h: &str| secrets::host_target(h).unwrap();
        assert_eq!(
            file.settings.tls_passthrough,
            vec![
                host("pinned.example.com"),
                host("*.corp.example"),
                host("10.0.0.5")
            ]
        );
        assert_eq!(
            file.settings.upstream_ca,
            vec![
                PathBuf::from("/p/certs/ca.pem"),
                PathBuf::from("/etc/ssl/private-ca.pem")
            ]
        );
        assert_eq!(file.profiles["p"].tls_passthrough, vec![host("x.test")]);
        assert_eq!(
            file.profiles["p"].upstream_ca,
            vec![PathBuf::from("/p/p.pem")]
        );
        // Unset: empty.
        let none = user_file("name = \"a\"\n").unwrap();
        assert!(none.settings.tls_passthrough.is_empty() && none.settings.upstream_ca.is_empty());
    }

    #[test]
    fn bad_passthrough_hosts_and_ca_paths_name_the_line_and_value() {
        for (host, expected) in [
            ("a.test:443", "it has a port"),
            ("*", "'*' is every host"),
            ("10.0.0.0/8", "it is a network"),
            ("https://a.test", "it is a URL"),
            ("a..test", "empty label"),
            ("", "the host is empty"),
        ] {
            let (line, msg) = invalid(user_file(&format!(
                "tls_passthrough = [\n  \"ok.test\",\n  \"{host}\",\n]\n"
            )));
            assert_eq!(line, 3, "{msg}");
            assert!(
                msg.contains(&format!("invalid tls_passthrough host '{host}': ")),
                "{msg}"
            );
            assert!(msg.contains(expected), "{msg}");
            assert!(msg.contains("(hint: tls_passthrough is an array"), "{msg}");
        }
        // Control characters are escaped in the message.
        let (_, msg) = invalid(user_file("tls_passthrough = [\"a\\u001b.test\"]\n"));
        assert!(msg.contains("'a\\u{1b}.test'"), "{msg}");
        let (line, msg) = invalid(user_file("name = \"a\"\nupstream_ca = [\"../ca.pem\"]\n"));
        assert_eq!(line, 2, "{msg}");
        assert!(
            msg.contains("invalid upstream_ca file '../ca.pem'"),
            "{msg}"
        );
        let (_, msg) = invalid(user_file("upstream_ca = [\"~/ca.pem\"]\n"));
        assert!(msg.contains("'~'"), "{msg}");
        let (line, msg) = invalid(user_file("name = \"a\"\nupstream_ca = \"ca.pem\"\n"));
        assert_eq!(line, 2, "{msg}");
        assert!(msg.contains("invalid value for 'upstream_ca'"), "{msg}");
        assert!(msg.contains("PEM CA certificates"), "{msg}");
        let (_, msg) = invalid(user_file("tls_passthrough = \"a.test\"\n"));
        assert!(msg.contains("pinned.example.com"), "{msg}");
        let (_, msg) = invalid(user_file("tls-passthrough = []\n"));
        assert!(msg.contains("did you mean 'tls_passthrough'?"), "{msg}");
    }

    #[test]
    fn secrets_tables_parse_in_name_order() {
        let file = user_file(
            "name = \"a\"\n\n[secrets.NPM_TOKEN]\nsource = \"cmd:pass show npm@work\"\nhosts = [\"registry.npmjs.org\"]\n\n[secrets.GITHUB_TOKEN]\nsource = \"env:GH_TOKEN\"\nhosts = [\"api.github.com\", \"*.githubusercontent.com\"]\n\n[secrets.KEY]\nsource = \"file:keys/k\"\nhosts = [\"10.0.0.5\"]\n",
        )
        .unwrap();
        let texts: Vec<String> = file
            .settings
            .secrets
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            texts,
            [
                "GITHUB_TOKEN=env:GH_TOKEN@api.github.com,*.githubusercontent.com",
                "KEY=file:/p/keys/k@10.0.0.5",
                "NPM_TOKEN=cmd:pass show npm@work@registry.npmjs.org",
            ]
        );
        // A relative file is taken from the file's directory, like env_files.
        assert_eq!(
            file.settings.secrets[1].source,
            SecretSource::File(PathBuf::from("/p/keys/k"))
        );
        // Dotted keys and inline tables are the same tables.
        let dotted =
            user_file("secrets.T.source = \"env:V\"\nsecrets.T.hosts = [\"a.test\"]\n").unwrap();
        let inline =
            user_file("secrets = { T = { source = \"env:V\", hosts = [\"a.test\"] } }\n").unwrap();
        assert_eq!(dotted.settings.secrets, inline.settings.secrets);
        assert_eq!(dotted.settings.secrets.len(), 1);
        assert!(
            user_file("[secrets]\n")
                .unwrap()
                .settings
                .secrets
                .is_empty()
        );
    }

    #[test]
    fn bad_secrets_name_the_line_of_the_mistake() {
        let table = |name: &str, source: &str, hosts: &str| {
            format!(
                "name = \"a\"\n\n[secrets.{name}]\nsource = \"{source}\"\nhosts = [\n  \"ok.test\",\n  {hosts}\n]\n"
            )
        };
        for (text, line, expected) in [
            (
                table("PATH", "env:V", "\"a.test\""),
                3,
                "the secret name 'PATH' cannot be used",
            ),
            (
                table("LD_PRELOAD", "env:V", "\"a.test\""),
                3,
                "LD_ variables",
            ),
            (
                table("\"MY-TOKEN\"", "env:V", "\"a.test\""),
                3,
                "invalid secret name 'MY-TOKEN'",
            ),
            (
                table("T", "vault:x", "\"a.test\""),
                4,
                "invalid secret source 'vault:x'",
            ),
            (
                table("T", "env:", "\"a.test\""),
                4,
                "'env:' needs the name of a variable",
            ),
            (
                table("T", "file:~/t", "\"a.test\""),
                4,
                "'~' is not expanded",
            ),
            (table("T", "env:V", "\"*\""), 7, "invalid secret host '*'"),
            (table("T", "env:V", "\"a.test:443\""), 7, "it has a port"),
            (table("T", "env:V", "\"10.0.0.0/8\""), 7, "it is a network"),
            (
                table("T", "env:V", "\"a.test,b.test\""),
                7,
                "invalid secret host 'a.test,b.test'",
            ),
            (
                "[secrets.T]\nsource = \"env:V\"\nhosts = []\n".to_owned(),
                3,
                "secret 'T' names no host",
            ),
            (
                "name = \"a\"\n[secrets.T]\nhosts = [\"a.test\"]\n".to_owned(),
                2,
                "secret 'T' has no source",
            ),
            (
                "name = \"a\"\n[secrets.T]\nsource = \"env:V\"\n".to_owned(),
                2,
                "secret 'T' has no hosts",
            ),
            (
                "[secrets.T]\nsource = \"env:V\"\nhosts = [\"a.test\"]\nhost = \"b.test\"\n"
                    .to_owned(),
                4,
                "unknown key 'host' in [secrets.T]",
            ),
            (
                "name = \"a\"\n[secrets]\nT = \"env:V@a.test\"\n".to_owned(),
                3,
                "invalid value for 'secrets.T'",
            ),
            (
                "name = \"a\"\nsecrets = [\"T=env:V@a.test\"]\n".to_owned(),
                2,
                "invalid value for 'secrets'",
            ),
            (
                "[secrets.T]\nsource = 1\nhosts = [\"a.test\"]\n".to_owned(),
                2,
                "invalid value for 'secrets.T.source'",
            ),
        ] {
            let (got, msg) = invalid(user_file(&text));
            assert_eq!(got, line, "{text}\n{msg}");
            assert!(msg.contains(expected), "{text}\n{msg}");
            assert!(msg.contains("[secrets."), "a hint shows the form: {msg}");
        }
        let (_, msg) = invalid(user_file(
            "name = \"a\"\n[secrets.T]\nhosts = [\"a.test\"]\n",
        ));
        assert!(
            msg.contains(
                "add source = \"env:VAR\", \"file:PATH\" or \"cmd:COMMAND\" to [secrets.T]"
            ),
            "{msg}"
        );
    }

    #[test]
    fn secrets_are_defined_at_the_top_level_only() {
        for text in [
            "name = \"a\"\n[profiles.p]\n[profiles.p.secrets.T]\nsource = \"env:V\"\nhosts = [\"a.test\"]\n",
            "[profiles.p]\nname = \"a\"\nsecrets = { T = { source = \"env:V\", hosts = [\"a.test\"] } }\n",
            // Even malformed, the place is what is reported.
            "[profiles.p]\nname = \"a\"\nsecrets = 3\n",
        ] {
            let (line, msg) = invalid(user_file(text));
            assert_eq!(line, 3, "{text}\n{msg}");
            assert!(
                msg.contains("'secrets' cannot be set inside a profile"),
                "{msg}"
            );
            assert!(
                msg.contains("move the table to the top level as [secrets.NAME]"),
                "{msg}"
            );
        }
    }
}
