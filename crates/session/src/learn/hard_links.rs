//! Sensitive files under other names: a learned profile never grants a hard link to
//! one. `vg_policy::sensitive` and [`super::withheld`] name places; a hard link is
//! the same file by another name, anywhere on the same file system, so it is found by
//! identity, device and inode (session-24 red team, round 2 F2a: a hard link to an AI
//! agent's login file, read while learning, was granted with its folder).
//!
//! Only a file with more than one name can have another: [`SensitiveFiles::find`]
//! keeps those of the sensitive places, which on most machines are none, and then
//! nothing more is read. Otherwise each folder a profile would grant is walked for
//! them ([`SensitiveFiles::names_within`]), and each name found is withheld like a
//! sensitive place, so that learning grants around it.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use vg_policy::sensitive::Sensitive;

/// Entries looked at in one place or one granted folder. A sensitive place holds
/// few; a granted folder this large is withheld whole rather than left unchecked.
const MAX_WALKED: usize = 200_000;

/// Files of the sensitive places that have other names, by identity.
#[derive(Debug, Default)]
pub(super) struct SensitiveFiles {
    by_id: HashMap<(u64, u64), Found>,
}

/// What a name of a sensitive file is withheld as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Found {
    category: Sensitive,
    /// Readable, never writable (a shell startup file), as its place is.
    write_only: bool,
}

impl SensitiveFiles {
    /// The files under `places` (each a file or a folder, not followed through
    /// symlinks) with more than one name.
    pub(super) fn find(places: &[vg_learn::Withheld]) -> Self {
        let mut by_id = HashMap::new();
        for place in places {
            let found = Found {
                category: place.category,
                write_only: place.write_only,
            };
            // A place too large to walk whole keeps what was seen: the bound is far
            // above what any of these folders holds.
            let _ = walk(&place.path, |_, meta| {
                if meta.nlink() > 1 {
                    // The stricter of two places holding the same file.
                    let entry = by_id.entry((meta.dev(), meta.ino())).or_insert(found);
                    entry.write_only &= found.write_only;
                }
            });
        }
        Self { by_id }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// The names under `grant` (the file itself, or anything below the folder) of
    /// these files, to be withheld; the folder itself when it is too large to look
    /// through.
    pub(super) fn names_within(&self, grant: &Path) -> Vec<vg_learn::Withheld> {
        if self.is_empty() {
            return Vec::new();
        }
        let mut names = Vec::new();
        let whole = walk(grant, |path, meta| {
            if meta.nlink() > 1
                && let Some(found) = self.by_id.get(&(meta.dev(), meta.ino()))
            {
                names.push(vg_learn::Withheld {
                    write_only: found.write_only,
                    ..vg_learn::Withheld::new(path, found.category)
                });
            }
        });
        if !whole {
            // Not looked through: fail closed, as if it held one of them.
            let any = self.by_id.values().next().copied();
            if let Some(found) = any {
                return vec![vg_learn::Withheld::new(grant, found.category)];
            }
        }
        names
    }
}

/// Calls `each` for every entry at or below `top` that is not a folder, without
/// following symlinks or crossing into another file system's folders (a hard link
/// never crosses one). `false` when it stopped at [`MAX_WALKED`] entries.
fn walk(top: &Path, mut each: impl FnMut(&Path, &std::fs::Metadata)) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(top) else {
        return true;
    };
    if !meta.is_dir() {
        each(top, &meta);
        return true;
    }
    let mut walked = 0usize;
    let mut folders = vec![top.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            walked += 1;
            if walked > MAX_WALKED {
                return false;
            }
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                folders.push(path);
            } else {
                each(&path, &meta);
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    fn dir(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("vg-links-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    #[test]
    fn a_hard_link_to_a_sensitive_file_is_found_by_identity_under_a_grant() {
        let d = dir("found");
        let codex = d.0.join("home/.codex");
        let work = d.0.join("home/work/deep");
        std::fs::create_dir_all(&codex).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(codex.join("auth.json"), "token").unwrap();
        std::fs::write(codex.join("config.toml"), "one name only").unwrap();
        std::fs::hard_link(codex.join("auth.json"), work.join("notes.txt")).unwrap();
        std::fs::write(d.0.join("home/work/plain.txt"), "token").unwrap();
        let files =
            SensitiveFiles::find(&[vg_learn::Withheld::new(&codex, Sensitive::AgentCredentials)]);
        // Only the file with two names is kept.
        assert_eq!(files.by_id.len(), 1);
        let names = files.names_within(&d.0.join("home/work"));
        assert_eq!(
            names,
            [vg_learn::Withheld::new(
                work.join("notes.txt"),
                Sensitive::AgentCredentials
            )]
        );
        // The link granted as a file is found as well.
        assert_eq!(files.names_within(&work.join("notes.txt")), names);
        assert!(
            files
                .names_within(&d.0.join("home/work/plain.txt"))
                .is_empty()
        );
    }

    #[test]
    fn without_sensitive_files_of_two_names_nothing_is_walked() {
        let d = dir("none");
        std::fs::create_dir_all(d.0.join(".ssh")).unwrap();
        std::fs::write(d.0.join(".ssh/id_ed25519"), "key").unwrap();
        let files = SensitiveFiles::find(&[vg_learn::Withheld::new(
            d.0.join(".ssh"),
            Sensitive::SshKeys,
        )]);
        assert!(files.is_empty());
        assert!(files.names_within(&d.0).is_empty());
    }

    #[test]
    fn a_shell_startup_file_s_other_name_stays_readable() {
        let d = dir("startup");
        std::fs::write(d.0.join(".bashrc"), "alias").unwrap();
        std::fs::create_dir_all(d.0.join("dotfiles")).unwrap();
        std::fs::hard_link(d.0.join(".bashrc"), d.0.join("dotfiles/bashrc")).unwrap();
        let files = SensitiveFiles::find(&[vg_learn::Withheld {
            write_only: true,
            ..vg_learn::Withheld::new(d.0.join(".bashrc"), Sensitive::ShellStartup)
        }]);
        let names = files.names_within(&d.0.join("dotfiles"));
        assert_eq!(names.len(), 1);
        assert!(names[0].write_only);
    }
}
