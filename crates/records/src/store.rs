//! The folder of all sessions: create, list, resolve ids, remove, prune.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::error::RecordsError;
use crate::event::EventSink;
use crate::layout::{self, SESSION_PREFIX};
use crate::ledger::{Kind as LedgerKind, Ledger};
use crate::metadata::{Metadata, Status, Summary, SummaryFields};
use crate::verify::{self, VerifyReport};
use crate::writer::SessionWriter;

/// The name prefix, in the records folder's `layout::PENDING` folder, of a session
/// folder being made (`partial-PID-ID`): never a session.
const STAGING: &str = "partial-";

/// Removes the staging folders of supervisors that are gone (killed while making
/// their session's folder), from `dir` (the `.pending` folder, or with the legacy
/// `prefix` the records folder itself). A folder whose pid was reused stays until that
/// process is gone too.
fn remove_abandoned(root: &Path, dir: &Path, prefix: &str) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some((pid, id)) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, id)| Some((pid.parse::<u32>().ok()?, id)))
        else {
            continue;
        };
        if pid != std::process::id()
            && !Path::new("/proc").join(pid.to_string()).exists()
            && entry.file_type().is_ok_and(|t| t.is_dir())
            && fs::remove_dir_all(entry.path()).is_ok()
        {
            // Its `start` may be in the ledger: say why no folder followed, so
            // `logs verify --all` does not call it deleted outside Vectra Guard.
            let _ = Ledger::at(root).removing(LedgerKind::Discard, &[id]);
        }
    }
}

/// Each entry's name and whether it is a regular file (symlinks are not).
fn kinds(entries: &[fs::DirEntry]) -> Vec<(std::ffi::OsString, bool)> {
    entries
        .iter()
        .map(|e| (e.file_name(), e.file_type().is_ok_and(|t| t.is_file())))
        .collect()
}

/// Removes the replaced metadata versions kept by runs that are gone
/// (`layout::retire`), from the `.pending` folder alone: at each session's start
/// ([`SessionStore::remove_retired`]).
fn remove_retired_in(root: &Path) {
    let pending = root.join(layout::PENDING);
    if let Ok(entries) = fs::read_dir(&pending) {
        let entries: Vec<fs::DirEntry> = entries.filter_map(Result::ok).collect();
        layout::remove_retired(&pending, layout::RETIRED, &kinds(&entries));
    }
}

/// After `logs rm` or `prune`, so that nothing of a removed session stays behind:
/// [`remove_retired_in`], and what earlier versions left in the records folder
/// itself (`layout::LEGACY_STAGING`, `layout::LEGACY_RETIRED`), which a removal reads
/// anyway.
fn remove_leftovers_in(root: &Path) {
    remove_retired_in(root);
    remove_abandoned(root, root, layout::LEGACY_STAGING);
    if let Ok(entries) = fs::read_dir(root) {
        let entries: Vec<fs::DirEntry> = entries.filter_map(Result::ok).collect();
        layout::remove_retired(root, layout::LEGACY_RETIRED, &kinds(&entries));
    }
}

/// Which sessions `list` returns; `None` fields do not filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    pub agent: Option<String>,
    pub name: Option<String>,
    /// Sessions started at or after this instant.
    pub since: Option<SystemTime>,
    /// Effective status (a crashed `running` session is `interrupted`).
    pub status: Option<Status>,
}

impl ListFilter {
    /// Damaged folders have no readable agent, name or status, so they are
    /// listed only when the filter asks for none of these.
    fn admits_damaged(&self) -> bool {
        self.agent.is_none() && self.name.is_none() && self.status.is_none()
    }

    fn admits(&self, s: &Summary) -> bool {
        self.agent
            .as_ref()
            .is_none_or(|a| s.agent.as_ref() == Some(a))
            && self
                .name
                .as_ref()
                .is_none_or(|n| s.name.as_ref() == Some(n))
            && self.since.is_none_or(|t| s.start_time >= t)
            && self.status.is_none_or(|st| s.status == st)
    }
}

/// One row of `logs list`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ListEntry {
    Session(Summary),
    /// A session folder whose `metadata.json` is missing or unreadable.
    Damaged {
        session_id: String,
        dir: PathBuf,
        reason: String,
    },
}

impl ListEntry {
    pub fn session_id(&self) -> &str {
        match self {
            ListEntry::Session(s) => &s.session_id,
            ListEntry::Damaged { session_id, .. } => session_id,
        }
    }

