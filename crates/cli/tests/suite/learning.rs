//! Learning mode (`--learn NAME`) and violations, end to end: a tool learned once
//! whose profile the next run uses, learning again (the diff, `--yes`), bad input
//! refused before anything runs, and refused accesses and system calls recorded as
//! `violation` events in normal runs.
//!
//! Learning shows the sandbox user's real home (the test user's, shared by every test
//! running now): each test works in folders named with [`unique`] below it and
//! removes them when it ends, even on failure ([`InHome`]); the learned profiles go
//! to a private `$XDG_CONFIG_HOME` ([`Xdg`]).

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use serde_json::Value;

use super::harness::{
    HostFile, Output, PYTHON, RecordsHome, Runner, TempDir, Vg, Workspace, assert_no_process_left,
    chown_to, each_identity, py, test_user, unique,
};
use super::mediated_network::HttpServer;

// ---------------------------------------------------------------------------------------
// Helpers.

/// A private `$XDG_CONFIG_HOME`, owned by the runner's invoker: where the learned
/// profiles of this test go.
struct Xdg(TempDir);

impl Xdg {
    fn new(runner: Runner) -> Self {
        Self(TempDir::owned_by("xdg", &runner.invoker(), 0o700))
    }

    fn arg(&self) -> String {
        self.0.arg("")
    }

    fn profile_path(&self, name: &str) -> PathBuf {
        self.0.join(format!("vectraguard/profiles/{name}.toml"))
    }

    fn profile(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.profile_path(name)).ok()
    }

    /// `vectraguard ARGS` in `cwd` with this config folder.
    fn vg(&self, runner: Runner, cwd: &Path, args: &[&str]) -> Output {
        Vg::new(runner, cwd)
            .env("XDG_CONFIG_HOME", &self.arg())
            .args(args)
            .run()
    }
}

/// What a test made in the test user's real home: removed on drop, even when the
/// test fails. The standard folders on the way (`~/.config`, `~/.cache`,
/// `~/.local/state`, `~/.ssh`) are left, since tests running at the same time may be
/// working below them.
struct InHome {
    made: Vec<PathBuf>,
}

impl InHome {
    fn new() -> Self {
        Self { made: Vec::new() }
    }

    /// `~/rel` in the test user's home.
    fn path(rel: &str) -> PathBuf {
        test_user().home.join(rel)
    }

    /// Removes `~/rel` (a file or a folder with its contents) when the test ends.
    fn remove_later(&mut self, rel: &str) -> PathBuf {
        let path = Self::path(rel);
        self.made.push(path.clone());
        path
    }

    /// Writes `~/rel`, making the folders on the way, everything owned by the test
    /// user (the sandbox user, whose home learning shows).
    fn write(&mut self, rel: &str, contents: &str, mode: u32) -> PathBuf {
        let path = Self::path(rel);
        mkdir_as_user(path.parent().unwrap());
        std::fs::write(&path, contents).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        chown_to(&path, test_user());
        path
    }
}

impl Drop for InHome {
    fn drop(&mut self) {
        for path in &self.made {
            match std::fs::symlink_metadata(path) {
                Ok(meta) if meta.is_dir() => {
                    let _ = std::fs::remove_dir_all(path);
                }
                Ok(_) => {
                    let _ = std::fs::remove_file(path);
                }
                Err(_) => {}
            }
        }
    }
}

/// Makes `dir` and the folders on the way, each one made owned by the test user
/// (0700 for `~/.ssh`, 0755 otherwise).
fn mkdir_as_user(dir: &Path) {
    if dir.is_dir() {
        return;
    }
    mkdir_as_user(dir.parent().unwrap());
    match std::fs::create_dir(dir) {
        Ok(()) => {
            let mode = if dir.ends_with(".ssh") { 0o700 } else { 0o755 };
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
            chown_to(dir, test_user());
        }
        // Made by a test running at the same time.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => panic!("mkdir {}: {e}", dir.display()),
    }
}

