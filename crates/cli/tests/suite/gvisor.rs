//! `--backend gvisor`: the same request run on gVisor's application kernel through
//! runsc (Debian's `runsc`, installed by `scripts/test`), as root and as the
//! unprivileged test user: the posture inside, the filesystem view, the network,
//! limits, time-out, exit codes, the record, refusals, and attacks that must fail.

use std::time::Duration;

use std::sync::atomic::Ordering;

use super::harness::{
    PYTHON, RecordsHome, Runner, Vg, Workspace, assert_no_process_left, each_identity, home_secret,
    host_processes_with, py, session_metadata, status_field, wait_until,
};
use super::live::{counting_server, events as live_events, start_live, vg as live_vg};
use super::mediated_network::{HttpServer, network_events};

/// `vectraguard sandbox run --backend gvisor [options] -- cmd…`, recorded in `home`.
fn gvisor(
    runner: Runner,
    ws: &Workspace,
    home: &RecordsHome,
    options: &[&str],
    cmd: &[&str],
) -> super::harness::Output {
    let mut vg = Vg::new(runner, ws.path());
    vg.args(["sandbox", "run", "--backend", "gvisor"])
        .args(options)
        .arg("--")
        .args(cmd)
        .records_home(home);
    vg.run()
}

fn sh(runner: Runner, ws: &Workspace, home: &RecordsHome, script: &str) -> super::harness::Output {
    gvisor(runner, ws, home, &[], &["sh", "-c", script])
}

#[test]
fn the_command_runs_on_gvisors_kernel_without_privileges_and_not_as_root() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let out = sh(
            runner,
            &ws,
            &home,
            "cat /proc/self/status; echo uid=$(id -u); \
             python3 -c 'import ctypes; print(\"nnp=%d\" % ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))'; \
             echo kernel=$(uname -r); dmesg | head -1; \
             touch owned; chown 1234 owned 2>/dev/null && echo chown=done || echo chown=refused",
        );
        out.assert_success();
        // gVisor shows no ambient set; every set it shows is empty.
        for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd"] {
            assert_eq!(
                status_field(&out.stdout, cap),
                Some("0000000000000000"),
                "{cap}\n{out}"
            );
        }
        // PR_GET_NO_NEW_PRIVS (gVisor's status file has no NoNewPrivs line).
        assert_eq!(out.field("nnp"), "1", "{out}");
        // uid 0 of gVisor's kernel, owning what the host user owns, with no
        // capability: no chown to someone else.
        assert_eq!(out.field("uid"), "0", "{out}");
        assert_eq!(out.field("chown"), "refused", "{out}");
        // gVisor's own kernel answers, not the host's.
        let host_kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        assert_ne!(
            out.field("kernel"),
            host_kernel.trim(),
            "the host kernel answered\n{out}"
        );
        assert!(
            out.stdout.contains("gVisor"),
            "gVisor's boot log is missing\n{out}"
        );
        let meta = session_metadata(&home.only_session());
        let layers = &meta["layers"];
        assert_eq!(layers["backend"], "gvisor", "{meta}");
        assert_eq!(layers["capabilities"], serde_json::json!([]), "{meta}");
        assert_eq!(layers["no_new_privs"], true, "{meta}");
        // gVisor reports no refused access: the record says so.
        assert_eq!(layers["violations"], "not-recorded", "{meta}");
        // runsc, its sentry and its gofer ran as the sandbox's user, never as root.
        assert_eq!(
            layers["host_user"].to_string().trim_matches('"'),
            match runner {
                Runner::Root => runner.sandbox_user().uid.to_string(),
                Runner::Unprivileged => "self".to_owned(),
            },
            "{meta}"
        );
    });
}

#[test]
fn home_secrets_are_invisible_and_writes_outside_the_workspace_are_lost() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let secret = home_secret("id_gvisor", "vg-gvisor-secret\n");
        let script = format!(
            "cat {} 2>&1; echo x > /tmp/vg-gvisor-tmp && echo tmp=ok; echo y > \"$HOME/vg-gvisor-home\" && echo home=ok; \
             echo z > /usr/vg-gvisor-usr 2>/dev/null || echo usr=refused; echo w > out.txt && echo ws=ok",
            secret.path().display()
        );
        let out = sh(runner, &ws, &home, &script);
        assert!(
            !out.stdout.contains("vg-gvisor-secret"),
            "the secret leaked\n{out}"
        );
        assert_eq!(out.field("tmp"), "ok", "{out}");
        assert_eq!(out.field("home"), "ok", "{out}");
        assert_eq!(out.field("usr"), "refused", "{out}");
        assert_eq!(out.field("ws"), "ok", "{out}");
        // /tmp and $HOME were the sandbox's own; the workspace is the host's.
        assert!(!std::path::Path::new("/tmp/vg-gvisor-tmp").exists());
        assert!(!std::path::Path::new("/usr/vg-gvisor-usr").exists());
        assert_eq!(std::fs::read_to_string(ws.join("out.txt")).unwrap(), "w\n");
    });
}

