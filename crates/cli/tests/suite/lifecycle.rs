//! Exit statuses, signals, the end of a session, scripts and standard streams.

use std::time::Duration;

use super::harness::{
    Vg, Workspace, assert_no_process_left, each_identity, host_processes_running,
    host_processes_with, run, sh, unique, wait_until,
};

#[test]
fn exit_status_is_the_commands_own() {
    each_identity(|runner| {
        let ws = Workspace::new();
        for code in [0, 1, 3, 42, 255] {
            sh(runner, &ws, &format!("exit {code}")).assert_code(code);
        }
    });
}

#[test]
fn death_by_signal_is_128_plus_the_signal_number() {
    each_identity(|runner| {
        let ws = Workspace::new();
        sh(runner, &ws, "kill -TERM $$").assert_code(143);
        sh(runner, &ws, "kill -KILL $$").assert_code(137);
        sh(runner, &ws, "kill -SEGV $$").assert_code(139);
    });
}

#[test]
fn missing_command_is_127() {
    each_identity(|runner| {
        let ws = Workspace::new();
        run(runner, &ws, &[], &["vg-e2e-no-such-command"])
            .assert_code(127)
            .assert_stderr_contains("vg-e2e-no-such-command");
        run(runner, &ws, &[], &["/usr/bin/vg-e2e-no-such-command"]).assert_code(127);
        // A script path that does not exist.
        let out = Vg::new(runner, ws.path())
            .args(["sandbox", "run", "vg-e2e-missing.sh"])
            .run();
        out.assert_code(127)
            .assert_stderr_contains("vg-e2e-missing.sh");
    });
}

#[test]
fn non_executable_file_is_126() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write_mode("data.txt", "echo should not run\n", 0o644);
        let out = run(runner, &ws, &[], &["./data.txt"]);
        out.assert_code(126);
        assert!(!out.stdout.contains("should not run"), "{out}");
        run(runner, &ws, &[], &["/usr"]).assert_code(126);
    });
}

#[test]
fn unknown_flag_is_125_and_runs_nothing() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write("marker.sh", "echo RAN\n");
        for args in [
            vec![
                "sandbox",
                "run",
                "--vg-no-such-flag",
                "--",
                "sh",
                "-c",
                "echo RAN",
            ],
            vec!["sandbox", "run", "--vg-no-such-flag", "marker.sh"],
            vec!["sandbox", "run", "--vg-no-such-flag"],
            vec!["sandbox", "--vg-no-such-flag"],
            vec!["vg-no-such-subcommand"],
        ] {
            let out = Vg::new(runner, ws.path()).args(&args).run();
            out.assert_code(125);
            assert!(!out.stdout.contains("RAN"), "{out}");
        }
    });
}

#[test]
fn invalid_flag_values_are_125_and_run_nothing() {
    each_identity(|runner| {
        let ws = Workspace::new();
        for options in [
            vec!["--network", "bogus"],
            vec!["--env", "1BAD=x"],
            vec!["--env", "A-B=x"],
            vec!["--mount", "no-colon"],
            vec!["--mount", "/tmp:/x:rx"],
            vec!["--mount", "/tmp:relative"],
            vec!["--read-only", "relative/path"],
            vec!["--user", "root"],
            vec!["--name", ""],
        ] {
            let out = run(runner, &ws, &options, &["sh", "-c", "echo RAN"]);
            out.assert_code(125);
            assert!(!out.stdout.contains("RAN"), "{out}");
            assert!(
                out.stderr.contains("vectraguard"),
                "the error does not say who failed\n{out}"
            );
        }
        // Nothing to run at all.
        Vg::new(runner, ws.path())
            .args(["sandbox", "run"])
            .run()
            .assert_code(125);
    });
}

#[test]
fn sigterm_to_vectraguard_ends_the_command_and_exits_143() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let seconds = format!("60.{}", unique());
        let sleep = format!("sleep {seconds}");
        let running = Vg::sandbox(runner, &ws, &[], &["sleep", &seconds]).spawn();
        let started = wait_until(Duration::from_secs(10), || {
            !host_processes_running(&sleep).is_empty()
        });
        assert!(started, "the sandboxed sleep never started");
        running.signal("TERM");
        let out = running.finish(Duration::from_secs(10));
        out.assert_code(143);
        assert_no_process_left(&sleep, &out);
    });
}

/// A command that stopped itself (SIGSTOP, as job control leaves one) still ends
/// when vectraguard is hung up on or terminated: the signal is followed by SIGCONT,
/// or it would stay pending, and the session alive, for ever (red team, session 13).
#[test]
fn a_stopped_command_ends_when_vectraguard_is_hung_up_on_or_terminated() {
    each_identity(|runner| {
        for (signal, code) in [("HUP", 129), ("TERM", 143)] {
            let ws = Workspace::new();
            let seconds = format!("61.{}", unique());
            let script = format!("sleep {seconds} & kill -STOP $$; wait");
            let running = Vg::sandbox(runner, &ws, &[], &["sh", "-c", &script]).spawn();
            let sleep = format!("sleep {seconds}");
            let stopped = wait_until(Duration::from_secs(10), || {
                host_processes_with(&script).iter().any(|(pid, _)| {
                    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                        s.rsplit(')')
                            .next()
                            .is_some_and(|r| r.trim_start().starts_with('T'))
                    })
                })
            });
            assert!(stopped, "the sandboxed shell never stopped itself");
            running.signal(signal);
            let out = running.finish(Duration::from_secs(10));
            out.assert_code(code);
            assert_no_process_left(&sleep, &out);
        }
    });
}

