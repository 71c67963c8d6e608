//! `vectraguard sandbox shell` driven through a real terminal: tmux runs it in a
//! pane, `send-keys` types, `capture-pane` reads the screen.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::harness::{
    RecordsHome, Runner, Vg, Workspace, bin, each_identity, require_tools, unique,
};

/// The prompt as shown (capture-pane trims the trailing blank): set as
/// `vg-${USER}-prompt$ `, so that the command line that
/// starts the shell (which contains the unexpanded text) never matches it.
const PROMPT: &str = "vg-vgtest-prompt$";

/// A tmux server of its own, with one session called `vg`.
pub(super) struct Tmux {
    socket: PathBuf,
}

/// The terminal the tests drive, the shell they open, and the full-screen program.
pub(super) const TMUX: (&str, &str) = ("/usr/bin/tmux", "tmux");
const BASH: (&str, &str) = ("/bin/bash", "bash");
const VI: (&str, &str) = ("/usr/bin/vi", "vim-tiny");

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

impl Tmux {
    /// Runs `command` (a shell command line) in a new `width`x`height` pane in `cwd`.
    pub(super) fn start(cwd: &Path, command: &str, width: u16, height: u16) -> Self {
        let socket = PathBuf::from(format!("/tmp/vg-tmux-{}", unique()));
        let t = Self { socket };
        let status = t
            .tmux()
            .args(["new-session", "-d", "-s", "vg", "-x"])
            .arg(width.to_string())
            .arg("-y")
            .arg(height.to_string())
            .arg("-c")
            .arg(cwd)
            .arg(command)
            .status()
            .expect("tmux (install it: apt-get install tmux)");
        assert!(status.success(), "tmux new-session failed");
        t
    }

