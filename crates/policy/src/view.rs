//! The default filesystem view as an ordered list of mount operations.
//!
//! The view is computed from facts about the host ([`HostLayout`], gathered by the
//! caller) and the user's options, so it can be asserted in tests before any mount is
//! made. `vg-sandbox` replays the operations, in order, on a fresh tmpfs root.

use std::path::{Path, PathBuf};

use crate::landlock::{Access, LandlockRules};
use crate::paths::depth;

/// Host directories exposed read-only in the default view (when present).
pub const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
];

/// Host folders learning mode's relaxed view shows read-only besides the system
/// folders and the home (those of them the host has): see [`FsView::learn_view`]. A
/// learned profile grants reads below them, never writes (they were read-only while
/// learning) and nothing outside them, the home and the default view.
pub const LEARN_READ_ONLY: &[&str] = &["/srv", "/var", "/mnt", "/media"];

/// Files and directories hidden even though their parent is visible: password hashes,
/// sudo rules, host keys, keytabs, private TLS keys.
pub const SECRET_PATHS: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/security/opasswd",
    "/etc/ssl/private",
    "/etc/krb5.keytab",
    "/etc/ssh/ssh_host_rsa_key",
    "/etc/ssh/ssh_host_ecdsa_key",
    "/etc/ssh/ssh_host_ed25519_key",
    "/etc/ssh/ssh_host_dsa_key",
    "/etc/docker/key.json",
    "/etc/wireguard",
    "/etc/NetworkManager/system-connections",
];

/// Kernel interfaces in the fresh `/proc` that leak host information or offer a
/// handle on the host kernel; masked or made read-only as container runtimes do.
pub const PROC_MASKED: &[&str] = &[
    "/proc/kcore",
    "/proc/keys",
    "/proc/timer_list",
    "/proc/sched_debug",
    "/proc/latency_stats",
];
pub const PROC_READ_ONLY: &[&str] = &[
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/irq",
    "/proc/bus",
    "/proc/fs",
];

/// Device nodes bound from the host into the minimal `/dev`.
pub const DEV_NODES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    Dir,
    File,
}

/// What the host has at a system path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostEntry {
    Dir,
    /// A symlink such as merged-/usr's `/bin -> usr/bin`; recreated as the same link.
    Symlink(PathBuf),
}

/// Facts about the host that the view depends on, gathered by the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostLayout {
    pub system_dirs: Vec<(PathBuf, HostEntry)>,
    /// Secret paths that exist on this host.
    pub secrets: Vec<(PathBuf, NodeKind)>,
}

/// A user mount whose host side has been checked and resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedMount {
    pub host: PathBuf,
    pub container: PathBuf,
    pub read_only: bool,
    pub kind: NodeKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewOptions {
    /// Workspace and extra mounts, in the order given.
    pub mounts: Vec<ResolvedMount>,
    /// `$HOME` inside the sandbox; gets a private tmpfs.
    pub home: PathBuf,
    pub uid: u32,
    pub gid: u32,
    pub tmp_size: u64,
    pub home_size: u64,
    /// Pseudo-terminals the sandbox's devpts hands out at once.
    pub ptys: u64,
    /// Private tmpfs folders (`--tmpfs PATH`), each of `tmp_size` bytes, owned by the
    /// sandbox's user, mounted last (over a mount at the same place).
    pub tmpfs: Vec<PathBuf>,
}

/// What learning mode adds to the default view (see [`FsView::learn_view`]), gathered
/// by the caller from the host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LearnView {
    /// The host directory shown at `$HOME` (read through a throwaway layer).
    pub host_home: PathBuf,
    /// Other host directories shown read-only (e.g. `/var`, `/srv`), those that exist.
    pub extra_read_only: Vec<PathBuf>,
    /// Sensitive files and directories under the home that exist, hidden on top.
    pub masks: Vec<(PathBuf, NodeKind)>,
}