#[test]
fn sigkill_of_vectraguard_kills_the_whole_sandbox() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let u = unique();
        // A sandbox with a command, a background child and a detached grandchild.
        let script = format!("sleep 61.{u} & setsid sh -c 'exec sleep 62.{u}' & exec sleep 63.{u}");
        let markers = [
            format!("sleep 61.{u}"),
            format!("sleep 62.{u}"),
            format!("sleep 63.{u}"),
        ];
        let running = Vg::sandbox(runner, &ws, &[], &["sh", "-c", &script]).spawn();
        let started = wait_until(Duration::from_secs(10), || {
            markers
                .iter()
                .all(|m| !host_processes_running(m).is_empty())
        });
        assert!(started, "the sandboxed processes never started");
        running.signal("KILL");
        let out = running.finish(Duration::from_secs(10));
        assert_eq!(out.code(), None, "vectraguard was not killed\n{out}");
        for m in &markers {
            assert_no_process_left(m, &out);
        }
    });
}

#[test]
fn orphaned_children_are_reaped() {
    each_identity(|runner| {
        let ws = Workspace::new();
        // Each `sh -c 'true &'` leaves its child to init; init must reap them all.
        let out = sh(
            runner,
            &ws,
            r#"i=0; while [ $i -lt 100 ]; do sh -c 'true &'; i=$((i+1)); done
n=1; i=0
while [ $i -lt 500 ]; do
  n=$(grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l)
  [ "$n" -eq 0 ] && break
  sleep 0.01; i=$((i+1))
done
echo zombies=$n"#,
        );
        out.assert_success();
        assert_eq!(out.field("zombies"), "0", "zombies are not reaped\n{out}");
    });
}

#[test]
fn script_with_a_shebang_runs_with_its_interpreter() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write_mode(
            "bashism.sh",
            "#!/bin/bash\narr=(one two three)\n[[ ${#arr[@]} == 3 ]] && echo bashism=ok\necho shell=${BASH_VERSION:+bash}\n",
            0o755,
        );
        let out = Vg::new(runner, ws.path())
            .args(["sandbox", "run", "bashism.sh"])
            .run();
        out.assert_success();
        assert_eq!(out.field("bashism"), "ok", "{out}");
        assert_eq!(out.field("shell"), "bash", "{out}");

        ws.write_mode(
            "tool.py",
            "#!/usr/bin/env python3\nimport sys\nprint('py=' + sys.executable)\n",
            0o644,
        );
        let out = Vg::new(runner, ws.path())
            .args(["sandbox", "run", "tool.py"])
            .run();
        out.assert_success();
        assert!(out.field("py").ends_with("python3"), "{out}");
    });
}

#[test]
fn script_without_a_shebang_runs_with_sh() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write_mode(
            "plain.sh",
            "echo exe=$(readlink /proc/$$/exe)\necho zero=$0\n",
            0o644,
        );
        let out = Vg::new(runner, ws.path())
            .args(["sandbox", "run", "plain.sh"])
            .run();
        out.assert_success();
        let sh = std::fs::canonicalize("/bin/sh").unwrap();
        assert_eq!(out.field("exe"), sh.display().to_string(), "{out}");
        assert_eq!(out.field("zero"), ws.arg("plain.sh"), "{out}");
    });
}

#[test]
fn script_arguments_are_passed_through() {
    each_identity(|runner| {
        let ws = Workspace::new();
        ws.write_mode(
            "sub/args.sh",
            "#!/bin/sh\necho count=$#\nfor a in \"$@\"; do printf '[%s]' \"$a\"; done\necho\n",
            0o755,
        );
        let out = Vg::new(runner, ws.path())
            .args([
                "sandbox",
                "run",
                "sub/args.sh",
                "a",
                "b c",
                "",
                "--flag",
                "-x",
            ])
            .run();
        out.assert_success();
        assert_eq!(out.field("count"), "5", "{out}");
        assert!(out.stdout.contains("[a][b c][][--flag][-x]"), "{out}");
        // The same through `-- CMD`.
        let out = run(
            runner,
            &ws,
            &[],
            &["sh", "-c", "printf '[%s]' \"$@\"", "sh", "x y", "--z"],
        );
        out.assert_success().assert_stdout_contains("[x y][--z]");
    });
}

#[test]
fn stdin_stdout_and_stderr_are_passed_through() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = Vg::sandbox(runner, &ws, &[], &["cat"])
            .stdin("hi\nthere\n")
            .run();
        out.assert_success();
        assert_eq!(out.stdout, "hi\nthere\n", "{out}");

        let out = sh(runner, &ws, "echo to-out; echo to-err >&2");
        out.assert_success();
        assert_eq!(out.stdout, "to-out\n", "{out}");
        assert!(out.stderr.contains("to-err"), "{out}");
        assert!(!out.stdout.contains("to-err"), "{out}");

        // A large stream does not stall.
        let big = "x".repeat(4 << 20);
        let out = Vg::sandbox(runner, &ws, &[], &["wc", "-c"])
            .stdin(big)
            .run();
        out.assert_success();
        assert_eq!(out.stdout.trim(), (4 << 20).to_string(), "{out}");
    });
}
