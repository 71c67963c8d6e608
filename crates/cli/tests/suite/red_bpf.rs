//! Red-team attacks on root's BPF exec recorder (`VECTRAGUARD_EXEC_TRACE=bpf`):
//! programs that try to run under a name that is not theirs.

use super::exec_records::{BPF, commands};
use super::harness::{PYTHON, RecordsHome, Runner, Vg, Workspace, is_root};

/// Runs `script` with Python in the sandbox, recorded by BPF; the run's stdout and
/// `commands.log`.
fn run_python(script: &str) -> (String, String) {
    let ws = Workspace::new();
    ws.write("attack.py", script);
    let home = RecordsHome::new(Runner::Root);
    let out = Vg::sandbox(Runner::Root, &ws, &[], &[PYTHON, "attack.py"])
        .records_home(&home)
        .env(BPF.0, BPF.1)
        .run();
    out.assert_success();
    let log = commands(&home.only_session());
    (out.stdout, log)
}

/// The `exec` line whose argv ends with `tail`, if any.
fn exec_line<'a>(log: &'a str, tail: &str) -> Option<&'a str> {
    log.lines()
        .find(|l| l.contains(" exec ") && l.ends_with(tail))
}

/// ATTACK (records): a fileless program (a memfd) run through an ordinary-looking
/// symlink to its descriptor (`/tmp/innocent -> /proc/PID/fd/N`). The kernel
/// follows the link to the memfd, while the path given to `execve` names
/// `/tmp/innocent`: recorded so, the line would name a path that never held the
/// program (and is a dangling link once the process is gone). Seccomp notification
/// refuses such an exec; the BPF recorder must name the file that ran.
#[test]
fn a_memfd_run_through_a_symlink_is_named_as_the_memfd() {
    if !is_root() {
        return;
    }
    let script = r##"
import os
fd = os.memfd_create("hidden-payload", 0)
os.write(fd, open("/bin/echo", "rb").read())
os.symlink(f"/proc/{os.getpid()}/fd/{fd}", "/tmp/innocent")
pid = os.fork()
if pid == 0:
    os.execv("/tmp/innocent", ["innocent", "red-memfd-symlink"])
os.waitpid(pid, 0)
"##;
    let (stdout, log) = run_python(script);
    assert!(
        stdout.contains("red-memfd-symlink"),
        "the payload did not run\n{log}"
    );
    let line = exec_line(&log, "-- innocent red-memfd-symlink")
        .unwrap_or_else(|| panic!("the payload ran unrecorded:\n{log}"));
    assert!(
        line.contains("memfd:hidden-payload"),
        "the memfd that ran is recorded under another name: {line}"
    );
}

/// ATTACK (records): a `#!` script in a memfd, run by `fexecve` (`execveat` of the
/// descriptor, path `/dev/fd/N`). At the exec's trace point the kernel's `file` is
/// the interpreter's, so naming the program by it records `/usr/bin/dash` for a
/// script nobody can read afterwards. Seccomp notification names the memfd.
#[test]
fn a_memfd_script_run_by_fexecve_is_named_as_the_memfd() {
    if !is_root() {
        return;
    }
    let script = r##"
import os
fd = os.memfd_create("hidden-script", 0)
os.write(fd, b"#!/bin/sh\n/bin/echo red-memfd-script-ran\n")
pid = os.fork()
if pid == 0:
    os.execve(fd, ["s", "red-memfd-script"], {})
os.waitpid(pid, 0)
"##;
    let (stdout, log) = run_python(script);
    assert!(
        stdout.contains("red-memfd-script-ran"),
        "the script did not run\n{log}"
    );
    let line = exec_line(&log, " red-memfd-script")
        .unwrap_or_else(|| panic!("the script ran unrecorded:\n{log}"));
    assert!(
        line.contains("memfd:hidden-script"),
        "the memfd script is recorded as its interpreter: {line}"
    );
}

/// ATTACK (records): a child forked by a thread other than the main one. Its
/// parent (`real_parent`) is that thread, whose id is no process: recorded as the
/// `ppid`, the child hangs off a pid that has no `exec` line, and the record's
/// process tree no longer says which program started it. The parent is the
/// process, as `/proc/PID/status` and seccomp notification say.
#[test]
fn a_child_of_a_thread_has_the_process_as_its_parent() {
    if !is_root() {
        return;
    }
    let script = r#"
import os, threading
print(f"python={os.getpid()}", flush=True)
def run():
    print(f"thread={threading.get_native_id()}", flush=True)
    pid = os.fork()
    if pid == 0:
        os.execv("/bin/echo", ["/bin/echo", "red-thread-child"])
    os.waitpid(pid, 0)
t = threading.Thread(target=run); t.start(); t.join()
"#;
    let (stdout, log) = run_python(script);
    let field = |key: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key}= in {stdout}"))
            .to_owned()
    };
    let (python, thread) = (field("python"), field("thread"));
    assert_ne!(python, thread, "the thread was the main one");
    let line = exec_line(&log, "-- /bin/echo red-thread-child")
        .unwrap_or_else(|| panic!("the child ran unrecorded:\n{log}"));
    assert!(
        line.contains(&format!(" ppid={python} ")),
        "the child's parent is not the process {python} (thread {thread}): {line}"
    );
}

/// ATTACK (records): a fileless program run as a `#!` script's interpreter: the
/// script says `#!/proc/self/fd/7` (or names a symlink to that), and descriptor 7
/// is a memfd holding the payload. The kernel starts the memfd; a line naming only
/// the script (whose `#!` line names a link that dangles once the process is gone)
/// never says what ran. The BPF recorder sees the interpreter's file at the exec
/// and must name it when no path names it.
#[test]
fn a_memfd_interpreter_of_a_script_is_named() {
    if !is_root() {
        return;
    }
    let script = r##"
import os
fd = os.memfd_create("payload-interp", 0)
os.write(fd, open("/bin/echo", "rb").read())
os.dup2(fd, 7)
open("/tmp/direct", "w").write("#!/proc/self/fd/7\n")
os.symlink("/proc/self/fd/7", "/tmp/interp")
open("/tmp/linked", "w").write("#!/tmp/interp\n")
for s in ("/tmp/direct", "/tmp/linked"):
    os.chmod(s, 0o755)
    pid = os.fork()
    if pid == 0:
        os.execv(s, [s, "red-interp-payload"])
    os.waitpid(pid, 0)
"##;
    let (stdout, log) = run_python(script);
    for s in ["/tmp/direct", "/tmp/linked"] {
        let marker = format!("{s} red-interp-payload");
        assert!(
            stdout.contains(&marker),
            "the payload did not run for {s}\n{log}"
        );
        let line = exec_line(&log, &format!("-- {marker}"))
            .unwrap_or_else(|| panic!("the payload ran unrecorded:\n{log}"));
        assert!(
            line.contains("memfd:payload-interp"),
            "the memfd that ran as {s}'s interpreter is not named: {line}"
        );
    }
}
