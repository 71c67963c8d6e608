//! `vectraguard agent start`: an agent command run and recorded under its name.

use super::harness::{RecordsHome, Workspace, each_identity, session_metadata};
use super::live::vg;

#[test]
fn an_agent_command_gets_its_prompt_and_is_recorded_under_its_name() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let out = vg(
            runner,
            &ws,
            &home,
            &[
                "agent",
                "start",
                "--name",
                "dev-assistant",
                "--prompt",
                "Refactor the code for performance",
                "--sandbox",
                "--",
                "sh",
                "-c",
                "echo \"task: $VECTRAGUARD_PROMPT\"; id -u",
            ],
        );
        out.assert_success();
        assert!(
            out.stdout
                .starts_with("task: Refactor the code for performance\n"),
            "{out}"
        );
        assert_ne!(out.stdout.lines().nth(1), Some("0"), "never root: {out}");
        let meta = session_metadata(&home.only_session());
        assert_eq!(meta["agent"], "dev-assistant", "{meta}");
        assert_eq!(meta["name"], "dev-assistant", "{meta}");
        assert_eq!(meta["origin"], "agent", "{meta}");
        assert_eq!(
            meta["prompt"], "Refactor the code for performance",
            "{meta}"
        );
        let listed = vg(
            runner,
            &ws,
            &home,
            &["logs", "list", "--agent", "dev-assistant", "--json"],
        );
        listed.assert_success();
        assert!(listed.stdout.contains("dev-assistant"), "{listed}");
        let none = vg(
            runner,
            &ws,
            &home,
            &["logs", "list", "--agent", "someone-else", "--json"],
        );
        assert!(!none.stdout.contains("dev-assistant"), "{none}");
    });
}

#[test]
fn agent_start_refuses_what_it_cannot_run_with_a_clear_error() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        for (args, message) in [
            (&["agent", "start", "--", "true"][..], "needs --name"),
            (
                &["agent", "start", "--name", "a", "--preset", "copilot"],
                "no agent preset \"copilot\"",
            ),
            (
                &[
                    "agent", "start", "--name", "a", "--prompt", "", "--", "true",
                ],
                "--prompt is empty",
            ),
        ] {
            vg(runner, &ws, &home, args)
                .assert_code(125)
                .assert_stderr_contains(message);
        }
        assert!(home.sessions().is_empty(), "nothing ran");
    });
}
