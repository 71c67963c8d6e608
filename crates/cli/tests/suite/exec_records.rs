//! What the exec tracer writes to `commands.log` when the sandbox tries to make the
//! record cost too much, probe the host through it, or disguise what ran.

use std::path::Path;

use serde_json::Value;

use super::harness::{
    Output, PYTHON, RecordsHome, Runner, TempDir, Vg, Workspace, chown_to, each_identity, is_root,
    session_metadata, unique, wait_until,
};

/// Asks for seccomp notification (the default) whatever `exec_trace` the environment
/// would set, for the tests of what only seccomp notification does (`exec_bpf.rs`
/// tests the BPF recorder, which `BPF` asks for).
pub(super) const SECCOMP: (&str, &str) = ("VECTRAGUARD_EXEC_TRACE", "seccomp");
/// Asks a root run for the BPF recorder (`exec_trace = "bpf"` for one run).
pub(super) const BPF: (&str, &str) = ("VECTRAGUARD_EXEC_TRACE", "bpf");

pub(super) fn commands(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("commands.log")).unwrap()
}

pub(super) fn events(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The `exec` lines of `commands.log` whose argv (after ` -- `) starts with `argv`.
fn execs_of<'a>(log: &'a str, argv: &str) -> Vec<&'a str> {
    log.lines()
        .filter(|l| {
            l.contains(" exec ")
                && l.split_once(" -- ")
                    .is_some_and(|(_, a)| a.starts_with(argv))
        })
        .collect()
}

/// The value of `key=` on a `commands.log` line (before ` -- `).
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let head = line.split_once(" -- ").map_or(line, |(h, _)| h);
    let at = head
        .find(&format!(" {key}="))
        .unwrap_or_else(|| panic!("no {key}= in {line}"));
    let value = &head[at + key.len() + 2..];
    // A quoted value may hold spaces: take through its closing quote.
    if let Some(quoted) = value.strip_prefix('\'') {
        let end = quoted.find('\'').unwrap();
        return &value[..end + 2];
    }
    value.split(' ').next().unwrap()
}

/// One seccomp-notification session of `cmd` as `runner`, which must succeed: its
/// records home (removed when dropped) and its output.
fn by_seccomp(runner: Runner, cmd: &[&str]) -> (RecordsHome, Output) {
    let ws = Workspace::new();
    let home = RecordsHome::new(runner);
    let out = Vg::sandbox(runner, &ws, &[], cmd)
        .records_home(&home)
        .env(SECCOMP.0, SECCOMP.1)
        .run();
    out.assert_success();
    (home, out)
}

/// [`by_seccomp`] of `sh -c script`, which must print `ran`: its records home and
/// session folder.
fn ran_by_seccomp(runner: Runner, script: &str) -> (RecordsHome, std::path::PathBuf) {
    let (home, out) = by_seccomp(runner, &["sh", "-c", script]);
    out.assert_stdout_contains("ran");
    let dir = home.only_session();
    (home, dir)
}

/// What a test script printed for `case`, as `CASE STATUS` lines: its exit status.
fn status_of<'a>(runner: Runner, out: &'a Output, case: &str) -> &'a str {
    out.lines()
        .into_iter()
        .find_map(|l| l.strip_prefix(&format!("{case} ")))
        .unwrap_or_else(|| panic!("[{runner}] no status for {case}\n{out}"))
}

fn run_recorded(
    runner: Runner,
    ws: &Workspace,
    home: &RecordsHome,
    options: &[&str],
    cmd: &[&str],
) -> Output {
    Vg::sandbox(runner, ws, options, cmd)
        .records_home(home)
        .run()
}

// ---------------------------------------------------------------------------------------
// A: the size of commands.log.

#[test]
fn huge_argv_execs_cannot_grow_commands_log_past_its_limits() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        // 20 execs of 8 arguments of 128 000 bytes: 20 MB of argv.
        let script = r#"big=$(head -c 128000 /dev/zero | tr '\0' a)
i=0
while [ $i -lt 20 ]; do
  /bin/true "$big" "$big" "$big" "$big" "$big" "$big" "$big" "$big" || exit 9
  i=$((i+1))
done
echo done-looping"#;
        let out = run_recorded(
            runner,
            &ws,
            &home,
            &["--max-output", "64k"],
            &["sh", "-c", script],
        );
        out.assert_success().assert_stdout_contains("done-looping");
        let dir = home.only_session();
        let log = commands(&dir);
        assert!(
            log.len() < 64 * 1024 + 20 * 1024,
            "commands.log is {} bytes",
            log.len()
        );
        let written = execs_of(&log, "/bin/true ");
        assert!(!written.is_empty(), "{log}");
        for line in &written {
            // Each line holds at most 16 KiB of argv, and says the argv's full size.
            assert!(line.len() < 17 * 1024, "{} bytes", line.len());
            assert_eq!(field(line, "truncated"), "9,1024009", "{line:.300}");
        }
        let hit: Vec<Value> = events(&dir)
            .into_iter()
            .filter(|e| e["type"] == "limit-hit" && e["limit"] == "commands")
            .collect();
        assert_eq!(hit.len(), 1, "one limit-hit event for commands.log");
        assert_eq!(hit[0]["bytes"], 64 * 1024);
        // Every exec was traced: those not written are counted.
        let dropped = hit[0]["dropped_execs"].as_u64().unwrap();
        assert_eq!(written.len() as u64 + dropped, 20, "{log:.2000}");
        // The logs command reads the cut lines back.
        let show = Vg::new(runner, home.path())
            .args([
                "logs",
                "show",
                dir.file_name().unwrap().to_str().unwrap(),
                "--commands",
                "--json",
            ])
            .records_home(&home)
            .run();
        show.assert_success();
        let json: Value = serde_json::from_str(&show.stdout).unwrap();
        let cut = json["commands"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["argv"][0] == "/bin/true")
            .unwrap_or_else(|| panic!("{show}"));
        assert_eq!(cut["truncated"]["args"], 9, "{cut}");
        assert_eq!(cut["truncated"]["bytes"], 1_024_009, "{cut}");
        assert_eq!(cut["argv"][1].as_str().unwrap().len(), 4096, "{cut}");
    });
}

// ---------------------------------------------------------------------------------------
// B: relative exec paths resolve inside the sandbox.

#[test]
fn a_relative_symlink_to_an_absolute_path_runs_the_sandbox_file() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let target = format!("/tmp/vg-inside-only-{}", unique());
        assert!(!Path::new(&target).exists());
        // /tmp is the sandbox's own: the target exists there, not on the host.
        let script = format!(
            "printf '#!/bin/sh\\necho ran-$1\\n' > {target} && chmod +x {target} && cd /tmp && ln -s {target} r && ./r 1"
        );
        let out = run_recorded(runner, &ws, &home, &[], &["sh", "-c", &script]);
        out.assert_success().assert_stdout_contains("ran-1");
        let log = commands(&home.only_session());
        let line = execs_of(&log, "./r 1");
        assert_eq!(line.len(), 1, "{log}");
        assert_eq!(field(line[0], "cwd"), "/tmp", "{log}");
        assert_eq!(field(line[0], "exe"), "./r", "{log}");
    });
}

#[test]
fn the_sandbox_cannot_learn_whether_a_host_file_exists_through_exec() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let id = unique();
        // On the host's /tmp, which the sandbox does not see: one name exists, one not.
        let on_host = format!("/tmp/vg-probe-{id}-there");
        let not_on_host = format!("/tmp/vg-probe-{id}-absent");
        std::fs::write(&on_host, b"host file").unwrap();
        let _cleanup = Remove(on_host.clone());
        // Inside, both names are executables of the sandbox's own /tmp, each behind a
        // relative symlink: what runs must not depend on the host.
        let mut script = String::from("cd /tmp\n");
        for (i, path) in [&on_host, &not_on_host].iter().enumerate() {
            script.push_str(&format!(
                "printf '#!/bin/sh\\necho ran-{i}\\n' > {path}; chmod +x {path}; ln -s {path} p{i}\n./p{i}; echo status-{i}=$?\n"
            ));
        }
        let out = run_recorded(runner, &ws, &home, &[], &["sh", "-c", &script]);
        out.assert_success();
        assert_eq!(out.field("status-0"), "0", "{out}");
        assert_eq!(out.field("status-1"), "0", "{out}");
        out.assert_stdout_contains("ran-0")
            .assert_stdout_contains("ran-1");
        let log = commands(&home.only_session());
        assert_eq!(execs_of(&log, "./p0").len(), 1, "{log}");
        assert_eq!(execs_of(&log, "./p1").len(), 1, "{log}");
    });
}

struct Remove(String);

