//! End to end: a host directory shown through a throwaway overlay layer
//! (`MountOp::Overlay`, as `FsView::learn_view` puts the home there). A sandbox reads
//! a host file through it, writes, creates and deletes inside it, cannot read a file
//! masked on top of it, and afterwards the host directory is unchanged, byte for byte
//! and inode for inode. A lower directory reached through a symlink is refused before
//! anything runs.
//!
//! A sandbox can only start from a process with one thread, so this test has its own
//! `main` (`harness = false` in Cargo.toml). The sandboxed command never runs as root:
//! started as root, the test runs the sandbox as the unprivileged test user
//! (`$VG_TEST_USER`, default `vgtest`, which `scripts/test` creates), whose home-like
//! directory it shows (root's supervisor, an unmapped root building the sandbox),
//! then runs again as that user itself through `setpriv` (an unprivileged supervisor
//! and user namespace). Started as anyone else, it runs once, as itself.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use vg_policy::Identity;
use vg_policy::view::{
    FsView, HostEntry, HostLayout, LearnView, NodeKind, SYSTEM_DIRS, ViewOptions,
};
use vg_sandbox::{SandboxError, SandboxNetwork, SandboxSpec, Termination};

/// Set in the copy of this test that runs as the test user.
const AS_USER: &str = "VG_OVERLAY_TEST_AS_USER";

fn main() {
    let root = vg_sandbox::real_ids().0 == 0;
    let who = if std::env::var_os(AS_USER).is_some() {
        "the test user"
    } else if root {
        "root, for the test user"
    } else {
        "ourselves"
    };
    // Who the sandboxed command runs as.
    let (uid, gid) = if root {
        let user = test_user();
        (user.uid, user.gid)
    } else {
        vg_sandbox::real_ids()
    };
    let base = scratch_dir();
    let result = std::panic::catch_unwind(|| {
        an_overlay_changes_nothing_on_the_host(&base, uid, gid);
        a_symlinked_lower_directory_is_refused(&base, uid, gid);
    });
    let _ = std::fs::remove_dir_all(&base);
    if result.is_err() {
        eprintln!("overlay: FAILED as {who}");
        std::process::exit(101);
    }
    println!("overlay: passed as {who}");
    if root {
        again_as_the_test_user();
    }
}

/// The unprivileged test user, which must exist when the test is started as root.
fn test_user() -> vg_policy::identity::PasswdEntry {
    let name = std::env::var("VG_TEST_USER").unwrap_or_else(|_| "vgtest".into());
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let Some(user) = vg_policy::identity::parse_passwd(&passwd)
        .into_iter()
        .find(|e| e.name == name)
    else {
        eprintln!(
            "overlay: FAILED: the test user {name} does not exist (scripts/test creates it as root)"
        );
        std::process::exit(101);
    };
    user
}

/// A fresh directory under the system's temporary folder (which the view then
/// covers with the sandbox's own /tmp: the lower directory is opened before that).
fn scratch_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vg-overlay-test-{}", std::process::id()));
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn an_overlay_changes_nothing_on_the_host(base: &Path, uid: u32, gid: u32) {
    let host = base.join("home");
    std::fs::create_dir_all(host.join("d")).unwrap();
    std::fs::write(host.join("f"), "host data\n").unwrap();
    std::fs::write(host.join("d/g"), "to be removed\n").unwrap();
    std::fs::write(host.join("secret"), "do not read\n").unwrap();
    std::os::unix::fs::symlink("f", host.join("link")).unwrap();
    std::fs::set_permissions(&host, std::fs::Permissions::from_mode(0o750)).unwrap();
    // The sandbox user's own directory, as a home is.
    for path in [&host, &host.join("d")]
        .into_iter()
        .cloned()
        .chain(["f", "d/g", "secret"].map(|f| host.join(f)))
    {
        std::os::unix::fs::chown(&path, Some(uid), Some(gid)).unwrap();
    }
    std::os::unix::fs::lchown(host.join("link"), Some(uid), Some(gid)).unwrap();
    let before = snapshot(&host);

    let view = FsView::learn_view(
        &host_layout(),
        &options(&host, uid, gid),
        &LearnView {
            host_home: host.clone(),
            extra_read_only: Vec::new(),
            masks: vec![(host.join("secret"), NodeKind::File)],
        },
    );
    assert!(
        view.ops
            .iter()
            .any(|op| matches!(op, vg_policy::MountOp::Overlay { dst, .. } if *dst == host))
    );
    let script = format!(
        r#"set -eu
cd {home}
# Read through: a host file, a host symlink.
test "$(cat f)" = "host data"
test "$(cat link)" = "host data"
# The layer's root keeps the host directory's mode, and is the sandbox user's.
test "$(stat -c %a .)" = 750
test "$(stat -c %u:%g .)" = "{uid}:{gid}"
# Write over a host file, create, delete a host file and a host directory.
echo changed > f
echo new > new
mkdir -p made/deeper && echo x > made/deeper/y
rm d/g
rmdir d
mv new renamed
test "$(cat f)" = changed
test "$(cat renamed)" = new
test ! -e d
test ! -e new
# The masked file cannot be read nor written, even though the layer is writable.
if cat secret 2>/dev/null; then echo "read the masked file"; exit 1; fi
if echo x 2>/dev/null > secret; then echo "wrote the masked file"; exit 1; fi
echo overlay-script-done
"#,
        home = host.display(),
    );
    let outcome = run(view, &host, uid, gid, &script).unwrap();
    assert_eq!(
        outcome,
        Termination::Exited(0),
        "the script in the sandbox failed (its output is above)"
    );

    let after = snapshot(&host);
    assert_eq!(before, after, "the host directory changed");
    assert_eq!(
        std::fs::read_to_string(host.join("f")).unwrap(),
        "host data\n"
    );
    assert!(!host.join("renamed").exists() && host.join("d/g").exists());
}

