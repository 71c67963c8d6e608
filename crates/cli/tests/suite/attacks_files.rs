//! Attacks on files: secrets in the home directory, writes outside the workspace,
//! symlink and hardlink escapes. Each test also checks that the host is unchanged.

use std::path::Path;

use super::harness::{
    PYTHON, Runner, TempDir, Workspace, all_users, each_identity, home_secret, py, python, run, sh,
    test_user, unique,
};

/// Control: the test user can read `path` on the host without a sandbox, so a failure
/// to read it inside is the sandbox's doing.
fn assert_user_can_read_on_host(path: &Path) {
    let out = Runner::Unprivileged
        .host_command("cat")
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "control failed: {} cannot read {} on the host: {}",
        test_user().name,
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn secret_in_the_users_home_cannot_be_read() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let secret = home_secret("id_test", "vg-secret-key-material\n");
        assert_user_can_read_on_host(secret.path());
        let out = python(
            runner,
            &ws,
            &py(&format!(
                r#"
report("open", attempt(lambda: open({p:?}).read()))
report("stat", attempt(lambda: os.stat({d:?})))
found = []
for root, dirs, files in os.walk(os.environ["HOME"]):
    for f in files:
        try:
            if b"vg-secret-" in open(os.path.join(root, f), "rb").read():
                found.append(os.path.join(root, f))
        except OSError:
            pass
report("found", " ".join(found))
"#,
                p = secret.arg(),
                d = secret.dir().display().to_string()
            )),
        );
        out.assert_success();
        assert_eq!(
            out.field("open"),
            "ENOENT",
            "the home secret is visible\n{out}"
        );
        assert_eq!(out.field("stat"), "ENOENT", "{out}");
        assert_eq!(out.field("found"), "", "{out}");
        assert!(!out.stdout.contains("vg-secret-key-material"), "{out}");
    });
}

#[test]
fn writes_outside_the_workspace_do_not_reach_the_host() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let user = test_user();
        let tag = unique();
        // Places that are read-only or absent in the sandbox: the write must fail.
        let mut refused = vec![
            format!("/usr/vg-e2e-{tag}"),
            format!("/usr/bin/vg-e2e-{tag}"),
            format!("/etc/vg-e2e-{tag}"),
            format!("/etc/profile.d/vg-e2e-{tag}.sh"),
            format!("/var/tmp/vg-e2e-{tag}"),
            format!("/root/vg-e2e-{tag}"),
        ];
        refused.extend(
            all_users()
                .into_iter()
                .filter(|u| u.uid != user.uid && u.home.starts_with("/home") && u.home.is_dir())
                .map(|u| u.home.join(format!("vg-e2e-{tag}")).display().to_string()),
        );
        // Places private to the sandbox: the write may succeed but stays inside.
        let private = vec![
            user.home
                .join(format!(".vg-e2e-persist-{tag}"))
                .display()
                .to_string(),
            ws.arg(format!("../vg-e2e-{tag}")),
        ];
        let all: Vec<&String> = refused.iter().chain(&private).collect();
        let out = python(
            runner,
            &ws,
            &py(&format!(
                "for t in {all:?}:\n    report(t, attempt(lambda: open(t, 'w').write('pwned')))"
            )),
        );
        out.assert_success();
        for t in &all {
            let on_host = Path::new(t).exists();
            if on_host {
                let _ = std::fs::remove_file(t);
            }
            assert!(!on_host, "{t} was written on the host\n{out}");
        }
        for t in &refused {
            assert_ne!(out.field(t), "OK", "writing {t} succeeded inside\n{out}");
        }
    });
}