    pub fn dir(&self) -> &Path {
        match self {
            ListEntry::Session(s) => &s.dir,
            ListEntry::Damaged { dir, .. } => dir,
        }
    }
}

/// A session's folder and parsed metadata, as `logs show` needs them.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionInfo {
    pub dir: PathBuf,
    pub metadata: Metadata,
    /// `metadata.status`, corrected to `interrupted` for a crashed supervisor.
    pub status: Status,
}

/// Reads and parses `dir/metadata.json`.
pub fn read_metadata(dir: &Path) -> Result<Metadata, RecordsError> {
    let path = dir.join(layout::METADATA);
    let bytes = fs::read(&path).map_err(|e| metadata_read_error(&path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| RecordsError::DamagedMetadata {
        path,
        reason: format!("not valid session metadata: {e}"),
    })
}

fn metadata_read_error(path: &Path, e: io::Error) -> RecordsError {
    if e.kind() == io::ErrorKind::NotFound {
        RecordsError::DamagedMetadata {
            path: path.to_owned(),
            reason: "the file is missing".into(),
        }
    } else {
        RecordsError::Read {
            path: path.to_owned(),
            source: e,
        }
    }
}

/// A session folder found under the root.
struct Found {
    name: String,
    dir: PathBuf,
    name_time: SystemTime,
}

/// One session's row of `logs list`, read from `dir/metadata.json` alone (the
/// fields `list` needs), for a front end that keeps its own index of sessions and
/// rereads only the ones that changed. `boot` is [`layout::boot_id`], to tell a
/// crashed supervisor's `running` session from a live one. The error says why the
/// folder is damaged.
pub fn read_summary_of(dir: &Path, boot: Option<&str>) -> Result<Summary, String> {
    let path = dir.join(layout::METADATA);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err("metadata.json is missing".into());
        }
        Err(e) => return Err(format!("cannot read metadata.json: {e}")),
    };
    match serde_json::from_slice::<SummaryFields>(&bytes) {
        Ok(f) => Ok(f.into_summary(dir.to_owned(), boot)),
        Err(e) => Err(format!("metadata.json is not valid session metadata: {e}")),
    }
}

/// The word that names the newest session wherever a session is asked for.
pub const LAST: &str = "last";

#[derive(Debug, Clone)]
pub struct SessionStore {
    root: PathBuf,
}

impl SessionStore {
    /// `$VECTRAGUARD_HOME/logs` when set (and not empty), else
    /// `~/.vectraguard/logs`.
    pub fn default_root(env_home: Option<&Path>, home: &Path) -> PathBuf {
        match env_home {
            Some(h) if !h.as_os_str().is_empty() => h.join("logs"),
            _ => home.join(".vectraguard").join("logs"),
        }
    }

    /// Opens the records folder for writing, creating it (0700) if missing.
    pub fn open(root: &Path) -> Result<Self, RecordsError> {
        match fs::metadata(root) {
            Ok(m) if !m.is_dir() => {
                return Err(RecordsError::RootNotDirectory {
                    path: root.to_owned(),
                });
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                layout::create_private_dir_all(root).map_err(|source| {
                    RecordsError::CreateRoot {
                        path: root.to_owned(),
                        source,
                    }
                })?;
            }
            Err(source) => {
                return Err(RecordsError::ReadRoot {
                    path: root.to_owned(),
                    source,
                });
            }
        }
        // Made once, then only looked at: a probe file created and removed at each
        // start cost an inode allocation and a removal on every run. A folder that
        // stops accepting files later fails `create`'s staging folder, reported the
        // same way.
        layout::pending_dir(root).map_err(|source| RecordsError::RootNotWritable {
            path: root.to_owned(),
            source,
        })?;
        Ok(Self::at(root))
    }

