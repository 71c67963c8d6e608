//! Builds the sandbox's root filesystem from a [`FsView`] and switches to it with
//! `pivot_root`.
//!
//! Every bind source is opened once, before anything is mounted, with
//! `RESOLVE_NO_SYMLINKS` (the supervisor has already checked that the path it names is
//! the real path, so a symlink swapped in since is refused). Every mount target is
//! resolved with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` beneath the new root,
//! so a symlink planted in a workspace cannot redirect a mount.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use vg_policy::view::{MountOp, NodeKind};

use crate::error::SetupError;
use crate::sys;

/// A mount operation together with its pre-opened source, when it has one.
#[derive(Debug)]
struct PreparedOp {
    pub op: MountOp,
    pub source: Option<OwnedFd>,
}

/// Opens the host side of every bind and overlay in the view, checking it is what the
/// view says.
/// Runs in the sandbox's mount namespace: a descriptor opened in another namespace
/// cannot be cloned with `open_tree`.
fn prepare(ops: &[MountOp]) -> Result<Vec<PreparedOp>, SetupError> {
    ops.iter()
        .map(|op| {
            let source = match op {
                MountOp::Bind { src, kind, .. } => Some(open_source(src, *kind)?),
                MountOp::Overlay { lower, .. } => Some(open_source(lower, NodeKind::Dir)?),
                _ => None,
            };
            Ok(PreparedOp {
                op: op.clone(),
                source,
            })
        })
        .collect()
}

fn open_source(src: &Path, kind: NodeKind) -> Result<OwnedFd, SetupError> {
    let fail = |e: io::Error| SetupError::MountSource {
        path: src.to_path_buf(),
        source: e,
    };
    let dir = std::fs::File::open("/").map_err(fail)?;
    let rel: PathBuf = src
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect();
    let fd = sys::openat2(
        dir.as_fd(),
        &cstr(&rel)?,
        libc::O_PATH | libc::O_NOFOLLOW,
        RESOLVE,
    )
    .map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) => fail(std::io::Error::other(
            "it now resolves through a symlink; name the real path",
        )),
        _ => fail(e),
    })?;
    let st = sys::fstat(fd.as_fd()).map_err(fail)?;
    // O_PATH | O_NOFOLLOW opens a final symlink itself rather than refusing it.
    if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
        return Err(fail(io::Error::other(
            "it is now a symlink; name the real path",
        )));
    }
    let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
    if is_dir != (kind == NodeKind::Dir) {
        return Err(fail(io::Error::from_raw_os_error(if is_dir {
            libc::EISDIR
        } else {
            libc::ENOTDIR
        })));
    }
    Ok(fd)
}

fn cstr(path: &Path) -> Result<CString, SetupError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| SetupError::BadPath(path.to_path_buf()))
}

/// Where the new root is assembled before `pivot_root`. Mounting over it only affects
/// the sandbox's private mount namespace; bind sources are already open.
const STAGING: &str = "/tmp";

/// Opens the image directory of a view that starts with [`MountOp::ImageRoot`] by its
/// path (the sandbox user's own image store). Must happen before anything is mounted
/// at the staging directory, which could cover a store under /tmp.
fn open_image(lower: &Path) -> Result<OwnedFd, SetupError> {
    let fail = |source| SetupError::MountSource {
        path: lower.to_path_buf(),
        source,
    };
    let dir = std::fs::File::open("/").map_err(fail)?;
    let rel: PathBuf = lower
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect();
    sys::openat2(
        dir.as_fd(),
        &cstr(&rel)?,
        libc::O_PATH | libc::O_DIRECTORY,
        sys::RESOLVE_NO_MAGICLINKS,
    )
    .map_err(fail)
}

