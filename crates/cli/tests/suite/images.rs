//! `vectraguard image`: pulls from a real registry on loopback (Debian's
//! `docker-registry`, also behind a password), images built here from `busybox-static` and pushed with
//! `skopeo`, loads of `docker save` and OCI archives and layouts, imports, and the
//! failures: a tampered blob, hostile layers, bad names, missing files.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

use super::harness::{Output, RecordsHome, Runner, TempDir, Vg, each_identity};

const BUSYBOX: &str = "/bin/busybox";

/// The tools the image tests need, with the Debian packages that ship them.
const TOOLS: &[(&str, &str)] = &[
    ("/usr/bin/docker-registry", "docker-registry"),
    ("/usr/bin/skopeo", "skopeo"),
    (BUSYBOX, "busybox-static"),
];

/// `htpasswd`, for a registry that asks for a password.
const HTPASSWD: (&str, &str) = ("/usr/bin/htpasswd", "apache2-utils");

/// The tools every image test needs (`scripts/test` installs them).
pub(super) const IMAGE_TOOLS: &[(&str, &str)] = TOOLS;

/// Returns from the test when a tool is missing and that is allowed; fails it otherwise.
macro_rules! require_tools {
    () => {
        require_tools!(TOOLS)
    };
    ($tools:expr) => {
        if !super::harness::require_tools($tools) {
            return;
        }
    };
}

