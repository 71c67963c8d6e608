//! Running the real `vectraguard` binary as root and as an unprivileged user, in
//! throwaway workspaces, with a controlled environment.
//!
//! Nothing here relies on state shared between tests: under cargo-nextest every test is
//! its own process, and under `cargo test` tests run in parallel threads. Per-process
//! caches (`OnceLock`) only avoid repeating the same lookup.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The binary under test.
pub fn bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| reachable_copy(env!("CARGO_BIN_EXE_vectraguard")))
}

/// The unprivileged test user must be able to execute the binary, but a fresh clone
/// may live under a directory only root can enter (e.g. /root). When some ancestor is
/// not world-searchable, use a copy in /tmp, shared by all test processes (keyed by
/// size and mtime, published with an atomic rename).
fn reachable_copy(built: &str) -> String {
    let path = Path::new(built);
    let searchable = path
        .ancestors()
        .skip(1)
        .all(|dir| std::fs::metadata(dir).is_ok_and(|m| m.mode() & 0o001 != 0));
    if searchable {
        return built.to_owned();
    }
    let meta = std::fs::metadata(path).expect("test binary");
    let dir = PathBuf::from(format!(
        "/tmp/vg-test-bin-{}-{}",
        meta.size(),
        meta.mtime_nsec() ^ meta.mtime()
    ));
    let target = dir.join("vectraguard");
    if !target.exists() {
        std::fs::create_dir_all(&dir).expect("create the binary copy's directory");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let tmp = dir.join(format!(".copy-{}", std::process::id()));
        std::fs::copy(path, &tmp).expect("copy the test binary");
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::rename(&tmp, &target).expect("publish the binary copy");
    }
    target.display().to_string()
}

/// Debian's python3: the only interpreter guaranteed to be visible inside the sandbox.
pub const PYTHON: &str = "/usr/bin/python3";

/// PATH given to vectraguard (the sandbox sets its own PATH inside).
const HOST_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// How long any single vectraguard invocation may take before the test gives up.
const RUN_DEADLINE: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------
// Users.

/// A host user, from /etc/passwd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
}

fn passwd() -> Vec<User> {
    let text = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(':').collect();
            if f.len() < 7 {
                return None;
            }
            Some(User {
                name: f[0].to_owned(),
                uid: f[2].parse().ok()?,
                gid: f[3].parse().ok()?,
                home: PathBuf::from(f[5]),
            })
        })
        .collect()
}

fn user_named(name: &str) -> Option<User> {
    passwd().into_iter().find(|u| u.name == name)
}

/// Every user in /etc/passwd.
pub fn all_users() -> Vec<User> {
    passwd()
}

/// The uid of this test process.
pub fn my_uid() -> u32 {
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX)
}

fn my_gid() -> u32 {
    std::fs::metadata("/proc/self")
        .map(|m| m.gid())
        .unwrap_or(u32::MAX)
}

pub fn is_root() -> bool {
    my_uid() == 0
}

/// The unprivileged user the sandboxed commands run as: `$VG_TEST_USER` (default
/// `vgtest`), created when missing, when the tests run as root; otherwise ourselves.
pub fn test_user() -> &'static User {
    static USER: OnceLock<User> = OnceLock::new();
    USER.get_or_init(|| {
        if !is_root() {
            let uid = my_uid();
            return passwd()
                .into_iter()
                .find(|u| u.uid == uid)
                .map(|mut u| {
                    u.gid = my_gid();
                    u
                })
                .unwrap_or_else(|| User {
                    name: uid.to_string(),
                    uid,
                    gid: my_gid(),
                    home: std::env::var_os("HOME").map_or_else(|| "/".into(), PathBuf::from),
                });
        }
        let name = std::env::var("VG_TEST_USER").unwrap_or_else(|_| "vgtest".to_owned());
        let user = ensure_user(&name);
        assert_ne!(user.uid, 0, "VG_TEST_USER={name} must not be root");
        user
    })
}