impl Drop for Remove {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

// ---------------------------------------------------------------------------------------
// C: disguised execs.

/// Python that runs `execveat(2)` in a child and waits for it.
const EXECVEAT: &str = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
NR = {"x86_64": 322, "aarch64": 281}[os.uname().machine]
AT_EMPTY_PATH = 0x1000
def execveat(fd, path, argv, flags):
    pid = os.fork()
    if pid == 0:
        arr = (ctypes.c_char_p * (len(argv) + 1))(*[a.encode() for a in argv], None)
        env = (ctypes.c_char_p * 1)(None)
        libc.syscall(ctypes.c_long(NR), ctypes.c_long(fd), path, arr, env, ctypes.c_long(flags))
        os.write(2, b"execveat failed: %d\n" % ctypes.get_errno())
        os._exit(99)
    _, status = os.waitpid(pid, 0)
    print(argv[0], "status", os.waitstatus_to_exitcode(status), flush=True)
"#;

#[test]
fn execveat_records_the_file_really_executed() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let script = format!(
            r#"{EXECVEAT}
fd = os.open("/usr/bin/true", os.O_RDONLY)
execveat(fd, b"", ["innocuous-file"], AT_EMPTY_PATH)
mfd = os.memfd_create("hidden-prog", 0)
with open("/usr/bin/true", "rb") as f:
    os.write(mfd, f.read())
execveat(mfd, b"", ["innocuous-memfd"], AT_EMPTY_PATH)
dirfd = os.open("/usr/bin", os.O_RDONLY | os.O_DIRECTORY)
execveat(dirfd, b"true", ["innocuous-dir"], 0)
"#
        );
        let out = run_recorded(runner, &ws, &home, &[], &[PYTHON, "-c", &script]);
        out.assert_success();
        for name in ["innocuous-file", "innocuous-memfd", "innocuous-dir"] {
            out.assert_stdout_contains(&format!("{name} status 0"));
        }
        let log = commands(&home.only_session());
        let exe = |argv0: &str| {
            let lines = execs_of(&log, argv0);
            assert_eq!(lines.len(), 1, "{argv0}:\n{log}");
            field(lines[0], "exe").to_owned()
        };
        assert_eq!(exe("innocuous-file"), "/usr/bin/true", "{log}");
        assert_eq!(
            exe("innocuous-memfd"),
            "'/memfd:hidden-prog (deleted)'",
            "{log}"
        );
        assert_eq!(exe("innocuous-dir"), "/usr/bin/true", "{log}");
    });
}

#[test]
fn an_exec_through_a_proc_descriptor_link_runs_and_names_the_file() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        // fexecve's fallback and `/dev/fd/N` go through /proc/self, which the supervisor
        // must not read as its own; /proc/PID/fd/N must not hide a memfd behind its path.
        let script = r#"
import os
mfd = os.memfd_create("hidden-prog", 0)
with open("/usr/bin/true", "rb") as f:
    os.write(mfd, f.read())
for label, path in [
    ("via-self", "/proc/self/fd/%d"),
    ("via-thread-self", "/proc/thread-self/fd/%d"),
    ("via-dev-fd", "/dev/fd/%d"),
    ("via-pid", "/proc/PID/fd/%d"),
    ("via-root-link", "/proc/PID/root/usr/bin/true?%d"),
]:
    pid = os.fork()
    if pid == 0:
        try:
            os.execv((path % mfd).replace("PID", str(os.getpid())).split("?")[0], [label])
        except OSError as e:
            os.write(1, b"%s failed %d\n" % (label.encode(), e.errno))
        os._exit(99)
    _, status = os.waitpid(pid, 0)
    print(label, "status", os.waitstatus_to_exitcode(status), flush=True)
"#;
        // Seccomp notification's refusal (the BPF recorder runs such a path and
        // names its file: `exec_bpf.rs`).
        let out = Vg::sandbox(runner, &ws, &[], &[PYTHON, "-c", script])
            .records_home(&home)
            .env(SECCOMP.0, SECCOMP.1)
            .run();
        out.assert_success();
        let log = commands(&home.only_session());
        // A path that continues past such a link cannot be named: refused, not run.
        out.assert_stdout_contains("via-root-link failed 1");
        assert!(execs_of(&log, "via-root-link").is_empty(), "{log}");
        for label in ["via-self", "via-thread-self", "via-dev-fd", "via-pid"] {
            out.assert_stdout_contains(&format!("{label} status 0"));
            let lines = execs_of(&log, label);
            assert_eq!(lines.len(), 1, "{label}:\n{log}");
            assert_eq!(
                field(lines[0], "exe"),
                "'/memfd:hidden-prog (deleted)'",
                "{label}:\n{log}"
            );
        }
    });
}

#[test]
fn an_exec_or_exit_from_another_thread_is_recorded_under_the_process_pid() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        // A thread execs a shell, which takes the process's pid; another process's
        // thread calls exit_group for the whole process.
        let exec_from_thread = "import os, threading\n\
            def run(): os.execv('/bin/sh', ['sh', '-c', 'echo execd-pid=$$; exit 7'])\n\
            t = threading.Thread(target=run); t.start(); t.join()";
        let exit_from_thread = "import os, threading\n\
            print('exiting-pid=%d' % os.getpid(), flush=True)\n\
            t = threading.Thread(target=lambda: os._exit(5)); t.start(); t.join()";
        let script = format!(
            "{PYTHON} -c \"$1\"; echo first=$?; {PYTHON} -c \"$2\" thread-exit; echo second=$?"
        );
        let out = run_recorded(
            runner,
            &ws,
            &home,
            &[],
            &[
                "sh",
                "-c",
                &script,
                "sh",
                exec_from_thread,
                exit_from_thread,
            ],
        );
        out.assert_success();
        assert_eq!(out.field("first"), "7", "{out}");
        assert_eq!(out.field("second"), "5", "{out}");
        let log = commands(&home.only_session());
        let execd = out.field("execd-pid");
        let line = execs_of(&log, "sh -c 'echo execd-pid");
        assert_eq!(line.len(), 1, "{log}");
        assert_eq!(field(line[0], "pid"), execd, "{log}");
        assert!(
            log.lines()
                .any(|l| l.ends_with(&format!(" exit pid={execd} status=7"))),
            "{log}"
        );
        let exiting = out.field("exiting-pid");
        let python = log
            .lines()
            .find(|l| l.ends_with(" thread-exit"))
            .unwrap_or_else(|| panic!("{log}"));
        assert_eq!(field(python, "pid"), exiting, "{log}");
        assert!(
            log.lines()
                .any(|l| l.ends_with(&format!(" exit pid={exiting} status=5"))),
            "{log}"
        );
    });
}

#[test]
fn logs_never_print_invisible_characters_raw() {
    // Tag characters (hidden ASCII), a variation selector, Hangul fillers, U+034F, a
    // zero-width space, a bidi isolate and a soft hyphen.
    let hidden = [
        '\u{E0041}',
        '\u{E007F}',
        '\u{FE0F}',
        '\u{3164}',
        '\u{115F}',
        '\u{034F}',
        '\u{200B}',
        '\u{2066}',
        '\u{00AD}',
        '\u{E0100}',
    ];
    let arg: String = hidden.iter().flat_map(|&c| ['x', c]).collect();
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        run_recorded(runner, &ws, &home, &[], &["/bin/true", &arg]).assert_success();
        let dir = home.only_session();
        let id = dir.file_name().unwrap().to_str().unwrap().to_owned();
        let raw = commands(&dir);
        assert!(
            !raw.contains('\u{E0041}'),
            "commands.log holds it raw: {raw}"
        );
        for args in [
            vec!["logs", "list"],
            vec!["logs", "list", "--no-trunc"],
            vec!["logs", "show", &id],
            vec!["logs", "show", &id, "--commands"],
        ] {
            let out = Vg::new(runner, home.path())
                .args(&args)
                .records_home(&home)
                .run();
            out.assert_success();
            for c in hidden {
                assert!(
                    !out.stdout.contains(c),
                    "{args:?} prints U+{:04X} raw\n{out}",
                    u32::from(c)
                );
            }
        }
    });
}

/// A thread flips the exec's path between `/usr/bin/true` and `/usr/bin/echo` while
/// the other calls `execve`: what the tracer read (the `exec` line) and what the kernel
/// ran can differ. Each child reports what really ran (echo prints its pid).
pub(super) const PATH_SWAP: &str = r#"
import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
ran = {}
for _ in range(60):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(w, 1)
        path = ctypes.create_string_buffer(b"/usr/bin/true")
        def flip():
            while True:
                ctypes.memmove(path, b"/usr/bin/echo", 13)
                ctypes.memmove(path, b"/usr/bin/true", 13)
        threading.Thread(target=flip, daemon=True).start()
        me = str(os.getpid()).encode()
        argv = (ctypes.c_char_p * 3)(b"prog", me, None)
        libc.execve(path, argv, None)
        os._exit(99)
    os.close(w)
    out = os.read(r, 100).strip()
    os.close(r)
    os.waitpid(pid, 0)
    ran[pid] = "echo" if out else "true"
