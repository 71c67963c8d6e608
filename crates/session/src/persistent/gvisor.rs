//! A persistent gVisor sandbox's commands, started through `runsc exec` (see
//! `vg_backend::gvisor::exec` for why and what runsc leaves to us).
//!
//! Each command gets a private folder of its own (0700, runsc's user's): the OCI
//! process runsc reads, the pid file it writes and its error log. runsc's stdio is
//! the command's, which the sentry takes over as the new process's. runsc starts
//! our launcher (`vg_sandbox::gvisor_launch`: `no_new_privs`, a filter), which
//! executes the command: its `exec` line is that execve's trace point (runsc
//! creates the launcher with no exec, so none names it), its children's and its
//! end come from the trace points as for any gVisor session, and its exact wait
//! status from the same exit point.

use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use vg_backend::gvisor::exec::{
    ExecTarget, descendants, error_message, is_running, processes, start_errno,
};
use vg_sandbox::Termination;
use vg_sandbox::spawner::SpawnError;

use crate::record::Recorder;

/// How long `runsc exec` may take to start a command (a sandbox under load).
const START_WAIT: Duration = Duration::from_secs(60);

/// How long the tracer may take to read a command's exit point once runsc saw it
/// end (it was sent before runsc could learn of it).
const STATUS_WAIT: Duration = Duration::from_secs(2);

/// Starts commands in one persistent gVisor sandbox.
pub(super) struct Starter {
    target: Arc<ExecTarget>,
    /// The keeper's host pid: its namespaces, where runsc runs (mediated network).
    keeper: i32,
    recorder: Recorder,
    next: AtomicU64,
}

/// A command started by `runsc exec`.
pub(super) struct Started {
    pub id: u64,
    /// Its pid inside the sandbox (0: it could not be started).
    pub pid: i32,
    /// The record's mark taken before it was started: only a later exit is its.
    since: u64,
    runsc: Child,
    /// Why it could not be started (as `Termination::ExecFailed` says it).
    failed: Option<i32>,
    target: Arc<ExecTarget>,
    keeper: i32,
    recorder: Recorder,
    dir: ExecDir,
}

/// Signals one [`Started`] command from any thread.
#[derive(Clone)]
pub(super) struct Signaller {
    pid: i32,
    target: Arc<ExecTarget>,
    keeper: i32,
    /// Its lineage from the trace points (`Recorder::gvisor_lineage`).
    recorder: Recorder,
}

/// The OCI process runsc reads, in a command's folder.
const PROCESS_FILE: &str = "process.json";
/// Where runsc writes the command's pid inside the sandbox.
const PID_FILE: &str = "pid";
/// runsc's error log (JSON lines).
const ERROR_LOG: &str = "error.log";

/// The command's private folder, removed with it.
///
/// Started as root, the bundle folder it is in is runsc's user's, who could swap
/// the folder for a link between its creation and our writes: everything we
/// write or read in it goes through the folder we made and opened (its owner
/// checked), never through its path, and refuses a link in it.
struct ExecDir {
    path: PathBuf,
    /// The folder as made: `/proc/self/fd/N/NAME` reaches NAME in it.
    fd: std::fs::File,
}

