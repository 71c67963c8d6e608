//! The OCI bundle `runsc` runs: `config.json` from the session's `SandboxSpec`, and
//! the skeleton root folder its mount points live in. Pure: the config and the list
//! of skeleton entries are values; `super::Bundle::write` makes them on disk.
//!
//! How the native view maps onto gVisor's:
//! - the system folders, the workspace and other mounts are bind mounts (read-only
//!   where the view says so), served to the sentry by gVisor's file proxy (gofer);
//! - the private `/tmp`, `$HOME` and `--tmpfs` folders are gVisor tmpfs mounts of
//!   the same size and mode (their pages are the sentry's memory, held by the
//!   session's memory limit);
//! - the masked secrets are hidden behind an empty read-only file or tmpfs;
//! - `/proc` and `/dev` are gVisor's own, emulated by the sentry: nothing of the
//!   host's procfs or device nodes is shown, so the native view's masks and
//!   read-only knobs under them have nothing to hide;
//! - the root is a read-only skeleton holding the mount points and the top-level
//!   symbolic links (`/bin -> usr/bin`), or an image's root under an overlay whose
//!   changes live in the sentry's memory.

use std::path::{Component, Path, PathBuf};

use anyhow::{Result, bail};
use serde_json::{Value, json};
use vg_policy::view::NodeKind;
use vg_policy::{FsView, MountOp};

/// What the skeleton root must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkeletonEntry {
    Dir(PathBuf),
    File(PathBuf),
    Symlink { path: PathBuf, target: PathBuf },
}

/// The translated view.
#[derive(Debug, Clone, PartialEq)]
pub struct Translated {
    pub mounts: Vec<Value>,
    pub skeleton: Vec<SkeletonEntry>,
    /// An image's root folder, or `None` for the skeleton.
    pub image_root: Option<PathBuf>,
}

/// Whether `path` is `base` or beneath it.
fn under(path: &Path, base: &str) -> bool {
    path.starts_with(base)
}

/// Gives the sentry's own `/proc` and `/dev` (see the module documentation).
fn gvisor_owns(dst: &Path) -> bool {
    under(dst, "/proc") || under(dst, "/dev")
}

fn bind(src: &Path, dst: &Path, read_only: bool) -> Value {
    let mode = if read_only { "ro" } else { "rw" };
    json!({
        "destination": dst,
        "type": "bind",
        "source": src,
        "options": ["rbind", mode, "nosuid", "nodev"],
    })
}

fn tmpfs(dst: &Path, size: u64, mode: u32, owner: Option<(u32, u32)>, read_only: bool) -> Value {
    let mut options = vec![
        "nosuid".to_owned(),
        "nodev".to_owned(),
        format!("size={size}"),
        format!("mode={mode:o}"),
    ];
    if let Some((uid, gid)) = owner {
        options.push(format!("uid={uid}"));
        options.push(format!("gid={gid}"));
    }
    if read_only {
        options.push("ro".into());
    }
    json!({"destination": dst, "type": "tmpfs", "source": "tmpfs", "options": options})
}

/// Every folder from `/` down to `path`, excluded and included, for the skeleton.
fn parents(path: &Path) -> impl Iterator<Item = PathBuf> + '_ {
    path.ancestors()
        .skip(1)
        .filter(|p| p.components().any(|c| matches!(c, Component::Normal(_))))
        .map(Path::to_path_buf)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
}

