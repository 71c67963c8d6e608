//! The terminal of a command run on gVisor with `-t` (`sandbox run -t`, `sandbox
//! shell`): a terminal of gVisor's own devpts, made inside the sandbox by this
//! program as the sandbox's first process, started in [`MODE`].
//!
//! Why: runsc's `--console-socket` terminal is a host pseudo-terminal that the
//! sentry imports as a host file. Programs inside do not take it for a terminal
//! of theirs: it has no name (`ttyname` finds no `/dev/pts/N` for it, so `tty`
//! says "not a tty"), it is nobody's controlling terminal (`ps` shows `?`, no job
//! control), and `/proc/self/fd` cannot name it. So the first process opens a
//! pseudo-terminal of gVisor's devpts, starts the command on its replica as the
//! leader of a new session with it as the controlling terminal, and relays bytes
//! between runsc's terminal (put in raw mode: one line discipline, the inner one)
//! and the inner master, the window size included. It passes the signals it is
//! sent to the command as init does, and ends with the command's status.
//!
//! Who is who: gVisor (runsc 20221219) does not shield a pid namespace's init from
//! its members' signals, and a process can open the files of another of the same
//! user through `/proc/PID/fd`. Run as the command's user, the relay could be
//! stopped by the command (`kill -STOP 1`: the session then hung until its
//! time-out) and runsc's host terminal opened through `/proc/1/fd/0`. So runsc
//! starts the relay as uid 0 of gVisor's kernel with only the capabilities to
//! hand identities out ([`RELAY_CAPABILITIES`]); the command's child takes the
//! command's identity with nothing left, and the relay a user of its own (the
//! persistent sandboxes' first process's, `pause_identity`), keeping `CAP_KILL`
//! alone, to send the terminal's signals to the command. (The list of its
//! descriptors, its environment and mappings, gVisor still shows in `/proc/1`.)

use std::ffi::{CString, OsString};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::time::Duration;

use crate::init::{Exec, exec_command};
use crate::spec::FORWARDED_SIGNALS;
use crate::sys;

/// The first argument that starts this program as the relay; then the command's
/// `UID:GID`, the relay's own `UID:GID`, and the command.
pub const MODE: &str = "__vectraguard-gvisor-terminal";

/// The capabilities the relay is started with (OCI names), each dropped before the
/// command runs: to give the command its identity and itself its own (`SETUID`,
/// `SETGID`), to empty the bounding sets (`SETPCAP`), to give the command its
/// terminal (`CHOWN`) and, kept by the relay alone, to signal the command (`KILL`).
pub const RELAY_CAPABILITIES: [&str; 5] = [
    "CAP_SETUID",
    "CAP_SETGID",
    "CAP_SETPCAP",
    "CAP_CHOWN",
    "CAP_KILL",
];

/// The relay's arguments before the command: [`MODE`], the command's identity and
/// the relay's own.
pub fn relay_args(command: (u32, u32), relay: (u32, u32)) -> [String; 3] {
    [
        MODE.to_owned(),
        format!("{}:{}", command.0, command.1),
        format!("{}:{}", relay.0, relay.1),
    ]
}

/// `UID:GID` (pure).
fn parse_identity(s: &std::ffi::OsStr) -> Option<(u32, u32)> {
    let (uid, gid) = s.to_str()?.split_once(':')?;
    Some((uid.parse().ok()?, gid.parse().ok()?))
}

/// The command's side, in the child before its exec: every capability gone for good
/// (bounding set empty, so no exec gives any back, uid 0 included), then its
/// identity.
fn become_command((uid, gid): (u32, u32)) -> std::io::Result<()> {
    drop_bounding_set()?;
    sys::setgroups(&[])?;
    sys::setresgid(gid)?;
    sys::setresuid(uid)?;
    sys::capset_empty()
}

/// The relay's side: its own identity, not the command's, keeping only `CAP_KILL`;
/// not dumpable, as a process no other should read. (gVisor, runsc 20221219, still
/// shows its descriptors' list, environment and mappings in `/proc/1` to the
/// command; its memory it refuses, for the user, not for this.)
fn become_relay((uid, gid): (u32, u32)) -> Result<(), (&'static str, std::io::Error)> {
    let step = |name: &'static str| move |e: std::io::Error| (name, e);
    drop_bounding_set().map_err(step("empty the bounding set"))?;
    // The permitted set survives the uid change (the effective one is rebuilt below).
    sys::prctl(libc::PR_SET_KEEPCAPS, 1, 0).map_err(step("keep capabilities"))?;
    sys::setgroups(&[]).map_err(step("drop the groups"))?;
    sys::setresgid(gid).map_err(step("set the group"))?;
    sys::setresuid(uid).map_err(step("set the user"))?;
    sys::capset_only(1 << CAP_KILL).map_err(step("keep CAP_KILL alone"))?;
    sys::prctl(libc::PR_SET_KEEPCAPS, 0, 0).map_err(step("stop keeping capabilities"))?;
    sys::prctl(libc::PR_SET_DUMPABLE, 0, 0)
        .map(drop)
        .map_err(step("make itself not dumpable"))
}

