//! Attacks on processes and what they hold: host processes, the host environment,
//! inherited descriptors, the supervisor's channels, persistence after the session,
//! setuid binaries.

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

use super::harness::{
    CLOSE_INHERITED_FDS, PYTHON, Runner, Vg, Workspace, assert_no_process_left, each_identity,
    is_root, py, python, unique,
};

/// Starts `sleep SECONDS` on the host as the test user: a process the sandboxed
/// command could signal if it shared the host's PID namespace.
fn host_victim(seconds: &str) -> std::process::Child {
    Runner::Unprivileged
        .host_command("sleep")
        .arg(seconds)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn host_processes_are_invisible_and_cannot_be_signalled() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let mut victim = host_victim(&format!("30.{}", unique()));
        let victim_pid = victim.id();
        let test_pid = std::process::id();
        let out = python(
            runner,
            &ws,
            &py(&format!(
                r#"
import signal
for name, pid in [("victim", {victim_pid}), ("test", {test_pid})]:
    report("visible " + name, os.path.exists("/proc/%d" % pid))
    report("kill0 " + name, attempt(lambda: os.kill(pid, 0)))
    report("kill " + name, attempt(lambda: os.kill(pid, signal.SIGKILL)))
    report("pidfd " + name, sc(434, pid, 0))
report("control self", attempt(lambda: os.kill(os.getpid(), 0)))
"#
            )),
        );
        let victim_alive = victim.try_wait().unwrap().is_none();
        let _ = victim.kill();
        let _ = victim.wait();
        out.assert_success();
        assert_eq!(out.field("control self"), "OK", "{out}");
        for name in ["victim", "test"] {
            assert_eq!(out.field(&format!("visible {name}")), "False", "{out}");
            assert_eq!(out.field(&format!("kill0 {name}")), "ESRCH", "{out}");
            assert_eq!(out.field(&format!("kill {name}")), "ESRCH", "{out}");
            assert_eq!(out.field(&format!("pidfd {name}")), "ESRCH", "{out}");
        }
        assert!(victim_alive, "the sandbox killed a host process\n{out}");
        // The same from a shell, as a script would do it.
        let out = super::harness::sh(
            runner,
            &ws,
            &format!("kill -0 {test_pid} && echo SIGNALLED"),
        );
        assert_ne!(out.code(), Some(0), "{out}");
        assert!(!out.stdout.contains("SIGNALLED"), "{out}");
    });
}

/// Every process in the sandbox (its environment, command line and readable memory)
/// is searched for a secret that vectraguard itself had in its environment.
#[test]
fn host_environment_variables_do_not_leak_into_the_sandbox() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = Vg::sandbox(
            runner,
            &ws,
            &[],
            &[
                PYTHON,
                "-c",
                &py(r#"
canary = ("vg-leak-" + "canary").encode()
report("own-env", any(canary in (k + "=" + v).encode() for k, v in os.environ.items()))
hits = []
for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
    for name in ["environ", "cmdline"]:
        try:
            if canary in open("/proc/%s/%s" % (pid, name), "rb").read():
                hits.append(pid + "/" + name)
        except OSError:
            pass
    if int(pid) == os.getpid():
        continue
    try:
        maps = open("/proc/%s/maps" % pid).read().splitlines()
        mem = open("/proc/%s/mem" % pid, "rb", buffering=0)
    except OSError:
        continue
    for line in maps:
        addr, perms = line.split()[:2]
        start, end = (int(x, 16) for x in addr.split("-"))
        if perms[0] != "r" or end - start > (64 << 20):
            continue
        try:
            mem.seek(start)
            if canary in mem.read(end - start):
                hits.append(pid + "/mem")
        except (OSError, OverflowError, ValueError):
            pass
report("hits", " ".join(sorted(set(hits))))
"#),
            ],
        )
        .env("AWS_SECRET_ACCESS_KEY", "vg-leak-canary")
        .env("GITHUB_TOKEN", "vg-leak-canary")
        .run();
        out.assert_success();
        assert_eq!(
            out.field("own-env"),
            "False",
            "the command's environment has the secret\n{out}"
        );
        assert_eq!(
            out.field("hits"),
            "",
            "the host environment is readable inside the sandbox\n{out}"
        );
    });
}

/// Python that lists the descriptors above 2 of this process and every descriptor of
/// any sandbox process that refers to `target`.
fn descriptor_probe(target: &str) -> String {
    py(&format!(
        r#"
own = []
for fd in sorted(os.listdir("/proc/self/fd"), key=int):
    try:
        t = os.readlink("/proc/self/fd/" + fd)
    except OSError:
        continue
    if int(fd) > 2 and not (t.startswith("/proc/") and t.endswith("/fd")):
        own.append(fd + "->" + t)
report("own", " ".join(own))
report("fd5", attempt(lambda: os.fstat(5)))
held = []
for pid in (p for p in os.listdir("/proc") if p.isdigit()):
    try:
        fds = os.listdir("/proc/%s/fd" % pid)
    except OSError:
        continue
    for fd in fds:
        try:
            if os.readlink("/proc/%s/fd/%s" % (pid, fd)) == {target:?}:
                held.append(pid + ":" + fd)
        except OSError:
            pass
report("held", " ".join(held))
"#
    ))
}

