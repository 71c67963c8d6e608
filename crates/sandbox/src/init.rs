//! The sandbox's side: set up every layer, then act as PID 1.
//!
//! Runs in the child created by [`crate::spawn`], inside fresh namespaces. On success
//! it forks the command and stays as a small init that reaps zombies and forwards
//! signals; on failure it reports the failing layer to the supervisor and exits 125.

use std::ffi::CString;
use std::io::{PipeReader, PipeWriter, Read, Write};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use crate::caps;
use crate::error::SetupError;
use crate::landlock;
use crate::prepared::Prepared;
use crate::protocol::Message;
use crate::seccomp;
use crate::spec::{FORWARDED_SIGNALS, TERMINATE_ALL};
use crate::sys;

pub(crate) fn child_main(
    p: &Prepared,
    cgroup_entry: Vec<std::fs::File>,
    sync: PipeReader,
    mut report: PipeWriter,
) -> ! {
    match setup(p, cgroup_entry, sync) {
        Ok((ready, tty)) => {
            if Message::Ready(ready).send(&mut report).is_err() {
                sys::exit_now(125);
            }
            run_init(p, report, tty)
        }
        Err(e) => {
            let _ = Message::SetupFailed {
                layer: e.layer().to_owned(),
                message: e.to_string(),
            }
            .send(&mut report);
            sys::exit_now(125)
        }
    }
}

