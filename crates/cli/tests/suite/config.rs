//! Configuration files (`vectraguard.toml`, `--config`, `--profile`) and `doctor`.

use super::harness::{TempDir, Vg, Workspace, each_identity, run};

fn show_env(keys: &[&str]) -> Vec<String> {
    let script = keys
        .iter()
        .map(|k| format!("echo {k}=${{{k}-unset}}"))
        .collect::<Vec<_>>()
        .join("; ");
    vec!["sh".into(), "-c".into(), script]
}

fn run_env(
    runner: super::harness::Runner,
    ws: &Workspace,
    options: &[&str],
    keys: &[&str],
) -> super::harness::Output {
    let cmd = show_env(keys);
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    run(runner, ws, options, &cmd)
}

#[test]
fn project_file_env_is_applied_and_flags_override_it() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write(
            "vectraguard.toml",
            "env = { FOO = \"bar\", KEEP = \"kept\" }\n",
        );
        let out = run_env(runner, &ws, &[], &["FOO", "KEEP"]);
        out.assert_success();
        assert_eq!(out.field("FOO"), "bar", "{out}");
        assert_eq!(out.field("KEEP"), "kept", "{out}");

        let out = run_env(runner, &ws, &["--env", "FOO=flag"], &["FOO", "KEEP"]);
        out.assert_success();
        assert_eq!(
            out.field("FOO"),
            "flag",
            "the flag must win over the file\n{out}"
        );
        assert_eq!(out.field("KEEP"), "kept", "{out}");
    });
}

#[test]
fn project_file_is_found_from_a_subdirectory() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write(
            "vectraguard.toml",
            "name = \"from-file\"\nenv = [\"FOO=bar\"]\n",
        );
        let sub = ws.mkdir("deep/er");
        let out = Vg::new(runner, &sub)
            .args(["sandbox", "run", "--mount"])
            .arg(format!("{}:{}", ws.arg(""), ws.arg("")))
            .args(["--", "sh", "-c", "echo FOO=$FOO; echo host=$(hostname)"])
            .run();
        out.assert_success();
        assert_eq!(out.field("FOO"), "bar", "{out}");
        assert_eq!(out.field("host"), "from-file", "{out}");
    });
}

#[test]
fn unknown_key_is_an_error_with_file_and_line() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let file = ws.write(
            "vectraguard.toml",
            "env = { FOO = \"bar\" }\n\nbogus_key = 1\n",
        );
        let out = run(runner, &ws, &[], &["sh", "-c", "echo RAN"]);
        out.assert_code(125)
            .assert_stderr_contains(&file.display().to_string())
            .assert_stderr_contains(":3:")
            .assert_stderr_contains("bogus_key");
        assert!(!out.stdout.contains("RAN"), "{out}");
    });
}

#[test]
fn invalid_value_is_an_error_with_file_and_line() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let file = ws.write(
            "vectraguard.toml",
            "name = \"ok\"\nnetwork = \"sideways\"\n",
        );
        let out = run(runner, &ws, &[], &["sh", "-c", "echo RAN"]);
        out.assert_code(125)
            .assert_stderr_contains(&format!("{}:2:", file.display()));
        assert!(!out.stdout.contains("RAN"), "{out}");
    });
}

#[test]
fn project_file_cannot_reach_outside_the_project() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let outside = TempDir::new("outside");
        outside.write("secret.txt", "vg-outside\n");
        ws.symlink(outside.path(), "sneaky");
        let cases = [
            format!("mounts = [\"{}:/data\"]\n", outside.arg("")),
            "mounts = [\"/etc:/data:ro\"]\n".to_owned(),
            "mounts = [\"./sneaky:/data\"]\n".to_owned(),
            "mounts = [\"../:/data\"]\n".to_owned(),
            format!("read_only = [\"{}\"]\n", outside.arg("")),
            format!("env_files = [\"{}\"]\n", outside.arg("secret.txt")),
            "env = [\"HOME_TOKEN\"]\n".to_owned(),
            "user = \"0\"\n".to_owned(),
        ];
        for text in cases {
            let file = ws.write("vectraguard.toml", &text);
            let out = run(
                runner,
                &ws,
                &[],
                &["sh", "-c", "cat /data/secret.txt; echo RAN"],
            );
            out.assert_code(125)
                .assert_stderr_contains(&file.display().to_string());
            assert!(
                !out.stdout.contains("RAN") && !out.stdout.contains("vg-outside"),
                "{text}\n{out}"
            );
        }
    });
}

