//! `vectraguard mcp serve`, driven by a client built on the official MCP Python SDK
//! (`tests/mcp/client.py`, the SDK installed by `scripts/test`), over stdio and
//! streamable HTTP.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::harness::{RecordsHome, Runner, Vg, Workspace, each_identity, wait_until};
use super::live::vg;

fn python() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/test-tools/mcp/bin/python")
}

fn client_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py")
}

fn sdk_installed() -> bool {
    assert!(
        python().exists(),
        "the MCP Python SDK is missing: scripts/test installs it in target/test-tools/mcp"
    );
    true
}

/// Options that let the sandboxes start for an unprivileged user too (no cgroup
/// delegation on the test machines).
const SANDBOX_OPTIONS: &[&str] = &["--", "--best-effort-limits"];

/// Makes `calls` on one stdio connection; returns tools/list's line and one line per call.
fn stdio_session(
    runner: Runner,
    ws: &Workspace,
    home: &RecordsHome,
    serve: &[&str],
    calls: &Value,
) -> (Value, Vec<Value>) {
    stdio_session_with(runner, ws, home, serve, &[], calls)
}

/// [`stdio_session`] with more options for the sandboxes (after `--`).
fn stdio_session_with(
    runner: Runner,
    ws: &Workspace,
    home: &RecordsHome,
    serve: &[&str],
    sandbox_options: &[&str],
    calls: &Value,
) -> (Value, Vec<Value>) {
    let mut cmd = Vg::new(runner, ws.path());
    cmd.records_home(home)
        .args(["mcp", "serve"])
        .args(serve)
        .args(SANDBOX_OPTIONS)
        .args(sandbox_options)
        .stdin(calls.to_string())
        .through_shell(&format!(
            "exec {} {} stdio \"$@\"",
            python().display(),
            client_script().display()
        ));
    let out = cmd.run();
    out.assert_success();
    let mut lines = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap());
    let listed = lines
        .next()
        .unwrap_or_else(|| panic!("no tools/list: {out}"));
    (listed, lines.collect())
}

fn body(result: &Value) -> &Value {
    &result["structured"]
}

/// A refused call's message: a protocol error's, or a failed tool result's text.
fn error_text(result: &Value) -> &str {
    result["error"]
        .as_str()
        .or_else(|| result["text"].as_str())
        .unwrap_or_default()
}

