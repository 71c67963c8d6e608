use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::{TempDir, sample_meta, store};
use crate::layout::ProcessIdentity;
use crate::time::format_compact;
use crate::{
    End, ListEntry, ListFilter, Metadata, RecordsError, SessionStore, Status, parse_since,
};

/// Writes a session folder by hand, as a crashed or older writer left it.
fn fake_session(
    root: &Path,
    start: SystemTime,
    suffix: &str,
    edit: impl FnOnce(&mut Metadata),
) -> PathBuf {
    let id = format!("session-{}-{suffix}", format_compact(start));
    let dir = root.join(&id);
    fs::create_dir_all(&dir).unwrap();
    let mut m = sample_meta();
    m.session_id = id;
    m.start_time = start;
    m.status = Status::Exited;
    m.exit_code = Some(0);
    m.end_time = Some(start + Duration::from_secs(5));
    edit(&mut m);
    fs::write(dir.join("metadata.json"), m.to_json().unwrap()).unwrap();
    dir
}

/// The identity of a process that has exited (and been reaped).
fn dead_process() -> ProcessIdentity {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    ProcessIdentity {
        pid,
        start_ticks: 1,
        boot_id: crate::layout::boot_id(),
    }
}

fn t(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

fn ids(entries: &[ListEntry]) -> Vec<&str> {
    entries.iter().map(ListEntry::session_id).collect()
}

#[test]
fn default_root_follows_vectraguard_home() {
    let home = Path::new("/home/u");
    assert_eq!(
        SessionStore::default_root(None, home),
        Path::new("/home/u/.vectraguard/logs")
    );
    assert_eq!(
        SessionStore::default_root(Some(Path::new("/srv/vg")), home),
        Path::new("/srv/vg/logs")
    );
    assert_eq!(
        SessionStore::default_root(Some(Path::new("")), home),
        Path::new("/home/u/.vectraguard/logs")
    );
}

#[test]
fn unusable_roots_give_clear_errors() {
    let tmp = TempDir::new("badroot");
    let file = tmp.path().join("plain-file");
    fs::write(&file, b"x").unwrap();
    let e = SessionStore::open(&file).unwrap_err();
    assert!(matches!(e, RecordsError::RootNotDirectory { .. }), "{e}");
    let e = SessionStore::open(&file.join("logs")).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, RecordsError::CreateRoot { .. }), "{msg}");
    assert!(
        msg.contains("plain-file/logs") && msg.contains("VECTRAGUARD_HOME"),
        "{msg}"
    );
    // /proc refuses new files even for root.
    let e = SessionStore::open(Path::new("/proc")).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, RecordsError::RootNotWritable { .. }), "{msg}");
    assert!(msg.contains("/proc is not writable"), "{msg}");
}

#[test]
fn list_survives_damaged_folders_and_filters() {
    let (tmp, store) = store("list");
    let root = store.root().to_owned();
    let a = fake_session(&root, t(1_700_000_000), "aaaaaa", |m| {
        m.agent = Some("claude".into())
    });
    let b = fake_session(&root, t(1_700_000_100), "bbbbbb", |m| {
        m.name = Some("deploy".into())
    });
    let garbage = root.join("session-20231114T222000Z-cccccc");
    fs::create_dir(&garbage).unwrap();
    fs::write(garbage.join("metadata.json"), b"{\"status\": \"runn").unwrap();
    let missing = root.join("session-20231114T222100Z-dddddd");
    fs::create_dir(&missing).unwrap();
    // Not sessions: ignored.
    fs::create_dir(root.join("notes")).unwrap();
    fs::write(root.join("session-20231114T222200Z-eeeeee"), b"a file").unwrap();
    std::os::unix::fs::symlink(tmp.path(), root.join("session-20231114T222300Z-ffffff")).unwrap();

    let all = store.list(&ListFilter::default()).unwrap();
    assert_eq!(
        ids(&all),
        [
            "session-20231114T221320Z-aaaaaa",
            "session-20231114T221500Z-bbbbbb",
            "session-20231114T222000Z-cccccc",
            "session-20231114T222100Z-dddddd",
        ]
    );
    assert_eq!(all[0].dir(), a);
    assert_eq!(all[1].dir(), b);
    match (&all[2], &all[3]) {
        (ListEntry::Damaged { reason: r1, .. }, ListEntry::Damaged { reason: r2, .. }) => {
            assert!(r1.contains("not valid"), "{r1}");
            assert!(r2.contains("missing"), "{r2}");
        }
        other => panic!("expected damaged entries, got {other:?}"),
    }

    let by_agent = ListFilter {
        agent: Some("claude".into()),
        ..ListFilter::default()
    };
    assert_eq!(
        ids(&store.list(&by_agent).unwrap()),
        ["session-20231114T221320Z-aaaaaa"]
    );
    let by_name = ListFilter {
        name: Some("deploy".into()),
        ..ListFilter::default()
    };
    assert_eq!(
        ids(&store.list(&by_name).unwrap()),
        ["session-20231114T221500Z-bbbbbb"]
    );
    let since = ListFilter {
        since: Some(parse_since("2023-11-14T22:14:00Z", SystemTime::now()).unwrap()),
        ..ListFilter::default()
    };
    assert_eq!(store.list(&since).unwrap().len(), 3);
    let json = serde_json::to_string(&all).unwrap();
    assert!(
        json.contains("\"kind\":\"damaged\"") && json.contains("\"kind\":\"session\""),
        "{json}"
    );
}

