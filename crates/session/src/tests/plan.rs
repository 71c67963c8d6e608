use std::path::{Path, PathBuf};
use std::time::Duration;

use vg_policy::NetworkMode;
use vg_policy::config::{self, ConfigSource, Settings};
use vg_policy::env::EnvAssignment;
use vg_policy::limits::{DEFAULT_DISK, DEFAULT_KILL_GRACE, DEFAULT_PTYS, Limits};
use vg_policy::mount::MountSpec;
use vg_policy::network::{Action, Rule};
use vg_sandbox::SandboxNetwork;

use crate::image::ImageRun;
use crate::request::{ImageChoice, Recording, Request};
use crate::{Error, Plan};

/// A project directory (canonical, as mounts must be) and a request started in it
/// to run `-- true`.
fn project() -> (tempfile::TempDir, Request) {
    let dir = tempfile::tempdir().unwrap();
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    let request = Request {
        args: vec!["true".into()],
        after_dash_dash: true,
        cwd,
        ..Request::default()
    };
    (dir, request)
}

/// An image source that must not be asked.
fn no_image(choice: &ImageChoice) -> anyhow::Result<ImageRun> {
    panic!("asked for the image {} without --image", choice.name)
}

fn plan(request: &Request) -> Result<Plan, Error> {
    Plan::new(request, &mut no_image)
}

fn env_of<'a>(plan: &'a Plan, key: &str) -> Option<&'a str> {
    plan.spec
        .env
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

#[test]
fn without_mounts_the_directory_is_the_workspace_and_the_workdir() {
    let (_dir, request) = project();
    let plan = plan(&request).unwrap();
    assert_eq!(plan.mounts.len(), 1);
    assert_eq!(plan.mounts[0].host, request.cwd);
    assert_eq!(plan.mounts[0].container, request.cwd);
    assert!(!plan.mounts[0].read_only);
    assert_eq!(plan.spec.workdir, request.cwd);
    assert_eq!(plan.spec.argv, vec!["true".to_owned()]);
    assert_eq!(plan.script, None);
    assert_eq!(plan.spec.hostname, "vectraguard");
    // Recorded by default: every exec is traced.
    assert!(plan.spec.trace_exec);
}

#[test]
fn mounts_are_resolved_and_the_workdir_follows_them() {
    let (dir, mut request) = project();
    let sub = request.cwd.join("src");
    std::fs::create_dir(&sub).unwrap();
    request.settings.mounts =
        vec![MountSpec::parse(&format!("{}:/workspace", sub.display())).unwrap()];
    request.settings.read_only = vec![request.cwd.clone()];
    let plan = plan(&request).unwrap();
    let seen: Vec<(&Path, &Path, bool)> = plan
        .mounts
        .iter()
        .map(|m| (m.host.as_path(), m.container.as_path(), m.read_only))
        .collect();
    assert_eq!(
        seen,
        vec![
            (sub.as_path(), Path::new("/workspace"), false),
            (request.cwd.as_path(), request.cwd.as_path(), true),
        ]
    );
    // The current directory is seen through the deepest mount that holds it: here
    // the read-only one.
    assert_eq!(plan.spec.workdir, request.cwd);
    drop(dir);
}

#[test]
fn a_mount_through_a_symlink_is_refused() {
    let (_dir, mut request) = project();
    let link = request.cwd.join("link");
    std::os::unix::fs::symlink(&request.cwd, &link).unwrap();
    request.settings.mounts = vec![MountSpec::parse(&format!("{}:/w", link.display())).unwrap()];
    let error = plan(&request).err().unwrap();
    assert!(
        format!("{error}").contains("resolves through a symlink"),
        "{error}"
    );
}

#[test]
fn a_script_runs_with_its_shebang_at_its_path_inside() {
    let (_dir, mut request) = project();
    std::fs::write(request.cwd.join("build.sh"), "#!/bin/bash -eu\necho hi\n").unwrap();
    std::fs::write(request.cwd.join("plain.sh"), "echo hi\n").unwrap();
    request.args = vec!["build.sh".into(), "--fast".into()];
    request.after_dash_dash = false;
    let planned = plan(&request).unwrap();
    let inside = request.cwd.join("build.sh").display().to_string();
    assert_eq!(
        planned.spec.argv,
        vec![
            "/bin/bash".to_owned(),
            "-eu".into(),
            inside,
            "--fast".into()
        ]
    );
    assert_eq!(planned.script.as_deref(), Some("build.sh"));

    request.args = vec!["plain.sh".into()];
    let planned = plan(&request).unwrap();
    assert_eq!(planned.spec.argv[0], "sh");

    request.args = vec!["missing.sh".into()];
    let error = plan(&request).err().unwrap();
    assert_eq!(error.code, crate::exit::EXIT_NOT_FOUND);
}

