//! `image load`: images from a `docker save` archive (`manifest.json`), an OCI
//! archive (a tar of an OCI layout), or an OCI layout directory (`oci-layout`,
//! `index.json`, `blobs/`). Archives may be gzipped.
//!
//! An archive is read once, front to back: each regular file is staged in the
//! store's `tmp/` while it is hashed, then the index files say which staged files are
//! which blobs; only those enter the store, each checked against the digest its
//! name or descriptor gives.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use oci_spec::image::{Descriptor, ImageIndex};

use crate::digest::{Digest, HashingWriter};
use crate::error::{ImageError, Result};
use crate::manifest::{self, MAX_JSON_BYTES};
use crate::platform::Platform;
use crate::progress::{Progress, ProgressEvent};
use crate::reference::Reference;
use crate::store::{Entry, Store};

/// One image added by a load.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub names: Vec<String>,
    pub entry: Entry,
}

/// Annotations OCI layouts name their images with.
const CONTAINERD_NAME: &str = "io.containerd.image.name";
const OCI_REF_NAME: &str = "org.opencontainers.image.ref.name";

/// Where the files of an archive or layout are.
trait Source {
    /// A small file's bytes, or `None` if there is no such file.
    fn small(&self, name: &str) -> Result<Option<Vec<u8>>>;
    /// Puts a file into the store as a blob, checked against `expected` when given;
    /// returns its digest and size.
    fn commit(&self, store: &Store, name: &str, expected: Option<&Digest>)
    -> Result<(Digest, u64)>;
    /// Whether the file starts with gzip's magic number.
    fn is_gzip(&self, name: &str) -> Result<bool>;
    fn describe(&self) -> String;
}

impl Store {
    /// Loads every image of an archive or layout. `tag` names the image (the archive
    /// must then hold exactly one); without it the names come from the archive.
    pub fn load(
        &self,
        path: &Path,
        tag: Option<&Reference>,
        progress: &mut dyn Progress,
    ) -> Result<Vec<Loaded>> {
        let meta = fs::metadata(path).map_err(|e| {
            ImageError::Archive(format!(
                "cannot read {}: {e}; give the path of a `docker save` archive, an OCI \
                 archive or an OCI layout directory",
                path.display()
            ))
        })?;
        self.adding(|| {
            progress.event(ProgressEvent::Status(&format!(
                "loading {}",
                path.display()
            )));
            if meta.is_dir() {
                let source = DirSource {
                    root: path.to_owned(),
                };
                self.load_from(&source, tag, progress)
            } else {
                let staging = self.temp_dir("load-")?;
                let source = StagedSource::read(path, staging.path())?;
                self.load_from(&source, tag, progress)
            }
        })
    }

    fn load_from(
        &self,
        source: &dyn Source,
        tag: Option<&Reference>,
        progress: &mut dyn Progress,
    ) -> Result<Vec<Loaded>> {
        let images = if let Some(index) = source.small("index.json")? {
            if source.small("oci-layout")?.is_none() {
                return Err(ImageError::Archive(format!(
                    "{} has an index.json but no oci-layout file: it is not an OCI layout",
                    source.describe()
                )));
            }
            self.oci_images(source, &index)?
        } else if let Some(m) = source.small("manifest.json")? {
            self.docker_images(source, &m)?
        } else {
            return Err(ImageError::Archive(format!(
                "{} is neither a `docker save` archive (manifest.json) nor an OCI archive or \
                 layout (oci-layout, index.json)",
                source.describe()
            )));
        };
        if images.is_empty() {
            return Err(ImageError::Archive(format!(
                "{} holds no image",
                source.describe()
            )));
        }
        if tag.is_some() && images.len() > 1 {
            return Err(ImageError::Archive(format!(
                "{} holds {} images; --tag names only one",
                source.describe(),
                images.len()
            )));
        }
        let mut loaded = Vec::new();
        for (manifest_bytes, names) in images {
            let names: Vec<Reference> = match tag {
                Some(t) => vec![t.clone()],
                None => names,
            };
            if names.is_empty() {
                return Err(ImageError::Archive(format!(
                    "{} does not name its image; pass --tag NAME",
                    source.describe()
                )));
            }
            let entry = self.commit_image(&names, &manifest_bytes, None, "load", progress)?;
            loaded.push(Loaded {
                names: names.iter().map(ToString::to_string).collect(),
                entry,
            });
        }
        Ok(loaded)
    }

