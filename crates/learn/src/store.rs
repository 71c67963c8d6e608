//! The learned profiles on disk: `NAME.toml` files in
//! `$XDG_CONFIG_HOME/vectraguard/profiles` (or `~/.config/vectraguard/profiles`), the
//! folder `--profile NAME` looks in. The folder is 0700 and each file 0600; a file is
//! replaced atomically (a temporary file in the same folder, fsynced, renamed), so a
//! failed write leaves the previous profile as it was.

use std::fs;
use std::io::{self, ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use vg_policy::config::{
    ConfigError, ProfileNameError, Settings, learned_profile_path, learned_profiles_dir,
    parse_learned, validate_profile_name,
};
use vg_records::layout::{create_private_dir_all, write_atomic};

use crate::render::LEARNED_FROM;

/// How much of a file `list` reads for its first comment.
const SUMMARY_BYTES: u64 = 4096;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    // Transparent: "{0}" would print the message twice where the error is shown
    // with its chain of causes (`{:#}`).
    #[error(transparent)]
    Name(#[from] ProfileNameError),
    #[error(
        "no learned profile '{name}' in {} (hint: `vectraguard profile ls` lists the learned profiles; learn one with `vectraguard sandbox run --learn {name} -- COMMAND`)",
        dir.display()
    )]
    Missing { name: String, dir: PathBuf },
    /// The file is there but does not load: the loader's error, with file and line.
    #[error(transparent)]
    Corrupt(ConfigError),
    #[error(
        "the learned profile '{name}' ({}) already exists and cannot be read, so it is left as it is: {reason} (hint: fix it, or remove it with `vectraguard profile rm {name}`, then learn again)",
        path.display()
    )]
    ExistingUnreadable {
        name: String,
        path: PathBuf,
        reason: String,
    },
    #[error(
        "refusing to save the learned profile '{name}': the file would not load ({error}); nothing was written (this is a bug in Vectra Guard: please report it)"
    )]
    Unloadable { name: String, error: ConfigError },
    #[error("{}: cannot {what}: {error} (hint: {hint})", path.display())]
    Io {
        path: PathBuf,
        what: &'static str,
        error: io::Error,
        hint: String,
    },
}

/// One learned profile, as `list` finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileEntry {
    pub name: String,
    pub path: PathBuf,
    pub size: u64,
    pub modified: Option<SystemTime>,
    /// The file's first line when it is a comment, without the `#`.
    pub summary: Option<String>,
}

impl ProfileEntry {
    /// The command it was learned from, when the first line says (as a learned
    /// profile's does); else the first comment, if any.
    pub fn learned_from(&self) -> Option<&str> {
        let summary = self.summary.as_deref()?;
        Some(summary.strip_prefix(LEARNED_FROM).unwrap_or(summary))
    }
}

/// A learned profile read and loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredProfile {
    pub name: String,
    pub path: PathBuf,
    pub text: String,
    /// What it applies, as `--profile NAME` would load it.
    pub settings: Settings,
}

/// The folder of learned profiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileStore {
    dir: PathBuf,
}

