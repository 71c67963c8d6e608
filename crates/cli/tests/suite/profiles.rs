//! Learned profiles: `vectraguard profile ls|show|diff|rm`, names that are not plain
//! file names, and `--profile NAME` loading one. The profiles are written by the tests
//! (learning itself is tested with `--learn`).

use super::harness::{Runner, TempDir, Vg, Workspace, each_identity, run};

/// `$XDG_CONFIG_HOME` for one test, owned by the invoker, with its profiles folder.
struct Config(TempDir);

impl Config {
    fn new(runner: Runner) -> Self {
        Self(TempDir::owned_by("xdg", &runner.invoker(), 0o700))
    }

    /// Writes the learned profile `name` (a file the invoker can read).
    fn profile(&self, name: &str, text: &str) -> std::path::PathBuf {
        self.0
            .write(format!("vectraguard/profiles/{name}.toml"), text)
    }

    fn profiles(&self) -> std::path::PathBuf {
        self.0.join("vectraguard/profiles")
    }

    /// `vectraguard ARGS` with this config folder.
    fn vg(&self, runner: Runner, args: &[&str]) -> super::harness::Output {
        Vg::new(runner, self.0.path())
            .env("XDG_CONFIG_HOME", &self.0.arg(""))
            .args(args)
            .run()
    }
}

const TOOL: &str = "# Learned from: tool run --fast\n# more header\nread_only = [\n    # read 3 paths\n    \"/home/u/.config/tool\",\n    \"/home/u/.gitconfig\",\n]\nread_write = [\"/home/u/.cache/tool\"]\nnetwork = \"allow\"\nnetwork_rules = [\"allow api.test:443\"]\n";
const TOOL2: &str = "# Learned from: tool run --slow\nread_write = [\"/home/u/.config/tool\", \"/home/u/.cache/tool\", \"/home/u/.local/state/tool\"]\nnetwork = \"allow\"\nnetwork_rules = [\"allow api2.test:443\"]\n";

#[test]
fn profile_commands_list_show_compare_and_remove() {
    each_identity(|runner| {
        let config = Config::new(runner);
        // None yet: an empty list and a note saying how to make one.
        let out = config.vg(runner, &["profile", "ls"]);
        out.assert_success().assert_stderr_contains("--learn NAME");
        assert_eq!(out.stdout, "", "{out}");

        let tool = config.profile("tool", TOOL);
        config.profile("tool2", TOOL2);
        let out = config.vg(runner, &["profile", "ls"]);
        out.assert_success();
        let lines = out.lines();
        assert!(
            lines[0].starts_with("NAME") && lines[0].contains("LEARNED FROM"),
            "{out}"
        );
        assert!(
            lines[1].starts_with("tool ") && lines[1].ends_with("tool run --fast"),
            "{out}"
        );
        assert!(
            lines[2].starts_with("tool2 ") && lines[2].ends_with("tool run --slow"),
            "{out}"
        );
        let out = config.vg(runner, &["profile", "ls", "-q"]);
        assert_eq!(out.assert_success().lines(), ["tool", "tool2"], "{out}");

        let out = config.vg(runner, &["profile", "show", "tool"]);
        assert_eq!(out.assert_success().stdout, TOOL, "{out}");

        let out = config.vg(runner, &["profile", "diff", "tool", "tool2"]);
        out.assert_success()
            .assert_stdout_contains(&format!("--- tool ({})", tool.display()))
            .assert_stdout_contains("- read-only /home/u/.gitconfig\n")
            .assert_stdout_contains("- allow api.test:443\n")
            .assert_stdout_contains(
                "~ read-only /home/u/.config/tool → writable /home/u/.config/tool\n",
            )
            .assert_stdout_contains("+ writable /home/u/.local/state/tool\n")
            .assert_stdout_contains("+ allow api2.test:443\n");
        assert!(
            !out.stdout.contains(".cache/tool"),
            "unchanged: not shown\n{out}"
        );
        // Against a file (comments and order do not count).
        let file = config.0.write(
            "copy.toml",
            format!("# other\n{}", TOOL.replace("# read 3 paths\n", "")),
        );
        let out = config.vg(
            runner,
            &["profile", "diff", "tool", "--file", file.to_str().unwrap()],
        );
        out.assert_success()
            .assert_stdout_contains("no change in what the profile grants");

        let out = config.vg(runner, &["profile", "rm", "tool"]);
        out.assert_success().assert_stdout_contains("Removed: tool");
        assert!(!tool.exists());
        assert_eq!(
            config.vg(runner, &["profile", "ls", "-q"]).lines(),
            ["tool2"]
        );
        for args in [
            &["profile", "rm", "tool"][..],
            &["profile", "show", "tool"],
            &["profile", "diff", "tool2", "tool"],
        ] {
            config
                .vg(runner, args)
                .assert_code(125)
                .assert_stderr_contains("no learned profile 'tool'")
                .assert_stderr_contains("vectraguard profile ls");
        }
        // A corrupt one is shown, and said not to load, with its line.
        let broken = config.profile("broken", "# x\nread_only = [\"relative\"]\n");
        let out = config.vg(runner, &["profile", "show", "broken"]);
        out.assert_code(125)
            .assert_stdout_contains("read_only = [\"relative\"]")
            .assert_stderr_contains(&format!("{}:2:", broken.display()));
        config
            .vg(runner, &["profile", "diff", "broken", "tool2"])
            .assert_code(125)
            .assert_stderr_contains(&format!("{}:2:", broken.display()));
    });
}