#[test]
fn the_tools_work_over_stdio_and_bad_input_gets_clear_errors() {
    if !sdk_installed() {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let big = "x".repeat(1024 * 1024 + 1);
        let calls = json!([
            {"tool": "code_execute", "args": {"language": "python", "code": "print(6*7)"}},
            {"tool": "code_write_file", "args": {"path": "src/data.txt", "content": "kept\n"}},
            {"tool": "code_execute", "args": {"language": "python",
                "code": "print(open('/workspace/src/data.txt').read().strip())"}},
            {"tool": "code_read_file", "args": {"path": "/workspace/src/data.txt"}},
            {"tool": "code_list_files", "args": {}},
            {"tool": "code_execute", "args": {"language": "javascript", "code": "console.log(2+3)"}},
            {"tool": "code_execute", "args": {"language": "shell", "code": "echo err >&2; exit 4"}},
            {"tool": "code_execute", "args": {"language": "shell", "code": "sleep 20", "timeout": 1}},
            // Bad input: each a clear error, and the server keeps serving.
            {"tool": "code_read_file", "args": {"path": "../../etc/passwd"}},
            {"tool": "code_write_file", "args": {"path": "/etc/x", "content": "no"}},
            {"tool": "code_execute", "args": {"language": "shell",
                "code": "ln -s /etc /workspace/out; ln -s /tmp /workspace/tmp"}},
            {"tool": "code_read_file", "args": {"path": "out/hostname"}},
            {"tool": "code_write_file", "args": {"path": "tmp/escaped", "content": "no"}},
            {"tool": "code_execute", "args": {"language": "cobol", "code": "x"}},
            {"tool": "code_execute", "args": {"language": "python"}},
            {"tool": "code_execute", "args": {"language": "python", "code": big}},
            {"tool": "code_install_package", "args": {"package": "--index-url=http://evil/"}},
            {"tool": "code_execute", "args": {"language": "python", "code": "print('still serving')"}},
            {"tool": "code_destroy_sandbox", "args": {}},
        ]);
        let (listed, results) = stdio_session(runner, &ws, &home, &["--ask", "never"], &calls);
        assert_eq!(
            listed["tools"],
            json!([
                "code_destroy_sandbox",
                "code_execute",
                "code_install_package",
                "code_list_files",
                "code_read_file",
                "code_result",
                "code_write_file"
            ])
        );
        let schema = &listed["schemas"]["code_execute"];
        assert_eq!(schema["required"], json!(["language", "code"]), "{schema}");
        assert_eq!(
            schema["properties"]["language"]["enum"],
            json!(["python", "javascript", "shell"]),
            "{schema}"
        );
        let r = &results;
        assert_eq!(body(&r[0])["stdout"], "42\n", "{}", r[0]);
        assert_eq!(body(&r[0])["exit_code"], 0);
        let sandbox = body(&r[0])["sandbox_id"].as_str().unwrap().to_owned();
        let session = body(&r[0])["session"].as_str().unwrap().to_owned();
        assert_eq!(body(&r[2])["stdout"], "kept\n", "{}", r[2]);
        assert_eq!(
            body(&r[2])["sandbox_id"],
            sandbox.as_str(),
            "one sandbox per connection"
        );
        assert_eq!(body(&r[3])["stdout"], "kept\n");
        let listed = body(&r[4])["stdout"].as_str().unwrap_or_default();
        assert!(
            listed.starts_with("d ") && listed.ends_with(" src\n"),
            "{}",
            r[4]
        );
        assert_eq!(body(&r[5])["stdout"], "5\n", "{}", r[5]);
        assert_eq!(
            (r[6]["is_error"].as_bool(), &body(&r[6])["exit_code"]),
            (Some(true), &json!(4))
        );
        assert_eq!(body(&r[6])["stderr"], "err\n");
        assert_eq!(body(&r[7])["timed_out"], true, "{}", r[7]);
        assert_eq!(body(&r[7])["exit_code"], 124);
        for (i, needle) in [
            (8, "only reach the workspace"),
            (9, "only reach the workspace"),
            (13, "unknown variant `cobol`"),
            (14, "missing field `code`"),
            (15, "code is over"),
            (16, "is not a package name"),
        ] {
            assert!(error_text(&r[i]).contains(needle), "call {i}: {}", r[i]);
        }
        // Symlinks out of the workspace are refused inside the sandbox.
        for i in [11, 12] {
            assert_eq!(body(&r[i])["exit_code"], 3, "{}", r[i]);
            assert!(
                body(&r[i])["stderr"]
                    .as_str()
                    .unwrap()
                    .contains("leads outside /workspace")
            );
        }
        assert_eq!(body(&r[17])["stdout"], "still serving\n");
        assert_eq!(r[18]["is_error"], false, "{}", r[18]);
        // Removed, and recorded: every command of the tools is in the session.
        let ls = vg(runner, &ws, &home, &["sandbox", "ls", "--json"]);
        assert!(!ls.stdout.contains(&sandbox), "{ls}");
        let log = std::fs::read_to_string(home.logs().join(&session).join("commands.log")).unwrap();
        assert!(log.contains("python3 -c 'print(6*7)'"), "{log}");
    });
}

#[test]
fn a_risky_call_waits_for_a_decision_through_the_approval_channel() {
    if !sdk_installed() {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let calls = json!([
            {"tool": "code_execute", "args": {"language": "python", "code": "print('approved')"}},
            {"tool": "code_execute", "args": {"language": "python", "code": "print('denied')"}},
            {"tool": "code_destroy_sandbox", "args": {}},
        ]);
        // The decider: approves the first request, denies the second, from outside.
        let home_arg = home.logs();
        let decider = {
            let ws_path = ws.path().to_path_buf();
            let home_root = home_arg.parent().unwrap().to_path_buf();
            std::thread::spawn(move || {
                for verdict in ["approve", "deny"] {
                    let mut decided = false;
                    let found = wait_until(Duration::from_secs(60), || {
                        let mut list = Vg::new(runner, &ws_path);
                        list.env("VECTRAGUARD_HOME", &home_root.display().to_string())
                            .args(["approvals", "--json"]);
                        let pending: Vec<Value> =
                            serde_json::from_str(&list.run().stdout).unwrap_or_default();
                        let Some(first) = pending.first() else {
                            return false;
                        };
                        let mut decide = Vg::new(runner, &ws_path);
                        decide
                            .env("VECTRAGUARD_HOME", &home_root.display().to_string())
                            .args([
                                verdict,
                                first["session"].as_str().unwrap(),
                                &first["id"].to_string(),
                            ]);
                        decided = decide.run().code() == Some(0);
                        decided
                    });
                    assert!(found && decided, "nothing to {verdict}");
                }
            })
        };
        let (_, r) = stdio_session(runner, &ws, &home, &["--ask", "high"], &calls);
        decider.join().unwrap();
        assert_eq!(body(&r[0])["stdout"], "approved\n", "{}", r[0]);
        assert_eq!(r[1]["is_error"], true, "{}", r[1]);
        assert_eq!(body(&r[1])["exit_code"], 126, "{}", r[1]);
        assert!(
            body(&r[1])["error"]
                .as_str()
                .unwrap_or_default()
                .contains("not permitted"),
            "{}",
            r[1]
        );
    });
}

