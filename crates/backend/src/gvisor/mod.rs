//! gVisor: `runsc` run directly from an OCI bundle that Vectra Guard writes (no
//! Docker daemon), rootless: as the session's own user, or, started as root, as the
//! identity the native sandbox would take (never root on the host). The command
//! runs on gVisor's application kernel (the sentry), which serves its system calls
//! in user space; the sentry and its file proxy (the gofer) are themselves confined
//! by runsc (seccomp, namespaces, a chroot).

pub mod bundle;
pub mod exec;
pub mod trace;

use std::ffi::OsStr;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use vg_policy::FsView;
use vg_sandbox::runtime::{RuntimeSpec, SIGNAL_PLACEHOLDER};

pub use bundle::Process;

/// The network a gVisor sandbox gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// Loopback only (`runsc --network=none`).
    None,
    /// The host's network, through the sentry's host-network passthrough.
    Host,
    /// The mediated network (`--network allow`): the sentry's host-network
    /// passthrough (`runsc --network=host`), with runsc started by the keeper in a
    /// user and network namespace of its own whose only interface besides loopback
    /// is this TUN interface, served by the supervisor's mediator
    /// ([`vg_sandbox::runtime::RuntimeSpec::tun`]). The sandbox then joins no
    /// namespace of the host's, and its sockets reach nothing but the mediator.
    Mediated(vg_sandbox::TunConfig),
}

impl Network {
    /// What the record's `layers` say.
    pub fn name(self) -> &'static str {
        match self {
            Network::None => "none",
            Network::Host => "host",
            Network::Mediated(_) => "tun",
        }
    }
}

/// Finds `runsc` on `path` (the front end's `PATH`), then in the usual folders.
pub fn find_runsc(path: Option<&OsStr>) -> Result<PathBuf> {
    let dirs = path
        .map(|p| std::env::split_paths(p).collect::<Vec<_>>())
        .unwrap_or_default();
    let fallback = ["/usr/sbin", "/usr/bin", "/usr/local/bin", "/sbin", "/bin"];
    dirs.into_iter()
        .chain(fallback.iter().map(PathBuf::from))
        .filter(|d| d.is_absolute())
        .map(|d| d.join("runsc"))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .ok_or_else(|| {
            anyhow::anyhow!(
                "backend gvisor: runsc is not installed (looked on PATH and in /usr/sbin, /usr/bin, /usr/local/bin); install it (Debian and Ubuntu: `apt-get install runsc`; elsewhere gvisor.dev/docs/user_guide/install) or use --backend native"
            )
        })
}

/// A bundle on disk: `config.json`, the skeleton root, the empty file that masks
/// secrets, runsc's state folder and the trace socket's place; removed on drop.
#[derive(Debug)]
pub struct Bundle {
    dir: PathBuf,
    id: String,
    image: bool,
    /// The user runsc will run as, when that is not us: see [`Bundle::hand_over`].
    owner: Option<(u32, u32)>,
    network: Network,
    /// The command's terminal comes from runsc through [`Bundle::console_socket`].
    terminal: bool,
}