#[test]
fn names_that_are_not_plain_file_names_touch_nothing() {
    each_identity(|runner| {
        let config = Config::new(runner);
        config.profile("x", TOOL);
        // What `../x` and `a/b` would reach, were they joined to the folder.
        let beside = config.0.write("vectraguard/x.toml", TOOL);
        let below = config.profile("a/b", TOOL);
        for name in ["../x", "a/b"] {
            for args in [
                &["profile", "rm", name][..],
                &["profile", "show", name],
                &["profile", "diff", name, "x"],
                &["profile", "diff", "x", name],
            ] {
                config
                    .vg(runner, args)
                    .assert_code(125)
                    .assert_stderr_contains("path separator");
            }
        }
        // Every name is checked before anything is removed.
        config
            .vg(runner, &["profile", "rm", "x", "../x"])
            .assert_code(125);
        assert!(beside.exists() && below.exists());
        assert!(config.profiles().join("x.toml").exists());
        let out = config.vg(runner, &["profile", "rm", "x"]);
        out.assert_success();
        assert!(beside.exists(), "{out}");

        // --profile with such a name loads nothing from beside the folder.
        let ws = Workspace::new();
        let out = Vg::sandbox(runner, &ws, &["--profile", "../x"], &["true"])
            .env("XDG_CONFIG_HOME", &config.0.arg(""))
            .run();
        out.assert_code(125)
            .assert_stderr_contains("unknown profile '../x'")
            .assert_stderr_contains("--learn");
    });
}

#[test]
fn profile_name_loads_a_learned_profile_beside_the_workspace() {
    each_identity(|runner| {
        let config = Config::new(runner);
        let ws = Workspace::new();
        ws.write("in-workspace", "ws\n");
        let ro = TempDir::new("learned-ro");
        ro.write("data.txt", "from-host\n");
        let rw = TempDir::new("learned-rw");
        config.profile(
            "tool",
            &format!(
                "# Learned from: test\nread_only = [\"{}\"]\nread_write = [\"{}\"]\n",
                ro.arg(""),
                rw.arg("")
            ),
        );
        let script = format!(
            "cat {ro}/data.txt; cat in-workspace; echo new > {rw}/out; echo ws-new > ws-out; echo ro > {ro}/x 2>/dev/null || echo ro-refused",
            ro = ro.arg(""),
            rw = rw.arg("")
        );
        let with_xdg = |options: &[&str]| {
            Vg::sandbox(runner, &ws, options, &["sh", "-c", script.as_str()])
                .env("XDG_CONFIG_HOME", &config.0.arg(""))
                .run()
        };
        let out = with_xdg(&["--profile", "tool"]);
        out.assert_success()
            .assert_stdout_contains("from-host\n")
            .assert_stdout_contains("ws\n")
            .assert_stdout_contains("ro-refused\n");
        assert_eq!(rw.read("out").as_deref(), Some("new\n"), "{out}");
        assert_eq!(ws.read("ws-out").as_deref(), Some("ws-new\n"), "{out}");
        assert!(!ro.exists("x"));

        // Without it, neither folder is there.
        std::fs::remove_file(rw.join("out")).unwrap();
        let out = with_xdg(&[]);
        assert!(!out.stdout.contains("from-host"), "{out}");
        assert!(!rw.exists("out"), "{out}");

        // A corrupt learned profile: its file and line, nothing run.
        let broken = config.profile("broken", "# x\n\nnetwork = \"sideways\"\n");
        with_xdg(&["--profile", "broken"])
            .assert_code(125)
            .assert_stderr_contains(&format!("{}:3:", broken.display()));

        // Defined twice (a table and a learned file): refused, naming both.
        let project = ws.write("vectraguard.toml", "[profiles.tool]\nname = \"t\"\n");
        let out = with_xdg(&["--profile", "tool"]);
        out.assert_code(125)
            .assert_stderr_contains("defined twice")
            .assert_stderr_contains(&project.display().to_string())
            .assert_stderr_contains(&config.profiles().join("tool.toml").display().to_string());
        assert!(!out.stdout.contains("from-host"), "{out}");
        std::fs::remove_file(project).unwrap();

        // An unknown profile points at learning.
        run(runner, &ws, &["--profile", "nope"], &["true"])
            .assert_code(125)
            .assert_stderr_contains("--learn nope");
    });
}