#[test]
fn the_network_is_loopback_only_and_the_hosts_network_is_refused() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let out = gvisor(
            runner,
            &ws,
            &home,
            &[],
            &[
                "python3",
                "-c",
                "import socket\n\
                 print('ifaces=' + ','.join(sorted(n for _, n in socket.if_nameindex())))\n\
                 s = socket.socket(); s.settimeout(3)\n\
                 try:\n    s.connect(('192.0.2.1', 80)); print('out=connected')\n\
                 except OSError as e:\n    print('out=refused', e.errno)\n",
            ],
        );
        out.assert_success();
        assert_eq!(out.field("ifaces"), "lo", "{out}");
        assert!(out.field("out").starts_with("refused"), "{out}");
        // runsc rootless has no way to the host's network: refused, not a sandbox
        // without network recorded as one with the host's.
        let host = gvisor(runner, &ws, &home, &["--network", "host"], &["true"]);
        host.assert_code(125);
        host.assert_stderr_contains("--backend gvisor: the host's network");
    });
}

/// What a session's network events say, without times and sizes: the same run on
/// both backends must give the same list.
fn decisions(events: &[serde_json::Value]) -> Vec<String> {
    let mut out: Vec<String> = events
        .iter()
        .filter(|e| e["event"] != "close")
        .map(|e| {
            [
                "event", "decision", "name", "qtype", "address", "port", "protocol", "rule",
            ]
            .iter()
            .map(|k| format!("{k}={}", e[*k]))
            .collect::<Vec<_>>()
            .join(" ")
        })
        .collect();
    out.sort();
    out
}

#[test]
fn the_mediated_network_lets_an_allowed_name_through_and_records_it_as_natively() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let marker = format!("gvisor-through-the-mediator-{}", super::harness::unique());
        // Larger than one segment and one socket buffer, so the relay loops.
        let mut body = marker.clone().into_bytes();
        body.resize(200_000, b'x');
        let web = HttpServer::start(body);
        let p = web.port;
        let script = py(&format!(
            r#"
import urllib.request
data = urllib.request.urlopen("http://web.test:{p}/", timeout=20).read()
report("body", data[:{n}].decode())
report("size", len(data))
def other():
    socket.create_connection(("web.test", 1), timeout=5).close()
report("other_port", attempt(other))
try:
    socket.getaddrinfo("denied.test", 80, socket.AF_INET)
    report("denied_name", "resolved")
except socket.gaierror:
    report("denied_name", "gaierror")
"#,
            n = marker.len()
        ));
        let options = [
            "--network",
            "allow",
            "--add-host",
            "web.test:127.0.0.1",
            "--add-host",
            "denied.test:127.0.0.1",
            "--allow",
            &format!("web.test:{p}"),
        ];
        let mut seen = Vec::new();
        for backend in ["gvisor", "native"] {
            let home = RecordsHome::new(runner);
            let mut vg = Vg::new(runner, ws.path());
            vg.args(["sandbox", "run", "--backend", backend])
                .args(options)
                .args(["--", PYTHON, "-c", &script])
                .records_home(&home);
            let out = vg.run();
            out.assert_success();
            assert_eq!(out.field("body"), marker, "{backend}\n{out}");
            assert_eq!(out.field("size"), "200000", "{backend}\n{out}");
            assert_eq!(out.field("other_port"), "ECONNREFUSED", "{backend}\n{out}");
            assert_eq!(out.field("denied_name"), "gaierror", "{backend}\n{out}");
            // The refusals' notes, on the user's stderr.
            out.assert_stderr_contains("refused web.test:1");
            out.assert_stderr_contains("refused the name denied.test");
            let events = network_events(&home);
            let close = events
                .iter()
                .find(|e| e["event"] == "close" && e["name"] == "web.test")
                .unwrap_or_else(|| panic!("{backend}: no close event\n{events:#?}"));
            assert!(close["bytes_in"].as_u64().unwrap() >= 200_000, "{close}");
            let meta = session_metadata(&home.only_session());
            assert_eq!(meta["network"]["mode"], "allow", "{meta}");
            if backend == "gvisor" {
                assert_eq!(meta["layers"]["backend"], "gvisor", "{meta}");
                assert_eq!(meta["layers"]["network"], "tun", "{meta}");
            }
            seen.push(decisions(&events));
        }
        assert_eq!(web.accepted.load(Ordering::SeqCst), 2);
        // The same questions, answers, connections, decisions and rules.
        assert_eq!(
            seen[0], seen[1],
            "gvisor's network events differ from native's"
        );
        assert!(
            seen[0]
                .iter()
                .any(|l| l.starts_with("event=\"connect\" decision=\"allow\" name=\"web.test\"")),
            "{:#?}",
            seen[0]
        );
    });
}