/// Translates the native view into gVisor mounts and a skeleton (see the module
/// documentation). What gVisor cannot show the same way is refused.
///
/// `reachable` says whether runsc's user can reach a host path at all: a mask over
/// a path it cannot reach hides nothing more (the gofer that serves every file runs
/// as that user, without capabilities), and gVisor could not mount over it.
///
/// `owner` is who the command is inside gVisor: the private folders the native view
/// gives the sandbox's user (`$HOME`, `--tmpfs`) are that user's.
pub fn translate(
    view: &FsView,
    empty_file: &Path,
    reachable: &dyn Fn(&Path, NodeKind) -> bool,
    owner_inside: (u32, u32),
) -> Result<Translated> {
    let mut mounts = Vec::new();
    let mut skeleton: Vec<SkeletonEntry> = Vec::new();
    let mut image_root = None;
    // Bind mounts so far, to make a later `ReadOnly` a read-only re-bind.
    let mut binds: Vec<(PathBuf, PathBuf)> = Vec::new();
    let add_node = |skeleton: &mut Vec<SkeletonEntry>, dst: &Path, kind: NodeKind| {
        for dir in parents(dst) {
            let entry = SkeletonEntry::Dir(dir);
            if !skeleton.contains(&entry) {
                skeleton.push(entry);
            }
        }
        let entry = match kind {
            NodeKind::Dir => SkeletonEntry::Dir(dst.to_path_buf()),
            NodeKind::File => SkeletonEntry::File(dst.to_path_buf()),
        };
        if !skeleton.contains(&entry) {
            skeleton.push(entry);
        }
    };
    for (i, op) in view.ops.iter().enumerate() {
        match op {
            MountOp::ImageRoot { lower, .. } if i == 0 => image_root = Some(lower.clone()),
            MountOp::ImageRoot { .. } => bail!("an image root can only come first in the view"),
            MountOp::Proc { dst } if dst == Path::new("/proc") => {
                mounts.push(json!({"destination": "/proc", "type": "proc", "source": "proc"}));
            }
            op if op_dst(op).is_some_and(gvisor_owns) => {}
            MountOp::Bind {
                src,
                dst,
                read_only,
                kind,
                dev: _,
            } => {
                add_node(&mut skeleton, dst, *kind);
                mounts.push(bind(src, dst, *read_only));
                binds.push((src.clone(), dst.clone()));
            }
            MountOp::Tmpfs {
                dst,
                size,
                mode,
                owner,
            } => {
                add_node(&mut skeleton, dst, NodeKind::Dir);
                let inside = owner.map(|_| owner_inside);
                mounts.push(tmpfs(dst, *size, *mode, inside, false));
            }
            MountOp::Symlink { target, dst } => {
                if dst.parent() != Some(Path::new("/")) {
                    bail!(
                        "the gvisor backend cannot make the symbolic link {} (only links at the top of the root); use the native backend",
                        dst.display()
                    );
                }
                skeleton.push(SkeletonEntry::Symlink {
                    path: dst.clone(),
                    target: target.clone(),
                });
            }
            MountOp::Mask { dst, kind } => {
                // Masks of paths that do not exist are skipped natively; a bind over
                // a missing file would fail in the sentry, so only what the view shows.
                let Some(host) = host_path(&binds, dst) else {
                    continue;
                };
                if !reachable(&host, *kind) {
                    continue;
                }
                add_node(&mut skeleton, dst, *kind);
                match kind {
                    NodeKind::Dir => mounts.push(tmpfs(dst, 4096, 0o555, None, true)),
                    NodeKind::File => {
                        mounts.push(bind(empty_file, dst, true));
                    }
                }
            }
            MountOp::ReadOnly { dst } => {
                let Some(host) = host_path(&binds, dst) else {
                    bail!(
                        "the gvisor backend cannot make {} read-only: it is not inside a mounted folder",
                        dst.display()
                    );
                };
                if host.exists() {
                    mounts.push(bind(&host, dst, true));
                }
            }
            MountOp::Overlay { dst, .. } => bail!(
                "the gvisor backend cannot show {} as a throw-away overlay (learning mode's view); use the native backend",
                dst.display()
            ),
            MountOp::Proc { dst } | MountOp::Devpts { dst, .. } => bail!(
                "the gvisor backend cannot mount {} (gVisor has its own /proc and /dev)",
                dst.display()
            ),
        }
    }
    Ok(Translated {
        mounts,
        skeleton,
        image_root,
    })
}

/// The host path shown at `dst`, through the innermost bind mount holding it.
fn host_path(binds: &[(PathBuf, PathBuf)], dst: &Path) -> Option<PathBuf> {
    let (src, base) = binds
        .iter()
        .filter(|(_, d)| dst.starts_with(d))
        .max_by_key(|(_, d)| d.components().count())?;
    let rest = dst.strip_prefix(base).ok()?;
    Some(if rest.as_os_str().is_empty() {
        src.clone()
    } else {
        src.join(rest)
    })
}

fn op_dst(op: &MountOp) -> Option<&Path> {
    match op {
        MountOp::ImageRoot { .. } => None,
        MountOp::Bind { dst, .. }
        | MountOp::Tmpfs { dst, .. }
        | MountOp::Overlay { dst, .. }
        | MountOp::Proc { dst }
        | MountOp::Devpts { dst, .. }
        | MountOp::Symlink { dst, .. }
        | MountOp::Mask { dst, .. }
        | MountOp::ReadOnly { dst } => Some(dst),
    }
}

