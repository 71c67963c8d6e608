//! The approval broker: holds a gated exec or destination until a decider
//! answers or the level's time-out passes, which denies it.
//!
//! The exec tracer is one thread serving every process's notifications, so
//! besides the blocking [`Broker::ask`] there is [`Broker::submit`], which
//! returns a [`Ticket`] to poll or wait on later while other notifications are
//! served. Time-outs are enforced by the broker's own timer thread, so a held
//! request is denied on time (and its `approval` event written) even when
//! nobody waits on its ticket.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::protocol::{ControlError, Decider, Scope, Verdict};

/// A risk level, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    Low,
    Medium,
    High,
    Critical,
}

impl Level {
    /// As requests show it: `LOW` … `CRITICAL`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Low => "LOW",
            Level::Medium => "MEDIUM",
            Level::High => "HIGH",
            Level::Critical => "CRITICAL",
        }
    }
}

/// A destination as requests show it: `NAME:PORT`, or for a DNS question (port 0,
/// not known yet) the name and what approving it allows. `name` comes quoted for the
/// terminal by the caller.
pub fn destination_text(name: &str, port: u16) -> String {
    if port == 0 {
        format!("{name} (a DNS question: approving allows the name, any port)")
    } else {
        format!("{name}:{port}")
    }
}

/// How long a request of each level is held before it is denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub low: Duration,
    pub medium: Duration,
    pub high: Duration,
    pub critical: Duration,
    /// `--approval-timeout`: one time-out for every level.
    pub all: Option<Duration>,
}

impl Default for Timeouts {
    /// CRITICAL 30 s, HIGH 60 s, MEDIUM (and LOW) 120 s: the more dangerous,
    /// the sooner an unattended request is denied.
    fn default() -> Self {
        Self {
            low: Duration::from_secs(120),
            medium: Duration::from_secs(120),
            high: Duration::from_secs(60),
            critical: Duration::from_secs(30),
            all: None,
        }
    }
}

impl Timeouts {
    /// The defaults, every level overridden by `all` when given.
    pub fn with_override(all: Option<Duration>) -> Self {
        Self {
            all,
            ..Self::default()
        }
    }

    pub fn for_level(&self, level: Level) -> Duration {
        self.all.unwrap_or(match level {
            Level::Low => self.low,
            Level::Medium => self.medium,
            Level::High => self.high,
            Level::Critical => self.critical,
        })
    }
}

/// One ancestor of a gated exec, nearest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ancestor {
    pub pid: u32,
    /// Its command line as `commands.log` quotes it.
    pub command: String,
}

/// What is held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Subject {
    Exec {
        pid: u32,
        /// The executable as resolved inside the sandbox.
        path: String,
        argv: Vec<String>,
        cwd: String,
        parents: Vec<Ancestor>,
        /// A digest of the exact bytes of path, argv and working directory: what a
        /// session-scope decision is remembered by, with the text above (which may
        /// show replacement characters or be cut for display, and which the program
        /// could imitate).
        #[serde(default)]
        exact: String,
    },
    Destination {
        name: String,
        port: u16,
        /// The command line of the exec that asked, when known.
        asked_by: Option<String>,
    },
}

impl Subject {
    /// What a session-scope decision is remembered under.
    fn key(&self) -> Key {
        match self {
            // The working directory too: `rm -rf build` approved in one folder is
            // another command in another.
            Self::Exec {
                path,
                argv,
                cwd,
                exact,
                ..
            } => Key::Exec(path.clone(), argv.clone(), cwd.clone(), exact.clone()),
            Self::Destination { name, port, .. } => {
                Key::Destination(name.to_ascii_lowercase(), *port)
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    /// Path, argv, working directory and the digest of their exact bytes.
    Exec(String, Vec<String>, String, String),
    Destination(String, u16),
}

/// A request for a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub subject: Subject,
    pub level: Level,
    pub reason: String,
    /// The rule that rated it, when one did.
    pub rule: Option<String>,
}

/// A held request as deciders see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingView {
    pub id: u64,
    #[serde(flatten)]
    pub request: Request,
    /// Milliseconds since the Unix epoch.
    pub asked_at_ms: u64,
    /// Left before the time-out denies it.
    pub timeout_in_ms: u64,
}

/// The answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The request's id (a remembered decision has none of its own).
    pub id: Option<u64>,
    pub verdict: Verdict,
    pub who: Decider,
    pub scope: Scope,
    pub latency: Duration,
    /// The request whose session-scope decision answered this one.
    pub remembered_from: Option<u64>,
}