#[test]
fn escapes_from_gvisors_mediated_network_fail_and_are_recorded() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        // A server on the host's loopback that no rule allows.
        let (port, accepted) = counting_server();
        let script = py(&format!(
            r#"
def tcp(host, port):
    def go():
        socket.create_connection((host, port), timeout=5).close()
    return go
report("loopback", attempt(tcp("127.0.0.1", {port})))
report("gateway", attempt(tcp("198.18.0.1", {port})))
report("private", attempt(tcp("10.255.255.1", 80)))
report("metadata", attempt(tcp("169.254.169.254", 80)))
def v6():
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect(("::1", {port}))
report("ipv6_loopback", attempt(v6))
def raw():
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.sendto(b"\x08\0\xf7\xff\0\0\0\0", ("192.0.2.1", 0))
report("raw", attempt(raw))
def packet():
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
report("packet", attempt(packet))
def ping():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
    s.settimeout(2)
    s.sendto(b"\x08\0\xf7\xff\0\0\0\0", ("192.0.2.1", 0))
    s.recv(64)
report("ping", attempt(ping))
def udp():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(2)
    u.sendto(b"x", ("192.0.2.7", 9999))
    u.recv(16)
report("udp", attempt(udp))
def dns_elsewhere():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(2)
    u.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01", ("192.0.2.53", 53))
    u.recv(512)
report("dns_elsewhere", attempt(dns_elsewhere))
report("ifaces", ",".join(sorted(n for _, n in socket.if_nameindex())))
"#
        ));
        let out = gvisor(
            runner,
            &ws,
            &home,
            &["--network", "allow", "--allow", "0.0.0.0/0"],
            &[PYTHON, "-c", &script],
        );
        out.assert_success();
        // Loopback is the sandbox's own; the mediator refuses private addresses and
        // its own, even under a rule that allows every address.
        for key in [
            "loopback",
            "gateway",
            "private",
            "metadata",
            "ipv6_loopback",
        ] {
            assert_eq!(out.field(key), "ECONNREFUSED", "{key}\n{out}");
        }
        // No raw, packet or ping socket: gVisor has no CAP_NET_RAW to give, and
        // the namespace allows no ping sockets.
        for key in ["raw", "packet", "ping"] {
            assert_ne!(out.field(key), "OK", "{key}\n{out}");
        }
        // Other UDP and DNS to another server go nowhere.
        for key in ["udp", "dns_elsewhere"] {
            assert_ne!(out.field(key), "OK", "{key}\n{out}");
        }
        assert_eq!(out.field("ifaces"), "lo,tun0", "{out}");
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            0,
            "the host's server was reached"
        );
        super::mediated_network::assert_escapes_refused(&home, "gvisor");
    });
}

#[test]
fn net_allow_and_deny_change_a_running_gvisor_sessions_rules() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let name = format!("gvisor-net-{}", super::harness::unique());
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
            &[
                "--backend",
                "gvisor",
                "--network",
                "allow",
                "--add-host",
                "echo.test:127.0.0.1",
            ],
            &["bash", "-c", &script],
        );
        let target = format!("echo.test:{port}");
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(accepted.load(Ordering::SeqCst), 0);
        live_vg(runner, &ws, &home, &["net", "allow", &name, &target])
            .assert_success()
            .assert_stdout_contains(&format!("allow {target}"));
        let through = wait_until(Duration::from_secs(30), || {
            accepted.load(Ordering::SeqCst) > 0
        });
        assert!(through, "the allowed name never got through");
        live_vg(runner, &ws, &home, &["net", "deny", &name, &target]).assert_success();
        let out = running.finish(Duration::from_secs(60));
        out.assert_success();
        assert_eq!(out.lines(), ["allowed", "denied"], "{out}");
        let added: Vec<serde_json::Value> = live_events(socket.parent().unwrap())
            .into_iter()
            .filter(|e| e["type"] == "network" && e["event"] == "rule-added")
            .collect();
        assert_eq!(added.len(), 2, "{added:?}");
        assert_eq!(added[1]["rule"], format!("deny {target}"), "{added:?}");
    });
}

