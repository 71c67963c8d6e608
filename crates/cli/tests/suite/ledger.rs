//! The ledger (`ledger.log` in the records folder): `logs verify --all` passes after
//! runs, `rm` and `prune`, and names a session folder deleted, replaced or rewritten
//! outside Vectra Guard, a ledger line edited, and a folder planted; concurrent
//! sessions are all ledgered; the sandbox cannot see the ledger.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::harness::{Output, RecordsHome, Runner, Vg, Workspace, each_identity};

fn vg(runner: Runner, ws: &Workspace, home: &RecordsHome, args: &[&str]) -> Output {
    Vg::new(runner, ws.path())
        .args(args)
        .records_home(home)
        .run()
}

/// Runs `echo TEXT` in a recorded sandbox; returns the new session's id.
fn session(runner: Runner, ws: &Workspace, home: &RecordsHome, text: &str) -> String {
    let before = home.sessions();
    Vg::sandbox(runner, ws, &[], &["/bin/echo", text])
        .records_home(home)
        .run()
        .assert_success();
    let new: Vec<PathBuf> = home
        .sessions()
        .into_iter()
        .filter(|d| !before.contains(d))
        .collect();
    assert_eq!(new.len(), 1, "expected one new session: {new:?}");
    name(&new[0])
}

fn name(dir: &Path) -> String {
    dir.file_name().unwrap().to_str().unwrap().to_owned()
}

fn verify_all(runner: Runner, ws: &Workspace, home: &RecordsHome) -> Output {
    vg(runner, ws, home, &["logs", "verify", "--all"])
}