/// Private tmpfs folders of `opts`, after the user's mounts.
fn tmpfs_ops(opts: &ViewOptions) -> impl Iterator<Item = MountOp> + '_ {
    opts.tmpfs.iter().map(|dst| MountOp::Tmpfs {
        dst: dst.clone(),
        size: opts.tmp_size,
        mode: 0o700,
        owner: Some((opts.uid, opts.gid)),
    })
}

/// One step of building the sandbox's root filesystem. Paths in `dst` are inside the
/// sandbox; `src` paths are on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountOp {
    /// The root itself is a container image: `lower` (a host directory, the unpacked
    /// image) under a writable overlay whose changes live in a tmpfs of `size` bytes
    /// and vanish with the sandbox. Only ever the first operation; without it the root
    /// is an empty read-only tmpfs holding mount points.
    ImageRoot {
        lower: PathBuf,
        size: u64,
    },
    /// Bind a host path. Device nodes get `dev`, everything else is `nodev`; all binds
    /// are `nosuid`.
    Bind {
        src: PathBuf,
        dst: PathBuf,
        read_only: bool,
        kind: NodeKind,
        dev: bool,
    },
    Tmpfs {
        dst: PathBuf,
        size: u64,
        mode: u32,
        owner: Option<(u32, u32)>,
    },
    /// A host directory (`lower`) shown at `dst` under a writable overlay: reads see
    /// the host's files, every change goes to a tmpfs of `size` bytes that vanishes
    /// with the sandbox, and nothing is ever written to the host. The layer's root
    /// directory belongs to `owner` (else to whoever builds the sandbox) and keeps
    /// the host directory's mode. Host mounts beneath `lower` are not shown (overlayfs
    /// does not cross mount points), and renaming a directory that comes from the host
    /// fails with `EXDEV` (unprivileged overlayfs has no `redirect_dir`; `mv` copies).
    Overlay {
        lower: PathBuf,
        dst: PathBuf,
        size: u64,
        owner: Option<(u32, u32)>,
    },
    /// A fresh procfs for the sandbox's PID namespace.
    Proc {
        dst: PathBuf,
    },
    /// A private devpts instance, so the host's terminals are not listed, of at most
    /// `max` terminals: every instance draws on the host's one pool
    /// (`/proc/sys/kernel/pty/max`), which one sandbox must not be able to drain.
    Devpts {
        dst: PathBuf,
        max: u64,
    },
    Symlink {
        target: PathBuf,
        dst: PathBuf,
    },
    /// Hide a path behind an empty read-only node; skipped when it does not exist.
    Mask {
        dst: PathBuf,
        kind: NodeKind,
    },
    /// Make an existing path read-only; skipped when it does not exist.
    ReadOnly {
        dst: PathBuf,
    },
}

impl MountOp {
    pub fn dst(&self) -> &Path {
        match self {
            Self::ImageRoot { .. } => Path::new("/"),
            Self::Bind { dst, .. }
            | Self::Tmpfs { dst, .. }
            | Self::Overlay { dst, .. }
            | Self::Proc { dst }
            | Self::Devpts { dst, .. }
            | Self::Symlink { dst, .. }
            | Self::Mask { dst, .. }
            | Self::ReadOnly { dst } => dst,
        }
    }
}

/// The complete plan for the sandbox's root filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsView {
    pub ops: Vec<MountOp>,
}

impl FsView {
    /// Each overlay, as its folder inside and its lower folder on the host: an
    /// image's root (at `/`, [`MountOp::ImageRoot`]) and [`MountOp::Overlay`]s.
    pub fn overlays(&self) -> Vec<(&Path, &Path)> {
        self.ops
            .iter()
            .filter_map(|op| match op {
                MountOp::ImageRoot { lower, .. } => Some((Path::new("/"), lower.as_path())),
                MountOp::Overlay { lower, dst, .. } => Some((dst.as_path(), lower.as_path())),
                _ => None,
            })
            .collect()
    }

