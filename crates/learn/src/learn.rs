//! From what a run used to what a profile grants: [`learn`].
//!
//! Files are collapsed to the smallest sensible set of host paths, each mounted at the
//! same place: a tool's folder under `~/.cache`, `~/.config`, `~/.local/share` or
//! `~/.local/state` (`~/.cache/opencode`, not the 70 files inside it); any other
//! `~/.NAME`; two levels down elsewhere in the home (`~/go/pkg`) and below a top-level
//! folder outside it (`/var/lib/tool`); a file where the access was to a file that
//! shallow. Never the
//! home itself, `/`, a top-level folder, a whole shared base (`~/.config`), an
//! ancestor of the home, or a folder holding a sensitive location (the grant goes one
//! level deeper instead). Sensitive locations ([`vg_policy::sensitive`]) are reported,
//! never granted. What the default view already gives (system folders to read, the
//! sandbox's own `/tmp`, `/proc`, `/dev`, the workspaces) needs nothing. Outside the
//! home, only reads below the folders learning's view showed read-only
//! ([`LearnContext::visible`]) are granted: the tracer records what was asked, not what
//! was possible, so a path the view did not offer (another user's home, any other host
//! file) or a write where it was read-only is reported, never granted. Places
//! [`LearnContext::withheld`] names (Vectra Guard's own folders, a secret's real path
//! behind a symlink) are treated as sensitive.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Component, Path, PathBuf};

use vg_policy::mount::MountSpec;
use vg_policy::network::{Action, AddHost, HostName, PortRange, Rule, Target};
use vg_policy::paths::is_within;
use vg_policy::sensitive::{Sensitive, sensitive, sensitive_inside};

use crate::context::{HostKind, LearnContext, Probe, Withheld};
use crate::observe::{Counts, Destination, Observations};

/// One host path the profile grants, at the same path inside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub path: PathBuf,
    /// Read-write (`read_write`), else read-only (`read_only`).
    pub write: bool,
    pub kind: HostKind,
    /// Not on the host: a folder the command created in learning's throwaway layer.
    /// It is in [`Learned::to_create`].
    pub missing: bool,
    pub evidence: Evidence,
}

/// What a grant was learned from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evidence {
    /// Distinct paths read (and not written) under it.
    pub read: u64,
    /// Distinct paths written, created or removed under it.
    pub written: u64,
    /// One of them: the first written one, else the first read one.
    pub example: Option<PathBuf>,
}

impl Evidence {
    fn add(&mut self, path: &Path, write: bool) {
        if write {
            self.written += 1;
        } else {
            self.read += 1;
        }
        let replace = match &self.example {
            None => true,
            // Show a written path when there is one: it is why the grant is writable.
            Some(_) => write && self.written == 1,
        };
        if replace {
            self.example = Some(path.to_path_buf());
        }
    }

    fn merge(&mut self, other: &Evidence) {
        self.read += other.read;
        self.written += other.written;
        if self.example.is_none() {
            self.example.clone_from(&other.example);
        }
    }
}

/// A sensitive location the command used: reported, not granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SensitiveUse {
    pub path: PathBuf,
    pub read: bool,
    pub write: bool,
    pub category: Sensitive,
}

/// Why a path that was used is not granted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reason {
    /// Written under a system folder, which stays read-only.
    SystemWrite,
    /// The home folder itself.
    Home,
    /// A top-level folder (`/srv`).
    TopLevel,
    /// A base folder many tools share (`~/.config`, `~/.cache`, `~/.local/share`).
    SharedBase,
    /// A folder that holds the home.
    HoldsHome,
    /// A folder that holds a sensitive location (at `path`).
    HoldsSensitive { path: PathBuf, category: Sensitive },
    /// Reached through a symlink (its real path is `real`).
    Symlink { real: PathBuf },
    /// Created while learning, and nothing below it was used, so it is not known to be
    /// a folder (which could be created for it): a mount needs it to exist.
    CreatedFile,
    /// A name a mount cannot carry (a ':', or not UTF-8).
    Unmountable,
    /// Outside the home and every folder learning's view showed: the command could not
    /// have used it, whatever it asked (and whatever the host has there).
    NotVisible,
    /// Written outside the home, where learning's view was read-only: the write
    /// failed, and a profile never makes such a place writable.
    ReadOnlyWhileLearning,
}

impl Reason {
    pub fn describe(&self) -> String {
        match self {
            Reason::SystemWrite => "system folders stay read-only".to_owned(),
            Reason::Home => "the home folder itself is never granted".to_owned(),
            Reason::TopLevel => "a top-level folder is never granted whole".to_owned(),
            Reason::SharedBase => {
                "a folder every tool shares is never granted whole (only a tool's own folder in it)"
                    .to_owned()
            }
            Reason::HoldsHome => "it holds the home folder".to_owned(),
            Reason::HoldsSensitive { path, category } => {
                format!("it holds {} ({category})", path.display())
            }
            Reason::Symlink { real } => format!(
                "a symlink to {}: mount that with --mount REAL:LINK if it is needed",
                real.display()
            ),
            Reason::CreatedFile => {
                "created while learning, with nothing used inside it: create it on the host and learn again"
                    .to_owned()
            }
            Reason::Unmountable => "a mount cannot name it (':' or not UTF-8)".to_owned(),
            Reason::NotVisible => {
                "not in learning's view (outside the home and the folders it shows), so nothing could be used there: mount it with --mount if it is needed"
                    .to_owned()
            }
            Reason::ReadOnlyWhileLearning => {
                "read-only while learning (outside the home), so the write failed: mount it with --mount if it is needed"
                    .to_owned()
            }
        }
    }
}

