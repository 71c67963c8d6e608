//! The approval gate (`--ask LEVEL`): every exec the tracer reports is rated with the
//! risk rules, and one rated at or above the threshold is held in the kernel (the
//! process stays blocked in `execve`) until a decider answers through the session's
//! approval broker (`vg_control::Broker`): the terminal prompt, `vectraguard approve`
//! or `deny`, or the level's time-out, which denies.
//!
//! What is decided is what the tracer read: the resolved path, argv and cwd, with the
//! parent chain from the execs seen so far. Each request and each decision is an
//! `approval` event; a denied exec is an `exec … denied=1` line in `commands.log`.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use vg_control::broker::{Ancestor, ApprovalEvent, Request, Subject};
use vg_control::{Broker, Decider, Decision, Scope, Ticket, Timeouts};
use vg_policy::risk::{Ask, Assessment, Classifier, ExecFacts, Level};
use vg_records::event::kind::APPROVAL;
use vg_records::{Event, SessionWriter};
use vg_sandbox::trace::TraceEvent;

use crate::tools::Tools;

/// How many ancestors a request shows.
const MAX_PARENTS: usize = 8;
/// Processes remembered for parent chains; the oldest are dropped past it (a process
/// killed by a signal never reports its exit).
const MAX_PROCESSES: usize = 16 * 1024;
/// Requests held at once: past it an exec that would be held is denied at once, so a
/// sandbox cannot exhaust the supervisor's threads by holding execs.
pub const MAX_HELD: usize = 256;

/// The gate as planned: the threshold, the time-outs and the rules.
#[derive(Debug, Clone)]
pub struct Plan {
    pub ask: Level,
    pub timeouts: Timeouts,
    pub classifier: Classifier,
    /// The workspace folders inside the sandbox, for rules about paths outside them.
    pub workspaces: Vec<std::path::PathBuf>,
}

impl Plan {
    /// `None` when nothing is held (`never`): then nothing is classified either.
    pub fn new(ask: Ask, timeout: Option<Duration>, classifier: Classifier) -> Option<Self> {
        match ask {
            Ask::Never => None,
            Ask::AtLeast(level) => Some(Self {
                ask: level,
                timeouts: Timeouts::with_override(timeout),
                classifier,
                workspaces: Vec::new(),
            }),
        }
    }
}

/// One session's gate.
pub struct Gate {
    plan: Plan,
    broker: Arc<Broker>,
    /// pid → (parent pid, argv) of every exec seen, for parent chains.
    processes: Mutex<Processes>,
    /// pid → the argv it was last denied, and by whom: a shell that gets EPERM tries
    /// the same command in the next PATH directory, which is refused without asking
    /// again; and a denied top-level command is reported as denied.
    denied: Mutex<HashMap<i32, (Vec<String>, String)>>,
    /// pid → who denied its last exec, kept past its exit (bounded), so that the
    /// end of the session can say why the command itself never ran.
    who_denied: Mutex<HashMap<i32, String>>,
    /// The sandbox's tools by file identity, found at the first exec (by then the
    /// sandbox's root is in place), from the root the tracer reached it by.
    tools: std::sync::OnceLock<Tools>,
}

#[derive(Default)]
struct Processes {
    by_pid: HashMap<i32, (i32, Vec<String>)>,
    order: std::collections::VecDeque<i32>,
}

/// What the gate made of one exec.
pub enum Screened {
    /// Not held: record it and let it run.
    Pass(TraceEvent),
    /// Held: wait for the decision (on another thread than the tracer's).
    Held(Held),
    /// Not held but refused at once: too many requests held already, or a retry of
    /// what was just denied.
    Refused(TraceEvent, String),
}

/// A held exec and its ticket.
pub struct Held {
    pub event: TraceEvent,
    ticket: Ticket,
}

impl Held {
    /// The request's id (`None` when a session-scope decision answered it at once).
    pub fn id(&self) -> Option<u64> {
        self.ticket.id()
    }

    /// Blocks until the decision; the broker's time-out guarantees one.
    pub fn wait(self) -> (TraceEvent, Decision) {
        let decision = self.ticket.wait();
        (self.event, decision)
    }
}