fn a_symlinked_lower_directory_is_refused(base: &Path, uid: u32, gid: u32) {
    let real = base.join("real");
    std::fs::create_dir(&real).unwrap();
    let link = base.join("link-to-real");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let home = base.join("inside-home");
    let view = FsView::learn_view(
        &host_layout(),
        &options(&home, uid, gid),
        &LearnView {
            host_home: link.clone(),
            extra_read_only: Vec::new(),
            masks: Vec::new(),
        },
    );
    match run(view, Path::new("/"), uid, gid, "echo ran") {
        Err(SandboxError::Layer { layer, message }) => {
            assert_eq!(layer, "mount namespace");
            assert!(
                message.contains(&link.display().to_string()) && message.contains("symlink"),
                "{message}"
            );
        }
        other => panic!("a symlinked lower directory was not refused: {other:?}"),
    }
}

/// Runs `script` with `sh -c` in a sandbox with `view`, stdout and stderr ours.
fn run(
    view: FsView,
    workdir: &Path,
    uid: u32,
    gid: u32,
    script: &str,
) -> Result<Termination, SandboxError> {
    let spec = SandboxSpec {
        hostname: "overlay-test".into(),
        argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        workdir: workdir.to_path_buf(),
        view,
        identity: Identity {
            uid,
            gid,
            name: "test".into(),
            home: workdir.to_path_buf(),
        },
        inside: None,
        trace_exec: false,
        exec_by_bpf: false,
        exits: vg_sandbox::trace::Exits::Trap,
        trace_files: false,
        trace_file_changes: false,
        report_refusals: false,
        rlimit_nproc: None,
        watch_full: Vec::new(),
        tty: false,
        network: SandboxNetwork::Loopback,
        persistent: false,
    };
    let null = std::fs::File::open("/dev/null").unwrap();
    let sandbox = vg_sandbox::spawn(&spec, [null.as_raw_fd(), 1, 2])?;
    Ok(sandbox.wait()?.termination)
}

fn options(home: &Path, uid: u32, gid: u32) -> ViewOptions {
    ViewOptions {
        mounts: Vec::new(),
        home: home.to_path_buf(),
        uid,
        gid,
        tmp_size: 16 << 20,
        home_size: 16 << 20,
        ptys: 4,
        tmpfs: Vec::new(),
    }
}

/// The host's system directories, as `vg-session` gathers them.
fn host_layout() -> HostLayout {
    let system_dirs = SYSTEM_DIRS
        .iter()
        .filter_map(|d| {
            let meta = std::fs::symlink_metadata(d).ok()?;
            if meta.file_type().is_symlink() {
                Some((d.into(), HostEntry::Symlink(std::fs::read_link(d).ok()?)))
            } else {
                meta.is_dir().then(|| (d.into(), HostEntry::Dir))
            }
        })
        .collect();
    HostLayout {
        system_dirs,
        secrets: Vec::new(),
    }
}

/// Everything about a tree but access times: each entry's type, mode, owner, inode,
/// modification and change times (which any write, chmod, chown or xattr change
/// moves), and the content of files and links.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(path) = todo.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let content = if meta.file_type().is_symlink() {
            format!("-> {}", std::fs::read_link(&path).unwrap().display())
        } else if meta.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                todo.push(entry.unwrap().path());
            }
            "dir".into()
        } else {
            format!("{:?}", std::fs::read(&path).unwrap())
        };
        out.insert(
            path,
            format!(
                "mode={:o} owner={}:{} ino={} mtime={}.{} ctime={}.{} {content}",
                meta.mode(),
                meta.uid(),
                meta.gid(),
                meta.ino(),
                meta.mtime(),
                meta.mtime_nsec(),
                meta.ctime(),
                meta.ctime_nsec(),
            ),
        );
    }
    out
}

/// Runs a copy of this test as the unprivileged test user.
fn again_as_the_test_user() {
    let user = test_user();
    // A copy the test user can reach, whatever the permissions above target/.
    let dir = scratch_dir();
    let copy = dir.join("overlay-test");
    std::fs::copy(std::env::current_exe().unwrap(), &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    let status = Command::new("setpriv")
        .arg(format!("--reuid={}", user.uid))
        .arg(format!("--regid={}", user.gid))
        .arg("--clear-groups")
        .arg("--")
        .arg(&copy)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env(AS_USER, "1")
        .status()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    if !status.success() {
        eprintln!("overlay: FAILED as the test user ({status})");
        std::process::exit(101);
    }
}
