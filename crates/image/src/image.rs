//! Images as the rest of Vectra Guard sees them: [`Store::resolve`] for a sandbox,
//! [`Store::list`] and [`Store::inspect`] for the `image` commands, and
//! [`Store::commit_image`], where every way of adding an image ends.

use std::path::PathBuf;

use oci_spec::image::{ImageConfiguration, ImageManifest};
use serde::Serialize;

use crate::digest::Digest;
use crate::error::{ImageError, Result};
use crate::manifest::{self, Document};
use crate::progress::{Progress, Silent};
use crate::reference::Reference;
use crate::rootfs::RootfsLease;
use crate::store::{Entry, Store};
use crate::unpack::UnpackReport;

/// The runtime settings of an image's configuration, as the image gives them
/// (command-line flags override them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RunConfig {
    /// `KEY=VALUE` strings.
    pub env: Vec<String>,
    pub working_dir: Option<String>,
    pub entrypoint: Option<Vec<String>>,
    pub cmd: Option<Vec<String>>,
    /// `user`, `uid`, `user:group` or `uid:gid`, as the image says.
    pub user: Option<String>,
}

impl RunConfig {
    fn of(config: &ImageConfiguration) -> Self {
        let Some(c) = config.config() else {
            return Self::default();
        };
        Self {
            env: c.env().clone().unwrap_or_default(),
            working_dir: c.working_dir().clone().filter(|w| !w.is_empty()),
            entrypoint: c.entrypoint().clone(),
            cmd: c.cmd().clone(),
            user: c.user().clone().filter(|u| !u.is_empty()),
        }
    }
}

/// An image ready to run: its root filesystem is unpacked, and stays in the cache
/// while this value lives.
#[derive(Debug)]
pub struct Image {
    /// The canonical name it was found under (`docker.io/library/debian:bookworm`).
    pub name: String,
    /// The manifest digest: what `name@digest` pins.
    pub digest: Digest,
    /// The registry's digest for the name, when pulled (an index's, for a
    /// multi-platform image).
    pub repo_digest: Option<Digest>,
    /// The image id: the digest of its configuration.
    pub id: Digest,
    pub config: RunConfig,
    /// The unpacked root filesystem: to be mounted read-only, never written to.
    pub rootfs: PathBuf,
    lease: RootfsLease,
}

impl Image {
    /// The lease that keeps the root filesystem in the cache (dropped with the
    /// image; exposed so that a caller can keep it longer than the rest).
    pub fn into_lease(self) -> RootfsLease {
        self.lease
    }
}

/// One row of `image ls`.
#[derive(Debug, Clone, Serialize)]
pub struct ImageSummary {
    pub name: String,
    pub id: Digest,
    pub digest: Digest,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repo_digest: Option<Digest>,
    /// Bytes of the layers as stored (compressed when they came compressed).
    pub size: u64,
    /// The image's creation time, from its configuration.
    pub created: Option<String>,
    pub source: String,
    pub added: String,
}

/// `image inspect`.
#[derive(Debug, Clone, Serialize)]
pub struct Inspect {
    pub name: String,
    pub id: Digest,
    pub digest: Digest,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repo_digest: Option<Digest>,
    pub source: String,
    pub added: String,
    pub created: Option<String>,
    pub architecture: String,
    pub os: String,
    pub config: RunConfig,
    pub layers: Vec<LayerInfo>,
    pub size: u64,
    /// The unpacked root filesystem, if it is in the cache.
    pub rootfs: Option<PathBuf>,
    /// What unpacking skipped or changed.
    pub unpack: Option<UnpackReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LayerInfo {
    pub digest: Digest,
    pub diff_id: String,
    pub size: u64,
    pub media_type: String,
}

impl Store {
    /// The image a sandbox runs: looks `name` up (see [`Store::lookup`]), checks its
    /// manifest and configuration against their digests, and unpacks its root
    /// filesystem into the cache if it is not there yet.
    pub fn resolve(&self, name: &str) -> Result<Image> {
        let (name, entry) = self.lookup_one(name)?;
        let (manifest, config) = self.documents(&entry)?;
        let _using = self.shared_lock()?;
        let (rootfs, lease) = self.rootfs(&manifest, &config, &entry.config, &mut Silent)?;
        Ok(Image {
            name,
            digest: entry.manifest,
            repo_digest: entry.repo_digest,
            id: entry.config,
            config: RunConfig::of(&config),
            rootfs,
            lease,
        })
    }

