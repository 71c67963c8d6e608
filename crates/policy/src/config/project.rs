//! What a project file may not do beyond single values: reach outside its own directory
//! (as written or through symlinks), or make claims about who runs the session. The
//! checks on single values (`user`, `network = "host"`, allow rules, pins, copied host
//! variables, `best_effort_limits`, `tls_passthrough`, `upstream_ca`, `secrets`) are
//! made by each value's parser in `validate.rs`; the tests of everything a project file may not set are here.

use std::ffi::OsStr;
use std::fs;
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::raw::Text;
use super::validate::Document;
use super::{ConfigError, USER_FILE_HINT};
use crate::paths::is_within;

/// The directory a project file may reach, lexically and with symlinks resolved.
pub(super) struct ProjectDir {
    pub(super) lexical: PathBuf,
    pub(super) resolved: PathBuf,
}

impl Document<'_> {
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

#[cfg(test)]
// Tests may panic: the workspace denies unwrap/expect, and has no clippy.toml exempting tests.
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::config::test_support::*;
    use crate::config::{ConfigSource, PROJECT_FILE_NAME, Settings, parse};

    #[test]
    fn a_project_file_cannot_weaken_limits() {
        let (_, msg) = invalid(project_file("best_effort_limits = true\n"));
        assert!(msg.contains("best_effort_limits"), "{msg}");
        assert!(project_file("pids = 50\n").is_ok());
    }

    #[test]
    fn a_project_file_cannot_choose_the_backend() {
        let (_, msg) = invalid(project_file("backend = \"gvisor\"\n"));
        assert!(
            msg.contains("'backend'") && msg.contains("--backend gvisor"),
            "{msg}"
        );
        let (_, msg) = invalid(user_file("backend = \"lxc\"\n"));
        assert!(msg.contains("unknown backend"), "{msg}");
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
    fn read_write_is_for_the_users_files_only() {
        // Even inside the project: a project file's host access goes through `mounts`,
        // which the user's own settings are checked against.
        for text in [
            "read_write = [\"/p/cache\"]\n",
            "name = \"n\"\n[profiles.x]\nread_write = [\"/home/u/.cache/t\"]\n",
        ] {
            let (line, msg) = invalid(project_file(text));
            assert_eq!(line, text.lines().count(), "{msg}");
            assert!(
                msg.contains("'read_write' cannot be set in a project file"),
                "{msg}"
            );
            assert!(msg.contains(USER_FILE_HINT), "{msg}");
        }
        let user = user_file("read_write = [\"/home/u/.cache//t/\"]\n").unwrap();
        assert_eq!(
            user.settings.read_write,
            [PathBuf::from("/home/u/.cache/t")]
        );
        for bad in ["rel/x", "/a/../b", "/a:b", "/proc/x", "/"] {
            let (line, msg) = invalid(user_file(&format!("\nread_write = [\"{bad}\"]\n")));
            assert_eq!(line, 2, "{bad}: {msg}");
        }
        // Overlaid like read_only: appended.
        let mut low = Settings {
            read_write: vec![PathBuf::from("/a")],
            ..Settings::default()
        };
        low.overlay(user.settings);
        assert_eq!(
            low.read_write,
            [PathBuf::from("/a"), PathBuf::from("/home/u/.cache/t")]
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
    fn a_project_file_cannot_weaken_inspection_or_define_secrets() {
        let secret =
            "[secrets.GITHUB_TOKEN]\nsource = \"env:GH_TOKEN\"\nhosts = [\"api.github.com\"]\n";
        for (text, line, key, flag) in [
            (
                "name = \"n\"\ntls_passthrough = [\"pinned.example.com\"]\n".to_owned(),
                2,
                "tls_passthrough",
                "--tls-passthrough",
            ),
            // Even empty: the key itself is refused.
            ("tls_passthrough = []\n".to_owned(), 1, "tls_passthrough", "--tls-passthrough"),
            (
                "name = \"n\"\n[profiles.p]\ntls_passthrough = [\"*.corp.example\"]\n".to_owned(),
                3,
                "tls_passthrough",
                "--tls-passthrough",
            ),
            (
                "name = \"n\"\nupstream_ca = [\"ca.pem\"]\n".to_owned(),
                2,
                "upstream_ca",
                "--upstream-ca",
            ),
            (
                "[profiles.p]\nupstream_ca = [\"/etc/ca.pem\"]\n".to_owned(),
                2,
                "upstream_ca",
                "--upstream-ca",
            ),
            (format!("name = \"n\"\n\n{secret}"), 3, "secrets", "--secret"),
            ("name = \"n\"\n[secrets]\n".to_owned(), 2, "secrets", "--secret"),
            (
                "secrets = { T = { source = \"env:V\", hosts = [\"a.test\"] } }\n".to_owned(),
                1,
                "secrets",
                "--secret",
            ),
            // In a profile too (where a user file is refused for another reason).
            (
                "name = \"n\"\n[profiles.p]\nsecrets.T.source = \"env:V\"\nsecrets.T.hosts = [\"a\"]\n".to_owned(),
                3,
                "secrets",
                "--secret",
            ),
        ] {
            let (got, msg) = invalid(project_file(&text));
            assert_eq!(got, line, "{text}\n{msg}");
            assert!(
                msg.contains(&format!("'{key}' cannot be set in a project file")),
                "{msg}"
            );
            assert!(
                msg.contains(&format!("move it to {USER_FILE_HINT} or pass {flag}")),
                "{msg}"
            );
        }
        // The user's own file may set all three.
        let user = user_file(&format!(
            "tls_passthrough = [\"pinned.example.com\"]\nupstream_ca = [\"ca.pem\"]\n{secret}"
        ))
        .unwrap();
        assert_eq!(user.settings.tls_passthrough.len(), 1);
        assert_eq!(user.settings.upstream_ca.len(), 1);
        assert_eq!(user.settings.secrets.len(), 1);
    }
}