#[test]
fn exit_codes_output_and_every_exec_are_recorded_and_the_record_verifies() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let out = sh(
            runner,
            &ws,
            &home,
            "printf 'out\\001\\377' ; printf err >&2; /bin/true; sh -c 'exit 7'; exit 3",
        );
        out.assert_code(3);
        let dir = home.only_session();
        assert_eq!(
            std::fs::read(dir.join("stdout.log")).unwrap(),
            b"out\x01\xff"
        );
        assert_eq!(std::fs::read(dir.join("stderr.log")).unwrap(), b"err");
        let commands = std::fs::read_to_string(dir.join("commands.log")).unwrap();
        let line_of = |needle: &str| {
            commands
                .lines()
                .find(|l| l.contains(" exec ") && l.ends_with(needle))
                .unwrap_or_else(|| panic!("no exec of {needle:?}\n{commands}"))
                .to_owned()
        };
        let pid_of = |line: &str| {
            line.split_whitespace()
                .find_map(|f| f.strip_prefix("pid="))
                .unwrap()
                .to_owned()
        };
        let exit_of = |pid: &str| {
            commands
                .lines()
                .find(|l| {
                    let mut fields = l.split_whitespace().skip(1);
                    fields.next() == Some("exit") && fields.next() == Some(&format!("pid={pid}"))
                })
                .unwrap_or_else(|| panic!("no exit of pid {pid}\n{commands}"))
                .to_owned()
        };
        let top = line_of("exit 3'");
        assert_eq!(pid_of(&top), "1", "{commands}");
        assert!(exit_of("1").ends_with("status=3"), "{commands}");
        let true_line = line_of("-- /bin/true");
        assert!(
            exit_of(&pid_of(&true_line)).ends_with("status=0"),
            "{commands}"
        );
        let seven = line_of("-- sh -c 'exit 7'");
        assert!(exit_of(&pid_of(&seven)).ends_with("status=7"), "{commands}");
        let verify = Vg::new(runner, ws.path())
            .args(["logs", "verify", "last"])
            .records_home(&home)
            .run();
        verify.assert_success().assert_stdout_contains("intact");
    });
}

/// `--disk` sizes gVisor's tmpfs for /tmp and $HOME as natively.
#[test]
fn the_disk_limit_holds_the_private_folders() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let out = gvisor(
            runner,
            &ws,
            &home,
            &["--disk", "10m"],
            &[
                "sh",
                "-c",
                "head -c 20000000 /dev/zero > /tmp/big || echo tmp=full; \
                 head -c 20000000 /dev/zero > \"$HOME/big\" || echo home=full",
            ],
        );
        assert_eq!(out.field("tmp"), "full", "{out}");
        assert_eq!(out.field("home"), "full", "{out}");
    });
}

#[test]
fn the_time_out_stops_the_sandbox() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let started = std::time::Instant::now();
        let out = gvisor(
            runner,
            &ws,
            &home,
            &["--timeout", "2s", "--kill-grace", "1s"],
            &["sleep", "60"],
        );
        out.assert_code(124);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{out}"
        );
    });
}

/// A memory cap holds gVisor (its sentry is in the session's cgroup). Only where a
/// memory cgroup can be made: as root on this host; the test user's run is refused
/// with the fix.
#[test]
fn a_memory_limit_holds_or_is_refused_with_the_fix() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let out = gvisor(
            runner,
            &ws,
            &home,
            &["--memory", "256m"],
            &[
                "python3",
                "-c",
                "x = bytearray(1024 * 1024 * 1024); print('survived')",
            ],
        );
        assert!(
            !out.stdout.contains("survived"),
            "the cap did not hold\n{out}"
        );
        match runner {
            Runner::Root => {
                assert_eq!(out.code(), Some(137), "{out}");
                out.assert_stderr_contains("memory limit was reached");
            }
            Runner::Unprivileged => {
                out.assert_code(125);
                out.assert_stderr_contains("cgroup");
            }
        }
    });
}

#[test]
fn what_gvisor_cannot_enforce_is_refused_naming_the_backend_and_the_fix() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        for (options, cmd, says) in [
            (&["--ask", "high"][..], &["true"][..], "--ask never"),
            (&["--learn", "p"][..], &["true"][..], "learning mode"),
            (
                &["--violations", "all"][..],
                &["true"][..],
                "--violations all",
            ),
        ] {
            let out = gvisor(runner, &ws, &home, options, cmd);
            out.assert_code(125);
            out.assert_stderr_contains("--backend gvisor");
            out.assert_stderr_contains(says);
        }
        let unknown = Vg::new(runner, ws.path())
            .args(["sandbox", "run", "--backend", "lxc", "--", "true"])
            .records_home(&home)
            .run();
        unknown.assert_code(125);
        unknown.assert_stderr_contains("unknown backend \"lxc\"");
        // Nothing ran: the refused requests left no session behind.
        assert!(home.sessions().is_empty(), "{:?}", home.sessions());
    });
}

