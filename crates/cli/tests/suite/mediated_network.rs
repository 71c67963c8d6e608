//! `--network allow`: every DNS question and connection goes through the mediator,
//! which allows by rule, relays, and records. Real servers listen on the host's
//! loopback and are reached under names pinned with `--add-host`; the clients are the
//! real curl, Python's socket module and bash's `/dev/tcp`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use serde_json::Value;

use super::harness::{
    RecordsHome, Runner, Vg, Workspace, each_identity, py, require_tools, session_metadata, unique,
};

/// An HTTP/1.0 server on the host's loopback answering every request with `body`.
pub(super) struct HttpServer {
    pub(super) port: u16,
    pub(super) accepted: Arc<AtomicUsize>,
}

impl HttpServer {
    pub(super) fn start(body: Vec<u8>) -> Self {
        Self::start_at("127.0.0.1", body)
    }

    /// On `ip` (e.g. `0.0.0.0`: every interface), a free port.
    pub(super) fn start_at(ip: &str, body: Vec<u8>) -> Self {
        let listener = TcpListener::bind((ip, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let body = Arc::new(body);
        let accepted = Arc::new(AtomicUsize::new(0));
        let (b, a) = (Arc::clone(&body), Arc::clone(&accepted));
        thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                a.fetch_add(1, Ordering::SeqCst);
                let b = Arc::clone(&b);
                thread::spawn(move || serve_http(conn, &b));
            }
        });
        Self { port, accepted }
    }
}

fn serve_http(conn: TcpStream, body: &[u8]) {
    let mut reader = BufReader::new(&conn);
    let mut line = String::new();
    // Headers end with an empty line.
    while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
        if line == "\r\n" || line == "\n" {
            break;
        }
        line.clear();
    }
    let mut w = &conn;
    let _ = write!(
        w,
        "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = w.write_all(body);
}

/// A TCP echo server on the host's loopback that counts its connections.
struct EchoServer {
    port: u16,
    accepted: Arc<AtomicUsize>,
}

