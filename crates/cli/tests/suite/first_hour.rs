//! What a new user meets in the first hour: the line naming each recorded session,
//! finding a session again by what they remember of it, a local image name that is
//! not in the store, shell completions, the manual page, `doctor --json`, colour only
//! where wanted, and help for typos.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use super::harness::{
    Output, RecordsHome, Runner, Vg, Workspace, each_identity, require_tools, unique,
};

/// `vectraguard ARGS` in `ws`, recording under `home`.
fn vg(runner: Runner, ws: &Workspace, home: &RecordsHome, args: &[&str]) -> Output {
    Vg::new(runner, ws.path())
        .args(args)
        .records_home(home)
        .run()
}

fn id_of(dir: &Path) -> String {
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

/// The session folders of `home` minus those in `before`: the one a run just made.
fn new_session(home: &RecordsHome, before: &[std::path::PathBuf]) -> String {
    let new: Vec<_> = home
        .sessions()
        .into_iter()
        .filter(|d| !before.contains(d))
        .collect();
    assert_eq!(new.len(), 1, "{new:?}");
    id_of(&new[0])
}

#[test]
fn every_recorded_run_ends_naming_its_session_unless_quiet() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        // A command that fails still ends with the line, after its own output.
        let out = Vg::sandbox(runner, &ws, &[], &["sh", "-c", "echo oops >&2; exit 3"])
            .records_home(&home)
            .run();
        out.assert_code(3);
        let id = id_of(&home.only_session());
        let suffix = id.rsplit('-').next().unwrap();
        let last = out.stderr.lines().last().unwrap_or("");
        assert_eq!(
            last,
            format!("vectraguard: recorded as {id} · vectraguard logs show {suffix}"),
            "{out}"
        );
        // What the line says to type works.
        vg(runner, &ws, &home, &["logs", "show", suffix, "--stderr"])
            .assert_success()
            .assert_stdout_contains("oops");

        // A shell without a terminal too.
        let before = home.sessions();
        let out = Vg::new(runner, ws.path())
            .args(["sandbox", "shell", "-T"])
            .records_home(&home)
            .stdin("echo in-the-shell\n")
            .run();
        out.assert_success().assert_stdout_contains("in-the-shell");
        let shell_id = new_session(&home, &before);
        out.assert_stderr_contains(&format!("recorded as {shell_id}"));

        for quiet in [
            Vg::sandbox(runner, &ws, &["--quiet"], &["true"]),
            Vg::sandbox(runner, &ws, &["-q"], &["true"]),
            Vg::sandbox(runner, &ws, &[], &["true"])
                .env("VECTRAGUARD_QUIET", "1")
                .clone(),
            // Nothing recorded, nothing to name.
            Vg::sandbox(runner, &ws, &["--no-record"], &["true"]),
        ] {
            let out = quiet.clone().records_home(&home).run();
            out.assert_success();
            assert!(!out.stderr.contains("recorded as"), "{out}");
        }
        assert_eq!(home.sessions().len(), 5);
    });
}

#[test]
fn a_session_is_found_by_id_prefix_suffix_name_and_last() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let mut ids = Vec::new();
        for (name, word) in [("alpha", "first"), ("alpha", "second"), ("beta", "third")] {
            let before = home.sessions();
            Vg::sandbox(runner, &ws, &["--name", name], &["echo", word])
                .records_home(&home)
                .run()
                .assert_success();
            ids.push(new_session(&home, &before));
        }
        let stdout_of = |query: &str| {
            let out = vg(runner, &ws, &home, &["logs", "show", query, "--stdout"]);
            out.assert_success();
            out.stdout.trim().to_owned()
        };
        let first = &ids[0];
        assert_eq!(stdout_of(first), "first");
        assert_eq!(stdout_of(first.strip_prefix("session-").unwrap()), "first");
        assert_eq!(stdout_of(&first[..first.len() - 1]), "first");
        assert_eq!(stdout_of(first.rsplit('-').next().unwrap()), "first");
        // A name: the newest session of that name.
        assert_eq!(stdout_of("alpha"), "second");
        assert_eq!(stdout_of("beta"), "third");
        assert_eq!(stdout_of("last"), "third");
        vg(runner, &ws, &home, &["logs", "verify", "alpha"])
            .assert_success()
            .assert_stdout_contains(&format!("{}: intact", ids[1]));
        vg(runner, &ws, &home, &["logs", "replay", "last"]).assert_code(125);

        // Two folders whose ids end alike: the suffix is ambiguous, and both are named.
        let tag = &unique()[..4];
        let stamp = first.split('-').nth(1).unwrap();
        let twins: Vec<String> = ["aa", "bb"]
            .iter()
            .map(|p| format!("session-{stamp}-{p}{tag}"))
            .collect();
        for twin in &twins {
            let status = runner
                .host_command("cp")
                .arg("-a")
                .arg(home.logs().join(first))
                .arg(home.logs().join(twin))
                .status()
                .unwrap();
            assert!(status.success());
        }
        let out = vg(runner, &ws, &home, &["logs", "show", tag]);
        out.assert_code(125);
        out.assert_stderr_contains("vectraguard: error:");
        out.assert_stderr_contains("matches 2 sessions");
        for twin in &twins {
            out.assert_stderr_contains(twin);
        }
        let out = vg(runner, &ws, &home, &["logs", "show", "no-such-session"]);
        out.assert_code(125)
            .assert_stderr_contains("no session matches");

        // rm by name removes the newest of that name only.
        vg(runner, &ws, &home, &["logs", "rm", "beta"]).assert_success();
        assert!(!home.logs().join(&ids[2]).exists());
        assert_eq!(stdout_of("alpha"), "second");

        // `list` shows the newest N, and says how many it left out.
        let out = vg(runner, &ws, &home, &["logs", "list", "-n", "1"]);
        out.assert_success();
        assert_eq!(out.lines().len(), 2, "header and one row\n{out}");
        // first, second and the two copies of first.
        out.assert_stderr_contains("3 older session(s) not shown");
        let out = vg(runner, &ws, &home, &["logs", "list", "--all"]);
        out.assert_success();
        assert_eq!(out.lines().len(), 5, "{out}");
    });
}

