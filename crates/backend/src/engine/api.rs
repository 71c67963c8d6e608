//! Docker's Engine API, asked directly over its unix socket for the two queries a
//! session makes before it starts a container (`info` and an image's `.Config`).
//!
//! Why: each `docker` client call is a Go program's start, 30-50 ms here, and a
//! session's start waited for them (in parallel) before `docker run` — the largest
//! part of what a recorded Docker start cost over a bare `docker run`. The same
//! answers come from the daemon's socket in about a millisecond.
//!
//! Only where the client would ask that same socket: `DOCKER_HOST` unset or a
//! `unix://` address, and no context chosen (`DOCKER_CONTEXT`, or `currentContext`
//! in the client's `config.json`). Anything else — another transport, a context, a
//! socket that refuses us, an answer we do not expect — returns `None`, and the
//! caller asks the client as before, which then gives its own error. The daemon's
//! answers are untrusted input parsed as data: a size cap, a time-out, strict JSON.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

/// Where the daemon listens when nothing else is configured.
const DEFAULT_SOCKET: &str = "/var/run/docker.sock";

/// The largest answer read: `info` is a few KiB, an image's inspection tens.
const MAX_ANSWER: u64 = 4 << 20;

/// How the client is configured to reach its daemon (only what decides whether the
/// socket may be asked directly), read from the environment and the config file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientConfig {
    /// `DOCKER_HOST`.
    pub host: Option<String>,
    /// `DOCKER_CONTEXT`.
    pub context: Option<String>,
    /// `currentContext` of `$DOCKER_CONFIG/config.json` (or `~/.docker/config.json`).
    pub current_context: Option<String>,
}

impl ClientConfig {
    /// The caller's configuration: its environment and its client config file.
    pub fn from_env() -> Self {
        let var = |name| std::env::var(name).ok().filter(|v| !v.is_empty());
        let dir = var("DOCKER_CONFIG")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|home| Path::new(&home).join(".docker")));
        let current_context = dir
            .and_then(|dir| std::fs::read(dir.join("config.json")).ok())
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
            .and_then(|config| config["currentContext"].as_str().map(str::to_owned))
            .filter(|c| !c.is_empty());
        ClientConfig {
            host: var("DOCKER_HOST"),
            context: var("DOCKER_CONTEXT"),
            current_context,
        }
    }

    /// The socket the client would use, when it is one we may ask directly (pure).
    pub fn socket(&self) -> Option<PathBuf> {
        // `DOCKER_HOST` wins over contexts in the client; a context other than the
        // default one names an endpoint we would have to read from its store.
        if let Some(host) = &self.host {
            return host
                .strip_prefix("unix://")
                .filter(|p| p.starts_with('/'))
                .map(PathBuf::from);
        }
        let chosen = self.context.as_ref().or(self.current_context.as_ref());
        match chosen.map(String::as_str) {
            None | Some("default") => Some(PathBuf::from(DEFAULT_SOCKET)),
            Some(_) => None,
        }
    }
}

/// What one GET answered.
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    status: u16,
    body: Vec<u8>,
}

/// `GET path` over HTTP/1.0 (the daemon then ends the body by closing, never
/// chunks it), with `timeout` on each read and write.
fn get(socket: &Path, path: &str, timeout: Duration) -> Option<Answer> {
    let mut stream = UnixStream::connect(socket).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: docker\r\nUser-Agent: vectraguard\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut raw = Vec::new();
    stream.take(MAX_ANSWER + 1).read_to_end(&mut raw).ok()?;
    if raw.len() as u64 > MAX_ANSWER {
        return None;
    }
    parse_answer(&raw)
}