impl EchoServer {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let a = Arc::clone(&accepted);
        thread::spawn(move || {
            for mut conn in listener.incoming().flatten() {
                a.fetch_add(1, Ordering::SeqCst);
                thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = conn.read(&mut buf) {
                        if n == 0 || conn.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Self { port, accepted }
    }
}

/// The `network` events of the only session in `home`.
pub(super) fn network_events(home: &RecordsHome) -> Vec<Value> {
    let text = std::fs::read_to_string(home.only_session().join("events.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "network")
        .collect()
}

/// The escape attempts the gVisor and container escape tests make, each refused in
/// the session's `network` events: connects to the gateway, a private address and
/// the metadata address, and UDP to two outside addresses.
pub(super) fn assert_escapes_refused(home: &RecordsHome, what: &str) {
    let events = network_events(home);
    let refused =
        |pred: &dyn Fn(&Value) -> bool| events.iter().any(|e| e["decision"] == "deny" && pred(e));
    for addr in ["198.18.0.1", "10.255.255.1", "169.254.169.254"] {
        assert!(
            refused(&|e| e["event"] == "connect" && e["address"] == addr),
            "{what}: no refusal of {addr}\n{events:#?}"
        );
    }
    for addr in ["192.0.2.7", "192.0.2.53"] {
        assert!(
            refused(&|e| e["address"] == addr && e["protocol"] == "udp"),
            "{what}: no refusal of UDP to {addr}\n{events:#?}"
        );
    }
}

fn events_where(events: &[Value], pred: impl Fn(&Value) -> bool) -> Vec<&Value> {
    events.iter().filter(|e| pred(e)).collect()
}

pub(super) fn show_network(runner: Runner, home: &RecordsHome, cwd: &Path) -> String {
    let session = home.only_session();
    let id = session.file_name().unwrap().to_str().unwrap().to_owned();
    let out = Vg::new(runner, cwd)
        .records_home(home)
        .args(["logs", "show", &id, "--network"])
        .run();
    out.assert_success();
    out.stdout.clone()
}

#[test]
fn allowed_name_and_port_work_with_curl_python_and_bash() {
    if !require_tools(&[("/usr/bin/curl", "curl")]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let marker = format!("hello-from-host-{}", unique());
        // Larger than one segment and one socket buffer, so the relay loops.
        let mut body = marker.clone().into_bytes();
        body.resize(300_000, b'x');
        let web = HttpServer::start(body);
        let echo = EchoServer::start();
        let (p, e) = (web.port.to_string(), echo.port.to_string());
        let script = format!(
            r#"
set -u
echo "curl=$(curl -sS http://web.test:{p}/ | head -c {n})"
echo "curl_size=$(curl -sS http://web.test:{p}/ | wc -c)"
echo "noproxy=$(http_proxy=http://proxy.invalid:9 curl -sS --noproxy '*' http://web.test:{p}/ | head -c {n})"
exec 3<>/dev/tcp/echo.test/{e}
echo bash-echo-line >&3
read -r reply <&3
echo "bash=$reply"
exec 3>&-
{python} -c '
import socket
s = socket.create_connection(("echo.test", {e}), timeout=5)
s.sendall(b"python-echo")
print("python=" + s.recv(100).decode())
'
"#,
            n = marker.len(),
            python = super::harness::PYTHON,
        );
        let out = Vg::sandbox(
            runner,
            &ws,
            &[
                "--add-host",
                "web.test:127.0.0.1",
                "--add-host",
                "echo.test:127.0.0.1",
                "--allow",
                &format!("web.test:{p}"),
                "--allow",
                &format!("echo.test:{e}"),
            ],
            &["bash", "-c", &script],
        )
        .records_home(&home)
        .run();
        out.assert_success();
        assert_eq!(out.field("curl"), marker, "{out}");
        assert_eq!(out.field("curl_size"), "300000", "{out}");
        assert_eq!(out.field("noproxy"), marker, "{out}");
        assert_eq!(out.field("bash"), "bash-echo-line", "{out}");
        assert_eq!(out.field("python"), "python-echo", "{out}");
        assert_eq!(web.accepted.load(Ordering::SeqCst), 3);
        assert_eq!(echo.accepted.load(Ordering::SeqCst), 2);

        let events = network_events(&home);
        let dns = events_where(&events, |e| {
            e["event"] == "dns" && e["name"] == "web.test" && e["qtype"] == "A"
        });
        assert!(!dns.is_empty(), "no DNS event for web.test: {events:#?}");
        assert!(dns.iter().all(|e| e["decision"] == "allow"));
        let allowed = events_where(&events, |e| {
            e["event"] == "connect" && e["decision"] == "allow" && e["protocol"] == "tcp"
        });
        assert_eq!(allowed.len(), 5, "{allowed:#?}");
        for c in &allowed {
            assert_eq!(c["address"], "127.0.0.1");
            assert!(c["rule"].as_str().unwrap().starts_with("allow "), "{c}");
        }
        let closes = events_where(&events, |e| e["event"] == "close");
        assert_eq!(closes.len(), 5, "{events:#?}");
        // The records count what was sent to the sandbox: the whole answer (88 bytes
        // of header, then the body) for the download read to its end; for the two cut
        // short by `head`, what went before curl stopped reading (the destination's
        // bytes it never got stay out of the count, and curl's reset is recorded).
        let downloads: Vec<_> = closes.iter().filter(|e| e["name"] == "web.test").collect();
        assert_eq!(downloads.len(), 3, "{closes:#?}");
        let whole = downloads
            .iter()
            .filter(|e| e["bytes_in"].as_u64() == Some(300_088) && e["error"].is_null())
            .count();
        assert!(whole >= 1, "{closes:#?}");
        for d in &downloads {
            let n = d["bytes_in"].as_u64().unwrap();
            assert!(n > marker.len() as u64 && n <= 300_088, "{d}");
            assert!(
                d["error"].is_null() || d["error"] == "reset by the sandbox",
                "{d}"
            );
        }
        for c in &closes {
            assert!(c["bytes_out"].as_u64().unwrap() > 0, "{c}");
            assert!(c["duration_ms"].is_u64(), "{c}");
        }
        let echoes: Vec<_> = closes.iter().filter(|e| e["name"] == "echo.test").collect();
        let echoed: Vec<u64> = echoes
            .iter()
            .map(|e| e["bytes_in"].as_u64().unwrap())
            .collect();
        assert!(echoed.contains(&15) && echoed.contains(&11), "{echoes:#?}");

        let meta = session_metadata(&home.only_session());
        assert_eq!(meta["network"]["mode"], "allow");
        assert_eq!(meta["network"]["rules"][0], format!("allow web.test:{p}"));
        let table = show_network(runner, &home, ws.path());
        assert!(table.starts_with("TIME"), "{table}");
        assert!(
            table
                .lines()
                .any(|l| l.contains("web.test") && l.contains("allow") && l.contains("300")),
            "{table}"
        );
    });
}

#[test]
fn denied_destinations_and_hostname_tricks_fail_and_are_recorded() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let web = HttpServer::start(b"should-not-be-read".to_vec());
        let echo = EchoServer::start();
        let (p, e) = (web.port, echo.port);
        let script = py(&format!(
            r#"
def tcp(host, port):
    def go():
        socket.create_connection((host, port), timeout=5).close()
    return go
def resolve(name):
    try:
        socket.getaddrinfo(name, 80, socket.AF_INET)
        return "resolved"
    except socket.gaierror as e:
        return "gaierror"
    except (UnicodeError, ValueError) as e:
        return "rejected"
report("allowed", attempt(tcp("web.test", {p})))
report("denied_name", resolve("other.test"))
report("denied_port", attempt(tcp("web.test", {e})))
report("ip_literal", attempt(tcp("203.0.113.9", 80)))
report("public_ip", attempt(tcp("1.1.1.1", 443)))
report("metadata", attempt(tcp("169.254.169.254", 80)))
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(2)
def udp():
    u.connect(("8.8.8.8", 53))
    u.send(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01")
    u.recv(512)
report("udp53", attempt(udp))
def v6(addr):
    def go():
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect(addr)
    return go
report("ipv6_global", attempt(v6(("2606:4700:4700::1111", 443))))
report("ipv6_link", attempt(v6(("fe80::1", 443, 0, socket.if_nametoindex("tun0")))))
for name in ["denied.test", "web.test.evil.test", "evilweb.test", "xn--wb-bma.test",
             "web.test@evil.test"]:
    report("trick " + repr(name), resolve(name))
# Raw questions, for what no resolver library would send: a NUL inside a label, a
# dot inside a label (one label "web.test" under "evil"), a name in UTF-8.
import struct
def rcode(labels):
    q = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l for l in labels) + b"\0" + struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.sendto(q, ("198.18.0.1", 53))
    r = s.recv(512)
    return (r[3] & 15, struct.unpack(">H", r[6:8])[0])
report("raw_nul", rcode([b"web", b"test\0", b"evil"]))
report("raw_dot", rcode([b"web.test", b"evil"]))
report("raw_utf8", rcode(["wéb".encode(), b"test"]))
report("raw_ok", rcode([b"web", b"test"]))
report("canonical", resolve("WEB.TEST."))
"#
        ));
        let out = Vg::sandbox(
            runner,
            &ws,
            &[
                "--add-host",
                "web.test:127.0.0.1",
                "--add-host",
                "other.test:127.0.0.1",
                "--allow",
                &format!("web.test:{p}"),
            ],
            &[super::harness::PYTHON, "-c", &script],
        )
        .records_home(&home)
        .run();
        out.assert_success();
        assert_eq!(out.field("allowed"), "OK", "{out}");
        assert_eq!(out.field("denied_name"), "gaierror", "{out}");
        for key in ["denied_port", "ip_literal", "public_ip", "metadata"] {
            assert_eq!(out.field(key), "ECONNREFUSED", "{key}\n{out}");
        }
        assert_ne!(out.field("udp53"), "OK", "{out}");
        assert_ne!(out.field("ipv6_global"), "OK", "{out}");
        assert_ne!(out.field("ipv6_link"), "OK", "{out}");
        for line in out.lines().into_iter().filter(|l| l.starts_with("trick ")) {
            assert!(
                line.ends_with("=gaierror") || line.ends_with("=rejected"),
                "a hostname trick resolved: {line}\n{out}"
            );
        }
        assert_eq!(out.field("canonical"), "resolved", "{out}");
        // (rcode, answers): NXDOMAIN and nothing, except for the real name.
        for key in ["raw_nul", "raw_dot", "raw_utf8"] {
            assert_eq!(out.field(key), "(3, 0)", "{key}\n{out}");
        }
        assert_eq!(out.field("raw_ok"), "(0, 1)", "{out}");
        assert_eq!(
            echo.accepted.load(Ordering::SeqCst),
            0,
            "a denied port got through"
        );
        assert_eq!(web.accepted.load(Ordering::SeqCst), 1);

        let events = network_events(&home);
        let denied_dns = |name: &str| {
            events
                .iter()
                .any(|e| e["event"] == "dns" && e["name"] == name && e["decision"] == "deny")
        };
        for name in [
            "other.test",
            "denied.test",
            "web.test.evil.test",
            "evilweb.test",
            "xn--wb-bma.test",
        ] {
            assert!(
                denied_dns(name),
                "no denied DNS event for {name}: {events:#?}"
            );
        }
        assert!(
            events
                .iter()
                .filter(|e| e["event"] == "dns" && e["decision"] == "allow")
                .all(|e| e["name"] == "web.test"),
            "{events:#?}"
        );
        let denied_connect = |address: &str, port: u16, protocol: &str| {
            events.iter().any(|e| {
                e["event"] == "connect"
                    && e["decision"] == "deny"
                    && e["address"] == address
                    && e["port"] == port
                    && e["protocol"] == protocol
            })
        };
        assert!(denied_connect("127.0.0.1", e, "tcp"), "{events:#?}");
        assert!(denied_connect("203.0.113.9", 80, "tcp"), "{events:#?}");
        assert!(denied_connect("1.1.1.1", 443, "tcp"), "{events:#?}");
        assert!(denied_connect("169.254.169.254", 80, "tcp"), "{events:#?}");
        assert!(denied_connect("8.8.8.8", 53, "udp"), "{events:#?}");
        let port_denial = events
            .iter()
            .find(|ev| ev["event"] == "connect" && ev["port"] == e)
            .unwrap();
        assert_eq!(port_denial["name"], "web.test");
        assert_eq!(port_denial["reason"], "default deny");

        let table = show_network(runner, &home, ws.path());
        assert!(
            table
                .lines()
                .any(|l| l.contains("1.1.1.1") && l.contains("deny")),
            "{table}"
        );
    });
}

#[test]
fn private_addresses_need_a_rule_that_names_them() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let web = HttpServer::start(b"private".to_vec());
        let p = web.port;
        // A raw DNS question to the mediator for `localhost`: a name the rules allow
        // that resolves, on the host, to a loopback address (DNS rebinding).
        let ask = super::network_denials::ASK;
        let script = py(&format!(
            r#"{ask}
addr = ask("localhost")
report("answer", addr)
def go():
    socket.create_connection((addr, {p}), timeout=5).close()
report("rebinding", attempt(go))
def meta():
    socket.create_connection(("169.254.169.254", 80), timeout=5).close()
report("metadata", attempt(meta))
def private():
    socket.create_connection(("10.255.255.1", 80), timeout=5).close()
report("private", attempt(private))
"#
        ));
        let out = Vg::sandbox(
            runner,
            &ws,
            &["--allow", "localhost", "--allow", "0.0.0.0/0"],
            &[super::harness::PYTHON, "-c", &script],
        )
        .records_home(&home)
        .run();
        out.assert_success();
        assert!(out.field("answer").starts_with("198.1"), "{out}");
        for key in ["rebinding", "metadata", "private"] {
            assert_eq!(out.field(key), "ECONNREFUSED", "{key}\n{out}");
        }
        assert_eq!(web.accepted.load(Ordering::SeqCst), 0);
        let events = network_events(&home);
        let reason = |addr: &str| {
            events
                .iter()
                .find(|e| e["event"] == "connect" && e["address"] == addr)
                .map(|e| (e["decision"].clone(), e["reason"].clone()))
        };
        let (decision, why) = reason("127.0.0.1").unwrap();
        assert_eq!(decision, "deny");
        assert!(why.as_str().unwrap().contains("rebinding"), "{why}");
        let (decision, why) = reason("169.254.169.254").unwrap();
        assert_eq!(decision, "deny");
        assert!(why.as_str().unwrap().contains("private"), "{why}");
        assert_eq!(reason("10.255.255.1").unwrap().0, "deny");
    });
}

