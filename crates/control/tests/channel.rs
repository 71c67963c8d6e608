//! The control channel end to end over real sockets in temporary folders: a
//! session-like handler backed by a real broker, served by `ControlServer`,
//! driven by `ControlClient`.

// The whole file is test code, helpers included (clippy's allow-*-in-tests only
// covers `#[test]` functions).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use vg_control::broker::{PendingView, Request, Subject};
use vg_control::protocol::{ControlError, NetRule, RuleAction, SessionStatus};
use vg_control::server::{BindError, MAX_CLIENTS};
use vg_control::{
    Broker, ClientError, ControlClient, ControlServer, Decider, Handler, Level, Peer, Scope,
    Timeouts, Verdict, discover, socket_path,
};

/// What a session would do, minus the sandbox.
struct Session {
    broker: Broker,
    rules: Mutex<Vec<NetRule>>,
    stopped: Mutex<Option<(bool, Peer)>>,
    calls: AtomicUsize,
}

impl Session {
    fn new(timeouts: Timeouts) -> Arc<Self> {
        Arc::new(Self {
            broker: Broker::new(timeouts, |_| {}).unwrap(),
            rules: Mutex::new(vec![NetRule {
                action: RuleAction::Allow,
                target: "example.com:443".into(),
                live: false,
            }]),
            stopped: Mutex::new(None),
            calls: AtomicUsize::new(0),
        })
    }

    fn called(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}

impl Handler for Session {
    fn status(&self) -> Result<SessionStatus, ControlError> {
        self.called();
        Ok(SessionStatus {
            id: "session-20251219T101053Z-9af4c3".into(),
            name: Some("build".into()),
            agent: None,
            command: vec!["make".into()],
            started: "2025-12-19T10:10:53Z".into(),
            pid: std::process::id(),
            pending_approvals: self.broker.pending().len(),
        })
    }

    fn stop(&self, kill: bool, peer: &Peer) -> Result<(), ControlError> {
        self.called();
        *self.stopped.lock().unwrap() = Some((kill, *peer));
        Ok(())
    }

    fn net_rules(&self) -> Result<Vec<NetRule>, ControlError> {
        self.called();
        Ok(self.rules.lock().unwrap().clone())
    }

    fn net_add(&self, action: RuleAction, target: &str, _: &Peer) -> Result<NetRule, ControlError> {
        self.called();
        if target.is_empty() || target.contains(char::is_whitespace) {
            return Err(ControlError::BadRule {
                message: format!("{target:?} is not HOST[:PORT]"),
            });
        }
        let rule = NetRule {
            action,
            target: target.into(),
            live: true,
        };
        self.rules.lock().unwrap().insert(0, rule.clone());
        Ok(rule)
    }

    fn approvals(&self) -> Result<Vec<PendingView>, ControlError> {
        self.called();
        Ok(self.broker.pending())
    }

