//! SIGKILL in the middle of a session: the records written so far stay on
//! disk, verify intact, and the session lists as interrupted.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{TempDir, sample_meta};
use crate::{CommandRecord, Event, ListEntry, ListFilter, SessionStore, Status, verify};

const ROOT_VAR: &str = "VG_RECORDS_CRASH_ROOT";

/// The child that `sigkill_leaves_an_interrupted_intact_record` re-executes (the same
/// test, with `ROOT_VAR` set) and kills: records a little, announces it, then waits to
/// be killed. Never returns, so the child can never pass without being killed.
fn crash_child(root: PathBuf) -> ! {
    let store = SessionStore::open(&root).unwrap();
    let w = store.create(sample_meta()).unwrap();
    w.append_stdout(b"before the crash\n").unwrap();
    w.record_command(&CommandRecord::new(7, 1, "/work", ["sleep", "1000"]))
        .unwrap();
    w.event(Event::new("tick")).unwrap();
    w.start_cast(80, 24, &[("TERM", "xterm")]).unwrap();
    w.cast_output(b"$ sleep 1000\r\n").unwrap();
    fs::write(root.join("ready"), w.id()).unwrap();
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn wait_for(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(s) = fs::read_to_string(path) {
            return s;
        }
        assert!(Instant::now() < deadline, "the child never got ready");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigkill_leaves_an_interrupted_intact_record() {
    if let Some(root) = std::env::var_os(ROOT_VAR) {
        crash_child(PathBuf::from(root));
    }
    let tmp = TempDir::new("crash");
    let root = tmp.path().join("logs");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "tests::crash::sigkill_leaves_an_interrupted_intact_record",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROOT_VAR, &root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let id = wait_for(&root.join("ready"));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let store = SessionStore::at(&root);
    let entries = store.list(&ListFilter::default()).unwrap();
    assert_eq!(entries.len(), 1);
    match &entries[0] {
        ListEntry::Session(s) => {
            assert_eq!(s.session_id, id);
            assert_eq!(s.status, Status::Interrupted);
        }
        other => panic!("{other:?}"),
    }
    let dir = store.resolve(&id).unwrap();
    assert_eq!(
        fs::read(dir.join("stdout.log")).unwrap(),
        b"before the crash\n"
    );
    assert!(
        fs::read_to_string(dir.join("commands.log"))
            .unwrap()
            .contains("-- sleep 1000")
    );
    let cast = fs::read_to_string(dir.join("tty.cast")).unwrap();
    assert_eq!(cast.lines().count(), 2, "{cast}");
    assert!(cast.ends_with(",\"o\",\"$ sleep 1000\\r\\n\"]\n"), "{cast}");
    assert!(verify(&dir).unwrap().is_intact());
}