#[test]
fn rules_from_a_configuration_file_and_unrecorded_runs_are_enforced() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let web = HttpServer::start(b"from-config".to_vec());
        let echo = EchoServer::start();
        let config = ws.write(
            "net.toml",
            format!(
                "network = \"allow\"\nnetwork_rules = [\"deny web.test:{e}\", \"allow web.test\"]\nadd_hosts = [\"web.test:127.0.0.1\"]\n",
                e = echo.port
            ),
        );
        let script = py(&format!(
            r#"
def tcp(port):
    def go():
        socket.create_connection(("web.test", port), timeout=5).close()
    return go
report("web", attempt(tcp({p})))
report("echo", attempt(tcp({e})))
"#,
            p = web.port,
            e = echo.port
        ));
        for extra in [&[][..], &["--no-record"][..]] {
            let mut options = vec!["--config", config.to_str().unwrap()];
            options.extend_from_slice(extra);
            let out = Vg::sandbox(
                runner,
                &ws,
                &options,
                &[super::harness::PYTHON, "-c", &script],
            )
            .run();
            out.assert_success();
            assert_eq!(out.field("web"), "OK", "{extra:?}\n{out}");
            assert_eq!(out.field("echo"), "ECONNREFUSED", "{extra:?}\n{out}");
        }
        assert_eq!(echo.accepted.load(Ordering::SeqCst), 0);
        assert_eq!(web.accepted.load(Ordering::SeqCst), 2);
    });
}

