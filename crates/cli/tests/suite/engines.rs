//! `--backend docker|podman`: the same request run as a container through the
//! engine's client, on the image `scripts/test-engines` imports into both engines
//! (run by `scripts/test`). The engines run rootful here: the runs themselves are
//! tested as root; as the unprivileged test user, Docker's refusal (no access to its
//! daemon) must name the fix.
//!
//! Execs are recorded by our own init as the container's PID 1
//! (`vg_sandbox::engine_init`); the attack test below runs a static program (built
//! here with gcc, bound in with the workspace) that tries to run programs unseen.
//!
//! The mediated network (`--network allow`) is tested on each engine as root and on
//! the test user's rootless Podman: an allowed name through the mediator, recorded
//! as natively; escapes that must fail (another static program); live rules.

use super::harness::{
    RecordsHome, Runner, Vg, Workspace, each_identity, session_metadata, status_field,
};

const IMAGE: &str = "vectraguard-test/busybox:1";

fn engine_run(
    runner: Runner,
    ws: &Workspace,
    home: &RecordsHome,
    engine: &str,
    options: &[&str],
    cmd: &[&str],
) -> super::harness::Output {
    let mut vg = Vg::new(runner, ws.path());
    vg.args(["sandbox", "run", "--backend", engine, "--image", IMAGE])
        .args(options)
        .arg("--")
        .args(cmd)
        .records_home(home);
    vg.run()
}

/// Every container the engine knows, by name, to check that none is left.
pub(super) fn containers(engine: &str) -> String {
    let out = std::process::Command::new(engine)
        .args(["ps", "-a", "--format", "{{.Names}}"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn posture_view_network_records_and_exit_codes_on_each_engine() {
    let runner = Runner::Root;
    for engine in ["docker", "podman"] {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let out = engine_run(
            runner,
            &ws,
            &home,
            engine,
            &[],
            &[
                "sh",
                "-c",
                "cat /proc/self/status; echo uid=$(id -u); \
                 echo x > /tmp/x && echo tmp=ok; (echo y > /etc/y) 2>/dev/null || echo root=read-only; \
                 echo ifaces=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ,); \
                 echo w > out.txt && echo ws=ok; printf 'err\\377' >&2; exit 3",
            ],
        );
        out.assert_code(3);
        for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
            assert_eq!(
                status_field(&out.stdout, cap),
                Some("0000000000000000"),
                "{engine} {cap}\n{out}"
            );
        }
        assert_eq!(
            status_field(&out.stdout, "NoNewPrivs"),
            Some("1"),
            "{engine}\n{out}"
        );
        assert_eq!(
            status_field(&out.stdout, "Seccomp"),
            Some("2"),
            "{engine}\n{out}"
        );
        assert_eq!(
            out.field("uid"),
            runner.sandbox_user().uid.to_string(),
            "{engine}\n{out}"
        );
        assert_eq!(out.field("tmp"), "ok", "{engine}\n{out}");
        assert_eq!(out.field("root"), "read-only", "{engine}\n{out}");
        assert_eq!(out.field("ifaces"), "lo,", "{engine}\n{out}");
        assert_eq!(out.field("ws"), "ok", "{engine}\n{out}");
        assert_eq!(std::fs::read_to_string(ws.join("out.txt")).unwrap(), "w\n");
        let dir = home.only_session();
        assert_eq!(
            std::fs::read(dir.join("stderr.log")).unwrap(),
            b"err\xff",
            "{engine}"
        );
        let meta = session_metadata(&dir);
        assert_eq!(meta["layers"]["backend"], engine, "{meta}");
        assert_eq!(meta["layers"]["exec_records"], "seccomp-notify", "{meta}");
        assert_eq!(meta["layers"]["init"], "vectraguard", "{meta}");
        assert_eq!(meta["exit_code"], 3, "{meta}");
        let verify = Vg::new(runner, ws.path())
            .args(["logs", "verify", "last"])
            .records_home(&home)
            .run();
        verify.assert_success().assert_stdout_contains("intact");
        // This session's container, by the name its record gives (other tests'
        // containers may be running meanwhile).
        let name = meta["layers"]["container"].as_str().unwrap_or_default();
        assert!(name.starts_with("vectraguard-"), "{meta}");
        let left = containers(engine);
        assert!(
            !left.lines().any(|l| l == name),
            "{engine} container left: {name}"
        );
    }
}

#[test]
fn the_seccomp_rules_memory_limit_and_time_out_hold_in_the_container() {
    let runner = Runner::Root;
    for engine in ["docker", "podman"] {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        // Our rules refuse unshare (and every namespace flag) though the engine's
        // default profile would let an unprivileged user namespace be made.
        let out = engine_run(runner, &ws, &home, engine, &[], &["unshare", "-U", "true"]);
        assert_ne!(out.code(), Some(0), "{engine}: unshare ran\n{out}");
        // A memory hog: the engine's cgroup kills it.
        let hog = engine_run(
            runner,
            &ws,
            &home,
            engine,
            &["--memory", "64m"],
            &[
                "sh",
                "-c",
                "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived",
            ],
        );
        assert!(
            !hog.stdout.contains("survived"),
            "{engine}: the cap did not hold\n{hog}"
        );
        assert_ne!(hog.code(), Some(0), "{engine}\n{hog}");
        let started = std::time::Instant::now();
        let slow = engine_run(
            runner,
            &ws,
            &home,
            engine,
            &["--timeout", "2s"],
            &["sleep", "60"],
        );
        slow.assert_code(124);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{engine}\n{slow}"
        );
        // This test's sessions' containers, by the names their records give: other
        // tests' containers (persistent ones, for one) may be running meanwhile.
        let left = containers(engine);
        for dir in home.sessions() {
            let meta = session_metadata(&dir);
            let name = meta["layers"]["container"].as_str().unwrap_or_default();
            assert!(name.starts_with("vectraguard-"), "{meta}");
            assert!(
                !left.lines().any(|l| l == name),
                "{engine} container left: {name}"
            );
        }
    }
}

#[test]
fn refusals_name_the_backend_and_the_fix() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let no_image = Vg::new(runner, ws.path())
            .args(["sandbox", "run", "--backend", "docker", "--", "true"])
            .records_home(&home)
            .run();
        no_image.assert_code(125);
        no_image.assert_stderr_contains("--image NAME");
        for (options, says) in [
            // The container's network is attached by the recording init.
            (
                &["--network", "allow", "--no-record"][..],
                "the mediated network (--network allow, rules) without a record",
            ),
            // The engines mount the container's devpts with no cap. (`-t` works:
            // the terminal is the recording init's, see the terminal tests below.)
            (&["--ptys", "8"][..], "--ptys needs a capped devpts"),
        ] {
            let out = engine_run(runner, &ws, &home, "podman", options, &["true"]);
            out.assert_code(125);
            out.assert_stderr_contains("--backend podman");
            out.assert_stderr_contains(says);
        }
        if runner == Runner::Unprivileged {
            // Docker's daemon is root's here, and the test user is not in its group.
            let denied = engine_run(runner, &ws, &home, "docker", &[], &["true"]);
            denied.assert_code(125);
            denied.assert_stderr_contains("docker");
        }
        let missing = Vg::new(runner, ws.path())
            .args([
                "sandbox",
                "run",
                "--backend",
                "podman",
                "--image",
                "vectraguard-test/absent:1",
                "--",
                "true",
            ])
            .records_home(&home)
            .run();
        missing.assert_code(125);
        missing.assert_stderr_contains("vectraguard-test/absent:1");
    });
}

