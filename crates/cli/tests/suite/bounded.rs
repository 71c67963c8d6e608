//! Bounded by default: with no limit flag at all, a run's memory is capped at half
//! of the host's RAM (by a cgroup where one can be made, else by the supervisor's
//! watchdog) and its record keeps at most 1 GiB per output stream, while the user
//! still receives every byte. As root and as an unprivileged user.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use super::harness::session_metadata as metadata;
use super::harness::{PYTHON, RecordsHome, Runner, Vg, Workspace, each_identity};
use super::limits::{cgroups_for, events, limit_hits};

/// Half of this host's `MemTotal`: the default cap the runs below must meet.
fn half_of_ram() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib * 1024 / 2
}

/// What holds the memory cap for `runner` on this host.
fn memory_mechanism(runner: Runner) -> &'static str {
    if !cgroups_for(runner) {
        "watchdog"
    } else if Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists() {
        "cgroup-v1"
    } else {
        "cgroup-v2"
    }
}

/// One memory hog at a time in the whole suite (and across suites running on this
/// machine): two hogs of half the RAM each would take the host down.
fn one_hog_at_a_time() -> std::fs::File {
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/tmp/vectraguard-tests-memory-hog.lock")
        .unwrap();
    lock.lock().unwrap();
    lock
}

/// Fills memory in 128 MiB blocks, every page written, until `ceiling` bytes (given
/// as argv[1]); reaching it means no cap stopped it, which the tests treat as a
/// failure (the hog stops there so that a missing cap cannot take the host down).
const HOG: &str = r#"
import sys
ceiling = int(sys.argv[1])
held = []
n = 0
while n < ceiling:
    held.append(b"\x01" * (128 << 20))
    n += 128 << 20
print("ceiling-reached=%d" % n, flush=True)
"#;

#[test]
fn a_memory_hog_without_flags_is_stopped_at_half_of_ram() {
    let _lock = one_hog_at_a_time();
    let cap = half_of_ram();
    // Above the cap by more than any poll can overshoot.
    let ceiling = cap + (1 << 30);
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let out = Vg::sandbox(runner, &ws, &[], &[PYTHON, "-c", HOG, &ceiling.to_string()])
            .records_home(&home)
            .run();
        assert!(
            !out.stdout.contains("ceiling-reached"),
            "no memory cap applied: the hog reached {ceiling} bytes\n{out}"
        );
        out.assert_code(137).assert_stderr_contains("memory limit");
        let dir = home.only_session();
        let meta = metadata(&dir);
        assert_eq!(meta["status"], "signalled", "{meta}");
        assert_eq!(meta["limits"]["memory_bytes"], cap);
        assert_eq!(meta["limits"]["memory_default"], true);
        let mechanism = memory_mechanism(runner);
        assert_eq!(meta["limits"]["enforced_by"]["memory"], mechanism);
        let hits = limit_hits(&dir, "memory");
        assert_eq!(hits.len(), 1, "{:?}", events(&dir));
        assert_eq!(hits[0]["enforced_by"], mechanism, "{:?}", hits[0]);
        assert_eq!(hits[0]["limit_bytes"], cap);
        if mechanism == "watchdog" {
            let measured = hits[0]["measured_bytes"].as_u64().unwrap();
            assert!(measured > cap && measured < ceiling, "{measured}");
        } else {
            assert!(hits[0]["oom_kills"].as_u64().unwrap() >= 1);
        }
    });
}

#[test]
fn an_explicit_small_memory_cap_holds_and_is_recorded() {
    let _lock = one_hog_at_a_time();
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ceiling = (1u64 << 30).to_string();
        let mut options = vec!["--memory", "256m"];
        if !cgroups_for(runner) {
            // Asked for explicitly, a cap no cgroup holds needs the user's consent to
            // be held by the watchdog alone.
            let out = Vg::sandbox(runner, &ws, &options, &["true"])
                .records_home(&home)
                .run();
            out.assert_code(125)
                .assert_stderr_contains("--best-effort-limits");
            options.push("--best-effort-limits");
        }
        let out = Vg::sandbox(runner, &ws, &options, &[PYTHON, "-c", HOG, &ceiling])
            .records_home(&home)
            .run();
        assert!(!out.stdout.contains("ceiling-reached"), "{out}");
        out.assert_code(137).assert_stderr_contains("memory limit");
        let dir = home.only_session();
        let meta = metadata(&dir);
        assert_eq!(meta["limits"]["memory_bytes"], 256 << 20);
        assert!(meta["limits"].get("memory_default").is_none(), "{meta}");
        let by = meta["limits"]["enforced_by"]["memory"].as_str().unwrap();
        let hits = limit_hits(&dir, "memory");
        assert_eq!(hits.len(), 1, "{:?}", events(&dir));
        if cgroups_for(runner) {
            assert!(by.starts_with("cgroup"), "{by}");
        } else {
            assert!(by.starts_with("watchdog (best effort"), "{by}");
            assert_eq!(hits[0]["enforced_by"], "watchdog");
            out.assert_stderr_contains("watchdog");
        }
        // Without a record too.
        let mut no_record = options.clone();
        no_record.push("--no-record");
        let out = Vg::sandbox(runner, &ws, &no_record, &[PYTHON, "-c", HOG, &ceiling]).run();
        assert!(!out.stdout.contains("ceiling-reached"), "{out}");
        out.assert_code(137).assert_stderr_contains("memory limit");
    });
}

