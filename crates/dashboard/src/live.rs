//! The watcher: keeps the [`Index`] up to date and turns what running sessions
//! append into live events for `/api/live`.
//!
//! A short poll, every [`TICK`]: the records folder's modification time (a
//! session folder appears by a rename into it, or goes), and for each running
//! session its `metadata.json` (status), and what `commands.log` and
//! `events.jsonl` gained, read with `vg_records::Tail`. A poll costs a few `stat`s
//! per running session; past sessions are never read again unless their folder
//! changes. Statuses of running sessions are also rechecked every second, since
//! a supervisor that dies writes nothing (its session becomes `interrupted`).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use vg_records::layout::{self, RecordFile};
use vg_records::{CommandLogLine, LineBuffer, SessionStore, Status, Tail};

use crate::index::{Change, Index, Row};
use crate::views::Exec;

/// How often the watcher looks.
pub const TICK: Duration = Duration::from_millis(20);
/// How often running sessions' statuses are reread even when nothing changed.
const RECHECK: Duration = Duration::from_secs(1);
/// The kernel stamps a folder's modification time from a coarse clock (a few
/// milliseconds): a second change within the same tick leaves the same stamp. While
/// the stamp is this recent, the folder is listed again at every poll.
const STAMP_GRAIN: Duration = Duration::from_millis(100);
/// A full listing this often whatever the stamps say (a clock stepped back).
const RESCAN: Duration = Duration::from_secs(5);

/// One server-sent event: its name and its JSON data (which has `"session"`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveEvent {
    pub kind: &'static str,
    pub data: Value,
}

/// What `/api/live` subscribers share.
pub type Bus = broadcast::Sender<LiveEvent>;

/// One followed file of a running session.
struct Followed {
    tail: Tail,
    lines: LineBuffer,
}

/// What the watcher keeps of a running session.
struct Watch {
    dir: PathBuf,
    stamp: Option<(SystemTime, u64)>,
    commands: Option<Followed>,
    events: Option<Followed>,
    /// Known before the dashboard started: what its files hold already is not news.
    skip_existing: bool,
}

/// The watcher's state; [`Watcher::tick`] is one poll.
pub struct Watcher {
    store: SessionStore,
    index: Arc<RwLock<Index>>,
    bus: Bus,
    root_stamp: Option<SystemTime>,
    watches: HashMap<String, Watch>,
    boot: Option<String>,
    last_recheck: Instant,
    last_rescan: Instant,
}

fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

impl Watcher {
    /// Reads every session once (the initial index).
    pub fn new(store: SessionStore, index: Arc<RwLock<Index>>, bus: Bus) -> Self {
        let mut w = Self {
            store,
            index,
            bus,
            root_stamp: None,
            watches: HashMap::new(),
            boot: layout::boot_id(),
            last_recheck: Instant::now(),
            last_rescan: Instant::now(),
        };
        w.rescan(false);
        w
    }

    fn send(&self, kind: &'static str, data: Value) {
        // No subscriber is not an error.
        let _ = self.bus.send(LiveEvent { kind, data });
    }