#[test]
fn host_mode_shares_the_network_and_is_recorded_loudly() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let echo = EchoServer::start();
        let script = py(&format!(
            r#"
def go():
    socket.create_connection(("127.0.0.1", {}), timeout=5).close()
report("host_loopback", attempt(go))
"#,
            echo.port
        ));
        let out = Vg::sandbox(
            runner,
            &ws,
            &["--network", "host"],
            &[super::harness::PYTHON, "-c", &script],
        )
        .records_home(&home)
        .run();
        out.assert_success();
        assert_eq!(out.field("host_loopback"), "OK", "{out}");
        out.assert_stderr_contains("--network host");
        let meta = session_metadata(&home.only_session());
        assert_eq!(meta["network"]["mode"], "host");
        assert!(meta["network"]["warning"].is_string(), "{meta:#}");
        let events = network_events(&home);
        assert!(
            events.iter().any(|e| e["event"] == "host-network"),
            "{events:#?}"
        );
        assert!(
            !meta["layers"]["namespaces"].to_string().contains("network"),
            "{meta:#}"
        );
    });
}

#[test]
fn malformed_rules_and_conflicting_flags_are_refused() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let cases: &[(&[&str], &str)] = &[
            (&["--allow", "bad..name"], "bad..name"),
            (&["--allow", "10.0.0.0/33"], "10.0.0.0/33"),
            (&["--deny", "web.test:0"], "web.test:0"),
            (&["--allow", "web.test:80-70"], "80-70"),
            (&["--allow", "user@web.test"], "user@web.test"),
            (&["--add-host", "nocolon"], "nocolon"),
            (&["--add-host", "web.test:not-an-ip"], "not-an-ip"),
            (
                &["--network", "none", "--allow", "web.test"],
                "--network none",
            ),
            (
                &["--network", "host", "--add-host", "a.test:1.2.3.4"],
                "--network host",
            ),
            (&["--network", "bridge"], "bridge"),
        ];
        for (options, needle) in cases {
            let out = Vg::sandbox(runner, &ws, options, &["true"])
                .records_home(&home)
                .run();
            out.assert_code(125);
            out.assert_stderr_contains(needle);
        }
        assert!(home.sessions().is_empty(), "a refused run left a record");
    });
}

