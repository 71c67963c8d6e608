//! Red team of learning mode and violation reporting: a hostile command (or a hostile
//! repository) against `--learn`, the profile it writes, and the refusals it makes, as
//! root-started and as unprivileged Vectra Guard.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::harness::{
    Output, PYTHON, Runner, TempDir, Vg, Workspace, chown_to, each_identity, home_secret, is_root,
    py, require_tools, test_user, unique,
};

/// `$XDG_CONFIG_HOME` for one test, owned by the invoker.
fn config_home(runner: Runner) -> TempDir {
    TempDir::owned_by("red-xdg", &runner.invoker(), 0o700)
}

/// The paths a learned profile grants: its `read_only`/`read_write` entries, one a
/// line (`    "PATH",`); comments are not grants.
fn granted(profile: &str) -> Vec<String> {
    profile
        .lines()
        .filter(|l| l.starts_with("    \""))
        .map(|l| l.trim().trim_end_matches(',').trim_matches('"').to_owned())
        .collect()
}

/// A learning run's output and the profile it saved, read as soon as it ended
/// (before the test tidies up what it made).
struct Learning {
    out: Output,
    profile: std::io::Result<String>,
}

impl Learning {
    /// The profile's text and grants, once the run is known to have succeeded.
    fn grants(self) -> (String, Vec<String>) {
        self.out.assert_success();
        let out = self.out;
        let profile = self
            .profile
            .unwrap_or_else(|e| panic!("no profile: {e}\n{out}"));
        let grants = granted(&profile);
        (profile, grants)
    }
}

/// Learns `sh -c script` into the profile `name`, with an AI agent's login folder
/// at `codex` (`CODEX_HOME`).
fn learn_with_codex(
    runner: Runner,
    ws: &Workspace,
    config: &TempDir,
    name: &str,
    script: &str,
    codex: &Path,
) -> Learning {
    let out = Vg::sandbox(
        runner,
        ws,
        &["--learn", name, "--yes"],
        &["sh", "-c", script],
    )
    .env("XDG_CONFIG_HOME", &config.arg(""))
    .env("CODEX_HOME", &codex.to_string_lossy())
    .run();
    let profile = std::fs::read_to_string(config.join(format!("vectraguard/profiles/{name}.toml")));
    Learning { out, profile }
}

/// Asserts that a grant ends with each of `used` and that none reaches any of
/// `secrets` (is one, or a folder holding one).
fn assert_grants(
    runner: Runner,
    (profile, grants): (&str, &[String]),
    used: &[&str],
    secrets: &[std::path::PathBuf],
) {
    for used in used {
        assert!(
            grants.iter().any(|g| g.ends_with(used)),
            "[{runner}] {used} is granted: {grants:?}\n{profile}"
        );
    }
    for secret in secrets {
        assert!(
            !grants.iter().any(|g| secret.starts_with(g)),
            "[{runner}] the profile reaches {}: {grants:?}\n{profile}",
            secret.display()
        );
    }
}

/// Writes `text` at `path`, dated 2001: on a view, a file of a secret's size
/// written in the same second as one (any file of the parallel tests' records) is
/// taken for it.
fn write_old(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    date_2001(path);
}

/// Dates `path` 2001 (see [`write_old`]).
fn date_2001(path: &Path) {
    let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(978_307_200);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(old)
        .unwrap();
}

/// Runs `command`, which must succeed.
fn run_ok(command: &mut std::process::Command) {
    assert!(command.status().unwrap().success(), "{command:?}");
}

fn bind(from: &Path, to: &Path) {
    run_ok(
        std::process::Command::new("mount")
            .arg("--bind")
            .arg(from)
            .arg(to),
    );
}

fn bindfs(from: &Path, to: &Path) {
    run_ok(
        std::process::Command::new("bindfs")
            .args(["-o", "allow_other"])
            .arg(from)
            .arg(to),
    );
}

/// A read-only overlay of `lower` (at least two layers, no upper) at `at`.
fn overlay(lower: &[&Path], at: &Path) {
    let lower: Vec<String> = lower.iter().map(|l| l.display().to_string()).collect();
    run_ok(
        std::process::Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o"])
            .arg(format!("lowerdir={}", lower.join(":")))
            .arg(at),
    );
}

/// An overlay at `at` of `shown`, through a bind mount at `bound` (over the layer
/// `empty`) unmounted once the overlay is made: its options then name an empty
/// folder.
fn stale_overlay(shown: &Path, (bound, empty): (&Path, &Path), at: &Path) {
    bind(shown, bound);
    overlay(&[bound, empty], at);
    run_ok(std::process::Command::new("umount").arg(bound));
}