impl ProfileStore {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The folder `--profile` looks in, for the user whose home is `home`
    /// ([`learned_profiles_dir`]).
    pub fn for_user(home: &Path, xdg_config_home: Option<&Path>) -> Self {
        Self::new(learned_profiles_dir(home, xdg_config_home))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `DIR/NAME.toml`, once `name` is checked ([`validate_profile_name`]).
    pub fn path_of(&self, name: &str) -> Result<PathBuf, StoreError> {
        Ok(learned_profile_path(&self.dir, name)?)
    }

    /// The learned profiles, by name; none when the folder does not exist.
    pub fn list(&self) -> Result<Vec<ProfileEntry>, StoreError> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(self.io("list the learned profiles", &self.dir, error)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| self.io("list the learned profiles", &self.dir, e))?;
            let file_name = entry.file_name();
            // Temporary files and anything else that is not a profile name are skipped.
            let Some(name) = file_name
                .to_str()
                .and_then(|n| n.strip_suffix(".toml"))
                .filter(|n| validate_profile_name(n).is_ok())
            else {
                continue;
            };
            let path = entry.path();
            // Followed: a profile may be a link the user made. A broken one is still
            // listed, so that it can be seen and removed.
            let meta = fs::metadata(&path).ok();
            if meta.as_ref().is_some_and(|m| !m.is_file()) {
                continue;
            }
            out.push(ProfileEntry {
                name: name.to_owned(),
                size: meta.as_ref().map_or(0, fs::Metadata::len),
                modified: meta.as_ref().and_then(|m| m.modified().ok()),
                summary: summary(&path),
                path,
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// The text of `name`, unchecked (for `profile show`, which shows a corrupt one too).
    pub fn read_text(&self, name: &str) -> Result<(PathBuf, String), StoreError> {
        let path = self.path_of(name)?;
        match fs::read_to_string(&path) {
            Ok(text) => Ok((path, text)),
            Err(e) if e.kind() == ErrorKind::NotFound => Err(self.missing(name)),
            Err(error) => Err(self.io("read the learned profile", &path, error)),
        }
    }

    /// `name`, read and loaded as `--profile NAME` would.
    pub fn read(&self, name: &str) -> Result<StoredProfile, StoreError> {
        let (path, text) = self.read_text(name)?;
        let mut file = parse_learned(&text, &path, name).map_err(StoreError::Corrupt)?;
        let settings = file.profiles.remove(name).unwrap_or_default();
        Ok(StoredProfile {
            name: name.to_owned(),
            path,
            text,
            settings,
        })
    }

    /// Writes `text` as `name`, replacing any previous one atomically; creates the
    /// folder (0700) when needed. `text` must load as a learned profile: nothing that
    /// `--profile` would refuse is written.
    pub fn write(&self, name: &str, text: &str) -> Result<PathBuf, StoreError> {
        let path = self.path_of(name)?;
        parse_learned(text, &path, name).map_err(|error| StoreError::Unloadable {
            name: name.to_owned(),
            error,
        })?;
        create_private_dir_all(&self.dir)
            .map_err(|e| self.io("create the learned profiles folder", &self.dir, e))?;
        write_atomic(&self.dir, &format!("{name}.toml"), text.as_bytes(), true)
            .map_err(|e| self.io("write the learned profile", &path, e))?;
        Ok(path)
    }

    /// Removes `name`; an error when there is none.
    pub fn remove(&self, name: &str) -> Result<PathBuf, StoreError> {
        let path = self.path_of(name)?;
        match fs::remove_file(&path) {
            Ok(()) => Ok(path),
            Err(e) if e.kind() == ErrorKind::NotFound => Err(self.missing(name)),
            Err(error) => Err(self.io("remove the learned profile", &path, error)),
        }
    }

    fn missing(&self, name: &str) -> StoreError {
        StoreError::Missing {
            name: name.to_owned(),
            dir: self.dir.clone(),
        }
    }

    fn io(&self, what: &'static str, path: &Path, error: io::Error) -> StoreError {
        StoreError::Io {
            path: path.to_path_buf(),
            what,
            error,
            hint: format!(
                "check that {} is a folder you can write (or set XDG_CONFIG_HOME to use another); nothing was replaced",
                self.dir.display()
            ),
        }
    }
}

/// The first line of the file at `path`, when it is a comment.
fn summary(path: &Path) -> Option<String> {
    let mut head = Vec::new();
    fs::File::open(path)
        .ok()?
        .take(SUMMARY_BYTES)
        .read_to_end(&mut head)
        .ok()?;
    let text = String::from_utf8_lossy(&head);
    let first = text.lines().next()?;
    let comment = first.strip_prefix('#')?.trim();
    (!comment.is_empty()).then(|| comment.to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(crate) mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A fresh folder under the system temp dir, removed on drop.
    pub(crate) struct TempDir(pub(crate) PathBuf);

    impl TempDir {
        pub(crate) fn new() -> Self {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let dir = std::env::temp_dir().join(format!(
                "vg-learn-test-{}-{}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            ));
            fs::create_dir_all(&dir).unwrap();
            Self(fs::canonicalize(dir).unwrap())
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    pub(crate) const PROFILE: &str =
        "# Learned from: tool run\nread_only = [\"/home/u/.config/tool\"]\n";

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn write_read_list_remove() {
        let tmp = TempDir::new();
        let store = ProfileStore::new(tmp.0.join("a/profiles"));
        assert_eq!(store.list().unwrap(), []);
        let path = store.write("tool", PROFILE).unwrap();
        assert_eq!(path, tmp.0.join("a/profiles/tool.toml"));
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(store.dir()), 0o700);
        store
            .write("other", "# hand-made\nread_write = [\"/srv/x/y\"]\n")
            .unwrap();
        // Not profiles: skipped.
        fs::write(store.dir().join(".tool.toml.tmp-1-0"), "x").unwrap();
        fs::write(store.dir().join("notes.txt"), "x").unwrap();
        fs::create_dir(store.dir().join("dir.toml")).unwrap();

        let listed = store.list().unwrap();
        let names: Vec<&str> = listed.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["other", "tool"]);
        assert_eq!(listed[1].learned_from(), Some("tool run"));
        assert_eq!(listed[0].learned_from(), Some("hand-made"));
        assert_eq!(listed[1].size, PROFILE.len() as u64);
        assert!(listed[1].modified.is_some());

        let read = store.read("tool").unwrap();
        assert_eq!(read.text, PROFILE);
        assert_eq!(
            read.settings.read_only,
            [PathBuf::from("/home/u/.config/tool")]
        );

        // Replaced whole.
        store.write("tool", "read_only = [\"/a/b/c\"]\n").unwrap();
        assert_eq!(
            store.read("tool").unwrap().settings.read_only,
            [PathBuf::from("/a/b/c")]
        );
        assert_eq!(store.list().unwrap()[1].summary, None);

        assert_eq!(store.remove("tool").unwrap(), path);
        let err = store.remove("tool").unwrap_err();
        assert!(matches!(err, StoreError::Missing { .. }));
        let msg = err.to_string();
        assert!(
            msg.contains("profile ls") && msg.contains("--learn tool"),
            "{msg}"
        );
        assert!(matches!(
            store.read("tool"),
            Err(StoreError::Missing { .. })
        ));
    }

    #[test]
    fn bad_names_are_refused_before_any_file_is_touched() {
        let tmp = TempDir::new();
        let store = ProfileStore::new(tmp.0.join("profiles"));
        for name in ["../x", "a/b", "", ".hidden", "a b"] {
            for result in [
                store.write(name, PROFILE).map(|_| ()),
                store.read(name).map(|_| ()),
                store.remove(name).map(|_| ()),
            ] {
                let err = result.unwrap_err();
                assert!(matches!(err, StoreError::Name(_)), "{name:?}: {err}");
            }
        }
        assert!(!store.dir().exists());
        assert!(!tmp.0.join("x.toml").exists());
    }

    #[test]
    fn a_corrupt_profile_is_an_error_with_file_and_line() {
        let tmp = TempDir::new();
        let store = ProfileStore::new(&tmp.0);
        fs::write(tmp.0.join("bad.toml"), "# x\n\nread_only = [\"/a\"\n").unwrap();
        let err = store.read("bad").unwrap_err();
        assert!(matches!(err, StoreError::Corrupt(_)));
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("{}:", tmp.0.join("bad.toml").display())),
            "{msg}"
        );
        // Its text can still be shown.
        assert!(store.read_text("bad").unwrap().1.starts_with("# x"));
    }

    #[test]
    fn nothing_unloadable_is_written_and_nothing_is_overwritten_by_a_failed_write() {
        let tmp = TempDir::new();
        let store = ProfileStore::new(&tmp.0);
        let corrupt = "read_only = [\n";
        fs::write(tmp.0.join("tool.toml"), corrupt).unwrap();
        let err = store.write("tool", "network = \"sideways\"\n").unwrap_err();
        assert!(matches!(err, StoreError::Unloadable { .. }), "{err}");
        assert_eq!(
            fs::read_to_string(tmp.0.join("tool.toml")).unwrap(),
            corrupt
        );
        let leftovers: Vec<_> = fs::read_dir(&tmp.0).unwrap().collect();
        assert_eq!(leftovers.len(), 1);
    }

    #[test]
    fn an_unwritable_folder_is_a_clear_error() {
        let tmp = TempDir::new();
        // Below a file: no folder can be made there, even by root.
        fs::write(tmp.0.join("file"), "x").unwrap();
        let store = ProfileStore::new(tmp.0.join("file/profiles"));
        let err = store.write("tool", PROFILE).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, StoreError::Io { .. }), "{msg}");
        assert!(
            msg.contains("cannot create the learned profiles folder")
                && msg.contains(&tmp.0.join("file/profiles").display().to_string())
                && msg.contains("XDG_CONFIG_HOME"),
            "{msg}"
        );
        assert!(
            store.list().is_err(),
            "listing below a file is an error too"
        );
        // A profile's own path taken by a folder: the rename fails, the folder stays.
        let store = ProfileStore::new(&tmp.0);
        fs::create_dir(tmp.0.join("taken.toml")).unwrap();
        fs::write(tmp.0.join("taken.toml/keep"), "k").unwrap();
        let err = store.write("taken", PROFILE).unwrap_err();
        assert!(
            err.to_string().contains("cannot write the learned profile"),
            "{err}"
        );
        assert!(tmp.0.join("taken.toml/keep").exists());
        let names: Vec<String> = fs::read_dir(&tmp.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.contains(".tmp-")), "{names:?}");
    }
}
