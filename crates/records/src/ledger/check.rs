//! The ledger's own chain, checked line by line, and what it says of each
//! session.

use std::collections::HashMap;
use std::fmt;

use serde::Serialize;

use super::{Entry, Head, Kind, genesis};
use crate::chain::Hash;

/// A problem with the ledger's own lines (line numbers count from 1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "problem", rename_all = "kebab-case")]
pub enum ChainProblem {
    /// The line parses but its link does not follow from the line before.
    LineChanged { line: u64 },
    /// The sequence jumps: entries before this line were removed.
    LinesRemoved { line: u64, count: u64 },
    /// Not a ledger entry, and the chain does not skip it the way it skips a
    /// torn line.
    NotAnEntry { line: u64 },
}

impl fmt::Display for ChainProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChainProblem::LineChanged { line } => write!(
                f,
                "ledger line {line} was changed (its link does not follow from the line before)"
            ),
            ChainProblem::LinesRemoved { line, count } => write!(
                f,
                "{count} ledger {} removed before line {line}",
                if *count == 1 {
                    "entry was"
                } else {
                    "entries were"
                }
            ),
            ChainProblem::NotAnEntry { line } => {
                write!(
                    f,
                    "ledger line {line} is not a ledger entry (changed or damaged)"
                )
            }
        }
    }
}

/// The ledger, read and checked.
#[derive(Debug, Clone, Default)]
pub struct Chain {
    /// Every line that parsed, in order (also those whose link is wrong).
    pub entries: Vec<Entry>,
    pub problems: Vec<ChainProblem>,
    /// Lines left by an append cut short: explained, not a problem.
    pub torn: Vec<u64>,
    /// How many entries come before the first problem (all, without one).
    pub intact_entries: usize,
}

impl Chain {
    /// The last entry's sequence number and link.
    pub fn head(&self) -> Option<(u64, Hash)> {
        self.entries.last().map(|e| (e.seq, e.hash))
    }

    /// Whether an entry carries the link `hash` (an anchor saved earlier) with
    /// the chain intact up to it.
    pub fn contains(&self, hash: &Hash) -> bool {
        self.entries[..self.intact_entries]
            .iter()
            .any(|e| &e.hash == hash)
    }

    /// What the ledger last says of each session.
    pub fn states(&self) -> HashMap<&str, State> {
        let mut states: HashMap<&str, State> = HashMap::new();
        for e in &self.entries {
            let state = states.entry(&e.session).or_insert(State::Open {
                adopted: false,
                time: e.time.clone(),
            });
            *state = match (e.kind, e.head) {
                (k, _) if k.is_removal() => State::Removed {
                    kind: k,
                    time: e.time.clone(),
                    head: match state {
                        State::Ended { head, .. } => Some(*head),
                        State::Removed { head, .. } => *head,
                        State::Open { .. } => None,
                    },
                },
                (k, Some(head)) => State::Ended {
                    head,
                    adopted: k == Kind::Adopt,
                },
                (k, None) => State::Open {
                    adopted: k == Kind::Adopt,
                    time: e.time.clone(),
                },
            };
        }
        states
    }
}

/// What the ledger last says of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Started (or adopted while running) and not ended.
    Open {
        adopted: bool,
        time: String,
    },
    Ended {
        head: Head,
        adopted: bool,
    },
    /// Removed by Vectra Guard; `head` is the last one ledgered before.
    Removed {
        kind: Kind,
        time: String,
        head: Option<Head>,
    },
}

pub(super) fn check_chain(bytes: &[u8]) -> Chain {
    let text = String::from_utf8_lossy(bytes);
    let mut lines: Vec<&str> = text.split('\n').collect();
    let terminated = lines.last().is_some_and(|l| l.is_empty());
    if terminated {
        lines.pop();
    }
    let mut chain = Chain::default();
    let mut prev = genesis();
    let mut next_seq = 0u64;
    // Lines since the last entry that are not entries.
    let mut garbage: Vec<u64> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let n = i as u64 + 1;
        let Some(e) = Entry::parse(line) else {
            garbage.push(n);
            continue;
        };
        let follows = e.seq == next_seq && e.expected_hash(&prev) == e.hash;
        if follows {
            // The appender skips a torn line and links past it.
            chain.torn.append(&mut garbage);
        } else if !garbage.is_empty() {
            // A changed line no longer parses: it is the problem, not this one.
            chain.problems.extend(
                garbage
                    .drain(..)
                    .map(|line| ChainProblem::NotAnEntry { line }),
            );
        } else if e.seq > next_seq {
            chain.problems.push(ChainProblem::LinesRemoved {
                line: n,
                count: e.seq - next_seq,
            });
        } else {
            chain.problems.push(ChainProblem::LineChanged { line: n });
        }
        if chain.problems.is_empty() {
            chain.intact_entries += 1;
        }
        prev = e.hash;
        next_seq = e.seq.saturating_add(1);
        chain.entries.push(e);
    }
    // Only the very last line, unterminated, can be an append cut short.
    if let Some(&last) = garbage.last()
        && !terminated
        && last == lines.len() as u64
    {
        garbage.pop();
        chain.torn.push(last);
    }
    chain.problems.extend(
        garbage
            .into_iter()
            .map(|line| ChainProblem::NotAnEntry { line }),
    );
    chain
}