/// Standard base64 with padding, as in Docker's `auths.<registry>.auth`.
fn base64(text: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in text.as_bytes().chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

// ---------------------------------------------------------------------------------------
// A registry on loopback.

pub(super) struct Registry {
    child: Child,
    port: u16,
    dir: TempDir,
    /// The user name and password it asks for, if it asks.
    credentials: Option<(String, String)>,
}

impl Registry {
    pub(super) fn start() -> Self {
        Self::launch(None)
    }

    /// A registry that lets in only `user` with `password` (HTTP basic
    /// authentication against an htpasswd file, which works over plain HTTP too).
    pub(super) fn start_with_auth(user: &str, password: &str) -> Self {
        Self::launch(Some((user.to_owned(), password.to_owned())))
    }

    fn launch(credentials: Option<(String, String)>) -> Self {
        let dir = TempDir::new("registry");
        // The registry binds it right after.
        let port = super::harness::free_port();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.join("storage").display()
        );
        if let Some((user, password)) = &credentials {
            // A bcrypt entry, the only hash docker-registry accepts.
            let entry = run_ok(Command::new(HTPASSWD.0).args(["-Bbn", user, password]));
            let file = dir.write("htpasswd", entry.trim());
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: vg-test\n    path: {}\n",
                file.display()
            ));
        }
        let cfg = dir.write("config.yml", config);
        let child = Command::new("/usr/bin/docker-registry")
            .arg("serve")
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start docker-registry");
        let registry = Self {
            child,
            port,
            dir,
            credentials,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !registry.answers() {
            assert!(
                Instant::now() < deadline,
                "docker-registry did not start on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        registry
    }

    fn answers(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let authorization = self
            .credentials
            .as_ref()
            .map(|(u, p)| format!("Authorization: Basic {}\r\n", base64(&format!("{u}:{p}"))))
            .unwrap_or_default();
        let _ = s.write_all(format!("GET /v2/ HTTP/1.0\r\n{authorization}\r\n").as_bytes());
        let mut reply = String::new();
        let _ = s.read_to_string(&mut reply);
        reply.starts_with("HTTP/1.1 200") || reply.starts_with("HTTP/1.0 200")
    }

    pub(super) fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Pushes an OCI layout's `tag` as `repo:tag` (`format` "oci" or "v2s2"; `all`
    /// pushes a whole multi-platform index).
    pub(super) fn push(&self, layout: &Path, tag: &str, repo: &str, format: &str, all: bool) {
        let mut cmd = Command::new("skopeo");
        cmd.args([
            "--insecure-policy",
            "copy",
            "--quiet",
            "--dest-tls-verify=false",
        ]);
        if let Some((user, password)) = &self.credentials {
            cmd.arg(format!("--dest-creds={user}:{password}"));
        }
        if all {
            cmd.arg("--all");
        } else {
            cmd.args(["--format", format]);
        }
        cmd.arg(format!("oci:{}:{tag}", layout.display()))
            .arg(format!("docker://{}/{repo}:{tag}", self.host()));
        run_ok(&mut cmd);
    }

    /// The registry's own copy of a blob.
    fn blob_data(&self, hex: &str) -> PathBuf {
        self.dir
            .join("storage/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

// ---------------------------------------------------------------------------------------
// Images built here.

/// A tar of a busybox root: /bin/busybox with a few applet links, /etc/passwd,
/// /etc/motd carrying `marker`, /srv.
pub(super) fn busybox_layer(marker: &str) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let dir = |b: &mut tar::Builder<Vec<u8>>, path: &str| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_path(path).unwrap();
        h.set_mode(0o755);
        h.set_size(0);
        h.set_cksum();
        b.append(&h, &b""[..]).unwrap();
    };
    for d in ["bin", "etc", "srv", "tmp"] {
        dir(&mut b, d);
    }
    let file = |b: &mut tar::Builder<Vec<u8>>, path: &str, data: &[u8], mode: u32| {
        let mut h = tar::Header::new_gnu();
        h.set_path(path).unwrap();
        h.set_mode(mode);
        h.set_size(data.len() as u64);
        h.set_mtime(1_700_000_000);
        h.set_cksum();
        b.append(&h, data).unwrap();
    };
    file(&mut b, "bin/busybox", &fs::read(BUSYBOX).unwrap(), 0o755);
    file(
        &mut b,
        "etc/passwd",
        b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n",
        0o644,
    );
    file(&mut b, "etc/motd", marker.as_bytes(), 0o644);
    for applet in ["sh", "echo", "cat", "env", "pwd", "true", "ls"] {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_path(format!("bin/{applet}")).unwrap();
        h.set_link_name("busybox").unwrap();
        h.set_mode(0o777);
        h.set_size(0);
        h.set_cksum();
        b.append(&h, &b""[..]).unwrap();
    }
    b.into_inner().unwrap()
}

pub(super) fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// An OCI layout under construction.
pub(super) struct Layout {
    pub(super) dir: PathBuf,
    manifests: Vec<serde_json::Value>,
}

impl Layout {
    pub(super) fn new(dir: PathBuf) -> Self {
        fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
        fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
        Self {
            dir,
            manifests: Vec::new(),
        }
    }

    fn blob(&self, bytes: &[u8]) -> String {
        let hex = sha256_hex(bytes);
        fs::write(self.dir.join("blobs/sha256").join(&hex), bytes).unwrap();
        format!("sha256:{hex}")
    }

    /// Adds a one-layer image for `arch` and returns its manifest's descriptor.
    pub(super) fn image(
        &self,
        arch: &str,
        marker: &str,
        config: serde_json::Value,
    ) -> serde_json::Value {
        let tar = busybox_layer(marker);
        let diff_id = format!("sha256:{}", sha256_hex(&tar));
        let layer = gzip(&tar);
        let mut cfg = serde_json::json!({
            "architecture": arch, "os": "linux",
            "created": "2026-11-21T06:00:00Z",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        });
        if let Some(env) = cfg["config"]["Env"].as_array_mut() {
            env.push(format!("ARCH_MARKER={arch}").into());
        }
        let cfg = serde_json::to_vec(&cfg).unwrap();
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": self.blob(&cfg), "size": cfg.len()},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": self.blob(&layer), "size": layer.len()}],
        }))
        .unwrap();
        serde_json::json!({
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": self.blob(&manifest),
            "size": manifest.len(),
            "platform": {"architecture": arch, "os": "linux"},
        })
    }

    /// Lists `desc` in index.json under `tag`.
    pub(super) fn tag(&mut self, mut desc: serde_json::Value, tag: &str) {
        desc["annotations"] = serde_json::json!({"org.opencontainers.image.ref.name": tag});
        self.manifests.push(desc);
        let index = serde_json::json!({"schemaVersion": 2, "manifests": self.manifests});
        fs::write(
            self.dir.join("index.json"),
            serde_json::to_vec(&index).unwrap(),
        )
        .unwrap();
    }

    /// Adds a multi-platform index of `descs` under `tag`.
    fn multi(&mut self, descs: Vec<serde_json::Value>, tag: &str) {
        let index = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": descs,
        }))
        .unwrap();
        let desc = serde_json::json!({
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "digest": self.blob(&index),
            "size": index.len(),
        });
        self.tag(desc, tag);
    }
}

