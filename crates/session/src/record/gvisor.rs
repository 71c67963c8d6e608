//! gVisor's trace points as `commands.log` lines: each exec and exit the sentry
//! reports (`vg_backend::gvisor::trace`), written by the same `CommandsLog` as the
//! native tracer's. What gVisor does not report is said in `events.jsonl`, never
//! left as a silent gap.

use std::collections::{HashMap, VecDeque};
use std::os::unix::ffi::OsStringExt;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use vg_backend::gvisor::trace::GvisorEvent;
use vg_records::{CommandExit, Event};
use vg_sandbox::TraceEvent;

use super::commands::CommandsLog;
use super::{Shared, lock};

/// The event kind for what gVisor's trace points missed.
pub const TRACE_GAP: &str = "trace-gap";

/// How many exits [`GvisorLog`] keeps for a persistent sandbox's host to find.
const RECENT_EXITS: usize = 4096;

/// Live processes whose lineage is kept: far over what gVisor lets a sandbox run
/// at once (its pids are 16-bit), so reached only after exits went unreported.
const MAX_LINEAGE: usize = 1 << 20;

/// gVisor's `commands.log` and the exits its trace points reported lately: a
/// persistent sandbox's host finds the exact wait status of each command it
/// starts through `runsc exec` here (the command's `exec` line is the trace
/// point of our launcher's execve of it; the launcher, which runsc created
/// without an exec, is named by none).
pub(crate) struct GvisorLog {
    pub(super) log: Arc<Mutex<CommandsLog>>,
    /// The exits, only changed with `log` locked, so that an exit is both here and
    /// in the log, or in neither, for whoever holds `log`.
    exits: Mutex<RecentExits>,
    arrived: Condvar,
    lineage: Mutex<Lineage>,
}

/// Which lineage each live process of the sandbox is of: the process no clone
/// point created that it descends from by fork and clone — a command `runsc exec`
/// started, or the first process — whatever became of the processes between
/// (ended, their children given to the first process, `setsid`, `CLONE_PARENT`).
/// What a persistent sandbox's time-out must reach: gVisor's process table
/// (`runsc ps`) shows only today's parents, and gives a process whose parent
/// ended to the first process, where nothing tells whose it was; gVisor has no
/// child subreaper (`PR_SET_CHILD_SUBREAPER` is refused with `EINVAL` in runsc
/// 20221219) that could keep them under a process of ours.
#[derive(Debug, Default)]
struct Lineage {
    /// Live process → its lineage's number.
    live: HashMap<i32, u64>,
    /// The last lineage number given.
    last: u64,
}

impl Lineage {
    /// `pid`'s lineage, a new one when it has none (a process no clone point
    /// created).
    fn of(&mut self, pid: i32) -> u64 {
        if let Some(&origin) = self.live.get(&pid) {
            return origin;
        }
        self.last += 1;
        if self.live.len() < MAX_LINEAGE {
            self.live.insert(pid, self.last);
        }
        self.last
    }

    /// `creator` made `child`, which joins its lineage (a stale entry of an
    /// earlier process of that pid, whose exit went unreported, is replaced).
    fn cloned(&mut self, creator: i32, child: i32) {
        let origin = self.of(creator);
        if self.live.len() < MAX_LINEAGE || self.live.contains_key(&child) {
            self.live.insert(child, origin);
        }
    }

    fn exited(&mut self, pid: i32) {
        self.live.remove(&pid);
    }

    /// The live processes of `pid`'s lineage, `pid` first; none when `pid`
    /// itself is not live.
    fn members(&self, pid: i32) -> Vec<i32> {
        let Some(&origin) = self.live.get(&pid) else {
            return Vec::new();
        };
        let mut out = vec![pid];
        let mut rest: Vec<i32> = self
            .live
            .iter()
            .filter(|&(&p, &o)| o == origin && p != pid)
            .map(|(&p, _)| p)
            .collect();
        rest.sort_unstable();
        out.extend(rest);
        out
    }
}