with open("ran", "w") as f:
    for pid, prog in sorted(ran.items()):
        f.write("%d %s\n" % (pid, prog))
"#;

/// A user config (in an `XDG_CONFIG_HOME` of the runner's) with `exec_check = CHECK`.
fn exec_check_config(runner: Runner, check: &str) -> TempDir {
    user_config(runner, &format!("exec_check = \"{check}\"\n"))
}

/// An `XDG_CONFIG_HOME` whose `vectraguard/config.toml` is `toml`, the runner's.
pub(super) fn user_config(runner: Runner, toml: &str) -> TempDir {
    let invoker = runner.invoker();
    let xdg = TempDir::owned_by("xdg", &invoker, 0o700);
    let config = xdg.write("vectraguard/config.toml", toml);
    chown_to(&xdg.join("vectraguard"), &invoker);
    chown_to(&config, &invoker);
    xdg
}

/// ATTACK (records): with `exec_check = "exit"`, an exec whose path is swapped as it
/// happens must not leave the record claiming the wrong program ran: an
/// `exec-mismatch` event names what did.
#[test]
fn a_path_swapped_as_the_exec_happens_is_recorded_as_a_mismatch() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write("swap.py", PATH_SWAP);
        let home = RecordsHome::new(runner);
        let xdg = exec_check_config(runner, "exit");
        // The race is seccomp notification's (root's BPF recorder reads the exec
        // after the kernel: `exec_bpf.rs`).
        Vg::sandbox(runner, &ws, &[], &[PYTHON, "swap.py"])
            .records_home(&home)
            .env("XDG_CONFIG_HOME", &xdg.arg(""))
            .env(SECCOMP.0, SECCOMP.1)
            .run()
            .assert_success();
        let meta = session_metadata(&home.only_session());
        assert_eq!(
            meta["layers"]["seccomp_notify"], "exec,exit,file-changes,refusals",
            "{meta}"
        );
        let dir = home.only_session();
        let log = commands(&dir);
        let mismatched: std::collections::BTreeMap<String, String> = events(&dir)
            .into_iter()
            .filter(|e| e["type"] == "exec-mismatch")
            .map(|e| {
                (
                    e["pid"].to_string(),
                    e["ran"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        let mut wrong = 0;
        for line in ws.read("ran").unwrap().lines() {
            let (pid, ran) = line.split_once(' ').unwrap();
            let recorded = log
                .lines()
                .rev()
                .filter(|l| l.contains(" exec ") && field(l, "pid") == pid)
                .map(|l| field(l, "exe"))
                .next()
                .unwrap_or_else(|| panic!("no exec line for pid {pid} in\n{log}"));
            if recorded.ends_with(ran) {
                continue;
            }
            wrong += 1;
            let said = mismatched.get(pid).unwrap_or_else(|| {
                panic!("pid {pid} ran {ran}, recorded {recorded}, no exec-mismatch")
            });
            assert!(
                said.ends_with(ran),
                "pid {pid}: mismatch says {said}, {ran} ran"
            );
        }
        // The race was run (and the record corrected) at least once.
        assert!(
            wrong > 0,
            "no swap happened in 60 tries; the test proves nothing"
        );
    });
}

/// Failed execs are no mismatch: a non-executable file found first on `PATH`, a
/// non-executable file run by path, and a `#!` script leave no `exec-mismatch`.
#[test]
fn failed_execs_and_scripts_are_not_taken_for_a_changed_path() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write_mode("bin1/tool", "echo wrong\n", 0o644);
        ws.write_mode("bin2/tool", "#!/bin/sh\necho tool-ran\n", 0o755);
        ws.write_mode("notexec", "echo never\n", 0o644);
        // Run by its path, so that the shell's own exec names the script, not sh.
        ws.write_mode(
            "script.sh",
            "#!/bin/sh\nPATH=\"$PWD/bin1:$PWD/bin2:$PATH\" tool\n./notexec 2>/dev/null\necho done\n",
            0o755,
        );
        let home = RecordsHome::new(runner);
        let out = run_recorded(runner, &ws, &home, &[], &["./script.sh"]);
        out.assert_success();
        assert_eq!(out.lines(), ["tool-ran", "done"], "{out}");
        let dir = home.only_session();
        let mismatches: Vec<Value> = events(&dir)
            .into_iter()
            .filter(|e| e["type"] == "exec-mismatch")
            .collect();
        assert!(mismatches.is_empty(), "{mismatches:?}\n{}", commands(&dir));
    });
}

/// A payload hidden behind `#!` lines: run as a script's interpreter, through a chain
/// of two scripts, with blanks and an argument on the line, and named relative to
/// the working directory. Each script runs the
/// payload (a copy of `true`, gone when the sandbox ends), whose name is on no argv.
pub(super) const HIDDEN_INTERPRETER: &str = r#"
cp /bin/true /tmp/payload
printf '#!/tmp/payload\n' > /tmp/innocent && chmod +x /tmp/innocent
printf '#!/tmp/innocent\n' > /tmp/outer && chmod +x /tmp/outer
printf '#!  /tmp/payload  -x -y  \necho\n' > /tmp/spaced && chmod +x /tmp/spaced
printf '#!payload\n' > /tmp/relative && chmod +x /tmp/relative
cd /tmp && ./innocent a && /tmp/outer b && ./spaced c && ./relative e && /bin/true d
"#;

/// Checks a session's record of [`HIDDEN_INTERPRETER`]: each script's exec names
/// the payload the kernel started for it; a program that is no script names none.
pub(super) fn assert_names_hidden_interpreters(log: &str) {
    for (argv, exe) in [
        ("./innocent a", "./innocent"),
        ("/tmp/outer b", "/tmp/outer"),
        ("./spaced c", "./spaced"),
    ] {
        let line = execs_of(log, argv);
        assert_eq!(line.len(), 1, "one exec of {argv:?} in\n{log}");
        assert_eq!(field(line[0], "exe"), exe, "{log}");
        assert_eq!(field(line[0], "interp"), "/tmp/payload", "{log}");
    }
    // Named as its line names it, found from the working directory.
    let relative = execs_of(log, "./relative e");
    assert_eq!(relative.len(), 1, "{log}");
    assert_eq!(field(relative[0], "interp"), "payload", "{log}");
    let plain = execs_of(log, "/bin/true d");
    assert_eq!(plain.len(), 1, "{log}");
    assert!(!plain[0].contains(" interp="), "{log}");
}

