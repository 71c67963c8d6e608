//! `index.json`: which names the store holds and the digests they stand for.
//! Replaced atomically under `index.lock`, so concurrent `vectraguard` processes
//! neither lose each other's names nor read a torn file.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::OpenOptionsExt;

use serde::{Deserialize, Serialize};

use super::Store;
use crate::digest::Digest;
use crate::error::{ImageError, Result};
use crate::reference::Reference;

const INDEX: &str = "index.json";
const FORMAT: u32 = 1;

/// What one name in the store stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The platform manifest in the store.
    pub manifest: Digest,
    /// The image configuration: the image id, and the key of its root filesystem.
    pub config: Digest,
    /// What the registry calls the image (the index digest when the name pointed to
    /// a multi-platform index), for pulled images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo_digest: Option<Digest>,
    /// `pull`, `load` or `import`.
    pub source: String,
    /// When the name was added (RFC 3339, UTC).
    pub added: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct IndexFile {
    pub format: u32,
    pub images: BTreeMap<String, Entry>,
}

impl Store {
    /// The names in the store, read without a lock (the file is replaced atomically).
    pub(crate) fn read_index(&self) -> Result<IndexFile> {
        let path = self.root.join(INDEX);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(IndexFile {
                    format: FORMAT,
                    images: BTreeMap::new(),
                });
            }
            Err(e) => return Err(ImageError::io(&path, e)),
        };
        let index: IndexFile = serde_json::from_slice(&bytes).map_err(|e| {
            ImageError::bad(
                path.display().to_string(),
                format!("{e}; move it away to start an empty store (the blobs stay)"),
            )
        })?;
        if index.format != FORMAT {
            return Err(ImageError::Unsupported(format!(
                "{} has format {}, this version reads {FORMAT}",
                path.display(),
                index.format
            )));
        }
        Ok(index)
    }

    /// Changes the index under its lock and writes it back atomically (and durably).
    pub(crate) fn update_index<T>(&self, change: impl FnOnce(&mut IndexFile) -> T) -> Result<T> {
        let lock_path = self.root.join("index.lock");
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&lock_path)
            .map_err(|e| ImageError::io(&lock_path, e))?;
        lock.lock().map_err(|e| ImageError::io(&lock_path, e))?;
        let mut index = self.read_index()?;
        let out = change(&mut index);
        let bytes = serde_json::to_vec_pretty(&index)
            .map_err(|e| ImageError::bad("the image index", e.to_string()))?;
        vg_records::layout::write_atomic(&self.root, INDEX, &bytes, true)
            .map_err(|e| ImageError::io(self.root.join(INDEX), e))?;
        Ok(out)
    }

    /// Gives `name` to an image.
    pub(crate) fn tag(&self, name: &Reference, entry: Entry) -> Result<()> {
        self.update_index(|ix| {
            ix.images.insert(name.to_string(), entry);
        })
    }

    /// Finds the names an argument stands for: a name (normalised, `ubuntu` is
    /// `docker.io/library/ubuntu:latest`), `name@sha256:…` matching a stored digest,
    /// or a prefix of an image id (at least 4 hex digits, `sha256:` optional), which
    /// can stand for several names of one image.
    pub fn lookup(&self, input: &str) -> Result<Vec<(String, Entry)>> {
        let index = self.read_index()?;
        let as_ref = Reference::parse(input);
        let not_found = |name: String| ImageError::NotFound {
            name,
            input: input.to_owned(),
        };
        if let Ok(r) = &as_ref {
            let key = r.to_string();
            if let Some(e) = index.images.get(&key) {
                return Ok(vec![(key, e.clone())]);
            }
            if let Some(d) = &r.digest {
                let by_digest: Vec<_> = index
                    .images
                    .iter()
                    .filter(|(k, _)| {
                        k.starts_with(&format!("{}:", r.name()))
                            || k.starts_with(&format!("{}@", r.name()))
                    })
                    .filter(|(_, e)| &e.manifest == d || e.repo_digest.as_ref() == Some(d))
                    .map(|(k, e)| (k.clone(), e.clone()))
                    .collect();
                if !by_digest.is_empty() {
                    return Ok(by_digest);
                }
            }
        }
        let hex = input.strip_prefix("sha256:").unwrap_or(input);
        if hex.len() >= 4 && hex.len() <= 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            let hex = hex.to_ascii_lowercase();
            let matches: Vec<(String, Entry)> = index
                .images
                .iter()
                .filter(|(_, e)| e.config.hex().starts_with(&hex))
                .map(|(k, e)| (k.clone(), e.clone()))
                .collect();
            let mut ids: Vec<&Digest> = matches.iter().map(|(_, e)| &e.config).collect();
            ids.sort();
            ids.dedup();
            match ids.len() {
                0 => {}
                1 => return Ok(matches),
                _ => {
                    return Err(ImageError::Ambiguous {
                        input: input.to_owned(),
                        matches: ids
                            .iter()
                            .map(|d| d.short().to_owned())
                            .collect::<Vec<_>>()
                            .join(", "),
                    });
                }
            }
        }
        // Neither a stored name nor an id: if it is not even a name, say why.
        match as_ref {
            Ok(r) => Err(not_found(r.to_string())),
            Err(e) => Err(e),
        }
    }
}
