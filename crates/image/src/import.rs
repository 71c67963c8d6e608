//! `image import`: a root filesystem tarball (plain or gzipped) becomes a one-layer
//! image with a minimal configuration, as `docker import` does.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::SystemTime;

use crate::digest::{Digest, HashingReader, HashingWriter};
use crate::error::{ImageError, Result};
use crate::manifest;
use crate::platform::Platform;
use crate::progress::{Progress, ProgressEvent};
use crate::reference::Reference;
use crate::rootfs::decompressed;
use crate::store::{Entry, Store};

impl Store {
    /// Imports `tarball` as the image `name`.
    pub fn import(
        &self,
        tarball: &Path,
        name: &Reference,
        progress: &mut dyn Progress,
    ) -> Result<Entry> {
        let mut file = File::open(tarball).map_err(|e| {
            ImageError::Archive(format!(
                "cannot read {}: {e}; give the path of a root filesystem tarball (.tar or .tar.gz)",
                tarball.display()
            ))
        })?;
        if file.metadata().is_ok_and(|m| m.is_dir()) {
            return Err(ImageError::Archive(format!(
                "{} is a directory; make a tarball of it first (tar -C DIR -c .)",
                tarball.display()
            )));
        }
        self.adding(|| {
            progress.event(ProgressEvent::Status(&format!("importing {}", tarball.display())));
            let staging = self.temp_dir("import-")?;
            let staged = staging.path().join("layer");
            let out = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&staged)
                .map_err(|e| ImageError::io(&staged, e))?;
            let mut w = HashingWriter::new(io::BufWriter::with_capacity(1 << 20, out));
            io::copy(&mut file, &mut w).map_err(|e| ImageError::io(tarball, e))?;
            let (buf, blob, size) = w.finish();
            buf.into_inner().map_err(|e| ImageError::io(&staged, e.into_error()))?;

            let reopened = File::open(&staged).map_err(|e| ImageError::io(&staged, e))?;
            let what = tarball.display().to_string();
            let mut reader = BufReader::new(reopened);
            let gzip = io::BufRead::fill_buf(&mut reader)
                .map_err(|e| ImageError::io(&staged, e))?
                .starts_with(&[0x1f, 0x8b]);
            // A plain tar is its own uncompressed content: no second pass.
            let diff_id = if gzip {
                HashingReader::new(decompressed(reader, &what)?)
                    .finish()
                    .map_err(|e| ImageError::Archive(format!("{what}: {e}")))?
                    .0
            } else {
                blob.clone()
            };
            self.commit_staged(&staged, &blob, &blob, &what)?;

            let now = vg_records::time::format_rfc3339(SystemTime::now());
            let config = serde_json::json!({
                "created": now,
                "architecture": Platform::host().architecture,
                "os": "linux",
                "config": {},
                "rootfs": {"type": "layers", "diff_ids": [diff_id]},
                "history": [{"created": now, "created_by": format!("vectraguard image import {}", tarball.display())}],
            });
            let config_bytes = serde_json::to_vec(&config).map_err(|e| ImageError::bad("config", e.to_string()))?;
            let config_digest = Digest::of(&config_bytes);
            self.put_bytes(&config_bytes, &config_digest, "the imported image's config")?;
            let layer_type = if gzip { manifest::OCI_LAYER_GZIP } else { manifest::OCI_LAYER };
            let manifest = serde_json::json!({
                "schemaVersion": 2,
                "mediaType": manifest::OCI_MANIFEST,
                "config": {"mediaType": manifest::OCI_CONFIG, "digest": config_digest, "size": config_bytes.len()},
                "layers": [{"mediaType": layer_type, "digest": blob, "size": size}],
            });
            let manifest_bytes = serde_json::to_vec(&manifest).map_err(|e| ImageError::bad("manifest", e.to_string()))?;
            self.commit_image(std::slice::from_ref(name), &manifest_bytes, None, "import", progress)
        })
    }
}
