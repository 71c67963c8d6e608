//! Exec tracing through seccomp user notification.
//!
//! The sandbox's filter sends `execve`, `execveat` and `exit_group` to a listener that
//! the supervisor holds, outside the sandbox. For each one we read what the program is
//! about to run (path, argv, cwd, pid, parent), hand it to a callback, and let the
//! system call continue. This is the single decision point where a later approval gate
//! can hold a program before it starts.
//!
//! Reading another process's memory is racy by nature (a second thread could change
//! argv after we read it); the record is what the kernel was asked, read at the moment
//! of the call, and the notification is re-validated so a recycled pid is never
//! attributed the wrong program.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::sys;

/// Upper bounds that keep a hostile argv from costing unbounded time or memory.
const MAX_ARGS: usize = 4096;
const MAX_ARG_BYTES: usize = 128 * 1024;
const MAX_TOTAL_BYTES: usize = 1024 * 1024;

/// One traced event. Pids are as seen inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceEvent {
    Exec {
        pid: i32,
        ppid: i32,
        cwd: PathBuf,
        path: Vec<u8>,
        argv: Vec<Vec<u8>>,
        /// argv was cut at one of the bounds above.
        truncated: bool,
    },
    Exit {
        pid: i32,
        status: i32,
    },
}

/// Serves notifications until every sandboxed process is gone.
pub fn serve(listener: OwnedFd, mut on_event: impl FnMut(TraceEvent)) {
    let fd = listener.as_fd();
    loop {
        match sys::poll_hup(fd) {
            Ok(false) => {}
            Ok(true) | Err(_) => return,
        }
        let Ok(notif) = sys::notif_recv(fd) else {
            // ENOENT: the task died before we received it; go on.
            continue;
        };
        let event = describe(&notif);
        // Only report what belongs to a live, unchanged notification.
        if sys::notif_id_valid(fd, notif.id)
            && let Some(event) = event
        {
            on_event(event);
        }
        let _ = sys::notif_continue(fd, notif.id);
    }
}

fn describe(n: &sys::SeccompNotif) -> Option<TraceEvent> {
    let host_pid = libc::pid_t::try_from(n.pid).ok()?;
    let status = std::fs::read_to_string(format!("/proc/{host_pid}/status")).ok()?;
    let pid = ns_pid(&status)?;
    match i64::from(n.nr) {
        libc::SYS_exit_group => Some(TraceEvent::Exit {
            pid,
            status: i32::try_from(n.args[0] & 0xff).unwrap_or(0),
        }),
        libc::SYS_execve | libc::SYS_execveat => {
            let (dirfd, path_ptr, argv_ptr) = if i64::from(n.nr) == libc::SYS_execve {
                (libc::AT_FDCWD, n.args[0], n.args[1])
            } else {
                (
                    i32::try_from(n.args[0] as i64).unwrap_or(libc::AT_FDCWD),
                    n.args[1],
                    n.args[2],
                )
            };
            let path = read_cstring(host_pid, path_ptr, MAX_ARG_BYTES)?.0;
            // A failed PATH probe (ENOENT) is not an executed program.
            if !exists(host_pid, dirfd, &path) {
                return None;
            }
            let (argv, truncated) = read_argv(host_pid, argv_ptr);
            let ppid = status
                .lines()
                .find_map(|l| l.strip_prefix("PPid:"))
                .and_then(|v| v.trim().parse::<i32>().ok())
                .and_then(|pp| std::fs::read_to_string(format!("/proc/{pp}/status")).ok())
                .and_then(|s| ns_pid(&s))
                .unwrap_or(0);
            let cwd = std::fs::read_link(format!("/proc/{host_pid}/cwd")).unwrap_or_default();
            Some(TraceEvent::Exec {
                pid,
                ppid,
                cwd,
                path,
                argv,
                truncated,
            })
        }
        _ => None,
    }
}

/// The innermost pid of a task, from the `NSpid:` line of its status file.
fn ns_pid(status: &str) -> Option<i32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .and_then(|v| v.split_whitespace().last())
        .and_then(|v| v.parse().ok())
}

fn exists(host_pid: libc::pid_t, dirfd: i32, path: &[u8]) -> bool {
    let rel = std::ffi::OsStr::from_bytes(path);
    let base = if path.starts_with(b"/") {
        format!("/proc/{host_pid}/root")
    } else if dirfd == libc::AT_FDCWD {
        format!("/proc/{host_pid}/cwd")
    } else {
        format!("/proc/{host_pid}/fd/{dirfd}")
    };
    let full = PathBuf::from(base).join(
        std::path::Path::new(rel)
            .strip_prefix("/")
            .unwrap_or(std::path::Path::new(rel)),
    );
    // An empty path with AT_EMPTY_PATH executes the descriptor itself.
    path.is_empty() || std::fs::metadata(full).is_ok()
}

/// Reads a NUL-terminated string, page by page so an unmapped page after the string
/// does not fail the read. Returns the bytes and whether the limit cut it.
fn read_cstring(pid: libc::pid_t, addr: u64, limit: usize) -> Option<(Vec<u8>, bool)> {
    const PAGE: u64 = 4096;
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < limit {
        let chunk = usize::try_from(PAGE - at % PAGE)
            .ok()?
            .min(limit - out.len());
        let mut buf = vec![0u8; chunk];
        let n = sys::read_process_memory(pid, at, &mut buf).ok()?;
        if n == 0 {
            return None;
        }
        if let Some(end) = buf[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&buf[..end]);
            return Some((out, false));
        }
        out.extend_from_slice(&buf[..n]);
        at += n as u64;
    }
    Some((out, true))
}

fn read_argv(pid: libc::pid_t, argv_ptr: u64) -> (Vec<Vec<u8>>, bool) {
    let mut argv = Vec::new();
    let mut total = 0usize;
    if argv_ptr == 0 {
        return (argv, false);
    }
    for i in 0..MAX_ARGS as u64 {
        let mut ptr = [0u8; 8];
        if !matches!(
            sys::read_process_memory(pid, argv_ptr + i * 8, &mut ptr),
            Ok(8)
        ) {
            return (argv, true);
        }
        let p = u64::from_ne_bytes(ptr);
        if p == 0 {
            return (argv, false);
        }
        let Some((arg, cut)) = read_cstring(pid, p, MAX_ARG_BYTES.min(MAX_TOTAL_BYTES - total))
        else {
            return (argv, true);
        };
        total += arg.len();
        argv.push(arg);
        if cut || total >= MAX_TOTAL_BYTES {
            return (argv, true);
        }
    }
    (argv, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn innermost_pid_is_the_last_nspid() {
        assert_eq!(ns_pid("Name:\tsh\nNSpid:\t4242\t7\n"), Some(7));
        assert_eq!(ns_pid("NSpid:\t99\n"), Some(99));
        assert_eq!(ns_pid("Name:\tx\n"), None);
    }

    #[test]
    fn reads_our_own_argv_like_another_process_would() {
        let pid = libc::pid_t::try_from(std::process::id()).unwrap();
        let args: Vec<std::ffi::CString> = ["prog", "a b", ""]
            .iter()
            .map(|s| std::ffi::CString::new(*s).unwrap())
            .collect();
        let mut ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        let (argv, truncated) = read_argv(pid, ptrs.as_ptr() as u64);
        assert!(!truncated);
        assert_eq!(argv, vec![b"prog".to_vec(), b"a b".to_vec(), Vec::new()]);
    }
}