#[test]
fn crashed_running_session_lists_as_interrupted() {
    let (_tmp, store) = store("interrupted");
    let root = store.root().to_owned();
    fake_session(&root, t(1_700_000_000), "000001", |m| {
        m.status = Status::Running;
        m.end_time = None;
        m.exit_code = None;
        m.supervisor = Some(dead_process());
    });
    // Pid alive but started at another time: a reused pid.
    fake_session(&root, t(1_700_000_001), "000002", |m| {
        m.status = Status::Running;
        m.supervisor = ProcessIdentity::current().map(|mut p| {
            p.start_ticks += 1;
            p
        });
    });
    let live = store.create(sample_meta()).unwrap();
    let statuses: Vec<Status> = store
        .list(&ListFilter::default())
        .unwrap()
        .iter()
        .map(|e| match e {
            ListEntry::Session(s) => s.status,
            ListEntry::Damaged { .. } => panic!("damaged {e:?}"),
        })
        .collect();
    assert_eq!(
        statuses,
        [Status::Interrupted, Status::Interrupted, Status::Running]
    );
    let only = ListFilter {
        status: Some(Status::Interrupted),
        ..ListFilter::default()
    };
    assert_eq!(store.list(&only).unwrap().len(), 2);
    let info = store.load("20231114T221320Z").unwrap();
    assert_eq!(info.metadata.status, Status::Running);
    assert_eq!(info.status, Status::Interrupted);
    live.finish(End::exited(0)).unwrap();
}

#[test]
fn resolve_accepts_ids_and_unique_prefixes() {
    let (_tmp, store) = store("resolve");
    let root = store.root().to_owned();
    let c3 = fake_session(&root, t(1_766_139_053), "9af4c3", |_| {});
    let d0 = fake_session(&root, t(1_766_139_053), "9af4d0", |_| {});
    let other = fake_session(&root, t(1_766_188_800), "000000", |_| {});

    assert_eq!(
        store.resolve("session-20251219T101053Z-9af4c3").unwrap(),
        c3
    );
    assert_eq!(store.resolve("20251219T101053Z-9af4c3").unwrap(), c3);
    assert_eq!(store.resolve("20251219T101053Z-9af4d").unwrap(), d0);
    assert_eq!(store.resolve("session-2025122").unwrap(), other);
    assert_eq!(store.resolve("2025122").unwrap(), other);

    let e = store.resolve("20251219").unwrap_err();
    match &e {
        RecordsError::AmbiguousSession { candidates, .. } => assert_eq!(
            candidates,
            &[
                "session-20251219T101053Z-9af4c3",
                "session-20251219T101053Z-9af4d0"
            ]
        ),
        other => panic!("{other}"),
    }
    assert!(e.to_string().contains("matches 2 sessions"), "{e}");
    let e = store.resolve("nope").unwrap_err();
    assert!(matches!(e, RecordsError::UnknownSession { .. }));
    assert!(e.to_string().contains("vectraguard logs list"), "{e}");
    assert!(store.resolve("").is_err());
    assert!(store.resolve("../logs").is_err());
    let empty = SessionStore::at(&root.join("absent"));
    assert!(matches!(
        empty.resolve("2025"),
        Err(RecordsError::UnknownSession { .. })
    ));
    assert!(empty.list(&ListFilter::default()).unwrap().is_empty());
}

