//! After an approved exec: what runs must be what was approved.
//!
//! A seccomp user notification reports the exec's arguments as pointers into the
//! process's memory, and letting the system call continue makes the kernel read them
//! again: another thread (or a process sharing the memory) can swap the path or the
//! argv in between. For an ordinary exec that only makes the record wrong; for one a
//! person approved it would run something nobody approved. So once an approved exec
//! has been let go, the new program is compared with the approval — its file by
//! device and inode, its argv from `/proc/PID/cmdline` — while it is stopped at the
//! exec (ptrace's `PTRACE_EVENT_EXEC`, before its first instruction), and killed there
//! when they differ: nothing but the approved program ever runs.

use std::ffi::CString;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::time::{Duration, Instant};

use crate::sys;

/// How long an approved exec may take to show up as the new program.
const SETTLE: Duration = Duration::from_secs(2);

/// What an approval covers.
#[derive(Debug, Clone)]
pub struct Expected {
    /// The path as passed (for a script, the kernel puts it in the interpreter's argv).
    pub path: Vec<u8>,
    /// The working directory inside the sandbox, for a relative path.
    pub cwd: Vec<u8>,
    pub argv: Vec<Vec<u8>>,
    /// The argv was cut for the record: only the arguments kept whole are compared.
    pub truncated: bool,
}

/// The approved file, looked up when the decision is asked for.
pub(super) struct Approved {
    expected: Expected,
    /// Device and inode of the file, when it could be opened from the sandbox's root.
    file: Option<(u64, u64)>,
    /// It starts with `#!`: the program that runs is its interpreter.
    script: bool,
}

/// The process, traced from before its exec is let go (see [`watch`]).
pub(super) struct Watch {
    host_pid: libc::pid_t,
}

pub(super) fn approved(root: Option<BorrowedFd<'_>>, expected: Expected) -> Approved {
    let mut full = Vec::new();
    if !expected.path.starts_with(b"/") {
        full.extend_from_slice(&expected.cwd);
        if !full.ends_with(b"/") {
            full.push(b'/');
        }
    }
    full.extend_from_slice(&expected.path);
    let opened = root.zip(CString::new(full).ok()).and_then(|(root, path)| {
        sys::openat2(root, &path, libc::O_RDONLY, sys::RESOLVE_IN_ROOT)
            .or_else(|_| sys::openat2(root, &path, libc::O_PATH, sys::RESOLVE_IN_ROOT))
            .ok()
    });
    let (file, script) = match opened {
        Some(fd) => {
            let file = std::fs::File::from(fd);
            let id = file.metadata().ok().map(|m| (m.dev(), m.ino()));
            let mut head = [0u8; 2];
            let script = matches!(file.read_at(&mut head, 0), Ok(2)) && head == *b"#!";
            (id, script)
        }
        None => (None, false),
    };
    Approved {
        expected,
        file,
        script,
    }
}

/// Seizes the process (ptrace, without stopping it) so that it stops at its exec,
/// after the kernel has loaded the new program and before that runs an instruction.
/// The calling thread becomes its tracer and must be the one to [`confirm`].
pub(super) fn watch(host_pid: u32) -> std::io::Result<Watch> {
    let host_pid = libc::pid_t::try_from(host_pid)
        .map_err(|_| std::io::Error::from_raw_os_error(libc::ESRCH))?;
    sys::ptrace_seize_exec(host_pid)?;
    Ok(Watch { host_pid })
}

/// Waits for the exec's stop and checks the new program: lets it go when it is the
/// approved one, kills it before it runs otherwise. Returns why it was killed.
pub(super) fn confirm(watch: &Watch, approved: &Approved) -> Option<String> {
    // Only this thread's tracee: never another thread's child (the sandbox's init).
    let flags = libc::__WALL | libc::__WNOTHREAD;
    let start = Instant::now();
    let mut pause = Duration::from_micros(20);
    let mut interrupted = false;
    loop {
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
            Err(_) => return None,
        };
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            return None;
        }
        if !libc::WIFSTOPPED(status) {
            continue;
        }
        let event = (status >> 16) & 0xff;
        let signal = libc::WSTOPSIG(status);
        if signal == libc::SIGTRAP && event == libc::PTRACE_EVENT_EXEC {
            return check_new_program(pid, approved);
        }
        // A signal arriving after a failed exec (passed on), or our interrupt: the
        // approved exec did not happen, and nothing else ran in its place.
        let pass = if event == 0 { signal } else { 0 };
        let _ = sys::ptrace_detach(pid, pass);
        return None;
    }
}