impl Decision {
    pub fn approved(&self) -> bool {
        self.verdict == Verdict::Approve
    }
}

/// One `approval` event, for the session's `events.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalEvent {
    pub request: Option<u64>,
    pub subject: Subject,
    pub level: Level,
    pub reason: String,
    pub rule: Option<String>,
    pub decision: Verdict,
    pub who: Decider,
    pub scope: Scope,
    pub latency_ms: u64,
    pub remembered_from: Option<u64>,
}

type Sink = Box<dyn Fn(&ApprovalEvent) + Send + Sync>;
type Subscriber = Box<dyn Fn(&PendingView) + Send + Sync>;

/// Where one request's decision lands.
#[derive(Default)]
struct Slot {
    decision: Mutex<Option<Decision>>,
    decided: Condvar,
}

impl Slot {
    fn resolved(decision: Decision) -> Arc<Self> {
        Arc::new(Self {
            decision: Mutex::new(Some(decision)),
            decided: Condvar::new(),
        })
    }

    fn set(&self, decision: Decision) {
        *lock(&self.decision) = Some(decision);
        self.decided.notify_all();
    }
}

struct Held {
    request: Request,
    asked: Instant,
    asked_wall: SystemTime,
    deadline: Instant,
    slot: Arc<Slot>,
}

#[derive(Default)]
struct State {
    next_id: u64,
    held: BTreeMap<u64, Held>,
    remembered: HashMap<Key, (Verdict, u64, Decider)>,
    closing: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the timer thread when a request is held or the broker closes.
    changed: Condvar,
    timeouts: Timeouts,
    sink: Sink,
    subscribers: Mutex<Vec<Subscriber>>,
}

/// The approval broker of one session. Share it with `Arc`.
pub struct Broker {
    shared: Arc<Shared>,
    timer: Option<JoinHandle<()>>,
}

/// A submitted request's handle: poll it, or wait for its decision.
pub struct Ticket {
    id: Option<u64>,
    slot: Arc<Slot>,
}

impl Ticket {
    /// The request's id, `None` when a session-scope decision answered it at once.
    pub fn id(&self) -> Option<u64> {
        self.id
    }

    /// The decision if there is one yet.
    pub fn poll(&self) -> Option<Decision> {
        lock(&self.slot.decision).clone()
    }

