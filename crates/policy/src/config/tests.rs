//! Tests of parsing and layering configuration files.

// Tests may panic: the workspace denies unwrap/expect, and has no clippy.toml exempting tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

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
        project_file("memory = \"100g\"\ntimeout = \"100d\"\nkill_grace = \"3650d\"\n").unwrap();
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
    let user = user_file("network = \"none\"\nname = \"user\"\nenv = [\"K=user\"]\n[profiles.p]\n")
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
    let project =
        project_file("name = \"proj\"\nenv = [\"P=1\"]\n[profiles.strict]\nenv = [\"S=proj\"]\n")
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