/// An HTTP/1.x answer's status and body (pure). A `Content-Length` the body does
/// not match, or a chunked body (never sent to an HTTP/1.0 request), is refused.
fn parse_answer(raw: &[u8]) -> Option<Answer> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    let httparse::Status::Complete(head) = response.parse(raw).ok()? else {
        return None;
    };
    let status = response.code?;
    let body = raw.get(head..)?;
    for header in response.headers.iter() {
        if header.name.eq_ignore_ascii_case("transfer-encoding") {
            return None;
        }
        if header.name.eq_ignore_ascii_case("content-length") {
            let length: usize = std::str::from_utf8(header.value)
                .ok()?
                .trim()
                .parse()
                .ok()?;
            if length != body.len() {
                return None;
            }
        }
    }
    Some(Answer {
        status,
        body: body.to_vec(),
    })
}

/// The daemon's `info`, the same JSON object `docker info --format '{{json .}}'`
/// prints the server's half of.
pub fn info(socket: &Path, timeout: Duration) -> Option<Value> {
    let answer = get(socket, "/info", timeout)?;
    (answer.status == 200)
        .then(|| serde_json::from_slice(&answer.body).ok())
        .flatten()
}

/// An image's inspection: `Some(Ok(config))` (its `.Config`, `Null` when it has
/// none), `Some(Err(()))` when the daemon says it has no such image, `None` when
/// the socket could not answer for the client.
pub fn image_config(socket: &Path, image: &str, timeout: Duration) -> Option<Result<Value, ()>> {
    // A reference's characters only, so the name is a path segment as it is: the
    // daemon matches the rest of the path as the name. Anything else is the
    // client's to judge.
    let plain = |c: char| c.is_ascii_alphanumeric() || "._-/:@".contains(c);
    // No `..` or `//` either (no reference has them): the router would clean the
    // path into another route.
    if image.is_empty()
        || image.starts_with(['-', '/'])
        || image.contains("..")
        || image.contains("//")
        || !image.chars().all(plain)
    {
        return None;
    }
    let answer = get(socket, &format!("/images/{image}/json"), timeout)?;
    match answer.status {
        200 => {
            let inspected: Value = serde_json::from_slice(&answer.body).ok()?;
            Some(Ok(inspected.get("Config").cloned().unwrap_or(Value::Null)))
        }
        // Only the daemon's own "no such image", not a 404 of a route it lacks.
        404 if String::from_utf8_lossy(&answer.body)
            .to_lowercase()
            .contains("no such image") =>
        {
            Some(Err(()))
        }
        _ => None,
    }
}

/// The daemon behind a socket, as far as this host can tell: the process that
/// listens on it (its pid and uid as the kernel recorded them at its `listen`, and
/// its start time, so that a reused pid is another daemon), on this boot. A daemon
/// answers `info`'s limits the same for as long as it runs: they come from the
/// host's cgroup hierarchies (which Docker reads once per daemon since 23.0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonId(String);

impl DaemonId {
    /// Its text (pure): what [`LimitsCache`] keys on.
    fn new(boot: &str, socket: &Path, pid: i32, uid: u32, start: u64) -> Option<Self> {
        let socket = socket.to_str()?;
        // One line of plain fields: nothing that could end a field or the line.
        let plain =
            |s: &str| !s.is_empty() && !s.chars().any(|c| c.is_whitespace() || c.is_control());
        (pid > 0 && plain(boot) && plain(socket)).then(|| {
            DaemonId(format!(
                "boot={boot} socket={socket} pid={pid} uid={uid} start={start}"
            ))
        })
    }