/// ATTACK (records): a payload run as a `#!` script's interpreter, directly or
/// through a chain of scripts, is named on the script's `exec` line (`interp=`),
/// so that it cannot hide behind the script's name; as root and unprivileged.
#[test]
fn a_payload_run_as_a_scripts_interpreter_is_named() {
    each_identity(|runner| {
        // With an approval gate (which rates every exec and holds none here) too.
        let ws = Workspace::new();
        let gated = RecordsHome::new(runner);
        Vg::sandbox(
            runner,
            &ws,
            &["--ask", "critical"],
            &["sh", "-c", HIDDEN_INTERPRETER],
        )
        .records_home(&gated)
        .run()
        .assert_success();
        assert_names_hidden_interpreters(&commands(&gated.only_session()));
        let home = RecordsHome::new(runner);
        Vg::sandbox(runner, &ws, &[], &["sh", "-c", HIDDEN_INTERPRETER])
            .records_home(&home)
            .env(SECCOMP.0, SECCOMP.1)
            .run()
            .assert_success();
        let dir = home.only_session();
        assert_names_hidden_interpreters(&commands(&dir));
        // `logs show`'s table says it too, and its JSON view.
        let id = dir.file_name().unwrap().to_str().unwrap().to_owned();
        Vg::new(runner, home.path())
            .args(["logs", "show", &id])
            .records_home(&home)
            .run()
            .assert_success()
            .assert_stdout_contains("./innocent a  (runs /tmp/payload)");
        Vg::new(runner, home.path())
            .args(["logs", "show", &id, "--commands", "--json"])
            .records_home(&home)
            .run()
            .assert_success()
            .assert_stdout_contains(r#""interp": "/tmp/payload""#);
    });
}

/// The session-21 red team's ways to keep a payload (a copy of `echo`, printing
/// `RAN-<case>`) out of a script's `interp=`, each run by a Python inside: the line
/// split by a NUL, a chain five scripts deep, an interpreter named through a
/// descriptor link or through `/proc/self/cwd`, a lease on the script (the
/// supervisor's read fails), an execute-only script (unreadable to an unprivileged
/// supervisor), and a working directory deeper than `PATH_MAX` (a relative exec, a
/// relative interpreter, a decoy at the path they would have from `/`).
const INTERPRETER_TRICKS: &str = r##"
import fcntl, os, shutil, signal, subprocess
def script(path, text, mode=0o755):
    with open(path, "wb") as f:
        f.write(text)
    os.chmod(path, mode)
def run(case, argv, **kw):
    try:
        out = subprocess.run(argv + ["RAN-" + case], capture_output=True, **kw).stdout
        print(case, out.decode().strip())
    except OSError as e:
        print(case, "refused", e.errno)
shutil.copy("/bin/echo", "/tmp/payload")
os.chmod("/tmp/payload", 0o755)
script("/tmp/mid", b"#!/tmp/payload\n")
script("/tmp/snul", b"#!/tmp/mid\0 junk\n")
run("nul", ["/tmp/snul"])
script("/tmp/c6", b"#!/tmp/payload\n")
for i in (5, 4, 3, 2):
    script(f"/tmp/c{i}", f"#!/tmp/c{i + 1}\n".encode())
run("chain", ["/tmp/c2"])
fd = os.open("/tmp/mid", os.O_RDONLY)
script("/tmp/sfd", f"#!/proc/self/fd/{fd}\n".encode())
run("fdlink", ["/tmp/sfd"], pass_fds=(fd,))
script("/tmp/scwd", b"#!/proc/self/cwd/mid\n")
run("cwdlink", ["/tmp/scwd"], cwd="/tmp")
script("/tmp/sl", b"#!/tmp/payload\n")
lease = os.open("/tmp/sl", os.O_RDONLY)
signal.signal(signal.SIGIO, lambda *_: fcntl.fcntl(lease, fcntl.F_SETLEASE, fcntl.F_UNLCK))
fcntl.fcntl(lease, fcntl.F_SETLEASE, fcntl.F_WRLCK)
run("lease", ["/tmp/sl"])
script("/tmp/s0111", b"#!/tmp/payload\n", 0o111)
run("execonly", ["/tmp/s0111"])
script("/tmp/x", b"#!/bin/true\n")
script("/tmp/srel", b"#!tmp/x\n")
os.chdir("/tmp")
for _ in range(18):
    os.mkdir("d" * 250)
    os.chdir("d" * 250)
script("s", b"#!/tmp/payload\n")
os.mkdir("tmp")
script("tmp/x", b"#!/tmp/payload\n")
run("deeprelative", ["./s"])
run("deepinterp", ["/tmp/srel"])
"##;

/// ATTACK (records): each of [`INTERPRETER_TRICKS`] either names the payload on the
/// script's line or is refused before anything runs: never a payload that ran under
/// another name, or none. As root and unprivileged (an unprivileged supervisor
/// cannot read an execute-only script, so it refuses it).
#[test]
fn tricks_that_hid_a_scripts_interpreter_name_it_or_are_refused() {
    each_identity(|runner| {
        let (home, out) = by_seccomp(runner, &[PYTHON, "-c", INTERPRETER_TRICKS]);
        let dir = home.only_session();
        let log = commands(&dir);
        let stdout = &out.stdout;
        let execonly_runs = runner == Runner::Root;
        let failures: Vec<String> = events(&dir)
            .into_iter()
            .filter(|e| e["type"] == "failure")
            .map(|e| e["error"].as_str().unwrap_or_default().to_owned())
            .collect();
        for (case, script, runs) in [
            ("nul", "/tmp/snul", true),
            ("chain", "/tmp/c2", true),
            ("fdlink", "/tmp/sfd", true),
            ("cwdlink", "/tmp/scwd", false),
            ("lease", "/tmp/sl", false),
            ("execonly", "/tmp/s0111", execonly_runs),
            ("deeprelative", "./s", false),
            ("deepinterp", "/tmp/srel", false),
        ] {
            let line = execs_of(&log, &format!("{script} RAN-{case}"));
            if runs {
                assert!(stdout.contains(&format!(" RAN-{case}")), "{case}: {stdout}");
                assert_eq!(line.len(), 1, "{case}: one exec line in\n{log}");
                assert_eq!(field(line[0], "interp"), "/tmp/payload", "{case}: {log}");
            } else {
                assert!(
                    stdout.contains(&format!("{case} refused ")),
                    "[{runner}] {case} ran: {stdout}\n{log}"
                );
                assert!(line.is_empty(), "{case}: {log}");
            }
        }
        // Each refusal says why (a name the supervisor cannot reach, as
        // `/proc/self/cwd/mid`, fails as a missing interpreter does, with ENOENT).
        assert!(stdout.contains("cwdlink refused 2"), "{stdout}");
        for reason in [
            "cannot read the file",
            "cannot be named from the sandbox's root",
        ] {
            assert!(
                failures.iter().any(|f| f.contains(reason)),
                "[{runner}] no {reason:?} in {failures:#?}"
            );
        }
    });
}

/// ATTACK (records): a payload run as an ELF program's loader (`PT_INTERP`), which
/// the kernel starts before the program's own code inside the one `execve`, is named
/// on the program's line (`interp=`) by seccomp notification, whatever byte order
/// the header claims, and behind a script; a program linked against the system's
/// loader names none; a program file changed after it was read is reported. As root
/// and unprivileged (session-21 red teams).
#[test]
fn a_payload_run_as_a_programs_loader_is_named() {
    let script = format!(
        "{PYTHON} -c '{LOADER_PAYLOAD}' && /tmp/patched e && /tmp/claims-big-endian g && /tmp/script h \
         && /bin/true f && /tmp/py -c 'import os; os.chmod(\"/tmp/py\", 0o700); os.execv(\"/bin/true\", [\"true\", \"i\"])' \
         && echo ran"
    );
    each_identity(|runner| {
        let (_home, dir) = ran_by_seccomp(runner, &script);
        let log = commands(&dir);
        assert_names_payload_loader(&log);
        // A program whose file changed after it was read is reported at its next
        // exec: a loader path rewritten in between would have run unnamed.
        let changed: Vec<Value> = events(&dir)
            .into_iter()
            .filter(|e| e["type"] == "exec-mismatch")
            .collect();
        assert!(
            changed.iter().any(|e| e
                .to_string()
                .contains("/tmp/py (changed after it was read)")),
            "[{runner}] {changed:?}\n{log}"
        );
    });
}

/// ATTACK (records): a program whose loader (`PT_INTERP`) is a symlink to a payload,
/// pointed at the system's loader once the program has run. Seccomp notification
/// names the loader as `PT_INTERP` names it (`interp=` the link), directly and at the
/// end of a `#!` chain, and never by a file it looked up itself: the kernel opens the
/// loader after the answer, so a link flipped in between made such a name the system
/// loader's while the payload ran (session-24 red team, F2: 209-466 lines in 1,000
/// runs). The BPF recorder names the file the kernel mapped (`exec_bpf.rs`). As root
/// and unprivileged.
#[test]
fn a_loader_reached_through_a_symlink_is_named_as_the_program_names_it() {
    let script = format!(
        "{PYTHON} -c '{LOADER_LINK}' && /tmp/via-link j && /tmp/script-via-link k \
         && ln -sf /lib64/ld-linux-x86-64.so.2 /tmp/ld-symlink-x86-64.so.2 && echo ran"
    );
    each_identity(|runner| {
        let (_home, dir) = ran_by_seccomp(runner, &script);
        let log = commands(&dir);
        for argv in ["/tmp/via-link j", "/tmp/script-via-link k"] {
            let line = execs_of(&log, argv);
            assert_eq!(line.len(), 1, "[{runner}] {log}");
            assert_eq!(
                field(line[0], "interp"),
                "/tmp/ld-symlink-x86-64.so.2",
                "[{runner}] {log}"
            );
            assert!(!line[0].contains(" interp_ran="), "[{runner}] {log}");
        }
    });
}

/// ATTACK (records, session-24 red team F1): a program whose loader (`PT_INTERP`) is
/// a descriptor (`/dev/fd/3`, `/proc/self/fd/3`), a symlink to one, or a path that
/// reaches one only from inside (`/dev/./fd/3`), holding a payload loader: seccomp
/// notification named it `interp=/dev/fd/3`, never the payload, which could be
/// deleted. Such an exec is refused (a name the supervisor cannot look up fails with
/// `ENOENT`, as a missing loader does); the payload never runs. As root and
/// unprivileged.
#[test]
fn a_loader_named_through_a_descriptor_is_refused_by_seccomp_notification() {
    let script = format!(
        "{PYTHON} -c '{LOADER_VIA_FD}' && exec 3</tmp/payload-loader \
         && for p in via-fd via-proc via-fd-link via-dot; do /tmp/$p RAN-$p; echo \"$p $?\"; done"
    );
    each_identity(|runner| {
        let (home, out) = by_seccomp(runner, &["sh", "-c", &script]);
        let dir = home.only_session();
        let log = commands(&dir);
        let failures: Vec<String> = events(&dir)
            .into_iter()
            .filter(|e| e["type"] == "failure")
            .map(|e| e["error"].as_str().unwrap_or_default().to_owned())
            .collect();
        for program in ["via-fd", "via-proc", "via-fd-link", "via-dot"] {
            let status = status_of(runner, &out, program);
            assert_ne!(status, "0", "[{runner}] {program} ran\n{out}\n{log}");
            assert!(
                execs_of(&log, &format!("/tmp/{program} RAN-")).is_empty(),
                "[{runner}] {log}"
            );
        }
        // The two named as descriptors are refused with the reason; the link and
        // the dotted path, which the supervisor cannot look up, fail as missing.
        assert_eq!(
            failures
                .iter()
                .filter(|f| f.contains("PT_INTERP) is named through a descriptor"))
                .count(),
            2,
            "[{runner}] {failures:#?}"
        );
    });
}

/// ATTACK (records, session-24 red team, round 2): names of a loader or a `#!`
/// interpreter that reach a descriptor for the kernel while the supervisor's own
/// lookup failed otherwise than for absence, which it used to let go: a relative
/// name from a working directory 4,092 bytes deep (the supervisor's whole path is
/// past `PATH_MAX`), and a link to the process's own `/proc/PID/fd/3` from a
/// non-dumpable process (denied to an unprivileged supervisor). Each ran a payload
/// loader held only by descriptor 3 under a line naming `ld.so` or `/tmp/L`; each
/// is now refused. As root and unprivileged.
#[test]
fn a_loader_or_interpreter_the_supervisor_cannot_look_up_is_refused() {
    each_identity(|runner| {
        let (home, out) = by_seccomp(runner, &[PYTHON, "-c", UNLOOKABLE]);
        let log = commands(&home.only_session());
        for case in [
            "deep-loader",
            "deep-script",
            "undumpable-loader",
            "undumpable-script",
        ] {
            let status = status_of(runner, &out, case);
            assert_ne!(status, "0", "[{runner}] {case} ran\n{out}\n{log}");
            assert!(!log.contains(&format!("RAN-{case}")), "[{runner}] {log}");
        }
    });
}

/// Python running, each in a child holding a copy of the system's loader (deleted)
/// on descriptor 3: copies of `true` whose loader is `ld.so` (relative) and
/// `/tmp/L`, and scripts whose `#!` line names them, from a working directory
/// 4,092 bytes deep where `ld.so` links to `/proc/self/fd/3`, and from a
/// non-dumpable process where `/tmp/L` links to its own `/proc/PID/fd/3`; prints each
/// one's exit status (0: the payload ran).
const UNLOOKABLE: &str = r##"
import ctypes, os, shutil
old = b"/lib64/ld-linux-x86-64.so.2"
data = open("/bin/true", "rb").read()
def program(path, loader):
    open(path, "wb").write(data.replace(old, loader.ljust(len(old), b"\0"), 1))
    os.chmod(path, 0o755)
def script(path, interpreter):
    open(path, "w").write("#!" + interpreter + "\n")
    os.chmod(path, 0o755)
program("/tmp/t_rel", b"ld.so")
script("/tmp/s_rel", "ld.so")
program("/tmp/t_L", b"/tmp/L")
script("/tmp/s_L", "/tmp/L")
shutil.copy(old.decode(), "/tmp/payload-loader")
deep = "/tmp/d"
while len(deep) < 4092 - 201:
    deep += "/" + "a" * 200
deep += "/" + "b" * (4092 - len(deep) - 1)
os.makedirs(deep)
# By its folder: the whole path is past PATH_MAX.
folder = os.open(deep, os.O_RDONLY | os.O_DIRECTORY)
os.symlink("/proc/self/fd/3", "ld.so", dir_fd=folder)
libc = ctypes.CDLL(None, use_errno=True)
for case, path, cwd, undumpable in (
    ("deep-loader", "/tmp/t_rel", deep, False),
    ("deep-script", "/tmp/s_rel", deep, False),
    ("undumpable-loader", "/tmp/t_L", "/", True),
    ("undumpable-script", "/tmp/s_L", "/", True),
):
    pid = os.fork()
    if pid == 0:
        fd = os.open("/tmp/payload-loader", os.O_RDONLY)
        os.dup2(fd, 3)
        os.chdir(cwd)
        if undumpable:
            if os.path.lexists("/tmp/L"):
                os.unlink("/tmp/L")
            os.symlink("/proc/%d/fd/3" % os.getpid(), "/tmp/L")
            libc.prctl(4, 0, 0, 0, 0)
        try:
            os.execv(path, [path, "RAN-" + case])
        except OSError:
            os._exit(126)
    _, status = os.waitpid(pid, 0)
    print(case, os.waitstatus_to_exitcode(status), flush=True)
"##;

/// Python making `/tmp/payload-loader` (a copy of the system's loader) and copies of
/// `true` whose loader path (`PT_INTERP`) is `/dev/fd/3` (`/tmp/via-fd`),
/// `/proc/self/fd/3` (`/tmp/via-proc`), `/tmp/fd-link`, a symlink to
/// `/proc/self/fd/3` (`/tmp/via-fd-link`), and `/dev/./fd/3` (`/tmp/via-dot`).
const LOADER_VIA_FD: &str = r##"
import os, shutil
old = b"/lib64/ld-linux-x86-64.so.2"
shutil.copy(old.decode(), "/tmp/payload-loader")
os.symlink("/proc/self/fd/3", "/tmp/fd-link")
data = open("/bin/true", "rb").read()
assert old in data
for name, new in (("via-fd", b"/dev/fd/3"), ("via-proc", b"/proc/self/fd/3"),
                  ("via-fd-link", b"/tmp/fd-link"), ("via-dot", b"/dev/./fd/3")):
    open("/tmp/" + name, "wb").write(data.replace(old, new.ljust(len(old), b"\0"), 1))
    os.chmod("/tmp/" + name, 0o755)
"##;

/// Python making `/tmp/via-link` (`true` with its loader path changed to
/// `/tmp/ld-symlink-x86-64.so.2`, a symlink to `/tmp/payload-loader`, a copy of the
/// system's loader) and `/tmp/script-via-link` (a script whose interpreter is it).
pub(super) const LOADER_LINK: &str = r##"
import os, shutil
old = b"/lib64/ld-linux-x86-64.so.2"
new = b"/tmp/ld-symlink-x86-64.so.2"
assert len(old) == len(new)
shutil.copy(old.decode(), "/tmp/payload-loader")
os.symlink("/tmp/payload-loader", new.decode())
data = open("/bin/true", "rb").read()
assert old in data
open("/tmp/via-link", "wb").write(data.replace(old, new, 1))
open("/tmp/script-via-link", "w").write("#!/tmp/via-link\n")
for name in ("via-link", "script-via-link"):
    os.chmod("/tmp/" + name, 0o755)
"##;

/// ATTACK (records): a program run through a symlink that is pointed elsewhere
/// afterwards must not leave a line that names the innocent program only. The
/// line keeps the path given (`exe=`) and names the file it reached (`ran=`):
/// through a file link, a relative one, a folder link; a path that names its file
/// has none; and a `#!` line's interpreter reached through a link is named by its
/// file too (`interp_ran=`, session-23 red team). As root and unprivileged (session-22 red team: the line named the
/// path alone, which then named `/usr/bin/true`).
#[test]
fn a_symlink_pointed_elsewhere_after_the_exec_leaves_the_file_that_ran_named() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        Vg::sandbox(runner, &ws, &[], &["sh", "-c", RELINKED])
            .records_home(&home)
            .env(SECCOMP.0, SECCOMP.1)
            .run()
            .assert_success()
            .assert_stdout_contains("relinked");
        assert_names_the_files_that_ran(&commands(&home.only_session()));
    });
}