    fn write_index(&self) -> std::sync::RwLockWriteGuard<'_, Index> {
        self.index
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Compares the folders with the index: new ones read, gone ones dropped.
    fn rescan(&mut self, announce: bool) {
        self.last_rescan = Instant::now();
        self.root_stamp = std::fs::metadata(self.store.root())
            .and_then(|m| m.modified())
            .ok();
        let Ok(dirs) = self.store.session_dirs() else {
            return;
        };
        let names: HashSet<&str> = dirs.iter().map(|(n, _)| n.as_str()).collect();
        let known: HashSet<String> = {
            let index = self
                .index
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            index.ids().cloned().collect()
        };
        let gone: Vec<String> = known
            .iter()
            .filter(|id| !names.contains(id.as_str()))
            .cloned()
            .collect();
        for id in gone {
            self.write_index().remove(&id);
            self.watches.remove(&id);
            if announce {
                self.send("session", json!({"session": id, "change": "removed"}));
            }
        }
        let new: Vec<&(String, PathBuf)> =
            dirs.iter().filter(|(n, _)| !known.contains(n)).collect();
        for (name, dir, read) in read_summaries(&new, self.boot.as_deref()) {
            // A folder whose metadata is not readable (yet, or damaged) is tried
            // again at the next change of the folder.
            let Ok(mut summary) = read else {
                continue;
            };
            // The folder's name is the id the store resolves: a copied or renamed
            // folder keeps its metadata's old id, which must not hide another.
            summary.session_id.clone_from(name);
            let row = Row::of(&summary);
            let running = summary.status == Status::Running;
            self.write_index().upsert(summary);
            if running {
                self.watches.insert(
                    name.clone(),
                    Watch {
                        dir: dir.clone(),
                        stamp: None,
                        commands: None,
                        events: None,
                        skip_existing: !announce,
                    },
                );
            }
            if announce {
                self.send(
                    "session",
                    json!({"session": name, "change": "started", "row": row}),
                );
            }
        }
    }

    /// One poll.
    pub fn tick(&mut self) {
        let root_stamp = std::fs::metadata(self.store.root())
            .and_then(|m| m.modified())
            .ok();
        let recent = root_stamp
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_none_or(|age| age < STAMP_GRAIN);
        if root_stamp != self.root_stamp || recent || self.last_rescan.elapsed() >= RESCAN {
            self.rescan(true);
        }
        let recheck = self.last_recheck.elapsed() >= RECHECK;
        if recheck {
            self.last_recheck = Instant::now();
        }
        let ids: Vec<String> = self.watches.keys().cloned().collect();
        for id in ids {
            self.follow(&id);
            self.check_status(&id, recheck);
        }
    }