    /// The images of an OCI layout, each as its manifest's bytes and its names; their
    /// blobs are put into the store on the way.
    fn oci_images(
        &self,
        source: &dyn Source,
        index: &[u8],
    ) -> Result<Vec<(Vec<u8>, Vec<Reference>)>> {
        let what = format!("index.json of {}", source.describe());
        let index =
            ImageIndex::from_reader(index).map_err(|e| ImageError::bad(&what, e.to_string()))?;
        let mut out = Vec::new();
        for desc in index.manifests() {
            let names = names_of(desc)?;
            let mut chosen = desc.clone();
            if desc.media_type().as_ref() == manifest::OCI_INDEX
                || desc.media_type().as_ref() == manifest::DOCKER_LIST
            {
                let bytes = read_blob(self, source, desc)?;
                let nested = ImageIndex::from_reader(&bytes[..])
                    .map_err(|e| ImageError::bad(&what, e.to_string()))?;
                chosen = manifest::select_platform(&nested, &Platform::host(), &what)?.clone();
            }
            let bytes = read_blob(self, source, &chosen)?;
            let manifest::Document::Manifest(m) =
                manifest::parse_document(&bytes, None, &format!("manifest {}", chosen.digest()))?
            else {
                return Err(ImageError::bad(
                    &what,
                    "an index where a manifest should be",
                ));
            };
            commit_descriptor(self, source, m.config())?;
            for layer in m.layers() {
                commit_descriptor(self, source, layer)?;
            }
            out.push((bytes, names));
        }
        Ok(out)
    }

    /// The images of a `docker save` archive, as Docker schema 2 manifests built from
    /// its `manifest.json`.
    fn docker_images(
        &self,
        source: &dyn Source,
        m: &[u8],
    ) -> Result<Vec<(Vec<u8>, Vec<Reference>)>> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Item {
            config: String,
            #[serde(default)]
            repo_tags: Option<Vec<String>>,
            layers: Vec<String>,
        }
        let what = format!("manifest.json of {}", source.describe());
        let items: Vec<Item> =
            serde_json::from_slice(m).map_err(|e| ImageError::bad(&what, e.to_string()))?;
        let mut out = Vec::new();
        // A layer shared by several images of the archive (or listed twice) is looked
        // at once: committing moves a staged file into the store.
        let mut committed: std::collections::HashMap<String, (&str, Digest, u64)> =
            std::collections::HashMap::new();
        for item in items {
            let (config, config_size) = match committed.get(&item.config) {
                Some((_, digest, size)) => (digest.clone(), *size),
                None => {
                    let (digest, size) =
                        source.commit(self, &item.config, digest_in_name(&item.config).as_ref())?;
                    committed.insert(item.config.clone(), ("", digest.clone(), size));
                    (digest, size)
                }
            };
            let mut layers = Vec::new();
            for name in &item.layers {
                if !committed.contains_key(name) {
                    // Before the commit, which moves a staged file into the store.
                    let media = if source.is_gzip(name)? {
                        manifest::DOCKER_LAYER_GZIP
                    } else {
                        manifest::DOCKER_LAYER_TAR
                    };
                    let (digest, size) =
                        source.commit(self, name, digest_in_name(name).as_ref())?;
                    committed.insert(name.clone(), (media, digest, size));
                }
                if let Some((media, digest, size)) = committed.get(name) {
                    layers.push(
                        serde_json::json!({"mediaType": media, "digest": digest, "size": size}),
                    );
                }
            }
            let doc = serde_json::json!({
                "schemaVersion": 2,
                "mediaType": manifest::DOCKER_MANIFEST,
                "config": {"mediaType": manifest::DOCKER_CONFIG, "digest": config, "size": config_size},
                "layers": layers,
            });
            let bytes =
                serde_json::to_vec(&doc).map_err(|e| ImageError::bad(&what, e.to_string()))?;
            let names = item
                .repo_tags
                .unwrap_or_default()
                .iter()
                .map(|t| Reference::parse(t))
                .collect::<Result<Vec<_>>>()?;
            out.push((bytes, names));
        }
        Ok(out)
    }
}

/// The names an OCI layout gives an image: containerd's full name, else the OCI
/// `ref.name` when it is a full reference (a bare tag names no repository).
fn names_of(desc: &Descriptor) -> Result<Vec<Reference>> {
    let Some(ann) = desc.annotations() else {
        return Ok(Vec::new());
    };
    if let Some(full) = ann.get(CONTAINERD_NAME) {
        return Ok(vec![Reference::parse(full)?]);
    }
    match ann.get(OCI_REF_NAME) {
        Some(r) if r.contains('/') || r.contains(':') => Ok(vec![Reference::parse(r)?]),
        _ => Ok(Vec::new()),
    }
}