impl Bundle {
    /// Writes the bundle for `process` seeing `view`, in a new private folder under
    /// `parent`, for runsc running as `owner` (when that is not us), with `network`.
    /// The folder stays ours until [`Bundle::hand_over`].
    pub fn write(
        parent: &Path,
        id: &str,
        process: &Process,
        view: &FsView,
        owner: Option<(u32, u32)>,
        network: Network,
    ) -> Result<Bundle> {
        let real_parent = std::fs::canonicalize(parent)
            .with_context(|| format!("cannot resolve the folder {}", parent.display()))?;
        if let Some(mount) = shown_through(&real_parent, view) {
            anyhow::bail!(
                "the gVisor bundle's folder {} (TMPDIR) would be visible inside the sandbox through the mount of {}, where the command could change runsc's state: set TMPDIR to a folder outside every mounted path",
                real_parent.display(),
                mount.display()
            );
        }
        let dir = parent.join(format!("vectraguard-gvisor-{id}"));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("cannot create the gVisor bundle folder {}", dir.display()))?;
        // Removed on any error below.
        let mut bundle = Bundle {
            dir,
            id: id.to_owned(),
            image: false,
            owner,
            network,
            terminal: process.terminal,
        };
        let empty = bundle.dir.join("empty");
        std::fs::write(&empty, b"").context("cannot write the bundle's empty file")?;
        let translated = bundle::translate(
            view,
            &empty,
            &|path, kind| reachable(path, kind, owner),
            (process.uid, process.gid),
        )?;
        let root = match &translated.image_root {
            // The gofer reads the image as runsc's user: say so here rather than
            // let the sandbox fail to start with runsc's own words.
            Some(image) if !reachable(image, vg_policy::view::NodeKind::Dir, owner) => {
                anyhow::bail!(
                    "runsc's user ({}) cannot read the image's root {}: the image store is private to the user who pulled the image; run the image as the user whose workspace it is (not as root), or use --backend native",
                    owner.map_or_else(|| "this user".to_owned(), |(uid, _)| format!("uid {uid}")),
                    image.display()
                );
            }
            Some(image) => image.clone(),
            None => {
                let root = bundle.dir.join("rootfs");
                write_skeleton(&root, &translated.skeleton)?;
                root
            }
        };
        // With the mediated network the sandbox stays in the keeper's network
        // namespace, whose only way out is the TUN interface; otherwise it gets an
        // empty one of its own.
        let own_netns = !matches!(network, Network::Mediated(_));
        let config = bundle::config(process, &translated, &root, own_netns);
        let text = serde_json::to_vec_pretty(&config).context("cannot encode config.json")?;
        std::fs::write(bundle.dir.join("config.json"), text)
            .context("cannot write the bundle's config.json")?;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(bundle.dir.join("state"))
            .context("cannot create runsc's state folder")?;
        bundle.image = translated.image_root.is_some();
        Ok(bundle)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Gives the bundle to the user runsc runs as (when that is not us), once
    /// everything in it is written: the folder itself last. Until then the folder is
    /// ours and private (0700), so no other user can swap what we write or chown
    /// for a link; once it is theirs, nothing more is written or changed in it (a
    /// root supervisor writing or chowning in a folder another user owns would
    /// follow the links that user plants).
    pub fn hand_over(&self) -> Result<()> {
        let Some((uid, gid)) = self.owner else {
            return Ok(());
        };
        for entry in walk(&self.dir).iter().rev() {
            std::os::unix::fs::lchown(entry, Some(uid), Some(gid))
                .with_context(|| format!("cannot hand {} to uid {uid}", entry.display()))?;
        }
        Ok(())
    }

    /// Where the trace socket goes (see [`trace`]).
    pub fn trace_socket(&self) -> PathBuf {
        self.dir.join("trace.sock")
    }

    /// Where runsc sends the terminal's master side (`--console-socket`): the
    /// keeper listens there.
    pub fn console_socket(&self) -> PathBuf {
        self.dir.join("console.sock")
    }

    /// Where the trace configuration goes (`--pod-init-config`).
    pub fn trace_config(&self) -> PathBuf {
        self.dir.join("trace.json")
    }

    /// How `runsc exec` and `runsc kill` reach this bundle's sandbox once it runs
    /// (a persistent sandbox's commands, as `user` inside, each through
    /// `launcher`), with runsc as `run_as`.
    pub fn exec_target(
        &self,
        runsc: &Path,
        run_as: Option<(u32, u32)>,
        user: (u32, u32),
        launcher: Vec<String>,
    ) -> exec::ExecTarget {
        exec::ExecTarget {
            runsc: runsc.to_owned(),
            launcher,
            state: self.dir.join("state"),
            id: self.id.clone(),
            run_as,
            user,
            keeper_namespaces: self.keeper_namespaces(),
        }
    }

    /// Whether runsc runs in a user and network namespace the keeper makes (every
    /// network but the host's), where its control socket is out of other users'
    /// reach.
    fn keeper_namespaces(&self) -> bool {
        !matches!(self.network, Network::Host)
    }

    /// runsc's global flags for this bundle.
    fn flags(&self, runsc: &Path) -> Vec<String> {
        vec![
            runsc.display().to_string(),
            "--root".into(),
            self.dir.join("state").display().to_string(),
            "--rootless".into(),
            // The session's cgroup holds runsc and the sentry (the keeper entered
            // it); runsc must not make its own.
            "--ignore-cgroups".into(),
            // The bundle's seccomp rules (`bundle::seccomp`), in gVisor's kernel.
            "--oci-seccomp".into(),
        ]
    }

