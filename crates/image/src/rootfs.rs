//! The cache of unpacked root filesystems, one per image configuration
//! (`rootfs/<config hex>/root`), shared by every session that runs the image. A tree
//! is built in `tmp/` and renamed into place whole; sessions hold a shared `flock` on
//! its folder (a [`RootfsLease`]) so that garbage collection leaves it alone.

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use oci_spec::image::{ImageConfiguration, ImageManifest};

use crate::digest::{Digest, HashingReader};
use crate::error::{ImageError, Result};
use crate::manifest;
use crate::progress::{Progress, ProgressEvent};
use crate::store::Store;
use crate::unpack::{UnpackReport, Unpacker};

const ROOT: &str = "root";
const REPORT: &str = "unpack.json";

/// Keeps an unpacked root filesystem from being collected while it is in use.
#[derive(Debug)]
pub struct RootfsLease {
    _dir: File,
}

impl Store {
    /// The unpacked root filesystem of an image, building it first if it is not in
    /// the cache. Must be called under the store's shared lock.
    pub(crate) fn rootfs(
        &self,
        manifest: &ImageManifest,
        config: &ImageConfiguration,
        config_digest: &Digest,
        progress: &mut dyn Progress,
    ) -> Result<(PathBuf, RootfsLease)> {
        if let Some(found) = self.lease(config_digest)? {
            return Ok(found);
        }
        self.unpack_into_cache(manifest, config, config_digest, progress)?;
        self.lease(config_digest)?.ok_or_else(|| {
            ImageError::bad(
                format!(
                    "root filesystem {}",
                    self.rootfs_dir(config_digest).display()
                ),
                "it disappeared right after it was unpacked; try again",
            )
        })
    }

    /// The unpack report of a cached root filesystem, if there is one.
    pub fn unpack_report(&self, config_digest: &Digest) -> Option<UnpackReport> {
        let bytes = fs::read(self.rootfs_dir(config_digest).join(REPORT)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// A shared lock on a complete cached tree, or `None` if there is none.
    fn lease(&self, config_digest: &Digest) -> Result<Option<(PathBuf, RootfsLease)>> {
        let dir = self.rootfs_dir(config_digest);
        let file = match File::open(&dir) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ImageError::io(&dir, e)),
        };
        file.lock_shared().map_err(|e| ImageError::io(&dir, e))?;
        // Garbage collection renames a tree away before it lets go of its lock: if
        // the folder is still here now, it stays while we hold the lock.
        let root = dir.join(ROOT);
        if !root.is_dir() || !dir.join(REPORT).is_file() {
            return Ok(None);
        }
        Ok(Some((root, RootfsLease { _dir: file })))
    }

    fn unpack_into_cache(
        &self,
        manifest: &ImageManifest,
        config: &ImageConfiguration,
        config_digest: &Digest,
        progress: &mut dyn Progress,
    ) -> Result<()> {
        let staging = self.temp_dir("unpack-")?;
        let root = staging.path().join(ROOT);
        fs::create_dir(&root).map_err(|e| ImageError::io(&root, e))?;
        let mut unpacker = Unpacker::new(&root);
        let layers = manifest::layers_of(manifest)?;
        let diff_ids = config.rootfs().diff_ids();
        for (index, ((digest, _, _), diff_id)) in layers.iter().zip(diff_ids).enumerate() {
            progress.event(ProgressEvent::Unpacking { index });
            let diff_id = Digest::parse(diff_id)?;
            let name = digest.to_string();
            let blob = self.open_blob(digest)?;
            let reader = decompressed(BufReader::with_capacity(1 << 20, blob), &name)?;
            let hashed = unpacker.apply_layer(HashingReader::new(reader), &name)?;
            let (actual, _) = hashed
                .finish()
                .map_err(|e| ImageError::Archive(format!("layer {name}: {e}")))?;
            if actual != diff_id {
                return Err(ImageError::DigestMismatch {
                    what: format!("the uncompressed content of layer {name} (its diff id)"),
                    expected: diff_id,
                    actual,
                });
            }
        }
        let report = unpacker.finish()?;
        let bytes = serde_json::to_vec_pretty(&report)
            .map_err(|e| ImageError::bad("unpack report", e.to_string()))?;
        fs::write(staging.path().join(REPORT), bytes)
            .map_err(|e| ImageError::io(staging.path().join(REPORT), e))?;
        let dest = self.rootfs_dir(config_digest);
        match fs::rename(staging.path(), &dest) {
            Ok(()) => {
                // The staging folder is now the cache entry: do not remove it.
                let _ = staging.keep();
                Ok(())
            }
            // Another process unpacked the same image meanwhile; ours goes.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::DirectoryNotEmpty
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(ImageError::io(&dest, e)),
        }
    }
}

/// A layer's tar stream: gzip is recognised by its magic number, whatever the media
/// type says (`docker save` layers are plain, some producers compress anyway).
pub(crate) fn decompressed<R: BufRead + 'static>(
    mut reader: R,
    name: &str,
) -> Result<Box<dyn Read>> {
    let head = reader
        .fill_buf()
        .map_err(|e| ImageError::Archive(format!("reading layer {name}: {e}")))?;
    if head.starts_with(&[0x1f, 0x8b]) {
        Ok(Box::new(flate2::bufread::MultiGzDecoder::new(reader)))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Err(ImageError::Unsupported(format!(
            "layer {name} is zstd-compressed, which this version does not unpack; use gzip"
        )))
    } else {
        Ok(Box::new(reader))
    }
}

/// Whether `path` is a cached tree's root (for tests and `inspect`).
pub fn is_unpacked(path: &Path) -> bool {
    path.is_dir() && path.parent().is_some_and(|p| p.join(REPORT).is_file())
}