/// Builds the root filesystem and pivots into it. Must run in a fresh mount namespace.
/// `image`: for a view that starts with [`MountOp::ImageRoot`] in a run started as
/// root, the image directory as an idmapped mount made by the supervisor (see
/// `crate::idmap`); otherwise the image is opened by its path.
pub fn build_and_pivot(
    ops: &[MountOp],
    image: Option<&OwnedFd>,
    owner: (u32, u32),
) -> Result<(), SetupError> {
    let step = |what: &'static str| move |e: io::Error| SetupError::Mount { what, source: e };
    // Nothing we mount may propagate back to the host.
    sys::mount(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE, None)
        .map_err(step("make the host mounts private"))?;
    let ops = prepare(ops)?;
    // The node that masks files: host /dev/null, mounted nodev so opening it fails.
    let null = open_source(Path::new("/dev/null"), NodeKind::File)?;

    let image_lower = match (ops.first().map(|p| &p.op), image) {
        (Some(MountOp::ImageRoot { lower, size }), Some(fd)) => Some((
            lower,
            *size,
            Lower::Detached(fd.try_clone().map_err(step("duplicate the image"))?),
        )),
        (Some(MountOp::ImageRoot { lower, size }), None) => {
            Some((lower, *size, Lower::Dir(open_image(lower)?)))
        }
        _ => None,
    };
    let is_image = image_lower.is_some();
    let root = match image_lower {
        Some((lower, size, fd)) => image_root(lower, size, &fd, owner)?,
        None => {
            let root_mount = new_fs(
                c"tmpfs",
                &[(c"mode", Some(c"0755")), (c"size", Some(c"1m"))],
                sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
            )
            .map_err(step("create the root tmpfs"))?;
            let staging =
                std::fs::File::open(STAGING).map_err(step("open the staging directory /tmp"))?;
            sys::move_mount(root_mount.as_fd(), staging.as_fd())
                .map_err(step("attach the root tmpfs"))?;
            drop(staging);
            std::fs::File::open(STAGING).map_err(step("open the new root"))?
        }
    };

    for prepared in ops
        .iter()
        .filter(|p| !matches!(p.op, MountOp::ImageRoot { .. }))
    {
        apply(root.as_fd(), null.as_fd(), prepared)?;
    }

    sys::fchdir(root.as_fd()).map_err(step("enter the new root"))?;
    // pivot_root(".", ".") stacks the old root on top of the new one; detaching it
    // leaves only the new root, without needing a directory to park the old one in.
    sys::pivot_root(c".", c".").map_err(step("pivot_root"))?;
    sys::umount2(c".", libc::MNT_DETACH).map_err(step("detach the host root"))?;
    std::env::set_current_dir("/").map_err(step("chdir to the new root"))?;
    let new_root = std::fs::File::open("/").map_err(step("open /"))?;
    // An image's root keeps its ephemeral writable layer; the plain root only holds
    // mount points and becomes read-only.
    let attrs = if is_image {
        sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV
    } else {
        sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV
    };
    sys::mount_setattr(new_root.as_fd(), false, attrs).map_err(step("seal /"))?;
    Ok(())
}

/// The root for an image: an overlay with the unpacked image (`lower`, read-only, never
/// written) below and, above, a directory on a fresh tmpfs of `size` bytes that takes
/// every change and disappears with the sandbox.
/// The image directory, as the overlay's lower layer gets it.
enum Lower {
    /// Opened by path in our mount namespace.
    Dir(OwnedFd),
    /// A detached mount from the supervisor (idmapped): it must be attached in our
    /// mount namespace before overlayfs, mounted in our user namespace, may use it.
    Detached(OwnedFd),
}