    /// How to run, signal and stop the sandbox under the keeper.
    pub fn runtime(
        &self,
        runsc: &Path,
        identity: Option<(u32, u32)>,
        trace: bool,
        enforced: String,
    ) -> RuntimeSpec {
        let mut argv = self.flags(runsc);
        argv.push(
            match self.network {
                Network::None => "--network=none",
                // The mediated network's namespace is the host's as runsc sees it.
                Network::Host | Network::Mediated(_) => "--network=host",
            }
            .into(),
        );
        if self.image {
            // The image's root is read through an overlay whose changes stay in memory.
            argv.push("--overlay2=root:memory".into());
        }
        if trace {
            argv.push(format!(
                "--pod-init-config={}",
                self.trace_config().display()
            ));
        }
        argv.extend([
            "run".into(),
            "--bundle".into(),
            self.dir.display().to_string(),
        ]);
        if self.terminal {
            argv.extend([
                "--console-socket".into(),
                self.console_socket().display().to_string(),
            ]);
        }
        argv.push(self.id.clone());
        let mut signal = self.flags(runsc);
        signal.extend(["kill".into(), self.id.clone(), SIGNAL_PLACEHOLDER.into()]);
        let mut terminate_all = self.flags(runsc);
        terminate_all.extend(["kill".into(), "--all".into(), self.id.clone(), "15".into()]);
        RuntimeSpec {
            argv,
            env: vec![("PATH".into(), "/usr/sbin:/usr/bin:/sbin:/bin".into())],
            cwd: self.dir.clone(),
            identity,
            enforced,
            signal,
            terminate_all,
            // The container's first process is the sandbox's pid 1.
            command_pid: Some(1),
            tun: match self.network {
                Network::Mediated(tun) => Some(tun),
                Network::None | Network::Host => None,
            },
            // runsc's control socket is an abstract unix socket of runsc's network
            // namespace, and runsc lets whoever connects run, signal or destroy
            // anything in the sandbox: on the host's it is every local user's.
            private_network: self.keeper_namespaces(),
            console: self.terminal.then(|| self.console_socket()),
        }
    }
}

impl Drop for Bundle {
    fn drop(&mut self) {
        // Handed over, the folder is runsc's user's, who may have put anything in
        // it: removed as the sweep removes a left one.
        use std::os::unix::fs::MetadataExt;
        if let Ok(meta) = std::fs::symlink_metadata(&self.dir) {
            let me = vg_sandbox::real_ids().0;
            remove_as_owner(&self.dir, (meta.uid(), meta.gid()), me);
        }
    }
}

/// The prefix of every bundle folder's name: `vectraguard-gvisor-vg-PID-…`, PID
/// the process that made it and removes it when dropped.
const BUNDLE_PREFIX: &str = "vectraguard-gvisor-vg-";

/// The pid of the process that made the bundle folder `name`, if `name` is one
/// (pure).
fn bundle_maker(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(BUNDLE_PREFIX)?;
    let (pid, tail) = rest.split_once('-')?;
    if tail.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok().filter(|pid| *pid > 0)
}

/// Whether the bundle folder `name`, owned by `owner`, is one for a process of uid
/// `me` to remove: its maker is gone (`alive` says which pids still run), and it is
/// ours (root's: anyone's) (pure).
fn is_stale(name: &str, owner: u32, me: u32, alive: &dyn Fn(u32) -> bool) -> bool {
    (me == 0 || owner == me) && bundle_maker(name).is_some_and(|pid| !alive(pid))
}

/// Removes, in `parent` (the bundles' folder, `TMPDIR`), the bundle folders that
/// a `vectraguard` killed before its end left behind (a dropped `Bundle` removes
/// its own). A pid reused since counts as the maker: that folder waits for a later
/// start. Root removes another user's folder with that user's rights
/// ([`remove_as_owner`]). Best effort: a folder that cannot be removed stays.
pub fn sweep_stale(parent: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let me = vg_sandbox::real_ids().0;
    // Asked of the kernel: `/proc` mounted with `hidepid` hides another user's
    // maker (root's, of a bundle handed over to us), whose live bundle we own.
    let alive = vg_sandbox::process_runs;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(BUNDLE_PREFIX) {
            continue;
        }
        // The entry itself, never what a link names.
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if meta.is_dir() && is_stale(name, meta.uid(), me, &alive) {
            remove_as_owner(&entry.path(), (meta.uid(), meta.gid()), me);
        }
    }
}

