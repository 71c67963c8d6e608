//! What a folder a learned profile would grant holds on the host that its path does
//! not show: the scan that keeps secrets out of grants where `vg_policy::sensitive`'s
//! names cannot see them. Each one found is withheld like a sensitive place, so that
//! learning grants around it ([`super::around_host_secrets`]):
//! - a sensitive file or folder by another name: a hard link, or a bind mount of it
//!   (of a file or a folder, even the granted folder itself), found by identity,
//!   device and inode (session-24 red team, round 2 F2a: a hard link to an AI
//!   agent's login file was granted with its folder; session-25: `~/.ssh` bound at
//!   `/srv/k2`, or a key bound over a file in a granted folder). [`Secrets::find`]
//!   keeps the identity of everything in the sensitive places; where a place cannot
//!   be looked through whole, every file with more than one name is suspect;
//! - a socket or a FIFO (a read-only mount stops neither `connect` nor a FIFO's
//!   writer: an ssh-agent's socket linked into a project folder), and a file the
//!   policy names sensitive by its name wherever it is (`.env*`), inside the folder;
//! - what cannot be looked through: an unreadable folder, a mount (even of the same
//!   disk), a folder of more than [`MAX_WALKED`] entries (session-25 red team: a hard
//!   link in a folder that could be entered but not listed was granted);
//! - on a mount that may show another file system's files under identities of its
//!   own ([`Mounts::view_of`]: an overlay, FUSE, a network share), and everywhere
//!   once a sensitive place is on one: files of a sensitive file's size and
//!   modification time, a home's sensitive names below any folder, files of two
//!   names where a place was not seen whole, and what the same paths hold in the
//!   folders the mount names (an overlay's layers, a `bindfs` source).
//!
//! The places are followed into what they reach: their symlinks, the mounts inside
//! them, and what the views they are on show them from ([`Secrets::find`]).
//!
//! A grant holding more than [`MAX_HELD`] of these is withheld whole.
//!
//! Symlinks are not followed: inside a sandbox a link leads only where its view does.
//! A secret linked into a granted folder after learning is not seen (the README says
//! so).

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::mount_views::Mounts;

use vg_learn::Withheld;
use vg_policy::sensitive::{Sensitive, sensitive};

/// Entries looked at in one place or one granted folder: far more than any
/// sensitive place holds; a granted folder this large is withheld whole.
const MAX_WALKED: usize = 500_000;

/// Things withheld inside one grant before the grant is withheld whole instead.
const MAX_HELD: usize = 256;

/// Steps of symlinks followed out of the sensitive places.
const LINK_STEPS: usize = 8;

/// Folders a grant's mount shows (an overlay's layers, and theirs) looked through
/// for one grant; more, and the grant is withheld (session-26 red team: overlays
/// whose layers were bind mounts of the overlay itself took minutes).
const MAX_LAYERS: usize = 32;

/// Granted files this large are withheld where a place is on a loop device (see
/// `Secrets::unnamed_image`): smaller than any file system image.
const IMAGE_FLOOR: u64 = 64 * 1024;

/// Modification times before this (a year after 1970) say nothing about which file
/// it is: reproducible builds and Nix's store set them to 0 or 1.
const DISTINCT_TIME: i64 = 365 * 24 * 60 * 60;

/// What the sensitive places hold, by identity, and the real places of the
/// symlinks in them.
#[derive(Debug, Default)]
pub(super) struct Secrets {
    /// Everything in the sensitive places (files and folders), by identity.
    by_id: HashMap<(u64, u64), Found>,
    /// The sensitive places' files that hold something, by size and modification
    /// time ([`Signature`]): how a file is recognised on a mount that shows it
    /// under another identity.
    by_signature: HashMap<Signature, Found>,
    /// File systems (by device) a place could not be looked through whole on, with
    /// its category: any file there with more than one name may be one of its (a
    /// hard link never leaves its file system).
    unknown: HashMap<u64, Sensitive>,
    /// The real paths of symlinks inside the places that lead out of them
    /// (`~/.ssh/id_github -> ~/dotfiles/ssh/id_github`), and out of those in turn.
    linked: Vec<Withheld>,
    /// This mount namespace's mounts: a mount inside a grant is another file
    /// system's view even on the same device (a bind mount of `~/.ssh`), and the
    /// profile's mount would carry it (session-25 red team, round 2).
    mounts: Mounts,
    /// A sensitive place is itself on a mount that shows another file system's
    /// files (a home on an overlay, with its disk at `/media/root-ro`): the files
    /// of every grant are compared by size and time (session-26 red team).
    compare_everywhere: bool,
    /// A place on a file system that keeps its own files could not be looked
    /// through whole: a view (which shows files under its own device) may show one
    /// of its hidden files under a second name. A view's own such folder (a
    /// desktop's FUSE mount) says nothing of other views (session-26 red team,
    /// round 3: gvfs under `/run/user` made every pnpm store file suspect).
    unknown_disk: bool,
    /// A place is on a loop device, whose file its path may not name (session-26
    /// red team, rounds 4 and 5: the name removed, a decoy made at "NAME
    /// (deleted)", the file's mount gone, the file cut short under another name):
    /// every granted file of [`IMAGE_FLOOR`] bytes or more may be it.
    unnamed_image: bool,
}

