//! Safe unpacking of layers into a root filesystem.
//!
//! A layer is an untrusted tar archive. While writing it:
//! - entry names with `..` or an absolute path are refused (the whole image is);
//! - every parent directory is resolved beneath the root by hand, one component at a
//!   time with `symlink_metadata`, following symlinks *as if the root were `/`*
//!   (an absolute link target restarts at the root, `..` stops at it), so nothing
//!   is ever written, linked or removed outside the root; the last component is
//!   never followed: whatever is there is removed and the entry is created in its
//!   place (`O_EXCL`), so a symlink planted by an earlier entry cannot redirect it;
//! - hard links must name a file already unpacked beneath the root;
//! - device nodes and FIFOs are skipped, and recorded;
//! - setuid, setgid and sticky bits are cleared, and recorded; ownership is never
//!   applied (everything belongs to the user running `vectraguard`; owners other
//!   than root are recorded);
//! - OCI whiteouts (`.wh.NAME`) remove `NAME` from lower layers, and opaque markers
//!   (`.wh..wh..opq`) remove everything lower layers put in their directory.
//!
//! Nothing else writes into the tree while it is being built (it lives in the
//! store's private `tmp/` until it is complete), so checking a path and then using
//! it at once is sound here. What is used later — directory modes applied at the end,
//! opaque directories pruned after their layer — is kept as a path *relative to the
//! root* and resolved again, strictly (every component a real directory, no symlink
//! followed), when it is used: a later entry may have replaced a directory on the way
//! with a symlink pointing anywhere.

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsStr;
use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tar::EntryType;

use crate::error::{ImageError, Result};
use crate::store::gc::remove_any;

/// How many symlinks one path may go through, as the kernel's ELOOP limit.
const MAX_SYMLINKS: usize = 40;
/// Directories stay enterable and writable by their owner: the store's owner must
/// be able to remove the tree, and the sandbox maps the image's root to that owner.
const DIR_OWNER_BITS: u32 = 0o700;
/// Files stay readable by their owner, for the same reason.
const FILE_OWNER_BITS: u32 = 0o400;
const WHITEOUT_PREFIX: &[u8] = b".wh.";
const OPAQUE_MARKER: &[u8] = b".wh..wh..opq";

/// What unpacking did not reproduce exactly, kept next to the tree as `unpack.json`.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct UnpackReport {
    /// Entries applied, over all layers.
    pub entries: u64,
    /// Bytes of regular files written.
    pub file_bytes: u64,
    /// Entries not created: device nodes, FIFOs.
    pub skipped: Vec<Skipped>,
    /// Paths whose setuid, setgid or sticky bits were cleared.
    pub special_bits_cleared: Vec<String>,
    /// Intended owners other than root (`uid:gid`), by path: all files belong to the
    /// user running `vectraguard`.
    pub owners: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Skipped {
    pub path: String,
    pub kind: String,
}

/// Builds a root filesystem from layers, lowest first.
#[derive(Debug)]
pub struct Unpacker {
    root: PathBuf,
    /// Final modes of directories, by path relative to the root, applied at the end:
    /// a read-only directory must stay writable until every layer is in.
    dir_modes: BTreeMap<PathBuf, u32>,
    report: UnpackReport,
}

/// What one layer wrote, for its opaque markers.
#[derive(Default)]
struct LayerState {
    written: HashSet<PathBuf>,
    ancestors: HashSet<PathBuf>,
    /// Directories with an opaque marker, relative to the root.
    opaque: Vec<PathBuf>,
}

impl LayerState {
    fn wrote(&mut self, path: &Path, root: &Path) {
        self.written.insert(path.to_owned());
        let mut p = path.parent();
        while let Some(dir) = p {
            if dir == root || !self.ancestors.insert(dir.to_owned()) {
                break;
            }
            p = dir.parent();
        }
    }
}

impl Unpacker {
    /// An unpacker into `root`, an existing empty directory.
    pub fn new(root: &Path) -> Self {
        Self {
            root: root.to_owned(),
            dir_modes: BTreeMap::new(),
            report: UnpackReport::default(),
        }
    }

