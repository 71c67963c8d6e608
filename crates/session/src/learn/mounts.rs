//! This mount namespace's mounts, as the grant scan needs them: where they are (a
//! mount inside a grant is another file system's view, even on the same device),
//! and what the mount holding a grant shows.
//!
//! Identity (device and inode) finds a secret's other names only on the secret's own
//! file system. A mount that shows the same files through another file system
//! gives them other identities (session-25 red team, round 4 F1: an administrator's
//! overlay of the home under `/srv` let learning grant `/srv/ov/u` with the home's
//! `.ssh` in it). So the scan also asks [`Mounts::view_of`] what a grant's mount
//! shows:
//! - an overlay shows its layers' files: the grant's path in each layer is looked
//!   through as well, under the files' own identities;
//! - FUSE, network and virtual-machine shares (`bindfs`, `sshfs`, NFS, SMB, 9p,
//!   virtiofs) can show any files without saying which: their files are compared
//!   with the sensitive places' by size and modification time (a FUSE mount whose
//!   source is a folder, as `bindfs`'s is, is looked through like a layer too);
//! - an overlay layer named by a relative path (relative to a folder only its
//!   mounter knew), or one this user may not look at, cannot be checked.

use std::collections::HashSet;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// File system types that may show another file system's files under identities of
/// their own, without a layer this scan can read. `fuseblk` is not one: it reads a
/// disk.
const FOREIGN_TYPES: &[&str] = &[
    "fuse", "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "virtiofs", "ceph", "afs", "vboxsf",
    "vmhgfs", "prl_fs",
];

/// One line of `/proc/self/mountinfo`, its escapes undone.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    /// Where it is mounted.
    point: PathBuf,
    /// The folder of its file system it shows there (`/` unless a bind mount).
    root: PathBuf,
    fstype: String,
    source: Vec<u8>,
    /// The file system's own options (`lowerdir=…`), each with its escapes undone.
    options: Vec<Vec<u8>>,
}

/// The mounts of a mount namespace.
#[derive(Debug, Default)]
pub(super) struct Mounts {
    points: HashSet<PathBuf>,
    /// In the order mounted: of two at one point, the later one is seen.
    list: Vec<Mount>,
}

/// What the mount holding a path shows of it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct View {
    /// The same files at other paths, under their own identities (an overlay's
    /// layers, a `bindfs` source).
    pub(super) layers: Vec<PathBuf>,
    /// The files may be another file system's under other identities: compare them
    /// with the sensitive places' by size and modification time.
    pub(super) compare_contents: bool,
    /// What it shows cannot be told: a layer named relative to an unknown folder,
    /// or one that cannot be looked at.
    pub(super) unknown: bool,
}

impl Mounts {
    /// This mount namespace's mounts.
    pub(super) fn read() -> Self {
        Self::parse(&std::fs::read("/proc/self/mountinfo").unwrap_or_default())
    }

    /// Mounts from `mountinfo`'s text; a line that cannot be read is left out.
    pub(super) fn parse(text: &[u8]) -> Self {
        let list: Vec<Mount> = text.split(|&b| b == b'\n').filter_map(parse_line).collect();
        Self {
            points: list.iter().map(|m| m.point.clone()).collect(),
            list,
        }
    }

    /// Whether a mount is at `path`.
    pub(super) fn contains(&self, path: &Path) -> bool {
        self.points.contains(path)
    }