    pub(super) fn tmux(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.socket);
        c
    }

    /// The pane's alternate screen, cursor shown, mouse reporting and application
    /// cursor keys flags, as `"A C M K"` (each 0 or 1).
    pub(super) fn modes(&self) -> String {
        let out = self
            .tmux()
            .args([
                "display-message",
                "-p",
                "-t",
                "vg",
                "#{alternate_on} #{cursor_flag} #{mouse_any_flag} #{keypad_cursor_flag}",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// `modes()` of a terminal with every mode off again: the normal screen, the
    /// cursor shown, no mouse reporting, normal cursor keys.
    pub(super) const MODES_OFF: &str = "0 1 0 0";

    pub(super) fn keys(&self, keys: &[&str]) {
        let status = self
            .tmux()
            .args(["send-keys", "-t", "vg"])
            .args(keys)
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Types `text` literally, then Enter.
    pub(super) fn line(&self, text: &str) {
        let status = self
            .tmux()
            .args(["send-keys", "-t", "vg", "-l", text])
            .status()
            .unwrap();
        assert!(status.success());
        self.keys(&["Enter"]);
    }

    fn screen(&self) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-p", "-t", "vg"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn alive(&self) -> bool {
        self.tmux()
            .args(["has-session", "-t", "vg"])
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Waits until the screen satisfies `check`; fails the test with the screen. A
    /// pane whose program ended is gone with its screen (tmux closes it): that fails
    /// at once, with the last screen seen, rather than as a time-out on an empty
    /// screen. A test that reads what a program prints just before it ends keeps the
    /// pane open after it (`PROGRAM; echo exited-$?; sleep 60`): the screen is read
    /// every 50 ms, and the pane can close sooner than that.
    #[track_caller]
    fn wait(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let end = Instant::now() + Duration::from_secs(20);
        let mut last = String::new();
        loop {
            let screen = self.screen();
            if check(&screen) {
                return screen;
            }
            if screen.is_empty() && !self.alive() {
                panic!(
                    "the pane closed (its program ended) before {what} was seen; the last screen seen:\n{last}"
                );
            }
            if Instant::now() > end {
                panic!("timed out waiting for {what}; the screen:\n{screen}");
            }
            if !screen.is_empty() {
                last = screen;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    #[track_caller]
    pub(super) fn wait_for(&self, needle: &str) -> String {
        self.wait(&format!("{needle:?}"), |s| s.contains(needle))
    }

    #[track_caller]
    pub(super) fn wait_gone(&self) {
        let end = Instant::now() + Duration::from_secs(20);
        while self.alive() {
            assert!(
                Instant::now() < end,
                "the pane did not close:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").output();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// The command line that starts vectraguard as `runner` with a clean environment.
pub(super) fn vectraguard_command(runner: Runner, home: &RecordsHome, args: &[&str]) -> String {
    let user = runner.invoker();
    let mut words: Vec<String> = Vec::new();
    if runner == Runner::Unprivileged && super::harness::is_root() {
        words.extend([
            "setpriv".to_owned(),
            format!("--reuid={}", user.uid),
            format!("--regid={}", user.gid),
            "--clear-groups".to_owned(),
            "--".to_owned(),
        ]);
    }
    words.extend([
        "env".to_owned(),
        "-i".to_owned(),
        "PATH=/usr/local/bin:/usr/bin:/bin".to_owned(),
        format!("HOME={}", user.home.display()),
        "TERM=xterm-256color".to_owned(),
        format!("VECTRAGUARD_HOME={}", home.arg("")),
        bin().to_owned(),
    ]);
    words.extend(args.iter().map(|a| (*a).to_owned()));
    words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
}

/// dash, whose prompt comes from PS1 (Debian's bash sets its own in bash.bashrc).
fn shell_args() -> Vec<&'static str> {
    vec![
        "sandbox",
        "shell",
        "--shell",
        "/bin/sh",
        "--env",
        "PS1=vg-${USER}-prompt$ ",
    ]
}

/// [`shell_args`] with a prompt of its own, `vg-vgtest-prompt-TAG$`.
pub(super) fn shell_args_tagged(tag: &str) -> (Vec<String>, String) {
    let mut args: Vec<String> = shell_args().iter().map(|a| (*a).to_owned()).collect();
    let last = args.len() - 1;
    args[last] = format!("PS1=vg-${{USER}}-prompt-{tag}$ ");
    (args, format!("vg-vgtest-prompt-{tag}$"))
}

#[test]
fn an_interactive_shell_runs_commands_resizes_and_keeps_ctrl_c_inside() {
    if !require_tools(&[TMUX, BASH]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let t = Tmux::start(
            ws.path(),
            &vectraguard_command(runner, &home, &shell_args()),
            100,
            30,
        );
        t.wait_for(PROMPT);
        // Commands run and print; line editing works (the typo is fixed with a backspace).
        t.keys(&["-l", "echo hellp"]);
        t.keys(&["BSpace"]);
        t.keys(&["-l", "o-from-the-sandbox"]);
        t.keys(&["Enter"]);
        t.wait_for("hello-from-the-sandbox\n");
        // The terminal's size reaches the sandbox, and so does a resize.
        t.line("stty size");
        t.wait_for("30 100");
        let status = t
            .tmux()
            .args(["resize-window", "-t", "vg", "-x", "120", "-y", "40"])
            .status()
            .unwrap();
        assert!(status.success());
        std::thread::sleep(Duration::from_millis(300));
        t.line("stty size");
        t.wait_for("40 120");
        // Ctrl-C interrupts the sandboxed foreground job, not the session.
        t.line("sleep 300; echo not-$((2+2))-interrupted");
        std::thread::sleep(Duration::from_millis(500));
        t.keys(&["C-c"]);
        t.line("echo still-alive-$((6*7))");
        let screen = t.wait_for("still-alive-42");
        assert!(!screen.contains("not-4-interrupted"), "{screen}");
        // It is the sandbox: its own hostname and no host home.
        t.line("echo host=$(hostname)");
        t.wait_for("host=vectraguard");
        t.line("exit");
        t.wait_gone();
        // The record: commands, and a cast that replays the same text.
        let dir = home.only_session();
        let commands = std::fs::read_to_string(dir.join("commands.log")).unwrap();
        assert!(commands.contains(" -- stty size"), "{commands}");
        assert!(commands.contains(" -- sleep 300"), "{commands}");
        let cast = std::fs::read_to_string(dir.join("tty.cast")).unwrap();
        let header: serde_json::Value = serde_json::from_str(cast.lines().next().unwrap()).unwrap();
        assert_eq!(header["version"], 2);
        assert_eq!(header["width"], 100);
        assert_eq!(header["height"], 30);
        assert!(cast.contains("\"r\",\"120x40\""), "no resize event");
        assert!(cast.contains("\"i\""), "no keystrokes recorded");
        let replay = Vg::new(runner, ws.path())
            .args([
                "logs",
                "replay",
                dir.file_name().unwrap().to_str().unwrap(),
                "--speed",
                "1000",
            ])
            .records_home(&home)
            .run();
        replay
            .assert_success()
            .assert_stdout_contains("hello-from-the-sandbox")
            .assert_stdout_contains("still-alive-42");
    });
}

/// `sandbox shell --backend gvisor`: the terminal is one runsc makes and sends to
/// its console socket; the keeper passes its master side to `vectraguard`, which
/// relays and records it as natively. Inside, the command's terminal is one of
/// gVisor's devpts that our relay serves (`vg_sandbox::gvisor_terminal`).
#[test]
fn a_gvisor_shell_runs_on_gvisors_kernel_keeps_ctrl_c_inside_and_is_recorded() {
    if !require_tools(&[TMUX, BASH, ("/usr/bin/runsc", "runsc")]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let (mut args, prompt) = shell_args_tagged("gvisor");
        args.extend(["--backend".to_owned(), "gvisor".to_owned()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let t = Tmux::start(
            ws.path(),
            &vectraguard_command(runner, &home, &args),
            100,
            30,
        );
        t.wait_for(&prompt);
        t.line("echo kernel=$(uname -r) sum=$((6*7))");
        let host_kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let screen = t.wait_for("sum=42");
        let kernel = screen
            .lines()
            .find_map(|l| l.strip_prefix("kernel="))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_default()
            .to_owned();
        assert!(!kernel.is_empty(), "{screen}");
        assert_ne!(
            kernel,
            host_kernel.trim(),
            "the host kernel answered\n{screen}"
        );
        // A terminal of gVisor's own: programs take it for theirs (runsc's host
        // terminal had no name there: `tty` said "not a tty").
        t.line("echo tty-is-$(tty 2>&1)");
        let screen = t.wait_for("tty-is-/");
        assert!(screen.contains("tty-is-/dev/pts/"), "{screen}");
        // The terminal's size reaches the sandbox, and so does a resize.
        t.line("stty size");
        t.wait_for("30 100");
        let status = t
            .tmux()
            .args(["resize-window", "-t", "vg", "-x", "120", "-y", "40"])
            .status()
            .unwrap();
        assert!(status.success());
        std::thread::sleep(Duration::from_millis(300));
        t.line("stty size");
        t.wait_for("40 120");
        // Ctrl-C interrupts the sandboxed foreground job, not the session.
        t.line("sleep 300; echo not-$((2+2))-interrupted");
        std::thread::sleep(Duration::from_millis(1000));
        t.keys(&["C-c"]);
        t.line("echo still-alive-$((6*7))");
        let screen = t.wait_for("still-alive-42");
        assert!(!screen.contains("not-4-interrupted"), "{screen}");
        t.line("exit 3");
        t.wait_gone();
        let dir = home.only_session();
        let meta = super::harness::session_metadata(&dir);
        assert_eq!(meta["layers"]["backend"], "gvisor", "{meta}");
        assert_eq!(meta["exit_code"], 3, "{meta}");
        // Execs from gVisor's trace points; the sleep ended by the interrupt.
        let commands = std::fs::read_to_string(dir.join("commands.log")).unwrap();
        assert!(commands.contains(" -- stty size"), "{commands}");
        assert!(commands.contains(" -- sleep 300"), "{commands}");
        assert!(commands.contains("signal=2"), "{commands}");
        let cast = std::fs::read_to_string(dir.join("tty.cast")).unwrap();
        let header: serde_json::Value = serde_json::from_str(cast.lines().next().unwrap()).unwrap();
        assert_eq!(header["width"], 100);
        assert_eq!(header["height"], 30);
        assert!(cast.contains("\"r\",\"120x40\""), "no resize event");
        assert!(cast.contains("\"i\""), "no keystrokes recorded");
        let id = dir.file_name().unwrap().to_str().unwrap().to_owned();
        Vg::new(runner, ws.path())
            .args(["logs", "verify", &id])
            .records_home(&home)
            .run()
            .assert_success();
        Vg::new(runner, ws.path())
            .args(["logs", "replay", &id, "--speed", "1000"])
            .records_home(&home)
            .run()
            .assert_success()
            .assert_stdout_contains("still-alive-42");
    });
}

#[test]
fn a_full_screen_program_draws_and_exits() {
    if !require_tools(&[TMUX, BASH, VI]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        ws.write("notes.txt", "line one of the notes\n");
        let t = Tmux::start(
            ws.path(),
            &vectraguard_command(runner, &home, &shell_args()),
            80,
            24,
        );
        t.wait_for(PROMPT);
        t.line("vi -u NONE notes.txt");
        // vi fills the screen: the file, then `~` for the lines past its end.
        t.wait("vi's screen", |s| {
            s.contains("line one of the notes") && s.matches("\n~").count() >= 10
        });
        t.keys(&[":q!", "Enter"]);
        // Typed before vi has gone, the next line would be read (and lost) by vi.
        t.wait("the shell's prompt after vi", |s| {
            s.matches(PROMPT).count() >= 2
        });
        t.line("echo back-at-the-prompt");
        t.wait_for("back-at-the-prompt\n");
        t.keys(&["C-d"]);
        t.wait_gone();
    });
}

#[test]
fn tiocsti_from_the_shell_does_not_reach_the_outer_terminal() {
    if !require_tools(&[TMUX, BASH]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let marker = format!("/tmp/vg-injected-{}", unique());
        // The outer terminal runs bash; vectraguard's shell tries to push a command
        // into it with TIOCSTI. It must neither work inside nor appear outside.
        let t = Tmux::start(ws.path(), "bash --norc --noprofile", 100, 30);
        t.line(&format!(
            "{}; echo outer-after-$((1+1))",
            vectraguard_command(runner, &home, &shell_args())
        ));
        t.wait_for(PROMPT);
        let inject = format!(
            "import fcntl, termios, errno\nfor c in 'touch {marker}\\n':\n    try:\n        fcntl.ioctl(0, termios.TIOCSTI, c.encode())\n    except OSError as e:\n        r = errno.errorcode[e.errno]\n    else:\n        r = 'INJECTED'\nprint('tiocsti=' + r)"
        );
        ws.write("inject.py", inject);
        t.line("python3 inject.py");
        t.wait_for("tiocsti=");
        let screen = t.wait_for("tiocsti=EPERM");
        assert!(!screen.contains("tiocsti=INJECTED"), "{screen}");
        t.line("exit");
        t.wait_for("outer-after-2");
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !Path::new(&marker).exists(),
            "an injected command ran outside"
        );
    });
}

/// The same injection from a gVisor shell: whatever gVisor's kernel does with
/// TIOCSTI on the terminal runsc made, it must not reach the outer terminal.
#[test]
fn tiocsti_from_a_gvisor_shell_does_not_reach_the_outer_terminal() {
    if !require_tools(&[TMUX, BASH, ("/usr/bin/runsc", "runsc")]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let marker = format!("/tmp/vg-injected-gvisor-{}", unique());
        let t = Tmux::start(ws.path(), "bash --norc --noprofile", 100, 30);
        let (mut args, prompt) = shell_args_tagged("sti");
        args.extend(["--backend".to_owned(), "gvisor".to_owned()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        t.line(&format!(
            "{}; echo outer-after-$((1+1))",
            vectraguard_command(runner, &home, &args)
        ));
        t.wait_for(&prompt);
        let inject = format!(
            "import fcntl, termios, errno\nfor c in 'touch {marker}\\n':\n    try:\n        fcntl.ioctl(0, termios.TIOCSTI, c.encode())\n    except OSError as e:\n        r = errno.errorcode[e.errno]\n    else:\n        r = 'INJECTED'\nprint('tiocsti=' + r)"
        );
        ws.write("inject.py", inject);
        t.line("python3 inject.py");
        let screen = t.wait_for("tiocsti=");
        t.line("exit");
        t.wait_for("outer-after-2");
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !Path::new(&marker).exists(),
            "an injected command ran outside\n{screen}"
        );
    });
}

/// The gVisor `-t` relay runs as a user of its own, keeping only `CAP_KILL`: the
/// command can neither stop it (before: `kill -STOP 1` froze the terminal, and the
/// session waited for its time-out), and has no capability itself. (Its
/// descriptors' list gVisor still shows: `ls /proc/1/fd` failed here only because
/// gVisor's `statx` of any `/proc/PID/fd` says EINVAL, `/proc/self/fd` too; see
/// `a_gvisor_shell_cannot_stop_trace_or_read_its_relay_nor_regain_a_capability`.)
#[test]
fn a_gvisor_command_cannot_stop_or_read_its_terminal_relay() {
    if !require_tools(&[TMUX, BASH, ("/usr/bin/runsc", "runsc")]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        ws.write(
            "probe.sh",
            "kill -STOP 1; echo stop=$?\n\
             kill -TERM 1; echo term=$?\n\
             echo caps=$(grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status | tr -s '\\t ' ' ')\n\
             echo ids=$(id -u):$(id -g) relay=$(awk '/^Uid/{print $2}' /proc/1/status)\n\
             python3 -c 'import os; print(\"tty-owner=%d\" % os.fstat(0).st_uid)'\n\
             echo probe-$((6*7))-done\n",
        );
        let args = [
            "sandbox",
            "run",
            "-t",
            "--backend",
            "gvisor",
            "--",
            "sh",
            "probe.sh",
        ];
        // The pane stays once vectraguard has ended: the probe's last line comes
        // just before it ends, and a closed pane has no screen to read.
        let t = Tmux::start(
            ws.path(),
            &format!(
                "{}; echo exited-$?; sleep 60",
                vectraguard_command(runner, &home, &args)
            ),
            120,
            30,
        );
        let screen = t.wait_for("probe-42-done");
        t.wait_for("exited-0");
        for refused in ["stop=1", "term=1"] {
            assert!(screen.contains(refused), "{refused}\n{screen}");
        }
        assert!(
            screen.contains(
                "caps=CapPrm: 0000000000000000 CapEff: 0000000000000000 CapBnd: 0000000000000000"
            ),
            "{screen}"
        );
        let ids = screen
            .lines()
            .find_map(|l| l.strip_prefix("ids="))
            .expect("the ids line");
        let (command, relay) = ids.trim().split_once(" relay=").expect(ids);
        let uid = command.split(':').next().unwrap();
        assert_ne!(uid, relay.trim(), "the relay runs as the command's user");
        assert!(screen.contains(&format!("tty-owner={uid}")), "{screen}");
        let dir = home.only_session();
        let meta = super::harness::session_metadata(&dir);
        assert_eq!(meta["exit_code"], 0, "{meta}");
        let relay_user = meta["layers"]["terminal_relay_user"]
            .as_str()
            .unwrap_or_default();
        assert!(
            relay_user.starts_with(&format!("{}:", relay.trim())),
            "{meta}"
        );
    });
}

/// What a command tries against its gVisor `-t` relay (red team, session 17), each
/// printed as `NAME=WORKED` or `NAME=refused`: every signal a command could stop
/// or end it with, by pid and by pidfd; ptrace; its memory, through `/proc/1/mem`
/// and `process_vm_readv`; taking its user; and the same again from a program with
/// file capabilities (`./capped`, python with `CAP_KILL`, `CAP_SETUID`,
/// `CAP_SYS_PTRACE`), which must start with none.
const RELAY_ATTACKS: &str = r#"
import ctypes, os, signal, subprocess
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
def res(name, worked):
    print("%s=%s" % (name, "WORKED" if worked else "refused"), flush=True)
def tries(name, f):
    try:
        f()
        res(name, True)
    except OSError:
        res(name, False)
for sig in ("SIGSTOP", "SIGKILL", "SIGTERM", "SIGHUP", "SIGINT", "SIGTSTP", "SIGUSR1"):
    tries("kill-" + sig, lambda: os.kill(1, getattr(signal, sig)))
pidfd = libc.syscall(434, 1, 0)
res("pidfd-signal", pidfd >= 0 and libc.syscall(424, pidfd, signal.SIGSTOP, None, 0) == 0)
res("ptrace-attach", libc.ptrace(16, 1, None, None) == 0)
res("ptrace-seize", libc.ptrace(0x4206, 1, None, None) == 0)
tries("read-mem", lambda: open("/proc/1/mem", "rb").read(1))
class Iov(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(8)
here, there = Iov(ctypes.cast(buf, ctypes.c_void_p), 8), Iov(0x400000, 8)
res("vm-read", libc.syscall(310, 1, ctypes.byref(here), 1, ctypes.byref(there), 1, 0) >= 0)
relay = int([l.split()[1] for l in open("/proc/1/status") if l.startswith("Uid:")][0])
res("take-relay-user", libc.setresuid(relay, relay, relay) == 0)
capped = "import os, signal\nprint('capped-caps=' + [l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0])\ntry:\n  os.kill(1, signal.SIGSTOP)\n  print('capped-kill=WORKED')\nexcept OSError:\n  print('capped-kill=refused')\n"
out = subprocess.run(["./capped", "-c", capped], capture_output=True, text=True)
print(out.stdout + out.stderr, end="", flush=True)
print("state=" + [l.split()[1] for l in open("/proc/1/status") if l.startswith("State")][0])
print("attacks-" + str(6 * 7) + "-done", flush=True)
"#;

/// A `sandbox shell --backend gvisor` command cannot stop, end, trace or read its
/// terminal relay, nor regain a capability through a file's capabilities, and its
/// session still records the shell's exit status (red team, session 17; each of
/// these worked while the relay was the command's user, and the file's
/// capabilities would without the empty bounding set and `no_new_privs`).
#[test]
fn a_gvisor_shell_cannot_stop_trace_or_read_its_relay_nor_regain_a_capability() {
    if !require_tools(&[
        TMUX,
        BASH,
        ("/usr/bin/runsc", "runsc"),
        ("/usr/sbin/setcap", "libcap2-bin"),
    ]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        ws.write("attacks.py", RELAY_ATTACKS);
        let python = std::fs::canonicalize(super::harness::PYTHON).unwrap();
        let capped = ws.join("capped");
        std::fs::copy(&python, &capped).unwrap();
        super::harness::chown_to(&capped, super::harness::test_user());
        let set = Command::new("/usr/sbin/setcap")
            .arg("cap_kill,cap_setuid,cap_sys_ptrace+ep")
            .arg(&capped)
            .status()
            .unwrap();
        assert!(set.success(), "setcap");
        let t = Tmux::start(ws.path(), "bash --norc --noprofile", 160, 45);
        let (mut args, prompt) = shell_args_tagged("relay");
        args.extend(["--backend".to_owned(), "gvisor".to_owned()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        t.line(&format!(
            "{}; echo outer-status-$?",
            vectraguard_command(runner, &home, &args)
        ));
        t.wait_for(&prompt);
        t.line("python3 attacks.py");
        let screen = t.wait_for("attacks-42-done");
        assert!(!screen.contains("=WORKED"), "{screen}");
        for refused in [
            "kill-SIGSTOP=refused",
            "kill-SIGKILL=refused",
            "pidfd-signal=refused",
            "ptrace-attach=refused",
            "read-mem=refused",
            "vm-read=refused",
            "take-relay-user=refused",
            "capped-caps=0000000000000000",
            "capped-kill=refused",
        ] {
            assert!(screen.contains(refused), "{refused}\n{screen}");
        }
        assert!(
            !screen.contains("state=T"),
            "the relay is stopped\n{screen}"
        );
        // The relay still relays, and the session ends with the shell's status.
        t.line("echo still-$((2+3)); exit 7");
        t.wait_for("outer-status-7");
        let dir = home.only_session();
        let meta = super::harness::session_metadata(&dir);
        assert_eq!(meta["exit_code"], 7, "{meta}");
        let cast = std::fs::read_to_string(dir.join("tty.cast")).unwrap();
        assert!(cast.contains("still-5"), "{cast}");
    });
}

/// SIGKILLs the `vectraguard` of the session named `name`: the supervisor, not its
/// terminal guardian, a fork of it (told apart by parent, not by pid: pids wrap).
fn kill_supervisor(name: &str) {
    let ours: Vec<u32> = super::harness::host_processes_with(name)
        .into_iter()
        .filter(|(_, cmd)| cmd.starts_with(bin()))
        .map(|(pid, _)| pid)
        .collect();
    let parent = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // After the command's name, in parentheses: state, then the parent's pid.
        stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()
    };
    let vg_pid = ours
        .iter()
        .copied()
        .find(|&pid| parent(pid).is_some_and(|p| !ours.contains(&p)))
        .expect("the vectraguard process");
    let status = Command::new("kill")
        .args(["-KILL", &vg_pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn the_outer_terminal_is_restored_on_every_exit_path() {
    if !require_tools(&[TMUX, BASH]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let t = Tmux::start(ws.path(), "bash --norc --noprofile", 100, 30);
        let before = ws.join("stty.before");
        t.line(&format!("stty -g > {}", before.display()));
        for (n, how) in ["exit", "ctrl-d", "shell killed", "vectraguard killed"]
            .iter()
            .enumerate()
        {
            let (mut args, prompt) = shell_args_tagged(&n.to_string());
            // A name of its own, to find this vectraguard among other tests' ones.
            let name = format!("restore-{}", unique());
            args.extend(["--name".to_owned(), name.clone()]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let vg = vectraguard_command(runner, &home, &args);
            let after = ws.join(format!("stty.after.{n}"));
            // `$((100+n))` so that the typed line never matches what we wait for.
            t.line(&format!(
                "{vg}; stty -g > {}; echo restored-$((100+{n}))",
                after.display()
            ));
            t.wait_for(&prompt);
            match *how {
                "exit" => t.line("exit"),
                "ctrl-d" => t.keys(&["C-d"]),
                "shell killed" => t.line("kill -KILL $$"),
                _ => kill_supervisor(&name),
            }
            t.wait_for(&format!("restored-{}", 100 + n));
            assert_eq!(
                std::fs::read_to_string(&after).unwrap(),
                std::fs::read_to_string(&before).unwrap(),
                "terminal settings differ after: {how}"
            );
        }
    });
}

#[test]
fn without_a_terminal_shell_needs_no_tty_flag() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = Vg::new(runner, ws.path())
            .args(["sandbox", "shell"])
            .stdin("echo hi\n")
            .run();
        out.assert_code(125).assert_stderr_contains("-T");
        let out = Vg::new(runner, ws.path())
            .args(["sandbox", "shell", "-T", "--shell", "/bin/sh"])
            .stdin("echo from-stdin-$((2+3))\n")
            .run();
        out.assert_success().assert_stdout_contains("from-stdin-5");
        // `run -t` gives a command a terminal even without one outside.
        let out = Vg::new(runner, ws.path())
            .args([
                "sandbox",
                "run",
                "-t",
                "--",
                "sh",
                "-c",
                "[ -t 0 ] && [ -t 1 ] && tty",
            ])
            .run();
        out.assert_success().assert_stdout_contains("/dev/pts/");
        // With piped input, its end reaches the program as the terminal's EOF.
        let out = Vg::new(runner, ws.path())
            .args(["sandbox", "run", "-t", "--", "sh"])
            .stdin("echo piped-$((3+4))\n")
            .run();
        out.assert_success().assert_stdout_contains("piped-7");
        // The terminal is relayed by the session: no --no-record with it.
        let out = Vg::new(runner, ws.path())
            .args(["sandbox", "run", "-t", "--no-record", "--", "true"])
            .run();
        out.assert_code(125).assert_stderr_contains("--no-record");
    });
}

/// Tries TIOCSETD (set the line discipline, here to N_TTY) on fd 0 and prints
/// `setd=ok` or `setd=ERRNO`.
const SET_LINE_DISCIPLINE: &str = "import fcntl, struct, errno\ntry:\n    fcntl.ioctl(0, 0x5423, struct.pack('i', 0))\n    print('setd=ok')\nexcept OSError as e:\n    print('setd=' + errno.errorcode[e.errno])\n";

#[test]
fn a_recorded_run_without_t_never_holds_the_users_terminal() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        ws.write("setd.py", SET_LINE_DISCIPLINE);
        // Writes to fd 0, changes the terminal's modes and its line discipline,
        // then reads what is typed until the end of input.
        ws.write(
            "attack.sh",
            "echo LEAKED-$((6*7)) >&0 2>/dev/null; echo write=$?\nstty -echo raw <&0 2>/dev/null; echo stty=$?\npython3 setd.py\necho reading-$((1+1))\ncat\necho cat-done-$((2+3))\n",
        );
        let t = Tmux::start(ws.path(), "bash --norc --noprofile", 100, 30);
        let before = ws.join("stty.before");
        let after = ws.join("stty.after");
        t.line(&format!("stty -a > {}", before.display()));
        let vg = vectraguard_command(runner, &home, &["sandbox", "run", "--", "sh", "attack.sh"]);
        t.line(&format!(
            "{vg}; stty -a > {}; echo after-$((50+50))",
            after.display()
        ));
        let screen = t.wait_for("reading-2");
        assert!(!screen.contains("LEAKED-42"), "{screen}");
        assert!(!screen.contains("write=0"), "{screen}");
        assert!(!screen.contains("stty=0"), "{screen}");
        assert!(!screen.contains("setd=ok"), "{screen}");
        // Typed input reaches the command through the relay; Ctrl-D ends it.
        t.line("typed-input-xyz");
        t.wait("the typed line echoed by cat", |s| {
            s.matches("typed-input-xyz").count() >= 2
        });
        t.keys(&["C-d"]);
        t.wait_for("cat-done-5");
        t.wait_for("after-100");
        assert_eq!(
            std::fs::read_to_string(&after).unwrap(),
            std::fs::read_to_string(&before).unwrap(),
            "the terminal's settings changed"
        );
        let stdout = std::fs::read_to_string(home.only_session().join("stdout.log")).unwrap();
        assert!(stdout.contains("typed-input-xyz"), "{stdout}");
        assert!(!stdout.contains("write=0"), "{stdout}");
    });
}

#[test]
fn an_unrecorded_run_leaves_the_users_terminal_as_it_was() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        ws.write("setd.py", SET_LINE_DISCIPLINE);
        ws.write(
            "modes.sh",
            "stty -echo -icanon <&0; echo stty=$?\npython3 setd.py\necho done-$((3+4))\n",
        );
        let t = Tmux::start(ws.path(), "bash --norc --noprofile", 100, 30);
        let before = ws.join("stty.before");
        let after = ws.join("stty.after");
        t.line(&format!("stty -a > {}", before.display()));
        let vg = vectraguard_command(
            runner,
            &home,
            &["sandbox", "run", "--no-record", "--", "sh", "modes.sh"],
        );
        t.line(&format!(
            "{vg}; stty -a > {}; echo after-$((50+50))",
            after.display()
        ));
        let screen = t.wait_for("after-100");
        // The command had the terminal (--no-record): it could change its modes, but
        // not its line discipline, and the modes are put back.
        assert!(screen.contains("stty=0"), "{screen}");
        assert!(screen.contains("setd=EPERM"), "{screen}");
        assert_eq!(
            std::fs::read_to_string(&after).unwrap(),
            std::fs::read_to_string(&before).unwrap(),
            "the terminal's settings changed"
        );
    });
}