fn commands_log(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("commands.log")).unwrap_or_default()
}

/// The value of `key=` in a `commands.log` line.
fn log_field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split(' ')
        .find_map(|w| w.strip_prefix(key).and_then(|w| w.strip_prefix('=')))
        .unwrap_or_default()
}

/// The `exec` line whose command ends with `argv`.
fn exec_line<'a>(log: &'a str, argv: &str) -> Option<&'a str> {
    log.lines()
        .find(|l| l.contains(" exec ") && l.ends_with(&format!(" -- {argv}")))
}

#[test]
fn every_exec_and_exit_in_the_container_is_in_commands_log_on_each_engine() {
    let runner = Runner::Root;
    for engine in ["docker", "podman"] {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let out = engine_run(
            runner,
            &ws,
            &home,
            engine,
            &[],
            &["sh", "-c", "echo one | cat; /bin/true; exit 4"],
        );
        out.assert_code(4);
        assert_eq!(out.stdout, "one\n", "{engine}\n{out}");
        let dir = home.only_session();
        let log = commands_log(&dir);
        let sh = exec_line(&log, "sh -c 'echo one | cat; /bin/true; exit 4'")
            .unwrap_or_else(|| panic!("{engine}: no exec of the command\n{log}"));
        // The command is the child of our init, PID 1 of the container.
        assert_eq!(log_field(sh, "ppid"), "1", "{engine}\n{log}");
        assert_eq!(log_field(sh, "exe"), "/bin/sh", "{engine}\n{log}");
        assert_eq!(
            log_field(sh, "cwd"),
            ws.path().to_str().unwrap(),
            "{engine}"
        );
        let sh_pid = log_field(sh, "pid");
        for child in ["cat", "/bin/true"] {
            let line = exec_line(&log, child)
                .unwrap_or_else(|| panic!("{engine}: no exec of {child}\n{log}"));
            assert_eq!(log_field(line, "ppid"), sh_pid, "{engine} {child}\n{log}");
            let pid = log_field(line, "pid");
            assert!(
                log.contains(&format!(" exit pid={pid} status=0")),
                "{engine}: no exit of {child}\n{log}"
            );
        }
        assert!(
            log.contains(&format!(" exit pid={sh_pid} status=4")),
            "{engine}: no exit of the command\n{log}"
        );
        // Nothing of our init's own start is recorded as the command's.
        assert!(!log.contains("vectraguard"), "{engine}\n{log}");
        let meta = session_metadata(&dir);
        assert_eq!(meta["layers"]["exec_records"], "seccomp-notify", "{meta}");
        assert_eq!(
            meta["layers"]["seccomp"], "engine-profile+filter+notify",
            "{meta}"
        );
        Vg::new(runner, ws.path())
            .args(["logs", "verify", "last"])
            .records_home(&home)
            .run()
            .assert_success()
            .assert_stdout_contains("intact");
        // Unrecorded, the engine's own init runs the command as before.
        let plain = engine_run(
            runner,
            &ws,
            &home,
            engine,
            &["--no-record"],
            &["sh", "-c", "exit 5"],
        );
        plain.assert_code(5);
        // A missing program: the shell's status and a line naming it.
        let missing = engine_run(runner, &ws, &home, engine, &[], &["no-such-program"]);
        missing.assert_code(127);
        missing.assert_stderr_contains("cannot run no-such-program");
    }
}

/// Tries every way around the exec records it can think of from inside the
/// container, printing `NAME=RESULT errno=E` for the attempts and running `echo
/// marker-WAY` for each way to exec: each marker printed must be in commands.log.
const ESCAPE: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static char *const env[] = {"PATH=/bin", NULL};
static void report(const char *what, long r) {
  int e = errno;
  printf("%s=%ld errno=%d\n", what, r, r < 0 ? e : 0);
  fflush(stdout);
}
static void in_child(void (*exec_it)(void)) {
  pid_t pid = fork();
  if (pid == 0) { exec_it(); _exit(0); }
  int st; waitpid(pid, &st, 0);
}
static void by_execveat(void) {
  int fd = open("/bin/busybox", O_PATH);
  char *argv[] = {"echo", "marker-execveat", NULL};
  syscall(SYS_execveat, fd, "", argv, env, AT_EMPTY_PATH);
}
static void by_proc_fd(void) {
  int fd = open("/bin/busybox", O_RDONLY);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  char *argv[] = {"echo", "marker-procfd", NULL};
  execve(path, argv, env);
}
static void *thread_exec(void *arg) {
  char *argv[] = {"echo", "marker-thread", NULL};
  execve("/bin/busybox", argv, env);
  return arg;
}
static void by_thread(void) {
  pthread_t t;
  pthread_create(&t, NULL, thread_exec, NULL);
  pthread_join(t, NULL);
}
static void by_own_listener(void) {
  struct sock_filter f[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF)};
  struct sock_fprog prog = {1, f};
  report("own_listener", syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                                 SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog));
  char *argv[] = {"echo", "marker-listener", NULL};
  execve("/bin/busybox", argv, env);
}
int main(void) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  strcpy(a.sun_path, "/.vectraguard/run/init.sock");
  report("connect", connect(socket(AF_UNIX, SOCK_STREAM, 0), (struct sockaddr *)&a, sizeof a));
  report("bind", bind(socket(AF_UNIX, SOCK_STREAM, 0), (struct sockaddr *)&a, sizeof a));
  report("create", open("/.vectraguard/run/x", O_CREAT | O_WRONLY, 0600));
  report("init_mem", open("/proc/1/mem", O_RDWR));
  report("init_fd", open("/proc/1/fd/0", O_RDONLY));
  report("kill_init", kill(1, SIGKILL));
  in_child(by_execveat);
  in_child(by_proc_fd);
  in_child(by_thread);
  in_child(by_own_listener);
  char *argv[] = {"echo", "marker-last", NULL};
  execve("/bin/busybox", argv, env);
  return 1;
}
"#;