    /// Every name in the store, sorted.
    pub fn list(&self) -> Result<Vec<ImageSummary>> {
        let index = self.read_index()?;
        let mut out = Vec::new();
        for (name, entry) in index.images {
            let (manifest, config) = self.documents(&entry)?;
            out.push(ImageSummary {
                name,
                size: manifest.layers().iter().map(|l| l.size()).sum(),
                created: config.created().clone(),
                id: entry.config,
                digest: entry.manifest,
                repo_digest: entry.repo_digest,
                source: entry.source,
                added: entry.added,
            });
        }
        Ok(out)
    }

    /// Everything known about the names `input` stands for.
    pub fn inspect(&self, input: &str) -> Result<Vec<Inspect>> {
        let mut out = Vec::new();
        for (name, entry) in self.lookup(input)? {
            let (manifest, config) = self.documents(&entry)?;
            let layers = manifest::layers_of(&manifest)?
                .into_iter()
                .zip(config.rootfs().diff_ids())
                .map(|((digest, size, media_type), diff_id)| LayerInfo {
                    digest,
                    diff_id: diff_id.clone(),
                    size,
                    media_type,
                })
                .collect::<Vec<_>>();
            let dir = self.rootfs_dir(&entry.config).join("root");
            out.push(Inspect {
                name,
                size: layers.iter().map(|l| l.size).sum(),
                layers,
                created: config.created().clone(),
                architecture: config.architecture().to_string(),
                os: config.os().to_string(),
                config: RunConfig::of(&config),
                rootfs: crate::rootfs::is_unpacked(&dir).then_some(dir),
                unpack: self.unpack_report(&entry.config),
                id: entry.config,
                digest: entry.manifest,
                repo_digest: entry.repo_digest,
                source: entry.source,
                added: entry.added,
            });
        }
        Ok(out)
    }

    /// `lookup` for one image (several names of the same image are fine).
    fn lookup_one(&self, input: &str) -> Result<(String, Entry)> {
        let mut found = self.lookup(input)?;
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found
            .into_iter()
            .next()
            .ok_or_else(|| ImageError::NotFound {
                name: input.to_owned(),
                input: input.to_owned(),
            })
    }

    /// The manifest and configuration an entry names, verified.
    fn documents(&self, entry: &Entry) -> Result<(ImageManifest, ImageConfiguration)> {
        let what = format!("manifest {}", entry.manifest);
        let bytes = self.read_blob(&entry.manifest, &what)?;
        let Document::Manifest(manifest) = manifest::parse_document(&bytes, None, &what)? else {
            return Err(ImageError::bad(
                what,
                "it is an index, not an image manifest",
            ));
        };
        let what = format!("config {}", entry.config);
        let config_bytes = self.read_blob(&entry.config, &what)?;
        let config = manifest::parse_config(&config_bytes, manifest.layers().len(), &what)?;
        Ok((*manifest, config))
    }

    /// The last step of every pull, load and import, once the config and layers are
    /// in the store: stores the manifest, unpacks the root filesystem (so that a
    /// layer that cannot be unpacked safely fails now, before the image has a name),
    /// then gives the image its names. Called under the shared lock.
    pub(crate) fn commit_image(
        &self,
        names: &[Reference],
        manifest_bytes: &[u8],
        repo_digest: Option<Digest>,
        source: &str,
        progress: &mut dyn Progress,
    ) -> Result<Entry> {
        let manifest_digest = Digest::of(manifest_bytes);
        let what = format!("manifest {manifest_digest}");
        let Document::Manifest(manifest) = manifest::parse_document(manifest_bytes, None, &what)?
        else {
            return Err(ImageError::bad(
                what,
                "it is an index, not an image manifest",
            ));
        };
        let config_digest = Digest::try_from(manifest.config().digest())?;
        let config_what = format!("config {config_digest}");
        let config_bytes = self.read_blob(&config_digest, &config_what)?;
        let config = manifest::parse_config(&config_bytes, manifest.layers().len(), &config_what)?;
        for (digest, _, _) in manifest::layers_of(&manifest)? {
            if !self.has_blob(&digest) {
                return Err(ImageError::bad(what, format!("layer {digest} is missing")));
            }
        }
        self.put_bytes(manifest_bytes, &manifest_digest, &what)?;
        self.rootfs(&manifest, &config, &config_digest, progress)?;
        let entry = Entry {
            manifest: manifest_digest,
            config: config_digest,
            repo_digest,
            source: source.to_owned(),
            added: vg_records::time::format_rfc3339(std::time::SystemTime::now()),
        };
        for name in names {
            self.tag(name, entry.clone())?;
        }
        Ok(entry)
    }
}
