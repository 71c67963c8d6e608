//! `Settings`: what one configuration layer sets, and how a higher layer overlays it.

use std::path::PathBuf;

use super::ConfigError;
use super::project_access::{Exposed, ProjectAccess};
use crate::env::EnvAssignment;
use crate::limits::Limits;
use crate::mount::MountSpec;
use crate::network::{AddHost, NetworkMode, Rule, Target};
use crate::risk::Approval;
use crate::secrets::SecretSpec;

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
    /// What runs the command (`--backend`, `backend = …`): the native sandbox when unset.
    pub backend: Option<crate::Backend>,
    /// When a recorded program is compared with its `exec` line (`exec_check = …`).
    pub exec_check: Option<crate::ExecCheck>,
    /// How a recorded run's execs are read (`exec_trace = …`).
    pub exec_trace: Option<crate::ExecTrace>,
    /// In precedence order (first match wins); see the module documentation.
    pub network_rules: Vec<Rule>,
    /// `--add-host` pins, in order; for the same name the last one wins.
    pub add_hosts: Vec<AddHost>,
    /// `--tls-passthrough`: hosts whose TLS is never inspected (clients that pin their
    /// server's certificate). Names, `*.` wildcards or addresses; appended across layers.
    pub tls_passthrough: Vec<Target>,
    /// `--upstream-ca`: CA certificates (PEM files) trusted for upstream connections
    /// besides the host's store. Absolute when they come from a file (resolved against
    /// its directory); not checked for existence here. Appended across layers.
    pub upstream_ca: Vec<PathBuf>,
    /// `--secret` and `[secrets.NAME]`: at most one per name from a file; a higher
    /// layer's secret replaces a lower one's of the same name.
    pub secrets: Vec<SecretSpec>,
    pub mounts: Vec<MountSpec>,
    /// Absolute, normalised paths mounted read-only in place.
    pub read_only: Vec<PathBuf>,
    /// Absolute, normalised paths mounted read-write in place, beside the workspace
    /// (unlike `mounts`, they do not replace it): what a learned profile grants. Never
    /// from a project file, which may not set them.
    pub read_write: Vec<PathBuf>,
    pub env: Vec<EnvAssignment>,
    /// Absolute paths; relative ones in a file were resolved against its directory.
    pub env_files: Vec<PathBuf>,
    pub limits: Limits,
    /// `ask` and `approval_timeout`: the approval gate.
    pub approval: Approval,
    /// A project file's mounts, read-only paths and env files, which apply only once
    /// [`Settings::admit_project_access`] has checked them against the rest.
    pub project_access: ProjectAccess,
}

impl Settings {
    /// Merges a higher-precedence layer into this one: a scalar set in `higher` replaces
    /// ours, lists are appended (ours first), so later `env` entries override earlier
    /// ones when applied in order. Network rules are the exception: `higher`'s go first,
    /// because the first matching rule decides. A secret of `higher` replaces ours of the
    /// same name.
    pub fn overlay(&mut self, higher: Settings) {
        // Destructured so that a new field cannot be forgotten here.
        let Settings {
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
            limits,
            approval,
            project_access,
        } = higher;
        replace_if_set(&mut self.name, name);
        replace_if_set(&mut self.agent, agent);
        replace_if_set(&mut self.description, description);
        replace_if_set(&mut self.workdir, workdir);
        replace_if_set(&mut self.user, user);
        replace_if_set(&mut self.network, network);
        replace_if_set(&mut self.backend, backend);
        replace_if_set(&mut self.exec_check, exec_check);
        replace_if_set(&mut self.exec_trace, exec_trace);
        // The first matching rule decides, so the higher layer's go in front; for pins
        // the last one of a name wins, so theirs go after ours.
        self.network_rules.splice(0..0, network_rules);
        self.add_hosts.extend(add_hosts);
        self.tls_passthrough.extend(tls_passthrough);
        self.upstream_ca.extend(upstream_ca);
        self.secrets
            .retain(|ours| !secrets.iter().any(|theirs| theirs.name == ours.name));
        self.secrets.extend(secrets);
        self.mounts.extend(mounts);
        self.read_only.extend(read_only);
        self.read_write.extend(read_write);
        self.env.extend(env);
        self.env_files.extend(env_files);
        self.limits.overlay(limits);
        self.approval.overlay(approval);
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
pub(super) fn quarantined(file: &std::path::Path, mut settings: Settings) -> Settings {
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

#[cfg(test)]
// Tests may panic: the workspace denies unwrap/expect, and has no clippy.toml exempting tests.
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::config::test_support::*;

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

    fn secret(value: &str) -> SecretSpec {
        SecretSpec::parse(value).unwrap()
    }

    #[test]
    fn overlay_appends_passthrough_and_cas_and_replaces_secrets_by_name() {
        let host = |h: &str| crate::secrets::host_target(h).unwrap();
        let mut low = Settings {
            tls_passthrough: vec![host("pinned.test")],
            upstream_ca: vec![PathBuf::from("/etc/low.pem")],
            secrets: vec![
                secret("GH=env:LOW_GH@api.github.com"),
                secret("NPM=file:/run/npm@registry.npmjs.org"),
            ],
            ..Settings::default()
        };
        low.overlay(Settings {
            tls_passthrough: vec![host("*.corp.test")],
            upstream_ca: vec![PathBuf::from("/etc/high.pem")],
            secrets: vec![
                secret("GH=cmd:gh auth token@api.github.com,uploads.github.com"),
                secret("PYPI=env:PYPI@upload.pypi.org"),
            ],
            ..Settings::default()
        });
        assert_eq!(
            low.tls_passthrough,
            vec![host("pinned.test"), host("*.corp.test")]
        );
        assert_eq!(
            low.upstream_ca,
            vec![
                PathBuf::from("/etc/low.pem"),
                PathBuf::from("/etc/high.pem")
            ]
        );
        let secrets: Vec<String> = low.secrets.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            secrets,
            [
                "NPM=file:/run/npm@registry.npmjs.org",
                "GH=cmd:gh auth token@api.github.com,uploads.github.com",
                "PYPI=env:PYPI@upload.pypi.org",
            ]
        );
        // A layer without secrets keeps ours.
        low.overlay(Settings::default());
        assert_eq!(low.secrets.len(), 3);
    }
}