/// A `-t` command that leaves the outer terminal in the alternate screen, with the
/// cursor hidden, mouse reporting and application cursor keys on: the session's end
/// turns them off on the user's terminal, and the record keeps the command's bytes
/// as they were.
#[test]
fn a_terminal_session_turns_off_the_modes_the_sandbox_left_on() {
    if !require_tools(&[TMUX, BASH]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        ws.write(
            "modes.sh",
            "printf '\\033[?1049h\\033[?25l\\033[?1000h\\033[?1h'; echo modes-$((2+3))\n",
        );
        let t = Tmux::start(ws.path(), "bash --norc --noprofile", 100, 30);
        let vg = vectraguard_command(
            runner,
            &home,
            &["sandbox", "run", "-t", "--", "sh", "modes.sh"],
        );
        t.line(&format!("{vg}; echo after-$((50+50))"));
        t.wait_for("after-100");
        assert_eq!(
            t.modes(),
            Tmux::MODES_OFF,
            "alternate screen, cursor shown, mouse, cursor keys after the session"
        );
        let cast = std::fs::read_to_string(home.only_session().join("tty.cast")).unwrap();
        assert!(cast.contains("\\u001b[?1049h"), "{cast}");
        assert!(cast.contains("modes-5"), "{cast}");
        assert!(
            !cast.contains("\\u001b[?1049l"),
            "the reset was recorded: {cast}"
        );
    });
}

