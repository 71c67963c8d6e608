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
/// Distinct destinations and programs kept.
pub const MAX_DESTINATIONS: usize = 10_000;
pub const MAX_PROGRAMS: usize = 10_000;

/// How a file was used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Access {
    /// Opened for reading (or executed, or listed).
    Read,
    /// Opened for writing (or truncated).
    Write,
    /// Created (a file, folder or link), or renamed to this path.
    Create,
    /// Removed, or renamed away from this path.
    Remove,
}

impl Access {
    pub fn writes(self) -> bool {
        self != Access::Read
    }
}

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
    /// Accesses to paths not kept because `max_paths` distinct paths were already.
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
        if let Some(counts) = self.files.get_mut(&path) {
            counts.add(access, count);
        } else if self.files.len() < self.max_paths {
            let mut counts = Counts::default();
            counts.add(access, count);
            self.files.insert(path, counts);
        } else {
            self.overflow = self.overflow.saturating_add(count);
        }
    }

    /// `count` file accesses the caller could not keep itself (its own bounds), so that
    /// the profile says how many went unseen.
    pub fn overflowed(&mut self, count: u64) {
        self.overflow = self.overflow.saturating_add(count);
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