fn unmount(points: &[&Path]) {
    for point in points {
        let _ = std::process::Command::new("umount").arg(point).status();
    }
}

/// A symlink in the test user's home, removed on drop.
struct HomeLink(std::path::PathBuf);

impl HomeLink {
    fn new(name: &str, target: &Path) -> Option<Self> {
        let link = test_user().home.join(name);
        if std::fs::symlink_metadata(&link).is_ok() {
            // The user has one of their own: leave it alone.
            return None;
        }
        std::os::unix::fs::symlink(target, &link).ok()?;
        chown_to(&link, test_user());
        Some(Self(link))
    }
}

impl Drop for HomeLink {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A command learned once names whatever paths it likes: Vectra Guard's own
/// configuration, a user service, a program first on PATH, git's configuration, a
/// secret's real path behind a symlink, a file outside every folder learning shows, a
/// write where learning was read-only. It reads none of the secrets, and its profile
/// grants none of them (before: `~/.config/vectraguard` read-write, through which the
/// next run rewrote the user's config; `~/.config/systemd`, `~/.local/bin`; the
/// secret's real folder; any host file).
#[test]
fn a_hostile_learning_run_gets_no_dangerous_grant() {
    each_identity(|runner| {
        let user = test_user();
        let ws = Workspace::new();
        let config = config_home(runner);
        let secret = home_secret("vault-token", "RED-VAULT-SECRET");
        let _link = HomeLink::new(".vault-token", secret.path()).unwrap_or_else(|| {
            panic!("~/.vault-token already exists in the test user's home: remove it (this test puts a link there)")
        });
        let outside = TempDir::new("red-outside");
        outside.write("tool.conf", "OUTSIDE");
        let u = unique();
        let name = format!("red{u}");
        let script = format!(
            "cat ~/.vault-token; cat {secret}; \
             mkdir -p ~/.config/vectraguard ~/.config/systemd/user ~/.local/bin; \
             echo x > ~/.config/vectraguard/config.toml; \
             echo x > ~/.config/systemd/user/red{u}.service; \
             echo x > ~/.local/bin/red{u}; echo x > ~/.gitconfig; \
             cat {out}/tool.conf; echo x > {out}/new{u}; echo x > /var/tmp/red{u}; true",
            secret = secret.arg(),
            out = outside.arg(""),
        );
        let out = Vg::sandbox(
            runner,
            &ws,
            &["--learn", &name, "--yes"],
            &["sh", "-c", &script],
        )
        .env("XDG_CONFIG_HOME", &config.arg(""))
        .run();
        out.assert_success();
        assert!(!out.stdout.contains("RED-VAULT-SECRET"), "{out}");
        assert!(!out.stdout.contains("OUTSIDE"), "{out}");
        let profile =
            std::fs::read_to_string(config.join(format!("vectraguard/profiles/{name}.toml")))
                .unwrap_or_else(|e| panic!("no profile: {e}\n{out}"));
        let grants = granted(&profile);
        let secret_dir = secret.dir().to_string_lossy().into_owned();
        for bad in [
            "vectraguard",
            "systemd",
            ".local/bin",
            ".gitconfig",
            ".vault-token",
            secret_dir.as_str(),
            outside.arg("").as_str(),
            "/var",
        ] {
            assert!(
                !grants.iter().any(|g| g.contains(bad)),
                "[{runner}] the profile grants {bad}: {grants:?}\n{profile}"
            );
        }
        // Reported instead, and nothing was made on the host.
        assert!(profile.contains("Not granted"), "{profile}");
        assert!(
            !user
                .home
                .join(format!(".config/systemd/user/red{u}.service"))
                .exists()
        );
        assert!(!user.home.join(format!(".local/bin/red{u}")).exists());
        assert!(!Path::new(&format!("/var/tmp/red{u}")).exists());
    });
}

/// The records folder is hidden from learning's view even on the first run, when it
/// does not exist yet (before: it was made after the view was planned, so nothing
/// masked it and the session's own record was readable through the home's layer).
#[test]
fn the_records_folder_is_hidden_on_the_first_learning_run() {
    each_identity(|runner| {
        let user = test_user();
        let ws = Workspace::new();
        let config = config_home(runner);
        let base = user.home.join(format!(".vg-e2e-red-{}", unique()));
        std::fs::create_dir(&base).unwrap();
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
        chown_to(&base, &runner.invoker());
        let records = base.join("vghome");
        let records_arg = records.to_string_lossy().into_owned();
        let script = format!(
            "ls -la {records_arg}/logs 2>&1; cat {records_arg}/logs/*/metadata.json 2>&1; true"
        );
        let name = format!("red{}", unique());
        let out = Vg::sandbox(
            runner,
            &ws,
            &["--learn", &name, "--yes"],
            &["sh", "-c", &script],
        )
        .env("XDG_CONFIG_HOME", &config.arg(""))
        .env("VECTRAGUARD_HOME", &records_arg)
        .run();
        let made = records.join("logs").is_dir();
        let _ = std::fs::remove_dir_all(&base);
        out.assert_success();
        assert!(made, "the session was recorded in {records_arg}\n{out}");
        assert!(!out.stdout.contains("session-"), "[{runner}] {out}");
        assert!(!out.stdout.contains("record_format"), "[{runner}] {out}");
    });
}

/// Whatever asks for it (a learned profile, `--mount`, a workspace holding it), the
/// user's configuration folder is never writable inside a sandbox; read-only it may be.
#[test]
fn the_configuration_folder_is_never_mounted_writable() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let config = TempDir::owned_by("red-xdg", &runner.invoker(), 0o755);
        let folder = config.join("vectraguard");
        std::fs::create_dir_all(folder.join("profiles")).unwrap();
        chown_to(&folder, &runner.invoker());
        let folder_arg = folder.to_string_lossy().into_owned();
        let name = format!("red{}", unique());
        config.write(
            format!("vectraguard/profiles/{name}.toml"),
            format!("read_write = [\"{folder_arg}\"]\n"),
        );
        let run = |options: &[&str]| {
            Vg::sandbox(runner, &ws, options, &["true"])
                .env("XDG_CONFIG_HOME", &config.arg(""))
                .run()
        };
        for options in [
            vec!["--profile", name.as_str()],
            vec!["--mount", &format!("{folder_arg}:/cfg")],
            vec!["--mount", &format!("{}:/cfg", config.arg(""))],
        ] {
            let out = run(&options);
            assert_ne!(out.code(), Some(0), "{out}");
            out.assert_stderr_contains("configuration folder")
                .assert_stderr_contains("read-only");
        }
        run(&["--read-only", &folder_arg]).assert_success();
        // A profiles folder that is a symlink into the workspace: the same.
        std::fs::remove_dir_all(folder.join("profiles")).unwrap();
        let profiles = ws.mkdir("profiles");
        std::os::unix::fs::symlink(&profiles, folder.join("profiles")).unwrap();
        let out = run(&[]);
        assert_ne!(out.code(), Some(0), "{out}");
        out.assert_stderr_contains("learned profiles folder");
    });
}