/// Python making `/tmp/x`, a link to a copy of `echo` deeper than `PATH_MAX`
/// from the root (through a second link), and executing it, then a script whose
/// `#!` line names it: the file's own path cannot be read, so `ran=` or
/// `interp_ran=` could not be written (see the tests using it).
pub(super) const DEEP_LINK: &str = r##"
import os
name = lambda i: "a" * 250 + str(i)
fds = [os.open("/tmp", os.O_DIRECTORY)]
for i, n in enumerate(["base"] + [name(i) for i in range(1, 21)]):
    os.mkdir(n, dir_fd=fds[-1])
    fds.append(os.open(n, os.O_DIRECTORY, dir_fd=fds[-1]))
data = open("/usr/bin/echo", "rb").read()
with os.fdopen(os.open("payload", os.O_CREAT | os.O_WRONLY, 0o755, dir_fd=fds[-1]), "wb") as f:
    f.write(data)
os.symlink("/".join(name(i) for i in range(16, 21)) + "/payload", "hop", dir_fd=fds[16])
os.symlink("/tmp/base/" + "/".join(name(i) for i in range(1, 16)) + "/hop", "/tmp/x")
with open("/tmp/s", "w") as f:
    f.write("#!/tmp/x\n")
os.chmod("/tmp/s", 0o755)
for label, argv in [("", ["/tmp/x", "deep-ran"]), ("script ", ["/tmp/s"])]:
    pid = os.fork()
    if pid == 0:
        try:
            os.execv(argv[0], argv)
        except OSError as e:
            print(label + "refused", e.errno, flush=True)
        os._exit(1)
    os.waitpid(pid, 0)
