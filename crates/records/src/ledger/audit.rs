//! `logs verify --all`: the ledger, every session folder's own chain, and the
//! two against each other.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{Chain, Head, Kind, Ledger, State, session_head};
use crate::chain::Hash;
use crate::error::RecordsError;
use crate::layout::{self, hex_encode};
use crate::metadata::Status;
use crate::verify::{self, VerifyReport};

/// What `logs verify --all` finds about one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Finding {
    /// Ended in the ledger and its head is the ledgered one.
    Intact { records: u64, adopted: bool },
    /// Its supervisor is alive: its own chain is checked once it ends.
    Running,
    /// Never ended in the ledger, and its supervisor is gone (killed or
    /// crashed): its final head is not anchored.
    Unended { status: String },
    /// Removed by Vectra Guard, but the folder is there (the removal was cut
    /// short, or the folder was put back).
    RemovedButPresent { kind: Kind, time: String },
    /// In the ledger, folder gone, no removal ledgered.
    Deleted { last: String },
    /// The folder's head is not the one ledgered at its end.
    Rewritten {
        expected: String,
        found: Option<String>,
        /// Another ledgered session whose final head the folder has.
        copy_of: Option<String>,
    },
    /// The folder is not in the ledger.
    NotInLedger,
    /// There is no ledger yet: the folder was recorded before it existed (the
    /// next session adopts it).
    NoLedgerYet,
}

impl Finding {
    pub fn is_problem(&self) -> bool {
        matches!(
            self,
            Finding::Deleted { .. } | Finding::Rewritten { .. } | Finding::NotInLedger
        )
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Intact { records, adopted } => {
                write!(f, "intact ({records} records")?;
                if *adopted {
                    write!(f, "; adopted when the ledger was created")?;
                }
                write!(f, ")")
            }
            Finding::Running => write!(f, "running; checked once it ends"),
            Finding::Unended { status } if status == "interrupted" || status == "running" => {
                write!(
                    f,
                    "{status}: it never ended in the ledger (its supervisor was killed or \
                     crashed), so its final head is not anchored"
                )
            }
            Finding::Unended { status } => write!(
                f,
                "{status}: its end never reached the ledger (the ledger could not be written \
                 then, or a power cut lost the line), so its final head is not anchored"
            ),
            Finding::RemovedButPresent { kind, time } => write!(
                f,
                "removed by `logs {}` at {time}, but the folder is still there \
                 (the removal was cut short, or the folder was put back)",
                match kind {
                    Kind::Discard => "sandbox run",
                    k => k.as_str(),
                }
            ),
            Finding::Deleted { last } => write!(
                f,
                "deleted outside Vectra Guard: the ledger has it ({last}) and no removal, \
                 but the folder is gone"
            ),
            Finding::Rewritten {
                expected,
                found,
                copy_of,
            } => {
                write!(
                    f,
                    "rewritten or replaced outside Vectra Guard: it ended with "
                )?;
                write!(f, "{expected}, the folder now has ")?;
                match found {
                    Some(h) => write!(f, "{h}")?,
                    None => write!(f, "no readable integrity.log")?,
                }
                if let Some(other) = copy_of {
                    write!(f, " (the records of {other})")?;
                }
                Ok(())
            }
            Finding::NoLedgerYet => write!(
                f,
                "recorded before the ledger existed (there is none yet; the next session \
                 adopts it), so nothing anchors it"
            ),
            Finding::NotInLedger => write!(
                f,
                "not in the ledger: created or copied in outside Vectra Guard \
                 (or its start was lost to a power cut)"
            ),
        }
    }
}

/// One session folder (or ledgered session) and what was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionCheck {
    pub session_id: String,
    #[serde(flatten)]
    pub finding: Finding,
    /// Its own chain, checked for every folder present whose supervisor is
    /// gone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records: Option<VerifyReport>,
}

impl SessionCheck {
    pub fn is_problem(&self) -> bool {
        // A record its supervisor left unfinished (killed, disk full) is a note:
        // the ledger then has no `end` for it, or its head would not match.
        self.finding.is_problem()
            || self
                .records
                .as_ref()
                .is_some_and(|r| !r.is_intact() && !r.is_interrupted())
    }
}

/// `logs verify --all`: the ledger's chain, each session's chain, and the two
/// checked against each other.
#[derive(Debug, Clone)]
pub struct Audit {
    pub ledger: PathBuf,
    pub chain: Chain,
    /// Sessions by id (folders and ledgered sessions; those removed by Vectra
    /// Guard and gone are left out).
    pub sessions: Vec<SessionCheck>,
    /// An anchor given that no ledger line carries.
    pub anchor_missing: Option<String>,
}

impl Audit {
    pub fn problems(&self) -> usize {
        self.chain.problems.len()
            + self.sessions.iter().filter(|s| s.is_problem()).count()
            + usize::from(self.anchor_missing.is_some())
    }
}

fn describe_head(h: &Head) -> String {
    format!("{} records, head {}", h.records, hex_encode(&h.hash))
}