/// The same when Vectra Guard is killed with SIGKILL mid-session: its terminal
/// guardian turns the modes off before it puts the terminal's settings back.
#[test]
fn the_modes_are_turned_off_when_vectraguard_is_killed() {
    if !require_tools(&[TMUX, BASH]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        ws.write(
            "modes.sh",
            "printf '\\033[?1049h\\033[?25l\\033[?1000h\\033[?1h'; echo modes-$((2+3)); exec sleep 600\n",
        );
        let t = Tmux::start(ws.path(), "bash --norc --noprofile", 100, 30);
        let name = format!("modes-killed-{}", unique());
        let vg = vectraguard_command(
            runner,
            &home,
            &[
                "sandbox", "run", "-t", "--name", &name, "--", "sh", "modes.sh",
            ],
        );
        t.line(&vg);
        t.wait_for("modes-5");
        kill_supervisor(&name);
        // The shell learns of the death as the guardian does and may print before the
        // guardian has turned the alternate screen off, onto the screen that goes
        // away with it (the README says so). So the next line is typed once every
        // vectraguard process is gone: it is neither lost to that screen nor flushed
        // by the guardian's restore.
        let end = Instant::now() + Duration::from_secs(20);
        while !super::harness::host_processes_with(&name).is_empty() {
            assert!(Instant::now() < end, "vectraguard's processes outlived it");
            std::thread::sleep(Duration::from_millis(20));
        }
        t.line("echo after-$((50+50))");
        t.wait_for("after-100");
        assert_eq!(
            t.modes(),
            Tmux::MODES_OFF,
            "alternate screen, cursor shown, mouse, cursor keys after vectraguard was killed"
        );
    });
}

