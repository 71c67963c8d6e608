//! What a learning run saw, as plain values: files and how they were used, network
//! destinations, programs executed, the `--add-host` pins in force. Filled by the
//! caller from the trace; bounded, so that a command touching millions of files cannot
//! exhaust the supervisor's memory (what does not fit is counted, not kept).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use vg_policy::AddHost;
use vg_policy::paths::normalize_absolute;

/// Distinct file paths kept by default.
pub const DEFAULT_MAX_PATHS: usize = 200_000;
/// Bytes of those paths kept, past which new ones are counted only: a path is up to
/// 4 KiB, and 200,000 of them held (then copied for the profile) cost the supervisor
/// gigabytes (red team: 50,000 distinct 4 KiB paths took 740 MB).
pub const MAX_PATH_BYTES: usize = 32 << 20;
/// Distinct destinations and programs kept.
pub const MAX_DESTINATIONS: usize = 10_000;
pub const MAX_PROGRAMS: usize = 10_000;

/// How a file was used: read, written, created or removed.
pub use vg_policy::violation::Access;

/// How often one path was used each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub read: u64,
    pub write: u64,
    pub create: u64,
    pub remove: u64,
}

impl Counts {
    pub fn add(&mut self, access: Access, count: u64) {
        let slot = match access {
            Access::Read => &mut self.read,
            Access::Write => &mut self.write,
            Access::Create => &mut self.create,
            Access::Remove => &mut self.remove,
        };
        *slot = slot.saturating_add(count);
    }

    /// Whether it was written, created or removed.
    pub fn writes(&self) -> bool {
        self.write > 0 || self.create > 0 || self.remove > 0
    }

    pub fn reads(&self) -> bool {
        self.read > 0
    }
}

/// One network destination as the mediator saw it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Destination {
    /// The name the sandbox asked for, when it connected by name.
    pub name: Option<String>,
    pub ip: IpAddr,
    pub port: u16,
    /// Whether the connection was let through while learning.
    pub allowed: bool,
}

/// Everything one learning run observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observations {
    files: BTreeMap<PathBuf, Counts>,
    max_paths: usize,
    /// Bytes of the paths in `files`.
    path_bytes: usize,
    /// Accesses to paths not kept because `max_paths` distinct paths, or
    /// [`MAX_PATH_BYTES`] of them, were already.
    overflow: u64,
    /// Accesses to paths that were not absolute and clean (relative, or with `..`):
    /// the caller resolves paths inside the sandbox; these could not be placed.
    unplaced: u64,
    destinations: BTreeMap<Destination, u64>,
    programs: BTreeMap<PathBuf, u64>,
    /// Destinations and programs not kept, past their caps.
    overflow_other: u64,
    add_hosts: Vec<AddHost>,
}

impl Default for Observations {
    fn default() -> Self {
        Self::new()
    }
}

impl Observations {
    pub fn new() -> Self {
        Self::with_max_paths(DEFAULT_MAX_PATHS)
    }

    /// Keeps at most `max_paths` distinct file paths.
    pub fn with_max_paths(max_paths: usize) -> Self {
        Self {
            files: BTreeMap::new(),
            max_paths,
            path_bytes: 0,
            overflow: 0,
            unplaced: 0,
            destinations: BTreeMap::new(),
            programs: BTreeMap::new(),
            overflow_other: 0,
            add_hosts: Vec::new(),
        }
    }

    /// One access to `path` (absolute, inside the sandbox).
    pub fn file(&mut self, path: &Path, access: Access) {
        self.file_n(path, access, 1);
    }

    /// `count` accesses to `path`.
    pub fn file_n(&mut self, path: &Path, access: Access, count: u64) {
        let Some(path) = normalize_absolute(path) else {
            self.unplaced = self.unplaced.saturating_add(count);
            return;
        };
        let size = path.as_os_str().len();
        if let Some(counts) = self.files.get_mut(&path) {
            counts.add(access, count);
        } else if self.files.len() < self.max_paths
            && self.path_bytes.saturating_add(size) <= MAX_PATH_BYTES
        {
            self.path_bytes += size;
            let mut counts = Counts::default();
            counts.add(access, count);
            self.files.insert(path, counts);
        } else {
            self.overflow = self.overflow.saturating_add(count);
        }
    }

    /// These observations without the file accesses at or under `dir` (what a run
    /// saw in a folder that does not exist on the host).
    pub fn without_under(mut self, dir: &Path) -> Self {
        self.files.retain(|path, _| !path.starts_with(dir));
        self.path_bytes = self.files.keys().map(|p| p.as_os_str().len()).sum();
        self
    }

    /// One connection (or attempt) to `destination`.
    pub fn destination(&mut self, destination: Destination) {
        if let Some(count) = self.destinations.get_mut(&destination) {
            *count = count.saturating_add(1);
        } else if self.destinations.len() < MAX_DESTINATIONS {
            self.destinations.insert(destination, 1);
        } else {
            self.overflow_other = self.overflow_other.saturating_add(1);
        }
    }

    /// One execution of the program at `path`.
    pub fn program(&mut self, path: &Path) {
        if let Some(count) = self.programs.get_mut(path) {
            *count = count.saturating_add(1);
        } else if self.programs.len() < MAX_PROGRAMS {
            self.programs.insert(path.to_path_buf(), 1);
        } else {
            self.overflow_other = self.overflow_other.saturating_add(1);
        }
    }

