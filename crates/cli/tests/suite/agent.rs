//! `vectraguard agent start`: an agent command run and recorded under its name.

use super::harness::{RecordsHome, Vg, Workspace, each_identity, session_metadata};
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
            (
                &[
                    "agent",
                    "start",
                    "--name",
                    "a",
                    "--prompt=--dangerously-skip-permissions",
                    "--",
                    "true",
                ],
                "starts with '-'",
            ),
        ] {
            vg(runner, &ws, &home, args)
                .assert_code(125)
                .assert_stderr_contains(message);
        }
        assert!(home.sessions().is_empty(), "nothing ran");
    });
}

/// A real agent CLI from npm (`@openai/codex`, pinned; `scripts/test` installs it) run
/// by `agent start --preset codex` against a scripted model on loopback: the command
/// the model asks for runs inside the sandbox and is recorded under the agent's name.
#[test]
fn a_real_agent_cli_runs_its_tool_calls_inside_the_sandbox() {
    each_identity(|runner| codex_makes_the_proof(runner, &[]));
}

/// `agent start --backend gvisor`: the same real agent CLI, its model reached through
/// gVisor's mediated network with the key swapped in outside, its tool calls run and
/// recorded by gVisor's kernel.
#[test]
fn a_real_agent_cli_runs_on_gvisor() {
    each_identity(|runner| codex_makes_the_proof(runner, &["--backend", "gvisor"]));
}