#[test]
fn memory_unlimited_lifts_the_default_cap_and_a_project_file_cannot() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        Vg::sandbox(runner, &ws, &["--memory", "unlimited"], &["true"])
            .records_home(&home)
            .run()
            .assert_success();
        let limits = metadata(&home.only_session())["limits"].clone();
        assert!(limits["memory_bytes"].is_null(), "{limits}");
        assert_eq!(limits["enforced_by"]["memory"], "none (--memory unlimited)");
        // A project file may lower the default caps, never raise them.
        let home = RecordsHome::new(runner);
        ws.write(
            "vectraguard.toml",
            "memory = \"unlimited\"\nmax_record = \"100g\"\n",
        );
        Vg::sandbox(runner, &ws, &[], &["true"])
            .records_home(&home)
            .run()
            .assert_success();
        let limits = metadata(&home.only_session())["limits"].clone();
        assert_eq!(limits["memory_bytes"], half_of_ram(), "{limits}");
        assert_eq!(limits["memory_default"], true);
        assert_eq!(limits["max_record_bytes"], 1u64 << 30);
        let home = RecordsHome::new(runner);
        ws.write("vectraguard.toml", "max_record = \"4k\"\n");
        Vg::sandbox(runner, &ws, &[], &["true"])
            .records_home(&home)
            .run()
            .assert_success();
        let limits = metadata(&home.only_session())["limits"].clone();
        assert_eq!(limits["max_record_bytes"], 4096, "{limits}");
    });
}

/// The last `n` bytes of a file.
fn tail(path: &Path, n: u64) -> String {
    let mut file = std::fs::File::open(path).unwrap();
    let len = file.metadata().unwrap().len();
    file.seek(SeekFrom::Start(len.saturating_sub(n))).unwrap();
    let mut text = String::new();
    file.read_to_string(&mut text).unwrap();
    text
}

fn verify(runner: Runner, ws: &Workspace, home: &RecordsHome, dir: &Path) {
    Vg::new(runner, ws.path())
        .args(["logs", "verify", dir.file_name().unwrap().to_str().unwrap()])
        .records_home(home)
        .run()
        .assert_success();
}

#[test]
fn a_printer_without_flags_is_recorded_up_to_1_gib_and_shown_whole() {
    const GIB: u64 = 1 << 30;
    let printed = GIB + (1 << 20);
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        // Counted outside the sandbox, after vectraguard: what the user received.
        let out = Vg::sandbox(
            runner,
            &ws,
            &[],
            &[
                "sh",
                "-c",
                &format!("head -c {printed} /dev/zero | tr '\\0' x; echo done >&2"),
            ],
        )
        .records_home(&home)
        .through_shell(r#""$@" | wc -c; exit "${PIPESTATUS[0]}""#)
        .run();
        out.assert_success().assert_stderr_contains("done");
        assert_eq!(out.stdout.trim(), printed.to_string(), "{out}");
        let dir = home.only_session();
        let log = dir.join("stdout.log");
        let size = std::fs::metadata(&log).unwrap().len();
        assert!(
            size > GIB && size < GIB + 300,
            "stdout.log holds {size} bytes"
        );
        let end = tail(&log, 300);
        assert!(
            end.contains("stdout recording stopped at 1073741824 bytes (--max-record)"),
            "{end:?}"
        );
        let hits = limit_hits(&dir, "record");
        assert_eq!(hits.len(), 1, "{:?}", events(&dir));
        assert_eq!(hits[0]["stream"], "stdout");
        assert_eq!(metadata(&dir)["limits"]["max_record_bytes"], GIB);
        verify(runner, &ws, &home, &dir);
    });
}