/// Runs the whole check of the records folder `root`. `anchor` is a ledger
/// link saved earlier, which must still be in the ledger.
pub fn audit(root: &Path, anchor: Option<&Hash>) -> Result<Audit, RecordsError> {
    let ledger = Ledger::at(root);
    let chain = ledger.read()?;
    let states = chain.states();
    let store = crate::store::SessionStore::at(root);
    let folders: BTreeMap<String, PathBuf> = store.session_dirs()?.into_iter().collect();
    // Who ended with which head, to name the session a replaced folder came from.
    let mut by_head: HashMap<Hash, &str> = HashMap::new();
    for (id, st) in &states {
        if let State::Ended { head, .. }
        | State::Removed {
            head: Some(head), ..
        } = st
        {
            by_head.insert(head.hash, id);
        }
    }
    let boot = layout::boot_id();
    let mut ids: Vec<&str> = states.keys().copied().collect();
    ids.extend(folders.keys().map(String::as_str));
    ids.sort_unstable();
    ids.dedup();
    let mut sessions = Vec::new();
    for id in ids {
        let dir = folders.get(id);
        let status = dir
            .map(|d| crate::store::read_metadata(d).map(|m| m.effective_status(boot.as_deref())));
        // Running (its chain left unchecked until it ends) only while the ledger
        // has no end for it, and only on the word of the metadata.json its chain
        // recorded: a finished session, or an unended one whose metadata.json was
        // edited to name some live process, is checked like any other.
        let running = matches!(states.get(id), Some(State::Open { .. }))
            && matches!(status, Some(Ok(Status::Running)))
            && dir.is_some_and(|d| still_running(d));
        let finding = match (states.get(id), dir) {
            (None, None) => continue,
            (Some(State::Removed { .. }), None) => continue,
            (None, Some(_)) if chain.entries.is_empty() => Finding::NoLedgerYet,
            (None, Some(_)) => Finding::NotInLedger,
            (Some(State::Open { time, adopted }), None) => Finding::Deleted {
                last: format!(
                    "{} at {time}, never ended",
                    if *adopted { "adopted" } else { "started" }
                ),
            },
            (Some(State::Ended { head, .. }), None) => Finding::Deleted {
                last: format!("ended with {}", describe_head(head)),
            },
            (Some(State::Open { .. }), Some(_)) if running => Finding::Running,
            (Some(State::Open { .. }), Some(_)) => Finding::Unended {
                status: match &status {
                    Some(Ok(s)) => s.as_str().to_owned(),
                    _ => "damaged".to_owned(),
                },
            },
            (Some(State::Removed { kind, time, .. }), Some(_)) => Finding::RemovedButPresent {
                kind: *kind,
                time: time.clone(),
            },
            (Some(State::Ended { head, adopted }), Some(d)) => {
                let found = session_head(d).ok().flatten();
                if found == Some(*head) {
                    Finding::Intact {
                        records: head.records,
                        adopted: *adopted,
                    }
                } else {
                    Finding::Rewritten {
                        expected: describe_head(head),
                        found: found.as_ref().map(describe_head),
                        copy_of: found
                            .and_then(|f| by_head.get(&f.hash).copied())
                            .filter(|other| *other != id)
                            .map(str::to_owned),
                    }
                }
            }
        };
        let records = match dir {
            // A session the ledger saw end never had a crash to explain a tail.
            Some(d) if !running => Some(match states.get(id) {
                Some(State::Ended { .. }) => verify::verify(d)?.known_finished(),
                _ => verify::verify(d)?,
            }),
            _ => None,
        };
        sessions.push(SessionCheck {
            session_id: id.to_owned(),
            finding,
            records,
        });
    }
    let anchor_missing = anchor.filter(|a| !chain.contains(a)).map(|a| hex_encode(a));
    Ok(Audit {
        ledger: ledger.path(),
        chain,
        sessions,
        anchor_missing,
    })
}

/// Whether the session in `dir`, whose `metadata.json` says `running` with a live
/// supervisor, really is: that `metadata.json` must be the version its chain
/// recorded. A live writer replaces the file and then chains it, so a mismatch is
/// looked at again after a moment before it counts.
fn still_running(dir: &Path) -> bool {
    for attempt in 0..3 {
        if verify::metadata_is_chained(dir).unwrap_or(false) {
            return true;
        }
        if attempt < 2 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    false
}

/// The ledger's word on one session folder, for `logs verify SESSION`: a
/// finding that is a problem, else `None` (also when there is no ledger).
pub fn check_one(root: &Path, dir: &Path) -> Result<Option<Finding>, RecordsError> {
    let chain = Ledger::at(root).read()?;
    if chain.entries.is_empty() {
        return Ok(None);
    }
    let id = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    Ok(match chain.states().get(id) {
        None => Some(Finding::NotInLedger),
        Some(State::Ended { head, .. }) => {
            let found = session_head(dir).ok().flatten();
            (found != Some(*head)).then(|| Finding::Rewritten {
                expected: describe_head(head),
                found: found.as_ref().map(describe_head),
                copy_of: None,
            })
        }
        Some(_) => None,
    })
}