#[test]
fn project_file_may_mount_inside_the_project() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write("src/code.txt", "code\n");
        ws.write(
            "vectraguard.toml",
            format!(
                "mounts = [\"{}:{}\", \"./src:/src:ro\"]\n",
                ws.arg(""),
                ws.arg("")
            ),
        );
        let out = run(
            runner,
            &ws,
            &[],
            &["sh", "-c", "cat /src/code.txt; touch /src/x || echo ro=yes"],
        );
        out.assert_success().assert_stdout_contains("code");
        assert_eq!(out.field("ro"), "yes", "{out}");
    });
}

#[test]
fn explicit_config_file_is_used_instead_of_the_project_file() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write("vectraguard.toml", "env = { FROM_PROJECT = \"1\" }\n");
        let conf = TempDir::new("conf");
        let data = TempDir::new("data");
        data.write("shared.txt", "shared\n");
        // A file the user names may reach anywhere, unlike a project file.
        let file = conf.write(
            "custom.toml",
            format!(
                "env = {{ FROM_CONFIG = \"yes\" }}\nmounts = [\"{}:{}\", \"{}:/data:ro\"]\n",
                ws.arg(""),
                ws.arg(""),
                data.arg("")
            ),
        );
        let file = file.display().to_string();
        let out = run(
            runner,
            &ws,
            &["--config", &file],
            &[
                "sh",
                "-c",
                "echo FROM_CONFIG=${FROM_CONFIG-unset}; echo FROM_PROJECT=${FROM_PROJECT-unset}; cat /data/shared.txt",
            ],
        );
        out.assert_success().assert_stdout_contains("shared");
        assert_eq!(out.field("FROM_CONFIG"), "yes", "{out}");
        assert_eq!(
            out.field("FROM_PROJECT"),
            "unset",
            "the project file was read too\n{out}"
        );

        let out = run(
            runner,
            &ws,
            &["--config", &conf.arg("missing.toml")],
            &["true"],
        );
        out.assert_code(125).assert_stderr_contains("missing.toml");
    });
}

#[test]
fn profile_selects_a_named_set_of_settings() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write(
            "vectraguard.toml",
            "env = { MODE = \"base\", BASE = \"1\" }\n\n[profiles.ci]\nname = \"ci-box\"\nenv = { MODE = \"ci\" }\n\n[profiles.dev]\nenv = [\"MODE=dev\"]\n",
        );
        let keys = ["MODE", "BASE"];
        let out = run_env(runner, &ws, &[], &keys);
        assert_eq!(out.field("MODE"), "base", "{out}");
        let out = run_env(runner, &ws, &["--profile", "ci"], &keys);
        out.assert_success();
        assert_eq!(out.field("MODE"), "ci", "{out}");
        assert_eq!(out.field("BASE"), "1", "{out}");
        let out = run(runner, &ws, &["--profile", "ci"], &["hostname"]);
        assert_eq!(out.stdout.trim(), "ci-box", "{out}");
        let out = run_env(
            runner,
            &ws,
            &["--profile", "dev", "--env", "MODE=flag"],
            &keys,
        );
        assert_eq!(out.field("MODE"), "flag", "{out}");
        let out = run(
            runner,
            &ws,
            &["--profile", "nope"],
            &["sh", "-c", "echo RAN"],
        );
        out.assert_code(125).assert_stderr_contains("nope");
        assert!(!out.stdout.contains("RAN"), "{out}");

        // --profile also works with --config.
        let conf = TempDir::new("conf");
        let file = conf.write("c.toml", "[profiles.strict]\nenv = { MODE = \"strict\" }\n");
        let file = file.display().to_string();
        let out = run_env(
            runner,
            &ws,
            &["--config", &file, "--profile", "strict"],
            &keys,
        );
        out.assert_success();
        assert_eq!(out.field("MODE"), "strict", "{out}");
        assert_eq!(out.field("BASE"), "unset", "{out}");
    });
}

