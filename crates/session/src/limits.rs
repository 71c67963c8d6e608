//! Which mechanism enforces each resource limit on this host, decided before the
//! sandbox starts. A limit the user asked for that nothing here can enforce stops
//! the run (fail closed) unless `--best-effort-limits` says otherwise.
//!
//! | limit        | mechanism                                                   |
//! |--------------|-------------------------------------------------------------|
//! | memory       | cgroup v2 (delegated) or v1; the default cap (half of RAM)  |
//! |              | falls back to the supervisor's watchdog (`watchdog.rs`)     |
//! | cpus         | cgroup v2 (delegated) or v1; nothing else is equivalent     |
//! | pids         | cgroup pids controller, else `RLIMIT_NPROC` in the sandbox's |
//! |              | own user namespace (counted per namespace since Linux 5.14)  |
//! | disk         | the size of the private tmpfs mounts (`/tmp`, `$HOME`)      |
//! | timeout      | the supervisor's timer: SIGTERM to all, SIGKILL after grace |
//! | max-output   | the supervisor's output relays                              |
//! | max-record   | the supervisor's output relays (default 1 GiB per stream)   |
//! | ptys         | the `max=` of the sandbox's own devpts instance             |

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Result, bail};
use vg_policy::limits::{
    DEFAULT_DISK, DEFAULT_KILL_GRACE, DEFAULT_MAX_RECORD, DEFAULT_PIDS, DEFAULT_PTYS, Limits,
    UNLIMITED_MEMORY,
};
use vg_sandbox::cgroup::{Cgroup, CgroupLimits};

/// The default memory cap on this host: half of `MemTotal` (read once).
pub fn default_memory() -> Option<u64> {
    static DEFAULT: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *DEFAULT.get_or_init(|| {
        let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
        vg_policy::limits::parse_mem_total(&meminfo).map(vg_policy::limits::default_memory)
    })
}

/// Where a session's memory cap comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemorySource {
    /// `--memory`, a configuration file or a profile.
    Asked,
    /// Nothing set one: the host's default ([`default_memory`]).
    Default,
    /// `--memory unlimited`: no cap.
    Unlimited,
}

/// What the output relays keep of each stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputCaps {
    /// `--max-output`: bytes shown and recorded; the rest is dropped.
    pub shown: Option<u64>,
    /// `--max-record`: bytes recorded; the rest is still shown.
    pub recorded: u64,
}

/// How the limits of one session are to be enforced, decided without touching the
/// host: the cgroup, if one is wanted, is created when the session starts
/// ([`Plan::enforce`]).
#[derive(Debug, Clone)]
pub struct Plan {
    /// The cgroup to create, when memory, cpus or pids are limited.
    pub cgroup: Option<CgroupPlan>,
    /// `--best-effort-limits`: run without a limit that cannot be enforced.
    pub best_effort: bool,
    /// The process cap when no cgroup enforces one (the default cap).
    pub rlimit_nproc: Option<u64>,
    /// Size of each private tmpfs.
    pub disk: u64,
    pub timeout: Option<Duration>,
    pub kill_grace: Duration,
    pub max_output: Option<u64>,
    /// Bytes recorded per output stream.
    pub max_record: u64,
    /// Where the memory cap comes from.
    pub memory_source: MemorySource,
    /// Pseudo-terminals of the sandbox's devpts.
    pub ptys: u64,
    /// The effective limits, defaults included, for the record.
    pub limits: Limits,
    /// Limit name → mechanism, for `metadata.json` (the cgroup's are added by
    /// [`Plan::enforce`]).
    pub enforced_by: BTreeMap<&'static str, String>,
    /// gVisor: the process cap its kernel holds inside, and the cgroup's cap on
    /// gVisor's own host tasks (see [`crate::backend::gvisor_pids`]).
    pub gvisor_pids: Option<crate::backend::GvisorPids>,
}

/// The sandbox's cgroup, before it exists.
#[derive(Debug, Clone, PartialEq)]
pub struct CgroupPlan {
    pub name: String,
    pub limits: CgroupLimits,
}

/// The limits as enforced once the session starts: the cgroup (removed on drop),
/// the process cap, and every mechanism, for the record.
#[derive(Debug)]
pub struct Enforced {
    pub cgroup: Option<Cgroup>,
    pub rlimit_nproc: Option<u64>,
    /// The memory cap the supervisor's watchdog enforces, when no cgroup does.
    pub watchdog: Option<u64>,
    pub enforced_by: BTreeMap<&'static str, String>,
}

