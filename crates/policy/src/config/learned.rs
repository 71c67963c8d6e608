//! Learned profiles: `profiles/NAME.toml` beside the user's config file, written by
//! `sandbox run --learn NAME` and selected with `--profile NAME`.
//!
//! A learned profile is a configuration file of the user's (trusted like it) whose top
//! level is the profile: loaded, its settings become the `[profiles.NAME]` table of a
//! file of their own, so [`super::resolve_profile`] layers it like any other profile.
//! It holds settings only: no `[profiles.…]` tables, `profile` key or `[[risk.rules]]`
//! (each would apply beyond the profile). A name both learned and defined by a file's
//! table (or built in) is refused rather than guessed.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::IgnoredAny;
use toml::Spanned;

use super::diagnostics::line_of;
use super::file::{parse, user_config_path};
use super::profile::BUILTIN_PROFILES;
use super::{ConfigError, ConfigFile, ConfigSource};

/// The longest profile name a learned profile may have.
pub const MAX_PROFILE_NAME: usize = 64;

/// Why a name cannot name a learned profile (it becomes a file name).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileNameError {
    #[error("the profile name is empty (use letters, digits, '.', '_' or '-')")]
    Empty,
    #[error(
        "the profile name '{name}' is {len} characters long: at most {MAX_PROFILE_NAME} are allowed"
    )]
    TooLong { name: String, len: usize },
    #[error(
        "the profile name '{name}' contains a path separator: a profile is a file in the profiles folder, named with letters, digits, '.', '_' or '-' only"
    )]
    Separator { name: String },
    #[error(
        "the profile name '{name}' contains {found}: only letters, digits, '.', '_' and '-' are allowed"
    )]
    Character { name: String, found: String },
    #[error(
        "the profile name '{name}' starts with a dot: that would be a hidden file (start it with a letter or digit)"
    )]
    LeadingDot { name: String },
}

/// Checks that `name` can name a learned profile: 1 to 64 characters from
/// `[A-Za-z0-9._-]`, not starting with a dot (which also rules out `.` and `..`).
pub fn validate_profile_name(name: &str) -> Result<(), ProfileNameError> {
    // Shown in messages: escaped, since the name may come from anywhere.
    let shown = || name.escape_debug().to_string();
    if name.is_empty() {
        return Err(ProfileNameError::Empty);
    }
    if name.contains(['/', '\\']) {
        return Err(ProfileNameError::Separator { name: shown() });
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(ProfileNameError::Character {
            name: shown(),
            found: format!("'{}'", c.escape_debug()),
        });
    }
    if name.len() > MAX_PROFILE_NAME {
        return Err(ProfileNameError::TooLong {
            name: shown(),
            len: name.len(),
        });
    }
    if name.starts_with('.') {
        return Err(ProfileNameError::LeadingDot { name: shown() });
    }
    Ok(())
}

/// `$XDG_CONFIG_HOME/vectraguard/profiles`, or `~/.config/vectraguard/profiles`: the
/// folder of the user's config file (see [`user_config_path`]).
pub fn learned_profiles_dir(home: &Path, xdg_config_home: Option<&Path>) -> PathBuf {
    let config = user_config_path(home, xdg_config_home);
    config
        .parent()
        .map_or_else(|| home.join(".config/vectraguard"), Path::to_path_buf)
        .join("profiles")
}

/// `dir/NAME.toml`, once `name` is checked.
pub fn learned_profile_path(dir: &Path, name: &str) -> Result<PathBuf, ProfileNameError> {
    validate_profile_name(name)?;
    Ok(dir.join(format!("{name}.toml")))
}

/// The keys a learned profile may not have, with their spans to point at them.
#[derive(Deserialize)]
struct Beyond {
    profile: Option<Spanned<IgnoredAny>>,
    profiles: Option<Spanned<IgnoredAny>>,
    risk: Option<Spanned<IgnoredAny>>,
}

/// Parses the text of the learned profile `name` at `path`: checked as a user file,
/// its top-level settings become its `[profiles.NAME]` table.
pub fn parse_learned(text: &str, path: &Path, name: &str) -> Result<ConfigFile, ConfigError> {
    let mut file = parse(text, path, ConfigSource::User)?;
    // `parse` accepted the text, so this reads it too; only the three keys matter.
    if let Ok(beyond) = toml::from_str::<Beyond>(text) {
        for (key, value, why) in [
            (
                "profile",
                beyond.profile,
                "a learned profile is selected with --profile",
            ),
            (
                "profiles",
                beyond.profiles,
                "a learned profile is one profile: its settings go at the top level",
            ),
            (
                "risk",
                beyond.risk,
                "risk rules apply to every run, so they belong in the user's config file",
            ),
        ] {
            if let Some(value) = value {
                return Err(ConfigError::Invalid {
                    file: path.to_path_buf(),
                    line: line_of(text, value.span().start),
                    message: format!("'{key}' cannot be set in a learned profile"),
                    hint: format!("{why}; remove it from this file"),
                });
            }
        }
    }
    let settings = std::mem::take(&mut file.settings);
    file.profiles.insert(name.to_owned(), settings);
    Ok(file)
}