#[test]
fn resolve_accepts_last_names_and_unique_suffixes() {
    let (_tmp, store) = store("resolve-names");
    let root = store.root().to_owned();
    let name = |n: &str| {
        let n = n.to_owned();
        move |m: &mut Metadata| m.name = Some(n)
    };
    let old_review = fake_session(&root, t(1_766_139_053), "9af4c3", name("review"));
    let new_review = fake_session(&root, t(1_766_139_060), "1234c3", name("review"));
    let build = fake_session(&root, t(1_766_139_070), "abcdef", name("build"));

    assert_eq!(store.resolve("last").unwrap(), build);
    // The newest of several sessions with that name.
    assert_eq!(store.resolve("review").unwrap(), new_review);
    assert_eq!(store.resolve("build").unwrap(), build);
    // The random suffix, or any unique end of the id.
    assert_eq!(store.resolve("9af4c3").unwrap(), old_review);
    assert_eq!(store.resolve("34c3").unwrap(), new_review);
    assert_eq!(store.resolve("cdef").unwrap(), build);
    // An exact id wins over everything else.
    assert_eq!(
        store.resolve("20251219T101053Z-9af4c3").unwrap(),
        old_review
    );

    // A suffix two ids share: an error naming both, nothing chosen.
    let e = store.resolve("c3").unwrap_err();
    match &e {
        RecordsError::AmbiguousSession { candidates, .. } => assert_eq!(
            candidates,
            &[
                "session-20251219T101053Z-9af4c3",
                "session-20251219T101100Z-1234c3"
            ]
        ),
        other => panic!("{other}"),
    }
    assert!(e.to_string().contains("matches 2 sessions"), "{e}");

    // A newer damaged folder is not "the last session": it has no status to show.
    let damaged = root.join(format!(
        "session-{}-ffffff",
        format_compact(t(1_766_139_080))
    ));
    fs::create_dir_all(&damaged).unwrap();
    assert_eq!(store.resolve("last").unwrap(), build);
    let empty = SessionStore::at(&root.join("absent"));
    assert!(matches!(
        empty.resolve("last"),
        Err(RecordsError::UnknownSession { .. })
    ));
}

#[test]
fn remove_refuses_live_sessions() {
    let (_tmp, store) = store("remove");
    let live = store.create(sample_meta()).unwrap();
    let e = store.remove(live.id()).unwrap_err();
    assert!(matches!(e, RecordsError::SessionRunning { .. }), "{e}");
    let id = live.id().to_owned();
    live.finish(End::exited(0)).unwrap();
    let dir = store.remove(&id).unwrap();
    assert!(!dir.exists());
}

#[test]
fn remove_dir_forces_only_session_folders() {
    let (tmp, store) = store("remove-dir");
    let live = store.create(sample_meta()).unwrap();
    let dir = live.dir().to_owned();
    let e = store.remove_dir(&dir, false).unwrap_err();
    assert!(matches!(e, RecordsError::SessionRunning { .. }), "{e}");
    // Not a session folder directly under the root: never removed.
    let other = tmp.path().join("session-20251219T101053Z-9af4c3");
    fs::create_dir(&other).unwrap();
    let stranger = store.root().join("keep-me");
    fs::create_dir(&stranger).unwrap();
    for path in [
        &other,
        &stranger,
        &store.root().join("session-x/../keep-me"),
    ] {
        let e = store.remove_dir(path, true).unwrap_err();
        assert!(matches!(e, RecordsError::UnknownSession { .. }), "{e}");
    }
    assert!(other.exists() && stranger.exists());
    store.remove_dir(&dir, true).unwrap();
    assert!(!dir.exists());
    drop(live); // its final metadata write fails quietly: the folder is gone
    assert!(!dir.exists());
}

#[test]
fn prune_plan_lists_without_removing() {
    let (_tmp, store) = store("prune-plan");
    let root = store.root().to_owned();
    // Whole seconds: the file keeps milliseconds.
    let old = t(SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 40 * 86_400);
    let done = fake_session(&root, old, "00000a", |_| {});
    let plan = store.prune_plan(SystemTime::now()).unwrap();
    assert_eq!(plan.len(), 1);
    assert_eq!(plan[0].dir, done);
    assert_eq!(
        plan[0].session_id,
        format!("session-{}-00000a", format_compact(old))
    );
    assert_eq!(plan[0].last_activity, old + Duration::from_secs(5));
    assert!(done.exists());
}

