//! The image store under `$VECTRAGUARD_HOME/images`:
//!
//! ```text
//! images/
//!   lock               flock: shared while images are added or used, exclusive for gc
//!   index.json         names → manifest and config digests, replaced atomically
//!   index.lock         flock: one writer of index.json at a time
//!   blobs/sha256/HEX   manifests, configs and layers, each verified before it lands
//!   rootfs/HEX/        a root filesystem unpacked from the image whose config is HEX:
//!     root/            the files
//!     unpack.json      what unpacking skipped or changed (devices, setuid bits, owners)
//!   tmp/               downloads and unpacks in progress, renamed into place when done
//! ```
//!
//! Everything enters through `tmp/` and is renamed into place only once complete and
//! verified, so a digest mismatch, a crash or a kill leaves nothing half-written:
//! `tmp/` is emptied by the next garbage collection.

pub(crate) mod gc;
mod index;

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub use gc::{GcReport, RemoveReport};
pub use index::Entry;

use crate::digest::{Digest, HashingWriter};
use crate::error::{ImageError, Result};

/// Blobs are read-only once verified: nothing should ever rewrite one in place.
const BLOB_MODE: u32 = 0o400;

/// An image store, opened (and created if missing) at a folder.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

/// A held `flock`, released on drop.
#[derive(Debug)]
pub(crate) struct Lock {
    _file: File,
}

impl Store {
    /// The store's folder for a Vectra Guard home: `HOME/images`.
    pub fn default_root(vectraguard_home: &Path) -> PathBuf {
        vectraguard_home.join("images")
    }

    /// Opens the store at `root`, creating its folders (mode 0700) when missing.
    pub fn open(root: &Path) -> Result<Self> {
        let store = Self {
            root: root.to_owned(),
        };
        for dir in [
            store.root.clone(),
            store.blobs_dir(),
            store.root.join("rootfs"),
            store.root.join("tmp"),
        ] {
            vg_records::layout::create_private_dir_all(&dir).map_err(|source| {
                ImageError::StoreAccess {
                    path: dir.clone(),
                    source,
                }
            })?;
        }
        Ok(store)
    }