#[test]
fn a_refusal_note_keeps_the_raw_terminal_in_order() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let mut args = shell_args();
        args.extend(["--allow", "localhost"]);
        // Wide enough that the note is one screen line.
        let t = Tmux::start(
            ws.path(),
            &vectraguard_command(runner, &home, &args),
            220,
            24,
        );
        t.wait_for(PROMPT);
        t.line(
            "python3 -c 'import socket; socket.socket().connect_ex((\"10.255.255.1\", 80))'; echo after-the-note",
        );
        let screen = t.wait("the echo after the note", |s| {
            s.lines()
                .any(|l| l.ends_with("after-the-note") && !l.contains("echo"))
        });
        // Each line starts at the left margin: a bare "\n" in raw mode would start the
        // next line where the note ended.
        let lines: Vec<&str> = screen.lines().collect();
        let note = lines
            .iter()
            .position(|l| l.starts_with("vectraguard: refused 10.255.255.1:80 — no rule allows it"))
            .unwrap_or_else(|| panic!("no note at the left margin:\n{screen}"));
        assert_eq!(
            lines.get(note + 1).copied(),
            Some("after-the-note"),
            "{screen}"
        );
        assert_eq!(
            screen.matches("vectraguard: refused").count(),
            1,
            "{screen}"
        );
        t.keys(&["C-d"]);
        t.wait_gone();
    });
}