impl Gate {
    /// A gate writing `approval` events to `writer`.
    pub fn new(plan: Plan, writer: &Arc<SessionWriter>) -> std::io::Result<Self> {
        let decided = Arc::clone(writer);
        let broker = Broker::new(plan.timeouts, move |event: &ApprovalEvent| {
            // A decision that cannot be recorded still applies: the session's record
            // failure is reported by the writer's other users.
            let _ = decided.event(decision_event(event));
        })?;
        let asked = Arc::clone(writer);
        broker.subscribe(move |pending| {
            let _ = asked.event(
                Event::new(APPROVAL)
                    .with("event", "asked")
                    .with("request", pending.id)
                    .with("subject", to_value(&pending.request.subject))
                    .with("level", to_value(&pending.request.level))
                    .with("reason", pending.request.reason.clone())
                    .with("rule", pending.request.rule.clone())
                    .with("timeout_ms", pending.timeout_in_ms),
            );
        });
        Ok(Self {
            plan,
            broker: Arc::new(broker),
            processes: Mutex::new(Processes::default()),
            denied: Mutex::new(HashMap::new()),
            who_denied: Mutex::new(HashMap::new()),
            tools: std::sync::OnceLock::new(),
        })
    }

    /// The tools, found the first time an exec comes with the sandbox's root.
    fn tools(&self, root: Option<&vg_sandbox::trace::SandboxRoot>) -> Option<&Tools> {
        if let Some(tools) = self.tools.get() {
            return Some(tools);
        }
        let root = root?.open().ok()?;
        Some(
            self.tools
                .get_or_init(|| Tools::find(&self.plan.classifier, root)),
        )
    }

    /// The session is ending: deny what is held, and whatever is asked from now on.
    pub fn close(&self) {
        self.broker.close();
    }

    pub fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    fn denials(&self) -> MutexGuard<'_, HashMap<i32, (Vec<String>, String)>> {
        self.denied.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Remembers that `event` was denied by `who`, for the retries of its process.
    pub fn denied(&self, event: &TraceEvent, who: &Decider) {
        if let TraceEvent::Exec { pid, argv, .. } = event {
            let argv = argv.iter().map(|a| lossy(a)).collect();
            self.denials().insert(*pid, (argv, decider_text(who)));
            let mut who_denied = self
                .who_denied
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if who_denied.len() >= MAX_PROCESSES {
                who_denied.clear();
            }
            who_denied.insert(*pid, decider_text(who));
        }
    }

