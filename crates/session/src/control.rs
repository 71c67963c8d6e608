//! What a running session answers on its control channel (`vg-control`):
//! `status` for `ps`, `stop` through the supervisor's termination path, and live
//! network rules put in front of the session's own through the mediator's
//! [`PolicyHandle`]. Every change is recorded with who asked (uid and pid).

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use vg_control::broker::PendingView;
use vg_control::protocol::{NetRule, RuleAction, SessionStatus};
use vg_control::{ControlError, Decider, Handler, Peer, Scope, Verdict};

use crate::gate::Gate;
use vg_netstack::PolicyHandle;
use vg_policy::network::{Action, NetworkPolicy, Rule};
use vg_records::event::kind::NETWORK;
use vg_records::{Event, SessionWriter};
use vg_sandbox::Stopper;

/// The `stop` event's kind.
const STOP: &str = "stop";

/// The session's network, as far as live rules may change it: shared by the control
/// channel (`net allow|deny`) and the approval gate (an approved destination).
pub struct LiveNetwork {
    handle: PolicyHandle,
    /// The policy the session started with; live rules go in front of its rules.
    base: NetworkPolicy,
    /// Rules added while the session runs, newest first.
    live: Mutex<Vec<Rule>>,
    /// Whether the session has an HTTP inspector: without one, a method and path rule
    /// could not be enforced and is refused.
    inspects: bool,
}

impl LiveNetwork {
    pub fn new(handle: PolicyHandle, base: NetworkPolicy, inspects: bool) -> Arc<Self> {
        Arc::new(Self {
            handle,
            base,
            live: Mutex::new(Vec::new()),
            inspects,
        })
    }

    fn live(&self) -> MutexGuard<'_, Vec<Rule>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Puts `rule` in front of every other, for the next DNS question and connection.
    /// Recorded first (a `network` `rule-added` event with `who`'s fields), under the
    /// same lock, so that rules and their events keep one order and no rule is in
    /// force that the record lacks.
    pub fn add(
        &self,
        writer: &SessionWriter,
        rule: Rule,
        who: &[(&str, serde_json::Value)],
    ) -> Result<(), ControlError> {
        if rule.http.is_some() && !self.inspects {
            return Err(ControlError::BadRule {
                message: format!(
                    "'{}' is a method and path rule, and this session was started without HTTPS inspection (no such rule or --secret at its start), so it could not be enforced; start the session with one",
                    rule.text
                ),
            });
        }
        let mut live = self.live();
        let mut event = Event::new(NETWORK)
            .with("event", "rule-added")
            .with("rule", rule.text.clone());
        for (key, value) in who {
            event = event.with(*key, value.clone());
        }
        writer.event(event).map_err(|e| ControlError::Internal {
            message: format!("cannot write events.jsonl: {e}"),
        })?;
        live.insert(0, rule);
        let mut policy = self.base.clone();
        policy.rules = live
            .iter()
            .cloned()
            .chain(self.base.rules.iter().cloned())
            .collect();
        self.handle.replace(policy);
        Ok(())
    }
}

/// One running session's answers.
pub struct SessionControl {
    writer: Arc<SessionWriter>,
    stopper: Stopper,
    /// The supervisor's pid, shown by `ps`.
    pid: u32,
    network: Option<Arc<LiveNetwork>>,
    /// The approval gate, with `--ask`; weak, so that a client still connected as the
    /// session ends cannot keep it (and the record) alive.
    gate: Option<Weak<Gate>>,
}

impl SessionControl {
    pub fn new(
        writer: Arc<SessionWriter>,
        stopper: Stopper,
        network: Option<Arc<LiveNetwork>>,
        gate: Option<&Arc<Gate>>,
    ) -> Self {
        Self {
            writer,
            stopper,
            pid: std::process::id(),
            network,
            gate: gate.map(Arc::downgrade),
        }
    }