"##;

/// ATTACK (records, session-23 red teams): a link to a file deeper than
/// `PATH_MAX` from the root leaves seccomp notification no name for `ran=` (or, as
/// a `#!` line's interpreter, for `interp_ran=`), so the link could be re-pointed
/// unseen: such an exec is refused, as an exec whose path cannot be named is. As
/// root and unprivileged.
#[test]
fn a_link_to_a_file_with_no_readable_name_is_refused_by_seccomp_notification() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let out = Vg::sandbox(runner, &ws, &[], &[PYTHON, "-c", DEEP_LINK])
            .records_home(&home)
            .env(SECCOMP.0, SECCOMP.1)
            .run();
        out.assert_success();
        for refused in ["refused 1", "script refused 1"] {
            assert!(out.lines().contains(&refused), "[{runner}] {out}");
        }
        let log = commands(&home.only_session());
        assert!(
            execs_of(&log, "/tmp/x deep-ran").is_empty(),
            "[{runner}] {log}"
        );
        assert!(execs_of(&log, "/tmp/s").is_empty(), "[{runner}] {log}");
    });
}

/// Runs a copy of `echo` through links, then points them at `true` (see
/// [`assert_names_the_files_that_ran`]).
pub(super) const RELINKED: &str = "cp /usr/bin/echo /tmp/payload \
 && ln -s /tmp/payload /tmp/x && /tmp/x a >/dev/null && ln -sf /usr/bin/true /tmp/x && /tmp/x b \
 && ln -s payload /tmp/y && cd /tmp && ./y c >/dev/null && ln -sf /usr/bin/true y && cd / \
 && mkdir /tmp/real && cp /usr/bin/echo /tmp/real/p && ln -s /tmp/real /tmp/d && /tmp/d/p d >/dev/null \
 && rm /tmp/d && mkdir /tmp/d && cp /usr/bin/true /tmp/d/p \
 && /tmp/payload e >/dev/null \
 && ln -s /tmp/payload /tmp/i && printf '#!/tmp/i\\n' > /tmp/s && chmod +x /tmp/s && /tmp/s g >/dev/null \
 && ln -sf /usr/bin/true /tmp/i && echo relinked";

pub(super) fn assert_names_the_files_that_ran(log: &str) {
    let line = |argv: &str| {
        let found = execs_of(log, argv);
        assert_eq!(found.len(), 1, "one line for {argv:?} in\n{log}");
        found[0].to_owned()
    };
    for (argv, exe, ran) in [
        ("/tmp/x a", "/tmp/x", "/tmp/payload"),
        ("/tmp/x b", "/tmp/x", "/usr/bin/true"),
        ("./y c", "./y", "/tmp/payload"),
        ("/tmp/d/p d", "/tmp/d/p", "/tmp/real/p"),
    ] {
        let l = line(argv);
        assert_eq!(field(&l, "exe"), exe, "{l}");
        assert_eq!(field(&l, "ran"), ran, "{l}");
    }
    let own = line("/tmp/payload e");
    assert!(!own.contains(" ran="), "{own}");
    // A script whose `#!` line names a link: its interpreter's own file too.
    let script = line("/tmp/s g");
    assert_eq!(field(&script, "interp"), "/tmp/i", "{script}");
    assert_eq!(field(&script, "interp_ran"), "/tmp/payload", "{script}");
}

/// Python making `/tmp/patched` (`true` with its loader path changed to
/// `/tmp/ld-payload-x86-64.so.2`, a copy of the system's), `/tmp/claims-big-endian`
/// (the same with its header claiming another byte order, which the kernel
/// ignores), `/tmp/script` (a script whose interpreter is `/tmp/patched`) and
/// `/tmp/py` (a copy of Python).
pub(super) const LOADER_PAYLOAD: &str = r##"
import os, shutil
old = b"/lib64/ld-linux-x86-64.so.2"
new = b"/tmp/ld-payload-x86-64.so.2"
assert len(old) == len(new)
shutil.copy(old.decode(), new.decode())
data = open("/bin/true", "rb").read()
assert old in data
patched = data.replace(old, new, 1)
open("/tmp/patched", "wb").write(patched)
open("/tmp/claims-big-endian", "wb").write(patched[:5] + b"\x02" + patched[6:])
open("/tmp/script", "w").write("#!/tmp/patched\n")
shutil.copy("/usr/bin/python3", "/tmp/py")
for name in ("patched", "claims-big-endian", "script", "py"):
    os.chmod("/tmp/" + name, 0o755)
"##;

/// The lines of `/tmp/patched e`, `/tmp/claims-big-endian g` and `/tmp/script h`
/// ([`LOADER_PAYLOAD`]) name the payload loader; `/bin/true f`'s names none.
pub(super) fn assert_names_payload_loader(log: &str) {
    for (argv, exe) in [
        ("/tmp/patched e", "/tmp/patched"),
        ("/tmp/claims-big-endian g", "/tmp/claims-big-endian"),
        ("/tmp/script h", "/tmp/script"),
    ] {
        let line = execs_of(log, argv);
        assert_eq!(line.len(), 1, "{log}");
        assert_eq!(field(line[0], "exe"), exe, "{log}");
        assert_eq!(
            field(line[0], "interp"),
            "/tmp/ld-payload-x86-64.so.2",
            "{log}"
        );
    }
    let plain = execs_of(log, "/bin/true f");
    assert_eq!(plain.len(), 1, "{log}");
    assert!(!plain[0].contains(" interp="), "{log}");
}