    /// The records folder for reading only: nothing is created or checked
    /// (a missing folder simply has no sessions).
    pub fn at(root: &Path) -> Self {
        Self {
            root: root.to_owned(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Removes the replaced `metadata.json` versions that runs now gone kept in the
    /// records folder (`layout::retire`). Freeing their blocks may wait for the disk
    /// (a synchronous discard), so a session's supervisor calls it off its own path:
    /// on a thread, while the sandbox builds itself.
    pub fn remove_retired(&self) {
        remove_retired_in(&self.root);
    }

    /// Starts the records of a new session (status `running`).
    pub fn create(&self, meta: Metadata) -> Result<SessionWriter, RecordsError> {
        self.create_with_sinks(meta, Vec::new())
    }

    /// Like [`SessionStore::create`], with consumers subscribed before the
    /// `session-start` event is published.
    pub fn create_with_sinks(
        &self,
        mut meta: Metadata,
        sinks: Vec<Arc<dyn EventSink>>,
    ) -> Result<SessionWriter, RecordsError> {
        let pending =
            layout::pending_dir(&self.root).map_err(|source| RecordsError::RootNotWritable {
                path: self.root.clone(),
                source,
            })?;
        // Reads the `.pending` folder only, not the sessions beside it.
        remove_abandoned(&self.root, &pending, STAGING);
        // The folder is made under a staging name and renamed once its files and
        // first metadata are written: a supervisor killed in between leaves no
        // half-made session, only a staging folder that a later `create` removes.
        let mut attempts = 0;
        let (dir, staging) = loop {
            let id = layout::new_session_id(meta.start_time)?;
            let dir = self.root.join(&id);
            let staging = pending.join(format!("{STAGING}{}-{id}", std::process::id()));
            let taken = dir.exists();
            match layout::create_private_dir(&staging) {
                Ok(()) if !taken => {
                    meta.session_id = id;
                    break (dir, staging);
                }
                Ok(()) => {
                    let _ = fs::remove_dir(&staging);
                    if attempts >= 16 {
                        return Err(RecordsError::CreateSession {
                            path: dir,
                            source: io::Error::from(io::ErrorKind::AlreadyExists),
                        });
                    }
                    attempts += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempts < 16 => {
                    attempts += 1
                }
                // What the probe file of `open` used to find out.
                Err(source)
                    if matches!(
                        source.kind(),
                        io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem
                    ) =>
                {
                    return Err(RecordsError::RootNotWritable {
                        path: self.root.clone(),
                        source,
                    });
                }
                Err(source) => return Err(RecordsError::CreateSession { path: dir, source }),
            }
        };
        let ledger = Ledger::at(&self.root);
        let id = meta.session_id.clone();
        if let Err(e) = ledger.started(&id) {
            // Fail closed: a session the ledger cannot vouch for is not started.
            let _ = fs::remove_dir(&staging);
            return Err(e);
        }
        let made = SessionWriter::start(staging.clone(), meta, sinks).and_then(|writer| {
            fs::rename(&staging, &dir)
                .map(|()| writer)
                .map_err(|source| RecordsError::CreateSession {
                    path: dir.clone(),
                    source,
                })
        });
        match made {
            Ok(mut writer) => {
                writer.moved_to(dir);
                writer.make_spare(&self.root);
                writer.ledger = Some(ledger);
                Ok(writer)
            }
            Err(e) => {
                // Leave no half-made folder behind to be listed as damaged, and
                // say in the ledger why it is gone.
                let _ = fs::remove_dir_all(&staging);
                let _ = ledger.removing(LedgerKind::Discard, &[&id]);
                Err(e)
            }
        }
    }

    /// The session folders under the root, `(name, path)` by name (symlinks and
    /// staging folders skipped). Reads only the folder itself, not the sessions.
    pub fn session_dirs(&self) -> Result<Vec<(String, PathBuf)>, RecordsError> {
        let mut found: Vec<(String, PathBuf)> =
            self.scan()?.into_iter().map(|f| (f.name, f.dir)).collect();
        found.sort_unstable();
        Ok(found)
    }

    /// Session folders (by name), unsorted. A missing root has none.
    fn scan(&self) -> Result<Vec<Found>, RecordsError> {
        let rd = match fs::read_dir(&self.root) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(RecordsError::ReadRoot {
                    path: self.root.clone(),
                    source,
                });
            }
        };
        let mut found = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|source| RecordsError::ReadRoot {
                path: self.root.clone(),
                source,
            })?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let Some(name_time) = layout::parse_session_name(&name) else {
                continue;
            };
            // Never follow a symlink planted in the records folder.
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            found.push(Found {
                dir: entry.path(),
                name,
                name_time,
            });
        }
        Ok(found)
    }

