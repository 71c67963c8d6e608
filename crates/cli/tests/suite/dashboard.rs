//! `vectraguard dashboard` over plain HTTP: the token, the guard (Host, peer, origin),
//! what it shows of real sessions, the archive and its paths, and what it does to
//! running ones through their control channels (stop, a live rule, an approval).
//! The page itself in a browser: `suite::dashboard_browser`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::harness::{
    RecordsHome, Runner, Running, TempDir, Vg, Workspace, each_identity, unique, wait_until,
};
use super::live::{events, start_live};

/// A dashboard started by `runner` over `home`'s records, stopped on drop.
struct Dashboard {
    _running: Running,
    _out: TempDir,
    port: u16,
    token: String,
}

/// One HTTP answer.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

impl Answer {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.text()))
    }
}

impl Dashboard {
    fn start(runner: Runner, ws: &Workspace, home: &RecordsHome) -> Self {
        let out = TempDir::owned_by("dash-out", &runner.invoker(), 0o700);
        let file = out.join("stdout");
        let running = Vg::new(runner, ws.path())
            .records_home(home)
            .args(["dashboard", "--listen", "127.0.0.1:0"])
            .through_shell(&format!("exec \"$@\" > '{}'", file.display()))
            .spawn();
        let mut url = None;
        let up = wait_until(Duration::from_secs(20), || {
            url = std::fs::read_to_string(&file).ok().and_then(|s| {
                s.split_whitespace()
                    .find(|w| w.starts_with("http://"))
                    .map(str::to_owned)
            });
            url.is_some()
        });
        assert!(up, "the dashboard printed no URL");
        let url = url.unwrap();
        let rest = url.strip_prefix("http://127.0.0.1:").unwrap();
        let (port, token) = rest.split_once("/?token=").unwrap();
        assert_eq!(token.len(), 64, "{url}");
        assert!(
            token
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{url}"
        );
        Self {
            _running: running,
            _out: out,
            port: port.parse().unwrap(),
            token: token.to_owned(),
        }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The `Authorization` header value the page sends.
    fn bearer(&self) -> String {
        format!("Bearer {}", self.token)
    }

    /// A GET with the token, as the page sends it.
    fn get(&self, path: &str) -> Answer {
        let bearer = self.bearer();
        request(
            self.port,
            "GET",
            path,
            &[("Host", &self.host()), ("Authorization", &bearer)],
            None,
        )
    }

    /// A POST as the page sends it.
    fn post(&self, path: &str, body: &str) -> Answer {
        let (bearer, host) = (self.bearer(), self.host());
        let origin = format!("http://{host}");
        request(
            self.port,
            "POST",
            path,
            &[
                ("Host", &host),
                ("Authorization", &bearer),
                ("Content-Type", "application/json"),
                ("Origin", &origin),
                ("Sec-Fetch-Site", "same-origin"),
            ],
            Some(body),
        )
    }
}

/// One HTTP/1.1 request on a fresh connection to the loopback, read to its end.
fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Answer {
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the dashboard");
    exchange(stream, method, path, headers, body)
}

fn exchange(
    mut stream: TcpStream,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Answer {
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let body = body.unwrap_or("");
    if method == "POST" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    parse_answer(&raw)
}

fn parse_answer(raw: &[u8]) -> Answer {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap();
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if headers
        .get("transfer-encoding")
        .is_some_and(|t| t == "chunked")
    {
        body = dechunk(&body);
    }
    Answer {
        status,
        headers,
        body,
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = data.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size = usize::from_str_radix(String::from_utf8_lossy(&data[..eol]).trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[eol + 2..eol + 2 + size]);
        data = &data[eol + 2 + size + 2..];
    }
}

/// This machine's first non-loopback IPv4 address.
fn non_loopback_address() -> Ipv4Addr {
    let out = std::process::Command::new("ip")
        .args(["-o", "-4", "addr", "show", "scope", "global"])
        .output()
        .expect("run ip");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .and_then(|cidr| cidr.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("this machine has no non-loopback IPv4 address:\n{text}"))
}

fn session_id(socket: &Path) -> String {
    socket
        .parent()
        .and_then(Path::file_name)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn only_the_printed_token_opens_it_and_the_guard_refuses_the_rest() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let dash = Dashboard::start(runner, &ws, &home);
        let host = dash.host();
        let port = dash.port;
        let get = |path: &str, headers: &[(&str, &str)]| request(port, "GET", path, headers, None);

        let bearer = dash.bearer();
        let cookie = format!("vg_dashboard={}", dash.token);

        // The page shell and its assets are served to anyone (no record data in
        // them), with or without a token in the URL, and never set a cookie.
        let with_token = format!("/?token={}", dash.token);
        let wrong = format!("/?token={}", "0".repeat(64));
        for path in [
            "/",
            "/approvals",
            "/sessions/last",
            "/app.js",
            "/app.css",
            "/icon.svg",
            with_token.as_str(),
            wrong.as_str(),
        ] {
            let a = get(path, &[("Host", &host)]);
            assert_eq!(a.status, 200, "{path}: {}", a.text());
            assert_eq!(a.headers.get("set-cookie"), None, "{path}");
            assert!(!a.text().contains(&dash.token), "{path} holds the token");
        }
        let page = get("/", &[("Host", &host)]);
        assert!(!page.text().contains("vg-csrf"), "{}", page.text());
        assert_eq!(
            page.headers.get("referrer-policy").map(String::as_str),
            Some("no-referrer")
        );
        assert!(
            page.headers
                .get("content-security-policy")
                .is_some_and(|c| c.contains("script-src 'self'")),
            "{:?}",
            page.headers
        );

        // The API: no token, a wrong one, a near one, the token in the query string
        // or only in a cookie (cookies reach every port of this host): 401.
        let near = format!("Bearer {}", &dash.token[..63]);
        let zeros = format!("Bearer {}", "0".repeat(64));
        let in_query = format!("/api/sessions?token={}", dash.token);
        for (path, headers) in [
            ("/api/sessions", vec![("Host", host.as_str())]),
            ("/api/live", vec![("Host", host.as_str())]),
            ("/api/approvals", vec![("Host", host.as_str())]),
            (
                "/api/sessions",
                vec![("Host", host.as_str()), ("Authorization", zeros.as_str())],
            ),
            (
                "/api/sessions",
                vec![("Host", host.as_str()), ("Authorization", near.as_str())],
            ),
            (
                "/api/sessions",
                vec![
                    ("Host", host.as_str()),
                    ("Authorization", dash.token.as_str()),
                ],
            ),
            (in_query.as_str(), vec![("Host", host.as_str())]),
            (
                "/api/sessions",
                vec![("Host", host.as_str()), ("Cookie", cookie.as_str())],
            ),
            (
                "/api/live",
                vec![("Host", host.as_str()), ("Cookie", cookie.as_str())],
            ),
        ] {
            let a = get(path, &headers);
            assert_eq!(a.status, 401, "{path} {headers:?}: {}", a.text());
            assert_eq!(a.headers.get("set-cookie"), None);
        }
        let listed = get(
            "/api/sessions",
            &[("Host", "localhost:0"), ("Authorization", &bearer)],
        );
        assert_eq!(listed.status, 403, "a Host with another port");
        let listed = get(
            "/api/sessions",
            &[
                ("Host", &format!("localhost:{port}")),
                ("Authorization", &bearer),
            ],
        );
        assert_eq!(listed.status, 200, "{}", listed.text());
        assert_eq!(listed.json()["total"], 0);
        assert_eq!(listed.headers.get("set-cookie"), None);

        // DNS rebinding: a page served under another name reaches us with its Host.
        for bad in [
            format!("attacker.example:{port}"),
            format!("127.0.0.1.nip.io:{port}"),
            "127.0.0.1".to_owned(),
        ] {
            for path in ["/api/sessions", "/"] {
                let a = get(path, &[("Host", &bad), ("Authorization", &bearer)]);
                assert_eq!(a.status, 403, "Host {bad} {path}: {}", a.text());
            }
        }
        assert_eq!(
            get("/api/sessions", &[("Authorization", &bearer)]).status,
            403,
            "no Host at all"
        );

        // Cross-site changes: each missing or foreign piece is refused.
        let origin = format!("http://{host}");
        let good: Vec<(&str, &str)> = vec![
            ("Host", &host),
            ("Authorization", &bearer),
            ("Content-Type", "application/json"),
            ("Origin", &origin),
            ("Sec-Fetch-Site", "same-origin"),
        ];
        let post = |drop: &str, replace: Option<(&str, &str)>| {
            let mut h: Vec<(&str, &str)> =
                good.iter().filter(|(k, _)| *k != drop).cloned().collect();
            if let Some(r) = replace {
                h.push(r);
            }
            request(
                port,
                "POST",
                "/api/sessions/last/stop",
                &h,
                Some("{\"kill\":false}"),
            )
        };
        for (drop, replace, status) in [
            ("Origin", Some(("Origin", "http://attacker.example")), 403),
            ("Origin", Some(("Origin", "null")), 403),
            (
                "Sec-Fetch-Site",
                Some(("Sec-Fetch-Site", "cross-site")),
                403,
            ),
            ("Content-Type", Some(("Content-Type", "text/plain")), 403),
            (
                "Content-Type",
                Some(("Content-Type", "application/x-www-form-urlencoded")),
                403,
            ),
            ("Authorization", None, 401),
            ("Authorization", Some(("Cookie", cookie.as_str())), 401),
        ] {
            let a = post(drop, replace);
            assert_eq!(a.status, status, "{drop} {replace:?}: {}", a.text());
        }
        // Everything right: past the guard (no session to stop here: 404).
        let a = post("", None);
        assert_eq!(a.status, 404, "{}", a.text());
        // A GET never changes anything.
        assert_eq!(dash.get("/api/sessions/last/stop").status, 405);

        // Bound to the loopback: the machine's own address is not served at all, and
        // a connection from it to the loopback is refused by the peer check.
        let outside = non_loopback_address();
        let reached =
            TcpStream::connect_timeout(&SocketAddr::from((outside, port)), Duration::from_secs(5));
        assert!(reached.is_err(), "reached the dashboard on {outside}");
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket.bind(&SocketAddr::from((outside, 0)).into()).unwrap();
        match socket.connect(&SocketAddr::from((Ipv4Addr::LOCALHOST, port)).into()) {
            Ok(()) => {
                let a = exchange(
                    socket.into(),
                    "GET",
                    "/api/sessions",
                    &[("Host", &host), ("Authorization", &bearer)],
                    None,
                );
                assert_eq!(a.status, 403, "a peer at {outside}: {}", a.text());
            }
            // The kernel may refuse a loopback destination from a non-loopback source.
            Err(e) => assert_ne!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}"),
        }
    });
}

