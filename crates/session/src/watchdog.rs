//! The supervisor's memory watchdog: the default memory cap where no cgroup can
//! hold it (an unprivileged user on a cgroup v1 host, or without a delegated v2
//! subtree), and an asked-for cap with `--best-effort-limits`.
//!
//! A thread polls, every [`INTERVAL`], the resident memory of every process of the
//! sandbox: its init and all of init's descendants, found through
//! `/proc/PID/task/TID/children` (or, on a kernel without it, through every
//! process's parent in `/proc/*/stat`). Nothing in the sandbox can leave that tree:
//! an orphan is adopted by init (or by a subreaper inside), and a nested PID
//! namespace's processes are descendants too. Each process counts its anonymous and
//! shared-memory pages (`RssAnon + RssShmem` of `/proc/PID/status`: kernel counters,
//! cheap to read). That sum counts a page shared by several processes (after
//! `fork`) once per process, so it is an upper bound; only when it passes the cap
//! is the proportional share (`Pss_Anon + Pss_Shmem` of `smaps_rollup`, which walks
//! page tables) summed to confirm. Over the cap, the whole sandbox is killed through
//! its [`vg_sandbox::Stopper`] and the hit is kept for the record.
//!
//! What it does not catch, unlike a cgroup: growth between two polls (a program
//! touching pages at several GiB/s overshoots by up to a poll's worth), page cache,
//! kernel memory, memory held by files in a tmpfs (`/tmp`, `$HOME`: bounded by
//! `--disk` instead), or shared memory no process has in its page tables (a
//! `memfd` filled with `write`, a shared mapping after `MADV_DONTNEED`, System V
//! segments once detached): none of it is in any process's `RssShmem`.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

/// Time between two polls: a hog touching 2 GiB/s overshoots by about 100 MiB.
pub const INTERVAL: Duration = Duration::from_millis(50);

/// The cap was passed: what was measured when the sandbox was killed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub at: SystemTime,
    /// The cap, in bytes.
    pub limit: u64,
    /// Resident memory of the sandbox's processes (proportional share), in bytes.
    pub measured: u64,
    /// Processes counted.
    pub processes: usize,
}

/// A running watchdog; dropping it stops the thread at once.
pub struct Watchdog {
    hit: Arc<OnceLock<Hit>>,
    /// Dropped to wake and end the thread.
    quit: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Watches the sandbox whose init is `init` (a host pid, our child, so that it
    /// stays ours until we reap it) against `limit` bytes.
    pub fn start(init: i32, limit: u64, stopper: vg_sandbox::Stopper) -> std::io::Result<Self> {
        let hit = Arc::new(OnceLock::new());
        let (quit, quitting) = mpsc::channel::<()>();
        let found = Arc::clone(&hit);
        // Init's start time, so that a recycled pid is never taken for the sandbox.
        let started = start_time(init);
        let thread = std::thread::Builder::new()
            .name("vg-memory-watchdog".into())
            .spawn(move || {
                let proc = Path::new("/proc");
                loop {
                    match quitting.recv_timeout(INTERVAL) {
                        Err(RecvTimeoutError::Timeout) => {}
                        _ => return,
                    }
                    if start_time(init) != started {
                        return;
                    }
                    if let Some(over) = check(proc, init, limit) {
                        let _ = found.set(over);
                        let _ = stopper.stop(true);
                        return;
                    }
                }
            })?;
        Ok(Self {
            hit,
            quit: Some(quit),
            thread: Some(thread),
        })
    }

    /// Whether (and how) the cap was passed.
    pub fn hit(&self) -> Option<Hit> {
        self.hit.get().cloned()
    }

    /// Stops polling (at once: the thread waits on a channel, not a sleep) and
    /// returns the hit, if any.
    pub fn finish(mut self) -> Option<Hit> {
        self.stop();
        self.hit()
    }

    fn stop(&mut self) {
        drop(self.quit.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One poll: the hit when the sandbox under `init` is over `limit`.
fn check(proc: &Path, init: i32, limit: u64) -> Option<Hit> {
    let pids = sandbox_processes(proc, init);
    let upper: u64 = pids
        .iter()
        .map(|&pid| resident(proc, pid).unwrap_or(0))
        .sum();
    if upper <= limit {
        return None;
    }
    // Over by the upper bound: confirm with the proportional share. A process
    // whose share cannot be read counts with its resident size.
    let measured: u64 = pids
        .iter()
        .map(|&pid| {
            proportional(proc, pid)
                .or_else(|| resident(proc, pid))
                .unwrap_or(0)
        })
        .sum();
    (measured > limit).then(|| Hit {
        at: SystemTime::now(),
        limit,
        measured,
        processes: pids.len(),
    })
}

/// `init` and all its descendants, by the kernel's list of each thread's children,
/// or by every process's parent where the kernel has no such list.
pub fn sandbox_processes(proc: &Path, init: i32) -> BTreeSet<i32> {
    let with_children = proc.join(format!("{init}/task/{init}/children")).exists();
    if with_children {
        descendants(init, |pid| children(proc, pid))
    } else {
        let parents = parents(proc);
        let mut by_parent: HashMap<i32, Vec<i32>> = HashMap::new();
        for (pid, ppid) in parents {
            by_parent.entry(ppid).or_default().push(pid);
        }
        descendants(init, |pid| by_parent.get(&pid).cloned().unwrap_or_default())
    }
}

/// `root` and everything reachable through `children_of`.
fn descendants(root: i32, children_of: impl Fn(i32) -> Vec<i32>) -> BTreeSet<i32> {
    let mut found = BTreeSet::from([root]);
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        for child in children_of(pid) {
            if found.insert(child) {
                todo.push(child);
            }
        }
    }
    found
}

/// The children of every thread of `pid`.
fn children(proc: &Path, pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(proc.join(format!("{pid}/task"))) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    out
}

/// (pid, parent) of every process.
fn parents(proc: &Path) -> Vec<(i32, i32)> {
    let Ok(entries) = std::fs::read_dir(proc) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(proc.join(format!("{pid}/stat"))).ok()?;
            Some((pid, stat_field(&stat, 4)?.parse().ok()?))
        })
        .collect()
}

/// Field `n` (1-based, as in proc(5)) of a `/proc/PID/stat` line; the command name
/// (field 2) may hold spaces and parentheses, so fields count from its last `)`.
fn stat_field(stat: &str, n: usize) -> Option<&str> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n.checked_sub(3)?)
}

