//! Manifests, indexes and image configurations, OCI and Docker schema 2, parsed and
//! checked before anything they point to is fetched or unpacked.

use oci_spec::image::{Descriptor, ImageConfiguration, ImageIndex, ImageManifest};

use crate::digest::Digest;
use crate::error::{ImageError, Result};
use crate::platform::Platform;

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const OCI_LAYER: &str = "application/vnd.oci.image.layer.v1.tar";
pub const OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
pub const DOCKER_LAYER_GZIP: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";
pub const DOCKER_LAYER_TAR: &str = "application/vnd.docker.image.rootfs.diff.tar";

/// What the registry's `Accept` header asks for, best first.
pub const ACCEPTED: &str = "application/vnd.oci.image.index.v1+json, \
    application/vnd.docker.distribution.manifest.list.v2+json, \
    application/vnd.oci.image.manifest.v1+json, \
    application/vnd.docker.distribution.manifest.v2+json";

/// Manifests and configurations are small; a bigger one is refused rather than held
/// in memory.
pub const MAX_JSON_BYTES: u64 = 4 << 20;

/// A manifest document: either a platform's image or an index of them.
#[derive(Debug)]
pub enum Document {
    Index(Box<ImageIndex>),
    Manifest(Box<ImageManifest>),
}

/// Parses a manifest or index. `content_type` is the registry's header, if any; the
/// document's own `mediaType` wins, then the shape of the JSON.
pub fn parse_document(bytes: &[u8], content_type: Option<&str>, what: &str) -> Result<Document> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Probe {
        schema_version: Option<u32>,
        media_type: Option<String>,
        manifests: Option<serde_json::Value>,
        layers: Option<serde_json::Value>,
    }
    let probe: Probe = serde_json::from_slice(bytes)
        .map_err(|e| ImageError::bad(what, format!("not a JSON manifest: {e}")))?;
    if probe.schema_version == Some(1) {
        return Err(ImageError::Unsupported(format!(
            "{what} is a Docker schema 1 manifest, which is deprecated and not supported; \
             push the image again with a current Docker or skopeo"
        )));
    }
    let media = probe
        .media_type
        .as_deref()
        .or(content_type.map(|c| c.split(';').next().unwrap_or(c).trim()));
    let is_index = match media {
        Some(OCI_INDEX | DOCKER_LIST) => true,
        Some(OCI_MANIFEST | DOCKER_MANIFEST) => false,
        _ => probe.manifests.is_some() && probe.layers.is_none(),
    };
    let parse_err = |e: oci_spec::OciSpecError| ImageError::bad(what, e.to_string());
    if is_index {
        ImageIndex::from_reader(bytes)
            .map(|ix| Document::Index(Box::new(ix)))
            .map_err(parse_err)
    } else {
        let m = ImageManifest::from_reader(bytes).map_err(parse_err)?;
        check_manifest(&m, what)?;
        Ok(Document::Manifest(Box::new(m)))
    }
}

/// The entry of an index that runs on `platform`.
pub fn select_platform<'a>(
    index: &'a ImageIndex,
    platform: &Platform,
    what: &str,
) -> Result<&'a Descriptor> {
    let candidates = || {
        index.manifests().iter().filter_map(|d| {
            let p = d.platform().as_ref()?;
            Some((d, p))
        })
    };
    let found = candidates()
        .filter(|(_, p)| {
            platform.matches(
                &p.os().to_string(),
                &p.architecture().to_string(),
                p.variant().as_deref(),
            )
        })
        // An exact variant beats a missing one.
        .max_by_key(|(_, p)| p.variant().is_some());
    match found {
        Some((d, _)) => Ok(d),
        None => {
            let offered: Vec<String> = candidates()
                .map(|(_, p)| {
                    let mut s = format!("{}/{}", p.os(), p.architecture());
                    if let Some(v) = p.variant() {
                        s.push('/');
                        s.push_str(v);
                    }
                    s
                })
                .filter(|s| s != "unknown/unknown")
                .collect();
            Err(ImageError::Unsupported(format!(
                "{what} has no image for this host's platform {platform} (it offers: {})",
                if offered.is_empty() {
                    "none".to_owned()
                } else {
                    offered.join(", ")
                }
            )))
        }
    }
}