/// The end-of-run line names the paths a command tried: its own text, never printed
/// raw (before: escape sequences and line breaks reached the terminal as they were).
#[test]
fn the_end_of_run_line_is_safe_for_the_terminal() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = Vg::sandbox(
            runner,
            &ws,
            &[],
            &[
                "sh",
                "-c",
                "touch \"/usr/$(printf 'red\\033]0;PWNED\\007\\033[2J\\r\\nvectraguard: all good')\"; true",
            ],
        )
        .run();
        out.assert_success();
        let line = out
            .stderr
            .lines()
            .find(|l| l.contains("refused:"))
            .unwrap_or_else(|| panic!("no refusal line\n{out}"));
        assert!(line.contains("red\\u{1b}]0;PWNED"), "{line:?}\n{out}");
        assert!(!out.stderr.contains('\u{1b}'), "{out:?}");
        assert!(!out.stderr.contains("\nvectraguard: all good"), "{out:?}");
    });
}

/// With refusals reported, every refused call is a notification the supervisor
/// answers: each must fail with EPERM (any other answer means it reached the kernel),
/// from many threads at once, while processes fork and exit, while file calls are
/// traced (learning), for numbers outside the table and x32 numbers.
#[test]
fn refused_calls_never_run_under_load() {
    let body = r#"
import threading
NEWUSER, NEWNS, NEWNET = 0x10000000, 0x00020000, 0x40000000
calls = [
    (272, NEWUSER), (272, NEWNS), (165, 0, 0, 0, 0, 0), (101, 0, 0, 0, 0),
    (250, 0, -3, 0), (321, 0, 0, 0), (425, 1, 0), (308, 0, 0), (135, 0x0400000),
    (41, 2, 3, 1), (41, 10, 3, 58), (56, NEWUSER | 17, 0, 0, 0, 0),
    (56, (0xffffffff << 32) | NEWNET | 17, 0, 0, 0, 0), (471, 0), (600, 0),
    (0x3fffffff, 0), (0x40000000 | 272, NEWUSER), (0x40000000 | 165, 0, 0, 0, 0, 0),
    (0x40000000 | 520, 0, 0, 0),
]
bad = []
def hammer():
    for _ in range(60):
        for c in calls:
            r = sc(*c)
            if os.getpid() != main:
                os._exit(0)  # a clone that ran: its child goes
            if r != "EPERM":
                bad.append((c[0], r))
def churn():
    for i in range(40):
        pid = os.fork()
        if pid == 0:
            sc(272, NEWUSER)
            open("/tmp/churn%d" % i, "w").close()
            os._exit(0)
        os.waitpid(pid, 0)
main = os.getpid()
threads = [threading.Thread(target=hammer) for _ in range(12)]
threads += [threading.Thread(target=churn) for _ in range(3)]
for t in threads: t.start()
for t in threads: t.join()
report("ran", len(bad))
report("first", bad[:3])
"#;
    each_identity(|runner| {
        for learn in [false, true] {
            let ws = Workspace::new();
            let config = config_home(runner);
            let name = format!("red{}", unique());
            let mut options = vec![];
            if learn {
                options = vec!["--learn", name.as_str(), "--yes"];
            }
            let out = Vg::sandbox(runner, &ws, &options, &[PYTHON, "-c", &py(body)])
                .env("XDG_CONFIG_HOME", &config.arg(""))
                .run();
            out.assert_success();
            assert_eq!(out.field("ran"), "0", "[{runner}] learn={learn}\n{out}");
            out.assert_stderr_contains("refused");
        }
    });
}