    /// Blocks until decided; the broker's time-out guarantees it returns.
    pub fn wait(&self) -> Decision {
        let mut guard = lock(&self.slot.decision);
        loop {
            if let Some(decision) = guard.as_ref() {
                return decision.clone();
            }
            guard = self
                .slot
                .decided
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl Broker {
    /// A broker writing every decision to `sink` (the session's `approval` events).
    pub fn new(
        timeouts: Timeouts,
        sink: impl Fn(&ApprovalEvent) + Send + Sync + 'static,
    ) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                next_id: 1,
                ..State::default()
            }),
            changed: Condvar::new(),
            timeouts,
            sink: Box::new(sink),
            subscribers: Mutex::new(Vec::new()),
        });
        let timer_shared = Arc::clone(&shared);
        let timer = std::thread::Builder::new()
            .name("vg-approval-timer".into())
            .spawn(move || expire_loop(&timer_shared))?;
        Ok(Self {
            shared,
            timer: Some(timer),
        })
    }

    /// Called with every newly held request (the terminal prompt, `approvals`),
    /// on the submitting thread: it must be quick (hand the view to another
    /// thread) and must not call `subscribe` itself; it may call `decide`.
    pub fn subscribe(&self, subscriber: impl Fn(&PendingView) + Send + Sync + 'static) {
        lock(&self.shared.subscribers).push(Box::new(subscriber));
    }

    /// Holds `request` until decided; blocks the calling thread.
    pub fn ask(&self, request: Request) -> Decision {
        self.submit(request).wait()
    }

    /// Holds `request` without blocking: the ticket says when it is decided.
    pub fn submit(&self, request: Request) -> Ticket {
        let key = request.subject.key();
        let mut state = lock(&self.shared.state);
        if let Some((verdict, from, who)) = state.remembered.get(&key).cloned() {
            drop(state);
            let decision = Decision {
                id: None,
                verdict,
                who,
                scope: Scope::Session,
                latency: Duration::ZERO,
                remembered_from: Some(from),
            };
            self.record(&request, &decision);
            return Ticket {
                id: None,
                slot: Slot::resolved(decision),
            };
        }
        if state.closing {
            drop(state);
            let decision = Decision {
                id: None,
                verdict: Verdict::Deny,
                who: Decider::SessionEnd,
                scope: Scope::Once,
                latency: Duration::ZERO,
                remembered_from: None,
            };
            self.record(&request, &decision);
            return Ticket {
                id: None,
                slot: Slot::resolved(decision),
            };
        }
        let id = state.next_id;
        state.next_id += 1;
        let now = Instant::now();
        let timeout = self.shared.timeouts.for_level(request.level);
        let slot = Arc::new(Slot::default());
        let held = Held {
            request,
            asked: now,
            asked_wall: SystemTime::now(),
            deadline: now + timeout,
            slot: Arc::clone(&slot),
        };
        let view = view(id, &held, now);
        state.held.insert(id, held);
        drop(state);
        self.shared.changed.notify_all();
        for subscriber in lock(&self.shared.subscribers).iter() {
            subscriber(&view);
        }
        Ticket { id: Some(id), slot }
    }

    /// Decides request `id`. With `Scope::Session`, identical requests (held now
    /// or asked later) get the same verdict for the rest of the session.
    pub fn decide(
        &self,
        id: u64,
        verdict: Verdict,
        scope: Scope,
        who: Decider,
    ) -> Result<Decision, ControlError> {
        let mut state = lock(&self.shared.state);
        let Some(held) = state.held.remove(&id) else {
            return Err(if id >= 1 && id < state.next_id {
                ControlError::AlreadyDecided { id }
            } else {
                ControlError::UnknownRequest { id }
            });
        };
        let mut answered = vec![(id, held, None)];
        if scope == Scope::Session {
            let key = answered[0].1.request.subject.key();
            let same: Vec<u64> = state
                .held
                .iter()
                .filter(|(_, other)| other.request.subject.key() == key)
                .map(|(&other, _)| other)
                .collect();
            for other in same {
                if let Some(held) = state.held.remove(&other) {
                    answered.push((other, held, Some(id)));
                }
            }
            state.remembered.insert(key, (verdict, id, who.clone()));
        }
        drop(state);
        let now = Instant::now();
        let mut first = None;
        for (this, held, from) in answered {
            let decision = Decision {
                id: Some(this),
                verdict,
                who: who.clone(),
                scope,
                latency: now.saturating_duration_since(held.asked),
                remembered_from: from,
            };
            self.record(&held.request, &decision);
            held.slot.set(decision.clone());
            first.get_or_insert(decision);
        }
        first.ok_or(ControlError::UnknownRequest { id })
    }

    /// The requests held now, oldest first.
    pub fn pending(&self) -> Vec<PendingView> {
        let now = Instant::now();
        lock(&self.shared.state)
            .held
            .iter()
            .map(|(&id, held)| view(id, held, now))
            .collect()
    }

    /// The session is ending: everything held now or asked later is denied
    /// (`Decider::SessionEnd`), at once.
    pub fn close(&self) {
        lock(&self.shared.state).closing = true;
        self.shared.changed.notify_all();
    }

    fn record(&self, request: &Request, decision: &Decision) {
        record_with(&self.shared, request, decision);
    }
}

impl Drop for Broker {
    /// Denies what is still held (the session is ending) and stops the timer.
    fn drop(&mut self) {
        lock(&self.shared.state).closing = true;
        self.shared.changed.notify_all();
        if let Some(timer) = self.timer.take() {
            // A panicked timer has nothing left to clean up.
            let _ = timer.join();
        }
    }
}