/// Decides the mechanisms. `cgroup_name` names the sandbox's cgroup.
///
/// `gvisor`: the process cap (asked or the default) is held inside by gVisor's own
/// kernel, and the cgroup's pids cap, sized from it, holds gVisor's host threads
/// and processes, which a host cgroup counts instead of the processes inside (see
/// [`crate::backend::gvisor_pids`]). Where no cgroup can be made, the cap inside
/// still holds, and the record says the host side is not capped.
pub fn plan(requested: &Limits, cgroup_name: &str, recording: bool, gvisor: bool) -> Result<Plan> {
    let best_effort = requested.best_effort.unwrap_or(false);
    let mut enforced_by = BTreeMap::new();
    let mut limits = *requested;
    let memory_source = match requested.memory {
        Some(UNLIMITED_MEMORY) => {
            limits.memory = None;
            enforced_by.insert("memory", "none (--memory unlimited)".to_owned());
            MemorySource::Unlimited
        }
        Some(_) => MemorySource::Asked,
        None => {
            let Some(default) = default_memory() else {
                bail!(
                    "cannot read MemTotal from /proc/meminfo to set the default memory cap (half of physical memory): pass --memory SIZE, or --memory unlimited"
                );
            };
            limits.memory = Some(default);
            MemorySource::Default
        }
    };
    let gvisor_pids = gvisor.then(|| {
        crate::backend::gvisor_pids(
            *limits.pids.get_or_insert(DEFAULT_PIDS),
            crate::backend::host_task_max(),
        )
    });
    let wanted = CgroupLimits {
        memory: limits.memory,
        cpus: requested.cpus,
        pids: gvisor_pids.map_or(limits.pids, |p| Some(p.host)),
    };
    let cgroup = (!wanted.is_empty()).then(|| CgroupPlan {
        name: cgroup_name.to_owned(),
        limits: wanted,
    });
    let mut rlimit_nproc = None;
    if limits.pids.is_none() && vg_sandbox::probe::nproc_counts_per_namespace() {
        // The default process cap: an rlimit costs nothing to set up. (Before Linux
        // 5.14 it would count the user's processes outside the sandbox too.)
        limits.pids = Some(DEFAULT_PIDS);
        rlimit_nproc = Some(DEFAULT_PIDS);
        enforced_by.insert("pids", "rlimit-nproc".to_owned());
    }
    let disk = *limits.disk.get_or_insert(DEFAULT_DISK);
    enforced_by.insert("disk", "tmpfs-size".to_owned());
    if limits.timeout.is_some() {
        enforced_by.insert("timeout", "supervisor".to_owned());
    }
    if limits.max_output.is_some() {
        if !recording {
            bail!(
                "--max-output is enforced by the output relay, which --no-record turns off: remove one of them"
            );
        }
        enforced_by.insert("max_output", "supervisor".to_owned());
    }
    let max_record = *limits.max_record.get_or_insert(DEFAULT_MAX_RECORD);
    if recording {
        enforced_by.insert("max_record", "supervisor".to_owned());
    }
    let kill_grace = *limits.kill_grace.get_or_insert(DEFAULT_KILL_GRACE);
    let ptys = *limits.ptys.get_or_insert(DEFAULT_PTYS);
    enforced_by.insert("ptys", "devpts-max".to_owned());
    Ok(Plan {
        cgroup,
        best_effort,
        rlimit_nproc,
        disk,
        timeout: limits.timeout,
        kill_grace,
        max_output: limits.max_output,
        max_record,
        memory_source,
        ptys,
        limits,
        enforced_by,
        gvisor_pids,
    })
}

impl Plan {
    /// What the output relays keep of each stream.
    pub fn output_caps(&self) -> OutputCaps {
        OutputCaps {
            shown: self.max_output,
            recorded: self.max_record,
        }
    }

