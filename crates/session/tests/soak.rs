//! `examples/soak.rs` runs many sessions through `vg_session` in one process and
//! checks that process for leaked descriptors, threads and memory, stray processes,
//! leftover cgroups and records that do not verify: run it as every identity the
//! end-to-end suite uses. 40 sessions by default; `VECTRAGUARD_SOAK=1` runs 1,000.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The example, built by `cargo test` next to this test's own binary.
fn example() -> PathBuf {
    let me = std::env::current_exe().unwrap();
    let built = me
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("examples")
        .join("soak");
    assert!(
        built.exists(),
        "{} is missing: run `cargo test -p vg-session`, which builds the examples",
        built.display()
    );
    built
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

fn sessions() -> &'static str {
    if std::env::var("VECTRAGUARD_SOAK").is_ok_and(|v| v == "1") {
        "1000"
    } else {
        "40"
    }
}

fn check(mut cmd: Command, who: &str) {
    let out = cmd.arg(sessions()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let figures: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains('=') && !l.starts_with("net-"))
        .collect();
    assert!(
        out.status.success(),
        "as {who}: {:?}\n{}\nstderr (end):\n{}",
        out.status,
        figures.join("\n"),
        &stderr[stderr.len().saturating_sub(4000)..]
    );
    eprintln!("as {who}:\n{}", figures.join("\n"));
    assert!(stdout.contains("refused with a thread: "), "{stdout}");
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
fn one_process_hosts_many_sessions_without_leaking() {
    let example = example();
    let root = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap();
    check(
        host_command(&example),
        if root { "root" } else { "ourselves" },
    );
    if !root {
        return;
    }
    let (uid, gid) = test_user().expect("the test user (vgtest) exists, as in CI");
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let copy = dir.path().join("soak");
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