#[test]
fn symlink_planted_on_the_host_does_not_lead_out_of_the_workspace() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let secret = home_secret("id_test", "vg-secret-via-link\n");
        let outside = TempDir::new("outside");
        outside.write("data.txt", "vg-outside-data\n");
        ws.symlink(secret.path(), "to-secret");
        ws.symlink(outside.join("data.txt"), "to-outside-file");
        ws.symlink(outside.path(), "to-outside-dir");
        ws.symlink(secret.dir(), "to-secret-dir");
        let out = python(
            runner,
            &ws,
            &py(r#"
for l in ["to-secret", "to-outside-file"]:
    report("read " + l, attempt(lambda: open(l).read()))
    report("write " + l, attempt(lambda: open(l, "a").write("pwned")))
for l in ["to-outside-dir", "to-secret-dir"]:
    report("list " + l, attempt(lambda: os.listdir(l)))
    report("create " + l, attempt(lambda: open(l + "/new.txt", "w").write("pwned")))
"#),
        );
        out.assert_success();
        for (key, value) in out.fields() {
            assert_ne!(value, "OK", "{key} succeeded through a symlink\n{out}");
        }
        assert!(
            !out.stdout.contains("vg-secret-via-link") && !out.stdout.contains("vg-outside-data"),
            "{out}"
        );
        assert_eq!(
            secret.read().as_deref(),
            Some("vg-secret-via-link\n"),
            "{out}"
        );
        assert_eq!(secret.siblings(), ["id_test"], "{out}");
        assert_eq!(
            outside.read("data.txt").as_deref(),
            Some("vg-outside-data\n"),
            "{out}"
        );
        assert!(!outside.exists("new.txt"), "{out}");
    });
}

#[test]
fn symlink_made_inside_does_not_lead_out_of_the_workspace() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let secret = home_secret("id_test", "vg-secret-via-link\n");
        let outside = TempDir::new("outside");
        outside.write("data.txt", "vg-outside-data\n");
        let out = python(
            runner,
            &ws,
            &py(&format!(
                r#"
targets = {{"s": {s:?}, "f": {f:?}, "d": {d:?}}}
for name, target in targets.items():
    os.symlink(target, "link-" + name)
report("read s", attempt(lambda: open("link-s").read()))
report("read f", attempt(lambda: open("link-f").read()))
report("write s", attempt(lambda: open("link-s", "a").write("pwned")))
report("write f", attempt(lambda: open("link-f", "a").write("pwned")))
report("list d", attempt(lambda: os.listdir("link-d")))
report("create d", attempt(lambda: open("link-d/new.txt", "w").write("pwned")))
"#,
                s = secret.arg(),
                f = outside.arg("data.txt"),
                d = outside.arg("")
            )),
        );
        out.assert_success();
        for (key, value) in out.fields() {
            assert_ne!(value, "OK", "{key} succeeded through a symlink\n{out}");
        }
        assert_eq!(
            secret.read().as_deref(),
            Some("vg-secret-via-link\n"),
            "{out}"
        );
        assert_eq!(
            outside.read("data.txt").as_deref(),
            Some("vg-outside-data\n"),
            "{out}"
        );
        assert!(!outside.exists("new.txt"), "{out}");
    });
}

#[test]
fn hardlinks_cannot_pull_outside_files_into_the_workspace() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let data = TempDir::new("data");
        data.write("file.txt", "vg-outside-data\n");
        ws.write("own.txt", "own\n");
        let mount = format!("{}:/data:ro", data.arg(""));
        let ws_mount = format!("{}:{}", ws.arg(""), ws.arg(""));
        let out = run(
            runner,
            &ws,
            &["--mount", &ws_mount, "--mount", &mount],
            &[
                PYTHON,
                "-c",
                &py(r#"
report("passwd", attempt(lambda: os.link("/etc/passwd", "passwd")))
report("shadow", attempt(lambda: os.link("/etc/shadow", "shadow")))
report("data", attempt(lambda: os.link("/data/file.txt", "data.txt")))
report("tmp", attempt(lambda: (open("/tmp/t", "w").write("t"), os.link("/tmp/t", "tmp.txt"))))
report("own", attempt(lambda: os.link("own.txt", "own-link.txt")))
"#),
            ],
        );
        out.assert_success();
        assert_eq!(
            out.field("own"),
            "OK",
            "control: a link within the workspace must work\n{out}"
        );
        for key in ["passwd", "shadow", "data", "tmp"] {
            assert_ne!(
                out.field(key),
                "OK",
                "hardlink of {key} into the workspace succeeded\n{out}"
            );
        }
        for name in ["passwd", "shadow", "data.txt", "tmp.txt"] {
            assert!(!ws.exists(name), "{name} appeared in the workspace\n{out}");
        }
        // The same link with the shell's ln, as a script would do it.
        let out = sh(runner, &ws, "ln /etc/passwd x");
        assert_ne!(out.code(), Some(0), "{out}");
        assert!(!ws.exists("x"), "{out}");
    });
}
