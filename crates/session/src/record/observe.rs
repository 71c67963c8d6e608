//! What the exec tracer sees besides programs: file accesses (`trace_files`) and
//! system calls the seccomp profile refused (`report_refusals`).
//!
//! A refused access becomes a `violation` event: the file accesses that the view
//! refuses are predicted from the plan's `FsView` (`vg_policy::violation`: hidden,
//! read-only or a masked secret) with the path the program passed, looked up inside
//! the sandbox and on the host; the kernel enforces on its own, this only says what
//! it refused and who asked. Refused system calls come from the seccomp listener,
//! which failed them with `EPERM` itself. Each distinct refusal is written once (up
//! to [`MAX_DISTINCT`]); repeats are counted and the counts written at the end, so a
//! program looping on a refused call cannot fill the disk.
//!
//! In learning mode every access is also kept (`vg_learn::Observations`, bounded)
//! for the profile.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use vg_policy::FsView;
use vg_policy::violation::{self, Access, Probe, Refusal};
use vg_records::Event;
use vg_records::event::kind::VIOLATION;
use vg_sandbox::inside::InsideRoot;
use vg_sandbox::trace::{FileAccess, TraceEvent};

use super::Shared;

/// Distinct refusals written as events; past it they are counted only.
pub const MAX_DISTINCT: usize = 1000;
/// Calls that fail with EEXIST, changing nothing, when their path exists.
const MAKES_ONLY_NEW: &[&str] = &["mkdir", "mkdirat", "symlink", "symlinkat", "link", "linkat"];
/// Calls whose `Create` is an open with `O_CREAT`: it follows a trailing symlink and
/// opens for writing what exists (`> /dev/null`), creating only what does not.
const OPENS_CREATING: &[&str] = &["open", "openat", "openat2", "creat"];
/// Predictions kept per path and access (the same files are opened again and again).
const CACHE: usize = 4096;

/// One kind of refusal, as the summary counts it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Refused {
    /// The layer that refused: `view`, `read-only`, `masked` or `seccomp`.
    pub layer: String,
    /// The path (files) or the system call's name (seccomp).
    pub what: String,
    /// `read`, `write`, `create`, `remove`, or `syscall`.
    pub access: String,
}

/// The refusals of a session, most frequent first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub refused: Vec<(Refused, u64)>,
    /// Every refusal, repeats included.
    pub total: u64,
    /// Distinct refusals past [`MAX_DISTINCT`], counted but not written one by one.
    pub not_recorded: u64,
}

/// The tracer's observer of one session.
pub struct Observer {
    view: FsView,
    /// The sandbox's init, whose root the paths are looked up in when the events
    /// do not carry it (only a privileged supervisor may open it: init is not
    /// dumpable).
    init: i32,
    /// The sandbox's root: from the first `File` event that carries it, else
    /// opened through `init`.
    root: Option<InsideRoot>,
    cache: HashMap<(PathBuf, &'static str), Option<(Access, Refusal)>>,
    counts: HashMap<Refused, u64>,
    total: u64,
    not_recorded: u64,
    learning: Option<vg_learn::Observations>,
}

/// What the observer saw, once the tracer is done.
#[derive(Debug, Default)]
pub struct Observed {
    pub summary: Summary,
    pub learned: Option<vg_learn::Observations>,
}

impl Observer {
    pub fn new(view: FsView, init: i32, learning: bool) -> Self {
        Self {
            view,
            init,
            root: None,
            cache: HashMap::new(),
            counts: HashMap::new(),
            total: 0,
            not_recorded: 0,
            learning: learning.then(vg_learn::Observations::new),
        }
    }

    /// Handles a `File` or `Denied` event; false for any other (for the caller).
    pub(super) fn observe(&mut self, shared: &Shared, event: &TraceEvent) -> bool {
        match event {
            TraceEvent::File {
                pid,
                syscall,
                path,
                access,
                exe,
                root,
            } => {
                if self.root.is_none()
                    && let Some(root) = root
                {
                    self.root = InsideRoot::from_traced(root).ok();
                }
                // `mkdir -p` and the like try every folder on the way: creating what
                // is already there fails (EEXIST) and changes nothing.
                let makes_existing = *access == FileAccess::Create
                    && MAKES_ONLY_NEW.contains(syscall)
                    && (self.exists_inside(path)
                        || std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()));
                let access = access_of(*access);
                if let Some(learning) = &mut self.learning
                    && !makes_existing
                {
                    learning.file(path, access);
                }
                if makes_existing {
                    return true;
                }
                let opens = access == Access::Create && OPENS_CREATING.contains(syscall);
                if let Some((access, refusal)) = self.predict(path, access, opens) {
                    let refused = Refused {
                        layer: refusal.layer.as_str().to_owned(),
                        what: path.display().to_string(),
                        access: access.as_str().to_owned(),
                    };
                    self.count(shared, refused, || {
                        Event::new(VIOLATION)
                            .with("layer", refusal.layer.as_str())
                            .with("path", path.display().to_string())
                            .with("access", access.as_str())
                            .with("syscall", *syscall)
                            .with("reason", refusal.reason.clone())
                            .with("pid", *pid)
                            .with("exe", exe_text(exe.as_deref()))
                    });
                }
                true
            }
            TraceEvent::Denied {
                pid, syscall, exe, ..
            } => {
                let refused = Refused {
                    layer: "seccomp".to_owned(),
                    what: syscall.clone(),
                    access: "syscall".to_owned(),
                };
                self.count(shared, refused, || {
                    Event::new(VIOLATION)
                        .with("layer", "seccomp")
                        .with("syscall", syscall.clone())
                        .with("access", "syscall")
                        .with(
                            "reason",
                            "not allowed by the sandbox's seccomp profile (failed with EPERM)",
                        )
                        .with("pid", *pid)
                        .with("exe", exe_text(exe.as_deref()))
                });
                true
            }
            _ => false,
        }
    }

