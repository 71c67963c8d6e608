//! The default filesystem view: what is visible, what is writable, what is private.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::harness::{
    HostFile, TempDir, Workspace, all_users, each_identity, py, python, run, sh, test_user,
};

#[test]
fn system_directories_are_read_only() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = python(
            runner,
            &ws,
            &py(r#"
def create(p):
    return attempt(lambda: os.close(os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)))
for d in ["/usr", "/usr/bin", "/usr/lib", "/etc", "/bin", "/"]:
    report("create " + d, create(os.path.join(d, "vg-e2e-probe")))
report("mkdir /etc", attempt(lambda: os.mkdir("/etc/vg-e2e-dir")))
report("unlink /etc/hostname", attempt(lambda: os.unlink("/etc/hostname")))
report("rename /etc/hostname", attempt(lambda: os.rename("/etc/hostname", "/etc/vg-e2e")))
report("chmod /usr/bin/env", attempt(lambda: os.chmod("/usr/bin/env", 0o4777)))
"#),
        );
        out.assert_success();
        for (key, value) in out.fields() {
            assert_eq!(value, "EROFS", "{key} did not fail with EROFS\n{out}");
        }
        assert_eq!(out.fields().len(), 10, "not every probe ran\n{out}");
        for p in [
            "/usr/vg-e2e-probe",
            "/usr/bin/vg-e2e-probe",
            "/etc/vg-e2e-probe",
            "/etc/vg-e2e-dir",
        ] {
            assert!(!Path::new(p).exists(), "{p} appeared on the host\n{out}");
        }
    });
}

#[test]
fn workspace_is_read_write_and_shared_with_the_host() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write("input.txt", "from host\n");
        let out = sh(
            runner,
            &ws,
            "cat input.txt && echo from sandbox > output.txt && mkdir -p d/e && mv output.txt d/e/moved.txt && rm input.txt",
        );
        out.assert_success().assert_stdout_contains("from host");
        assert_eq!(
            ws.read("d/e/moved.txt").as_deref(),
            Some("from sandbox\n"),
            "{out}"
        );
        assert!(
            !ws.exists("input.txt"),
            "the removal did not reach the host\n{out}"
        );
    });
}

#[test]
fn tmp_is_private_empty_and_writable() {
    each_identity(|runner| {
        // The workspace is mounted at /work so that nothing of it appears under /tmp.
        let ws = Workspace::new();
        let marker = format!("vg-e2e-host-marker-{}", super::harness::unique());
        let host_marker = Path::new("/tmp").join(&marker);
        std::fs::write(&host_marker, "host").unwrap();
        let mount = format!("{}:/work", ws.arg(""));
        let out = run(
            runner,
            &ws,
            &["--mount", &mount],
            &[
                "sh",
                "-c",
                &format!(
                    "echo tmp=$(ls -A /tmp | tr '\\n' ' '); ls /tmp/{marker} 2>/dev/null && echo SAW_HOST_MARKER; echo inside > /tmp/vg-e2e-inside-{marker} && echo wrote=yes"
                ),
            ],
        );
        let _ = std::fs::remove_file(&host_marker);
        out.assert_success();
        assert_eq!(out.field("tmp"), "", "/tmp is not empty at start\n{out}");
        assert!(
            !out.stdout.contains("SAW_HOST_MARKER"),
            "the host's /tmp is visible\n{out}"
        );
        assert_eq!(out.field("wrote"), "yes", "/tmp is not writable\n{out}");
        let leaked = Path::new("/tmp").join(format!("vg-e2e-inside-{marker}"));
        assert!(
            !leaked.exists(),
            "a file written in the sandbox's /tmp appeared on the host\n{out}"
        );
    });
}