#[test]
fn the_environment_is_composed_in_order() {
    let (_dir, mut request) = project();
    std::fs::write(request.cwd.join("app.env"), "FROM_FILE=1\nSHARED=file\n").unwrap();
    request.host_env = [
        ("TERM", "xterm-test"),
        ("LANG", "en_GB.UTF-8"),
        ("PASSED", "from-host"),
        ("SECRET", "never"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    request.settings.env_files = vec![request.cwd.join("app.env")];
    request.settings.env = ["SHARED=flag", "PASSED"]
        .into_iter()
        .map(|e| EnvAssignment::parse(e).unwrap())
        .collect();
    let plan = plan(&request).unwrap();
    assert_eq!(env_of(&plan, "TERM"), Some("xterm-test"));
    assert_eq!(env_of(&plan, "LANG"), Some("en_GB.UTF-8"));
    assert_eq!(env_of(&plan, "FROM_FILE"), Some("1"));
    assert_eq!(env_of(&plan, "SHARED"), Some("flag"));
    assert_eq!(env_of(&plan, "PASSED"), Some("from-host"));
    assert_eq!(env_of(&plan, "SECRET"), None);
    let home = plan.spec.identity.home.display().to_string();
    assert_eq!(env_of(&plan, "HOME"), Some(home.as_str()));
}

#[test]
fn limits_get_their_defaults_and_a_cgroup_is_only_planned() {
    let (_dir, mut request) = project();
    let planned = plan(&request).unwrap();
    let limits = &planned.limits;
    assert_eq!(limits.disk, DEFAULT_DISK);
    assert_eq!(limits.ptys, DEFAULT_PTYS);
    assert_eq!(limits.kill_grace, DEFAULT_KILL_GRACE);
    assert_eq!(limits.timeout, None);
    assert_eq!(limits.max_record, vg_policy::limits::DEFAULT_MAX_RECORD);
    assert_eq!(
        limits.enforced_by.get("disk").map(String::as_str),
        Some("tmpfs-size")
    );
    // Memory is capped by default: half of MemTotal, through a cgroup when one can
    // be made (the watchdog otherwise, decided at start).
    let half = crate::limits::default_memory().unwrap();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    assert_eq!(
        Some(half),
        vg_policy::limits::parse_mem_total(&meminfo).map(|t| t / 2)
    );
    assert_eq!(limits.memory_source, crate::limits::MemorySource::Default);
    assert_eq!(limits.limits.memory, Some(half));
    let cgroup = limits.cgroup.as_ref().unwrap();
    assert_eq!(cgroup.limits.memory, Some(half));
    assert_eq!((cgroup.limits.cpus, cgroup.limits.pids), (None, None));
    // `--memory unlimited`: no cap, no cgroup, and said so.
    request.settings.limits.memory = Some(vg_policy::limits::UNLIMITED_MEMORY);
    let planned = plan(&request).unwrap();
    assert!(planned.limits.cgroup.is_none());
    assert_eq!(planned.limits.limits.memory, None);
    assert_eq!(
        planned.limits.enforced_by.get("memory").map(String::as_str),
        Some("none (--memory unlimited)")
    );

    request.settings.limits = Limits {
        memory: Some(64 << 20),
        timeout: Some(Duration::from_secs(5)),
        ..Limits::default()
    };
    let planned = plan(&request).unwrap();
    let cgroup = planned.limits.cgroup.as_ref().unwrap();
    assert_eq!(cgroup.limits.memory, Some(64 << 20));
    // Named after this process and unique among its plans: sessions hosted at once
    // in one process each get a group of their own.
    let prefix = format!("vectraguard-{}-", std::process::id());
    assert!(cgroup.name.starts_with(&prefix), "{}", cgroup.name);
    let again = plan(&request).unwrap();
    assert_ne!(again.limits.cgroup.as_ref().unwrap().name, cgroup.name);
    // Planned, not created: no memory mechanism is chosen until the session starts.
    assert!(!planned.limits.enforced_by.contains_key("memory"));
    assert_eq!(planned.limits.timeout, Some(Duration::from_secs(5)));
}

#[test]
fn max_output_without_a_record_is_refused() {
    let (_dir, mut request) = project();
    request.record = Recording::Off;
    request.settings.limits.max_output = Some(1024);
    let error = plan(&request).err().unwrap();
    assert!(format!("{error}").contains("--no-record"), "{error}");
    request.settings.limits.max_output = None;
    request.tty = true;
    let error = plan(&request).err().unwrap();
    assert!(format!("{error}").contains("remove --no-record"), "{error}");
    request.tty = false;
    assert!(!plan(&request).unwrap().spec.trace_exec);
}

#[test]
fn rules_give_the_mediated_network_and_its_resolv_conf() {
    let (_dir, mut request) = project();
    let planned = plan(&request).unwrap();
    assert_eq!(planned.network.mode, NetworkMode::None);
    assert!(matches!(planned.spec.network, SandboxNetwork::Loopback));
    assert!(planned.etc.is_empty());

    request.settings.network_rules = vec![Rule::parse(Action::Allow, "example.com:443").unwrap()];
    let planned = plan(&request).unwrap();
    assert_eq!(planned.network.mode, NetworkMode::Allow);
    assert!(matches!(planned.spec.network, SandboxNetwork::Tun(_)));
    let policy = planned.network.policy.as_ref().unwrap();
    assert_eq!(policy.rules.len(), 1);
    let names: Vec<&str> = planned.etc.iter().map(|(name, _)| *name).collect();
    assert_eq!(names, vec!["resolv.conf"]);
    assert!(
        planned.etc[0].1.contains(" timeout:2 "),
        "{:?}",
        planned.etc
    );
    // A question the approval gate may hold is waited for (it was given up after
    // 4 s, before most answers could come).
    request.settings.approval.ask =
        Some(vg_policy::risk::Ask::AtLeast(vg_policy::risk::Level::High));
    let held = plan(&request).unwrap();
    assert!(held.etc[0].1.contains(" timeout:30 "), "{:?}", held.etc);
    // Only planned: the generated files are written when the session starts, so
    // no bind of them is in the view yet.
    assert!(!planned.spec.view.ops.iter().any(|op| matches!(
        op,
        vg_policy::MountOp::Bind { dst, .. } if dst == Path::new("/etc/resolv.conf")
    )));
}

#[test]
fn a_project_file_only_tightens() {
    let (_dir, mut request) = project();
    let path = request.cwd.join("vectraguard.toml");
    let loose = "memory = \"100g\"\nenv = [\"WHO=project\"]\n";
    std::fs::write(&path, loose).unwrap();
    request.config = vec![config::load(&path, ConfigSource::Project).unwrap()];
    request.profile = Some("code-exec".into());
    let planned = plan(&request).unwrap();
    // code-exec's 512 MiB stands: the project's 100 GiB cannot widen it.
    assert_eq!(planned.limits.limits.memory, Limits::code_exec().memory);
    assert_eq!(env_of(&planned, "WHO"), Some("project"));

    std::fs::write(&path, "memory = \"64m\"\n").unwrap();
    request.config = vec![config::load(&path, ConfigSource::Project).unwrap()];
    let planned = plan(&request).unwrap();
    assert_eq!(planned.limits.limits.memory, Some(64 << 20));

    // The request's own settings rank above the project file.
    request.settings = Settings {
        workdir: Some(PathBuf::from("/elsewhere")),
        ..Settings::default()
    };
    assert_eq!(
        plan(&request).unwrap().spec.workdir,
        Path::new("/elsewhere")
    );
}

#[test]
fn an_image_is_asked_of_the_image_source() {
    let (_dir, mut request) = project();
    request.image = Some(ImageChoice {
        name: "alpine".into(),
        pull: crate::request::PullPolicy::Never,
        entrypoint: None,
    });
    let mut asked = Vec::new();
    let error = Plan::new(&request, &mut |choice: &ImageChoice| {
        asked.push(choice.name.clone());
        anyhow::bail!("not here")
    })
    .err()
    .unwrap();
    assert_eq!(asked, vec!["alpine".to_owned()]);
    assert_eq!(format!("{error}"), "not here");
}