/// Escapes tried from inside gVisor: each must fail.
#[test]
fn escapes_tried_from_inside_gvisor_fail() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        // An abstract unix socket on the host: a sandbox sharing the host's network
        // namespace or kernel could reach it.
        let name = format!("vg-gvisor-abstract-{}", std::process::id());
        let listener = std::os::unix::net::UnixListener::bind_addr(
            &<std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(
                name.as_bytes(),
            )
            .unwrap(),
        )
        .unwrap();
        let script = format!(
            "import ctypes, os, socket\n\
             libc = ctypes.CDLL(None, use_errno=True)\n\
             def sc(nr, *a):\n    r = libc.syscall(nr, *a); return 'OK' if r != -1 else os.strerror(ctypes.get_errno())\n\
             s = socket.socket(socket.AF_UNIX)\n\
             try:\n    s.connect('\\0{name}'); print('abstract=connected')\n\
             except OSError:\n    print('abstract=refused')\n\
             print('host_pids=' + str(len([p for p in os.listdir('/proc') if p.isdigit()])))\n\
             print('keyctl=' + sc(250, 0, 0, 0, 0))\n\
             print('mount=' + sc(165, b'none', b'/tmp', b'tmpfs', 0, 0))\n\
             print('root_home=' + str(os.path.exists('/root/.bashrc')))\n\
             print('kmsg=' + ('readable' if os.access('/dev/kmsg', os.R_OK) else 'no'))\n"
        );
        let out = gvisor(runner, &ws, &home, &[], &["python3", "-c", &script]);
        out.assert_success();
        drop(listener);
        assert_eq!(out.field("abstract"), "refused", "{out}");
        // Only the sandbox's own processes: python and nothing of the host's.
        let pids: usize = out.field("host_pids").parse().unwrap();
        assert!(pids <= 3, "host processes are visible\n{out}");
        assert_ne!(out.field("keyctl"), "OK", "{out}");
        assert_ne!(out.field("mount"), "OK", "{out}");
        assert_eq!(out.field("root_home"), "False", "{out}");
        assert_eq!(out.field("kmsg"), "no", "{out}");
    });
}

/// A SIGKILL to vectraguard ends runsc, its sentry and its gofer too: the keeper's
/// children die with it even after dropping root (a credential change clears the
/// parent-death signal), so no sandbox runs on unsupervised.
#[test]
fn sigkill_of_vectraguard_ends_runsc_and_the_sentry() {
    each_identity(|runner| {
        // With the mediated network, the keeper has taken the sandbox's identity
        // itself and made the namespaces runsc runs in: it must die with us too.
        for network in ["none", "allow"] {
            let ws = Workspace::new();
            let home = RecordsHome::new(runner);
            let mut vg = Vg::new(runner, ws.path());
            vg.args([
                "sandbox",
                "run",
                "--backend",
                "gvisor",
                "--network",
                network,
            ])
            .args(["--", "sleep", "300"])
            .records_home(&home);
            let running = vg.spawn();
            // runsc's command line names the bundle, named after vectraguard's pid.
            let marker = format!("vectraguard-gvisor-vg-{}-", running.pid());
            let started = wait_until(Duration::from_secs(20), || {
                host_processes_with(&marker)
                    .iter()
                    .any(|(_, cmdline)| cmdline.contains("runsc-sandbox"))
            });
            assert!(started, "gVisor's sandbox never started ({network})");
            running.signal("KILL");
            let out = running.finish(Duration::from_secs(10));
            assert_eq!(out.code(), None, "vectraguard was not killed\n{out}");
            assert_no_process_left(&marker, &out);
            // The killed supervisor could not remove its bundle folder: the next
            // gVisor start does.
            let left = || {
                std::fs::read_dir(std::env::temp_dir())
                    .unwrap()
                    .flatten()
                    .any(|e| e.file_name().to_string_lossy().contains(&marker))
            };
            assert!(
                left(),
                "the killed run's bundle folder is not where expected"
            );
            Vg::new(runner, ws.path())
                .args(["sandbox", "run", "--backend", "gvisor", "--", "true"])
                .records_home(&home)
                .run()
                .assert_success();
            assert!(
                !left(),
                "the next start left the killed run's bundle folder"
            );
        }
    });
}