#[test]
fn abandoned_connects_neither_leak_nor_cross_connections() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let echo = EchoServer::start();
        let e = echo.port;
        // More abandoned handshakes in all than the mediator keeps connections open
        // (in bursts below that: even two bursts not yet cleaned up on a loaded machine
        // stay under the 256 open connections), then ordinary connections, each of
        // which must get its own echo: nothing leaks, nothing is crossed.
        let script = py(&format!(
            r#"
import time
addr = (socket.gethostbyname("echo.test"), {e})
for burst in range(4):
    for _ in range(100):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(addr)
        s.close()
    time.sleep(0.5)
ok = 0
for i in range(20):
    s = socket.create_connection(addr, timeout=5)
    s.sendall(b"n%d" % i)
    if s.recv(16) == b"n%d" % i:
        ok += 1
    s.close()
report("echoed", ok)
"#
        ));
        let out = Vg::sandbox(
            runner,
            &ws,
            &[
                "--add-host",
                "echo.test:127.0.0.1",
                "--allow",
                &format!("echo.test:{e}"),
            ],
            &[super::harness::PYTHON, "-c", &script],
        )
        .records_home(&home)
        .run();
        out.assert_success();
        assert_eq!(out.field("echoed"), "20", "{out}");
        let events = network_events(&home);
        let abandoned = events
            .iter()
            .filter(|ev| {
                ev["event"] == "close"
                    && ev["error"]
                        .as_str()
                        .is_some_and(|e| e.contains("abandoned") || e.contains("refused"))
            })
            .count();
        let denied = events
            .iter()
            .filter(|ev| ev["event"] == "connect" && ev["decision"] == "deny")
            .count();
        assert_eq!(
            denied, 0,
            "connections refused for lack of room: {events:#?}"
        );
        assert!(abandoned > 0, "no abandoned handshake recorded");
    });
}

/// A server on the host's loopback for bulk transfers: each connection names what it
/// wants on its first line, `echo` (every byte sent back, both ways at once) or `cut`
/// (a reset once 256 KiB arrived).
struct BulkServer {
    port: u16,
    cut: Arc<AtomicUsize>,
}