/// A path (or the collapsed folder of several) that was used and is not granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub path: PathBuf,
    pub write: bool,
    pub reason: Reason,
    /// Distinct paths used that this stands for, and one of them.
    pub paths: u64,
    pub example: PathBuf,
}

/// One `allow NAME:PORT` (or `IP:PORT`) rule and what it was learned from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetGrant {
    pub rule: Rule,
    pub connections: u64,
    pub addresses: BTreeSet<IpAddr>,
}

/// A destination that is not allowed by the profile, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedDestination {
    pub destination: Destination,
    pub connections: u64,
    pub why: String,
}

/// What [`learn`] makes of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Learned {
    /// The home the paths were learned against (comments show `~/…` in it).
    pub home: PathBuf,
    /// By path; at most one per path.
    pub grants: Vec<Grant>,
    /// Folders granted read-write that do not exist on the host (created during
    /// learning in the throwaway layer): the caller creates them, empty, mode 0700,
    /// when the profile is saved, so that a mount can hold them.
    pub to_create: Vec<PathBuf>,
    pub sensitive: Vec<SensitiveUse>,
    pub refused: Vec<Refusal>,
    /// Read (only) and not on the host: failed probes, not granted.
    pub not_found: Vec<PathBuf>,
    pub rules: Vec<NetGrant>,
    pub add_hosts: Vec<AddHost>,
    pub refused_destinations: Vec<RefusedDestination>,
    /// Every program executed and how often: for comments only.
    pub programs: Vec<(PathBuf, u64)>,
    /// Accesses the observations could not keep or place ([`Observations::overflow`],
    /// [`Observations::unplaced`], [`Observations::overflow_other`]), and the cap.
    pub overflow: u64,
    pub unplaced: u64,
    pub overflow_other: u64,
    pub max_paths: usize,
}

impl Learned {
    pub fn read_only(&self) -> impl Iterator<Item = &Grant> {
        self.grants.iter().filter(|g| !g.write)
    }

    pub fn read_write(&self) -> impl Iterator<Item = &Grant> {
        self.grants.iter().filter(|g| g.write)
    }
}

/// A collapsed candidate on its way to a grant.
#[derive(Default)]
struct Candidate {
    write: bool,
    /// Whether a path strictly below it was used (then it is a folder).
    below: bool,
    evidence: Evidence,
}

/// Turns what a run used into what its profile grants.
pub fn learn(observations: &Observations, cx: &LearnContext<'_>) -> Learned {
    let home = cx.home.as_path();
    let mut candidates: BTreeMap<PathBuf, Candidate> = BTreeMap::new();
    let mut refusals = Refusals::default();
    let mut sensitive_uses = Vec::new();
    let mut not_found = Vec::new();

    for (path, counts) in observations.files() {
        let under = |list: &[PathBuf]| list.iter().any(|base| is_within(path, base));
        if path == Path::new("/") || under(&cx.workspaces) || under(&cx.private) {
            continue;
        }
        if under(&cx.system) {
            if counts.writes() {
                refusals.add(two_levels(path), path, true, Reason::SystemWrite);
            }
            continue;
        }
        let Some(mut write) = screen(home, &cx.withheld, path, counts, &mut sensitive_uses) else {
            continue;
        };
        // Outside the home only what the view showed read-only can be granted, and only
        // for reading: the command names any path it likes, used or not.
        let outside = home == Path::new("/") || !is_within(path, home);
        if outside && !is_within(home, path) {
            if !under(&cx.visible) {
                refusals.add(two_levels(path), path, write, Reason::NotVisible);
                continue;
            }
            if write {
                refusals.add(two_levels(path), path, true, Reason::ReadOnlyWhileLearning);
                if !counts.reads() {
                    continue;
                }
                write = false;
            }
        }
        if !write && cx.host.probe(path) == Probe::Missing {
            not_found.push(path.clone());
            continue;
        }
        let candidate =
            collapse(home, path).and_then(|c| narrow(home, &cx.withheld, c, path, write));
        match candidate {
            Ok(candidate) => {
                let entry = candidates.entry(candidate.clone()).or_default();
                entry.write |= write;
                entry.below |= candidate != *path;
                entry.evidence.add(path, write);
            }
            Err((at, reason)) => refusals.add(at, path, write, reason),
        }
    }

    let mut grants = Vec::new();
    for (path, candidate) in candidates {
        let refuse = |refusals: &mut Refusals, reason| {
            let example = candidate.evidence.example.clone().unwrap_or(path.clone());
            refusals.add_n(
                path.clone(),
                &example,
                candidate.write,
                reason,
                candidate.evidence.read + candidate.evidence.written,
            );
        };
        let (kind, missing) = match cx.host.probe(&path) {
            Probe::Found(kind) => (kind, false),
            Probe::Elsewhere(real) => {
                refuse(&mut refusals, Reason::Symlink { real });
                continue;
            }
            Probe::Missing if candidate.write && candidate.below => (HostKind::Dir, true),
            Probe::Missing if candidate.write => {
                refuse(&mut refusals, Reason::CreatedFile);
                continue;
            }
            // Only reads, below a folder that is not there: they were all probes that
            // failed, already listed one by one.
            Probe::Missing => continue,
        };
        if kind == HostKind::Dir && path.components().count() <= 2 {
            refuse(&mut refusals, Reason::TopLevel);
            continue;
        }
        if !mountable(&path) {
            refuse(&mut refusals, Reason::Unmountable);
            continue;
        }
        grants.push(Grant {
            path,
            write: candidate.write,
            kind,
            missing,
            evidence: candidate.evidence,
        });
    }
    let grants = drop_nested(grants);
    not_found.retain(|p| !grants.iter().any(|g| is_within(p, &g.path)));
    let to_create = grants
        .iter()
        .filter(|g| g.missing)
        .map(|g| g.path.clone())
        .collect();

    let (rules, refused_destinations) = network(observations);
    Learned {
        home: cx.home.clone(),
        grants,
        to_create,
        sensitive: sensitive_uses,
        refused: refusals.into_vec(),
        not_found,
        rules,
        add_hosts: observations.add_hosts().to_vec(),
        refused_destinations,
        programs: observations
            .programs()
            .iter()
            .map(|(p, n)| (p.clone(), *n))
            .collect(),
        overflow: observations.overflow(),
        unplaced: observations.unplaced(),
        overflow_other: observations.overflow_other(),
        max_paths: observations.max_paths(),
    }
}