/// Removes the folder `dir` owned by `owner`, as a process of uid `me`. Root
/// removes another user's folder with that user's file rights alone: the folder's
/// owner decides what is in it, and could otherwise plant there, or move there, a
/// folder of someone else's (a shared folder of theirs others write in) for root
/// to empty. Then root removes the folder itself, only if it is left empty and
/// still a folder (its parent may be one its owner cannot write in).
fn remove_as_owner(dir: &Path, owner: (u32, u32), me: u32) {
    if me != 0 || owner.0 == 0 {
        let _ = remove_tree(dir, REMOVE_DEPTH);
        return;
    }
    let _ = vg_sandbox::as_file_owner(owner.0, owner.1, || remove_tree(dir, REMOVE_DEPTH));
    let _ = std::fs::remove_dir(dir);
}

/// How deep [`remove_tree`] goes: far below a bundle's own depth, far above what a
/// thread's stack cannot take.
const REMOVE_DEPTH: usize = 128;

/// Removes `path` and what it holds, never following a link, as far as it can,
/// down to `depth` levels: a deeper tree is left where it is. (`remove_dir_all`
/// recurses without a bound: a folder's owner nested one 30,000 levels deep and
/// the stack overflow aborted every gVisor start of root's.) Its owner may swap a
/// folder for a link while it runs: the removal then goes on with their rights
/// alone ([`remove_as_owner`]), or in a folder only we write in.
fn remove_tree(path: &Path, depth: usize) -> std::io::Result<()> {
    if !std::fs::symlink_metadata(path)?.is_dir() {
        return std::fs::remove_file(path);
    }
    if depth > 0 {
        for entry in std::fs::read_dir(path)?.flatten() {
            // Best effort: what cannot be removed stays, the rest goes.
            let _ = remove_tree(&entry.path(), depth - 1);
        }
    }
    std::fs::remove_dir(path)
}

/// The host folder bound into `view` that holds `folder` (a real path), if any:
/// what is made in `folder` is then visible, and maybe writable, inside the sandbox.
fn shown_through<'a>(folder: &Path, view: &'a FsView) -> Option<&'a Path> {
    view.ops.iter().find_map(|op| match op {
        vg_policy::MountOp::Bind { src, .. } | vg_policy::MountOp::Overlay { lower: src, .. }
            if folder.starts_with(src) =>
        {
            Some(src.as_path())
        }
        _ => None,
    })
}

/// Whether runsc's user — `owner`, else this process — can open `path` (a file:
/// read it; a folder: search it). For another user, by the mode bits of `path` and
/// every folder above it, as that user without supplementary groups (the keeper
/// drops them); for ourselves, by trying.
fn reachable(path: &Path, kind: vg_policy::view::NodeKind, owner: Option<(u32, u32)>) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some((uid, gid)) = owner else {
        return match kind {
            vg_policy::view::NodeKind::File => std::fs::File::open(path).is_ok(),
            vg_policy::view::NodeKind::Dir => {
                std::fs::read_dir(path).is_ok() || std::fs::metadata(path.join(".")).is_ok()
            }
        };
    };
    let allows = |p: &Path, bit: u32| {
        p.metadata().is_ok_and(|m| {
            let mode = m.mode();
            if m.uid() == uid {
                mode & (bit << 6) != 0
            } else if m.gid() == gid {
                mode & (bit << 3) != 0
            } else {
                mode & bit != 0
            }
        })
    };
    let parents_ok = path.ancestors().skip(1).all(|dir| allows(dir, 0o1));
    let own = match kind {
        vg_policy::view::NodeKind::File => allows(path, 0o4),
        vg_policy::view::NodeKind::Dir => allows(path, 0o1),
    };
    parents_ok && own
}

/// Every path under `dir`, `dir` first, parents before their entries, without
/// following links.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        let p = out[i].clone();
        i += 1;
        if p.symlink_metadata().is_ok_and(|m| m.is_dir())
            && let Ok(entries) = std::fs::read_dir(&p)
        {
            out.extend(entries.flatten().map(|e| e.path()));
        }
    }
    out
}