#[test]
fn a_recorded_session_is_listed_shown_and_archived_and_no_path_escapes() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let name = format!("dash-rec-{}", unique());
        let marker = format!("out-{}", unique());
        let script = format!("echo {marker}; echo err-line >&2; exit 3");
        Vg::sandbox(runner, &ws, &["--name", &name], &["sh", "-c", &script])
            .records_home(&home)
            .run()
            .assert_code(3);
        let dir = home.only_session();
        let id = dir.file_name().unwrap().to_str().unwrap().to_owned();
        let dash = Dashboard::start(runner, &ws, &home);

        let list = dash.get(&format!("/api/sessions?name={name}")).json();
        assert_eq!(list["total"], 1, "{list}");
        let row = &list["sessions"][0];
        assert_eq!(row["id"], id.as_str(), "{row}");
        assert_eq!(row["status"], "exited", "{row}");
        assert_eq!(row["running"], false, "{row}");
        assert_eq!(row["exit_code"], 3, "{row}");
        assert_eq!(
            row["command"],
            serde_json::json!(["sh", "-c", script]),
            "{row}"
        );
        assert_eq!(dash.get("/api/sessions?status=running").json()["total"], 0);
        assert_eq!(
            dash.get("/api/sessions?agent=nobody-such").json()["total"],
            0
        );
        assert_eq!(dash.get("/api/sessions?status=bogus").status, 400);

        let detail = dash.get(&format!("/api/sessions/{id}")).json();
        assert_eq!(detail["running"], false, "{detail}");
        assert_eq!(detail["integrity"]["ok"], true, "{detail}");
        assert!(
            detail["integrity"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("verified")),
            "{detail}"
        );
        assert_eq!(detail["metadata"]["name"], name.as_str());
        assert!(
            detail["layers"]["namespaces"]
                .as_array()
                .is_some_and(|n| n.iter().any(|x| x == "user")),
            "{detail}"
        );
        let commands = dash.get(&format!("/api/sessions/{id}/commands")).json();
        let first = &commands["execs"][0];
        assert_eq!(
            first["argv"],
            serde_json::json!(["sh", "-c", script]),
            "{commands}"
        );
        assert_eq!(
            first["exit"],
            serde_json::json!({"kind": "code", "value": 3}),
            "{commands}"
        );
        let stdout = dash.get(&format!("/api/sessions/{id}/output/stdout"));
        assert_eq!(stdout.text(), format!("{marker}\n"));
        assert_eq!(
            dash.get(&format!("/api/sessions/{id}/output/stderr"))
                .text(),
            "err-line\n"
        );
        let events = dash.get(&format!("/api/sessions/{id}/events")).json();
        assert!(
            events["events"]
                .as_array()
                .is_some_and(|e| e.iter().any(|e| e["type"] == "session-end")),
            "{events}"
        );

        // The archive: the folder's files under ID/, byte for byte.
        let archive = dash.get(&format!("/api/sessions/{id}/archive"));
        assert_eq!(archive.status, 200, "{}", archive.text());
        assert_eq!(
            archive
                .headers
                .get("content-disposition")
                .map(String::as_str),
            Some(format!("attachment; filename=\"{id}.tar.gz\"").as_str())
        );
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(&archive.body[..]));
        let mut files = BTreeMap::new();
        for entry in tar.entries().unwrap() {
            let mut entry = entry.unwrap();
            let path = entry.path().unwrap().display().to_string();
            let mut body = Vec::new();
            entry.read_to_end(&mut body).unwrap();
            files.insert(path, body);
        }
        for file in [
            "metadata.json",
            "commands.log",
            "events.jsonl",
            "integrity.log",
            "stdout.log",
            "stderr.log",
        ] {
            let on_disk = std::fs::read(dir.join(file)).unwrap();
            assert_eq!(
                files.get(&format!("{id}/{file}")),
                Some(&on_disk),
                "{file} in {:?}",
                files.keys()
            );
        }
        assert!(
            files.keys().all(|k| k.starts_with(&format!("{id}/"))),
            "{:?}",
            files.keys()
        );

        // Paths out of the records folder, however spelled, name no session.
        let planted = home.logs().join("session-20200101T000000Z-aaaaaa");
        std::os::unix::fs::symlink("/etc", &planted).unwrap();
        for path in [
            "/api/sessions/..%2f..%2fetc%2fpasswd/archive",
            "/api/sessions/..%2F..%2F..%2Fetc/archive",
            "/api/sessions/%2Fetc%2Fpasswd/archive",
            "/api/sessions/%2e%2e/archive",
            "/api/sessions/../../../../etc/passwd",
            "/api/sessions/..%252f..%252fetc/archive",
            "/api/sessions/session-20200101T000000Z-aaaaaa/archive",
            "/api/sessions/aaaaaa/output/stdout",
            "/api/sessions/%00/archive",
        ] {
            let a = dash.get(path);
            assert!(
                a.status == 404 || a.status == 400,
                "{path}: {} {}",
                a.status,
                a.text()
            );
            assert!(!a.text().contains("root:"), "{path}: {}", a.text());
        }
        assert_eq!(
            dash.get(&format!("/api/sessions/{id}/output/..%2fmetadata.json"))
                .status,
            404
        );
    });
}