pub(super) fn default_config() -> serde_json::Value {
    serde_json::json!({
        "Env": ["PATH=/bin", "GREETING=from-the-image"],
        "Cmd": ["/bin/cat", "/etc/motd"],
        "WorkingDir": "/srv",
        "User": "nobody",
    })
}

/// The host's architecture as OCI names it.
pub(super) fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

// ---------------------------------------------------------------------------------------
// Running `vectraguard image`.

pub(super) fn image(runner: Runner, home: &RecordsHome, args: &[&str]) -> Output {
    let mut vg = Vg::new(runner, home.path());
    vg.records_home(home).arg("image").args(args);
    vg.run()
}

fn store_blobs(home: &RecordsHome) -> Vec<String> {
    let dir = home.join("images/blobs/sha256");
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn dir_is_empty(path: &Path) -> bool {
    fs::read_dir(path)
        .map(|mut d| d.next().is_none())
        .unwrap_or(true)
}

pub(super) fn inspect(runner: Runner, home: &RecordsHome, name: &str) -> serde_json::Value {
    let out = image(runner, home, &["inspect", name]);
    out.assert_success();
    let v: serde_json::Value =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}\n{out}"));
    v[0].clone()
}

// ---------------------------------------------------------------------------------------
// Tests.

#[test]
fn pull_by_tag_and_by_digest_from_a_registry() {
    require_tools!();
    let registry = Registry::start();
    let work = TempDir::new("layout");
    let mut layout = Layout::new(work.join("oci"));
    let desc = layout.image(host_arch(), "hello from busybox", default_config());
    let manifest_digest = desc["digest"].as_str().unwrap().to_owned();
    layout.tag(desc, "1.0");
    registry.push(&layout.dir, "1.0", "vg/busybox", "oci", false);
    registry.push(&layout.dir, "1.0", "vg/busybox-docker", "v2s2", false);
    let host = registry.host();
    each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let name = format!("{host}/vg/busybox:1.0");
        let out = image(runner, &home, &["pull", &name]);
        out.assert_success()
            .assert_stdout_contains(&format!("Pulled: {name}"))
            .assert_stdout_contains(&format!("Digest: {manifest_digest}"));
        // Progress goes to stderr as plain lines when it is not a terminal.
        out.assert_stderr_contains("layer 1/1");
        let info = inspect(runner, &home, &name);
        assert_eq!(info["digest"], manifest_digest.as_str());
        assert_eq!(info["config"]["working_dir"], "/srv");
        assert_eq!(info["config"]["user"], "nobody");
        assert_eq!(
            info["config"]["cmd"],
            serde_json::json!(["/bin/cat", "/etc/motd"])
        );
        assert!(
            info["config"]["env"]
                .as_array()
                .unwrap()
                .contains(&"GREETING=from-the-image".into())
        );
        let rootfs = PathBuf::from(info["rootfs"].as_str().expect("unpacked"));
        assert_eq!(
            fs::read_to_string(rootfs.join("etc/motd")).unwrap(),
            "hello from busybox"
        );
        assert_eq!(
            fs::read_link(rootfs.join("bin/sh")).unwrap(),
            Path::new("busybox")
        );
        assert_eq!(
            fs::metadata(rootfs.join("bin/busybox")).unwrap().len(),
            fs::metadata(BUSYBOX).unwrap().len()
        );

        // By digest: the same image under its pinned name, without a download.
        let pinned = format!("{host}/vg/busybox@{manifest_digest}");
        let out = image(runner, &home, &["pull", &pinned]);
        out.assert_success()
            .assert_stderr_contains("already in the store");
        // Docker's schema 2 format of the same image.
        let docker = format!("{host}/vg/busybox-docker:1.0");
        image(runner, &home, &["pull", &docker]).assert_success();
        let info = inspect(runner, &home, &docker);
        assert_eq!(
            info["layers"][0]["media_type"],
            "application/vnd.docker.image.rootfs.diff.tar.gzip"
        );

        let out = image(runner, &home, &["ls"]);
        out.assert_success();
        for n in [&name, &pinned, &docker] {
            assert!(out.stdout.contains(n.as_str()), "{n} not listed\n{out}");
        }
        let json: serde_json::Value =
            serde_json::from_str(&image(runner, &home, &["ls", "--json"]).stdout).unwrap();
        assert_eq!(json.as_array().unwrap().len(), 3);

        // A tag or repository the registry does not have.
        let out = image(runner, &home, &["pull", &format!("{host}/vg/busybox:nope")]);
        out.assert_code(125).assert_stderr_contains("not found");
    });
}