impl BulkServer {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicUsize::new(0));
        let c = Arc::clone(&cut);
        thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let c = Arc::clone(&c);
                thread::spawn(move || {
                    let mut reader = BufReader::new(&conn);
                    let mut mode = String::new();
                    if reader.read_line(&mut mode).is_err() {
                        return;
                    }
                    let mut buf = vec![0u8; 64 * 1024];
                    let mut got = reader.buffer().len();
                    let mut w = &conn;
                    if mode == "echo\n" {
                        let held = reader.buffer().to_vec();
                        if w.write_all(&held).is_err() {
                            return;
                        }
                        let mut r = &conn;
                        while let Ok(n) = r.read(&mut buf) {
                            if n == 0 || w.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = conn.shutdown(std::net::Shutdown::Write);
                    } else {
                        let mut r = &conn;
                        while got < 256 * 1024 {
                            match r.read(&mut buf) {
                                Ok(n) if n > 0 => got += n,
                                _ => return,
                            }
                        }
                        c.fetch_add(1, Ordering::SeqCst);
                        // A zero linger time: close sends a reset.
                        let _ = socket2::SockRef::from(&conn)
                            .set_linger(Some(std::time::Duration::ZERO));
                    }
                });
            }
        });
        Self { port, cut }
    }
}

#[test]
fn bulk_transfers_over_many_connections_arrive_byte_for_byte() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let bulk = BulkServer::start();
        let closed = super::harness::free_port();
        let b = bulk.port;
        // More connections at once than get the largest buffers (the rest get small
        // ones), each sending 1.5 MiB of a pattern whose period (a prime) is no multiple
        // of a segment, so a lost, repeated or misplaced segment shows, and reading it
        // back while it sends. Meanwhile, one connection is reset by the destination
        // mid-transfer and one is refused; neither disturbs the others.
        let script = py(&format!(
            r#"
import threading
def pattern(seed, n):
    x, block = seed, bytearray(65521)
    for i in range(len(block)):
        x = (x * 1103515245 + 12345) & 0x7fffffff
        block[i] = x >> 23
    return (bytes(block) * (n // len(block) + 1))[:n]
addr = (socket.gethostbyname("bulk.test"), {b})
size = 1536 * 1024
results = {{}}
def echo(i):
    data = pattern(i + 1, size)
    s = socket.create_connection(addr, timeout=60)
    def send():
        s.sendall(b"echo\n" + data)
        s.shutdown(socket.SHUT_WR)
    t = threading.Thread(target=send)
    t.start()
    got = bytearray()
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        got += chunk
    t.join()
    s.close()
    results[i] = got == data
def cut():
    s = socket.create_connection(addr, timeout=60)
    try:
        s.sendall(b"cut\n" + bytes(4 << 20))
        s.recv(1)
        results["cut"] = "not cut"
    except (ConnectionResetError, BrokenPipeError):
        results["cut"] = "reset"
def refused():
    try:
        socket.create_connection((addr[0], {closed}), timeout=10)
        results["refused"] = "connected"
    except ConnectionRefusedError:
        results["refused"] = "refused"
threads = [threading.Thread(target=echo, args=(i,)) for i in range(24)]
threads += [threading.Thread(target=cut), threading.Thread(target=refused)]
for t in threads:
    t.start()
for t in threads:
    t.join()
report("intact", sum(1 for i in range(24) if results.get(i)))
report("cut", results.get("cut"))
report("refused", results.get("refused"))
"#
        ));
        let out = Vg::sandbox(
            runner,
            &ws,
            &[
                "--add-host",
                "bulk.test:127.0.0.1",
                "--allow",
                &format!("bulk.test:{b}"),
                "--allow",
                &format!("bulk.test:{closed}"),
            ],
            &[super::harness::PYTHON, "-c", &script],
        )
        .records_home(&home)
        .run();
        out.assert_success();
        assert_eq!(out.field("intact"), "24", "{out}");
        assert_eq!(out.field("cut"), "reset", "{out}");
        assert_eq!(out.field("refused"), "refused", "{out}");
        assert_eq!(bulk.cut.load(Ordering::SeqCst), 1);

        let events = network_events(&home);
        let closes = events_where(&events, |e| e["event"] == "close" && e["port"] == b);
        let whole: Vec<_> = closes
            .iter()
            .filter(|e| {
                e["error"].is_null()
                    && e["bytes_in"].as_u64() == Some(1536 * 1024)
                    && e["bytes_out"].as_u64() == Some(1536 * 1024 + 5)
            })
            .collect();
        assert_eq!(whole.len(), 24, "{closes:#?}");
        let failed = closes.iter().filter(|e| !e["error"].is_null()).count();
        assert_eq!(failed, 1, "only the cut connection failed: {closes:#?}");
        let refused = events_where(&events, |e| e["event"] == "close" && e["port"] == closed);
        assert!(
            refused.iter().all(|e| e["error"] == "connection refused") && refused.len() == 1,
            "{refused:#?}"
        );
        let denied = events_where(&events, |e| {
            e["event"] == "connect" && e["decision"] == "deny"
        });
        assert!(denied.is_empty(), "{denied:#?}");
    });
}