    /// Who denied `pid`'s last exec, if the gate did (for the top-level command).
    pub fn denial_of(&self, pid: i32) -> Option<String> {
        self.who_denied
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&pid)
            .cloned()
    }

    fn processes(&self) -> MutexGuard<'_, Processes> {
        self.processes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Rates an exec and holds it if its level is at or above the threshold. Other
    /// events pass (an exit also forgets its process).
    pub fn screen(&self, event: TraceEvent) -> Screened {
        let (pid, ppid, cwd, raw_path, raw_argv, unread, file, script, root) = match &event {
            TraceEvent::Exec {
                pid,
                ppid,
                cwd,
                path,
                argv,
                truncated,
                file,
                script,
                root,
                ..
            } => (*pid, *ppid, cwd, path, argv, *truncated, file, script, root),
            TraceEvent::Exit { pid, .. } => {
                self.processes().forget(*pid);
                self.denials().remove(pid);
                return Screened::Pass(event);
            }
            TraceEvent::Refused { .. }
            | TraceEvent::Mismatch { .. }
            | TraceEvent::File { .. }
            | TraceEvent::Denied { .. } => {
                return Screened::Pass(event);
            }
        };
        let argv: Vec<String> = raw_argv.iter().map(|a| lossy(a)).collect();
        let path = lossy(raw_path);
        {
            let mut denials = self.denials();
            if denials.get(&pid).is_some_and(|(denied, _)| *denied == argv) {
                return Screened::Refused(
                    event,
                    "the same command was just denied for this process (a shell tries each PATH directory)"
                        .into(),
                );
            }
            denials.remove(&pid);
        }
        let parents = self.processes().chain(ppid);
        let facts = ExecFacts {
            path: path.clone(),
            argv: argv.clone(),
            cwd: Some(cwd.clone()),
            parents: parents.iter().map(|(_, argv)| argv.clone()).collect(),
            program: self.program(file.as_ref(), root.as_ref()),
            workspaces: self.plan.workspaces.clone(),
        };
        let assessment = self.rate(facts, script.as_ref(), root.as_ref(), unread, argv.len());
        self.processes().insert(pid, ppid, argv.clone());
        if assessment.level < self.plan.ask {
            return Screened::Pass(event);
        }
        if self.broker.pending().len() >= MAX_HELD {
            return Screened::Refused(
                event,
                format!("{MAX_HELD} requests are held already; denied without asking"),
            );
        }
        // A relative path names another program in another directory: the request
        // (and what a session-scope decision is remembered by) names it absolutely.
        let path = if path.starts_with('/') {
            path
        } else {
            cwd.join(&path).to_string_lossy().into_owned()
        };
        // Names that are not UTF-8 are shown with replacement characters; two such
        // commands must still never share a remembered decision.
        let inexact = (std::str::from_utf8(raw_path).is_err()
            || raw_argv.iter().any(|a| std::str::from_utf8(a).is_err())
            || cwd.to_str().is_none())
        .then(|| raw_digest(raw_path, raw_argv, cwd));
        let shown = Shown { unread, inexact };
        let exact = vg_records::layout::hex_encode(&raw_digest(raw_path, raw_argv, cwd));
        let mut request = exec_request(shown, pid, path, argv, cwd, &parents, assessment);
        if let Subject::Exec { exact: key, .. } = &mut request.subject {
            *key = exact;
        }
        let ticket = self.broker.submit(request);
        Screened::Held(Held { event, ticket })
    }

    /// Rates an exec: by its argv and the tool its file is; for a `#!` script also by
    /// what its interpreter line makes the kernel run (`#!/bin/rm -rf` is an `rm`),
    /// the higher of the two. An argv the tracer could not read whole is asked about
    /// whatever it rates: what was not read was not rated.
    fn rate(
        &self,
        facts: ExecFacts,
        script: Option<&vg_sandbox::trace::Script>,
        root: Option<&vg_sandbox::trace::SandboxRoot>,
        unread: bool,
        read: usize,
    ) -> Assessment {
        let mut assessment = self.plan.classifier.classify_exec(&facts);
        if let Some(script) = script {
            let argv: Vec<String> = script.argv.iter().map(|a| lossy(a)).collect();
            let runs = ExecFacts {
                path: argv.first().cloned().unwrap_or_default(),
                program: self.program(script.file.as_ref(), root),
                argv,
                ..facts
            };
            let inner = self.plan.classifier.classify_exec(&runs);
            if inner.level > assessment.level {
                assessment = Assessment {
                    reason: format!(
                        "{} (its #! line runs: {})",
                        inner.reason,
                        vg_records::quote_argv(script.argv.iter().map(Vec::as_slice))
                    ),
                    ..inner
                };
            }
        }
        if unread && assessment.level < self.plan.ask {
            assessment = Assessment {
                level: self.plan.ask,
                rule: "argv-unread".to_owned(),
                reason: format!(
                    "its argv is longer than the tracer reads ({read} arguments read): the rest was not rated"
                ),
            };
        }
        assessment
    }

    /// The tool `file` is, if any.
    fn program(
        &self,
        file: Option<&vg_sandbox::trace::ExecFile>,
        root: Option<&vg_sandbox::trace::SandboxRoot>,
    ) -> Option<String> {
        self.tools(root)?.name_of(file?)
    }

    /// Decides request `id` for a control-channel client.
    pub fn decide(
        &self,
        id: u64,
        approve: bool,
        scope: Scope,
        who: Decider,
    ) -> Result<Decision, vg_control::ControlError> {
        let verdict = if approve {
            vg_control::Verdict::Approve
        } else {
            vg_control::Verdict::Deny
        };
        self.broker.decide(id, verdict, scope, who)
    }
}

impl Processes {
    fn insert(&mut self, pid: i32, ppid: i32, argv: Vec<String>) {
        if self.by_pid.insert(pid, (ppid, argv)).is_none() {
            self.order.push_back(pid);
        }
        while self.order.len() > MAX_PROCESSES {
            if let Some(old) = self.order.pop_front() {
                self.by_pid.remove(&old);
            }
        }
    }

