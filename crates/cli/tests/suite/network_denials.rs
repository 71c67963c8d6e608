//! Why the mediator refuses: this machine's own addresses in any spelling, and how a
//! refusal is explained (the reason in `logs show --network`, the live note on stderr).

use std::io::Write;
use std::net::{Ipv4Addr, TcpListener};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::harness::{RecordsHome, TempDir, Vg, Workspace, each_identity, py};
use super::mediated_network::{HttpServer, network_events};

/// One of this machine's own IPv4 addresses on an interface other than loopback.
fn own_ipv4() -> Ipv4Addr {
    let out = Command::new("ip")
        .args(["-o", "-4", "addr", "show", "scope", "global"])
        .output()
        .expect("run ip");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .and_then(|cidr| cidr.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("this machine has no global IPv4 address:\n{text}"))
}

/// `ask(name)`: a raw DNS question for `name`'s A record to the mediator, returning
/// the address answered (or None).
pub(super) const ASK: &str = r#"
import struct
def ask(name):
    q = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
    q += struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.sendto(q, ("198.18.0.1", 53))
    r = s.recv(512)
    return socket.inet_ntoa(r[-4:]) if struct.unpack(">H", r[6:8])[0] else None
"#;

#[test]
fn own_addresses_are_closed_in_every_spelling() {
    let own = own_ipv4();
    let [a, b, c, _] = own.octets();
    // Listening on every interface: only the guard keeps the sandbox out.
    let web = HttpServer::start_at("0.0.0.0", b"own".to_vec());
    let dir = TempDir::new("hosts");
    let hosts = dir.write(
        "hosts",
        format!("127.0.0.1 localhost\n::ffff:{own} mapped.test\n{own} plain.test\n"),
    );
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let p = web.port;
        // The sandbox sees the same /etc/hosts, so the names are asked of the
        // mediator's DNS directly: its answer is the synthetic address standing for
        // the host's lookup.
        let script = py(&format!(
            r#"
{ASK}
def go(host):
    def f():
        socket.create_connection((host, {p}), timeout=5).close()
    return f
report("mapped", attempt(go(ask("mapped.test"))))
report("plain", attempt(go(ask("plain.test"))))
report("bare", attempt(go("{own}")))
"#
        ));
        // The network rule opens the own address's range (private or not), so only
        // the own-address guard stands between the names and the listener.
        let net = format!("{a}.{b}.{c}.0/24");
        let out = Vg::sandbox(
            runner,
            &ws,
            &[
                "--allow",
                &net,
                "--allow",
                "mapped.test",
                "--allow",
                "plain.test",
            ],
            &[super::harness::PYTHON, "-c", &script],
        )
        .records_home(&home)
        .hosts_file(&hosts)
        .run();
        out.assert_success();
        for key in ["mapped", "plain", "bare"] {
            assert_eq!(out.field(key), "ECONNREFUSED", "{key}\n{out}");
        }
        let events = network_events(&home);
        let mapped = events
            .iter()
            .find(|e| e["event"] == "connect" && e["name"] == "mapped.test")
            .unwrap_or_else(|| panic!("no connect to mapped.test in {events:#?}"));
        assert_eq!(mapped["address"], format!("::ffff:{own}"), "{mapped}");
        assert_eq!(mapped["decision"], "deny", "{mapped}");
        assert_eq!(mapped["reason"], "own address", "{mapped}");
        let refused = events
            .iter()
            .filter(|e| e["event"] == "connect" && e["reason"] == "own address")
            .count();
        assert_eq!(refused, 3, "{events:#?}");
    });
    assert_eq!(
        web.accepted.load(Ordering::SeqCst),
        0,
        "the listener answered"
    );
}

/// A server that answers every connection with an endless stream and never reads:
/// the sandbox never reads either, so the mediator's buffers toward it fill and stay
/// full. Returns the port and the number of connections accepted.
fn flooding_server() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            thread::spawn(move || {
                let chunk = vec![b'x'; 64 << 10];
                let mut w = &conn;
                while w.write_all(&chunk).is_ok() {}
            });
        }
    });
    (port, accepted)
}