#[test]
fn prune_keeps_live_and_recent_sessions() {
    let (_tmp, store) = store("prune");
    let root = store.root().to_owned();
    let now = SystemTime::now();
    let old = now - Duration::from_secs(40 * 86_400);
    let old_done = fake_session(&root, old, "000001", |_| {});
    let old_live = fake_session(&root, old, "000002", |m| {
        m.status = Status::Running;
        m.end_time = None;
        m.supervisor = ProcessIdentity::current();
    });
    let old_crashed = fake_session(&root, old, "000003", |m| {
        m.status = Status::Running;
        m.end_time = None;
        m.supervisor = Some(dead_process());
    });
    let old_damaged = root.join(format!("session-{}-000004", format_compact(old)));
    fs::create_dir(&old_damaged).unwrap();
    let recent = fake_session(&root, now - Duration::from_secs(3600), "000005", |_| {});
    // Started long ago but ended recently.
    let long_run = fake_session(&root, old, "000006", |m| m.end_time = Some(now));
    let stranger = root.join("keep-me");
    fs::create_dir(&stranger).unwrap();

    let removed = store.prune(crate::parse_duration("30d").unwrap()).unwrap();
    assert_eq!(removed, [old_done, old_crashed, old_damaged]);
    for kept in [&old_live, &recent, &long_run, &stranger] {
        assert!(kept.exists(), "{kept:?} was removed");
    }
}

#[test]
fn list_of_two_thousand_sessions() {
    let (_tmp, store) = store("many");
    let w = store.create(sample_meta()).unwrap();
    let template = w.finish(End::exited(0)).unwrap();
    let root = store.root().to_owned();
    for i in 0..1999u32 {
        fake_session(
            &root,
            t(1_700_000_000 + u64::from(i)),
            &format!("{i:06x}"),
            |m| {
                let id = std::mem::take(&mut m.session_id);
                *m = template.clone();
                m.session_id = id;
                m.start_time = t(1_700_000_000 + u64::from(i));
                m.agent = Some(if i % 2 == 0 { "even" } else { "odd" }.into());
            },
        );
    }
    let started = Instant::now();
    let all = store.list(&ListFilter::default()).unwrap();
    let took = started.elapsed();
    eprintln!("listed {} sessions in {took:?}", all.len());
    assert_eq!(all.len(), 2000);
    assert!(all.iter().all(|e| matches!(e, ListEntry::Session(_))));
    let even = ListFilter {
        agent: Some("even".into()),
        ..ListFilter::default()
    };
    assert_eq!(store.list(&even).unwrap().len(), 1000);
}

#[test]
fn a_session_folder_appears_whole_and_abandoned_staging_folders_go() {
    let (tmp, store) = store("staging");
    let root = tmp.path().join("logs");
    // What a supervisor killed while making its folder leaves, and one still at it,
    // in the `.pending` folder beside the sessions.
    let pending = root.join(crate::layout::PENDING);
    let abandoned = pending.join("partial-999999999-session-20250101T000000Z-abcdef");
    let ours = pending.join(format!(
        "partial-{}-session-20250101T000000Z-fedcba",
        std::process::id()
    ));
    // And what an earlier version left in the records folder itself: a removal
    // (which reads that folder anyway) takes it, a start does not look.
    let legacy = root.join(".partial-999999999-session-20250101T000000Z-0a0b0c");
    fs::create_dir_all(&legacy).unwrap();
    fs::create_dir_all(&abandoned).unwrap();
    fs::write(abandoned.join("integrity.log"), "").unwrap();
    fs::create_dir_all(&ours).unwrap();
    assert!(store.list(&ListFilter::default()).unwrap().is_empty());
    let w = store.create(sample_meta()).unwrap();
    assert_eq!(w.dir(), root.join(w.id()));
    assert!(w.dir().join("metadata.json").is_file());
    w.append_stdout(b"after the move\n").unwrap();
    let dir = w.dir().to_owned();
    w.finish(End::exited(0)).unwrap();
    assert!(crate::verify(&dir).unwrap().is_intact());
    assert!(!abandoned.exists(), "an abandoned staging folder was kept");
    assert!(
        ours.exists(),
        "a live supervisor's staging folder was removed"
    );
    assert_eq!(store.list(&ListFilter::default()).unwrap().len(), 1);
    assert!(legacy.exists());
    let other = store.create(sample_meta()).unwrap();
    let other_dir = other.dir().to_owned();
    other.finish(End::exited(0)).unwrap();
    store.remove_dir(&other_dir, false).unwrap();
    assert!(
        !legacy.exists(),
        "a legacy staging folder outlived a removal"
    );
    assert!(ours.exists());
}