/// A hard link is a sensitive file by another name: learning grants neither it nor a
/// folder holding it (session-24 red team, round 2 F2a: a hard link to an AI agent's
/// login file, read while learning, was granted with its folder). The agent's folder
/// is the one `CODEX_HOME` names.
#[test]
fn a_hard_link_to_an_agent_s_login_is_never_granted() {
    each_identity(|runner| {
        let user = test_user();
        let ws = Workspace::new();
        let config = config_home(runner);
        let u = unique();
        let base = user.home.join(format!(".vg-e2e-links-{u}"));
        let (codex, work) = (base.join("codex"), base.join("work"));
        for dir in [&base, &codex, &work] {
            std::fs::create_dir(dir).unwrap();
            chown_to(dir, &runner.invoker());
        }
        let login = codex.join("auth.json");
        let link = work.join("notes.txt");
        std::fs::write(&login, "RED-AGENT-TOKEN").unwrap();
        chown_to(&login, &runner.invoker());
        std::fs::hard_link(&login, &link).unwrap();
        std::fs::write(work.join("other.txt"), "plain").unwrap();
        chown_to(&work.join("other.txt"), &runner.invoker());
        let name = format!("red{u}");
        let script = format!(
            "cat {w}/notes.txt {w}/other.txt >/dev/null; true",
            w = work.display()
        );
        let learned = learn_with_codex(runner, &ws, &config, &name, &script, &codex);
        let _ = std::fs::remove_dir_all(&base);
        let (profile, grants) = learned.grants();
        assert_grants(runner, (&profile, &grants), &["other.txt"], &[link]);
        assert!(profile.contains("notes.txt"), "reported: {profile}");
    });
}

/// What a folder holds that its name does not show stays out of a profile that
/// grants around it (session-25 red team of the fix above): an `.env` file, a
/// socket (`connect` works through a read-only mount), a folder that can be entered
/// but not listed (which hid a hard link to the agent's login from the check), and
/// the real place of a symlink inside the agent's folder.
#[test]
fn a_granted_folder_holds_no_secret_its_names_do_not_show() {
    each_identity(|runner| {
        let user = test_user();
        let ws = Workspace::new();
        let config = config_home(runner);
        let u = unique();
        let base = user.home.join(format!(".vg-e2e-scan-{u}"));
        let (codex, app, dots) = (base.join("codex"), base.join("app"), base.join("dots"));
        let owned_dir = |dir: &Path| {
            std::fs::create_dir(dir).unwrap();
            chown_to(dir, &runner.invoker());
        };
        let owned_file = |file: &Path, text: &str| {
            std::fs::write(file, text).unwrap();
            chown_to(file, &runner.invoker());
        };
        for dir in [
            &base,
            &codex,
            &app,
            &app.join("src"),
            &app.join("hid"),
            &dots,
        ] {
            owned_dir(dir);
        }
        owned_file(&codex.join("auth.json"), "RED-AGENT-TOKEN");
        owned_file(&app.join("src/main.py"), "print()");
        owned_file(&app.join(".env"), "API_KEY=red");
        std::fs::hard_link(codex.join("auth.json"), app.join("hid/k")).unwrap();
        std::fs::set_permissions(app.join("hid"), std::fs::Permissions::from_mode(0o311)).unwrap();
        let socket = std::os::unix::net::UnixListener::bind(app.join("agent.sock")).unwrap();
        chown_to(&app.join("agent.sock"), &runner.invoker());
        owned_file(&dots.join("readme"), "dotfiles");
        owned_file(&dots.join("token.json"), "RED-LINKED-TOKEN");
        std::os::unix::fs::symlink(dots.join("token.json"), codex.join("token.json")).unwrap();
        let name = format!("red{u}");
        let script = format!(
            "cat {a}/src/main.py; ls {a}; cat {d}/readme; ls {d}; true",
            a = app.display(),
            d = dots.display()
        );
        let learned = learn_with_codex(runner, &ws, &config, &name, &script, &codex);
        drop(socket);
        let _ = std::fs::set_permissions(app.join("hid"), std::fs::Permissions::from_mode(0o755));
        let _ = std::fs::remove_dir_all(&base);
        let (profile, grants) = learned.grants();
        let secrets = [
            app.join(".env"),
            app.join("agent.sock"),
            app.join("hid/k"),
            dots.join("token.json"),
        ];
        assert_grants(runner, (&profile, &grants), &["src", "readme"], &secrets);
    });
}