    /// Applies one layer (an uncompressed tar stream) on top of what is there, and
    /// hands the reader back so that the caller can read (and hash) its tail.
    pub fn apply_layer<R: Read>(&mut self, reader: R, layer: &str) -> Result<R> {
        let mut archive = tar::Archive::new(reader);
        let mut state = LayerState::default();
        let entries = archive.entries().map_err(|e| bad_tar(layer, &e))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| bad_tar(layer, &e))?;
            self.apply_entry(&mut entry, &mut state, layer)?;
            self.report.entries += 1;
        }
        for rel in std::mem::take(&mut state.opaque) {
            // Gone or replaced (by a symlink, a file) since its marker: nothing of
            // the lower layers is left there to hide.
            if let Some(dir) = self.real_dir(&rel) {
                self.prune_opaque(&dir, &state)?;
            }
        }
        Ok(archive.into_inner())
    }

    /// Sets the directories' final modes; returns what was not reproduced.
    pub fn finish(mut self) -> Result<UnpackReport> {
        self.dir_modes
            .entry(PathBuf::new())
            .or_insert(0o755 | DIR_OWNER_BITS);
        // The tree may have lost some of these directories to later whiteouts or
        // replacements, possibly by symlinks: each is found again without following
        // any, and skipped when it is no longer a real directory beneath the root.
        for (rel, mode) in &self.dir_modes {
            if let Some(dir) = self.real_dir(rel) {
                fs::set_permissions(&dir, fs::Permissions::from_mode(*mode))
                    .map_err(|e| ImageError::io(&dir, e))?;
            }
        }
        self.report.skipped.sort_by(|a, b| a.path.cmp(&b.path));
        self.report.special_bits_cleared.sort();
        self.report.special_bits_cleared.dedup();
        Ok(self.report)
    }

    fn apply_entry<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        state: &mut LayerState,
        layer: &str,
    ) -> Result<()> {
        let raw = entry.path().map_err(|e| bad_tar(layer, &e))?.into_owned();
        let shown = raw.display().to_string();
        let unsafe_entry = |reason: &str| ImageError::UnsafeEntry {
            layer: layer.to_owned(),
            entry: shown.clone(),
            reason: reason.to_owned(),
        };
        let comps = clean(&raw).map_err(&unsafe_entry)?;
        let kind = entry.header().entry_type();
        let Some((name, parents)) = comps.split_last() else {
            // `./` itself: the root keeps its own mode.
            return Ok(());
        };
        let name_bytes = name.as_bytes();

        if let Some(hidden) = name_bytes.strip_prefix(WHITEOUT_PREFIX) {
            let parent = match self.resolve_dir(parents, None, layer, &shown)? {
                Some(p) => p,
                None => return Ok(()), // whiteout in a directory no lower layer has
            };
            if name_bytes == OPAQUE_MARKER {
                state.opaque.push(self.tree_relative(&parent));
            } else if hidden.starts_with(WHITEOUT_PREFIX) {
                // Other `.wh..wh.` names are aufs bookkeeping, not files.
            } else if hidden.is_empty() || hidden == b"." || hidden == b".." {
                return Err(unsafe_entry(
                    "a whiteout must name an entry of its directory",
                ));
            } else {
                remove_any(&parent.join(OsStr::from_bytes(hidden)))?;
            }
            return Ok(());
        }

        let parent = self
            .resolve_dir(parents, Some(state), layer, &shown)?
            .ok_or_else(|| unsafe_entry("its parent directory cannot be created"))?;
        let target = parent.join(name);
        let rel = self.relative(&target);
        let header = entry.header();
        let mode = header.mode().map_err(|e| bad_tar(layer, &e))? & 0o7777;
        if matches!(
            kind,
            EntryType::Regular | EntryType::Continuous | EntryType::Directory
        ) && mode & 0o7000 != 0
        {
            self.report.special_bits_cleared.push(rel.clone());
        }
        let (uid, gid) = (header.uid().unwrap_or(0), header.gid().unwrap_or(0));
        if (uid, gid) != (0, 0) {
            self.report
                .owners
                .insert(rel.clone(), format!("{uid}:{gid}"));
        } else {
            self.report.owners.remove(&rel);
        }

        match kind {
            EntryType::Directory => {
                match fs::symlink_metadata(&target) {
                    Ok(m) if m.is_dir() => {}
                    Ok(_) => {
                        remove_any(&target)?;
                        make_dir(&target)?;
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => make_dir(&target)?,
                    Err(e) => return Err(ImageError::io(&target, e)),
                }
                self.dir_modes
                    .insert(self.tree_relative(&target), (mode & 0o777) | DIR_OWNER_BITS);
            }
            EntryType::Regular | EntryType::Continuous => {
                let mtime = header.mtime().ok();
                remove_any(&target)?;
                // create_new is O_CREAT|O_EXCL: it never follows a symlink.
                let mut file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&target)
                    .map_err(|e| ImageError::io(&target, e))?;
                let n = io::copy(entry, &mut file).map_err(|e| bad_tar(layer, &e))?;
                self.report.file_bytes += n;
                file.set_permissions(fs::Permissions::from_mode((mode & 0o777) | FILE_OWNER_BITS))
                    .map_err(|e| ImageError::io(&target, e))?;
                // Programs compare mtimes (Python's bytecode cache): keep them.
                if let Some(secs) = mtime {
                    let _ = file.set_modified(UNIX_EPOCH + Duration::from_secs(secs));
                }
            }
            EntryType::Symlink => {
                let link = entry
                    .link_name()
                    .map_err(|e| bad_tar(layer, &e))?
                    .filter(|l| !l.as_os_str().is_empty())
                    .ok_or_else(|| unsafe_entry("a symlink without a target"))?;
                remove_any(&target)?;
                // The target is stored as given: it is only ever followed inside the
                // sandbox, where this tree is `/`, or by `resolve_dir`, clamped.
                std::os::unix::fs::symlink(&link, &target)
                    .map_err(|e| ImageError::io(&target, e))?;
            }
            EntryType::Link => {
                let link = entry
                    .link_name()
                    .map_err(|e| bad_tar(layer, &e))?
                    .ok_or_else(|| unsafe_entry("a hard link without a target"))?
                    .into_owned();
                let source = self.hard_link_source(&link, layer, &shown)?;
                if source != target {
                    remove_any(&target)?;
                    // linkat(2) without AT_SYMLINK_FOLLOW: a link to a symlink links
                    // the symlink itself.
                    fs::hard_link(&source, &target).map_err(|e| ImageError::io(&target, e))?;
                }
            }
            EntryType::Char | EntryType::Block | EntryType::Fifo => {
                let kind = match kind {
                    EntryType::Char => "character device",
                    EntryType::Block => "block device",
                    _ => "fifo",
                };
                self.report.skipped.push(Skipped {
                    path: rel,
                    kind: kind.to_owned(),
                });
                return Ok(());
            }
            EntryType::XGlobalHeader | EntryType::XHeader => return Ok(()),
            other => {
                return Err(ImageError::Unsupported(format!(
                    "layer {layer}: entry {shown:?} has tar type {other:?}, which this \
                     version does not unpack"
                )));
            }
        }
        state.wrote(&target, &self.root);
        Ok(())
    }

    /// Resolves directory components beneath the root, following symlinks as if the
    /// root were `/`. With `create`, missing directories are made (and counted as
    /// written by the layer); without, a missing one gives `None`.
    fn resolve_dir(
        &mut self,
        comps: &[&OsStr],
        mut create: Option<&mut LayerState>,
        layer: &str,
        shown: &str,
    ) -> Result<Option<PathBuf>> {
        let mut resolved: Vec<std::ffi::OsString> = Vec::new();
        let mut pending: std::collections::VecDeque<std::ffi::OsString> =
            comps.iter().map(|c| c.to_os_string()).collect();
        let mut links = 0;
        while let Some(c) = pending.pop_front() {
            if c == ".." {
                resolved.pop();
                continue;
            }
            if c.is_empty() || c == "." {
                continue;
            }
            let mut path = self.root.clone();
            path.extend(&resolved);
            path.push(&c);
            match fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() => resolved.push(c),
                Ok(m) if m.file_type().is_symlink() => {
                    links += 1;
                    if links > MAX_SYMLINKS {
                        return Err(ImageError::UnsafeEntry {
                            layer: layer.to_owned(),
                            entry: shown.to_owned(),
                            reason: "too many levels of symbolic links".into(),
                        });
                    }
                    let target = fs::read_link(&path).map_err(|e| ImageError::io(&path, e))?;
                    let mut front = Vec::new();
                    for part in target.components() {
                        match part {
                            Component::RootDir | Component::Prefix(_) => resolved.clear(),
                            Component::CurDir => {}
                            Component::ParentDir => front.push("..".into()),
                            Component::Normal(n) => front.push(n.to_os_string()),
                        }
                    }
                    // An absolute target restarted at the root above; `..` entries
                    // are applied in order as they come off the queue.
                    for part in front.into_iter().rev() {
                        pending.push_front(part);
                    }
                }
                Ok(_) => {
                    return Err(ImageError::UnsafeEntry {
                        layer: layer.to_owned(),
                        entry: shown.to_owned(),
                        reason: format!("{} is not a directory", self.relative(&path)),
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => match create.as_deref_mut() {
                    Some(state) => {
                        make_dir(&path)?;
                        self.dir_modes
                            .insert(self.tree_relative(&path), 0o755 | DIR_OWNER_BITS);
                        state.wrote(&path, &self.root);
                        resolved.push(c);
                    }
                    None => return Ok(None),
                },
                Err(e) => return Err(ImageError::io(&path, e)),
            }
        }
        let mut path = self.root.clone();
        path.extend(&resolved);
        Ok(Some(path))
    }

    /// The file a hard link entry names: an archive path, resolved beneath the root
    /// like any entry (its last component not followed), which must exist and not be
    /// a directory.
    fn hard_link_source(&mut self, link: &Path, layer: &str, shown: &str) -> Result<PathBuf> {
        let unsafe_link = |reason: &str| ImageError::UnsafeEntry {
            layer: layer.to_owned(),
            entry: shown.to_owned(),
            reason: format!("hard link to {}: {reason}", link.display()),
        };
        let comps = clean(link).map_err(&unsafe_link)?;
        let Some((name, parents)) = comps.split_last() else {
            return Err(unsafe_link("it names the root"));
        };
        let parent = self
            .resolve_dir(parents, None, layer, shown)?
            .ok_or_else(|| unsafe_link("no such file beneath the image root"))?;
        let source = parent.join(name);
        match fs::symlink_metadata(&source) {
            Ok(m) if m.is_dir() => Err(unsafe_link("it is a directory")),
            Ok(_) => Ok(source),
            Err(_) => Err(unsafe_link("no such file beneath the image root")),
        }
    }

    /// Removes from an opaque directory everything that this layer did not write.
    fn prune_opaque(&self, dir: &Path, state: &LayerState) -> Result<()> {
        let entries = fs::read_dir(dir).map_err(|e| ImageError::io(dir, e))?;
        for entry in entries {
            let path = entry.map_err(|e| ImageError::io(dir, e))?.path();
            let kept = state.written.contains(&path) || state.ancestors.contains(&path);
            if !kept {
                remove_any(&path)?;
            } else if fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
                // Lower layers' content below a kept directory is hidden too.
                self.prune_opaque(&path, state)?;
            }
        }
        Ok(())
    }

    /// A tree path relative to the root (empty for the root itself).
    fn tree_relative(&self, path: &Path) -> PathBuf {
        path.strip_prefix(&self.root).unwrap_or(path).to_path_buf()
    }

    /// The directory at `rel` beneath the root, if every component on the way is a
    /// real directory now: no symlink is followed, so the result is inside the root.
    fn real_dir(&self, rel: &Path) -> Option<PathBuf> {
        let mut path = self.root.clone();
        for c in rel.components() {
            let Component::Normal(name) = c else {
                return None;
            };
            path.push(name);
            if !fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
                return None;
            }
        }
        Some(path)
    }

    /// `/path` of a tree path, for reports.
    fn relative(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.root).unwrap_or(path);
        format!("/{}", rel.display())
    }
}

