//! The security posture of the sandboxed process, read from inside.

use std::os::unix::fs::MetadataExt;

use super::harness::{Workspace, each_identity, sh, status_field};

#[test]
fn no_new_privs_seccomp_filter_and_no_capabilities() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = sh(runner, &ws, "cat /proc/self/status");
        out.assert_success();
        let status = &out.stdout;
        assert_eq!(
            status_field(status, "NoNewPrivs"),
            Some("1"),
            "no_new_privs is not set\n{out}"
        );
        assert_eq!(
            status_field(status, "Seccomp"),
            Some("2"),
            "no seccomp filter is installed\n{out}"
        );
        for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
            assert_eq!(
                status_field(status, cap),
                Some("0000000000000000"),
                "{cap} is not empty\n{out}"
            );
        }
    });
}

#[test]
fn command_runs_as_the_test_user_and_never_as_root() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let user = runner.sandbox_user();
        let out = sh(
            runner,
            &ws,
            "echo uid=$(id -u); echo gid=$(id -g); echo groups=$(id -G); grep -E '^(Uid|Gid):' /proc/self/status | tr '\\t' ' '",
        );
        out.assert_success();
        assert_ne!(out.field("uid"), "0", "the command runs as root\n{out}");
        assert_eq!(out.field("uid"), user.uid.to_string(), "wrong user\n{out}");
        assert_eq!(out.field("gid"), user.gid.to_string(), "wrong group\n{out}");
        assert!(
            out.field("groups").split_whitespace().all(|g| g != "0"),
            "the command is in root's group\n{out}"
        );
        // Real, effective, saved and filesystem ids are all the test user's.
        let expected_uid = format!("Uid: {0} {0} {0} {0}", user.uid);
        assert!(out.stdout.contains(&expected_uid), "mixed user ids\n{out}");
    });
}

#[test]
fn host_root_is_not_mapped_into_the_sandbox() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = sh(
            runner,
            &ws,
            "cat /proc/self/uid_map; cat /proc/self/gid_map",
        );
        out.assert_success();
        let user = runner.sandbox_user();
        for line in out.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(fields.len(), 3, "unexpected id map line\n{out}");
            assert_ne!(
                fields[1], "0",
                "host root (uid or gid 0) is mapped into the sandbox\n{out}"
            );
            assert_eq!(fields[2], "1", "a range of host ids is mapped\n{out}");
            assert!(
                fields[1] == user.uid.to_string() || fields[1] == user.gid.to_string(),
                "an id other than the test user's is mapped\n{out}"
            );
        }
    });
}

#[test]
fn files_written_in_the_workspace_belong_to_the_test_user_on_the_host() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = sh(runner, &ws, "echo made > made.txt && mkdir made.d");
        out.assert_success();
        let user = runner.sandbox_user();
        for name in ["made.txt", "made.d"] {
            let meta =
                std::fs::metadata(ws.join(name)).unwrap_or_else(|e| panic!("{name}: {e}\n{out}"));
            assert_eq!(
                meta.uid(),
                user.uid,
                "{name} has the wrong owner on the host\n{out}"
            );
            assert_eq!(
                meta.gid(),
                user.gid,
                "{name} has the wrong group on the host\n{out}"
            );
        }
        assert_eq!(ws.read("made.txt").as_deref(), Some("made\n"));
    });
}

#[test]
fn the_cgroup_namespace_hides_the_hosts_cgroup_paths() {
    each_identity(|runner| {
        let ws = Workspace::new();
        // With --pids as root the sandbox gets a cgroup of its own; either way its
        // namespace is rooted where the sandbox is, so no host path shows.
        for options in [&[][..], &["--pids", "100"][..]] {
            let out = super::harness::run(runner, &ws, options, &["cat", "/proc/self/cgroup"]);
            out.assert_success();
            assert!(!out.stdout.is_empty(), "{out}");
            for line in out.stdout.lines() {
                assert!(
                    line.ends_with(":/"),
                    "a host cgroup path is visible: {line}\n{out}"
                );
            }
        }
    });
}
