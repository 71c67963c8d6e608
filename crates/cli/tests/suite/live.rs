//! Running sessions, from outside: `ps`, `stop`, `net allow|deny|rules`, through
//! each session's control socket (`session-…/control.sock`), which the sandbox
//! itself can neither see nor reach.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::harness::{
    Output, RecordsHome, Runner, Running, Vg, Workspace, each_identity, unique, wait_until,
};

/// Starts `sandbox run [options] -- cmd…` named `name` in the background and waits
/// until its control socket is served.
pub(super) fn start_live(
    runner: Runner,
    ws: &Workspace,
    home: &RecordsHome,
    name: &str,
    options: &[&str],
    cmd: &[&str],
) -> (Running, PathBuf) {
    let mut all = vec!["--name", name];
    all.extend_from_slice(options);
    let running = Vg::sandbox(runner, ws, &all, cmd)
        .records_home(home)
        .spawn();
    let mut socket = None;
    let up = wait_until(Duration::from_secs(20), || {
        socket = home
            .sessions()
            .into_iter()
            .map(|d| d.join("control.sock"))
            .find(|s| s.exists());
        socket.is_some()
    });
    assert!(up, "the session's control socket never appeared");
    (running, socket.unwrap_or_default())
}

pub(super) fn vg(runner: Runner, ws: &Workspace, home: &RecordsHome, args: &[&str]) -> Output {
    Vg::new(runner, ws.path())
        .records_home(home)
        .args(args)
        .run()
}

/// A server on loopback that accepts and closes connections, counting them.
pub(super) fn counting_server() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = std::sync::Arc::clone(&accepted);
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(conn);
        }
    });
    (port, accepted)
}

pub(super) fn events(dir: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn ps_lists_a_running_session_and_stop_ends_it_as_a_timeout_would() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let name = format!("live-{}", unique());
        let (running, socket) = start_live(runner, &ws, &home, &name, &[], &["sleep", "60"]);
        let dir = socket.parent().unwrap().to_path_buf();
        let id = dir.file_name().unwrap().to_str().unwrap().to_owned();

        let ps = vg(runner, &ws, &home, &["ps", "--json"]);
        ps.assert_success();
        let listed: Vec<Value> = serde_json::from_str(&ps.stdout).unwrap();
        assert_eq!(listed.len(), 1, "{ps}");
        assert_eq!(listed[0]["id"], id.as_str(), "{ps}");
        assert_eq!(listed[0]["name"], name.as_str(), "{ps}");
        assert_eq!(
            listed[0]["command"],
            serde_json::json!(["sleep", "60"]),
            "{ps}"
        );
        let table = vg(runner, &ws, &home, &["ps"]);
        table.assert_success().assert_stdout_contains(&id);

        let stop = vg(runner, &ws, &home, &["stop", &name]);
        stop.assert_success();
        let out = running.finish(Duration::from_secs(20));
        out.assert_code(124)
            .assert_stderr_contains("stopped by `vectraguard stop`");
        let meta = super::harness::session_metadata(&dir);
        assert_eq!(meta["status"], "timeout", "{meta}");
        assert_eq!(meta["exit_code"], 124, "{meta}");
        let stops: Vec<Value> = events(&dir)
            .into_iter()
            .filter(|e| e["type"] == "stop")
            .collect();
        assert_eq!(stops.len(), 1, "{stops:?}");
        assert_eq!(stops[0]["uid"], runner.invoker().uid, "{stops:?}");
        assert_eq!(stops[0]["kill"], false, "{stops:?}");
        assert!(stops[0]["pid"].as_i64().is_some_and(|p| p > 0), "{stops:?}");
        assert!(!socket.exists(), "the socket outlived the session");

        // Ended: nothing to stop, and `ps` no longer lists it.
        vg(runner, &ws, &home, &["stop", &name])
            .assert_code(125)
            .assert_stderr_contains("not running");
        let ps = vg(runner, &ws, &home, &["ps", "--json"]);
        assert_eq!(ps.stdout.trim(), "[]", "{ps}");
    });
}

#[test]
fn stop_kill_ends_a_session_that_ignores_sigterm() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let name = format!("kill-{}", unique());
        // Ignores SIGTERM: only SIGKILL (at once with --kill, not after the grace).
        let (running, socket) = start_live(
            runner,
            &ws,
            &home,
            &name,
            &["--kill-grace", "60s"],
            &["sh", "-c", "trap '' TERM; while :; do sleep 1; done"],
        );
        let started = std::time::Instant::now();
        vg(runner, &ws, &home, &["stop", "--kill", &name]).assert_success();
        let out = running.finish(Duration::from_secs(20));
        out.assert_code(124);
        assert!(started.elapsed() < Duration::from_secs(30), "{out}");
        let stop: Vec<Value> = events(socket.parent().unwrap())
            .into_iter()
            .filter(|e| e["type"] == "stop")
            .collect();
        assert_eq!(stop[0]["kill"], true, "{stop:?}");
    });
}

