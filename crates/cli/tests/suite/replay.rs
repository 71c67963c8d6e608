//! `vectraguard logs replay`: playing a session's terminal recording (`tty.cast`) back.
//! The sessions are written with the `vg-records` library by a thread whose filesystem
//! identity is the runner's invoker (as in `logs.rs`), so they belong to the user who
//! replays them; recordings with pauses no real test could wait for are written by hand.

use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use vg_records::{End, Metadata, Origin, SessionStore, SessionWriter};

use super::harness::{Output, RecordsHome, Runner, Vg, as_invoker};

fn meta() -> Metadata {
    let mut m = Metadata::new(Origin::Cli);
    m.name = Some("shell".into());
    m.command = vec!["/bin/bash".into()];
    m.cwd_inside = Some("/work".into());
    m
}

/// Records a finished session; `terminal` writes its tty.cast (or not) before the end.
/// Returns the session id and folder.
fn session(
    runner: Runner,
    home: &RecordsHome,
    terminal: impl FnOnce(&SessionWriter) + Send,
) -> (String, PathBuf) {
    let logs = home.logs();
    as_invoker(runner, move || {
        let w = SessionStore::open(&logs).unwrap().create(meta()).unwrap();
        w.append_stdout(b"plain output\n").unwrap();
        terminal(&w);
        let id = w.id().to_owned();
        let dir = w.dir().to_owned();
        w.finish(End::exited(0)).unwrap();
        (id, dir)
    })
}

/// A session with no terminal, then `cast` written by hand as its tty.cast.
fn hand_written(runner: Runner, home: &RecordsHome, cast: &str) -> String {
    let (id, dir) = session(runner, home, |_| {});
    as_invoker(runner, || fs::write(dir.join("tty.cast"), cast).unwrap());
    id
}

fn logs(runner: Runner, home: &RecordsHome, args: &[&str]) -> Output {
    Vg::new(runner, home.path())
        .arg("logs")
        .args(args)
        .records_home(home)
        .run()
}

const HEADER: &str = r#"{"version": 2, "width": 80, "height": 24, "timestamp": 1766139053, "env": {"SHELL": "/bin/bash", "TERM": "xterm-256color"}}"#;

#[test]
fn replay_prints_exactly_what_the_terminal_showed() {
    super::harness::each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let (id, _) = session(runner, &home, |w| {
            let euro = "€".as_bytes();
            w.start_cast(80, 24, &[("SHELL", "/bin/bash"), ("TERM", "xterm")])
                .unwrap();
            w.cast_output(b"$ ").unwrap();
            w.cast_input(b"echo \xe2\x82").unwrap(); // keystrokes are not replayed
            w.cast_input(b"\xac\r").unwrap();
            w.cast_output(b"echo ").unwrap();
            w.cast_output(&euro[..2]).unwrap(); // split inside a character
            w.cast_output(&euro[2..]).unwrap();
            w.cast_output(b"\r\n\x1b[1;32m").unwrap();
            w.cast_resize(100, 30).unwrap();
            w.cast_output(b"\xe2\x82\xac\x1b[0m\r\n$ \xf0\x9f").unwrap();
            w.cast_output(b"\x98\x80 exit\r\n").unwrap();
        });
        let out = logs(runner, &home, &["replay", &id, "--speed", "1000"]);
        out.assert_success();
        assert_eq!(
            out.stdout, "$ echo €\r\n\x1b[1;32m€\x1b[0m\r\n$ 😀 exit\r\n",
            "{out}"
        );
        assert_eq!(out.stderr, "", "{out}");

        // A prefix of the id works as everywhere else, and the recording is chained.
        let prefix = &id["session-".len()..id.len() - 3];
        let again = logs(runner, &home, &["replay", prefix, "--speed", "1000"]);
        assert_eq!(again.stdout, out.stdout, "{again}");
        logs(runner, &home, &["verify", &id])
            .assert_success()
            .assert_stdout_contains("intact");
        logs(runner, &home, &["show", &id])
            .assert_success()
            .assert_stdout_contains(&format!(
                "Terminal     recorded (tty.cast); replay it with `vectraguard logs replay {id}`"
            ));
    });
}