#[test]
fn a_program_in_the_container_cannot_exec_unrecorded() {
    let runner = Runner::Root;
    let ws = Workspace::new();
    super::harness::build_static_c(ESCAPE, &ws.join("escape"), &["-pthread"]);
    for engine in ["docker", "podman"] {
        let home = RecordsHome::new(runner);
        let out = engine_run(runner, &ws, &home, engine, &[], &["./escape"]);
        out.assert_success();
        let log = commands_log(&home.only_session());
        // The hand-over socket is gone and its folder cannot be written.
        for (what, errno) in [
            ("connect", libc::ENOENT),
            ("bind", libc::EROFS),
            ("create", libc::EROFS),
        ] {
            assert_eq!(
                out.field(what),
                format!("-1 errno={errno}"),
                "{engine} {what}\n{out}"
            );
        }
        // Our init cannot be read, written or killed from inside.
        assert_eq!(
            out.field("init_mem"),
            format!("-1 errno={}", libc::EACCES),
            "{engine}\n{out}"
        );
        assert_eq!(
            out.field("init_fd"),
            format!("-1 errno={}", libc::EACCES),
            "{engine}\n{out}"
        );
        // The kernel drops a signal to its namespace's init from inside: the
        // session goes on (marker-last below).
        // A second listener in the chain is refused (EBUSY): the execs stay ours.
        assert_eq!(
            out.field("own_listener"),
            format!("-1 errno={}", libc::EBUSY),
            "{engine}\n{out}"
        );
        for way in ["execveat", "procfd", "thread", "listener", "last"] {
            let marker = format!("marker-{way}");
            assert!(
                out.lines().contains(&marker.as_str()),
                "{engine}: {marker} did not run\n{out}"
            );
            let line = exec_line(&log, &format!("echo {marker}"))
                .unwrap_or_else(|| panic!("{engine}: {marker} ran unrecorded\n{log}"));
            assert_eq!(log_field(line, "exe"), "/bin/busybox", "{engine}\n{log}");
        }
    }
}

#[test]
fn an_environment_that_would_load_code_into_the_init_is_refused() {
    let runner = Runner::Root;
    let ws = Workspace::new();
    let home = RecordsHome::new(runner);
    for engine in ["docker", "podman"] {
        let out = engine_run(
            runner,
            &ws,
            &home,
            engine,
            &["--env", "LD_PRELOAD=/tmp/evil.so"],
            &["true"],
        );
        out.assert_code(125);
        out.assert_stderr_contains("LD_PRELOAD");
        out.assert_stderr_contains("--no-record");
    }
}

/// A library the loader would load into every program, announcing itself when it
/// runs as a container's PID 1 (our init, before its filter).
const PRELOADED: &str = r#"
#include <unistd.h>
__attribute__((constructor)) static void announce(void) {
    if (getpid() == 1) write(2, "HIJACKED-INIT\n", 14);
}
"#;

/// An image that tries to load its own code into our init through the host's
/// loader (red team, session 13): an `/etc/ld.so.preload` naming its library, and
/// files under our own folder where the loader looks before our libraries
/// (`/.vectraguard/lib/glibc-hwcaps/…`). Neither reaches the init: the preload list
/// is empty for it and the folder is a tmpfs holding only our binds.
#[test]
fn an_image_cannot_load_its_code_into_the_recording_init() {
    let runner = Runner::Root;
    let ws = Workspace::new();
    let root = ws.join("rootfs");
    let hwcaps = root.join(".vectraguard/lib/glibc-hwcaps/x86-64-v2");
    std::fs::create_dir_all(&hwcaps).unwrap();
    super::harness::busybox_root_preloading(&root, &["sh", "cat", "ls", "echo"], PRELOADED);
    std::fs::copy(root.join("preloaded.so"), hwcaps.join("libc.so.6")).unwrap();
    let tar = ws.join("rootfs.tar");
    super::harness::pack_root(&root, &tar);
    let image = format!("vectraguard-test/preload-{}:1", super::harness::unique());
    for engine in ["docker", "podman"] {
        let imported = std::process::Command::new(engine)
            .args(["import", "--change", "ENV PATH=/bin"])
            .arg(&tar)
            .arg(&image)
            .output()
            .unwrap();
        assert!(imported.status.success(), "{engine} import: {imported:?}");
        let home = RecordsHome::new(runner);
        let mut vg = Vg::new(runner, ws.path());
        vg.args([
            "sandbox",
            "run",
            "--backend",
            engine,
            "--image",
            &image,
            "--",
        ])
        .args([
            "sh",
            "-c",
            "echo preload=[$(cat /etc/ld.so.preload)]; ls /.vectraguard/lib",
        ])
        .records_home(&home);
        let out = vg.run();
        let _ = std::process::Command::new(engine)
            .args(["rmi", "-f", &image])
            .output();
        out.assert_success();
        assert!(!out.stderr.contains("HIJACKED"), "{engine}\n{out}");
        assert!(out.stdout.contains("preload=[]"), "{engine}\n{out}");
        assert!(!out.stdout.contains("glibc-hwcaps"), "{engine}\n{out}");
        let log = commands_log(&home.only_session());
        assert!(
            exec_line(&log, "cat /etc/ld.so.preload").is_some(),
            "{engine}\n{log}"
        );
    }
}

/// `--ask` on a recorded container: our init hands its listener to the native
/// tracer, so a risky exec in the container is held until approved, and runs only
/// then; denied, it never runs.
#[test]
fn a_risky_exec_in_a_container_is_held_until_approved() {
    let runner = Runner::Root;
    for engine in ["docker", "podman"] {
        for verdict in ["approve", "deny"] {
            let ws = Workspace::new();
            let home = RecordsHome::new(runner);
            let name = format!("gate-{engine}-{verdict}-{}", super::harness::unique());
            let (running, _) = super::live::start_live(
                runner,
                &ws,
                &home,
                &name,
                &["--backend", engine, "--image", IMAGE, "--ask", "high"],
                &["sh", "-c", "rm -rf /tmp/held; echo rm=$? > rm-status"],
            );
            let pending = super::approval::first_pending(runner, &ws, &home, &name);
            assert_eq!(pending["level"], "CRITICAL", "{pending}");
            assert!(!ws.exists("rm-status"), "{engine}: it ran before approval");
            let id = pending["id"].to_string();
            super::live::vg(runner, &ws, &home, &[verdict, &name, &id]).assert_success();
            let out = running.finish(std::time::Duration::from_secs(30));
            match verdict {
                "approve" => {
                    out.assert_success();
                    assert_eq!(ws.read("rm-status").as_deref(), Some("rm=0\n"), "{engine}");
                }
                _ => {
                    out.assert_code(126);
                    assert!(!ws.exists("rm-status"), "{engine}: a denied exec ran");
                }
            }
            let log = commands_log(&home.only_session());
            let line = exec_line(&log, "sh -c 'rm -rf /tmp/held; echo rm=$? > rm-status'")
                .unwrap_or_else(|| panic!("{engine}: no exec line\n{log}"));
            assert_eq!(
                line.contains("denied="),
                verdict == "deny",
                "{engine}\n{log}"
            );
        }
    }
}