/// When `pid` started (field 22 of its stat), to tell it from a later process
/// with the same pid.
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_field(&stat, 22)?.parse().ok()
}

/// Anonymous and shared-memory resident bytes of `pid`.
fn resident(proc: &Path, pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(proc.join(format!("{pid}/status"))).ok()?;
    parse_resident(&status)
}

/// Its proportional share of them.
fn proportional(proc: &Path, pid: i32) -> Option<u64> {
    let rollup = std::fs::read_to_string(proc.join(format!("{pid}/smaps_rollup"))).ok()?;
    parse_proportional(&rollup)
}

/// `RssAnon + RssShmem` of a `/proc/PID/status` text, in bytes; `None` for a
/// process without memory (a zombie, a kernel thread).
pub fn parse_resident(status: &str) -> Option<u64> {
    let anon = kib_field(status, "RssAnon:")?;
    Some(anon + kib_field(status, "RssShmem:").unwrap_or(0))
}

/// `Pss_Anon + Pss_Shmem` of a `smaps_rollup` text, in bytes (`Pss` on kernels
/// before 5.9, which lack the split).
pub fn parse_proportional(rollup: &str) -> Option<u64> {
    match kib_field(rollup, "Pss_Anon:") {
        Some(anon) => Some(anon + kib_field(rollup, "Pss_Shmem:").unwrap_or(0)),
        None => kib_field(rollup, "Pss:"),
    }
}

/// A `Key:   1234 kB` line's value, in bytes.
fn kib_field(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let mut words = line[key.len()..].split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(value.saturating_mul(1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_counts_anonymous_and_shared_memory() {
        let status = "Name:\tpython3\nVmRSS:\t  900 kB\nRssAnon:\t  600 kB\nRssFile:\t  200 kB\nRssShmem:\t  100 kB\n";
        assert_eq!(parse_resident(status), Some(700 * 1024));
        // A zombie has no memory lines.
        assert_eq!(parse_resident("Name:\tsh\nState:\tZ (zombie)\n"), None);
        assert_eq!(parse_resident("RssAnon:\t12 pages\n"), None);
    }

    #[test]
    fn proportional_share_prefers_the_split_fields() {
        let rollup = "Rss:  1000 kB\nPss:  500 kB\nPss_Anon:  300 kB\nPss_File:  150 kB\nPss_Shmem:  50 kB\n";
        assert_eq!(parse_proportional(rollup), Some(350 * 1024));
        assert_eq!(
            parse_proportional("Rss: 10 kB\nPss: 7 kB\n"),
            Some(7 * 1024)
        );
        assert_eq!(parse_proportional(""), None);
    }

    #[test]
    fn stat_fields_count_from_the_command_names_end() {
        let stat = "4242 (a) b (c)) S 17 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 987654 0";
        assert_eq!(stat_field(stat, 3), Some("S"));
        assert_eq!(stat_field(stat, 4), Some("17"));
        assert_eq!(stat_field(stat, 22), Some("987654"));
        assert_eq!(stat_field("garbage", 4), None);
    }

    #[test]
    fn descendants_follow_the_tree_once() {
        let tree: HashMap<i32, Vec<i32>> =
            HashMap::from([(1, vec![2, 3]), (2, vec![4]), (4, vec![1]), (9, vec![10])]);
        let found = descendants(1, |p| tree.get(&p).cloned().unwrap_or_default());
        assert_eq!(found, BTreeSet::from([1, 2, 3, 4]));
    }

    /// The real `/proc`: a child of ours that holds 64 MiB is found, and counted.
    #[test]
    fn a_live_process_tree_is_found_and_measured() {
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "import sys; b = bytearray(64 << 20); print('ready', flush=True); sys.stdin.read()",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line.trim(), "ready");
        let me = i32::try_from(std::process::id()).unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let proc = Path::new("/proc");
        let found = sandbox_processes(proc, me);
        assert!(found.contains(&me) && found.contains(&pid), "{found:?}");
        let held = resident(proc, pid).unwrap();
        assert!(held >= 64 << 20, "{held}");
        assert!(proportional(proc, pid).unwrap() >= 60 << 20);
        // Over a cap below it, a hit; under a cap above everything, none.
        let hit = check(proc, pid, 32 << 20).unwrap();
        assert!(hit.measured >= 64 << 20 && hit.processes == 1, "{hit:?}");
        assert_eq!(check(proc, pid, 1 << 40), None);
        drop(child.stdin.take());
        child.wait().unwrap();
    }
}