    /// Creates the cgroup, or, when it cannot be, falls back (the default memory
    /// cap: the supervisor's watchdog; pids: `RLIMIT_NPROC`) or refuses the run
    /// unless `--best-effort-limits` (with which an asked-for memory cap is left to
    /// the watchdog too).
    pub fn enforce(&self) -> Result<Enforced> {
        let best_effort = self.best_effort;
        let mut enforced_by = self.enforced_by.clone();
        let mut rlimit_nproc = self.rlimit_nproc;
        let mut cgroup = None;
        let mut watchdog = None;
        if let Some(CgroupPlan {
            name,
            limits: wanted,
        }) = &self.cgroup
        {
            let wanted = *wanted;
            match Cgroup::create(name, &wanted) {
                Ok(cg) => {
                    for (name, set) in [
                        ("memory", wanted.memory.is_some()),
                        ("cpus", wanted.cpus.is_some()),
                        ("pids", wanted.pids.is_some()),
                    ] {
                        if set {
                            enforced_by.insert(name, cg.version.as_str().to_owned());
                        }
                    }
                    cgroup = Some(cg);
                }
                Err(why) => {
                    // The default cap is ours to enforce however we can.
                    let default_memory = self.memory_source == MemorySource::Default;
                    if default_memory {
                        watchdog = wanted.memory;
                        enforced_by.insert("memory", "watchdog".to_owned());
                    }
                    let unenforceable: Vec<&str> = [
                        ("--memory", wanted.memory.is_some() && !default_memory),
                        ("--cpus", wanted.cpus.is_some()),
                    ]
                    .into_iter()
                    .filter_map(|(n, set)| set.then_some(n))
                    .collect();
                    if !unenforceable.is_empty() {
                        if !best_effort {
                            bail!(
                                "{} cannot be enforced on this host: {why}. Run as root on a cgroup v1 host, give vectraguard a delegated cgroup v2 subtree, or pass --best-effort-limits to run without cgroups (memory then held only by the supervisor's polling watchdog, cpus not at all; `vectraguard doctor` shows what is available)",
                                unenforceable.join(" and "),
                            );
                        }
                        let asked_memory = wanted.memory.is_some() && !default_memory;
                        if asked_memory {
                            crate::diag::warning(format_args!(
                                "--memory is enforced only by the supervisor's watchdog (--best-effort-limits), which polls the sandbox's resident memory: {why}"
                            ));
                            watchdog = wanted.memory;
                            enforced_by.insert("memory", format!("watchdog (best effort: {why})"));
                        }
                        if wanted.cpus.is_some() {
                            crate::diag::warning(format_args!(
                                "--cpus not enforced (--best-effort-limits): {why}"
                            ));
                            enforced_by.insert("cpus", format!("none (best effort: {why})"));
                        }
                    }
                    // gVisor's cap holds inside without a cgroup (below).
                    if let Some(n) = wanted.pids.filter(|_| self.gvisor_pids.is_none()) {
                        if vg_sandbox::probe::nproc_counts_per_namespace() {
                            rlimit_nproc = Some(n);
                            enforced_by.insert("pids", "rlimit-nproc".to_owned());
                        } else if best_effort {
                            crate::diag::warning(format_args!(
                                "--pids not enforced (--best-effort-limits): {why}"
                            ));
                            enforced_by.insert("pids", format!("none (best effort: {why})"));
                        } else {
                            bail!(
                                "--pids cannot be enforced on this host: {why}, and this kernel (before 5.14) counts RLIMIT_NPROC per user rather than per sandbox. Use cgroups, or pass --best-effort-limits"
                            );
                        }
                    }
                }
            }
        }
        if let Some(pids) = self.gvisor_pids {
            rlimit_nproc = Some(pids.inside);
            let (by, host) = pids.enforced_by(cgroup.as_ref().map(|cg| cg.version.as_str()));
            enforced_by.insert("pids", by);
            enforced_by.insert("pids_host", host);
        }
        Ok(Enforced {
            cgroup,
            rlimit_nproc,
            watchdog,
            enforced_by,
        })
    }

    /// The `limits` section of `metadata.json`.
    pub fn record(&self, enforced: &Enforced, out: &mut vg_records::Limits) {
        out.memory_bytes = self.limits.memory;
        out.cpus = self.limits.cpus;
        out.pids = self.limits.pids;
        // Whole seconds, rounded up (so 500ms is not recorded as 0); timeout_ms is exact.
        out.timeout_secs = self
            .limits
            .timeout
            .map(|d| d.as_secs() + u64::from(d.subsec_nanos() > 0));
        out.max_output_bytes = self.limits.max_output;
        out.disk_bytes = self.limits.disk;
        out.extra.insert(
            "max_record_bytes".into(),
            serde_json::json!(self.max_record),
        );
        if self.memory_source == MemorySource::Default {
            // The cap nobody asked for: half of this host's physical memory.
            out.extra
                .insert("memory_default".into(), serde_json::json!(true));
        }
        out.extra.insert(
            "enforced_by".into(),
            serde_json::to_value(&enforced.enforced_by).unwrap_or_default(),
        );
        if let Some(t) = self.limits.timeout {
            out.extra
                .insert("timeout_ms".into(), serde_json::json!(t.as_millis()));
        }
        out.extra
            .insert("ptys".into(), serde_json::json!(self.ptys));
        out.extra.insert(
            "kill_grace_ms".into(),
            serde_json::json!(self.kill_grace.as_millis()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On gVisor the process cap (asked or default) is its kernel's, and the
    /// cgroup's pids cap is the larger one sized for gVisor's own host tasks.
    #[test]
    fn gvisor_s_process_cap_is_held_inside_and_its_cgroup_sized_for_gvisor() {
        let asked = Limits {
            pids: Some(64),
            ..Limits::default()
        };
        let host_max = crate::backend::host_task_max();
        for (requested, inside) in [(Limits::default(), DEFAULT_PIDS), (asked, 64)] {
            let p = plan(&requested, "t", true, true).unwrap();
            let want = crate::backend::gvisor_pids(inside, host_max);
            assert_eq!(p.gvisor_pids, Some(want));
            assert_eq!(p.limits.pids, Some(inside));
            assert_eq!(p.cgroup.unwrap().limits.pids, Some(want.host));
            assert!(want.host > inside);
            assert_eq!(p.rlimit_nproc, None);
        }
        let native = plan(&asked, "t", true, false).unwrap();
        assert_eq!(native.gvisor_pids, None);
        assert_eq!(native.cgroup.unwrap().limits.pids, Some(64));
    }
}