    fn gate(&self) -> Option<Arc<Gate>> {
        self.gate.as_ref().and_then(Weak::upgrade)
    }

    fn record(&self, event: Event) -> Result<(), ControlError> {
        self.writer
            .event(event)
            .map_err(|e| ControlError::Internal {
                message: format!("cannot write events.jsonl: {e}"),
            })
    }
}

fn net_rule(rule: &Rule, live: bool) -> NetRule {
    let action = match rule.action {
        Action::Allow => RuleAction::Allow,
        Action::Deny => RuleAction::Deny,
    };
    // The rule's text is "ACTION TARGET[:PORTS]"; the target part is what was typed.
    let target = rule
        .text
        .split_once(' ')
        .map_or(rule.text.as_str(), |(_, target)| target)
        .to_owned();
    NetRule {
        action,
        target,
        live,
    }
}

impl Handler for SessionControl {
    fn status(&self) -> Result<SessionStatus, ControlError> {
        let meta = self.writer.metadata();
        Ok(SessionStatus {
            id: meta.session_id,
            name: meta.name,
            agent: meta.agent,
            command: meta.command,
            started: vg_records::time::format_rfc3339(meta.start_time),
            pid: self.pid,
            pending_approvals: self.gate().map_or(0, |g| g.broker().pending().len()),
        })
    }

    fn stop(&self, kill: bool, peer: &Peer) -> Result<(), ControlError> {
        // Recorded first: the record must say who ended the session.
        self.record(
            Event::new(STOP)
                .with("kill", kill)
                .with("uid", peer.uid)
                .with("pid", peer.pid),
        )?;
        self.stopper.stop(kill).map_err(|e| ControlError::Internal {
            message: format!("cannot stop the sandbox: {e}"),
        })
    }

    fn net_rules(&self) -> Result<Vec<NetRule>, ControlError> {
        let Some(network) = &self.network else {
            // `none` has no way out and `host` is not mediated: no rules apply to
            // either, and an empty list would read as "everything denied".
            return Err(ControlError::Unsupported {
                message: "the session's network mode is not `allow`: rules apply only to a mediated network (`--network none` lets nothing out, `--network host` is not mediated)".into(),
            });
        };
        let live = network.live();
        Ok(live
            .iter()
            .map(|rule| net_rule(rule, true))
            .chain(network.base.rules.iter().map(|rule| net_rule(rule, false)))
            .collect())
    }

    fn net_add(
        &self,
        action: RuleAction,
        target: &str,
        peer: &Peer,
    ) -> Result<NetRule, ControlError> {
        let Some(network) = &self.network else {
            return Err(ControlError::Unsupported {
                message: "the session's network mode is not `allow` (rules apply only to a mediated network; start it with --network allow)".into(),
            });
        };
        let action = match action {
            RuleAction::Allow => Action::Allow,
            RuleAction::Deny => Action::Deny,
        };
        let rule = Rule::parse(action, target).map_err(|e| ControlError::BadRule {
            message: e.to_string(),
        })?;
        network.add(
            &self.writer,
            rule.clone(),
            &[("uid", peer.uid.into()), ("pid", peer.pid.into())],
        )?;
        Ok(net_rule(&rule, true))
    }

    fn approvals(&self) -> Result<Vec<PendingView>, ControlError> {
        // Without a gate nothing is ever held.
        Ok(self
            .gate()
            .map(|g| g.broker().pending())
            .unwrap_or_default())
    }

    fn decide(
        &self,
        id: u64,
        decision: Verdict,
        scope: Scope,
        peer: &Peer,
    ) -> Result<(), ControlError> {
        let Some(gate) = self.gate() else {
            return Err(ControlError::Unsupported {
                message: "this session holds nothing for approval: it was started without --ask"
                    .into(),
            });
        };
        let who = Decider::Client {
            uid: peer.uid,
            pid: peer.pid,
        };
        gate.broker().decide(id, decision, scope, who).map(|_| ())
    }
}