fn image_root(
    lower: &Path,
    size: u64,
    lower_fd: &Lower,
    owner: (u32, u32),
) -> Result<std::fs::File, SetupError> {
    let step = |what: &'static str| move |e: io::Error| SetupError::Mount { what, source: e };
    let size = CString::new(size.to_string()).map_err(|_| SetupError::BadPath(lower.into()))?;
    let scratch = new_fs(
        c"tmpfs",
        &[(c"mode", Some(c"0755")), (c"size", Some(&size))],
        sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
    )
    .map_err(step("create the image's writable layer (tmpfs)"))?;
    let staging = std::fs::File::open(STAGING).map_err(step("open the staging directory /tmp"))?;
    sys::move_mount(scratch.as_fd(), staging.as_fd())
        .map_err(step("attach the image's writable layer"))?;
    drop(staging);
    let scratch = std::fs::File::open(STAGING).map_err(step("open the writable layer"))?;
    for (dir, mode) in [
        (c"upper", 0o755),
        (c"work", 0o700),
        (c"root", 0o755),
        (c"lower", 0o755),
    ] {
        sys::mkdirat(scratch.as_fd(), dir, mode).map_err(step("prepare the writable layer"))?;
    }
    // The image was opened before the writable layer was mounted (which may cover its
    // path, for a store under /tmp): the overlay reaches it through the descriptor.
    let lower_path = match lower_fd {
        Lower::Dir(fd) => PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())),
        Lower::Detached(fd) => {
            let at = sys::openat2(
                scratch.as_fd(),
                c"lower",
                libc::O_PATH | libc::O_NOFOLLOW,
                RESOLVE,
            )
            .map_err(step("open the image's mount point"))?;
            sys::move_mount(fd.as_fd(), at.as_fd()).map_err(step("attach the image"))?;
            PathBuf::from("/tmp/lower")
        }
    };
    // The merged tree's root directory takes the upper directory's owner: the image's
    // user (root inside, the unprivileged user outside) owns "/" as in the image.
    sys::fchownat(scratch.as_fd(), c"upper", owner.0, owner.1)
        .map_err(step("give the writable layer to the sandbox user"))?;
    let lower_c = cstr(&lower_path)?;
    let overlay =
        overlay_fs(&lower_c, c"/tmp/upper", c"/tmp/work").map_err(|e| SetupError::MountSource {
            path: lower.to_path_buf(),
            source: io::Error::new(
                e.kind(),
                format!("cannot mount the image as an overlay: {e}"),
            ),
        })?;
    let target = sys::openat2(
        scratch.as_fd(),
        c"root",
        libc::O_PATH | libc::O_NOFOLLOW,
        RESOLVE,
    )
    .map_err(step("open the image's mount point"))?;
    sys::move_mount(overlay.as_fd(), target.as_fd()).map_err(step("attach the image root"))?;
    std::fs::File::open("/tmp/root").map_err(step("open the image root"))
}

/// A detached overlay mount: `lower` read-only below, changes in `upper` (with `work`
/// on the same file system). `userxattr` keeps overlayfs's bookkeeping in `user.*`
/// extended attributes, the only ones a user namespace may set.
fn overlay_fs(lower: &CStr, upper: &CStr, work: &CStr) -> io::Result<OwnedFd> {
    let mount = |key: &CStr| {
        new_fs(
            c"overlay",
            &[
                (key, Some(lower)),
                (c"upperdir", Some(upper)),
                (c"workdir", Some(work)),
                (c"userxattr", None),
            ],
            sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
        )
    };
    // `lowerdir+` (Linux 6.8) takes one path as is; plain `lowerdir` for older
    // kernels (our /proc paths have no ':' or ',' for it to split on).
    mount(c"lowerdir+").or_else(|_| mount(c"lowerdir"))
}

/// A detached tmpfs of `size` bytes whose root has `mode` (and `owner`, if given).
fn new_tmpfs(size: u64, mode: u32, owner: Option<(u32, u32)>) -> io::Result<OwnedFd> {
    let number =
        |n: String| CString::new(n).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL));
    // Inodes cost kernel memory that `size` does not count: one per KiB of size (at
    // least 1024), so that empty files cannot fill the memory.
    let mut opts: Vec<(&CStr, CString)> = vec![
        (c"size", number(size.to_string())?),
        (c"mode", number(format!("{mode:o}"))?),
        (c"nr_inodes", number((size / 1024).max(1024).to_string())?),
    ];
    if let Some((uid, gid)) = owner {
        opts.push((c"uid", number(uid.to_string())?));
        opts.push((c"gid", number(gid.to_string())?));
    }
    let borrowed: Vec<_> = opts.iter().map(|(k, v)| (*k, Some(v.as_c_str()))).collect();
    new_fs(
        c"tmpfs",
        &borrowed,
        sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
    )
}