/// The sweep of left bundle folders at each gVisor start (red team, session 17): a
/// user who names a folder of theirs like a killed run's bundle, and in it a folder
/// of someone else's (a shared folder of theirs that others write in, moved there),
/// cannot have root's sweep empty what they could not remove themselves. Another
/// such folder of theirs, holding only their files and a link, is removed, the
/// link's target kept: the sweep did run. Before, root removed the first folder's
/// whole tree with its own rights.
#[test]
fn the_bundle_sweep_removes_nothing_the_folders_owner_could_not() {
    use super::harness::TempDir;
    use std::os::unix::fs::{PermissionsExt, lchown, symlink};
    assert!(
        super::harness::is_root(),
        "this test makes the folders of two users: run it as root (scripts/test)"
    );
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        // The bundles' parent, as /tmp is: anyone's to write in, sticky.
        let parent = TempDir::owned_by("sweep", &Runner::Root.invoker(), 0o1777);
        // A maker that is gone: a child that exited and was reaped.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let user = super::harness::test_user();
        let folder = |n: u32| parent.join(format!("vectraguard-gvisor-vg-{gone}-{n}-red"));
        let (planted, plain) = (folder(1), folder(2));
        // Not the folder owner's: root's, which that user cannot remove.
        let theirs = planted.join("theirs");
        std::fs::create_dir_all(theirs.join("deep")).unwrap();
        std::fs::write(theirs.join("deep/kept"), b"not the owner's").unwrap();
        let victim = parent.join("victim");
        std::fs::create_dir(&victim).unwrap();
        std::fs::write(victim.join("kept"), b"not the owner's").unwrap();
        std::fs::create_dir_all(plain.join("own")).unwrap();
        std::fs::write(plain.join("own/file"), b"the owner's").unwrap();
        symlink(&victim, plain.join("link")).unwrap();
        for path in [
            &planted,
            &plain,
            &plain.join("own"),
            &plain.join("own/file"),
            &plain.join("link"),
        ] {
            lchown(path, Some(user.uid), Some(user.gid)).unwrap();
        }
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o777)).unwrap();
        // And one nested deeper than any stack recurses: removing it all aborted.
        let deep = folder(3);
        // Removed before `parent`, by rm, which takes any depth (a test thread's
        // stack does not).
        struct RmRf(std::path::PathBuf);
        impl Drop for RmRf {
            fn drop(&mut self) {
                let _ = std::process::Command::new("rm")
                    .arg("-rf")
                    .arg(&self.0)
                    .status();
            }
        }
        let _deep_guard = RmRf(deep.clone());
        let nested = std::process::Command::new(PYTHON)
            .arg("-c")
            .arg("import os, sys\nos.mkdir(sys.argv[1]); os.chdir(sys.argv[1])\nfor _ in range(30000):\n    os.mkdir('d'); os.chdir('d')")
            .arg(&deep)
            .status()
            .unwrap();
        assert!(nested.success());
        lchown(&deep, Some(user.uid), Some(user.gid)).unwrap();
        let mut vg = Vg::new(runner, ws.path());
        vg.args(["sandbox", "run", "--backend", "gvisor", "--", "true"])
            .env("TMPDIR", &parent.arg(""))
            .records_home(&home);
        vg.run().assert_success();
        assert!(
            theirs.join("deep/kept").exists(),
            "the sweep removed a file the folder's owner could not remove ({runner})"
        );
        assert!(
            victim.join("kept").exists(),
            "a link was followed ({runner})"
        );
        assert!(
            std::fs::symlink_metadata(&plain).is_err(),
            "the sweep did not remove the owner's left folder ({runner})"
        );
    });
}

/// A command that stopped itself still ends when vectraguard is terminated: the
/// keeper follows the signal with SIGCONT through `runsc kill`, as init does
/// natively (red team, session 13).
#[test]
fn a_stopped_command_on_gvisor_ends_when_vectraguard_is_terminated() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let mut vg = Vg::new(runner, ws.path());
        vg.args(["sandbox", "run", "--backend", "gvisor", "--"])
            .args([
                "sh",
                "-c",
                "touch stopping && kill -STOP $$; echo continued",
            ])
            .records_home(&home);
        let running = vg.spawn();
        let stopping = wait_until(Duration::from_secs(20), || ws.join("stopping").exists());
        assert!(stopping, "the command never ran");
        // Let it reach its stop.
        std::thread::sleep(Duration::from_millis(500));
        running.signal("TERM");
        let out = running.finish(Duration::from_secs(15));
        out.assert_code(143);
    });
}

/// The bundle folder (runsc's state, the trace socket, the skeleton root) is made
/// in TMPDIR: one inside the workspace would let the command rewrite runsc's state,
/// which the signal and stop commands read. Refused, with the fix.
#[test]
fn a_tmpdir_inside_the_workspace_is_refused() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let tmp = ws.mkdir(".tmp");
        let mut vg = Vg::new(runner, ws.path());
        vg.args(["sandbox", "run", "--backend", "gvisor", "--", "true"])
            .env("TMPDIR", &tmp.display().to_string())
            .records_home(&home);
        let out = vg.run();
        out.assert_code(125);
        out.assert_stderr_contains("set TMPDIR to a folder outside every mounted path");
        assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0, "{out}");
    });
}

/// Forks `argv[1]` children that sleep, then says how many were refused (and
/// why), how many processes are alive at once, and reaps them.
pub(super) const MANY: &str = r#"
import os, sys, time
n = int(sys.argv[1]); kids = []
try:
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            time.sleep(120); os._exit(0)
        kids.append(pid)
