//! Red team of the mediated network: what a hostile script inside the sandbox can make
//! the supervisor, or the host's kernel on the supervisor's behalf, hold. Each test
//! fails if its attack works.

use std::time::Duration;

use super::harness::{
    PYTHON, RecordsHome, Runner, Vg, Workspace, each_identity, py, require_tools,
};
use super::mediated_network::HttpServer;

const SS: (&str, &str) = ("/usr/bin/ss", "iproute2");

/// Connections a test opens: the 16 that get full buffers, and 8 past them that get
/// small ones (`vg_netstack` `budget`).
const FULL_GRANTS: usize = 16;
const PAST_FULL: usize = 8;

/// The `skmem` fields a download is sampled by: what the host's kernel holds (`r`)
/// and may hold (`rb`) for each of the mediator's sockets; an upload's, queued (`w`)
/// and the send buffer (`tb`).
const RECEIVED: (&str, &str) = ("r", "rb");
const QUEUED: (&str, &str) = ("w", "tb");

/// `net.core.rmem_max`, as the supervisor will read it (hold
/// `mediated_network::rmem_max_unchanged` meanwhile).
fn host_rmem_max() -> u64 {
    std::fs::read_to_string("/proc/sys/net/core/rmem_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Whether full-buffer connections get their fixed receive buffer: where `rmem_max`
/// allows it, or forced by a supervisor run as root.
fn full_fixed(runner: Runner, rmem_max: u64) -> bool {
    rmem_max >= 4 << 20 || matches!(runner, Runner::Root)
}

/// Runs `vg` (a sandbox that fills `n` connections to `port`, prints "stalled" and
/// waits) while sampling their `fields` `samples` times with [`fullest`]: its output,
/// the sockets when they held the most, that total, and their limits, smallest first.
/// Every one of the `n` (`what`s) must have been seen.
fn stalled(
    vg: Vg,
    port: u16,
    n: usize,
    what: &str,
    (fields, samples): ((&str, &str), usize),
) -> (super::harness::Output, Vec<(u64, u64)>, u64, Vec<u64>) {
    let running = vg.spawn();
    let (worst, worst_total) = fullest(port, fields, samples);
    let out = running.finish(Duration::from_secs(60));
    out.assert_success();
    assert!(out.stdout.contains("stalled"), "{out}");
    assert_eq!(
        worst.len(),
        n,
        "not every {what} was seen: {worst:?}\n{out}"
    );
    let mut limits: Vec<u64> = worst.iter().map(|&(_, limit)| limit).collect();
    limits.sort_unstable();
    (out, worst, worst_total, limits)
}

/// `samples` times, every 100 ms, `ss`'s `(held, limit)` fields of the mediator's or
/// inspector's sockets to `port`: those sockets when together they held the most, and
/// that total.
fn fullest(port: u16, (held, limit): (&str, &str), samples: usize) -> (Vec<(u64, u64)>, u64) {
    let mut worst: Vec<(u64, u64)> = Vec::new();
    let mut worst_total = 0;
    for _ in 0..samples {
        std::thread::sleep(Duration::from_millis(100));
        let seen = host_skmem(port, held, limit);
        let total: u64 = seen.iter().map(|(r, _)| r).sum();
        if total >= worst_total {
            worst_total = total;
            worst = seen;
        }
    }
    (worst, worst_total)
}

/// Two `skmem` fields of each of the mediator's sockets to `port`.
fn host_skmem(port: u16, held: &str, limit: &str) -> Vec<(u64, u64)> {
    let Ok(out) = std::process::Command::new(SS.0)
        .args(["-tmnH", "state", "established", &format!("dport = :{port}")])
        .output()
    else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split("skmem:(")
        .skip(1)
        .filter_map(|rest| {
            let mem = rest.split(')').next()?;
            let field = |key: &str| -> Option<u64> {
                mem.split(',')
                    .find_map(|f| f.strip_prefix(key)?.parse().ok())
            };
            Some((field(held)?, field(limit)?))
        })
        .collect()
}

/// A sandbox opens more downloads than get full buffers, reads them all as fast as it
/// can for a while (so that the kernel's autotuning grows the host sockets' receive
/// buffers), then stops reading. The mediator keeps a download's bytes on its host
/// socket until the sandbox acknowledges them, so whatever those sockets may grow to,
/// the host's kernel holds for the sandbox. Each must stay within the fixed 8 MiB of a
/// full-buffer connection (4 MiB asked for, doubled by the kernel), and together they
/// must stay within what the full and the small grants may hold; before the fix, each
/// connection past the first 16 was left to autotuning, up to `net.ipv4.tcp_rmem`'s
/// maximum (32 MiB here: 14-16 MiB each was seen, 800 MiB for 64 connections).
#[test]
fn red_stalled_downloads_past_the_full_grants_leave_bounded_memory_in_the_hosts_kernel() {
    if !require_tools(&[SS]) {
        return;
    }
    let _rmem = super::mediated_network::rmem_max_unchanged();
    each_identity(|runner| {
        // Full grants get their fixed buffer where rmem_max allows it or as root;
        // otherwise they are autotuned (documented), and only the rest is checked.
        stalled_downloads(runner, full_fixed(runner, host_rmem_max()));
    });
}

fn stalled_downloads(runner: Runner, full_fixed: bool) {
    let ws = Workspace::new();
    let home = RecordsHome::new(runner);
    let web = HttpServer::start(vec![b'x'; 256 << 20]);
    let p = web.port;
    let n = FULL_GRANTS + PAST_FULL;
    let script = py(&format!(
        r#"
import select, time
ip = socket.gethostbyname("web.test")
conns = []
for i in range({n}):
    s = socket.create_connection((ip, {p}))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.sendall(b"GET / HTTP/1.0\r\nHost: web.test\r\n\r\n")
    s.setblocking(False)
    conns.append(s)
end = time.time() + 2.5
got = 0
while time.time() < end:
    ready, _, _ = select.select(conns, [], [], 0.1)
    for s in ready:
        try:
            got += len(s.recv(1 << 20))
        except BlockingIOError:
            pass
report("read", got)
print("stalled", flush=True)
time.sleep(7)
"#
    ));
    let vg = super::mediated_network::web_python(runner, &ws, &home, p, &script);
    let (out, worst, worst_total, limits) = stalled(vg, p, n, "connection", (RECEIVED, 90));
    // Full grants: 8 MiB each at most; small ones: far less. What a socket holds may
    // pass its limit by the last packet it took in.
    let full: u64 = 8 << 20;
    let small: u64 = 1 << 20;
    // The kernel admits packets while what it holds is under the limit, so it may pass
    // it by what was in flight: loopback's 64 KiB segments, more than a MiB once (CI).
    let slack: u64 = 2 << 20;
    if full_fixed {
        for &(held, limit) in &worst {
            assert!(
                limit <= full && held <= limit + slack,
                "a host socket holds {held} of {limit} bytes for a stalled reader, over the \
                 fixed {full}: {limits:?}\n{out}"
            );
        }
    }
    // The sockets past the full grants (the smallest limits when the full ones are
    // fixed; all but the 16 largest otherwise).
    let past: Vec<u64> = limits[..PAST_FULL].to_vec();
    for &limit in &past {
        assert!(
            limit <= small,
            "a connection past the {FULL_GRANTS} full grants may make the host's kernel \
             hold {limit} bytes (autotuned), over {small}: {limits:?}\n{out}"
        );
    }
    if full_fixed {
        let bound = FULL_GRANTS as u64 * (full + slack) + PAST_FULL as u64 * (small + slack);
        assert!(
            worst_total <= bound,
            "the host's kernel holds {worst_total} bytes for {n} stalled downloads, over \
             {bound}: {worst:?}\n{out}"
        );
    }
    assert!(
        worst_total > 0,
        "the downloads never filled the sockets\n{out}"
    );
}

/// A sandbox uploads as fast as it can on more connections than get full buffers, to
/// a destination that never reads. The mediator writes what the sandbox sends into its
/// host sockets, whose send buffers the kernel grows (autotuning) up to
/// `net.ipv4.tcp_wmem`'s maximum, 4 MiB by default, each: 257 MiB was seen queued for
/// 64 connections, 1 GiB for 256. The connections past the full grants must have a
/// small fixed send buffer.
#[test]
fn red_uploads_to_a_destination_that_never_reads_leave_bounded_memory_in_the_hosts_kernel() {
    if !require_tools(&[SS]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        // Accepts, keeps every connection open, reads nothing.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let p = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for conn in listener.incoming().flatten() {
                held.push(conn);
            }
        });
        let n = FULL_GRANTS + PAST_FULL;
        let script = py(&format!(
            r#"
import select, time
ip = socket.gethostbyname("web.test")
conns = []
for i in range({n}):
    s = socket.create_connection((ip, {p}))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    s.setblocking(False)
    conns.append(s)
chunk = b"y" * (1 << 20)
end = time.time() + 2.5
sent = 0
while time.time() < end:
    _, ready, _ = select.select([], conns, [], 0.1)
    for s in ready:
        try:
            sent += s.send(chunk)
        except BlockingIOError:
            pass
report("sent", sent)
print("stalled", flush=True)
time.sleep(5)
"#
        ));
        let vg = super::mediated_network::web_python(runner, &ws, &home, p, &script);
        let (out, _, worst_total, limits) = stalled(vg, p, n, "connection", (QUEUED, 70));
        let small: u64 = 1 << 20;
        for &limit in &limits[..PAST_FULL] {
            assert!(
                limit <= small,
                "a connection past the {FULL_GRANTS} full grants may make the host's kernel \
                 queue {limit} bytes for a destination that never reads, over {small}: \
                 {limits:?}\n{out}"
            );
        }
        assert!(
            worst_total > 0,
            "the uploads never filled the sockets\n{out}"
        );
    });
}