    /// An `--add-host` pin the run had (kept once per name: the last one wins, as in
    /// the sandbox's resolver).
    pub fn add_host(&mut self, pin: AddHost) {
        self.add_hosts.retain(|p| p.name != pin.name);
        self.add_hosts.push(pin);
    }

    pub fn files(&self) -> &BTreeMap<PathBuf, Counts> {
        &self.files
    }

    pub fn destinations(&self) -> &BTreeMap<Destination, u64> {
        &self.destinations
    }

    pub fn programs(&self) -> &BTreeMap<PathBuf, u64> {
        &self.programs
    }

    pub fn add_hosts(&self) -> &[AddHost] {
        &self.add_hosts
    }

    pub fn max_paths(&self) -> usize {
        self.max_paths
    }

    /// File accesses not kept, past the cap on distinct paths.
    pub fn overflow(&self) -> u64 {
        self.overflow
    }

    /// File accesses whose path was not absolute and clean.
    pub fn unplaced(&self) -> u64 {
        self.unplaced
    }

    /// Destinations and program runs not kept, past their caps.
    pub fn overflow_other(&self) -> u64 {
        self.overflow_other
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Red team: distinct 4 KiB paths, as many as a command likes, must not grow the
    /// supervisor past the byte budget; the ones past it are counted.
    #[test]
    fn paths_are_bounded_in_bytes_too() {
        let mut o = Observations::new();
        let long = "x".repeat(4000);
        let total = MAX_PATH_BYTES / 4000 + 100;
        for i in 0..total {
            o.file(Path::new(&format!("/h/{i}/{long}")), Access::Read);
        }
        let kept: usize = o.files().keys().map(|p| p.as_os_str().len()).sum();
        assert!(kept <= MAX_PATH_BYTES, "{kept}");
        assert!(o.files().len() < total);
        assert_eq!(o.overflow(), (total - o.files().len()) as u64);
        // A path already kept is still counted when the budget is spent.
        let first = o.files().keys().next().cloned().unwrap();
        o.file(&first, Access::Write);
        assert_eq!(o.files()[&first].write, 1);
    }

    #[test]
    fn accesses_under_a_folder_can_be_left_out() {
        let mut o = Observations::new();
        for p in [
            "/nonexistent/.cache/t/a",
            "/nonexistent",
            "/nonexistentx/a",
            "/etc/x",
        ] {
            o.file(Path::new(p), Access::Create);
        }
        let o = o.without_under(Path::new("/nonexistent"));
        let kept: Vec<&Path> = o.files().keys().map(PathBuf::as_path).collect();
        assert_eq!(kept, [Path::new("/etc/x"), Path::new("/nonexistentx/a")]);
    }

    #[test]
    fn accesses_add_up_per_normalised_path() {
        let mut o = Observations::new();
        o.file(Path::new("/home/u/.cache/t/a"), Access::Read);
        o.file(Path::new("/home/u/.cache//t/./a"), Access::Read);
        o.file_n(Path::new("/home/u/.cache/t/a"), Access::Write, 3);
        o.file(Path::new("/home/u/.cache/t/a"), Access::Remove);
        o.file(Path::new("/home/u/.cache/t/b"), Access::Create);
        let a = o.files()[Path::new("/home/u/.cache/t/a")];
        assert_eq!(
            a,
            Counts {
                read: 2,
                write: 3,
                create: 0,
                remove: 1
            }
        );
        assert!(a.writes() && a.reads());
        let b = o.files()[Path::new("/home/u/.cache/t/b")];
        assert!(b.writes() && !b.reads());
        assert_eq!(o.files().len(), 2);
    }

    #[test]
    fn paths_are_bounded_and_the_rest_counted() {
        let mut o = Observations::with_max_paths(2);
        for i in 0..5 {
            o.file(Path::new(&format!("/d/{i}")), Access::Read);
        }
        // A path already kept still counts.
        o.file_n(Path::new("/d/0"), Access::Read, 4);
        assert_eq!(o.files().len(), 2);
        assert_eq!(o.overflow(), 3);
        assert_eq!(o.files()[Path::new("/d/0")].read, 5);
        // Relative paths and `..` cannot be placed.
        o.file(Path::new("rel/x"), Access::Read);
        o.file_n(Path::new("/a/../etc/x"), Access::Write, 2);
        assert_eq!(o.unplaced(), 3);
    }

    #[test]
    fn destinations_programs_and_pins() {
        let mut o = Observations::new();
        let d = Destination {
            name: Some("api.test".into()),
            ip: "127.0.0.1".parse().unwrap(),
            port: 8080,
            allowed: true,
        };
        o.destination(d.clone());
        o.destination(d.clone());
        o.program(Path::new("/usr/bin/git"));
        o.program(Path::new("/usr/bin/git"));
        o.add_host(AddHost::parse("api.test:127.0.0.2").unwrap());
        o.add_host(AddHost::parse("api.test:127.0.0.1").unwrap());
        assert_eq!(o.destinations()[&d], 2);
        assert_eq!(o.programs()[Path::new("/usr/bin/git")], 2);
        assert_eq!(o.add_hosts().len(), 1);
        assert_eq!(o.add_hosts()[0].to_string(), "api.test:127.0.0.1");
    }
}