#[test]
fn caller_descriptors_are_not_inherited_by_the_command() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = Vg::sandbox(
            runner,
            &ws,
            &[],
            &[PYTHON, "-c", &descriptor_probe("/etc/hostname")],
        )
        .through_shell(&format!(
            "{CLOSE_INHERITED_FDS} exec 5</etc/hostname; exec \"$@\""
        ))
        .run();
        out.assert_success();
        assert_eq!(
            out.field("own"),
            "",
            "the command inherited descriptors\n{out}"
        );
        assert_eq!(out.field("fd5"), "EBADF", "{out}");
        let out = Vg::sandbox(runner, &ws, &[], &["ls", "/proc/self/fd"])
            .through_shell("exec 5</etc/hostname; exec \"$@\"")
            .run();
        out.assert_success();
        assert!(!out.lines().contains(&"5"), "/proc/self/fd lists 5\n{out}");
    });
}

#[test]
fn caller_descriptors_are_not_reachable_through_any_sandbox_process() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = Vg::sandbox(
            runner,
            &ws,
            &[],
            &[PYTHON, "-c", &descriptor_probe("/etc/hostname")],
        )
        .through_shell(&format!(
            "{CLOSE_INHERITED_FDS} exec 5</etc/hostname; exec \"$@\""
        ))
        .run();
        out.assert_success();
        assert_eq!(
            out.field("held"),
            "",
            "a process in the sandbox holds the caller's descriptor, reachable via /proc/PID/fd\n{out}"
        );
    });
}

/// A pipe that the caller's shell handed to vectraguard as fd 5 (like a jobserver or
/// a CI runner's control pipe) must not be writable from inside.
#[test]
fn caller_pipe_cannot_be_written_from_the_sandbox() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let script = r#"
import glob
wrote = []
for path in glob.glob("/proc/[0-9]*/fd/*"):
    try:
        if os.readlink(path).startswith("pipe:"):
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, b"\nVG-E2E-ESCAPED\n")
            os.close(fd)
            wrote.append(path)
    except OSError:
        pass
report("wrote", " ".join(wrote))
"#;
        // The pipe is made by the runner's own shell: fd 5 of vectraguard is its write
        // end; whatever arrives on it is printed with a "PIPE:" prefix.
        let out = Vg::sandbox(runner, &ws, &[], &[PYTHON, "-c", &py(script)])
            .through_shell(&format!(
                "{CLOSE_INHERITED_FDS} exec 3>&1; {{ \"$@\" 5>&1 1>&3 3>&-; }} | sed 's/^/PIPE:/'"
            ))
            .run();
        assert!(
            !out.stdout.contains("PIPE:VG-E2E-ESCAPED"),
            "the sandbox wrote into the caller's pipe\n{out}"
        );
        assert!(
            out.stdout.contains("wrote="),
            "the probe did not run\n{out}"
        );
    });
}

/// The command must not be able to report a status other than its own, e.g. by writing
/// into the supervisor's channels that the sandbox init holds.
#[test]
fn exit_status_cannot_be_forged_from_inside() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let script = r#"
import glob, struct
# A "command exited with status 0" record, written into every pipe reachable through
# /proc, then the command fails.
forged = b"S" + struct.pack("<I", 4) + struct.pack("<i", 0)
for path in glob.glob("/proc/[0-9]*/fd/*"):
    try:
        if os.readlink(path).startswith("pipe:"):
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, forged)
            os.close(fd)
    except OSError:
        pass
sys.exit(7)
"#;
        let out = Vg::sandbox(runner, &ws, &[], &[PYTHON, "-c", &py(script)])
            .through_shell(&format!("{CLOSE_INHERITED_FDS} exec \"$@\""))
            .run();
        out.assert_code(7);
    });
}

/// Red team (session 16): the one-shot init took the supervisor's stop signal
/// (`TERMINATE_ALL`, a time-out: SIGTERM to every process of the sandbox) from
/// anyone, a command's `kill -PWR 1` included, and also when it named no sender (an
/// I/O notification, `F_SETSIG`; `rt_sigqueueinfo`). Only a kill from outside does
/// now, as in a persistent sandbox.
#[test]
fn a_command_cannot_make_init_stop_its_sandbox() {
    each_identity(|runner| {
        let ws = Workspace::new();
        super::persistent::build_senderless(&ws);
        let pwr = libc::SIGPWR;
        for (how, send) in [
            ("kill", "kill -PWR 1".to_owned()),
            ("sigio", format!("./senderless sigio 1 {pwr}")),
            ("queue", format!("./senderless queue 1 {pwr}")),
        ] {
            // A process of the sandbox that the stop would end, and the shell itself.
            let out = super::harness::sh(
                runner,
                &ws,
                &format!(
                    "sleep 5 & victim=$!; {send} >/dev/null; sleep 0.5; \
                     kill -0 $victim && echo victim=alive; kill $victim"
                ),
            );
            out.assert_success();
            assert_eq!(out.field("victim"), "alive", "{runner} {how}\n{out}");
        }
    });
}