#[test]
fn streamable_http_needs_the_bearer_token() {
    if !sdk_installed() {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let port = super::harness::free_port();
        let addr = format!("127.0.0.1:{port}");
        let mut serve = Vg::new(runner, ws.path());
        serve
            .records_home(&home)
            .env("VECTRAGUARD_MCP_TOKEN", "test-token-1234")
            .args(["mcp", "serve", "--http", addr.as_str(), "--ask", "never"])
            .args(SANDBOX_OPTIONS);
        let server = serve.spawn();
        assert!(
            wait_until(Duration::from_secs(20), || std::net::TcpStream::connect(
                &addr
            )
            .is_ok()),
            "the server never listened on {addr}"
        );
        let url = format!("http://{addr}/mcp");
        let call = |token: &str| {
            let mut client = Vg::new(runner, ws.path());
            client
                .args([url.as_str(), token])
                .stdin(
                    json!([
                        {"tool": "code_execute", "args": {"language": "shell", "code": "echo over-http"}},
                        {"tool": "code_write_file", "args": {"path": "h.txt", "content": "via-http"}},
                        {"tool": "code_read_file", "args": {"path": "h.txt"}},
                        {"tool": "code_list_files", "args": {}},
                        {"tool": "code_destroy_sandbox", "args": {}},
                    ])
                    .to_string(),
                )
                .through_shell(&format!(
                    "exec {} {} http \"$2\" \"$3\"",
                    python().display(),
                    client_script().display()
                ));
            client.run()
        };
        let refused = call("wrong-token");
        assert_ne!(refused.code(), Some(0), "{refused}");
        // The status itself, without a token and with a wrong one.
        for header in ["X-None: 1", "Authorization: Bearer wrong-token"] {
            let status = std::process::Command::new("curl")
                .args([
                    "-s",
                    "-o",
                    "/dev/null",
                    "-w",
                    "%{http_code}",
                    "-X",
                    "POST",
                    "-H",
                    header,
                ])
                .arg(&url)
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&status.stdout), "401", "{header}");
        }
        let out = call("test-token-1234");
        out.assert_success();
        let r: Vec<Value> = out
            .stdout
            .lines()
            .skip(1)
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(body(&r[0])["stdout"], "over-http\n", "{out}");
        assert_eq!(body(&r[2])["stdout"], "via-http", "{out}");
        assert!(
            body(&r[3])["stdout"]
                .as_str()
                .unwrap_or_default()
                .contains("h.txt"),
            "{out}"
        );
        assert_eq!(r[4]["is_error"], false, "{out}");
        server.signal("TERM");
        server.finish(Duration::from_secs(20));
        // Not on another address than loopback.
        vg(
            runner,
            &ws,
            &home,
            &["mcp", "serve", "--http", "0.0.0.0:8765"],
        )
        .assert_code(125)
        .assert_stderr_contains("loopback only");
    });
}