fn write_skeleton(root: &Path, entries: &[bundle::SkeletonEntry]) -> Result<()> {
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(root)
        .context("cannot create the skeleton root")?;
    let inside = |p: &Path| root.join(p.strip_prefix("/").unwrap_or(p));
    for entry in entries {
        match entry {
            bundle::SkeletonEntry::Dir(p) => {
                std::fs::DirBuilder::new()
                    .mode(0o755)
                    .recursive(true)
                    .create(inside(p))
                    .with_context(|| format!("cannot make the mount point {}", p.display()))?;
            }
            bundle::SkeletonEntry::File(p) => {
                std::fs::write(inside(p), b"")
                    .with_context(|| format!("cannot make the mount point {}", p.display()))?;
            }
            bundle::SkeletonEntry::Symlink { path, target } => {
                std::os::unix::fs::symlink(target, inside(path))
                    .with_context(|| format!("cannot make the link {}", path.display()))?;
            }
        }
    }
    Ok(())
}

/// Sixteen random hexadecimal digits, for names in shared folders that nobody can
/// guess and claim first.
pub fn random_hex() -> std::io::Result<String> {
    let mut bytes = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// What `doctor` reports about gVisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub runsc: Option<PathBuf>,
    pub version: Option<String>,
    /// The platform a trial run used, when it worked.
    pub platform: Option<String>,
    pub error: Option<String>,
}