/// A folder mounted inside a granted folder is another view even on the same disk
/// (session-25 red team, round 2: `~/.codex` bound under `/srv/…/app/keys`, learning
/// listed `app` and the profile granted it with the mount). It is not granted, nor
/// is a sensitive folder bound where a grant would be itself, or a sensitive file
/// bound over a file of a granted folder (round 3: `/srv/k2`, `app/notes.txt`).
#[test]
fn a_mount_inside_a_granted_folder_is_not_granted() {
    if !is_root() {
        // Only root can make the bind mount this attack needs.
        return;
    }
    each_identity(|runner| {
        let user = test_user();
        let ws = Workspace::new();
        let config = config_home(runner);
        let u = unique();
        let codex = user.home.join(format!(".vg-e2e-codex-{u}"));
        let srv = Path::new("/srv").join(format!("vg-e2e-{u}"));
        let app = srv.join("app");
        let k2 = srv.join("k2");
        std::fs::create_dir_all(app.join("keys")).unwrap();
        std::fs::create_dir(&k2).unwrap();
        std::fs::write(app.join("notes.txt"), "notes").unwrap();
        std::fs::create_dir(&codex).unwrap();
        std::fs::write(codex.join("auth.json"), "RED-AGENT-TOKEN").unwrap();
        std::fs::write(app.join("config.txt"), "cfg").unwrap();
        for path in [
            &codex,
            &codex.join("auth.json"),
            &srv,
            &app,
            &app.join("config.txt"),
        ] {
            chown_to(path, &runner.invoker());
        }
        let binds = [
            (codex.clone(), app.join("keys")),
            (codex.clone(), k2.clone()),
            (codex.join("auth.json"), app.join("notes.txt")),
        ];
        for (from, to) in &binds {
            bind(from, to);
        }
        let name = format!("red{u}");
        let script = format!(
            "cat {a}/config.txt {a}/notes.txt; ls {a} {k}; cat {k}/auth.json; true",
            a = app.display(),
            k = k2.display()
        );
        let learned = learn_with_codex(runner, &ws, &config, &name, &script, &codex);
        unmount(&binds.iter().map(|(_, to)| to.as_path()).collect::<Vec<_>>());
        let _ = std::fs::remove_dir_all(&srv);
        let _ = std::fs::remove_dir_all(&codex);
        let (profile, grants) = learned.grants();
        let keys = [
            app.join("keys/auth.json"),
            app.join("notes.txt"),
            k2.join("auth.json"),
        ];
        assert_grants(runner, (&profile, &grants), &["config.txt"], &keys);
    });
}

