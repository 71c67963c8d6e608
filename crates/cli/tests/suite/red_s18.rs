//! Red team, session 18: today's changes attacked as a hostile script would.
//! Records truncated back after a failed write (a disk the sandbox can fill), the BPF
//! exec recorder's namespace filter, and init closing its copies of the command's
//! stdio. Each test fails if its attack works.

use std::process::Command;

use super::exec_records::{BPF, commands};
use super::faults::SmallDisk;
use super::harness::{
    RecordsHome, Runner, Vg, Workspace, chown_to, each_identity, is_root, unique,
};

/// The sandboxed program shares a small disk with the records and fills and frees it
/// over and over while writing to stdout and stderr at once, so that the relays' and
/// the chain's writes fail and succeed in every order. Whatever the session ends as,
/// `logs verify` must never find a record rewritten (a chained byte taken back by the
/// truncation, or a record chained at a wrong offset after one was).
#[test]
fn red_a_script_filling_the_shared_disk_cannot_unchain_or_shift_records() {
    if !is_root() {
        return;
    }
    each_identity(|runner| {
        let disk = SmallDisk::mount("2m", runner);
        // Passable to the sandbox user, whoever it is.
        let _ = Command::new("chmod").arg("0755").arg(disk.path()).status();
        let home = disk.path().join("home");
        let ws = disk.path().join("ws");
        for dir in [&home, &ws] {
            std::fs::create_dir(dir).unwrap();
            chown_to(dir, &runner.invoker());
        }
        // The sandbox user writes the workspace whoever it is.
        let _ = Command::new("chmod").arg("0777").arg(&ws).status();
        let home = home.to_str().unwrap().to_owned();
        let script =
            "( while :; do head -c 3000000 /dev/zero > fill 2>/dev/null; rm -f fill; done ) &
i=0; while [ $i -lt 4000 ]; do echo out-$i; echo err-$i >&2; i=$((i+1)); done";
        let vg = |args: &[&str]| {
            let mut vg = Vg::new(runner, &ws);
            vg.env("VECTRAGUARD_HOME", &home).args(args);
            vg.run()
        };
        for _ in 0..6 {
            let _ = vg(&["sandbox", "run", "--", "sh", "-c", script]);
            let _ = std::fs::remove_file(ws.join("fill"));
        }
        let out = vg(&["logs", "verify", "--all"]);
        assert!(
            out.code() == Some(0)
                && !out.stdout.contains("TAMPERED")
                && !out.stdout.contains("PROBLEM"),
            "[{runner}] a full disk the sandbox filled left a record that verify calls rewritten\n{out}"
        );
    });
}

/// A program that makes a pid namespace of its own (through a user namespace, which
/// needs no privilege) and execs there is still a program of the sandbox: the BPF
/// recorder matches the sandbox's namespace at its level, not the exec's own.
#[test]
fn red_bpf_recorder_sees_execs_in_a_nested_pid_namespace() {
    if !is_root() {
        return;
    }
    let ws = Workspace::new();
    let home = RecordsHome::new(Runner::Root);
    let marker = format!("nested-{}", unique());
    let script = format!(
        "unshare -Urpf /bin/echo {marker}-u 2>/dev/null; unshare -pf /bin/echo {marker}-p 2>/dev/null; \
         /usr/bin/python3 -c \"import os
try:
    os.unshare(os.CLONE_NEWPID)
except OSError:
    raise SystemExit(0)
if os.fork() == 0:
    os.execv('/bin/echo', ['echo', '{marker}-y'])
os.wait()\"; exit 0"
    );
    let mut vg = Vg::sandbox(Runner::Root, &ws, &[], &["/bin/sh", "-c", &script]);
    vg.records_home(&home);
    vg.env(BPF.0, BPF.1);
    let out = vg.run();
    out.assert_success();
    let log = commands(&home.only_session());
    for suffix in ["u", "p", "y"] {
        let word = format!("{marker}-{suffix}");
        if out.stdout.lines().any(|l| l == word) {
            assert!(
                log.contains(&word),
                "an exec in a nested pid namespace ran ({word}) unrecorded\n{log}\n{out}"
            );
        }
    }
}

/// Init no longer keeps the command's stdio pipes: output a background child wrote
/// before the command exited, both streams on one pipe (`2>&1`), and a command that
/// closed its stdio must all behave as before, recorded or not.
#[test]
fn red_init_closing_its_stdio_copies_loses_no_output() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let script = "( echo bg-out; echo bg-err >&2 ) & sleep 0.3
exec 3>&1; ( echo both-err >&2 ) 2>&1
( exec 1>&- 2>&- 0<&-; sleep 0.1 ) & sleep 0.2; echo main-out; exit 0";
        for options in [&[][..], &["--no-record"][..]] {
            let home = RecordsHome::new(runner);
            let mut vg = Vg::sandbox(runner, &ws, options, &["/bin/sh", "-c", script]);
            vg.records_home(&home);
            let out = vg.run();
            out.assert_success();
            for line in ["bg-out", "both-err", "main-out"] {
                assert!(
                    out.stdout.lines().any(|l| l == line),
                    "[{runner}] {options:?}: {line} lost\n{out}"
                );
            }
            assert!(
                out.stderr.lines().any(|l| l == "bg-err"),
                "[{runner}] {options:?}: bg-err lost\n{out}"
            );
            if options.is_empty() {
                let dir = home.only_session();
                let recorded = std::fs::read_to_string(dir.join("stdout.log")).unwrap();
                for line in ["bg-out", "both-err", "main-out"] {
                    assert!(
                        recorded.lines().any(|l| l == line),
                        "[{runner}] {line} not recorded\n{recorded}"
                    );
                }
            }
        }
    });
}

/// Programs run without a path the recorder could read back: from a memfd by
/// `fexecve` (execveat with AT_EMPTY_PATH), and by `posix_spawn` (vfork), each with a
/// huge argv. Each that ran must be in `commands.log`, with its marker.
#[test]
fn red_bpf_recorder_records_fd_and_vfork_execs() {
    if !is_root() {
        return;
    }
    let ws = Workspace::new();
    let home = RecordsHome::new(Runner::Root);
    let marker = format!("fdexec-{}", unique());
    let script = format!(
        "import os
big = ['x' * 4000] * 200
data = open('/bin/echo', 'rb').read()
fd = os.memfd_create('m', 0)
os.write(fd, data)
pid = os.fork()
if pid == 0:
    os.execve(fd, ['echo', '{marker}-memfd'] + big, {{}})
os.waitpid(pid, 0)
pid = os.posix_spawn('/bin/echo', ['echo', '{marker}-spawn'] + big, {{}})
os.waitpid(pid, 0)
"
    );
    let mut vg = Vg::sandbox(Runner::Root, &ws, &[], &["/usr/bin/python3", "-c", &script]);
    vg.records_home(&home);
    vg.env(BPF.0, BPF.1);
    let out = vg.run();
    let log = commands(&home.only_session());
    for suffix in ["memfd", "spawn"] {
        let word = format!("{marker}-{suffix}");
        if out.stdout.contains(&word) {
            assert!(
                log.contains(&word),
                "an exec ({word}) ran unrecorded\n{log}\n{out}"
            );
        }
    }
}