/// Runs `runsc --version` and a trial `runsc do /bin/true` (ptrace platform) in a
/// throwaway state folder. Slow (a sandbox starts): for `doctor`, not per run.
pub fn probe(path: Option<&OsStr>) -> Probe {
    let runsc = match find_runsc(path) {
        Ok(r) => r,
        Err(e) => {
            return Probe {
                runsc: None,
                version: None,
                platform: None,
                error: Some(e.to_string()),
            };
        }
    };
    let version = std::process::Command::new(&runsc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_owned));
    // A private folder of our own (made here, 0700, never one found in place: the
    // temporary folder is shared), removed after the trial.
    let made = random_hex().and_then(|salt| {
        let state = std::env::temp_dir().join(format!(
            "vectraguard-gvisor-probe-{}-{salt}",
            std::process::id()
        ));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&state)
            .map(|()| state)
    });
    let state = match made {
        Ok(state) => state,
        Err(e) => {
            return Probe {
                runsc: Some(runsc),
                version,
                platform: None,
                error: Some(format!("cannot make a folder for the trial run: {e}")),
            };
        }
    };
    let trial = std::process::Command::new(&runsc)
        .arg("--root")
        .arg(&state)
        .args([
            "--rootless",
            "--ignore-cgroups",
            "--network=none",
            "--platform=ptrace",
        ])
        .args(["do", "/bin/true"])
        .stdin(std::process::Stdio::null())
        .output();
    let _ = std::fs::remove_dir_all(&state);
    let (platform, error) = match trial {
        Ok(o) if o.status.success() => (Some("ptrace".to_owned()), None),
        Ok(o) => (
            None,
            Some(format!(
                "a trial `runsc do /bin/true` failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )),
        ),
        Err(e) => (None, Some(format!("cannot run {}: {e}", runsc.display()))),
    };
    Probe {
        runsc: Some(runsc),
        version,
        platform,
        error,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    #[test]
    fn only_a_bundle_whose_maker_is_gone_and_ours_is_stale() {
        assert_eq!(bundle_maker("vectraguard-gvisor-vg-123-4-abcd"), Some(123));
        for not_ours in [
            "vectraguard-gvisor-vg-",
            "vectraguard-gvisor-vg-123",
            "vectraguard-gvisor-vg-123-",
            "vectraguard-gvisor-vg-0-1-ab",
            "vectraguard-gvisor-vg-+12-1-ab",
            "vectraguard-gvisor-vg-x1-1-ab",
            "vectraguard-gvisor-vg-99999999999-1-ab",
            "other-vg-123-4-abcd",
        ] {
            assert_eq!(bundle_maker(not_ours), None, "{not_ours}");
        }
        let gone = |_| false;
        let running = |_| true;
        let name = "vectraguard-gvisor-vg-123-4-abcd";
        assert!(is_stale(name, 1000, 1000, &gone));
        assert!(!is_stale(name, 1000, 1000, &running));
        // Another user's: only root removes it.
        assert!(!is_stale(name, 1001, 1000, &gone));
        assert!(is_stale(name, 1001, 0, &gone));
        assert!(!is_stale("vectraguard-gvisor-x", 1000, 1000, &gone));
    }

    #[test]
    fn a_left_bundle_is_swept_and_a_live_one_and_a_link_are_kept() {
        let parent = std::env::temp_dir().join(format!("vg-sweep-{}", std::process::id()));
        std::fs::create_dir_all(&parent).unwrap();
        // A maker that is gone: a child that exited and was reaped.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let left = parent.join(format!("{BUNDLE_PREFIX}{gone}-1-ab"));
        std::fs::create_dir_all(left.join("root/etc")).unwrap();
        std::fs::write(left.join("config.json"), b"{}").unwrap();
        let live = parent.join(format!("{BUNDLE_PREFIX}{}-2-cd", std::process::id()));
        std::fs::create_dir(&live).unwrap();
        // A link named like a bundle, to a folder that must survive.
        let target = parent.join("keep");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("file"), b"x").unwrap();
        let link = parent.join(format!("{BUNDLE_PREFIX}{gone}-3-ef"));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        sweep_stale(&parent);
        assert!(!left.exists());
        assert!(live.exists());
        assert!(target.join("file").exists());
        assert!(std::fs::symlink_metadata(&link).is_ok());
        std::fs::remove_dir_all(&parent).unwrap();
    }

    #[test]
    fn a_tree_deeper_than_the_bound_is_left_and_a_shallow_one_removed() {
        let parent = std::env::temp_dir().join(format!("vg-remove-tree-{}", std::process::id()));
        let mut deep = parent.join("deep");
        for _ in 0..REMOVE_DEPTH + 2 {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        let target = parent.join("target");
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("kept"), b"x").unwrap();
        let shallow = parent.join("shallow");
        std::fs::create_dir_all(shallow.join("a/b")).unwrap();
        std::fs::write(shallow.join("a/b/file"), b"x").unwrap();
        std::os::unix::fs::symlink(&target, shallow.join("a/link")).unwrap();
        assert!(remove_tree(&parent.join("deep"), REMOVE_DEPTH).is_err());
        assert!(parent.join("deep/d").exists());
        remove_tree(&shallow, REMOVE_DEPTH).unwrap();
        assert!(!shallow.exists());
        assert!(target.join("kept").exists());
        // A thread's stack takes the bound (the sweep's removal as another user
        // runs on one).
        std::thread::spawn({
            let parent = parent.clone();
            move || remove_tree(&parent.join("deep"), REMOVE_DEPTH)
        })
        .join()
        .unwrap()
        .unwrap_err();
        std::fs::remove_dir_all(&parent).unwrap();
    }

    #[test]
    fn a_maker_runs_while_the_kernel_knows_its_pid() {
        assert!(vg_sandbox::process_runs(std::process::id()));
        // Another user's (as a user: one we may not signal).
        assert!(vg_sandbox::process_runs(1));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        assert!(!vg_sandbox::process_runs(gone));
        assert!(!vg_sandbox::process_runs(0));
        assert!(!vg_sandbox::process_runs(u32::MAX));
    }

    #[test]
    fn root_removes_another_users_folder_with_that_users_rights_alone() {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            vg_sandbox::real_ids().0,
            0,
            "this test makes two users' files: run it as root (scripts/test)"
        );
        let parent = std::env::temp_dir().join(format!("vg-sweep-owner-{}", std::process::id()));
        std::fs::create_dir_all(&parent).unwrap();
        let folder = parent.join("folder");
        let theirs = folder.join("theirs");
        std::fs::create_dir_all(&theirs).unwrap();
        std::fs::write(theirs.join("kept"), b"root's").unwrap();
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::os::unix::fs::chown(&folder, Some(4242), Some(4242)).unwrap();
        remove_as_owner(&folder, (4242, 4242), 0);
        assert!(theirs.join("kept").exists(), "root's file was removed");
        // This thread's own rights are untouched: root removes it all.
        std::fs::remove_dir_all(&parent).unwrap();
        assert!(!parent.exists());
    }

    #[test]
    fn a_bundle_folder_inside_a_mount_is_seen_through_it() {
        let view = FsView {
            ops: vec![
                vg_policy::MountOp::Bind {
                    src: "/usr".into(),
                    dst: "/usr".into(),
                    read_only: true,
                    kind: vg_policy::view::NodeKind::Dir,
                    dev: false,
                },
                vg_policy::MountOp::Tmpfs {
                    dst: "/tmp".into(),
                    size: 1,
                    mode: 0o1777,
                    owner: None,
                },
                vg_policy::MountOp::Bind {
                    src: "/home/u/ws".into(),
                    dst: "/ws".into(),
                    read_only: false,
                    kind: vg_policy::view::NodeKind::Dir,
                    dev: false,
                },
            ],
        };
        assert_eq!(
            shown_through(Path::new("/home/u/ws/.tmp"), &view),
            Some(Path::new("/home/u/ws"))
        );
        assert_eq!(
            shown_through(Path::new("/usr/tmp"), &view),
            Some(Path::new("/usr"))
        );
        // The sandbox's /tmp is its own: the host's is not shown.
        assert_eq!(shown_through(Path::new("/tmp"), &view), None);
        assert_eq!(shown_through(Path::new("/home/u"), &view), None);
    }

    #[test]
    fn an_image_runscs_user_cannot_read_is_refused_with_the_fix() {
        let parent = std::env::temp_dir().join(format!("vg-bundle-image-{}", std::process::id()));
        let image = parent.join("store").join("root");
        std::fs::create_dir_all(&image).unwrap();
        let me = std::fs::metadata(&parent).unwrap();
        // As root, a store private to root and runsc running as `nobody`; otherwise
        // a store this user cannot search.
        let (owner, mode) = if me.uid() == 0 {
            (Some((65534, 65534)), 0o700)
        } else {
            (None, 0o000)
        };
        std::fs::set_permissions(parent.join("store"), std::fs::Permissions::from_mode(mode))
            .unwrap();
        let process = Process {
            argv: vec!["true".into()],
            env: Vec::new(),
            cwd: "/".into(),
            uid: 0,
            gid: 0,
            hostname: "vg".into(),
            terminal: false,
            nproc: None,
            capabilities: &[],
        };
        let view = FsView {
            ops: vec![vg_policy::MountOp::ImageRoot {
                lower: image.clone(),
                size: 1,
            }],
        };
        let err = Bundle::write(&parent, "i", &process, &view, owner, Network::None)
            .unwrap_err()
            .to_string();
        std::fs::set_permissions(parent.join("store"), std::fs::Permissions::from_mode(0o700))
            .unwrap();
        assert!(err.contains("cannot read the image's root"), "{err}");
        assert!(err.contains("--backend native"), "{err}");
        // Nothing was left behind.
        assert!(!parent.join("vectraguard-gvisor-i").exists());
        std::fs::remove_dir_all(&parent).unwrap();
    }

    /// A supervisor started as root must not write or chown in a folder another
    /// user already owns (that user could swap an entry for a link to a host file):
    /// the bundle stays ours and private until handed over, the folder itself last.
    #[test]
    fn the_bundle_stays_ours_and_private_until_handed_over() {
        let parent = std::env::temp_dir().join(format!("vg-bundle-test-{}", std::process::id()));
        std::fs::create_dir_all(&parent).unwrap();
        let me = std::fs::metadata(&parent).unwrap();
        let ours = (me.uid(), me.gid());
        // Only root can give files away: as root, to `nobody`.
        let owner = if me.uid() == 0 { (65534, 65534) } else { ours };
        let process = Process {
            argv: vec!["true".into()],
            env: Vec::new(),
            cwd: "/".into(),
            uid: 0,
            gid: 0,
            hostname: "vg".into(),
            terminal: false,
            nproc: None,
            capabilities: &[],
        };
        let bundle = Bundle::write(
            &parent,
            "t",
            &process,
            &FsView { ops: Vec::new() },
            Some(owner),
            Network::None,
        )
        .unwrap();
        // What the session writes after `write` (the trace configuration).
        std::fs::write(bundle.trace_config(), b"{}").unwrap();
        let owners = || {
            walk(bundle.dir())
                .into_iter()
                .map(|p| {
                    let m = p.symlink_metadata().unwrap();
                    (p, (m.uid(), m.gid()))
                })
                .collect::<Vec<_>>()
        };
        let before = owners();
        assert!(before.len() >= 5, "{before:?}");
        assert!(before.iter().all(|(_, o)| *o == ours), "{before:?}");
        assert_eq!(
            std::fs::metadata(bundle.dir()).unwrap().mode() & 0o777,
            0o700
        );
        bundle.hand_over().unwrap();
        let after = owners();
        assert!(after.iter().all(|(_, o)| *o == owner), "{after:?}");
        let dir = bundle.dir().to_path_buf();
        drop(bundle);
        assert!(!dir.exists());
        std::fs::remove_dir(&parent).unwrap();
    }

    /// The mediated network is runsc's host passthrough in the keeper's own
    /// namespace (with the TUN interface for the keeper to make, and no network
    /// namespace in config.json); a terminal is runsc's console socket, which the
    /// keeper serves.
    #[test]
    fn the_mediated_network_and_a_terminal_are_the_keepers_to_set_up() {
        let parent = std::env::temp_dir().join(format!("vg-bundle-net-{}", std::process::id()));
        std::fs::create_dir_all(&parent).unwrap();
        let tun = vg_sandbox::TunConfig {
            name: "tun0",
            address: std::net::Ipv4Addr::new(198, 18, 0, 2),
            netmask: std::net::Ipv4Addr::new(255, 255, 255, 0),
            gateway: std::net::Ipv4Addr::new(198, 18, 0, 1),
            mtu: 65520,
        };
        let process = |terminal| Process {
            argv: vec!["sh".into()],
            env: Vec::new(),
            cwd: "/".into(),
            uid: 0,
            gid: 0,
            hostname: "vg".into(),
            terminal,
            nproc: Some(64),
            capabilities: &[],
        };
        let runsc = Path::new("/usr/bin/runsc");
        let view = FsView { ops: Vec::new() };
        let config = |b: &Bundle| -> serde_json::Value {
            serde_json::from_slice(&std::fs::read(b.dir().join("config.json")).unwrap()).unwrap()
        };
        let mediated = Bundle::write(
            &parent,
            "m",
            &process(true),
            &view,
            None,
            Network::Mediated(tun),
        )
        .unwrap();
        let spec = mediated.runtime(runsc, None, false, String::new());
        assert!(
            spec.argv.contains(&"--network=host".to_owned()),
            "{:?}",
            spec.argv
        );
        assert_eq!(spec.tun, Some(tun));
        let console = mediated.console_socket().display().to_string();
        let at = spec
            .argv
            .iter()
            .position(|a| a == "--console-socket")
            .unwrap();
        assert_eq!(spec.argv[at + 1], console);
        // The container's id stays last, after run's own flags.
        assert_eq!(spec.argv.last().unwrap(), "m");
        assert_eq!(spec.console, Some(mediated.console_socket()));
        let c = config(&mediated);
        assert_eq!(c["process"]["terminal"], true);
        // The process cap is gVisor's own, and no process can make a user namespace
        // to step past it: runsc is told to install the bundle's seccomp rules.
        assert_eq!(
            c["process"]["rlimits"],
            serde_json::json!([{"type": "RLIMIT_NPROC", "soft": 64, "hard": 64}])
        );
        assert_eq!(c["linux"]["seccomp"], bundle::seccomp());
        assert!(spec.argv.contains(&"--oci-seccomp".to_owned()));
        assert!(
            !c["linux"]["namespaces"]
                .as_array()
                .unwrap()
                .contains(&serde_json::json!({"type": "network"}))
        );
        let plain =
            Bundle::write(&parent, "p", &process(false), &view, None, Network::None).unwrap();
        let spec = plain.runtime(runsc, None, false, String::new());
        assert!(
            spec.argv.contains(&"--network=none".to_owned()),
            "{:?}",
            spec.argv
        );
        assert!(!spec.argv.contains(&"--console-socket".to_owned()));
        assert_eq!((spec.tun, spec.console), (None, None));
        // Without a TUN interface too, runsc's control socket is in a network
        // namespace of its own, out of the host's other users' reach.
        assert!(spec.private_network);
        assert!(
            plain
                .exec_target(runsc, None, (0, 0), Vec::new())
                .keeper_namespaces
        );
        assert_eq!(config(&plain)["process"]["terminal"], false);
        drop((mediated, plain));
        std::fs::remove_dir(&parent).unwrap();
    }
}