#[test]
fn detached_processes_do_not_survive_the_session() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let u = unique();
        // The markers are assembled at run time so that no command line but the
        // sleeps' own contains them.
        let script = py(&format!(
            r#"
import subprocess, time
a = "77" + "77." + "{u}"
b = "77" + "78." + "{u}"
subprocess.Popen(["setsid", "sh", "-c", "exec sleep " + a])
subprocess.Popen(["sh", "-c", "( sleep " + b + " & ) &"])
def started():
    n = 0
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                c = open("/proc/%s/cmdline" % p, "rb").read().replace(b"\0", b" ")
            except OSError:
                continue
            if c.startswith(b"sleep ") and (a.encode() in c or b.encode() in c):
                n += 1
    return n
deadline = time.time() + 10
while started() < 2 and time.time() < deadline:
    time.sleep(0.01)
report("started", started())
"#
        ));
        let out = python(runner, &ws, &script);
        let detached = format!("7777.{u}");
        let double_forked = format!("7778.{u}");
        assert_no_process_left(&detached, &out);
        assert_no_process_left(&double_forked, &out);
        out.assert_success();
        assert_eq!(
            out.field("started"),
            "2",
            "the background processes did not start\n{out}"
        );
    });
}

#[test]
fn setuid_binaries_do_not_raise_privileges() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let user = runner.sandbox_user();
        // su waits for a password on a terminal; its effective uid is then visible.
        let out = python(
            runner,
            &ws,
            &py(r#"
import pty, time, signal
mode = os.stat("/usr/bin/su").st_mode
report("su-setuid-bit", bool(mode & 0o4000))
pid, fd = pty.fork()
if pid == 0:
    os.execv("/usr/bin/su", ["su", "-c", "id -u", "root"])
euid = "gone"
deadline = time.time() + 10
while time.time() < deadline:
    try:
        status = open("/proc/%d/status" % pid).read()
    except OSError:
        break
    fields = dict(l.split(":", 1) for l in status.splitlines() if ":" in l)
    if fields["Name"].strip() == "su":
        euid = fields["Uid"].split()[1]
        break
    time.sleep(0.005)
os.kill(pid, signal.SIGKILL)
os.waitpid(pid, 0)
report("su-euid", euid)
"#),
        );
        out.assert_success();
        assert_eq!(
            out.field("su-setuid-bit"),
            "True",
            "control: su should be setuid on this host\n{out}"
        );
        assert_eq!(
            out.field("su-euid"),
            user.uid.to_string(),
            "su ran with another effective uid\n{out}"
        );

        // A setuid-root copy of `id` in the workspace (only root can make one).
        if is_root() {
            let suid = ws.join("suid-id");
            std::fs::copy("/usr/bin/id", &suid).unwrap();
            std::os::unix::fs::chown(&suid, Some(0), Some(0)).unwrap();
            std::fs::set_permissions(&suid, std::fs::Permissions::from_mode(0o4755)).unwrap();
            // Control: on the host, it does raise the test user's privileges.
            let host = Runner::Unprivileged
                .host_command(&suid)
                .arg("-u")
                .output()
                .unwrap();
            assert_eq!(
                String::from_utf8_lossy(&host.stdout).trim(),
                "0",
                "control: setuid copy inert on host"
            );
            let out = super::harness::run(runner, &ws, &[], &["./suid-id", "-u"]);
            out.assert_success();
            assert_eq!(
                out.stdout.trim(),
                user.uid.to_string(),
                "a setuid binary ran as root\n{out}"
            );
        }
    });
}

/// The CPUs a `/proc/*/status` allows (`Cpus_allowed_list`).
fn cpus_allowed(status: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|cpus| cpus.trim().to_owned())
        .unwrap_or_else(|| panic!("no Cpus_allowed_list in {status:?}"))
}

/// Init builds the sandbox kept off the supervisor's CPU (so that the two work side by
/// side), then gives itself back the caller's CPUs before the command starts: the
/// command may run on every CPU its caller may, no more and no fewer.
#[test]
fn the_command_may_run_on_every_cpu_its_caller_may() {
    let mine = cpus_allowed(&std::fs::read_to_string("/proc/self/status").unwrap());
    each_identity(|runner| {
        let ws = Workspace::new();
        let status = ["cat", "/proc/self/status"];
        let out = Vg::sandbox(runner, &ws, &[], &status).run();
        out.assert_success();
        assert_eq!(cpus_allowed(&out.stdout), mine, "{out}");
        // A caller held to one CPU stays held to it.
        let out = Vg::sandbox(runner, &ws, &[], &status)
            .through_shell("exec taskset -c 0 \"$@\"")
            .run();
        out.assert_success();
        assert_eq!(cpus_allowed(&out.stdout), "0", "{out}");
    });
}