/// A file's size and modification time in seconds: views round or drop the
/// nanoseconds (`sshfs` shows none, SMB 100 ns steps; session-26 red team), so a
/// file of a secret's size written in the same second is taken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Signature {
    len: u64,
    seconds: i64,
}

impl Signature {
    fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            len: meta.len(),
            seconds: meta.mtime(),
        }
    }
}

/// What a name of a sensitive file is withheld as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Found {
    category: Sensitive,
    /// Readable, never writable (a shell startup file), as its place is.
    write_only: bool,
}

impl Secrets {
    /// Looks through `places` (each a file or a folder), and the places their
    /// symlinks lead to, and theirs, [`LINK_STEPS`] deep (a stow layout's
    /// `~/.ssh -> ~/dotfiles/ssh` whose files are links again: session-25 red team,
    /// round 2).
    pub(super) fn find(places: &[Withheld]) -> Self {
        Self::find_with(
            Self {
                mounts: Mounts::read(),
                ..Self::default()
            },
            places,
        )
    }

    /// [`Self::find`], with the mounts of `secrets`.
    fn find_with(mut secrets: Self, places: &[Withheld]) -> Self {
        let mut next = Vec::new();
        for place in places {
            secrets.look_through(place, &mut next);
        }
        for step in 0..=LINK_STEPS {
            next.retain(|p: &Withheld| !secrets.linked.iter().any(|l| l.path == p.path));
            let these = std::mem::take(&mut next);
            // Deeper than LINK_STEPS: withheld all the same, though not looked
            // through; what a view there shows is withheld too, and compared
            // (session-26 red team, round 3: a ninth link onto a `bindfs` view).
            if step < LINK_STEPS {
                for place in &these {
                    secrets.look_through(place, &mut next);
                }
            } else {
                for place in &these {
                    let (shown, _) = secrets.shown_from(place);
                    // Not looked through, but known by identity: a hard link to
                    // one elsewhere is withheld too (session-26 red team, round 4:
                    // an image eight links away, granted by its other name).
                    for known in shown.iter().chain([place]) {
                        secrets.note_identity(known);
                    }
                    secrets.linked.extend(shown);
                }
            }
            secrets.linked.extend(these);
        }
        secrets
    }

    /// Notes what `place` holds; queues in `linked` the places it leads to: its
    /// symlinks' real places, the mounts inside it (session-26 red team: a key
    /// bound into `$CODEX_HOME/vol` was granted at its source), and the folders a
    /// view it is on shows it from (a stow link into a `bindfs` view: its source
    /// was granted).
    fn look_through(&mut self, place: &Withheld, linked: &mut Vec<Withheld>) {
        let as_place = |path: PathBuf| Withheld {
            path,
            ..place.clone()
        };
        let (shown, on_view) = self.shown_from(place);
        linked.extend(shown);
        let found = Found {
            category: place.category,
            write_only: place.write_only,
        };
        let (by_id, by_signature, unknown, unknown_disk) = (
            &mut self.by_id,
            &mut self.by_signature,
            &mut self.unknown,
            &mut self.unknown_disk,
        );
        let mut not_whole = |device: u64| {
            // Not a host socket folder's (`/run/user`'s tmpfs, systemd's closed
            // `inaccessible` folders in it): no hard link leaves it (session-26
            // red team, round 4).
            *unknown_disk |= !on_view && place.category != Sensitive::HostSocket;
            let category = unknown.entry(device).or_insert(place.category);
            if !place.write_only {
                *category = place.category;
            }
        };
        let whole = walk(&place.path, &self.mounts, |path, meta| match meta {
            Seen::Entry(meta) if meta.file_type().is_symlink() => {
                if let Ok(real) = std::fs::canonicalize(path)
                    && !vg_policy::paths::is_within(&real, &place.path)
                {
                    linked.push(Withheld {
                        path: real,
                        ..place.clone()
                    });
                }
            }
            Seen::Entry(meta) => {
                // The stricter of two places holding the same file.
                let entry = by_id.entry((meta.dev(), meta.ino())).or_insert(found);
                entry.write_only &= found.write_only;
                // Not Vectra Guard's own records: thousands of files, more every
                // second, whose sizes and seconds a project's files would share.
                if meta.is_file()
                    && meta.len() > 0
                    && meta.mtime() >= DISTINCT_TIME
                    && place.category != Sensitive::VectraGuard
                {
                    let entry = by_signature.entry(Signature::of(meta)).or_insert(found);
                    entry.write_only &= found.write_only;
                }
            }
            // A folder another user keeps us out of altogether (root's
            // `~/.kube/cache` after `sudo kubectl`) is no one's to link from but
            // that owner's; one we may enter but not list, or one of our own, hides
            // names that could be linked (session-25 red team: counting the first
            // made every file of two names on the disk a suspect; not counting the
            // last hid a link from a mode-000 folder in `~/.ssh`).
            Seen::Unlisted { device } if searchable(path) || ours(path) => not_whole(device),
            Seen::Unlisted { .. } => {}
            // A mount is looked through as a place of its own: then what it is
            // shown from (a view's folders, a loop device's image) is withheld too
            // and, for a view, its files' sizes and times noted (session-26 red
            // team, round 3: a `bindfs` whose source was moved since). Except a
            // view under the host's socket folders (a desktop's gvfs or document
            // portal under `/run/user`): it carries no socket, and may be a remote
            // share or stalled.
            Seen::Mount { view } => {
                if !(view && place.category == Sensitive::HostSocket) {
                    linked.push(as_place(path.to_path_buf()));
                }
            }
        });
        if let Walked::Stopped { device } = whole {
            not_whole(device);
        }
    }