/// How a layer blob is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
}

/// The compression a layer's media type declares; anything but a plain or gzipped
/// tar is refused with the reason.
pub fn layer_compression(media_type: &str) -> Result<Compression> {
    match media_type {
        OCI_LAYER | DOCKER_LAYER_TAR => Ok(Compression::None),
        OCI_LAYER_GZIP | DOCKER_LAYER_GZIP => Ok(Compression::Gzip),
        m if m.contains("zstd") => Err(ImageError::Unsupported(format!(
            "layer media type {m}: zstd-compressed layers are not supported yet; use an \
             image with gzip layers (e.g. re-push it with `skopeo copy --dest-compress-format gzip`)"
        ))),
        m if m.contains("nondistributable") || m.contains("foreign") => {
            Err(ImageError::Unsupported(format!(
                "layer media type {m}: non-distributable (foreign) layers are not supported; \
                 Vectra Guard runs Linux images only"
            )))
        }
        m => Err(ImageError::Unsupported(format!(
            "layer media type {m} is not a filesystem layer this version can unpack"
        ))),
    }
}

/// A manifest whose config and layers this version can use.
fn check_manifest(m: &ImageManifest, what: &str) -> Result<()> {
    let config_type = m.config().media_type().to_string();
    if config_type != OCI_CONFIG && config_type != DOCKER_CONFIG {
        return Err(ImageError::Unsupported(format!(
            "{what} is not a container image (its config is {config_type}, perhaps an \
             artifact such as a Helm chart or a signature)"
        )));
    }
    for layer in m.layers() {
        layer_compression(layer.media_type().as_ref())?;
    }
    Ok(())
}

/// Parses an image configuration and checks that it describes a Linux image with one
/// diff id per layer of `manifest`.
pub fn parse_config(bytes: &[u8], layers: usize, what: &str) -> Result<ImageConfiguration> {
    let config =
        ImageConfiguration::from_reader(bytes).map_err(|e| ImageError::bad(what, e.to_string()))?;
    if config.os().to_string() != "linux" {
        return Err(ImageError::Unsupported(format!(
            "{what} is an image for {}, not Linux",
            config.os()
        )));
    }
    let diff_ids = config.rootfs().diff_ids();
    if diff_ids.len() != layers {
        return Err(ImageError::bad(
            what,
            format!(
                "it lists {} layer diff ids but the manifest has {layers} layers",
                diff_ids.len()
            ),
        ));
    }
    for d in diff_ids {
        Digest::parse(d).map_err(|e| ImageError::bad(what, e.to_string()))?;
    }
    Ok(config)
}

