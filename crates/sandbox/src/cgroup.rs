//! Memory, CPU and process limits through cgroups: a cgroup per sandbox, created
//! below the supervisor's own cgroup before the sandbox's init runs anything, and
//! removed when the session ends.
//!
//! - cgroup v1 (one hierarchy per controller, usually root only): a directory under
//!   each of `memory`, `cpu` and `pids` that a limit needs.
//! - cgroup v2 with a delegated subtree (systemd gives users one under
//!   `user@UID.service`): a child of our cgroup. The "no internal processes" rule
//!   forbids enabling controllers for children of a cgroup that holds processes, so
//!   the supervisor first moves itself into a leaf, `vectraguard-supervisor`, as
//!   container runtimes do.
//!
//! A sandbox's group is named `vectraguard-PID-N` after the supervisor's pid. A
//! supervisor killed before it removes its groups (SIGKILL) leaves them behind, empty
//! once the sandbox died with it (init's parent-death signal): the next `create` in
//! the same parent removes every such group whose supervisor is gone
//! ([`remove_stale`]).
//!
//! Everything here is plain file I/O on cgroupfs.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

const ROOT: &str = "/sys/fs/cgroup";
/// The CFS period used with `--cpus`: the kernel's default, 100 ms.
const CPU_PERIOD_US: u64 = 100_000;

/// The cgroup limits of one sandbox.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CgroupLimits {
    pub memory: Option<u64>,
    pub cpus: Option<f64>,
    pub pids: Option<u64>,
}

impl CgroupLimits {
    pub fn is_empty(&self) -> bool {
        self.memory.is_none() && self.cpus.is_none() && self.pids.is_none()
    }

    /// Controllers needed, by their cgroup names.
    fn controllers(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.memory.is_some() {
            out.push("memory");
        }
        if self.cpus.is_some() {
            out.push("cpu");
        }
        if self.pids.is_some() {
            out.push("pids");
        }
        out
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

impl Version {
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1 => "cgroup-v1",
            Version::V2 => "cgroup-v2",
        }
    }
}

/// Why cgroups cannot enforce a limit here.
#[derive(Debug, thiserror::Error)]
#[error("{reason}")]
pub struct Unavailable {
    pub reason: String,
}

fn unavailable(reason: impl Into<String>) -> Unavailable {
    Unavailable {
        reason: reason.into(),
    }
}

/// The entries of `/proc/self/cgroup`: (controllers, path). cgroup v2 is the entry
/// with an empty controller list.
pub fn parse_proc_cgroup(text: &str) -> Vec<(Vec<String>, String)> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let _id = parts.next()?;
            let controllers = parts.next()?;
            let path = parts.next()?;
            Some((
                controllers
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_owned)
                    .collect(),
                path.to_owned(),
            ))
        })
        .collect()
}

/// A sandbox's cgroup, removed on drop.
#[derive(Debug)]
pub struct Cgroup {
    pub version: Version,
    /// One directory per controller (v1) or one directory (v2).
    dirs: Vec<PathBuf>,
    pub controllers: Vec<&'static str>,
}

impl Cgroup {
    /// Creates the sandbox's cgroup named `name` with `limits` applied, on v2 when
    /// this process's cgroup is delegated to us, else on v1.
    pub fn create(name: &str, limits: &CgroupLimits) -> Result<Self, Unavailable> {
        let own = parse_proc_cgroup(&fs::read_to_string("/proc/self/cgroup").unwrap_or_default());
        let wanted = limits.controllers();
        let v1_has = |c: &str| own.iter().any(|(ctrls, _)| ctrls.iter().any(|x| x == c));
        if wanted.iter().all(|c| v1_has(c)) {
            return Self::create_v1(name, limits, &own, &wanted);
        }
        if let Some((_, path)) = own.iter().find(|(ctrls, _)| ctrls.is_empty()) {
            let unified = if Path::new(ROOT).join("cgroup.controllers").exists() {
                PathBuf::from(ROOT)
            } else {
                PathBuf::from(ROOT).join("unified")
            };
            return Self::create_v2(name, limits, &unified, path, &wanted);
        }
        Err(unavailable("this host has no cgroup hierarchy"))
    }