    /// What `place`'s mount shows it from (a view's folders, a loop device's
    /// image), as places withheld as it is, and whether that mount is a view;
    /// notes what the view says for every grant (compare contents, withhold large
    /// files where a place is on a loop device).
    fn shown_from(&mut self, place: &Withheld) -> (Vec<Withheld>, bool) {
        let view = self.mounts.view_of(&place.path);
        self.compare_everywhere |= view.compare_contents;
        self.unnamed_image |= view.unnamed_image;
        let shown = view
            .layers
            .into_iter()
            .chain(view.images)
            .map(|path| Withheld {
                path,
                ..place.clone()
            })
            .collect();
        (shown, view.compare_contents)
    }

    /// Notes `place`'s own identity (not what is below it).
    fn note_identity(&mut self, place: &Withheld) {
        if let Ok(meta) = std::fs::metadata(&place.path) {
            let found = Found {
                category: place.category,
                write_only: place.write_only,
            };
            let entry = self.by_id.entry((meta.dev(), meta.ino())).or_insert(found);
            entry.write_only &= found.write_only;
        }
    }

    /// The real places of the places' symlinks, withheld as the places are.
    pub(super) fn linked(&self) -> &[Withheld] {
        &self.linked
    }

    /// What inside `grant` (a file or a folder) must be withheld for the profile to
    /// grant it with `write`.
    pub(super) fn held_within(&self, home: &Path, grant: &Path, write: bool) -> Vec<Withheld> {
        let mut looked = HashSet::from([grant.to_path_buf()]);
        self.held_within_view(home, grant, write, &mut looked)
            .unwrap_or_else(|| vec![Withheld::new(grant, Sensitive::Unchecked)])
    }

    /// [`Self::held_within`] of `grant` and of the folders its mount shows it from
    /// (not those in `looked`); `None` when it is to be withheld whole.
    fn held_within_view(
        &self,
        home: &Path,
        grant: &Path,
        write: bool,
        looked: &mut HashSet<PathBuf>,
    ) -> Option<Vec<Withheld>> {
        let view = self.mounts.view_of(grant);
        let compare = view.compare_contents || self.compare_everywhere;
        let mut held = Vec::new();
        let walked = walk(grant, &self.mounts, |path, seen| {
            let meta = match seen {
                Seen::Unlisted { .. } | Seen::Mount { .. } => {
                    held.push(Withheld::new(path, Sensitive::Unchecked));
                    return;
                }
                Seen::Entry(meta) => meta,
            };
            if meta.file_type().is_symlink() {
                return;
            }
            // On a view, a home's sensitive names are sensitive below any folder
            // (`/srv/ov/u/.ssh`): views keep names, whatever they show of times.
            let homes = || compare.then(|| dotted_parents(path)).into_iter().flatten();
            let named = |write: bool| {
                sensitive(home, path, write)
                    .or_else(|| homes().find_map(|home| sensitive(home, path, write)))
            };
            if let Some(category) = named(false) {
                held.push(Withheld::new(path, category));
            } else if write && let Some(category) = named(true) {
                held.push(Withheld {
                    write_only: true,
                    ..Withheld::new(path, category)
                });
            } else if meta.file_type().is_socket() || meta.file_type().is_fifo() {
                // A read-only mount stops neither `connect` nor a FIFO's writer.
                held.push(Withheld::new(path, Sensitive::HostSocket));
            }
            let like = || {
                (compare && meta.is_file())
                    .then(|| self.by_signature.get(&Signature::of(meta)))
                    .flatten()
            };
            if let Some(found) = self.by_id.get(&(meta.dev(), meta.ino())).or_else(like) {
                held.push(Withheld {
                    write_only: found.write_only,
                    ..Withheld::new(path, found.category)
                });
            } else if meta.is_file() && self.unnamed_image && meta.len() >= IMAGE_FLOOR {
                held.push(Withheld::new(path, Sensitive::Unchecked));
            } else if meta.nlink() > 1
                && !meta.is_dir()
                && let Some(category) = self.unknown.get(&meta.dev()).copied().or_else(|| {
                    // A view shows a file under its own device: one of two names
                    // may be one a place hid on any (session-26 red team).
                    (compare && self.unknown_disk).then_some(Sensitive::Unchecked)
                })
            {
                held.push(Withheld::new(path, category));
            }
        });
        if let Walked::Stopped { .. } = walked {
            return None;
        }
        // The same paths in the layers the mount shows, under their own identities,
        // named as the grant shows them.
        for layer in &view.layers {
            if !looked.insert(layer.clone()) {
                continue;
            }
            if looked.len() > MAX_LAYERS {
                return None;
            }
            for found in self.held_within_view(home, layer, write, looked)? {
                let Ok(inside) = found.path.strip_prefix(layer) else {
                    continue;
                };
                held.push(Withheld {
                    path: if inside.as_os_str().is_empty() {
                        grant.to_path_buf()
                    } else {
                        grant.join(inside)
                    },
                    ..found
                });
            }
        }
        // One entry per path (one can be sensitive by its name and by identity).
        held.sort_by(|a, b| a.path.cmp(&b.path));
        held.dedup_by(|a, b| a.path == b.path);
        // A folder holding this many is not granted whole, nor is each withheld one
        // by one (learning would compare every path with every one of them).
        (held.len() <= MAX_HELD).then_some(held)
    }
}