/// The names in a folder, sorted (empty when it cannot be read).
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Files below `dir`, recursively, by path relative to it.
fn files_below(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(base, &path, out);
            } else {
                out.push(path.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// What a learned profile grants: each setting (the lines that are not comments)
/// with its values, strings unquoted: `read_only = ["/a", "/b"]` and the multi-line
/// lists a learned profile is written with.
fn settings(profile: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut list: Option<String> = None;
    let unquote = |v: &str| {
        let v = v.trim().trim_end_matches(',').trim();
        v.strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(v)
            .to_owned()
    };
    for line in profile.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(key) = &list {
            if line == "]" {
                list = None;
            } else {
                out.get_mut(key).unwrap().push(unquote(line));
            }
            continue;
        }
        let (key, value) = line
            .split_once(" = ")
            .unwrap_or_else(|| panic!("not a setting: {line:?} in\n{profile}"));
        let entry = out.entry(key.to_owned()).or_default();
        if value == "[" {
            list = Some(key.to_owned());
        } else if let Some(inner) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
            entry.extend(inner.split(", ").filter(|v| !v.is_empty()).map(unquote));
        } else {
            entry.push(unquote(value));
        }
    }
    out
}

/// The values of `key` in `settings` (none when it is not set).
fn values<'a>(settings: &'a BTreeMap<String, Vec<String>>, key: &str) -> &'a [String] {
    settings.get(key).map_or(&[], Vec::as_slice)
}