#[test]
fn rootless_podman_records_execs_and_refuses_what_it_cannot_name() {
    // The test user's own rootless Podman (its image imported by scripts/test-engines):
    // the container's processes run as subordinate uids of that user.
    let runner = Runner::Unprivileged;
    let ws = Workspace::new();
    let home = RecordsHome::new(runner);
    let out = engine_run(
        runner,
        &ws,
        &home,
        "podman",
        &[],
        &[
            "sh",
            "-c",
            "echo one | cat; exec 3</bin/busybox; /proc/self/fd/3 echo by-descriptor; exit 4",
        ],
    );
    out.assert_code(4);
    assert!(out.stdout.starts_with("one\n"), "{out}");
    // Its file cannot be named from outside: not run rather than run unrecorded.
    assert!(!out.stdout.contains("by-descriptor"), "{out}");
    let dir = home.only_session();
    let log = commands_log(&dir);
    let sh = exec_line(
        &log,
        "sh -c 'echo one | cat; exec 3</bin/busybox; /proc/self/fd/3 echo by-descriptor; exit 4'",
    )
    .unwrap_or_else(|| panic!("no exec of the command\n{log}"));
    assert_eq!(log_field(sh, "ppid"), "1", "{log}");
    let cat = exec_line(&log, "cat").unwrap_or_else(|| panic!("no exec of cat\n{log}"));
    assert_eq!(log_field(cat, "ppid"), log_field(sh, "pid"), "{log}");
    assert!(exec_line(&log, "echo by-descriptor").is_none(), "{log}");
    // ... and says why.
    out.assert_stderr_contains("cannot be named from outside");
    let meta = session_metadata(&dir);
    assert_eq!(meta["layers"]["exec_records"], "seccomp-notify", "{meta}");
    assert_eq!(
        meta["layers"]["exec_records_limits"], "descriptor-execs-refused",
        "{meta}"
    );
    Vg::new(runner, ws.path())
        .args(["logs", "verify", "last"])
        .records_home(&home)
        .run()
        .assert_success()
        .assert_stdout_contains("intact");
}

#[test]
fn a_recorded_container_that_ignores_the_time_out_s_signal_still_ends() {
    // Its client is killed after the grace; the container, left running, would keep
    // the tracer serving: the session ends it.
    let runner = Runner::Root;
    let ws = Workspace::new();
    let home = RecordsHome::new(runner);
    let started = std::time::Instant::now();
    let out = engine_run(
        runner,
        &ws,
        &home,
        "docker",
        &["--timeout", "4s", "--kill-grace", "1s"],
        &["sh", "-c", "trap '' TERM; while :; do sleep 1; done"],
    );
    out.assert_code(124);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "{:?}\n{out}",
        started.elapsed()
    );
    let dir = home.only_session();
    let log = commands_log(&dir);
    let sh = log
        .lines()
        .find(|l| l.contains(" exec ") && log_field(l, "exe") == "/bin/sh")
        .unwrap_or_else(|| panic!("no exec of the command\n{log}"));
    assert_eq!(log_field(sh, "ppid"), "1", "{log}");
    Vg::new(runner, ws.path())
        .args(["logs", "verify", "last"])
        .records_home(&home)
        .run()
        .assert_success();
    let meta = session_metadata(&dir);
    let name = meta["layers"]["container"].as_str().unwrap_or_default();
    let left = containers("docker");
    assert!(
        !name.is_empty() && !left.lines().any(|l| l == name),
        "container {name:?} left: {left}"
    );
}

/// The session `run` added to `home` (sessions started in the same second sort in
/// no particular order).
fn new_session(home: &RecordsHome, run: impl FnOnce()) -> std::path::PathBuf {
    let before = home.sessions();
    run();
    let mut added: Vec<_> = home
        .sessions()
        .into_iter()
        .filter(|d| !before.contains(d))
        .collect();
    assert_eq!(added.len(), 1, "{added:?}");
    added.remove(0)
}