/// Bytes of the host's kernel log not yet read through `/proc/kmsg`
/// (`SYSLOG_ACTION_SIZE_UNREAD`); root only.
fn kernel_log_unread() -> i64 {
    let out = std::process::Command::new(PYTHON)
        .args([
            "-c",
            "import ctypes; print(ctypes.CDLL(None, use_errno=True).klogctl(9, None, 0))",
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// ATTACK (host): the tracer reads the head of a file the sandbox executes, as root
/// when the supervisor is root. `/proc/kmsg`, in the sandbox's own `/proc`, is a
/// regular file whose reading consumes the host's kernel log (what a syslog daemon
/// would have read): executing it, recorded or held for rating, must not make the
/// supervisor read it. Only files the kernel could execute (an execute bit) are read.
#[test]
fn executing_proc_kmsg_does_not_consume_the_hosts_kernel_log() {
    if !is_root() {
        // An unprivileged supervisor cannot read /proc/kmsg at all.
        return;
    }
    std::fs::write("/dev/kmsg", format!("vectraguard-test {}\n", unique())).unwrap();
    let before = kernel_log_unread();
    assert!(before > 0, "the marker is unread");
    for options in [&[][..], &["--ask", "critical"][..]] {
        let ws = Workspace::new();
        let home = RecordsHome::new(Runner::Root);
        let out = Vg::sandbox(
            Runner::Root,
            &ws,
            options,
            &["sh", "-c", "for i in 1 2 3; do /proc/kmsg; done; echo done"],
        )
        .records_home(&home)
        .env(SECCOMP.0, SECCOMP.1)
        .run();
        out.assert_success().assert_stdout_contains("done");
        let after = kernel_log_unread();
        assert!(
            after >= before,
            "{options:?}: the kernel log's unread bytes went from {before} to {after}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// What the tracer knows of each process without asking /proc: pid, parent and working
// directory, right after a `cd`, from a parent that never executed anything (a
// forked subshell), and one process after another.

#[test]
fn every_exec_names_the_pid_parent_and_cwd_its_process_sees() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let report = "echo \"$0 pid=$$ ppid=$PPID cwd=$(pwd)\"";
        let script = format!(
            "mkdir -p /tmp/a/b && cd /tmp/a/b && sh -c '{report}' first; \
             ( cd /tmp/a && sh -c '{report}' second; : ); \
             cd / && sh -c '{report}' third; \
             i=0; while [ $i -lt 20 ]; do sh -c '{report}' again-$i; i=$((i+1)); done"
        );
        let out = run_recorded(runner, &ws, &home, &[], &["sh", "-c", &script]);
        out.assert_success();
        let log = commands(&home.only_session());
        let printed: Vec<&str> = out.stdout.lines().collect();
        assert_eq!(printed.len(), 23, "{out}");
        for line in printed {
            let (name, rest) = line.split_once(' ').unwrap();
            let value = |key: &str| {
                rest.split(' ')
                    .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
                    .unwrap_or_else(|| panic!("no {key} in {line}"))
            };
            let execs: Vec<&str> = log
                .lines()
                .filter(|l| l.contains(" exec ") && l.ends_with(&format!(" {name}")))
                .collect();
            assert_eq!(execs.len(), 1, "{name}: {log}");
            let exec = execs[0];
            assert_eq!(field(exec, "pid"), value("pid"), "{exec}");
            assert_eq!(field(exec, "ppid"), value("ppid"), "{exec}");
            assert_eq!(field(exec, "cwd"), value("cwd"), "{exec}");
            assert!(
                log.lines()
                    .any(|l| l.ends_with(&format!(" exit pid={} status=0", value("pid")))),
                "{name}: {log}"
            );
        }
        // The subshell forked for `( … ; : )` never executed anything (not the last
        // command, `sh -c` is forked from it): its child's parent is still named, by
        // its pid inside.
        let second = log.lines().find(|l| l.ends_with(" second")).unwrap();
        let first = log.lines().find(|l| l.ends_with(" first")).unwrap();
        assert_ne!(field(second, "ppid"), field(first, "ppid"), "{log}");
        assert_ne!(field(second, "ppid"), "0", "{log}");
    });
}

/// A build that runs a thousand processes at once: each live traced process holds a
/// descriptor in the supervisor, so at the usual soft limit of 1,024 open files the
/// tracer once ran out and refused execs ("cannot find the process's pid").
#[test]
fn a_thousand_processes_at_once_are_all_recorded_at_the_usual_descriptor_limit() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let n = 1200;
        let out = Vg::sandbox(
            runner,
            &ws,
            &[],
            &[
                "sh",
                "-c",
                &format!(
                    "i=0; while [ $i -lt {n} ]; do sleep 3 & i=$((i+1)); done; wait; echo all-done"
                ),
            ],
        )
        .records_home(&home)
        .through_shell(r#"ulimit -Sn 1024 && exec "$@""#)
        .run();
        out.assert_success().assert_stdout_contains("all-done");
        let dir = home.only_session();
        let failures: Vec<Value> = events(&dir)
            .into_iter()
            .filter(|e| e["type"] == "failure")
            .collect();
        assert!(failures.is_empty(), "[{runner}] {failures:?}");
        let log = commands(&dir);
        let sleeps = execs_of(&log, "sleep 3").len();
        assert_eq!(sleeps, n, "[{runner}] {sleeps} of {n} sleeps recorded");
    });
}

/// Past the hard limit of open files the tracer cannot record another process: the
/// exec is refused (fail closed) and the refusal says why and what to do, not that
/// the process's pid could not be found.
#[test]
fn an_exec_the_tracer_has_no_descriptor_for_is_refused_with_the_reason() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let out = Vg::sandbox(
            runner,
            &ws,
            &[],
            &[
                "sh",
                "-c",
                "i=0; while [ $i -lt 200 ]; do sleep 2 & i=$((i+1)); done; wait; echo all-done",
            ],
        )
        .records_home(&home)
        .env(SECCOMP.0, SECCOMP.1)
        .through_shell(r#"ulimit -n 128 && exec "$@""#)
        .run();
        out.assert_stderr_contains("no file descriptor left")
            .assert_stderr_contains("ulimit -n");
        assert!(
            !out.stderr.contains("cannot find the process's pid"),
            "[{runner}] {out}"
        );
        let dir = home.only_session();
        let refused = events(&dir)
            .into_iter()
            .filter(|e| {
                e["type"] == "failure"
                    && e["error"]
                        .as_str()
                        .is_some_and(|m| m.contains("no file descriptor left"))
            })
            .count();
        assert!(refused > 0, "[{runner}] {out}");
        // Fewer sleeps ran than were asked for: the refused ones never ran unrecorded.
        let sleeps = execs_of(&commands(&dir), "sleep 2").len();
        assert!(sleeps < 200, "[{runner}] {sleeps} sleeps recorded");
    });
}

// ---------------------------------------------------------------------------------------
// Batched writes: an exec line is written just after its exec was let go, an exit
// line with the next exec line, and chain entries several at a time.

/// The end (offset + length) of the last `commands.log` record `integrity.log` chains.
fn chained_end(dir: &Path) -> Option<u64> {
    let integrity = std::fs::read_to_string(dir.join("integrity.log")).ok()?;
    integrity
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.get(1) == Some(&"commands.log"))
                .then(|| f[2].parse::<u64>().unwrap() + f[3].parse::<u64>().unwrap())
        })
        .max()
}

/// Four shells running programs at once: each program's exec line comes before its
/// exit line, each shell's programs come in the order they ran (one exits before
/// the next starts), none is missing, and the chain, written in batches, verifies.
#[test]
fn concurrent_execs_and_exits_are_recorded_in_order_and_their_batched_chain_verifies() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let (shells, each) = (4, 40);
        let script = format!(
            "for j in $(seq {shells}); do ( i=0; while [ $i -lt {each} ]; do /bin/true s$j-$i; i=$((i+1)); done ) & done; wait"
        );
        let out = run_recorded(runner, &ws, &home, &[], &["sh", "-c", &script]);
        out.assert_success();
        let dir = home.only_session();
        let log = commands(&dir);
        let lines: Vec<&str> = log.lines().collect();
        for j in 1..=shells {
            let mut previous_exit = None;
            for i in 0..each {
                let name = format!(" -- /bin/true s{j}-{i}");
                let execs: Vec<usize> = (0..lines.len())
                    .filter(|&n| lines[n].contains(" exec ") && lines[n].ends_with(&name))
                    .collect();
                assert_eq!(execs.len(), 1, "[{runner}] s{j}-{i}: {log}");
                let exec = execs[0];
                let pid = field(lines[exec], "pid");
                let exit = (exec + 1..lines.len())
                    .find(|&n| lines[n].ends_with(&format!(" exit pid={pid} status=0")))
                    .unwrap_or_else(|| panic!("[{runner}] no exit after s{j}-{i}: {log}"));
                if let Some(previous) = previous_exit {
                    assert!(
                        previous < exec,
                        "[{runner}] s{j}-{i} recorded before the exit of the one before: {log}"
                    );
                }
                previous_exit = Some(exit);
            }
        }
        let len = std::fs::metadata(dir.join("commands.log")).unwrap().len();
        assert_eq!(
            chained_end(&dir),
            Some(len),
            "[{runner}] every line chained"
        );
        Vg::new(runner, ws.path())
            .args(["logs", "verify", dir.file_name().unwrap().to_str().unwrap()])
            .records_home(&home)
            .run()
            .assert_success();
    });
}

/// Lines held for a batch reach the record once the tracer is idle, while the
/// session still runs: a reader following it is not kept waiting for the next exec.
#[test]
fn a_quiet_sandbox_has_its_last_execs_and_exits_written_and_chained() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let running = Vg::sandbox(
            runner,
            &ws,
            &[],
            &["sh", "-c", "/bin/true quiet-marker; exec sleep 60"],
        )
        .records_home(&home)
        .spawn();
        let written = |dir: &Path| {
            let log = std::fs::read_to_string(dir.join("commands.log")).unwrap_or_default();
            let exit_of_marker = execs_of(&log, "/bin/true quiet-marker")
                .first()
                .map(|exec| format!(" exit pid={} status=0", field(exec, "pid")))
                .is_some_and(|exit| log.lines().any(|l| l.ends_with(&exit)));
            exit_of_marker
                && !execs_of(&log, "sleep 60").is_empty()
                && chained_end(dir) == Some(log.len() as u64)
        };
        let seen = wait_until(std::time::Duration::from_secs(10), || {
            home.sessions().first().is_some_and(|d| written(d))
        });
        running.signal("TERM");
        let out = running.finish(std::time::Duration::from_secs(20));
        assert!(
            seen,
            "[{runner}] the marker's exit and sleep's exec were not written and chained while the session ran: {out}"
        );
    });
}