/// Every event of a session's `events.jsonl`.
fn events(session: &Path) -> Vec<Value> {
    std::fs::read_to_string(session.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The `violation` events of a session, the end-of-session count apart.
fn violations(session: &Path) -> Vec<Value> {
    events(session)
        .into_iter()
        .filter(|e| e["type"] == "violation" && e["event"] != "summary")
        .collect()
}

/// The end-of-session count of refusals, when anything was refused.
fn violation_summary(session: &Path) -> Option<Value> {
    events(session)
        .into_iter()
        .find(|e| e["type"] == "violation" && e["event"] == "summary")
}

/// N in the end-of-run line `vectraguard: N accesses refused: …`.
#[track_caller]
fn refused_count(out: &Output) -> u64 {
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains(" refused: "))
        .unwrap_or_else(|| panic!("no end-of-run line about refused accesses\n{out}"));
    let n = line
        .strip_prefix("vectraguard: ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok());
    n.unwrap_or_else(|| panic!("cannot read the count in {line:?}\n{out}"))
}

/// A path as the end-of-run line writes it: `~/…` below the invoker's home.
fn as_shown(runner: Runner, path: &Path) -> String {
    match path.strip_prefix(runner.invoker().home) {
        Ok(rest) => format!("~/{}", rest.display()),
        Err(_) => path.display().to_string(),
    }
}

const LEARNING_WARNING: &str = "learning mode trusts the command";

// ---------------------------------------------------------------------------------------
// The issue's scenario.

/// The tool: reads its config, writes its state and 30 files into its cache, calls
/// its API, runs a helper program, leaves a child in the background and reads a key
/// in `~/.ssh`. Without its config it fails (exit 3).
fn tool_script(name: &str, port: u16, sleeper: &str, key: &str) -> String {
    format!(
        r#"set -u
T='{name}'
echo "home=$HOME"
cfg=$(cat "$HOME/.config/$T/config.toml") || exit 3
echo "config=$cfg"
mkdir -p "$HOME/.local/state/$T"
echo ran > "$HOME/.local/state/$T/state.json"
for d in a b c; do
    mkdir -p "$HOME/.cache/$T/$d"
    for n in 0 1 2 3 4 5 6 7 8 9; do echo "$d$n" > "$HOME/.cache/$T/$d/f$n"; done
done
echo "http=$(curl -sS --max-time 20 http://api-$T.test:{port}/)"
echo "helper=$(sh ./helper.sh)"
/usr/bin/env true && echo env=ok
{sleeper} &
# Left running, but only once it is the sleeper (its exec is what is listed): on a
# busy machine the session could end before the background child got that far.
pid=$!; n=0
while :; do c=; read -r c < /proc/$pid/comm 2>/dev/null; [ "$c" = sleep ] && break; n=$((n+1)); [ $n -gt 200000 ] && break; done
if cat "$HOME/.ssh/{key}" >/dev/null 2>&1; then echo ssh=read; else echo ssh=hidden; fi
echo done=1
"#
    )
}

#[test]
fn learning_builds_a_profile_the_next_run_uses() {
    if !super::harness::require_tools(&[("/usr/bin/curl", "curl")]) {
        return;
    }
    each_identity(|runner| {
        let user = test_user();
        let t = format!("lt{}", unique());
        let ws = Workspace::new();
        let xdg = Xdg::new(runner);
        let records = RecordsHome::new(runner);
        let mut home = InHome::new();
        let config_dir = home.remove_later(&format!(".config/{t}"));
        let state_dir = home.remove_later(&format!(".local/state/{t}"));
        let cache_dir = home.remove_later(&format!(".cache/{t}"));
        let key_name = format!("vg-e2e-key-{t}");
        let key = home.remove_later(&format!(".ssh/{key_name}"));
        let config = format!("token-config-{t}\n");
        home.write(&format!(".config/{t}/config.toml"), &config, 0o644);
        home.write(&format!(".ssh/{key_name}"), "PRIVATE KEY\n", 0o600);
        assert!(!state_dir.exists() && !cache_dir.exists());

        let api_marker = format!("api-answer-{t}");
        let api = HttpServer::start(api_marker.clone().into_bytes());
        let sleeper = format!("sleep 300.{}", unique());
        ws.write("tool.sh", tool_script(&t, api.port, &sleeper, &key_name));
        ws.write("helper.sh", "echo helped\n");
        let add_host = format!("api-{t}.test:127.0.0.1");
        let with_xdg = |vg: &mut Vg| {
            vg.env("XDG_CONFIG_HOME", &xdg.arg()).records_home(&records);
            vg.run()
        };

        // Learning.
        let out = with_xdg(&mut Vg::sandbox(
            runner,
            &ws,
            &["--learn", &t, "--yes", "--add-host", &add_host],
            &["sh", "tool.sh"],
        ));
        out.assert_success()
            .assert_stderr_contains(LEARNING_WARNING);
        assert_eq!(out.field("home"), user.home.display().to_string(), "{out}");
        assert_eq!(out.field("config"), config.trim(), "{out}");
        assert_eq!(out.field("http"), api_marker, "{out}");
        assert_eq!(out.field("helper"), "helped", "{out}");
        assert_eq!(out.field("env"), "ok", "{out}");
        assert_eq!(
            out.field("ssh"),
            "hidden",
            "a secret is hidden while learning\n{out}"
        );
        assert_eq!(out.field("done"), "1", "{out}");
        assert_no_process_left(&sleeper, &out);
        out.assert_stderr_contains(&format!("saved the profile '{t}'"));

        let file = xdg
            .profile(&t)
            .unwrap_or_else(|| panic!("no profile file\n{out}"));
        let shown = xdg.vg(runner, ws.path(), &["profile", "show", &t]);
        assert_eq!(shown.assert_success().stdout, file, "{shown}");
        let s = settings(&file);
        let context = format!("{file}\n{out}");
        assert!(
            values(&s, "read_only").contains(&config_dir.display().to_string()),
            "the config folder is not read-only:\n{context}"
        );
        let writable = values(&s, "read_write");
        for dir in [&state_dir, &cache_dir] {
            assert!(
                writable.contains(&dir.display().to_string()),
                "{} is not writable:\n{context}",
                dir.display()
            );
        }
        let cache_entries = s
            .values()
            .flatten()
            .filter(|v| v.contains(&format!(".cache/{t}")))
            .count();
        assert_eq!(cache_entries, 1, "the cache is not collapsed:\n{context}");
        assert!(
            !values(&s, "read_write").contains(&config_dir.display().to_string()),
            "{context}"
        );
        assert_eq!(values(&s, "network"), ["allow"], "{context}");
        assert!(
            values(&s, "network_rules").contains(&format!("allow api-{t}.test:{}", api.port)),
            "{context}"
        );
        assert_eq!(values(&s, "add_hosts"), [add_host.as_str()], "{context}");
        assert!(
            !s.values().flatten().any(|v| v.contains(".ssh")),
            "~/.ssh granted:\n{context}"
        );
        // Reported as sensitive instead, in a comment.
        assert!(
            file.lines()
                .any(|l| l.starts_with('#') && l.contains(".ssh") && l.contains("read")),
            "the read of ~/.ssh is not reported:\n{context}"
        );

        // The helper programs, listed in a comment (the host's own, visible anyway).
        for program in ["/usr/bin/env", "/usr/bin/curl", "/usr/bin/sleep"] {
            assert!(
                file.lines()
                    .any(|l| l.starts_with("#   ") && l.contains(&format!("{program} ("))),
                "{program} is not listed among the programs it ran:\n{context}"
            );
        }

        // The host's home: the config as it was, the state and cache folders made
        // empty for the next run (owned by the sandbox user), the tool's writes gone
        // with the throwaway layer.
        assert_eq!(names(&config_dir), ["config.toml"], "{context}");
        assert_eq!(
            std::fs::read_to_string(config_dir.join("config.toml")).unwrap(),
            config
        );
        assert_eq!(std::fs::read_to_string(&key).unwrap(), "PRIVATE KEY\n");
        for dir in [&state_dir, &cache_dir] {
            let meta = std::fs::symlink_metadata(dir)
                .unwrap_or_else(|e| panic!("{} not made: {e}\n{context}", dir.display()));
            assert!(meta.is_dir(), "{}", dir.display());
            assert!(
                names(dir).is_empty(),
                "the tool's writes reached the host: {} holds {:?}",
                dir.display(),
                names(dir)
            );
            assert_eq!(
                (meta.uid(), meta.gid()),
                (user.uid, user.gid),
                "{}",
                dir.display()
            );
            assert_eq!(meta.mode() & 0o777, 0o700, "{}", dir.display());
        }
        let accepted = api.accepted.load(Ordering::SeqCst);
        assert_eq!(accepted, 1, "{out}");

        // The next run uses the profile, without --learn and without --add-host: its
        // writes are real now.
        let out = with_xdg(&mut Vg::sandbox(
            runner,
            &ws,
            &["--profile", &t],
            &["sh", "tool.sh"],
        ));
        out.assert_success();
        assert!(!out.stderr.contains(LEARNING_WARNING), "{out}");
        assert_eq!(out.field("config"), config.trim(), "{out}");
        assert_eq!(out.field("http"), api_marker, "{out}");
        assert_eq!(out.field("helper"), "helped", "{out}");
        assert_eq!(out.field("done"), "1", "{out}");
        assert!(!out.stderr.contains(" refused: "), "{out}");
        assert_no_process_left(&sleeper, &out);
        assert_eq!(
            std::fs::read_to_string(state_dir.join("state.json"))
                .ok()
                .as_deref(),
            Some("ran\n"),
            "{out}"
        );
        assert_eq!(files_below(&cache_dir).len(), 30, "{out}");
        assert_eq!(api.accepted.load(Ordering::SeqCst), 2);

        // Without the profile, it fails, and the violations name its config.
        let before = records.sessions();
        let out = with_xdg(&mut Vg::sandbox(
            runner,
            &ws,
            &["--violations", "all"],
            &["sh", "tool.sh"],
        ));
        out.assert_code(3);
        let config_file = config_dir.join("config.toml");
        out.assert_stderr_contains(&as_shown(runner, &config_file));
        assert!(refused_count(&out) >= 1, "{out}");
        out.assert_stderr_contains("logs show");
        out.assert_stderr_contains("--learn NAME");
        let session = records
            .sessions()
            .into_iter()
            .find(|s| !before.contains(s))
            .unwrap();
        let found = violations(&session);
        assert!(
            found
                .iter()
                .any(|v| v["path"] == config_file.display().to_string()
                    && v["layer"] == "view"
                    && v["access"] == "read"),
            "no violation for the config: {found:#?}"
        );
        let shown = Vg::new(runner, ws.path())
            .records_home(&records)
            .args(["logs", "show", "last", "--violations"])
            .run();
        shown.assert_success();
        assert!(
            shown
                .stdout
                .lines()
                .any(|l| l.contains(&format!("read {}", config_file.display()))
                    && l.contains("refused by view")),
            "{shown}"
        );
    });
}

// ---------------------------------------------------------------------------------------
// Learning again.

#[test]
fn learning_again_shows_the_diff_and_needs_yes() {
    each_identity(|runner| {
        let t = format!("la{}", unique());
        let ws = Workspace::new();
        let xdg = Xdg::new(runner);
        let mut home = InHome::new();
        let first = home.remove_later(&format!(".config/{t}-a"));
        let second = home.remove_later(&format!(".config/{t}-b"));
        home.write(&format!(".config/{t}-a/config.toml"), "a\n", 0o644);
        home.write(&format!(".config/{t}-b/config.toml"), "b\n", 0o644);
        // $1: the marker the run leaves in the workspace.
        let tool =
            |dir: &str| format!("echo ran > \"$1\"\ncat \"$HOME/.config/{dir}/config.toml\"\n");
        let learn = |options: &[&str], marker: &str| {
            let mut args = vec!["--learn", t.as_str()];
            args.extend_from_slice(options);
            Vg::sandbox(runner, &ws, &args, &["sh", "tool.sh", marker])
                .env("XDG_CONFIG_HOME", &xdg.arg())
                .run()
        };

        ws.write("tool.sh", tool(&format!("{t}-a")));
        let out = learn(&[], "ran1");
        out.assert_success().assert_stdout_contains("a\n");
        assert!(ws.exists("ran1"));
        let old = xdg
            .profile(&t)
            .unwrap_or_else(|| panic!("not saved\n{out}"));
        assert!(
            values(&settings(&old), "read_only").contains(&first.display().to_string()),
            "{old}"
        );

        // The tool changes; learning again needs --yes without a terminal, and says
        // so before running anything.
        ws.write("tool.sh", tool(&format!("{t}-b")));
        let out = learn(&[], "ran2");
        out.assert_code(125).assert_stderr_contains("--yes");
        assert!(!ws.exists("ran2"), "the command ran\n{out}");
        assert!(!out.stdout.contains('b'), "{out}");
        assert_eq!(xdg.profile(&t).as_deref(), Some(old.as_str()), "{out}");

        let out = learn(&["--yes"], "ran3");
        out.assert_success().assert_stdout_contains("b\n");
        assert!(ws.exists("ran3"));
        out.assert_stderr_contains(&format!("replacing the profile '{t}'"))
            .assert_stderr_contains(&format!("\n- read-only {}\n", first.display()))
            .assert_stderr_contains(&format!("\n+ read-only {}\n", second.display()));
        let new = xdg.profile(&t).unwrap();
        let ro = settings(&new);
        assert!(
            values(&ro, "read_only").contains(&second.display().to_string()),
            "{new}"
        );
        assert!(
            !values(&ro, "read_only").contains(&first.display().to_string()),
            "{new}"
        );
    });
}

// ---------------------------------------------------------------------------------------
// Bad input.

#[test]
fn bad_learning_input_is_refused_before_anything_runs() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let records = RecordsHome::new(runner);
        let xdg = Xdg::new(runner);
        // Runs `echo ran > ran` in the workspace unless refused.
        let attempt = |options: &[&str], xdg_home: &str| {
            Vg::sandbox(runner, &ws, options, &["sh", "-c", "echo ran > ran"])
                .env("XDG_CONFIG_HOME", xdg_home)
                .records_home(&records)
                .run()
        };
        let refused = |out: &Output, message: &str| {
            out.assert_code(125).assert_stderr_contains(message);
            assert!(!ws.exists("ran"), "the command ran\n{out}");
            assert!(
                records.sessions().is_empty(),
                "a session was recorded\n{out}"
            );
        };

        for name in ["../x", "a/b"] {
            let out = attempt(&["--learn", name], &xdg.arg());
            refused(&out, "contains a path separator");
            out.assert_stderr_contains(&format!("'{name}'"));
        }
        refused(
            &attempt(&["--learn", ""], &xdg.arg()),
            "the profile name is empty",
        );
        refused(
            &attempt(&["--learn", "a b"], &xdg.arg()),
            "only letters, digits",
        );
        assert!(
            names(&xdg.0.join("vectraguard/profiles"))
                .iter()
                .all(|n| n.starts_with('.')),
            "nothing saved"
        );
        assert!(!xdg.0.join("vectraguard/x.toml").exists());

        // A profile folder that cannot be made: below a regular file.
        let blocker = ws.write("not-a-folder", "file\n");
        let below_file = blocker.join("xdg");
        let out = attempt(&["--learn", "t", "--yes"], below_file.to_str().unwrap());
        refused(&out, "cannot create the profile folder");
        out.assert_stderr_contains(
            &below_file
                .join("vectraguard/profiles")
                .display()
                .to_string(),
        );
        assert_eq!(std::fs::read_to_string(&blocker).unwrap(), "file\n");

        // A corrupt profile of that name: named, left as it is, nothing run, even
        // with --yes.
        let corrupt = xdg.0.write(
            "vectraguard/profiles/broken.toml",
            "read_only = [[[ not toml\n\u{1}garbage\n",
        );
        let bytes = std::fs::read(&corrupt).unwrap();
        for options in [&["--learn", "broken"][..], &["--learn", "broken", "--yes"]] {
            let out = attempt(options, &xdg.arg());
            refused(&out, &corrupt.display().to_string());
            out.assert_stderr_contains("cannot be replaced");
            assert_eq!(
                std::fs::read(&corrupt).unwrap(),
                bytes,
                "overwritten\n{out}"
            );
        }

        // What learning cannot be combined with: refused while planning (no image
        // is looked for), naming the fix.
        let out = attempt(&["--learn", "img", "--image", "busybox"], &xdg.arg());
        refused(&out, "drop --image");
        assert!(xdg.profile("img").is_none());
        let out = attempt(&["--learn", "hostnet", "--network", "host"], &xdg.arg());
        refused(&out, "drop --network host");
        assert!(xdg.profile("hostnet").is_none());
        let out = attempt(&["--learn", "norec", "--no-record"], &xdg.arg());
        refused(&out, "remove --no-record");

        // Flags that only mean something with others.
        let out = attempt(&["--yes"], &xdg.arg());
        refused(&out, "--learn");
        let out = attempt(&["--violations", "bogus"], &xdg.arg());
        refused(&out, "--violations \"bogus\"");
        out.assert_stderr_contains("'changes'");
        let out = attempt(&["--violations", "all", "--no-record"], &xdg.arg());
        refused(&out, "remove --no-record");
    });
}