    /// Sessions matching `filter`, oldest first. Reads only each folder's
    /// `metadata.json`; a damaged folder is returned as `Damaged` instead of
    /// failing the listing.
    pub fn list(&self, filter: &ListFilter) -> Result<Vec<ListEntry>, RecordsError> {
        let mut found = self.scan()?;
        if let Some(since) = filter.since {
            // Folder names carry the start time rounded down to the second.
            found.retain(|f| f.name_time + Duration::from_secs(1) > since);
        }
        found.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let boot = layout::boot_id();
        let mut out = Vec::with_capacity(found.len());
        for f in found {
            match read_summary_of(&f.dir, boot.as_deref()) {
                Ok(s) => {
                    if filter.admits(&s) {
                        out.push(ListEntry::Session(s));
                    }
                }
                Err(reason) => {
                    if filter.admits_damaged() && filter.since.is_none_or(|t| f.name_time >= t) {
                        out.push(ListEntry::Damaged {
                            session_id: f.name,
                            dir: f.dir,
                            reason,
                        });
                    }
                }
            }
        }
        // Folder names order sessions to the second; within a second, by the
        // recorded start time (damaged folders keep their name's time).
        out.sort_by_cached_key(|e| match e {
            ListEntry::Session(s) => (s.start_time, s.session_id.clone()),
            ListEntry::Damaged { session_id, .. } => (
                layout::parse_session_name(session_id).unwrap_or(std::time::UNIX_EPOCH),
                session_id.clone(),
            ),
        });
        Ok(out)
    }

    /// Finds a session folder from what a person would type: `last` (the newest
    /// session), its full name (`session-20251219T101053Z-9af4c3`), its id without
    /// `session-`, a session name given with `--name` (the newest with that name), or
    /// a unique prefix or suffix of the id (`20251219T1010`, `9af4c3`). In that
    /// order: an exact id or name is never ambiguous, a fragment may be.
    pub fn resolve(&self, query: &str) -> Result<PathBuf, RecordsError> {
        let q = query.trim();
        let unknown = || RecordsError::UnknownSession {
            query: query.to_owned(),
            root: self.root.clone(),
        };
        if q.is_empty() || q.contains('/') {
            return Err(unknown());
        }
        if q == LAST {
            return self.newest(|_| true)?.ok_or_else(unknown);
        }
        let found = self.scan()?;
        let bare = |name: &str| name.strip_prefix(SESSION_PREFIX).unwrap_or(name).to_owned();
        if let Some(f) = found.iter().find(|f| f.name == q || bare(&f.name) == q) {
            return Ok(f.dir.clone());
        }
        let mut matches: Vec<&Found> = found
            .iter()
            .filter(|f| {
                f.name.starts_with(q) || bare(&f.name).starts_with(q) || f.name.ends_with(q)
            })
            .collect();
        if let Some(dir) = self.newest(|s| s.name.as_deref() == Some(q))? {
            // A session's name is free text, which a project file may set: it must not
            // take the place of another session that the same text names by its id
            // (the suffix the end-of-run line tells the user to type).
            matches.retain(|f| f.dir != dir);
            if matches.is_empty() {
                return Ok(dir);
            }
            let mut candidates: Vec<String> = matches.iter().map(|f| f.name.clone()).collect();
            if let Some(named) = found.iter().find(|f| f.dir == dir) {
                candidates.push(format!("{} (named {q})", named.name));
            }
            candidates.sort();
            return Err(RecordsError::AmbiguousSession {
                query: query.to_owned(),
                candidates,
            });
        }
        match matches.len() {
            0 => Err(unknown()),
            1 => Ok(matches.remove(0).dir.clone()),
            _ => {
                let mut candidates: Vec<String> = matches.iter().map(|f| f.name.clone()).collect();
                candidates.sort();
                Err(RecordsError::AmbiguousSession {
                    query: query.to_owned(),
                    candidates,
                })
            }
        }
    }

    /// The newest readable session that `keep` accepts (damaged folders have no
    /// name and are never "the last session").
    fn newest(&self, keep: impl Fn(&Summary) -> bool) -> Result<Option<PathBuf>, RecordsError> {
        Ok(self
            .list(&ListFilter::default())?
            .into_iter()
            .rev()
            .find_map(|e| match e {
                ListEntry::Session(s) if keep(&s) => Some(s.dir),
                _ => None,
            }))
    }

    /// Resolves `query` and reads the session's metadata.
    pub fn load(&self, query: &str) -> Result<SessionInfo, RecordsError> {
        let dir = self.resolve(query)?;
        let metadata = read_metadata(&dir)?;
        let status = metadata.effective_status(layout::boot_id().as_deref());
        Ok(SessionInfo {
            dir,
            metadata,
            status,
        })
    }

    /// Checks a session's records against its hash chain.
    pub fn verify(&self, query: &str) -> Result<VerifyReport, RecordsError> {
        verify::verify(&self.resolve(query)?)
    }

