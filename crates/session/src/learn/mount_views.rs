//! This mount namespace's mounts, as the grant scan needs them: where they are (a
//! mount inside a grant is another file system's view, even on the same device),
//! and what the mount holding a path shows.
//!
//! Identity (device and inode) finds a secret's other names only on the secret's own
//! file system. A mount that shows the same files through another file system
//! gives them other identities (session-25 red team, round 4 F1: an administrator's
//! overlay of the home under `/srv` let learning grant `/srv/ov/u` with the home's
//! `.ssh` in it). So the scan asks [`Mounts::view_of`] what a path's mount shows:
//! - a file system that keeps its own files (ext4, xfs, btrfs, tmpfs and the like:
//!   [`OWN_FILES`]) shows nothing of another's;
//! - any other (an overlay, FUSE, NFS, SMB, 9p, virtiofs, or a type not known here)
//!   may show another's files under identities of its own: its files are compared
//!   with the sensitive places' by size and modification time, which overlayfs,
//!   `bindfs` and network file systems pass on. Where it names the folders it shows
//!   (an overlay's layers, a `bindfs` source), the same path there is looked through
//!   as well, for the sensitive names and what has no size to compare.
//!
//! The layer paths an overlay's options name are only a hint (session-26 red team):
//! a layer can have been unmounted or replaced since, be shown as `/` when given by
//! descriptor, or be named relative to a folder only its mounter knew, and a
//! redirect (`trusted.overlay.redirect`, metacopy) shows another path of a layer
//! than the one asked. The comparison by size and time does not depend on them.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// File system types whose files are their own: identity is all there is to
/// compare. Any other type may show another file system's files.
const OWN_FILES: &[&str] = &[
    "ext2",
    "ext3",
    "ext4",
    "xfs",
    "btrfs",
    "f2fs",
    "jfs",
    "reiserfs",
    "bcachefs",
    "zfs",
    "tmpfs",
    "ramfs",
    "vfat",
    "exfat",
    "ntfs3",
    "hfsplus",
    "squashfs",
    "erofs",
    "iso9660",
    "udf",
    "proc",
    "sysfs",
    "devtmpfs",
    "devpts",
    "mqueue",
    "cgroup",
    "cgroup2",
    "bpf",
    "tracefs",
    "debugfs",
    "securityfs",
    "pstore",
    "configfs",
    "efivarfs",
    "hugetlbfs",
    "autofs",
    "binfmt_misc",
    "fusectl",
    "nsfs",
    "rpc_pipefs",
];

/// One line of `/proc/self/mountinfo`, its escapes undone.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    id: u64,
    parent: u64,
    /// Its device, as `st_dev` shows it (from `MAJOR:MINOR`).
    device: u64,
    /// Where it is mounted.
    point: PathBuf,
    /// The folder of its file system it shows there (`/` unless a bind mount).
    root: PathBuf,
    fstype: String,
    source: Vec<u8>,
    /// The file system's own options (`lowerdir=…`), each with mountinfo's escapes
    /// undone.
    options: Vec<Vec<u8>>,
}

/// The mounts of a mount namespace.
#[derive(Debug, Default)]
pub(super) struct Mounts {
    points: HashSet<PathBuf>,
    list: Vec<Mount>,
    /// Each mount (its index in `list`) by the mount it is on and its point;
    /// `None` when two share both, which is no tree to follow.
    on: Option<HashMap<(u64, PathBuf), usize>>,
    /// The root mount: at `/`, on no mount listed.
    root: Option<usize>,
}

