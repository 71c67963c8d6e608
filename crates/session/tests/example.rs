//! `examples/run.rs` starts a session from code, waits for it and reads its record:
//! run it as every identity the end-to-end suite uses (root, and the unprivileged
//! test user through `setpriv` when we are root; else ourselves).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The example, built by `cargo test` next to this test's own binary. `cargo test
/// --test example` alone does not rebuild it: refuse a copy older than its sources.
fn example() -> PathBuf {
    let me = std::env::current_exe().unwrap();
    let target = me.parent().and_then(Path::parent).unwrap();
    let built = target.join("examples").join("run");
    let missing = || {
        format!(
            "{} is missing: run `cargo test -p vg-session`, which builds the examples",
            built.display()
        )
    };
    let built_at = std::fs::metadata(&built)
        .unwrap_or_else(|_| panic!("{}", missing()))
        .modified()
        .unwrap();
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let newest =
        newest_source(&crate_dir.join("src")).max(newest_source(&crate_dir.join("examples")));
    assert!(
        built_at >= newest,
        "{} is older than its sources: run `cargo test -p vg-session`, which rebuilds the examples",
        built.display()
    );
    built
}

/// The latest modification time of the `.rs` files under `dir`.
fn newest_source(dir: &Path) -> std::time::SystemTime {
    let mut newest = std::time::SystemTime::UNIX_EPOCH;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let at = if path.is_dir() {
            newest_source(&path)
        } else if path.extension().is_some_and(|e| e == "rs") {
            std::fs::metadata(&path).unwrap().modified().unwrap()
        } else {
            continue;
        };
        newest = newest.max(at);
    }
    newest
}

/// `(uid, gid)` of the unprivileged test user (`$VG_TEST_USER`, default `vgtest`).
fn test_user() -> Option<(u32, u32)> {
    let name = std::env::var("VG_TEST_USER").unwrap_or_else(|_| "vgtest".into());
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 3 && f[0] == name).then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))?
    })
}

fn check(mut cmd: Command, who: &str) {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "as {who}: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    // Live through the relay, and read back from the record.
    assert!(stdout.contains("hello from the sandbox\n"), "{stdout}");
    assert!(
        stdout.contains("every layer in place: Some(true)"),
        "{stdout}"
    );
    assert!(stdout.contains("ended: exit code 3"), "{stdout}");
    assert!(
        stdout.contains("record: status exited, exit code Some(3)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("record: stdout.log: \"hello from the sandbox\""),
        "{stdout}"
    );
    assert!(stdout.contains("record: integrity verified"), "{stdout}");
}

fn host_command(program: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear().env(
        "PATH",
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    );
    cmd
}

#[test]
fn the_example_runs_a_recorded_session_from_code() {
    let example = example();
    let root = std::fs::metadata("/proc/self").unwrap().uid() == 0;
    check(
        host_command(&example),
        if root { "root" } else { "ourselves" },
    );
    if !root {
        return;
    }
    let (uid, gid) = test_user().expect("the test user (vgtest) exists, as in CI");
    // A copy the test user can reach, whatever the permissions above target/.
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let copy = dir.path().join("run");
    std::fs::copy(&example, &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = host_command(Path::new("setpriv"));
    cmd.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg("--clear-groups")
        .arg("--")
        .arg(&copy);
    check(cmd, "the test user");
}