    fn forget(&mut self, pid: i32) {
        if self.by_pid.remove(&pid).is_some() {
            self.order.retain(|p| *p != pid);
        }
    }

    /// The known ancestors from `ppid` up, nearest first.
    fn chain(&self, mut ppid: i32) -> Vec<(i32, Vec<String>)> {
        let mut out = Vec::new();
        while out.len() < MAX_PARENTS {
            let Some((grand, argv)) = self.by_pid.get(&ppid) else {
                break;
            };
            out.push((ppid, argv.clone()));
            if *grand == ppid {
                break;
            }
            ppid = *grand;
        }
        out
    }
}

fn exec_request(
    shown_as: Shown,
    pid: i32,
    path: String,
    argv: Vec<String>,
    cwd: &std::path::Path,
    parents: &[(i32, Vec<String>)],
    assessment: Assessment,
) -> Request {
    Request {
        subject: Subject::Exec {
            pid: u32::try_from(pid).unwrap_or(0),
            path,
            argv: shown(argv, shown_as),
            cwd: cwd.to_string_lossy().into_owned(),
            parents: parents
                .iter()
                .map(|(pid, argv)| Ancestor {
                    pid: u32::try_from(*pid).unwrap_or(0),
                    command: vg_records::quote_argv(argv.iter().map(|a| a.as_bytes())),
                })
                .collect(),
            exact: String::new(),
        },
        level: to_broker_level(assessment.level),
        reason: assessment.reason,
        rule: (!assessment.rule.is_empty()).then_some(assessment.rule),
    }
}

/// What [`shown`] must add to an argv.
#[derive(Debug, Clone, Copy, Default)]
struct Shown {
    /// The tracer could not read the whole argv.
    unread: bool,
    /// A digest of the exact bytes of path, argv and cwd, when some are not UTF-8.
    inexact: Option<[u8; 32]>,
}

/// A digest of an exec's exact bytes, each piece preceded by its length.
fn raw_digest(path: &[u8], argv: &[Vec<u8>], cwd: &std::path::Path) -> [u8; 32] {
    let mut all = Vec::new();
    for piece in std::iter::once(path)
        .chain(std::iter::once(cwd.as_os_str().as_bytes()))
        .chain(argv.iter().map(Vec::as_slice))
    {
        all.extend_from_slice(&(piece.len() as u64).to_le_bytes());
        all.extend_from_slice(piece);
    }
    vg_records::chain::digest(&all)
}

/// An argv as a request shows and records it: the bounds of `commands.log` (4 KiB an
/// argument, 16 KiB in all), with a last word saying what was cut. The rating saw all
/// of it; this only keeps a hostile argv from flooding the person's screen, the
/// control channel and `events.jsonl`.
///
/// A session-scope decision is remembered by the path and this argv, so the last word
/// also carries a digest of the whole argv: two argvs cut to the same display stay
/// apart. An argv the tracer itself could not read in full (`unread`, past its bounds)
/// gets a word no other request has, so no remembered decision ever covers it.
fn shown(argv: Vec<String>, how: Shown) -> Vec<String> {
    const ARG: usize = vg_records::writer::MAX_RECORDED_ARG_BYTES;
    const ALL: usize = vg_records::writer::MAX_RECORDED_ARGV_BYTES;
    static UNREAD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let total: usize = argv.iter().map(String::len).sum();
    if !how.unread && total <= ALL && argv.iter().all(|a| a.len() <= ARG) {
        let Some(exact) = how.inexact else {
            return argv;
        };
        let mut argv = argv;
        argv.push(format!(
            "[vectraguard: not UTF-8, shown with replacement characters; digest {}]",
            vg_records::layout::hex_encode(&exact[..8])
        ));
        return argv;
    }
    let digest = how
        .inexact
        .unwrap_or_else(|| vg_records::chain::digest(argv.join("\0").as_bytes()));
    let count = argv.len();
    let mut kept = Vec::new();
    let mut used = 0;
    for mut arg in argv {
        if used >= ALL {
            break;
        }
        let room = ARG.min(ALL - used);
        if arg.len() > room {
            let mut cut = room;
            while !arg.is_char_boundary(cut) {
                cut -= 1;
            }
            arg.truncate(cut);
        }
        used += arg.len();
        kept.push(arg);
    }
    if how.unread {
        let n = UNREAD.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        kept.push(format!(
            "[vectraguard: argv longer than the tracer reads; never remembered (#{n})]"
        ));
    } else {
        kept.push(format!(
            "[vectraguard: argv cut for display; {count} arguments, {total} bytes in all, digest {}]",
            vg_records::layout::hex_encode(&digest[..8])
        ));
    }
    kept
}