/// Whether `path` may be granted and how: `Some(write)`, or `None` when it is a
/// sensitive location (recorded in `uses`). A shell startup file that was written and
/// read is granted for reading only.
fn screen(
    home: &Path,
    withheld: &[Withheld],
    path: &Path,
    counts: &Counts,
    uses: &mut Vec<SensitiveUse>,
) -> Option<bool> {
    let held = |write: bool| {
        withheld
            .iter()
            .find(|w| w.applies(write) && is_within(path, &w.path))
            .map(|w| w.category)
    };
    let sensitive = |write: bool| held(write).or_else(|| sensitive(home, path, write));
    if let Some(category) = sensitive(false) {
        uses.push(SensitiveUse {
            path: path.to_path_buf(),
            read: counts.reads(),
            write: counts.writes(),
            category,
        });
        return None;
    }
    if counts.writes()
        && let Some(category) = sensitive(true)
    {
        uses.push(SensitiveUse {
            path: path.to_path_buf(),
            read: false,
            write: true,
            category,
        });
        return counts.reads().then_some(false);
    }
    Some(counts.writes())
}

/// Base folders of many tools: a tool's folder is the one below.
const SHARED_BASES: &[&str] = &[".cache", ".config", ".local/share", ".local/state"];

/// The folder (or file) `path` collapses to, before [`narrow`]; or why nothing can be.
fn collapse(home: &Path, path: &Path) -> Result<PathBuf, (PathBuf, Reason)> {
    let in_home = home != Path::new("/") && is_within(path, home);
    if !in_home {
        return Ok(two_levels(path));
    }
    let rel: Vec<Component<'_>> = path
        .strip_prefix(home)
        .map(|r| r.components().collect())
        .unwrap_or_default();
    let name = |i: usize| rel.get(i).map(|c| c.as_os_str().to_string_lossy());
    let Some(first) = name(0) else {
        return Err((path.to_path_buf(), Reason::Home));
    };
    let depth = match (first.as_ref(), name(1).as_deref()) {
        (".cache" | ".config", _) => 2,
        (".local", Some("share" | "state")) => 3,
        (".local", _) => 2,
        (dot, _) if dot.starts_with('.') => 1,
        _ => 2,
    };
    let kept: PathBuf = rel.iter().take(depth).collect();
    if SHARED_BASES.iter().any(|b| kept == Path::new(b)) || kept == Path::new(".local") {
        return Err((path.to_path_buf(), Reason::SharedBase));
    }
    Ok(home.join(kept))
}

/// `path` cut two levels below its top-level folder (`/var/lib/tool/x` →
/// `/var/lib/tool`).
fn two_levels(path: &Path) -> PathBuf {
    path.components().take(4).collect()
}

/// `candidate`, or a folder nearer `path` when it would hold a sensitive location or
/// the home: one level deeper at a time, down to `path` itself.
fn narrow(
    home: &Path,
    withheld: &[Withheld],
    candidate: PathBuf,
    path: &Path,
    write: bool,
) -> Result<PathBuf, (PathBuf, Reason)> {
    let mut at = candidate;
    loop {
        let problem = if is_within(home, &at) {
            Some(Reason::HoldsHome)
        } else {
            sensitive_inside(home, &at, write)
                .or_else(|| {
                    withheld
                        .iter()
                        .find(|w| w.applies(write) && w.path != at && is_within(&w.path, &at))
                        .map(|w| (w.path.clone(), w.category))
                })
                .map(|(path, category)| Reason::HoldsSensitive { path, category })
        };
        let Some(reason) = problem else {
            return Ok(at);
        };
        let next = path
            .strip_prefix(&at)
            .ok()
            .and_then(|rest| rest.components().next());
        match next {
            Some(component) => at.push(component),
            None => return Err((at, reason)),
        }
    }
}