// ---------------------------------------------------------------------------------------
// Violations in normal runs.

#[cfg(target_arch = "x86_64")]
const SYS_UNSHARE: u32 = 272;
#[cfg(target_arch = "aarch64")]
const SYS_UNSHARE: u32 = 97;
const CLONE_NEWUSER: u32 = 0x1000_0000;

/// Who made a refused call is looked up while the call waits: a process that exits
/// the moment its call fails (most do) is still named, by pid and program.
#[test]
fn who_made_a_refused_call_is_recorded_though_it_exits_at_once() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let records = RecordsHome::new(runner);
        let u = unique();
        const CHILDREN: usize = 40;
        let script = py(&format!(
            r#"
kids = []
for i in range({CHILDREN}):
    pid = os.fork()
    if pid == 0:
        try:
            open("/usr/vg-e2e-{u}-%d" % i, "x")
        except OSError:
            pass
        if i == 0:
            sc({SYS_UNSHARE}, {CLONE_NEWUSER})
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
"#
        ));
        let out = Vg::sandbox(runner, &ws, &[], &[PYTHON, "-c", &script])
            .records_home(&records)
            .run();
        out.assert_success();
        let found = violations(&records.only_session());
        let files: Vec<&Value> = found
            .iter()
            .filter(|v| {
                v["path"]
                    .as_str()
                    .is_some_and(|p| p.contains(&u.to_string()))
            })
            .collect();
        assert_eq!(files.len(), CHILDREN, "{found:#?}");
        let unshare: Vec<&Value> = found.iter().filter(|v| v["syscall"] == "unshare").collect();
        assert_eq!(unshare.len(), 1, "{found:#?}");
        for v in files.iter().chain(&unshare) {
            assert!(
                v["pid"].as_i64().is_some_and(|p| p > 2)
                    && v["exe"].as_str().is_some_and(|e| e.contains("python3")),
                "a violation without who made it: {v:#}"
            );
        }
    });
}