/// The approval gate's prompt (`--ask`) on the user's own terminal, during a shell:
/// `n` denies (the files survive), `y` approves, the shell goes on either way, and the
/// record says the terminal decided.
#[test]
fn the_approval_prompt_decides_from_the_users_terminal_during_a_shell() {
    if !require_tools(&[TMUX]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let (mut args, prompt) = shell_args_tagged("ask");
        args.extend(["--ask".to_owned(), "high".to_owned()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let t = Tmux::start(
            ws.path(),
            &vectraguard_command(runner, &home, &args),
            120,
            40,
        );
        t.wait_for(&prompt);
        t.line("mkdir -p /tmp/x && touch /tmp/x/f && rm -rf /tmp/x; ls /tmp/x; echo listed-$?");
        t.wait_for("Approve? [y]es once");
        // Keys in the first 300 ms are typeahead, never an answer.
        std::thread::sleep(Duration::from_millis(400));
        t.keys(&["-l", "n"]);
        let screen = t.wait_for("listed-0");
        assert!(screen.contains("→ denied"), "{screen}");
        t.line("clear");
        t.wait(&prompt, |s| s.trim_start().starts_with(&prompt));
        t.line("rm -rf /tmp/x; ls /tmp/x; echo listed-$?");
        t.wait_for("Approve? [y]es once");
        std::thread::sleep(Duration::from_millis(400));
        t.keys(&["-l", "y"]);
        let screen = t.wait_for("listed-2");
        assert!(screen.contains("→ approved"), "{screen}");
        // The answers never reached the shell: it still takes commands as typed.
        t.line("echo still-$((20+1))");
        t.wait_for("still-21");
        t.line("exit");
        t.wait_gone();
        let events = std::fs::read_to_string(home.only_session().join("events.jsonl")).unwrap();
        let decided: Vec<serde_json::Value> = events
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|e| e["type"] == "approval" && e["event"] == "decided")
            .collect();
        assert_eq!(decided.len(), 2, "{events}");
        assert_eq!(decided[0]["decision"], "deny");
        assert_eq!(decided[1]["decision"], "approve");
        assert!(
            decided.iter().all(|d| d["who"]["by"] == "tty"),
            "{decided:?}"
        );
    });
}