/// The exits gVisor's trace points reported lately, each numbered in the order
/// they arrived. A pid is used again once gVisor's run out (2^16 of them, which a
/// command's threads go through in a couple of minutes, and whose exits no trace
/// point reports): an exit is only a command's when it arrived after the command
/// was started ([`Self::mark`] taken before), never a former process's of its pid.
#[derive(Debug, Default)]
struct RecentExits {
    /// How many exits arrived so far.
    count: u64,
    /// (arrival number, pid, wait status), newest last.
    recent: VecDeque<(u64, i32, i32)>,
}

impl RecentExits {
    fn push(&mut self, pid: i32, status: i32) {
        self.count += 1;
        if self.recent.len() >= RECENT_EXITS {
            self.recent.pop_front();
        }
        self.recent.push_back((self.count, pid, status));
    }

    /// What later exits are told apart from.
    fn mark(&self) -> u64 {
        self.count
    }

    fn position(&self, pid: i32, since: u64) -> Option<usize> {
        self.recent
            .iter()
            .rposition(|&(n, p, _)| p == pid && n > since)
    }

    /// The wait status of `pid`'s exit that arrived after `since`.
    fn find(&self, pid: i32, since: u64) -> Option<i32> {
        self.position(pid, since).map(|at| self.recent[at].2)
    }

    /// As [`Self::find`], taken out.
    fn take(&mut self, pid: i32, since: u64) -> Option<i32> {
        let at = self.position(pid, since)?;
        self.recent.remove(at).map(|e| e.2)
    }
}

impl GvisorLog {
    pub(super) fn new(log: CommandsLog) -> Self {
        Self {
            log: Arc::new(Mutex::new(log)),
            exits: Mutex::new(RecentExits::default()),
            arrived: Condvar::new(),
            lineage: Mutex::new(Lineage::default()),
        }
    }

    fn lineage(&self) -> std::sync::MutexGuard<'_, Lineage> {
        self.lineage.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The live processes `pid` started, by fork or clone, directly or through
    /// processes since ended, as far as the trace points have been read: `pid`
    /// first, none once `pid` ended.
    pub(super) fn lineage_of(&self, pid: i32) -> Vec<i32> {
        self.lineage().members(pid)
    }