    fn decide(
        &self,
        id: u64,
        verdict: Verdict,
        scope: Scope,
        peer: &Peer,
    ) -> Result<(), ControlError> {
        self.called();
        let who = Decider::Client {
            uid: peer.uid,
            pid: peer.pid,
        };
        self.broker.decide(id, verdict, scope, who).map(|_| ())
    }
}

const LONG: Timeouts = Timeouts {
    low: Duration::from_secs(600),
    medium: Duration::from_secs(600),
    high: Duration::from_secs(600),
    critical: Duration::from_secs(600),
    all: None,
};

fn my_uid() -> u32 {
    let file = tempfile::NamedTempFile::new().unwrap();
    file.as_file().metadata().unwrap().uid()
}

/// A 0700 session folder under a fresh temporary root.
fn session_dir(root: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

fn serve(timeouts: Timeouts) -> (tempfile::TempDir, PathBuf, Arc<Session>, ControlServer) {
    let root = tempfile::tempdir().unwrap();
    let dir = session_dir(root.path(), "session-20251219T101053Z-9af4c3");
    let session = Session::new(timeouts);
    let path = socket_path(&dir);
    let handler: Arc<dyn Handler> = session.clone();
    let server = ControlServer::bind(&path, my_uid(), handler).unwrap();
    (root, path, session, server)
}

fn exec_request(argv: &[&str]) -> Request {
    Request {
        subject: Subject::Exec {
            pid: 7,
            path: format!("/bin/{}", argv[0]),
            argv: argv.iter().map(|arg| (*arg).to_string()).collect(),
            cwd: "/work".into(),
            parents: Vec::new(),
            exact: String::new(),
        },
        level: Level::High,
        reason: "test".into(),
        rule: None,
    }
}

fn refused(result: Result<impl std::fmt::Debug, ClientError>) -> ControlError {
    match result {
        Err(ClientError::Refused { error, .. }) => error,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn the_socket_is_owner_only_and_removed_on_drop() {
    let (_root, path, _session, server) = serve(LONG);
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o600);
    drop(server);
    assert!(!path.exists());
    let error = ControlClient::connect(&path).err().unwrap();
    assert!(matches!(error, ClientError::NotRunning { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "session session-20251219T101053Z-9af4c3 is not running (it has no control socket; see `vectraguard ps`)"
    );
}

#[test]
fn dropping_the_server_ends_open_connections_at_once() {
    let (_root, path, session, server) = serve(LONG);
    let idle = UnixStream::connect(&path).unwrap();
    ControlClient::connect(&path).unwrap().status().unwrap(); // `idle` is being served
    let started = std::time::Instant::now();
    drop(server);
    let mut rest = String::new();
    assert_eq!(BufReader::new(&idle).read_line(&mut rest).unwrap(), 0);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    // The client threads let go of the session too.
    for _ in 0..100 {
        if Arc::strong_count(&session) == 1 {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!(
        "the handler is still held by {} threads",
        Arc::strong_count(&session) - 1
    );
}

#[test]
fn dropping_the_server_stops_it_without_its_socket_path() {
    // The acceptor is woken by shutting the listening socket down, not by connecting
    // to its path: with the socket file gone (removed, or its folder moved), dropping
    // the server still returns at once.
    let (_root, path, _session, server) = serve(LONG);
    std::fs::remove_file(&path).unwrap();
    let (done, dropped) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(server);
        let _ = done.send(());
    });
    assert!(
        dropped.recv_timeout(Duration::from_secs(5)).is_ok(),
        "dropping the server hung in accept"
    );
}

#[test]
fn every_request_round_trips() {
    let (_root, path, session, _server) = serve(LONG);
    let mut client = ControlClient::connect(&path).unwrap();
    assert_eq!(client.session(), "session-20251219T101053Z-9af4c3");

    let status = client.status().unwrap();
    assert_eq!(
        (status.name.as_deref(), status.pending_approvals),
        (Some("build"), 0)
    );

    let added = client.net_add(RuleAction::Deny, "evil.example:80").unwrap();
    assert!(added.live);
    let rules = client.net_rules().unwrap();
    assert_eq!(rules.len(), 2);
    assert_eq!(rules[0].target, "evil.example:80", "live rules go in front");
    let bad = refused(client.net_add(RuleAction::Allow, "two words"));
    assert!(matches!(bad, ControlError::BadRule { .. }), "{bad:?}");

    // An approval held by a "tracer" thread, decided over the channel.
    let ticket = session.broker.submit(exec_request(&["rm", "-rf", "x"]));
    let pending = client.approvals().unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, 1);
    assert_eq!(client.status().unwrap().pending_approvals, 1);
    client.decide(1, Verdict::Approve, Scope::Once).unwrap();
    let decision = ticket.wait();
    assert!(decision.approved());
    assert_eq!(
        decision.who,
        Decider::Client {
            uid: my_uid(),
            pid: i32::try_from(std::process::id()).unwrap()
        }
    );
    assert_eq!(
        refused(client.decide(1, Verdict::Deny, Scope::Once)),
        ControlError::AlreadyDecided { id: 1 }
    );
    assert_eq!(
        refused(client.decide(42, Verdict::Deny, Scope::Once)),
        ControlError::UnknownRequest { id: 42 }
    );

    client.stop(true).unwrap();
    let (kill, peer) = session.stopped.lock().unwrap().unwrap();
    assert!(kill);
    assert_eq!(peer.uid, my_uid());
    // The session still serves after every error above.
    assert_eq!(client.status().unwrap().command, ["make"]);
}

#[test]
fn malformed_and_wrong_version_requests_get_an_error_and_the_connection_goes_on() {
    let (_root, path, session, _server) = serve(LONG);
    let mut client = ControlClient::connect(&path).unwrap();
    for (line, expect) in [
        (&b"not json\n"[..], "malformed"),
        (b"{\"v\":1,\"op\":\"format-disk\"}\n", "malformed"),
        (b"{\"op\":\"status\"}\n", "malformed"),
        (b"{\"v\":2,\"op\":\"status\"}\n", "unsupported-version"),
        (b"\n", "malformed"),
    ] {
        client.write_raw(line).unwrap();
        let error = refused(client.read_reply());
        let code = serde_json::to_value(&error).unwrap()["code"].clone();
        assert_eq!(code, expect, "{}", String::from_utf8_lossy(line));
    }
    assert_eq!(session.calls.load(Ordering::SeqCst), 0);
    client.status().unwrap();
}

#[test]
fn an_oversize_request_is_refused_and_the_server_keeps_serving() {
    let (_root, path, _session, _server) = serve(LONG);
    let mut client = ControlClient::connect(&path).unwrap();
    let mut huge = br#"{"v":1,"op":"net-add","action":"allow","target":""#.to_vec();
    huge.extend(std::iter::repeat_n(
        b'a',
        vg_control::protocol::MAX_LINE * 2,
    ));
    huge.extend(b"\"}\n");
    // The server stops reading at the cap; the rest of our write may fail.
    let _ = client.write_raw(&huge);
    assert_eq!(
        refused(client.read_reply()),
        ControlError::TooLarge {
            limit: vg_control::protocol::MAX_LINE
        }
    );
    let mut again = ControlClient::connect(&path).unwrap();
    again.status().unwrap();
}

#[test]
fn idle_clients_cannot_starve_the_session() {
    let (_root, path, _session, _server) = serve(LONG);
    // MAX_CLIENTS connections that never send anything…
    let idle: Vec<UnixStream> = (0..MAX_CLIENTS)
        .map(|_| UnixStream::connect(&path).unwrap())
        .collect();
    // …so one more is told the session is busy, not left hanging.
    let mut extra = ControlClient::connect(&path).unwrap();
    assert_eq!(refused(extra.status()), ControlError::Busy);
    drop(idle);
    // Their threads end on end of file; then clients are served again.
    let mut served = false;
    for _ in 0..100 {
        if ControlClient::connect(&path).unwrap().status().is_ok() {
            served = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(served);
}

#[test]
fn a_stuck_client_is_dropped_after_the_read_timeout() {
    let (_root, path, _session, _server) = serve(LONG);
    let mut stuck = UnixStream::connect(&path).unwrap();
    stuck.write_all(b"{\"v\":1,").unwrap(); // never finished
    stuck
        .set_read_timeout(Some(vg_control::server::IO_TIMEOUT * 3))
        .unwrap();
    let mut rest = String::new();
    let started = std::time::Instant::now();
    // The server closes it: end of file, well before our own time-out.
    let read = BufReader::new(&stuck).read_line(&mut rest).unwrap();
    assert_eq!(read, 0);
    assert!(started.elapsed() < vg_control::server::IO_TIMEOUT * 2);
}

#[test]
fn a_client_trickling_its_request_is_dropped_after_the_line_timeout() {
    let (_root, path, _session, _server) = serve(LONG);
    let mut slow = UnixStream::connect(&path).unwrap();
    let started = std::time::Instant::now();
    let limit = vg_control::server::IO_TIMEOUT + Duration::from_secs(2);
    // One byte every 250 ms: each read is quick, the line never ends.
    while started.elapsed() < limit {
        if slow.write_all(b" ").is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(
        started.elapsed() < limit,
        "still connected after {:?}",
        started.elapsed()
    );
}

#[test]
fn an_unanswered_approval_times_out_to_deny() {
    let (_root, path, session, _server) =
        serve(Timeouts::with_override(Some(Duration::from_millis(100))));
    let decision = session.broker.ask(exec_request(&["curl", "x"]));
    assert_eq!(
        (decision.verdict, decision.who),
        (Verdict::Deny, Decider::Timeout)
    );
    let mut client = ControlClient::connect(&path).unwrap();
    assert!(client.approvals().unwrap().is_empty());
    assert_eq!(
        refused(client.decide(1, Verdict::Approve, Scope::Once)),
        ControlError::AlreadyDecided { id: 1 }
    );
}

#[test]
fn concurrent_held_requests_are_decided_by_several_clients() {
    let (_root, path, session, _server) = serve(LONG);
    let (seen, new_requests) = mpsc::channel();
    session
        .broker
        .subscribe(move |view| seen.send(view.id).unwrap());
    let tickets: Vec<_> = (0..6)
        .map(|n| {
            session
                .broker
                .submit(exec_request(&["touch", &n.to_string()]))
        })
        .collect();
    let deciders: Vec<_> = (0..6)
        .map(|_| {
            let id = new_requests.recv().unwrap();
            let path = path.clone();
            std::thread::spawn(move || {
                let verdict = if id % 2 == 0 {
                    Verdict::Approve
                } else {
                    Verdict::Deny
                };
                ControlClient::connect(&path)
                    .unwrap()
                    .decide(id, verdict, Scope::Once)
                    .unwrap();
            })
        })
        .collect();
    for decider in deciders {
        decider.join().unwrap();
    }
    for ticket in tickets {
        let decision = ticket.wait();
        assert_eq!(decision.approved(), decision.id.unwrap() % 2 == 0);
    }
}

#[test]
fn bind_replaces_a_dead_sessions_socket_but_nothing_else() {
    let root = tempfile::tempdir().unwrap();
    let dir = session_dir(root.path(), "session-a");
    let path = socket_path(&dir);
    let handler = || -> Arc<dyn Handler> { Session::new(LONG) };
    // A socket left by a supervisor that died: nobody listens any more.
    drop(UnixListener::bind(&path).unwrap());
    let server = ControlServer::bind(&path, my_uid(), handler()).unwrap();
    // A live one is never taken over.
    let error = ControlServer::bind(&path, my_uid(), handler())
        .err()
        .unwrap();
    assert!(matches!(error, BindError::InUse { .. }), "{error}");
    drop(server);
    // Nor is a file that is not a socket.
    std::fs::write(&path, b"keep me").unwrap();
    let error = ControlServer::bind(&path, my_uid(), handler())
        .err()
        .unwrap();
    assert!(matches!(error, BindError::NotASocket { .. }), "{error}");
    assert_eq!(std::fs::read(&path).unwrap(), b"keep me");
    // And the folder must be closed to others, else the 0600 is moot.
    let open = root.path().join("session-b");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let error = ControlServer::bind(&socket_path(&open), my_uid(), handler())
        .err()
        .unwrap();
    assert!(
        matches!(error, BindError::OpenDirectory { mode: 0o755, .. }),
        "{error}"
    );
    assert!(!socket_path(&open).exists());
}

#[test]
fn discover_finds_running_sessions_and_skips_dead_ones() {
    let root = tempfile::tempdir().unwrap();
    let live = session_dir(root.path(), "session-20251219T101053Z-000001");
    let dead = session_dir(root.path(), "session-20251219T101053Z-000002");
    session_dir(root.path(), "session-20251219T101053Z-000003"); // finished: no socket
    session_dir(root.path(), "not-a-session");
    let _server = ControlServer::bind(&socket_path(&live), my_uid(), Session::new(LONG)).unwrap();
    drop(UnixListener::bind(socket_path(&dead)).unwrap());
    let found = discover::running(root.path()).unwrap();
    assert!(found.unreachable.is_empty());
    let ids: Vec<&str> = found
        .live
        .iter()
        .map(|session| session.id.as_str())
        .collect();
    assert_eq!(ids, ["session-20251219T101053Z-000001"]);
    let mut live = found.live.into_iter().next().unwrap();
    assert_eq!(live.client.status().unwrap().command, ["make"]);
    // A dead session's socket says so.
    let error = ControlClient::connect(&socket_path(&dead)).err().unwrap();
    assert_eq!(
        error.to_string(),
        "session session-20251219T101053Z-000002 is not running (its supervisor is gone)"
    );
    assert!(
        discover::running(&root.path().join("missing"))
            .unwrap()
            .live
            .is_empty()
    );
}

/// Set by `a_peer_of_another_uid_is_refused` for its child.
const CHILD_SOCKET: &str = "VG_CONTROL_TEST_FOREIGN_SOCKET";

#[test]
fn a_peer_of_another_uid_is_refused() {
    let me = my_uid();
    if me != 0 {
        // Unprivileged: serve a session "owned" by another uid; we are that
        // other user's peer and must be refused like any stranger.
        let root = tempfile::tempdir().unwrap();
        let dir = session_dir(root.path(), "session-x");
        let session = Session::new(LONG);
        let _server = ControlServer::bind(&socket_path(&dir), me + 1, session.clone()).unwrap();
        let mut client = ControlClient::connect(&socket_path(&dir)).unwrap();
        let error = client.status().err().unwrap();
        assert!(
            matches!(error, ClientError::NotPermitted { .. }),
            "{error:?}"
        );
        assert_eq!(session.calls.load(Ordering::SeqCst), 0);
        return;
    }
    // As root: root may control anyone's session…
    let (_root, path, session, server) = {
        let root = tempfile::tempdir().unwrap();
        let dir = session_dir(root.path(), "session-y");
        let session = Session::new(LONG);
        let server = ControlServer::bind(&socket_path(&dir), 1001, session.clone()).unwrap();
        (root, socket_path(&dir), session, server)
    };
    ControlClient::connect(&path).unwrap().status().unwrap();
    assert_eq!(session.calls.load(Ordering::SeqCst), 1);
    // …but `nobody` may not, even with the file permissions opened up so that
    // only the peer check stands in the way.
    std::fs::set_permissions(
        path.parent().unwrap(),
        std::fs::Permissions::from_mode(0o711),
    )
    .unwrap();
    std::fs::set_permissions(_root.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "foreign_peer_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_SOCKET, &path)
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains(r#"ANSWER {"v":1,"error":{"code":"not-permitted","uid":65534}}"#),
        "{stdout}"
    );
    assert_eq!(
        session.calls.load(Ordering::SeqCst),
        1,
        "the handler never saw nobody"
    );
    drop(server);
}

/// The child of `a_peer_of_another_uid_is_refused`, run as `nobody`: sends a
/// request and prints the raw answer. Does nothing when run on its own.
#[test]
fn foreign_peer_child() {
    let Some(path) = std::env::var_os(CHILD_SOCKET) else {
        return;
    };
    let mut stream = UnixStream::connect(PathBuf::from(path)).unwrap();
    // The refusal may come (and the socket close) before our request is sent.
    let _ = stream.write_all(b"{\"v\":1,\"op\":\"stop\",\"kill\":true}\n");
    let mut answer = String::new();
    BufReader::new(&stream).read_line(&mut answer).unwrap();
    println!("ANSWER {}", answer.trim_end());
}