#[test]
fn doctor_reports_every_required_layer_available() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = Vg::new(runner, ws.path()).arg("doctor").run();
        out.assert_success();
        for layer in [
            "Landlock",
            "seccomp",
            "user namespace",
            "mount namespace",
            "pid namespace",
            "network namespace",
        ] {
            let line = out
                .stdout
                .lines()
                .find(|l| l.contains(layer))
                .unwrap_or_else(|| panic!("doctor does not list {layer}\n{out}"));
            assert!(
                line.trim_start().starts_with("ok"),
                "{layer} is not ok\n{out}"
            );
        }
    });
}

#[test]
fn a_project_file_cannot_loosen_a_profile_or_the_defaults() {
    use super::harness::{PYTHON, RecordsHome, session_metadata};
    use super::limits::{OPEN_PTYS, cgroups_for};
    each_identity(|runner| {
        let ws = Workspace::new();
        // Every limit key, far above the built-in profile and the defaults.
        ws.write(
            "vectraguard.toml",
            "memory = \"100g\"\ncpus = 64\npids = 1000000\ntimeout = \"100d\"\nmax_output = \"100g\"\ndisk = \"100g\"\nkill_grace = \"3650d\"\nptys = 4096\n",
        );
        let home = RecordsHome::new(runner);
        let mut options = vec!["--profile", "code-exec"];
        if !cgroups_for(runner) {
            options.push("--best-effort-limits");
        }
        Vg::sandbox(runner, &ws, &options, &["true"])
            .records_home(&home)
            .run()
            .assert_success();
        let limits = session_metadata(&home.only_session())["limits"].clone();
        assert_eq!(limits["memory_bytes"], 512 << 20, "{limits}");
        assert_eq!(limits["cpus"], 0.5, "{limits}");
        assert_eq!(limits["pids"], 256, "{limits}");
        assert_eq!(limits["timeout_secs"], 30, "{limits}");
        assert_eq!(limits["max_output_bytes"], 1 << 20, "{limits}");
        assert_eq!(limits["disk_bytes"], 1 << 30, "{limits}");
        assert_eq!(limits["kill_grace_ms"], 10_000, "{limits}");
        assert_eq!(limits["ptys"], 64, "{limits}");

        // Without a profile, the defaults bound the keys that have one.
        ws.write(
            "vectraguard.toml",
            "pids = 1000000\ndisk = \"100g\"\nkill_grace = \"3650d\"\nptys = 4096\n",
        );
        let home = RecordsHome::new(runner);
        Vg::sandbox(runner, &ws, &[], &["true"])
            .records_home(&home)
            .run()
            .assert_success();
        let limits = session_metadata(&home.only_session())["limits"].clone();
        assert_eq!(limits["pids"], 4096, "{limits}");
        assert_eq!(limits["disk_bytes"], 1 << 30, "{limits}");
        assert_eq!(limits["kill_grace_ms"], 10_000, "{limits}");
        assert_eq!(limits["ptys"], 64, "{limits}");

        // The kill grace at work: a command that ignores SIGTERM is still killed
        // after the default grace, not after ten years.
        let started = std::time::Instant::now();
        Vg::sandbox(
            runner,
            &ws,
            &["--timeout", "1s"],
            &["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"],
        )
        .run()
        .assert_code(124);
        assert!(started.elapsed() < std::time::Duration::from_secs(30));

        // A tighter value applies.
        ws.write("vectraguard.toml", "ptys = 3\ntimeout = \"1s\"\n");
        let out = Vg::sandbox(runner, &ws, &[], &[PYTHON, "-c", OPEN_PTYS]).run();
        out.assert_success();
        assert_eq!(out.field("ptys"), "3", "{out}");
        run(runner, &ws, &[], &["sleep", "20"]).assert_code(124);
    });
}

