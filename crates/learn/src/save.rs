//! Saving what a learning run learned: [`save`], for `sandbox run --learn NAME`.

use std::path::PathBuf;

use vg_policy::config::parse_learned;

use crate::diff::{ProfileDiff, diff};
use crate::learn::Learned;
use crate::render::Header;
use crate::store::{ProfileStore, StoreError};

/// What [`save`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaveOutcome {
    /// There was no profile of that name: written.
    Created { path: PathBuf },
    /// There was one, and `replace` was given: written over it. `diff` is from the old
    /// to the new one.
    Replaced { path: PathBuf, diff: ProfileDiff },
    /// There is one and `replace` was not given: nothing was written. Show `diff`
    /// (empty when only comments differ), ask, and call [`save`] again with `replace`.
    Exists { path: PathBuf, diff: ProfileDiff },
}

/// Renders `learned` for `header` and saves it as the profile `header.name`. An
/// existing profile is only replaced with `replace`; one that cannot be read or does
/// not load is never replaced (an error says to fix or remove it). The caller creates
/// `learned.to_create` once the profile is written (`Created` or `Replaced`).
pub fn save(
    store: &ProfileStore,
    learned: &Learned,
    header: &Header,
    replace: bool,
) -> Result<SaveOutcome, StoreError> {
    let name = header.name.as_str();
    let path = store.path_of(name)?;
    let text = learned.to_toml(header);
    // Checked before comparing, so that a failure below is the old file's.
    parse_learned(&text, &path, name).map_err(|error| StoreError::Unloadable {
        name: name.to_owned(),
        error,
    })?;
    let old = match store.read_text(name) {
        Ok((_, old)) => Some(old),
        Err(StoreError::Missing { .. }) => None,
        Err(e) => {
            return Err(StoreError::ExistingUnreadable {
                name: name.to_owned(),
                path,
                reason: e.to_string(),
            });
        }
    };
    let Some(old) = old else {
        return Ok(SaveOutcome::Created {
            path: store.write(name, &text)?,
        });
    };
    let diff = diff(&path, &old, &path, &text).map_err(|e| StoreError::ExistingUnreadable {
        name: name.to_owned(),
        path: path.clone(),
        reason: e.to_string(),
    })?;
    if !replace {
        return Ok(SaveOutcome::Exists { path, diff });
    }
    Ok(SaveOutcome::Replaced {
        path: store.write(name, &text)?,
        diff,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::fs;
    use std::path::Path;
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::context::LearnContext;
    use crate::learn::learn;
    use crate::learn::tests::{FakeHost, observe};
    use crate::observe::Access;
    use crate::store::tests::TempDir;

    fn header(name: &str) -> Header {
        Header {
            name: name.into(),
            command: vec!["tool".into()],
            learned_at: UNIX_EPOCH,
            session_id: "s1".into(),
        }
    }

    fn learned(paths: &[&str]) -> Learned {
        let host = FakeHost::new(paths);
        let accesses: Vec<(&str, Access)> = paths.iter().map(|p| (*p, Access::Read)).collect();
        let cx = LearnContext::new("/home/u".into(), Vec::new(), &host);
        learn(&observe(&accesses), &cx)
    }

    #[test]
    fn created_then_asked_then_replaced() {
        let tmp = TempDir::new();
        let store = ProfileStore::new(tmp.0.join("profiles"));
        let first = learned(&["/home/u/.config/a/x"]);
        let outcome = save(&store, &first, &header("tool"), false).unwrap();
        let path = tmp.0.join("profiles/tool.toml");
        assert_eq!(outcome, SaveOutcome::Created { path: path.clone() });
        let saved = fs::read_to_string(&path).unwrap();

        // Learned again: without replace, nothing is written and the diff is shown.
        let second = learned(&["/home/u/.config/b/x"]);
        let outcome = save(&store, &second, &header("tool"), false).unwrap();
        let SaveOutcome::Exists { diff, .. } = outcome else {
            panic!("{outcome:?}");
        };
        assert_eq!(diff.removed, ["read-only /home/u/.config/a"]);
        assert_eq!(diff.added, ["read-only /home/u/.config/b"]);
        assert_eq!(fs::read_to_string(&path).unwrap(), saved);

        // The same run again: an empty diff, still asked.
        let outcome = save(&store, &first, &header("tool"), false).unwrap();
        assert!(matches!(outcome, SaveOutcome::Exists { ref diff, .. } if diff.is_empty()));

        let outcome = save(&store, &second, &header("tool"), true).unwrap();
        assert!(matches!(outcome, SaveOutcome::Replaced { ref diff, .. } if diff.added.len() == 1));
        assert_eq!(
            store.read("tool").unwrap().settings.read_only,
            [Path::new("/home/u/.config/b")]
        );
    }

    #[test]
    fn a_corrupt_existing_profile_is_never_replaced() {
        let tmp = TempDir::new();
        let store = ProfileStore::new(&tmp.0);
        let corrupt = "read_only = [\"/a\"\n# hand-edited, broken\n";
        fs::write(tmp.0.join("tool.toml"), corrupt).unwrap();
        for replace in [false, true] {
            let err = save(
                &store,
                &learned(&["/home/u/.config/a/x"]),
                &header("tool"),
                replace,
            )
            .unwrap_err();
            let msg = err.to_string();
            assert!(
                matches!(err, StoreError::ExistingUnreadable { .. }),
                "{msg}"
            );
            assert!(
                msg.contains("profile rm tool") && msg.contains("tool.toml:"),
                "{msg}"
            );
            assert_eq!(
                fs::read_to_string(tmp.0.join("tool.toml")).unwrap(),
                corrupt
            );
        }
    }

    #[test]
    fn bad_names_and_unwritable_folders() {
        let tmp = TempDir::new();
        let store = ProfileStore::new(&tmp.0);
        for name in ["../x", "a/b"] {
            let err = save(&store, &learned(&[]), &header(name), true).unwrap_err();
            assert!(err.to_string().contains("path separator"), "{err}");
        }
        fs::write(tmp.0.join("file"), "").unwrap();
        let store = ProfileStore::new(tmp.0.join("file/profiles"));
        let err = save(&store, &learned(&[]), &header("tool"), false).unwrap_err();
        assert!(
            matches!(err, StoreError::Io { .. })
                || matches!(err, StoreError::ExistingUnreadable { .. }),
            "{err}"
        );
    }
}