    /// Deletes a session's folder; refuses while its supervisor is alive.
    pub fn remove(&self, query: &str) -> Result<PathBuf, RecordsError> {
        let dir = self.resolve(query)?;
        self.remove_dir(&dir, false)?;
        Ok(dir)
    }

    /// Deletes the session folder `dir`, as returned by
    /// [`SessionStore::resolve`]. Refuses while the session's supervisor is
    /// alive unless `force` (its later records are then lost). Anything that
    /// is not a session folder directly under the root is refused, so a
    /// wrong path can never remove something else.
    pub fn remove_dir(&self, dir: &Path, force: bool) -> Result<(), RecordsError> {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
        self.check_removable(dir, force)?;
        // Ledgered (and fsynced) first: a removal cut short then reads as
        // "removed, folder still there", never as a deletion behind our back.
        Ledger::at(&self.root).removing(LedgerKind::Rm, &[name])?;
        fs::remove_dir_all(dir).map_err(|source| RecordsError::Remove {
            path: dir.to_owned(),
            source,
        })?;
        remove_leftovers_in(&self.root);
        Ok(())
    }

    /// Refuses a folder that is not a session folder directly under the root,
    /// and unless `force`, one whose supervisor is alive.
    fn check_removable(&self, dir: &Path, force: bool) -> Result<(), RecordsError> {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if dir.parent() != Some(self.root.as_path()) || layout::parse_session_name(name).is_none() {
            return Err(RecordsError::UnknownSession {
                query: dir.display().to_string(),
                root: self.root.clone(),
            });
        }
        if !force
            && let Ok(m) = read_metadata(dir)
            && m.effective_status(layout::boot_id().as_deref()) == Status::Running
        {
            return Err(RecordsError::SessionRunning {
                id: m.session_id,
                pid: m.supervisor.map_or(0, |s| s.pid),
            });
        }
        Ok(())
    }

    /// Removes the sessions of a [`SessionStore::prune_plan`]: every one is
    /// checked (none may have started running since), then all are ledgered as
    /// `prune` in one fsynced write, then removed in order. Returns the folders
    /// removed.
    pub fn prune_dirs(&self, plan: &[Prunable]) -> Result<Vec<PathBuf>, RecordsError> {
        for p in plan {
            self.check_removable(&p.dir, false)?;
        }
        if plan.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<&str> = plan.iter().map(|p| p.session_id.as_str()).collect();
        Ledger::at(&self.root).removing(LedgerKind::Prune, &ids)?;
        let mut removed = Vec::new();
        for p in plan {
            fs::remove_dir_all(&p.dir).map_err(|source| RecordsError::Remove {
                path: p.dir.clone(),
                source,
            })?;
            removed.push(p.dir.clone());
        }
        remove_leftovers_in(&self.root);
        Ok(removed)
    }

    /// Deletes sessions that ended (or, for crashed and damaged ones,
    /// started) more than `older_than` ago. Never touches a session whose
    /// supervisor is alive. Returns the folders removed, oldest first.
    pub fn prune(&self, older_than: Duration) -> Result<Vec<PathBuf>, RecordsError> {
        self.prune_before(
            SystemTime::now()
                .checked_sub(older_than)
                .unwrap_or(SystemTime::UNIX_EPOCH),
        )
    }

    /// Like [`SessionStore::prune`] with an explicit cut-off instant.
    pub fn prune_before(&self, cutoff: SystemTime) -> Result<Vec<PathBuf>, RecordsError> {
        self.prune_dirs(&self.prune_plan(cutoff)?)
    }

    /// What [`SessionStore::prune_before`] would remove, oldest first,
    /// without removing anything.
    pub fn prune_plan(&self, cutoff: SystemTime) -> Result<Vec<Prunable>, RecordsError> {
        let mut found = self.scan()?;
        found.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let boot = layout::boot_id();
        let mut plan = Vec::new();
        for f in found {
            let last_activity = match read_summary_of(&f.dir, boot.as_deref()) {
                Ok(s) if s.status == Status::Running => continue,
                Ok(s) => s.end_time.unwrap_or(s.start_time),
                Err(_) => f.name_time,
            };
            if last_activity < cutoff {
                plan.push(Prunable {
                    session_id: f.name,
                    dir: f.dir,
                    last_activity,
                });
            }
        }
        Ok(plan)
    }
}

/// A session that pruning removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prunable {
    pub session_id: String,
    pub dir: PathBuf,
    /// When it ended; its start for a crashed session, and the time in its
    /// folder name for a damaged one.
    pub last_activity: SystemTime,
}