    /// The store's folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn blobs_dir(&self) -> PathBuf {
        self.root.join("blobs").join("sha256")
    }

    /// Where a blob lives once it is in the store.
    pub fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.blobs_dir().join(digest.hex())
    }

    pub(crate) fn tmp_dir(&self) -> PathBuf {
        self.root.join("tmp")
    }

    pub(crate) fn rootfs_dir(&self, config: &Digest) -> PathBuf {
        self.root.join("rootfs").join(config.hex())
    }

    /// Whether the blob is in the store (it was verified when it was put there).
    pub fn has_blob(&self, digest: &Digest) -> bool {
        fs::symlink_metadata(self.blob_path(digest)).is_ok_and(|m| m.is_file())
    }

    /// A new temporary directory in `tmp/`, on the store's filesystem so that it can
    /// be renamed into place.
    pub(crate) fn temp_dir(&self, prefix: &str) -> Result<tempfile::TempDir> {
        tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(self.tmp_dir())
            .map_err(|e| ImageError::io(self.tmp_dir(), e))
    }

    fn temp_file(&self) -> Result<tempfile::NamedTempFile> {
        tempfile::Builder::new()
            .prefix("blob-")
            .tempfile_in(self.tmp_dir())
            .map_err(|e| ImageError::io(self.tmp_dir(), e))
    }

    /// Streams `reader` into the store as the blob `expected`. The bytes go to a
    /// temporary file, are hashed on the way, fsynced, and renamed into place only if
    /// their digest (and size, when known) match; otherwise nothing is kept.
    /// `on_bytes` sees each chunk's length (for progress).
    pub fn put_blob(
        &self,
        reader: &mut dyn Read,
        expected: &Digest,
        expected_size: Option<u64>,
        what: &str,
        on_bytes: &mut dyn FnMut(u64),
    ) -> Result<u64> {
        let tmp = self.temp_file()?;
        let tmp_path = tmp.path().to_owned();
        let mut w = HashingWriter::new(io::BufWriter::with_capacity(1 << 20, tmp));
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(ImageError::Archive(format!("reading {what}: {e}")));
                }
            };
            w.write_all(&buf[..n])
                .map_err(|e| ImageError::io(&tmp_path, e))?;
            on_bytes(n as u64);
            // Stop early on a source that sends more than it announced.
            if let Some(size) = expected_size
                && w.count() > size
            {
                return Err(ImageError::SizeMismatch {
                    what: what.to_owned(),
                    expected: size,
                    actual: w.count(),
                });
            }
        }
        let (buffered, actual, size) = w.finish();
        let tmp = buffered
            .into_inner()
            .map_err(|e| ImageError::io(&tmp_path, e.into_error()))?;
        if let Some(expected_size) = expected_size
            && size != expected_size
        {
            return Err(ImageError::SizeMismatch {
                what: what.to_owned(),
                expected: expected_size,
                actual: size,
            });
        }
        if &actual != expected {
            return Err(ImageError::DigestMismatch {
                what: what.to_owned(),
                expected: expected.clone(),
                actual,
            });
        }
        self.commit_temp(tmp, expected)?;
        Ok(size)
    }

    /// Puts bytes already in memory (a manifest, a config) as a blob.
    pub fn put_bytes(&self, bytes: &[u8], expected: &Digest, what: &str) -> Result<()> {
        if self.has_blob(expected) {
            let actual = Digest::of(bytes);
            if &actual != expected {
                return Err(ImageError::DigestMismatch {
                    what: what.to_owned(),
                    expected: expected.clone(),
                    actual,
                });
            }
            return Ok(());
        }
        self.put_blob(
            &mut &bytes[..],
            expected,
            Some(bytes.len() as u64),
            what,
            &mut |_| {},
        )
        .map(|_| ())
    }

    /// Moves a complete, verified temporary file into `blobs/`.
    fn commit_temp(&self, tmp: tempfile::NamedTempFile, digest: &Digest) -> Result<()> {
        let path = tmp.path().to_owned();
        let file = tmp.as_file();
        file.set_permissions(fs::Permissions::from_mode(BLOB_MODE))
            .and_then(|()| file.sync_all())
            .map_err(|e| ImageError::io(&path, e))?;
        let dest = self.blob_path(digest);
        tmp.persist(&dest)
            .map_err(|e| ImageError::io(&dest, e.error))?;
        sync_dir(&self.blobs_dir())
    }

    /// A staged file (from [`Store::temp_dir`]) whose digest the caller computed while
    /// writing it, moved into `blobs/` if it matches `expected`.
    pub(crate) fn commit_staged(
        &self,
        staged: &Path,
        actual: &Digest,
        expected: &Digest,
        what: &str,
    ) -> Result<()> {
        if actual != expected {
            return Err(ImageError::DigestMismatch {
                what: what.to_owned(),
                expected: expected.clone(),
                actual: actual.clone(),
            });
        }
        if self.has_blob(expected) {
            return Ok(());
        }
        let f = File::open(staged).map_err(|e| ImageError::io(staged, e))?;
        f.set_permissions(fs::Permissions::from_mode(BLOB_MODE))
            .and_then(|()| f.sync_all())
            .map_err(|e| ImageError::io(staged, e))?;
        let dest = self.blob_path(expected);
        fs::rename(staged, &dest).map_err(|e| ImageError::io(&dest, e))?;
        sync_dir(&self.blobs_dir())
    }

    /// Reads a small blob (manifest, config) and checks it against its digest: a blob
    /// changed on disk after it was stored is an error, not an image.
    pub fn read_blob(&self, digest: &Digest, what: &str) -> Result<Vec<u8>> {
        let path = self.blob_path(digest);
        let file = File::open(&path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => ImageError::bad(
                what,
                format!(
                    "blob {digest} is missing from the store; remove the image and add it again"
                ),
            ),
            _ => ImageError::io(&path, e),
        })?;
        let mut bytes = Vec::new();
        file.take(crate::manifest::MAX_JSON_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| ImageError::io(&path, e))?;
        if bytes.len() as u64 > crate::manifest::MAX_JSON_BYTES {
            return Err(ImageError::bad(what, "larger than 4 MiB"));
        }
        let actual = Digest::of(&bytes);
        if &actual != digest {
            return Err(ImageError::DigestMismatch {
                what: format!("{what} in the store ({})", path.display()),
                expected: digest.clone(),
                actual,
            });
        }
        Ok(bytes)
    }

    /// Opens a blob for streaming (a layer); the reader verifies it.
    pub(crate) fn open_blob(&self, digest: &Digest) -> Result<File> {
        let path = self.blob_path(digest);
        File::open(&path).map_err(|e| ImageError::io(&path, e))
    }

    fn lock_file(&self, name: &str) -> Result<File> {
        let path = self.root.join(name);
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|source| ImageError::StoreAccess { path, source })
    }

    /// Held while adding or using images: garbage collection waits for it.
    pub(crate) fn shared_lock(&self) -> Result<Lock> {
        let file = self.lock_file("lock")?;
        file.lock_shared()
            .map_err(|e| ImageError::io(self.root.join("lock"), e))?;
        Ok(Lock { _file: file })
    }

    /// Held by garbage collection: no image is being added meanwhile.
    pub(crate) fn exclusive_lock(&self) -> Result<Lock> {
        let file = self.lock_file("lock")?;
        file.lock()
            .map_err(|e| ImageError::io(self.root.join("lock"), e))?;
        Ok(Lock { _file: file })
    }

    /// The exclusive lock if nobody else holds the store right now.
    pub(crate) fn try_exclusive_lock(&self) -> Result<Option<Lock>> {
        let file = self.lock_file("lock")?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Lock { _file: file })),
            Err(fs::TryLockError::WouldBlock) => Ok(None),
            Err(fs::TryLockError::Error(e)) => Err(ImageError::io(self.root.join("lock"), e)),
        }
    }

    /// Runs an operation that adds content (pull, load, import) under the shared
    /// lock. If it fails, what it had already stored is unreferenced: collect it at
    /// once, unless another process is busy with the store (then the next `image rm`
    /// does).
    pub(crate) fn adding<T>(&self, op: impl FnOnce() -> Result<T>) -> Result<T> {
        let lock = self.shared_lock()?;
        let result = op();
        drop(lock);
        if result.is_err()
            && let Ok(Some(lock)) = self.try_exclusive_lock()
        {
            let _ = self.collect_locked(&lock);
        }
        result
    }
}