/// Shows the host directory `lower` (open as `lower_fd`) at `dst` under a writable
/// layer: a fresh tmpfs of `size` bytes is mounted at `dst` to hold the overlay's upper
/// and work directories, and the overlay is mounted over it. The tmpfs is then out of
/// reach (covered by the overlay, which holds its own reference) and disappears with
/// the sandbox; the host directory is only ever read.
fn overlay(
    root: BorrowedFd<'_>,
    dst: &Path,
    lower: &Path,
    lower_fd: BorrowedFd<'_>,
    size: u64,
    owner: Option<(u32, u32)>,
) -> Result<(), SetupError> {
    let fail = |step: &'static str| {
        move |source: io::Error| SetupError::Overlay {
            lower: lower.to_path_buf(),
            target: dst.to_path_buf(),
            step,
            source,
        }
    };
    // The merged root directory takes the upper directory's mode and owner: the host
    // directory's mode, the sandbox user's.
    let mode = sys::fstat(lower_fd)
        .map_err(fail("read the host directory's mode"))?
        .st_mode
        & 0o7777;
    let scratch = new_tmpfs(size, 0o700, None).map_err(fail("create its tmpfs"))?;
    let target = ensure_target(root, dst, NodeKind::Dir).map_err(fail("make its mount point"))?;
    sys::move_mount(scratch.as_fd(), target.as_fd()).map_err(fail("attach its tmpfs"))?;
    let layer = sys::openat2(
        scratch.as_fd(),
        c".",
        libc::O_RDONLY | libc::O_DIRECTORY,
        RESOLVE,
    )
    .map_err(fail("open its tmpfs"))?;
    let prepare = fail("prepare the upper and work directories");
    sys::mkdirat(layer.as_fd(), c"upper", 0o700).map_err(prepare)?;
    sys::mkdirat(layer.as_fd(), c"work", 0o700).map_err(prepare)?;
    let upper = std::fs::File::from(
        sys::openat2(
            layer.as_fd(),
            c"upper",
            libc::O_RDONLY | libc::O_DIRECTORY,
            RESOLVE,
        )
        .map_err(prepare)?,
    );
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::fchown(&upper, Some(uid), Some(gid)).map_err(prepare)?;
    }
    // After the chown, which clears set-id bits; an explicit mode, not the umask's.
    upper
        .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))
        .map_err(prepare)?;
    // Every layer by descriptor: no path is looked up again, and the lower directory
    // is the one opened (without symlinks) before anything was mounted.
    let fd_path = |fd: RawFd, rest: &str| cstr(Path::new(&format!("/proc/self/fd/{fd}{rest}")));
    let mnt = overlay_fs(
        &fd_path(lower_fd.as_raw_fd(), "")?,
        &fd_path(layer.as_raw_fd(), "/upper")?,
        &fd_path(layer.as_raw_fd(), "/work")?,
    )
    .map_err(fail(crate::error::OVERLAY_MOUNT))?;
    sys::move_mount(mnt.as_fd(), layer.as_fd()).map_err(fail("attach the overlay"))
}

fn new_fs(
    fstype: &std::ffi::CStr,
    options: &[(&std::ffi::CStr, Option<&std::ffi::CStr>)],
    attrs: u64,
) -> io::Result<OwnedFd> {
    let fs = sys::fsopen(fstype)?;
    for (key, value) in options {
        sys::fsconfig_set(fs.as_fd(), key, *value)?;
    }
    sys::fsconfig_create(fs.as_fd())?;
    sys::fsmount(fs.as_fd(), attrs)
}

