//! Why the kernel refused a file access, predicted from the view, for `violation`
//! events and the end-of-run summary.
//!
//! The kernel enforces the view on its own; this only explains a refusal after the
//! fact, from the [`FsView`] the sandbox was built from and two existence checks the
//! caller answers ([`Probe`]). Three causes are told apart ([`Layer`]): a secret the
//! view masks, a host path the view does not show (a private tmpfs or the empty root
//! in its place), and a change to a read-only place. Anything else (a path missing on
//! the host too, a permission the host itself refuses) is not the view's doing and
//! yields `None`.
//!
//! Which mount shows a path is decided as the kernel would: of the operations whose
//! `dst` is the path or one of its parents, the last one applied, since a mount hides
//! everything mounted earlier at or beneath its place. In the views built here
//! (parents first, masks last) that is also the deepest one.

use std::path::{Component, Path, PathBuf};

use crate::paths::{is_within, normalize_absolute};
use crate::view::{FsView, MountOp};

/// What an access tried to do to a path: for violations, and for what learning saw
/// (`vg_learn` uses the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Access {
    /// Open for reading, list, execute.
    Read,
    /// Open an existing file for writing (or truncate it).
    Write,
    /// Create a file, directory, link or node at the path (or rename one to it).
    Create,
    /// Remove the path (or rename it away).
    Remove,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Create => "create",
            Self::Remove => "remove",
        }
    }

    /// Whether it writes, creates or removes.
    pub fn writes(self) -> bool {
        !matches!(self, Self::Read)
    }
}

/// The part of the view that refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// The path exists on the host, but the view shows something else in its place.
    View,
    /// A change under a place the view keeps read-only.
    ReadOnly,
    /// The path is (under) a secret the view masks.
    Masked,
}

impl Layer {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::View => "view",
            Self::ReadOnly => "read-only",
            Self::Masked => "masked",
        }
    }
}

/// Why an access was refused: the layer, the place in the view responsible (a
/// mount's `dst`, `/` for the sandbox's root) and a sentence for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub layer: Layer,
    pub covered_by: PathBuf,
    pub reason: String,
}

/// Existence checks the caller answers: inside the sandbox (e.g. through its root)
/// and on the host, for the same absolute path.
pub trait Probe {
    fn exists_inside(&self, p: &Path) -> bool;
    fn exists_on_host(&self, p: &Path) -> bool;
}

/// How many of the view's own symlinks a path may go through (as the kernel's 40).
const MAX_LINKS: usize = 40;

/// Why the view refused `access` to `path` (an absolute path inside the sandbox), or
/// `None` when the view is not the cause (or `path` is relative or has `..`, whose
/// meaning depends on links the view does not know).
pub fn refusal(view: &FsView, path: &Path, access: Access, probe: &dyn Probe) -> Option<Refusal> {
    // Creating or removing a view's link acts on the link itself, not on its target.
    let follow_last = !matches!(access, Access::Create | Access::Remove);
    let path = through_links(view, &normalize_absolute(path)?, follow_last)?;
    let cover = cover(view, &path);

    if let Some((_, MountOp::Mask { dst, .. })) = cover {
        return Some(Refusal {
            layer: Layer::Masked,
            covered_by: dst.clone(),
            reason: format!("{} is a secret the sandbox's view masks", dst.display()),
        });
    }

    // What must exist for the access to get past path lookup: the path itself, or
    // for a creation its directory.
    let needed = match (access, path.parent()) {
        (Access::Create, Some(parent)) => parent.to_path_buf(),
        _ => path.clone(),
    };
    if !probe.exists_inside(&needed) {
        let needed_cover = cover_of_existing(view, &needed);
        return (probe.exists_on_host(&needed) && hides(needed_cover, &needed)).then(|| {
            let (covered_by, what) = describe(needed_cover);
            Refusal {
                layer: Layer::View,
                covered_by,
                reason: format!(
                    "{} exists on the host but not in the sandbox: {what}",
                    needed.display()
                ),
            }
        });
    }

    if access.writes() {
        read_only(view, cover, &path, access)
    } else {
        None
    }
}