/// What [`walk`] shows of an entry.
enum Seen<'a> {
    /// Not followed if a symlink; a folder is then gone into.
    Entry(&'a std::fs::Metadata),
    /// A folder (on `device`) that could not be listed whole.
    Unlisted { device: u64 },
    /// A mount inside the top (or a folder of another device), not gone into;
    /// `view`: of a file system that may show another's files.
    Mount { view: bool },
}

/// How a [`walk`] ended.
enum Walked {
    /// Everything below the top was seen, or listed as [`Seen::Unlisted`]; a missing
    /// top is nothing to look through.
    Whole,
    /// At [`MAX_WALKED`] entries (on `device`).
    Stopped { device: u64 },
}

/// Calls `each` for `top` and every entry below it, without following symlinks or
/// going into `mounts` or another device's folders.
fn walk(top: &Path, mounts: &Mounts, mut each: impl FnMut(&Path, Seen<'_>)) -> Walked {
    let Ok(meta) = std::fs::symlink_metadata(top) else {
        return Walked::Whole;
    };
    each(top, Seen::Entry(&meta));
    if !meta.is_dir() {
        return Walked::Whole;
    }
    let device = meta.dev();
    let mut walked = 0usize;
    let mut folders = vec![top.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let entries = match std::fs::read_dir(&folder) {
            Ok(entries) => entries,
            // The top too: as a place, a folder another user keeps us out of is
            // judged like any other (session-25 red team, round 4: root's
            // `/run/containerd` on the home's disk made every file of two names
            // a suspect); as a grant, it is withheld.
            Err(_) => {
                each(&folder, Seen::Unlisted { device });
                continue;
            }
        };
        for entry in entries {
            walked += 1;
            if walked > MAX_WALKED {
                return Walked::Stopped { device };
            }
            let Ok(entry) = entry else {
                each(&folder, Seen::Unlisted { device });
                break;
            };
            let path = entry.path();
            // Told by `mountinfo`, not `stat`, which a stalled FUSE server never
            // answers.
            if let Some((_, view)) = mounts.at(&path) {
                each(&path, Seen::Mount { view });
                continue;
            }
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                // Gone meanwhile, or its folder cannot be searched: a name that
                // cannot be looked at is not vouched for.
                each(&folder, Seen::Unlisted { device });
                continue;
            };
            if meta.is_dir() && meta.dev() != device {
                each(&path, Seen::Mount { view: false });
                continue;
            }
            each(&path, Seen::Entry(&meta));
            if meta.is_dir() {
                folders.push(path);
            }
        }
    }
    Walked::Whole
}

/// The folders of `path` whose next name, within its last five, starts with a dot:
/// where a home would be if that name were one of its sensitive places (`.ssh`,
/// `.config/gcloud`, `.local/share/fish/fish_history`).
fn dotted_parents(path: &Path) -> impl Iterator<Item = &Path> {
    path.ancestors()
        .take(5)
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.as_encoded_bytes().starts_with(b"."))
        })
        .filter_map(Path::parent)
}

/// Whether we may enter `folder` (search it), listing it or not.
fn searchable(folder: &Path) -> bool {
    std::fs::symlink_metadata(folder.join(".")).is_ok()
}