/// Without `-t` the sandbox's stdin is a pipe from the user's terminal; the prompt
/// still asks there. `a` approves for the session (the second identical exec runs
/// without asking), and the keys typed as the answer never reach the sandbox's stdin.
#[test]
fn the_approval_prompt_works_in_a_plain_run_and_keeps_the_answer_from_the_sandbox() {
    if !require_tools(&[TMUX]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write(
            "twice.sh",
            "#!/bin/sh\nfor i in 1 2; do mkdir -p /tmp/v; rm -rf /tmp/v && echo removed-$i; done\nread line\necho \"got=[$line]\"\n",
        );
        let home = RecordsHome::new(runner);
        let t = Tmux::start(
            ws.path(),
            &format!(
                "{}; echo exited-$?; sleep 60",
                vectraguard_command(
                    runner,
                    &home,
                    &["sandbox", "run", "--ask", "high", "twice.sh"]
                )
            ),
            120,
            40,
        );
        t.wait_for("Approve? [y]es once");
        std::thread::sleep(Duration::from_millis(400));
        t.keys(&["-l", "a"]);
        t.keys(&["Enter"]);
        t.wait_for("removed-2");
        let screen = t.screen();
        assert_eq!(screen.matches("Approve? [y]es once").count(), 1, "{screen}");
        t.line("typed-later");
        let screen = t.wait_for("exited-0");
        assert!(screen.contains("got=[typed-later]"), "{screen}");
    });
}