#[test]
fn a_small_record_cap_keeps_the_output_flowing() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let out = Vg::sandbox(
            runner,
            &ws,
            &["--max-record", "64k"],
            &[
                "sh",
                "-c",
                "head -c 1000000 /dev/zero | tr '\\0' x; head -c 200000 /dev/zero | tr '\\0' y >&2",
            ],
        )
        .records_home(&home)
        .run();
        out.assert_success();
        assert_eq!(out.stdout.len(), 1_000_000, "the user lost output");
        assert_eq!(out.stderr.matches('y').count(), 200_000);
        let dir = home.only_session();
        for (file, stream) in [("stdout.log", "stdout"), ("stderr.log", "stderr")] {
            let log = std::fs::read_to_string(dir.join(file)).unwrap();
            let (kept, marker) = log.split_at(64 << 10);
            assert!(kept.bytes().all(|b| b == b'x' || b == b'y'));
            assert!(
                marker.contains(&format!(
                    "[vectraguard: {stream} recording stopped at 65536 bytes (--max-record)"
                )),
                "{marker:?}"
            );
            assert!(marker.len() < 200, "{} bytes past the cap", marker.len());
        }
        assert_eq!(limit_hits(&dir, "record").len(), 2, "{:?}", events(&dir));
        let limits = metadata(&dir)["limits"].clone();
        assert_eq!(limits["max_record_bytes"], 65536);
        assert_eq!(limits["enforced_by"]["max_record"], "supervisor");
        verify(runner, &ws, &home, &dir);
        // A terminal session: stdout.log and tty.cast stop at the cap too.
        let home = RecordsHome::new(runner);
        let out = Vg::sandbox(
            runner,
            &ws,
            &["-t", "--max-record", "16k"],
            &["sh", "-c", "head -c 500000 /dev/zero | tr '\\0' z"],
        )
        .records_home(&home)
        .run();
        out.assert_success();
        assert_eq!(
            out.stdout.matches('z').count(),
            500_000,
            "the user lost output"
        );
        let dir = home.only_session();
        let log = std::fs::metadata(dir.join("stdout.log")).unwrap().len();
        assert!(log < (16 << 10) + 200, "stdout.log holds {log} bytes");
        let cast = std::fs::read_to_string(dir.join("tty.cast")).unwrap();
        assert!(cast.len() < 64 << 10, "tty.cast holds {} bytes", cast.len());
        assert!(cast.contains("recording stopped at 16384 bytes"));
        verify(runner, &ws, &home, &dir);
    });
}

#[test]
fn bad_default_cap_values_are_refused_with_the_flag_or_key_named() {
    each_identity(|runner| {
        let ws = Workspace::new();
        for (flag, value) in [
            ("--max-record", "lots"),
            ("--max-record", "0"),
            ("--max-record", "-1m"),
            ("--memory", "infinite"),
        ] {
            let out = Vg::sandbox(runner, &ws, &[flag, value], &["touch", "ran"]).run();
            out.assert_code(125).assert_stderr_contains(flag);
            assert!(!ws.exists("ran"), "ran with {flag} {value}\n{out}");
        }
        let out = Vg::sandbox(runner, &ws, &["--memory", "infinite"], &["true"]).run();
        out.assert_stderr_contains("unlimited");
        ws.write("vectraguard.toml", "max_record = \"a lot\"\n");
        let out = Vg::sandbox(runner, &ws, &[], &["touch", "ran"]).run();
        out.assert_code(125)
            .assert_stderr_contains("max_record")
            .assert_stderr_contains("vectraguard.toml:1");
        assert!(!ws.exists("ran"));
    });
}

#[test]
fn a_persistent_sandbox_is_held_to_its_memory_cap() {
    let _lock = one_hog_at_a_time();
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let name = format!("hog{}", super::harness::unique());
        let mut create = vec!["sandbox", "create", name.as_str(), "--memory", "256m"];
        if !cgroups_for(runner) {
            create.push("--best-effort-limits");
        }
        let vg = |args: &[&str]| super::live::vg(runner, &ws, &home, args);
        vg(&create).assert_success();
        let ceiling = (1u64 << 30).to_string();
        let out = vg(&["sandbox", "exec", &name, "--", PYTHON, "-c", HOG, &ceiling]);
        let _ = vg(&["sandbox", "rm", "-f", &name]);
        assert!(!out.stdout.contains("ceiling-reached"), "{out}");
        assert_ne!(out.code(), Some(0), "{out}");
        let dir = home.only_session();
        let hits = limit_hits(&dir, "memory");
        assert_eq!(hits.len(), 1, "{:?}", events(&dir));
        let expected = if cgroups_for(runner) {
            memory_mechanism(runner)
        } else {
            "watchdog"
        };
        assert_eq!(hits[0]["enforced_by"], expected, "{:?}", hits[0]);
    });
}
