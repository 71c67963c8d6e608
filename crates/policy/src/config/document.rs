//! Validation of a configuration file's values, with the file's context.

use super::*;

// ---------------------------------------------------------------------------------------
// Validation of values, with the file's context.

/// The file being converted: its text (for lines), path, directory and trust.
pub(super) struct Document<'a> {
    pub(super) text: &'a str,
    pub(super) path: &'a Path,
    /// The file's directory, absolute and normalised; `None` if `path` is relative.
    pub(super) dir: Option<PathBuf>,
    /// Set for project files only.
    pub(super) project: Option<ProjectDir>,
}

/// The directory a project file may reach, lexically and with symlinks resolved.
pub(super) struct ProjectDir {
    pub(super) lexical: PathBuf,
    pub(super) resolved: PathBuf,
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
        })
    }

    pub(super) fn limit<T>(
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

    /// A statement about who runs the session (`agent`, which also makes the origin
    /// `agent`, and `description`): recorded as fact in `metadata.json`, so only the
    /// user may make it, never a project file the sandbox can write.
    pub(super) fn claim(
        &self,
        value: Text,
        key: &str,
        flag: &str,
    ) -> Result<Option<String>, ConfigError> {
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

    pub(super) fn workdir(&self, value: Spanned<String>) -> Result<PathBuf, ConfigError> {
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

    pub(super) fn user(&self, value: Spanned<String>) -> Result<String, ConfigError> {
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

    pub(super) fn network(&self, value: Spanned<String>) -> Result<NetworkMode, ConfigError> {
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

    pub(super) fn network_rule(&self, value: Spanned<String>) -> Result<Rule, ConfigError> {
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

    pub(super) fn add_host(&self, value: Spanned<String>) -> Result<AddHost, ConfigError> {
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

    pub(super) fn mount(&self, value: Spanned<String>) -> Result<MountSpec, ConfigError> {
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

    pub(super) fn read_only(&self, value: Spanned<String>) -> Result<PathBuf, ConfigError> {
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

    pub(super) fn env(&self, env: RawEnv) -> Result<Vec<EnvAssignment>, ConfigError> {
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

    pub(super) fn env_file(&self, value: Spanned<String>) -> Result<PathBuf, ConfigError> {
        let path = self.host_path(value.span(), value.get_ref(), "env file")?;
        self.confine(value.span(), &path, "env file", "--env-file")?;
        Ok(path)
    }

    /// A host path written in a file: absolute, or relative to the file's directory.
    pub(super) fn host_path(
        &self,
        span: Range<usize>,
        raw: &str,
        what: &str,
    ) -> Result<PathBuf, ConfigError> {
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
    pub(super) fn confine(
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
pub(super) fn valid_user(user: &str) -> bool {
    pub(super) fn id(s: &str) -> bool {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && s.parse::<u32>().is_ok()
    }
    pub(super) fn name(s: &str) -> bool {
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
pub(super) fn resolve_symlinks(path: &Path) -> Option<PathBuf> {
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
