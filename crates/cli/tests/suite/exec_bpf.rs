//! The BPF exec recorder (`vg_sandbox::exectrace`): a root run without `--ask`
//! records its execs and exits in the kernel, without the program waiting for the
//! supervisor. What it writes must be what seccomp notification writes for the same
//! script; nothing started in the sandbox may escape it; a full ring buffer must
//! kill an exec rather than let it run unrecorded; and what a dead supervisor left
//! must be freed by the next session. An unprivileged run keeps seccomp
//! notification.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::exec_records::{
    BPF, DEEP_LINK, HIDDEN_INTERPRETER, LOADER_LINK, LOADER_PAYLOAD, PATH_SWAP, RELINKED, SECCOMP,
    assert_names_hidden_interpreters, assert_names_payload_loader, assert_names_the_files_that_ran,
    commands, events,
};
use super::harness::{
    PYTHON, RecordsHome, Runner, Vg, Workspace, build_static_c, is_root, session_metadata,
    wait_until,
};

/// ` KEY=FILE` for a path that reaches FILE through a link on this machine (the
/// sandbox sees the host's `/usr` and `/bin`), else nothing: `/bin/sh` is named
/// with `ran=`/`interp_ran=` where it is a link (`dash` on Debian).
fn linked(key: &str, path: &str) -> String {
    let file = std::fs::canonicalize(path).unwrap();
    if file == Path::new(path) {
        String::new()
    } else {
        format!(" {key}={}", file.display())
    }
}

/// The exec line of `commands.log` whose argv is `argv`.
fn line_of<'a>(log: &'a str, argv: &str) -> &'a str {
    log.lines()
        .find(|l| l.ends_with(&format!(" -- {argv}")))
        .unwrap_or_else(|| panic!("no line for {argv}\n{log}"))
}

/// `commands.log` without each line's time.
fn untimed(log: &str) -> Vec<String> {
    log.lines()
        .map(|l| l.split_once(' ').map_or(l, |(_, rest)| rest).to_owned())
        .collect()
}

/// The session's record: one run of `cmd` in `ws`, by root, through `trace`.
fn recorded(ws: &Workspace, cmd: &[&str], seccomp: bool) -> (String, Value, Vec<Value>) {
    let home = RecordsHome::new(Runner::Root);
    let mut vg = Vg::sandbox(Runner::Root, ws, &[], cmd);
    vg.records_home(&home);
    let (key, value) = if seccomp { SECCOMP } else { BPF };
    vg.env(key, value);
    vg.run().assert_success();
    let dir = home.only_session();
    (commands(&dir), session_metadata(&dir), events(&dir))
}

/// A script that runs programs every way the record must tell apart: after `cd`s,
/// with odd bytes and long arguments, `#!` scripts by path (one through `env`), a
/// thread's exec, an exit status, a signal, a file that is not there.
const SAME_AS_SECCOMP: &str = r#"
mkdir -p /tmp/d/e && cd /tmp/d/e
/bin/echo "$(printf 'a\377b')" "quote's" "new
line" '' >/dev/null
/bin/echo "$(printf '%5000s' x)" >/dev/null
/bin/true $(seq 1 3000)
printf '#!/bin/sh\necho script "$@"\n' > s.sh && chmod +x s.sh && ./s.sh one two >/dev/null
printf '#!/usr/bin/env sh\necho env-script\n' > t.sh && chmod +x t.sh && ./t.sh >/dev/null
cd ..
/usr/bin/python3 -c "import os, threading
def run(): os.execv('/bin/sh', ['sh', '-c', 'exit 7'])
t = threading.Thread(target=run); t.start(); t.join()"
/bin/sh -c 'kill -KILL $$'
/nonexistent/program 2>/dev/null
cd / && /bin/sh -c 'exit 4'
exit 0
"#;

