//! The launcher of a persistent gVisor sandbox's commands: `runsc exec` starts
//! this program in [`MODE`] (bound read-only inside, as the first process is), as
//! the command's user, in the command's folder, with an empty environment; it
//! sets `no_new_privs`, installs `vg_seccomp::gvisor_exec_profile`, and executes
//! the command with exactly its argv and environment, nothing of its own left
//! (no descriptor but 0-2, no signal disposition or mask, no variable).
//!
//! Why: runsc starts an exec'd process directly, with no `no_new_privs` (runsc
//! 20221219 reads no `noNewPrivileges` for an exec) and no filter of ours, and
//! gVisor lets a command (uid 0 inside) have an I/O signal of its choosing sent to
//! the sandbox's first process (`F_SETOWN` 1, `F_SETSIG` `SIGKILL`), which ends the
//! sandbox. The environment comes in the arguments, not in this process's own: a
//! variable for the dynamic loader (`LD_PRELOAD`, `LD_LIBRARY_PATH`, …) would
//! otherwise run the command's code in this process before the filter is in
//! place. The execve is the command's first exec, which gVisor's exec trace point
//! reports: the record's `exec` line is that point's, and this program, started by
//! runsc with no exec, is never named in it.

use std::ffi::{CString, OsString};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;

use crate::init::{Exec, exec_search};
use crate::spec::Termination;
use crate::sys;

/// The first argument that starts this program as the launcher; then the number
/// of environment entries, the entries (`NAME=value`), and the command's argv.
pub const MODE: &str = "__vectraguard-gvisor-launch";

/// The `PATH` a command without one is searched in (runsc's and the shells').
const DEFAULT_PATH: &[u8] = b"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The launcher's arguments after its program: [`MODE`], the environment's size,
/// the environment, the argv (pure).
pub fn args(argv: &[String], env: &[(String, String)]) -> Vec<String> {
    let mut out = vec![MODE.to_owned(), env.len().to_string()];
    out.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
    out.extend(argv.iter().cloned());
    out
}

/// What [`args`] made, read back (after [`MODE`]): the environment and the argv;
/// `None` when malformed (pure).
fn parse(args: &[OsString]) -> Option<(Vec<CString>, Vec<CString>)> {
    let (count, rest) = args.split_first()?;
    let count: usize = count.to_str()?.parse().ok()?;
    if rest.len() <= count {
        return None;
    }
    let c = |s: &OsString| CString::new(s.as_bytes()).ok();
    let envp = rest[..count].iter().map(c).collect::<Option<Vec<_>>>()?;
    let argv = rest[count..].iter().map(c).collect::<Option<Vec<_>>>()?;
    Some((envp, argv))
}

/// The directories of the command's own `PATH` (or [`DEFAULT_PATH`]) (pure).
fn path_dirs(envp: &[CString]) -> Vec<CString> {
    let path = envp
        .iter()
        .rev()
        .find_map(|e| e.as_bytes().strip_prefix(b"PATH="))
        .unwrap_or(DEFAULT_PATH);
    path.split(|b| *b == b':')
        .filter(|d| !d.is_empty())
        .filter_map(|d| CString::new(d).ok())
        .collect()
}

fn fail(step: &str, e: &dyn std::fmt::Display) -> ! {
    let _ = writeln!(
        std::io::stderr(),
        "vectraguard: the command's launcher inside gVisor: cannot {step}: {e}"
    );
    sys::exit_now(125)
}

/// Runs the command in `args` (from [`MODE`] on) under `no_new_privs` and the
/// filter; never returns. A program that cannot be executed is said as natively
/// (`init::report_exec_failure`'s message) and ends with the shell's status (127
/// not found, 126 not executable).
pub fn main(args: &[OsString]) -> ! {
    let Some((envp, argv)) = parse(args.get(1..).unwrap_or_default()) else {
        fail("read the command", &"malformed arguments");
    };
    if sys::sigmask_set(&sys::sigset(&[])).is_err() {
        fail("unblock signals", &"sigprocmask failed");
    }
    // Rust ignores SIGPIPE: an ignored signal would stay ignored in the command.
    sys::reset_signal_dispositions();
    if let Err(e) = sys::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0) {
        fail("set no_new_privs", &e);
    }
    let program = vg_seccomp::gvisor_exec_profile()
        .compile()
        .unwrap_or_else(|e| fail("compile the filter", &e));
    if let Err(e) = crate::seccomp::install(&program, false) {
        fail("install the filter", &e);
    }
    // Only 0-2 (runsc's, the command's stdio) survive the exec.
    if let Err(e) = sys::cloexec_from(3) {
        fail("close its descriptors", &e);
    }
    let dirs = path_dirs(&envp);
    let exec = Exec {
        argv: &argv,
        envp: &envp,
        path_dirs: &dirs,
        cwd: None,
        keep_session: true,
    };
    let errno = exec_search(&exec);
    let _ = writeln!(
        std::io::stderr(),
        "vectraguard: cannot run {}: {}",
        String::from_utf8_lossy(argv[0].as_bytes()),
        std::io::Error::from_raw_os_error(errno)
    );
    sys::exit_now(Termination::ExecFailed(errno).exit_code())
}

/// The sandbox's first process: the I/O signals a command may still have gVisor
/// send it (`SIGIO`, `SIGURG`: `F_SETSIG` is refused by the launcher's filter)
/// ignored, it reaps what it is given and waits forever.
pub fn keep_sandbox() -> ! {
    for sig in [libc::SIGIO, libc::SIGURG] {
        if let Err(e) = sys::ignore_signal(sig) {
            let _ = writeln!(
                std::io::stderr(),
                "vectraguard: the sandbox's first process cannot ignore signal {sig}: {e}"
            );
            sys::exit_now(125);
        }
    }
    crate::runtime::reap_forever()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(items: &[String]) -> Vec<OsString> {
        items.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_command_s_environment_and_argv_come_back_exactly() {
        let env = [
            ("A".to_owned(), "b=c".to_owned()),
            ("PATH".to_owned(), "/x::/y".to_owned()),
        ];
        let argv = ["sh".to_owned(), "-c".to_owned(), "3".to_owned()];
        let made = args(&argv, &env);
        assert_eq!(made[0], MODE);
        let (envp, back) = parse(&os(&made[1..])).unwrap();
        assert_eq!(envp, [c"A=b=c", c"PATH=/x::/y"]);
        assert_eq!(back, [c"sh", c"-c", c"3"]);
        assert_eq!(path_dirs(&envp), [c"/x", c"/y"]);
        // An argv that looks like a count or a variable is the argv.
        let made = args(&["2".to_owned(), "X=1".to_owned()], &[]);
        let (envp, back) = parse(&os(&made[1..])).unwrap();
        assert!(envp.is_empty());
        assert_eq!(back, [c"2", c"X=1"]);
        assert_eq!(path_dirs(&envp).len(), 6);
    }

    #[test]
    fn malformed_arguments_run_nothing() {
        assert!(parse(&[]).is_none());
        assert!(parse(&os(&["x".into(), "a".into()])).is_none());
        // No argv after the environment.
        assert!(parse(&os(&["1".into(), "A=b".into()])).is_none());
    }
}