/// The process and its environment, as the bundle's `config.json` says them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub uid: u32,
    pub gid: u32,
    pub hostname: String,
    /// On a terminal that runsc makes and sends to its console socket.
    pub terminal: bool,
    /// The process cap inside: `RLIMIT_NPROC` of every process of the sandbox,
    /// see [`process_limits`].
    pub nproc: Option<u64>,
    /// Its capabilities (OCI names), in every set but the inheritable and ambient
    /// ones; empty for any command (only our `-t` relay starts with some, to hand
    /// out identities: `vg_sandbox::gvisor_terminal::RELAY_CAPABILITIES`).
    pub capabilities: &'static [&'static str],
}

/// `CLONE_NEWUSER` (`linux/sched.h`).
const CLONE_NEWUSER: u64 = 0x1000_0000;

/// The `rlimits` of the bundle's process: `nproc` as `RLIMIT_NPROC`, soft and hard.
///
/// gVisor's kernel counts the tasks (threads included) of each user across the
/// whole sandbox and refuses a fork or clone past the creating task's
/// `RLIMIT_NPROC` with `EAGAIN` (runsc 20221219: `pkg/sentry/kernel/kernel.go`,
/// `incRLimitNProc`; `runsc exec` gives every exec'd process the limits of this
/// file, `runsc/boot/loader.go`, `executeAsync`). It counts the sandbox's own
/// processes, not gVisor's host threads and stub processes, which a host pids
/// cgroup would count (about 5 to 90 host tasks per process inside, see the README).
/// Unprivileged, a process can lower it but not raise it (pure).
pub fn process_limits(nproc: Option<u64>) -> Vec<Value> {
    nproc
        .map(|n| json!({"type": "RLIMIT_NPROC", "soft": n, "hard": n}))
        .into_iter()
        .collect()
}

/// The sandbox's own seccomp rules (runsc `--oci-seccomp` installs them in gVisor's
/// kernel on the first process, inherited by all it starts): no new user namespace.
///
/// gVisor skips the `RLIMIT_NPROC` check for a task with `CAP_SYS_ADMIN` or
/// `CAP_SYS_RESOURCE` in its own user namespace, which any process gets by
/// `unshare(CLONE_NEWUSER)` (`auth.Credentials.HasCapability`): a fork flood
/// after it was not capped. runsc's OCI filter answers `EPERM` (its only errno).
/// `clone3` is not filtered: its flags are behind a pointer, and runsc 20221219
/// does not implement it (`ENOSYS`), so glibc falls back to `clone` (pure).
pub fn seccomp() -> Value {
    let deny_new_user = |name: &str| {
        json!({
            "names": [name],
            "action": "SCMP_ACT_ERRNO",
            "args": [{
                "index": 0,
                "value": CLONE_NEWUSER,
                "valueTwo": CLONE_NEWUSER,
                "op": "SCMP_CMP_MASKED_EQ",
            }],
        })
    };
    json!({
        "defaultAction": "SCMP_ACT_ALLOW",
        // On x86_64 and arm64 both take the flags as their first argument.
        "syscalls": [deny_new_user("unshare"), deny_new_user("clone")],
    })
}