/// The same script, recorded by each way, gives the same `commands.log` (times
/// aside): the same pids, parents, working directories, paths, argv and exits.
#[test]
fn bpf_records_what_seccomp_notification_records() {
    if !is_root() {
        return;
    }
    let ws = Workspace::new();
    let (by_bpf, meta_bpf, _) = recorded(&ws, &["/bin/sh", "-c", SAME_AS_SECCOMP], false);
    let (by_seccomp, meta_seccomp, _) = recorded(&ws, &["/bin/sh", "-c", SAME_AS_SECCOMP], true);
    assert_eq!(meta_bpf["layers"]["exec_trace"], "bpf", "{meta_bpf}");
    // Execs reach the listener no more; file changes and refusals still do.
    assert_eq!(
        meta_bpf["layers"]["seccomp_notify"], "file-changes,refusals",
        "{meta_bpf}"
    );
    assert_eq!(
        meta_seccomp["layers"]["exec_trace"], "seccomp-notify",
        "{meta_seccomp}"
    );
    let (bpf, seccomp) = (untimed(&by_bpf), untimed(&by_seccomp));
    let differ: Vec<(&str, &str)> = bpf
        .iter()
        .zip(&seccomp)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    assert!(
        differ.is_empty() && bpf.len() == seccomp.len(),
        "{} and {} lines; first differences (BPF, seccomp): {:.3000?}",
        bpf.len(),
        seccomp.len(),
        differ.iter().take(3).collect::<Vec<_>>()
    );
    // The script's checks happened: each kind of exec is there. `/bin/sh` is
    // named with the file it reaches where `/bin` or `sh` is a link (`ran=`).
    let sh = linked("ran", "/bin/sh");
    let sh_interp = linked("interp_ran", "/bin/sh");
    for needle in [
        &format!("cwd=/tmp/d/e exe=./s.sh interp=/bin/sh{sh_interp} -- ./s.sh one two"),
        "exe=./t.sh interp=/usr/bin/env -- ./t.sh",
        &format!("exe=/bin/sh{sh} -- sh -c 'exit 7'"),
        &format!("cwd=/ exe=/bin/sh{sh} -- /bin/sh -c 'exit 4'"),
        " signal=9",
        " status=7",
        " truncated=",
    ] {
        assert!(by_bpf.contains(needle), "no {needle:?} in\n{by_bpf}");
    }
}

/// ATTACK (records): a program run through a symlink pointed elsewhere afterwards
/// is named by the file it reached (`ran=`), by the BPF recorder too, which reads
/// the kernel's file after the exec; and so is one run through a symlink to its
/// descriptor (`/tmp/fdl -> /proc/self/fd/5`), which seccomp notification refuses
/// and this recorder named by the link alone before.
#[test]
fn a_symlink_pointed_elsewhere_after_the_exec_leaves_the_file_that_ran_named() {
    if !is_root() {
        return;
    }
    let ws = Workspace::new();
    let script = format!(
        "{RELINKED} && exec 5</tmp/payload && ln -s /proc/self/fd/5 /tmp/fdl && /tmp/fdl f >/dev/null && rm /tmp/fdl"
    );
    let (log, meta, _) = recorded(&ws, &["/bin/sh", "-c", &script], false);
    assert_eq!(meta["layers"]["exec_trace"], "bpf", "{meta}");
    assert_names_the_files_that_ran(&log);
    let fdl: Vec<&str> = log
        .lines()
        .filter(|l| l.ends_with("-- /tmp/fdl f"))
        .collect();
    assert_eq!(fdl.len(), 1, "{log}");
    assert!(fdl[0].contains(" exe=/tmp/fdl ran=/tmp/payload "), "{log}");
}

/// A line is timed when its exec and exit happened, not when the ring was drained
/// (every 5-25 ms): each `date` prints the time just after its exec, and its line's
/// time is not later (to the line's millisecond). Timed at the drain, nearly every
/// line would be later.
#[test]
fn execs_and_exits_are_timed_when_they_happened_not_when_drained() {
    if !is_root() {
        return;
    }
    let ws = Workspace::new();
    let script = "for i in 1 2 3 4 5 6; do /bin/date +%s.%N; sleep 0.03; done";
    let home = RecordsHome::new(Runner::Root);
    let out = Vg::sandbox(Runner::Root, &ws, &[], &["/bin/sh", "-c", script])
        .records_home(&home)
        .env(BPF.0, BPF.1)
        .run();
    out.assert_success();
    let dir = home.only_session();
    assert_eq!(session_metadata(&dir)["layers"]["exec_trace"], "bpf");
    let log = commands(&dir);
    let printed: Vec<f64> = out.lines().iter().map(|l| l.parse().unwrap()).collect();
    assert_eq!(printed.len(), 6, "{out}");
    let timed: Vec<f64> = log
        .lines()
        .filter(|l| l.ends_with(" -- /bin/date +%s.%N"))
        .map(|l| {
            let stamp = l.split(' ').next().unwrap();
            let t = vg_records::time::parse_rfc3339(stamp).unwrap();
            t.duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64()
        })
        .collect();
    assert_eq!(timed.len(), 6, "{log}");
    for (line, date) in timed.iter().zip(&printed) {
        assert!(
            *line <= date + 0.001,
            "an exec line timed {line:.3} after its program printed {date:.6}\n{log}"
        );
    }
}