/// Reads and parses the learned profile `name` at `path`.
pub fn load_learned(path: &Path, name: &str) -> Result<ConfigFile, ConfigError> {
    let text = fs::read_to_string(path).map_err(|error| ConfigError::LearnedRead {
        path: path.to_path_buf(),
        name: name.to_owned(),
        error,
    })?;
    parse_learned(&text, path, name)
}

/// With `--profile NAME` (`requested`) that neither a file's `[profiles.NAME]` table
/// nor a built-in profile defines, loads `dir/NAME.toml` and adds it to `files` (last:
/// a profile of the user's own). Returns its path when it was added. A name that is
/// also a table or built in is an error naming both; a name that is neither learned
/// nor defined is left to [`super::resolve_profile`] to report.
pub fn add_learned_profile(
    files: &mut Vec<ConfigFile>,
    requested: Option<&str>,
    dir: &Path,
) -> Result<Option<PathBuf>, ConfigError> {
    let Some(name) = requested else {
        return Ok(None);
    };
    // Not a possible file name: not a learned profile.
    let Ok(path) = learned_profile_path(dir, name) else {
        return Ok(None);
    };
    match fs::symlink_metadata(&path) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(error) => {
            return Err(ConfigError::LearnedRead {
                path,
                name: name.to_owned(),
                error,
            });
        }
    }
    if let Some(file) = files.iter().find(|f| f.profiles.contains_key(name)) {
        return Err(ConfigError::ProfileTwice {
            name: name.to_owned(),
            defined: format!("[profiles.{name}] in {}", file.path.display()),
            learned: path,
        });
    }
    if BUILTIN_PROFILES.contains(&name) {
        return Err(ConfigError::ProfileTwice {
            name: name.to_owned(),
            defined: "the built-in profile".to_owned(),
            learned: path,
        });
    }
    files.push(load_learned(&path, name)?);
    Ok(Some(path))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::config::test_support::*;
    use crate::config::{Settings, resolve_profile};
    use crate::network::NetworkMode;

    #[test]
    fn names_are_plain_file_names() {
        for good in ["a", "opencode", "my-tool_2.1", "A", &"x".repeat(64)] {
            assert_eq!(validate_profile_name(good), Ok(()), "{good}");
        }
        let err = |name: &str| validate_profile_name(name).unwrap_err();
        assert_eq!(err(""), ProfileNameError::Empty);
        assert!(matches!(err("../x"), ProfileNameError::Separator { .. }));
        assert!(matches!(err("a/b"), ProfileNameError::Separator { .. }));
        assert!(matches!(err("a\\b"), ProfileNameError::Separator { .. }));
        assert!(matches!(err(".."), ProfileNameError::LeadingDot { .. }));
        assert!(matches!(
            err(".hidden"),
            ProfileNameError::LeadingDot { .. }
        ));
        assert!(matches!(
            err(&"x".repeat(65)),
            ProfileNameError::TooLong { len: 65, .. }
        ));
        for bad in ["a b", "a:b", "é", "a\nb", "a\0b", "*"] {
            assert!(
                matches!(err(bad), ProfileNameError::Character { .. }),
                "{bad:?}"
            );
        }
        // The message names the rule and shows control characters escaped.
        let msg = err("a\nb").to_string();
        assert!(msg.contains("a\\nb") && msg.contains("'-'"), "{msg}");
        assert!(err("a/b").to_string().contains("path separator"));
    }

    #[test]
    fn the_folder_follows_the_user_config_file() {
        let home = Path::new("/home/u");
        assert_eq!(
            learned_profiles_dir(home, None),
            PathBuf::from("/home/u/.config/vectraguard/profiles")
        );
        assert_eq!(
            learned_profiles_dir(home, Some(Path::new("/x"))),
            PathBuf::from("/x/vectraguard/profiles")
        );
        assert_eq!(
            learned_profile_path(Path::new("/d"), "tool").unwrap(),
            PathBuf::from("/d/tool.toml")
        );
        assert!(learned_profile_path(Path::new("/d"), "../tool").is_err());
    }

    const LEARNED: &str = "# learned\nread_only = [\"/home/u/.config/tool\"]\nread_write = [\"/home/u/.cache/tool\"]\nnetwork = \"allow\"\nnetwork_rules = [\"allow api.test:443\"]\nadd_hosts = [\"api.test:127.0.0.1\"]\n";

    #[test]
    fn a_learned_file_is_its_own_profile() {
        let file = parse_learned(LEARNED, Path::new("/c/profiles/tool.toml"), "tool").unwrap();
        assert_eq!(file.settings, Settings::default());
        assert_eq!(file.source, ConfigSource::User);
        let profile = &file.profiles["tool"];
        assert_eq!(profile.read_only, [PathBuf::from("/home/u/.config/tool")]);
        assert_eq!(profile.read_write, [PathBuf::from("/home/u/.cache/tool")]);
        // Selected, it applies; without --profile it does not.
        let s = resolve_profile(&[&file], Some("tool")).unwrap();
        assert_eq!(s.network, Some(NetworkMode::Allow));
        assert_eq!(rule_texts(&s), ["allow api.test:443"]);
        assert_eq!(s.add_hosts.len(), 1);
        assert_eq!(
            resolve_profile(&[&file], None).unwrap(),
            Settings::default()
        );
    }

    #[test]
    fn a_learned_file_holds_settings_only() {
        for (text, key, line) in [
            ("read_only = [\"/a\"]\nprofile = \"x\"\n", "profile", 2),
            (
                "read_only = [\"/a\"]\n\n[profiles.x]\nname = \"n\"\n",
                "profiles",
                3,
            ),
            (
                "[[risk.rules]]\nid = \"r\"\nlevel = \"low\"\nreason = \"r\"\nexecutable = \"x\"\n",
                "risk",
                1,
            ),
        ] {
            let err = parse_learned(text, Path::new("/c/p/x.toml"), "x").unwrap_err();
            let msg = err.to_string();
            assert!(
                msg.contains(&format!("'{key}' cannot be set in a learned profile")),
                "{msg}"
            );
            assert!(msg.contains(&format!("/c/p/x.toml:{line}:")), "{msg}");
        }
        // A corrupt one: the parser's error, with file and line.
        let msg = parse_learned("read_only = [\"/a\"\n", Path::new("/c/p/x.toml"), "x")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("/c/p/x.toml:"), "{msg}");
        let msg = parse_learned("\nread_only = [\"rel\"]\n", Path::new("/c/p/x.toml"), "x")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("/c/p/x.toml:2:"), "{msg}");
    }

    #[test]
    fn add_learned_profile_loads_only_what_nothing_else_defines() {
        let dir = TempDir::new();
        fs::write(dir.0.join("tool.toml"), LEARNED).unwrap();
        fs::write(dir.0.join("code-exec.toml"), LEARNED).unwrap();
        fs::write(dir.0.join("broken.toml"), "network = [\n").unwrap();

        // Without --profile, or for a name with no file: nothing added.
        let mut files = Vec::new();
        assert_eq!(add_learned_profile(&mut files, None, &dir.0).unwrap(), None);
        assert_eq!(
            add_learned_profile(&mut files, Some("absent"), &dir.0).unwrap(),
            None
        );
        assert_eq!(
            add_learned_profile(&mut files, Some("../tool"), &dir.0).unwrap(),
            None
        );
        assert!(files.is_empty());
        // The unknown-profile error then points at learning.
        let msg = resolve_profile(&[], Some("absent"))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("--learn absent"), "{msg}");

        // Found: added last, selected by --profile.
        let mut files = vec![user_file("name = \"top\"\n").unwrap()];
        let added = add_learned_profile(&mut files, Some("tool"), &dir.0).unwrap();
        assert_eq!(added, Some(dir.0.join("tool.toml")));
        assert_eq!(files.len(), 2);
        let refs: Vec<&ConfigFile> = files.iter().collect();
        let s = resolve_profile(&refs, Some("tool")).unwrap();
        assert_eq!(s.name.as_deref(), Some("top"));
        assert_eq!(s.read_write, [PathBuf::from("/home/u/.cache/tool")]);

        // Both a table and a learned file: refused, naming both.
        let mut files = vec![user_file("[profiles.tool]\nname = \"t\"\n").unwrap()];
        let msg = add_learned_profile(&mut files, Some("tool"), &dir.0)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("[profiles.tool] in /p/vectraguard.toml")
                && msg.contains(&dir.0.join("tool.toml").display().to_string()),
            "{msg}"
        );
        // Likewise a built-in name.
        let msg = add_learned_profile(&mut Vec::new(), Some("code-exec"), &dir.0)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("built-in"), "{msg}");

        // A corrupt learned profile: its file and line.
        let msg = add_learned_profile(&mut Vec::new(), Some("broken"), &dir.0)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains(&format!("{}:", dir.0.join("broken.toml").display())),
            "{msg}"
        );
    }
}