/// The LCG block of the pattern downloads carry (period 65521, a prime, so no
/// segment size divides it), as the sandbox's Python rebuilds it.
fn pattern_block(seed: u32) -> Vec<u8> {
    let mut x = seed;
    (0..65521)
        .map(|_| {
            x = (x.wrapping_mul(1_103_515_245).wrapping_add(12345)) & 0x7fff_ffff;
            u8::try_from(x >> 23).unwrap()
        })
        .collect()
}

/// A download's bytes go to the sandbox past the stack's send ring (read from the
/// host socket into each packet, resent from the acknowledged point): a large one
/// arrives byte for byte (its SHA-256 checked in the sandbox) to a fast reader and,
/// at the same time, to a slow one whose tiny receive buffer closes its window again
/// and again (window probes, resends); both are recorded with their exact size.
#[test]
fn a_large_download_arrives_byte_for_byte_to_fast_and_slow_readers() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let size = 24 << 20;
        let block = pattern_block(7);
        let body: Vec<u8> = block.iter().copied().cycle().take(size).collect();
        let web = HttpServer::start(body);
        let p = web.port;
        let script = py(&format!(
            r#"
import hashlib, threading, time
x, block = 7, bytearray(65521)
for i in range(len(block)):
    x = (x * 1103515245 + 12345) & 0x7fffffff
    block[i] = x >> 23
size = {size}
want = hashlib.sha256((bytes(block) * (size // len(block) + 1))[:size]).hexdigest()
addr = (socket.gethostbyname("web.test"), {p})
results = {{}}
def get(name, slow):
    s = socket.socket()
    if slow:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(120)
    s.connect(addr)
    s.sendall(b"GET / HTTP/1.0\r\nHost: web.test\r\n\r\n")
    head, body, n = b"", hashlib.sha256(), 0
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    reads = 0
    while True:
        chunk = s.recv(4096 if slow else 1 << 20)
        if not chunk:
            break
        reads += 1
        if slow and reads < 40 and reads % 8 == 0:
            time.sleep(0.3)
        body.update(chunk)
        n += len(chunk)
    s.close()
    results[name] = (n, body.hexdigest() == want)
threads = [threading.Thread(target=get, args=(n, n == "slow")) for n in ("fast", "slow")]
for t in threads:
    t.start()
for t in threads:
    t.join()
for name in ("fast", "slow"):
    report(name, "%d %s" % results.get(name, (0, False)))
"#
        ));
        let out = web_python(runner, &ws, &home, p, &script).run();
        out.assert_success();
        assert_eq!(out.field("fast"), format!("{size} True"), "{out}");
        assert_eq!(out.field("slow"), format!("{size} True"), "{out}");

        // What the server wrote, header and body, is what the records count in.
        let header = format!(
            "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n"
        );
        let whole = (header.len() + size) as u64;
        let events = network_events(&home);
        let closes = events_where(&events, |e| e["event"] == "close" && e["port"] == p);
        assert_eq!(closes.len(), 2, "{closes:#?}");
        for c in &closes {
            assert!(c["error"].is_null(), "{c}");
            assert_eq!(c["bytes_in"].as_u64(), Some(whole), "{c}");
        }
    });
}

/// Python running `script` in a sandbox that reaches the host's server on port `port`
/// as `web.test`, and nothing else.
pub(super) fn web_python(
    runner: Runner,
    ws: &Workspace,
    home: &RecordsHome,
    port: u16,
    script: &str,
) -> Vg {
    let mut vg = Vg::sandbox(
        runner,
        ws,
        &[
            "--add-host",
            "web.test:127.0.0.1",
            "--allow",
            &format!("web.test:{port}"),
        ],
        &[super::harness::PYTHON, "-c", script],
    );
    vg.records_home(home);
    vg
}