/// ATTACK (records): a payload run as a `#!` script's interpreter, directly or
/// through a chain of scripts, is named on the script's line by the BPF recorder
/// too (the kernel's last `bprm->interp`).
#[test]
fn a_payload_run_as_a_scripts_interpreter_is_named() {
    if !is_root() {
        return;
    }
    let ws = Workspace::new();
    let (log, meta, _) = recorded(&ws, &["/bin/sh", "-c", HIDDEN_INTERPRETER], false);
    assert_eq!(meta["layers"]["exec_trace"], "bpf", "{meta}");
    assert_names_hidden_interpreters(&log);
}

/// ATTACK (records): a payload run as a program's own ELF loader (`PT_INTERP`),
/// whatever byte order the header claims, and behind a script, is named on the
/// program's line by the BPF recorder too: the file mapped at the new task's first
/// instruction, when it is not the program's own. A program linked against the
/// system's loader, on a read-only mount, names none.
#[test]
fn a_payload_run_as_a_programs_loader_is_named() {
    if !is_root() {
        return;
    }
    let ws = Workspace::new();
    let script = format!(
        "{PYTHON} -c '{LOADER_PAYLOAD}' && /tmp/patched e && /tmp/claims-big-endian g && /tmp/script h && /bin/true f"
    );
    let (log, meta, _) = recorded(&ws, &["/bin/sh", "-c", &script], false);
    assert_eq!(meta["layers"]["exec_trace"], "bpf", "{meta}");
    assert_names_payload_loader(&log);
}

/// ATTACK (records): a program's loader (`PT_INTERP`) reached through a symlink that
/// is pointed at the system's loader afterwards: the BPF recorder names the loader
/// by the file the kernel mapped, directly and at the end of a `#!` chain (seccomp
/// notification names the link and `interp_ran=`, `exec_records.rs`).
#[test]
fn a_loader_reached_through_a_symlink_is_named_by_its_file() {
    if !is_root() {
        return;
    }
    let ws = Workspace::new();
    let script = format!(
        "{PYTHON} -c '{LOADER_LINK}' && /tmp/via-link j && /tmp/script-via-link k \
         && ln -sf /lib64/ld-linux-x86-64.so.2 /tmp/ld-symlink-x86-64.so.2"
    );
    let (log, meta, _) = recorded(&ws, &["/bin/sh", "-c", &script], false);
    assert_eq!(meta["layers"]["exec_trace"], "bpf", "{meta}");
    for argv in ["/tmp/via-link j", "/tmp/script-via-link k"] {
        let line = line_of(&log, argv);
        assert!(line.contains(" interp=/tmp/payload-loader "), "{log}");
    }
}