fn blob_name(digest: &Digest) -> String {
    format!("blobs/sha256/{}", digest.hex())
}

/// `blobs/sha256/HEX` or `HEX.json` (`docker save`'s config) name their digest.
fn digest_in_name(name: &str) -> Option<Digest> {
    let file = name.rsplit('/').next()?;
    let hex = file.strip_suffix(".json").unwrap_or(file);
    if name.starts_with("blobs/sha256/") || file.ends_with(".json") {
        Digest::from_hex(hex)
    } else {
        None
    }
}

fn commit_descriptor(store: &Store, source: &dyn Source, desc: &Descriptor) -> Result<()> {
    let digest = Digest::try_from(desc.digest())?;
    if store.has_blob(&digest) {
        return Ok(());
    }
    let (_, size) = source.commit(store, &blob_name(&digest), Some(&digest))?;
    if size != desc.size() {
        return Err(ImageError::SizeMismatch {
            what: format!("blob {digest} of {}", source.describe()),
            expected: desc.size(),
            actual: size,
        });
    }
    Ok(())
}

/// A manifest or index blob: into the store, then its bytes.
fn read_blob(store: &Store, source: &dyn Source, desc: &Descriptor) -> Result<Vec<u8>> {
    if desc.size() > MAX_JSON_BYTES {
        return Err(ImageError::bad(
            format!("manifest {}", desc.digest()),
            "larger than 4 MiB",
        ));
    }
    commit_descriptor(store, source, desc)?;
    let digest = Digest::try_from(desc.digest())?;
    store.read_blob(&digest, &format!("manifest {digest}"))
}

/// An archive path with `./` and trailing slashes gone; `None` for names that climb
/// out (`..`) or are absolute, which no blob of a valid archive has.
fn normalise(path: &Path) -> Option<String> {
    let mut parts = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(n) => parts.push(n.to_str()?),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(parts.join("/"))
}

/// An OCI layout (or an unpacked `docker save`) in a directory.
struct DirSource {
    root: PathBuf,
}

impl DirSource {
    fn path(&self, name: &str) -> Result<PathBuf> {
        normalise(Path::new(name))
            .filter(|n| !n.is_empty())
            .map(|n| self.root.join(n))
            .ok_or_else(|| ImageError::Archive(format!("{name:?}: a path outside the layout")))
    }
}

impl Source for DirSource {
    fn small(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let path = self.path(name)?;
        match File::open(&path) {
            Ok(f) => read_small(f, &path.display().to_string()).map(Some),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ImageError::io(&path, e)),
        }
    }

    fn commit(
        &self,
        store: &Store,
        name: &str,
        expected: Option<&Digest>,
    ) -> Result<(Digest, u64)> {
        let path = self.path(name)?;
        let open = || File::open(&path).map_err(|e| missing(&path, e));
        let digest = match expected {
            Some(d) => d.clone(),
            None => {
                let mut w = HashingWriter::new(io::sink());
                io::copy(&mut open()?, &mut w).map_err(|e| ImageError::io(&path, e))?;
                w.finish().1
            }
        };
        let what = format!("{} in {}", name, self.describe());
        let size = if store.has_blob(&digest) {
            fs::metadata(&path)
                .map_err(|e| ImageError::io(&path, e))?
                .len()
        } else {
            store.put_blob(&mut open()?, &digest, None, &what, &mut |_| {})?
        };
        Ok((digest, size))
    }

    fn is_gzip(&self, name: &str) -> Result<bool> {
        let path = self.path(name)?;
        starts_gzip(File::open(&path).map_err(|e| missing(&path, e))?)
    }

    fn describe(&self) -> String {
        self.root.display().to_string()
    }
}

/// A tar archive, read once with every regular file staged (hashed) in `tmp/`.
struct StagedSource {
    origin: PathBuf,
    files: HashMap<String, (PathBuf, Digest, u64)>,
    /// Symlinks and hard links inside the archive (newer `docker save` links layer
    /// paths to blobs), resolved to archive paths.
    links: HashMap<String, String>,
}