#[test]
fn violations_are_recorded_in_normal_runs() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let records = RecordsHome::new(runner);
        let u = unique();
        let usr = format!("/usr/vg-e2e-{u}");
        let etc = format!("/etc/vg-e2e-{u}");
        let script = py(&format!(
            r#"
report("usr", attempt(lambda: open("{usr}", "w")))
report("etc", attempt(lambda: open("{etc}", "x")))
report("unshare", sc({SYS_UNSHARE}, {CLONE_NEWUSER}))
sys.exit(7)
"#
        ));
        let out = Vg::sandbox(runner, &ws, &[], &[PYTHON, "-c", &script])
            .records_home(&records)
            .run();
        out.assert_code(7);
        assert_ne!(out.field("usr"), "OK", "{out}");
        assert_ne!(out.field("etc"), "OK", "{out}");
        assert_eq!(out.field("unshare"), "EPERM", "{out}");
        assert!(!Path::new(&usr).exists() && !Path::new(&etc).exists());
        assert!(refused_count(&out) >= 3, "{out}");
        out.assert_stderr_contains(&format!("{usr} ("))
            .assert_stderr_contains(&format!("{etc} ("))
            .assert_stderr_contains("unshare (system call)");
        let found = violations(&records.only_session());
        for path in [&usr, &etc] {
            assert!(
                found.iter().any(|v| v["path"] == path.as_str()
                    && v["layer"] == "read-only"
                    && (v["access"] == "create" || v["access"] == "write")
                    && v["exe"].as_str().is_some_and(|e| e.contains("python3"))),
                "no read-only violation for {path}: {found:#?}"
            );
        }
        assert!(
            found.iter().any(|v| v["layer"] == "seccomp"
                && v["syscall"] == "unshare"
                && v["access"] == "syscall"
                && v["exe"].as_str().is_some_and(|e| e.contains("python3"))),
            "no seccomp violation: {found:#?}"
        );

        // Writing to what exists where the view lets it (a device, the process's own
        // descriptors) is no violation, though the shell opens them with O_CREAT.
        let records_ok = RecordsHome::new(runner);
        let out = Vg::sandbox(
            runner,
            &ws,
            &[],
            &[
                "sh",
                "-c",
                "echo a > /dev/null; echo b >> /dev/null; echo c > /dev/stderr; echo d > ws-file; echo e > ws-file",
            ],
        )
        .records_home(&records_ok)
        .run();
        out.assert_success();
        assert_eq!(ws.read("ws-file").as_deref(), Some("e\n"));
        assert!(!out.stderr.contains(" refused: "), "{out}");
        let found = violations(&records_ok.only_session());
        assert!(found.is_empty(), "{found:#?}\n{out}");

        // A hidden file read: only reported with --violations all (by default only
        // changes are traced).
        let secret = HostFile::create(&test_user().home, "secret", "s3cret\n", test_user(), 0o600);
        let read = |options: &[&str]| {
            let records = RecordsHome::new(runner);
            let out = Vg::sandbox(runner, &ws, options, &["cat", &secret.arg()])
                .records_home(&records)
                .run();
            assert!(!out.stdout.contains("s3cret"), "{out}");
            assert_ne!(out.code(), Some(0), "{out}");
            let found = violations(&records.only_session());
            (out, found)
        };
        let (out, found) = read(&[]);
        assert!(found.is_empty(), "{found:#?}\n{out}");
        assert!(!out.stderr.contains(" refused: "), "{out}");
        let (out, found) = read(&["--violations", "all"]);
        assert!(
            found.iter().any(|v| v["path"] == secret.arg().as_str()
                && v["layer"] == "view"
                && v["access"] == "read"
                && v["exe"].as_str().is_some_and(|e| e.contains("cat"))),
            "{found:#?}\n{out}"
        );
        out.assert_stderr_contains(&as_shown(runner, secret.path()));

        // A flood of refusals: one event for the call, the count in the summary.
        let records = RecordsHome::new(runner);
        let flood = py(&format!(
            r#"
results = set(sc({SYS_UNSHARE}, {CLONE_NEWUSER}) for _ in range(20000))
report("results", ",".join(sorted(results)))
"#
        ));
        let out = Vg::sandbox(runner, &ws, &[], &[PYTHON, "-c", &flood])
            .records_home(&records)
            .run();
        out.assert_success();
        assert_eq!(out.field("results"), "EPERM", "{out}");
        assert!(refused_count(&out) >= 20000, "{out}");
        let session = records.only_session();
        let unshares: Vec<Value> = violations(&session)
            .into_iter()
            .filter(|v| v["syscall"] == "unshare")
            .collect();
        assert_eq!(unshares.len(), 1, "{unshares:#?}");
        let summary = violation_summary(&session).expect("no summary event");
        assert!(summary["total"].as_u64().unwrap() >= 20000, "{summary}");
        let counted = summary["counts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["what"] == "unshare" && c["layer"] == "seccomp")
            .unwrap_or_else(|| panic!("{summary}"));
        assert!(counted["count"].as_u64().unwrap() >= 20000, "{summary}");
        let events_size = std::fs::metadata(session.join("events.jsonl"))
            .unwrap()
            .len();
        assert!(
            events_size < 64 * 1024,
            "events.jsonl is {events_size} bytes"
        );
        let id = session.file_name().unwrap().to_str().unwrap().to_owned();
        let verify = Vg::new(runner, ws.path())
            .records_home(&records)
            .args(["logs", "verify", &id])
            .run();
        verify.assert_success();
    });
}