/// The bundle's `config.json`: `root` is the skeleton folder (or the image's root),
/// relative to the bundle or absolute.
/// `own_netns`: the sandbox gets a network namespace of its own (empty but for
/// gVisor's loopback); without it, it stays in runsc's (the mediated network's).
pub fn config(process: &Process, view: &Translated, root: &Path, own_netns: bool) -> Value {
    let no_caps: Vec<String> = Vec::new();
    let namespaces: Vec<Value> = ["pid", "network", "ipc", "uts", "mount"]
        .into_iter()
        .filter(|ns| own_netns || *ns != "network")
        .map(|ns| json!({ "type": ns }))
        .collect();
    json!({
        "ociVersion": "1.0.2",
        "process": {
            "terminal": process.terminal,
            "user": {"uid": process.uid, "gid": process.gid},
            "args": process.argv,
            "env": process.env.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
            "cwd": process.cwd,
            "capabilities": {
                "bounding": process.capabilities, "effective": process.capabilities,
                "inheritable": no_caps, "permitted": process.capabilities, "ambient": no_caps,
            },
            "noNewPrivileges": true,
            "rlimits": process_limits(process.nproc),
        },
        "root": {"path": root, "readonly": view.image_root.is_none()},
        "hostname": process.hostname,
        "mounts": view.mounts,
        "linux": {
            "namespaces": namespaces,
            "seccomp": seccomp(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(ops: Vec<MountOp>) -> FsView {
        FsView { ops }
    }

    fn dst_of(m: &Value) -> &str {
        m["destination"].as_str().unwrap()
    }

    #[test]
    fn binds_tmpfs_and_links_keep_their_modes_and_gvisor_keeps_its_own_proc_and_dev() {
        let t = translate(
            &view(vec![
                MountOp::Bind {
                    src: "/usr".into(),
                    dst: "/usr".into(),
                    read_only: true,
                    kind: NodeKind::Dir,
                    dev: false,
                },
                MountOp::Symlink {
                    target: "usr/bin".into(),
                    dst: "/bin".into(),
                },
                MountOp::Proc {
                    dst: "/proc".into(),
                },
                MountOp::ReadOnly {
                    dst: "/proc/sys".into(),
                },
                MountOp::Mask {
                    dst: "/proc/kcore".into(),
                    kind: NodeKind::File,
                },
                MountOp::Tmpfs {
                    dst: "/dev".into(),
                    size: 65536,
                    mode: 0o755,
                    owner: None,
                },
                MountOp::Bind {
                    src: "/dev/null".into(),
                    dst: "/dev/null".into(),
                    read_only: false,
                    kind: NodeKind::File,
                    dev: true,
                },
                MountOp::Devpts {
                    dst: "/dev/pts".into(),
                    max: 64,
                },
                MountOp::Tmpfs {
                    dst: "/home/u".into(),
                    size: 1 << 20,
                    mode: 0o700,
                    owner: Some((1000, 1000)),
                },
                MountOp::Bind {
                    src: "/src/ws".into(),
                    dst: "/home/u/ws".into(),
                    read_only: false,
                    kind: NodeKind::Dir,
                    dev: false,
                },
            ]),
            Path::new("/b/empty"),
            &|p, _| p != Path::new("/etc/unreadable"),
            (1000, 1000),
        )
        .unwrap();
        let dsts: Vec<&str> = t.mounts.iter().map(dst_of).collect();
        assert_eq!(dsts, ["/usr", "/proc", "/home/u", "/home/u/ws"]);
        assert_eq!(
            t.mounts[0]["options"],
            json!(["rbind", "ro", "nosuid", "nodev"])
        );
        assert_eq!(t.mounts[3]["options"][1], "rw");
        assert_eq!(
            t.mounts[2]["options"],
            json!([
                "nosuid",
                "nodev",
                "size=1048576",
                "mode=700",
                "uid=1000",
                "gid=1000"
            ])
        );
        assert!(t.skeleton.contains(&SkeletonEntry::Symlink {
            path: "/bin".into(),
            target: "usr/bin".into()
        }));
        assert!(t.skeleton.contains(&SkeletonEntry::Dir("/home".into())));
        assert!(
            t.skeleton
                .contains(&SkeletonEntry::Dir("/home/u/ws".into()))
        );
        assert!(
            !t.skeleton
                .iter()
                .any(|e| matches!(e, SkeletonEntry::Dir(d) if d.starts_with("/dev")))
        );
        assert_eq!(t.image_root, None);
    }

    #[test]
    fn secrets_are_masked_and_read_only_places_rebound_from_their_host_path() {
        let t = translate(
            &view(vec![
                MountOp::Bind {
                    src: "/etc".into(),
                    dst: "/etc".into(),
                    read_only: true,
                    kind: NodeKind::Dir,
                    dev: false,
                },
                MountOp::Bind {
                    src: "/tmp".into(),
                    dst: "/ws".into(),
                    read_only: false,
                    kind: NodeKind::Dir,
                    dev: false,
                },
                MountOp::ReadOnly { dst: "/ws".into() },
                MountOp::Mask {
                    dst: "/etc/shadow".into(),
                    kind: NodeKind::File,
                },
                MountOp::Mask {
                    dst: "/etc/ssh".into(),
                    kind: NodeKind::Dir,
                },
                // Not inside anything shown: nothing to hide.
                MountOp::Mask {
                    dst: "/root/.ssh".into(),
                    kind: NodeKind::Dir,
                },
                // Out of runsc's user's reach: nothing more to hide.
                MountOp::Mask {
                    dst: "/etc/unreadable".into(),
                    kind: NodeKind::File,
                },
            ]),
            Path::new("/b/empty"),
            &|p, _| p != Path::new("/etc/unreadable"),
            (1000, 1000),
        )
        .unwrap();
        let dsts: Vec<&str> = t.mounts.iter().map(dst_of).collect();
        assert_eq!(dsts, ["/etc", "/ws", "/ws", "/etc/shadow", "/etc/ssh"]);
        assert_eq!(t.mounts[2]["source"], "/tmp");
        assert_eq!(t.mounts[2]["options"][1], "ro");
        assert_eq!(t.mounts[3]["source"], "/b/empty");
        assert_eq!(t.mounts[3]["options"][1], "ro");
        assert_eq!(t.mounts[4]["type"], "tmpfs");
        assert!(
            t.mounts[4]["options"]
                .as_array()
                .unwrap()
                .contains(&json!("ro"))
        );
        assert!(
            t.skeleton
                .contains(&SkeletonEntry::File("/etc/shadow".into()))
        );
    }

    #[test]
    fn what_gvisor_cannot_show_the_same_way_is_refused() {
        let overlay = translate(
            &view(vec![MountOp::Overlay {
                lower: "/home/u".into(),
                dst: "/home/u".into(),
                size: 1,
                owner: None,
            }]),
            Path::new("/e"),
            &|_, _| true,
            (0, 0),
        );
        assert!(
            overlay
                .unwrap_err()
                .to_string()
                .contains("use the native backend")
        );
        let deep_link = translate(
            &view(vec![MountOp::Symlink {
                target: "x".into(),
                dst: "/a/b".into(),
            }]),
            Path::new("/e"),
            &|_, _| true,
            (0, 0),
        );
        assert!(deep_link.is_err());
    }

    #[test]
    fn the_config_drops_every_capability_and_privilege() {
        let t = translate(&view(vec![]), Path::new("/e"), &|_, _| true, (0, 0)).unwrap();
        let p = Process {
            argv: vec!["sh".into(), "-c".into(), "true".into()],
            env: vec![("PATH".into(), "/usr/bin".into())],
            cwd: "/ws".into(),
            uid: 1000,
            gid: 1000,
            hostname: "vg".into(),
            terminal: false,
            nproc: None,
            capabilities: &[],
        };
        let c = config(&p, &t, Path::new("root"), true);
        assert_eq!(c["process"]["noNewPrivileges"], true);
        // No cap asked: no rlimit (gVisor's default is unlimited).
        assert_eq!(c["process"]["rlimits"], json!([]));
        for set in [
            "bounding",
            "effective",
            "inheritable",
            "permitted",
            "ambient",
        ] {
            assert_eq!(c["process"]["capabilities"][set], json!([]), "{set}");
        }
        assert_eq!(c["process"]["terminal"], false);
        assert_eq!(c["process"]["env"], json!(["PATH=/usr/bin"]));
        assert_eq!(c["process"]["user"], json!({"uid": 1000, "gid": 1000}));
        assert_eq!(c["root"], json!({"path": "root", "readonly": true}));
        assert!(
            c["linux"]["namespaces"]
                .as_array()
                .unwrap()
                .contains(&json!({"type": "network"}))
        );
        // The mediated network: the sandbox stays in the keeper's network namespace
        // (whose only way out is the TUN), every other namespace still its own.
        let mediated = config(&p, &t, Path::new("root"), false);
        assert_eq!(
            mediated["linux"]["namespaces"],
            json!([{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}])
        );
    }

    #[test]
    fn the_process_cap_is_an_nproc_rlimit_and_no_process_makes_a_user_namespace() {
        assert_eq!(process_limits(None), Vec::<Value>::new());
        assert_eq!(
            process_limits(Some(300)),
            [json!({"type": "RLIMIT_NPROC", "soft": 300, "hard": 300})]
        );
        let rules = seccomp();
        assert_eq!(rules["defaultAction"], "SCMP_ACT_ALLOW");
        let denied: Vec<(&str, u64, u64, &str)> = rules["syscalls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                assert_eq!(r["action"], "SCMP_ACT_ERRNO");
                let arg = &r["args"][0];
                assert_eq!(arg["index"], 0);
                (
                    r["names"][0].as_str().unwrap(),
                    arg["value"].as_u64().unwrap(),
                    arg["valueTwo"].as_u64().unwrap(),
                    arg["op"].as_str().unwrap(),
                )
            })
            .collect();
        let newuser = 0x1000_0000;
        assert_eq!(
            denied,
            [
                ("unshare", newuser, newuser, "SCMP_CMP_MASKED_EQ"),
                ("clone", newuser, newuser, "SCMP_CMP_MASKED_EQ"),
            ]
        );
    }
}