    /// Who listens on `socket` now; `None` when that cannot be told: no answer, or
    /// a listener outside this pid namespace (pid 0), whose start we cannot read.
    pub fn of(socket: &Path) -> Option<Self> {
        use std::os::fd::AsFd;
        let stream = UnixStream::connect(socket).ok()?;
        let (pid, uid, _) = vg_sandbox::fdpass::peer_credentials(stream.as_fd()).ok()?;
        drop(stream);
        if pid <= 0 {
            return None;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let start = start_time(&stat)?;
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        DaemonId::new(boot.trim(), socket, pid, uid, start)
    }
}

/// A process's start time (clock ticks after boot) from its `/proc/PID/stat` line
/// (pure): the 22nd field, counted after the command name's closing parenthesis
/// (the name itself may hold spaces and parentheses).
fn start_time(stat: &str) -> Option<u64> {
    let (_, after_name) = stat.rsplit_once(')')?;
    // Fields 3 onwards follow the name; the start time is field 22.
    after_name.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// The limits a Docker daemon said it can hold, kept in a file of the user's
/// (`$VECTRAGUARD_HOME/engines/`) for the next session with the same daemon: its
/// `info` costs 10-15 ms of the session's start here (the daemon runs `runc
/// --version` and `docker-init --version` to answer it) and tens of milliseconds of
/// the daemon's CPU. Read only from a folder that is ours and no one else's to
/// write, for the daemon it names ([`DaemonId`]); anything else is a miss.
///
/// The folder is opened once and checked as opened; its file is then reached only
/// through that descriptor (`/proc/self/fd/N/NAME`), never through the folder's
/// path again: whoever may write the folder's parent (a `$VECTRAGUARD_HOME` of
/// another user's, or `HOME` kept through `sudo`) could otherwise swap the folder
/// for a link to one of theirs between the check and the read, and plant limits
/// for a daemon whose id any local user can read (red team, session 16).
pub struct LimitsCache {
    /// The folder as opened and checked.
    dir: std::fs::File,
}

/// The cache file's name in its folder.
const LIMITS_FILE: &str = "docker-limits.json";

/// The largest cache file read.
const MAX_CACHE: u64 = 4096;

impl LimitsCache {
    /// The cache in `dir` (made 0700 when missing), when `dir` is ours and no one
    /// else's to write; `None` otherwise.
    pub fn open(dir: &Path) -> Option<Self> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
        let _ = std::fs::DirBuilder::new().mode(0o700).create(dir);
        // A link in place of the folder is refused here (O_NOFOLLOW); what is
        // checked is the folder as opened (fstat), which later reads go through.
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(dir)
            .ok()?;
        let meta = dir.metadata().ok()?;
        let ours =
            meta.is_dir() && meta.uid() == vg_sandbox::real_ids().0 && meta.mode() & 0o022 == 0;
        ours.then_some(LimitsCache { dir })
    }

    /// `name` in the folder as opened.
    fn inside(&self, name: &str) -> PathBuf {
        use std::os::fd::AsRawFd;
        PathBuf::from(format!("/proc/self/fd/{}/{name}", self.dir.as_raw_fd()))
    }

    /// What `daemon` said, if this cache holds its answer.
    pub fn get(&self, daemon: &DaemonId) -> Option<super::LimitSupport> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(self.inside(LIMITS_FILE))
            .ok()?;
        let mut text = Vec::new();
        file.take(MAX_CACHE + 1).read_to_end(&mut text).ok()?;
        if text.len() as u64 > MAX_CACHE {
            return None;
        }
        parse_cached(&text, daemon)
    }

