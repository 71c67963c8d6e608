//! The ledger across real session folders: every session started and ended
//! through the store is ledgered, removals through `rm` and `prune` are
//! accounted for, and what is done to the folders behind the store's back is
//! named by the audit.

use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::{TempDir, sample_meta, store};
use crate::ledger::{self, Finding, Kind, Ledger};
use crate::{End, SessionStore};

/// A finished session with a little output; returns its id.
fn session(store: &SessionStore, out: &[u8]) -> String {
    let w = store.create(sample_meta()).unwrap();
    w.append_stdout(out).unwrap();
    let id = w.id().to_owned();
    w.finish(End::exited(0)).unwrap();
    id
}

/// Replaces `old` by `new` (same length) in `stdout.log` and recomputes the
/// whole chain, as someone who knows the format would.
fn rewrite(dir: &Path, old: &[u8], new: &[u8]) {
    let stdout = dir.join("stdout.log");
    let data = fs::read(&stdout).unwrap();
    assert_eq!(data, old);
    fs::write(&stdout, new).unwrap();
    let integrity = dir.join("integrity.log");
    let mut chain = crate::chain::Chain::new();
    let mut out = String::new();
    for line in fs::read_to_string(&integrity).unwrap().lines() {
        let l = crate::chain::IntegrityLine::parse(line).unwrap();
        let digest = if l.file == "stdout.log" {
            crate::chain::digest(new)
        } else {
            l.digest
        };
        let (text, hash) = chain.line_for(&l.file, l.offset, l.len, &digest);
        out.push_str(&text);
        chain.commit(hash);
    }
    fs::write(&integrity, out).unwrap();
}

fn finding<'a>(audit: &'a ledger::Audit, id: &str) -> &'a Finding {
    &audit
        .sessions
        .iter()
        .find(|s| s.session_id == id)
        .unwrap_or_else(|| panic!("{id} not in {:#?}", audit.sessions))
        .finding
}

fn audit(root: &Path) -> ledger::Audit {
    ledger::audit(root, None).unwrap()
}

#[test]
fn sessions_rm_and_prune_leave_an_intact_audit() {
    let (_tmp, store) = store("ledger-ok");
    let ids: Vec<String> = (0..4)
        .map(|i| session(&store, format!("{i}\n").as_bytes()))
        .collect();
    store.remove(&ids[0]).unwrap();
    // Everything ended before now + 1 s.
    let plan = store
        .prune_plan(SystemTime::now() + Duration::from_secs(1))
        .unwrap()
        .into_iter()
        .filter(|p| p.session_id == ids[1])
        .collect::<Vec<_>>();
    assert_eq!(store.prune_dirs(&plan).unwrap().len(), 1);
    let a = audit(store.root());
    assert_eq!(a.problems(), 0, "{a:#?}");
    assert_eq!(a.sessions.len(), 2, "{a:#?}");
    for id in &ids[2..] {
        assert!(matches!(
            finding(&a, id),
            Finding::Intact { adopted: false, .. }
        ));
    }
    let kinds: Vec<Kind> = a.chain.entries.iter().map(|e| e.kind).collect();
    use Kind::*;
    assert_eq!(
        kinds,
        [Start, End, Start, End, Start, End, Start, End, Rm, Prune]
    );
}

#[test]
fn a_deleted_a_replaced_a_rewritten_and_a_planted_folder_are_named() {
    let (_tmp, store) = store("ledger-tamper");
    let ids: Vec<String> = (0..4)
        .map(|i| session(&store, format!("{i}\n").as_bytes()))
        .collect();
    let dir = |id: &str| store.root().join(id);
    fs::remove_dir_all(dir(&ids[0])).unwrap();
    // ids[1]'s folder replaced by ids[2]'s, renamed.
    fs::remove_dir_all(dir(&ids[1])).unwrap();
    fs::rename(dir(&ids[2]), dir(&ids[1])).unwrap();
    // ids[3] rewritten so well that its own chain verifies: same-length output,
    // every link recomputed.
    rewrite(&dir(&ids[3]), b"3\n", b"X\n");
    assert!(crate::verify(&dir(&ids[3])).unwrap().is_intact());
    // A folder copied in under a new name.
    let planted = "session-20200101T000000Z-abcdef";
    fs::create_dir(dir(planted)).unwrap();
    for f in ["metadata.json", "integrity.log"] {
        fs::copy(dir(&ids[1]).join(f), dir(planted).join(f)).unwrap();
    }
    let a = audit(store.root());
    assert!(matches!(finding(&a, &ids[0]), Finding::Deleted { .. }));
    assert!(
        matches!(finding(&a, &ids[1]), Finding::Rewritten { copy_of: Some(o), .. } if *o == ids[2]),
        "{:?}",
        finding(&a, &ids[1])
    );
    assert!(matches!(finding(&a, &ids[2]), Finding::Deleted { .. }));
    assert!(matches!(
        finding(&a, &ids[3]),
        Finding::Rewritten { copy_of: None, .. }
    ));
    assert!(matches!(finding(&a, planted), Finding::NotInLedger));
    assert_eq!(a.chain.problems, vec![]);
    assert_eq!(a.problems(), 5, "{a:#?}");
    // `logs verify SESSION` hears of it too.
    let one = ledger::check_one(store.root(), &dir(&ids[3])).unwrap();
    assert!(matches!(one, Some(Finding::Rewritten { .. })), "{one:?}");
    assert_eq!(
        ledger::check_one(store.root(), &dir(planted)).unwrap(),
        Some(Finding::NotInLedger)
    );
}