    /// Counts one refusal; the first of its kind is written (within the cap).
    fn count(&mut self, shared: &Shared, refused: Refused, event: impl FnOnce() -> Event) {
        self.total += 1;
        if let Some(n) = self.counts.get_mut(&refused) {
            *n += 1;
            return;
        }
        if self.counts.len() >= MAX_DISTINCT {
            self.not_recorded += 1;
            return;
        }
        self.counts.insert(refused, 1);
        if let Err(e) = shared.writer.event(event()) {
            shared.fail("events.jsonl", e);
        }
    }

    /// The sandbox's root: the one events brought, else init's (which only a root
    /// supervisor may open).
    fn root(&mut self) -> Option<&InsideRoot> {
        if self.root.is_none() {
            self.root = InsideRoot::of(self.init).ok();
        }
        self.root.as_ref()
    }

    fn exists_inside(&mut self, path: &Path) -> bool {
        self.root().is_some_and(|root| root.exists(path))
    }

    /// Why the view refused `access` to `path`, and what the access was: for an
    /// open that may create (`opens`), a write when the path exists.
    fn predict(&mut self, path: &Path, access: Access, opens: bool) -> Option<(Access, Refusal)> {
        let key = (
            path.to_path_buf(),
            if opens {
                "open-create"
            } else {
                access.as_str()
            },
        );
        if let Some(known) = self.cache.get(&key) {
            return known.clone();
        }
        self.root();
        let probe = Lookup {
            root: self.root.as_ref(),
        };
        let (access, refusal) = if opens {
            violation::open_create_refusal(&self.view, path, &probe)
        } else {
            (access, violation::refusal(&self.view, path, access, &probe))
        };
        let refusal = refusal.map(|r| (access, r));
        if self.cache.len() >= CACHE {
            self.cache.clear();
        }
        self.cache.insert(key, refusal.clone());
        refusal
    }

    /// The counts, written as one last `violation` event when anything was refused.
    pub(super) fn finish(self, shared: &Shared) -> Observed {
        let mut refused: Vec<(Refused, u64)> = self.counts.into_iter().collect();
        refused.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let summary = Summary {
            refused,
            total: self.total,
            not_recorded: self.not_recorded,
        };
        if summary.total > 0 {
            let counts: Vec<serde_json::Value> = summary
                .refused
                .iter()
                .take(100)
                .map(|(r, n)| {
                    serde_json::json!({
                        "layer": r.layer, "what": r.what, "access": r.access, "count": n
                    })
                })
                .collect();
            let event = Event::new(VIOLATION)
                .with("event", "summary")
                .with("total", summary.total)
                .with(
                    "distinct",
                    summary.refused.len() as u64 + summary.not_recorded,
                )
                .with("not_recorded", summary.not_recorded)
                .with("counts", counts);
            if let Err(e) = shared.writer.event(event) {
                shared.fail("events.jsonl", e);
            }
        }
        Observed {
            summary,
            learned: self.learning,
        }
    }
}

fn access_of(access: FileAccess) -> Access {
    match access {
        FileAccess::Read => Access::Read,
        FileAccess::Write => Access::Write,
        FileAccess::Create => Access::Create,
        FileAccess::Remove => Access::Remove,
    }
}

fn exe_text(exe: Option<&[u8]>) -> String {
    exe.map(vg_records::quote_arg).unwrap_or_default()
}

/// Existence inside the sandbox (through its root) and on the host.
struct Lookup<'a> {
    root: Option<&'a InsideRoot>,
}

impl Probe for Lookup<'_> {
    fn exists_inside(&self, path: &Path) -> bool {
        // Without the sandbox's root nothing can be told missing: report nothing.
        self.root.is_none_or(|root| root.exists(path))
    }

    fn exists_on_host(&self, path: &Path) -> bool {
        std::fs::symlink_metadata(path).is_ok()
    }
}
