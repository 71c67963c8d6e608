//! One configuration file: where it is found, reading it, and parsing it into typed
//! settings and profiles.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::diagnostics::{line_of, toml_error};
use super::raw::RawFile;
use super::validate::Document;
use super::{ConfigError, ConfigSource, PROJECT_FILE_NAME, Settings};
use crate::risk::{self, config::ConfiguredRule};

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
    pub(super) default_profile_line: usize,
    /// `[[risk.rules]]`, checked; see [`crate::risk::config`].
    pub risk_rules: Vec<ConfiguredRule>,
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
    let mut raw: RawFile = toml::from_str(text).map_err(|e| toml_error(e, text, path))?;
    let document = Document::new(text, path, source)?;
    let risk_rules = risk::config::rules(raw.risk.take(), text, path, source)?;
    let (top, secrets, profile, raw_profiles) = raw.split();
    let mut settings = document.settings(top)?;
    settings.secrets = document.secrets(secrets)?;
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
        risk_rules,
    })
}

#[cfg(test)]
// Tests may panic: the workspace denies unwrap/expect, and has no clippy.toml exempting tests.
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::config::test_support::*;
    use crate::limits::Limits;
    use crate::network::NetworkMode;

    const EXAMPLE: &str = r#"name = "nightly"
agent = "dev-assistant"
mounts = ["./src:/workspace", "/data:/data:ro"]
env = { NODE_ENV = "production" }
read_only = ["/etc"]
workdir = "/workspace"
user = "1000:1000"
backend = "gvisor"
exec_check = "exit"
exec_trace = "bpf"
env_files = [".env", "/etc/app.env"]
ask = "high"
approval_timeout = "45s"
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
            backend: Some(crate::Backend::Gvisor),
            exec_check: Some(crate::ExecCheck::Exit),
            exec_trace: Some(crate::ExecTrace::Bpf),
            network_rules: Vec::new(),
            add_hosts: Vec::new(),
            tls_passthrough: Vec::new(),
            upstream_ca: Vec::new(),
            secrets: Vec::new(),
            mounts: vec![mount("/p/src:/workspace"), mount("/data:/data:ro")],
            read_only: vec!["/etc".into()],
            read_write: Vec::new(),
            env: vec![env("NODE_ENV=production")],
            env_files: vec!["/p/.env".into(), "/etc/app.env".into()],
            limits: Limits::default(),
            approval: crate::risk::Approval {
                ask: Some(crate::risk::Ask::AtLeast(crate::risk::Level::High)),
                timeout: Some(std::time::Duration::from_secs(45)),
            },
            project_access: crate::config::ProjectAccess::default(),
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
}