/// Whether a mount can name `path` (as `read_only`/`read_write` do).
fn mountable(path: &Path) -> bool {
    path.to_str()
        .is_some_and(|p| !p.contains('\0') && MountSpec::read_only_path(p).is_ok())
}

/// Drops each grant that lies inside a folder granted with at least its access,
/// adding what it was learned from to that folder's.
fn drop_nested(grants: Vec<Grant>) -> Vec<Grant> {
    let holder = |g: &Grant| {
        grants.iter().position(|h| {
            h.path != g.path
                && h.kind == HostKind::Dir
                && is_within(&g.path, &h.path)
                && (h.write || !g.write)
        })
    };
    let holders: Vec<Option<usize>> = grants.iter().map(holder).collect();
    let mut kept = grants.clone();
    for (i, holder) in holders.iter().enumerate() {
        if let Some(mut h) = *holder {
            // The outermost holder is the one kept.
            while let Some(up) = holders[h] {
                h = up;
            }
            let evidence = grants[i].evidence.clone();
            kept[h].evidence.merge(&evidence);
        }
    }
    kept.into_iter()
        .zip(holders)
        .filter(|(_, holder)| holder.is_none())
        .map(|(g, _)| g)
        .collect()
}

/// Refusals merged by path and reason.
#[derive(Default)]
struct Refusals(BTreeMap<(PathBuf, Reason), Refusal>);

impl Refusals {
    fn add(&mut self, at: PathBuf, example: &Path, write: bool, reason: Reason) {
        self.add_n(at, example, write, reason, 1);
    }

    fn add_n(&mut self, at: PathBuf, example: &Path, write: bool, reason: Reason, paths: u64) {
        let entry = self
            .0
            .entry((at.clone(), reason.clone()))
            .or_insert_with(|| Refusal {
                path: at,
                write: false,
                reason,
                paths: 0,
                example: example.to_path_buf(),
            });
        entry.write |= write;
        entry.paths += paths;
    }

    fn into_vec(self) -> Vec<Refusal> {
        self.0.into_values().collect()
    }
}

