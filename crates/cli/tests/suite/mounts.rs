//! `--mount HOST:CONTAINER[:ro]` and `--read-only PATH`.

use std::os::unix::fs::MetadataExt;

use super::harness::{TempDir, Workspace, each_identity, run};

#[test]
fn mount_exposes_a_host_directory_read_write() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let data = TempDir::new("data");
        data.write("in.txt", "host data\n");
        let mount = format!("{}:/data", data.arg(""));
        let out = run(
            runner,
            &ws,
            &["--mount", &mount],
            &[
                "sh",
                "-c",
                "cat /data/in.txt && echo from sandbox > /data/out.txt",
            ],
        );
        out.assert_success().assert_stdout_contains("host data");
        assert_eq!(
            data.read("out.txt").as_deref(),
            Some("from sandbox\n"),
            "{out}"
        );
        let meta = std::fs::metadata(data.join("out.txt")).unwrap();
        assert_eq!(meta.uid(), runner.sandbox_user().uid, "{out}");
    });
}

#[test]
fn mount_with_ro_is_read_only() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let data = TempDir::new("data");
        data.write("in.txt", "host data\n");
        let mount = format!("{}:/data:ro", data.arg(""));
        let out = run(
            runner,
            &ws,
            &["--mount", &mount],
            &[
                "sh",
                "-c",
                "cat /data/in.txt; echo x > /data/new.txt && echo CREATED; echo x >> /data/in.txt && echo APPENDED; rm -f /data/in.txt && echo REMOVED; true",
            ],
        );
        out.assert_success()
            .assert_stdout_contains("host data")
            .assert_stderr_contains("Read-only file system");
        for effect in ["CREATED", "APPENDED", "REMOVED"] {
            assert!(
                !out.stdout.contains(effect),
                "{effect} on a read-only mount\n{out}"
            );
        }
        assert!(!data.exists("new.txt"), "{out}");
        assert_eq!(data.read("in.txt").as_deref(), Some("host data\n"), "{out}");
    });
}

#[test]
fn read_only_directory_inside_the_workspace() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write("locked/keep.txt", "keep\n");
        let locked = ws.arg("locked");
        let out = run(
            runner,
            &ws,
            &["--read-only", &locked],
            &[
                "sh",
                "-c",
                "echo x > locked/new.txt && echo CREATED; echo x >> locked/keep.txt && echo APPENDED; echo ok > free.txt && echo free=yes",
            ],
        );
        out.assert_success();
        assert_eq!(
            out.field("free"),
            "yes",
            "the rest of the workspace must stay writable\n{out}"
        );
        assert!(
            !out.stdout.contains("CREATED") && !out.stdout.contains("APPENDED"),
            "{out}"
        );
        assert!(!ws.exists("locked/new.txt"), "{out}");
        assert_eq!(
            ws.read("locked/keep.txt").as_deref(),
            Some("keep\n"),
            "{out}"
        );
    });
}

#[test]
fn read_only_file_inside_the_workspace() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write("config.json", "{}\n");
        let file = ws.arg("config.json");
        let out = run(
            runner,
            &ws,
            &["--read-only", &file],
            &[
                "sh",
                "-c",
                "cat config.json; echo x >> config.json && echo APPENDED; echo ok > free.txt && echo free=yes",
            ],
        );
        out.assert_success().assert_stdout_contains("{}");
        assert_eq!(out.field("free"), "yes", "{out}");
        assert!(!out.stdout.contains("APPENDED"), "{out}");
        assert_eq!(ws.read("config.json").as_deref(), Some("{}\n"), "{out}");
    });
}

#[test]
fn mount_of_a_single_host_file() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let data = TempDir::new("data");
        data.write("settings.ini", "k=v\n");
        let rw = format!("{}:/opt-data/settings.ini", data.arg("settings.ini"));
        let out = run(
            runner,
            &ws,
            &["--mount", &format!("{}:/data", ws.arg("")), "--mount", &rw],
            &[
                "sh",
                "-c",
                "cat /opt-data/settings.ini && echo more=1 >> /opt-data/settings.ini",
            ],
        );
        out.assert_success().assert_stdout_contains("k=v");
        assert_eq!(
            data.read("settings.ini").as_deref(),
            Some("k=v\nmore=1\n"),
            "{out}"
        );

        let ro = format!("{}:/opt-data/settings.ini:ro", data.arg("settings.ini"));
        let out = run(
            runner,
            &ws,
            &["--mount", &format!("{}:/data", ws.arg("")), "--mount", &ro],
            &[
                "sh",
                "-c",
                "cat /opt-data/settings.ini; echo x >> /opt-data/settings.ini && echo APPENDED; true",
            ],
        );
        out.assert_success().assert_stdout_contains("k=v");
        assert!(!out.stdout.contains("APPENDED"), "{out}");
    });
}

#[test]
fn missing_relative_or_symlinked_mount_sources_are_refused() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let data = TempDir::new("data");
        data.mkdir("real");
        data.symlink(data.join("real"), "link");
        let missing = data.arg("does-not-exist");
        let link = data.arg("link");
        let cases: Vec<(Vec<String>, String)> = vec![
            (
                vec!["--mount".into(), format!("{missing}:/data")],
                missing.clone(),
            ),
            (
                vec!["--mount".into(), "relative/dir:/data".into()],
                "relative/dir".into(),
            ),
            (
                vec!["--mount".into(), format!("{link}:/data")],
                link.clone(),
            ),
            (vec!["--read-only".into(), missing.clone()], missing.clone()),
            (vec!["--read-only".into(), link.clone()], link.clone()),
        ];
        for (options, named) in cases {
            let options: Vec<&str> = options.iter().map(String::as_str).collect();
            let out = run(runner, &ws, &options, &["sh", "-c", "echo RAN"]);
            out.assert_code(125).assert_stderr_contains(&named);
            assert!(
                !out.stdout.contains("RAN"),
                "the command ran despite a bad mount\n{out}"
            );
        }
    });
}

#[test]
fn mount_targets_managed_by_the_sandbox_are_refused() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let data = TempDir::new("data");
        for target in ["/proc", "/dev", "/", "/proc/sys"] {
            let mount = format!("{}:{target}", data.arg(""));
            let out = run(runner, &ws, &["--mount", &mount], &["true"]);
            out.assert_code(125);
        }
    });
}

/// A symlink planted in the workspace (by an earlier sandboxed run, say) must not
/// redirect a mount target to another place of the sandbox's tree.
#[test]
fn mount_target_through_a_workspace_symlink_is_refused() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let data = TempDir::new("data");
        data.write("payload.txt", "payload\n");
        ws.symlink("/usr", "to-usr");
        ws.symlink("/etc/ssl", "to-etc-ssl");
        for link in ["to-usr", "to-etc-ssl"] {
            let target = format!("{}:{}", data.arg(""), ws.arg(format!("{link}/vg-e2e")));
            let own = format!("{}:{}", ws.arg(""), ws.arg(""));
            let out = run(
                runner,
                &ws,
                &["--mount", &own, "--mount", &target],
                &[
                    "sh",
                    "-c",
                    "echo RAN; cat /usr/vg-e2e/payload.txt /etc/ssl/vg-e2e/payload.txt",
                ],
            );
            out.assert_code(125);
            assert!(!out.stdout.contains("RAN"), "{out}");
        }
    });
}