fn apply(
    root: BorrowedFd<'_>,
    null: BorrowedFd<'_>,
    prepared: &PreparedOp,
) -> Result<(), SetupError> {
    let op = &prepared.op;
    let dst = op.dst();
    let fail = |e: io::Error| SetupError::MountOp {
        target: dst.to_path_buf(),
        source: e,
    };
    match op {
        // Built by `image_root` before anything else.
        MountOp::ImageRoot { .. } => {}
        MountOp::Bind {
            read_only,
            kind,
            dev,
            ..
        } => {
            let Some(source) = &prepared.source else {
                return Err(SetupError::BadPath(dst.to_path_buf()));
            };
            let tree = sys::open_tree(
                source.as_fd(),
                c"",
                sys::OPEN_TREE_CLONE | sys::AT_RECURSIVE,
            )
            .map_err(fail)?;
            let mut attrs = sys::MOUNT_ATTR_NOSUID;
            if !dev {
                attrs |= sys::MOUNT_ATTR_NODEV;
            }
            if *read_only {
                attrs |= sys::MOUNT_ATTR_RDONLY;
            }
            // Applied to the detached copy, recursively, before anyone can see it.
            sys::mount_setattr(tree.as_fd(), true, attrs).map_err(fail)?;
            let target = ensure_target(root, dst, *kind).map_err(fail)?;
            sys::move_mount(tree.as_fd(), target.as_fd()).map_err(fail)?;
        }
        MountOp::Tmpfs {
            size, mode, owner, ..
        } => {
            let mnt = new_tmpfs(*size, *mode, *owner).map_err(fail)?;
            let target = ensure_target(root, dst, NodeKind::Dir).map_err(fail)?;
            sys::move_mount(mnt.as_fd(), target.as_fd()).map_err(fail)?;
        }
        MountOp::Overlay {
            lower, size, owner, ..
        } => {
            let Some(source) = &prepared.source else {
                return Err(SetupError::BadPath(dst.to_path_buf()));
            };
            overlay(root, dst, lower, source.as_fd(), *size, *owner)?;
        }
        MountOp::Proc { .. } => {
            let mnt = new_fs(
                c"proc",
                &[],
                sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV | sys::MOUNT_ATTR_NOEXEC,
            )
            .map_err(fail)?;
            let target = ensure_target(root, dst, NodeKind::Dir).map_err(fail)?;
            sys::move_mount(mnt.as_fd(), target.as_fd()).map_err(fail)?;
        }
        MountOp::Devpts { max, .. } => {
            let max = CString::new(max.to_string()).unwrap_or_default();
            let mnt = new_fs(
                c"devpts",
                &[
                    (c"newinstance", None),
                    (c"ptmxmode", Some(c"0666")),
                    (c"mode", Some(c"0620")),
                    (c"max", Some(max.as_c_str())),
                ],
                sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NOEXEC,
            )
            .map_err(fail)?;
            let target = ensure_target(root, dst, NodeKind::Dir).map_err(fail)?;
            sys::move_mount(mnt.as_fd(), target.as_fd()).map_err(fail)?;
        }
        MountOp::Symlink { target, .. } => {
            let (parent, name) = split_parent(dst).map_err(fail)?;
            let dir = ensure_target(root, &parent, NodeKind::Dir).map_err(fail)?;
            let link = cstr(target)?;
            let name = cstr(Path::new(&name))?;
            sys::symlinkat(&link, dir.as_fd(), &name).map_err(fail)?;
        }
        MountOp::Mask { kind, .. } => {
            // Nothing to hide where nothing is, nor where this process cannot reach:
            // it holds every permission the sandbox's user will (the same ids, with
            // capabilities and groups still), so a place it cannot open, that user
            // cannot open either (a root-owned records folder in the user's home).
            let target = match open_existing(root, dst) {
                Ok(Some(target)) => target,
                Ok(None) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EACCES) => return Ok(()),
                Err(e) => return Err(fail(e)),
            };
            let mnt = match kind {
                // An empty, unreadable directory.
                NodeKind::Dir => new_fs(
                    c"tmpfs",
                    &[(c"size", Some(c"4k")), (c"mode", Some(c"000"))],
                    sys::MOUNT_ATTR_RDONLY
                        | sys::MOUNT_ATTR_NOSUID
                        | sys::MOUNT_ATTR_NODEV
                        | sys::MOUNT_ATTR_NOEXEC,
                )
                .map_err(fail)?,
                // /dev/null on a nodev mount: opening it fails with EACCES.
                NodeKind::File => {
                    let tree = sys::open_tree(null, c"", sys::OPEN_TREE_CLONE).map_err(fail)?;
                    sys::mount_setattr(
                        tree.as_fd(),
                        false,
                        sys::MOUNT_ATTR_RDONLY
                            | sys::MOUNT_ATTR_NOSUID
                            | sys::MOUNT_ATTR_NODEV
                            | sys::MOUNT_ATTR_NOEXEC,
                    )
                    .map_err(fail)?;
                    tree
                }
            };
            sys::move_mount(mnt.as_fd(), target.as_fd()).map_err(fail)?;
        }
        MountOp::ReadOnly { .. } => {
            let Some(target) = open_existing(root, dst).map_err(fail)? else {
                return Ok(());
            };
            let tree = sys::open_tree(
                target.as_fd(),
                c"",
                sys::OPEN_TREE_CLONE | sys::AT_RECURSIVE,
            )
            .map_err(fail)?;
            sys::mount_setattr(
                tree.as_fd(),
                true,
                sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
            )
            .map_err(fail)?;
            sys::move_mount(tree.as_fd(), target.as_fd()).map_err(fail)?;
        }
    }
    Ok(())
}