/// The layers of a manifest as (digest, size, media type).
pub fn layers_of(m: &ImageManifest) -> Result<Vec<(Digest, u64, String)>> {
    m.layers()
        .iter()
        .map(|l| {
            Ok((
                Digest::try_from(l.digest())?,
                l.size(),
                l.media_type().to_string(),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const D2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
    const D3: &str = "sha256:3333333333333333333333333333333333333333333333333333333333333333";

    fn index(entries: &[(&str, &str, Option<&str>, &str)]) -> Vec<u8> {
        let manifests: Vec<serde_json::Value> = entries
            .iter()
            .map(|(os, arch, variant, digest)| {
                let mut p = serde_json::json!({"os": os, "architecture": arch});
                if let Some(v) = variant {
                    p["variant"] = (*v).into();
                }
                serde_json::json!({"mediaType": DOCKER_MANIFEST, "digest": digest, "size": 10, "platform": p})
            })
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": DOCKER_LIST, "manifests": manifests
        }))
        .unwrap()
    }

    #[test]
    fn picks_the_host_platform_from_a_manifest_list() {
        let bytes = index(&[
            ("linux", "arm64", Some("v8"), D1),
            ("linux", "amd64", None, D2),
            ("unknown", "unknown", None, D3),
        ]);
        let Document::Index(ix) = parse_document(&bytes, None, "test").unwrap() else {
            panic!("not an index");
        };
        let amd = Platform {
            os: "linux".into(),
            architecture: "amd64".into(),
            variant: None,
        };
        assert_eq!(
            select_platform(&ix, &amd, "t")
                .unwrap()
                .digest()
                .to_string(),
            D2
        );
        let arm = Platform {
            os: "linux".into(),
            architecture: "arm64".into(),
            variant: Some("v8".into()),
        };
        assert_eq!(
            select_platform(&ix, &arm, "t")
                .unwrap()
                .digest()
                .to_string(),
            D1
        );
        let s390 = Platform {
            os: "linux".into(),
            architecture: "s390x".into(),
            variant: None,
        };
        let e = select_platform(&ix, &s390, "t").unwrap_err().to_string();
        assert!(
            e.contains("linux/s390x") && e.contains("linux/arm64/v8, linux/amd64"),
            "{e}"
        );
        assert!(!e.contains("unknown"), "{e}");
    }

    fn manifest(config_type: &str, layer_type: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": DOCKER_MANIFEST,
            "config": {"mediaType": config_type, "digest": D1, "size": 5},
            "layers": [{"mediaType": layer_type, "digest": D2, "size": 7}],
        }))
        .unwrap()
    }

    #[test]
    fn docker_and_oci_manifests_parse_and_odd_ones_are_refused() {
        let m = parse_document(&manifest(DOCKER_CONFIG, DOCKER_LAYER_GZIP), None, "t").unwrap();
        let Document::Manifest(m) = m else { panic!() };
        let layers = layers_of(&m).unwrap();
        assert_eq!(layers[0].0.to_string(), D2);
        assert_eq!(layer_compression(&layers[0].2).unwrap(), Compression::Gzip);
        assert!(parse_document(&manifest(OCI_CONFIG, OCI_LAYER), None, "t").is_ok());
        let e = parse_document(
            &manifest("application/vnd.cncf.helm.config.v1+json", OCI_LAYER),
            None,
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("not a container image"), "{e}");
        let e = parse_document(
            &manifest(OCI_CONFIG, "application/vnd.oci.image.layer.v1.tar+zstd"),
            None,
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("zstd"), "{e}");
        let e = parse_document(
            br#"{"schemaVersion":1,"name":"x","fsLayers":[]}"#,
            None,
            "t",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("schema 1"), "{e}");
        assert!(parse_document(b"not json", None, "t").is_err());
    }

    #[test]
    fn configs_must_be_linux_with_one_diff_id_per_layer() {
        let cfg = |os: &str, ids: &[&str]| {
            serde_json::to_vec(&serde_json::json!({
                "architecture": "amd64", "os": os,
                "config": {"Env": ["PATH=/bin"], "Cmd": ["sh"], "WorkingDir": "/w"},
                "rootfs": {"type": "layers", "diff_ids": ids},
            }))
            .unwrap()
        };
        let c = parse_config(&cfg("linux", &[D1]), 1, "t").unwrap();
        let run = c.config().as_ref().unwrap();
        assert_eq!(run.cmd().as_deref(), Some(&["sh".to_owned()][..]));
        assert!(parse_config(&cfg("linux", &[D1]), 2, "t").is_err());
        assert!(
            parse_config(&cfg("windows", &[D1]), 1, "t")
                .unwrap_err()
                .to_string()
                .contains("windows")
        );
        assert!(parse_config(&cfg("linux", &["sha256:zz"]), 1, "t").is_err());
    }
}