/// By default (`exec_check = "next-exec"`) no program waits for the supervisor as it
/// exits where the kernel keeps exit statuses for pidfds (Linux 6.15+): the filter
/// does not send `exit_group`, and every exit is still recorded with how it ended,
/// a death by a signal included, after its exec and before its parent's next one.
#[test]
fn exits_are_recorded_with_how_they_ended_without_trapping_them() {
    let pidfd_exits = vg_sandbox::trace::Exits::pidfd_available();
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        // Seccomp notification's exits (the BPF recorder's: `exec_bpf.rs`).
        Vg::sandbox(
            runner,
            &ws,
            &[],
            &[
                "/bin/sh",
                "-c",
                "/bin/true; /bin/false; /bin/sh -c 'kill -KILL $$'; /bin/echo end",
            ],
        )
        .records_home(&home)
        .env(SECCOMP.0, SECCOMP.1)
        .run()
        .assert_success();
        let dir = home.only_session();
        let meta = session_metadata(&dir);
        let notified = if pidfd_exits {
            "exec,file-changes,refusals"
        } else {
            "exec,exit,file-changes,refusals"
        };
        assert_eq!(meta["layers"]["seccomp_notify"], notified, "{meta}");
        let log = commands(&dir);
        let lines: Vec<&str> = log.lines().collect();
        let exit_of = |argv: &str| {
            let exec = execs_of(&log, argv);
            assert_eq!(exec.len(), 1, "{argv}: {log}");
            let pid = field(exec[0], "pid");
            let at = lines.iter().position(|l| *l == exec[0]).unwrap();
            lines
                .iter()
                .enumerate()
                .find(|(_, l)| l.contains(" exit ") && field(l, "pid") == pid)
                .map(|(i, l)| {
                    assert!(i > at, "{argv}: exit before exec\n{log}");
                    (
                        i,
                        l.split_once(&format!("pid={pid} ")).unwrap().1.to_owned(),
                    )
                })
        };
        let (true_at, true_exit) = exit_of("/bin/true").unwrap_or_else(|| panic!("{log}"));
        assert_eq!(true_exit, "status=0", "{log}");
        let false_exec = lines
            .iter()
            .position(|l| *l == execs_of(&log, "/bin/false")[0])
            .unwrap();
        assert!(true_at < false_exec, "in order:\n{log}");
        assert_eq!(
            exit_of("/bin/false").map(|e| e.1).as_deref(),
            Some("status=1"),
            "{log}"
        );
        assert_eq!(
            exit_of("/bin/echo").map(|e| e.1).as_deref(),
            Some("status=0"),
            "{log}"
        );
        // Seen only through its pidfd: a program killed by a signal never exits.
        let killed = exit_of("/bin/sh -c 'kill -KILL $$'").map(|e| e.1);
        let expected = pidfd_exits.then(|| "signal=9".to_owned());
        assert_eq!(killed, expected, "{log}");
        Vg::new(runner, ws.path())
            .args(["logs", "verify", "last"])
            .records_home(&home)
            .run()
            .assert_success();
    });
}

/// `exec_check` is the user's to set: a project file, which the sandbox can write,
/// cannot, and a wrong value is named with the fix.
#[test]
fn exec_check_is_refused_in_a_project_file_and_checked() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write("vectraguard.toml", "exec_check = \"exit\"\n");
        let home = RecordsHome::new(runner);
        let out = run_recorded(runner, &ws, &home, &[], &["/bin/true"]);
        out.assert_code(125);
        out.assert_stderr_contains("'exec_check' cannot be set in a project file");
        let ws = Workspace::new();
        let xdg = exec_check_config(runner, "sometimes");
        let out = Vg::sandbox(runner, &ws, &[], &["/bin/true"])
            .records_home(&home)
            .env("XDG_CONFIG_HOME", &xdg.arg(""))
            .run();
        out.assert_code(125);
        out.assert_stderr_contains("unknown exec_check \"sometimes\"");
    });
}

/// A process whose parent is init execs a FIFO with its own argv (recorded, then
/// refused by the kernel), then execs `/bin/true`: checking the first exec then looks
/// at the FIFO, and opening it for reading would block until a writer came.
const FIFO_EXEC: &str = r#"
import os, sys, time
fifo = "/tmp/f"
os.mkfifo(fifo)
if os.fork() == 0:
    if os.fork() == 0:
        while os.getppid() != 1:
            time.sleep(0.001)
        try:
            os.execv(fifo, sys.orig_argv)
        except OSError:
            pass
        os.execv("/bin/true", ["true"])
    os._exit(0)
os.wait()
time.sleep(0.5)
pid = os.fork()
if pid == 0:
    os.execv("/bin/echo", ["echo", "echo ran"])
os.waitpid(pid, 0)
"#;

/// ATTACK (records): a FIFO named by an exec must not stall the tracer (and with it
/// every exec in the sandbox) when what ran is checked; found by the red team, where
/// the session hung until something wrote to the FIFO.
#[test]
fn an_exec_of_a_fifo_does_not_stall_the_tracer() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write("fifo.py", FIFO_EXEC);
        let home = RecordsHome::new(runner);
        let out = run_recorded(runner, &ws, &home, &[], &[PYTHON, "fifo.py"]);
        out.assert_success();
        assert!(out.stdout.contains("echo ran"), "{out}");
        let dir = home.only_session();
        let log = commands(&dir);
        assert_eq!(execs_of(&log, "true").len(), 1, "{log}");
        let mismatches: Vec<Value> = events(&dir)
            .into_iter()
            .filter(|e| e["type"] == "exec-mismatch")
            .collect();
        assert!(mismatches.is_empty(), "{mismatches:?}\n{log}");
    });
}

/// What the command leaves running is killed when it exits; those programs' exits
/// are recorded too (found by the red team: the tracer gave up on them when the
/// sandbox's last process let go of the filter, before they had been reaped).
#[test]
fn programs_killed_when_the_command_ends_have_their_exit_recorded() {
    let pidfd_exits = vg_sandbox::trace::Exits::pidfd_available();
    each_identity(|runner| {
        for _ in 0..4 {
            let ws = Workspace::new();
            let home = RecordsHome::new(runner);
            run_recorded(
                runner,
                &ws,
                &home,
                &[],
                &["/bin/sh", "-c", "/bin/sleep 100 & /bin/sleep 0.2; exit 0"],
            )
            .assert_success();
            let log = commands(&home.only_session());
            let exec = execs_of(&log, "/bin/sleep 100");
            assert_eq!(exec.len(), 1, "{log}");
            let pid = field(exec[0], "pid");
            let exits: Vec<&str> = log
                .lines()
                .filter(|l| l.contains(" exit ") && field(l, "pid") == pid)
                .collect();
            if pidfd_exits {
                assert_eq!(exits.len(), 1, "{log}");
                assert!(exits[0].ends_with(" signal=9"), "{log}");
            } else {
                assert!(exits.is_empty(), "{log}");
            }
        }
    });
}

/// 70 processes are left unreaped (zombies), then ten programs run one after the
/// other: each one's exit is still written before the next one's exec.
const ZOMBIES_THEN_SEQUENCE: &str = r#"
import os
for _ in range(70):
    if os.fork() == 0:
        os.execv("/bin/true", ["true"])
for i in range(10):
    pid = os.fork()
    if pid == 0:
        os.execv("/bin/echo", ["echo", "m%d" % i])
    os.waitpid(pid, 0)
"#;

/// Found by the red team: with more than 64 zombies, exits were asked about on a
/// timer only, so a program's exit could be written after its parent's next exec.
#[test]
fn exits_stay_in_order_in_a_sandbox_full_of_zombies() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write("zombies.py", ZOMBIES_THEN_SEQUENCE);
        let home = RecordsHome::new(runner);
        run_recorded(runner, &ws, &home, &[], &[PYTHON, "zombies.py"]).assert_success();
        let log = commands(&home.only_session());
        let lines: Vec<&str> = log.lines().collect();
        for i in 0..9 {
            let exec = execs_of(&log, &format!("echo m{i}"));
            assert_eq!(exec.len(), 1, "{log}");
            let pid = field(exec[0], "pid");
            let exit_at = lines
                .iter()
                .position(|l| l.contains(" exit ") && field(l, "pid") == pid)
                .unwrap_or_else(|| panic!("no exit of m{i}:\n{log}"));
            let next = execs_of(&log, &format!("echo m{}", i + 1))[0];
            let next_at = lines.iter().position(|l| *l == next).unwrap();
            assert!(
                exit_at < next_at,
                "m{i}'s exit after m{}'s exec:\n{log}",
                i + 1
            );
        }
    });
}