/// Sets every layer up; returns what is enforced, and with `tty` the terminal's
/// slave side for the command.
fn setup(
    p: &Prepared,
    cgroup_entry: Vec<std::fs::File>,
    mut sync: PipeReader,
) -> Result<(String, Option<std::os::fd::OwnedFd>), SetupError> {
    sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0)
        .map_err(SetupError::ParentDeathSignal)?;
    // Into the sandbox's cgroup before anything else (cgroup v1; empty otherwise):
    // this process has one thread, so `0` written to each hierarchy's `tasks` moves
    // all of it, without the grace period a move by the supervisor waits for (see
    // `Cgroup::entry_files`); every process of the sandbox descends from it. A move
    // that fails stops the set-up: nothing runs outside the limits.
    for mut tasks in cgroup_entry {
        tasks.write_all(b"0").map_err(SetupError::Cgroup)?;
    }
    // Leave the caller's session: init must not keep the host's terminal as its
    // controlling terminal, nor get its Ctrl-C (the supervisor forwards signals once).
    sys::setsid().map_err(SetupError::NewSession)?;
    // Wait until the supervisor has written our uid/gid maps.
    let mut go = [0u8; 1];
    if !matches!(sync.read(&mut go), Ok(1)) {
        return Err(SetupError::ParentGone);
    }
    // Before the file-system identity changes: /dev/net/tun is checked against the
    // host's permissions, and the device must be created from inside our namespace.
    let tun = match p.network {
        crate::spec::SandboxNetwork::Tun(cfg) => {
            Some(sys::tun_create(cfg.name).map_err(|source| SetupError::Tun { source })?)
        }
        _ => None,
    };
    if p.switch_identity {
        // We are still host root (unmapped here); create files as the target identity.
        sys::setfsgid(p.inside.1);
        sys::setfsuid(p.inside.0);
    }
    sys::sethostname(&p.hostname).map_err(SetupError::Hostname)?;
    if p.network.private() {
        // A fresh network namespace has loopback down; "loopback only" means it works.
        sys::loopback_up().map_err(|source| SetupError::Network { source })?;
    }
    if let (crate::spec::SandboxNetwork::Tun(cfg), Some(tun), Some(sock)) =
        (p.network, &tun, &p.notify_sock)
    {
        sys::iface_configure(
            cfg.name,
            cfg.address,
            cfg.netmask,
            i32::from(cfg.mtu),
            cfg.gateway,
        )
        .map_err(|source| SetupError::Network { source })?;
        sys::send_fd(sock.as_fd(), tun.as_fd()).map_err(|source| SetupError::Network { source })?;
    }
    drop(tun);
    crate::rootfs::build_and_pivot(&p.ops, p.image_lower.as_ref(), p.inside)?;
    std::env::set_current_dir(&p.workdir).map_err(|source| SetupError::Workdir {
        path: p.workdir.clone(),
        source,
    })?;
    // On cgroup v2 the supervisor moved us into the sandbox's cgroup while we built
    // the file system (see spawn.rs); wait for it to say so before the cgroup
    // namespace (whose root must be that cgroup) and before anything of the command's
    // can run. (On v1 we are there already, and the byte follows the first.)
    if !matches!(sync.read(&mut go), Ok(1)) {
        return Err(SetupError::ParentGone);
    }
    // The sandbox is built: back to every CPU the supervisor had (it kept us off its
    // own while we built), which the command inherits, starting on the supervisor's:
    // there the command and the supervisor's tracer hand each notification over
    // without waking another CPU (on a VM, an interrupt between CPUs per exec cost
    // a quarter of seccomp notification's recording time, session 27).
    if let Some((cpus, home)) = &p.cpus {
        if let Some(home) = cpus.only(*home) {
            let _ = sys::set_affinity(0, &home);
        }
        let _ = sys::set_affinity(0, cpus);
    }
    sys::unshare(libc::CLONE_NEWCGROUP).map_err(|source| SetupError::Namespaces {
        hint: "this kernel lacks cgroup namespaces; `vectraguard doctor` shows it".into(),
        source,
    })?;

    caps::drop_bounding_set()?;
    if p.switch_identity {
        let cred = |step| move |source| SetupError::Credentials { step, source };
        sys::setgroups(&[]).map_err(cred("drop supplementary groups"))?;
        sys::setresgid(p.inside.1).map_err(cred("switch to the sandbox group"))?;
        sys::setresuid(p.inside.0).map_err(cred("switch to the sandbox user"))?;
    }
    // A credential change clears the parent-death signal: set it again, then make
    // sure the supervisor did not die in between.
    sys::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0)
        .map_err(SetupError::ParentDeathSignal)?;
    if sys::peer_closed(sync.as_fd()) {
        return Err(SetupError::ParentGone);
    }
    caps::clear_all()?;
    if let Some(n) = p.rlimit_nproc {
        sys::setrlimit(libc::RLIMIT_NPROC, n).map_err(|source| SetupError::Rlimit {
            what: "RLIMIT_NPROC",
            source,
        })?;
    }
    // Init is a copy of the supervisor: its memory holds the host environment and its
    // descriptor table the caller's files. Not dumpable means no sandboxed process can
    // read /proc/1/environ, /proc/1/mem or open /proc/1/fd/*.
    sys::prctl(libc::PR_SET_DUMPABLE, 0, 0).map_err(SetupError::NotDumpable)?;
    sys::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0).map_err(SetupError::NoNewPrivs)?;
    let ll = landlock::restrict(&p.landlock)?;
    // Seccomp last: from here on the filter also constrains this init process.
    let listener = seccomp::install(&p.seccomp, p.trace_exec)?;
    if let (Some(listener), Some(sock)) = (listener, &p.notify_sock) {
        sys::send_fd(sock.as_fd(), listener.as_fd()).map_err(|e| SetupError::Seccomp {
            reason: format!("cannot hand the exec listener to the supervisor: {e}"),
        })?;
    }
    // The terminal comes from the sandbox's own devpts, after every restriction is in
    // place: the host's terminals are never reachable from inside.
    let tty = match (&p.notify_sock, p.tty) {
        (Some(sock), true) => {
            let (master, slave) = sys::open_pty().map_err(SetupError::Terminal)?;
            sys::send_fd(sock.as_fd(), master.as_fd()).map_err(SetupError::Terminal)?;
            Some(slave)
        }
        _ => None,
    };
    // What is in force, reported as it was set up (each step above fails closed).
    let namespaces: Vec<&str> = crate::spec::namespaces(p.network)
        .map(|(n, _)| *n)
        .collect();
    let text = format!(
        "exec_trace={}\nnamespaces={}\nnetwork={}\nno_new_privs=1\ncapabilities=\nlandlock_abi={}\nlandlock_kernel_abi={}\nlandlock_scopes={}\nseccomp_mode={}\nseccomp_instructions={}\nseccomp_notify={}\n",
        match (p.trace_exec, p.exec_by_bpf) {
            (true, true) => "bpf",
            (true, false) => "seccomp-notify",
            (false, _) => "off",
        },
        namespaces.join(","),
        match p.network {
            crate::spec::SandboxNetwork::Loopback => "loopback",
            crate::spec::SandboxNetwork::Tun(_) => "tun",
            crate::spec::SandboxNetwork::Host => "host",
        },
        ll.abi_used,
        ll.kernel_abi,
        if ll.scoped_signals {
            "signal,abstract_unix_socket"
        } else {
            ""
        },
        if p.trace_exec {
            "filter+notify"
        } else {
            "filter"
        },
        p.seccomp.len(),
        [
            (p.trace_exec && !p.exec_by_bpf, "exec"),
            (p.trace_exit, "exit"),
            (p.trace_files, "files"),
            (p.trace_file_changes && !p.trace_files, "file-changes"),
            (p.report_refusals, "refusals"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| *name)
        .collect::<Vec<_>>()
        .join(","),
    );
    Ok((text, tty))
}