/// Creates the test user if it does not exist. Tests run in parallel processes, so
/// another process may be creating it at the same moment: `useradd` then exits 9
/// ("already exists") or fails to take the passwd lock; either way, look again.
fn ensure_user(name: &str) -> User {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(user) = user_named(name) {
            if !user.home.is_dir() && user.home.starts_with("/home") {
                let _ = std::fs::create_dir_all(&user.home);
                let _ = std::os::unix::fs::chown(&user.home, Some(user.uid), Some(user.gid));
            }
            return user;
        }
        let out = Command::new("useradd")
            .args(["--create-home", "--shell", "/bin/sh", name])
            .env("PATH", HOST_PATH)
            .output()
            .expect("cannot run useradd (is the passwd package installed?)");
        if out.status.success() || user_named(name).is_some() {
            continue;
        }
        assert!(
            Instant::now() < deadline,
            "useradd {name} failed with {:?}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// root's passwd entry.
fn root_user() -> User {
    user_named("root").unwrap_or(User {
        name: "root".into(),
        uid: 0,
        gid: 0,
        home: "/root".into(),
    })
}

// ---------------------------------------------------------------------------------------
// Runners: who starts vectraguard.

/// Who starts `vectraguard`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runner {
    /// vectraguard runs as root; the workspace belongs to the test user, so the
    /// sandboxed command runs as that user.
    Root,
    /// vectraguard runs as the test user (through `setpriv` when the tests are root).
    Unprivileged,
}

impl Runner {
    /// The user who starts vectraguard.
    pub fn invoker(self) -> User {
        match self {
            Runner::Root => root_user(),
            Runner::Unprivileged => test_user().clone(),
        }
    }

    /// The user the sandboxed command runs as: always the test user.
    pub fn sandbox_user(self) -> &'static User {
        test_user()
    }

    /// A command that starts `program` on the host as this runner's user, with an
    /// empty environment apart from PATH and HOME. Also used for controls: showing
    /// that without the sandbox the test user could do what the sandbox prevents.
    pub fn host_command(self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = match self {
            Runner::Unprivileged if is_root() => {
                let user = test_user();
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={}", user.uid))
                    .arg(format!("--regid={}", user.gid))
                    .arg("--clear-groups")
                    .arg("--")
                    .arg(program.as_ref());
                c
            }
            _ => Command::new(program.as_ref()),
        };
        cmd.env_clear()
            .env("PATH", HOST_PATH)
            .env("HOME", self.invoker().home);
        cmd
    }
}

impl fmt::Display for Runner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Runner::Root => write!(f, "root (sandbox user {})", test_user().name),
            Runner::Unprivileged => write!(f, "unprivileged user {}", test_user().name),
        }
    }
}

/// The runners available: root and the test user when we are root, else only ourselves.
pub fn runners() -> Vec<Runner> {
    if is_root() {
        vec![Runner::Root, Runner::Unprivileged]
    } else {
        vec![Runner::Unprivileged]
    }
}

/// Runs `f` once per runner. Every runner is tried even when an earlier one fails, so a
/// failure report says which identities are affected.
pub fn each_identity(f: impl Fn(Runner)) {
    let mut failed = Vec::new();
    for runner in runners() {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(runner)));
        if result.is_err() {
            failed.push(runner.to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "failed when vectraguard runs as: {}",
        failed.join("; ")
    );
}

// ---------------------------------------------------------------------------------------
// Temporary directories and files.

/// A loopback port free right now: bound, read and released, for a server the test
/// starts next (or, left unbound, for a connection that must be refused).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a loopback port")
        .port()
}

/// A number unique among all tests running on this machine right now.
pub fn unique() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{}{:03}{:09}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed) % 1000,
        nanos
    )
}

pub fn chown_to(path: &Path, user: &User) {
    if is_root() {
        std::os::unix::fs::lchown(path, Some(user.uid), Some(user.gid))
            .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
    }
}