/// The timer thread: denies each request whose deadline passed; on close,
/// denies every request still held.
fn expire_loop(shared: &Shared) {
    let mut state = lock(&shared.state);
    loop {
        let now = Instant::now();
        let closing = state.closing;
        let due: Vec<u64> = state
            .held
            .iter()
            .filter(|(_, held)| closing || held.deadline <= now)
            .map(|(&id, _)| id)
            .collect();
        if !due.is_empty() {
            let expired: Vec<(u64, Held)> = due
                .into_iter()
                .filter_map(|id| state.held.remove(&id).map(|held| (id, held)))
                .collect();
            drop(state);
            for (id, held) in expired {
                let decision = Decision {
                    id: Some(id),
                    verdict: Verdict::Deny,
                    who: if closing {
                        Decider::SessionEnd
                    } else {
                        Decider::Timeout
                    },
                    scope: Scope::Once,
                    latency: now.saturating_duration_since(held.asked),
                    remembered_from: None,
                };
                record_with(shared, &held.request, &decision);
                held.slot.set(decision);
            }
            state = lock(&shared.state);
            continue;
        }
        if closing {
            return;
        }
        let next = state.held.values().map(|held| held.deadline).min();
        state = match next {
            Some(deadline) => {
                let wait = deadline.saturating_duration_since(now);
                shared
                    .changed
                    .wait_timeout(state, wait)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
            None => shared
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner),
        };
    }
}

fn record_with(shared: &Shared, request: &Request, decision: &Decision) {
    (shared.sink)(&ApprovalEvent {
        request: decision.id,
        subject: request.subject.clone(),
        level: request.level,
        reason: request.reason.clone(),
        rule: request.rule.clone(),
        decision: decision.verdict,
        who: decision.who.clone(),
        scope: decision.scope,
        latency_ms: millis(decision.latency),
        remembered_from: decision.remembered_from,
    });
}