/// What a front end's own index reads: the folders alone, then one summary at a
/// time, the same rows `list` gives (argv kept word by word), damaged ones said why.
#[test]
fn session_dirs_and_read_summary_of_give_lists_rows_one_at_a_time() {
    let (_tmp, store) = store("summary-of");
    let w = store.create(sample_meta()).unwrap();
    let dir = w.dir().to_owned();
    w.finish(End::exited(3)).unwrap();
    let damaged = fake_session(store.root(), t(1_700_000_000), "dead01", |_| {});
    fs::write(damaged.join("metadata.json"), b"{not json").unwrap();
    fs::create_dir(store.root().join(".partial-1-session-x")).unwrap();
    let dirs = store.session_dirs().unwrap();
    let names: Vec<&str> = dirs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(dirs.iter().any(|(_, d)| *d == dir));
    let boot = crate::layout::boot_id();
    let one = crate::read_summary_of(&dir, boot.as_deref()).unwrap();
    let listed = store.list(&ListFilter::default()).unwrap();
    assert!(
        listed.contains(&ListEntry::Session(one.clone())),
        "{listed:?}"
    );
    assert_eq!(one.argv, ["make", "-j4"]);
    assert_eq!(one.command, "make -j4");
    assert_eq!(one.status, Status::Exited);
    assert_eq!(one.exit_code, Some(3));
    let why = crate::read_summary_of(&damaged, boot.as_deref()).unwrap_err();
    assert!(why.contains("not valid session metadata"), "{why}");
}

/// A session's spare file is a version a gone supervisor kept, when one of one block
/// is there: renamed to the session's own name and written whole (one file fewer made,
/// one fewer removed). A larger one, one of a live process and one that still has
/// another name (a `metadata.json` of a session) are never written into.
#[test]
fn a_gone_supervisor_s_kept_version_becomes_the_next_session_s_spare() {
    use std::os::unix::fs::MetadataExt;
    let (_tmp, store) = store("spare");
    let root = store.root().to_owned();
    let pending = root.join(crate::layout::PENDING);
    // The folders exist once a session was made.
    store
        .create(sample_meta())
        .unwrap()
        .finish(End::exited(0))
        .unwrap();
    for e in fs::read_dir(&pending).unwrap() {
        fs::remove_file(e.unwrap().path()).unwrap();
    }
    let dead = dead_process().pid;
    let live = std::process::id(); // ours: kept while we live
    let big = pending.join(format!("{}{dead}-1", crate::layout::RETIRED));
    fs::write(&big, vec![b'x'; 4097]).unwrap();
    let other = dead_process().pid;
    let linked = pending.join(format!("{}{other}-2", crate::layout::RETIRED));
    let session_file = root.join("elsewhere.json");
    fs::write(&session_file, "{\"theirs\":true}").unwrap();
    fs::hard_link(&session_file, &linked).unwrap();
    let mine = pending.join(format!("{}{live}-999", crate::layout::RETIRED));
    fs::write(&mine, "{}").unwrap();
    // Nothing to take: a new empty file.
    let made = crate::layout::spare(&root).unwrap();
    assert_eq!(fs::read(&made).unwrap(), b"");
    // The file with another name may have been renamed to ours, but is never written.
    let dir = root.join("target-dir");
    fs::create_dir(&dir).unwrap();
    assert!(crate::layout::replace_with(&session_file, &dir, "x.json", b"{}").is_err());
    assert_eq!(
        fs::read_to_string(&session_file).unwrap(),
        "{\"theirs\":true}"
    );
    assert!(big.exists() && mine.exists());
    // A gone supervisor's small version is taken and written whole.
    let small = pending.join(format!("{}{dead}-3", crate::layout::RETIRED));
    fs::write(&small, vec![b'y'; 3000]).unwrap();
    let ino = fs::metadata(&small).unwrap().ino();
    let taken = crate::layout::spare(&root).unwrap();
    assert!(!small.exists());
    assert_eq!(fs::metadata(&taken).unwrap().ino(), ino);
    crate::layout::replace_with(&taken, &dir, "x.json", b"{\"new\":1}").unwrap();
    assert_eq!(fs::read(dir.join("x.json")).unwrap(), b"{\"new\":1}");
    assert_eq!(fs::metadata(dir.join("x.json")).unwrap().ino(), ino);
    assert!(!taken.exists());
    assert_eq!(
        fs::read_to_string(&session_file).unwrap(),
        "{\"theirs\":true}"
    );
}