/// At the exec stop: compare, then let go or kill.
fn check_new_program(pid: libc::pid_t, approved: &Approved) -> Option<String> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let exe = std::fs::metadata(format!("/proc/{pid}/exe"))
        .ok()
        .map(|m| (m.dev(), m.ino()));
    match mismatch(approved, &cmdline, exe) {
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

/// Why `cmdline` (and the running file `exe`, when known) is not what was approved.
fn mismatch(approved: &Approved, cmdline: &[u8], exe: Option<(u64, u64)>) -> Option<String> {
    let running: Vec<&[u8]> = cmdline
        .strip_suffix(b"\0")
        .unwrap_or(cmdline)
        .split(|b| *b == 0)
        .collect();
    let expected = &approved.expected;
    let keep = if expected.truncated {
        expected.argv.len().saturating_sub(1)
    } else {
        expected.argv.len()
    };
    let wanted: Vec<&[u8]> = expected.argv.iter().take(keep).map(Vec::as_slice).collect();
    let args_ok = if approved.script {
        // `#!interp [arg]` runs `interp [arg] PATH ARGV[1..]`.
        let tail: Vec<&[u8]> = std::iter::once(expected.path.as_slice())
            .chain(wanted.iter().skip(1).copied())
            .collect();
        running.len() > tail.len() && running[running.len() - tail.len()..].starts_with(&tail[..])
    } else if expected.truncated {
        running.starts_with(&wanted)
    } else {
        running == wanted
    };
    if !args_ok {
        return Some(format!(
            "the program started with other arguments than approved: {}",
            String::from_utf8_lossy(&running.join(&b' ')[..])
        ));
    }
    if !approved.script
        && let (Some(file), Some(exe)) = (approved.file, exe)
        && file != exe
    {
        return Some("the program started from another file than approved".into());
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn approved(argv: &[&str], script: bool, file: Option<(u64, u64)>) -> Approved {
        Approved {
            expected: Expected {
                path: b"/usr/bin/x".to_vec(),
                cwd: b"/w".to_vec(),
                argv: argv.iter().map(|a| a.as_bytes().to_vec()).collect(),
                truncated: false,
            },
            file,
            script,
        }
    }

    #[test]
    fn the_approved_program_passes_and_anything_else_does_not() {
        let a = approved(&["ls", "-la"], false, Some((1, 2)));
        assert_eq!(mismatch(&a, b"ls\0-la\0", Some((1, 2))), None);
        assert!(mismatch(&a, b"rm\0-rf\0/\0", Some((1, 2))).is_some());
        assert!(
            mismatch(&a, b"ls\0-la\0", Some((1, 3)))
                .unwrap()
                .contains("another file")
        );
        assert!(mismatch(&a, b"ls\0", Some((1, 2))).is_some());
    }

    #[test]
    fn a_script_runs_as_its_interpreter_with_the_path_and_arguments() {
        let a = approved(&["x", "a", "b"], true, Some((1, 2)));
        assert_eq!(
            mismatch(&a, b"/bin/sh\0/usr/bin/x\0a\0b\0", Some((9, 9))),
            None
        );
        assert_eq!(
            mismatch(&a, b"/usr/bin/env\0python3\0/usr/bin/x\0a\0b\0", None),
            None
        );
        assert!(mismatch(&a, b"/bin/sh\0/usr/bin/y\0a\0b\0", None).is_some());
        assert!(mismatch(&a, b"/bin/sh\0/usr/bin/x\0a\0c\0", None).is_some());
    }
}