#[test]
fn a_project_file_cannot_claim_who_runs_the_session() {
    each_identity(|runner| {
        let ws = Workspace::new();
        for (key, flag) in [("agent", "--agent"), ("description", "--description")] {
            for text in [
                format!("{key} = \"trusted-bot\"\n"),
                format!("[profiles.p]\n{key} = \"trusted-bot\"\n"),
            ] {
                let file = ws.write("vectraguard.toml", &text);
                let out = run(runner, &ws, &[], &["sh", "-c", "echo RAN"]);
                out.assert_code(125)
                    .assert_stderr_contains(&file.display().to_string())
                    .assert_stderr_contains(&format!("'{key}' cannot be set in a project file"))
                    .assert_stderr_contains(flag);
                assert!(!out.stdout.contains("RAN"), "{text}\n{out}");
            }
        }
        // Given by the user, they are recorded.
        ws.write("vectraguard.toml", "name = \"proj\"\n");
        let home = super::harness::RecordsHome::new(runner);
        Vg::sandbox(runner, &ws, &["--agent", "cli-agent"], &["true"])
            .records_home(&home)
            .run()
            .assert_success();
        let meta = super::harness::session_metadata(&home.only_session());
        assert_eq!(meta["agent"], "cli-agent", "{meta}");
        assert_eq!(meta["name"], "proj", "{meta}");
    });
}

#[test]
fn project_file_mounts_cannot_widen_what_the_user_gave() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write("data.txt", "orig\n");
        ws.write("sub/code.txt", "code\n");
        let write_both =
            "echo hacked > /src/data.txt; echo hacked > /x/data.txt; cat /x/data.txt; echo RAN";
        let cases: [(String, &str, Vec<String>); 4] = [
            // The user mounted the project read-only; the project file mounts it again,
            // writable.
            (
                "mounts = [\".:/x\"]\n".to_owned(),
                "",
                vec!["--mount".into(), format!("{}:/src:ro", ws.arg(""))],
            ),
            // Or exposes a read-only path the user did not give at all.
            (
                format!("read_only = [\"{}\"]\n", ws.arg("data.txt")),
                "sub",
                vec![],
            ),
            // The user works in a subdirectory (the workspace); the project file, found
            // in an ancestor, mounts the whole project.
            ("mounts = [\".:/x\"]\n".to_owned(), "sub", vec![]),
            // Or reads a file outside the workspace into the environment.
            ("env_files = [\"data.env\"]\n".to_owned(), "sub", vec![]),
        ];
        ws.write("data.env", "LEAKED=vg-secret-value\n");
        for (text, cwd, options) in cases {
            let file = ws.write("vectraguard.toml", &text);
            let mut vg = Vg::new(runner, &ws.join(cwd));
            vg.args(["sandbox", "run"]).args(&options).args([
                "--",
                "sh",
                "-c",
                &format!(
                    "{write_both}; cat {}; echo LEAKED=$LEAKED",
                    ws.arg("data.txt")
                ),
            ]);
            let out = vg.run();
            out.assert_code(125)
                .assert_stderr_contains(&file.display().to_string())
                .assert_stderr_contains("project file");
            assert!(
                !out.stdout.contains("RAN") && !out.stdout.contains("vg-secret"),
                "{text}\n{out}"
            );
            assert_eq!(
                ws.read("data.txt").as_deref(),
                Some("orig\n"),
                "{text}\n{out}"
            );
        }
        // Inside what the user gave, at no more access, a project mount still works.
        ws.write(
            "vectraguard.toml",
            format!("mounts = [\"{}:/src:ro\"]\n", ws.arg("sub")),
        );
        let out = Vg::new(runner, &ws.join("sub"))
            .args(["sandbox", "run", "--", "sh", "-c"])
            .arg("cat /src/code.txt; touch /src/new || echo ro=yes")
            .run();
        out.assert_success().assert_stdout_contains("code");
        assert_eq!(out.field("ro"), "yes", "{out}");
    });
}