/// Reads server-sent events until one satisfies `want` (or the deadline passes).
fn sse_until(
    port: u16,
    bearer: &str,
    deadline: Duration,
    ready: impl FnOnce(),
    want: impl Fn(&str, &Value) -> bool,
) -> bool {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(deadline)).unwrap();
    write!(
        stream,
        "GET /api/live HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: {bearer}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    // The head first: the stream is open once it is read.
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
    }
    ready();
    let end = std::time::Instant::now() + deadline;
    let mut kind = String::new();
    while std::time::Instant::now() < end {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return false;
        }
        let l = line.trim_end();
        if let Some(k) = l
            .strip_prefix("event: ")
            .or_else(|| l.strip_prefix("event:"))
        {
            kind = k.trim().to_owned();
        } else if let Some(d) = l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:"))
            && let Ok(v) = serde_json::from_str::<Value>(d.trim())
            && want(&kind, &v)
        {
            return true;
        }
    }
    false
}

#[test]
fn a_running_session_is_followed_live_given_a_rule_and_stopped() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let dash = Dashboard::start(runner, &ws, &home);
        let marker = format!("vg-live-{}", unique());
        ws.write(
            "steps.sh",
            format!(
                "#!/bin/sh\nuntil [ -e go ]; do sleep 0.05; done\n/bin/echo {marker}\nsleep 60\n"
            ),
        );
        let name = format!("dash-live-{}", unique());
        let (running, socket) = start_live(
            runner,
            &ws,
            &home,
            &name,
            &["--network", "allow"],
            &["sh", "./steps.sh"],
        );
        let id = session_id(&socket);
        let dir: PathBuf = socket.parent().unwrap().to_path_buf();

        // Listed as running, and the exec that follows arrives on /api/live.
        let mut row = Value::Null;
        assert!(
            wait_until(Duration::from_secs(10), || {
                row = dash.get("/api/sessions?status=running").json()["sessions"][0].clone();
                row["id"] == id.as_str()
            }),
            "not listed as running: {row}"
        );
        assert_eq!(row["running"], true);
        let seen = sse_until(
            dash.port,
            &dash.bearer(),
            Duration::from_secs(20),
            || {
                ws.write("go", "");
            },
            |kind, v| {
                kind == "exec"
                    && v["session"] == id.as_str()
                    && v["exec"]["argv"] == serde_json::json!(["/bin/echo", marker])
            },
        );
        assert!(seen, "the exec never arrived on /api/live");
        let detail = dash.get(&format!("/api/sessions/{id}")).json();
        assert_eq!(detail["running"], true, "{detail}");
        assert!(
            detail["integrity"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("verified")),
            "{detail}"
        );

        // A live rule, through the control channel.
        let added = dash.post(
            &format!("/api/sessions/{id}/net"),
            r#"{"action":"allow","target":"example.test:443"}"#,
        );
        assert_eq!(added.status, 200, "{}", added.text());
        assert_eq!(added.json()["rule"]["live"], true);
        let rules = dash.get(&format!("/api/sessions/{id}/net")).json();
        assert_eq!(rules["rules"][0]["target"], "example.test:443", "{rules}");
        let bad = dash.post(
            &format!("/api/sessions/{id}/net"),
            r#"{"action":"allow","target":"not a host"}"#,
        );
        assert_eq!(bad.status, 400, "{}", bad.text());
        let added_events: Vec<Value> = events(&dir)
            .into_iter()
            .filter(|e| e["type"] == "network" && e["event"] == "rule-added")
            .collect();
        assert_eq!(added_events.len(), 1, "{added_events:?}");
        assert_eq!(added_events[0]["uid"], runner.invoker().uid);

        // Stop: ended as `vectraguard stop` ends it.
        let stop = dash.post(&format!("/api/sessions/{id}/stop"), r#"{"kill":false}"#);
        assert_eq!(stop.status, 200, "{}", stop.text());
        running.finish(Duration::from_secs(30)).assert_code(124);
        let mut row = Value::Null;
        assert!(
            wait_until(Duration::from_secs(10), || {
                row = dash.get(&format!("/api/sessions?name={name}")).json()["sessions"][0].clone();
                row["status"] == "timeout"
            }),
            "{row}"
        );
        let again = dash.post(&format!("/api/sessions/{id}/stop"), r#"{"kill":false}"#);
        assert_eq!(again.status, 409, "{}", again.text());
        assert!(again.text().contains("not running"), "{}", again.text());
    });
}