/// Anonymous memory of process `pid` in KiB (file-backed pages, the binary's own
/// code, are left out).
fn rss_anon_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// The mediator's buffers for all connections together are 32 MiB per session; the
/// supervisor holds little else. Without a total, 200 stalled connections held
/// 512 KiB each toward the sandbox (100 MiB).
const SUPERVISOR_ANON_LIMIT_KIB: u64 = (32 + 24) << 10;

#[test]
fn stalled_connections_do_not_grow_the_supervisor_past_the_buffer_budget() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let (port, accepted) = flooding_server();
        let flows = 200;
        // Small receive buffers in the sandbox: the data waits in the mediator.
        let script = py(&format!(
            r#"
import time
addr = socket.gethostbyname("flood.test")
held, refused = [], 0
for i in range({flows}):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    try:
        s.connect((addr, {port}))
        held.append(s)
    except OSError:
        refused += 1
with open("stalled.tmp", "w") as f:
    f.write(f"{{len(held)}} {{refused}}")
os.rename("stalled.tmp", "stalled")
time.sleep(4)
"#
        ));
        let running = Vg::sandbox(
            runner,
            &ws,
            &[
                "--add-host",
                "flood.test:127.0.0.1",
                "--allow",
                &format!("flood.test:{port}"),
            ],
            &[super::harness::PYTHON, "-c", &script],
        )
        .spawn();
        let pid = running.pid();
        let start = Instant::now();
        while !ws.exists("stalled") && start.elapsed() < Duration::from_secs(40) {
            thread::sleep(Duration::from_millis(50));
        }
        let counts = ws.read("stalled").unwrap_or_default();
        // The flood fills the buffers within moments; watch for two seconds.
        let mut peak = 0;
        for _ in 0..20 {
            peak = peak.max(rss_anon_kib(pid).unwrap_or(0));
            thread::sleep(Duration::from_millis(100));
        }
        let out = running.finish(Duration::from_secs(30));
        out.assert_success();
        assert_eq!(counts, format!("{flows} 0"), "held, refused\n{out}");
        assert!(
            accepted.load(Ordering::SeqCst) >= flows,
            "the server saw {} connections",
            accepted.load(Ordering::SeqCst)
        );
        assert!(peak > 0, "no memory figure for the supervisor {pid}");
        assert!(
            peak < SUPERVISOR_ANON_LIMIT_KIB,
            "the supervisor held {peak} KiB with {flows} stalled connections (limit {SUPERVISOR_ANON_LIMIT_KIB} KiB)"
        );
        eprintln!("{runner}: supervisor peak RssAnon {peak} KiB");
    });
}

/// Refusals of four kinds, each destination tried twice.
fn refusals_script() -> String {
    py(&format!(
        r#"
{ASK}
for _ in range(2):
    report("denied", ask("denied.test"))
local = ask("localhost")
report("local", local)
def go(host, port):
    def f():
        socket.create_connection((host, port), timeout=5).close()
    return f
for _ in range(2):
    report("rebinding", attempt(go(local, 9)))
    report("private", attempt(go("10.255.255.1", 81)))
    report("default", attempt(go("10.255.255.1", 80)))
sys.stderr.write("the command's own stderr\n")
"#
    ))
}

const REFUSAL_RULES: &[&str] = &["--allow", "localhost", "--allow", "0.0.0.0/0:81"];

