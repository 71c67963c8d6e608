//! Why the mediator refuses: this machine's own addresses in any spelling, and how a
//! refusal is explained (the reason in `logs show --network`, the live note on stderr).

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::Ordering;

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
const ASK: &str = r#"
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
