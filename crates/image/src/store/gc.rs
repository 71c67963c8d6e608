//! Removing names and collecting what no name needs any more: blobs, unpacked root
//! filesystems, and whatever an interrupted operation left in `tmp/`.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io;
use std::path::Path;

use serde::Serialize;

use super::{Lock, Store};
use crate::digest::Digest;
use crate::error::{ImageError, Result};
use crate::manifest::{self, Document};

/// What `image rm` did.
#[derive(Debug, Default, Serialize)]
pub struct RemoveReport {
    /// The names removed.
    pub untagged: Vec<String>,
    /// What garbage collection freed afterwards.
    pub collected: GcReport,
}

/// What garbage collection removed.
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct GcReport {
    pub blobs: usize,
    pub blob_bytes: u64,
    pub rootfs: usize,
    /// Unpacked root filesystems kept because a sandbox is using them.
    pub rootfs_in_use: usize,
}

impl Store {
    /// Removes names (each as [`Store::lookup`] resolves it; nothing is removed if
    /// one is unknown), then collects what no remaining name needs.
    pub fn remove(&self, inputs: &[String]) -> Result<RemoveReport> {
        let mut names = BTreeSet::new();
        for input in inputs {
            for (name, _) in self.lookup(input)? {
                names.insert(name);
            }
        }
        let untagged = self.update_index(|ix| {
            names
                .iter()
                .filter(|n| ix.images.remove(*n).is_some())
                .cloned()
                .collect::<Vec<_>>()
        })?;
        let collected = self.collect()?;
        Ok(RemoveReport {
            untagged,
            collected,
        })
    }

    /// Garbage collection: waits until no image is being added, then removes every
    /// blob and root filesystem that no name refers to, except root filesystems a
    /// running sandbox holds, and empties `tmp/`.
    pub fn collect(&self) -> Result<GcReport> {
        let lock = self.exclusive_lock()?;
        self.collect_locked(&lock)
    }

    pub(crate) fn collect_locked(&self, _exclusive: &Lock) -> Result<GcReport> {
        let index = self.read_index()?;
        let mut blobs: BTreeSet<Digest> = BTreeSet::new();
        let mut rootfs: BTreeSet<String> = BTreeSet::new();
        for entry in index.images.values() {
            blobs.insert(entry.manifest.clone());
            blobs.insert(entry.config.clone());
            rootfs.insert(entry.config.hex().to_owned());
            // A damaged manifest keeps its layers out of the referenced set: they are
            // collected, and the image must be added again anyway.
            if let Ok(bytes) = self.read_blob(&entry.manifest, "manifest")
                && let Ok(Document::Manifest(m)) =
                    manifest::parse_document(&bytes, None, "manifest")
                && let Ok(layers) = manifest::layers_of(&m)
            {
                blobs.extend(layers.into_iter().map(|(d, _, _)| d));
            }
        }
        let mut report = GcReport::default();
        for entry in read_dir(&self.blobs_dir())? {
            let name = entry.file_name();
            let keep = name
                .to_str()
                .and_then(Digest::from_hex)
                .is_some_and(|d| blobs.contains(&d));
            if !keep {
                let path = entry.path();
                let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
                remove_any(&path)?;
                report.blobs += 1;
                report.blob_bytes += size;
            }
        }
        let tmp = self.tmp_dir();
        for entry in read_dir(&self.root.join("rootfs"))? {
            let name = entry.file_name();
            if name.to_str().is_some_and(|n| rootfs.contains(n)) {
                continue;
            }
            let path = entry.path();
            // A sandbox holds a shared lock on the folder while it runs from it.
            let Ok(dir) = File::open(&path) else {
                remove_any(&path)?;
                continue;
            };
            match dir.try_lock() {
                Ok(()) => {}
                Err(fs::TryLockError::WouldBlock) => {
                    report.rootfs_in_use += 1;
                    continue;
                }
                Err(fs::TryLockError::Error(e)) => return Err(ImageError::io(&path, e)),
            }
            // Out of `rootfs/` first, so that nobody finds a half-removed tree there.
            let trash = tmp.join(format!(
                "trash-{}-{}",
                name.to_string_lossy(),
                std::process::id()
            ));
            fs::rename(&path, &trash).map_err(|e| ImageError::io(&path, e))?;
            drop(dir);
            remove_any(&trash)?;
            report.rootfs += 1;
        }
        // With the exclusive lock held no operation is in progress: whatever is in
        // tmp/ was left by one that was interrupted.
        for entry in read_dir(&tmp)? {
            remove_any(&entry.path())?;
        }
        Ok(report)
    }
}

fn read_dir(dir: &Path) -> Result<Vec<fs::DirEntry>> {
    match fs::read_dir(dir) {
        Ok(rd) => rd
            .collect::<io::Result<Vec<_>>>()
            .map_err(|e| ImageError::io(dir, e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(ImageError::io(dir, e)),
    }
}

/// Removes a file or a whole tree. Unpacked trees always keep their directories
/// writable by their owner, so this needs no permission changes.
pub(crate) fn remove_any(path: &Path) -> Result<()> {
    let result = match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    };
    result.map_err(|e| ImageError::io(path, e))
}