/// A mount an administrator made that shows the home again under another device (an
/// overlay with the home as a layer, a `bindfs` FUSE view) gives the home's files
/// other identities (session-25 red team, round 4 F1: learning
/// `cat /srv/ov/u/proj/file; ls /srv/ov/u/.ssh` granted `/srv/ov/u`). The agent's
/// login seen through any of them is not granted; the project file read through them
/// is. Session-26 red team: also not through an overlay folder redirected to the
/// login's (`trusted.overlay.redirect`), nor through an overlay whose layer was a
/// bind mount of the home unmounted since (its options name an empty folder).
#[test]
fn a_view_of_the_home_mounted_elsewhere_grants_none_of_its_secrets() {
    if !is_root() {
        // Only root can make the mounts this attack needs.
        return;
    }
    if !require_tools(&[
        ("/usr/bin/bindfs", "bindfs"),
        ("/usr/bin/python3", "python3"),
    ]) {
        return;
    }
    each_identity(|runner| {
        let user = test_user();
        let ws = Workspace::new();
        let config = config_home(runner);
        let u = unique();
        let codex_name = format!(".vg-e2e-codex-{u}");
        let proj_name = format!("vg-e2e-proj-{u}");
        let codex = user.home.join(&codex_name);
        let proj = user.home.join(&proj_name);
        let srv = Path::new("/srv").join(format!("vg-e2e-view-{u}"));
        let [ov, fuse, empty, top, redirected, bound, stale] =
            ["ov", "fuse", "empty", "top", "redirected", "bound", "stale"].map(|n| srv.join(n));
        for folder in [
            &codex,
            &proj,
            &ov,
            &fuse,
            &empty,
            &top.join("proj2"),
            &redirected,
            &bound,
            &stale,
        ] {
            std::fs::create_dir_all(folder).unwrap();
        }
        std::fs::write(codex.join("auth.json"), "RED-AGENT-TOKEN").unwrap();
        write_old(&proj.join("readme"), "read me");
        for path in [
            &codex,
            &codex.join("auth.json"),
            &proj,
            &proj.join("readme"),
        ] {
            chown_to(path, &runner.invoker());
        }
        overlay(&[&user.home, &empty], &ov);
        bindfs(&user.home, &fuse);
        // `proj2` of the top layer shows the login's folder of the lower one.
        run_ok(std::process::Command::new(PYTHON)
            .args([
                "-c",
                "import os, sys; os.setxattr(sys.argv[1], 'trusted.overlay.redirect', sys.argv[2].encode())",
            ])
            .arg(top.join("proj2"))
            .arg(format!("/{codex_name}")));
        overlay(&[&top, &user.home], &redirected);
        stale_overlay(&user.home, (&bound, &empty), &stale);
        let script = [&ov, &fuse, &stale]
            .map(|view| {
                format!(
                    "cat {v}/{proj_name}/readme; ls {v}/{codex_name}; cat {v}/{codex_name}/auth.json; ",
                    v = view.display()
                )
            })
            .concat()
            + &format!("cat {}/proj2/auth.json; true", redirected.display());
        let learned = learn_with_codex(runner, &ws, &config, &format!("red{u}"), &script, &codex);
        unmount(&[&ov, &fuse, &redirected, &stale]);
        let _ = std::fs::remove_dir_all(&srv);
        let _ = std::fs::remove_dir_all(&codex);
        let _ = std::fs::remove_dir_all(&proj);
        let (profile, grants) = learned.grants();
        let mut keys = [&ov, &fuse, &stale]
            .map(|view| view.join(&codex_name).join("auth.json"))
            .to_vec();
        keys.push(redirected.join("proj2/auth.json"));
        assert_grants(runner, (&profile, &grants), &[&proj_name], &keys);
    });
}

