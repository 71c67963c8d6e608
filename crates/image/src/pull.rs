//! `image pull`: a manifest (through an index, for the host's platform), its config
//! and layers from a registry into the store, each verified against its digest.

use std::path::Path;

use crate::digest::Digest;
use crate::error::{ImageError, Result};
use crate::manifest::{self, Document};
use crate::platform::Platform;
use crate::progress::{Progress, ProgressEvent};
use crate::reference::Reference;
use crate::registry::Client;
use crate::store::{Entry, Store};

impl Store {
    /// Pulls `reference` for the host's platform. `docker_config` is the Docker
    /// config file to read credentials from, if any.
    pub fn pull(
        &self,
        reference: &Reference,
        docker_config: Option<&Path>,
        progress: &mut dyn Progress,
    ) -> Result<Entry> {
        self.adding(|| {
            let mut client = Client::new(reference, docker_config)?;
            progress.event(ProgressEvent::Status(&format!("resolving {reference}")));
            let (bytes, content_type) = client.manifest(&reference.manifest_ref())?;
            let top = Digest::of(&bytes);
            if let Some(pinned) = &reference.digest
                && &top != pinned
            {
                return Err(ImageError::DigestMismatch {
                    what: format!("the manifest of {reference}"),
                    expected: pinned.clone(),
                    actual: top,
                });
            }
            let what = format!("the manifest of {reference}");
            let manifest_bytes =
                match manifest::parse_document(&bytes, content_type.as_deref(), &what)? {
                    Document::Manifest(_) => bytes,
                    Document::Index(index) => {
                        let platform = Platform::host();
                        let chosen = manifest::select_platform(&index, &platform, &what)?;
                        let digest = Digest::try_from(chosen.digest())?;
                        progress.event(ProgressEvent::Status(&format!(
                            "{reference} is multi-platform: using {platform} ({digest})"
                        )));
                        let (bytes, content_type) = client.manifest(&digest.to_string())?;
                        let actual = Digest::of(&bytes);
                        if actual != digest {
                            return Err(ImageError::DigestMismatch {
                                what: format!("the {platform} manifest of {reference}"),
                                expected: digest,
                                actual,
                            });
                        }
                        match manifest::parse_document(&bytes, content_type.as_deref(), &what)? {
                            Document::Manifest(_) => bytes,
                            Document::Index(_) => {
                                return Err(ImageError::bad(what, "an index inside an index"));
                            }
                        }
                    }
                };
            let Document::Manifest(m) = manifest::parse_document(&manifest_bytes, None, &what)?
            else {
                return Err(ImageError::bad(what, "not an image manifest"));
            };
            let config_digest = Digest::try_from(m.config().digest())?;
            if m.config().size() > manifest::MAX_JSON_BYTES {
                return Err(ImageError::bad(what, "its config is larger than 4 MiB"));
            }
            if !self.has_blob(&config_digest) {
                let mut blob = client.blob(&config_digest)?;
                // Bounded by the announced size, which was just checked.
                self.put_blob(
                    &mut blob.reader,
                    &config_digest,
                    Some(m.config().size()),
                    &format!("the config of {reference}"),
                    &mut |_| {},
                )?;
            }
            let layers = manifest::layers_of(&m)?;
            let sizes: Vec<(Digest, u64)> =
                layers.iter().map(|(d, s, _)| (d.clone(), *s)).collect();
            progress.event(ProgressEvent::Layers { layers: &sizes });
            for (index, (digest, size, _)) in layers.iter().enumerate() {
                if self.has_blob(digest) {
                    progress.event(ProgressEvent::LayerDone {
                        index,
                        cached: true,
                    });
                    continue;
                }
                progress.event(ProgressEvent::LayerStart { index });
                let mut blob = client.blob(digest)?;
                self.put_blob(
                    &mut blob.reader,
                    digest,
                    Some(*size),
                    &format!("layer {digest} of {reference}"),
                    &mut |bytes| progress.event(ProgressEvent::LayerBytes { index, bytes }),
                )?;
                progress.event(ProgressEvent::LayerDone {
                    index,
                    cached: false,
                });
            }
            self.commit_image(
                std::slice::from_ref(reference),
                &manifest_bytes,
                Some(top),
                "pull",
                progress,
            )
        })
    }
}