fn run_init(p: &Prepared, mut report: PipeWriter, tty: Option<std::os::fd::OwnedFd>) -> ! {
    if p.persistent {
        match &p.notify_sock {
            Some(sock) => crate::zygote::serve(crate::zygote::Ending::Report(report), sock),
            None => sys::exit_now(125),
        }
    }
    // Keep only what init and the command need: the report pipe and the command's
    // stdio (the terminal, when there is one).
    let stdio = match &tty {
        Some(slave) => [slave.as_raw_fd(); 3],
        None => p.stdio,
    };
    let mut keep = vec![report.as_raw_fd()];
    keep.extend_from_slice(&stdio);
    // SAFETY: init never returns (`child_main` ends in exit_now), so the descriptors
    // closed here that objects in `p` still own (the notify socket, the image mount)
    // are never used or dropped again; the report pipe and the stdio are kept.
    #[allow(unsafe_code)]
    unsafe {
        sys::close_all_except(&keep)
    };
    let Ok((mut err_r, err_w)) = std::io::pipe() else {
        sys::exit_now(125)
    };
    // SAFETY: init has one thread: it is a copy of the supervisor's calling thread
    // and starts none.
    #[allow(unsafe_code)]
    let forked = unsafe { sys::fork() };
    let main = match forked {
        Ok(Some(pid)) => pid,
        Ok(None) => {
            drop(err_r);
            let exec = Exec {
                argv: &p.argv,
                envp: &p.envp,
                path_dirs: &p.path_dirs,
                cwd: None,
                keep_session: false,
            };
            exec_command(&exec, err_w, stdio, tty.is_some())
        }
        Err(_) => sys::exit_now(125),
    };
    drop(err_w);
    let had_tty = tty.is_some();
    drop(tty);
    let _ = Message::Started(main).send(&mut report);
    // The command's stdio belongs to the command; init keeps no copy, so the
    // supervisor sees end-of-file when the last sandboxed writer is gone.
    // SAFETY: init owns no object on 0-2: they are the supervisor's stdio inherited as
    // plain numbers (Rust's runtime keeps 0-2 open in the supervisor, so init's own
    // pipes have higher numbers), and the terminal's slave was dropped above. Without
    // a terminal, the command's stdio (a recorded run's pipes, numbered above 2) are
    // plain numbers too, kept only for the command's fork; err_r, the report pipe and
    // they are distinct open descriptors, so none of init's own is closed here.
    #[allow(unsafe_code)]
    unsafe {
        let _ = sys::close_range(0, 2);
        if !had_tty {
            for fd in stdio.into_iter().filter(|&fd| fd > 2) {
                let Ok(fd) = libc::c_uint::try_from(fd) else {
                    continue;
                };
                let _ = sys::close_range(fd, fd);
            }
        }
    }
    let mut errno = [0u8; 4];
    if let Ok(4) = err_r.read(&mut errno) {
        let _ = Message::ExecFailed(i32::from_le_bytes(errno)).send(&mut report);
        let _ = report.flush();
        sys::exit_now(0);
    }
    drop(err_r);

    let set = sys::sigset(&[FORWARDED_SIGNALS, &[libc::SIGCHLD, TERMINATE_ALL]].concat());
    let mut full_seen = vec![false; p.watch_full.len()];
    loop {
        let got = if p.watch_full.is_empty() {
            match sys::sigwait_info(&set) {
                Ok(got) => got,
                Err(_) => sys::exit_now(125),
            }
        } else {
            match sys::sigtimedwait_info(&set, WATCH_INTERVAL) {
                Ok(Some(got)) => got,
                Ok(None) => {
                    report_full(p, &mut full_seen, &mut report);
                    continue;
                }
                Err(_) => sys::exit_now(125),
            }
        };
        let sig = got.signal;
        if sig == TERMINATE_ALL {
            // A timeout: every process in the sandbox, not only the command's group.
            // Only the supervisor's: a blocked signal reaches PID 1 from its own
            // namespace too, and a command could otherwise have init end every
            // process of the sandbox (red team, session 16).
            if sent_from_outside(got.sender.into(), got.code) {
                let _ = sys::kill(-1, libc::SIGTERM);
            }
            continue;
        }
        if sig != libc::SIGCHLD {
            forward_signal(main, sig);
            continue;
        }
        while let Ok(Some((pid, status))) = sys::waitpid(-1, libc::WNOHANG) {
            if pid == main {
                report_full(p, &mut full_seen, &mut report);
                // Exiting ends the PID namespace: the kernel kills whatever is left,
                // but only once init has begun to exit, and the supervisor then
                // waits out the namespaces' teardown too. Ending the rest here
                // first lets it complete the record meanwhile.
                let alone = end_the_rest(&set);
                // Our own end (the namespaces' teardown) off the supervisor's CPU,
                // where it completes the record meanwhile.
                if let Some((cpus, home)) = &p.cpus
                    && let Some(away) = cpus.without(*home)
                {
                    let _ = sys::set_affinity(0, &away);
                }
                let _ = Message::Exited(status).send(&mut report);
                if alone {
                    let _ = Message::Alone.send(&mut report);
                }
                sys::exit_now(0);
            }
        }
    }
}