except OSError as e:
    print('refused=%d\nerrno=%d' % (len(kids), e.errno))
print('alive=%d' % len([p for p in os.listdir('/proc') if p.isdigit()]), flush=True)
for k in kids: os.kill(k, 9)
for k in kids: os.waitpid(k, 0)
print('reaped=%d' % len(kids))
"#;

/// The attacks on the process cap from inside: a user namespace first (where
/// gVisor does not count), raising the cap first, threads, many short-lived processes, and a fork flood
/// of `argv[2]` seconds that retries every refused fork.
pub(super) const ATTACKS: &str = r#"
import ctypes, os, sys, threading, time
mode = sys.argv[1]
if mode == 'userns':
    libc = ctypes.CDLL(None, use_errno=True)
    r = libc.unshare(0x10000000)
    print('unshare=%d\nunshare_errno=%d' % (r, ctypes.get_errno()), flush=True)
    mode = 'many'
if mode == 'raise':
    import resource
    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (100000, 100000))
        print('raise=done')
    except (ValueError, OSError):
        print('raise=refused')
    mode = 'many'
if mode == 'many':
    kids = []
    try:
        while len(kids) < 1000:
            pid = os.fork()
            if pid == 0:
                time.sleep(120); os._exit(0)
            kids.append(pid)
    except OSError as e:
        print('refused=%d\nerrno=%d' % (len(kids), e.errno))
    for k in kids: os.kill(k, 9)
    for k in kids: os.waitpid(k, 0)
elif mode == 'threads':
    stop = threading.Event(); n = 0
    try:
        while n < 1000:
            threading.Thread(target=stop.wait, daemon=True).start(); n += 1
    except RuntimeError:
        print('threads=%d' % n)
    stop.set()
elif mode == 'short':
    # Reaped children give their place back: far more than the cap, one by one.
    for i in range(500):
        pid = os.fork()
        if pid == 0: os._exit(0)
        os.waitpid(pid, 0)
    print('short=500')
elif mode == 'flood':
    me = os.getpid(); refused = 0; end = time.time() + float(sys.argv[2])
    while time.time() < end:
        try:
            if os.fork() == 0: me = 0
        except OSError:
            refused += 1
    if me:
        print('flood_refused=%d' % refused, flush=True)
    os._exit(0)
"#;

/// The process cap on gVisor counts the sandbox's processes, in gVisor's own
/// kernel (`RLIMIT_NPROC` of the bundle): 300 at once under the default cap
/// (4096), where a host pids cgroup of 4096 on gVisor's own host tasks ended the
/// sandbox at about 130 (red team, session 15); and where a pids cgroup can be
/// made (as root here), it holds gVisor's own host tasks with room for them.
#[test]
fn three_hundred_processes_run_at_once_under_the_default_cap() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let out = gvisor(runner, &ws, &home, &[], &[PYTHON, "-c", MANY, "300"]);
        out.assert_success();
        assert!(!out.stdout.contains("refused="), "{out}");
        let alive: usize = out.field("alive").parse().unwrap();
        assert!(alive > 300, "{out}");
        assert_eq!(out.field("reaped"), "300", "{out}");
        let meta = session_metadata(&home.only_session());
        let by = &meta["limits"]["enforced_by"];
        assert_eq!(meta["limits"]["pids"], 4096, "{meta}");
        assert_eq!(
            by["pids"], "gvisor-rlimit-nproc (4096 tasks inside)",
            "{meta}"
        );
        assert_eq!(meta["layers"]["pids"], "gvisor-rlimit-nproc:4096", "{meta}");
        assert_eq!(
            meta["layers"]["user_namespaces"], "denied-by-oci-seccomp",
            "{meta}"
        );
        let host = by["pids_host"].as_str().unwrap_or_default();
        match runner {
            Runner::Root => assert!(host.starts_with("cgroup"), "{meta}"),
            Runner::Unprivileged => assert!(host.starts_with("none"), "{meta}"),
        }
    });
}