/// What a sensitive place reaches through its mounts, symlinks and the views it is
/// seen through is withheld wherever else it is reached (session-26 red team, round
/// 2): a key bound into the agent's login folder (granted at the bind's source), a
/// stow-style link from that folder into a `bindfs` view (granted at the view's
/// source), and a hard link out of a closed folder of it, read through an overlay
/// whose layer was unmounted since (the overlay shows its own device). Round 3: a
/// `bindfs` view in the folder whose source was moved since (its options name a
/// folder that is gone), and a disk image loop-mounted in it (granted as the image).
/// Round 4: such an image whose name was removed once mounted, read by another name.
/// Round 5: an image mounted through a device node of another name than `/dev/loopN`.
#[test]
fn what_a_sensitive_place_reaches_through_mounts_links_and_views_is_not_granted() {
    if !is_root() {
        // Only root can make the mounts this attack needs.
        return;
    }
    if !require_tools(&[
        ("/usr/bin/bindfs", "bindfs"),
        ("/usr/sbin/mkfs.ext4", "e2fsprogs"),
    ]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let config = config_home(runner);
        let u = unique();
        let srv = Path::new("/srv").join(format!("vg-e2e-reach-{u}"));
        let [codex, keys, data, vault, src, bound, stale, empty] = [
            "codex", "keys", "data", "vault", "src", "bound", "stale", "empty",
        ]
        .map(|n| srv.join(n));
        let [moved_from, moved_to, image_src, image, removed, other_name] = [
            "moved-from",
            "moved-to",
            "image-src",
            "image.ext4",
            "removed.ext4",
            "other-name.ext4",
        ]
        .map(|n| srv.join(n));
        let (aliased, alias) = (srv.join("aliased.ext4"), srv.join("alias-node"));
        let locked = codex.join("locked");
        let [vol, moved, mounted_image, mounted_removed, mounted_alias] =
            ["vol", "moved", "image", "removed", "alias"].map(|n| codex.join(n));
        for folder in [
            &vol,
            &moved,
            &mounted_image,
            &locked,
            &keys,
            &data,
            &vault,
            &src,
            &bound,
            &stale,
            &empty,
            &moved_from,
            &image_src,
            &mounted_removed,
            &mounted_alias,
        ] {
            std::fs::create_dir_all(folder).unwrap();
        }
        // Sizes differ from the other secrets here, written in the same second.
        std::fs::write(moved_from.join("token"), "RED-MOVED-TOKEN, of its own size").unwrap();
        std::fs::write(image_src.join("token"), "RED-IMAGE-TOKEN").unwrap();
        std::fs::write(keys.join("id_vol"), "RED-VOL-KEY").unwrap();
        std::fs::write(data.join("cfg"), "RED-CFG").unwrap();
        std::fs::write(locked.join("id_hidden"), "RED-HIDDEN-KEY").unwrap();
        std::fs::hard_link(locked.join("id_hidden"), src.join("hl")).unwrap();
        write_old(&src.join("readme"), "read me");
        std::os::unix::fs::symlink(vault.join("cfg"), codex.join("config.toml")).unwrap();
        for path in [&srv, &codex, &locked, &keys, &data, &src, &moved_from] {
            chown_to(path, &runner.invoker());
        }
        chown_to(&moved_from.join("token"), &runner.invoker());
        for file in [
            keys.join("id_vol"),
            data.join("cfg"),
            src.join("readme"),
            src.join("hl"),
        ] {
            chown_to(&file, &runner.invoker());
        }
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o311)).unwrap();
        bind(&keys, &vol);
        bindfs(&data, &vault);
        stale_overlay(&src, (&bound, &empty), &stale);
        bindfs(&moved_from, &moved);
        std::fs::rename(&moved_from, &moved_to).unwrap();
        run_ok(
            std::process::Command::new("mkfs.ext4")
                .args(["-q", "-d"])
                .arg(&image_src)
                .arg(&image)
                .arg("2M"),
        );
        chown_to(&image, &runner.invoker());
        std::fs::copy(&image, &removed).unwrap();
        // Larger than the aliased image below, so that each case is caught by its
        // own rule.
        std::fs::File::options()
            .write(true)
            .open(&removed)
            .unwrap()
            .set_len(4 << 20)
            .unwrap();
        // Dated unlike the first image, which is a sensitive place's file too.
        date_2001(&removed);
        std::fs::hard_link(&removed, &other_name).unwrap();
        chown_to(&other_name, &runner.invoker());
        for (file, at) in [(&image, &mounted_image), (&removed, &mounted_removed)] {
            run_ok(
                std::process::Command::new("mount")
                    .args(["-o", "loop,ro"])
                    .arg(file)
                    .arg(at),
            );
        }
        std::fs::remove_file(&removed).unwrap();
        // A loop device's own node under another name, mounted.
        std::fs::copy(&image, &aliased).unwrap();
        date_2001(&aliased);
        chown_to(&aliased, &runner.invoker());
        let attached = std::process::Command::new("losetup")
            .args(["--find", "--show", "--read-only"])
            .arg(&aliased)
            .output()
            .unwrap();
        assert!(attached.status.success(), "{attached:?}");
        let loop_device = String::from_utf8(attached.stdout)
            .unwrap()
            .trim()
            .to_owned();
        let rdev = std::os::unix::fs::MetadataExt::rdev(&std::fs::metadata(&loop_device).unwrap());
        run_ok(
            std::process::Command::new("mknod")
                .arg(&alias)
                .arg("b")
                .arg(libc::major(rdev).to_string())
                .arg(libc::minor(rdev).to_string()),
        );
        run_ok(
            std::process::Command::new("mount")
                .args(["-o", "ro"])
                .arg(&alias)
                .arg(&mounted_alias),
        );
        let script = format!(
            "cat {k}/id_vol {d}/cfg {s}/readme {s}/hl {m}/token; grep -c RED-IMAGE {i} {o} {a}; true",
            k = keys.display(),
            d = data.display(),
            s = stale.display(),
            m = moved_to.display(),
            i = image.display(),
            o = other_name.display(),
            a = aliased.display()
        );
        let learned = learn_with_codex(runner, &ws, &config, &format!("red{u}"), &script, &codex);
        unmount(&[
            &vol,
            &vault,
            &stale,
            &moved,
            &mounted_image,
            &mounted_removed,
            &mounted_alias,
        ]);
        let _ = std::process::Command::new("losetup")
            .args(["-d", &loop_device])
            .status();
        let _ = std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755));
        let _ = std::fs::remove_dir_all(&srv);
        let (profile, grants) = learned.grants();
        let secrets = [
            keys.join("id_vol"),
            data.join("cfg"),
            stale.join("hl"),
            moved_to.join("token"),
            image.clone(),
            other_name.clone(),
            aliased.clone(),
        ];
        assert_grants(runner, (&profile, &grants), &["readme"], &secrets);
    });
}