/// A loader that takes no libraries: it prints and exits (bare system calls).
pub(super) const FIXED_ADDRESS_LOADER: &str = r#"
static long sys3(long n, long a, long b, long c) {
    long r;
    __asm__ volatile ("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return r;
}
void _start(void) {
    sys3(1, 1, (long)"payload ran\n", 12);
    sys3(60, 0, 0, 0);
}
"#;

/// ATTACK (records, session-22 red team): a payload loader linked at a fixed
/// address (an ET_EXEC program as `PT_INTERP`) has no load address in the new
/// program's auxiliary vector (`AT_BASE` 0, as for no loader at all), and ran
/// unnamed; the recorder names whatever file starts before the program's own code,
/// so it is named. Seccomp notification names it from `PT_INTERP`.
#[test]
fn a_payload_loader_linked_at_a_fixed_address_is_named() {
    if !is_root() {
        return;
    }
    let ws = Workspace::new();
    build_static_c(
        FIXED_ADDRESS_LOADER,
        &ws.join("payload"),
        &["-nostdlib", "-no-pie", "-fno-pie"],
    );
    let script = format!(
        "cp payload /tmp/ld-payload-x86-64.so.2 && {PYTHON} -c 'open(\"/tmp/patched\", \"wb\").write(open(\"/bin/true\", \"rb\").read().replace(b\"/lib64/ld-linux-x86-64.so.2\", b\"/tmp/ld-payload-x86-64.so.2\", 1))' \
         && chmod +x /tmp/patched && /tmp/patched e"
    );
    assert_both_name_the_loader(
        &ws,
        &script,
        "/tmp/patched e",
        "/tmp/ld-payload-x86-64.so.2",
    );
}

/// A program whose header claims its loader's entry point as its own (`e_entry`),
/// with `PT_INTERP` naming the loader: built here, an ET_EXEC file of two program
/// headers whose own code is one `ud2`.
fn program_entering_its_loader(interp: &[u8], entry: u64) -> Vec<u8> {
    let base: u64 = 0x40_0000;
    let mut interp = interp.to_vec();
    interp.push(0);
    let (phoff, phnum) = (64u64, 2u16);
    let at_interp = phoff + 56 * u64::from(phnum);
    let len = interp.len() as u64;
    let size = at_interp + len + 2;
    let mut b = b"\x7fELF\x02\x01\x01".to_vec();
    b.extend([0u8; 9]);
    for half in [2u16, 62] {
        b.extend(half.to_le_bytes());
    }
    b.extend(1u32.to_le_bytes());
    for word in [entry, phoff, 0] {
        b.extend(word.to_le_bytes());
    }
    b.extend(0u32.to_le_bytes());
    for half in [64u16, 56, phnum, 64, 0, 0] {
        b.extend(half.to_le_bytes());
    }
    // PT_INTERP, then PT_LOAD (readable, executable) of the whole file.
    for (kind, flags, offset, addr, bytes, align) in [
        (3u32, 4u32, at_interp, base + at_interp, len, 1u64),
        (1, 5, 0, base, size, 0x1000),
    ] {
        b.extend(kind.to_le_bytes());
        b.extend(flags.to_le_bytes());
        for word in [offset, addr, addr, bytes, bytes, align] {
            b.extend(word.to_le_bytes());
        }
    }
    b.extend(interp);
    b.extend([0x0f, 0x0b]);
    b
}

/// ATTACK (records, session-23 red team): a program whose header names its
/// loader's entry point as its own starts the loader's code where its own entry
/// would be, and ran unnamed (the recorder compared the first instruction with
/// `AT_ENTRY`). The recorder now names the file at the first instruction whenever
/// it is not the file of the program's own code; seccomp notification names it
/// from `PT_INTERP`.
#[test]
fn a_loader_entered_at_the_entry_the_program_claims_is_named() {
    if !is_root() {
        return;
    }
    let ws = Workspace::new();
    let loader = ws.join("loader");
    build_static_c(
        FIXED_ADDRESS_LOADER,
        &loader,
        &[
            "-nostdlib",
            "-no-pie",
            "-fno-pie",
            "-Wl,-Ttext-segment=0x20000000",
        ],
    );
    let elf = std::fs::read(&loader).unwrap();
    let entry = u64::from_le_bytes(elf[24..32].try_into().unwrap());
    ws.write_mode(
        "prog",
        program_entering_its_loader(b"/tmp/evil_ld", entry),
        0o755,
    );
    let script = "cp loader /tmp/evil_ld && ./prog e";
    assert_both_name_the_loader(&ws, script, "./prog e", "/tmp/evil_ld");
}

/// Runs `script` recorded by each recorder, and checks that the line of the exec
/// whose argv is `argv` names `loader` as what started first.
fn assert_both_name_the_loader(ws: &Workspace, script: &str, argv: &str, loader: &str) {
    for seccomp in [false, true] {
        let (log, meta, _) = recorded(ws, &["/bin/sh", "-c", script], seccomp);
        assert_eq!(
            meta["layers"]["exec_trace"],
            if seccomp { "seccomp-notify" } else { "bpf" }
        );
        let line = line_of(&log, argv);
        assert!(
            line.contains(&format!(" interp={loader} ")),
            "seccomp={seccomp}: {line}"
        );
    }
}

/// ATTACK (records, session-23 red team): a link to a file deeper than
/// `PATH_MAX` runs under the BPF recorder, whose line names the file by its last
/// names (`ran='(deeper)/…'`), where seccomp notification refuses it
/// (`exec_records.rs`).
#[test]
fn a_link_to_a_file_deeper_than_path_max_is_named_by_its_last_names() {
    if !is_root() {
        return;
    }
    let ws = Workspace::new();
    let (log, meta, _) = recorded(&ws, &[PYTHON, "-c", DEEP_LINK], false);
    assert_eq!(meta["layers"]["exec_trace"], "bpf", "{meta}");
    let line = line_of(&log, "/tmp/x deep-ran");
    assert!(line.contains(" exe=/tmp/x ran='(deeper)/"), "{line}");
    assert!(line.contains("/payload' "), "{line}");
    let script = line_of(&log, "/tmp/s");
    assert!(
        script.contains(" interp=/tmp/x interp_ran='(deeper)/"),
        "{script}"
    );
}

/// ATTACK (records, session-22 red team): a supervisor in a pid namespace of its
/// own with its own `/proc` (root in a container) sees fewer levels above the
/// sandbox than the kernel does; its sandbox's execs are recorded all the same
/// (the recorder matched the level it was told, and recorded nothing).
#[test]
fn a_supervisor_in_a_pid_namespace_of_its_own_records_its_sandbox() {
    if !is_root() {
        return;
    }
    let ws = Workspace::new();
    let home = RecordsHome::new(Runner::Root);
    Vg::sandbox(
        Runner::Root,
        &ws,
        &[],
        &["/bin/sh", "-c", "/bin/echo hidden"],
    )
    .records_home(&home)
    .env(BPF.0, BPF.1)
    .through_shell("exec unshare --pid --fork --mount-proc \"$@\"")
    .run()
    .assert_success()
    .assert_stdout_contains("hidden");
    let dir = home.only_session();
    assert_eq!(session_metadata(&dir)["layers"]["exec_trace"], "bpf");
    let log = commands(&dir);
    assert!(log.contains(" -- /bin/echo hidden"), "{log}");
}

/// What differs, by construction: a `#!` script found on `PATH` has its path as
/// `argv[0]` (the kernel drops the caller's `argv[0]` when it starts the
/// interpreter); an exec the kernel fails (not executable) ran nothing and is not
/// recorded. Either way the program that ran is the one named.
#[test]
fn a_script_on_path_and_a_failed_exec_are_recorded_as_the_kernel_ran_them() {
    if !is_root() {
        return;
    }
    let ws = Workspace::new();
    ws.write_mode("bin/tool", "#!/bin/sh\necho tool-ran \"$@\"\n", 0o755);
    ws.write_mode("notexec", "echo never\n", 0o644);
    let script = "PATH=\"$PWD/bin:$PATH\" tool arg; ./notexec 2>/dev/null; echo status=$?";
    let (log, _, _) = recorded(&ws, &["/bin/sh", "-c", script], false);
    let tool: Vec<&str> = log
        .lines()
        .filter(|l| l.ends_with("/bin/tool arg"))
        .collect();
    assert_eq!(tool.len(), 1, "{log}");
    let path = format!("{}/bin/tool", ws.path().display());
    assert!(
        tool[0].ends_with(&format!(
            "exe={path} interp=/bin/sh{} -- {path} arg",
            linked("interp_ran", "/bin/sh")
        )),
        "{log}"
    );
    assert!(!log.lines().any(|l| l.ends_with("-- ./notexec")), "{log}");
}

/// ATTACK (records): a thread flipping the exec's path while another execs cannot
/// make the record name another program than the one that ran: the recorder reads
/// the path the kernel copied, after the exec (under seccomp notification this race
/// is caught afterwards at best, `exec_records.rs`).
#[test]
fn a_path_flipped_as_the_exec_happens_is_recorded_as_what_ran() {
    if !is_root() {
        return;
    }
    let ws = Workspace::new();
    ws.write("swap.py", PATH_SWAP);
    let (log, meta, events) = recorded(&ws, &[PYTHON, "swap.py"], false);
    assert_eq!(meta["layers"]["exec_trace"], "bpf", "{meta}");
    let ran = ws.read("ran").unwrap();
    let mut echoes = 0;
    for line in ran.lines() {
        let (pid, prog) = line.split_once(' ').unwrap();
        echoes += usize::from(prog == "echo");
        let exec = log
            .lines()
            .rev()
            .find(|l| l.contains(" exec ") && l.contains(&format!(" pid={pid} ")))
            .unwrap_or_else(|| panic!("no exec line for pid {pid} in\n{log}"));
        assert!(
            exec.contains(&format!(" exe=/usr/bin/{prog} ")),
            "pid {pid} ran {prog}: {exec}"
        );
    }
    assert!(
        echoes > 0 && echoes < 60,
        "no flip happened ({echoes} echoes in 60)"
    );
    assert!(
        events.iter().all(|e| e["type"] != "exec-mismatch"),
        "{events:?}"
    );
}

/// Two sessions at once: each record holds its own execs and none of the other's.
#[test]
fn two_sessions_at_once_record_only_their_own_execs() {
    if !is_root() {
        return;
    }
    let loop_of = |marker: &str| {
        format!("i=0; while [ $i -lt 300 ]; do /bin/echo {marker} $i >/dev/null; i=$((i+1)); done")
    };
    let (ws_a, ws_b) = (Workspace::new(), Workspace::new());
    let (home_a, home_b) = (
        RecordsHome::new(Runner::Root),
        RecordsHome::new(Runner::Root),
    );
    let script_a = loop_of("marker-a");
    let script_b = loop_of("marker-b");
    let a = Vg::sandbox(Runner::Root, &ws_a, &[], &["/bin/sh", "-c", &script_a])
        .records_home(&home_a)
        .env(BPF.0, BPF.1)
        .spawn();
    let b = Vg::sandbox(Runner::Root, &ws_b, &[], &["/bin/sh", "-c", &script_b])
        .records_home(&home_b)
        .env(BPF.0, BPF.1)
        .spawn();
    a.finish(Duration::from_secs(120)).assert_success();
    b.finish(Duration::from_secs(120)).assert_success();
    for (home, own, other) in [
        (&home_a, "marker-a", "marker-b"),
        (&home_b, "marker-b", "marker-a"),
    ] {
        let dir = home.only_session();
        assert_eq!(session_metadata(&dir)["layers"]["exec_trace"], "bpf");
        let log = commands(&dir);
        let own_execs = log
            .lines()
            .filter(|l| l.contains(&format!("-- /bin/echo {own} ")))
            .count();
        assert_eq!(own_execs, 300, "{log}");
        assert!(!log.contains(other), "{other} in {own}'s record:\n{log}");
    }
}

/// ATTACK (records): nothing started inside leaves the recorder's filter: a new
/// session, a double fork whose parent is gone, a nested pid namespace (if the
/// sandbox allows one), a thread's exec. Each marker program is recorded.
#[test]
fn nothing_started_inside_escapes_the_recorder() {
    if !is_root() {
        return;
    }
    let ws = Workspace::new();
    let script = r#"
setsid /bin/echo esc-setsid
( /bin/sh -c '/bin/echo esc-double-fork' & ) ; sleep 0.3
if unshare -p -f --mount-proc /bin/echo esc-nested 2>/dev/null; then echo nested=ran; else echo nested=refused; fi
/usr/bin/python3 -c "import os, threading
t = threading.Thread(target=lambda: os.execv('/bin/echo', ['/bin/echo', 'esc-thread'])); t.start(); t.join()"
"#;
    let home = RecordsHome::new(Runner::Root);
    let out = Vg::sandbox(Runner::Root, &ws, &[], &["/bin/sh", "-c", script])
        .records_home(&home)
        .env(BPF.0, BPF.1)
        .run();
    out.assert_success();
    let log = commands(&home.only_session());
    let mut markers = vec!["esc-setsid", "esc-double-fork", "esc-thread"];
    if out.field("nested") == "ran" {
        markers.push("esc-nested");
    } else {
        // Refused by the sandbox: the attempt itself is recorded.
        assert!(log.contains("-- unshare -p -f"), "{log}");
    }
    for marker in markers {
        out.assert_stdout_contains(marker);
        assert!(
            log.lines()
                .any(|l| l.contains(" exec ") && l.ends_with(&format!("/bin/echo {marker}"))),
            "{marker} not recorded:\n{log}"
        );
    }
}

/// ATTACK (records): with the supervisor stopped, execs fill the ring buffer; past
/// that each exec is killed before it runs, never run unrecorded, and the record
/// says how many were. Every exec that ran is in `commands.log`.
#[test]
fn a_full_ring_buffer_kills_execs_rather_than_run_them_unrecorded() {
    if !is_root() {
        return;
    }
    let ws = Workspace::new();
    // Descriptors opened once: an open for writing would wait for the stopped
    // supervisor (file changes are still reported through seccomp).
    // Each exec with a 32 KiB argument: its record is as long, so the ring (2 MiB)
    // fills within a hundred execs.
    let script = "exec 3>>ok.log 4>>killed.log; a=$(printf '%32768s' x); i=0; \
        while [ $i -lt 4000 ]; do if /bin/true \"$a\"; then echo ok >&3; else echo killed >&4; fi; i=$((i+1)); done";
    let home = RecordsHome::new(Runner::Root);
    let running = Vg::sandbox(Runner::Root, &ws, &[], &["/bin/sh", "-c", script])
        .records_home(&home)
        .env(BPF.0, BPF.1)
        .spawn();
    assert!(
        wait_until(Duration::from_secs(30), || ws.exists("ok.log")),
        "the loop did not start"
    );
    running.signal("STOP");
    let killed = wait_until(Duration::from_secs(120), || {
        ws.read("killed.log")
            .is_some_and(|k| k.lines().count() >= 10)
    });
    running.signal("CONT");
    let out = running.finish(Duration::from_secs(300));
    assert!(
        killed,
        "no exec was killed with the supervisor stopped\n{out}"
    );
    let dir = home.only_session();
    let log = commands(&dir);
    let ran = ws.read("ok.log").unwrap().lines().count();
    let recorded = log.lines().filter(|l| l.contains(" -- /bin/true ")).count();
    assert_eq!(recorded, ran, "execs that ran vs exec lines");
    let said: Vec<Value> = events(&dir)
        .into_iter()
        .filter(|e| {
            e["error"]
                .as_str()
                .is_some_and(|s| s.contains("killed at their exec"))
        })
        .collect();
    assert!(!said.is_empty(), "the kills are not in events.jsonl");
}

/// The BPF programs the supervisor's descriptors (its links) run, by id.
fn programs_of(pid: u32) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .filter_map(|info| {
                    info.lines()
                        .find_map(|l| l.strip_prefix("prog_id:"))
                        .map(|v| v.trim().to_owned())
                })
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids.dedup();
    ids
}