/// `--pids N` is N tasks inside gVisor, threads included, whatever a hostile
/// program tries: a user namespace first, raising its own cap, threads, reaped short-lived processes
/// (which give their place back), and a fork flood, which is refused with EAGAIN
/// inside and leaves a live sandbox that ends with its command and a full record.
#[test]
fn pids_is_held_inside_gvisor_against_forks_threads_user_namespaces_and_a_flood() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let run = |mode: &str| {
            gvisor(
                runner,
                &ws,
                &home,
                &["--pids", "64", "--timeout", "50"],
                &[PYTHON, "-c", ATTACKS, mode, "8"],
            )
        };
        // The command is the first of the 64 tasks.
        let out = run("many");
        out.assert_success();
        assert_eq!(out.field("refused"), "63", "{out}");
        assert_eq!(out.field("errno"), "11", "{out}");
        let out = run("userns");
        out.assert_success();
        // EPERM: the user namespace, where gVisor skips the count, was not made.
        assert_eq!(out.field("unshare"), "-1", "{out}");
        assert_eq!(out.field("unshare_errno"), "1", "{out}");
        assert_eq!(out.field("refused"), "63", "{out}");
        assert_eq!(out.field("errno"), "11", "{out}");
        let out = run("raise");
        out.assert_success();
        assert_eq!(out.field("raise"), "refused", "{out}");
        assert_eq!(out.field("refused"), "63", "{out}");
        let out = run("threads");
        out.assert_success();
        assert_eq!(out.field("threads"), "63", "{out}");
        let out = run("short");
        out.assert_success();
        assert_eq!(out.field("short"), "500", "{out}");
        let out = run("flood");
        out.assert_success();
        let refused: u64 = out.field("flood_refused").parse().unwrap();
        assert!(refused > 0, "the flood was never refused\n{out}");
        let sessions = home.sessions();
        assert_eq!(sessions.len(), 6, "{sessions:?}");
        for session in sessions {
            let meta = session_metadata(&session);
            assert_eq!(meta["limits"]["pids"], 64, "{meta}");
            assert_eq!(
                meta["limits"]["enforced_by"]["pids"], "gvisor-rlimit-nproc (64 tasks inside)",
                "{meta}"
            );
            assert_eq!(meta["exit_code"], 0, "{meta}");
        }
    });
}

/// The pids cgroup (root only) of gVisor's sandbox process whose command line
/// holds `marker`: its folder under `/sys/fs/cgroup`.
pub(super) fn pids_cgroup_of(marker: &str) -> Option<std::path::PathBuf> {
    let (pid, _) = super::harness::host_processes_with(marker)
        .into_iter()
        .find(|(_, cmdline)| cmdline.contains("runsc-sandbox"))?;
    let groups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    groups.lines().find_map(|line| {
        let mut f = line.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        let path = path.trim_start_matches('/');
        match controllers {
            "pids" => Some(std::path::Path::new("/sys/fs/cgroup/pids").join(path)),
            "" => Some(std::path::Path::new("/sys/fs/cgroup").join(path)),
            _ => None,
        }
        .filter(|dir| dir.join("pids.max").exists())
    })
}

/// When gVisor does die (its own host tasks reach the host cap: here lowered by
/// hand to what it uses already), the run ends at once, saying which cap was
/// reached and that it was gVisor's, and the record's limit-hit says so too.
#[test]
fn a_one_shot_sandbox_that_dies_at_the_host_cap_says_whose_cap_it_was() {
    let runner = Runner::Root;
    if !super::harness::runners().contains(&runner) {
        return;
    }
    let ws = Workspace::new();
    let home = RecordsHome::new(runner);
    // The cap is lowered once Python runs inside gVisor (it says so with a file in
    // the workspace), not as soon as gVisor's cgroup exists: a cap reached while
    // gVisor was still starting could leave it hanging rather than dead (CI, session
    // 20: the run did not end within 40 s), which is not what this test is about.
    let script = format!("import time; open('ready', 'w').close(); time.sleep(2)\n{MANY}");
    let mut vg = Vg::new(runner, ws.path());
    vg.args(["sandbox", "run", "--backend", "gvisor", "--"])
        .args([PYTHON, "-c", script.as_str(), "100"])
        .records_home(&home);
    let running = vg.spawn();
    let marker = format!("vectraguard-gvisor-vg-{}-", running.pid());
    let mut cgroup = None;
    assert!(
        wait_until(Duration::from_secs(20), || {
            cgroup = pids_cgroup_of(&marker);
            cgroup.is_some()
        }),
        "no pids cgroup holds gVisor here as root"
    );
    let cgroup = cgroup.unwrap();
    assert!(
        wait_until(Duration::from_secs(30), || ws.path().join("ready").exists()),
        "Python never started inside gVisor"
    );
    let current: u64 = std::fs::read_to_string(cgroup.join("pids.current"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::fs::write(cgroup.join("pids.max"), (current + 8).to_string()).unwrap();
    let out = running.finish(Duration::from_secs(40));
    assert_ne!(out.code(), Some(0), "{out}");
    assert!(!out.stdout.contains("reaped="), "gVisor did not die\n{out}");
    out.assert_stderr_contains("gVisor's own host tasks reached their cap");
    let hits = super::limits::limit_hits(&home.only_session(), "pids");
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert!(
        hits[0]["enforced_by"]
            .as_str()
            .unwrap_or_default()
            .contains("host tasks for gVisor itself"),
        "{hits:?}"
    );
    assert_no_process_left(&marker, &out);
}
