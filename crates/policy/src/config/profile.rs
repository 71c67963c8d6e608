//! Layering files and profiles into one `Settings`: `resolve_profile`, and the
//! built-in profiles (`code-exec`).

use std::collections::BTreeSet;

use super::settings::quarantined;
use super::{ConfigError, ConfigFile, ConfigSource, Settings, known_profiles};
use crate::limits::Limits;

/// Only the network rules and pins of `settings`, to merge them apart from the rest.
fn network_part(settings: &Settings) -> Settings {
    Settings {
        network_rules: settings.network_rules.clone(),
        add_hosts: settings.add_hosts.clone(),
        ..Settings::default()
    }
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
    resolve_profile_over(files, requested, None)
}

/// [`resolve_profile`] on a host whose default memory cap is `default_memory`
/// (`crate::limits::default_memory`), which a project file's `memory` may lower but
/// never raise ([`Limits::tightened_over`]).
pub fn resolve_profile_over(
    files: &[&ConfigFile],
    requested: Option<&str>,
    default_memory: Option<u64>,
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
    settings.limits = limits.tightened_over(&ceiling, default_memory);

    // The approval gate likewise: a project file may only ask more, and sooner.
    let mut approval = builtin.as_ref().map(|b| b.approval).unwrap_or_default();
    let mut project_approval = crate::risk::Approval::default();
    for file in files {
        let layer = if file.source == ConfigSource::Project {
            &mut project_approval
        } else {
            &mut approval
        };
        layer.overlay(file.settings.approval);
        if let Some(profile) = profile_of(file).and_then(|n| file.profiles.get(n)) {
            layer.overlay(profile.approval);
        }
    }
    settings.approval = approval.tightened_by(project_approval);

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

#[cfg(test)]
// Tests may panic: the workspace denies unwrap/expect, and has no clippy.toml exempting tests.
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::config::test_support::*;
    use std::path::{Path, PathBuf};

    use crate::config::parse;
    use crate::network::NetworkMode;

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
    fn a_project_file_may_only_ask_more_and_sooner() {
        use crate::risk::{Ask, Level};
        use std::time::Duration;
        let user = user_file("ask = \"high\"\napproval_timeout = \"60s\"\n").unwrap();
        for (project, ask, timeout) in [
            // Turning the gate off, raising the threshold, waiting longer: ignored.
            ("ask = \"never\"\n", Ask::AtLeast(Level::High), 60),
            (
                "profile = \"p\"\n[profiles.p]\nask = \"critical\"\napproval_timeout = \"1h\"\n",
                Ask::AtLeast(Level::High),
                60,
            ),
            // Asking about more, denying sooner: applied.
            (
                "ask = \"medium\"\napproval_timeout = \"5s\"\n",
                Ask::AtLeast(Level::Medium),
                5,
            ),
        ] {
            let project = project_file(project).unwrap();
            let s = resolve_profile(&[&project, &user], None).unwrap();
            assert_eq!(s.approval.ask(), ask, "{project:?}");
            assert_eq!(s.approval.timeout, Some(Duration::from_secs(timeout)));
        }
        // Alone, a project file can turn the gate on, not off.
        let on = project_file("ask = \"low\"\n").unwrap();
        assert_eq!(
            resolve_profile(&[&on], None).unwrap().approval.ask(),
            Ask::AtLeast(Level::Low)
        );
        let bad = project_file("ask = \"sometimes\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            bad.contains("vectraguard.toml:1:") && bad.contains("never"),
            "{bad}"
        );
    }

    #[test]
    fn a_project_file_limit_only_tightens_each_key() {
        use crate::limits::{
            DEFAULT_DISK, DEFAULT_KILL_GRACE, DEFAULT_MAX_RECORD, DEFAULT_PIDS, DEFAULT_PTYS,
        };
        use std::time::Duration;
        let day = Duration::from_secs(86400);
        // Key, a loose value, a tight one, and the field it sets.
        type Field = fn(&Limits) -> Option<f64>;
        let get: [(&str, &str, &str, Field); 9] = [
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
            ("max_record", "\"100g\"", "\"1k\"", |l| {
                l.max_record.map(|v| v as f64)
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
            max_record: Some(DEFAULT_MAX_RECORD),
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

    #[test]
    fn passthrough_cas_and_secrets_layer_across_files_profiles_and_flags() {
        let user = parse(
            "tls_passthrough = [\"user-top.test\"]\nupstream_ca = [\"user.pem\"]\n[secrets.GH]\nsource = \"env:USER_GH\"\nhosts = [\"api.github.com\"]\n[secrets.NPM]\nsource = \"env:NPM\"\nhosts = [\"registry.npmjs.org\"]\n[profiles.p]\ntls_passthrough = [\"user-profile.test\"]\nupstream_ca = [\"/etc/profile.pem\"]\n",
            Path::new("/home/u/.config/vectraguard/config.toml"),
            ConfigSource::User,
        )
        .unwrap();
        let explicit = parse(
            "upstream_ca = [\"explicit.pem\"]\n[secrets.GH]\nsource = \"cmd:gh auth token\"\nhosts = [\"api.github.com\"]\n",
            Path::new("/etc/vg/vg.toml"),
            ConfigSource::Explicit,
        )
        .unwrap();
        // A project file with none of them is layered as before.
        let project = project_file("network_rules = [\"deny evil.test\"]\n").unwrap();
        let mut s = resolve_profile(&[&project, &user, &explicit], Some("p")).unwrap();
        let passthrough: Vec<String> = s.tls_passthrough.iter().map(|t| t.to_string()).collect();
        assert_eq!(passthrough, ["user-top.test", "user-profile.test"]);
        assert_eq!(
            s.upstream_ca,
            [
                PathBuf::from("/home/u/.config/vectraguard/user.pem"),
                PathBuf::from("/etc/vg/explicit.pem"),
                PathBuf::from("/etc/profile.pem"),
            ]
        );
        let secrets =
            |s: &Settings| -> Vec<String> { s.secrets.iter().map(|x| x.to_string()).collect() };
        // The --config file's GH replaces the user's; NPM stays.
        assert_eq!(
            secrets(&s),
            [
                "NPM=env:NPM@registry.npmjs.org",
                "GH=cmd:gh auth token@api.github.com",
            ]
        );
        // Without the profile, the profile's additions are absent.
        let top = resolve_profile(&[&user], None).unwrap();
        assert_eq!(top.tls_passthrough.len(), 1);
        assert_eq!(top.upstream_ca.len(), 1);
        // Flags are the highest layer.
        s.overlay(Settings {
            secrets: vec![
                crate::secrets::SecretSpec::parse("NPM=file:/run/npm@registry.npmjs.org").unwrap(),
            ],
            ..Settings::default()
        });
        assert_eq!(
            secrets(&s),
            [
                "GH=cmd:gh auth token@api.github.com",
                "NPM=file:/run/npm@registry.npmjs.org",
            ]
        );
    }
}