/// What the mount holding a path shows of it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct View {
    /// The same path in the folders the mount names as what it shows (an overlay's
    /// layers, a `bindfs` source), where they are folders here.
    pub(super) layers: Vec<PathBuf>,
    /// The files may be another file system's under other identities: compare them
    /// with the sensitive places' by size and modification time.
    pub(super) compare_contents: bool,
    /// The files a loop device the mount reads holds (`/sys/block/loopN/loop/
    /// backing_file`): an image whose bytes are the mount's files (session-26 red
    /// team, round 3: a key in a loop-mounted image inside `$CODEX_HOME` was
    /// granted as the image).
    pub(super) images: Vec<PathBuf>,
    /// The mount reads a loop device: the file its path names may not be the one
    /// it reads (the name removed and another made, the file's mount gone since,
    /// the file cut short under another name; session-26 red team, rounds 4 and
    /// 5), so any large file may be it.
    pub(super) unnamed_image: bool,
}

impl Mounts {
    /// This mount namespace's mounts.
    pub(super) fn read() -> Self {
        Self::parse(&std::fs::read("/proc/self/mountinfo").unwrap_or_default())
    }

    /// Mounts from `mountinfo`'s text; a line that cannot be read is left out.
    pub(super) fn parse(text: &[u8]) -> Self {
        let list: Vec<Mount> = text.split(|&b| b == b'\n').filter_map(parse_line).collect();
        let ids: HashSet<u64> = list.iter().map(|m| m.id).collect();
        let mut on = HashMap::new();
        let mut tree = true;
        for (i, m) in list.iter().enumerate() {
            tree &= on.insert((m.parent, m.point.clone()), i).is_none();
        }
        Self {
            points: list.iter().map(|m| m.point.clone()).collect(),
            root: list
                .iter()
                .position(|m| m.point == Path::new("/") && !ids.contains(&m.parent)),
            on: tree.then_some(on),
            list,
        }
    }

    /// The mount points below `folder` (not at it), sorted.
    pub(super) fn inside(&self, folder: &Path) -> Vec<&Path> {
        let mut inside: Vec<&Path> = self
            .points
            .iter()
            .filter(|p| p.starts_with(folder) && p.as_path() != folder)
            .map(PathBuf::as_path)
            .collect();
        inside.sort();
        inside
    }

    /// What the mount holding `path` (absolute, without symlinks) shows of it.
    pub(super) fn view_of(&self, path: &Path) -> View {
        let mut view = View::default();
        for mount in self.holding(path) {
            let Ok(inside) = path.strip_prefix(&mount.point) else {
                continue;
            };
            let at = |dir: &Path| {
                let root = mount.root.strip_prefix("/").unwrap_or(&mount.root);
                dir.join(root).join(inside)
            };
            if !OWN_FILES.contains(&mount.fstype.as_str()) {
                view.compare_contents = true;
            }
            for dir in shown_folders(mount) {
                if let Ok(dir) = std::fs::canonicalize(&dir)
                    && dir.is_dir()
                {
                    view.layers.push(at(&dir));
                }
            }
            let backing = backing(mount.device);
            view.images.extend(backing.files);
            view.unnamed_image |= backing.image;
        }
        view
    }

    /// The device and whether it may show another file system's files, of the
    /// mount at `point` (none there: `None`), read from `mountinfo` rather than by
    /// `stat`, which a stalled FUSE or network mount answers never (session-26 red
    /// team, round 3: a stopped FUSE server under `/run/user` hung learning).
    pub(super) fn at(&self, point: &Path) -> Option<(u64, bool)> {
        if !self.points.contains(point) {
            return None;
        }
        let mount = self.holding(point).into_iter().next()?;
        Some((mount.device, !OWN_FILES.contains(&mount.fstype.as_str())))
    }

    /// The mount that holds `path`, found as the kernel does: from the root mount
    /// down, at each folder the mount on top there (field two of `mountinfo` says
    /// which mount another is on; the order of the lines does not say which of two
    /// at one point is seen: `mount --move`, `MOVE_MOUNT_BENEATH`). Where the lines
    /// do not make such a tree, every mount at the deepest point above `path`.
    fn holding(&self, path: &Path) -> Vec<&Mount> {
        if let Some(mount) = self.visible(path) {
            return vec![mount];
        }
        let deepest = self
            .list
            .iter()
            .filter(|m| path.starts_with(&m.point))
            .map(|m| m.point.components().count())
            .max();
        self.list
            .iter()
            .filter(|m| path.starts_with(&m.point) && Some(m.point.components().count()) == deepest)
            .collect()
    }