/// Who decided, in words.
pub fn decider_text(who: &Decider) -> String {
    match who {
        Decider::Tty => "at the terminal".to_owned(),
        Decider::Client { uid, pid } => format!("by `vectraguard deny` (uid {uid}, pid {pid})"),
        Decider::Timeout => "because nobody answered before its time-out".to_owned(),
        Decider::SessionEnd => "because the session ended".to_owned(),
    }
}

pub fn to_broker_level(level: Level) -> vg_control::Level {
    match level {
        Level::Low => vg_control::Level::Low,
        Level::Medium => vg_control::Level::Medium,
        Level::High => vg_control::Level::High,
        Level::Critical => vg_control::Level::Critical,
    }
}

/// The `approval` event of a decision.
fn decision_event(e: &ApprovalEvent) -> Event {
    Event::new(APPROVAL)
        .with("event", "decided")
        .with("request", e.request)
        .with("subject", to_value(&e.subject))
        .with("level", to_value(&e.level))
        .with("reason", e.reason.clone())
        .with("rule", e.rule.clone())
        .with("decision", to_value(&e.decision))
        .with("who", to_value(&e.who))
        .with("scope", to_value(&e.scope))
        .with("latency_ms", e.latency_ms)
        .with("remembered_from", e.remembered_from)
}

fn to_value(value: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or(serde_json::Value::Null)
}

fn lossy(bytes: &[u8]) -> String {
    OsStr::from_bytes(bytes).to_string_lossy().into_owned()
}

/// The gate's side of the mediator's holds (`vg_netstack::gate`): a name no rule
/// allows is rated when it is first asked for (its port is not known yet; rules on
/// ports do not match then), a public address no rule allows at its SYN; at or above
/// the threshold either is held while a person decides. An approval adds a live
/// rule to the session — `allow NAME`, or `allow ADDRESS:PORT` — recorded as any
/// `net allow` is, with the request that made it, before the held question or SYN is
/// answered: a DNS answer is cached and reused by the sandbox's programs, so an
/// approved name stays allowed, on every port, for the rest of the session.
pub struct DestinationAsker {
    gate: Arc<Gate>,
    network: Arc<crate::control::LiveNetwork>,
    writer: Arc<SessionWriter>,
    /// The sandbox's init (host pid), under which the asking process is looked for.
    init: libc::pid_t,
}

impl DestinationAsker {
    pub fn new(
        gate: &Arc<Gate>,
        network: &Arc<crate::control::LiveNetwork>,
        writer: &Arc<SessionWriter>,
        init: libc::pid_t,
    ) -> Self {
        Self {
            gate: Arc::clone(gate),
            network: Arc::clone(network),
            writer: Arc::clone(writer),
            init,
        }
    }
}

struct DestinationTicket(Arc<std::sync::atomic::AtomicBool>);

impl vg_netstack::gate::DestinationTicket for DestinationTicket {
    fn decided(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Acquire)
    }
}

