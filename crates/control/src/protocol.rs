//! The wire format: one JSON object per line each way, versioned.
//!
//! ```text
//! → {"v":1,"op":"decide","id":3,"decision":"approve","scope":"once"}
//! ← {"v":1,"ok":{"kind":"decided","id":3}}
//! ← {"v":1,"error":{"code":"already-decided","id":3}}
//! ```
//!
//! A connection may carry several requests, one answer each, in order. A line
//! longer than [`MAX_LINE`] is answered with `too-large` and the connection is
//! closed (it cannot be resynchronised cheaply); a malformed one with `malformed`.

use serde::{Deserialize, Serialize};

use crate::broker::PendingView;

/// The protocol version this crate speaks.
pub const VERSION: u32 = 1;

/// The longest request line the server reads, newline included.
pub const MAX_LINE: usize = 64 * 1024;

/// One request from a front end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub v: u32,
    #[serde(flatten)]
    pub op: Op,
}

impl Request {
    pub fn new(op: Op) -> Self {
        Self { v: VERSION, op }
    }
}

/// What a front end asks of a running session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Op {
    /// What `ps` shows.
    Status,
    /// End the session as `--timeout` would (`kill`: SIGKILL at once, no grace).
    Stop { kill: bool },
    /// The session's network rules, live ones first.
    NetRules,
    /// A live rule in front of the session's rules.
    NetAdd { action: RuleAction, target: String },
    /// The requests held for a decision.
    Approvals,
    /// Decide one held request.
    Decide {
        id: u64,
        decision: Verdict,
        scope: Scope,
    },
}

/// Allow or deny, for a network rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuleAction {
    Allow,
    Deny,
}

/// A decider's answer to a held request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Approve,
    Deny,
}

/// How far a decision reaches: this request, or every identical one for the rest
/// of the session (same executable and argv; same destination name and port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    #[default]
    Once,
    Session,
}

/// Who decided: recorded in every `approval` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "kebab-case")]
pub enum Decider {
    /// The prompt on the user's own terminal.
    Tty,
    /// A control-channel client (the CLI's `approve`/`deny`), by its uid and pid.
    Client { uid: u32, pid: i32 },
    /// Nobody answered within the level's time-out: denied.
    Timeout,
    /// The session ended with the request still held: denied.
    SessionEnd,
}

/// One answer from the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    pub v: u32,
    #[serde(flatten)]
    pub body: Body,
}

impl Response {
    pub fn ok(reply: Reply) -> Self {
        Self {
            v: VERSION,
            body: Body::Ok(reply),
        }
    }

    pub fn error(error: ControlError) -> Self {
        Self {
            v: VERSION,
            body: Body::Error(error),
        }
    }
}

/// Success or a typed error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Body {
    Ok(Reply),
    Error(ControlError),
}

/// The successful answers, one per [`Op`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Reply {
    Status(SessionStatus),
    Stopping,
    NetRules { rules: Vec<NetRule> },
    RuleAdded { rule: NetRule },
    Approvals { pending: Vec<PendingView> },
    Decided { id: u64 },
}

/// A running session as `ps` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionStatus {
    pub id: String,
    pub name: Option<String>,
    pub agent: Option<String>,
    pub command: Vec<String>,
    /// RFC 3339, UTC.
    pub started: String,
    /// The supervisor's pid.
    pub pid: u32,
    pub pending_approvals: usize,
}

/// One network rule as the session holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetRule {
    pub action: RuleAction,
    /// `HOST[:PORT]`, `CIDR[:PORT]`, as typed.
    pub target: String,
    /// Whether it was added while the session ran (then in front of the others).
    pub live: bool,
}

/// Why a request failed. The session keeps running whatever the error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "code", rename_all = "kebab-case")]
pub enum ControlError {
    #[error("protocol version {got} is not supported (this session speaks {supported})")]
    UnsupportedVersion { got: u32, supported: u32 },
    #[error("malformed request: {message}")]
    Malformed { message: String },
    #[error("request longer than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("uid {uid} may not control this session (only its owner and root may)")]
    NotPermitted { uid: u32 },
    #[error("the session is serving too many clients at once; try again")]
    Busy,
    #[error("no approval request {id} in this session (see `vectraguard approvals`)")]
    UnknownRequest { id: u64 },
    #[error("approval request {id} was already decided")]
    AlreadyDecided { id: u64 },
    #[error("bad network rule: {message}")]
    BadRule { message: String },
    #[error("this session cannot do that: {message}")]
    Unsupported { message: String },
    #[error("the session failed: {message}")]
    Internal { message: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_flat_versioned_objects() {
        let line = serde_json::to_string(&Request::new(Op::Decide {
            id: 3,
            decision: Verdict::Approve,
            scope: Scope::Session,
        }))
        .unwrap();
        assert_eq!(
            line,
            r#"{"v":1,"op":"decide","id":3,"decision":"approve","scope":"session"}"#
        );
        let back: Request = serde_json::from_str(&line).unwrap();
        assert_eq!(
            back.op,
            Op::Decide {
                id: 3,
                decision: Verdict::Approve,
                scope: Scope::Session
            }
        );
        let stop: Request = serde_json::from_str(r#"{"v":1,"op":"stop","kill":true}"#).unwrap();
        assert_eq!(stop.op, Op::Stop { kill: true });
    }

    #[test]
    fn responses_carry_ok_or_a_typed_error() {
        let ok = serde_json::to_string(&Response::ok(Reply::Decided { id: 3 })).unwrap();
        assert_eq!(ok, r#"{"v":1,"ok":{"kind":"decided","id":3}}"#);
        let err = serde_json::to_string(&Response::error(ControlError::AlreadyDecided { id: 3 }))
            .unwrap();
        assert_eq!(err, r#"{"v":1,"error":{"code":"already-decided","id":3}}"#);
        let back: Response = serde_json::from_str(&err).unwrap();
        assert_eq!(
            back.body,
            Body::Error(ControlError::AlreadyDecided { id: 3 })
        );
    }

    #[test]
    fn unknown_operations_and_fields_of_the_wrong_type_do_not_parse() {
        assert!(serde_json::from_str::<Request>(r#"{"v":1,"op":"format-disk"}"#).is_err());
        assert!(serde_json::from_str::<Request>(r#"{"v":1,"op":"decide","id":"x"}"#).is_err());
        assert!(serde_json::from_str::<Request>(r#"{"op":"status"}"#).is_err());
    }
}