/// The same attack through HTTPS inspection: the inspector's own upstream connections
/// (`vg_http` `upstream.rs`) hold a response on their host socket while the sandbox
/// does not read it, so they are sized as the mediator's are: the session's first
/// [`FULL_GRANTS`] with the 8 MiB receive buffer, later ones with the small fixed one.
/// Before the fix every upstream socket was left to autotuning, up to
/// `net.ipv4.tcp_rmem`'s maximum each (256 upstream connections per session).
#[test]
fn red_stalled_inspected_downloads_leave_bounded_memory_in_the_hosts_kernel() {
    if !require_tools(&[SS]) {
        return;
    }
    let _rmem = super::mediated_network::rmem_max_unchanged();
    each_identity(|runner| {
        let rmem_max = host_rmem_max();
        let full_fixed = full_fixed(runner, rmem_max);
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ca = super::https_servers::TestCa::new("stall");
        let api = ca.serve(&["api.test"]);
        let p = api.port;
        let n = FULL_GRANTS + PAST_FULL;
        let script = py(&format!(
            r#"
import ssl, threading, time
ctx = ssl.create_default_context()
ip = socket.gethostbyname("api.test")
stop = time.time() + 2.5
got = []
held = []
def pull():
    s = ctx.wrap_socket(socket.create_connection((ip, {p})), server_hostname="api.test")
    s.sendall(b"GET /download?bytes=268435456 HTTP/1.1\r\nHost: api.test:{p}\r\n\r\n")
    s.settimeout(0.2)
    n = 0
    while time.time() < stop:
        try:
            n += len(s.recv(1 << 20))
        except (socket.timeout, ssl.SSLWantReadError):
            pass
    got.append(n)
    held.append(s)
threads = [threading.Thread(target=pull) for _ in range({n})]
for t in threads:
    t.start()
for t in threads:
    t.join()
report("read", sum(got))
print("stalled", flush=True)
time.sleep(7)
"#
        ));
        let mut vg = Vg::sandbox(
            runner,
            &ws,
            &[
                "--add-host",
                "api.test:127.0.0.1",
                "--upstream-ca",
                &ca.arg(),
                "--allow",
                &format!("GET https://api.test:{p}/download"),
            ],
            &[PYTHON, "-c", &script],
        );
        vg.records_home(&home);
        let (out, worst, worst_total, limits) =
            stalled(vg, p, n, "upstream connection", (RECEIVED, 90));
        // Fixed, not autotuned: the kernel shows twice what was asked, the small one
        // capped by rmem_max. (Through inspection this client reads too slowly for
        // autotuning to pass a few MiB here, so the fixed sizes are what is checked;
        // the passthrough test above shows what autotuning reaches.)
        let full: u64 = 8 << 20;
        let small: u64 = 2 * (256 << 10).min(rmem_max);
        let slack: u64 = 2 << 20; // as above
        for &(held, limit) in &worst {
            assert!(
                held <= limit + slack,
                "an upstream socket holds {held} bytes, over its limit {limit}: {limits:?}\n{out}"
            );
        }
        let count = |size: u64| limits.iter().filter(|&&l| l == size).count();
        assert_eq!(
            count(small),
            PAST_FULL,
            "the upstream connections past the first {FULL_GRANTS} do not all have the \
             small fixed receive buffer ({small}), so what the host's kernel may hold for \
             them is autotuning's to decide: {limits:?}\n{out}"
        );
        if full_fixed {
            assert_eq!(
                count(full),
                FULL_GRANTS,
                "the first {FULL_GRANTS} upstream connections do not have the fixed \
                 {full}: {limits:?}\n{out}"
            );
        }
        assert!(
            worst_total > 0,
            "the downloads never filled the sockets\n{out}"
        );
    });
}