#[test]
fn home_is_private_empty_and_writable() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let user = test_user();
        let marker = HostFile::create(&user.home, "marker", "host home\n", user, 0o644);
        let inside_name = format!("vg-e2e-inside-{}", super::harness::unique());
        let out = sh(
            runner,
            &ws,
            &format!(
                "echo home=$HOME; echo listing=$(ls -A \"$HOME\" | tr '\\n' ' '); cat {m} 2>/dev/null && echo SAW_HOST_HOME; echo x > \"$HOME/{inside_name}\" && echo wrote=yes",
                m = marker.arg()
            ),
        );
        out.assert_success();
        assert_eq!(out.field("home"), user.home.display().to_string(), "{out}");
        assert_eq!(
            out.field("listing"),
            "",
            "$HOME is not empty at start\n{out}"
        );
        assert!(
            !out.stdout.contains("SAW_HOST_HOME"),
            "the host home is visible\n{out}"
        );
        assert_eq!(out.field("wrote"), "yes", "$HOME is not writable\n{out}");
        assert!(
            !user.home.join(&inside_name).exists(),
            "a file written in the sandbox's $HOME appeared in the host home\n{out}"
        );
    });
}

#[test]
fn host_only_directories_and_other_users_homes_are_invisible() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let me = test_user();
        let mut hidden: Vec<String> = [
            "/root", "/var", "/run", "/srv", "/mnt", "/media", "/boot", "/sys",
        ]
        .iter()
        .filter(|p| Path::new(p).exists())
        .map(|p| (*p).to_owned())
        .collect();
        hidden.extend(
            all_users()
                .into_iter()
                .filter(|u| u.uid != me.uid && u.home.starts_with("/home") && u.home.is_dir())
                .map(|u| u.home.display().to_string()),
        );
        assert!(
            hidden.len() >= 3,
            "the host has too little to hide for this test: {hidden:?}"
        );
        let out = python(
            runner,
            &ws,
            &py(&format!(
                "for p in {hidden:?}:\n    report(p, attempt(lambda: os.lstat(p)))\nreport('home-listing', ' '.join(sorted(os.listdir('/home'))))"
            )),
        );
        out.assert_success();
        for p in &hidden {
            assert_eq!(
                out.field(p),
                "ENOENT",
                "{p} is visible in the sandbox\n{out}"
            );
        }
        assert_eq!(
            out.field("home-listing"),
            me.name,
            "/home shows more than the test user\n{out}"
        );
    });
}

#[test]
fn password_hashes_and_sudo_rules_are_unreadable() {
    // The secrets of /etc that this host has; the mask must hide each of them behind a
    // node that is not the host's file, whatever their permissions.
    let secrets: Vec<(&str, u64)> = [
        "/etc/shadow",
        "/etc/shadow-",
        "/etc/gshadow",
        "/etc/gshadow-",
        "/etc/sudoers",
        "/etc/ssh/ssh_host_ed25519_key",
        "/etc/ssh/ssh_host_rsa_key",
        "/etc/ssl/private",
    ]
    .into_iter()
    .filter_map(|p| Some((p, std::fs::symlink_metadata(p).ok()?.ino())))
    .collect();
    assert!(
        !secrets.is_empty(),
        "this host has none of the secrets this test checks"
    );
    each_identity(|runner| {
        let ws = Workspace::new();
        let paths: Vec<&str> = secrets.iter().map(|(p, _)| *p).collect();
        let out = python(
            runner,
            &ws,
            &py(&format!(
                r#"
import stat
def read(p):
    if os.path.isdir(p):
        os.listdir(p)
    else:
        with open(p, "rb") as f:
            f.read()
for p in {paths:?} + ["/etc/sudoers.d/README"]:
    report("read " + p, attempt(lambda: read(p)))
    try:
        report("ino " + p, os.stat(p).st_ino)
    except OSError as e:
        report("ino " + p, errno.errorcode[e.errno])
report("read /etc/passwd", attempt(lambda: read("/etc/passwd")))
"#
            )),
        );
        out.assert_success();
        assert_eq!(
            out.field("read /etc/passwd"),
            "OK",
            "control: /etc/passwd must stay readable\n{out}"
        );
        assert_ne!(out.field("read /etc/sudoers.d/README"), "OK", "{out}");
        for (path, host_ino) in &secrets {
            assert_ne!(
                out.field(&format!("read {path}")),
                "OK",
                "{path} is readable in the sandbox\n{out}"
            );
            assert_ne!(
                out.field(&format!("ino {path}")),
                host_ino.to_string(),
                "{path} is the host's file, not masked\n{out}"
            );
        }
    });
}