#[test]
fn pull_from_a_registry_that_requires_credentials() {
    require_tools!(&[TOOLS[0], TOOLS[1], TOOLS[2], HTPASSWD]);
    // A colon in the password: only the first one separates it from the user name.
    let (user, password) = ("vg-user", "s3cr:et");
    let registry = Registry::start_with_auth(user, password);
    let work = TempDir::new("layout");
    let mut layout = Layout::new(work.join("oci"));
    let desc = layout.image(host_arch(), "behind a password", default_config());
    let manifest_digest = desc["digest"].as_str().unwrap().to_owned();
    layout.tag(desc, "1.0");
    registry.push(&layout.dir, "1.0", "vg/private", "oci", false);
    let host = registry.host();
    let name = format!("{host}/vg/private:1.0");

    // Docker config folders ($DOCKER_CONFIG), readable by the unprivileged runner: one
    // without a config.json, one with a wrong password, one with the right one.
    let configs = TempDir::new("docker-config");
    let auths = |pass: &str| {
        let auth = base64(&format!("{user}:{pass}"));
        serde_json::json!({"auths": {host.as_str(): {"auth": auth}}}).to_string()
    };
    configs.mkdir("none");
    configs.write("wrong/config.json", auths("not-the-password"));
    configs.write("right/config.json", auths(password));
    let (none, wrong, right) = (
        configs.arg("none"),
        configs.arg("wrong"),
        configs.arg("right"),
    );

    each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let pull = |docker_config: &str| {
            let mut vg = Vg::new(runner, home.path());
            vg.records_home(&home)
                .env("DOCKER_CONFIG", docker_config)
                .args(["image", "pull", &name]);
            vg.run()
        };

        // No credentials: refused, and told how to give some.
        let out = pull(&none);
        out.assert_code(125)
            .assert_stderr_contains(&format!("registry {host}"))
            .assert_stderr_contains("user name and password")
            .assert_stderr_contains(&format!("docker login {host}"))
            .assert_stderr_contains(&format!("{none}/config.json"));
        assert!(store_blobs(&home).is_empty(), "{out}");

        // A wrong password: refused, and told which credentials were refused.
        let out = pull(&wrong);
        out.assert_code(125)
            .assert_stderr_contains(&format!("registry {host}"))
            .assert_stderr_contains("refused the user name and password")
            .assert_stderr_contains(&format!("{wrong}/config.json"));
        assert!(!out.stderr.contains("not-the-password"), "{out}");
        assert!(store_blobs(&home).is_empty(), "{out}");
        let out = image(runner, &home, &["ls", "-q"]);
        out.assert_success();
        assert_eq!(out.stdout, "", "{out}");

        // The right ones: pulled, and in the store.
        let out = pull(&right);
        out.assert_success()
            .assert_stdout_contains(&format!("Pulled: {name}"))
            .assert_stdout_contains(&format!("Digest: {manifest_digest}"));
        assert!(!out.stderr.contains(password), "{out}");
        let info = inspect(runner, &home, &name);
        assert_eq!(info["digest"], manifest_digest.as_str());
        let rootfs = PathBuf::from(info["rootfs"].as_str().expect("unpacked"));
        assert_eq!(
            fs::read_to_string(rootfs.join("etc/motd")).unwrap(),
            "behind a password"
        );
    });
}