#[test]
fn net_allow_lets_a_refused_name_through_and_net_deny_blocks_the_next_connection() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let name = format!("net-{}", unique());
        let (port, accepted) = counting_server();
        // Retries until a connection succeeds, then until one fails.
        let script = format!(
            r#"
i=0; until (exec 3<>/dev/tcp/echo.test/{port}) 2>/dev/null; do i=$((i+1)); [ $i -gt 300 ] && {{ echo never-allowed; exit 1; }}; sleep 0.1; done
echo allowed
i=0; while (exec 3<>/dev/tcp/echo.test/{port}) 2>/dev/null; do i=$((i+1)); [ $i -gt 300 ] && {{ echo never-denied; exit 1; }}; sleep 0.1; done
echo denied
"#
        );
        let (running, socket) = start_live(
            runner,
            &ws,
            &home,
            &name,
            &["--network", "allow", "--add-host", "echo.test:127.0.0.1"],
            &["bash", "-c", &script],
        );
        let target = format!("echo.test:{port}");
        // Refused until the rule comes.
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 0);
        vg(runner, &ws, &home, &["net", "allow", &name, &target])
            .assert_success()
            .assert_stdout_contains(&format!("allow {target}"));
        let through = wait_until(Duration::from_secs(20), || {
            accepted.load(std::sync::atomic::Ordering::SeqCst) > 0
        });
        assert!(through, "the allowed name never got through");
        let rules = vg(runner, &ws, &home, &["net", "rules", &name]);
        rules
            .assert_success()
            .assert_stdout_contains(&format!("allow {target}  (live)"));
        vg(runner, &ws, &home, &["net", "deny", &name, &target]).assert_success();
        let out = running.finish(Duration::from_secs(40));
        out.assert_success();
        assert_eq!(out.lines(), ["allowed", "denied"], "{out}");
        let added: Vec<Value> = events(socket.parent().unwrap())
            .into_iter()
            .filter(|e| e["type"] == "network" && e["event"] == "rule-added")
            .collect();
        assert_eq!(added.len(), 2, "{added:?}");
        assert_eq!(added[0]["rule"], format!("allow {target}"), "{added:?}");
        assert_eq!(added[1]["rule"], format!("deny {target}"), "{added:?}");
        assert_eq!(added[1]["uid"], runner.invoker().uid, "{added:?}");
    });
}

#[test]
fn bad_targets_unknown_sessions_and_unmediated_networks_exit_125() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let name = format!("bad-{}", unique());
        let (running, socket) = start_live(runner, &ws, &home, &name, &[], &["sleep", "60"]);
        vg(runner, &ws, &home, &["net", "allow", &name, "example.com"])
            .assert_code(125)
            .assert_stderr_contains("network mode is not `allow`");
        // Listing rules of an unmediated session says why there are none.
        vg(runner, &ws, &home, &["net", "rules", &name])
            .assert_code(125)
            .assert_stderr_contains("network mode is not `allow`");
        vg(
            runner,
            &ws,
            &home,
            &["stop", &format!("nosuch-{}", unique())],
        )
        .assert_code(125)
        .assert_stderr_contains("no session matches");
        vg(runner, &ws, &home, &["stop", &name]).assert_success();
        running.finish(Duration::from_secs(20)).assert_code(124);
        // No rule was added to the record.
        assert!(
            !events(socket.parent().unwrap())
                .iter()
                .any(|e| e["event"] == "rule-added")
        );

        let (running, _) = start_live(
            runner,
            &ws,
            &home,
            &format!("{name}-allow"),
            &["--network", "allow", "--allow", "example.com"],
            &["sleep", "60"],
        );
        for bad in ["exa mple.com", "example.com:99999", "", "a..b"] {
            vg(
                runner,
                &ws,
                &home,
                &["net", "allow", &format!("{name}-allow"), bad],
            )
            .assert_code(125)
            .assert_stderr_contains("bad network rule");
        }
        let rules = vg(
            runner,
            &ws,
            &home,
            &["net", "rules", &format!("{name}-allow")],
        );
        rules.assert_success();
        assert_eq!(rules.lines(), ["allow example.com"], "{rules}");
        vg(
            runner,
            &ws,
            &home,
            &["stop", "--kill", &format!("{name}-allow")],
        )
        .assert_success();
        running.finish(Duration::from_secs(20)).assert_code(124);
    });
}

/// ATTACK: the sandboxed command looks for its own session's control socket (by
/// name anywhere, and at the host's path) to stop itself or allow a destination.
#[test]
fn the_sandbox_cannot_see_or_reach_the_control_socket() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let logs = home.logs();
        let script = format!(
            r#"
sleep 2
echo "found=$(find / -xdev -name control.sock 2>/dev/null; find / -name 'control.sock' 2>/dev/null | head -5)"
{python} - <<'PY'
import glob, socket
paths = glob.glob("{logs}/session-*/control.sock")
print("globbed=%d" % len(paths))
for p in paths + ["{logs}/x/control.sock"]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(p)
        s.sendall(b'{{"v":1,"op":"stop","kill":true}}\n')
        print("connected=" + p)
    except OSError as e:
        print("refused=%s" % e.errno)
PY
"#,
            logs = logs.display(),
            python = super::harness::PYTHON,
        );
        // The probe starts 2 s in, when the socket is known to be served.
        let (running, socket) = start_live(
            runner,
            &ws,
            &home,
            &format!("attack-{}", unique()),
            &[],
            &["bash", "-c", &script],
        );
        let out = running.finish(Duration::from_secs(30));
        out.assert_success();
        assert_eq!(out.field("found"), "", "{out}");
        assert_eq!(out.field("globbed"), "0", "{out}");
        assert!(!out.stdout.contains("connected="), "{out}");
        let session = socket.parent().unwrap();
        assert!(events(session).iter().all(|e| e["type"] != "stop"), "{out}");
        assert!(!socket.exists());
    });
}