/// A directory under /tmp, owned by the test user, removed (with its contents) on drop.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(label: &str) -> Self {
        Self::owned_by(label, test_user(), 0o755)
    }

    /// A temporary directory owned by `owner` with the given mode.
    pub fn owned_by(label: &str, owner: &User, mode: u32) -> Self {
        let path = PathBuf::from(format!("/tmp/vg-e2e-{label}-{}", unique()));
        std::fs::create_dir(&path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        chown_to(&path, owner);
        let path = std::fs::canonicalize(&path).unwrap();
        Self { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `self.path()/rel`.
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path.join(rel)
    }

    /// `self.path()/rel` as a string, for command lines.
    pub fn arg(&self, rel: impl AsRef<Path>) -> String {
        let p = if rel.as_ref().as_os_str().is_empty() {
            self.path.clone()
        } else {
            self.join(rel)
        };
        p.to_str().expect("temporary paths are UTF-8").to_owned()
    }

    /// Writes a file (creating parent directories), owned by the test user, mode 0644.
    pub fn write(&self, rel: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> PathBuf {
        self.write_mode(rel, contents, 0o644)
    }

    pub fn write_mode(
        &self,
        rel: impl AsRef<Path>,
        contents: impl AsRef<[u8]>,
        mode: u32,
    ) -> PathBuf {
        let path = self.join(rel);
        if let Some(parent) = path.parent() {
            self.mkdir_abs(parent);
        }
        std::fs::write(&path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        chown_to(&path, test_user());
        path
    }

    /// Creates a directory (and parents) owned by the test user.
    pub fn mkdir(&self, rel: impl AsRef<Path>) -> PathBuf {
        let path = self.join(rel);
        self.mkdir_abs(&path);
        path
    }

    fn mkdir_abs(&self, path: &Path) {
        if path.is_dir() {
            return;
        }
        if let Some(parent) = path.parent() {
            self.mkdir_abs(parent);
        }
        std::fs::create_dir(path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
        chown_to(path, test_user());
    }

    /// Creates a symlink `rel -> target`, owned by the test user.
    pub fn symlink(&self, target: impl AsRef<Path>, rel: impl AsRef<Path>) -> PathBuf {
        let path = self.join(rel);
        std::os::unix::fs::symlink(target, &path).unwrap();
        chown_to(&path, test_user());
        path
    }

    /// The contents of `rel`, or `None` if it cannot be read.
    pub fn read(&self, rel: impl AsRef<Path>) -> Option<String> {
        std::fs::read_to_string(self.join(rel)).ok()
    }

    /// Whether anything (even a dangling symlink) exists at `rel`.
    pub fn exists(&self, rel: impl AsRef<Path>) -> bool {
        std::fs::symlink_metadata(self.join(rel)).is_ok()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A private `$VECTRAGUARD_HOME` for one test, owned by the runner's invoker: the
/// sessions of runs given it with [`Vg::records_home`] land in `logs/` below it.
#[derive(Debug)]
pub struct RecordsHome(TempDir);

impl RecordsHome {
    pub fn new(runner: Runner) -> Self {
        Self(TempDir::owned_by("home", &runner.invoker(), 0o700))
    }

    /// The records folder, `$VECTRAGUARD_HOME/logs`.
    pub fn logs(&self) -> PathBuf {
        self.0.join("logs")
    }

    /// The session folders, by name: by start time to the second (sessions started in
    /// the same second come in no particular order).
    pub fn sessions(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(self.logs())
            .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        // Not the ledger beside them, nor a `.partial-*` folder still being made
        // (renamed to its session name once its first metadata is written).
        dirs.retain(|d| {
            d.is_dir()
                && d.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("session-"))
        });
        dirs.sort();
        dirs
    }

    /// The only session folder; fails the test unless there is exactly one.
    pub fn only_session(&self) -> PathBuf {
        let sessions = self.sessions();
        assert_eq!(
            sessions.len(),
            1,
            "expected one session, found {sessions:?}"
        );
        sessions[0].clone()
    }
}

impl std::ops::Deref for RecordsHome {
    type Target = TempDir;
    fn deref(&self) -> &TempDir {
        &self.0
    }
}

/// Runs `f` on a thread whose filesystem uid and gid are the runner's invoker's, so the
/// folders and files it creates belong to that user (e.g. session records written with
/// the `vg-records` library as fixtures).
pub fn as_invoker<T: Send>(runner: Runner, f: impl FnOnce() -> T + Send) -> T {
    let user = runner.invoker();
    std::thread::scope(|s| {
        s.spawn(|| {
            if is_root() {
                // SAFETY: plain integer arguments; on Linux the filesystem ids belong to
                // the calling thread only (glibc does not broadcast setfsuid to other
                // threads), and this thread ends with the scope.
                unsafe {
                    libc::setfsgid(user.gid);
                    libc::setfsuid(user.uid);
                }
            }
            f()
        })
        .join()
        .expect("fixture thread panicked")
    })
}

/// A session folder's `metadata.json`, parsed.
pub fn session_metadata(dir: &Path) -> serde_json::Value {
    let bytes = std::fs::read(dir.join("metadata.json"))
        .unwrap_or_else(|e| panic!("{}/metadata.json: {e}", dir.display()));
    serde_json::from_slice(&bytes).unwrap()
}

/// `$VECTRAGUARD_HOME` for runs that do not choose one: private to this test process
/// and invoker, so the suite never writes into real home directories.
fn scratch_records_home(runner: Runner) -> String {
    static HOMES: OnceLock<std::sync::Mutex<BTreeMap<u32, String>>> = OnceLock::new();
    let user = runner.invoker();
    let mut homes = HOMES
        .get_or_init(|| {
            remove_scratch_homes_of_ended_runs();
            Default::default()
        })
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    homes
        .entry(user.uid)
        .or_insert_with(|| {
            let path = format!(
                "/tmp/vg-e2e-scratch-home-{}-{}",
                std::process::id(),
                user.uid
            );
            let _ = std::fs::create_dir(&path);
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
            chown_to(Path::new(&path), &user);
            path
        })
        .clone()
}

/// Removes the scratch records homes of test processes that have ended: a test
/// binary has no hook at its exit to remove its own, so each run removes those
/// its predecessors left (a live process's, by pid, is kept).
fn remove_scratch_homes_of_ended_runs() {
    let Ok(entries) = std::fs::read_dir("/tmp") else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name
            .to_str()
            .and_then(|n| n.strip_prefix("vg-e2e-scratch-home-"))
        else {
            continue;
        };
        let Some(pid) = rest.split('-').next().filter(|p| !p.is_empty()) else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The project directory a sandbox runs in (vectraguard starts there): a [`TempDir`]
/// the test user owns, so that even as root runner the command runs as that user.
#[derive(Debug)]
pub struct Workspace(TempDir);

impl Workspace {
    pub fn new() -> Self {
        Self(TempDir::new("ws"))
    }
}

impl Default for Workspace {
    fn default() -> Self {
        Self::new()
    }
}

impl std::ops::Deref for Workspace {
    type Target = TempDir;

    fn deref(&self) -> &TempDir {
        &self.0
    }
}

/// A file (in a unique directory) somewhere on the host, removed on drop. Used for
/// secrets and markers in home directories and other places outside the workspace.
#[derive(Debug)]
pub struct HostFile {
    dir: PathBuf,
    path: PathBuf,
}

impl HostFile {
    /// Creates `parent/.vg-e2e-<unique>/name` with `contents`, owned by `owner`, with
    /// the directory mode 0700 and the file mode `mode`.
    pub fn create(parent: &Path, name: &str, contents: &str, owner: &User, mode: u32) -> Self {
        let dir = parent.join(format!(".vg-e2e-{}", unique()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, contents).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        if is_root() {
            std::os::unix::fs::chown(&dir, Some(owner.uid), Some(owner.gid)).unwrap();
            std::os::unix::fs::chown(&path, Some(owner.uid), Some(owner.gid)).unwrap();
        }
        Self { dir, path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn arg(&self) -> String {
        self.path.to_str().expect("UTF-8 path").to_owned()
    }

    pub fn read(&self) -> Option<String> {
        std::fs::read_to_string(&self.path).ok()
    }

    /// Names in the file's directory, sorted.
    pub fn siblings(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

impl Drop for HostFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A secret of the test user in their home directory, readable by them on the host.
pub fn home_secret(name: &str, contents: &str) -> HostFile {
    let user = test_user();
    HostFile::create(&user.home, name, contents, user, 0o600)
}

// ---------------------------------------------------------------------------------------
// Invocations.

/// One finished vectraguard invocation.
#[derive(Debug)]
pub struct Output {
    /// Who ran what, for failure messages.
    pub what: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// The exit code (`None` if vectraguard itself died of a signal).
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    #[track_caller]
    pub fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(self.code(), Some(code), "unexpected exit status\n{self}");
        self
    }

    #[track_caller]
    pub fn assert_success(&self) -> &Self {
        self.assert_code(0)
    }

    #[track_caller]
    pub fn assert_stdout_contains(&self, needle: &str) -> &Self {
        assert!(
            self.stdout.contains(needle),
            "stdout lacks {needle:?}\n{self}"
        );
        self
    }

    #[track_caller]
    pub fn assert_stderr_contains(&self, needle: &str) -> &Self {
        assert!(
            self.stderr.contains(needle),
            "stderr lacks {needle:?}\n{self}"
        );
        self
    }

    /// Lines of stdout, trimmed.
    pub fn lines(&self) -> Vec<&str> {
        self.stdout.lines().map(str::trim).collect()
    }

    /// `key=value` lines of stdout as a map (later lines win).
    pub fn fields(&self) -> BTreeMap<String, String> {
        self.stdout
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .collect()
    }

    /// The value of a `key=value` line, failing the test when it is missing.
    #[track_caller]
    pub fn field(&self, key: &str) -> String {
        match self.fields().remove(key) {
            Some(v) => v,
            None => panic!("no line {key}=... in stdout\n{self}"),
        }
    }
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "--- invocation: {}", self.what)?;
        writeln!(f, "--- status: {:?}", self.status)?;
        writeln!(f, "--- stdout:\n{}", self.stdout)?;
        write!(f, "--- stderr:\n{}", self.stderr)
    }
}

/// A vectraguard invocation being built.
#[derive(Debug, Clone)]
pub struct Vg {
    runner: Runner,
    cwd: PathBuf,
    args: Vec<OsString>,
    env: Vec<(String, String)>,
    stdin: Option<Vec<u8>>,
    wrapper: Option<String>,
    hosts_file: Option<PathBuf>,
}

impl Vg {
    /// `vectraguard` started by `runner` in `cwd`, with no arguments yet.
    pub fn new(runner: Runner, cwd: &Path) -> Self {
        Self {
            runner,
            cwd: cwd.to_path_buf(),
            args: Vec::new(),
            env: Vec::new(),
            stdin: None,
            wrapper: None,
            hosts_file: None,
        }
    }

    /// `vectraguard sandbox run [options] -- cmd...` in `ws`.
    pub fn sandbox(runner: Runner, ws: &Workspace, options: &[&str], cmd: &[&str]) -> Self {
        let mut vg = Self::new(runner, ws.path());
        vg.args(["sandbox", "run"])
            .args(options)
            .arg("--")
            .args(cmd);
        vg
    }

    pub fn arg(&mut self, arg: impl Into<OsString>) -> &mut Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<I, S>(&mut self, args: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Records sessions under `home` (`$VECTRAGUARD_HOME`) instead of a scratch folder.
    pub fn records_home(&mut self, home: &RecordsHome) -> &mut Self {
        self.env("VECTRAGUARD_HOME", &home.arg(""))
    }

    /// An environment variable for vectraguard itself (the host side).
    pub fn env(&mut self, key: &str, value: &str) -> &mut Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    pub fn stdin(&mut self, input: impl Into<Vec<u8>>) -> &mut Self {
        self.stdin = Some(input.into());
        self
    }

    /// Starts vectraguard through `bash -c SCRIPT bash vectraguard ARGS...`, as the
    /// runner's user, e.g. to open extra descriptors first. SCRIPT runs `"$@"` itself.
    pub fn through_shell(&mut self, snippet: &str) -> &mut Self {
        self.wrapper = Some(snippet.to_owned());
        self
    }

    /// Runs vectraguard in a mount namespace of its own where `hosts` is bound over
    /// /etc/hosts, so the host's resolver (the mediator's lookups) answers from it.
    /// Needs root (the namespace is made before switching to the runner's user).
    pub fn hosts_file(&mut self, hosts: &Path) -> &mut Self {
        assert!(
            is_root(),
            "a private /etc/hosts needs the tests to run as root"
        );
        self.hosts_file = Some(hosts.to_path_buf());
        self
    }

    fn describe(&self) -> String {
        let args: Vec<String> = self
            .args
            .iter()
            .map(|a| {
                let a = a.to_string_lossy();
                if a.contains([' ', '\'', '"', '\n', '$']) {
                    format!("'{}'", a.replace('\'', "'\\''"))
                } else {
                    a.into_owned()
                }
            })
            .collect();
        let mut wrapper = self
            .wrapper
            .as_deref()
            .map(|w| format!("bash -c '{w}' bash "))
            .unwrap_or_default();
        if let Some(hosts) = &self.hosts_file {
            wrapper = format!("(/etc/hosts = {}) {wrapper}", hosts.display());
        }
        format!(
            "[{}] in {}: {wrapper}vectraguard {}",
            self.runner,
            self.cwd.display(),
            args.join(" ")
        )
    }

    fn command(&self) -> Command {
        let mut cmd = match &self.wrapper {
            Some(snippet) => {
                let mut c = self.runner.host_command("/bin/bash");
                c.arg("-c").arg(snippet).arg("bash").arg(bin());
                c
            }
            None => self.runner.host_command(bin()),
        };
        cmd.args(&self.args).current_dir(&self.cwd);
        cmd.env("VECTRAGUARD_HOME", scratch_records_home(self.runner));
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        match &self.hosts_file {
            Some(hosts) => with_hosts_file(&cmd, hosts),
            None => cmd,
        }
    }

    /// Runs to completion, capturing stdout and stderr.
    pub fn run(&self) -> Output {
        let mut cmd = self.command();
        cmd.stdin(if self.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.describe()));
        let feeder = child.stdin.take().map(|mut pipe| {
            let input = self.stdin.clone().unwrap_or_default();
            thread::spawn(move || {
                let _ = pipe.write_all(&input);
            })
        });
        let stdout = reader(child.stdout.take());
        let stderr = reader(child.stderr.take());
        let status = wait_with_deadline(&mut child, RUN_DEADLINE).unwrap_or_else(|| {
            panic!("{} did not finish within {RUN_DEADLINE:?}", self.describe())
        });
        drop(feeder);
        Output {
            what: self.describe(),
            status,
            stdout: collect(&stdout),
            stderr: collect(&stderr),
        }
    }

    /// Starts vectraguard in the background (stdin null, stdout and stderr piped).
    pub fn spawn(&self) -> Running {
        let mut cmd = self.command();
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.describe()));
        let stdout = reader(child.stdout.take());
        let stderr = reader(child.stderr.take());
        Running {
            what: self.describe(),
            child,
            stdout,
            stderr,
        }
    }
}

/// `inner` started through `unshare --mount` after binding `hosts` over /etc/hosts
/// (private propagation: nothing leaks to the host's mounts).
fn with_hosts_file(inner: &Command, hosts: &Path) -> Command {
    let mut cmd = Command::new("/usr/bin/unshare");
    cmd.args(["--mount", "--propagation", "private", "--", "/bin/sh", "-c"])
        .arg(r#"/bin/mount --bind "$0" /etc/hosts && exec "$@""#)
        .arg(hosts)
        .arg(inner.get_program())
        .args(inner.get_args())
        .env_clear();
    for (key, value) in inner.get_envs() {
        if let Some(value) = value {
            cmd.env(key, value);
        }
    }
    if let Some(dir) = inner.get_current_dir() {
        cmd.current_dir(dir);
    }
    cmd
}

/// Reads a pipe to its end in a thread; the result arrives on the returned channel.
fn reader<R: Read + Send + 'static>(pipe: Option<R>) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut buf);
        }
        let _ = tx.send(String::from_utf8_lossy(&buf).into_owned());
    });
    rx
}

/// The output of a finished process. If the stream is still open a few seconds after
/// vectraguard ended, some process outside the sandbox holds it: say so rather than
/// hang (the test's own checks then report the leftover process).
fn collect(rx: &Receiver<String>) -> String {
    rx.recv_timeout(Duration::from_secs(5)).unwrap_or_else(|_| {
        "<still open after vectraguard ended: a process outlived the sandbox>".to_owned()
    })
}

/// Waits for `child` up to `deadline`; kills it and returns `None` when it is late.
fn wait_with_deadline(child: &mut Child, deadline: Duration) -> Option<ExitStatus> {
    let end = Instant::now() + deadline;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// A vectraguard process running in the background; killed on drop if still running.
#[derive(Debug)]
pub struct Running {
    what: String,
    child: Child,
    stdout: Receiver<String>,
    stderr: Receiver<String>,
}

impl Running {
    /// The pid of the vectraguard process (setpriv execs it, so it is the same).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (e.g. "TERM") to the vectraguard process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .env("PATH", HOST_PATH)
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} {} failed", self.pid());
    }

    /// Waits until vectraguard ends (at most `deadline`) and collects its output.
    pub fn finish(mut self, deadline: Duration) -> Output {
        let status = wait_with_deadline(&mut self.child, deadline)
            .unwrap_or_else(|| panic!("{} did not end within {deadline:?} (killed)", self.what));
        Output {
            what: self.what.clone(),
            status,
            stdout: collect(&self.stdout),
            stderr: collect(&self.stderr),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A helper process of a test (a scripted server), killed when dropped, a failed
/// test's included. Its output goes nowhere, so that one left behind cannot hold the
/// test run's output open: a fake model server that outlived a timed-out test kept
/// `scripts/test`'s pipe, and with it CI, waiting.
pub struct Helper(std::process::Child);

impl Helper {
    pub fn spawn(mut command: std::process::Command) -> Self {
        let child = command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
        Self(child)
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The value of `Key:` in /proc/self/status text.
pub fn status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .map(str::trim)
}

/// `vectraguard sandbox run [options] -- cmd...` in `ws`, run to completion.
pub fn run(runner: Runner, ws: &Workspace, options: &[&str], cmd: &[&str]) -> Output {
    Vg::sandbox(runner, ws, options, cmd).run()
}

/// `vectraguard sandbox run -- sh -c script` in `ws`.
pub fn sh(runner: Runner, ws: &Workspace, script: &str) -> Output {
    run(runner, ws, &[], &["sh", "-c", script])
}

/// `vectraguard sandbox run -- /usr/bin/python3 -c script` in `ws`.
pub fn python(runner: Runner, ws: &Workspace, script: &str) -> Output {
    run(runner, ws, &[], &[PYTHON, "-c", script])
}

/// Python helpers for precise system-call attempts inside the sandbox:
/// `sc(nr, *args)` calls `syscall(2)` and returns "OK" or the errno's name;
/// `attempt(f)` runs `f` and returns "OK" or the errno's name of the OSError raised;
/// `report(name, value)` prints `name=value`; `check(name, f)` reports `f()` computed
/// in a forked child.
pub const PY_PRELUDE: &str = r#"
import ctypes, errno, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def _arg(a):
    return ctypes.c_long(a) if isinstance(a, int) else a
def sc(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[_arg(a) for a in args])
    if r == -1:
        e = ctypes.get_errno()
        return errno.errorcode.get(e, str(e))
    return "OK"
def attempt(f):
    try:
        f()
        return "OK"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__
def report(name, value):
    print(f"{name}={value}", flush=True)
def isolated(f):
    # Runs f in a forked child, so that a call that succeeds cannot change the state
    # (namespaces, personality, tracing) seen by the next attempt.
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            res = str(f())
        except BaseException as e:
            res = "EXC:" + type(e).__name__
        os.write(w, res.encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return data.decode() or "NO-RESULT"
def check(name, f):
    report(name, isolated(f))
"#;

/// A python script made of [`PY_PRELUDE`] and `body`.
pub fn py(body: &str) -> String {
    format!("{PY_PRELUDE}\n{body}")
}

// ---------------------------------------------------------------------------------------
// Host processes.

/// Host processes (other than this test) whose command line contains `marker`.
pub fn host_processes_with(marker: &str) -> Vec<(u32, String)> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
            cmdline
                .contains(marker)
                .then_some((pid, cmdline.trim().to_owned()))
        })
        .collect()
}

/// Host processes whose command line is exactly `cmdline` (arguments joined by spaces).
pub fn host_processes_running(cmdline: &str) -> Vec<u32> {
    host_processes_with(cmdline)
        .into_iter()
        .filter(|(_, c)| c == cmdline)
        .map(|(pid, _)| pid)
        .collect()
}

/// Shell code that closes every descriptor above 2, so that what vectraguard inherits
/// is exactly what the test opens after it.
pub const CLOSE_INHERITED_FDS: &str = r#"for f in /proc/$$/fd/*; do f=${f##*/}; if [ "$f" -gt 2 ]; then eval "exec $f>&-"; fi; done 2>/dev/null;"#;

/// Polls `condition` every few milliseconds until it holds or `deadline` passes.
pub fn wait_until(deadline: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Asserts that no host process carries `marker` (waiting up to a few seconds for
/// them to go); kills any that are left so that a failure does not leak processes.
#[track_caller]
pub fn assert_no_process_left(marker: &str, context: &dyn fmt::Display) {
    let gone = wait_until(Duration::from_secs(5), || {
        host_processes_with(marker).is_empty()
    });
    let left = host_processes_with(marker);
    for (pid, _) in &left {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .env("PATH", HOST_PATH)
            .status();
    }
    assert!(gone, "processes outlived the sandbox: {left:?}\n{context}");
}

// ---------------------------------------------------------------------------------------
// Tools the tests need from the host.

/// Tools (file name or Debian package) whose absence is accepted, comma-separated:
/// the tests that need them are skipped, each skip written to the skip log.
pub const ALLOW_MISSING: &str = "VECTRAGUARD_TEST_ALLOW_MISSING";
/// Where skips are appended, one line each (`scripts/test` sets it, counts and
/// prints the lines); default `target/tmp/skipped-tests.log`.
pub const SKIP_LOG: &str = "VECTRAGUARD_TEST_SKIP_LOG";

/// Whether every `(path, Debian package)` is installed. A missing one fails the
/// test, naming the tool and how to get it, unless [`ALLOW_MISSING`] lists it: then
/// the skip is logged and printed and `false` returned, for the test to return. A
/// test that cannot run never passes silently.
#[must_use]
pub fn require_tools(tools: &[(&str, &str)]) -> bool {
    let test = thread::current().name().unwrap_or("?").to_owned();
    let allowed = std::env::var(ALLOW_MISSING).unwrap_or_default();
    let skipped = match missing_tools(tools, &allowed, &test) {
        Ok(skipped) if skipped.is_empty() => return true,
        Ok(skipped) => skipped,
        Err(message) => panic!("{message}"),
    };
    let log = std::env::var_os(SKIP_LOG)
        .filter(|p| !p.is_empty())
        .map_or_else(
            || Path::new(env!("CARGO_TARGET_TMPDIR")).join("skipped-tests.log"),
            PathBuf::from,
        );
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .unwrap_or_else(|e| panic!("cannot record a skip in {}: {e}", log.display()));
    for line in &skipped {
        // One write per line (O_APPEND): parallel tests do not interleave.
        file.write_all(format!("{line}\n").as_bytes())
            .unwrap_or_else(|e| panic!("cannot record a skip in {}: {e}", log.display()));
        eprintln!("SKIPPED (allowed by {ALLOW_MISSING}): {line}");
    }
    false
}

/// The skip lines for the missing tools when `allowed` (a comma-separated list of
/// tool or package names) lists every one of them; else the failure message.
fn missing_tools(tools: &[(&str, &str)], allowed: &str, test: &str) -> Result<Vec<String>, String> {
    let allowed: Vec<&str> = allowed.split(',').map(str::trim).collect();
    let mut skipped = Vec::new();
    for (path, package) in tools.iter().filter(|(p, _)| !Path::new(p).exists()) {
        let tool = Path::new(path)
            .file_name()
            .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned());
        if !(allowed.contains(&tool.as_str()) || allowed.contains(package)) {
            return Err(format!(
                "{test} needs {path} (Debian package {package}), which is missing: run \
                 scripts/test as root, which installs it, or `apt-get install {package}`; \
                 or set {ALLOW_MISSING}={tool} to skip the tests that need it (counted \
                 and printed by scripts/test)"
            ));
        }
        skipped.push(format!("{test}\tmissing {tool} ({package})"));
    }
    Ok(skipped)
}

#[test]
fn a_missing_tool_fails_the_test_unless_allowed() {
    let tools = [("/nonexistent/vg-tool", "vg-pkg"), ("/bin/sh", "dash")];
    let e = missing_tools(&tools, "", "t").unwrap_err();
    assert!(
        e.contains("/nonexistent/vg-tool (Debian package vg-pkg)"),
        "{e}"
    );
    assert!(e.contains("scripts/test"), "{e}");
    assert!(missing_tools(&tools, "skopeo,other", "t").is_err());
    for allowed in ["vg-tool", "skopeo, vg-pkg"] {
        assert_eq!(
            missing_tools(&tools, allowed, "t"),
            Ok(vec!["t\tmissing vg-tool (vg-pkg)".to_owned()])
        );
    }
    assert_eq!(missing_tools(&tools[1..], "", "t"), Ok(Vec::new()));
}

/// `root`'s files as the tar archive `tar`, for `image import`.
pub fn pack_root(root: &Path, tar: &Path) {
    let packed = Command::new("tar")
        .arg("-C")
        .arg(root)
        .arg("-cf")
        .arg(tar)
        .arg(".")
        .status()
        .unwrap();
    assert!(packed.success());
}

/// An image's root for the loader attacks: BusyBox with `applets` in `ROOT/bin`,
/// the C library `preloaded` built as `ROOT/preloaded.so` and named in
/// `ROOT/etc/ld.so.preload`, which a dynamically linked program of ours would load.
pub fn busybox_root_preloading(root: &Path, applets: &[&str], preloaded: &str) {
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::copy("/bin/busybox", root.join("bin/busybox")).unwrap();
    for applet in applets {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).unwrap();
    }
    let build = Workspace::new();
    let source = build.join("preloaded.c");
    std::fs::write(&source, preloaded).unwrap();
    let built = Command::new("gcc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(root.join("preloaded.so"))
        .arg(&source)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "gcc (scripts/test installs it with libc6-dev): {}",
        String::from_utf8_lossy(&built.stderr)
    );
    std::fs::write(root.join("etc/ld.so.preload"), "/preloaded.so\n").unwrap();
}

/// The C program `source` built with gcc as a static program at `program` (one that
/// runs in any image), with `flags` added (`-pthread`); gcc comes from scripts/test.
pub fn build_static_c(source: &str, program: &Path, flags: &[&str]) {
    build_c(source, program, &[&["-static"], flags].concat());
}

/// The C program `source` built with gcc at `program`, with `flags`.
pub fn build_c(source: &str, program: &Path, flags: &[&str]) {
    let build = Workspace::new();
    let file = build.join("program.c");
    std::fs::write(&file, source).unwrap();
    let built = Command::new("gcc")
        .arg("-O1")
        .args(flags)
        .arg("-o")
        .arg(program)
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "gcc (scripts/test installs it with libc6-dev): {}",
        String::from_utf8_lossy(&built.stderr)
    );
}