    fn visible(&self, path: &Path) -> Option<&Mount> {
        let on = self.on.as_ref()?;
        let mut mount = self.on_top(on, self.root?)?;
        let mut folder = PathBuf::from("/");
        for part in path.components().skip(1) {
            folder.push(part);
            if let Some(&child) = on.get(&(self.list[mount].id, folder.clone())) {
                mount = self.on_top(on, child)?;
            }
        }
        self.list.get(mount)
    }

    /// The mount on top at `mount`'s point: `mount`, or one mounted over it there,
    /// and so on (`None` for a loop, which no kernel makes).
    fn on_top(&self, on: &HashMap<(u64, PathBuf), usize>, mut mount: usize) -> Option<usize> {
        for _ in 0..=on.len() {
            let m = self.list.get(mount)?;
            match on.get(&(m.id, m.point.clone())) {
                Some(&above) => mount = above,
                None => return Some(mount),
            }
        }
        None
    }
}

/// What a mount's device is read from.
#[derive(Debug, Default, PartialEq, Eq)]
struct Backing {
    /// The files behind the loop devices it is made of, as their paths name them.
    files: Vec<PathBuf>,
    /// Whether a loop device is among them.
    image: bool,
}

/// The files behind the block device `device`: through loop devices (over loop
/// devices), partitions and device-mapper or RAID devices (`slaves/`), found by
/// device number, not by the name the mount's source gives (session-26 red team,
/// round 5: a device node of another name for a loop device). A chain too long to
/// follow counts as an image that cannot be named.
fn backing(device: u64) -> Backing {
    let mut backing = Backing::default();
    let mut todo = vec![device];
    let mut seen = HashSet::new();
    while let Some(device) = todo.pop() {
        if !seen.insert(device) {
            continue;
        }
        if seen.len() > 64 {
            backing.image = true;
            break;
        }
        let (major, minor) = (libc::major(device), libc::minor(device));
        let Ok(dir) = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")) else {
            continue;
        };
        let mut push = |dev_file: &Path| {
            if let Some(device) = std::fs::read_to_string(dev_file)
                .ok()
                .and_then(|text| parse_device(text.trim()))
            {
                todo.push(device);
            }
        };
        if dir.join("partition").exists()
            && let Some(disk) = dir.parent()
        {
            push(&disk.join("dev"));
        }
        if let Ok(entries) = std::fs::read_dir(dir.join("slaves")) {
            for entry in entries.flatten() {
                push(&entry.path().join("dev"));
            }
        }
        if let Ok(text) = std::fs::read(dir.join("loop/backing_file")) {
            backing.image = true;
            let text = text.strip_suffix(b"\n").unwrap_or(&text);
            // " (deleted)": the name is gone, whatever holds it now.
            if text.ends_with(b" (deleted)") {
                continue;
            }
            let file = PathBuf::from(OsString::from_vec(text.to_vec()));
            match std::fs::metadata(&file) {
                Ok(meta) if meta.file_type().is_block_device() => todo.push(meta.rdev()),
                Ok(_) if file.is_absolute() => backing.files.push(file),
                _ => {}
            }
        }
    }
    backing
}

/// A device number written `MAJOR:MINOR`.
fn parse_device(text: &str) -> Option<u64> {
    let (major, minor) = text.split_once(':')?;
    Some(libc::makedev(major.parse().ok()?, minor.parse().ok()?))
}