/// The normal components of an entry name; `..` and absolute names are refused.
fn clean(path: &Path) -> std::result::Result<Vec<&OsStr>, &'static str> {
    let mut out = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir => return Err("the path contains `..`"),
            Component::RootDir | Component::Prefix(_) => return Err("the path is absolute"),
        }
    }
    Ok(out)
}

fn make_dir(path: &Path) -> Result<()> {
    DirBuilder::new()
        .mode(0o700)
        .create(path)
        .map_err(|e| ImageError::io(path, e))
}

fn bad_tar(layer: &str, e: &io::Error) -> ImageError {
    ImageError::Archive(format!("layer {layer} is not a valid tar archive: {e}"))
}

#[cfg(test)]
mod tests {
    //! Hostile and ordinary layers, built in the test: nothing may land outside the
    //! root, and the tree must be what the layers describe.

    use std::fs;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::path::Path;

    use tar::{EntryType, Header};

    use super::*;

    /// One tar entry, written with raw header fields so that hostile names (which the
    /// tar crate's own setters refuse) can be made.
    struct E<'a> {
        name: &'a str,
        kind: EntryType,
        link: &'a str,
        data: &'a [u8],
        mode: u32,
    }

    fn file<'a>(name: &'a str, data: &'a [u8]) -> E<'a> {
        E {
            name,
            kind: EntryType::Regular,
            link: "",
            data,
            mode: 0o644,
        }
    }
    fn dir(name: &str) -> E<'_> {
        E {
            name,
            kind: EntryType::Directory,
            link: "",
            data: b"",
            mode: 0o755,
        }
    }
    fn symlink<'a>(name: &'a str, link: &'a str) -> E<'a> {
        E {
            name,
            kind: EntryType::Symlink,
            link,
            data: b"",
            mode: 0o777,
        }
    }
    fn hardlink<'a>(name: &'a str, link: &'a str) -> E<'a> {
        E {
            name,
            kind: EntryType::Link,
            link,
            data: b"",
            mode: 0o644,
        }
    }

    fn layer(entries: &[E<'_>]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for e in entries {
            let mut h = Header::new_gnu();
            let old = h.as_old_mut();
            old.name[..e.name.len()].copy_from_slice(e.name.as_bytes());
            old.linkname[..e.link.len()].copy_from_slice(e.link.as_bytes());
            h.set_entry_type(e.kind);
            h.set_mode(e.mode);
            h.set_size(e.data.len() as u64);
            h.set_mtime(1_700_000_000);
            h.set_uid(0);
            h.set_gid(0);
            h.set_cksum();
            b.append(&h, e.data).unwrap();
        }
        b.into_inner().unwrap()
    }

    struct Tree {
        _dir: tempfile::TempDir,
        root: std::path::PathBuf,
    }

    fn tree() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        fs::create_dir(&root).unwrap();
        Tree { _dir: dir, root }
    }

    fn unpack(t: &Tree, layers: &[Vec<u8>]) -> Result<UnpackReport> {
        let mut u = Unpacker::new(&t.root);
        for (i, l) in layers.iter().enumerate() {
            u.apply_layer(&l[..], &format!("layer{i}"))?;
        }
        u.finish()
    }

    /// A directory on the host, outside the tree, that hostile entries aim at.
    fn host_target() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("victim"), "host data").unwrap();
        d
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn dot_dot_paths_are_refused_and_nothing_escapes() {
        let t = tree();
        for name in ["../escape", "a/../../escape", "./../escape"] {
            let e = unpack(&t, &[layer(&[file(name, b"x")])]).unwrap_err();
            assert!(matches!(e, ImageError::UnsafeEntry { .. }), "{name}: {e}");
            assert!(e.to_string().contains(".."), "{e}");
        }
        assert!(!t.root.parent().unwrap().join("escape").exists());
        assert!(names(&t.root).is_empty());
    }

    #[test]
    fn absolute_paths_are_refused() {
        let host = host_target();
        let t = tree();
        let name = format!("{}/victim", host.path().display());
        let e = unpack(&t, &[layer(&[file(&name, b"pwned")])]).unwrap_err();
        assert!(e.to_string().contains("absolute"), "{e}");
        assert_eq!(
            fs::read_to_string(host.path().join("victim")).unwrap(),
            "host data"
        );
    }

    #[test]
    fn absolute_symlink_then_write_through_it_stays_in_the_root() {
        let host = host_target();
        let hp = host.path().display().to_string();
        let t = tree();
        // The link sits below the root, so an absolute target must restart at the root,
        // not at the link's directory.
        let report = unpack(
            &t,
            &[layer(&[
                dir("usr"),
                symlink("usr/evil", &hp),
                file("usr/evil/victim", b"pwned"),
                file("usr/evil/new", b"n"),
            ])],
        )
        .unwrap();
        // The host is untouched...
        assert_eq!(
            fs::read_to_string(host.path().join("victim")).unwrap(),
            "host data"
        );
        assert_eq!(names(host.path()), ["victim"]);
        // ...and the writes landed where the link points when the tree is `/`.
        let inside = t.root.join(hp.trim_start_matches('/'));
        assert_eq!(fs::read_to_string(inside.join("victim")).unwrap(), "pwned");
        assert!(inside.join("new").is_file());
        assert_eq!(fs::read_link(t.root.join("usr/evil")).unwrap(), host.path());
        assert_eq!(report.entries, 4);
    }

    #[test]
    fn relative_symlinks_cannot_climb_out_of_the_root() {
        let host = host_target();
        let t = tree();
        let up = "../../../../../../../../../..";
        let through = format!("up{}/victim", host.path().display());
        unpack(&t, &[layer(&[symlink("up", up), file(&through, b"pwned")])]).unwrap();
        assert_eq!(
            fs::read_to_string(host.path().join("victim")).unwrap(),
            "host data"
        );
        let inside = t
            .root
            .join(host.path().strip_prefix("/").unwrap())
            .join("victim");
        assert_eq!(fs::read_to_string(inside).unwrap(), "pwned");
    }

    #[test]
    fn a_symlink_in_the_last_component_is_replaced_not_followed() {
        let host = host_target();
        let victim = host.path().join("victim").display().to_string();
        let t = tree();
        unpack(&t, &[layer(&[symlink("f", &victim), file("f", b"mine")])]).unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "host data");
        let m = fs::symlink_metadata(t.root.join("f")).unwrap();
        assert!(m.is_file());
        assert_eq!(fs::read_to_string(t.root.join("f")).unwrap(), "mine");
        // Same across layers, and for a directory entry over a symlink to a host dir.
        let t = tree();
        let hp = host.path().display().to_string();
        unpack(
            &t,
            &[
                layer(&[symlink("d", &hp)]),
                layer(&[dir("d"), file("d/victim", b"x")]),
            ],
        )
        .unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "host data");
        assert!(fs::symlink_metadata(t.root.join("d")).unwrap().is_dir());
    }

    #[test]
    fn whiteouts_cannot_name_paths_outside_the_root() {
        let host = host_target();
        let t = tree();
        for name in ["../.wh.victim", ".wh..", ".wh..."] {
            let e = unpack(&t, &[layer(&[file(name, b"")])]);
            assert!(e.is_err(), "{name} accepted");
        }
        // Through an absolute symlink: it removes the tree's file, never the host's.
        let hp = host.path().display().to_string();
        let t = tree();
        let inside = format!("{}/victim", hp.trim_start_matches('/'));
        unpack(
            &t,
            &[
                layer(&[file(&inside, b"lower"), symlink("link", &hp)]),
                layer(&[file("link/.wh.victim", b"")]),
            ],
        )
        .unwrap();
        assert_eq!(
            fs::read_to_string(host.path().join("victim")).unwrap(),
            "host data"
        );
        assert!(!t.root.join(&inside).exists());
    }

    #[test]
    fn device_nodes_and_fifos_are_skipped_and_recorded() {
        let t = tree();
        let mut dev = file("dev/sda", b"");
        dev.kind = EntryType::Block;
        let mut null = file("dev/null", b"");
        null.kind = EntryType::Char;
        let mut fifo = file("run/pipe", b"");
        fifo.kind = EntryType::Fifo;
        let r = unpack(&t, &[layer(&[dir("dev"), dev, null, fifo])]).unwrap();
        assert!(!t.root.join("dev/sda").exists());
        assert!(!t.root.join("dev/null").exists());
        assert!(!t.root.join("run/pipe").exists());
        let kinds: Vec<(&str, &str)> = r
            .skipped
            .iter()
            .map(|s| (s.path.as_str(), s.kind.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("/dev/null", "character device"),
                ("/dev/sda", "block device"),
                ("/run/pipe", "fifo")
            ]
        );
    }

    #[test]
    fn setuid_setgid_and_sticky_bits_are_cleared() {
        let t = tree();
        let mut suid = file("bin/su", b"\x7fELF");
        suid.mode = 0o4755;
        let mut sgid = file("bin/wall", b"\x7fELF");
        sgid.mode = 0o2755;
        let mut tmp = dir("tmp");
        tmp.mode = 0o1777;
        let r = unpack(&t, &[layer(&[suid, sgid, tmp])]).unwrap();
        let mode = |p: &str| fs::metadata(t.root.join(p)).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode("bin/su"), 0o755);
        assert_eq!(mode("bin/wall"), 0o755);
        assert_eq!(mode("tmp"), 0o777);
        assert_eq!(r.special_bits_cleared, ["/bin/su", "/bin/wall", "/tmp"]);
    }

    #[test]
    fn hard_links_must_stay_beneath_the_root() {
        let host = host_target();
        let victim = host.path().join("victim");
        let before = fs::metadata(&victim).unwrap().nlink();
        let t = tree();
        // Climbing out, absolute, or through an absolute symlink to the host.
        for link in ["../../victim".to_owned(), victim.display().to_string()] {
            let e = unpack(&t, &[layer(&[hardlink("hl", &link)])]).unwrap_err();
            assert!(matches!(e, ImageError::UnsafeEntry { .. }), "{link}: {e}");
        }
        let hp = host.path().display().to_string();
        let e = unpack(
            &t,
            &[layer(&[
                symlink("evil", &hp),
                hardlink("hl", "evil/victim"),
            ])],
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("no such file beneath the image root"),
            "{e}"
        );
        assert_eq!(fs::metadata(&victim).unwrap().nlink(), before);
        // A link to a directory is refused; an ordinary one works.
        let t = tree();
        assert!(unpack(&t, &[layer(&[dir("d"), hardlink("hl", "d")])]).is_err());
        let t = tree();
        unpack(&t, &[layer(&[file("a", b"same"), hardlink("b", "a")])]).unwrap();
        let (a, b) = (
            fs::metadata(t.root.join("a")).unwrap(),
            fs::metadata(t.root.join("b")).unwrap(),
        );
        assert_eq!((a.ino(), a.nlink()), (b.ino(), 2));
    }

    #[test]
    fn a_link_to_a_symlink_links_the_symlink_itself() {
        let host = host_target();
        let t = tree();
        let victim = host.path().join("victim").display().to_string();
        unpack(&t, &[layer(&[symlink("s", &victim), hardlink("h", "s")])]).unwrap();
        let h = fs::symlink_metadata(t.root.join("h")).unwrap();
        assert!(h.file_type().is_symlink());
        assert_eq!(fs::metadata(&victim).unwrap().nlink(), 1);
    }

    #[test]
    fn whiteouts_and_opaque_directories_hide_lower_layers() {
        let t = tree();
        let lower = layer(&[
            dir("a"),
            file("a/x", b"x"),
            dir("a/sub"),
            file("a/sub/deep", b"d"),
            dir("b"),
            file("b/z", b"z"),
            file("keep", b"k"),
        ]);
        // The opaque marker comes after some of this layer's own entries: they stay.
        let upper = layer(&[
            file("a/new", b"n"),
            dir("a/sub"),
            file("a/sub/fresh", b"f"),
            file("a/.wh..wh..opq", b""),
            file(".wh.b", b""),
            file(".wh.missing", b""),
        ]);
        unpack(&t, &[lower, upper]).unwrap();
        assert_eq!(names(&t.root), ["a", "keep"]);
        assert_eq!(names(&t.root.join("a")), ["new", "sub"]);
        assert_eq!(names(&t.root.join("a/sub")), ["fresh"]);
    }

    #[test]
    fn later_layers_replace_files_dirs_and_links() {
        let t = tree();
        let mut ro = dir("ro");
        ro.mode = 0o555;
        let mut locked = file("ro/locked", b"old");
        locked.mode = 0o000;
        unpack(
            &t,
            &[
                layer(&[ro, locked, dir("d"), file("d/f", b"1"), file("x", b"file")]),
                layer(&[
                    file("ro/locked", b"new"),
                    file("d", b"now a file"),
                    dir("x"),
                    file("x/y", b"y"),
                ]),
            ],
        )
        .unwrap();
        assert_eq!(fs::read_to_string(t.root.join("ro/locked")).unwrap(), "new");
        assert_eq!(fs::read_to_string(t.root.join("d")).unwrap(), "now a file");
        assert!(t.root.join("x/y").is_file());
        // The read-only directory keeps its mode, plus the owner's bits.
        let m = fs::metadata(t.root.join("ro"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(m, 0o755);
        let m = fs::metadata(t.root.join("ro/locked")).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o644);
        assert_eq!(m.mtime(), 1_700_000_000);
    }

    #[test]
    fn symlink_loops_and_files_as_directories_are_errors() {
        let t = tree();
        let e = unpack(
            &t,
            &[layer(&[
                symlink("a", "b"),
                symlink("b", "a"),
                file("a/x", b""),
            ])],
        )
        .unwrap_err();
        assert!(e.to_string().contains("symbolic links"), "{e}");
        let t = tree();
        let e = unpack(&t, &[layer(&[file("f", b""), file("f/x", b"")])]).unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
    }

    #[test]
    fn owners_other_than_root_are_recorded_not_applied() {
        let t = tree();
        let mut b = tar::Builder::new(Vec::new());
        let mut h = Header::new_gnu();
        h.set_path("home/user/file").unwrap();
        h.set_size(2);
        h.set_mode(0o600);
        h.set_uid(1000);
        h.set_gid(1000);
        h.set_cksum();
        b.append(&h, &b"hi"[..]).unwrap();
        let r = unpack(&t, &[b.into_inner().unwrap()]).unwrap();
        assert_eq!(
            r.owners.get("/home/user/file").map(String::as_str),
            Some("1000:1000")
        );
        let me = fs::metadata(t.root.parent().unwrap()).unwrap().uid();
        assert_eq!(
            fs::metadata(t.root.join("home/user/file")).unwrap().uid(),
            me
        );
    }

    #[test]
    fn garbage_is_not_a_layer() {
        let t = tree();
        let e = unpack(&t, &[b"this is not a tar archive at all, just some text that is long enough to fill a block: ".repeat(8)]).unwrap_err();
        assert!(e.to_string().contains("not a valid tar archive"), "{e}");
    }

    #[test]
    fn a_directory_replaced_by_a_symlink_does_not_carry_its_mode_outside() {
        // `x/etc/` (0777) first, then `x` -> outside: the mode recorded for `x/etc` must
        // not be applied through the symlink to the host's `etc`.
        let host = host_target();
        let outside_etc = host.path().join("etc");
        fs::create_dir(&outside_etc).unwrap();
        fs::set_permissions(&outside_etc, fs::Permissions::from_mode(0o750)).unwrap();
        let climb = "../".repeat(8) + host.path().display().to_string().trim_start_matches('/');
        let t = tree();
        let mut wide = dir("x/etc");
        wide.mode = 0o777;
        unpack(&t, &[layer(&[dir("x"), wide, symlink("x", &climb)])]).unwrap();
        let mode = fs::metadata(&outside_etc).unwrap().mode() & 0o7777;
        assert_eq!(mode, 0o750, "the host directory's mode was changed");
        // The same with an absolute target.
        let t = tree();
        let mut wide = dir("y/etc");
        wide.mode = 0o777;
        let abs = host.path().display().to_string();
        unpack(&t, &[layer(&[dir("y"), wide, symlink("y", &abs)])]).unwrap();
        assert_eq!(fs::metadata(&outside_etc).unwrap().mode() & 0o7777, 0o750);
    }

    #[test]
    fn an_opaque_directory_replaced_by_a_symlink_prunes_nothing_outside() {
        // `a/`, its opaque marker, then `a` -> outside: pruning after the layer must not
        // follow the symlink and delete the host's files.
        let host = host_target();
        let climb = "../".repeat(8) + host.path().display().to_string().trim_start_matches('/');
        let t = tree();
        unpack(
            &t,
            &[layer(&[
                dir("a"),
                file("a/.wh..wh..opq", b""),
                symlink("a", &climb),
            ])],
        )
        .unwrap();
        assert_eq!(
            fs::read_to_string(host.path().join("victim")).unwrap(),
            "host data"
        );
        let t = tree();
        let abs = host.path().display().to_string();
        unpack(
            &t,
            &[layer(&[
                dir("b"),
                file("b/.wh..wh..opq", b""),
                symlink("b", &abs),
            ])],
        )
        .unwrap();
        assert_eq!(names(host.path()), ["victim"]);
    }
}