impl vg_netstack::gate::DestinationGate for DestinationAsker {
    fn ask(
        &self,
        host: &str,
        port: Option<u16>,
        source: vg_netstack::gate::Source,
        wake: Arc<dyn Fn() + Send + Sync>,
    ) -> Option<Box<dyn vg_netstack::gate::DestinationTicket>> {
        let name = host;
        // Which process asked, from its socket: shown, and rated (code that connects
        // out rates higher).
        let asked_by = crate::socket_owner::command_of(self.init, source);
        let process = asked_by
            .as_deref()
            .and_then(vg_records::unquote_argv)
            .map(|argv| {
                argv.into_iter()
                    .map(|a| String::from_utf8_lossy(&a).into_owned())
                    .collect()
            });
        let facts = vg_policy::risk::DestFacts {
            host: name.to_owned(),
            port: port.unwrap_or(0),
            allowed_by_policy: false,
            process,
        };
        let assessment = self.gate.plan.classifier.classify_destination(&facts);
        if assessment.level < self.gate.plan.ask || self.gate.broker.pending().len() >= MAX_HELD {
            return None;
        }
        let is_address = vg_policy::risk::rule::is_ip(name);
        // A DNS question offers only a plain name; a SYN (with its port) only a public
        // address, which the mediator checked: an approval must never become a rule
        // for a pattern, or for an address the person was not shown.
        let target = match (port, is_address) {
            (None, false) => name.to_owned(),
            (Some(port), true) => format!("{name}:{port}"),
            _ => return None,
        };
        let rule =
            vg_policy::network::Rule::parse(vg_policy::network::Action::Allow, &target).ok()?;
        let expected = |t: &vg_policy::network::Target| match t {
            vg_policy::network::Target::Name(_) => !is_address,
            vg_policy::network::Target::Ip(_) => is_address,
            _ => false,
        };
        if !expected(&rule.target) {
            return None;
        }
        let ticket = self.gate.broker.submit(Request {
            subject: Subject::Destination {
                name: name.to_owned(),
                port: port.unwrap_or(0),
                asked_by,
            },
            level: to_broker_level(assessment.level),
            reason: assessment.reason,
            rule: (!assessment.rule.is_empty()).then_some(assessment.rule),
        });
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&done);
        let network = Arc::clone(&self.network);
        let writer = Arc::clone(&self.writer);
        let spawned = std::thread::Builder::new()
            .name("vg-held-name".into())
            .spawn(move || {
                let decision = ticket.wait();
                if decision.approved() {
                    let who = [
                        ("by", serde_json::Value::from("approval")),
                        (
                            "request",
                            serde_json::Value::from(decision.id.or(decision.remembered_from)),
                        ),
                    ];
                    // Not added (the record cannot be written): the name stays refused.
                    let _ = network.add(&writer, rule, &who);
                }
                flag.store(true, std::sync::atomic::Ordering::Release);
                wake();
            });
        if spawned.is_err() {
            done.store(true, std::sync::atomic::Ordering::Release);
        }
        Some(Box::new(DestinationTicket(done)))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_argv_is_cut_for_display_and_says_so() {
        let small = vec!["rm".to_owned(), "-rf".to_owned(), "/tmp/x".to_owned()];
        let plain = Shown::default();
        let unread = Shown {
            unread: true,
            inexact: None,
        };
        assert_eq!(shown(small.clone(), plain), small);
        let huge: Vec<String> = std::iter::once("echo".to_owned())
            .chain((0..1000).map(|_| "é".repeat(3000)))
            .collect();
        let cut = shown(huge.clone(), plain);
        let total: usize = cut.iter().map(String::len).sum();
        assert!(total < 17 * 1024, "{total}");
        assert!(cut.iter().all(|a| a.len() <= 4096));
        assert!(
            cut.last().unwrap().contains("1001 arguments"),
            "{:?}",
            cut.last()
        );
        // Another argv with the same beginning is another request.
        let mut other = huge;
        other[999] = "x".into();
        assert_ne!(shown(other, plain), cut);
        // One the tracer could not read in full is never the same request twice.
        let small = vec!["rm".to_owned()];
        assert_ne!(shown(small.clone(), unread), shown(small, unread));
    }

    #[test]
    fn argvs_that_differ_only_in_bytes_that_are_not_utf8_are_shown_apart() {
        let cwd = std::path::Path::new("/w");
        let a = [b"rm".to_vec(), b"\xff".to_vec()];
        let b = [b"rm".to_vec(), b"\xfe".to_vec()];
        let show = |raw: &[Vec<u8>]| {
            let argv = raw.iter().map(|a| lossy(a)).collect();
            let inexact = Some(raw_digest(b"/bin/rm", raw, cwd));
            shown(
                argv,
                Shown {
                    unread: false,
                    inexact,
                },
            )
        };
        assert_ne!(show(&a), show(&b));
        assert_eq!(show(&a), show(&a));
    }
}