#[test]
fn a_held_exec_is_approved_from_the_dashboard_and_runs() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let victim = format!("/tmp/vg-dash-victim-{}", unique());
        ws.write(
            "run.sh",
            format!(
                "#!/bin/sh\nmkdir -p {victim} && echo data > {victim}/file\nrm -rf {victim}\nif [ -e {victim} ]; then echo survived > result; else echo deleted > result; fi\n"
            ),
        );
        let home = RecordsHome::new(runner);
        let dash = Dashboard::start(runner, &ws, &home);
        let name = format!("dash-ask-{}", unique());
        let (running, socket) = start_live(
            runner,
            &ws,
            &home,
            &name,
            &["--ask", "high"],
            &["sh", "./run.sh"],
        );
        let id = session_id(&socket);
        let mut pending = Value::Null;
        assert!(
            wait_until(Duration::from_secs(20), || {
                pending = dash.get("/api/approvals").json()["pending"][0].clone();
                !pending.is_null()
            }),
            "nothing held"
        );
        assert_eq!(pending["session"], id.as_str(), "{pending}");
        assert_eq!(
            pending["subject"]["argv"],
            serde_json::json!(["rm", "-rf", victim]),
            "{pending}"
        );
        assert!(
            !ws.exists("result"),
            "the script went on past the held exec"
        );
        let req = pending["id"].as_u64().unwrap();
        let bad = dash.post(
            &format!("/api/sessions/{id}/approvals/{}", req + 100),
            r#"{"decision":"approve","scope":"once"}"#,
        );
        assert_eq!(bad.status, 404, "{}", bad.text());
        let ok = dash.post(
            &format!("/api/sessions/{id}/approvals/{req}"),
            r#"{"decision":"approve","scope":"once"}"#,
        );
        assert_eq!(ok.status, 200, "{}", ok.text());
        running.finish(Duration::from_secs(30)).assert_success();
        assert_eq!(ws.read("result").as_deref().map(str::trim), Some("deleted"));
        let decided: Vec<Value> = events(socket.parent().unwrap())
            .into_iter()
            .filter(|e| e["type"] == "approval" && e["event"] == "decided")
            .collect();
        assert_eq!(decided.len(), 1, "{decided:?}");
        assert_eq!(decided[0]["decision"], "approve");
        assert_eq!(decided[0]["who"]["by"], "client");
        assert_eq!(decided[0]["who"]["uid"], runner.invoker().uid);
        assert_eq!(
            dash.get("/api/approvals").json()["pending"],
            serde_json::json!([])
        );
    });
}