// ---------------------------------------------------------------------------------------
// agent start --learn.

#[test]
fn agent_start_learns_a_profile() {
    each_identity(|runner| {
        let t = format!("lg{}", unique());
        let ws = Workspace::new();
        let xdg = Xdg::new(runner);
        let records = RecordsHome::new(runner);
        let mut home = InHome::new();
        let config_dir = home.remove_later(&format!(".config/{t}"));
        home.write(&format!(".config/{t}/settings"), "agent-setting\n", 0o644);
        let script = format!("cat \"$HOME/.config/{t}/settings\"");
        let out = Vg::new(runner, ws.path())
            .env("XDG_CONFIG_HOME", &xdg.arg())
            .records_home(&records)
            .args([
                "agent", "start", "--name", "learner", "--prompt", "task", "--learn", &t, "--",
                "sh", "-c", &script,
            ])
            .run();
        out.assert_success()
            .assert_stdout_contains("agent-setting")
            .assert_stderr_contains(LEARNING_WARNING);
        let file = xdg
            .profile(&t)
            .unwrap_or_else(|| panic!("no profile saved\n{out}"));
        assert!(
            values(&settings(&file), "read_only").contains(&config_dir.display().to_string()),
            "{file}\n{out}"
        );
        let listed = xdg.vg(runner, ws.path(), &["profile", "ls", "-q"]);
        assert_eq!(listed.assert_success().lines(), [t.as_str()], "{listed}");
        let meta = super::harness::session_metadata(&records.only_session());
        assert_eq!(meta["agent"], "learner", "{meta}");
    });
}