    fn create_v1(
        name: &str,
        limits: &CgroupLimits,
        own: &[(Vec<String>, String)],
        wanted: &[&'static str],
    ) -> Result<Self, Unavailable> {
        let mut cg = Cgroup {
            version: Version::V1,
            dirs: Vec::new(),
            controllers: wanted.to_vec(),
        };
        for &controller in wanted {
            let path = own
                .iter()
                .find(|(c, _)| c.iter().any(|x| x == controller))
                .map(|(_, p)| p.trim_start_matches('/'))
                .unwrap_or("");
            let parent = Path::new(ROOT).join(controller).join(path);
            remove_stale(&parent);
            let dir = parent.join(name);
            fs::create_dir(&dir).map_err(|e| {
                unavailable(format!(
                    "cannot create the cgroup v1 {controller} group {}: {e}",
                    dir.display()
                ))
            })?;
            cg.dirs.push(dir.clone());
            let set = |file: &str, value: String| {
                fs::write(dir.join(file), &value).map_err(|e| {
                    unavailable(format!(
                        "cannot set {file} = {value} in {}: {e}",
                        dir.display()
                    ))
                })
            };
            match controller {
                "memory" => {
                    let bytes = limits.memory.unwrap_or(u64::MAX);
                    set("memory.limit_in_bytes", bytes.to_string())?;
                    // Without this, the sandbox could go on in swap.
                    if dir.join("memory.memsw.limit_in_bytes").exists() {
                        set("memory.memsw.limit_in_bytes", bytes.to_string())?;
                    }
                }
                "cpu" => {
                    set("cpu.cfs_period_us", CPU_PERIOD_US.to_string())?;
                    set("cpu.cfs_quota_us", quota_us(limits.cpus).to_string())?;
                }
                "pids" => set("pids.max", limits.pids.unwrap_or(u64::MAX).to_string())?,
                _ => {}
            }
        }
        Ok(cg)
    }

    fn create_v2(
        name: &str,
        limits: &CgroupLimits,
        unified: &Path,
        own: &str,
        wanted: &[&'static str],
    ) -> Result<Self, Unavailable> {
        let parent = unified.join(own.trim_start_matches('/'));
        let available = fs::read_to_string(parent.join("cgroup.controllers")).map_err(|e| {
            unavailable(format!(
                "cannot read {}: {e}",
                parent.join("cgroup.controllers").display()
            ))
        })?;
        let missing: Vec<&str> = wanted
            .iter()
            .copied()
            .filter(|c| !available.split_whitespace().any(|a| a == *c))
            .collect();
        if !missing.is_empty() {
            return Err(unavailable(format!(
                "the cgroup v2 controllers {} are not delegated to {} (start vectraguard under `systemd-run --user --scope -p Delegate=yes`, or ask for them in the parent's cgroup.subtree_control)",
                missing.join(", "),
                parent.display()
            )));
        }
        enable_subtree(&parent, wanted)?;
        remove_stale(&parent);
        let dir = parent.join(name);
        fs::create_dir(&dir)
            .map_err(|e| unavailable(format!("cannot create the cgroup {}: {e}", dir.display())))?;
        let cg = Cgroup {
            version: Version::V2,
            dirs: vec![dir.clone()],
            controllers: wanted.to_vec(),
        };
        let set = |file: &str, value: String| {
            fs::write(dir.join(file), &value).map_err(|e| {
                unavailable(format!(
                    "cannot set {file} = {value} in {}: {e}",
                    dir.display()
                ))
            })
        };
        if let Some(bytes) = limits.memory {
            set("memory.max", bytes.to_string())?;
            if dir.join("memory.swap.max").exists() {
                set("memory.swap.max", "0".into())?;
            }
        }
        if limits.cpus.is_some() {
            set(
                "cpu.max",
                format!("{} {CPU_PERIOD_US}", quota_us(limits.cpus)),
            )?;
        }
        if let Some(n) = limits.pids {
            set("pids.max", n.to_string())?;
        }
        Ok(cg)
    }

    /// On cgroup v1, the files through which the sandbox's init moves itself into the
    /// cgroup: each hierarchy's `tasks`, opened here by the supervisor, written `0` by
    /// init as its first step (see `init.rs`). `None` on cgroup v2, where the
    /// supervisor moves init with [`Self::attach`].
    ///
    /// Why: the kernel moves a process written to `cgroup.procs` (or another task's
    /// id written to `tasks`) under the global `cgroup_threadgroup_rwsem`, whose write
    /// side waits for an RCU grace period (5-15 ms on a 250 Hz kernel, most of a
    /// sandbox's start-up); a thread that writes `0` (itself) to `tasks` is moved
    /// without that lock, in tens of microseconds. A single-threaded process moving
    /// its only thread moves itself whole, and what it forks inherits the group. The
    /// write is allowed by the opener's credentials (cgroup v1 checks those of the
    /// file, not the writer's), so init may do it from its new user namespace; no
    /// other process ever holds these descriptors (init drops them once written).
    pub(crate) fn entry_files(&self) -> io::Result<Option<Vec<fs::File>>> {
        if self.version != Version::V1 {
            return Ok(None);
        }
        self.dirs
            .iter()
            .map(|dir| fs::OpenOptions::new().write(true).open(dir.join("tasks")))
            .collect::<io::Result<Vec<_>>>()
            .map(Some)
    }

    /// Moves process `pid` (the sandbox's init, before it runs anything) into the
    /// cgroup; its descendants inherit it.
    pub fn attach(&self, pid: libc::pid_t) -> io::Result<()> {
        for dir in &self.dirs {
            fs::write(dir.join("cgroup.procs"), pid.to_string())?;
        }
        Ok(())
    }

    /// Limit hits counted by the kernel so far.
    pub fn hits(&self) -> Hits {
        let oom_file = match self.version {
            Version::V1 => "memory.oom_control",
            Version::V2 => "memory.events",
        };
        let count = |dir: &Path, file: &str, key: &str| {
            fs::read_to_string(dir.join(file))
                .unwrap_or_default()
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        let mut hits = Hits::default();
        for dir in &self.dirs {
            hits.oom_kills += count(dir, oom_file, "oom_kill ");
            hits.pids_max += count(dir, "pids.events", "max ");
        }
        hits
    }
}

impl Drop for Cgroup {
    /// The sandbox is gone when this runs (its PID namespace died with init), so the
    /// groups are empty and can be removed.
    fn drop(&mut self) {
        for dir in self.dirs.iter().rev() {
            // A just-exited process can keep a group busy for a moment.
            for _ in 0..50 {
                match fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                    Err(_) => break,
                }
            }
        }
    }
}

/// Kernel counters of limit hits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hits {
    pub oom_kills: u64,
    pub pids_max: u64,
}

// `as` saturates, and parse_cpus bounds the value to 0.01..=1024 anyway.
#[allow(clippy::cast_possible_truncation)]
fn quota_us(cpus: Option<f64>) -> i64 {
    match cpus {
        Some(c) => ((c * CPU_PERIOD_US as f64).round() as i64).max(1000),
        None => -1,
    }
}

/// The supervisor's pid in a sandbox group's name, `vectraguard-PID` or
/// `vectraguard-PID-N` (not the v2 leaf `vectraguard-supervisor`).
fn supervisor_of(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("vectraguard-")?;
    rest.split('-').next()?.parse().ok()
}

/// This process's pid namespace as a group's name ends with it (`nsINODE`): a
/// group's supervisor pid means something only to a process in the same pid
/// namespace.
pub fn pid_namespace_tag() -> String {
    use std::os::unix::fs::MetadataExt;
    let inode = fs::metadata("/proc/self/ns/pid").map_or(0, |m| m.ino());
    format!("ns{inode}")
}

/// Whether a process in pid namespace `ours` (its [`pid_namespace_tag`]) can
/// judge the group `name` by its supervisor's pid: a group named by a process in
/// another pid namespace (a container's; session-22 red team: a supervisor there
/// removed the host sessions' new groups, whose pids it could not see, and their
/// sandboxes failed to start) cannot be. Groups named before the tag: judged.
fn judged_here(name: &str, ours: &str) -> bool {
    match name.rsplit('-').next() {
        Some(tag) if tag.starts_with("ns") && tag[2..].bytes().all(|b| b.is_ascii_digit()) => {
            tag == ours
        }
        _ => true,
    }
}

/// Removes the sandbox groups in `parent` whose supervisor is no longer running
/// (killed before its `Drop` ran). `rmdir` only succeeds on a group without
/// processes or children, so a group still in use is never taken away; a group whose
/// supervisor's pid was reused stays until that process is gone too.
fn remove_stale(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    let ours = pid_namespace_tag();
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(name) = name.to_str().filter(|n| judged_here(n, &ours)) else {
            continue;
        };
        let Some(pid) = supervisor_of(name) else {
            continue;
        };
        if pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = fs::remove_dir(entry.path());
        }
    }
}