#[test]
fn a_multi_platform_index_gives_the_host_platform() {
    require_tools!();
    let registry = Registry::start();
    let work = TempDir::new("layout");
    let mut layout = Layout::new(work.join("oci"));
    let other = if host_arch() == "amd64" {
        "arm64"
    } else {
        "amd64"
    };
    let mine = layout.image(host_arch(), "native", default_config());
    let theirs = layout.image(other, "foreign", default_config());
    layout.multi(vec![theirs, mine], "multi");
    registry.push(&layout.dir, "multi", "vg/multi", "oci", true);
    let name = format!("{}/vg/multi:multi", registry.host());
    each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let out = image(runner, &home, &["pull", &name]);
        out.assert_success()
            .assert_stderr_contains("multi-platform");
        let info = inspect(runner, &home, &name);
        assert_eq!(info["architecture"], host_arch());
        let env = info["config"]["env"].as_array().unwrap();
        assert!(
            env.contains(&format!("ARCH_MARKER={}", host_arch()).into()),
            "{env:?}"
        );
        let rootfs = PathBuf::from(info["rootfs"].as_str().unwrap());
        assert_eq!(
            fs::read_to_string(rootfs.join("etc/motd")).unwrap(),
            "native"
        );
        // The repo digest is the index's, the digest the platform manifest's.
        assert_ne!(info["repo_digest"], info["digest"]);
    });
}

#[test]
fn a_tampered_blob_is_rejected_and_nothing_is_kept() {
    require_tools!();
    let registry = Registry::start();
    let work = TempDir::new("layout");
    let mut layout = Layout::new(work.join("oci"));
    let desc = layout.image(host_arch(), "tamper me", default_config());
    let manifest: serde_json::Value = serde_json::from_slice(
        &fs::read(
            layout
                .dir
                .join("blobs/sha256")
                .join(&desc["digest"].as_str().unwrap()[7..]),
        )
        .unwrap(),
    )
    .unwrap();
    let layer_hex = manifest["layers"][0]["digest"].as_str().unwrap()[7..].to_owned();
    layout.tag(desc, "1");
    registry.push(&layout.dir, "1", "vg/tampered", "oci", false);
    // Flip one byte of the layer in the registry's storage: same size, other digest.
    let data = registry.blob_data(&layer_hex);
    let mut bytes = fs::read(&data).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    fs::write(&data, bytes).unwrap();
    let name = format!("{}/vg/tampered:1", registry.host());
    each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let out = image(runner, &home, &["pull", &name]);
        out.assert_code(125)
            .assert_stderr_contains("digest mismatch")
            .assert_stderr_contains(&layer_hex);
        assert_eq!(store_blobs(&home), Vec::<String>::new(), "blobs were kept");
        assert!(dir_is_empty(&home.join("images/rootfs")));
        assert!(dir_is_empty(&home.join("images/tmp")));
        let out = image(runner, &home, &["ls", "-q"]);
        out.assert_success();
        assert_eq!(out.stdout, "", "{out}");
    });
}