/// One allow rule per (name, port) reached, by IP when there was no name.
fn network(observations: &Observations) -> (Vec<NetGrant>, Vec<RefusedDestination>) {
    let mut rules: BTreeMap<String, NetGrant> = BTreeMap::new();
    let mut refused = Vec::new();
    for (destination, &connections) in observations.destinations() {
        let refuse = |why: String| RefusedDestination {
            destination: destination.clone(),
            connections,
            why,
        };
        if !destination.allowed {
            refused.push(refuse("refused while learning".to_owned()));
            continue;
        }
        let Some(port) = PortRange::single(destination.port) else {
            refused.push(refuse(format!("port {} is not a port", destination.port)));
            continue;
        };
        let target = match &destination.name {
            Some(name) => match HostName::parse(name) {
                Ok(name) => Target::Name(name),
                Err(e) => {
                    refused.push(refuse(format!("no rule can name it: {e}")));
                    continue;
                }
            },
            None => Target::Ip(destination.ip.to_canonical()),
        };
        let rule = Rule::new(Action::Allow, target, Some(port));
        let entry = rules.entry(rule.text.clone()).or_insert_with(|| NetGrant {
            rule,
            connections: 0,
            addresses: BTreeSet::new(),
        });
        entry.connections += connections;
        entry.addresses.insert(destination.ip.to_canonical());
    }
    (rules.into_values().collect(), refused)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(crate) mod tests {
    use super::*;
    use crate::context::HostProbe;
    use crate::observe::Access;

    /// A host described by its paths: folders end with '/', links are "LINK -> REAL".
    pub(crate) struct FakeHost(Vec<String>);

    impl FakeHost {
        pub(crate) fn new(entries: &[&str]) -> Self {
            Self(entries.iter().map(|e| (*e).to_owned()).collect())
        }
    }

    impl HostProbe for FakeHost {
        fn probe(&self, path: &Path) -> Probe {
            for entry in &self.0 {
                if let Some((link, real)) = entry.split_once(" -> ")
                    && is_within(path, Path::new(link))
                {
                    let rest = path.strip_prefix(link).unwrap_or(Path::new(""));
                    return Probe::Elsewhere(Path::new(real).join(rest));
                }
            }
            let dir = format!("{}/", path.display());
            let file = path.display().to_string();
            if self.0.iter().any(|e| e.starts_with(&dir)) {
                Probe::Found(HostKind::Dir)
            } else if self.0.contains(&file) {
                Probe::Found(HostKind::File)
            } else {
                Probe::Missing
            }
        }
    }

    pub(crate) fn observe(accesses: &[(&str, Access)]) -> Observations {
        let mut o = Observations::new();
        for (path, access) in accesses {
            o.file(Path::new(path), *access);
        }
        o
    }

    fn learned(host: &FakeHost, accesses: &[(&str, Access)]) -> Learned {
        let cx = LearnContext::new("/home/u".into(), vec!["/home/u/proj".into()], host);
        learn(&observe(accesses), &cx)
    }

    fn grants(l: &Learned) -> Vec<(String, bool)> {
        l.grants
            .iter()
            .map(|g| (g.path.display().to_string(), g.write))
            .collect()
    }

    fn refusals(l: &Learned) -> Vec<(String, Reason)> {
        l.refused
            .iter()
            .map(|r| (r.path.display().to_string(), r.reason.clone()))
            .collect()
    }

    use Access::{Create, Read, Remove, Write};

    #[test]
    fn tool_folders_collapse_and_files_in_home_stay_files() {
        let mut files: Vec<String> = (0..70)
            .map(|i| format!("/home/u/.cache/opencode/f{i}"))
            .collect();
        files.push("/home/u/.config/opencode/config.json".into());
        files.push("/home/u/.local/share/tool/data.db".into());
        files.push("/home/u/.local/state/tool/history".into());
        files.push("/home/u/.gitconfig".into());
        files.push("/home/u/.npm/_cacache/index/x".into());
        files.push("/home/u/go/pkg/mod/a/b.go".into());
        files.push("/var/lib/tool/db/x".into());
        files.push("/srv/data.txt".into());
        let entries: Vec<&str> = files.iter().map(String::as_str).collect();
        let host = FakeHost::new(&entries);
        let mut accesses: Vec<(&str, Access)> = entries.iter().map(|f| (*f, Read)).collect();
        accesses.push(("/home/u/.cache/opencode/f1", Write));
        accesses.push(("/home/u/.local/state/tool/history", Write));
        let l = learned(&host, &accesses);
        assert_eq!(
            grants(&l),
            [
                ("/home/u/.cache/opencode".into(), true),
                ("/home/u/.config/opencode".into(), false),
                ("/home/u/.gitconfig".into(), false),
                ("/home/u/.local/share/tool".into(), false),
                ("/home/u/.local/state/tool".into(), true),
                ("/home/u/.npm".into(), false),
                ("/home/u/go/pkg".into(), false),
                ("/srv/data.txt".into(), false),
                ("/var/lib/tool".into(), false),
            ]
        );
        let cache = &l.grants[0];
        assert_eq!(cache.kind, HostKind::Dir);
        assert_eq!(cache.evidence.read + cache.evidence.written, 70);
        assert_eq!(cache.evidence.written, 1);
        assert_eq!(
            cache.evidence.example.as_deref(),
            Some(Path::new("/home/u/.cache/opencode/f1"))
        );
        assert_eq!(l.grants[2].kind, HostKind::File);
        assert!(l.to_create.is_empty() && l.refused.is_empty() && l.sensitive.is_empty());
    }

    #[test]
    fn what_the_default_view_gives_needs_nothing() {
        let host = FakeHost::new(&["/usr/lib/x.so", "/etc/hosts", "/home/u/proj/src/a.rs"]);
        let l = learned(
            &host,
            &[
                ("/usr/lib/x.so", Read),
                ("/etc/hosts", Read),
                ("/tmp/scratch", Write),
                ("/dev/null", Write),
                ("/proc/self/status", Read),
                ("/sys/kernel/mm/x", Read),
                ("/home/u/proj/src/a.rs", Write),
                ("/home/u/proj/.env", Read),
                ("/", Read),
            ],
        );
        assert!(l.grants.is_empty(), "{:?}", l.grants);
        assert!(l.refused.is_empty() && l.sensitive.is_empty() && l.not_found.is_empty());
        // Writing a system folder is never granted.
        let l = learned(&host, &[("/usr/lib/python3/x.pyc", Create)]);
        assert!(l.grants.is_empty());
        assert_eq!(
            refusals(&l),
            [("/usr/lib/python3".into(), Reason::SystemWrite)]
        );
    }

    #[test]
    fn sensitive_locations_are_reported_never_granted() {
        let host = FakeHost::new(&[
            "/home/u/.ssh/id_ed25519",
            "/home/u/.docker/config.json",
            "/home/u/.docker/buildx/current",
            "/home/u/.bashrc",
            "/home/u/.env",
            "/home/u/.local/share/fish/fish_history",
            "/home/u/.local/share/fish/generated/x.fish",
        ]);
        let l = learned(
            &host,
            &[
                ("/home/u/.ssh/id_ed25519", Read),
                ("/home/u/.docker/config.json", Read),
                ("/home/u/.docker/buildx/current", Read),
                ("/home/u/.bashrc", Read),
                ("/home/u/.bashrc", Write),
                ("/home/u/.env", Read),
                ("/home/u/.local/share/fish/generated/x.fish", Read),
                ("/run/user/1000/bus", Read),
            ],
        );
        // ~/.docker holds config.json, so the grant is one level deeper; the startup
        // file is readable, not writable; fish's folder holds its history.
        assert_eq!(
            grants(&l),
            [
                ("/home/u/.bashrc".into(), false),
                ("/home/u/.docker/buildx".into(), false),
                ("/home/u/.local/share/fish/generated".into(), false),
            ]
        );
        let used: Vec<(&str, bool, bool, Sensitive)> = l
            .sensitive
            .iter()
            .map(|s| (s.path.to_str().unwrap(), s.read, s.write, s.category))
            .collect();
        assert_eq!(
            used,
            [
                ("/home/u/.bashrc", false, true, Sensitive::ShellStartup),
                (
                    "/home/u/.docker/config.json",
                    true,
                    false,
                    Sensitive::RegistryCredentials
                ),
                ("/home/u/.env", true, false, Sensitive::EnvFile),
                ("/home/u/.ssh/id_ed25519", true, false, Sensitive::SshKeys),
                ("/run/user/1000/bus", true, false, Sensitive::HostSocket),
            ]
        );
        // Listing a folder that holds a secret grants nothing.
        let l = learned(&host, &[("/home/u/.docker", Read)]);
        assert!(l.grants.is_empty());
        assert_eq!(
            refusals(&l),
            [(
                "/home/u/.docker".into(),
                Reason::HoldsSensitive {
                    path: "/home/u/.docker/config.json".into(),
                    category: Sensitive::RegistryCredentials
                }
            )]
        );
    }

    /// The sensitive places `l` reports, with their categories.
    fn sensitive_used(l: &Learned) -> Vec<(&str, Sensitive)> {
        l.sensitive
            .iter()
            .map(|s| (s.path.to_str().unwrap(), s.category))
            .collect()
    }

    /// ATTACK (learning, session-24 red team F7): listing an AI agent's folder while
    /// learning granted it (`~/.codex`, whose `auth.json` holds its login): its
    /// folders are sensitive, reported and never granted, nor is a folder above them.
    #[test]
    fn an_ai_agent_s_login_is_never_granted() {
        let host = FakeHost::new(&[
            "/home/u/.codex/auth.json",
            "/home/u/.claude/.credentials.json",
            "/home/u/.config/github-copilot/apps.json",
            "/home/u/.config/tool/x",
        ]);
        let l = learned(
            &host,
            &[
                ("/home/u/.codex", Read),
                ("/home/u/.claude/.credentials.json", Read),
                ("/home/u/.config/github-copilot/apps.json", Read),
                ("/home/u/.config", Read),
            ],
        );
        assert!(l.grants.is_empty(), "{:?}", grants(&l));
        assert_eq!(
            sensitive_used(&l),
            [
                (
                    "/home/u/.claude/.credentials.json",
                    Sensitive::AgentCredentials
                ),
                ("/home/u/.codex", Sensitive::AgentCredentials),
                (
                    "/home/u/.config/github-copilot/apps.json",
                    Sensitive::AgentCredentials
                ),
            ]
        );
    }

    #[test]
    fn never_home_root_top_level_or_a_shared_base() {
        let host = FakeHost::new(&[
            "/home/u/.config/x/y",
            "/home/u/.local/x",
            "/srv/x/y",
            "/.dockerenv",
        ]);
        let l = learned(
            &host,
            &[
                ("/home/u", Read),
                ("/home/u/.config", Read),
                ("/home/u/.local", Read),
                ("/srv", Read),
                ("/.dockerenv", Read),
                ("/home", Read),
            ],
        );
        // `/.dockerenv` is outside every folder learning's view shows.
        assert!(l.grants.is_empty(), "{:?}", l.grants);
        let mut refused = refusals(&l);
        refused.sort();
        assert_eq!(
            refused,
            [
                ("/.dockerenv".into(), Reason::NotVisible),
                ("/home".into(), Reason::HoldsHome),
                ("/home/u".into(), Reason::Home),
                ("/home/u/.config".into(), Reason::SharedBase),
                ("/home/u/.local".into(), Reason::SharedBase),
                ("/srv".into(), Reason::TopLevel),
            ]
        );
        // A home deeper than two levels: its ancestors are never granted, the grant
        // goes beside it instead.
        let host = FakeHost::new(&["/srv/a/b/home/x", "/srv/a/b/tool/x"]);
        let cx = LearnContext::new("/srv/a/b/home".into(), Vec::new(), &host);
        let l = learn(&observe(&[("/srv/a/b/tool/x", Read)]), &cx);
        assert_eq!(grants(&l), [("/srv/a/b/tool".into(), false)]);
    }

    #[test]
    fn read_and_written_is_one_writable_grant_and_nested_ones_go() {
        let host = FakeHost::new(&[
            "/home/u/.config/t/a",
            "/home/u/.config/t/sub/b",
            "/home/u/x/y/z",
            "/home/u/x/y/file",
        ]);
        let l = learned(
            &host,
            &[
                ("/home/u/.config/t/a", Read),
                ("/home/u/.config/t/sub/b", Write),
                ("/home/u/x/y/z", Write),
                ("/home/u/x/y/file", Read),
            ],
        );
        assert_eq!(
            grants(&l),
            [
                ("/home/u/.config/t".into(), true),
                ("/home/u/x/y".into(), true)
            ]
        );
        assert_eq!(l.grants[0].evidence.read, 1);
        assert_eq!(l.grants[0].evidence.written, 1);

        // A read-only file inside a folder granted writable is dropped into it; a
        // writable one inside a read-only folder stays.
        let grants_in = vec![
            grant("/a/b", true, HostKind::Dir),
            grant("/a/b/c", false, HostKind::File),
            grant("/r/o", false, HostKind::Dir),
            grant("/r/o/w", true, HostKind::Dir),
        ];
        let kept: Vec<String> = drop_nested(grants_in)
            .iter()
            .map(|g| g.path.display().to_string())
            .collect();
        assert_eq!(kept, ["/a/b", "/r/o", "/r/o/w"]);
    }

    fn grant(path: &str, write: bool, kind: HostKind) -> Grant {
        Grant {
            path: path.into(),
            write,
            kind,
            missing: false,
            evidence: Evidence::default(),
        }
    }

    #[test]
    fn missing_paths_failed_probes_and_created_folders() {
        let host = FakeHost::new(&[
            "/home/u/.config/t/config.toml",
            "/home/u/.cache -> /data/cache",
        ]);
        let l = learned(
            &host,
            &[
                // Failed probes: not granted, listed.
                ("/home/u/.config/other/x.toml", Read),
                ("/home/u/.pythonrc", Read),
                // A probe under a folder that is granted: covered, not listed.
                ("/home/u/.config/t/config.toml", Read),
                ("/home/u/.config/t/missing.toml", Read),
                // Created while learning: a folder to create.
                ("/home/u/.local/state/newtool/log", Create),
                ("/home/u/.local/state/newtool/log", Write),
                // A file created directly in the home: nothing can hold it.
                ("/home/u/.newrc", Create),
                // Through a symlink.
                ("/home/u/.cache/t/x", Write),
                ("/home/u/.config/t", Remove),
            ],
        );
        assert_eq!(
            grants(&l),
            [
                ("/home/u/.config/t".into(), true),
                ("/home/u/.local/state/newtool".into(), true),
            ]
        );
        assert!(l.grants[1].missing);
        assert_eq!(l.to_create, [PathBuf::from("/home/u/.local/state/newtool")]);
        assert_eq!(
            l.not_found,
            [
                PathBuf::from("/home/u/.config/other/x.toml"),
                PathBuf::from("/home/u/.pythonrc")
            ]
        );
        assert_eq!(
            refusals(&l),
            [
                (
                    "/home/u/.cache/t".into(),
                    Reason::Symlink {
                        real: "/data/cache/t".into()
                    }
                ),
                ("/home/u/.newrc".into(), Reason::CreatedFile),
            ]
        );
    }

    #[test]
    fn unmountable_names_are_refused() {
        let host = FakeHost::new(&["/home/u/.config/a:b/x"]);
        let l = learned(&host, &[("/home/u/.config/a:b/x", Read)]);
        assert!(l.grants.is_empty());
        assert_eq!(
            refusals(&l),
            [("/home/u/.config/a:b".into(), Reason::Unmountable)]
        );
    }

    #[test]
    fn destinations_become_rules_by_name_and_port() {
        let mut o = Observations::new();
        let seen = |name: Option<&str>, ip: &str, port: u16, allowed: bool| Destination {
            name: name.map(str::to_owned),
            ip: ip.parse().unwrap(),
            port,
            allowed,
        };
        o.destination(seen(Some("API.example.com"), "93.184.216.34", 443, true));
        o.destination(seen(Some("api.example.com"), "93.184.216.35", 443, true));
        o.destination(seen(Some("api.example.com"), "93.184.216.35", 80, true));
        o.destination(seen(None, "203.0.113.9", 8443, true));
        o.destination(seen(None, "2001:db8::1", 443, true));
        o.destination(seen(Some("evil.test"), "10.0.0.1", 22, false));
        o.destination(seen(Some("bad name"), "203.0.113.1", 443, true));
        o.add_host(AddHost::parse("api.test:127.0.0.1").unwrap());
        let host = FakeHost::new(&[]);
        let cx = LearnContext::new("/home/u".into(), Vec::new(), &host);
        let l = learn(&o, &cx);
        let texts: Vec<&str> = l.rules.iter().map(|r| r.rule.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "allow 203.0.113.9:8443",
                "allow [2001:db8::1]:443",
                "allow api.example.com:443",
                "allow api.example.com:80",
            ]
        );
        let api = &l.rules[2];
        assert_eq!(api.connections, 2);
        assert_eq!(api.addresses.len(), 2);
        assert_eq!(l.refused_destinations.len(), 2);
        assert!(
            l.refused_destinations
                .iter()
                .any(|r| r.why.contains("refused"))
        );
        assert_eq!(l.add_hosts.len(), 1);
    }

    /// Red team: a hostile command names any path it likes, and learning records the
    /// attempt before the kernel refuses it. Another user's home, a file outside
    /// every folder the view showed, a write where the view was read-only: none was
    /// usable while learning, so none may be granted.
    #[test]
    fn what_the_learning_view_did_not_offer_is_never_granted() {
        let host = FakeHost::new(&[
            "/home/other/.cache/x",
            "/home/other/.profile",
            "/root/.config/vectraguard/config.toml",
            "/work/tools/run.sh",
            "/var/spool/cron/crontabs/u",
            "/var/lib/tool/db",
            "/srv/data/x",
        ]);
        let l = learned(
            &host,
            &[
                ("/home/other/.cache/x", Write),
                ("/home/other/.profile", Read),
                ("/root/.config/vectraguard/config.toml", Create),
                ("/work/tools/run.sh", Read),
                ("/var/spool/cron/crontabs/u", Write),
                ("/var/lib/tool/db", Read),
                ("/var/lib/tool/db", Write),
                ("/srv/data/x", Read),
            ],
        );
        // Reads below the view's read-only folders stay; writes there never.
        assert_eq!(
            grants(&l),
            [
                ("/srv/data/x".into(), false),
                ("/var/lib/tool".into(), false)
            ]
        );
        let mut refused = refusals(&l);
        refused.sort();
        assert_eq!(
            refused,
            [
                ("/home/other/.cache".into(), Reason::NotVisible),
                ("/home/other/.profile".into(), Reason::NotVisible),
                ("/root/.config/vectraguard".into(), Reason::NotVisible),
                ("/var/lib/tool".into(), Reason::ReadOnlyWhileLearning),
                ("/var/spool/cron".into(), Reason::ReadOnlyWhileLearning),
                ("/work/tools/run.sh".into(), Reason::NotVisible),
            ]
        );
        assert!(l.to_create.is_empty());
    }

    /// Red team: Vectra Guard's own folders and the places the host runs programs from
    /// are never granted, and neither is a secret's real folder behind a symlink
    /// (`~/.gnupg -> dotfiles/gnupg`) or a folder that holds one.
    #[test]
    fn own_folders_autostart_places_and_symlinked_secrets_are_withheld() {
        let host = FakeHost::new(&[
            "/home/u/.config/vectraguard/config.toml",
            "/home/u/.config/vectraguard/profiles/p.toml",
            "/home/u/.vectraguard/logs/x",
            "/home/u/.config/systemd/user/",
            "/home/u/.local/bin/",
            "/home/u/.gitconfig",
            "/home/u/dotfiles/keys/gnupg/private.key",
            "/home/u/dotfiles/keys/known/x",
            "/home/u/dotfiles/vim/vimrc",
            "/home/u/records/logs/s",
            "/home/u/dotfiles/bashrc",
        ]);
        let accesses = [
            ("/home/u/.config/vectraguard/config.toml", Write),
            ("/home/u/.config/vectraguard/profiles/p.toml", Read),
            ("/home/u/.vectraguard/logs/x", Read),
            ("/home/u/.config/systemd/user/evil.service", Create),
            ("/home/u/.local/bin/ls", Create),
            ("/home/u/.gitconfig", Write),
            ("/home/u/dotfiles/keys/gnupg/private.key", Read),
            ("/home/u/dotfiles/keys/known/x", Read),
            ("/home/u/dotfiles/vim/vimrc", Read),
            ("/home/u/records/logs/s", Write),
            ("/home/u/dotfiles/bashrc", Read),
            ("/home/u/dotfiles/bashrc", Write),
        ];
        let mut cx = LearnContext::new("/home/u".into(), Vec::new(), &host);
        cx.withheld = vec![
            Withheld::new("/home/u/dotfiles/keys/gnupg", Sensitive::GpgKeys),
            Withheld::new("/home/u/records/logs", Sensitive::VectraGuard),
            Withheld {
                write_only: true,
                ..Withheld::new("/home/u/dotfiles/bashrc", Sensitive::ShellStartup)
            },
        ];
        let l = learn(&observe(&accesses), &cx);
        // ~/dotfiles/keys holds the real ~/.gnupg: the grant goes one level deeper;
        // the real ~/.bashrc is readable, never writable.
        assert_eq!(
            grants(&l),
            [
                ("/home/u/dotfiles/bashrc".into(), false),
                ("/home/u/dotfiles/keys/known".into(), false),
                ("/home/u/dotfiles/vim".into(), false)
            ]
        );
        assert_eq!(
            sensitive_used(&l),
            [
                (
                    "/home/u/.config/systemd/user/evil.service",
                    Sensitive::RunsOnHost
                ),
                (
                    "/home/u/.config/vectraguard/config.toml",
                    Sensitive::VectraGuard
                ),
                (
                    "/home/u/.config/vectraguard/profiles/p.toml",
                    Sensitive::VectraGuard
                ),
                ("/home/u/.gitconfig", Sensitive::RunsOnHost),
                ("/home/u/.local/bin/ls", Sensitive::RunsOnHost),
                ("/home/u/.vectraguard/logs/x", Sensitive::VectraGuard),
                ("/home/u/dotfiles/bashrc", Sensitive::ShellStartup),
                (
                    "/home/u/dotfiles/keys/gnupg/private.key",
                    Sensitive::GpgKeys
                ),
                ("/home/u/records/logs/s", Sensitive::VectraGuard),
            ]
        );
        assert!(l.to_create.is_empty());
    }
}