/// Makes `wanted` controllers available to children of `parent` (cgroup v2). When
/// `parent` holds processes (ours), they move to a leaf first.
fn enable_subtree(parent: &Path, wanted: &[&str]) -> Result<(), Unavailable> {
    let enabled = fs::read_to_string(parent.join("cgroup.subtree_control")).unwrap_or_default();
    let needed: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|c| !enabled.split_whitespace().any(|e| e == *c))
        .collect();
    if needed.is_empty() {
        return Ok(());
    }
    let procs = fs::read_to_string(parent.join("cgroup.procs")).unwrap_or_default();
    let me = std::process::id().to_string();
    if procs
        .lines()
        .any(|p| p.trim() != me && !p.trim().is_empty())
    {
        return Err(unavailable(format!(
            "{} holds other processes, so its controllers cannot be handed to a child cgroup (start vectraguard under `systemd-run --user --scope -p Delegate=yes`)",
            parent.display()
        )));
    }
    if procs.lines().any(|p| p.trim() == me) {
        let leaf = parent.join("vectraguard-supervisor");
        match fs::create_dir(&leaf) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(unavailable(format!(
                    "cannot create {}: {e}",
                    leaf.display()
                )));
            }
        }
        fs::write(leaf.join("cgroup.procs"), &me).map_err(|e| {
            unavailable(format!(
                "cannot move vectraguard into {}: {e}",
                leaf.display()
            ))
        })?;
    }
    let change: Vec<String> = needed.iter().map(|c| format!("+{c}")).collect();
    fs::write(parent.join("cgroup.subtree_control"), change.join(" ")).map_err(|e| {
        unavailable(format!(
            "cannot enable {} in {}: {e}",
            needed.join(", "),
            parent.join("cgroup.subtree_control").display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_cgroup_lines_parse() {
        let text = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/68a2\n1:cpu,cpuacct:/x\n0::/user.slice/a.scope\n";
        let parsed = parse_proc_cgroup(text);
        assert_eq!(
            parsed[2],
            (vec!["memory".to_owned()], "/process_api/68a2".to_owned())
        );
        assert_eq!(parsed[3].0, ["cpu", "cpuacct"]);
        assert_eq!(parsed[4], (vec![], "/user.slice/a.scope".to_owned()));
    }

    #[test]
    fn only_groups_named_in_this_pid_namespace_or_before_the_tag_are_judged() {
        assert!(judged_here(
            "vectraguard-4242-3-ns4026531836",
            "ns4026531836"
        ));
        assert!(!judged_here(
            "vectraguard-4242-3-ns4026532001",
            "ns4026531836"
        ));
        // Named before the tag: judged as before.
        assert!(judged_here("vectraguard-4242-3", "ns4026531836"));
        assert!(judged_here("vectraguard-4242", "ns4026531836"));
        // A tag is "ns" and digits only.
        assert!(judged_here("vectraguard-4242-3-nsx", "ns1"));
        assert!(pid_namespace_tag().starts_with("ns"));
        assert_eq!(supervisor_of("vectraguard-4242-3-ns4026531836"), Some(4242));
    }

    #[test]
    fn stale_groups_are_known_by_their_supervisors_pid() {
        assert_eq!(supervisor_of("vectraguard-4242"), Some(4242));
        assert_eq!(supervisor_of("vectraguard-4242-17"), Some(4242));
        assert_eq!(supervisor_of("vectraguard-supervisor"), None);
        assert_eq!(supervisor_of("other-4242"), None);
        assert_eq!(supervisor_of("vectraguard-"), None);
    }

    #[test]
    fn cpu_quota_is_a_share_of_the_period() {
        assert_eq!(quota_us(Some(0.5)), 50_000);
        assert_eq!(quota_us(Some(2.0)), 200_000);
        assert_eq!(quota_us(Some(0.001)), 1000);
        assert_eq!(quota_us(None), -1);
    }

    #[test]
    fn controllers_follow_the_limits() {
        let l = CgroupLimits {
            memory: Some(1),
            cpus: None,
            pids: Some(5),
        };
        assert_eq!(l.controllers(), ["memory", "pids"]);
        assert!(CgroupLimits::default().is_empty());
    }
}
