//! `sandbox run --image`: a sandbox whose root is an image from the store, with the
//! image's user mapped to the unprivileged host identity and its Env, WorkingDir,
//! Entrypoint and Cmd applied under the flags.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use vg_image::{Image, ImageError, Store};
use vg_policy::env::EnvAssignment;
use vg_policy::identity::parse_passwd;

use crate::request::{ImageChoice, PullPolicy};

/// Pulls an image into the store: (store, name).
pub type Puller = dyn FnMut(&Store, &str) -> Result<()>;

/// An image resolved for one session. Holding it keeps the image's root filesystem
/// in the store's cache (`image rm` waits for the session).
pub struct ImageRun {
    pub image: Image,
    /// The image's user inside the sandbox: uid and gid.
    pub inside: (u32, u32),
    pub user: String,
    pub home: PathBuf,
}

impl ImageRun {
    /// Finds `name` in `store`, pulling it as `pull` says with `pull_image` (the
    /// front end's, which shows the progress its own way).
    pub fn prepare(
        store: &Store,
        name: &str,
        pull: PullPolicy,
        pull_image: &mut Puller,
    ) -> Result<Self> {
        if pull == PullPolicy::Always {
            pull_image(store, name)?;
        }
        let image = match store.resolve(name) {
            Ok(image) => image,
            // Never implicitly off to Docker Hub for a name typed without a host:
            // it is most likely an image meant to be here (a typo of one would
            // otherwise fetch and run whatever public image has that name).
            Err(ImageError::NotFound { .. })
                if pull == PullPolicy::Missing && !vg_image::Reference::names_registry(name) =>
            {
                bail!(
                    "the image {name} is not in the image store, and its name has no registry host, so it is not pulled implicitly: \
                     import it (`vectraguard image import ROOTFS.tar --tag {name}`, `vectraguard image load ARCHIVE`), \
                     pull it (`vectraguard image pull {name}` takes it from Docker Hub, or give the registry: REGISTRY/{name}), \
                     or pass --pull always; `vectraguard image ls` lists the store"
                );
            }
            Err(ImageError::NotFound { .. }) if pull == PullPolicy::Missing => {
                pull_image(store, name)?;
                store.resolve(name)?
            }
            Err(e @ ImageError::NotFound { .. }) => {
                return Err(anyhow!(e).context(format!(
                    "--pull never: {name} is not in the image store; run `vectraguard image pull {name}` first, or drop --pull never"
                )));
            }
            Err(e) => return Err(anyhow!(e).context(format!("cannot use the image {name}"))),
        };
        let (inside, user, home) = user_of(&image)?;
        Ok(Self {
            image,
            inside,
            user,
            home,
        })
    }

    /// The command: Docker's rules. The entrypoint (the image's, or `--entrypoint`,
    /// where an empty one clears it) comes first, then the arguments given, or else the
    /// image's Cmd (which `--entrypoint` also clears). A shell is run as asked.
    pub fn argv(
        &self,
        given: Vec<String>,
        entrypoint: Option<&str>,
        shell: bool,
    ) -> Result<Vec<String>> {
        if shell {
            return Ok(given);
        }
        let config = &self.image.config;
        let mut argv: Vec<String> = match entrypoint {
            Some("") => Vec::new(),
            Some(e) => vec![e.to_owned()],
            None => config.entrypoint.clone().unwrap_or_default(),
        };
        if !given.is_empty() {
            argv.extend(given);
        } else if entrypoint.is_none() {
            argv.extend(config.cmd.clone().unwrap_or_default());
        }
        if argv.is_empty() {
            bail!(
                "the image {} has no Entrypoint or Cmd: give the command to run after `--`",
                self.image.name
            );
        }
        Ok(argv)
    }

    /// The image's environment (`KEY=VALUE`), to apply before the user's.
    pub fn env(&self) -> Vec<EnvAssignment> {
        self.image
            .config
            .env
            .iter()
            .filter_map(|kv| {
                let (k, v) = kv.split_once('=')?;
                (!k.is_empty()).then(|| EnvAssignment {
                    key: k.to_owned(),
                    value: Some(v.to_owned()),
                })
            })
            .collect()
    }

    /// The image's WorkingDir, when absolute.
    pub fn workdir(&self) -> Option<PathBuf> {
        self.image
            .config
            .working_dir
            .as_deref()
            .and_then(|w| vg_policy::paths::normalize_absolute(Path::new(w)))
    }
}

/// The image's `User` as ids inside the sandbox, with its name and home: root when it
/// sets none; names are looked up in the image's own `/etc/passwd` and `/etc/group`.
fn user_of(image: &Image) -> Result<((u32, u32), String, PathBuf)> {
    let Some(spec) = image.config.user.as_deref() else {
        return Ok(((0, 0), "root".into(), "/root".into()));
    };
    let passwd = parse_passwd(&read_image_file(&image.rootfs, "etc/passwd").unwrap_or_default());
    let (user, group) = match spec.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (spec, None),
    };
    let entry = match user.parse::<u32>() {
        Ok(uid) => passwd.iter().find(|e| e.uid == uid).cloned().map(Ok).unwrap_or(Err(uid)),
        Err(_) => Ok(passwd
            .iter()
            .find(|e| e.name == user)
            .cloned()
            .with_context(|| {
                format!(
                    "the image's User '{user}' is not in the image's /etc/passwd: the image is inconsistent; fix its User (a numeric uid works without an entry)"
                )
            })?),
    };
    let (uid, name, home, primary_gid) = match entry {
        Ok(e) => (e.uid, e.name, e.home, e.gid),
        Err(uid) => (uid, uid.to_string(), PathBuf::from("/"), 0),
    };
    let gid = match group {
        None => primary_gid,
        Some(g) => match g.parse::<u32>() {
            Ok(gid) => gid,
            Err(_) => group_id(&image.rootfs, g).with_context(|| {
                format!("the image's group '{g}' is not in its /etc/group; fix the image's User")
            })?,
        },
    };
    Ok(((uid, gid), name, home))
}

fn group_id(rootfs: &Path, name: &str) -> Option<u32> {
    read_image_file(rootfs, "etc/group")?
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 3 && f[0] == name)
        .and_then(|f| f[2].parse().ok())
}

/// A small text file of the image, read without following any symlink (the image
/// could point it anywhere on the host); `None` if it is not a plain file.
fn read_image_file(rootfs: &Path, rel: &str) -> Option<String> {
    let mut path = rootfs.to_path_buf();
    for part in Path::new(rel).components() {
        path.push(part);
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if meta.file_type().is_symlink() {
            return None;
        }
    }
    let meta = std::fs::symlink_metadata(&path).ok()?;
    (meta.is_file() && meta.len() < 1 << 20)
        .then(|| std::fs::read_to_string(&path).ok())
        .flatten()
}

/// An [`crate::plan::ImageSource`] for front ends that never run images: refuses.
pub fn none(choice: &ImageChoice) -> Result<ImageRun> {
    bail!("cannot run the image {}: no image store given", choice.name)
}

/// An [`crate::plan::ImageSource`] over the default image store
/// ([`crate::home::images_root`]), pulling with `pull_image` as the choice says.
pub fn from_store(pull_image: &mut Puller) -> impl FnMut(&ImageChoice) -> Result<ImageRun> + '_ {
    move |choice| {
        let store = Store::open(&crate::home::images_root()?)?;
        ImageRun::prepare(&store, &choice.name, choice.pull, pull_image)
    }
}