    /// Reads what the session's files gained and announces it.
    fn follow(&mut self, id: &str) {
        let Some(w) = self.watches.get_mut(id) else {
            return;
        };
        let mut out: Vec<(&'static str, Value)> = Vec::new();
        for file in [RecordFile::Commands, RecordFile::Events] {
            let slot = match file {
                RecordFile::Commands => &mut w.commands,
                _ => &mut w.events,
            };
            if slot.is_none() {
                let Ok(mut tail) = Tail::open(&layout::file_path(&w.dir, file)) else {
                    continue;
                };
                if w.skip_existing {
                    let mut discard = Vec::new();
                    let _ = tail.read_new(&mut discard);
                }
                *slot = Some(Followed {
                    tail,
                    lines: LineBuffer::default(),
                });
            }
            let Some(f) = slot.as_mut() else {
                continue;
            };
            let mut data = Vec::new();
            if f.tail.read_new(&mut data).is_err() || data.is_empty() {
                continue;
            }
            for line in f.lines.push(&data) {
                let text = String::from_utf8_lossy(&line);
                match file {
                    RecordFile::Commands => out.extend(exec_event(id, &text)),
                    _ => out.extend(record_event(id, &text)),
                }
            }
        }
        for (kind, data) in out {
            self.send(kind, data);
        }
    }

    /// Rereads the summary when `metadata.json` changed (or on a recheck);
    /// announces a change and stops following an ended session.
    fn check_status(&mut self, id: &str, recheck: bool) {
        let Some(w) = self.watches.get_mut(id) else {
            return;
        };
        let now = stamp(&w.dir.join(layout::METADATA));
        if now == w.stamp && !recheck {
            return;
        }
        w.stamp = now;
        let dir = w.dir.clone();
        let Ok(mut summary) = vg_records::read_summary_of(&dir, self.boot.as_deref()) else {
            return;
        };
        id.clone_into(&mut summary.session_id);
        let ended = summary.status != Status::Running;
        let row = Row::of(&summary);
        if ended {
            // What the files gained before the end was written is news too.
            self.follow(id);
            self.watches.remove(id);
        }
        if self.write_index().upsert(summary) == Change::Changed {
            let change = if ended { "ended" } else { "changed" };
            self.send(
                "session",
                json!({"session": id, "change": change, "row": row}),
            );
        }
    }

    /// Polls until the bus has no sender left to serve (never, in practice: the
    /// process ends with the server).
    pub fn run(mut self) {
        loop {
            self.tick();
            std::thread::sleep(TICK);
        }
    }
}

/// The summaries of `dirs`, in order; many (the first listing of a large records
/// folder) are read on a few threads, since each is a file read and a JSON parse.
fn read_summaries<'a>(
    dirs: &[&'a (String, PathBuf)],
    boot: Option<&str>,
) -> Vec<(&'a String, &'a PathBuf, Result<vg_records::Summary, String>)> {
    let read =
        |(name, dir): &&'a (String, PathBuf)| (name, dir, vg_records::read_summary_of(dir, boot));
    if dirs.len() < 256 {
        return dirs.iter().map(read).collect();
    }
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
    let chunk = dirs.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = dirs
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(read).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

/// The live event of one `commands.log` line.
pub fn exec_event(session: &str, line: &str) -> Option<(&'static str, Value)> {
    match CommandLogLine::parse(line)? {
        CommandLogLine::Exec(e) => Some((
            "exec",
            json!({"session": session, "line": "exec", "exec": Exec::of(&e)}),
        )),
        CommandLogLine::Exit { pid, exit, time } => Some((
            "exec",
            json!({
                "session": session,
                "line": "exit",
                "pid": pid,
                "time": vg_records::time::format_rfc3339(time),
                "exit": crate::views::Exit::from(exit),
            }),
        )),
    }
}

/// The live events of one `events.jsonl` line: `event`, and `approval` too for
/// an approval event (asked or decided).
pub fn record_event(session: &str, line: &str) -> Vec<(&'static str, Value)> {
    let Ok(event) = serde_json::from_str::<Value>(line) else {
        return Vec::new();
    };
    let mut out = vec![("event", json!({"session": session, "event": event.clone()}))];
    if event["type"] == "approval" {
        out.push(("approval", json!({"session": session, "event": event})));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use vg_records::{CommandRecord, End, Metadata, Origin};

    fn temp_root(tag: &str) -> tempfile::TempDir {
        tempfile::Builder::new().prefix(tag).tempdir().unwrap()
    }

    fn drain(rx: &mut broadcast::Receiver<LiveEvent>) -> Vec<LiveEvent> {
        let mut out = Vec::new();
        while let Ok(e) = rx.try_recv() {
            out.push(e);
        }
        out
    }

    /// A session made after the watcher started is announced, its execs and
    /// events follow, and its end; the index follows along.
    #[test]
    fn a_new_session_its_lines_and_its_end_are_announced() {
        let tmp = temp_root("vg-dash-live");
        let root = tmp.path().join("logs");
        let store = SessionStore::open(&root).unwrap();
        let old = store.create(Metadata::new(Origin::Cli)).unwrap();
        old.record_command(&CommandRecord::new(7, 1, "/w", ["old"]))
            .unwrap();
        let index = Arc::new(RwLock::new(Index::default()));
        let (bus, mut rx) = broadcast::channel(64);
        let mut watcher = Watcher::new(SessionStore::at(&root), Arc::clone(&index), bus);
        assert_eq!(index.read().unwrap().len(), 1);
        watcher.tick();
        // What the old session had written before is not news; what follows is.
        assert!(drain(&mut rx).is_empty());
        old.record_command(&CommandRecord::new(8, 1, "/w", ["later"]))
            .unwrap();
        watcher.tick();
        let got = drain(&mut rx);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].data["exec"]["argv"], json!(["later"]));

        // Made at once after the previous listing: within the folder's timestamp
        // granularity, still seen.
        let mut meta = Metadata::new(Origin::Cli);
        meta.name = Some("fresh".into());
        let w = store.create(meta).unwrap();
        let id = w.dir().file_name().unwrap().to_str().unwrap().to_owned();
        w.record_command(&CommandRecord::new(2, 1, "/w", ["echo", "hi"]))
            .unwrap();
        watcher.tick();
        let got = drain(&mut rx);
        let kinds: Vec<&str> = got.iter().map(|e| e.kind).collect();
        assert_eq!(kinds[0], "session", "{got:?}");
        assert_eq!(got[0].data["change"], "started");
        assert_eq!(got[0].data["row"]["name"], "fresh");
        assert!(
            got.iter().any(|e| e.kind == "exec"
                && e.data["session"] == id.as_str()
                && e.data["exec"]["argv"] == json!(["echo", "hi"])),
            "{got:?}"
        );
        assert!(got.iter().any(|e| e.kind == "event"), "{got:?}");
        w.finish(End::exited(0)).unwrap();
        watcher.tick();
        let got = drain(&mut rx);
        assert!(
            got.iter().any(|e| e.kind == "session"
                && e.data["session"] == id.as_str()
                && e.data["change"] == "ended"
                && e.data["row"]["status"] == "exited"),
            "{got:?}"
        );
        assert_eq!(
            index.read().unwrap().get(&id).map(|s| s.status),
            Some(Status::Exited)
        );
        // Removed from the folder: removed from the index.
        store.remove(&id).unwrap();
        watcher.tick();
        assert!(index.read().unwrap().get(&id).is_none());
        let got = drain(&mut rx);
        assert!(got.iter().any(|e| e.data["change"] == "removed"), "{got:?}");
    }

    /// A large folder is read on several threads, every folder once, each under
    /// its folder's name (copies keep their metadata's id).
    #[test]
    fn a_large_first_listing_indexes_every_folder_under_its_name() {
        let tmp = temp_root("vg-dash-many");
        let root = tmp.path().join("logs");
        let store = SessionStore::open(&root).unwrap();
        let w = store.create(Metadata::new(Origin::Cli)).unwrap();
        let first = w.dir().to_owned();
        w.finish(End::exited(0)).unwrap();
        for i in 0..299u32 {
            let copy = root.join(format!("session-20250101T000000Z-{i:06x}"));
            std::fs::create_dir(&copy).unwrap();
            for f in std::fs::read_dir(&first).unwrap() {
                let f = f.unwrap();
                std::fs::copy(f.path(), copy.join(f.file_name())).unwrap();
            }
        }
        let index = Arc::new(RwLock::new(Index::default()));
        let (bus, _rx) = broadcast::channel(4);
        let _watcher = Watcher::new(SessionStore::at(&root), Arc::clone(&index), bus);
        let index = index.read().unwrap();
        assert_eq!(index.len(), 300);
        let copy = index.get("session-20250101T000000Z-00012a").unwrap();
        assert_eq!(copy.session_id, "session-20250101T000000Z-00012a");
        assert_eq!(copy.status, Status::Exited);
    }

    #[test]
    fn lines_become_events_of_their_kind() {
        let (kind, data) =
            exec_event("s1", "2025-12-19T10:10:53.300Z exit pid=3 status=2\n").unwrap();
        assert_eq!(kind, "exec");
        assert_eq!(data["line"], "exit");
        assert_eq!(data["exit"], json!({"kind": "code", "value": 2}));
        assert!(exec_event("s1", "nonsense").is_none());
        let ev = record_event(
            "s1",
            r#"{"time":"2025-12-19T10:10:53.300Z","type":"approval","event":"asked","id":1}"#,
        );
        let kinds: Vec<&str> = ev.iter().map(|(k, _)| *k).collect();
        assert_eq!(kinds, ["event", "approval"]);
        assert_eq!(ev[1].1["session"], "s1");
        assert!(record_event("s1", "{broken").is_empty());
    }
}