fn codex_makes_the_proof(runner: super::harness::Runner, backend: &[&str]) {
    let root =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/test-tools/codex");
    let root = root.canonicalize().unwrap_or(root);
    assert!(
        root.join("node_modules/.bin/codex").exists(),
        "codex is missing: scripts/test installs it in target/test-tools/codex"
    );
    {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let port = super::harness::free_port();
        let log =
            std::env::temp_dir().join(format!("vg-fake-model-{}.log", super::harness::unique()));
        let mut command = std::process::Command::new("python3");
        command
            .arg(
                std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/agent/fake_model.py"),
            )
            .arg(port.to_string())
            .arg(&log);
        let model = super::harness::Helper::spawn(command);
        assert!(super::harness::wait_until(
            std::time::Duration::from_secs(20),
            || { std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() }
        ));
        let codex_home = ws.path().join(".codex-home");
        ws.write(
            ".codex-home/config.toml",
            format!(
                "model = \"test-model\"\nmodel_provider = \"local\"\n\n[model_providers.local]\nname = \"local\"\nbase_url = \"http://model.test:{port}/v1\"\nwire_api = \"responses\"\nenv_key = \"OPENAI_API_KEY\"\n"
            ),
        );
        let path = format!(
            "PATH={}/node_modules/.bin:/usr/local/bin:/usr/bin:/bin",
            root.display()
        );
        // The caller's key, which the agent never holds: it gets a placeholder, and
        // the mediator swaps the key in on requests to the key's endpoint (the
        // caller's OPENAI_BASE_URL, inspected as plain HTTP here).
        let key = format!("sk-real-{}", super::harness::unique());
        let out = Vg::new(runner, ws.path())
            .records_home(&home)
            .env("OPENAI_API_KEY", &key)
            .env("OPENAI_BASE_URL", &format!("http://model.test:{port}/v1"))
            .args(["agent", "start"])
            .args(backend)
            .args([
                "--name",
                "codex-bot",
                "--preset",
                "codex",
                "--prompt",
                "make the proof",
                "--read-only",
                &root.display().to_string(),
                "--add-host",
                "model.test:127.0.0.1",
                "--env",
                &format!("CODEX_HOME={}", codex_home.display()),
                "--env",
                &path,
            ])
            .run();
        drop(model);
        let requests = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        out.assert_success();
        assert_eq!(
            ws.read("proof.txt").as_deref(),
            Some("made-by-the-agent\n"),
            "{out}\n{requests}"
        );
        assert_eq!(requests.lines().count(), 2, "{requests}");
        for line in requests.lines() {
            let logged: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(
                logged["authorization"],
                format!("Bearer {key}"),
                "the model got the key: {requests}"
            );
        }
        super::https_inspection::assert_nowhere(&key, &out, &home);
        let dir = home.only_session();
        let meta = session_metadata(&dir);
        assert_eq!(
            meta["network"]["inspection"]["secrets"]["OPENAI_API_KEY"][1], "model.test",
            "{meta}"
        );
        let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
        assert!(
            events.contains(r#""secrets":["OPENAI_API_KEY"]"#),
            "{events}"
        );
        let meta = session_metadata(&dir);
        assert_eq!(meta["agent"], "codex-bot", "{meta}");
        assert_eq!(meta["agent_preset"], "codex", "{meta}");
        assert_eq!(meta["prompt"], "make the proof", "{meta}");
        let commands = std::fs::read_to_string(dir.join("commands.log")).unwrap();
        assert!(
            commands.contains("echo made-by-the-agent > proof.txt"),
            "{commands}"
        );
        assert!(
            commands.contains("exec --skip-git-repo-check --sandbox danger-full-access"),
            "{commands}"
        );
        if !backend.is_empty() {
            assert_eq!(meta["layers"]["backend"], backend[1], "{meta}");
        }
    }
}

/// Red team: run by root, `agent start` created (and chowned) the preset's folders in
/// the sandbox user's home, where that user could swap them for symlinks in between.
/// Root now creates nothing there; the user's own runs do. Settings files that make an
/// agent run commands on the host are mounted read-only.
#[test]
fn preset_folders_are_never_made_by_root_and_host_settings_stay_read_only() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let user_home = super::harness::test_user().home.clone();
        let state = user_home.join(".aider");
        let _ = std::fs::remove_dir_all(&state);
        let settings = user_home.join(".aider.conf.yml");
        std::fs::write(&settings, "model: keep-me\n").unwrap();
        super::harness::chown_to(&settings, super::harness::test_user());
        let out = vg(
            runner,
            &ws,
            &home,
            &[
                "agent",
                "start",
                "--name",
                "aider-bot",
                "--preset",
                "aider",
                "--network",
                "none",
                "--",
                "sh",
                "-c",
                "echo 'notifications-command: touch /tmp/pwned' >> ~/.aider.conf.yml; echo done",
            ],
        );
        out.assert_success();
        assert_eq!(
            std::fs::read_to_string(&settings).unwrap(),
            "model: keep-me\n",
            "{out}"
        );
        match runner {
            super::harness::Runner::Root => {
                assert!(!state.exists(), "root made {}", state.display());
                assert!(out.stderr.contains(".aider does not exist"), "{out}");
            }
            super::harness::Runner::Unprivileged => {
                assert!(state.is_dir(), "the user's own run makes its folder");
            }
        }
        let _ = std::fs::remove_dir_all(&state);
        let _ = std::fs::remove_file(&settings);
    });
}

/// `--tmpfs`: a private folder of the `--disk` size, whose inodes are bounded too
/// (red team: empty files cost kernel memory that the size does not count).
#[test]
fn a_tmpfs_folder_is_bounded_in_bytes_and_in_files() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let out = vg(
            runner,
            &ws,
            &home,
            &[
                "sandbox",
                "run",
                "--disk",
                "1m",
                "--tmpfs",
                "/scratch",
                "--",
                "sh",
                "-c",
                "cd /scratch; i=0; while [ $i -lt 3000 ] && touch f$i 2>/dev/null; do i=$((i+1)); done; echo files=$i; \
                 rm -f f*; dd if=/dev/zero of=big bs=1k count=4096 2>/dev/null; echo kib=$(( $(stat -c %s big) / 1024 ))",
            ],
        );
        out.assert_success();
        let files: u32 = out
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("files="))
            .unwrap()
            .parse()
            .unwrap();
        assert!(files < 3000, "{out}");
        let kib: u32 = out
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("kib="))
            .unwrap()
            .parse()
            .unwrap();
        assert!(kib <= 1024, "{out}");
    });
}
