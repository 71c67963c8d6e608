//! `--workdir`, `--name`, `--env`, `--env-file` and the sandbox's base environment.

use std::collections::BTreeSet;

use super::harness::{PYTHON, Vg, Workspace, each_identity, run, test_user};

#[test]
fn workdir_sets_the_starting_directory() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.mkdir("sub/dir");
        let sub = ws.arg("sub/dir");
        let out = run(runner, &ws, &["--workdir", &sub], &["pwd"]);
        out.assert_success();
        assert_eq!(out.stdout.trim(), sub, "{out}");
        let out = run(runner, &ws, &["--workdir", "/usr"], &["pwd"]);
        out.assert_success();
        assert_eq!(out.stdout.trim(), "/usr", "{out}");
        // Without --workdir, the command starts where vectraguard was started.
        let out = run(runner, &ws, &[], &["pwd"]);
        assert_eq!(out.stdout.trim(), ws.arg(""), "{out}");
    });
}

#[test]
fn workdir_must_be_absolute_and_usable() {
    each_identity(|runner| {
        let ws = Workspace::new();
        for bad in ["relative/dir", "/usr/../etc"] {
            let out = run(runner, &ws, &["--workdir", bad], &["sh", "-c", "echo RAN"]);
            out.assert_code(125);
            assert!(!out.stdout.contains("RAN"), "{out}");
        }
        let out = run(
            runner,
            &ws,
            &["--workdir", "/var/lib"],
            &["sh", "-c", "echo RAN"],
        );
        out.assert_code(125).assert_stderr_contains("/var/lib");
        assert!(!out.stdout.contains("RAN"), "{out}");
    });
}

#[test]
fn name_becomes_the_hostname() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = run(runner, &ws, &["--name", "vg-e2e-box"], &["hostname"]);
        out.assert_success();
        assert_eq!(out.stdout.trim(), "vg-e2e-box", "{out}");
        // Without --name, the host's hostname is not visible either.
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        let out = run(runner, &ws, &[], &["hostname"]);
        out.assert_success();
        assert_ne!(
            out.stdout.trim(),
            host.trim(),
            "the sandbox shares the host's hostname\n{out}"
        );
        // A name that is not a valid hostname is refused.
        let out = run(runner, &ws, &["--name", "bad name"], &["true"]);
        out.assert_code(125);
    });
}

#[test]
fn env_sets_variables() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = run(
            runner,
            &ws,
            &[
                "--env",
                "VG_A=one",
                "-e",
                "VG_B=two=2",
                "--env",
                "VG_EMPTY=",
            ],
            &[
                "sh",
                "-c",
                "echo a=$VG_A; echo b=$VG_B; echo empty=${VG_EMPTY-unset}",
            ],
        );
        out.assert_success();
        assert_eq!(out.field("a"), "one", "{out}");
        assert_eq!(out.field("b"), "two=2", "{out}");
        assert_eq!(out.field("empty"), "", "{out}");
    });
}

#[test]
fn env_file_sets_variables_literally() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let file = ws.write(
            "app.env",
            "# comment\n\nVG_FROM_FILE=file value\nexport VG_EXPORTED=yes\nVG_QUOTED='kept'\n",
        );
        let file = file.to_str().unwrap().to_owned();
        let out = run(
            runner,
            &ws,
            &["--env-file", &file],
            &[
                "sh",
                "-c",
                "echo file=$VG_FROM_FILE; echo exported=$VG_EXPORTED; echo quoted=$VG_QUOTED",
            ],
        );
        out.assert_success();
        assert_eq!(out.field("file"), "file value", "{out}");
        assert_eq!(out.field("exported"), "yes", "{out}");
        assert_eq!(out.field("quoted"), "'kept'", "{out}");
        // --env wins over --env-file.
        let out = run(
            runner,
            &ws,
            &["--env-file", &file, "--env", "VG_FROM_FILE=flag"],
            &["sh", "-c", "echo file=$VG_FROM_FILE"],
        );
        assert_eq!(out.field("file"), "flag", "{out}");
        // A malformed line is an error naming the file and line.
        let bad = ws.write("bad.env", "OK=1\nNOT VALID\n");
        let bad = bad.to_str().unwrap().to_owned();
        let out = run(
            runner,
            &ws,
            &["--env-file", &bad],
            &["sh", "-c", "echo RAN"],
        );
        out.assert_code(125)
            .assert_stderr_contains(&format!("{bad}:2"));
        assert!(!out.stdout.contains("RAN"), "{out}");
    });
}

#[test]
fn env_key_alone_copies_the_host_value_only_when_named() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let script = "echo named=${VG_HOST_NAMED-unset}; echo other=${VG_HOST_OTHER-unset}; echo absent=${VG_NOT_ON_HOST-unset}";
        let out = Vg::sandbox(
            runner,
            &ws,
            &["--env", "VG_HOST_NAMED", "--env", "VG_NOT_ON_HOST"],
            &["sh", "-c", script],
        )
        .env("VG_HOST_NAMED", "named value")
        .env("VG_HOST_OTHER", "other value")
        .run();
        out.assert_success();
        assert_eq!(out.field("named"), "named value", "{out}");
        assert_eq!(
            out.field("other"),
            "unset",
            "an unnamed host variable leaked\n{out}"
        );
        assert_eq!(out.field("absent"), "unset", "{out}");
    });
}

#[test]
fn base_environment_is_minimal() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = Vg::sandbox(
            runner,
            &ws,
            &[],
            &[
                PYTHON,
                "-c",
                "import os\nfor k in sorted(os.environ): print(f'{k}={os.environ[k]}')",
            ],
        )
        .env("VG_SOME_HOST_VAR", "x")
        .env("LANG", "C.UTF-8")
        .run();
        out.assert_success();
        let keys: BTreeSet<String> = out.fields().into_keys().collect();
        let allowed: BTreeSet<String> = ["HOME", "LANG", "PATH", "USER", "TERM"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        assert!(
            keys.is_subset(&allowed),
            "unexpected variables: {:?}\n{out}",
            keys.difference(&allowed)
        );
        assert_eq!(
            out.field("HOME"),
            test_user().home.display().to_string(),
            "{out}"
        );
        assert_eq!(out.field("USER"), test_user().name, "{out}");
        assert!(!out.field("PATH").is_empty(), "{out}");
    });
}