/// Held (shared) by tests whose expectations depend on `net.core.rmem_max`, and
/// (exclusive) by the one that lowers it for a while: the tests of one binary run at
/// once, and a supervisor reads `rmem_max` at its first connection.
static RMEM_MAX: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// A shared hold on [`RMEM_MAX`]: `net.core.rmem_max` stays as it is meanwhile.
pub(super) fn rmem_max_unchanged() -> std::sync::RwLockReadGuard<'static, ()> {
    RMEM_MAX
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A sandbox that stops reading a download (so it stops acknowledging, and the
/// mediator keeps the destination's bytes on its host socket) makes the host's kernel
/// hold at most the fixed receive buffer of that socket: 4 MiB asked for, 8 MiB with
/// the kernel's doubling (`vg_netstack` `budget::HOST_RECEIVE`), not what autotuning
/// would reach. Where `net.core.rmem_max` is under 4 MiB, a supervisor run by root
/// forces it past that (`SO_RCVBUFFORCE`); an unprivileged one leaves the buffer to
/// autotuning and only the bound on what is queued is checked. Then, where the tests
/// may, `rmem_max` is lowered to Debian's default for a run as root, which must still
/// get the fixed buffer (restored after, also on failure).
#[test]
fn a_reader_that_stops_leaves_at_most_the_fixed_receive_buffer_in_the_hosts_kernel() {
    const SS: (&str, &str) = ("/usr/bin/ss", "iproute2");
    const RMEM_MAX_FILE: &str = "/proc/sys/net/core/rmem_max";
    if !require_tools(&[SS]) {
        return;
    }
    let rmem_max: usize = std::fs::read_to_string(RMEM_MAX_FILE)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    {
        let _rmem = rmem_max_unchanged();
        each_identity(|runner| {
            let fixed = rmem_max >= 4 << 20 || matches!(runner, Runner::Root);
            stalled_download_holds_at_most_the_fixed_buffer(runner, fixed);
        });
    }
    let _lowering = RMEM_MAX
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if rmem_max >= 4 << 20 && std::fs::write(RMEM_MAX_FILE, rmem_max.to_string()).is_ok() {
        /// Puts `net.core.rmem_max` back, whatever the run below did.
        struct Restore(usize);
        impl Drop for Restore {
            fn drop(&mut self) {
                let _ = std::fs::write(RMEM_MAX_FILE, self.0.to_string());
            }
        }
        let _restore = Restore(rmem_max);
        std::fs::write(RMEM_MAX_FILE, "212992").unwrap();
        stalled_download_holds_at_most_the_fixed_buffer(Runner::Root, true);
    }
}

/// One stalled download (see above): the host socket's buffer, sampled with `ss`, is
/// the fixed one if `fixed`, and never holds more than its limit.
fn stalled_download_holds_at_most_the_fixed_buffer(runner: Runner, fixed: bool) {
    const SS: &str = "/usr/bin/ss";
    let ws = Workspace::new();
    let home = RecordsHome::new(runner);
    let web = HttpServer::start(vec![b'x'; 96 << 20]);
    let p = web.port;
    let script = py(&format!(
        r#"
import time
s = socket.create_connection((socket.gethostbyname("web.test"), {p}))
s.sendall(b"GET / HTTP/1.0\r\nHost: web.test\r\n\r\n")
s.recv(1)
print("stalled", flush=True)
time.sleep(8)
"#
    ));
    let running = web_python(runner, &ws, &home, p, &script).spawn();
    // The mediator's socket to the server, as the host's kernel sees it: what it
    // holds (r) and may hold (rb), once the stalled transfer has filled it.
    let skmem = || -> Option<(u64, u64)> {
        let out = std::process::Command::new(SS)
            .args(["-tmnH", "state", "established", &format!("dport = :{p}")])
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mem = text.split("skmem:(").nth(1)?.split(')').next()?.to_owned();
        let field = |key: &str| -> Option<u64> {
            mem.split(',')
                .find_map(|f| f.strip_prefix(key)?.parse().ok())
        };
        Some((field("r")?, field("rb")?))
    };
    let mut seen = Vec::new();
    for _ in 0..40 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        if let Some(m) = skmem() {
            seen.push(m);
        }
    }
    let out = running.finish(std::time::Duration::from_secs(30));
    out.assert_success();
    assert!(out.stdout.contains("stalled"), "{out}");
    let (held, limit) = *seen
        .last()
        .unwrap_or_else(|| panic!("no socket to :{p} seen\n{out}"));
    if fixed {
        assert_eq!(
            limit,
            8 << 20,
            "the host socket's buffer is not the fixed one: {seen:?}"
        );
    }
    // What the kernel holds may pass its limit by the packets in flight when it was
    // reached (loopback's segments are 64 KiB): once more than a MiB in CI.
    assert!(
        held <= limit + (2 << 20),
        "the host's kernel holds {held} bytes for a stalled reader, over its limit {limit}: {seen:?}"
    );
    assert!(held > 0, "the transfer never filled the socket: {seen:?}");
}
