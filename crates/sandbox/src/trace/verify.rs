//! After a gated exec is let go: what runs must be what was decided.
//!
//! A seccomp user notification reports the exec's arguments as pointers into the
//! process's memory, and letting the system call continue makes the kernel read them
//! again: another thread (or a process sharing the memory) can swap the path or the
//! argv in between. For an ordinary exec that only makes the record wrong; under an
//! approval gate it would run something nobody rated or approved. So once a gated
//! exec has been let go, the new program is compared with what was decided — its file
//! by device, inode and change time (a file rewritten in place is another file), its
//! argv from `/proc/PID/cmdline`; for a `#!` script, the interpreter chain read when
//! it was rated — while it is stopped at the exec (ptrace's `PTRACE_EVENT_EXEC`,
//! before its first instruction), and killed there when they differ.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant};

use super::file::FileIdentity;
use crate::sys;

/// How long an approved exec may take to show up as the new program.
const SETTLE: Duration = Duration::from_secs(2);

/// What must start when an exec is let go.
#[derive(Debug, Clone)]
pub struct Expected {
    /// The argv the new program must show: the exec's own, or for a `#!` script the
    /// command its interpreter chain makes of it (see `Script`).
    pub argv: Vec<Vec<u8>>,
    /// The argv was cut when read: only the arguments kept whole are compared.
    pub truncated: bool,
    /// The program file that must run (for a script, its last interpreter). `None`
    /// when it could not be found: then nothing may run.
    pub file: Option<FileIdentity>,
    /// The working directory it must run in (device, inode), when known: another
    /// thread sharing it could change it while the exec is held.
    pub cwd: Option<(u64, u64)>,
}

/// Told why a program was killed at its exec.
pub(super) type OnMismatch = Box<dyn FnOnce(String) + Send>;

/// A newer exec of a task that is still watched, for its watcher: by then the exec
/// watched before has failed (the task made a new system call), and only that
/// watcher, its tracer, can stop the task at the next exec. `ack` answers `None`
/// when the watcher took it, or gives it back when the watcher has let go.
struct Handover {
    expected: Expected,
    on_mismatch: OnMismatch,
    ack: mpsc::SyncSender<Option<(Expected, OnMismatch)>>,
}

/// The watchers attached now, by traced task (host tid).
#[derive(Default, Clone)]
pub(super) struct Watchers(Arc<Mutex<HashMap<libc::pid_t, mpsc::Sender<Handover>>>>);

impl Watchers {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<libc::pid_t, mpsc::Sender<Handover>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The task, traced from before its exec is let go (see [`watch`]).
pub(super) struct Watch {
    host_pid: libc::pid_t,
    handovers: mpsc::Receiver<Handover>,
    watchers: Watchers,
}

/// Gives `expected` to the watcher already tracing `host_pid`, if there is one.
/// When this returns `Ok`, the exec may be let go: it will be checked.
pub(super) fn hand_over(
    watchers: &Watchers,
    host_pid: u32,
    expected: Expected,
    on_mismatch: OnMismatch,
) -> Result<(), (Expected, OnMismatch)> {
    let Ok(tid) = libc::pid_t::try_from(host_pid) else {
        return Err((expected, on_mismatch));
    };
    let Some(sender) = watchers.lock().get(&tid).cloned() else {
        return Err((expected, on_mismatch));
    };
    let (ack, acked) = mpsc::sync_channel(1);
    if let Err(mpsc::SendError(h)) = sender.send(Handover {
        expected,
        on_mismatch,
        ack,
    }) {
        return Err((h.expected, h.on_mismatch));
    }
    match acked.recv() {
        Ok(None) => Ok(()),
        // The watcher had let go (detached first, so the caller can seize the task).
        Ok(Some(back)) => Err(back),
        // Cannot happen (a watcher always answers); refuse rather than run unchecked.
        Err(_) => Err((
            Expected {
                argv: Vec::new(),
                truncated: false,
                file: None,
                cwd: None,
            },
            Box::new(|_| {}),
        )),
    }
}

/// Seizes the task (ptrace, without stopping it) so that it stops at its exec,
/// after the kernel has loaded the new program and before that runs an instruction.
/// The calling thread becomes its tracer and must be the one to [`confirm`].
pub(super) fn watch(host_pid: u32, watchers: &Watchers) -> std::io::Result<Watch> {
    let host_pid = libc::pid_t::try_from(host_pid)
        .map_err(|_| std::io::Error::from_raw_os_error(libc::ESRCH))?;
    let (sender, handovers) = mpsc::channel();
    let mut all = watchers.lock();
    sys::ptrace_seize_exec(host_pid)?;
    all.insert(host_pid, sender);
    Ok(Watch {
        host_pid,
        handovers,
        watchers: watchers.clone(),
    })
}

impl Watch {
    /// No longer attached (called after detaching): handovers not taken go back to
    /// their senders, who then watch the task themselves.
    fn release(&self) {
        let mut all = self.watchers.lock();
        all.remove(&self.host_pid);
        while let Ok(h) = self.handovers.try_recv() {
            let _ = h.ack.send(Some((h.expected, h.on_mismatch)));
        }
    }
}

/// Waits for the exec's stop and checks the new program: lets it go when it is what
/// was decided, kills it before it runs otherwise (and tells `on_mismatch` why).
/// Newer execs of the same task handed over meanwhile replace what is expected.
pub(super) fn confirm(watch: Watch, mut expected: Expected, mut on_mismatch: OnMismatch) {
    // Only this thread's tracee: never another thread's child (the sandbox's init).
    let flags = libc::__WALL | libc::__WNOTHREAD;
    let mut start = Instant::now();
    let mut pause = Duration::from_micros(20);
    let mut interrupted = false;
    loop {
        while let Ok(h) = watch.handovers.try_recv() {
            // The exec expected so far failed: the task is making another.
            expected = h.expected;
            on_mismatch = h.on_mismatch;
            let _ = h.ack.send(None);
            start = Instant::now();
            pause = Duration::from_micros(20);
        }
        let (pid, status) = match sys::waitpid(-1, flags | libc::WNOHANG) {
            Ok(Some(found)) => found,
            Ok(None) => {
                if !interrupted && start.elapsed() >= SETTLE {
                    // Still running its old program: the exec failed. Stop it to let go.
                    interrupted = true;
                    let _ = sys::ptrace_interrupt(watch.host_pid);
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(10));
                continue;
            }
            // Gone (and reaped by its parent): nothing more to check.
            Err(_) => return watch.release(),
        };
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            return watch.release();
        }
        if !libc::WIFSTOPPED(status) {
            continue;
        }
        let event = (status >> 16) & 0xff;
        let signal = libc::WSTOPSIG(status);
        if signal == libc::SIGTRAP && event == libc::PTRACE_EVENT_EXEC {
            let why = check_new_program(pid, &expected);
            watch.release();
            if let Some(why) = why {
                on_mismatch(why);
            }
            return;
        }
        // A signal arriving after a failed exec, or our interrupt: the exec did not
        // happen, and nothing else ran in its place (a newer exec would have been
        // handed over, and reached its exec stop, before the task could stop here).
        let pass = if event == 0 { signal } else { 0 };
        let _ = sys::ptrace_detach(pid, pass);
        return watch.release();
    }
}