    /// Builds the default view: system directories read-only, secrets masked, fresh
    /// `/proc`, minimal `/dev`, private `/tmp` and `$HOME`, then the user's mounts
    /// (parents before children), then the masks again on top of everything so that
    /// re-binding `/etc` cannot uncover `/etc/shadow`.
    pub fn default_view(host: &HostLayout, opts: &ViewOptions) -> Self {
        let mut ops = system_ops(host);
        ops.extend(proc_ops());
        ops.extend(dev_ops(opts.ptys));

        ops.push(tmp_op(opts.tmp_size));
        if opts.home != Path::new("/tmp") {
            ops.push(MountOp::Tmpfs {
                dst: opts.home.clone(),
                size: opts.home_size,
                mode: 0o700,
                owner: Some((opts.uid, opts.gid)),
            });
        }

        ops.extend(user_mounts(&opts.mounts));
        ops.extend(tmpfs_ops(opts));
        ops.extend(secret_masks(host));
        Self { ops }
    }

    /// The relaxed view learning mode runs in: [`Self::default_view`], except that
    /// `$HOME` (`opts.home`) shows the host's home (`learn.host_home`) through a
    /// throwaway writable layer of `opts.home_size` bytes instead of an empty tmpfs,
    /// and `learn.extra_read_only` host directories are bound read-only after the
    /// system directories (parents first; `/proc`, `/dev`, `/tmp` and `$HOME` are
    /// mounted after them, so an extra directory can never uncover or replace those).
    /// The user's mounts and tmpfs come after as usual; the secrets, then
    /// `learn.masks`, are masked on top of everything. Nothing the command writes
    /// reaches the host. The sandbox's user must be the one whose home it is (a run
    /// started as root learns as root), so that it reads what it could read outside.
    pub fn learn_view(host: &HostLayout, opts: &ViewOptions, learn: &LearnView) -> Self {
        let mut ops = system_ops(host);
        let mut extra: Vec<&PathBuf> = learn.extra_read_only.iter().collect();
        extra.sort_by_key(|p| depth(p));
        ops.extend(extra.into_iter().map(|p| MountOp::Bind {
            src: p.clone(),
            dst: p.clone(),
            read_only: true,
            kind: NodeKind::Dir,
            dev: false,
        }));
        ops.extend(proc_ops());
        ops.extend(dev_ops(opts.ptys));

        ops.push(tmp_op(opts.tmp_size));
        if opts.home != Path::new("/tmp") {
            ops.push(MountOp::Overlay {
                lower: learn.host_home.clone(),
                dst: opts.home.clone(),
                size: opts.home_size,
                owner: Some((opts.uid, opts.gid)),
            });
        }

        ops.extend(user_mounts(&opts.mounts));
        ops.extend(tmpfs_ops(opts));
        ops.extend(secret_masks(host));
        ops.extend(learn.masks.iter().map(|(path, kind)| MountOp::Mask {
            dst: path.clone(),
            kind: *kind,
        }));
        Self { ops }
    }

    /// The view for a container image: the image (unpacked at `rootfs` on the host) as
    /// the root under an ephemeral writable layer of `opts.tmp_size` bytes, then a fresh
    /// `/proc`, the minimal `/dev`, a private `/tmp` and the user's mounts, as in
    /// [`Self::default_view`]. No host directory is visible except those mounts.
    pub fn image_view(rootfs: &Path, opts: &ViewOptions) -> Self {
        let mut ops = vec![MountOp::ImageRoot {
            lower: rootfs.to_path_buf(),
            size: opts.home_size,
        }];
        ops.extend(proc_ops());
        ops.extend(dev_ops(opts.ptys));
        ops.push(tmp_op(opts.tmp_size));
        ops.extend(user_mounts(&opts.mounts));
        ops.extend(tmpfs_ops(opts));
        Self { ops }
    }