/// How long init tries to end the sandbox's other processes itself once the command
/// has ended. A process it cannot end (one stuck in an uninterruptible wait) is left
/// to the kernel, which ends it with the PID namespace as init exits: the supervisor
/// is then not told [`Message::Alone`] and waits for init's end as before.
const END_THE_REST: std::time::Duration = std::time::Duration::from_secs(1);

/// Kills every other process of the sandbox's PID namespace (`kill(-1)` from its
/// init reaches all of them and never init) and reaps them all, orphans included,
/// since init is their reaper. True once none is left; false when one outlived
/// [`END_THE_REST`]. Killing again after each reap catches a child forked while
/// the first kill went round.
fn end_the_rest(set: &libc::sigset_t) -> bool {
    let deadline = std::time::Instant::now() + END_THE_REST;
    loop {
        let _ = sys::kill(-1, libc::SIGKILL);
        // `__WALL`: a child whose exit signal is not SIGCHLD counts too, or ECHILD
        // could come while one is left (red team, session 27).
        match sys::waitpid(-1, libc::WNOHANG | libc::__WALL) {
            Ok(Some(_)) => continue,
            Err(e) if e.raw_os_error() == Some(libc::ECHILD) => return true,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return false,
            Ok(None) => {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    return false;
                }
                // Woken by the next child's end (SIGCHLD is blocked here, as in the
                // loop above); any other signal only shortens the wait.
                let _ = sys::sigtimedwait(set, left.min(std::time::Duration::from_millis(50)));
            }
        }
    }
}

