//! Faults around a session: its supervisor (`vectraguard`) SIGKILLed at random
//! moments, and the disk holding the records full at the start or filling up during
//! the run. Whatever happens, nothing of the sandbox keeps running, nothing runs
//! unrecorded, and `logs verify` either passes or says the record was interrupted:
//! never an unexplained corruption, and never damage to other sessions' records.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::harness::{
    Output, RecordsHome, Runner, TempDir, Vg, Workspace, assert_no_process_left, chown_to,
    each_identity, is_root, require_tools, session_metadata, unique,
};
use super::mediated_network::HttpServer;
use super::soak::{cgroups_of, long};

/// Seeds the kill delays: set it to replay a failure's delays.
const SEED: &str = "VECTRAGUARD_FAULT_SEED";

/// xorshift64*: the delays only need to be spread and reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn seed() -> u64 {
    std::env::var(SEED)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(1, |d| u64::from(d.subsec_nanos()) ^ d.as_secs())
                | 1
        })
}

/// `logs verify ID`: passes, or says the session was interrupted, never tampered.
fn assert_verifies_or_interrupted(
    runner: Runner,
    ws: &Workspace,
    home: &RecordsHome,
    id: &str,
    context: &str,
) -> Output {
    let out = Vg::new(runner, ws.path())
        .records_home(home)
        .args(["logs", "verify", id])
        .run();
    assert!(
        out.code() == Some(0)
            && (out.stdout.contains(": intact") || out.stdout.contains(": interrupted")),
        "{context}\n{out}"
    );
    out
}

#[test]
fn a_supervisor_killed_at_any_moment_leaves_no_process_and_an_explained_record() {
    if !require_tools(&[("/usr/bin/curl", "curl")]) {
        return;
    }
    let seed = seed();
    let kills = if long() { 60 } else { 6 };
    each_identity(|runner| {
        let mut rng = Rng(seed ^ runner as u64);
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let server = HttpServer::start(vec![b'y'; 50_000]);
        let allow = format!("web.test:{}", server.port);
        let marker = format!("kill{}", unique());
        let mut killed = BTreeSet::new();
        for i in 0..kills {
            // Start-up takes tens of milliseconds, the run a few hundred, then the
            // finish: the delays cover all three.
            let delay = rng.below(450);
            let context = format!(
                "[{runner}] session {i}: SIGKILL after {delay} ms; replay with {SEED}={seed}"
            );
            let tag = format!("{marker}-{i}");
            let script = format!(
                "for i in $(seq 1 30); do /bin/true; done; \
                 curl -sS http://web.test:{}/ | wc -c; \
                 head -c 300000 /dev/zero | tr '\\0' x; \
                 for i in $(seq 1 30); do echo {tag} $i; done",
                server.port
            );
            let mut vg = Vg::sandbox(
                runner,
                &ws,
                &[
                    "--add-host",
                    "web.test:127.0.0.1",
                    "--allow",
                    &allow,
                    "--pids",
                    "64",
                    "--no-network-notes",
                ],
                &["sh", "-c", &script],
            );
            vg.records_home(&home);
            let running = vg.spawn();
            let pid = running.pid();
            std::thread::sleep(Duration::from_millis(delay));
            running.signal("KILL");
            let _ = running.finish(Duration::from_secs(20));
            killed.insert(pid);
            // The sandbox dies with its supervisor (init's parent-death signal).
            assert_no_process_left(&tag, &context);
        }
        // Every record: listed, shown, and verified or explained.
        let list = Vg::new(runner, ws.path())
            .records_home(&home)
            .args(["logs", "list", "--all"])
            .run();
        list.assert_success();
        let mut verdicts: Vec<String> = Vec::new();
        for dir in home.sessions() {
            let id = dir.file_name().unwrap().to_str().unwrap().to_owned();
            let context = format!("[{runner}] {id}; replay with {SEED}={seed}");
            assert!(
                list.stdout.contains(&id[..12.min(id.len())]),
                "{context}\n{list}"
            );
            Vg::new(runner, ws.path())
                .records_home(&home)
                .args(["logs", "show", &id])
                .run()
                .assert_success();
            let out = assert_verifies_or_interrupted(runner, &ws, &home, &id, &context);
            let status = session_metadata(&dir)["status"]
                .as_str()
                .unwrap_or("?")
                .to_owned();
            let verdict = if out.stdout.contains(": intact") {
                "intact"
            } else {
                "interrupted"
            };
            verdicts.push(format!("{status}/{verdict}"));
            if out.stdout.contains(": interrupted") {
                let status = session_metadata(&dir)["status"].clone();
                assert!(
                    status == "running" || out.stdout.contains("metadata.json's last version"),
                    "{context}: status {status}\n{out}"
                );
            }
        }
        verdicts.sort();
        eprintln!("killed supervisors [{runner}] (seed {seed}): status/verify {verdicts:?}");
        // A supervisor killed before it made the session's folder leaves no record.
        assert!(
            verdicts.len() <= kills,
            "[{runner}] more records than sessions"
        );
        // A killed supervisor cannot remove its cgroups; the next session's removes
        // every group whose supervisor is gone.
        let out = Vg::sandbox(runner, &ws, &["--pids", "64"], &["true"])
            .records_home(&home)
            .run();
        out.assert_success();
        let left = cgroups_of(&killed);
        assert!(
            left.is_empty(),
            "[{runner}] cgroups of killed supervisors left after the next run: {left:?}"
        );
    });
}