#[test]
fn a_local_image_name_not_in_the_store_says_how_to_get_it() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        for name in ["myimage", "myimage:dev", "team/tool:1.2"] {
            let out = Vg::sandbox(runner, &ws, &["--image", name], &["true"])
                .records_home(&home)
                .run();
            out.assert_code(125);
            out.assert_stderr_contains(&format!("the image {name} is not in the image store"));
            out.assert_stderr_contains(&format!(
                "vectraguard image import ROOTFS.tar --tag {name}"
            ));
            out.assert_stderr_contains(&format!("vectraguard image pull {name}"));
            // Not a failed trip to a registry.
            for word in ["docker.io", "resolve", "dns", "DNS", "cannot pull"] {
                assert!(!out.stderr.contains(word), "{word}\n{out}");
            }
        }
    });
}

#[test]
fn completions_and_the_manual_page_come_from_the_binary() {
    if !require_tools(&[("/bin/bash", "bash"), ("/usr/bin/man", "man-db")]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let bash = vg(runner, &ws, &home, &["completions", "bash"]);
        bash.assert_success();
        let script = ws.write(format!("completion-{}.bash", unique()), &bash.stdout);
        let check = Command::new("/bin/bash")
            .arg("-n")
            .arg(&script)
            .output()
            .unwrap();
        assert!(check.status.success(), "bash -n: {:?}", check);
        assert!(bash.stdout.contains("--network"), "{bash}");
        for shell in ["zsh", "fish"] {
            let out = vg(runner, &ws, &home, &["completions", shell]);
            out.assert_success();
            assert!(
                out.stdout.contains("vectraguard") && out.stdout.len() > 1000,
                "{out}"
            );
        }
        vg(runner, &ws, &home, &["completions", "tcsh"]).assert_code(125);

        let page = vg(runner, &ws, &home, &["man"]);
        page.assert_success();
        let file = ws.write(format!("vectraguard-{}.1", unique()), &page.stdout);
        let rendered = Command::new("man")
            .arg("-l")
            .arg(&file)
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "100")
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&rendered.stdout);
        let warnings = String::from_utf8_lossy(&rendered.stderr);
        assert!(rendered.status.success(), "man -l: {warnings}");
        assert!(warnings.trim().is_empty(), "man -l warned: {warnings}");
        for needle in [
            "NAME",
            "vectraguard",
            "SANDBOX RUN",
            "--network",
            "LOGS SHOW",
        ] {
            assert!(text.contains(needle), "{needle} not in the page:\n{text}");
        }
    });
}

#[test]
fn doctor_json_is_every_probe_as_json() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let text = vg(runner, &ws, &home, &["doctor"]);
        let json = vg(runner, &ws, &home, &["doctor", "--json"]);
        assert_eq!(json.code(), text.code(), "{json}");
        let v: Value =
            serde_json::from_str(&json.stdout).unwrap_or_else(|e| panic!("not JSON: {e}\n{json}"));
        let checks = v["checks"].as_array().unwrap();
        // One object per line of the text form's probes.
        let probes = text
            .lines()
            .iter()
            .filter(|l| l.starts_with("ok ") || l.starts_with("MISSING") || l.starts_with("absent"))
            .count();
        assert_eq!(checks.len(), probes, "{json}\n{text}");
        for c in checks {
            assert!(c["layer"].is_string() && c["detail"].is_string(), "{c}");
            assert!(c["ok"].is_boolean() && c["required"].is_boolean(), "{c}");
            assert!(c["fix"].is_string() || c["fix"].is_null(), "{c}");
        }
        assert_eq!(v["ok"], json.code() == Some(0));
        assert!(v["missing_required"].is_u64());
    });
}

