//! A persistent sandbox's init: instead of one command, it starts each command the
//! supervisor asks for (see `spawner.rs`) until the supervisor hangs up or stops it.
//!
//! Every command is forked from init, after every layer is in place, so it is
//! confined exactly as a `sandbox run` command is; init stays PID 1, reaps everything
//! and reports each of its commands' ends. Init is single-threaded and waits on two
//! descriptors: the request socket and a signalfd (SIGCHLD, and the stop signal).

use std::collections::HashMap;
use std::ffi::CString;
use std::io::{PipeReader, PipeWriter, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use crate::init::Exec;
use crate::protocol::Message;
use crate::spawner::{MAX_REQUEST, Reply, Request};
use crate::spec::{FORWARDED_SIGNALS, TERMINATE_ALL};
use crate::sys;

/// A command init started: its pid and the pipe its failed exec writes to.
struct Started {
    id: u64,
    errors: PipeReader,
}

/// How the init serving commands tells that the sandbox ended, and which signal
/// stops it.
pub(crate) enum Ending {
    /// The native sandbox's init: `Exited` on the report pipe to the supervisor;
    /// the supervisor stops it with [`TERMINATE_ALL`].
    Report(PipeWriter),
    /// A container's init (`engine_init`): its exit status is the container's,
    /// which the engine's client reports; the engine stops it with `SIGTERM`
    /// (`docker kill --signal 15`, `docker stop`).
    ExitStatus,
}

impl Ending {
    fn stop_signal(&self) -> libc::c_int {
        match self {
            Ending::Report(_) => TERMINATE_ALL,
            Ending::ExitStatus => libc::SIGTERM,
        }
    }
}

pub(crate) fn serve(mut ending: Ending, sock: &OwnedFd) -> ! {
    let mut keep = vec![sock.as_raw_fd()];
    if let Ending::Report(report) = &ending {
        keep.push(report.as_raw_fd());
    }
    // SAFETY: init never returns; the descriptors closed here that init's plan still
    // owns (the image mount) are never used or dropped again; the report pipe
    // and the request socket are kept, and 0-2 are the supervisor's (or the
    // engine's) stdio inherited as plain numbers, owned by nothing here.
    #[allow(unsafe_code)]
    unsafe {
        sys::close_all_except(&keep);
        let _ = sys::close_range(0, 2);
    }
    let stop = ending.stop_signal();
    let signals = sys::sigset(&[FORWARDED_SIGNALS, &[libc::SIGCHLD, TERMINATE_ALL, stop]].concat());
    // A signalfd only reads blocked signals: the native init blocked them already,
    // a container's init blocks them here (as PID 1, an unblocked signal with no
    // handler would be dropped).
    if matches!(ending, Ending::ExitStatus) && sys::sigmask_set(&signals).is_err() {
        sys::exit_now(125)
    }
    let Ok(sigfd) = sys::signalfd(&signals) else {
        sys::exit_now(125)
    };
    let mut children: HashMap<libc::pid_t, Started> = HashMap::new();
    let mut stopping = false;
    let mut buf = vec![0u8; MAX_REQUEST + 1];
    loop {
        let Ok(ready) = sys::poll_read(&[sock.as_fd(), sigfd.as_fd()], -1) else {
            sys::exit_now(125)
        };
        if ready[1] != 0 {
            for got in sys::signalfd_read(sigfd.as_fd()) {
                // Only from outside the sandbox (the supervisor, the engine: pid 0
                // here). A blocked signal reaches PID 1 from its own namespace too,
                // so a command could otherwise stop the whole sandbox.
                if got.signal == stop && crate::init::sent_from_outside(got.sender.into(), got.code)
                {
                    // A stop: every process in the sandbox, then end once all are gone.
                    stopping = true;
                    let _ = sys::kill(-1, libc::SIGTERM);
                }
            }
            if reap(&mut children, sock) && stopping {
                end(&mut ending, 0);
            }
        }
        if ready[0] == 0 {
            continue;
        }
        let (n, fds) = match sys::recv_msg(sock.as_fd(), &mut buf) {
            Ok((0, _)) | Err(_) => {
                // The supervisor is gone or let go: the sandbox ends with it.
                let _ = sys::kill(-1, libc::SIGKILL);
                end(&mut ending, 0)
            }
            Ok(got) => got,
        };
        match Request::decode(&buf[..n]) {
            Some(Request::Spawn {
                id,
                tty,
                cwd,
                argv,
                env,
            }) if !stopping => {
                let reply = start(id, tty, &cwd, &argv, &env, fds, &mut children);
                let (reply, master) = match reply {
                    Ok((pid, master)) => (Reply::Started { id, pid }, master),
                    Err(errno) => (Reply::Failed { id, errno }, None),
                };
                let passed: Vec<_> = master.iter().map(AsFd::as_fd).collect();
                let _ = sys::send_msg(sock.as_fd(), &reply.encode(), &passed);
            }
            Some(Request::Spawn { id, .. }) => {
                let reply = Reply::Failed {
                    id,
                    errno: libc::ESHUTDOWN,
                };
                let _ = sys::send_msg(sock.as_fd(), &reply.encode(), &[]);
            }
            Some(Request::Signal { id, signal }) => {
                if let Some((pid, _)) = children.iter().find(|(_, c)| c.id == id) {
                    // Like a terminal: the command's whole process group.
                    if sys::kill(-pid, signal).is_err() {
                        let _ = sys::kill(*pid, signal);
                    }
                }
            }
            None => {}
        }
    }
}

fn end(ending: &mut Ending, status: i32) -> ! {
    match ending {
        Ending::Report(report) => {
            let _ = Message::Exited(status).send(report);
            sys::exit_now(0)
        }
        Ending::ExitStatus => sys::exit_now(status),
    }
}

/// Reaps every ended process, reporting those init started. True when none is left.
fn reap(children: &mut HashMap<libc::pid_t, Started>, sock: &OwnedFd) -> bool {
    loop {
        match sys::waitpid(-1, libc::WNOHANG) {
            Ok(Some((pid, status))) => {
                if let Some(mut started) = children.remove(&pid) {
                    // A failed chdir or exec wrote its errno before the child exited.
                    let mut errno = [0u8; 4];
                    let reply = match started.errors.read(&mut errno) {
                        Ok(4) => Reply::Failed {
                            id: started.id,
                            errno: i32::from_le_bytes(errno),
                        },
                        _ => Reply::Exited {
                            id: started.id,
                            status,
                        },
                    };
                    let _ = sys::send_msg(sock.as_fd(), &reply.encode(), &[]);
                }
            }
            Ok(None) => return false,
            // ECHILD: nothing left in the sandbox.
            Err(_) => return true,
        }
    }
}

/// Forks one command. Returns its pid (and a terminal's master), or an errno.
fn start(
    id: u64,
    tty: Option<(u16, u16)>,
    cwd: &CString,
    argv: &[CString],
    env: &[CString],
    fds: Vec<OwnedFd>,
    children: &mut HashMap<libc::pid_t, Started>,
) -> Result<(libc::pid_t, Option<OwnedFd>), i32> {
    let errno = |e: std::io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    let (stdio, master): (Vec<OwnedFd>, Option<OwnedFd>) = if let Some((rows, cols)) = tty {
        let (master, slave) = sys::open_pty().map_err(errno)?;
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        sys::set_winsize(master.as_fd(), &size).map_err(errno)?;
        (vec![slave], Some(master))
    } else if fds.len() == 3 {
        (fds, None)
    } else {
        return Err(libc::EBADMSG);
    };
    let raw: [RawFd; 3] = match stdio.as_slice() {
        [one] => [one.as_raw_fd(); 3],
        [a, b, c] => [a.as_raw_fd(), b.as_raw_fd(), c.as_raw_fd()],
        _ => return Err(libc::EBADMSG),
    };
    let path = env
        .iter()
        .find_map(|e| e.as_bytes().strip_prefix(b"PATH="))
        .unwrap_or(vg_policy::env::SANDBOX_PATH.as_bytes());
    let path_dirs: Vec<CString> = path
        .split(|b| *b == b':')
        .filter(|d| !d.is_empty())
        .filter_map(|d| CString::new(d).ok())
        .collect();
    let (errors, err_w) = std::io::pipe().map_err(errno)?;
    // Read when the child has ended: never wait on it.
    sys::set_nonblocking(errors.as_fd()).map_err(errno)?;
    // SAFETY: init has one thread (it starts none).
    #[allow(unsafe_code)]
    let forked = unsafe { sys::fork() };
    match forked {
        Ok(Some(pid)) => {
            drop(err_w);
            children.insert(pid, Started { id, errors });
            Ok((pid, master))
        }
        Ok(None) => {
            // Before the command can be looked at (it becomes dumpable for the exec
            // tracer): nothing of init's but its stdio and error pipe stays open, and it
            // leaves init's Landlock domain for one of its own, out of reach of the
            // commands already running (init's memory holds what the host had).
            let mut keep = raw.to_vec();
            keep.push(err_w.as_raw_fd());
            // SAFETY: this child execs or exits right after and uses no object owning
            // a closed descriptor: `stdio`, `errors`, `master` and init's socket,
            // signalfd and other children's pipes are never used or dropped again here.
            #[allow(unsafe_code)]
            unsafe {
                sys::close_all_except(&keep);
            }
            std::mem::forget((errors, master, stdio));
            let mut err_w = err_w;
            if crate::landlock::nest().is_err() {
                use std::io::Write;
                let _ = err_w.write_all(&libc::EPERM.to_le_bytes());
                sys::exit_now(crate::spec::EXIT_CANNOT_EXECUTE);
            }
            let exec = Exec {
                argv,
                envp: env,
                path_dirs: &path_dirs,
                cwd: Some(cwd),
                keep_session: false,
            };
            crate::init::exec_command(&exec, err_w, raw, tty.is_some())
        }
        Err(e) => Err(errno(e)),
    }
}