/// A tmpfs of `size` mounted on a fresh folder owned by `owner`, unmounted on drop.
pub(super) struct SmallDisk {
    dir: TempDir,
}

impl SmallDisk {
    pub(super) fn mount(size: &str, runner: Runner) -> Self {
        assert!(
            is_root(),
            "mounting a small disk needs the tests to run as root"
        );
        let dir = TempDir::new("disk");
        let owner = runner.invoker();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!(
                "size={size},mode=0700,uid={},gid={}",
                owner.uid, owner.gid
            ))
            .arg("vg-small-disk")
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(
            status.success(),
            "cannot mount a tmpfs on {}",
            dir.path().display()
        );
        chown_to(dir.path(), &owner);
        Self { dir }
    }

    pub(super) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills the disk to its last byte with a file of the owner's.
    fn fill(&self) {
        let filler = self.dir.join("filler");
        let _ = Command::new("dd")
            .args(["if=/dev/zero", "bs=64k"])
            .arg(format!("of={}", filler.display()))
            .output();
        // Whatever block is left, in smaller writes.
        let _ = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "head -c 1048576 /dev/zero >> {} 2>/dev/null",
                filler.display()
            ))
            .status();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

#[test]
fn records_on_a_full_disk_refuse_the_run_and_name_the_fix() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let disk = SmallDisk::mount("1m", runner);
        // An earlier session on that disk, whose record must stay intact.
        let home = disk.path().to_str().unwrap().to_owned();
        let vg = |options: &[&str], cmd: &[&str]| {
            let mut vg = Vg::sandbox(runner, &ws, options, cmd);
            vg.env("VECTRAGUARD_HOME", &home);
            vg.run()
        };
        vg(&[], &["sh", "-c", "echo earlier"]).assert_success();
        disk.fill();
        let marker = format!("ran-{}", unique());
        let out = vg(&[], &["sh", "-c", &format!("touch {marker}")]);
        assert_eq!(out.code(), Some(125), "[{runner}] {out}");
        assert!(
            !ws.exists(&marker),
            "[{runner}] the command ran unrecorded\n{out}"
        );
        let err = out.stderr.to_lowercase();
        assert!(
            err.contains("the disk holding") && err.contains("is full"),
            "[{runner}] the error does not say the disk is full\n{out}"
        );
        assert!(
            err.contains(&home.to_lowercase()),
            "[{runner}] the error does not name the records' place\n{out}"
        );
        assert!(
            err.contains("--no-record"),
            "[{runner}] no fix named\n{out}"
        );
        // The user's explicit choice runs it unrecorded.
        vg(&["--no-record"], &["sh", "-c", &format!("touch {marker}")]).assert_success();
        assert!(ws.exists(&marker));
        // The earlier record is intact, and listing copes with what the refusal left.
        let logs = |args: &[&str]| {
            let mut vg = Vg::new(runner, ws.path());
            vg.env("VECTRAGUARD_HOME", &home).args(args);
            vg.run()
        };
        logs(&["logs", "list", "--all"]).assert_success();
        let sessions: Vec<_> = std::fs::read_dir(Path::new(&home).join("logs"))
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("session-"))
            .collect();
        assert_eq!(
            sessions.len(),
            1,
            "[{runner}] a refused run left a session: {sessions:?}"
        );
        let out = logs(&["logs", "verify", &sessions[0]]);
        assert!(
            out.code() == Some(0) && out.stdout.contains(": intact"),
            "{out}"
        );
        let out = logs(&["logs", "verify", "--all"]);
        assert!(
            out.code() == Some(0) && !out.stdout.contains("PROBLEM"),
            "[{runner}] a refused run left the ledger with a problem\n{out}"
        );
    });
}

