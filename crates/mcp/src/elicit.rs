//! The client's user as a decider: while a tool's command runs, the requests its
//! sandbox holds for approval are also put to the client, where it supports MCP
//! elicitation, and the answer goes back through the session's control channel —
//! the same decision `vectraguard approve` or `deny` makes, recorded as a client's.
//! The other deciders (the terminal prompt, the CLI, the time-out) stay in place:
//! the first answer counts.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use rmcp::service::{ElicitationMode, Peer, RoleServer};
use rmcp::{elicit_safe, schemars};
use serde::{Deserialize, Serialize};
use vg_control::broker::PendingView;
use vg_control::{ControlClient, Scope, Subject, Verdict};

/// What the client's user answers.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(description = "Let the held command or connection go ahead")]
pub struct Answer {
    /// true: let it run; false: deny it
    pub approve: bool,
}

elicit_safe!(Answer);

/// How often the held requests are looked at while a command runs.
const POLL: Duration = Duration::from_millis(100);

/// Whether the client can be asked.
pub fn supported(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
}

/// The question for one held request, in words.
pub fn question(pending: &PendingView) -> String {
    let what = match &pending.request.subject {
        Subject::Exec { argv, cwd, .. } => format!("run `{}` in {cwd}", argv.join(" ")),
        Subject::Destination { name, port, .. } => match port {
            0 => format!("look up and connect to {name}"),
            port => format!("connect to {name}:{port}"),
        },
    };
    format!(
        "Vectra Guard holds a request to {what}: {} ({}). Approve it?",
        pending.request.level.as_str(),
        pending.request.reason
    )
}

/// Puts each request held in the session `session_dir` to the client, until dropped
/// (the caller aborts it when its command has ended).
pub async fn ask(peer: Peer<RoleServer>, session_dir: PathBuf) {
    let socket = vg_control::socket_path(&session_dir);
    let mut asked = HashSet::new();
    loop {
        tokio::time::sleep(POLL).await;
        let path = socket.clone();
        let pending = tokio::task::spawn_blocking(move || {
            ControlClient::connect(&path).and_then(|mut c| c.approvals())
        })
        .await;
        let Ok(Ok(pending)) = pending else {
            continue;
        };
        for request in pending {
            if !asked.insert(request.id) {
                continue;
            }
            let verdict = match peer.elicit::<Answer>(question(&request)).await {
                Ok(Some(Answer { approve: true })) => Verdict::Approve,
                // Declined, cancelled, or answered no.
                Ok(_) => Verdict::Deny,
                // The client cannot answer: the other deciders still can.
                Err(_) => continue,
            };
            let path = socket.clone();
            let id = request.id;
            let _ = tokio::task::spawn_blocking(move || {
                ControlClient::connect(&path).and_then(|mut c| c.decide(id, verdict, Scope::Once))
            })
            .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vg_control::broker::{Ancestor, Request};

    #[test]
    fn a_question_says_what_is_held_and_why() {
        let pending = PendingView {
            id: 3,
            request: Request {
                subject: Subject::Exec {
                    pid: 2,
                    path: "/usr/bin/python3".into(),
                    argv: vec!["python3".into(), "-c".into(), "print(1)".into()],
                    cwd: "/workspace".into(),
                    parents: vec![Ancestor {
                        pid: 1,
                        command: "init".into(),
                    }],
                    exact: String::new(),
                },
                level: vg_control::Level::High,
                reason: "runs code given on the command line".into(),
                rule: Some("inline-code".into()),
            },
            asked_at_ms: 0,
            timeout_in_ms: 60_000,
        };
        assert_eq!(
            question(&pending),
            "Vectra Guard holds a request to run `python3 -c print(1)` in /workspace: HIGH (runs code given on the command line). Approve it?"
        );
    }
}