/// Whether `path` belongs to the user learning runs as.
fn ours(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.uid() == vg_sandbox::real_ids().0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// The paths of `held`, with their categories, in order.
    fn paths(held: &[Withheld]) -> Vec<(PathBuf, Sensitive)> {
        let mut out: Vec<_> = held.iter().map(|w| (w.path.clone(), w.category)).collect();
        out.sort();
        out
    }

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::set_permissions(
                self.0.join("home/work/locked"),
                std::fs::Permissions::from_mode(0o755),
            );
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    fn dir(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("vg-scan-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("home/work")).unwrap();
        Dir(d)
    }
    fn codex(d: &Dir) -> Withheld {
        Withheld::new(d.0.join("home/.codex"), Sensitive::AgentCredentials)
    }

    #[test]
    fn a_hard_link_to_a_sensitive_file_is_found_by_identity_under_a_grant() {
        let d = dir("found");
        let (home, work) = (d.0.join("home"), d.0.join("home/work"));
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        std::fs::create_dir_all(work.join("deep")).unwrap();
        std::fs::write(home.join(".codex/auth.json"), "token").unwrap();
        std::fs::write(home.join(".codex/config.toml"), "one name only").unwrap();
        std::fs::hard_link(home.join(".codex/auth.json"), work.join("deep/notes.txt")).unwrap();
        std::fs::write(work.join("plain.txt"), "token").unwrap();
        let secrets = Secrets::find(&[codex(&d)]);
        // The folder and its two files, by identity.
        assert_eq!(secrets.by_id.len(), 3);
        assert!(secrets.unknown.is_empty());
        let held = secrets.held_within(&home, &work, false);
        assert_eq!(
            paths(&held),
            [(work.join("deep/notes.txt"), Sensitive::AgentCredentials)]
        );
        // The link granted as a file is found as well.
        assert_eq!(
            paths(&secrets.held_within(&home, &work.join("deep/notes.txt"), false)),
            paths(&held)
        );
        assert!(
            secrets
                .held_within(&home, &work.join("plain.txt"), false)
                .is_empty()
        );
    }

    #[test]
    fn sockets_env_files_and_what_cannot_be_looked_through_are_held() {
        let d = dir("held");
        let (home, work) = (d.0.join("home"), d.0.join("home/work"));
        std::fs::write(work.join(".env.local"), "KEY=1").unwrap();
        let _listener = std::os::unix::net::UnixListener::bind(work.join("agent.sock")).unwrap();
        std::fs::create_dir(work.join("locked")).unwrap();
        std::fs::write(work.join("locked/x"), "x").unwrap();
        std::fs::set_permissions(work.join("locked"), std::fs::Permissions::from_mode(0o311))
            .unwrap();
        let held = Secrets::default().held_within(&home, &work, false);
        let mut want = vec![
            (work.join(".env.local"), Sensitive::EnvFile),
            (work.join("agent.sock"), Sensitive::HostSocket),
        ];
        // Root lists any folder.
        if vg_sandbox::real_ids().0 != 0 {
            want.push((work.join("locked"), Sensitive::Unchecked));
        }
        want.sort();
        assert_eq!(paths(&held), want);
    }

    #[test]
    fn a_place_not_looked_through_whole_makes_every_file_of_two_names_suspect() {
        let d = dir("unknown");
        let (home, work) = (d.0.join("home"), d.0.join("home/work"));
        std::fs::write(work.join("a"), "a").unwrap();
        std::fs::hard_link(work.join("a"), work.join("b")).unwrap();
        let device = std::fs::metadata(&work).unwrap().dev();
        let secrets = Secrets {
            unknown: HashMap::from([(device, Sensitive::SshKeys)]),
            ..Secrets::default()
        };
        assert_eq!(
            paths(&secrets.held_within(&home, &work, false)),
            [
                (work.join("a"), Sensitive::SshKeys),
                (work.join("b"), Sensitive::SshKeys)
            ]
        );
    }

    #[test]
    fn a_symlink_out_of_a_sensitive_place_withholds_its_real_place() {
        let d = dir("linked");
        let home = d.0.join("home");
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        std::fs::create_dir_all(home.join("dotfiles")).unwrap();
        std::fs::write(home.join("dotfiles/auth.json"), "token").unwrap();
        std::os::unix::fs::symlink(
            home.join("dotfiles/auth.json"),
            home.join(".codex/auth.json"),
        )
        .unwrap();
        let secrets = Secrets::find(&[codex(&d)]);
        assert_eq!(
            paths(secrets.linked()),
            [(home.join("dotfiles/auth.json"), Sensitive::AgentCredentials)]
        );
    }

    /// A bind mount shows the same folder or file, by the same identity, under
    /// another path: the granted folder itself, or a file in it (session-25 red
    /// team: `~/.ssh` bound at `/srv/k2`; a key bound over `/srv/app/notes.txt`).
    #[test]
    fn a_sensitive_folder_or_file_under_another_path_is_held_by_identity() {
        let d = dir("bound");
        let home = d.0.join("home");
        std::fs::create_dir_all(home.join(".codex/sub")).unwrap();
        std::fs::write(home.join(".codex/auth.json"), "token").unwrap();
        let secrets = Secrets::find(&[codex(&d)]);
        // As a grant that is the folder (its identity), or holds the file.
        for (grant, held) in [
            (home.join(".codex/sub"), home.join(".codex/sub")),
            (home.join(".codex/auth.json"), home.join(".codex/auth.json")),
        ] {
            assert_eq!(
                paths(&secrets.held_within(&home, &grant, false)),
                [(held, Sensitive::AgentCredentials)]
            );
        }
    }

    #[test]
    fn a_symlink_chain_longer_than_followed_is_withheld_at_its_last_step() {
        let d = dir("longchain");
        let home = d.0.join("home");
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        let mut from = home.join(".codex");
        for step in 0..=LINK_STEPS {
            let to = home.join(format!("d{step}"));
            std::fs::create_dir_all(&to).unwrap();
            std::os::unix::fs::symlink(&to, from.join("next")).unwrap();
            from = to;
        }
        // From `d0`, the last step reaches a file, which has a second name.
        let token = home.join("vault/token");
        std::fs::create_dir_all(home.join("vault")).unwrap();
        std::fs::write(&token, "t").unwrap();
        std::os::unix::fs::symlink(&token, from.join("file")).unwrap();
        std::fs::create_dir_all(home.join("work")).unwrap();
        std::fs::hard_link(&token, home.join("work/copy")).unwrap();
        let secrets = Secrets::find(&[codex(&d)]);
        let last = home.join(format!("d{LINK_STEPS}"));
        assert!(
            secrets.linked().iter().any(|l| l.path == last),
            "{:?}",
            paths(secrets.linked())
        );
        // Not looked through, but known by identity (session-26 red team, round 4).
        let beyond = Secrets::find(&[Withheld::new(home.join("d0"), Sensitive::AgentCredentials)]);
        assert!(beyond.linked().iter().any(|l| l.path == token));
        assert_eq!(
            paths(&beyond.held_within(&home, &home.join("work"), false)),
            [(home.join("work/copy"), Sensitive::AgentCredentials)]
        );
    }

    #[test]
    fn a_mount_inside_a_grant_is_not_looked_through() {
        let d = dir("mounted");
        let work = d.0.join("home/work");
        std::fs::create_dir_all(work.join("keys")).unwrap();
        std::fs::write(work.join("keys/id"), "key").unwrap();
        let secrets = Secrets {
            mounts: Mounts::parse(
                format!(
                    "2 1 8:1 / {} rw - ext4 /dev/sda1 rw",
                    work.join("keys").display()
                )
                .as_bytes(),
            ),
            ..Secrets::default()
        };
        assert_eq!(
            paths(&secrets.held_within(&d.0.join("home"), &work, false)),
            [(work.join("keys"), Sensitive::Unchecked)]
        );
    }

    #[test]
    fn symlinks_out_of_a_sensitive_place_are_followed_step_by_step() {
        let d = dir("chain");
        let home = d.0.join("home");
        for folder in [".codex", "dotfiles/keys", "vault"] {
            std::fs::create_dir_all(home.join(folder)).unwrap();
        }
        std::fs::write(home.join("vault/token"), "t").unwrap();
        std::os::unix::fs::symlink(home.join("dotfiles/keys"), home.join(".codex/keys")).unwrap();
        std::os::unix::fs::symlink(home.join("vault/token"), home.join("dotfiles/keys/token"))
            .unwrap();
        let secrets = Secrets::find(&[codex(&d)]);
        assert_eq!(
            paths(secrets.linked()),
            [
                (home.join("dotfiles/keys"), Sensitive::AgentCredentials),
                (home.join("vault/token"), Sensitive::AgentCredentials)
            ]
        );
    }

    #[test]
    fn fifos_are_held_and_a_folder_of_many_secrets_is_held_whole() {
        let d = dir("many");
        let (home, work) = (d.0.join("home"), d.0.join("home/work"));
        let made = std::process::Command::new("mkfifo")
            .arg(work.join("cmd"))
            .status()
            .unwrap();
        assert!(made.success());
        assert_eq!(
            paths(&Secrets::default().held_within(&home, &work, false)),
            [(work.join("cmd"), Sensitive::HostSocket)]
        );
        for i in 0..=MAX_HELD {
            std::fs::write(work.join(format!(".env{i}")), "K=1").unwrap();
        }
        let held = Secrets::default().held_within(&home, &work, false);
        assert_eq!(held.len(), 1);
        assert_eq!(
            (&held[0].path, held[0].category),
            (&work, Sensitive::Unchecked)
        );
    }

    /// A grant on a mount that shows other files under identities of its own
    /// (session-25 red team, round 4 F1: an overlay of the home under `/srv`):
    /// what its overlay layers hold at the same paths, and files like a sensitive
    /// one on an overlay, FUSE or network mount, are withheld, whether or not its
    /// layers can be found (session-26 red team: relative, stale and redirected
    /// layers). The mounts here are only described (no mount is made), their
    /// folders are plain ones.
    #[test]
    fn a_grant_on_another_view_of_the_home_is_looked_through_in_what_it_shows() {
        let d = dir("views");
        let home = d.0.join("home");
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        std::fs::write(home.join(".codex/auth.json"), "token").unwrap();
        let (ov, share, rel) = (
            d.0.join("srv/ov"),
            d.0.join("srv/share"),
            d.0.join("srv/rel"),
        );
        for folder in [&ov, &share.join("keys"), &rel] {
            std::fs::create_dir_all(folder).unwrap();
        }
        // What the share shows of the login: another file of its size and time.
        let copy = share.join("keys/copy");
        let relayed = rel.join("relayed");
        for shown in [&copy, &relayed] {
            copy_like(&home.join(".codex/auth.json"), shown);
        }
        std::fs::write(share.join("notes"), "other notes").unwrap();
        let mounts = format!(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             2 1 0:40 / {ov} rw - overlay overlay rw,lowerdir={home}\n\
             3 1 0:41 / {share} rw - fuse.sshfs u@host:/ rw\n\
             4 1 0:42 / {rel} rw - overlay overlay rw,lowerdir=home\n",
            ov = ov.display(),
            home = home.display(),
            share = share.display(),
            rel = rel.display()
        );
        let secrets = Secrets {
            mounts: Mounts::parse(mounts.as_bytes()),
            ..Secrets::find(&[codex(&d)])
        };
        assert_eq!(
            paths(&secrets.held_within(&home, &ov, false)),
            [
                (ov.join(".codex"), Sensitive::AgentCredentials),
                (ov.join(".codex/auth.json"), Sensitive::AgentCredentials)
            ]
        );
        assert_eq!(
            paths(&secrets.held_within(&home, &share, false)),
            [(copy, Sensitive::AgentCredentials)]
        );
        assert_eq!(
            paths(&secrets.held_within(&home, &rel, false)),
            [(relayed, Sensitive::AgentCredentials)]
        );
        // Not on such a mount, a file of the same size and time is only a file.
        assert!(
            Secrets::find(&[codex(&d)])
                .held_within(&home, &share, false)
                .is_empty()
        );
    }

    /// On a view, a home's sensitive names are sensitive under any folder, and a
    /// file with two names is suspect when a place could not be looked through
    /// whole on any device (session-26 red team, round 2: a hard link out of a
    /// closed folder of `~/.ssh`, seen through an overlay whose layer was gone).
    #[test]
    fn a_view_s_sensitive_names_and_files_of_two_names_are_held() {
        let d = dir("viewnames");
        let (home, view) = (d.0.join("home"), d.0.join("view"));
        std::fs::create_dir_all(view.join("u/.ssh")).unwrap();
        std::fs::create_dir_all(view.join("u/.config/gcloud")).unwrap();
        std::fs::create_dir_all(view.join("u/.local/share/fish")).unwrap();
        std::fs::write(view.join("u/.local/share/fish/fish_history"), "- cmd").unwrap();
        std::fs::write(view.join("u/.ssh/id_old"), "key").unwrap();
        std::fs::write(view.join("u/proj"), "p").unwrap();
        std::fs::hard_link(view.join("u/proj"), view.join("u/hl")).unwrap();
        let line = format!(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 0:40 / {} rw - overlay overlay rw,lowerdir=/gone\n",
            view.display()
        );
        let on_view = Secrets {
            mounts: Mounts::parse(line.as_bytes()),
            unknown: HashMap::from([(u64::MAX, Sensitive::SshKeys)]),
            unknown_disk: true,
            ..Secrets::default()
        };
        assert_eq!(
            paths(&on_view.held_within(&home, &view, false)),
            [
                (view.join("u/.config/gcloud"), Sensitive::CloudCredentials),
                // Five names deep (session-26 red team, round 3).
                (
                    view.join("u/.local/share/fish/fish_history"),
                    Sensitive::History
                ),
                (view.join("u/.ssh"), Sensitive::SshKeys),
                (view.join("u/.ssh/id_old"), Sensitive::SshKeys),
                (view.join("u/hl"), Sensitive::Unchecked),
                (view.join("u/proj"), Sensitive::Unchecked),
            ]
        );
        // Only a place on a disk not seen whole makes them suspect on a view, not
        // a view's own (session-26 red team, round 3: gvfs under `/run/user`).
        let views_own = Secrets {
            unknown_disk: false,
            ..on_view
        };
        assert_eq!(views_own.held_within(&home, &view, false).len(), 4);
        // Not on a view: names are judged from the home, and only a device a place
        // was not seen whole on makes two names suspect.
        let plain = Secrets {
            unknown: HashMap::from([(u64::MAX, Sensitive::SshKeys)]),
            ..Secrets::default()
        };
        assert!(plain.held_within(&home, &view, false).is_empty());
    }

    /// Writes a file of `like`'s size and modification time at `to`.
    fn copy_like(like: &Path, to: &Path) {
        std::fs::copy(like, to).unwrap();
        let time = std::fs::metadata(like).unwrap().modified().unwrap();
        std::fs::File::options()
            .write(true)
            .open(to)
            .unwrap()
            .set_modified(time)
            .unwrap();
    }

    /// A home that is itself a view (an overlay over the disk at `raw`, as
    /// overlayroot makes): the place's folder in the layer is withheld as the place
    /// is, and every grant's files are compared by size and time (session-26 red
    /// team: `/media/root-ro/home/u` was granted whole).
    #[test]
    fn a_sensitive_place_on_a_view_withholds_what_it_is_shown_from() {
        let d = dir("reverse");
        let (home, raw, other) = (d.0.join("home"), d.0.join("raw"), d.0.join("other"));
        for folder in [&home.join(".codex"), &raw.join(".codex"), &other] {
            std::fs::create_dir_all(folder).unwrap();
        }
        std::fs::write(raw.join(".codex/auth.json"), "token").unwrap();
        copy_like(
            &raw.join(".codex/auth.json"),
            &home.join(".codex/auth.json"),
        );
        copy_like(&raw.join(".codex/auth.json"), &other.join("kept"));
        std::fs::write(other.join("plain"), "another size").unwrap();
        let mounts = format!(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
             2 1 0:40 / {home} rw - overlay overlay rw,lowerdir={raw}\n",
            home = home.display(),
            raw = raw.display(),
        );
        let secrets = Secrets {
            mounts: Mounts::parse(mounts.as_bytes()),
            ..Secrets::default()
        };
        let secrets = Secrets::find_with(secrets, &[codex(&d)]);
        assert_eq!(
            paths(secrets.linked()),
            [(raw.join(".codex"), Sensitive::AgentCredentials)]
        );
        assert_eq!(
            paths(&secrets.held_within(&home, &raw, false)),
            [
                (raw.join(".codex"), Sensitive::AgentCredentials),
                (raw.join(".codex/auth.json"), Sensitive::AgentCredentials)
            ]
        );
        assert_eq!(
            paths(&secrets.held_within(&home, &other, false)),
            [(other.join("kept"), Sensitive::AgentCredentials)]
        );
    }

    /// Layers that are views of the grant's own overlay (bind mounts of it) are
    /// looked through once each, and a grant showing more than [`MAX_LAYERS`]
    /// folders is withheld (session-26 red team: 20 such layers took minutes).
    #[test]
    fn layers_showing_their_own_overlay_are_looked_through_once() {
        let d = dir("layers");
        let home = d.0.join("home");
        let x = d.0.join("x");
        for n in [20, MAX_LAYERS + 8] {
            let layers: Vec<PathBuf> = (0..n).map(|i| d.0.join(format!("l{n}-{i}"))).collect();
            for folder in layers.iter().chain([&x]) {
                std::fs::create_dir_all(folder).unwrap();
            }
            let options = format!(
                "rw,lowerdir={}",
                layers
                    .iter()
                    .map(|l| l.display().to_string())
                    .collect::<Vec<_>>()
                    .join(":")
            );
            let mut text = format!(
                "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 0:40 / {} rw - overlay overlay {options}\n",
                x.display()
            );
            for (i, layer) in layers.iter().enumerate() {
                text.push_str(&format!(
                    "{} 1 0:40 / {} rw - overlay overlay {options}\n",
                    i + 3,
                    layer.display()
                ));
            }
            let secrets = Secrets {
                mounts: Mounts::parse(text.as_bytes()),
                ..Secrets::default()
            };
            let held = secrets.held_within(&home, &x, false);
            if n <= MAX_LAYERS {
                assert!(held.is_empty(), "{held:?}");
            } else {
                assert_eq!(paths(&held), [(x.clone(), Sensitive::Unchecked)]);
            }
        }
    }

    #[test]
    fn a_shell_startup_file_s_other_name_stays_readable() {
        let d = dir("startup");
        let home = d.0.join("home");
        std::fs::write(home.join(".bashrc"), "alias").unwrap();
        std::fs::hard_link(home.join(".bashrc"), home.join("work/bashrc")).unwrap();
        let secrets = Secrets::find(&[Withheld {
            write_only: true,
            ..Withheld::new(home.join(".bashrc"), Sensitive::ShellStartup)
        }]);
        let held = secrets.held_within(&home, &home.join("work"), false);
        assert_eq!(held.len(), 1);
        assert!(held[0].write_only);
    }
}
