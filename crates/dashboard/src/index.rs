//! The sessions the dashboard knows, in memory: one [`Summary`] per session folder
//! (what `logs list` reads), kept up to date by the watcher one folder at a time,
//! so a page of 10,000 sessions filters and sorts summaries instead of reading
//! 10,000 `metadata.json` files per request.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::SystemTime;

use serde::Serialize;
use vg_records::{Status, Summary};

/// The most rows one page returns.
pub const MAX_LIMIT: usize = 500;
/// Rows per page unless asked otherwise.
pub const DEFAULT_LIMIT: usize = 50;

/// How an upsert changed the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    New,
    Changed,
    Same,
}

/// Sessions ordered by start time (then id) for paging, with each id's start
/// time to find it.
#[derive(Debug, Default)]
pub struct Index {
    order: BTreeMap<(SystemTime, String), Summary>,
    start_of: HashMap<String, SystemTime>,
}

/// One request for a page of sessions; `None` does not filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// Case-insensitive substring of the agent.
    pub agent: Option<String>,
    /// Case-insensitive substring of the name.
    pub name: Option<String>,
    pub status: Option<Status>,
    /// Started at or after.
    pub since: Option<SystemTime>,
    /// Started before.
    pub until: Option<SystemTime>,
    pub limit: usize,
    /// The id of the last row of the previous page: this page starts after it.
    pub cursor: Option<String>,
}

/// One row of the sessions page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub id: String,
    pub name: Option<String>,
    pub agent: Option<String>,
    pub status: Status,
    pub running: bool,
    /// RFC 3339, UTC.
    pub started: String,
    pub ended: Option<String>,
    pub exit_code: Option<i32>,
    pub command: Vec<String>,
    /// The command line quoted for a shell (or the script's path).
    pub command_line: String,
    pub origin: String,
    pub image: Option<String>,
}

impl Row {
    pub fn of(s: &Summary) -> Self {
        Self {
            id: s.session_id.clone(),
            name: s.name.clone(),
            agent: s.agent.clone(),
            status: s.status,
            running: s.status == Status::Running,
            started: vg_records::time::format_rfc3339(s.start_time),
            ended: s.end_time.map(vg_records::time::format_rfc3339),
            exit_code: s.exit_code,
            command: if s.argv.is_empty() {
                vec![s.command.clone()]
            } else {
                s.argv.clone()
            },
            command_line: s.command.clone(),
            origin: s.origin.as_str().to_owned(),
            image: s.image.clone(),
        }
    }
}

/// A page of sessions, newest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Page {
    pub sessions: Vec<Row>,
    /// How many sessions match the filters, on every page.
    pub total: usize,
    /// The cursor of the next page, when there is one.
    pub next: Option<String>,
}

/// Why a page cannot be given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryError {
    /// The cursor names no session (it was removed since): start over.
    UnknownCursor(String),
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryError::UnknownCursor(c) => write!(
                f,
                "the page cursor {c:?} names no session (removed since?): reload the first page"
            ),
        }
    }
}

/// Whether `needle` occurs in `haystack`, ASCII letters compared without case
/// (no allocation: this runs once per session per request).
fn contains_folded(haystack: Option<&str>, needle: &str) -> bool {
    let Some(h) = haystack else {
        return false;
    };
    let (h, n) = (h.as_bytes(), needle.as_bytes());
    n.is_empty() || h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n))
}

impl Query {
    fn admits(&self, s: &Summary) -> bool {
        self.agent
            .as_deref()
            .is_none_or(|a| contains_folded(s.agent.as_deref(), a))
            && self
                .name
                .as_deref()
                .is_none_or(|n| contains_folded(s.name.as_deref(), n))
            && self.status.is_none_or(|st| s.status == st)
            && self.since.is_none_or(|t| s.start_time >= t)
            && self.until.is_none_or(|t| s.start_time < t)
    }
}

impl Index {
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub fn get(&self, id: &str) -> Option<&Summary> {
        let start = *self.start_of.get(id)?;
        self.order.get(&(start, id.to_owned()))
    }

    /// Adds or replaces a session's summary.
    pub fn upsert(&mut self, s: Summary) -> Change {
        let id = s.session_id.clone();
        let change = match self.get(&id) {
            None => Change::New,
            Some(old) if *old == s => return Change::Same,
            Some(old) => {
                let key = (old.start_time, id.clone());
                self.order.remove(&key);
                Change::Changed
            }
        };
        self.start_of.insert(id.clone(), s.start_time);
        self.order.insert((s.start_time, id), s);
        change
    }

    pub fn remove(&mut self, id: &str) -> Option<Summary> {
        let start = self.start_of.remove(id)?;
        self.order.remove(&(start, id.to_owned()))
    }

    /// The ids known, for the watcher to compare with the folders.
    pub fn ids(&self) -> impl Iterator<Item = &String> {
        self.start_of.keys()
    }

    /// The sessions whose status is `running`: id and folder.
    pub fn running(&self) -> Vec<(String, PathBuf)> {
        self.order
            .values()
            .filter(|s| s.status == Status::Running)
            .map(|s| (s.session_id.clone(), s.dir.clone()))
            .collect()
    }