/// Bound to every address on purpose: a warning, other machines' connections are
/// served (with the token), and names other than `localhost` are still refused.
#[test]
fn a_wide_bind_warns_and_still_checks_host_and_token() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let out = TempDir::owned_by("dash-wide", &runner.invoker(), 0o700);
        let (stdout, stderr) = (out.join("stdout"), out.join("stderr"));
        let _running = Vg::new(runner, ws.path())
            .records_home(&home)
            .args(["dashboard", "--listen", "0.0.0.0:0"])
            .through_shell(&format!(
                "exec \"$@\" > '{}' 2> '{}'",
                stdout.display(),
                stderr.display()
            ))
            .spawn();
        let mut url = String::new();
        assert!(
            wait_until(Duration::from_secs(20), || {
                url = std::fs::read_to_string(&stdout).unwrap_or_default();
                url.contains("?token=")
            }),
            "no URL printed"
        );
        let warning = std::fs::read_to_string(&stderr).unwrap_or_default();
        assert!(
            warning.contains("warning") && warning.contains("other machines"),
            "{warning}"
        );
        let at = url.find("http://127.0.0.1:").expect("a loopback URL") + "http://127.0.0.1:".len();
        let rest = &url[at..];
        let (port, token) = rest.split_once("/?token=").unwrap();
        let port: u16 = port.parse().unwrap();
        let token = &token[..64];
        let outside = non_loopback_address();
        let host = format!("{outside}:{port}");
        let connect = || {
            TcpStream::connect_timeout(&SocketAddr::from((outside, port)), Duration::from_secs(5))
                .expect("a wide bind is reachable on the machine's address")
        };
        let bearer = format!("Bearer {token}");
        let a = exchange(
            connect(),
            "GET",
            "/api/sessions",
            &[("Host", &host), ("Authorization", &bearer)],
            None,
        );
        assert_eq!(a.status, 200, "{}", a.text());
        let a = exchange(connect(), "GET", "/api/sessions", &[("Host", &host)], None);
        assert_eq!(a.status, 401, "{}", a.text());
        let rebound = format!("attacker.example:{port}");
        let a = exchange(
            connect(),
            "GET",
            "/api/sessions",
            &[("Host", &rebound), ("Authorization", &bearer)],
            None,
        );
        assert_eq!(a.status, 403, "{}", a.text());
    });
}