#[test]
fn load_docker_save_oci_archive_and_layout() {
    require_tools!();
    let work = TempDir::new("layout");
    let mut layout = Layout::new(work.join("oci"));
    let desc = layout.image(host_arch(), "loaded", default_config());
    layout.tag(desc, "v1");
    // skopeo writes the archives: an independent producer of both formats.
    let docker_tar = work.join("saved.tar");
    run_ok(
        Command::new("skopeo")
            .args(["--insecure-policy", "copy", "--quiet"])
            .arg(format!("oci:{}:v1", layout.dir.display()))
            .arg(format!(
                "docker-archive:{}:saved/app:v1",
                docker_tar.display()
            )),
    );
    let oci_tar = work.join("oci.tar");
    run_ok(
        Command::new("skopeo")
            .args(["--insecure-policy", "copy", "--quiet"])
            .arg(format!("oci:{}:v1", layout.dir.display()))
            .arg(format!("oci-archive:{}:v1", oci_tar.display())),
    );
    // Readable by the unprivileged runner.
    for f in [&docker_tar, &oci_tar] {
        fs::set_permissions(f, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    }
    run_ok(Command::new("chmod").args(["-R", "a+rX"]).arg(work.path()));
    let (docker_tar, oci_tar, oci_dir) = (
        docker_tar.display().to_string(),
        oci_tar.display().to_string(),
        layout.dir.display().to_string(),
    );
    each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let out = image(runner, &home, &["load", "-i", &docker_tar]);
        out.assert_success()
            .assert_stdout_contains("Loaded image: docker.io/saved/app:v1");
        let info = inspect(runner, &home, "saved/app:v1");
        assert_eq!(info["config"]["working_dir"], "/srv");
        let rootfs = PathBuf::from(info["rootfs"].as_str().unwrap());
        assert_eq!(
            fs::read_to_string(rootfs.join("etc/motd")).unwrap(),
            "loaded"
        );

        // An OCI archive and an OCI layout name the image by a bare tag: --tag names it.
        let out = image(runner, &home, &["load", "-i", &oci_tar]);
        out.assert_code(125).assert_stderr_contains("--tag");
        image(
            runner,
            &home,
            &["load", "-i", &oci_tar, "--tag", "local/oci-archive:1"],
        )
        .assert_success();
        image(
            runner,
            &home,
            &["load", "-i", &oci_dir, "--tag", "local/oci-dir:1"],
        )
        .assert_success();
        let a = inspect(runner, &home, "local/oci-archive:1");
        let d = inspect(runner, &home, "local/oci-dir:1");
        assert_eq!(a["id"], d["id"]);
        assert_eq!(a["id"], info["id"], "the same config, whichever the format");

        // rm by id removes every name of the image, then collects everything.
        let id = info["id"].as_str().unwrap()[7..19].to_owned();
        let out = image(runner, &home, &["rm", &id]);
        out.assert_success()
            .assert_stdout_contains("Untagged: docker.io/local/oci-dir:1");
        assert!(store_blobs(&home).is_empty(), "{out}");
        assert!(dir_is_empty(&home.join("images/rootfs")));
    });
}

#[test]
fn import_a_rootfs_tarball() {
    require_tools!();
    let work = TempDir::new("import");
    let tarball = work.write("root.tar.gz", gzip(&busybox_layer("imported")));
    let tarball = tarball.display().to_string();
    each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let out = image(
            runner,
            &home,
            &["import", &tarball, "--tag", "local/busybox"],
        );
        out.assert_success()
            .assert_stdout_contains("Imported: docker.io/local/busybox:latest");
        let info = inspect(runner, &home, "local/busybox");
        assert_eq!(info["source"], "import");
        assert_eq!(
            info["layers"][0]["media_type"],
            "application/vnd.oci.image.layer.v1.tar+gzip"
        );
        let rootfs = PathBuf::from(info["rootfs"].as_str().unwrap());
        assert_eq!(
            fs::read_to_string(rootfs.join("etc/motd")).unwrap(),
            "imported"
        );
        // Owned by whoever ran vectraguard, never by another id from the archive.
        let owner =
            std::os::unix::fs::MetadataExt::uid(&fs::metadata(rootfs.join("etc/motd")).unwrap());
        assert_eq!(owner, runner.invoker().uid);
        let out = image(runner, &home, &["rm", "local/busybox"]);
        out.assert_success()
            .assert_stdout_contains("Untagged: docker.io/local/busybox:latest");
        assert!(store_blobs(&home).is_empty());
    });
}