#[test]
fn proc_shows_only_the_sandbox_processes() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let test_pid = std::process::id();
        let out = python(
            runner,
            &ws,
            &py(&format!(
                r#"
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
report("pids", " ".join(map(str, pids)))
report("ppid", os.getppid())
report("has-1", os.path.exists("/proc/1"))
report("test-pid-visible", os.path.exists("/proc/{test_pid}"))
"#
            )),
        );
        out.assert_success();
        let pids: Vec<u32> = out
            .field("pids")
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        assert_eq!(
            out.field("has-1"),
            "True",
            "no pid 1 (init) in the sandbox\n{out}"
        );
        assert_eq!(
            out.field("ppid"),
            "1",
            "the command's parent is not the sandbox init\n{out}"
        );
        assert!(
            pids.len() <= 4,
            "/proc lists more than the sandbox's processes\n{out}"
        );
        assert!(
            pids.iter().all(|&p| p < 100),
            "/proc lists host-like pids\n{out}"
        );
        if test_pid >= 100 {
            assert_eq!(
                out.field("test-pid-visible"),
                "False",
                "the test process is visible\n{out}"
            );
        }
    });
}

#[test]
fn dev_is_minimal() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = sh(runner, &ws, "ls -A /dev");
        out.assert_success();
        let mut entries: Vec<&str> = out.lines();
        entries.sort_unstable();
        let mut expected = vec![
            "core", "fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin",
            "stdout", "tty", "urandom", "zero",
        ];
        expected.sort_unstable();
        assert_eq!(entries, expected, "/dev is not the minimal set\n{out}");
        // The devices work, and /dev/pts does not list the host's terminals.
        let out = sh(
            runner,
            &ws,
            "head -c 4 /dev/zero | od -An -tx1 | tr -d ' \\n'; echo; echo x > /dev/null && echo null=ok; echo pts=$(ls /dev/pts | grep -v ptmx | tr '\\n' ' ')",
        );
        out.assert_success().assert_stdout_contains("00000000");
        assert_eq!(out.field("null"), "ok", "{out}");
        assert_eq!(
            out.field("pts"),
            "",
            "host terminals are listed in /dev/pts\n{out}"
        );
    });
}

#[test]
fn dev_shm_is_private() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let name = format!("vg-e2e-shm-{}", super::harness::unique());
        let out = sh(
            runner,
            &ws,
            &format!("echo x > /dev/shm/{name} && echo wrote=yes"),
        );
        out.assert_success();
        assert_eq!(out.field("wrote"), "yes", "{out}");
        let host = Path::new("/dev/shm").join(&name);
        let leaked = host.exists();
        let _ = std::fs::remove_file(&host);
        assert!(
            !leaked,
            "a file written in the sandbox's /dev/shm appeared on the host\n{out}"
        );
    });
}

#[test]
fn kernel_interfaces_in_proc_are_not_writable() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = python(
            runner,
            &ws,
            &py(r#"
for p in ["/proc/sys/kernel/hostname", "/proc/sys/vm/drop_caches", "/proc/sysrq-trigger"]:
    report(p, attempt(lambda: os.close(os.open(p, os.O_WRONLY))))
report("/proc/kcore", attempt(lambda: open("/proc/kcore", "rb").read(1)))
"#),
        );
        out.assert_success();
        for (key, value) in out.fields() {
            assert_ne!(value, "OK", "{key} is accessible\n{out}");
        }
    });
}

/// The test user can write to a directory outside the workspace on the host; inside the
/// sandbox it is not there. (The shared helper dir doubles as an "outside" location.)
#[test]
fn directories_outside_the_workspace_are_invisible() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let outside = TempDir::new("outside");
        outside.write("file.txt", "outside\n");
        let out = python(
            runner,
            &ws,
            &py(&format!(
                "report('stat', attempt(lambda: os.stat({dir:?})))\nreport('create', attempt(lambda: open({dir:?} + '/new.txt', 'w').write('x')))",
                dir = outside.arg("")
            )),
        );
        out.assert_success();
        assert_eq!(out.field("stat"), "ENOENT", "{out}");
        assert_ne!(out.field("create"), "OK", "{out}");
        assert!(!outside.exists("new.txt"), "{out}");
    });
}