/// fsync a folder so that a rename into it survives a power cut.
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| ImageError::io(dir, e))
}

#[cfg(test)]
mod tests {
    //! The store end to end, without a registry: import, load, resolve, remove, and what
    //! is left behind when something fails.

    use std::fs;
    use std::path::Path;

    use super::*;
    use crate::progress::Silent;
    use crate::reference::Reference;

    fn rootfs_tar(extra: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        let mut add = |path: &str, data: &[u8], mode: u32| {
            let mut h = tar::Header::new_gnu();
            h.set_path(path).unwrap();
            h.set_size(data.len() as u64);
            h.set_mode(mode);
            h.set_cksum();
            b.append(&h, data).unwrap();
        };
        add("bin/tool", b"#!/bin/sh\necho hi\n", 0o755);
        add("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n", 0o644);
        for (p, d) in extra {
            add(p, d, 0o644);
        }
        b.into_inner().unwrap()
    }

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("images")).unwrap();
        (dir, store)
    }

    fn count(dir: &Path) -> usize {
        fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
    }

    fn assert_empty(store: &Store) {
        assert_eq!(count(&store.blobs_dir()), 0, "blobs left");
        assert_eq!(count(&store.root.join("rootfs")), 0, "rootfs left");
        assert_eq!(count(&store.tmp_dir()), 0, "tmp left");
    }

    #[test]
    fn import_resolve_and_remove() {
        let (dir, store) = store();
        let tarball = dir.path().join("root.tar");
        fs::write(&tarball, rootfs_tar(&[])).unwrap();
        let name = Reference::parse("local/tool:1").unwrap();
        let entry = store.import(&tarball, &name, &mut Silent).unwrap();
        assert_eq!(entry.source, "import");

        let image = store.resolve("local/tool:1").unwrap();
        assert_eq!(image.name, "docker.io/local/tool:1");
        assert_eq!(image.id, entry.config);
        assert_eq!(
            fs::read_to_string(image.rootfs.join("etc/passwd"))
                .unwrap()
                .lines()
                .count(),
            1
        );
        // By id prefix too.
        assert_eq!(
            store.resolve(&entry.config.hex()[..8]).unwrap().digest,
            entry.manifest
        );
        let listed = store.list().unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].size, fs::metadata(&tarball).unwrap().len());

        // A held image keeps its root filesystem through gc; once dropped, it goes.
        let report = store.remove(&["local/tool:1".into()]).unwrap();
        assert_eq!(report.untagged, ["docker.io/local/tool:1"]);
        assert_eq!(report.collected.rootfs_in_use, 1);
        assert!(image.rootfs.join("bin/tool").is_file());
        drop(image);
        let gc = store.collect().unwrap();
        assert_eq!(gc.rootfs, 1);
        assert_empty(&store);
        assert!(matches!(
            store.resolve("local/tool:1"),
            Err(ImageError::NotFound { .. })
        ));
    }

    #[test]
    fn a_digest_mismatch_leaves_nothing_behind() {
        let (_dir, store) = store();
        let wrong = Digest::of(b"something else");
        let e = store
            .put_blob(&mut &b"payload"[..], &wrong, None, "test blob", &mut |_| {})
            .unwrap_err();
        assert!(matches!(e, ImageError::DigestMismatch { .. }), "{e}");
        let e = store
            .put_blob(
                &mut &b"payload"[..],
                &Digest::of(b"payload"),
                Some(3),
                "test blob",
                &mut |_| {},
            )
            .unwrap_err();
        assert!(matches!(e, ImageError::SizeMismatch { .. }), "{e}");
        assert_empty(&store);
        store
            .put_blob(
                &mut &b"payload"[..],
                &Digest::of(b"payload"),
                Some(7),
                "ok",
                &mut |_| {},
            )
            .unwrap();
        assert!(store.has_blob(&Digest::of(b"payload")));
    }

    /// A `docker save` archive with one image.
    fn docker_save(layer: &[u8], tamper_config_name: bool) -> Vec<u8> {
        let diff_id = Digest::of(layer);
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": "amd64", "os": "linux",
            "config": {"Env": ["PATH=/bin", "GREETING=hello"], "Cmd": ["/bin/tool"], "WorkingDir": "/etc"},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        }))
        .unwrap();
        let mut config_name = format!("{}.json", Digest::of(&config).hex());
        if tamper_config_name {
            config_name = format!("{}.json", Digest::of(b"other").hex());
        }
        let manifest = serde_json::to_vec(&serde_json::json!([{
            "Config": config_name, "RepoTags": ["saved/app:v2"], "Layers": ["abc/layer.tar"],
        }]))
        .unwrap();
        let mut b = tar::Builder::new(Vec::new());
        for (path, data) in [
            ("manifest.json", &manifest[..]),
            (&config_name[..], &config[..]),
            ("abc/layer.tar", layer),
        ] {
            let mut h = tar::Header::new_gnu();
            h.set_path(path).unwrap();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            b.append(&h, data).unwrap();
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn loads_a_docker_save_archive_with_its_config() {
        let (dir, store) = store();
        let archive = dir.path().join("saved.tar");
        fs::write(&archive, docker_save(&rootfs_tar(&[]), false)).unwrap();
        let loaded = store.load(&archive, None, &mut Silent).unwrap();
        assert_eq!(loaded[0].names, ["docker.io/saved/app:v2"]);
        let image = store.resolve("saved/app:v2").unwrap();
        assert_eq!(image.config.env, ["PATH=/bin", "GREETING=hello"]);
        assert_eq!(
            image.config.cmd.as_deref(),
            Some(&["/bin/tool".to_owned()][..])
        );
        assert_eq!(image.config.working_dir.as_deref(), Some("/etc"));
        assert!(image.rootfs.join("bin/tool").is_file());
        drop(image);
        // Loading again is idempotent; --tag renames.
        let again = store
            .load(
                &archive,
                Some(&Reference::parse("other:1").unwrap()),
                &mut Silent,
            )
            .unwrap();
        assert_eq!(again[0].entry.config, loaded[0].entry.config);
        assert_eq!(store.list().unwrap().len(), 2);
    }

    #[test]
    fn a_tampered_archive_is_rejected_whole() {
        let (dir, store) = store();
        let archive = dir.path().join("bad.tar");
        fs::write(&archive, docker_save(&rootfs_tar(&[]), true)).unwrap();
        let e = store.load(&archive, None, &mut Silent).unwrap_err();
        assert!(matches!(e, ImageError::DigestMismatch { .. }), "{e}");
        assert_empty(&store);
        // A layer that cannot be unpacked safely fails the load, and leaves nothing.
        let mut evil = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.as_old_mut().name[..9].copy_from_slice(b"../escape");
        h.set_size(0);
        h.set_mode(0o644);
        h.set_cksum();
        evil.append(&h, &b""[..]).unwrap();
        fs::write(&archive, docker_save(&evil.into_inner().unwrap(), false)).unwrap();
        let e = store.load(&archive, None, &mut Silent).unwrap_err();
        assert!(matches!(e, ImageError::UnsafeEntry { .. }), "{e}");
        assert_empty(&store);
        assert!(store.list().unwrap().is_empty());
    }

    #[test]
    fn names_resolve_by_canonical_form_digest_and_id() {
        let (dir, store) = store();
        let tarball = dir.path().join("root.tar");
        fs::write(&tarball, rootfs_tar(&[])).unwrap();
        let entry = store
            .import(
                &tarball,
                &Reference::parse("127.0.0.1:5000/a/b:t").unwrap(),
                &mut Silent,
            )
            .unwrap();
        let by_digest = format!("127.0.0.1:5000/a/b@{}", entry.manifest);
        assert_eq!(
            store.lookup(&by_digest).unwrap()[0].0,
            "127.0.0.1:5000/a/b:t"
        );
        assert!(matches!(
            store.lookup("a/b:t"),
            Err(ImageError::NotFound { .. })
        ));
        assert!(matches!(
            store.lookup("Bad Name"),
            Err(ImageError::BadReference { .. })
        ));
        let e = store
            .lookup("127.0.0.1:5000/a/b:nope")
            .unwrap_err()
            .to_string();
        assert!(e.contains("vectraguard image pull"), "{e}");
    }

    #[test]
    fn a_layer_shared_by_two_images_of_an_archive_loads() {
        // Two images in one `docker save` archive with the same config and layer, as
        // images sharing a base have their layers listed again.
        let layer = rootfs_tar(&[]);
        let diff_id = Digest::of(&layer);
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": "amd64", "os": "linux", "config": {},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        }))
        .unwrap();
        let config_name = format!("{}.json", Digest::of(&config).hex());
        let manifest = serde_json::to_vec(&serde_json::json!([
            {"Config": config_name, "RepoTags": ["saved/one:1"], "Layers": ["l/layer.tar"]},
            {"Config": config_name, "RepoTags": ["saved/two:2"], "Layers": ["l/layer.tar"]},
        ]))
        .unwrap();
        let mut b = tar::Builder::new(Vec::new());
        for (path, data) in [
            ("manifest.json", &manifest[..]),
            (&config_name[..], &config[..]),
            ("l/layer.tar", &layer[..]),
        ] {
            let mut h = tar::Header::new_gnu();
            h.set_path(path).unwrap();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            b.append(&h, data).unwrap();
        }
        let (dir, store) = store();
        let archive = dir.path().join("shared.tar");
        fs::write(&archive, b.into_inner().unwrap()).unwrap();
        let loaded = store.load(&archive, None, &mut Silent).unwrap();
        assert_eq!(loaded.len(), 2);
        let names: Vec<String> = store.list().unwrap().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["docker.io/saved/one:1", "docker.io/saved/two:2"]);
    }
}