#[test]
fn hostile_archives_are_refused_whole() {
    let work = TempDir::new("hostile");
    let victim = work.write("victim", "host data");
    let mut entries: Vec<(String, tar::EntryType, String)> = vec![
        ("../escape".into(), tar::EntryType::Regular, String::new()),
        (
            victim.display().to_string(),
            tar::EntryType::Regular,
            String::new(),
        ),
        (
            "hl".into(),
            tar::EntryType::Link,
            victim.display().to_string(),
        ),
    ];
    entries.push((
        "../.wh.victim".into(),
        tar::EntryType::Regular,
        String::new(),
    ));
    for (i, (name, kind, link)) in entries.iter().enumerate() {
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        h.set_entry_type(*kind);
        h.set_mode(0o644);
        h.set_size(0);
        h.set_cksum();
        b.append(&h, &b""[..]).unwrap();
        work.write(format!("evil{i}.tar"), b.into_inner().unwrap());
    }
    each_identity(|runner| {
        let home = RecordsHome::new(runner);
        for (i, (name, _, _)) in entries.iter().enumerate() {
            let tar = work.arg(format!("evil{i}.tar"));
            let out = image(runner, &home, &["import", &tar, "--tag", "evil"]);
            out.assert_code(125)
                .assert_stderr_contains("unsafe layer entry");
            assert!(out.stderr.contains(name.as_str()), "{out}");
            assert!(store_blobs(&home).is_empty(), "{out}");
        }
        assert_eq!(fs::read_to_string(&victim).unwrap(), "host data");
        assert!(!work.path().parent().unwrap().join("escape").exists());
        assert_eq!(image(runner, &home, &["ls", "-q"]).stdout, "");
    });
}

#[test]
fn bad_names_and_missing_files_say_what_to_do() {
    each_identity(|runner| {
        let home = RecordsHome::new(runner);
        for (args, expect) in [
            (vec!["pull", "Ubuntu"], "invalid image reference"),
            (vec!["pull", "ubuntu:bad tag"], "invalid image reference"),
            (vec!["pull", "ubuntu@sha256:1234"], "64 lowercase hex"),
            (
                vec!["load", "-i", "/nonexistent/x.tar"],
                "cannot read /nonexistent/x.tar",
            ),
            (
                vec!["import", "/nonexistent/r.tar", "--tag", "x"],
                "cannot read /nonexistent/r.tar",
            ),
            (vec!["import", "/etc", "--tag", "x"], "is a directory"),
            (
                vec!["load", "-i", "/etc/hostname"],
                "not a valid tar archive",
            ),
            (vec!["inspect", "not-here"], "vectraguard image pull"),
            (
                vec!["rm", "not-here"],
                "no image docker.io/library/not-here",
            ),
        ] {
            let out = image(runner, &home, &args);
            out.assert_code(125).assert_stderr_contains(expect);
        }
        // A registry that is not there: a closed loopback port.
        let port = super::harness::free_port();
        let out = image(runner, &home, &["pull", &format!("127.0.0.1:{port}/x/y:1")]);
        out.assert_code(125).assert_stderr_contains("cannot reach");
        // VECTRAGUARD_HOME must be absolute.
        let mut vg = Vg::new(runner, home.path());
        vg.env("VECTRAGUARD_HOME", "relative/home")
            .args(["image", "ls"]);
        vg.run().assert_code(125).assert_stderr_contains("absolute");
    });
}