/// `code_install_package` from a real package index on loopback (`tests/mcp/index.py`),
/// reached under a pinned name: the sandbox may reach that index and nothing else.
#[test]
fn a_package_installs_from_the_index_and_only_the_index_is_reachable() {
    if !sdk_installed() {
        return;
    }
    let dir = tempfile_dir();
    let port = super::harness::free_port();
    let mut command = std::process::Command::new("python3");
    command
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/index.py"))
        .arg(&dir)
        .arg(port.to_string());
    let index = super::harness::Helper::spawn(command);
    assert!(
        wait_until(Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        }),
        "the index never listened"
    );
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let calls = json!([
            {"tool": "code_install_package", "args": {"package": "vgdemo==1.0"}},
            {"tool": "code_execute", "args": {"language": "python",
                "code": "import vgdemo; print(vgdemo.VALUE)"}},
            // The index's host is allowed; other hosts are not.
            {"tool": "code_execute", "args": {"language": "shell",
                "code": format!("curl -s -o /dev/null -w '%{{http_code}}' http://pypi.test:{port}/simple/vgdemo/; echo; curl -s -m 5 http://other.test:{port}/ || echo refused")}},
            {"tool": "code_destroy_sandbox", "args": {}},
        ]);
        let index_url = format!("http://pypi.test:{port}/simple");
        let (_, r) = stdio_session_with(
            runner,
            &ws,
            &home,
            &["--ask", "never", "--pypi-index", index_url.as_str()],
            &[
                "--add-host",
                "pypi.test:127.0.0.1",
                "--add-host",
                "other.test:127.0.0.1",
            ],
            &calls,
        );
        assert_eq!(body(&r[0])["exit_code"], 0, "{}", r[0]);
        assert_eq!(body(&r[1])["stdout"], "42\n", "{}", r[1]);
        assert_eq!(body(&r[2])["stdout"], "200\nrefused\n", "{}", r[2]);
    });
    drop(index);
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vg-index-{}", super::harness::unique()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Red team: a call's `sandbox_id` reached (and removed) the person's own sandboxes,
/// where another `--ask` applied; `allowed_domains` took `*` and addresses; a
/// connection's sandbox stopped at its idle time-out was never replaced.
#[test]
fn calls_reach_only_this_servers_sandboxes_and_grant_no_patterns_or_addresses() {
    if !sdk_installed() {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let mine = format!("mine{}", super::harness::unique());
        vg(
            runner,
            &ws,
            &home,
            &["sandbox", "create", &mine, "--best-effort-limits"],
        )
        .assert_success();
        let calls = json!([
            {"tool": "code_execute", "args": {"language": "shell", "code": "echo first"}},
            {"tool": "code_execute", "args": {"language": "shell", "code": "echo x", "sandbox_id": mine}},
            {"tool": "code_destroy_sandbox", "args": {"sandbox_id": mine}},
            {"tool": "code_execute", "args": {"language": "shell", "code": "true",
                "network_enabled": true, "allowed_domains": ["*"]}},
            {"tool": "code_execute", "args": {"language": "shell", "code": "true",
                "network_enabled": true, "allowed_domains": ["192.0.2.2"]}},
            {"pause": 3},
            {"tool": "code_execute", "args": {"language": "shell", "code": "echo after-idle"}},
            {"tool": "code_destroy_sandbox", "args": {}},
        ]);
        let (_, r) = stdio_session_with(
            runner,
            &ws,
            &home,
            &["--ask", "never"],
            &["--idle-timeout", "1s"],
            &calls,
        );
        let first = body(&r[0])["sandbox_id"].as_str().unwrap().to_owned();
        for (i, needle) in [
            (1, "not a sandbox of this server's"),
            (2, "not a sandbox of this server's"),
            (3, "not a host name"),
            (4, "not a host name"),
        ] {
            assert!(error_text(&r[i]).contains(needle), "call {i}: {}", r[i]);
        }
        // The person's sandbox is untouched.
        let listed = vg(runner, &ws, &home, &["sandbox", "ls", "--json"]);
        assert!(listed.stdout.contains(&mine), "{listed}");
        // After an idle stop (the pause ran past it), a new sandbox serves the calls.
        assert_eq!(body(&r[5])["stdout"], "after-idle\n", "{}", r[5]);
        assert_ne!(body(&r[5])["sandbox_id"], first.as_str());
        vg(runner, &ws, &home, &["sandbox", "rm", "-f", &mine]).assert_success();
    });
}

/// `--pool 1`: a sandbox is made ahead; the first call uses it, and nothing is left
/// behind when the client goes.
#[test]
fn a_pool_keeps_a_sandbox_ready_and_leaves_nothing_behind() {
    if !sdk_installed() {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let calls = json!([
            {"pause": 2},
            {"tool": "code_execute", "args": {"language": "shell",
                "code": "echo pooled; stat -f -c %T /workspace"}},
        ]);
        let (_, r) = stdio_session(
            runner,
            &ws,
            &home,
            &["--ask", "never", "--pool", "1"],
            &calls,
        );
        // /workspace is the sandbox's own tmpfs, of the --disk size (fresh, bounded).
        assert_eq!(body(&r[0])["stdout"], "pooled\ntmpfs\n", "{}", r[0]);
        // Made ahead: its session started well before the call did.
        let session = body(&r[0])["session"].as_str().unwrap().to_owned();
        let meta = super::harness::session_metadata(&home.logs().join(&session));
        let started = vg_records::time::parse_rfc3339(meta["start_time"].as_str().unwrap())
            .unwrap()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let called = r[0]["at"].as_f64().unwrap();
        assert!(
            started < called - 1.0,
            "made at {started}, called at {called}"
        );
        // The client is gone: its sandbox and the one refilled behind it are removed.
        assert!(
            wait_until(Duration::from_secs(20), || {
                vg(runner, &ws, &home, &["sandbox", "ls", "--json"])
                    .stdout
                    .trim()
                    == "[]"
            }),
            "sandboxes left: {}",
            vg(runner, &ws, &home, &["sandbox", "ls", "--json"]).stdout
        );
    });
}