/// The folders `mount` names as what it shows: an overlay's layers, a FUSE file
/// system's source when it is a path (`bindfs` names its source folder; others a
/// remote, `host:/path`, or their own name).
fn shown_folders(mount: &Mount) -> Vec<PathBuf> {
    let path = |bytes: Vec<u8>| PathBuf::from(OsString::from_vec(bytes));
    let mut folders = Vec::new();
    if mount.fstype == "overlay" {
        for option in &mount.options {
            let Some(eq) = option.iter().position(|&b| b == b'=') else {
                continue;
            };
            let (key, value) = (&option[..eq], &option[eq + 1..]);
            match key {
                b"lowerdir" => folders.extend(split_layers(value).into_iter().map(path)),
                b"upperdir" => folders.push(path(unescape(value))),
                // Given one by one, taken as they are (overlayfs does not undo
                // backslashes there: session-26 red team).
                b"lowerdir+" | b"datadir+" => folders.push(path(value.to_vec())),
                _ => {}
            }
        }
    } else if mount.fstype.starts_with("fuse") && mount.source.starts_with(b"/") {
        folders.push(path(mount.source.clone()));
    }
    // A relative one names a folder relative to where its mounter was.
    folders.retain(|f| f.is_absolute());
    folders
}

/// One `mountinfo` line: `ID PARENT MAJ:MIN ROOT POINT OPTIONS [TAGS…] - TYPE SOURCE
/// SUPER-OPTIONS`.
fn parse_line(line: &[u8]) -> Option<Mount> {
    let fields: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
    let dash = fields.iter().position(|f| *f == b"-")?;
    let (root, point) = (fields.get(3)?, fields.get(4)?);
    let (fstype, source) = (fields.get(dash + 1)?, fields.get(dash + 2)?);
    let options: &[u8] = fields.get(dash + 3).copied().unwrap_or_default();
    let path = |field: &[u8]| PathBuf::from(OsString::from_vec(octal_unescape(field)));
    let number = |field: &[u8]| std::str::from_utf8(field).ok()?.parse().ok();
    let (major, minor) = {
        let field = fields.get(2)?;
        let colon = field.iter().position(|&b| b == b':')?;
        let part = |b: &[u8]| std::str::from_utf8(b).ok()?.parse::<u32>().ok();
        (part(&field[..colon])?, part(&field[colon + 1..])?)
    };
    Some(Mount {
        id: number(fields.first()?)?,
        parent: number(fields.get(1)?)?,
        device: libc::makedev(major, minor),
        point: path(point),
        root: path(root),
        fstype: String::from_utf8_lossy(&octal_unescape(fstype)).into_owned(),
        source: octal_unescape(source),
        // A comma inside an option is written `\054`: split first, then undo.
        options: options.split(|&b| b == b',').map(octal_unescape).collect(),
    })
}