    /// Keeps `limits` as `daemon`'s answer (best effort: a failure only means the
    /// next session asks again). Written to a new file, then renamed over the old.
    pub fn put(&self, daemon: &DaemonId, limits: super::LimitSupport) {
        use std::os::unix::fs::OpenOptionsExt;
        let tmp = self.inside(&format!(
            "docker-limits.tmp-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let file = self.inside(LIMITS_FILE);
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| f.write_all(cached_text(daemon, limits).as_bytes()))
            .and_then(|()| std::fs::rename(&tmp, &file));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// The cache file's text for `daemon`'s `limits` (pure).
fn cached_text(daemon: &DaemonId, limits: super::LimitSupport) -> String {
    serde_json::json!({
        "daemon": daemon.0,
        "memory": limits.memory,
        "swap": limits.swap,
        "pids": limits.pids,
        "cpus": limits.cpus,
    })
    .to_string()
}

/// The limits in a cache file's text, when it is `daemon`'s and has each of them
/// (pure).
fn parse_cached(text: &[u8], daemon: &DaemonId) -> Option<super::LimitSupport> {
    let value: Value = serde_json::from_slice(text).ok()?;
    if value.get("daemon")?.as_str()? != daemon.0 {
        return None;
    }
    let flag = |name: &str| value.get(name)?.as_bool();
    Some(super::LimitSupport {
        memory: flag("memory")?,
        swap: flag("swap")?,
        pids: flag("pids")?,
        cpus: flag("cpus")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_socket_is_asked_only_where_the_client_would_ask_it() {
        let config = |host: Option<&str>, context: Option<&str>, current: Option<&str>| {
            ClientConfig {
                host: host.map(str::to_owned),
                context: context.map(str::to_owned),
                current_context: current.map(str::to_owned),
            }
            .socket()
        };
        let default = Some(PathBuf::from(DEFAULT_SOCKET));
        assert_eq!(config(None, None, None), default);
        assert_eq!(config(None, Some("default"), None), default);
        assert_eq!(config(None, None, Some("default")), default);
        assert_eq!(
            config(
                Some("unix:///run/user/1000/docker.sock"),
                Some("remote"),
                None
            ),
            Some(PathBuf::from("/run/user/1000/docker.sock"))
        );
        // Other transports and contexts: the client's business.
        assert_eq!(config(Some("tcp://10.0.0.1:2376"), None, None), None);
        assert_eq!(config(Some("ssh://me@host"), None, None), None);
        assert_eq!(config(Some("unix://relative.sock"), None, None), None);
        assert_eq!(config(None, Some("remote"), None), None);
        assert_eq!(config(None, None, Some("rootless")), None);
        // The variable names the context over the file.
        assert_eq!(config(None, Some("default"), Some("rootless")), default);
    }

    #[test]
    fn a_daemon_is_told_by_its_process_and_boot() {
        let id = |pid, start| DaemonId::new("b00t", Path::new("/run/docker.sock"), pid, 0, start);
        let one = id(42, 1000).unwrap();
        assert_eq!(
            one.0,
            "boot=b00t socket=/run/docker.sock pid=42 uid=0 start=1000"
        );
        // The same pid started again is another daemon.
        assert_ne!(id(42, 1001), Some(one.clone()));
        // A listener whose pid is not visible here cannot be told apart.
        assert_eq!(id(0, 1000), None);
        assert_eq!(
            DaemonId::new("b00t", Path::new("/run/dock er.sock"), 42, 0, 1),
            None
        );
        assert_eq!(DaemonId::new("", Path::new("/d.sock"), 42, 0, 1), None);
        // The start time is field 22, after a name that may hold `)` and spaces.
        let stat =
            "1234 (docker d) x) S 1 1234 1234 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 12 0 98765 100 200";
        assert_eq!(start_time(stat), Some(98765));
        assert_eq!(start_time("1234 (short) S 1"), None);
        assert_eq!(start_time("no name here"), None);
    }

    #[test]
    fn cached_limits_are_only_their_own_daemons() {
        let daemon = DaemonId::new("b", Path::new("/d.sock"), 7, 0, 9).unwrap();
        let other = DaemonId::new("b", Path::new("/d.sock"), 7, 0, 10).unwrap();
        let limits = crate::engine::LimitSupport {
            memory: true,
            swap: false,
            pids: true,
            cpus: false,
        };
        let text = cached_text(&daemon, limits);
        assert_eq!(parse_cached(text.as_bytes(), &daemon), Some(limits));
        assert_eq!(parse_cached(text.as_bytes(), &other), None);
        // A field missing or of another type, or no JSON at all: a miss.
        let partial =
            serde_json::json!({"daemon": daemon.0, "memory": true, "swap": true, "pids": true});
        assert_eq!(parse_cached(partial.to_string().as_bytes(), &daemon), None);
        let typed = serde_json::json!({"daemon": daemon.0, "memory": 1, "swap": true, "pids": true, "cpus": true});
        assert_eq!(parse_cached(typed.to_string().as_bytes(), &daemon), None);
        assert_eq!(parse_cached(b"{", &daemon), None);

        // Through a folder: kept, read back, replaced.
        let dir = tempdir::Dir::new();
        let cache = LimitsCache::open(&dir.path().join("engines")).unwrap();
        assert_eq!(cache.get(&daemon), None);
        cache.put(&daemon, limits);
        assert_eq!(cache.get(&daemon), Some(limits));
        assert_eq!(cache.get(&other), None);
        let all = crate::engine::LimitSupport {
            memory: true,
            swap: true,
            pids: true,
            cpus: true,
        };
        cache.put(&other, all);
        assert_eq!(cache.get(&other), Some(all));
        assert_eq!(cache.get(&daemon), None);
        assert_eq!(
            std::fs::read_dir(dir.path().join("engines"))
                .unwrap()
                .count(),
            1,
            "no temporary file left"
        );
        // A folder others may write is not used.
        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(LimitsCache::open(&shared).is_none());
        // Nor a symlink in place of the file.
        let linked = LimitsCache::open(&dir.path().join("linked")).unwrap();
        std::os::unix::fs::symlink(
            dir.path().join("engines").join(LIMITS_FILE),
            dir.path().join("linked").join(LIMITS_FILE),
        )
        .unwrap();
        assert_eq!(linked.get(&other), None);
    }

    /// Red team (session 16): the folder was checked by its path and its file then
    /// opened by its path again, so whoever may write the folder's parent could
    /// swap the folder, once checked, for a link to one of theirs holding a planted
    /// answer (every field of a daemon's id is readable by any local user). The
    /// folder is now read and written only as it was opened and checked.
    #[test]
    fn a_folder_swapped_after_its_check_is_not_read_or_written() {
        let daemon = DaemonId::new("b", Path::new("/d.sock"), 7, 0, 9).unwrap();
        let none = crate::engine::LimitSupport {
            memory: false,
            swap: false,
            pids: false,
            cpus: false,
        };
        let all = crate::engine::LimitSupport {
            memory: true,
            swap: true,
            pids: true,
            cpus: true,
        };
        let root = tempdir::Dir::new();
        let engines = root.path().join("engines");
        let cache = LimitsCache::open(&engines).unwrap();
        cache.put(&daemon, all);
        // Another's folder with a planted answer: nothing held.
        let planted = root.path().join("planted");
        std::fs::create_dir(&planted).unwrap();
        std::fs::write(planted.join(LIMITS_FILE), cached_text(&daemon, none)).unwrap();
        // The checked folder moved aside, a link to the planted one in its place.
        std::fs::rename(&engines, root.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(&planted, &engines).unwrap();
        assert_eq!(cache.get(&daemon), Some(all), "the planted answer was read");
        cache.put(&daemon, all);
        assert_eq!(
            std::fs::read_to_string(planted.join(LIMITS_FILE)).unwrap(),
            cached_text(&daemon, none),
            "written through the link"
        );
        // Opened anew, the link is no folder of ours.
        assert!(LimitsCache::open(&engines).is_none());
    }

    #[test]
    fn answers_are_parsed_strictly() {
        let ok =
            b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(
            parse_answer(ok),
            Some(Answer {
                status: 200,
                body: b"{}".to_vec()
            })
        );
        // Without a length, the body runs to the end (the daemon closes).
        let open = b"HTTP/1.1 404 Not Found\r\n\r\n{\"message\":\"No such image: x\"}";
        assert_eq!(parse_answer(open).map(|a| a.status), Some(404));
        // A length the body does not match: cut short, or more than said.
        assert_eq!(
            parse_answer(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\n{}"),
            None
        );
        assert_eq!(
            parse_answer(b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n{}"),
            None
        );
        assert_eq!(
            parse_answer(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
            ),
            None
        );
        assert_eq!(parse_answer(b"HTTP/1.0 200 OK\r\nContent-Le"), None);
        assert_eq!(parse_answer(b"not http at all\r\n\r\n"), None);
    }

    /// A fake daemon on a socket of our own: one answer per connection.
    fn daemon(answer: &'static [u8]) -> (tempdir::Dir, std::thread::JoinHandle<String>) {
        let dir = tempdir::Dir::new();
        let listener = std::os::unix::net::UnixListener::bind(dir.path().join("d.sock"))
            .expect("bind the fake daemon");
        let handle = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().expect("accept");
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.ends_with(b"\r\n\r\n") {
                let n = conn.read(&mut buf).expect("read the request");
                assert!(n > 0, "the request ended early");
                request.extend_from_slice(&buf[..n]);
            }
            conn.write_all(answer).expect("answer");
            String::from_utf8(request).expect("a text request")
        });
        (dir, handle)
    }

    mod tempdir {
        pub struct Dir(std::path::PathBuf);
        impl Dir {
            pub fn new() -> Self {
                let path = std::env::temp_dir().join(format!(
                    "vg-engine-api-{}-{:?}",
                    std::process::id(),
                    std::thread::current().id()
                ));
                let _ = std::fs::remove_dir_all(&path);
                std::fs::create_dir(&path).expect("make the test folder");
                Dir(path)
            }
            pub fn path(&self) -> &std::path::Path {
                &self.0
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn an_image_config_and_a_missing_image_come_from_the_socket() {
        let (dir, daemon_end) = daemon(
            b"HTTP/1.0 200 OK\r\n\r\n{\"Id\":\"sha256:ab\",\"Config\":{\"Cmd\":[\"sh\"],\"Env\":[\"PATH=/bin\"]}}",
        );
        let socket = dir.path().join("d.sock");
        let config = image_config(&socket, "library/busybox:1", Duration::from_secs(5));
        assert_eq!(
            config,
            Some(Ok(serde_json::json!({"Cmd": ["sh"], "Env": ["PATH=/bin"]})))
        );
        let request = daemon_end.join().expect("the fake daemon");
        assert!(
            request.starts_with("GET /images/library/busybox:1/json HTTP/1.0\r\n"),
            "{request}"
        );
        drop(dir);

        let (dir, daemon_end) =
            daemon(b"HTTP/1.0 404 Not Found\r\n\r\n{\"message\":\"No such image: nope:latest\"}");
        let socket = dir.path().join("d.sock");
        assert_eq!(
            image_config(&socket, "nope", Duration::from_secs(5)),
            Some(Err(()))
        );
        daemon_end.join().expect("the fake daemon");
        drop(dir);

        // A 404 that is not the daemon's "no such image" is left to the client.
        let (dir, daemon_end) = daemon(b"HTTP/1.0 404 Not Found\r\n\r\npage not found");
        let socket = dir.path().join("d.sock");
        assert_eq!(image_config(&socket, "x", Duration::from_secs(5)), None);
        daemon_end.join().expect("the fake daemon");
    }

    #[test]
    fn names_that_are_not_plain_references_are_left_to_the_client() {
        // A daemon that answers once: a name that reached it would get a config,
        // and the good name after them would then find no listener.
        let (dir, daemon_end) = daemon(b"HTTP/1.0 200 OK\r\n\r\n{\"Config\":null}");
        let socket = dir.path().join("d.sock");
        for name in [
            "",
            "-x",
            "/etc",
            "a b",
            "x?y=1",
            "x#y",
            "x/../../info",
            "a//b",
            "\u{fc}",
        ] {
            assert_eq!(
                image_config(&socket, name, Duration::from_secs(5)),
                None,
                "{name}"
            );
        }
        assert_eq!(
            image_config(&socket, "busybox", Duration::from_secs(5)),
            Some(Ok(Value::Null))
        );
        let request = daemon_end.join().expect("the fake daemon");
        assert!(
            request.starts_with("GET /images/busybox/json "),
            "{request}"
        );
        // An unreachable socket is `None` too: the client will say why.
        assert_eq!(
            info(
                Path::new("/nonexistent/vectraguard/d.sock"),
                Duration::from_secs(1)
            ),
            None
        );
    }
}