/// A replaced `metadata.json` is kept under a second name in the records folder
/// (its blocks are not freed by the rename: see `layout::retire`) until a later
/// session's start, or a removal, finds its supervisor gone; readers never see it.
/// The versions after the first create no file: the second is written into a spare
/// file made with the session (`layout::spare`), the third into the first's kept
/// file, so one version is kept in the end, the second.
#[test]
fn replaced_metadata_is_kept_until_a_later_run_and_then_removed() {
    use std::os::unix::fs::MetadataExt;
    let (_tmp, store) = store("retired");
    let root = store.root().to_owned();
    let retired = |root: &Path| -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(root.join(crate::layout::PENDING))
            .unwrap()
            .filter_map(|e| e.unwrap().file_name().into_string().ok())
            .filter(|n| n.starts_with(crate::layout::RETIRED))
            .collect();
        // By the counter in the name: the order they were kept in.
        names.sort_by_key(|n| n.rsplit('-').next().and_then(|c| c.parse::<u64>().ok()));
        names
    };
    let inode = |path: &Path| fs::metadata(path).unwrap().ino();
    let w = store.create(sample_meta()).unwrap();
    let dir = w.dir().to_owned();
    let metadata = dir.join(crate::layout::METADATA);
    let first_inode = inode(&metadata);
    // The first version replaces nothing; the spare for the second is there, empty.
    let spare = retired(&root);
    assert_eq!(spare.len(), 1, "{spare:?}");
    let spare_path = root.join(crate::layout::PENDING).join(&spare[0]);
    assert_eq!(fs::read(&spare_path).unwrap(), b"");
    let spare_inode = inode(&spare_path);
    w.update_metadata(|m| m.name = Some("renamed".into()))
        .unwrap();
    // The second version is the spare; the first is kept.
    assert_eq!(inode(&metadata), spare_inode);
    let kept = retired(&root);
    assert_eq!(kept.len(), 1, "{kept:?}");
    let first = fs::read_to_string(root.join(crate::layout::PENDING).join(&kept[0])).unwrap();
    assert!(first.contains("\"running\""), "{first}");
    assert!(!first.contains("renamed"), "{first}");
    w.finish(End::exited(0)).unwrap();
    // The last version is written into the first's file, cut to its length; the
    // second is kept.
    assert_eq!(inode(&metadata), first_inode);
    let last = fs::read_to_string(&metadata).unwrap();
    assert!(
        last.contains("renamed") && !last.contains("\"running\""),
        "{last}"
    );
    assert!(last.trim_end().ends_with('}'), "{last}");
    let kept = retired(&root);
    assert_eq!(kept.len(), 1, "{kept:?}");
    let second = fs::read_to_string(root.join(crate::layout::PENDING).join(&kept[0])).unwrap();
    assert!(
        second.contains("\"running\"") && second.contains("renamed"),
        "{second}"
    );
    // The session itself is whole, and the only session listed.
    assert!(crate::verify::verify(&dir).unwrap().is_intact());
    assert_eq!(store.list(&ListFilter::default()).unwrap().len(), 1);
    // Ours stay while we live; a dead supervisor's go at a later session's start
    // (whose supervisor calls this on a thread of its own).
    let dead = dead_process().pid;
    let pending = root.join(crate::layout::PENDING);
    fs::write(
        pending.join(format!("{}{dead}-0", crate::layout::RETIRED)),
        "{}",
    )
    .unwrap();
    // A legacy version in the records folder itself is not looked for at a start.
    let legacy = root.join(format!("{}{dead}-9", crate::layout::LEGACY_RETIRED));
    fs::write(&legacy, "{}").unwrap();
    store.remove_retired();
    assert_eq!(retired(&root), kept);
    assert!(legacy.exists());
    // And with a removal: nothing of a removed session stays behind.
    fs::write(
        pending.join(format!("{}{dead}-1", crate::layout::RETIRED)),
        "{}",
    )
    .unwrap();
    store.remove_dir(&dir, false).unwrap();
    assert!(!legacy.exists(), "a legacy kept version outlived a removal");
    assert!(
        retired(&root).iter().all(|n| n.starts_with(&format!(
            "{}{}-",
            crate::layout::RETIRED,
            std::process::id()
        ))),
        "{:?}",
        retired(&root)
    );
}