fn split_parent(path: &Path) -> io::Result<(PathBuf, std::ffi::OsString)> {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => Ok((parent.to_path_buf(), name.to_owned())),
        _ => Err(io::Error::from_raw_os_error(libc::EINVAL)),
    }
}

const RESOLVE: u64 = sys::RESOLVE_BENEATH | sys::RESOLVE_NO_SYMLINKS | sys::RESOLVE_NO_MAGICLINKS;

fn components(path: &Path) -> impl Iterator<Item = CString> + '_ {
    path.components().filter_map(|c| match c {
        Component::Normal(part) => CString::new(part.as_bytes()).ok(),
        _ => None,
    })
}

/// Opens `path` beneath `root` without following symlinks; `None` if it is absent.
fn open_existing(root: BorrowedFd<'_>, path: &Path) -> io::Result<Option<OwnedFd>> {
    let rel: PathBuf = path
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect();
    let rel = CString::new(rel.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    match sys::openat2(root, &rel, libc::O_PATH | libc::O_NOFOLLOW, RESOLVE) {
        Ok(fd) => Ok(Some(fd)),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Opens `path` beneath `root`, creating missing directories (and the final file for
/// file mounts) on the way. Fails on any symlink.
fn ensure_target(root: BorrowedFd<'_>, path: &Path, kind: NodeKind) -> io::Result<OwnedFd> {
    let parts: Vec<CString> = components(path).collect();
    let mut current = sys::openat2(root, c".", libc::O_PATH | libc::O_DIRECTORY, RESOLVE)?;
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let open =
            |dir: BorrowedFd<'_>| sys::openat2(dir, part, libc::O_PATH | libc::O_NOFOLLOW, RESOLVE);
        current = match open(current.as_fd()) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                // mkdirat/openat need a real directory descriptor, not O_PATH.
                let dir = sys::openat2(
                    current.as_fd(),
                    c".",
                    libc::O_RDONLY | libc::O_DIRECTORY,
                    RESOLVE,
                )?;
                if last && kind == NodeKind::File {
                    drop(sys::openat(
                        dir.as_fd(),
                        part,
                        libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY,
                        0o644,
                    )?);
                } else {
                    match sys::mkdirat(dir.as_fd(), part, 0o755) {
                        Ok(()) => {}
                        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                        Err(e) => return Err(e),
                    }
                }
                open(current.as_fd())?
            }
            Err(e) => return Err(e),
        };
    }
    Ok(current)
}