#[test]
fn records_filling_the_disk_stop_the_session_and_keep_what_was_written() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let disk = SmallDisk::mount("2m", runner);
        let home = disk.path().to_str().unwrap().to_owned();
        let vg = |args: &[&str]| {
            let mut vg = Vg::new(runner, ws.path());
            vg.env("VECTRAGUARD_HOME", &home).args(args);
            vg.run()
        };
        vg(&["sandbox", "run", "--", "sh", "-c", "echo earlier"]).assert_success();
        let marker = format!("finished-{}", unique());
        let out = vg(&[
            "sandbox",
            "run",
            "--",
            "sh",
            "-c",
            &format!("head -c 8000000 /dev/zero | tr '\\0' x; touch {marker}"),
        ]);
        assert_ne!(out.code(), Some(0), "[{runner}] {}", out.stderr);
        let err = out.stderr.to_lowercase();
        assert!(
            err.contains("the disk holding") && err.contains("is full"),
            "[{runner}] the error does not say the disk is full\n{}",
            out.stderr
        );
        assert!(
            !ws.exists(&marker),
            "[{runner}] the command ran on once its output could no longer be recorded"
        );
        assert_no_process_left(&marker, &runner);
        let mut sessions: Vec<_> = std::fs::read_dir(Path::new(&home).join("logs"))
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("session-"))
            })
            .collect();
        sessions.sort();
        assert_eq!(sessions.len(), 2, "[{runner}] {sessions:?}");
        let ids: Vec<String> = sessions
            .iter()
            .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        let earlier = ids
            .iter()
            .find(|id| {
                std::fs::read_to_string(Path::new(&home).join("logs").join(id).join("stdout.log"))
                    .is_ok_and(|s| s == "earlier\n")
            })
            .expect("the earlier session");
        for id in &ids {
            let out = vg(&["logs", "verify", id]);
            let expected = if id == earlier { ": intact" } else { ": " };
            assert!(
                out.code() == Some(0)
                    && out.stdout.contains(expected)
                    && !out.stdout.contains("TAMPERED"),
                "[{runner}] {out}"
            );
            vg(&["logs", "show", id]).assert_success();
        }
        vg(&["logs", "list", "--all"]).assert_success();
        // Across sessions too: the stopped one is a note, never a problem.
        let out = vg(&["logs", "verify", "--all"]);
        assert!(
            out.code() == Some(0) && !out.stdout.contains("PROBLEM"),
            "[{runner}] {out}"
        );
    });
}