/// `mountinfo`'s escapes (`\040` for a space) undone.
fn octal_unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field.get(i + 1..i + 4).and_then(|d| {
            std::str::from_utf8(d)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
        });
        match (field[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    out
}

/// An overlay's `lowerdir` value split at its unescaped colons (`a:b\:c` is `a`
/// and `b:c`; an empty piece, `::` before data-only layers, is none), each with its
/// backslash escapes undone, as overlayfs reads it.
fn split_layers(value: &[u8]) -> Vec<Vec<u8>> {
    let mut layers = Vec::new();
    let mut current = Vec::new();
    let mut bytes = value.iter();
    while let Some(&b) = bytes.next() {
        match b {
            b'\\' => current.extend(bytes.next()),
            b':' => layers.push(std::mem::take(&mut current)),
            _ => current.push(b),
        }
    }
    layers.push(current);
    layers.retain(|l| !l.is_empty());
    layers
}

/// Backslash escapes undone (`\,` is `,`), as overlayfs reads a layer's path.
fn unescape(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    let mut bytes = value.iter();
    while let Some(&b) = bytes.next() {
        match b {
            b'\\' => out.extend(bytes.next()),
            _ => out.push(b),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_read_with_their_escapes_undone() {
        let text = b"22 1 8:1 / / rw - ext4 /dev/sda1 rw\n\
            40 22 8:1 /home/u/.ssh /srv/app/my\\040keys rw shared:1 - ext4 /dev/sda1 rw\n";
        let mounts = Mounts::parse(text);
        assert!(mounts.at(Path::new("/")).is_some());
        // Its device from MAJOR:MINOR (no `stat`: a stalled FUSE server never
        // answers one), and a disk's file system shows only its own files.
        assert_eq!(
            mounts.at(Path::new("/srv/app/my keys")),
            Some((libc::makedev(8, 1), false))
        );
        assert_eq!(mounts.at(Path::new("/srv/app")), None);
        // A file system with no block device (a tmpfs's 0:N) reads no file.
        assert_eq!(backing(libc::makedev(0, 40)), Backing::default());
        assert_eq!(parse_device("7:12"), Some(libc::makedev(7, 12)));
        assert_eq!(parse_device("7"), None);
        assert_eq!(mounts.list.len(), 2);
        assert_eq!(mounts.list[1].root, Path::new("/home/u/.ssh"));
        assert_eq!(mounts.list[1].fstype, "ext4");
        // This namespace's own root is one.
        assert!(Mounts::read().at(Path::new("/")).is_some());
    }

    #[test]
    fn an_overlay_s_layers_are_read_as_overlayfs_reads_them() {
        // As this kernel showed `lowerdir=/tmp/lo:/tmp/lo2 x\,y` (a comma escaped
        // for mount(8), a space for mountinfo).
        let line = b"48 27 0:40 / /srv/ov rw - overlay overlay rw,lowerdir=/tmp/lo:/tmp/lo2\\040x\\134\\054y,upperdir=/tmp/up,workdir=/tmp/wk,uuid=on";
        let mount = parse_line(line).unwrap();
        assert_eq!(mount.fstype, "overlay");
        assert_eq!(
            mount.options[1],
            b"lowerdir=/tmp/lo:/tmp/lo2 x\\,y".to_vec()
        );
        assert_eq!(
            split_layers(b"/tmp/lo:/tmp/lo2 x\\,y::/data\\:1"),
            [
                b"/tmp/lo".to_vec(),
                b"/tmp/lo2 x,y".to_vec(),
                b"/data:1".to_vec()
            ]
        );
        assert_eq!(unescape(b"/tmp/a\\,b:c"), b"/tmp/a,b:c".to_vec());
    }

    #[test]
    fn what_a_grant_s_mount_shows_is_told_by_its_type() {
        let d = std::env::temp_dir().join(format!("vg-mounts-{}", std::process::id()));
        let (lower, upper, slash) = (d.join("lower"), d.join("upper"), d.join("a\\b"));
        for folder in [&lower, &upper, &slash] {
            std::fs::create_dir_all(folder).unwrap();
        }
        let text = format!(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             2 1 0:40 / /srv/ov rw - overlay overlay rw,lowerdir={l}:/nowhere/at/all,upperdir={u},workdir=/w\n\
             3 1 0:41 / /srv/rel rw - overlay overlay rw,lowerdir=lower,upperdir=upper\n\
             4 1 0:42 / /srv/b rw - fuse {l} rw,user_id=0\n\
             5 1 0:43 / /mnt/nfs rw - nfs4 host:/export rw\n\
             6 1 0:44 /sub /srv/sub rw - overlay overlay rw,lowerdir={l}\n\
             7 1 0:45 / /media/disk rw - ext4 /dev/sdb1 rw\n\
             8 1 0:46 / /srv/fd rw - overlay overlay rw,lowerdir+={s},datadir+={l}\n\
             9 1 0:47 / /srv/odd rw - weirdfs none rw\n",
            l = lower.display(),
            u = upper.display(),
            s = slash.display().to_string().replace('\\', "\\134"),
        );
        let mounts = Mounts::parse(text.as_bytes());
        assert_eq!(mounts.view_of(Path::new("/home/u/proj")), View::default());
        // A layer not here names nothing; the files are compared all the same.
        assert_eq!(
            mounts.view_of(Path::new("/srv/ov/u/proj")),
            View {
                layers: vec![lower.join("u/proj"), upper.join("u/proj")],
                compare_contents: true,
                images: vec![],
                unnamed_image: false,
            }
        );
        // Relative layers: compared, not looked for.
        assert_eq!(
            mounts.view_of(Path::new("/srv/rel/x")),
            View {
                layers: vec![],
                compare_contents: true,
                images: vec![],
                unnamed_image: false,
            }
        );
        assert_eq!(
            mounts.view_of(Path::new("/srv/b/p")),
            View {
                layers: vec![lower.join("p")],
                compare_contents: true,
                images: vec![],
                unnamed_image: false,
            }
        );
        let nfs = mounts.view_of(Path::new("/mnt/nfs/p"));
        assert!(nfs.compare_contents && nfs.layers.is_empty());
        assert_eq!(
            mounts.view_of(Path::new("/srv/sub/x")).layers,
            [lower.join("sub/x")]
        );
        assert_eq!(mounts.view_of(Path::new("/media/disk/x")), View::default());
        // `lowerdir+` is taken as written, backslash and all.
        assert_eq!(
            mounts.view_of(Path::new("/srv/fd/x")).layers,
            [slash.join("x"), lower.join("x")]
        );
        // A type not known to keep its own files is compared.
        assert!(mounts.view_of(Path::new("/srv/odd/x")).compare_contents);
        // `/srv/ovx` is not below `/srv/ov`.
        assert_eq!(mounts.view_of(Path::new("/srv/ovx")), View::default());
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Of mounts at one point, the one on top is the one no other there is mounted
    /// on, whatever the order of the lines (session-26 red team: an overlay moved
    /// over a later tmpfs, and a tmpfs slid beneath an overlay, were taken for the
    /// tmpfs). A mount hidden below another at a folder above is not seen either.
    #[test]
    fn the_mount_seen_at_a_point_is_the_one_on_top() {
        let compared = |text: &str, path: &str| {
            Mounts::parse(text.as_bytes())
                .view_of(Path::new(path))
                .compare_contents
        };
        // Two on one mount at one point, which no kernel shows: both are looked at.
        let both = "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             30 1 0:50 / /srv/v rw - overlay overlay rw,lowerdir=/x:/y\n\
             20 1 0:51 / /srv/v rw - tmpfs tmpfs rw\n";
        assert!(compared(both, "/srv/v/a"));
        // The overlay moved onto /srv/v, where the tmpfs was already.
        let moved = "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             30 20 0:50 / /srv/v rw - overlay overlay rw,lowerdir=/x:/y\n\
             20 1 0:51 / /srv/v rw - tmpfs tmpfs rw\n";
        assert!(compared(moved, "/srv/v/a"));
        // The tmpfs slid beneath the overlay.
        let beneath = "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             20 40 0:50 / /srv/p rw - overlay overlay rw,lowerdir=/x:/y\n\
             40 1 0:51 / /srv/p rw - tmpfs tmpfs rw\n";
        assert!(compared(beneath, "/srv/p/a"));
        let on_top = "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             20 1 0:50 / /srv/p rw - overlay overlay rw,lowerdir=/x:/y\n\
             40 20 0:51 / /srv/p rw - tmpfs tmpfs rw\n";
        assert!(!compared(on_top, "/srv/p/a"));
        // /srv/a/b (on the first /srv/a) is under the second /srv/a.
        let hidden = "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             20 1 0:50 / /srv/a rw - tmpfs tmpfs rw\n\
             21 20 0:51 / /srv/a/b rw - overlay overlay rw,lowerdir=/x:/y\n\
             22 20 0:52 / /srv/a rw - tmpfs tmpfs rw\n";
        assert_eq!(
            Mounts::parse(hidden.as_bytes()).view_of(Path::new("/srv/a/b/c")),
            View::default()
        );
    }
}