impl ExecDir {
    fn create(path: PathBuf) -> std::io::Result<Self> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        let fd = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path);
        let dir = match fd {
            Ok(fd) => Self { path, fd },
            Err(e) => {
                return Err(std::io::Error::other(format!(
                    "cannot open the command's folder {}: {e}",
                    path.display()
                )));
            }
        };
        let meta = dir.fd.metadata()?;
        // The folder we made is ours and private: another's is never written.
        if meta.uid() != vg_sandbox::real_ids().0 || meta.mode() & 0o077 != 0 {
            return Err(std::io::Error::other(format!(
                "the command's folder {} was replaced by another user's; nothing was written there",
                dir.path.display()
            )));
        }
        Ok(dir)
    }

    /// NAME in the folder as made.
    fn inside(&self, name: &str) -> PathBuf {
        use std::os::fd::AsRawFd;
        PathBuf::from(format!("/proc/self/fd/{}/{name}", self.fd.as_raw_fd()))
    }

    /// Writes a new file NAME (never one already there, nor through a link).
    fn write_new(&self, name: &str, data: &[u8]) -> std::io::Result<()> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(self.inside(name))?;
        file.write_all(data)
    }

    /// Gives file NAME, then the folder, to `uid`:`gid` (runsc's user).
    fn hand_over(&self, name: &str, uid: u32, gid: u32) -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(self.inside(name))?;
        std::os::unix::fs::fchown(&file, Some(uid), Some(gid))?;
        std::os::unix::fs::fchown(&self.fd, Some(uid), Some(gid))
    }

    /// What runsc wrote to NAME (a link in its place is not followed).
    fn read(&self, name: &str) -> Option<String> {
        use std::io::Read as _;
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(self.inside(name))
            .ok()?;
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        let mut text = String::new();
        (&mut file).take(1 << 20).read_to_string(&mut text).ok()?;
        Some(text)
    }

    /// Removes NAME (a link in its place, not what it names).
    fn remove(&self, name: &str) {
        // Best effort: what is left goes with the folder.
        let _ = std::fs::remove_file(self.inside(name));
    }

    /// The command's pid inside, once runsc wrote it.
    fn pid(&self) -> Option<i32> {
        self.read(PID_FILE).and_then(|t| t.trim().parse().ok())
    }

    /// runsc's last error message.
    fn error(&self) -> Option<String> {
        self.read(ERROR_LOG).and_then(|log| error_message(&log))
    }
}

impl Drop for ExecDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

impl Starter {
    pub(super) fn new(target: ExecTarget, keeper: i32, recorder: Recorder) -> Self {
        Self {
            target: Arc::new(target),
            keeper,
            recorder,
            next: AtomicU64::new(1),
        }
    }