#[test]
fn refusals_are_explained_once_per_destination_on_stderr_and_in_the_table() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let out = Vg::sandbox(
            runner,
            &ws,
            REFUSAL_RULES,
            &[super::harness::PYTHON, "-c", &refusals_script()],
        )
        .records_home(&home)
        .run();
        out.assert_success();
        assert_eq!(out.field("denied"), "None", "{out}");
        for key in ["rebinding", "private", "default"] {
            assert_eq!(out.field(key), "ECONNREFUSED", "{key}\n{out}");
        }
        let notes: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.starts_with("vectraguard: refused"))
            .collect();
        let expected = [
            "vectraguard: refused the name denied.test — no rule allows it",
            "vectraguard: refused localhost:9 — resolves to 127.0.0.1, a private or special-purpose address (DNS rebinding guard); if that is intended, pin it: --add-host localhost:127.0.0.1",
            "vectraguard: refused 10.255.255.1:81 — 10.255.255.1 is a private or special-purpose address; only a rule naming it opens it: --allow 10.255.255.1:81",
            "vectraguard: refused 10.255.255.1:80 — no rule allows it; allow it with --allow 10.255.255.1:80",
        ];
        assert_eq!(
            notes.len(),
            expected.len(),
            "one note per destination\n{out}"
        );
        for (note, want) in notes.iter().zip(expected) {
            assert!(note.starts_with(want), "{note:?} is not {want:?}\n{out}");
        }
        out.assert_stderr_contains("the command's own stderr");
        // The notes are ours, not the command's: not in its recorded stderr.
        let session = home.only_session();
        let recorded = std::fs::read_to_string(session.join("stderr.log")).unwrap();
        assert!(recorded.contains("the command's own stderr"), "{recorded}");
        assert!(!recorded.contains("vectraguard:"), "{recorded}");

        // The table gives the reason of each refusal, not the allow rule that matched.
        let table = super::mediated_network::show_network(runner, &home, ws.path());
        let row = |pred: &dyn Fn(&str) -> bool| -> String {
            let rows: Vec<&str> = table.lines().filter(|l| pred(l)).collect();
            assert!(!rows.is_empty(), "no such row in\n{table}");
            rows[0].trim_end().to_owned()
        };
        let rebinding = row(&|l| l.contains("127.0.0.1") && l.contains(" deny "));
        assert!(rebinding.ends_with("dns rebinding"), "{rebinding}\n{table}");
        let private = row(&|l| l.contains("10.255.255.1") && l.contains(" 81 "));
        assert!(private.ends_with("private address"), "{private}\n{table}");
        let default = row(&|l| l.contains("10.255.255.1") && l.contains(" 80 "));
        assert!(default.ends_with("default deny"), "{default}\n{table}");
        let name = row(&|l| l.contains("denied.test"));
        assert!(name.ends_with("default deny"), "{name}\n{table}");
    });
}

#[test]
fn refusal_notes_are_silenced_by_the_flag_and_the_environment() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let script = refusals_script();
        let flag = [REFUSAL_RULES, &["--no-network-notes"]].concat();
        let mut by_flag = Vg::sandbox(runner, &ws, &flag, &[super::harness::PYTHON, "-c", &script]);
        let mut by_env = Vg::sandbox(
            runner,
            &ws,
            REFUSAL_RULES,
            &[super::harness::PYTHON, "-c", &script],
        );
        by_env.env("VECTRAGUARD_QUIET", "1");
        let quiet = [REFUSAL_RULES, &["--quiet"]].concat();
        let mut by_quiet = Vg::sandbox(
            runner,
            &ws,
            &quiet,
            &[super::harness::PYTHON, "-c", &script],
        );
        let unrecorded_flag = [REFUSAL_RULES, &["--no-record"]].concat();
        let unrecorded = Vg::sandbox(
            runner,
            &ws,
            &unrecorded_flag,
            &[super::harness::PYTHON, "-c", &script],
        );
        for vg in [&mut by_flag, &mut by_env, &mut by_quiet] {
            let out = vg.run();
            out.assert_success();
            assert_eq!(out.field("rebinding"), "ECONNREFUSED", "{out}");
            assert!(!out.stderr.contains("vectraguard: refused"), "{out}");
            out.assert_stderr_contains("the command's own stderr");
        }
        // Without a record, the notes are shown all the same.
        let out = unrecorded.run();
        out.assert_success();
        assert_eq!(
            out.stderr.matches("vectraguard: refused").count(),
            4,
            "{out}"
        );
    });
}