fn ledger_lines(home: &RecordsHome) -> Vec<String> {
    std::fs::read_to_string(home.logs().join("ledger.log"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The ledger's word on each kind of entry, e.g. `rm SESSION`.
fn has_entry(home: &RecordsHome, kind: &str, id: &str) -> bool {
    let needle = format!(" {kind} {id} ");
    ledger_lines(home).iter().any(|l| l.contains(&needle))
}

/// Recomputes `dir`'s chain after `stdout.log` was changed (same length), as someone
/// who knows the format would: its own `logs verify` then passes.
fn rewrite_consistently(dir: &Path, new_stdout: &[u8]) {
    use vg_records::chain::{Chain, IntegrityLine, digest};
    std::fs::write(dir.join("stdout.log"), new_stdout).unwrap();
    let integrity = dir.join("integrity.log");
    let mut chain = Chain::new();
    let mut out = String::new();
    for line in std::fs::read_to_string(&integrity).unwrap().lines() {
        let l = IntegrityLine::parse(line).unwrap();
        let d = if l.file == "stdout.log" {
            digest(new_stdout)
        } else {
            l.digest
        };
        let (text, hash) = chain.line_for(&l.file, l.offset, l.len, &d);
        out.push_str(&text);
        chain.commit(hash);
    }
    std::fs::write(&integrity, out).unwrap();
}

#[test]
fn verify_all_passes_after_runs_rm_and_prune_and_names_what_was_done_behind_its_back() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let a = session(runner, &ws, &home, "a");
        let b = session(runner, &ws, &home, "b");
        vg(runner, &ws, &home, &["logs", "rm", &a]).assert_success();
        std::thread::sleep(Duration::from_millis(2100));
        vg(runner, &ws, &home, &["logs", "prune", "--older-than", "2s"]).assert_success();
        assert!(home.sessions().is_empty());
        assert!(has_entry(&home, "rm", &a) && has_entry(&home, "prune", &b));
        let ids: Vec<String> = ["d", "e", "f", "g", "h"]
            .iter()
            .map(|t| session(runner, &ws, &home, t))
            .collect();
        let out = verify_all(runner, &ws, &home);
        out.assert_success()
            .assert_stdout_contains("all records intact")
            .assert_stdout_contains("ledger head: ");
        for id in &ids {
            out.assert_stdout_contains(&format!("{id}: ok: intact"));
            assert!(has_entry(&home, "start", id) && has_entry(&home, "end", id));
        }
        // The head to anchor the ledger with.
        let head = out
            .lines()
            .iter()
            .find_map(|l| l.strip_prefix("ledger head: "))
            .and_then(|l| l.split(' ').nth(1))
            .unwrap()
            .to_owned();
        vg(
            runner,
            &ws,
            &home,
            &["logs", "verify", "--all", "--anchor", &head],
        )
        .assert_success()
        .assert_stdout_contains("anchor: found in the ledger");

        let dir = |id: &str| home.logs().join(id);
        // Deleted with rm -rf.
        std::fs::remove_dir_all(dir(&ids[0])).unwrap();
        // ids[1]'s folder replaced by ids[2]'s, renamed.
        std::fs::remove_dir_all(dir(&ids[1])).unwrap();
        std::fs::rename(dir(&ids[2]), dir(&ids[1])).unwrap();
        // Rewritten, its own chain recomputed: only the ledger can tell.
        rewrite_consistently(&dir(&ids[3]), b"X\n");
        vg(runner, &ws, &home, &["logs", "verify", &ids[3]])
            .assert_code(1)
            .assert_stdout_contains("ledger: rewritten or replaced outside Vectra Guard");
        let out = verify_all(runner, &ws, &home);
        out.assert_code(1);
        out.assert_stdout_contains(&format!(
            "{}: PROBLEM: deleted outside Vectra Guard",
            ids[0]
        ));
        out.assert_stdout_contains(&format!(
            "{}: PROBLEM: rewritten or replaced outside Vectra Guard",
            ids[1]
        ));
        out.assert_stdout_contains(&format!("(the records of {})", ids[2]));
        out.assert_stdout_contains(&format!("{}: PROBLEM: deleted outside", ids[2]));
        out.assert_stdout_contains(&format!("{}: PROBLEM: rewritten or replaced", ids[3]));
        out.assert_stdout_contains(&format!("{}: ok: intact", ids[4]));
        out.assert_stdout_contains("4 integrity problems found");

        // JSON says the same.
        let json = vg(runner, &ws, &home, &["logs", "verify", "--all", "--json"]);
        json.assert_code(1);
        let v: Value = serde_json::from_str(&json.stdout).unwrap();
        assert_eq!(v["result"], "tampered");
        let state_of = |id: &str| {
            v["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["session_id"] == id)
                .map(|s| s["state"].as_str().unwrap().to_owned())
        };
        assert_eq!(state_of(&ids[0]).as_deref(), Some("deleted"));
        assert_eq!(state_of(&ids[1]).as_deref(), Some("rewritten"));
        assert_eq!(state_of(&ids[4]).as_deref(), Some("intact"));

        // A ledger line edited: its session's end head, one digit changed.
        let path = home.logs().join("ledger.log");
        let text = std::fs::read_to_string(&path).unwrap();
        let end = format!(" end {} ", ids[4]);
        let (n, line) = text
            .lines()
            .enumerate()
            .find(|(_, l)| l.contains(&end))
            .unwrap();
        let mut words: Vec<String> = line.split(' ').map(str::to_owned).collect();
        let digit = if words[5].starts_with('0') { "1" } else { "0" };
        words[5].replace_range(0..1, digit);
        std::fs::write(&path, text.replace(line, &words.join(" "))).unwrap();
        verify_all(runner, &ws, &home)
            .assert_code(1)
            .assert_stdout_contains(&format!("ledger line {} was changed", n + 1));
        // ... and the anchor taken before is no longer in it.
        vg(
            runner,
            &ws,
            &home,
            &["logs", "verify", "--all", "--anchor", &head],
        )
        .assert_code(1)
        .assert_stdout_contains("ANCHOR MISSING");
    });
}

#[test]
fn concurrent_sessions_are_all_ledgered() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        // The ledger made first: a session whose folder exists when another's first
        // append creates the ledger is adopted there, then started (an extra line).
        let first = session(runner, &ws, &home, "first");
        std::thread::scope(|s| {
            for i in 0..8 {
                let (ws, home) = (&ws, &home);
                s.spawn(move || {
                    Vg::sandbox(runner, ws, &[], &["/bin/echo", &i.to_string()])
                        .records_home(home)
                        .run()
                        .assert_success();
                });
            }
        });
        let ids: Vec<String> = home.sessions().iter().map(|d| name(d)).collect();
        assert_eq!(ids.len(), 9);
        assert!(ids.contains(&first));
        let out = verify_all(runner, &ws, &home);
        out.assert_success()
            .assert_stdout_contains("9 sessions: 9 intact, 0 with a note, 0 with a problem");
        assert_eq!(ledger_lines(&home).len(), 18);
        for id in &ids {
            assert!(has_entry(&home, "start", id) && has_entry(&home, "end", id));
        }
    });
}