    /// Waits until runsc says the container runs (the keeper reports ready once
    /// runsc started, before the container has): `runsc exec` reaches it only then.
    pub(super) fn wait_running(&self) -> std::io::Result<()> {
        let end = Instant::now() + START_WAIT;
        loop {
            let out = runsc_command(&self.target, self.keeper, &self.target.state_argv())?
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .output()?;
            if is_running(&String::from_utf8_lossy(&out.stdout)) {
                return Ok(());
            }
            if Instant::now() >= end {
                return Err(std::io::Error::other(format!(
                    "runsc did not report the sandbox running within {}s",
                    START_WAIT.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Starts `argv` with exactly `env`, in `cwd`, with `stdio`; returns once runsc
    /// says its pid, or that it could not start it.
    pub(super) fn spawn(
        &self,
        argv: &[String],
        env: &[(String, String)],
        cwd: &Path,
        stdio: [OwnedFd; 3],
    ) -> Result<Started, SpawnError> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let dir = self.exec_dir(id).map_err(SpawnError::Failed)?;
        let process = dir.path.join(PROCESS_FILE);
        let pid_file = dir.path.join(PID_FILE);
        let error_log = dir.path.join(ERROR_LOG);
        let text = serde_json::to_vec(&self.target.process(argv, env, cwd))
            .map_err(|e| SpawnError::Usage(format!("cannot encode the command: {e}")))?;
        dir.write_new(PROCESS_FILE, &text)
            .map_err(SpawnError::Failed)?;
        // Given to runsc's user (when that is not us) only once written; nothing
        // more is written there by us.
        if let Some((uid, gid)) = self.target.run_as {
            dir.hand_over(PROCESS_FILE, uid, gid)
                .map_err(SpawnError::Failed)?;
        }
        let [stdin, stdout, stderr] = stdio;
        let mut command = runsc_command(
            &self.target,
            self.keeper,
            &self.target.exec_argv(&process, &pid_file, &error_log),
        )
        .map_err(SpawnError::Failed)?;
        command
            .stdin(Stdio::from(stdin))
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(stderr));
        let since = self.recorder.gvisor_mark();
        let mut runsc = command.spawn().map_err(SpawnError::Failed)?;
        drop(command);
        // The pid file is written once the process runs; runsc ending first without
        // it means it could not start the command.
        let end = Instant::now() + START_WAIT;
        let (pid, failed) = loop {
            if let Some(pid) = dir.pid() {
                break (pid, None);
            }
            match runsc.try_wait() {
                Ok(Some(_)) => {
                    // A pid file written just before runsc ended.
                    if let Some(pid) = dir.pid() {
                        break (pid, None);
                    }
                    let message = dir.error().unwrap_or_default();
                    if message.contains("cannot load") || message.contains("loading sandbox") {
                        return Err(SpawnError::Gone);
                    }
                    break (0, Some(start_errno(&message)));
                }
                Ok(None) if Instant::now() < end => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(None) | Err(_) => {
                    let _ = runsc.kill();
                    let _ = runsc.wait();
                    return Err(SpawnError::Failed(std::io::Error::other(format!(
                        "runsc exec did not start the command within {}s",
                        START_WAIT.as_secs()
                    ))));
                }
            }
        };
        // runsc read the process before it started it (or failed to): the
        // command's environment is not left on disk for as long as it runs, nor
        // after this process was killed.
        dir.remove(PROCESS_FILE);
        if failed.is_none() {
            self.recorder.gvisor_started(pid, since);
        }
        Ok(Started {
            id,
            pid,
            since,
            runsc,
            failed,
            target: Arc::clone(&self.target),
            keeper: self.keeper,
            recorder: self.recorder.clone(),
            dir,
        })
    }

    /// A new private folder for command `id` (0700, ours until handed to runsc's
    /// user) in the sandbox's bundle folder, with a name nobody can guess and
    /// claim first: it goes with the bundle when the sandbox stops, also when this
    /// process was killed before it could remove it (in `/tmp`, a folder holding
    /// the command's environment was left behind).
    fn exec_dir(&self, id: u64) -> std::io::Result<ExecDir> {
        let bundle = self.target.state.parent().ok_or_else(|| {
            std::io::Error::other("internal: runsc's state folder has no bundle folder")
        })?;
        let salt = vg_backend::gvisor::random_hex()?;
        ExecDir::create(bundle.join(format!("exec-{id}-{salt}")))
    }
}

/// runsc with `argv`, as its user and, for the mediated network, in the keeper's
/// namespaces, with a clean environment.
fn runsc_command(target: &ExecTarget, keeper: i32, argv: &[String]) -> std::io::Result<Command> {
    use std::os::unix::process::CommandExt;
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| std::io::Error::other("no runsc command"))?;
    let mut command = Command::new(program);
    command
        .args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .current_dir("/");
    if let Some((uid, gid)) = target.run_as {
        command.uid(uid).gid(gid);
    }
    if target.keeper_namespaces {
        vg_sandbox::runtime::in_keeper_namespaces(&mut command, keeper)?;
    }
    Ok(command)
}

impl Started {
    pub(super) fn signaller(&self) -> Signaller {
        Signaller {
            pid: self.pid,
            target: Arc::clone(&self.target),
            keeper: self.keeper,
            recorder: self.recorder.clone(),
        }
    }

    /// Waits until it ends; `None` when the sandbox ended first.
    pub(super) fn wait(mut self) -> Option<Termination> {
        let code = self.runsc.wait().ok().and_then(|s| s.code());
        if let Some(errno) = self.failed {
            return Some(Termination::ExecFailed(errno));
        }
        let status = self
            .recorder
            .gvisor_status(self.pid, self.since, STATUS_WAIT)
            .filter(|status| agrees(*status, code));
        let _ = &self.dir;
        match (status, code) {
            (Some(status), _) if libc::WIFSIGNALED(status) => {
                Some(Termination::Signalled(libc::WTERMSIG(status)))
            }
            (Some(status), _) => Some(Termination::Exited(libc::WEXITSTATUS(status))),
            // No exit point: the sandbox ended under the command (runsc could not
            // wait for it), or the point was dropped; runsc's code is then all we
            // have, and its 128 + N is said as it is.
            (None, Some(code)) if !self.sandbox_gone() => Some(Termination::Exited(code)),
            (None, _) => None,
        }
    }

    /// Whether runsc failed to wait because the sandbox is gone.
    fn sandbox_gone(&self) -> bool {
        self.dir.error().is_some()
    }
}

/// Whether the wait status gVisor reported agrees with runsc's own exit `code`
/// (a signal N said as 128 + N): the status only tells apart what runsc's code
/// cannot, and is never taken over it (pure).
fn agrees(status: i32, code: Option<i32>) -> bool {
    let said = if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        libc::WEXITSTATUS(status)
    };
    code.is_none_or(|code| code == said)
}

impl Signaller {
    /// `runsc kill` of the command's process and every process it started (runsc
    /// signals no process group; natively, the signal goes to the command's).
    pub(super) fn signal(&self, signal: i32) -> std::io::Result<()> {
        if self.pid <= 0 {
            return Ok(());
        }
        let mut tree = self.tree()?;
        if !is_job_control(signal) {
            // Stopped, the tree is only known once no process of it runs: one
            // forked between `runsc ps` and its parent's stop is in the next table,
            // never left running past the signal (a time-out's SIGKILL).
            let mut stopped = Vec::new();
            for _ in 0..STOP_ROUNDS {
                let fresh = unstopped(&tree, &stopped);
                if fresh.is_empty() {
                    break;
                }
                for pid in fresh {
                    // A process may end meanwhile: only the command's own stop counts.
                    self.kill(pid, libc::SIGSTOP)?;
                    stopped.push(pid);
                }
                tree = self.tree()?;
            }
        }
        let mut result = Ok(());
        for (pid, signal) in signal_steps(&tree, signal) {
            let status = self.kill(pid, signal)?;
            // The command itself must get it; a child may have ended meanwhile.
            if !status.success() && pid == self.pid {
                result = Err(std::io::Error::other(format!(
                    "runsc kill of pid {pid} ended with {status}"
                )));
            }
        }
        result
    }

    /// The command's process and every process it started: its tree in `runsc
    /// ps` (which shows a process whose clone point is not read yet), then the
    /// rest of its lineage from the trace points (which keeps a process whose
    /// parent ended, given to the first process where `runsc ps` no longer ties
    /// it to the command: `(sleep 100 &)`, a double fork, `setsid`).
    fn tree(&self) -> std::io::Result<Vec<i32>> {
        let table = runsc_command(&self.target, self.keeper, &self.target.ps_argv())?
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()?;
        let procs = processes(&String::from_utf8_lossy(&table.stdout));
        Ok(with_lineage(
            descendants(&procs, self.pid),
            &self.recorder.gvisor_lineage(self.pid),
        ))
    }

    fn kill(&self, pid: i32, signal: i32) -> std::io::Result<std::process::ExitStatus> {
        runsc_command(
            &self.target,
            self.keeper,
            &self.target.kill_argv(pid, signal),
        )?
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    }
}

/// How many times the tree is looked at again for processes started before their
/// parent was stopped: each time, every process known is stopped, so only one a
/// process forked just before its stop is new; a bound, should that not settle.
const STOP_ROUNDS: usize = 64;

/// `tree` (parents first), then what of `lineage` it lacks (pure).
fn with_lineage(mut tree: Vec<i32>, lineage: &[i32]) -> Vec<i32> {
    for &pid in lineage {
        if !tree.contains(&pid) {
            tree.push(pid);
        }
    }
    tree
}

/// The processes of `tree` not yet in `stopped`, parents first (pure).
fn unstopped(tree: &[i32], stopped: &[i32]) -> Vec<i32> {
    tree.iter()
        .copied()
        .filter(|pid| !stopped.contains(pid))
        .collect()
}

/// A stop or continue signal, sent as it is.
fn is_job_control(signal: i32) -> bool {
    [
        libc::SIGSTOP,
        libc::SIGTSTP,
        libc::SIGTTIN,
        libc::SIGTTOU,
        libc::SIGCONT,
    ]
    .contains(&signal)
}

/// The `runsc kill`s that give `signal` to a command's `tree` (parents before
/// children), every process of it already stopped, as a process group's signal
/// would reach it all at once (pure): runsc's signal does not reach a process
/// once its parent ended and gVisor gave it to the first process (`signalProcess`
/// finds it, and the signal has no effect), and a parent that outlived its
/// children for a moment would run on. So: the signal, children first; every
/// process continued, children first (a parent continued first would end and
/// leave its children stopped where no signal reaches them). A stop or continue
/// signal itself is sent as it is, children first, to a tree not stopped.
fn signal_steps(tree: &[i32], signal: i32) -> Vec<(i32, i32)> {
    if is_job_control(signal) {
        return tree.iter().rev().map(|&pid| (pid, signal)).collect();
    }
    let deliver = tree.iter().rev().map(|&pid| (pid, signal));
    let cont = tree.iter().rev().map(|&pid| (pid, libc::SIGCONT));
    deliver.chain(cont).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gvisor_s_status_is_taken_only_where_runsc_s_code_agrees() {
        let signalled = |n: i32| n; // a wait status of signal n
        let exited = |code: i32| code << 8;
        assert!(agrees(signalled(libc::SIGTERM), Some(143)));
        assert!(agrees(exited(143), Some(143)));
        assert!(agrees(exited(0), Some(0)));
        assert!(agrees(exited(3), None));
        // A former process's status under the same pid.
        assert!(!agrees(exited(42), Some(0)));
        assert!(!agrees(signalled(libc::SIGKILL), Some(0)));
    }

    #[test]
    fn a_stopped_tree_is_signalled_from_its_leaves_and_continued() {
        assert_eq!(
            signal_steps(&[5, 6, 7], libc::SIGTERM),
            [
                (7, libc::SIGTERM),
                (6, libc::SIGTERM),
                (5, libc::SIGTERM),
                (7, libc::SIGCONT),
                (6, libc::SIGCONT),
                (5, libc::SIGCONT),
            ]
        );
        // A lone process was stopped too: it is continued after the signal.
        assert_eq!(
            signal_steps(&[5], libc::SIGINT),
            [(5, libc::SIGINT), (5, libc::SIGCONT)]
        );
        assert_eq!(
            signal_steps(&[5, 6], libc::SIGTSTP),
            [(6, libc::SIGTSTP), (5, libc::SIGTSTP)]
        );
        assert!(is_job_control(libc::SIGCONT));
        assert!(!is_job_control(libc::SIGKILL));
    }

    #[test]
    fn a_process_given_to_the_first_process_is_still_the_command_s() {
        // `runsc ps`: 15 (the command) and 16; 18 was 17's, which ended, and is
        // now 1's: only the lineage ties it to 15.
        assert_eq!(with_lineage(vec![15, 16], &[15, 16, 18]), [15, 16, 18]);
        // A process whose clone point is not read yet is in the table.
        assert_eq!(with_lineage(vec![15, 19], &[15]), [15, 19]);
        assert_eq!(with_lineage(vec![15], &[]), [15]);
    }

    #[test]
    fn a_process_forked_before_its_parent_stopped_is_stopped_in_the_next_round() {
        assert_eq!(unstopped(&[5, 6], &[]), [5, 6]);
        // 8 was forked by 6 between `runsc ps` and 6's stop.
        assert_eq!(unstopped(&[5, 6, 8], &[5, 6]), [8]);
        assert_eq!(unstopped(&[5, 6, 8], &[5, 6, 8]), Vec::<i32>::new());
        // One that ended meanwhile is simply no longer in the table.
        assert_eq!(unstopped(&[5, 8], &[5, 6, 8]), Vec::<i32>::new());
    }
}