    /// What the mount holding `path` (absolute, without symlinks) shows of it.
    pub(super) fn view_of(&self, path: &Path) -> View {
        let Some(mount) = self
            .list
            .iter()
            .enumerate()
            .filter(|(_, m)| path.starts_with(&m.point))
            // The deepest; of two at one point, the later.
            .max_by_key(|(i, m)| (m.point.components().count(), *i))
            .map(|(_, m)| m)
        else {
            return View::default();
        };
        let Ok(inside) = path.strip_prefix(&mount.point) else {
            return View::default();
        };
        let root = mount.root.strip_prefix("/").unwrap_or(&mount.root);
        let mut view = View::default();
        let layer = |dir: &[u8], view: &mut View| {
            let dir = PathBuf::from(OsString::from_vec(dir.to_vec()));
            if !dir.is_absolute() {
                view.unknown = true;
                return;
            }
            match std::fs::canonicalize(&dir) {
                Ok(dir) => view.layers.push(dir.join(root).join(inside)),
                // Not in this namespace: it shows nothing that is here.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(_) => view.unknown = true,
            }
        };
        if mount.fstype == "overlay" {
            for option in &mount.options {
                let Some(eq) = option.iter().position(|&b| b == b'=') else {
                    continue;
                };
                let (key, value) = (&option[..eq], &option[eq + 1..]);
                match key {
                    b"lowerdir" => {
                        for dir in split_layers(value) {
                            layer(&dir, &mut view);
                        }
                    }
                    b"lowerdir+" | b"datadir+" | b"upperdir" => layer(&unescape(value), &mut view),
                    _ => {}
                }
            }
        } else if FOREIGN_TYPES.contains(&mount.fstype.as_str())
            || mount.fstype.starts_with("fuse.")
        {
            view.compare_contents = true;
            // `bindfs` names its source folder; other FUSE file systems name a
            // remote (`host:/path`) or their own name.
            if mount.fstype.starts_with("fuse") && mount.source.starts_with(b"/") {
                let source = PathBuf::from(OsString::from_vec(mount.source.clone()));
                if source.is_dir()
                    && let Ok(source) = std::fs::canonicalize(source)
                {
                    view.layers.push(source.join(root).join(inside));
                }
            }
        }
        view
    }
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
    Some(Mount {
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
        assert!(mounts.contains(Path::new("/")));
        assert!(mounts.contains(Path::new("/srv/app/my keys")));
        assert_eq!(mounts.list.len(), 2);
        assert_eq!(mounts.list[1].root, Path::new("/home/u/.ssh"));
        assert_eq!(mounts.list[1].fstype, "ext4");
        // This namespace's own root is one.
        assert!(Mounts::read().contains(Path::new("/")));
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
        let (lower, upper) = (d.join("lower"), d.join("upper"));
        std::fs::create_dir_all(&lower).unwrap();
        std::fs::create_dir_all(&upper).unwrap();
        let text = format!(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             2 1 0:40 / /srv/ov rw - overlay overlay rw,lowerdir={l}:/nowhere/at/all,upperdir={u},workdir=/w\n\
             3 1 0:41 / /srv/rel rw - overlay overlay rw,lowerdir=lower,upperdir={u}\n\
             4 1 0:42 / /srv/b rw - fuse {l} rw,user_id=0\n\
             5 1 0:43 / /mnt/nfs rw - nfs4 host:/export rw\n\
             6 1 0:44 /sub /srv/sub rw - overlay overlay rw,lowerdir={l}\n\
             7 1 0:45 / /media/disk rw - fuseblk /dev/sdb1 rw\n",
            l = lower.display(),
            u = upper.display()
        );
        let mounts = Mounts::parse(text.as_bytes());
        assert_eq!(mounts.view_of(Path::new("/home/u/proj")), View::default());
        assert_eq!(
            mounts.view_of(Path::new("/srv/ov/u/proj")),
            View {
                layers: vec![lower.join("u/proj"), upper.join("u/proj")],
                ..View::default()
            }
        );
        assert!(mounts.view_of(Path::new("/srv/rel/x")).unknown);
        assert_eq!(
            mounts.view_of(Path::new("/srv/b/p")),
            View {
                layers: vec![lower.join("p")],
                compare_contents: true,
                unknown: false
            }
        );
        let nfs = mounts.view_of(Path::new("/mnt/nfs/p"));
        assert!(nfs.compare_contents && nfs.layers.is_empty() && !nfs.unknown);
        assert_eq!(
            mounts.view_of(Path::new("/srv/sub/x")).layers,
            [lower.join("sub/x")]
        );
        assert_eq!(mounts.view_of(Path::new("/media/disk/x")), View::default());
        // `/srv/ovx` is not below `/srv/ov`.
        assert_eq!(mounts.view_of(Path::new("/srv/ovx")), View::default());
        let _ = std::fs::remove_dir_all(&d);
    }
}