#[test]
fn a_hand_written_asciicast_plays_and_input_is_skipped() {
    super::harness::each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let id = hand_written(
            runner,
            &home,
            &format!(
                "{HEADER}\n[0.1, \"o\", \"a\"]\n[0.2, \"i\", \"typed\"]\n[0.3, \"r\", \"90x20\"]\n\
                 [0.4, \"m\", \"marker\"]\n[0.5, \"o\", \"b\\u001b[0m\\n\"]\n"
            ),
        );
        let out = logs(runner, &home, &["replay", &id, "--speed", "100"]);
        out.assert_success();
        assert_eq!(out.stdout, "ab\x1b[0m\n", "{out}");
        // At the recorded speed, the half second of the recording is waited for.
        let started = Instant::now();
        logs(runner, &home, &["replay", &id]).assert_success();
        assert!(
            started.elapsed() >= Duration::from_millis(450),
            "played in {:?}",
            started.elapsed()
        );
    });
}

#[test]
fn idle_limit_and_speed_shorten_long_pauses() {
    super::harness::each_identity(|runner| {
        let home = RecordsHome::new(runner);
        // An hour of silence between the two halves.
        let id = hand_written(
            runner,
            &home,
            &format!(
                "{HEADER}\n[0.010000, \"o\", \"before \"]\n[3600.010000, \"o\", \"after\"]\n\
                 [7200.5, \"o\", \"!\"]\n"
            ),
        );
        let started = Instant::now();
        let out = logs(runner, &home, &["replay", &id, "--idle-limit", "0.01"]);
        out.assert_success();
        assert_eq!(out.stdout, "before after!", "{out}");
        let out = logs(runner, &home, &["replay", &id, "--speed", "1000000"]);
        out.assert_success();
        assert_eq!(out.stdout, "before after!", "{out}");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the pauses were not shortened: {:?}",
            started.elapsed()
        );
    });
}

#[test]
fn speed_and_idle_limit_must_be_valid() {
    super::harness::each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let (id, _) = session(runner, &home, |w| {
            w.start_cast(80, 24, &[]).unwrap();
            w.cast_output(b"x").unwrap();
        });
        for speed in ["0", "x", "-2", "inf"] {
            let out = logs(runner, &home, &["replay", &id, "--speed", speed]);
            out.assert_code(125)
                .assert_stderr_contains(&format!("invalid speed {speed:?}"))
                .assert_stderr_contains("greater than 0");
            assert_eq!(out.stdout, "", "{out}");
        }
        logs(runner, &home, &["replay", &id, "--idle-limit", "soon"])
            .assert_code(125)
            .assert_stderr_contains("invalid idle limit \"soon\"");
        logs(
            runner,
            &home,
            &["replay", &id, "--speed", "0.5", "--idle-limit", "0"],
        )
        .assert_success();
    });
}

#[test]
fn a_session_without_a_terminal_says_so() {
    super::harness::each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let (id, _) = session(runner, &home, |_| {});
        let out = logs(runner, &home, &["replay", &id]);
        out.assert_code(125).assert_stderr_contains(&format!(
            "session {id} has no terminal recording (it was not run with a terminal)"
        ));
        assert_eq!(out.stdout, "", "{out}");
        // Its records are complete without one.
        logs(runner, &home, &["verify", &id]).assert_success();
        let show = logs(runner, &home, &["show", &id]);
        show.assert_success();
        assert!(!show.stdout.contains("Terminal"), "{show}");
        logs(runner, &home, &["replay", "no-such-session"])
            .assert_code(125)
            .assert_stderr_contains("no session matches");
    });
}

#[test]
fn a_malformed_line_is_named_before_anything_plays() {
    super::harness::each_identity(|runner| {
        let home = RecordsHome::new(runner);
        let id = hand_written(
            runner,
            &home,
            &format!("{HEADER}\n[0.1, \"o\", \"fine\"]\n[0.2, \"o\"]\n[0.3, \"o\", \"late\"]\n"),
        );
        let out = logs(runner, &home, &["replay", &id]);
        out.assert_code(125)
            .assert_stderr_contains("tty.cast line 3 is not an asciicast event")
            .assert_stderr_contains(&format!("vectraguard logs verify {id}"));
        assert_eq!(out.stdout, "", "{out}");

        let bad_header = hand_written(runner, &home, "{\"version\": 1}\n[0.1, \"o\", \"x\"]\n");
        logs(runner, &home, &["replay", &bad_header])
            .assert_code(125)
            .assert_stderr_contains("tty.cast line 1 is not an asciicast v2 header");

        // A last line cut short mid-write (a killed session) ends the replay early.
        let cut = hand_written(
            runner,
            &home,
            &format!("{HEADER}\n[0.1, \"o\", \"whole\"]\n[0.2, \"o\", \"par"),
        );
        let out = logs(runner, &home, &["replay", &cut, "--speed", "100"]);
        out.assert_success()
            .assert_stderr_contains("line 3 was cut short");
        assert_eq!(out.stdout, "whole", "{out}");
    });
}