impl StagedSource {
    fn read(path: &Path, staging: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| ImageError::io(path, e))?;
        let mut reader = BufReader::with_capacity(1 << 20, file);
        let gz = reader
            .fill_buf()
            .map_err(|e| ImageError::io(path, e))?
            .starts_with(&[0x1f, 0x8b]);
        let reader: Box<dyn Read> = if gz {
            Box::new(flate2::bufread::MultiGzDecoder::new(reader))
        } else {
            Box::new(reader)
        };
        let bad = |e: io::Error| {
            ImageError::Archive(format!(
                "{} is not a valid tar archive: {e}",
                path.display()
            ))
        };
        let mut archive = tar::Archive::new(reader);
        let mut files = HashMap::new();
        let mut links = HashMap::new();
        for (n, entry) in archive.entries().map_err(bad)?.enumerate() {
            let mut entry = entry.map_err(bad)?;
            let Some(name) = normalise(&entry.path().map_err(bad)?) else {
                continue;
            };
            match entry.header().entry_type() {
                tar::EntryType::Regular | tar::EntryType::Continuous => {
                    let staged = staging.join(n.to_string());
                    let out = OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .mode(0o600)
                        .open(&staged)
                        .map_err(|e| ImageError::io(&staged, e))?;
                    let mut w = HashingWriter::new(io::BufWriter::new(out));
                    io::copy(&mut entry, &mut w).map_err(bad)?;
                    let (buf, digest, size) = w.finish();
                    buf.into_inner()
                        .map_err(|e| ImageError::io(&staged, e.into_error()))?;
                    files.insert(name, (staged, digest, size));
                }
                tar::EntryType::Symlink | tar::EntryType::Link => {
                    let Some(target) = entry.link_name().map_err(bad)? else {
                        continue;
                    };
                    let joined = if entry.header().entry_type() == tar::EntryType::Symlink {
                        Path::new(&name)
                            .parent()
                            .unwrap_or(Path::new(""))
                            .join(&target)
                    } else {
                        target.into_owned()
                    };
                    if let Some(t) = lexical(&joined) {
                        links.insert(name, t);
                    }
                }
                _ => {}
            }
        }
        Ok(Self {
            origin: path.to_owned(),
            files,
            links,
        })
    }

    fn find(&self, name: &str) -> Option<&(PathBuf, Digest, u64)> {
        let mut name = normalise(Path::new(name))?;
        for _ in 0..16 {
            if let Some(f) = self.files.get(&name) {
                return Some(f);
            }
            name = self.links.get(&name)?.clone();
        }
        None
    }

    fn not_found(&self, name: &str) -> ImageError {
        ImageError::Archive(format!(
            "{} lists {name}, but the archive has no such file; it is incomplete or damaged",
            self.origin.display()
        ))
    }
}

impl Source for StagedSource {
    fn small(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let Some((path, _, _)) = self.find(name) else {
            return Ok(None);
        };
        let f = File::open(path).map_err(|e| ImageError::io(path, e))?;
        read_small(f, name).map(Some)
    }

    fn commit(
        &self,
        store: &Store,
        name: &str,
        expected: Option<&Digest>,
    ) -> Result<(Digest, u64)> {
        let (path, actual, size) = self.find(name).ok_or_else(|| self.not_found(name))?;
        let expected = expected.unwrap_or(actual);
        let what = format!("{name} in {}", self.describe());
        store.commit_staged(path, actual, expected, &what)?;
        Ok((actual.clone(), *size))
    }

    fn is_gzip(&self, name: &str) -> Result<bool> {
        let (path, _, _) = self.find(name).ok_or_else(|| self.not_found(name))?;
        starts_gzip(File::open(path).map_err(|e| ImageError::io(path, e))?)
    }

    fn describe(&self) -> String {
        self.origin.display().to_string()
    }
}

/// Normalises `a/b/../c` lexically; `None` if it climbs above the archive root.
fn lexical(path: &Path) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(n) => parts.push(n.to_str()?),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            _ => return None,
        }
    }
    Some(parts.join("/"))
}

fn read_small(f: File, what: &str) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    f.take(MAX_JSON_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ImageError::Archive(format!("reading {what}: {e}")))?;
    if bytes.len() as u64 > MAX_JSON_BYTES {
        return Err(ImageError::bad(what, "larger than 4 MiB"));
    }
    Ok(bytes)
}

fn starts_gzip(mut f: File) -> Result<bool> {
    let mut magic = [0u8; 2];
    let n = f
        .read(&mut magic)
        .map_err(|e| ImageError::Archive(e.to_string()))?;
    Ok(n == 2 && magic == [0x1f, 0x8b])
}

fn missing(path: &Path, e: io::Error) -> ImageError {
    if e.kind() == io::ErrorKind::NotFound {
        ImageError::Archive(format!(
            "{} is missing: the layout is incomplete",
            path.display()
        ))
    } else {
        ImageError::io(path, e)
    }
}