/// A client that leaves while the pool is still making its sandboxes: the server
/// waits for the creates in progress and removes what they made (a sandbox made
/// after the clean-up used to outlive the server).
#[test]
fn a_client_that_leaves_while_the_pool_fills_leaves_nothing_behind() {
    if !sdk_installed() {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let (_, r) = stdio_session(
            runner,
            &ws,
            &home,
            &["--ask", "never", "--pool", "2"],
            &json!([]),
        );
        assert!(r.is_empty(), "{r:?}");
        let left = vg(runner, &ws, &home, &["sandbox", "ls", "--json"]).stdout;
        assert_eq!(left.trim(), "[]", "sandboxes left once the server ended");
    });
}

/// A client that supports elicitation is asked about what its calls' commands wait
/// for, and its user's answer decides (recorded as any client's decision).
#[test]
fn the_clients_user_decides_held_commands_through_elicitation() {
    if !sdk_installed() {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let script = json!({
            "elicit": ["approve", "deny"],
            "calls": [
                {"tool": "code_execute", "args": {"language": "python", "code": "print('asked and approved')"}},
                {"tool": "code_execute", "args": {"language": "python", "code": "print('asked and denied')"}},
                {"tool": "code_destroy_sandbox", "args": {}},
            ],
        });
        // The calls' results, then what the client was asked.
        let (_, lines) = stdio_session(runner, &ws, &home, &["--ask", "high"], &script);
        let out = format!("{lines:?}");
        assert_eq!(body(&lines[0])["stdout"], "asked and approved\n", "{out}");
        assert_eq!(body(&lines[1])["exit_code"], 126, "{out}");
        let asked = lines.last().unwrap()["elicited"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(asked.len(), 2, "{out}");
        assert!(
            asked[0]
                .as_str()
                .unwrap()
                .contains("python3 -c print('asked and approved')")
                && asked[0].as_str().unwrap().contains("HIGH"),
            "{asked:?}"
        );
        // Decided by a client of the control channel, in the record.
        let session = body(&lines[0])["session"].as_str().unwrap().to_owned();
        let events = super::live::events(&home.logs().join(session));
        let who: Vec<&str> = events
            .iter()
            .filter(|e| e["type"] == "approval" && e["event"] == "decided")
            .filter_map(|e| e["who"]["by"].as_str())
            .collect();
        assert_eq!(who, ["client", "client"], "{events:?}");
    });
}

/// A call that runs past its `wait` returns a handle; `code_result` gets its result
/// (clients give up on calls after about a minute).
#[test]
fn a_long_call_returns_a_handle_that_code_result_polls() {
    if !sdk_installed() {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let calls = json!([
            {"tool": "code_execute", "args": {"language": "shell", "code": "sleep 3; echo late", "wait": 1}},
            {"tool": "code_result", "args": {"handle": "$last", "wait": 30}},
            {"tool": "code_result", "args": {"handle": "run-unknown"}},
            {"tool": "code_destroy_sandbox", "args": {}},
        ]);
        let (_, r) = stdio_session(runner, &ws, &home, &["--ask", "never"], &calls);
        assert_eq!(body(&r[0])["running"], true, "{}", r[0]);
        assert!(body(&r[0])["handle"].as_str().unwrap().starts_with("run-"));
        assert_eq!(body(&r[1])["stdout"], "late\n", "{}", r[1]);
        assert!(error_text(&r[2]).contains("no running call"), "{}", r[2]);
    });
}

/// With nobody to answer, a held call is denied when its time-out passes, and says so.
#[test]
fn an_unanswered_call_is_denied_at_its_time_out() {
    if !sdk_installed() {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let calls = json!([
            {"tool": "code_execute", "args": {"language": "python", "code": "print('never')"}},
        ]);
        let (_, r) = stdio_session_with(
            runner,
            &ws,
            &home,
            &["--ask", "high"],
            &["--approval-timeout", "1s"],
            &calls,
        );
        assert_eq!(body(&r[0])["exit_code"], 126, "{}", r[0]);
        assert_eq!(body(&r[0])["stdout"], "", "{}", r[0]);
        let session = body(&r[0])["session"].as_str().unwrap().to_owned();
        let events = super::live::events(&home.logs().join(session));
        assert!(
            events
                .iter()
                .any(|e| e["event"] == "decided" && e["who"]["by"] == "timeout"),
            "{events:?}"
        );
    });
}