/// How often init looks at the watched mounts while the command runs.
const WATCH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(250);

/// Reports each watched mount the first time it is found full.
fn report_full(p: &Prepared, seen: &mut [bool], report: &mut PipeWriter) {
    for (path, seen) in p.watch_full.iter().zip(seen.iter_mut()) {
        if !*seen && matches!(sys::statfs_available(path), Ok(0)) {
            *seen = true;
            let unix_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
                .unwrap_or(0);
            let _ = Message::LimitHit {
                limit: "disk".into(),
                detail: path.to_string_lossy().into_owned(),
                unix_ms,
            }
            .send(report);
        }
    }
}

/// A command to execute: argv, environment, the `PATH` to search, and where.
pub(crate) struct Exec<'a> {
    pub argv: &'a [CString],
    pub envp: &'a [CString],
    pub path_dirs: &'a [CString],
    /// The working directory to change to first (a persistent sandbox's command);
    /// `None`: init's own (the workdir).
    pub cwd: Option<&'a CString>,
    /// Stay in the caller's session, whose terminal the caller already made this
    /// process's (gVisor's terminal relay); otherwise a new session.
    pub keep_session: bool,
}

/// Passes a signal init was sent on as a terminal would: to the command's whole
/// process group, or to the command alone when it left its group. A hang-up or a
/// termination is followed by SIGCONT, as a terminal's hang-up and the shells'
/// `kill` do: a stopped command would otherwise keep it pending, and the session
/// alive, for ever.
pub(crate) fn forward_signal(main: libc::pid_t, sig: libc::c_int) {
    let send = |sig| {
        if sys::kill(-main, sig).is_err() {
            let _ = sys::kill(main, sig);
        }
    };
    send(sig);
    if matches!(sig, libc::SIGHUP | libc::SIGTERM) {
        send(libc::SIGCONT);
    }
}

/// Whether a signal init took came from outside the sandbox by `kill` (or
/// `pidfd_send_signal`): `SI_USER`, whose sender the kernel fills in, 0 for another
/// pid namespace. A command can make the kernel send a signal with no sender (an
/// I/O notification: `F_SETOWN` 1, `F_SETSIG`; a positive code) or forge one with
/// sender 0 (`rt_sigqueueinfo`, `SI_QUEUE`); its own `kill` names it (red team,
/// session 15 for a persistent sandbox's init, 16 for a run's).
pub(crate) fn sent_from_outside(sender: i64, code: i32) -> bool {
    sender == 0 && code == libc::SI_USER
}

/// In the parent of an [`exec_command`] child: says on stderr why `program` could
/// not be executed when its errno came back on `err_r` (on success the pipe closes
/// with nothing in it), then closes the pipe.
pub(crate) fn report_exec_failure(mut err_r: PipeReader, program: &std::ffi::CStr) {
    let mut errno = [0u8; 4];
    if let Ok(4) = err_r.read(&mut errno) {
        let errno = i32::from_le_bytes(errno);
        let _ = writeln!(
            std::io::stderr(),
            "vectraguard: cannot run {}: {}",
            String::from_utf8_lossy(program.to_bytes()),
            std::io::Error::from_raw_os_error(errno.abs())
        );
    }
}