    fn exits(&self) -> std::sync::MutexGuard<'_, RecentExits> {
        self.exits.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A command the host started as `pid` (through our launcher, whose execve
    /// of the command gVisor's exec point reports: its `exec` and `exit` lines
    /// come from the trace points, as every other process's): a lineage of its
    /// own, unless it already ended (after `since`, the [`Self::mark`] taken
    /// before it was started) or a clone of its already made it one.
    pub(super) fn started(&self, pid: i32, since: u64) {
        // The log's lock orders this against the exit's arrival (see `exits`).
        let log = lock(&self.log);
        if self.exits().find(pid, since).is_none() {
            self.lineage().of(pid);
        }
        drop(log);
    }

    /// What the exits reported from now on are told apart from: taken before a
    /// command is started, for [`Self::started`] and [`Self::status`].
    pub(super) fn mark(&self) -> u64 {
        self.exits().mark()
    }

    /// The wait status gVisor reported for `pid` after `since`, waiting up to
    /// `wait` for it.
    pub(super) fn status(&self, pid: i32, since: u64, wait: Duration) -> Option<i32> {
        let end = Instant::now() + wait;
        let mut exits = self.exits();
        loop {
            if let Some(status) = exits.take(pid, since) {
                return Some(status);
            }
            let left = end.checked_duration_since(Instant::now())?;
            exits = self
                .arrived
                .wait_timeout(exits, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

fn exit_of(status: i32) -> CommandExit {
    if libc::WIFSIGNALED(status) {
        CommandExit::Signal(libc::WTERMSIG(status))
    } else {
        CommandExit::Code(libc::WEXITSTATUS(status))
    }
}

pub(super) fn record(gvisor: &GvisorLog, shared: &Shared, event: GvisorEvent) {
    let log = &gvisor.log;
    match event {
        GvisorEvent::Exec {
            pid,
            ppid,
            argv,
            path,
            cwd,
            ..
        } => {
            lock(log).record(
                shared,
                TraceEvent::Exec {
                    pid,
                    ppid: ppid.unwrap_or(0),
                    cwd,
                    path: path.into_os_string().into_vec(),
                    ran: None,
                    argv: argv.into_iter().map(OsStringExt::into_vec).collect(),
                    truncated: false,
                    file: None,
                    script: None,
                    // gVisor's exec points carry the path and argv given, not
                    // what a `#!` line starts.
                    interpreter: None,
                    interp_ran: None,
                    root: None,
                    cwd_id: None,
                    at: None,
                },
            );
        }
        GvisorEvent::Exit { pid, status, .. } => {
            let mut log = lock(log);
            log.exited(shared, pid, exit_of(status));
            gvisor.exits().push(pid, status);
            gvisor.lineage().exited(pid);
            drop(log);
            gvisor.arrived.notify_all();
        }
        GvisorEvent::Clone { creator, child } => gvisor.lineage().cloned(creator, child),
        GvisorEvent::UnreportedExec { pid, ppid } => gap(
            shared,
            Event::new(TRACE_GAP)
                .with("pid", pid)
                .with("ppid", ppid.unwrap_or(0))
                .with(
                    "reason",
                    "gVisor ran a program without reporting it: its arguments, environment or folder are not UTF-8, or too large to send",
                ),
        ),
        GvisorEvent::Dropped(count) => gap(
            shared,
            Event::new(TRACE_GAP)
                .with("dropped", count)
                .with("reason", "gVisor dropped trace points it could not send in time"),
        ),
        GvisorEvent::Undecodable(why) => gap(
            shared,
            Event::new(TRACE_GAP).with("reason", format!("an undecodable trace message: {why}")),
        ),
    }
}

fn gap(shared: &Shared, event: Event) {
    if let Err(e) = shared.writer.event(event) {
        shared.fail("events.jsonl", e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_s_exit_is_one_that_arrived_after_it_was_started() {
        let mut exits = RecentExits::default();
        // A former process of pid 7 (gVisor's pids wrapped) ended with 42.
        exits.push(7, 42 << 8);
        let since = exits.mark();
        assert_eq!(exits.find(7, since), None);
        assert_eq!(exits.take(7, since), None);
        exits.push(8, 0);
        exits.push(7, 0);
        assert_eq!(exits.find(7, since), Some(0));
        assert_eq!(exits.take(7, since), Some(0));
        assert_eq!(exits.take(7, since), None);
        // The former exit is still there for whoever started before it.
        assert_eq!(exits.take(7, 0), Some(42 << 8));
    }

    #[test]
    fn a_lineage_outlives_the_processes_between_and_ends_with_its_first() {
        let mut l = Lineage::default();
        // The first process (1) and a command runsc started (15), seen first
        // through its clone.
        l.cloned(1, 2);
        l.cloned(15, 16);
        l.cloned(16, 17);
        // 17 forks under CLONE_PARENT, then 16 (a subshell) ends: 18 is given to
        // the first process, and still 15's.
        l.cloned(17, 18);
        l.exited(16);
        l.exited(17);
        // A second command, registered before it forked.
        assert_eq!(l.of(30), l.of(30));
        l.cloned(30, 31);
        assert_eq!(l.members(15), [15, 18]);
        assert_eq!(l.members(30), [30, 31]);
        assert_eq!(l.members(1), [1, 2]);
        // A lineage is reached through its first process only while it lives.
        l.exited(15);
        assert_eq!(l.members(15), Vec::<i32>::new());
        // Pid 16 used again by another lineage's fork is that lineage's.
        l.cloned(31, 16);
        assert_eq!(l.members(30), [30, 16, 31]);
    }

    #[test]
    fn the_lineage_is_bounded() {
        let mut l = Lineage::default();
        for child in 2..=i32::try_from(MAX_LINEAGE).unwrap() + 5 {
            l.cloned(1, child);
        }
        assert_eq!(l.live.len(), MAX_LINEAGE);
        // One already kept still moves to its new lineage.
        l.cloned(i32::MAX, 3);
        assert_ne!(l.live[&3], l.live[&2]);
    }

    #[test]
    fn only_the_latest_exits_are_kept() {
        let mut exits = RecentExits::default();
        for pid in 0..=i32::try_from(RECENT_EXITS).unwrap() {
            exits.push(pid, 0);
        }
        assert_eq!(exits.recent.len(), RECENT_EXITS);
        assert_eq!(exits.find(0, 0), None);
        assert_eq!(exits.find(1, 0), Some(0));
    }
}