/// [`refusal`] for an `open` with `O_CREAT` (or `creat`) of `path`, with what the call
/// amounted to: such an open follows a trailing symlink, then opens what exists for
/// writing ([`Access::Write`], e.g. `> /dev/null`) or creates what does not
/// ([`Access::Create`]). (With `O_EXCL` an existing path fails with `EEXIST` instead,
/// changing nothing; the caller does not know the flags, so that counts as a write.)
pub fn open_create_refusal(
    view: &FsView,
    path: &Path,
    probe: &dyn Probe,
) -> (Access, Option<Refusal>) {
    let Some(followed) = normalize_absolute(path).and_then(|p| through_links(view, &p, true))
    else {
        return (Access::Create, None);
    };
    let access = if probe.exists_inside(&followed) {
        Access::Write
    } else {
        Access::Create
    };
    (access, refusal(view, &followed, access, probe))
}

/// The mount that shows `path`: the last mount operation at `path` or a parent of it;
/// `None` is the sandbox's own root (no operation covers it).
fn cover<'a>(view: &'a FsView, path: &Path) -> Option<(usize, &'a MountOp)> {
    view.ops
        .iter()
        .enumerate()
        .rev()
        .find(|(_, op)| is_mount(op) && is_within(path, op.dst()))
}

/// [`cover`], without its index.
fn cover_of_existing<'a>(view: &'a FsView, path: &Path) -> Option<&'a MountOp> {
    cover(view, path).map(|(_, op)| op)
}

/// Operations that put a file system at their place (and so hide what was there).
/// A symlink is a file on another mount; `ReadOnly` remounts what is there already.
fn is_mount(op: &MountOp) -> bool {
    !matches!(op, MountOp::Symlink { .. } | MountOp::ReadOnly { .. })
}

/// Whether a path that exists on the host but not inside is missing because of
/// `cover`: true unless the cover shows that very host location (then the path went
/// away, or was removed in the sandbox's throwaway layer), is an image (whose files
/// have nothing to do with the host's) or is the sandbox's own `/proc`.
fn hides(cover: Option<&MountOp>, path: &Path) -> bool {
    match cover {
        Some(MountOp::Bind { src, dst, .. }) => !same_place(src, dst, path),
        Some(MountOp::Overlay { lower, dst, .. }) => !same_place(lower, dst, path),
        Some(MountOp::ImageRoot { .. }) => false,
        // The sandbox's own procfs: its entries are the sandbox's processes, not a
        // view of the host's (whose `/proc/self` is the supervisor).
        Some(MountOp::Proc { .. }) => false,
        _ => true,
    }
}

/// Whether `path`, shown from host `src` at `dst`, is the host's own `path`.
fn same_place(src: &Path, dst: &Path, path: &Path) -> bool {
    path.strip_prefix(dst)
        .is_ok_and(|rest| src.join(rest) == path)
}

/// A change under `cover` at `path`, if the view keeps it read-only.
fn read_only(
    view: &FsView,
    cover: Option<(usize, &MountOp)>,
    path: &Path,
    access: Access,
) -> Option<Refusal> {
    let refuse = |covered_by: &Path, why: String| {
        Some(Refusal {
            layer: Layer::ReadOnly,
            covered_by: covered_by.to_path_buf(),
            reason: format!(
                "{} is read-only in the sandbox: {why}",
                covered_by.display()
            ),
        })
    };
    // A `ReadOnly` operation applies to what was mounted before it, at or beneath it.
    let after = cover.map_or(0, |(i, _)| i + 1);
    if let Some(dst) = view.ops[after..].iter().find_map(|op| match op {
        MountOp::ReadOnly { dst } if is_within(path, dst) => Some(dst),
        _ => None,
    }) {
        return refuse(dst, "the view keeps this part of /proc read-only".into());
    }
    let structural = matches!(access, Access::Create | Access::Remove);
    match cover.map(|(_, op)| op) {
        None => refuse(
            Path::new("/"),
            "the sandbox's root holds only the view's mount points".into(),
        ),
        Some(MountOp::Bind {
            src,
            dst,
            read_only: true,
            ..
        }) => refuse(dst, format!("a read-only view of host {}", src.display())),
        Some(MountOp::Bind { dst, dev: true, .. } | MountOp::Devpts { dst, .. }) if structural => {
            refuse(dst, "device nodes cannot be created or removed".into())
        }
        Some(MountOp::Tmpfs { dst, .. }) if structural && dst == Path::new("/dev") => refuse(
            dst,
            "the sandbox's /dev holds only the view's device nodes".into(),
        ),
        _ => None,
    }
}