#[test]
fn a_taken_port_is_said_with_what_to_do() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap().to_string();
        Vg::new(runner, ws.path())
            .args(["dashboard", "--listen", &addr])
            .run()
            .assert_code(125)
            .assert_stderr_contains("already in use")
            .assert_stderr_contains("--listen 127.0.0.1:0");
        Vg::new(runner, ws.path())
            .args(["dashboard", "--listen", "localhost"])
            .run()
            .assert_code(125)
            .assert_stderr_contains("use ADDR:PORT");
    });
}

/// Red-team findings on the dashboard, each refused end to end.
mod red {
    use super::*;

    #[test]
    fn a_cookie_an_absolute_target_and_a_planted_symlink_are_refused() {
        each_identity(|runner| {
            let ws = Workspace::new();
            let home = RecordsHome::new(runner);
            Vg::sandbox(runner, &ws, &[], &["sh", "-c", "echo out; echo err >&2"])
                .records_home(&home)
                .run()
                .assert_code(0);
            let dir = home.only_session();
            let id = dir.file_name().unwrap().to_str().unwrap().to_owned();
            let dash = Dashboard::start(runner, &ws, &home);
            let (host, bearer) = (dash.host(), dash.bearer());

            // The token in a cookie (which browsers send to every port of this
            // host, so any server there would have it): refused, and no answer
            // ever sets one.
            let cookie = format!("vg_dashboard={}", dash.token);
            for path in ["/api/sessions", &format!("/api/sessions/{id}/archive")] {
                let got = request(
                    dash.port,
                    "GET",
                    path,
                    &[("Host", &host), ("Cookie", &cookie)],
                    None,
                );
                assert_eq!(got.status, 401, "{path}: {}", got.text());
            }
            for path in [
                "/".to_owned(),
                format!("/?token={}", dash.token),
                format!("/sessions/{id}?token={}", dash.token),
                "/api/sessions".to_owned(),
                format!("/api/sessions/{id}"),
            ] {
                let got = dash.get(&path);
                assert_eq!(got.status, 200, "{path}: {}", got.text());
                assert_eq!(got.headers.get("set-cookie"), None, "{path}");
            }

            // An absolute-form target names the host (RFC 9112 3.2.2): another
            // site's name is refused even with a right Host header.
            let evil = format!("http://evil.example:{}/api/sessions", dash.port);
            let got = request(
                dash.port,
                "GET",
                &evil,
                &[("Host", &host), ("Authorization", &bearer)],
                None,
            );
            assert_eq!(got.status, 403, "{}", got.text());
            let ours = format!("http://{host}/api/sessions");
            let got = request(
                dash.port,
                "GET",
                &ours,
                &[("Host", &host), ("Authorization", &bearer)],
                None,
            );
            assert_eq!(got.status, 200, "{}", got.text());

            // A record file replaced by a symlink is not followed.
            let outside = TempDir::owned_by("red-outside", &runner.invoker(), 0o755);
            let marker = format!("outside-{}", unique());
            std::fs::write(outside.join("secret"), &marker).unwrap();
            std::fs::remove_file(dir.join("stderr.log")).unwrap();
            std::os::unix::fs::symlink(outside.join("secret"), dir.join("stderr.log")).unwrap();
            let got = dash.get(&format!("/api/sessions/{id}/output/stderr"));
            assert!(!got.text().contains(&marker), "{}", got.text());
            assert_eq!(got.status, 500, "{}", got.text());
            let got = dash.get(&format!("/api/sessions/{id}/output/stdout"));
            assert_eq!((got.status, got.text()), (200, "out\n".to_owned()));
        });
    }
}