#[test]
fn colour_only_when_wanted_and_one_error_prefix() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let cases: [&[&str]; 3] = [
            &["sandbox", "run", "--network", "sideways", "--", "true"],
            &["logs", "show", "no-such-session"],
            &["sandbox", "run", "--bogus-flag", "--", "true"],
        ];
        for args in cases {
            // A pipe: plain text.
            let plain = vg(runner, &ws, &home, args);
            plain.assert_code(125);
            assert!(plain.stderr.starts_with("vectraguard: error: "), "{plain}");
            assert!(!plain.stderr.contains('\x1b'), "{plain}");
            // Forced colour is honoured (so the checks below can fail)...
            let forced = Vg::new(runner, ws.path())
                .args(args)
                .records_home(&home)
                .env("CLICOLOR_FORCE", "1")
                .run();
            assert!(forced.stderr.contains("\x1b["), "{forced}");
            assert!(forced.stderr.starts_with("vectraguard: \x1b["), "{forced}");
            // ...and NO_COLOR wins over it.
            let no_color = Vg::new(runner, ws.path())
                .args(args)
                .records_home(&home)
                .env("CLICOLOR_FORCE", "1")
                .env("NO_COLOR", "1")
                .run();
            assert!(!no_color.stderr.contains('\x1b'), "{no_color}");
            assert!(
                no_color.stderr.starts_with("vectraguard: error: "),
                "{no_color}"
            );
        }
    });
}

#[test]
fn typos_get_a_suggestion() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let cases: [(&[&str], &str); 6] = [
            (
                &["sandbox", "run", "--netwrok", "none", "--", "true"],
                "'--network'",
            ),
            (&["sandbox", "shell", "--netwrok", "none"], "'--network'"),
            (&["logs", "show", "last", "--jsno"], "'--json'"),
            (&["run", "x.sh"], "`vectraguard sandbox run`"),
            (&["shell"], "`vectraguard sandbox shell`"),
            (&["exec", "ls"], "`vectraguard sandbox run -- CMD`"),
        ];
        for (args, hint) in cases {
            let out = vg(runner, &ws, &home, args);
            out.assert_code(125);
            assert!(out.stderr.starts_with("vectraguard: error: "), "{out}");
            out.assert_stderr_contains(hint);
        }
        // A command without its subcommand gets the help, not an error line.
        let out = vg(runner, &ws, &home, &["logs"]);
        out.assert_code(125)
            .assert_stderr_contains("Usage: vectraguard logs <COMMAND>");
        assert!(!out.stderr.contains("vectraguard: "), "{out}");

        // After the script, options belong to the script.
        let script = ws.write("args.sh", "echo \"args: $*\"\n");
        let out = Vg::new(runner, ws.path())
            .args(["sandbox", "run", "-q"])
            .arg(&script)
            .arg("--netwrok")
            .records_home(&home)
            .run();
        out.assert_success()
            .assert_stdout_contains("args: --netwrok");
    });
}

/// The README opens with two commands, build-and-run and the test command, and CI runs
/// exactly that test command (in a fresh clone), so what a new user runs is what is
/// proven to pass: no second, private way of testing.
#[test]
fn the_readme_test_command_is_what_ci_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let first_block: Vec<&str> = readme
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .collect();
    assert!(
        first_block[0].contains("cargo build --release")
            && first_block[0].contains("sandbox run examples/hello.sh"),
        "the first command builds and runs a script in a sandbox: {first_block:?}"
    );
    assert_eq!(first_block[1], "scripts/test", "{first_block:?}");
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    let commands: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert!(
        commands.contains(&first_block[1]),
        ".ci/run must run the README's test command as written: {commands:?}"
    );
    // And the entry point refuses silent skips.
    let script = std::fs::read_to_string(root.join("scripts/test")).unwrap();
    assert!(
        script.contains("skipped tests:"),
        "scripts/test counts skips"
    );
}

/// The commands listed in a `-h`: (name, description), without `help`.
fn listed_commands(help: &str) -> Vec<(String, String)> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A long description goes on, further indented, on the next lines.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| {
            let (name, about) = l.trim().split_once(' ')?;
            // Without its aliases (`[alias: list]`), which only the list shows.
            let about = about.trim();
            let about = about.split(" [alias").next().unwrap_or(about);
            (name != "help").then(|| (name.to_owned(), about.to_owned()))
        })
        .collect()
}

/// Each command's own help opens with the description its parent lists for it, at
/// every level: the commands off the path being run are defined only when entered
/// (`deferred.rs`), and a definition made late must not replace the description.
#[test]
fn every_command_s_help_opens_with_its_listed_description() {
    let runner = super::harness::runners()[0];
    let ws = Workspace::new();
    let home = RecordsHome::new(runner);
    let mut todo: Vec<Vec<String>> = vec![Vec::new()];
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("-h");
        let out = vg(runner, &ws, &home, &args);
        out.assert_success();
        for (name, about) in listed_commands(&out.stdout) {
            let mut sub = path.clone();
            sub.push(name);
            let mut args: Vec<&str> = sub.iter().map(String::as_str).collect();
            args.push("-h");
            let help = vg(runner, &ws, &home, &args);
            help.assert_success();
            let opening = help.lines().first().copied().unwrap_or_default();
            assert!(opening.starts_with(&about), "listed as {about:?}:\n{help}");
            seen += 1;
            todo.push(sub);
        }
    }
    assert!(seen > 30, "only {seen} commands found");
}