/// The place a cover stands for, and what it is, for a reason sentence.
fn describe(cover: Option<&MountOp>) -> (PathBuf, String) {
    let Some(op) = cover else {
        return (
            "/".into(),
            "the view does not show this part of the host".into(),
        );
    };
    let dst = op.dst().to_path_buf();
    let what = match op {
        MountOp::Tmpfs { dst, .. } if dst == Path::new("/dev") => {
            "the sandbox's /dev holds only the view's device nodes".into()
        }
        MountOp::Tmpfs { dst, .. } => {
            format!("{} is a private, initially empty tmpfs", dst.display())
        }
        MountOp::Bind { src, dst, .. } => {
            format!("{} shows host {} instead", dst.display(), src.display())
        }
        MountOp::Overlay { lower, dst, .. } => {
            format!("{} shows host {} instead", dst.display(), lower.display())
        }
        MountOp::Proc { dst } => format!("{} is the sandbox's own procfs", dst.display()),
        MountOp::Devpts { dst, .. } => {
            format!("{} holds the sandbox's own terminals", dst.display())
        }
        MountOp::ImageRoot { .. } => "the root is the image".into(),
        MountOp::Mask { dst, .. } => format!("{} is masked", dst.display()),
        MountOp::Symlink { dst, .. } | MountOp::ReadOnly { dst } => {
            format!("{} is part of the view", dst.display())
        }
    };
    (dst, what)
}

/// `path` with the view's own symlinks (such as `/bin -> usr/bin` or `/dev/fd`)
/// replaced by their targets, the last component only when `follow_last`; `None` past
/// [`MAX_LINKS`]. Links inside bound host directories are the host's and are not
/// known here: the caller passes paths resolved by the kernel.
fn through_links(view: &FsView, path: &Path, follow_last: bool) -> Option<PathBuf> {
    let mut path = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        let link = view.ops.iter().enumerate().find_map(|(i, op)| match op {
            MountOp::Symlink { target, dst }
                if is_within(&path, dst)
                    && (follow_last || path != *dst)
                    && !hidden_later(view, i, dst) =>
            {
                Some((dst, target))
            }
            _ => None,
        });
        let Some((dst, target)) = link else {
            return Some(path);
        };
        let rest = path.strip_prefix(dst).ok()?;
        let base = if target.is_absolute() {
            target.clone()
        } else {
            dst.parent()?.join(target)
        };
        path = lexical(&base.join(rest));
    }
    None
}

/// Whether a mount made after operation `i` covers `dst` (so the link made there by
/// operation `i` is no longer seen).
fn hidden_later(view: &FsView, i: usize, dst: &Path) -> bool {
    view.ops[i + 1..]
        .iter()
        .any(|op| is_mount(op) && is_within(dst, op.dst()))
}