#[test]
fn an_unended_session_is_explained_and_a_removal_cut_short_is_not_a_deletion() {
    let (_tmp, store) = store("ledger-unended");
    let w = store.create(sample_meta()).unwrap();
    let running = w.id().to_owned();
    let a = audit(store.root());
    assert!(matches!(finding(&a, &running), Finding::Running), "{a:#?}");
    assert_eq!(a.problems(), 0);
    // Killed: its metadata says running, its supervisor is gone, no end entry.
    let mut meta = w.metadata();
    std::mem::forget(w);
    meta.supervisor = Some(crate::ProcessIdentity {
        pid: u32::MAX,
        start_ticks: 1,
        boot_id: None,
    });
    let path = store.root().join(&running).join("metadata.json");
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    v["supervisor"] = serde_json::to_value(&meta.supervisor).unwrap();
    fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    let a = ledger::audit(store.root(), None).unwrap();
    assert!(
        matches!(finding(&a, &running), Finding::Unended { .. }),
        "{a:#?}"
    );
    // An rm ledgered whose folder removal never happened.
    let ended = session(&store, b"x");
    Ledger::at(store.root())
        .removing(Kind::Rm, &[&ended])
        .unwrap();
    let a = audit(store.root());
    assert!(matches!(
        finding(&a, &ended),
        Finding::RemovedButPresent { kind: Kind::Rm, .. }
    ));
}

#[test]
fn sessions_from_before_the_ledger_are_adopted_once() {
    let (_tmp, store) = store("ledger-adopt");
    let old: Vec<String> = (0..3).map(|_| session(&store, b"old")).collect();
    fs::remove_file(Ledger::at(store.root()).path()).unwrap();
    let a = audit(store.root());
    assert!(a.chain.entries.is_empty());
    assert!(a.sessions.iter().all(|s| s.finding == Finding::NoLedgerYet));
    assert_eq!(a.problems(), 0);
    let new = session(&store, b"new");
    let a = audit(store.root());
    assert_eq!(a.problems(), 0, "{a:#?}");
    for id in &old {
        assert!(
            matches!(finding(&a, id), Finding::Intact { adopted: true, records } if *records > 0)
        );
    }
    assert!(matches!(
        finding(&a, &new),
        Finding::Intact { adopted: false, .. }
    ));
    let adopts = a
        .chain
        .entries
        .iter()
        .filter(|e| e.kind == Kind::Adopt)
        .count();
    assert_eq!(adopts, 3);
    session(&store, b"again");
    let a = audit(store.root());
    assert_eq!(
        a.chain
            .entries
            .iter()
            .filter(|e| e.kind == Kind::Adopt)
            .count(),
        3
    );
    // An anchor taken now must stay in the ledger.
    let (_, head) = a.chain.head().unwrap();
    assert!(
        ledger::audit(store.root(), Some(&head))
            .unwrap()
            .anchor_missing
            .is_none()
    );
    assert!(
        ledger::audit(store.root(), Some(&[1; 32]))
            .unwrap()
            .anchor_missing
            .is_some()
    );
}

#[test]
fn a_session_is_not_started_when_the_ledger_cannot_be_written() {
    let tmp = TempDir::new("ledger-failclosed");
    let store = SessionStore::open(&tmp.path().join("logs")).unwrap();
    let existing = session(&store, b"kept");
    let ledger = Ledger::at(store.root()).path();
    let before = fs::read(&ledger).unwrap();
    fs::remove_file(&ledger).unwrap();
    fs::create_dir(&ledger).unwrap();
    let e = store.create(sample_meta()).unwrap_err();
    assert!(e.to_string().contains("ledger"), "{e}");
    // Nothing half-made is left, and the earlier session is untouched (the
    // metadata versions it replaced are kept aside: layout::retire).
    let names: Vec<String> = fs::read_dir(store.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != crate::layout::PENDING)
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(
        crate::verify(&store.root().join(&existing))
            .unwrap()
            .is_intact()
    );
    fs::remove_dir(&ledger).unwrap();
    fs::write(&ledger, before).unwrap();
    assert_eq!(audit(store.root()).problems(), 0);
}
