use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use super::{sample_meta, store};
use crate::event::kind;
use crate::layout::{self, RecordFile};
use crate::{
    ChannelSink, CommandExit, CommandRecord, End, Event, EventSink, ListFilter, Metadata, Status,
    VerifyReport, read_metadata, verify,
};

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn writer_is_send_and_sync() {
    assert_send_sync::<crate::SessionWriter>();
}

#[test]
fn create_write_finish_round_trip() {
    let (_tmp, store) = store("roundtrip");
    let w = store.create(sample_meta()).unwrap();
    let dir = w.dir().to_owned();
    assert!(w.id().starts_with("session-"));
    assert_eq!(dir.file_name().unwrap().to_str(), Some(w.id()));

    let running = read_metadata(&dir).unwrap();
    assert_eq!(running.status, Status::Running);
    assert_eq!(running.session_id, w.id());
    assert_eq!(running.env_keys, ["PATH", "TOKEN"]);
    assert_eq!(
        running.supervisor.as_ref().map(|s| s.pid),
        Some(std::process::id())
    );

    w.append_stdout(b"hello\n").unwrap();
    w.append_stdout(b"\x00\xffbinary").unwrap();
    w.append_stderr(b"warning: x\n").unwrap();
    let mut cmd = CommandRecord::new(
        42,
        1,
        "/work dir",
        [
            OsString::from("grep"),
            OsString::from("a b"),
            OsString::from_vec(b"\xff".to_vec()),
        ],
    );
    cmd.time = UNIX_EPOCH + Duration::from_millis(1_766_139_053_123);
    w.record_command(&cmd).unwrap();
    w.record_exit_at(cmd.time, 42, CommandExit::Code(1))
        .unwrap();
    w.record_exit_at(cmd.time, 43, CommandExit::Signal(9))
        .unwrap();
    w.event(Event::new(kind::LIMIT_HIT).with("limit", "memory"))
        .unwrap();
    let done = w.finish(End::exited(3)).unwrap();
    assert_eq!(done.status, Status::Exited);
    assert_eq!(done.exit_code, Some(3));

    assert_eq!(
        fs::read(dir.join("stdout.log")).unwrap(),
        b"hello\n\x00\xffbinary"
    );
    assert_eq!(fs::read(dir.join("stderr.log")).unwrap(), b"warning: x\n");
    assert_eq!(
        fs::read_to_string(dir.join("commands.log")).unwrap(),
        "2025-12-19T10:10:53.123Z exec pid=42 ppid=1 cwd='/work dir' -- grep 'a b' $'\\xff'\n\
         2025-12-19T10:10:53.123Z exit pid=42 status=1\n\
         2025-12-19T10:10:53.123Z exit pid=43 signal=9\n"
    );
    let events: Vec<Event> = fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["session-start", "limit-hit", "session-end"]);
    assert_eq!(
        events[2].get("exit_code"),
        Some(&serde_json::Value::from(3))
    );

    let m = read_metadata(&dir).unwrap();
    assert_eq!(m, done);
    assert_eq!(m.status, Status::Exited);
    assert!(m.end_time.is_some());
    assert_eq!(m.layers.landlock_abi, Some(7));
    assert_eq!(verify(&dir).unwrap(), VerifyReport::Intact { records: 11 });

    let listed = store.list(&ListFilter::default()).unwrap();
    assert_eq!(listed.len(), 1);
    match &listed[0] {
        crate::ListEntry::Session(s) => {
            assert_eq!(s.status, Status::Exited);
            assert_eq!(s.command, "make -j4");
            assert_eq!(s.exit_code, Some(3));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn records_are_owner_only_and_metadata_leaves_no_temp_files() {
    let (tmp, store) = store("perms");
    let root_mode = fs::metadata(tmp.path().join("logs"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(root_mode & 0o777, 0o700);
    let w = store.create(sample_meta()).unwrap();
    w.update_metadata(|m| m.layers.cgroup_controllers = vec!["memory".into()])
        .unwrap();
    let dir = w.dir().to_owned();
    w.finish(End::exited(0)).unwrap();
    assert_eq!(
        fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            assert_eq!(
                e.metadata().unwrap().permissions().mode() & 0o777,
                0o600,
                "{:?}",
                e.path()
            );
            e.file_name().into_string().unwrap()
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "commands.log",
            "events.jsonl",
            "integrity.log",
            "metadata.json",
            "stderr.log",
            "stdout.log"
        ]
    );
    assert_eq!(
        read_metadata(&dir).unwrap().layers.cgroup_controllers,
        ["memory"]
    );
}

#[test]
fn update_metadata_keeps_identity_and_status() {
    let (_tmp, store) = store("update");
    let w = store.create(sample_meta()).unwrap();
    let id = w.id().to_owned();
    w.update_metadata(|m| {
        m.session_id = "forged".into();
        m.status = Status::Exited;
        m.env_keys = vec!["API_KEY=abc".into()];
        m.layers.capabilities = Some(Vec::new());
    })
    .unwrap();
    let m = read_metadata(w.dir()).unwrap();
    assert_eq!(m.session_id, id);
    assert_eq!(m.status, Status::Running);
    assert_eq!(m.env_keys, ["API_KEY"]);
    assert_eq!(m.layers.capabilities, Some(Vec::new()));
    assert!(verify(w.dir()).unwrap().is_intact());
}

#[test]
fn interleaved_writes_from_many_threads_stay_intact() {
    let (_tmp, store) = store("threads");
    let w = Arc::new(store.create(sample_meta()).unwrap());
    let mut handles = Vec::new();
    for t in 0..4u32 {
        let w = Arc::clone(&w);
        handles.push(std::thread::spawn(move || {
            for i in 0..300u32 {
                match (t + i) % 4 {
                    0 => w
                        .append_stdout(format!("out {t} {i}\n").as_bytes())
                        .unwrap(),
                    1 => w.append_stderr(&[u8::try_from(t).unwrap(); 37]).unwrap(),
                    2 => w
                        .record_command(&CommandRecord::new(1000 + i, t, "/", ["echo", "x y"]))
                        .map(drop)
                        .unwrap(),
                    _ => w
                        .event(Event::new("tick").with("t", t).with("i", i))
                        .unwrap(),
                }
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    let w = Arc::into_inner(w).unwrap();
    let dir = w.dir().to_owned();
    w.finish(End::exited(0)).unwrap();
    // 1200 records + initial metadata + start and end events + final metadata.
    assert_eq!(
        verify(&dir).unwrap(),
        VerifyReport::Intact { records: 1204 }
    );
    let out = fs::read_to_string(dir.join("stdout.log")).unwrap();
    assert_eq!(out.lines().count(), 300);
    assert_eq!(fs::read(dir.join("stderr.log")).unwrap().len(), 300 * 37);
    assert_eq!(
        fs::read_to_string(dir.join("commands.log"))
            .unwrap()
            .lines()
            .count(),
        300
    );
    assert_eq!(
        fs::read_to_string(dir.join("events.jsonl"))
            .unwrap()
            .lines()
            .count(),
        302
    );
}

#[test]
fn events_fan_out_to_every_sink() {
    let (_tmp, store) = store("sinks");
    let (early, early_rx) = ChannelSink::new();
    let w = store
        .create_with_sinks(sample_meta(), vec![Arc::new(early) as Arc<dyn EventSink>])
        .unwrap();
    let (late, late_rx) = ChannelSink::new();
    w.add_sink(Arc::new(late));
    w.event(Event::new(kind::NETWORK).with("host", "example.com"))
        .unwrap();
    w.finish(End::signalled(9)).unwrap();
    let early: Vec<String> = early_rx.try_iter().map(|e| e.kind).collect();
    let late: Vec<String> = late_rx.try_iter().map(|e| e.kind).collect();
    assert_eq!(early, ["session-start", "network", "session-end"]);
    assert_eq!(late, ["network", "session-end"]);
}

#[test]
fn dropping_without_finish_records_interrupted() {
    let (_tmp, store) = store("drop");
    let w = store.create(sample_meta()).unwrap();
    let dir = w.dir().to_owned();
    w.append_stdout(b"partial").unwrap();
    drop(w);
    let m: Metadata = read_metadata(&dir).unwrap();
    assert_eq!(m.status, Status::Interrupted);
    assert!(m.error.is_some());
    assert!(verify(&dir).unwrap().is_intact());
}

#[test]
fn failed_to_start_and_empty_writes() {
    let (_tmp, store) = store("failed");
    let w = store.create(sample_meta()).unwrap();
    w.append_stdout(b"").unwrap();
    let dir = w.dir().to_owned();
    let m = w
        .finish(End::failed_to_start("landlock unavailable"))
        .unwrap();
    assert_eq!(m.status, Status::FailedToStart);
    assert_eq!(m.exit_code, Some(125));
    assert_eq!(
        fs::metadata(layout::file_path(&dir, RecordFile::Stdout))
            .unwrap()
            .len(),
        0
    );
    let text = fs::read_to_string(dir.join("metadata.json")).unwrap();
    assert!(text.contains("\"status\": \"failed-to-start\""), "{text}");
    assert!(!text.contains("secret-value"));
}

#[test]
fn two_step_stream_appends_verify_once_chained() {
    let (_tmp, store) = store("twostep");
    let w = store.create(sample_meta()).unwrap();
    let dir = w.dir().to_owned();
    let first = w.write_stream(RecordFile::Stdout, b"chunk one\n").unwrap();
    let second = w.write_stream(RecordFile::Stdout, b"\x00\xff two").unwrap();
    let err = w.write_stream(RecordFile::Stderr, b"oops\n").unwrap();
    w.chain_stream(first, &crate::chain::digest(b"chunk one\n"))
        .unwrap();
    // Bytes written but not chained yet: a running session's unrecorded tail.
    assert!(!verify(&dir).unwrap().is_intact());
    w.chain_stream(err, &crate::chain::digest(b"oops\n"))
        .unwrap();
    w.chain_stream(second, &crate::chain::digest(b"\x00\xff two"))
        .unwrap();
    assert!(w.write_stream(RecordFile::Events, b"x").is_err());
    w.finish(End::exited(0)).unwrap();
    assert!(verify(&dir).unwrap().is_intact());
    assert_eq!(
        fs::read(dir.join("stdout.log")).unwrap(),
        b"chunk one\n\x00\xff two"
    );
}

#[test]
fn command_lines_written_first_and_chained_in_one_batch_verify() {
    let (_tmp, store) = store("batch");
    let w = store.create(sample_meta()).unwrap();
    let dir = w.dir().to_owned();
    let lines = [
        CommandRecord::new(2, 1, "/w", ["sh", "-c", "true"]).to_line(),
        CommandRecord::new(3, 2, "/w", ["true"]).to_line(),
    ];
    let written: Vec<_> = lines
        .iter()
        .map(|l| w.write_stream(RecordFile::Commands, l.as_bytes()).unwrap())
        .collect();
    // Output chained meanwhile by another thread: only the order within a file counts.
    w.append_stdout(b"out\n").unwrap();
    let chained_before = w.metadata().integrity.unwrap().records;
    let batch: Vec<_> = written
        .into_iter()
        .zip(&lines)
        .map(|(r, l)| (r, crate::chain::digest(l.as_bytes())))
        .collect();
    w.chain_streams(&batch).unwrap();
    w.chain_streams(&[]).unwrap();
    w.record_exit(3, CommandExit::Code(0)).unwrap();
    w.finish(End::exited(0)).unwrap();
    let report = verify(&dir).unwrap();
    assert!(report.is_intact(), "{:?}", report.problems());
    let integrity = fs::read_to_string(dir.join("integrity.log")).unwrap();
    assert_eq!(
        integrity
            .lines()
            .filter(|l| l.contains(" commands.log "))
            .count(),
        3,
        "{integrity}"
    );
    // metadata.json is chained at finish, so the batch is in the final count.
    let end = crate::read_metadata(&dir)
        .unwrap()
        .integrity
        .unwrap()
        .records;
    assert!(end >= chained_before + 3, "{end} {chained_before}");
}

#[test]
fn command_lines_never_chained_are_an_unrecorded_tail_of_an_unfinished_session() {
    let (_tmp, store) = store("unchained");
    let w = store.create(sample_meta()).unwrap();
    let dir = w.dir().to_owned();
    let line = CommandRecord::new(2, 1, "/w", ["sleep", "9"]).to_line();
    let _pending = w
        .write_stream(RecordFile::Commands, line.as_bytes())
        .unwrap();
    // The supervisor is SIGKILLed here (no destructor runs): the line is in the
    // file, not in the chain, and metadata.json still says `running`.
    std::mem::forget(w);
    let report = verify(&dir).unwrap();
    let problems: Vec<String> = report.problems().iter().map(ToString::to_string).collect();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("commands.log") && problems[0].contains("the session did not finish"),
        "{problems:?}"
    );
}

#[test]
fn a_stream_record_chained_with_the_wrong_digest_fails_verification() {
    let (_tmp, store) = store("twostep-bad");
    let w = store.create(sample_meta()).unwrap();
    let dir = w.dir().to_owned();
    let rec = w.write_stream(RecordFile::Stdout, b"real bytes").unwrap();
    w.chain_stream(rec, &crate::chain::digest(b"other bytes"))
        .unwrap();
    w.finish(End::exited(0)).unwrap();
    let report = verify(&dir).unwrap();
    assert!(!report.is_intact());
    assert!(
        report
            .problems()
            .iter()
            .any(|p| p.to_string().contains("stdout.log")),
        "{:?}",
        report.problems()
    );
}