/// Whether the relay said go (one byte) on `go`; its end without it is a no.
fn went(go: std::io::PipeReader) -> bool {
    let mut byte = [0u8; 1];
    loop {
        match (&go).read(&mut byte) {
            Ok(1) => return true,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            _ => return false,
        }
    }
}

/// `linux/capability.h`.
const CAP_KILL: u32 = 5;

fn drop_bounding_set() -> std::io::Result<()> {
    // gVisor's kernel knows fewer capabilities than the host's and may have no
    // `cap_last_cap`: past its last one, PR_CAPBSET_DROP says EINVAL.
    for cap in 0..64 {
        match sys::prctl(libc::PR_CAPBSET_DROP, cap, 0) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && cap > 0 => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// How often the relay looks for a new window size on runsc's terminal (the
/// sentry delivers no SIGWINCH for a host terminal).
const RESIZE_POLL: Duration = Duration::from_millis(200);

/// How long output may still come once the command ended (a process it left
/// holds the terminal open).
const DRAIN: Duration = Duration::from_millis(300);

fn fail(step: &str, e: &dyn std::fmt::Display) -> ! {
    let _ = writeln!(
        std::io::stderr(),
        "vectraguard: the terminal inside gVisor: cannot {step}: {e}"
    );
    sys::exit_now(125)
}

fn cstrings(items: impl Iterator<Item = OsString>) -> Vec<CString> {
    items
        .map(|s| CString::new(s.into_vec()).unwrap_or_else(|e| fail("read the command", &e)))
        .collect()
}

/// Runs the command `args` (after [`MODE`]) on a terminal of gVisor's devpts;
/// never returns.
pub fn main(args: &[OsString]) -> ! {
    let (Some(command_id), Some(relay_id)) = (
        args.get(1).and_then(|a| parse_identity(a)),
        args.get(2).and_then(|a| parse_identity(a)),
    ) else {
        fail("read the identities", &"expected UID:GID UID:GID")
    };
    let argv = cstrings(args.iter().skip(3).cloned());
    if argv.is_empty() {
        fail("read the command", &"none given");
    }
    let envp = cstrings(std::env::vars_os().map(|(k, v)| {
        let mut kv = k.into_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        OsString::from_vec(kv)
    }));
    let path = std::env::var_os("PATH")
        .unwrap_or_else(|| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    let path_dirs = cstrings(
        path.as_bytes()
            .split(|b| *b == b':')
            .filter(|d| !d.is_empty())
            .map(|d| OsString::from_vec(d.to_vec())),
    );
    // runsc's terminal, our stdio.
    let stdin = std::io::stdin();
    let outer = stdin.as_fd();
    let saved = sys::tcgetattr(outer).unwrap_or_else(|e| fail("read runsc's terminal", &e));
    let (master, replica) = sys::open_pty().unwrap_or_else(|e| fail("open a terminal", &e));
    // The command's terminal is the command's, as a terminal a user logs in on.
    sys::fchown(replica.as_fd(), command_id.0, command_id.1)
        .unwrap_or_else(|e| fail("give the terminal to the command's user", &e));
    if let Ok(size) = sys::get_winsize(outer) {
        let _ = sys::set_winsize(master.as_fd(), &size);
    }
    // Signals are taken by `sigwait` below; blocked before any thread or child.
    let mut waited: Vec<libc::c_int> = FORWARDED_SIGNALS.to_vec();
    waited.push(libc::SIGCHLD);
    let set = sys::sigset(&waited);
    // Also SIGTTOU: the child sets the terminal's foreground group from outside it.
    let mut blocked = waited.clone();
    blocked.push(libc::SIGTTOU);
    sys::sigmask_block(&sys::sigset(&blocked)).unwrap_or_else(|e| fail("block signals", &e));
    // The inner terminal is this session's (runsc made us its leader): the relay
    // then reads its foreground group, which gVisor tells only a member of the
    // session whose terminal it is. A hang-up runsc's terminal sends on the way
    // is taken with the rest.
    sys::take_controlling_terminal(outer, replica.as_fd())
        .unwrap_or_else(|e| fail("take the terminal", &e));
    let (err_r, err_w) = std::io::pipe().unwrap_or_else(|e| fail("make a pipe", &e));
    // The relay's go once it is its own user: until then it is uid 0 as the command
    // may be, which could then signal or trace it.
    let (go_r, go_w) = std::io::pipe().unwrap_or_else(|e| fail("make a pipe", &e));
    // SAFETY: this process has one thread (none was started yet), so the child may
    // do anything before it execs.
    #[allow(unsafe_code)]
    let forked = unsafe { sys::fork() };
    let command = match forked {
        Ok(Some(pid)) => pid,
        Ok(None) => {
            drop(err_r);
            drop(master);
            drop(go_w);
            if become_command(command_id).is_err() || !went(go_r) {
                sys::exit_now(125);
            }
            // A process group of its own, in the terminal's foreground.
            if sys::new_process_group().is_err()
                || sys::set_foreground_group(replica.as_fd(), std::process::id().cast_signed())
                    .is_err()
            {
                sys::exit_now(125);
            }
            let fd = std::os::fd::AsRawFd::as_raw_fd(&replica);
            let exec = Exec {
                argv: &argv,
                envp: &envp,
                path_dirs: &path_dirs,
                cwd: None,
                keep_session: true,
            };
            exec_command(&exec, err_w, [fd, fd, fd], true)
        }
        Err(e) => fail("fork the command", &e),
    };
    drop(err_w);
    // Before any thread starts (glibc would have to change every thread's ids).
    drop(go_r);
    if let Err((step, e)) = become_relay(relay_id) {
        fail(&format!("take the relay's own identity: {step}"), &e);
    }
    // A relay that failed ends instead: the command then never runs.
    let _ = (&go_w).write_all(b"g");
    drop(go_w);
    // One line discipline, the inner terminal's: runsc's passes bytes through.
    let _ = sys::tcsetattr(outer, &sys::raw_termios(&saved));
    crate::init::report_exec_failure(err_r, &argv[0]);
    let output = relay(&master, &replica);
    let status = loop {
        let sig = match sys::sigwait(&set) {
            Ok((sig, _)) => sig,
            Err(_) => sys::exit_now(125),
        };
        if sig != libc::SIGCHLD {
            forward(&replica, command, sig);
            continue;
        }
        if let Some(status) = reap(command) {
            break status;
        }
    };
    // What the command wrote last, unless something it left holds the terminal.
    let end = std::time::Instant::now() + DRAIN;
    while output.as_ref().is_some_and(|t| !t.is_finished()) && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = sys::tcsetattr(outer, &saved);
    sys::exit_now(crate::engine_init::exit_code(status))
}

/// Passes a signal on: a terminal's own (interrupt, quit, suspend: runsc sends
/// them when its host terminal saw the key) to the inner terminal's foreground
/// process group, where the key would have sent it; the others as init does.
fn forward(replica: &OwnedFd, command: libc::pid_t, sig: libc::c_int) {
    if [libc::SIGINT, libc::SIGQUIT, libc::SIGTSTP].contains(&sig)
        && let Ok(group) = sys::foreground_group(replica.as_fd())
        && group > 0
    {
        let _ = sys::kill(-group, sig);
        return;
    }
    crate::init::forward_signal(command, sig);
}

/// Reaps what ended; the command's wait status once it did.
fn reap(command: libc::pid_t) -> Option<i32> {
    let mut ended = None;
    while let Ok(Some((pid, status))) = sys::waitpid(-1, libc::WNOHANG) {
        if pid == command {
            ended = Some(status);
        }
    }
    ended
}

/// The signal a key sends to the terminal's foreground process group, under the
/// terminal's settings `t` (pure): its interrupt, quit and suspend characters with
/// `ISIG` on.
fn key_signal(t: &libc::termios, key: u8) -> Option<libc::c_int> {
    if t.c_lflag & libc::ISIG == 0 {
        return None;
    }
    [
        (libc::VINTR, libc::SIGINT),
        (libc::VQUIT, libc::SIGQUIT),
        (libc::VSUSP, libc::SIGTSTP),
    ]
    .into_iter()
    .find(|&(at, _)| t.c_cc[at] != 0 && t.c_cc[at] == key)
    .map(|(_, sig)| sig)
}

/// Writes keys to the inner terminal's master. gVisor's terminal (runsc 20221219)
/// turns no key into a signal (its line discipline has no `ISIG`): the interrupt,
/// quit and suspend keys are turned into their signals here, to the foreground
/// process group, as a terminal does, and not passed on.
fn write_keys(master: &OwnedFd, replica: &OwnedFd, keys: &[u8]) -> std::io::Result<()> {
    let mut to = File::from(master.try_clone()?);
    let mut start = 0;
    for (i, &key) in keys.iter().enumerate() {
        let signal = sys::tcgetattr(master.as_fd())
            .ok()
            .and_then(|t| key_signal(&t, key));
        if let Some(signal) = signal {
            to.write_all(&keys[start..i])?;
            start = i + 1;
            if let Ok(group) = sys::foreground_group(replica.as_fd())
                && group > 0
            {
                let _ = sys::kill(-group, signal);
            }
        }
    }
    to.write_all(&keys[start..])
}

/// Starts the threads that copy keys in, output out and the window size across;
/// returns the output's.
fn relay(master: &OwnedFd, replica: &OwnedFd) -> Option<std::thread::JoinHandle<()>> {
    let (Ok(keys_to), Ok(out_from), Ok(size_to), Ok(group_of)) = (
        master.try_clone(),
        master.try_clone(),
        master.try_clone(),
        replica.try_clone(),
    ) else {
        fail("share the terminal", &"cannot duplicate its descriptor")
    };
    // runsc's terminal: each `File` below takes a duplicate of its own.
    let (stdin, stdout) = (std::io::stdin(), std::io::stdout());
    let (Ok(keys_from), Ok(out_to), Ok(size_from)) = (
        stdin.as_fd().try_clone_to_owned(),
        stdout.as_fd().try_clone_to_owned(),
        stdin.as_fd().try_clone_to_owned(),
    ) else {
        fail("share runsc's terminal", &"cannot duplicate its descriptor")
    };
    let _ = std::thread::Builder::new().spawn(move || {
        let mut from = File::from(keys_from);
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = from.read(&mut buf) {
            if write_keys(&keys_to, &group_of, &buf[..n]).is_err() {
                break;
            }
        }
    });
    let _ = std::thread::Builder::new().spawn(move || {
        let mut last = None;
        loop {
            if let Ok(size) = sys::get_winsize(size_from.as_fd()) {
                let now = (size.ws_row, size.ws_col);
                if last != Some(now) {
                    let _ = sys::set_winsize(size_to.as_fd(), &size);
                    last = Some(now);
                }
            }
            std::thread::sleep(RESIZE_POLL);
        }
    });
    std::thread::Builder::new()
        .spawn(move || {
            let mut from = File::from(out_from);
            let mut to = File::from(out_to);
            let mut buf = [0u8; 16 * 1024];
            // Ends with EIO once no process holds the replica open.
            while let Ok(n @ 1..) = from.read(&mut buf) {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        })
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_read_back_as_written() {
        let [mode, command, relay] = relay_args((0, 0), (65533, 65533));
        assert_eq!(mode, MODE);
        assert_eq!(parse_identity(command.as_ref()), Some((0, 0)));
        assert_eq!(parse_identity(relay.as_ref()), Some((65533, 65533)));
        for bad in ["", "1", "1:", ":1", "a:1", "1:2:3", "-1:0", "4294967296:0"] {
            assert_eq!(parse_identity(bad.as_ref()), None, "{bad}");
        }
    }

    #[test]
    fn the_interrupt_quit_and_suspend_keys_signal_only_with_isig() {
        let mut t: libc::termios = blank_termios();
        t.c_cc[libc::VINTR] = 3;
        t.c_cc[libc::VQUIT] = 0x1c;
        t.c_cc[libc::VSUSP] = 0x1a;
        assert_eq!(key_signal(&t, 3), None);
        t.c_lflag |= libc::ISIG;
        assert_eq!(key_signal(&t, 3), Some(libc::SIGINT));
        assert_eq!(key_signal(&t, 0x1c), Some(libc::SIGQUIT));
        assert_eq!(key_signal(&t, 0x1a), Some(libc::SIGTSTP));
        assert_eq!(key_signal(&t, b'a'), None);
        // A disabled character (0) is no key.
        t.c_cc[libc::VINTR] = 0;
        assert_eq!(key_signal(&t, 0), None);
    }

    fn blank_termios() -> libc::termios {
        libc::termios {
            c_iflag: 0,
            c_oflag: 0,
            c_cflag: 0,
            c_lflag: 0,
            c_line: 0,
            c_cc: [0; libc::NCCS],
            c_ispeed: 0,
            c_ospeed: 0,
        }
    }
}