fn view(id: u64, held: &Held, now: Instant) -> PendingView {
    PendingView {
        id,
        request: held.request.clone(),
        asked_at_ms: held
            .asked_wall
            .duration_since(UNIX_EPOCH)
            .map(millis)
            .unwrap_or(0),
        timeout_in_ms: millis(held.deadline.saturating_duration_since(now)),
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A poisoned lock only means another thread panicked mid-update of plain
/// data; the broker keeps serving rather than hang every held exec.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn exec(argv: &[&str]) -> Request {
        Request {
            subject: Subject::Exec {
                pid: 42,
                path: format!("/usr/bin/{}", argv[0]),
                argv: argv.iter().map(|arg| (*arg).to_string()).collect(),
                cwd: "/work".into(),
                parents: vec![Ancestor {
                    pid: 1,
                    command: "sh -c x".into(),
                }],
                exact: String::new(),
            },
            level: Level::High,
            reason: "deletes files".into(),
            rule: Some("rm-recursive".into()),
        }
    }

    fn destination(name: &str, port: u16) -> Request {
        Request {
            subject: Subject::Destination {
                name: name.into(),
                port,
                asked_by: Some("curl x".into()),
            },
            level: Level::Medium,
            reason: "not allowed yet".into(),
            rule: None,
        }
    }

    /// A broker whose events go to the returned list.
    fn broker(timeouts: Timeouts) -> (Broker, Arc<Mutex<Vec<ApprovalEvent>>>) {
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&events);
        let broker = Broker::new(timeouts, move |event| {
            sink.lock().unwrap().push(event.clone())
        })
        .unwrap();
        (broker, events)
    }

    const LONG: Timeouts = Timeouts {
        low: Duration::from_secs(600),
        medium: Duration::from_secs(600),
        high: Duration::from_secs(600),
        critical: Duration::from_secs(600),
        all: None,
    };

    #[test]
    fn default_timeouts_per_level_and_the_override() {
        let timeouts = Timeouts::default();
        assert_eq!(timeouts.for_level(Level::Critical), Duration::from_secs(30));
        assert_eq!(timeouts.for_level(Level::High), Duration::from_secs(60));
        assert_eq!(timeouts.for_level(Level::Medium), Duration::from_secs(120));
        let all = Timeouts::with_override(Some(Duration::from_secs(5)));
        assert_eq!(all.for_level(Level::Critical), Duration::from_secs(5));
        assert_eq!(all.for_level(Level::Medium), Duration::from_secs(5));
    }

    #[test]
    fn an_unanswered_request_is_denied_when_its_level_times_out() {
        let timeouts = Timeouts {
            critical: Duration::from_millis(50),
            ..LONG
        };
        let (broker, events) = broker(timeouts);
        let mut critical = exec(&["rm", "-rf", "/"]);
        critical.level = Level::Critical;
        let held_long = broker.submit(exec(&["ls"]));
        let started = Instant::now();
        let decision = broker.ask(critical);
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert_eq!(decision.verdict, Verdict::Deny);
        assert_eq!(decision.who, Decider::Timeout);
        assert_eq!(decision.id, Some(2));
        // The HIGH one (600 s) is still held.
        assert!(held_long.poll().is_none());
        assert_eq!(broker.pending().len(), 1);
        let events = events.lock().unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].who, Decider::Timeout);
        assert_eq!(events[0].request, Some(2));
        assert_eq!(events[0].level, Level::Critical);
        assert!(events[0].latency_ms >= 50);
    }

    #[test]
    fn a_timed_out_request_is_denied_even_when_nobody_waits_on_it() {
        let (broker, events) = broker(Timeouts::with_override(Some(Duration::from_millis(30))));
        let ticket = broker.submit(destination("example.com", 443));
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(events.lock().unwrap().len(), 1, "the timer wrote the event");
        assert_eq!(ticket.poll().unwrap().who, Decider::Timeout);
        assert!(broker.pending().is_empty());
    }

    #[test]
    fn decide_wakes_the_waiter_and_records_who_scope_and_latency() {
        let (broker, events) = broker(LONG);
        let broker = Arc::new(broker);
        let (seen, new_requests) = mpsc::channel();
        broker.subscribe(move |view| seen.send(view.clone()).unwrap());
        let asker = Arc::clone(&broker);
        let waiter = std::thread::spawn(move || asker.ask(exec(&["rm", "-rf", "build"])));
        let view = new_requests.recv().unwrap();
        assert_eq!(view.id, 1);
        assert_eq!(view.request.reason, "deletes files");
        assert!(view.timeout_in_ms > 590_000);
        let who = Decider::Client { uid: 7, pid: 8 };
        broker
            .decide(1, Verdict::Approve, Scope::Once, who.clone())
            .unwrap();
        let decision = waiter.join().unwrap();
        assert!(decision.approved());
        assert_eq!(decision.who, who);
        let events = events.lock().unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].decision, Verdict::Approve);
        assert_eq!(events[0].scope, Scope::Once);
        assert_eq!(events[0].rule.as_deref(), Some("rm-recursive"));
    }

    #[test]
    fn deciding_twice_or_an_unknown_id_is_an_error() {
        let (broker, _) = broker(LONG);
        let ticket = broker.submit(exec(&["ls"]));
        assert_eq!(ticket.id(), Some(1));
        broker
            .decide(1, Verdict::Deny, Scope::Once, Decider::Tty)
            .unwrap();
        assert_eq!(
            broker.decide(1, Verdict::Approve, Scope::Once, Decider::Tty),
            Err(ControlError::AlreadyDecided { id: 1 })
        );
        assert_eq!(
            ticket.poll().unwrap().verdict,
            Verdict::Deny,
            "first answer stands"
        );
        for id in [0, 2, 99] {
            assert_eq!(
                broker.decide(id, Verdict::Approve, Scope::Once, Decider::Tty),
                Err(ControlError::UnknownRequest { id })
            );
        }
    }

    #[test]
    fn a_session_scope_exec_decision_covers_only_the_exact_bytes() {
        let (broker, _) = broker(LONG);
        let with_exact = |exact: &str| {
            let mut request = exec(&["rm", "-rf", "/tmp/ok\u{fffd}"]);
            if let Subject::Exec { exact: key, .. } = &mut request.subject {
                *key = exact.into();
            }
            request
        };
        let _ = broker.submit(with_exact("digest-of-ff"));
        broker
            .decide(1, Verdict::Approve, Scope::Session, Decider::Tty)
            .unwrap();
        assert!(broker.submit(with_exact("digest-of-ff")).poll().is_some());
        // The same text, other bytes (a program typing what the display showed).
        assert!(
            broker
                .submit(with_exact("digest-of-ef-bf-bd"))
                .poll()
                .is_none()
        );
    }

    #[test]
    fn a_session_scope_exec_decision_covers_only_its_working_directory() {
        let (broker, _) = broker(LONG);
        let _ = broker.submit(exec(&["rm", "-rf", "build"]));
        broker
            .decide(1, Verdict::Approve, Scope::Session, Decider::Tty)
            .unwrap();
        assert!(
            broker
                .submit(exec(&["rm", "-rf", "build"]))
                .poll()
                .is_some()
        );
        let mut elsewhere = exec(&["rm", "-rf", "build"]);
        if let Subject::Exec { cwd, .. } = &mut elsewhere.subject {
            *cwd = "/home/user".into();
        }
        assert!(
            broker.submit(elsewhere).poll().is_none(),
            "the same command in another folder is asked again"
        );
    }

    #[test]
    fn session_scope_answers_identical_requests_held_now_and_asked_later() {
        let (broker, events) = broker(LONG);
        let first = broker.submit(destination("Example.com", 443));
        let twin = broker.submit(destination("example.com", 443));
        let other_port = broker.submit(destination("example.com", 80));
        broker
            .decide(1, Verdict::Approve, Scope::Session, Decider::Tty)
            .unwrap();
        assert!(first.poll().unwrap().approved());
        let twin = twin.poll().unwrap();
        assert!(twin.approved());
        assert_eq!(twin.remembered_from, Some(1));
        assert!(
            other_port.poll().is_none(),
            "another port is another request"
        );
        let later = broker.submit(destination("EXAMPLE.com", 443));
        assert_eq!(later.id(), None);
        let later = later.poll().unwrap();
        assert!(later.approved());
        assert_eq!((later.who, later.remembered_from), (Decider::Tty, Some(1)));
        // Once-scope decisions are not remembered; a different argv is asked.
        broker
            .decide(3, Verdict::Deny, Scope::Once, Decider::Tty)
            .unwrap();
        assert!(
            broker
                .submit(destination("example.com", 80))
                .poll()
                .is_none()
        );
        broker
            .decide(4, Verdict::Deny, Scope::Session, Decider::Tty)
            .unwrap();
        let denied = broker
            .submit(destination("example.com", 80))
            .poll()
            .unwrap();
        assert_eq!(
            (denied.verdict, denied.remembered_from),
            (Verdict::Deny, Some(4))
        );
        assert!(broker.submit(exec(&["ls"])).poll().is_none());
        assert_eq!(events.lock().unwrap().len(), 6);
    }

    #[test]
    fn many_concurrent_held_requests_each_get_their_own_decision() {
        let (broker, _) = broker(LONG);
        let broker = Arc::new(broker);
        let (seen, new_requests) = mpsc::channel();
        broker.subscribe(move |view| seen.send(view.id).unwrap());
        let askers: Vec<_> = (0..16)
            .map(|n| {
                let broker = Arc::clone(&broker);
                std::thread::spawn(move || {
                    let arg = n.to_string();
                    (n, broker.ask(exec(&["touch", &arg])))
                })
            })
            .collect();
        let mut ids: Vec<u64> = (0..16).map(|_| new_requests.recv().unwrap()).collect();
        ids.sort_unstable();
        assert_eq!(ids, (1..=16).collect::<Vec<_>>());
        assert_eq!(broker.pending().len(), 16);
        // Decide in reverse order; approve the even ids only.
        for id in ids.iter().rev() {
            let verdict = if id % 2 == 0 {
                Verdict::Approve
            } else {
                Verdict::Deny
            };
            broker
                .decide(*id, verdict, Scope::Once, Decider::Tty)
                .unwrap();
        }
        for asker in askers {
            let (_, decision) = asker.join().unwrap();
            let id = decision.id.unwrap();
            assert_eq!(decision.approved(), id % 2 == 0, "request {id}");
        }
        assert!(broker.pending().is_empty());
    }

    #[test]
    fn dropping_the_broker_denies_what_is_still_held() {
        let (broker, events) = broker(LONG);
        let ticket = broker.submit(exec(&["ls"]));
        drop(broker);
        let decision = ticket.wait();
        assert_eq!(
            (decision.verdict, decision.who),
            (Verdict::Deny, Decider::SessionEnd)
        );
        assert_eq!(events.lock().unwrap().len(), 1);
    }
}