    /// The Landlock rules that mirror this view: read and execute where the view is
    /// read-only, read-write where it is writable, and nothing elsewhere.
    pub fn landlock_rules(&self) -> LandlockRules {
        let mut rules = LandlockRules::default();
        // Listing "/" is harmless: the root is an empty read-only tmpfs with mount points.
        rules.push("/", Access::ReadDir);
        for op in &self.ops {
            match op {
                MountOp::Bind {
                    dst,
                    read_only,
                    dev,
                    ..
                } => {
                    let access = match (*dev, *read_only) {
                        (true, _) => Access::Device,
                        (false, true) => Access::ReadExec,
                        (false, false) => Access::ReadWrite,
                    };
                    rules.push(dst, access);
                }
                MountOp::Tmpfs { dst, .. } => {
                    // /dev itself only holds nodes and links; its entries get their own rules.
                    let access = if dst == Path::new("/dev") {
                        Access::ReadDir
                    } else {
                        Access::ReadWrite
                    };
                    rules.push(dst, access);
                }
                // The host's files, read through a throwaway writable layer.
                MountOp::Overlay { dst, .. } => rules.push(dst, Access::ReadWrite),
                MountOp::Proc { dst } => rules.push(dst, Access::Proc),
                // The image's files and the ephemeral layer over them.
                MountOp::ImageRoot { .. } => rules.push("/", Access::ReadWrite),
                MountOp::Devpts { dst, .. } => rules.push(dst, Access::Device),
                MountOp::Symlink { .. } | MountOp::Mask { .. } | MountOp::ReadOnly { .. } => {}
            }
        }
        rules
    }

    /// The writable places of the view (for reports and tests).
    pub fn writable_targets(&self) -> Vec<&Path> {
        self.ops
            .iter()
            .filter_map(|op| match op {
                MountOp::Bind {
                    dst,
                    read_only: false,
                    dev: false,
                    ..
                } => Some(dst.as_path()),
                MountOp::Tmpfs { dst, .. } if dst != Path::new("/dev") => Some(dst.as_path()),
                MountOp::Overlay { dst, .. } => Some(dst.as_path()),
                MountOp::ImageRoot { .. } => Some(Path::new("/")),
                _ => None,
            })
            .collect()
    }
}

/// The host's system directories, read-only, and their symlinks recreated.
fn system_ops(host: &HostLayout) -> Vec<MountOp> {
    host.system_dirs
        .iter()
        .map(|(path, entry)| match entry {
            HostEntry::Dir => MountOp::Bind {
                src: path.clone(),
                dst: path.clone(),
                read_only: true,
                kind: NodeKind::Dir,
                dev: false,
            },
            HostEntry::Symlink(target) => MountOp::Symlink {
                target: target.clone(),
                dst: path.clone(),
            },
        })
        .collect()
}

/// The host's secrets that exist, masked; last, so that no mount can uncover them.
fn secret_masks(host: &HostLayout) -> impl Iterator<Item = MountOp> + '_ {
    host.secrets.iter().map(|(path, kind)| MountOp::Mask {
        dst: path.clone(),
        kind: *kind,
    })
}

/// The private `/tmp` of every view.
fn tmp_op(size: u64) -> MountOp {
    MountOp::Tmpfs {
        dst: "/tmp".into(),
        size,
        mode: 0o1777,
        owner: None,
    }
}

/// A fresh `/proc` with the kernel's knobs read-only and its leaky files masked.
fn proc_ops() -> Vec<MountOp> {
    let mut ops = vec![MountOp::Proc {
        dst: "/proc".into(),
    }];
    for p in PROC_READ_ONLY {
        ops.push(MountOp::ReadOnly { dst: p.into() });
    }
    for p in PROC_MASKED {
        ops.push(MountOp::Mask {
            dst: p.into(),
            kind: NodeKind::File,
        });
    }
    ops
}

/// The user's mounts, parents before children.
fn user_mounts(mounts: &[ResolvedMount]) -> Vec<MountOp> {
    let mut user: Vec<&ResolvedMount> = mounts.iter().collect();
    // Stable: equal depths keep the user's order, so a later flag wins.
    user.sort_by_key(|m| depth(&m.container));
    user.into_iter()
        .map(|m| MountOp::Bind {
            src: m.host.clone(),
            dst: m.container.clone(),
            read_only: m.read_only,
            kind: m.kind,
            dev: false,
        })
        .collect()
}