/// With `-t`, a full-screen program whose exec is held gets the prompt drawn over its
/// screen; once answered, the program is asked to redraw (a size change, SIGWINCH), so
/// nothing of the prompt is left on its screen.
///
/// The program repaints whenever asked, as editors and agents' full-screen front ends
/// do: it waits in `wait`, where bash runs a trap at once. A foreground `sleep` would
/// defer the trap until the sleep ended, and the test would then depend on the
/// SIGWINCH arriving before `rm` had finished (it failed once in CI when it did not).
#[test]
fn a_full_screen_program_is_redrawn_after_the_approval_prompt() {
    if !require_tools(&[TMUX, BASH]) {
        return;
    }
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write(
            "screen.sh",
            "#!/bin/bash\ndraw() { printf '\\033[2J\\033[H'; echo \"FULL-SCREEN-$1\"; }\nmkdir -p /tmp/x\ntrap 'draw redrawn' WINCH\nprintf '\\033[?1049h'\ndraw first\nrm -rf /tmp/x\nsleep 30 & while ! wait $!; do :; done\n",
        );
        let home = RecordsHome::new(runner);
        let t = Tmux::start(
            ws.path(),
            &vectraguard_command(
                runner,
                &home,
                &[
                    "sandbox",
                    "run",
                    "-t",
                    "--ask",
                    "high",
                    "--",
                    "bash",
                    "screen.sh",
                ],
            ),
            100,
            30,
        );
        t.wait_for("Approve? [y]es once");
        std::thread::sleep(Duration::from_millis(400));
        t.keys(&["-l", "y"]);
        let screen = t.wait("the program's redraw", |s| {
            s.contains("FULL-SCREEN-redrawn") && !s.contains("Approve?")
        });
        assert!(!screen.contains("approval needed"), "{screen}");
        // Ctrl-C ends the program (and with it the session).
        t.keys(&["C-c"]);
        t.wait_gone();
    });
}