/// Runs `script` (Python, with `bpf(cmd, attr)` and `ns_id(path)` defined) and
/// returns its output's lines.
fn bpf_python(script: &str, args: &[String]) -> Vec<String> {
    let prelude = r#"
import ctypes, fcntl, glob, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def bpf(cmd, attr):
    return libc.syscall(321, cmd, ctypes.byref(attr), ctypes.sizeof(attr))
def ns_id(path):
    fd = os.open(path, os.O_RDONLY)
    buf = bytearray(8)
    fcntl.ioctl(fd, 0x8008b70d, buf)
    os.close(fd)
    return struct.unpack("Q", buf)[0]
"#;
    let out = std::process::Command::new(PYTHON)
        .arg("-c")
        .arg(format!("{prelude}{script}"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Which of `ids` still name a loaded BPF program (`BPF_PROG_GET_FD_BY_ID`).
fn still_loaded(ids: &[String]) -> Vec<String> {
    bpf_python(
        r#"
for i in sys.argv[1:]:
    attr = (ctypes.c_uint32 * 4)(int(i), 0, 0, 0)
    fd = bpf(13, attr)
    if fd >= 0:
        os.close(fd); print(i)
    elif ctypes.get_errno() != 2:
        print(i)
"#,
        ids,
    )
}

/// The sessions the pinned recorder watches: the keys of every build's
/// `SESSIONS` map (pid namespace ids).
fn watched_sessions() -> Vec<String> {
    bpf_python(
        r#"
for path in glob.glob("/run/vectraguard/bpf/*/SESSIONS"):
    name = ctypes.create_string_buffer(path.encode())
    attr = (ctypes.c_uint64 * 2)(ctypes.addressof(name), 0)
    fd = bpf(7, attr)
    if fd < 0:
        continue
    key = None
    while True:
        nxt = ctypes.c_uint64(0)
        cur = ctypes.c_uint64(key or 0)
        attr = (ctypes.c_uint64 * 4)(fd, ctypes.addressof(cur) if key is not None else 0, ctypes.addressof(nxt), 0)
        if bpf(4, attr) < 0:
            break
        key = nxt.value
        print(key)
    os.close(fd)
"#,
        &[],
    )
}

/// The id of the pid namespace of the supervisor `pid`'s sandbox (its child's).
fn sandbox_namespace(pid: u32) -> Option<String> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    let mine = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let init = children
        .split_whitespace()
        .find(|c| std::fs::read_link(format!("/proc/{c}/ns/pid")).is_ok_and(|ns| ns != mine))?;
    bpf_python(
        "print(ns_id(sys.argv[1]))",
        &[format!("/proc/{init}/ns/pid")],
    )
    .pop()
}

/// The recorder is loaded once and shared: a second session runs the first's
/// programs. ATTACK (lifetime): a supervisor killed with SIGKILL cannot remove its
/// session's entry; the next session's start removes it, and the programs stay
/// attached for the sessions to come.
#[test]
fn the_recorder_is_shared_and_a_killed_supervisor_s_entry_is_swept_by_the_next_session() {
    if !is_root() {
        return;
    }
    let ws = Workspace::new();
    let home = RecordsHome::new(Runner::Root);
    let running = Vg::sandbox(Runner::Root, &ws, &[], &["/bin/sleep", "60"])
        .records_home(&home)
        .env(BPF.0, BPF.1)
        .spawn();
    let (mut programs, mut key) = (Vec::new(), None);
    assert!(
        wait_until(Duration::from_secs(30), || {
            programs = programs_of(running.pid());
            key = sandbox_namespace(running.pid());
            programs.len() == 2 && key.is_some()
        }),
        "the supervisor holds no BPF programs ({programs:?}) or sandbox ({key:?})"
    );
    let key = key.unwrap();
    assert!(
        watched_sessions().contains(&key),
        "session {key} is not watched"
    );
    let second = Vg::sandbox(Runner::Root, &ws, &[], &["/bin/sleep", "60"])
        .records_home(&home)
        .env(BPF.0, BPF.1)
        .spawn();
    let mut shared = Vec::new();
    assert!(
        wait_until(Duration::from_secs(30), || {
            shared = programs_of(second.pid());
            shared.len() == 2
        }),
        "the second supervisor holds no BPF programs"
    );
    assert_eq!(
        shared, programs,
        "the second session loaded programs of its own"
    );
    second.signal("TERM");
    let _ = second.finish(Duration::from_secs(30));
    running.signal("KILL");
    let _ = running.finish(Duration::from_secs(30));
    let next = RecordsHome::new(Runner::Root);
    Vg::sandbox(Runner::Root, &ws, &[], &["/bin/sh", "-c", "/bin/true"])
        .records_home(&next)
        .env(BPF.0, BPF.1)
        .run()
        .assert_success();
    let dir = next.only_session();
    assert_eq!(session_metadata(&dir)["layers"]["exec_trace"], "bpf");
    assert!(
        commands(&dir).contains(" -- /bin/true"),
        "{}",
        commands(&dir)
    );
    assert!(
        !watched_sessions().contains(&key),
        "the killed supervisor's session {key} outlived the next session's start"
    );
    assert_eq!(
        still_loaded(&programs),
        programs,
        "the programs were detached"
    );
}

/// Root's native run records through the BPF recorder by default (with the
/// variable that overrides the configuration empty, as a user's shell has it),
/// through seccomp notification with `exec_trace = "seccomp"` in the user's file,
/// and a project file cannot choose (the sandbox can write it).
#[test]
fn root_records_by_bpf_by_default_and_the_user_s_config_can_turn_it_off() {
    if !is_root() {
        return;
    }
    let ws = Workspace::new();
    let trace_of = |xdg: Option<&super::harness::TempDir>| {
        let home = RecordsHome::new(Runner::Root);
        let mut vg = Vg::sandbox(Runner::Root, &ws, &[], &["/bin/true"]);
        vg.records_home(&home).env(BPF.0, "");
        if let Some(xdg) = xdg {
            vg.env("XDG_CONFIG_HOME", &xdg.arg(""));
        }
        vg.run().assert_success();
        let meta = session_metadata(&home.only_session());
        meta["layers"]["exec_trace"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(trace_of(None), "bpf");
    let xdg = super::exec_records::user_config(Runner::Root, "exec_trace = \"seccomp\"\n");
    assert_eq!(trace_of(Some(&xdg)), "seccomp-notify");
    let xdg = super::exec_records::user_config(Runner::Root, "exec_trace = \"bpf\"\n");
    assert_eq!(trace_of(Some(&xdg)), "bpf");
    ws.write("vectraguard.toml", "exec_trace = \"seccomp\"\n");
    let home = RecordsHome::new(Runner::Root);
    let out = Vg::sandbox(Runner::Root, &ws, &[], &["/bin/true"])
        .records_home(&home)
        .run();
    assert_ne!(out.code(), Some(0), "{out}");
    out.assert_stderr_contains("'exec_trace' cannot be set in a project file");
}

/// An unprivileged run cannot load BPF programs: its execs go to the seccomp
/// listener, still recorded, and the record says which way.
#[test]
fn an_unprivileged_run_records_execs_through_seccomp() {
    let ws = Workspace::new();
    let home = RecordsHome::new(Runner::Unprivileged);
    Vg::sandbox(
        Runner::Unprivileged,
        &ws,
        &[],
        &["/bin/sh", "-c", "/bin/echo hello; exit 3"],
    )
    .records_home(&home)
    .env(BPF.0, BPF.1)
    .run()
    .assert_code(3);
    let dir = home.only_session();
    let meta = session_metadata(&dir);
    assert_eq!(meta["layers"]["exec_trace"], "seccomp-notify", "{meta}");
    assert!(
        meta["layers"]["seccomp_notify"]
            .as_str()
            .is_some_and(|s| s.split(',').any(|c| c == "exec")),
        "{meta}"
    );
    let log = commands(&dir);
    assert!(log.contains(" -- /bin/echo hello"), "{log}");
    assert!(log.contains("status=3"), "{log}");
}