fn dev_ops(ptys: u64) -> Vec<MountOp> {
    let mut ops = vec![MountOp::Tmpfs {
        dst: "/dev".into(),
        size: 64 * 1024,
        mode: 0o755,
        owner: None,
    }];
    for node in DEV_NODES {
        let path = PathBuf::from("/dev").join(node);
        ops.push(MountOp::Bind {
            src: path.clone(),
            dst: path,
            read_only: false,
            kind: NodeKind::File,
            dev: true,
        });
    }
    ops.push(MountOp::Devpts {
        dst: "/dev/pts".into(),
        max: ptys,
    });
    ops.push(MountOp::Symlink {
        target: "pts/ptmx".into(),
        dst: "/dev/ptmx".into(),
    });
    ops.push(MountOp::Tmpfs {
        dst: "/dev/shm".into(),
        size: 64 * 1024 * 1024,
        mode: 0o1777,
        owner: None,
    });
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("core", "/proc/kcore"),
    ] {
        ops.push(MountOp::Symlink {
            target: target.into(),
            dst: PathBuf::from("/dev").join(name),
        });
    }
    ops
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small host: merged-/usr's `/bin` link, two secrets (also used by
    /// `violation`'s tests).
    pub(crate) fn host() -> HostLayout {
        HostLayout {
            system_dirs: vec![
                ("/usr".into(), HostEntry::Dir),
                ("/bin".into(), HostEntry::Symlink("usr/bin".into())),
                ("/etc".into(), HostEntry::Dir),
            ],
            secrets: vec![
                ("/etc/shadow".into(), NodeKind::File),
                ("/etc/sudoers.d".into(), NodeKind::Dir),
            ],
        }
    }

    fn opts(mounts: Vec<ResolvedMount>) -> ViewOptions {
        ViewOptions {
            mounts,
            home: "/home/alice".into(),
            uid: 1000,
            gid: 1000,
            tmp_size: 1 << 30,
            home_size: 1 << 29,
            ptys: 7,
            tmpfs: Vec::new(),
        }
    }

    fn ws(host: &str, container: &str, ro: bool) -> ResolvedMount {
        ResolvedMount {
            host: host.into(),
            container: container.into(),
            read_only: ro,
            kind: NodeKind::Dir,
        }
    }

    fn index_of(view: &FsView, dst: &str) -> usize {
        view.ops
            .iter()
            .rposition(|op| op.dst() == Path::new(dst))
            .unwrap()
    }

    #[test]
    fn system_dirs_are_read_only_and_symlinks_preserved() {
        let view = FsView::default_view(&host(), &opts(vec![]));
        assert!(view.ops.contains(&MountOp::Bind {
            src: "/usr".into(),
            dst: "/usr".into(),
            read_only: true,
            kind: NodeKind::Dir,
            dev: false
        }));
        assert!(view.ops.contains(&MountOp::Symlink {
            target: "usr/bin".into(),
            dst: "/bin".into()
        }));
        assert!(!view.writable_targets().contains(&Path::new("/usr")));
        assert!(!view.writable_targets().contains(&Path::new("/etc")));
    }

    #[test]
    fn only_workspace_tmp_home_and_shm_are_writable() {
        let view = FsView::default_view(&host(), &opts(vec![ws("/src/p", "/home/alice/p", false)]));
        let mut w = view.writable_targets();
        w.sort();
        assert_eq!(
            w,
            [
                Path::new("/dev/shm"),
                Path::new("/home/alice"),
                Path::new("/home/alice/p"),
                Path::new("/tmp")
            ]
        );
    }

    #[test]
    fn secrets_are_masked_after_every_bind_including_a_rebound_etc() {
        let view = FsView::default_view(&host(), &opts(vec![ws("/etc", "/etc", true)]));
        let rebind = view
            .ops
            .iter()
            .rposition(|op| matches!(op, MountOp::Bind { dst, .. } if dst == Path::new("/etc")))
            .unwrap();
        assert!(index_of(&view, "/etc/shadow") > rebind);
        assert!(matches!(
            view.ops[index_of(&view, "/etc/sudoers.d")],
            MountOp::Mask {
                kind: NodeKind::Dir,
                ..
            }
        ));
    }

    #[test]
    fn user_mounts_are_ordered_parent_first_after_home() {
        let view = FsView::default_view(
            &host(),
            &opts(vec![
                ws("/a", "/work/deep/inner", true),
                ws("/b", "/work", false),
            ]),
        );
        assert!(index_of(&view, "/work") < index_of(&view, "/work/deep/inner"));
        assert!(index_of(&view, "/home/alice") < index_of(&view, "/work"));
    }

    #[test]
    fn proc_and_dev_are_fresh_and_minimal() {
        let view = FsView::default_view(&host(), &opts(vec![]));
        assert!(view.ops.contains(&MountOp::Proc {
            dst: "/proc".into()
        }));
        assert!(view.ops.contains(&MountOp::Devpts {
            dst: "/dev/pts".into(),
            max: 7,
        }));
        let devs: Vec<_> = view
            .ops
            .iter()
            .filter(|op| matches!(op, MountOp::Bind { dev: true, .. }))
            .map(|op| op.dst().to_path_buf())
            .collect();
        assert_eq!(devs.len(), DEV_NODES.len());
        assert!(devs.iter().all(|d| d.starts_with("/dev")));
        // /proc is mounted before its hardening.
        assert!(index_of(&view, "/proc") < index_of(&view, "/proc/sys"));
    }

    #[test]
    fn landlock_mirrors_the_view() {
        let view = FsView::default_view(&host(), &opts(vec![ws("/src/p", "/w", false)]));
        let rules = view.landlock_rules();
        assert_eq!(rules.access_of("/usr"), Some(Access::ReadExec));
        assert_eq!(rules.access_of("/etc"), Some(Access::ReadExec));
        assert_eq!(rules.access_of("/w"), Some(Access::ReadWrite));
        assert_eq!(rules.access_of("/tmp"), Some(Access::ReadWrite));
        assert_eq!(rules.access_of("/home/alice"), Some(Access::ReadWrite));
        assert_eq!(rules.access_of("/dev"), Some(Access::ReadDir));
        assert_eq!(rules.access_of("/dev/null"), Some(Access::Device));
        assert_eq!(rules.access_of("/"), Some(Access::ReadDir));
        // Nothing for hidden host paths.
        assert_eq!(rules.access_of("/root"), None);
        assert_eq!(rules.access_of("/var"), None);
    }

    fn learn() -> LearnView {
        LearnView {
            host_home: "/home/alice".into(),
            extra_read_only: vec!["/var".into(), "/srv".into()],
            masks: vec![
                ("/home/alice/.ssh".into(), NodeKind::Dir),
                ("/home/alice/.bash_history".into(), NodeKind::File),
            ],
        }
    }

    #[test]
    fn learning_shows_the_home_through_a_throwaway_layer() {
        let view = FsView::learn_view(&host(), &opts(vec![]), &learn());
        assert!(view.ops.contains(&MountOp::Overlay {
            lower: "/home/alice".into(),
            dst: "/home/alice".into(),
            size: 1 << 29,
            owner: Some((1000, 1000)),
        }));
        // The overlay replaces the empty home, it is not stacked on one.
        assert!(
            !view.ops.iter().any(
                |op| matches!(op, MountOp::Tmpfs { dst, .. } if dst == Path::new("/home/alice"))
            )
        );
        for extra in ["/var", "/srv"] {
            assert!(view.ops.contains(&MountOp::Bind {
                src: extra.into(),
                dst: extra.into(),
                read_only: true,
                kind: NodeKind::Dir,
                dev: false,
            }));
        }
    }

    #[test]
    fn learning_orders_extras_before_private_places_and_masks_last() {
        let mut learn = learn();
        learn.extra_read_only.push("/srv/home".into());
        let mut o = opts(vec![ws("/src/p", "/home/alice/p", false)]);
        o.home = "/srv/home/alice".into();
        o.tmpfs = vec!["/home/alice/p/build".into()];
        learn.host_home = "/srv/home/alice".into();
        let view = FsView::learn_view(&host(), &o, &learn);
        let kinds: Vec<(&str, &Path)> = view
            .ops
            .iter()
            // /dev and /proc's hardening are the default view's, tested above.
            .filter(|op| {
                !op.dst().starts_with("/dev")
                    && (!op.dst().starts_with("/proc") || op.dst() == Path::new("/proc"))
            })
            .map(|op| {
                let kind = match op {
                    MountOp::Bind {
                        read_only: true, ..
                    } => "ro",
                    MountOp::Bind { .. } => "rw",
                    MountOp::Symlink { .. } => "link",
                    MountOp::Proc { .. } => "proc",
                    MountOp::Tmpfs { .. } => "tmpfs",
                    MountOp::Overlay { .. } => "overlay",
                    MountOp::Mask { .. } => "mask",
                    _ => "other",
                };
                (kind, op.dst())
            })
            .collect();
        let p = Path::new;
        assert_eq!(
            kinds,
            [
                ("ro", p("/usr")),
                ("link", p("/bin")),
                ("ro", p("/etc")),
                // Extras parent-first: /srv before /srv/home, both before the home.
                ("ro", p("/var")),
                ("ro", p("/srv")),
                ("ro", p("/srv/home")),
                ("proc", p("/proc")),
                ("tmpfs", p("/tmp")),
                ("overlay", p("/srv/home/alice")),
                ("rw", p("/home/alice/p")),
                ("tmpfs", p("/home/alice/p/build")),
                ("mask", p("/etc/shadow")),
                ("mask", p("/etc/sudoers.d")),
                ("mask", p("/home/alice/.ssh")),
                ("mask", p("/home/alice/.bash_history")),
            ]
        );
        assert_eq!(
            view.ops.last(),
            Some(&MountOp::Mask {
                dst: "/home/alice/.bash_history".into(),
                kind: NodeKind::File
            })
        );
    }

    #[test]
    fn learning_keeps_the_rest_of_the_default_view() {
        let default = FsView::default_view(&host(), &opts(vec![]));
        let learning = FsView::learn_view(&host(), &opts(vec![]), &learn());
        // Everything but the home and the additions is the same, in the same order.
        let strip = |ops: &[MountOp]| -> Vec<MountOp> {
            ops.iter()
                .filter(|op| {
                    !op.dst().starts_with("/home/alice")
                        && !op.dst().starts_with("/var")
                        && !op.dst().starts_with("/srv")
                })
                .cloned()
                .collect()
        };
        assert_eq!(strip(&default.ops), strip(&learning.ops));
    }

    #[test]
    fn learning_with_the_home_in_tmp_adds_no_overlay() {
        let mut o = opts(vec![]);
        o.home = "/tmp".into();
        let view = FsView::learn_view(&host(), &o, &learn());
        assert!(
            !view
                .ops
                .iter()
                .any(|op| matches!(op, MountOp::Overlay { .. }))
        );
    }

    #[test]
    fn landlock_and_writable_places_of_the_learning_view() {
        let view = FsView::learn_view(&host(), &opts(vec![]), &learn());
        let rules = view.landlock_rules();
        assert_eq!(rules.access_of("/home/alice"), Some(Access::ReadWrite));
        assert_eq!(rules.access_of("/var"), Some(Access::ReadExec));
        assert_eq!(rules.access_of("/srv"), Some(Access::ReadExec));
        // Masks take no rule: the mounted node refuses by itself.
        assert_eq!(rules.access_of("/home/alice/.ssh"), None);
        assert_eq!(rules.access_of("/root"), None);
        let mut w = view.writable_targets();
        w.sort();
        assert_eq!(
            w,
            [
                Path::new("/dev/shm"),
                Path::new("/home/alice"),
                Path::new("/tmp")
            ]
        );
    }
}