#[test]
fn a_damaged_ledger_stops_new_sessions_until_moved_aside_and_damages_nothing() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let first = session(runner, &ws, &home, "kept");
        let path = home.logs().join("ledger.log");
        // Not a ledger at all (rewritten in place, keeping its owner).
        std::fs::write(&path, "this is not a ledger\n").unwrap();
        let out = Vg::sandbox(runner, &ws, &[], &["/bin/true"])
            .records_home(&home)
            .run();
        out.assert_code(125)
            .assert_stderr_contains("ledger")
            .assert_stderr_contains("move it aside");
        assert_eq!(home.sessions().len(), 1, "a half-made session was left");
        verify_all(runner, &ws, &home)
            .assert_code(1)
            .assert_stdout_contains("ledger line 1 is not a ledger entry");
        vg(runner, &ws, &home, &["logs", "verify", &first]).assert_success();
        // Moved aside: the next session starts a new ledger, adopting the first.
        std::fs::rename(&path, home.logs().join("ledger.log.damaged")).unwrap();
        verify_all(runner, &ws, &home)
            .assert_success()
            .assert_stdout_contains("none yet");
        session(runner, &ws, &home, "new");
        let out = verify_all(runner, &ws, &home);
        out.assert_success()
            .assert_stdout_contains(&format!("{first}: ok: intact"))
            .assert_stdout_contains("adopted when the ledger was created");
        // A torn last line (an append cut short) is explained, and the next one goes on.
        let mut text = std::fs::read(&path).unwrap();
        text.extend_from_slice(b"9 2026-11-25T13:00:00.000Z sta");
        std::fs::write(&path, text).unwrap();
        let out = verify_all(runner, &ws, &home);
        out.assert_success()
            .assert_stdout_contains("is an append cut short by a crash");
        session(runner, &ws, &home, "after");
        verify_all(runner, &ws, &home)
            .assert_success()
            .assert_stdout_contains("all records intact");
    });
}

#[test]
fn the_sandbox_cannot_see_the_ledger() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        session(runner, &ws, &home, "one");
        let ledger = home.logs().join("ledger.log");
        assert!(ledger.exists());
        let out = Vg::sandbox(runner, &ws, &[], &["/bin/cat", ledger.to_str().unwrap()])
            .records_home(&home)
            .run();
        assert_ne!(out.code(), Some(0), "the sandbox read the ledger\n{out}");
        assert!(!out.stdout.contains(" start session-"), "{out}");
        // Nor through a mount of the folder that holds it: the run is refused.
        let before = ledger_lines(&home);
        let mount = format!("{}:/mnt/records", home.logs().display());
        Vg::sandbox(
            runner,
            &ws,
            &["--mount", &mount],
            &["/bin/cat", "/mnt/records/ledger.log"],
        )
        .records_home(&home)
        .run()
        .assert_code(125)
        .assert_stderr_contains("would be visible inside the sandbox");
        assert_eq!(ledger_lines(&home), before);
    });
}