    /// One page, newest first, in one pass over the sessions (which also counts
    /// every match for `total`).
    pub fn page(&self, q: &Query) -> Result<Page, QueryError> {
        let limit = q.limit.clamp(1, MAX_LIMIT);
        let start = match &q.cursor {
            None => None,
            Some(c) => {
                let t = self
                    .start_of
                    .get(c)
                    .ok_or_else(|| QueryError::UnknownCursor(c.clone()))?;
                Some((*t, c.clone()))
            }
        };
        let mut sessions = Vec::with_capacity(limit);
        let mut more = false;
        let mut total = 0;
        for (key, s) in self.order.iter().rev() {
            if !q.admits(s) {
                continue;
            }
            total += 1;
            // Rows start strictly after the cursor (older than it).
            if start.as_ref().is_some_and(|c| key >= c) {
                continue;
            }
            if sessions.len() == limit {
                more = true;
            } else {
                sessions.push(Row::of(s));
            }
        }
        let next = more
            .then(|| sessions.last().map(|r| r.id.clone()))
            .flatten();
        Ok(Page {
            sessions,
            total,
            next,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use vg_records::Origin;

    use super::*;

    fn summary(n: u64, name: &str, agent: Option<&str>, status: Status) -> Summary {
        let id = format!("session-{n:06}");
        Summary {
            session_id: id.clone(),
            dir: PathBuf::from("/r").join(&id),
            name: Some(name.into()),
            agent: agent.map(Into::into),
            origin: Origin::Cli,
            command: "make -j4".into(),
            argv: vec!["make".into(), "-j4".into()],
            image: None,
            description: None,
            start_time: UNIX_EPOCH + Duration::from_secs(1_700_000_000 + n),
            end_time: None,
            status,
            exit_code: None,
            pid: None,
        }
    }

    fn ids(p: &Page) -> Vec<&str> {
        p.sessions.iter().map(|r| r.id.as_str()).collect()
    }

    #[test]
    fn pages_run_newest_first_and_join_up() {
        let mut index = Index::default();
        for n in 0..10 {
            assert_eq!(
                index.upsert(summary(n, "build", None, Status::Exited)),
                Change::New
            );
        }
        let q = Query {
            limit: 4,
            ..Query::default()
        };
        let first = index.page(&q).unwrap();
        assert_eq!(
            ids(&first),
            [
                "session-000009",
                "session-000008",
                "session-000007",
                "session-000006"
            ]
        );
        assert_eq!(first.total, 10);
        assert_eq!(first.next.as_deref(), Some("session-000006"));
        let second = index
            .page(&Query {
                cursor: first.next.clone(),
                ..q.clone()
            })
            .unwrap();
        assert_eq!(ids(&second)[0], "session-000005");
        let third = index
            .page(&Query {
                cursor: second.next.clone(),
                ..q.clone()
            })
            .unwrap();
        assert_eq!(ids(&third), ["session-000001", "session-000000"]);
        assert_eq!(third.next, None);
        // Exactly a page left: no next.
        let exact = index
            .page(&Query {
                limit: 10,
                ..Query::default()
            })
            .unwrap();
        assert_eq!(exact.sessions.len(), 10);
        assert_eq!(exact.next, None);
        assert_eq!(
            index.page(&Query {
                cursor: Some("session-gone".into()),
                ..q
            }),
            Err(QueryError::UnknownCursor("session-gone".into()))
        );
    }

    #[test]
    fn filters_narrow_rows_and_total() {
        let mut index = Index::default();
        index.upsert(summary(1, "Build-app", Some("claude"), Status::Exited));
        index.upsert(summary(2, "test", Some("codex"), Status::Running));
        index.upsert(summary(3, "build-lib", Some("claude"), Status::Timeout));
        let page = |q: Query| {
            let p = index.page(&Query { limit: 10, ..q }).unwrap();
            (
                ids(&p).into_iter().map(str::to_owned).collect::<Vec<_>>(),
                p.total,
            )
        };
        assert_eq!(
            page(Query {
                name: Some("BUILD".into()),
                ..Query::default()
            }),
            (vec!["session-000003".into(), "session-000001".into()], 2)
        );
        assert_eq!(
            page(Query {
                agent: Some("codex".into()),
                ..Query::default()
            }),
            (vec!["session-000002".into()], 1)
        );
        assert_eq!(
            page(Query {
                status: Some(Status::Timeout),
                ..Query::default()
            }),
            (vec!["session-000003".into()], 1)
        );
        let t = |n: u64| UNIX_EPOCH + Duration::from_secs(1_700_000_000 + n);
        assert_eq!(
            page(Query {
                since: Some(t(2)),
                until: Some(t(3)),
                ..Query::default()
            }),
            (vec!["session-000002".into()], 1)
        );
        assert_eq!(
            index.running(),
            [("session-000002".into(), PathBuf::from("/r/session-000002"))]
        );
    }

    #[test]
    fn upserts_say_what_changed_and_keep_one_row_per_session() {
        let mut index = Index::default();
        let mut s = summary(1, "x", None, Status::Running);
        assert_eq!(index.upsert(s.clone()), Change::New);
        assert_eq!(index.upsert(s.clone()), Change::Same);
        s.status = Status::Exited;
        s.exit_code = Some(0);
        // Even a changed start time leaves one row.
        s.start_time += Duration::from_millis(5);
        assert_eq!(index.upsert(s.clone()), Change::Changed);
        assert_eq!(index.len(), 1);
        let p = index.page(&Query::default()).unwrap();
        assert_eq!(p.sessions.len(), 1);
        assert_eq!(p.sessions[0].status, Status::Exited);
        assert!(!p.sessions[0].running);
        assert_eq!(p.sessions[0].command, ["make", "-j4"]);
        assert!(index.remove("session-000001").is_some());
        assert!(index.is_empty());
        assert_eq!(index.page(&Query::default()).unwrap().total, 0);
    }
}