/// At the exec stop: compare, then let go or kill.
fn check_new_program(pid: libc::pid_t, expected: &Expected) -> Option<String> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cwd = super::file::linked_id(pid, "cwd");
    let why = mismatch(expected, &cmdline, FileIdentity::running(pid)).or_else(|| {
        (expected.cwd.is_some() && cwd != expected.cwd)
            .then(|| "the working directory changed after it was decided".to_owned())
    });
    match why {
        None => {
            let _ = sys::ptrace_detach(pid, 0);
            None
        }
        Some(why) => {
            let _ = sys::kill(pid, libc::SIGKILL);
            // Collect the tracee's end so that its parent sees it as usual.
            let _ = sys::waitpid(pid, libc::__WALL | libc::__WNOTHREAD);
            Some(why)
        }
    }
}

/// Why `cmdline` (and the running file `exe`) is not what was decided.
fn mismatch(expected: &Expected, cmdline: &[u8], exe: Option<FileIdentity>) -> Option<String> {
    let running: Vec<&[u8]> = cmdline
        .strip_suffix(b"\0")
        .unwrap_or(cmdline)
        .split(|b| *b == 0)
        .collect();
    let keep = if expected.truncated {
        expected.argv.len().saturating_sub(1)
    } else {
        expected.argv.len()
    };
    let wanted: Vec<&[u8]> = expected.argv.iter().take(keep).map(Vec::as_slice).collect();
    let args_ok = if expected.truncated {
        running.starts_with(&wanted)
    } else {
        running == wanted
    };
    if !args_ok {
        return Some(format!(
            "the program started with other arguments than decided: {}",
            String::from_utf8_lossy(&running.join(&b' ')[..])
        ));
    }
    match (expected.file, exe) {
        (Some(file), Some(exe)) if file == exe => None,
        (Some(file), Some(exe)) if (file.dev, file.ino) == (exe.dev, exe.ino) => {
            Some("the program's file was changed after it was decided".into())
        }
        (Some(_), Some(_)) => Some("the program started from another file than decided".into()),
        (None, _) => Some("the program's file could not be found when it was decided".into()),
        (Some(_), None) => Some("the running program's file cannot be read".into()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn id(dev: u64, ino: u64) -> FileIdentity {
        FileIdentity {
            dev,
            ino,
            ctime: (1, 2),
        }
    }

    fn expected(argv: &[&str], file: Option<FileIdentity>) -> Expected {
        Expected {
            argv: argv.iter().map(|a| a.as_bytes().to_vec()).collect(),
            truncated: false,
            file,
            cwd: None,
        }
    }

    #[test]
    fn the_decided_program_passes_and_anything_else_does_not() {
        let a = expected(&["ls", "-la"], Some(id(1, 2)));
        assert_eq!(mismatch(&a, b"ls\0-la\0", Some(id(1, 2))), None);
        assert!(mismatch(&a, b"rm\0-rf\0/\0", Some(id(1, 2))).is_some());
        assert!(
            mismatch(&a, b"ls\0-la\0", Some(id(1, 3)))
                .unwrap()
                .contains("another file")
        );
        assert!(mismatch(&a, b"ls\0", Some(id(1, 2))).is_some());
        // Rewritten in place: same inode, another change time.
        let mut rewritten = id(1, 2);
        rewritten.ctime = (1, 3);
        assert!(
            mismatch(&a, b"ls\0-la\0", Some(rewritten))
                .unwrap()
                .contains("changed")
        );
        // A file that was not found never runs.
        let unknown = expected(&["ls"], None);
        assert!(mismatch(&unknown, b"ls\0", Some(id(1, 2))).is_some());
    }

    #[test]
    fn a_cut_argv_is_compared_on_what_was_read_whole() {
        let mut a = expected(&["echo", "a", "b-cut"], Some(id(1, 2)));
        a.truncated = true;
        assert_eq!(
            mismatch(&a, b"echo\0a\0b-cut-and-more\0c\0", Some(id(1, 2))),
            None
        );
        assert!(mismatch(&a, b"echo\0x\0", Some(id(1, 2))).is_some());
    }
}
