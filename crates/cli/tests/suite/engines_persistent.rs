//! `sandbox create --backend docker|podman`: a persistent container whose init (ours,
//! `vg_sandbox::engine_init::persistent`) starts each `sandbox exec` command, all of
//! them recorded in the one session. Rootful engines, tested as root (as in
//! `engines.rs`).

use super::engines::containers;
use super::harness::{
    Output, PYTHON, RecordsHome, Runner, Workspace, session_metadata, unique, wait_until,
};
use super::live::vg;

const IMAGE: &str = "vectraguard-test/busybox:1";

/// A persistent container, removed when the test ends, pass or fail.
struct Container<'a> {
    runner: Runner,
    ws: &'a Workspace,
    home: &'a RecordsHome,
    name: String,
}

impl<'a> Container<'a> {
    fn create(engine: &str, ws: &'a Workspace, home: &'a RecordsHome) -> Self {
        Self::create_as(Runner::Root, engine, ws, home)
    }

    /// Created by `runner` (the test user's is a rootless Podman's container).
    fn create_as(runner: Runner, engine: &str, ws: &'a Workspace, home: &'a RecordsHome) -> Self {
        let name = format!("e{}", unique());
        let out = vg(
            runner,
            ws,
            home,
            &[
                "sandbox",
                "create",
                &name,
                "--backend",
                engine,
                "--image",
                IMAGE,
            ],
        );
        out.assert_success();
        Container {
            runner,
            ws,
            home,
            name,
        }
    }

    fn exec(&self, command: &[&str]) -> Output {
        let mut args = vec!["sandbox", "exec", self.name.as_str(), "--"];
        args.extend_from_slice(command);
        vg(self.runner, self.ws, self.home, &args)
    }
}

impl Drop for Container<'_> {
    fn drop(&mut self) {
        let _ = vg(
            self.runner,
            self.ws,
            self.home,
            &["sandbox", "rm", "-f", &self.name],
        );
    }
}