/// `..` and `.` removed lexically: right for the view's own links, which live on the
/// sandbox's tmpfs and point at places the view defines.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::{LearnView, NodeKind, ResolvedMount, ViewOptions};

    /// Paths that exist, and every parent of them.
    struct Fake {
        inside: Vec<&'static str>,
        host: Vec<&'static str>,
    }

    fn exists(list: &[&str], p: &Path) -> bool {
        list.iter().any(|e| Path::new(e).starts_with(p))
    }

    impl Probe for Fake {
        fn exists_inside(&self, p: &Path) -> bool {
            exists(&self.inside, p)
        }
        fn exists_on_host(&self, p: &Path) -> bool {
            exists(&self.host, p)
        }
    }

    use crate::view::tests::host;

    fn opts() -> ViewOptions {
        ViewOptions {
            mounts: vec![ResolvedMount {
                host: "/home/alice/p".into(),
                container: "/home/alice/p".into(),
                read_only: false,
                kind: NodeKind::Dir,
            }],
            home: "/home/alice".into(),
            uid: 1000,
            gid: 1000,
            tmp_size: 1 << 30,
            home_size: 1 << 29,
            ptys: 8,
            tmpfs: Vec::new(),
        }
    }

    fn default_view() -> FsView {
        FsView::default_view(&host(), &opts())
    }

    fn learn_view() -> FsView {
        FsView::learn_view(
            &host(),
            &opts(),
            &LearnView {
                host_home: "/home/alice".into(),
                extra_read_only: vec!["/var".into()],
                masks: vec![
                    ("/home/alice/.ssh".into(), NodeKind::Dir),
                    ("/home/alice/.bash_history".into(), NodeKind::File),
                ],
            },
        )
    }

    /// What an ordinary host has, and what the sandbox with `view` shows of it.
    fn probe() -> Fake {
        Fake {
            inside: vec![
                "/bin",
                "/usr/bin/ls",
                "/etc/passwd",
                "/etc/shadow",
                "/home/alice/p/src/main.rs",
                "/tmp",
                "/proc/sys/kernel/hostname",
                "/proc/self/status",
                "/dev/null",
                "/dev/pts/ptmx",
            ],
            host: vec![
                "/bin",
                "/usr/bin/ls",
                "/etc/passwd",
                "/etc/shadow",
                "/etc/sudoers.d/admins",
                "/home/alice/p/src/main.rs",
                "/home/alice/.ssh/id_rsa",
                "/home/alice/.cache/tool/blob",
                "/root/x",
                "/var/lib/x",
                "/tmp/.X11-unix/X0",
                "/dev/null",
                "/dev/sda",
            ],
        }
    }

    /// The learning view shows the home's and /var's host files through.
    fn learn_probe() -> Fake {
        let mut p = probe();
        p.inside.extend([
            "/home/alice/.ssh/id_rsa",
            "/home/alice/.config/tool/config.toml",
            "/var/lib/x",
        ]);
        p.host.extend(["/home/alice/.config/tool/config.toml"]);
        p
    }

    fn check(view: &FsView, probe: &Fake, path: &str, access: Access) -> Option<(Layer, PathBuf)> {
        refusal(view, Path::new(path), access, probe).map(|r| {
            assert!(
                r.reason.contains(r.covered_by.to_str().unwrap_or_default()),
                "{r:?}"
            );
            (r.layer, r.covered_by)
        })
    }

    fn refused(layer: Layer, at: &str) -> Option<(Layer, PathBuf)> {
        Some((layer, at.into()))
    }

    #[test]
    fn the_workspace_refuses_nothing() {
        let (view, probe) = (default_view(), probe());
        for access in [Access::Read, Access::Write, Access::Remove] {
            assert_eq!(
                check(&view, &probe, "/home/alice/p/src/main.rs", access),
                None
            );
        }
        assert_eq!(
            check(&view, &probe, "/home/alice/p/src/new.rs", Access::Create),
            None
        );
    }

    #[test]
    fn secrets_are_masked_for_every_access() {
        let (view, probe) = (default_view(), probe());
        for access in [Access::Read, Access::Write, Access::Create, Access::Remove] {
            assert_eq!(
                check(&view, &probe, "/etc/shadow", access),
                refused(Layer::Masked, "/etc/shadow")
            );
        }
        // Beneath a masked directory too, whether or not it exists anywhere.
        assert_eq!(
            check(&view, &probe, "/etc/sudoers.d/admins", Access::Read),
            refused(Layer::Masked, "/etc/sudoers.d")
        );
        let r = refusal(&view, Path::new("/etc/shadow"), Access::Read, &probe).unwrap();
        assert_eq!(r.reason, "/etc/shadow is a secret the sandbox's view masks");
        // /proc's leaky files are masks as well.
        assert_eq!(
            check(&view, &probe, "/proc/kcore", Access::Read),
            refused(Layer::Masked, "/proc/kcore")
        );
    }

    #[test]
    fn system_directories_are_read_only() {
        let (view, probe) = (default_view(), probe());
        assert_eq!(check(&view, &probe, "/usr/bin/ls", Access::Read), None);
        for access in [Access::Write, Access::Remove, Access::Create] {
            assert_eq!(
                check(&view, &probe, "/usr/bin/ls", access),
                refused(Layer::ReadOnly, "/usr")
            );
        }
        assert_eq!(
            check(&view, &probe, "/usr/bin/x", Access::Create),
            refused(Layer::ReadOnly, "/usr")
        );
        let r = refusal(&view, Path::new("/usr/bin/x"), Access::Create, &probe).unwrap();
        assert_eq!(
            r.reason,
            "/usr is read-only in the sandbox: a read-only view of host /usr"
        );
        // Writing a file that exists nowhere is a plain ENOENT.
        assert_eq!(check(&view, &probe, "/usr/bin/x", Access::Write), None);
        // Through the view's own /bin -> usr/bin link.
        assert_eq!(
            check(&view, &probe, "/bin/x", Access::Create),
            refused(Layer::ReadOnly, "/usr")
        );
        // Removing the link itself: it lives on the read-only root.
        assert_eq!(
            check(&view, &probe, "/bin", Access::Remove),
            refused(Layer::ReadOnly, "/")
        );
    }

    #[test]
    fn the_root_and_procs_knobs_are_read_only() {
        let (view, probe) = (default_view(), probe());
        assert_eq!(
            check(&view, &probe, "/newdir", Access::Create),
            refused(Layer::ReadOnly, "/")
        );
        assert_eq!(
            check(&view, &probe, "/proc/sys/kernel/hostname", Access::Write),
            refused(Layer::ReadOnly, "/proc/sys")
        );
        assert_eq!(
            check(&view, &probe, "/proc/sys/kernel/hostname", Access::Read),
            None
        );
        assert_eq!(
            check(&view, &probe, "/proc/self/status", Access::Write),
            None
        );
    }

    #[test]
    fn devices_are_written_not_made() {
        let (view, probe) = (default_view(), probe());
        assert_eq!(check(&view, &probe, "/dev/null", Access::Write), None);
        assert_eq!(
            check(&view, &probe, "/dev/null", Access::Remove),
            refused(Layer::ReadOnly, "/dev/null")
        );
        assert_eq!(
            check(&view, &probe, "/dev/foo", Access::Create),
            refused(Layer::ReadOnly, "/dev")
        );
        assert_eq!(
            check(&view, &probe, "/dev/pts/7", Access::Create),
            refused(Layer::ReadOnly, "/dev/pts")
        );
        // A host device the minimal /dev leaves out.
        assert_eq!(
            check(&view, &probe, "/dev/sda", Access::Read),
            refused(Layer::View, "/dev")
        );
    }

    #[test]
    fn a_private_home_hides_the_hosts_files() {
        let (view, probe) = (default_view(), probe());
        assert_eq!(
            check(&view, &probe, "/home/alice/.ssh/id_rsa", Access::Read),
            refused(Layer::View, "/home/alice")
        );
        let r = refusal(
            &view,
            Path::new("/home/alice/.ssh/id_rsa"),
            Access::Read,
            &probe,
        )
        .unwrap();
        assert_eq!(
            r.reason,
            "/home/alice/.ssh/id_rsa exists on the host but not in the sandbox: /home/alice is a private, initially empty tmpfs"
        );
        // Creating in a folder the host has and the private home lacks.
        assert_eq!(
            check(&view, &probe, "/home/alice/.cache/tool/new", Access::Create),
            refused(Layer::View, "/home/alice")
        );
        // Creating where the folder exists inside: fine, whatever the host has there.
        assert_eq!(
            check(&view, &probe, "/home/alice/.bashrc", Access::Create),
            None
        );
        // Missing on both sides: a plain ENOENT.
        assert_eq!(
            check(&view, &probe, "/home/alice/nothing", Access::Read),
            None
        );
    }

    #[test]
    fn places_only_the_empty_root_covers_are_hidden() {
        let (view, probe) = (default_view(), probe());
        for path in ["/root/x", "/var/lib/x"] {
            assert_eq!(
                check(&view, &probe, path, Access::Read),
                refused(Layer::View, "/")
            );
        }
        assert_eq!(check(&view, &probe, "/nowhere/x", Access::Read), None);
    }

    #[test]
    fn the_private_tmp() {
        let (view, probe) = (default_view(), probe());
        // Missing here and on the host: a plain ENOENT.
        assert_eq!(check(&view, &probe, "/tmp/missing", Access::Read), None);
        assert_eq!(check(&view, &probe, "/tmp/missing", Access::Write), None);
        assert_eq!(check(&view, &probe, "/tmp/new", Access::Create), None);
        // The host's /tmp is not shown.
        assert_eq!(
            check(&view, &probe, "/tmp/.X11-unix/X0", Access::Read),
            refused(Layer::View, "/tmp")
        );
    }

    #[test]
    fn learning_hides_nothing_in_the_home_but_the_masks() {
        let (view, probe) = (learn_view(), learn_probe());
        assert_eq!(
            check(&view, &probe, "/home/alice/.ssh/id_rsa", Access::Read),
            refused(Layer::Masked, "/home/alice/.ssh")
        );
        assert_eq!(
            check(&view, &probe, "/home/alice/.bash_history", Access::Write),
            refused(Layer::Masked, "/home/alice/.bash_history")
        );
        for access in [Access::Read, Access::Write, Access::Remove] {
            assert_eq!(
                check(
                    &view,
                    &probe,
                    "/home/alice/.config/tool/config.toml",
                    access
                ),
                None
            );
        }
        assert_eq!(
            check(
                &view,
                &probe,
                "/home/alice/.local/state/new",
                Access::Create
            ),
            None
        );
        // On the host but gone inside: the command removed it in its layer.
        assert_eq!(
            check(&view, &probe, "/home/alice/.cache/tool/blob", Access::Read),
            None
        );
        // The extra host directories are shown, read-only.
        assert_eq!(check(&view, &probe, "/var/lib/x", Access::Read), None);
        assert_eq!(
            check(&view, &probe, "/var/lib/x", Access::Write),
            refused(Layer::ReadOnly, "/var")
        );
        // What the learning view does not show is still hidden.
        assert_eq!(
            check(&view, &probe, "/root/x", Access::Read),
            refused(Layer::View, "/")
        );
        assert_eq!(
            check(&view, &probe, "/etc/shadow", Access::Read),
            refused(Layer::Masked, "/etc/shadow")
        );
    }

    #[test]
    fn the_last_mount_over_a_path_decides() {
        let bind = |src: &str, dst: &str, read_only| MountOp::Bind {
            src: src.into(),
            dst: dst.into(),
            read_only,
            kind: NodeKind::Dir,
            dev: false,
        };
        let tmpfs = |dst: &str| MountOp::Tmpfs {
            dst: dst.into(),
            size: 1 << 20,
            mode: 0o700,
            owner: None,
        };
        let view = FsView {
            ops: vec![
                bind("/w/deep", "/w/deep", false),
                // Mounted after, at a parent: hides the bind beneath it.
                tmpfs("/w"),
                MountOp::ReadOnly { dst: "/a".into() },
                // Mounted after the ReadOnly: writable.
                tmpfs("/a"),
                bind("/host/src", "/src", false),
            ],
        };
        let probe = Fake {
            inside: vec!["/a/f", "/src/f"],
            host: vec!["/w/deep/f", "/src/g", "/host/src/f"],
        };
        assert_eq!(
            check(&view, &probe, "/w/deep/f", Access::Read),
            refused(Layer::View, "/w")
        );
        assert_eq!(check(&view, &probe, "/a/f", Access::Write), None);
        // The same host place shown at the same path: gone from the host meanwhile,
        // not hidden. A different host place: the host's own /src/g is hidden.
        let same = FsView {
            ops: vec![bind("/src", "/src", false)],
        };
        assert_eq!(check(&same, &probe, "/src/g", Access::Read), None);
        assert_eq!(
            check(&view, &probe, "/src/g", Access::Read),
            refused(Layer::View, "/src")
        );
    }

    #[test]
    fn an_image_hides_nothing_of_the_host() {
        let view = FsView::image_view(Path::new("/store/img"), &opts());
        let probe = probe();
        assert_eq!(check(&view, &probe, "/root/x", Access::Read), None);
        assert_eq!(check(&view, &probe, "/newdir", Access::Create), None);
    }

    #[test]
    fn paths_that_cannot_be_placed_are_not_judged() {
        let (view, probe) = (default_view(), probe());
        assert_eq!(check(&view, &probe, "etc/shadow", Access::Read), None);
        assert_eq!(
            check(&view, &probe, "/tmp/../etc/shadow", Access::Read),
            None
        );
        // Redundant separators and `.` are fine.
        assert_eq!(
            check(&view, &probe, "//etc/./shadow", Access::Read),
            refused(Layer::Masked, "/etc/shadow")
        );
    }

    #[test]
    fn the_views_links_are_followed_where_they_point() {
        let (view, probe) = (default_view(), probe());
        // /dev/core -> /proc/kcore, masked.
        assert_eq!(
            check(&view, &probe, "/dev/core", Access::Read),
            refused(Layer::Masked, "/proc/kcore")
        );
        // A loop of links is given up on.
        let looped = FsView {
            ops: vec![
                MountOp::Symlink {
                    target: "b".into(),
                    dst: "/a".into(),
                },
                MountOp::Symlink {
                    target: "a".into(),
                    dst: "/b".into(),
                },
            ],
        };
        assert_eq!(check(&looped, &probe, "/a/x", Access::Read), None);
    }

    #[test]
    fn an_open_that_may_create_writes_what_exists_through_links() {
        let (view, mut probe) = (default_view(), probe());
        let open = |probe: &Fake, path: &str| {
            let (access, refusal) = open_create_refusal(&view, Path::new(path), probe);
            (access, refusal.map(|r| (r.layer, r.covered_by)))
        };
        // `> /dev/null`: the node exists, it is opened for writing.
        assert_eq!(open(&probe, "/dev/null"), (Access::Write, None));
        // `> /dev/stdout`: the view's link is followed into the sandbox's own
        // /proc, which the supervisor cannot look at as the process would.
        assert_eq!(open(&probe, "/dev/stdout"), (Access::Create, None));
        assert_eq!(open(&probe, "/proc/self/fd/1"), (Access::Create, None));
        // A new file where the view is read-only, or an existing one there.
        assert_eq!(
            open(&probe, "/usr/bin/new"),
            (Access::Create, refused(Layer::ReadOnly, "/usr"))
        );
        assert_eq!(
            open(&probe, "/etc/passwd"),
            (Access::Write, refused(Layer::ReadOnly, "/etc"))
        );
        // A new node in /dev is refused.
        assert_eq!(
            open(&probe, "/dev/sdb"),
            (Access::Create, refused(Layer::ReadOnly, "/dev"))
        );
        // Below a hidden host folder.
        assert_eq!(open(&probe, "/root/x").1, refused(Layer::View, "/"));
        probe.inside.push("/home/alice/p/out");
        assert_eq!(open(&probe, "/home/alice/p/out"), (Access::Write, None));
    }

    #[test]
    fn the_sandboxs_own_proc_hides_nothing_of_the_hosts() {
        let (view, mut probe) = (default_view(), probe());
        // The host's /proc/self/fd (the supervisor's) is not the process's, nor is
        // a host process that the sandbox's pid namespace does not hold.
        probe.host.extend(["/proc/self/fd/1", "/proc/4242/status"]);
        assert_eq!(check(&view, &probe, "/proc/self/fd/1", Access::Read), None);
        assert_eq!(
            check(&view, &probe, "/proc/self/fd/1", Access::Create),
            None
        );
        assert_eq!(
            check(&view, &probe, "/proc/4242/status", Access::Read),
            None
        );
        let (_, refusal) = open_create_refusal(&view, Path::new("/dev/stdout"), &probe);
        assert_eq!(refusal, None);
    }
}