/// In a forked child: makes `stdio` its 0-2 (with `tty`, the controlling terminal
/// too) and executes `exec`; a failure writes its errno to `err_w` and exits as a
/// shell would.
pub(crate) fn exec_command(
    exec: &Exec<'_>,
    mut err_w: PipeWriter,
    stdio: [RawFd; 3],
    tty: bool,
) -> ! {
    let fail = |w: &mut PipeWriter, errno: i32| -> ! {
        let _ = w.write_all(&errno.to_le_bytes());
        // The status a shell gives: 127 not found, 126 found but not executable.
        sys::exit_now(crate::spec::Termination::ExecFailed(errno).exit_code())
    };
    let empty = sys::sigset(&[]);
    if sys::sigmask_set(&empty).is_err() {
        fail(&mut err_w, libc::EINVAL);
    }
    sys::reset_signal_dispositions();
    // Init is not dumpable and we are its copy; the exec tracer must read this
    // process's memory and /proc entries at its first execve. Nothing else runs in
    // the sandbox yet, and execve replaces this memory anyway.
    if let Err(e) = sys::prctl(libc::PR_SET_DUMPABLE, 1, 0) {
        fail(&mut err_w, e.raw_os_error().unwrap_or(libc::EPERM));
    }
    if !exec.keep_session
        && let Err(e) = sys::setsid()
    {
        fail(&mut err_w, e.raw_os_error().unwrap_or(libc::EPERM));
    }
    for (target, &source) in stdio.iter().enumerate() {
        let target = i32::try_from(target).unwrap_or(0);
        if source == target {
            // Already in place, but maybe close-on-exec (received with it).
            if let Err(e) = sys::keep_on_exec(target) {
                fail(&mut err_w, e.raw_os_error().unwrap_or(libc::EBADF));
            }
        } else {
            // SAFETY: no object in this process owns 0-2 (see `run_init`), and it
            // execs or exits right after (`exec_command` never returns).
            #[allow(unsafe_code)]
            let dup = unsafe { sys::dup2(source, target) };
            if let Err(e) = dup {
                fail(&mut err_w, e.raw_os_error().unwrap_or(libc::EBADF));
            }
        }
    }
    if tty
        && !exec.keep_session
        && let Err(e) = sys::set_controlling_terminal()
    {
        fail(&mut err_w, e.raw_os_error().unwrap_or(libc::ENOTTY));
    }
    // Only 0-2 survive the exec (our error pipe closes itself on success).
    if let Err(e) = sys::cloexec_from(3) {
        fail(&mut err_w, e.raw_os_error().unwrap_or(libc::EBADF));
    }
    // A failed chdir reports its errno negated, to tell it from a failed exec.
    if let Some(cwd) = exec.cwd
        && let Err(e) = std::env::set_current_dir(std::ffi::OsStr::from_bytes(cwd.as_bytes()))
    {
        fail(&mut err_w, -e.raw_os_error().unwrap_or(libc::ENOENT));
    }
    let errno = exec_search(exec);
    fail(&mut err_w, errno)
}

/// `execvp` semantics with the sandbox's PATH: a name without `/` is looked up in
/// each PATH directory; "not executable" wins over "not found" when both occur.
pub(crate) fn exec_search(p: &Exec<'_>) -> i32 {
    let Some(program) = p.argv.first() else {
        return libc::ENOENT;
    };
    if program.as_bytes().contains(&b'/') {
        return sys::execve(program, p.argv, p.envp)
            .raw_os_error()
            .unwrap_or(libc::ENOENT);
    }
    let mut result = libc::ENOENT;
    for dir in p.path_dirs {
        let mut full = dir.as_bytes().to_vec();
        full.push(b'/');
        full.extend_from_slice(program.as_bytes());
        let Ok(full) = CString::new(full) else {
            continue;
        };
        let errno = sys::execve(&full, p.argv, p.envp)
            .raw_os_error()
            .unwrap_or(libc::ENOENT);
        match errno {
            libc::ENOENT | libc::ENOTDIR => {}
            libc::EACCES => result = libc::EACCES,
            other => return other,
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_signal_killed_from_outside_the_sandbox_is_taken_for_the_supervisor_s() {
        assert!(sent_from_outside(0, libc::SI_USER));
        // A process of the sandbox's own namespace: its pid is named.
        assert!(!sent_from_outside(1, libc::SI_USER));
        assert!(!sent_from_outside(42, libc::SI_USER));
        // Sender 0 that the kernel or the command wrote, not a kill from outside.
        assert!(!sent_from_outside(0, libc::SI_QUEUE));
        // POLL_IN, an I/O notification's (F_SETSIG).
        assert!(!sent_from_outside(0, 1));
        assert!(!sent_from_outside(0, libc::SI_KERNEL));
        assert!(!sent_from_outside(0, libc::SI_TKILL));
    }
}