#[test]
fn dockers_limits_are_kept_for_its_daemon_alone_in_a_folder_no_sandbox_sees() {
    let runner = Runner::Root;
    let ws = Workspace::new();
    let home = RecordsHome::new(runner);
    let engines = home.logs().parent().unwrap().join("engines");
    let file = engines.join("docker-limits.json");
    let read = || -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap()
    };
    let memory_by = |dir: &std::path::Path| {
        session_metadata(dir)["limits"]["enforced_by"]["memory"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let run = || {
        engine_run(runner, &ws, &home, "docker", &[], &["true"]).assert_success();
    };
    let first = new_session(&home, run);
    assert_eq!(memory_by(&first), "docker (its cgroups)");
    // The daemon's answer, for the daemon that gave it (its listener's pid as this
    // host numbers it, root's).
    let kept = read();
    let daemon = kept["daemon"].as_str().unwrap().to_owned();
    let pid: i32 = daemon
        .split_whitespace()
        .find_map(|f| f.strip_prefix("pid="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(pid > 0 && daemon.contains(" uid=0 "), "{daemon}");
    for limit in ["memory", "swap", "pids", "cpus"] {
        assert_eq!(
            kept[limit], true,
            "{limit}: this machine's cgroups hold it\n{kept}"
        );
    }
    // Read back for the same daemon: what the file says is what the session goes by
    // (here a file that says the daemon cannot hold memory: the default cap is then
    // recorded as not held).
    let mut planted = kept.clone();
    planted["memory"] = false.into();
    std::fs::write(&file, planted.to_string()).unwrap();
    let second = new_session(&home, run);
    assert_eq!(
        memory_by(&second),
        "none (docker cannot hold a memory limit here)"
    );
    // For another daemon (the same pid started again): not believed, asked again,
    // and the file is this daemon's again.
    planted["daemon"] = daemon.replace(" start=", " start=1").into();
    std::fs::write(&file, planted.to_string()).unwrap();
    let third = new_session(&home, run);
    assert_eq!(memory_by(&third), "docker (its cgroups)");
    assert_eq!(read(), kept);
    // A sandbox that could write the folder could make a later session believe a
    // limit holds that the daemon drops: a mount of it is refused.
    let mount = format!("{}:/mnt/engines", engines.display());
    Vg::sandbox(runner, &ws, &["--mount", &mount], &["true"])
        .records_home(&home)
        .run()
        .assert_code(125)
        .assert_stderr_contains("the engines' folder");
}

/// Where the mediated network is tested: each engine as root, and the test user's
/// rootless Podman (whose container network namespace belongs to Podman's user
/// namespace, which the supervisor's helper joins to make the interface).
const MEDIATED: [(Runner, &str); 3] = [
    (Runner::Root, "docker"),
    (Runner::Root, "podman"),
    (Runner::Unprivileged, "podman"),
];

/// The network events' decisions, without the run's own numbers (connection ids,
/// times, byte counts), sorted: what the mediator was asked and answered.
fn net_decisions(events: &[serde_json::Value]) -> Vec<String> {
    let mut out: Vec<String> = events
        .iter()
        .filter(|e| e["event"] != "close")
        .map(|e| {
            [
                "event", "decision", "name", "address", "qtype", "rule", "protocol",
            ]
            .iter()
            .filter(|k| !e[**k].is_null())
            .map(|k| format!("{k}={}", e[*k]))
            .collect::<Vec<_>>()
            .join(" ")
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[test]
fn the_mediated_network_lets_an_allowed_name_through_and_records_it_as_natively() {
    let marker = format!("engine-through-the-mediator-{}", super::harness::unique());
    // Larger than one segment and one socket buffer, so the relay loops.
    let mut body = marker.clone().into_bytes();
    body.resize(200_000, b'x');
    let web = super::mediated_network::HttpServer::start(body);
    let p = web.port;
    // busybox's own tools, in the image and on the host alike, so that the native
    // run asks the mediator the same questions.
    // (No `wget -T`: busybox's static wget crashes with it, natively too.)
    let script = format!(
        "B=/bin/busybox; \
         $B wget -q -O /tmp/body http://web.test:{p}/ && echo body=$($B head -c {n} /tmp/body) && echo size=$($B wc -c < /tmp/body); \
         $B wget -q -O /tmp/other http://web.test:1/ 2>/dev/null; echo other_port=$?; \
         $B wget -q -O /tmp/denied http://denied.test:{p}/ 2>/dev/null; echo denied_name=$?",
        n = marker.len()
    );
    let options = [
        "--network",
        "allow",
        "--add-host",
        "web.test:127.0.0.1",
        "--add-host",
        "denied.test:127.0.0.1",
        "--allow",
        &format!("web.test:{p}"),
    ];
    let mut seen = Vec::new();
    for (runner, backend) in MEDIATED.into_iter().chain([(Runner::Root, "native")]) {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let mut vg = Vg::new(runner, ws.path());
        vg.args(["sandbox", "run", "--backend", backend]);
        if backend != "native" {
            vg.args(["--image", IMAGE]);
        }
        vg.args(options)
            .args(["--", "/bin/busybox", "sh", "-c", &script])
            .records_home(&home);
        let out = vg.run();
        let what = format!("{backend} as {runner}");
        out.assert_success();
        assert_eq!(out.field("body"), marker, "{what}\n{out}");
        assert_eq!(out.field("size"), "200000", "{what}\n{out}");
        assert_ne!(out.field("other_port"), "0", "{what}\n{out}");
        assert_ne!(out.field("denied_name"), "0", "{what}\n{out}");
        // The refusals' notes, on the user's stderr.
        out.assert_stderr_contains("refused web.test:1");
        out.assert_stderr_contains("refused the name denied.test");
        let events = super::mediated_network::network_events(&home);
        let close = events
            .iter()
            .find(|e| e["event"] == "close" && e["name"] == "web.test")
            .unwrap_or_else(|| panic!("{what}: no close event\n{events:#?}"));
        assert!(close["bytes_in"].as_u64().unwrap() >= 200_000, "{close}");
        let meta = session_metadata(&home.only_session());
        assert_eq!(meta["network"]["mode"], "allow", "{meta}");
        assert_eq!(meta["layers"]["network"], "tun", "{what}\n{meta}");
        if backend != "native" {
            assert_eq!(meta["layers"]["backend"], backend, "{meta}");
            assert_eq!(
                meta["layers"]["network_attach"], "tun0-in-container-netns",
                "{meta}"
            );
            let name = meta["layers"]["container"].as_str().unwrap_or_default();
            assert!(
                !containers_of(runner, backend).lines().any(|l| l == name),
                "{what}: container {name} left"
            );
        }
        Vg::new(runner, ws.path())
            .args(["logs", "verify", "last"])
            .records_home(&home)
            .run()
            .assert_success()
            .assert_stdout_contains("intact");
        seen.push((what, net_decisions(&events)));
    }
    assert_eq!(web.accepted.load(std::sync::atomic::Ordering::SeqCst), 4);
    // The same questions, answers, connections, decisions and rules everywhere.
    let (native, expected) = seen.pop().unwrap();
    for (what, decisions) in &seen {
        assert_eq!(
            decisions, &expected,
            "{what}'s network events differ from {native}'s"
        );
    }
    assert!(
        expected
            .iter()
            .any(|l| l.starts_with("event=\"connect\" decision=\"allow\" name=\"web.test\"")),
        "{expected:#?}"
    );
    assert!(
        expected
            .iter()
            .any(|l| l.starts_with("event=\"dns\" decision=\"deny\" name=\"denied.test\"")),
        "{expected:#?}"
    );
}

/// The containers of `engine` that `runner` sees (rootless Podman's are the test
/// user's own).
fn containers_of(runner: Runner, engine: &str) -> String {
    let out = runner
        .host_command(engine)
        .args(["ps", "-a", "--format", "{{.Names}}"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A hostile program in a container on the mediated network: every way out other
/// than the mediator, and every way to change the network, reported as
/// `key=OK` or `key=-1 errno=N`.
const NET_ESCAPE: &str = r#"
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static void report(const char *key, int ok) {
  if (ok) printf("%s=OK\n", key); else printf("%s=-1 errno=%d\n", key, errno);
  fflush(stdout);
}

/* A TCP connection, waited for at most 5 s. */
static int tcp(int family, const char *ip, int port) {
  int s = socket(family, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (s < 0) return 0;
  struct sockaddr_storage ss; memset(&ss, 0, sizeof ss);
  socklen_t len;
  if (family == AF_INET) {
    struct sockaddr_in *a = (void *)&ss; a->sin_family = AF_INET; a->sin_port = htons(port);
    inet_pton(AF_INET, ip, &a->sin_addr); len = sizeof *a;
  } else {
    struct sockaddr_in6 *a = (void *)&ss; a->sin6_family = AF_INET6; a->sin6_port = htons(port);
    inet_pton(AF_INET6, ip, &a->sin6_addr); a->sin6_scope_id = if_nametoindex("tun0"); len = sizeof *a;
  }
  if (connect(s, (void *)&ss, len) == 0) return 1;
  if (errno != EINPROGRESS) return 0;
  struct pollfd p = {s, POLLOUT, 0};
  if (poll(&p, 1, 5000) != 1) { errno = ETIMEDOUT; return 0; }
  int err = 0; socklen_t el = sizeof err;
  getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el);
  errno = err;
  return err == 0;
}

/* A datagram sent and an answer waited for at most 2 s. */
static int udp(int type, int proto, const char *ip, int port, const void *msg, size_t n) {
  int s = socket(AF_INET, type, proto);
  if (s < 0) return 0;
  struct timeval tv = {2, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct sockaddr_in a; memset(&a, 0, sizeof a);
  a.sin_family = AF_INET; a.sin_port = htons(port); inet_pton(AF_INET, ip, &a.sin_addr);
  if (sendto(s, msg, n, 0, (void *)&a, sizeof a) < 0) return 0;
  char buf[512];
  return recv(s, buf, sizeof buf, 0) >= 0;
}

int main(int argc, char **argv) {
  int port = atoi(argv[1]);
  report("loopback", tcp(AF_INET, "127.0.0.1", port));
  report("gateway", tcp(AF_INET, "198.18.0.1", port));
  report("private", tcp(AF_INET, "10.255.255.1", 80));
  report("metadata", tcp(AF_INET, "169.254.169.254", 80));
  report("ipv6_loopback", tcp(AF_INET6, "::1", port));
  report("ipv6_link", tcp(AF_INET6, "fe80::1", port));
  static const char ping[] = "\x08\0\xf7\xff\0\0\0\0";
  report("raw", socket(AF_INET, SOCK_RAW, IPPROTO_ICMP) >= 0);
  report("packet", socket(AF_PACKET, SOCK_RAW, 0) >= 0);
  report("ping", udp(SOCK_DGRAM, IPPROTO_ICMP, "192.0.2.1", 0, ping, 8));
  report("udp", udp(SOCK_DGRAM, 0, "192.0.2.7", 9999, "x", 1));
  static const char query[] = "\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07" "example\x03" "com\x00\x00\x01\x00\x01";
  report("dns_elsewhere", udp(SOCK_DGRAM, 0, "192.0.2.53", 53, query, sizeof query - 1));
  report("tun_device", open("/dev/net/tun", O_RDWR) >= 0);
  /* Changing the network: another address, a route, tun0 down. */
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  struct ifreq ifr; memset(&ifr, 0, sizeof ifr);
  strcpy(ifr.ifr_name, "tun0");
  struct sockaddr_in *a = (void *)&ifr.ifr_addr;
  a->sin_family = AF_INET; inet_pton(AF_INET, "10.0.0.9", &a->sin_addr);
  report("set_address", ioctl(s, SIOCSIFADDR, &ifr) == 0);
  struct rtentry rt; memset(&rt, 0, sizeof rt);
  struct sockaddr_in *d = (void *)&rt.rt_dst; d->sin_family = AF_INET;
  inet_pton(AF_INET, "10.0.0.0", &d->sin_addr);
  struct sockaddr_in *m = (void *)&rt.rt_genmask; m->sin_family = AF_INET;
  inet_pton(AF_INET, "255.0.0.0", &m->sin_addr);
  rt.rt_flags = RTF_UP; rt.rt_dev = "lo";
  report("add_route", ioctl(s, SIOCADDRT, &rt) == 0);
  memset(&ifr, 0, sizeof ifr); strcpy(ifr.ifr_name, "tun0");
  report("tun_down", ioctl(s, SIOCSIFFLAGS, &ifr) == 0);
  struct if_nameindex *names = if_nameindex(), *n;
  printf("ifaces=");
  for (n = names; n && n->if_name; n++) printf("%s%s", n == names ? "" : ",", n->if_name);
  printf("\n");
  return 0;
}
"#;

#[test]
fn escapes_from_a_containers_mediated_network_fail_and_are_recorded() {
    let build = Workspace::new();
    let program = build.join("netescape");
    super::harness::build_static_c(NET_ESCAPE, &program, &[]);
    for (runner, engine) in MEDIATED {
        let what = format!("{engine} as {runner}");
        let ws = Workspace::new();
        std::fs::copy(&program, ws.join("netescape")).unwrap();
        let home = RecordsHome::new(runner);
        // A server on the host's loopback that no rule allows.
        let (port, accepted) = super::live::counting_server();
        let out = engine_run(
            runner,
            &ws,
            &home,
            engine,
            &["--network", "allow", "--allow", "0.0.0.0/0"],
            &[
                "sh",
                "-c",
                &format!(
                    "./netescape {port}; ip link add d0 type dummy 2>/dev/null; echo ip_link=$?; \
                     ip route del default 2>/dev/null; echo ip_route=$?"
                ),
            ],
        );
        out.assert_success();
        // Loopback is the container's own; the mediator refuses private addresses
        // and its own, even under a rule that allows every address.
        for key in ["loopback", "gateway", "private", "metadata"] {
            assert_eq!(
                out.field(key),
                format!("-1 errno={}", libc::ECONNREFUSED),
                "{what} {key}\n{out}"
            );
        }
        // IPv6 loopback is the container's own (Docker's has none), nothing answers
        // IPv6 on tun0; no raw, packet or ping socket; other UDP and
        // DNS to another server go nowhere; no TUN device, no change of address,
        // route or interface (no CAP_NET_ADMIN).
        for key in [
            "ipv6_loopback",
            "ipv6_link",
            "raw",
            "packet",
            "ping",
            "udp",
            "dns_elsewhere",
            "tun_device",
            "set_address",
            "add_route",
            "tun_down",
        ] {
            assert_ne!(out.field(key), "OK", "{what} {key}\n{out}");
        }
        assert_ne!(out.field("ip_link"), "0", "{what}\n{out}");
        assert_ne!(out.field("ip_route"), "0", "{what}\n{out}");
        assert_eq!(out.field("ifaces"), "lo,tun0", "{what}\n{out}");
        assert_eq!(
            accepted.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "{what}: the host's server was reached"
        );
        super::mediated_network::assert_escapes_refused(&home, &what);
    }
}

#[test]
fn net_allow_and_deny_change_a_running_containers_rules() {
    for (runner, engine) in MEDIATED {
        let what = format!("{engine} as {runner}");
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let name = format!("engine-net-{}", super::harness::unique());
        let (port, accepted) = super::live::counting_server();
        // Retries until a connection succeeds, then until one fails.
        let script = format!(
            "i=0; until nc echo.test {port} </dev/null 2>/dev/null; do i=$((i+1)); [ $i -gt 300 ] && {{ echo never-allowed; exit 1; }}; sleep 0.1; done; \
             echo allowed; \
             i=0; while nc echo.test {port} </dev/null 2>/dev/null; do i=$((i+1)); [ $i -gt 300 ] && {{ echo never-denied; exit 1; }}; sleep 0.1; done; \
             echo denied"
        );
        let (running, socket) = super::live::start_live(
            runner,
            &ws,
            &home,
            &name,
            &[
                "--backend",
                engine,
                "--image",
                IMAGE,
                "--network",
                "allow",
                "--add-host",
                "echo.test:127.0.0.1",
            ],
            &["sh", "-c", &script],
        );
        let target = format!("echo.test:{port}");
        std::thread::sleep(std::time::Duration::from_millis(500));
        assert_eq!(
            accepted.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "{what}"
        );
        super::live::vg(runner, &ws, &home, &["net", "allow", &name, &target])
            .assert_success()
            .assert_stdout_contains(&format!("allow {target}"));
        let through = super::harness::wait_until(std::time::Duration::from_secs(30), || {
            accepted.load(std::sync::atomic::Ordering::SeqCst) > 0
        });
        assert!(through, "{what}: the allowed name never got through");
        super::live::vg(runner, &ws, &home, &["net", "deny", &name, &target]).assert_success();
        let out = running.finish(std::time::Duration::from_secs(60));
        out.assert_success();
        assert_eq!(out.lines(), ["allowed", "denied"], "{what}\n{out}");
        let added: Vec<serde_json::Value> = super::live::events(socket.parent().unwrap())
            .into_iter()
            .filter(|e| e["type"] == "network" && e["event"] == "rule-added")
            .collect();
        assert_eq!(added.len(), 2, "{what}: {added:?}");
        assert_eq!(added[1]["rule"], format!("deny {target}"), "{added:?}");
    }
}

#[test]
fn an_engines_refusal_says_its_cause_once() {
    // The plan's error quotes its cause and reports it as its source too: printed
    // once, not `…: X: X` as a plain `{:#}` of the chain would.
    // As root: rootless Podman here refuses every memory limit before this check.
    let runner = Runner::Root;
    let ws = Workspace::new();
    let home = RecordsHome::new(runner);
    let out = engine_run(runner, &ws, &home, "podman", &["--memory", "1m"], &["true"]);
    out.assert_code(125);
    let said = "below the engines' minimum";
    assert_eq!(out.stderr.matches(said).count(), 1, "{}", out.stderr);
}

#[test]
fn private_folders_are_the_users_and_run_programs_on_each_engine() {
    // As natively: a `--tmpfs` working directory and /tmp are the user's to write,
    // and a program written there runs (Docker's own tmpfs is root's and noexec).
    let script =
        "printf '#!/bin/sh\\necho ran\\n' > s && chmod +x s && ./s && cp s /tmp/t && /tmp/t";
    each_identity(|runner| {
        let engines: &[&str] = match runner {
            Runner::Root => &["docker", "podman"],
            // Docker's daemon is root's here.
            Runner::Unprivileged => &["podman"],
        };
        for engine in engines {
            let ws = Workspace::new();
            let home = RecordsHome::new(runner);
            let options = ["--tmpfs", "/w", "--workdir", "/w"];
            let out = engine_run(runner, &ws, &home, engine, &options, &["sh", "-c", script]);
            out.assert_success();
            assert_eq!(out.stdout, "ran\nran\n", "{engine}: {out}");
        }
    });
}

/// Where a container's terminal is tested: each engine as root, and the test user's
/// rootless Podman (whose devpts is mounted in Podman's user namespace).
const TERMINAL_ENGINES: [(Runner, &str); 3] = [
    (Runner::Root, "docker"),
    (Runner::Root, "podman"),
    (Runner::Unprivileged, "podman"),
];

/// `sandbox shell --backend docker|podman`, driven through a real terminal (tmux, as
/// in `shell.rs`): the terminal is one our init opens in the container's devpts and
/// hands over; typed into, resized, interrupted, and recorded as natively.
#[test]
fn a_container_shell_on_a_terminal_of_the_container_s_own_is_relayed_and_recorded() {
    use super::shell::{TMUX, Tmux, shell_args_tagged, vectraguard_command};
    if !super::harness::require_tools(&[TMUX]) {
        return;
    }
    for (runner, engine) in TERMINAL_ENGINES {
        let what = format!("{engine} as {runner}");
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let (mut args, prompt) = shell_args_tagged(engine);
        args.extend(["--backend", engine, "--image", IMAGE].map(String::from));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let t = Tmux::start(
            ws.path(),
            &vectraguard_command(runner, &home, &args),
            100,
            30,
        );
        t.wait_for(&prompt);
        t.line("echo typed-$((6*7)); tty");
        let screen = t.wait_for("typed-42");
        // A terminal of the container's devpts: its first, not the host's.
        let screen = if screen.contains("/dev/pts/0") {
            screen
        } else {
            t.wait_for("/dev/pts/0")
        };
        assert!(!screen.contains("not a tty"), "{what}\n{screen}");
        t.line("stty size");
        t.wait_for("30 100");
        let status = t
            .tmux()
            .args(["resize-window", "-t", "vg", "-x", "120", "-y", "40"])
            .status()
            .unwrap();
        assert!(status.success());
        std::thread::sleep(std::time::Duration::from_millis(300));
        t.line("stty size");
        t.wait_for("40 120");
        // Ctrl-C interrupts the container's foreground job, not the session.
        t.line("sleep 300; echo not-$((2+2))-interrupted");
        std::thread::sleep(std::time::Duration::from_millis(1000));
        t.keys(&["C-c"]);
        t.line("echo still-alive-$((6*7))");
        let screen = t.wait_for("still-alive-42");
        assert!(!screen.contains("not-4-interrupted"), "{what}\n{screen}");
        t.line("exit 3");
        t.wait_gone();
        let dir = home.only_session();
        let meta = session_metadata(&dir);
        assert_eq!(meta["layers"]["backend"], engine, "{what}: {meta}");
        assert_eq!(
            meta["layers"]["terminal"], "container-devpts",
            "{what}: {meta}"
        );
        assert_eq!(meta["exit_code"], 3, "{what}: {meta}");
        // Every exec, as without a terminal: the shell (our init's child) and what
        // it ran, the interrupted sleep ended by SIGINT.
        let log = commands_log(&dir);
        let sh = log
            .lines()
            .find(|l| l.contains(" exec ") && log_field(l, "ppid") == "1")
            .unwrap_or_else(|| panic!("{what}: no exec of the shell\n{log}"));
        let sleep = exec_line(&log, "sleep 300")
            .unwrap_or_else(|| panic!("{what}: no exec of sleep\n{log}"));
        assert_eq!(
            log_field(sleep, "ppid"),
            log_field(sh, "pid"),
            "{what}\n{log}"
        );
        assert!(
            log.lines().any(|l| l.contains(" exit ")
                && log_field(l, "pid") == log_field(sleep, "pid")
                && l.contains("signal=2")),
            "{what}: the interrupt is not recorded\n{log}"
        );
        // The cast: the size, the resize, the keys, and what was shown.
        let cast = std::fs::read_to_string(dir.join("tty.cast")).unwrap();
        let header: serde_json::Value = serde_json::from_str(cast.lines().next().unwrap()).unwrap();
        assert_eq!(header["width"], 100, "{what}");
        assert_eq!(header["height"], 30, "{what}");
        assert!(cast.contains("\"r\",\"120x40\""), "{what}: no resize event");
        assert!(cast.contains("\"i\""), "{what}: no keystrokes recorded");
        let stdout = std::fs::read_to_string(dir.join("stdout.log")).unwrap();
        assert!(stdout.contains("still-alive-42"), "{what}: {stdout}");
        let id = dir.file_name().unwrap().to_str().unwrap().to_owned();
        Vg::new(runner, ws.path())
            .args(["logs", "verify", &id])
            .records_home(&home)
            .run()
            .assert_success()
            .assert_stdout_contains("intact");
        Vg::new(runner, ws.path())
            .args(["logs", "replay", &id, "--speed", "1000"])
            .records_home(&home)
            .run()
            .assert_success()
            .assert_stdout_contains("typed-42")
            .assert_stdout_contains("still-alive-42");
        let name = meta["layers"]["container"].as_str().unwrap_or_default();
        assert!(
            !name.is_empty() && !containers_of(runner, engine).lines().any(|l| l == name),
            "{what}: container {name:?} left"
        );
    }
}

/// `sandbox run -t` in a container: the exit status comes back, and the modes a
/// program left on are turned off on the user's terminal (not in the record).
#[test]
fn a_container_run_with_t_gives_back_its_status_and_the_terminal_s_modes() {
    use super::shell::{TMUX, Tmux, vectraguard_command};
    if !super::harness::require_tools(&[TMUX, ("/bin/bash", "bash")]) {
        return;
    }
    for (runner, engine) in TERMINAL_ENGINES {
        let what = format!("{engine} as {runner}");
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        ws.write(
            "modes.sh",
            "printf '\\033[?1049h\\033[?25l\\033[?1000h\\033[?1h'; echo modes-$((2+3)); exit 7\n",
        );
        let t = Tmux::start(ws.path(), "bash --norc --noprofile", 100, 30);
        let vg = vectraguard_command(
            runner,
            &home,
            &[
                "sandbox",
                "run",
                "-t",
                "--backend",
                engine,
                "--image",
                IMAGE,
                "--",
                "sh",
                "modes.sh",
            ],
        );
        t.line(&format!("{vg}; echo status-$?-after-$((50+50))"));
        t.wait_for("status-7-after-100");
        assert_eq!(
            t.modes(),
            Tmux::MODES_OFF,
            "{what}: alternate screen, cursor shown, mouse, cursor keys after the session"
        );
        let dir = home.only_session();
        let cast = std::fs::read_to_string(dir.join("tty.cast")).unwrap();
        assert!(cast.contains("\\u001b[?1049h"), "{what}: {cast}");
        assert!(cast.contains("modes-5"), "{what}: {cast}");
        assert!(
            !cast.contains("\\u001b[?1049l"),
            "{what}: the reset was recorded: {cast}"
        );
        assert_eq!(session_metadata(&dir)["exit_code"], 7, "{what}");
    }
}

/// Tries to push a command into the terminal with TIOCSTI, byte by byte, and says
/// what the kernel answered; then holds the terminal's slave open from a process of
/// its own and says whether the terminal is one of the container's.
const TIOCSTI: &str = r#"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
int main(int argc, char **argv) {
  const char *cmd = argv[1];
  int injected = 0, err = 0;
  for (const char *c = cmd; *c; c++) {
    if (ioctl(0, TIOCSTI, c) == 0) injected++; else err = errno;
  }
  printf("tiocsti injected=%d errno=%d\n", injected, err);
  return 0;
}
"#;

/// Red team (session 16): the user's terminal resized while the container started
/// (before our init handed its terminal over) left the container's terminal at the
/// size of the start, and `tty.cast` without the resize, until the next one. The
/// engine's client is made slow here, so that the resize comes then.
#[test]
fn a_resize_while_the_container_starts_reaches_its_terminal() {
    use super::shell::{TMUX, Tmux, vectraguard_command};
    if !super::harness::require_tools(&[TMUX]) {
        return;
    }
    let runner = Runner::Root;
    let ws = Workspace::new();
    let home = RecordsHome::new(runner);
    let docker = ["/usr/bin/docker", "/usr/local/bin/docker"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("docker");
    let slow = ws.mkdir("slow-engine");
    let started = ws.join("run-asked");
    ws.write_mode(
        "slow-engine/docker",
        format!(
            "#!/bin/sh\nif [ \"$1\" = run ]; then : > '{}'; sleep 4; fi\nexec {docker} \"$@\"\n",
            started.display()
        ),
        0o755,
    );
    let command = vectraguard_command(
        runner,
        &home,
        &[
            "sandbox",
            "run",
            "-t",
            "--backend",
            "docker",
            "--image",
            IMAGE,
            "--",
            "sh",
            "-c",
            "stty size; sleep 1; echo sized-$((2+3))",
        ],
    )
    .replace(
        "PATH=/usr/local/bin",
        &format!("PATH={}:/usr/local/bin", slow.display()),
    );
    // The pane stays once vectraguard has ended: it often ends within 50 ms of the
    // container's last line, between two looks at the screen, and a closed pane has
    // no screen (the wait then timed out on an empty one).
    let t = Tmux::start(
        ws.path(),
        &format!("{command}; echo exited-$?; sleep 60"),
        100,
        30,
    );
    // The size is taken just before the engine's client starts. The client waits 4 s
    // for the resize below (2 s was once too short for this thread on a loaded
    // machine: the resize then raced the container's `stty size`, which only the
    // engine's own resize after its start can reach).
    assert!(
        super::harness::wait_until(std::time::Duration::from_secs(30), || started.exists()),
        "the engine's client was not started"
    );
    let status = t
        .tmux()
        .args(["resize-window", "-t", "vg", "-x", "120", "-y", "40"])
        .status()
        .unwrap();
    assert!(status.success());
    let screen = t.wait_for("sized-5");
    assert!(screen.contains("40 120"), "{screen}");
    // vectraguard has ended, its record written.
    t.wait_for("exited-0");
    let cast = std::fs::read_to_string(home.only_session().join("tty.cast")).unwrap();
    assert!(cast.contains("\"r\",\"120x40\""), "no resize event\n{cast}");
}

/// A program in the container tries to type into a terminal with TIOCSTI: refused by
/// our filter, and were it not, it could reach only the container's own terminal,
/// never the user's. A background process that keeps the terminal's slave open after
/// the shell exits does not keep the session (nor the user's terminal) held.
#[test]
fn a_container_s_program_cannot_type_into_the_user_s_terminal_or_hold_it() {
    use super::shell::{TMUX, Tmux, vectraguard_command};
    if !super::harness::require_tools(&[TMUX, ("/bin/bash", "bash")]) {
        return;
    }
    let ws0 = Workspace::new();
    let program = ws0.join("tiocsti");
    super::harness::build_static_c(TIOCSTI, &program, &[]);
    for (runner, engine) in TERMINAL_ENGINES {
        let what = format!("{engine} as {runner}");
        let ws = Workspace::new();
        std::fs::copy(&program, ws.join("tiocsti")).unwrap();
        let home = RecordsHome::new(runner);
        let marker = format!("/tmp/vg-injected-{engine}-{}", super::harness::unique());
        let t = Tmux::start(ws.path(), "bash --norc --noprofile", 100, 30);
        // The slave held by a process left in the background past the shell's exit.
        let script =
            format!("./tiocsti 'touch {marker}\n'; (sleep 600 </dev/tty >/dev/tty 2>&1 &); exit 0");
        let vg = vectraguard_command(
            runner,
            &home,
            &[
                "sandbox",
                "run",
                "-t",
                "--backend",
                engine,
                "--image",
                IMAGE,
                "--",
                "sh",
                "-c",
                &script,
            ],
        );
        let started = std::time::Instant::now();
        t.line(&format!("{vg}; echo outer-after-$((1+1))"));
        let screen = t.wait_for("outer-after-2");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{what}: the background process held the session\n{screen}"
        );
        assert!(
            screen.contains(&format!("tiocsti injected=0 errno={}", libc::EPERM)),
            "{what}\n{screen}"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(
            !std::path::Path::new(&marker).exists(),
            "{what}: an injected command ran outside"
        );
        // The user's terminal still takes its own commands.
        t.line("echo outer-alive-$((3*3))");
        t.wait_for("outer-alive-9");
    }
}