/// A folder of the user's own inside a sensitive place that no one may enter still
/// hides files that can have other names (session-25 red team, round 3: a key in a
/// mode-000 folder of `~/.ssh`, hard-linked into a project, was granted): every
/// file with more than one name on that disk is withheld then.
#[test]
fn a_hard_link_from_a_closed_folder_of_a_sensitive_place_is_never_granted() {
    each_identity(|runner| {
        let user = test_user();
        let ws = Workspace::new();
        let config = config_home(runner);
        let u = unique();
        let base = user.home.join(format!(".vg-e2e-closed-{u}"));
        let (codex, work) = (base.join("codex"), base.join("work"));
        for dir in [&base, &codex, &codex.join("old"), &work] {
            std::fs::create_dir(dir).unwrap();
            chown_to(dir, &runner.invoker());
        }
        std::fs::write(codex.join("old/auth.json"), "RED-OLD-TOKEN").unwrap();
        std::fs::hard_link(codex.join("old/auth.json"), work.join("keep.txt")).unwrap();
        std::fs::write(work.join("a.txt"), "a").unwrap();
        for file in [work.join("keep.txt"), work.join("a.txt")] {
            chown_to(&file, &runner.invoker());
        }
        std::fs::set_permissions(codex.join("old"), std::fs::Permissions::from_mode(0o000))
            .unwrap();
        let name = format!("red{u}");
        let script = format!("cat {w}/a.txt {w}/keep.txt; true", w = work.display());
        let learned = learn_with_codex(runner, &ws, &config, &name, &script, &codex);
        let _ = std::fs::set_permissions(codex.join("old"), std::fs::Permissions::from_mode(0o755));
        let _ = std::fs::remove_dir_all(&base);
        let (profile, grants) = learned.grants();
        let link = work.join("keep.txt");
        assert_grants(runner, (&profile, &grants), &["a.txt"], &[link]);
    });
}

/// A sensitive place another user keeps us out of (root's, left by `sudo`) is no
/// one's to link from but that user's: it does not make the user's own harmless
/// hard links suspect (session-25 red team, round 4: root's `/run/containerd` on the
/// home's disk made learning refuse a pnpm project's `node_modules`).
#[test]
fn a_place_root_keeps_closed_does_not_refuse_harmless_hard_links() {
    if !is_root() {
        // Only root can make the folder root keeps closed.
        return;
    }
    each_identity(|runner| {
        let user = test_user();
        let ws = Workspace::new();
        let config = config_home(runner);
        let u = unique();
        let base = user.home.join(format!(".vg-e2e-sudo-{u}"));
        let (codex, work) = (base.join("codex"), base.join("work"));
        std::fs::create_dir(&base).unwrap();
        chown_to(&base, &runner.invoker());
        // Root's, mode 0700, as `sudo` leaves it.
        std::fs::create_dir(&codex).unwrap();
        std::fs::set_permissions(&codex, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::create_dir(&work).unwrap();
        chown_to(&work, &runner.invoker());
        std::fs::write(work.join("a.js"), "a").unwrap();
        std::fs::hard_link(work.join("a.js"), work.join("b.js")).unwrap();
        chown_to(&work.join("a.js"), &runner.invoker());
        let name = format!("red{u}");
        let script = format!("cat {w}/a.js {w}/b.js; true", w = work.display());
        let learned = learn_with_codex(runner, &ws, &config, &name, &script, &codex);
        let _ = std::fs::remove_dir_all(&base);
        let (profile, grants) = learned.grants();
        for file in ["a.js", "b.js"] {
            let file = work.join(file);
            assert!(
                grants.iter().any(|g| file.starts_with(g)),
                "[{runner}] {} is granted: {grants:?}\n{profile}",
                file.display()
            );
        }
    });
}