#[test]
fn execs_share_the_container_are_recorded_in_one_session_and_stop_removes_it() {
    for engine in ["docker", "podman"] {
        let ws = Workspace::new();
        let home = RecordsHome::new(Runner::Root);
        let sandbox = Container::create(engine, &ws, &home);
        sandbox
            .exec(&["sh", "-c", "echo kept > /tmp/state"])
            .assert_success();
        let out = sandbox.exec(&["sh", "-c", "cat /tmp/state; exit 7"]);
        out.assert_code(7);
        assert_eq!(out.stdout, "kept\n", "{engine}\n{out}");
        sandbox
            .exec(&["sh", "-c", "kill -TERM $$"])
            .assert_code(143);
        sandbox.exec(&["no-such-program"]).assert_code(127);
        // One session, the container's, holds every command.
        let dir = home.only_session();
        let meta = session_metadata(&dir);
        assert_eq!(meta["layers"]["backend"], engine, "{meta}");
        assert_eq!(meta["layers"]["init"], "vectraguard", "{meta}");
        assert_eq!(meta["layers"]["exec_records"], "seccomp-notify", "{meta}");
        let name = meta["layers"]["container"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(name.starts_with("vectraguard-"), "{meta}");
        assert!(
            containers(engine).lines().any(|l| l == name),
            "{engine}: {name} is not running"
        );
        let log = std::fs::read_to_string(dir.join("commands.log")).unwrap();
        for argv in [
            "sh -c 'echo kept > /tmp/state'",
            "sh -c 'cat /tmp/state; exit 7'",
            "cat /tmp/state",
        ] {
            assert!(
                log.lines()
                    .any(|l| l.contains(" exec ") && l.ends_with(&format!(" -- {argv}"))),
                "{engine}: no exec of {argv}:\n{log}"
            );
        }
        vg(
            Runner::Root,
            &ws,
            &home,
            &["sandbox", "stop", &sandbox.name],
        )
        .assert_success();
        assert!(
            wait_until(std::time::Duration::from_secs(30), || !containers(engine)
                .lines()
                .any(|l| l == name)),
            "{engine} container left after stop: {name}"
        );
        let verify = vg(Runner::Root, &ws, &home, &["logs", "verify", "last"]);
        verify.assert_success().assert_stdout_contains("intact");
        let meta = session_metadata(&dir);
        assert_ne!(meta["status"], "running", "{meta}");
    }
}

/// `sandbox exec -t` in a persistent container: a terminal our init opens in the
/// container's devpts for that one command (the spawner protocol, as natively),
/// sized as the client's, its output in the session's record.
#[test]
fn exec_with_t_gets_a_terminal_of_the_container_s_own() {
    if !super::harness::require_tools(&[("/usr/bin/script", "util-linux")]) {
        return;
    }
    for (runner, engine) in [
        (Runner::Root, "docker"),
        (Runner::Root, "podman"),
        (Runner::Unprivileged, "podman"),
    ] {
        let what = format!("{engine} as {runner}");
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let sandbox = Container::create_as(runner, engine, &ws, &home);
        // `script` gives the client a terminal on stdin, as a person's would be.
        let mut run = super::harness::Vg::new(runner, ws.path());
        run.records_home(&home)
            .args([
                "sandbox",
                "exec",
                "-t",
                &sandbox.name,
                "--",
                "sh",
                "-c",
                "tty; stty size; echo to-stderr >&2; echo in-$((6*7)); exit 5",
            ])
            .through_shell(
                "exec script -qec \"stty rows 30 cols 100; $(printf '%q ' \"$@\")\" /dev/null",
            );
        let out = run.run();
        out.assert_code(5);
        assert!(out.stdout.contains("/dev/pts/0"), "{what}\n{out}");
        assert!(out.stdout.contains("30 100"), "{what}\n{out}");
        // Its stderr is the terminal too.
        assert!(out.stdout.contains("to-stderr"), "{what}\n{out}");
        assert!(out.stdout.contains("in-42"), "{what}\n{out}");
        let dir = home.only_session();
        let stdout = std::fs::read_to_string(dir.join("stdout.log")).unwrap();
        assert!(stdout.contains("in-42"), "{what}: {stdout}");
        let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
        assert!(
            events
                .lines()
                .any(|l| l.contains("\"event\":\"started\"") && l.contains("\"tty\":true")),
            "{what}: {events}"
        );
        let log = std::fs::read_to_string(dir.join("commands.log")).unwrap();
        assert!(log.contains(" -- sh -c 'tty; stty size;"), "{what}: {log}");
        vg(runner, &ws, &home, &["logs", "verify", "last"])
            .assert_success()
            .assert_stdout_contains("intact");
    }
}

/// What a hostile command in the container tries against the init's channel and
/// the container's life: each must fail.
#[test]
fn a_command_cannot_reach_the_init_s_channel_or_stop_the_container() {
    for engine in ["docker", "podman"] {
        let ws = Workspace::new();
        let home = RecordsHome::new(Runner::Root);
        let sandbox = Container::create(engine, &ws, &home);
        // A command started before, still running, with a pipe from the host.
        sandbox
            .exec(&["sh", "-c", "echo $$ > /tmp/pid"])
            .assert_success();
        let out = sandbox.exec(&[
            "sh",
            "-c",
            // No socket is open in it (stdin /dev/null, output pipes: the init's
            // channel is not inherited); the init's descriptors are not
            // readable; the hand-over socket is gone; signals to the init are not
            // delivered.
            "exec </dev/null; ls -l /proc/$$/fd/ > /tmp/fds; echo sockets=$(grep -c socket: /tmp/fds); \
             ls /proc/1/fd >/dev/null 2>&1 && echo init=open || echo init=closed; \
             test -e /.vectraguard/run/init.sock && echo sock=there || echo sock=gone; \
             kill -TERM 1; kill -KILL 1; kill -PWR 1; sleep 0.3; \
             grep -q '^Seccomp:.*2' /proc/self/status && echo seccomp=on",
        ]);
        out.assert_success();
        assert_eq!(out.field("sockets"), "0", "{engine}\n{out}");
        assert_eq!(out.field("init"), "closed", "{engine}\n{out}");
        assert_eq!(out.field("sock"), "gone", "{engine}\n{out}");
        // The stop signal (SIGTERM, which the engine sends PID 1) from inside is
        // dropped by the kernel (PID 1 has no handler): the container serves on.
        let after = sandbox.exec(&["cat", "/tmp/pid"]);
        after.assert_success();
        assert_eq!(out.field("seccomp"), "on", "{engine}\n{out}");
    }
}

/// Red team (session 15): `sandbox exec` passes its stdin to the command as it is,
/// so a folder on stdin (`< DIR`) was the host's file tree inside the container: the
/// command read and wrote the host's files through `/proc/self/fd/0/…`, which no
/// Landlock rule stops there. Refused, and nothing runs.
#[test]
fn a_folder_on_stdin_does_not_open_the_host_s_files_to_the_container() {
    for engine in ["docker", "podman"] {
        let ws = Workspace::new();
        let home = RecordsHome::new(Runner::Root);
        let sandbox = Container::create(engine, &ws, &home);
        let host = Workspace::new();
        std::fs::write(host.join("secret"), "host-secret\n").unwrap();
        // Writable by the container's user, as a shared folder would be.
        std::fs::set_permissions(
            host.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )
        .unwrap();
        let mut vg = super::harness::Vg::new(Runner::Root, ws.path());
        vg.records_home(&home)
            .through_shell(&format!("exec \"$@\" < '{}'", host.path().display()))
            .args([
                "sandbox",
                "exec",
                &sandbox.name,
                "--",
                "sh",
                "-c",
                "echo ran; cat /proc/self/fd/0/secret; touch /proc/self/fd/0/planted",
            ]);
        let out = vg.run();
        assert_ne!(out.status.code(), Some(0), "{engine}\n{out}");
        assert!(out.stderr.contains("stdin is a folder"), "{engine}\n{out}");
        assert!(!out.stdout.contains("ran"), "{engine}\n{out}");
        assert!(!out.stdout.contains("host-secret"), "{engine}\n{out}");
        assert!(!host.join("planted").exists(), "{engine}\n{out}");
        // The sandbox serves on.
        sandbox.exec(&["true"]).assert_success();
    }
}

/// Red team (session 16): a host file on `sandbox exec`'s stdin was passed to the
/// container's command as it was, which opened it again through `/proc/self/fd/0`
/// with its own rights: for writing, though it was redirected for reading, and from
/// a path-only (`O_PATH`) descriptor that gives no input at all. A file's bytes now
/// come through a pipe, and a path-only descriptor is refused.
#[test]
fn a_file_on_stdin_is_read_by_the_container_and_never_opened_again() {
    for engine in ["docker", "podman"] {
        let ws = Workspace::new();
        let home = RecordsHome::new(Runner::Root);
        let sandbox = Container::create(engine, &ws, &home);
        let host = Workspace::new();
        // Writable by the container's user, as a shared file would be.
        let file = host.write_mode("input", "host-input\n", 0o666);
        std::fs::set_permissions(
            host.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let reopen = "cat; echo planted >> /proc/self/fd/0 && echo reopened=yes; echo done=yes";
        let exec = |shell: String| {
            let mut vg = super::harness::Vg::new(Runner::Root, ws.path());
            vg.records_home(&home).through_shell(&shell).args([
                "sandbox",
                "exec",
                &sandbox.name,
                "--",
                "sh",
                "-c",
                reopen,
            ]);
            vg.run()
        };
        // Redirected for reading: its bytes, and nothing else of it.
        let out = exec(format!("exec \"$@\" < '{}'", file.display()));
        out.assert_success();
        assert!(out.stdout.contains("host-input"), "{engine}\n{out}");
        assert_eq!(out.field("done"), "yes", "{engine}\n{out}");
        assert!(!out.stdout.contains("reopened=yes"), "{engine}\n{out}");
        // A path-only descriptor: refused, nothing runs.
        let out = exec(format!(
            "exec {PYTHON} -c 'import os, sys; os.dup2(os.open(sys.argv[1], os.O_PATH), 0); os.execvp(sys.argv[2], sys.argv[2:])' '{}' \"$@\"",
            file.display()
        ));
        assert_ne!(out.status.code(), Some(0), "{engine}\n{out}");
        assert!(out.stderr.contains("path-only (O_PATH)"), "{engine}\n{out}");
        assert!(!out.stdout.contains("done=yes"), "{engine}\n{out}");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "host-input\n",
            "{engine}: the host's file was written"
        );
        sandbox.exec(&["true"]).assert_success();
    }
}

/// Red team (session 15): the engine's stop signal (SIGTERM) sent to our init with no
/// sender, which it took for the engine's: by the kernel as an I/O notification
/// (`F_SETOWN` 1, `F_SETSIG`), or forged with `rt_sigqueueinfo`. Either stopped the
/// container; the container serves on now.
#[test]
fn a_command_cannot_stop_the_container_with_a_stop_signal_that_names_no_sender() {
    for engine in ["docker", "podman"] {
        let ws = Workspace::new();
        super::persistent::build_senderless(&ws);
        let home = RecordsHome::new(Runner::Root);
        let sandbox = Container::create(engine, &ws, &home);
        for how in ["sigio", "queue"] {
            let out = sandbox.exec(&["./senderless", how, "1", &libc::SIGTERM.to_string()]);
            out.assert_success();
            assert_eq!(out.field(how), "sent", "{engine} {how}\n{out}");
            std::thread::sleep(std::time::Duration::from_millis(300));
            let after = sandbox.exec(&["echo", "served"]);
            assert_eq!(after.stdout, "served\n", "{engine} {how}\n{after}");
        }
    }
}

/// `mcp serve --backend docker|podman`, through the client on the official MCP
/// Python SDK that `mcp.rs` uses: the connection's sandbox is a persistent
/// container, its calls share it and are recorded in its session, and it is gone
/// once destroyed.
#[test]
fn the_mcp_server_runs_its_sandboxes_as_containers() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join("target/test-tools/mcp/bin/python");
    assert!(
        python.exists(),
        "the MCP Python SDK is missing: scripts/test installs it in target/test-tools/mcp"
    );
    let client = root.join("crates/cli/tests/mcp/client.py");
    for engine in ["docker", "podman"] {
        let ws = Workspace::new();
        let home = RecordsHome::new(Runner::Root);
        let calls = serde_json::json!([
            {"tool": "code_execute", "args": {"language": "shell", "code": "echo kept > /tmp/s; echo $((6*7))"}},
            {"tool": "code_execute", "args": {"language": "shell", "code": "cat /tmp/s; exit 4"}},
            // The file tools' scripts on a BusyBox image (no GNU realpath or find).
            {"tool": "code_write_file", "args": {"path": "d/e/f.txt", "content": "filed\n"}},
            {"tool": "code_read_file", "args": {"path": "d/e/f.txt"}},
            {"tool": "code_list_files", "args": {"path": "d/e"}},
            {"tool": "code_destroy_sandbox", "args": {}},
        ]);
        let mut cmd = super::harness::Vg::new(Runner::Root, ws.path());
        cmd.records_home(&home)
            .args(["mcp", "serve", "--ask", "never", "--"])
            .args(["--backend", engine, "--image", IMAGE, "--network", "none"])
            .stdin(calls.to_string())
            .through_shell(&format!(
                "exec {} {} stdio \"$@\"",
                python.display(),
                client.display()
            ));
        let out = cmd.run();
        out.assert_success();
        let results: Vec<serde_json::Value> = out
            .stdout
            .lines()
            .skip(1)
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(results.len(), 6, "{engine}\n{out}");
        let body = |i: usize| &results[i]["structured"];
        assert_eq!(body(0)["stdout"], "42\n", "{engine}: {}", results[0]);
        assert_eq!(body(1)["stdout"], "kept\n", "{engine}: {}", results[1]);
        assert_eq!(body(1)["exit_code"], 4, "{engine}: {}", results[1]);
        assert_eq!(body(0)["sandbox_id"], body(1)["sandbox_id"]);
        assert_eq!(body(2)["exit_code"], 0, "{engine}: {}", results[2]);
        assert_eq!(body(3)["stdout"], "filed\n", "{engine}: {}", results[3]);
        assert_eq!(body(4)["stdout"], "f 6 f.txt\n", "{engine}: {}", results[4]);
        assert_eq!(results[5]["is_error"], false, "{engine}: {}", results[5]);
        let session = body(0)["session"].as_str().unwrap_or_default().to_owned();
        let dir = home.logs().join(&session);
        let meta = session_metadata(&dir);
        assert_eq!(meta["layers"]["backend"], engine, "{meta}");
        let log = std::fs::read_to_string(dir.join("commands.log")).unwrap();
        assert!(log.contains("cat /tmp/s"), "{engine}:\n{log}");
        let name = meta["layers"]["container"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            wait_until(std::time::Duration::from_secs(30), || !containers(engine)
                .lines()
                .any(|l| l == name)),
            "{engine} container left after code_destroy_sandbox: {name}"
        );
        let verify = vg(Runner::Root, &ws, &home, &["logs", "verify", &session]);
        verify.assert_success().assert_stdout_contains("intact");
    }
}

#[test]
fn a_container_its_engine_refuses_fails_create_at_once() {
    // Docker's daemon refuses more CPUs than the host has (2 here, 1,024 asked) after the client started:
    // `create` says the container ended, rather than waiting out the hand-over.
    let ws = Workspace::new();
    let home = RecordsHome::new(Runner::Root);
    let name = format!("e{}", unique());
    let args = [
        "sandbox",
        "create",
        &name,
        "--backend",
        "docker",
        "--image",
        IMAGE,
        "--cpus",
        "1024",
    ];
    let out = vg(Runner::Root, &ws, &home, &args);
    out.assert_code(125);
    out.assert_stderr_contains("the container ended before its init handed over");
    let _ = vg(Runner::Root, &ws, &home, &["sandbox", "rm", "-f", &name]);
}