#[test]
fn a_persistent_sandbox_is_ledgered_from_create_to_stop() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let name = format!("l{}", super::harness::unique());
        vg(runner, &ws, &home, &["sandbox", "create", &name]).assert_success();
        let stop = || {
            let _ = vg(runner, &ws, &home, &["sandbox", "rm", "-f", &name]);
        };
        vg(
            runner,
            &ws,
            &home,
            &["sandbox", "exec", &name, "--", "true"],
        )
        .assert_success();
        let id = name_of_only(&home);
        let out = verify_all(runner, &ws, &home);
        if !out.stdout.contains(&format!("{id}: note: running")) {
            stop();
            panic!("the running sandbox is not reported as running\n{out}");
        }
        out.assert_success();
        vg(runner, &ws, &home, &["sandbox", "stop", &name]).assert_success();
        stop();
        assert!(has_entry(&home, "start", &id) && has_entry(&home, "end", &id));
        verify_all(runner, &ws, &home)
            .assert_success()
            .assert_stdout_contains(&format!("{id}: ok: intact"));
    });
}

fn name_of_only(home: &RecordsHome) -> String {
    name(&home.only_session())
}

/// Makes the session folder `id` look running: its `metadata.json` (not its chain)
/// says `running` under a live supervisor, this very test process; and its
/// `stdout.log` is edited (same length) behind the chain's back.
fn pose_as_running_and_edit(home: &RecordsHome, id: &str, new_stdout: &[u8]) {
    let dir = home.logs().join(id);
    std::fs::write(dir.join("stdout.log"), new_stdout).unwrap();
    let path = dir.join("metadata.json");
    let mut meta: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let live = vg_records::ProcessIdentity::current().unwrap();
    meta["status"] = "running".into();
    meta["supervisor"] = serde_json::to_value(&live).unwrap();
    std::fs::write(&path, serde_json::to_vec_pretty(&meta).unwrap()).unwrap();
}

/// A session folder claiming to be running is left unchecked until it ends, so the
/// claim itself must not be forgeable: a finished session (its end in the ledger),
/// or an unended one, whose `metadata.json` was edited to name a live process, is
/// checked like any other, and its edited output is a problem.
#[test]
fn a_session_edited_to_look_running_is_still_checked() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let ended = session(runner, &ws, &home, "first");
        let unended = session(runner, &ws, &home, "other");
        // The last ledger line is `unended`'s end: removed, it looks killed.
        let path = home.logs().join("ledger.log");
        let mut lines = ledger_lines(&home);
        assert!(lines.last().unwrap().contains(&format!(" end {unended} ")));
        lines.pop();
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        pose_as_running_and_edit(&home, &ended, b"FIRST\n");
        pose_as_running_and_edit(&home, &unended, b"OTHER\n");
        let out = verify_all(runner, &ws, &home);
        out.assert_code(1)
            .assert_stdout_contains("stdout.log bytes 0 to 5 were changed")
            .assert_stdout_contains("2 with a problem");
        for id in [&ended, &unended] {
            out.assert_stdout_contains(&format!("{id}: PROBLEM"));
            assert!(
                !out.stdout.contains(&format!("{id}: note: running")),
                "{out}"
            );
            vg(runner, &ws, &home, &["logs", "verify", id])
                .assert_code(1)
                .assert_stdout_contains("stdout.log bytes 0 to 5 were changed");
        }
    });
}

/// A finished session dressed up as one its supervisor never finished (the last lines
/// of its `integrity.log` removed, `metadata.json` back to `running`) is a problem,
/// and, since the ledger saw it end, no tail of it is put down to a crash.
#[test]
fn a_finished_session_cut_back_to_look_interrupted_is_not_excused_as_a_crash() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let home = RecordsHome::new(runner);
        let id = session(runner, &ws, &home, "done");
        let dir = home.logs().join(&id);
        let integrity = dir.join("integrity.log");
        let text = std::fs::read_to_string(&integrity).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let kept = lines[..lines.len() - 2].join("\n") + "\n";
        std::fs::write(&integrity, kept).unwrap();
        let path = dir.join("metadata.json");
        let mut meta: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        meta["status"] = "running".into();
        std::fs::write(&path, serde_json::to_vec_pretty(&meta).unwrap()).unwrap();
        let out = verify_all(runner, &ws, &home);
        out.assert_code(1)
            .assert_stdout_contains(&format!("{id}: PROBLEM: rewritten or replaced"))
            .assert_stdout_contains("never recorded");
        assert!(
            !out.stdout.contains("a crash before its last records"),
            "a finished session's tail was put down to a crash\n{out}"
        );
    });
}
