//! Approve→resume latency over the control channel: a request is held (as the
//! exec tracer would), a client connected to the session's socket approves it
//! as soon as the broker announces it (as `vectraguard approve` would), and we
//! time until the waiting thread wakes with the decision.
//!
//! `cargo run --release -p vg-control --example approve_latency [ROUNDS]`

use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use vg_control::broker::{PendingView, Request, Subject};
use vg_control::protocol::{ControlError, NetRule, RuleAction, SessionStatus};
use vg_control::{
    Broker, ControlClient, ControlServer, Decider, Handler, Level, Peer, Scope, Timeouts, Verdict,
};

struct Session(Broker);

impl Handler for Session {
    fn status(&self) -> Result<SessionStatus, ControlError> {
        Err(unsupported())
    }
    fn stop(&self, _: bool, _: &Peer) -> Result<(), ControlError> {
        Err(unsupported())
    }
    fn net_rules(&self) -> Result<Vec<NetRule>, ControlError> {
        Err(unsupported())
    }
    fn net_add(&self, _: RuleAction, _: &str, _: &Peer) -> Result<NetRule, ControlError> {
        Err(unsupported())
    }
    fn approvals(&self) -> Result<Vec<PendingView>, ControlError> {
        Ok(self.0.pending())
    }
    fn decide(
        &self,
        id: u64,
        verdict: Verdict,
        scope: Scope,
        peer: &Peer,
    ) -> Result<(), ControlError> {
        let who = Decider::Client {
            uid: peer.uid,
            pid: peer.pid,
        };
        self.0.decide(id, verdict, scope, who).map(|_| ())
    }
}

fn unsupported() -> ControlError {
    ControlError::Unsupported {
        message: "not part of this benchmark".into(),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds: usize = std::env::args().nth(1).map_or(Ok(1000), |n| n.parse())?;
    let dir = std::env::temp_dir().join(format!("vg-approve-latency-{}", std::process::id()));
    std::fs::create_dir(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    let socket = vg_control::socket_path(&dir);
    let owner = std::fs::metadata(&dir).map(|meta| std::os::unix::fs::MetadataExt::uid(&meta))?;

    let session = Arc::new(Session(Broker::new(Timeouts::default(), |_| {})?));
    let (announce, announced) = mpsc::channel::<u64>();
    session.0.subscribe(move |view| {
        let _ = announce.send(view.id);
    });
    let server = ControlServer::bind(&socket, owner, session.clone())?;
    let mut client = ControlClient::connect(&socket)?;
    let decider = std::thread::spawn(move || -> Result<(), vg_control::ClientError> {
        for id in announced {
            client.decide(id, Verdict::Approve, Scope::Once)?;
        }
        Ok(())
    });

    let mut samples = Vec::with_capacity(rounds);
    for n in 0..rounds {
        let request = Request {
            subject: Subject::Exec {
                pid: 1,
                path: "/bin/true".into(),
                argv: vec!["true".into(), n.to_string()],
                cwd: "/".into(),
                parents: Vec::new(),
                exact: String::new(),
            },
            level: Level::High,
            reason: "benchmark".into(),
            rule: None,
        };
        let started = Instant::now();
        let decision = session.0.ask(request);
        samples.push(started.elapsed());
        if !decision.approved() {
            return Err(format!("round {n} was not approved: {decision:?}").into());
        }
    }
    // Dropping the server ends the decider's connection, its next decide fails.
    drop(server);
    drop(session);
    let _ = decider.join();
    let _ = std::fs::remove_dir_all(&dir);

    samples.sort_unstable();
    let at = |q: f64| -> Duration {
        let last = samples.len().saturating_sub(1);
        // Truncation is the point: the sample at or below the quantile.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let index = (last as f64 * q) as usize;
        samples.get(index).copied().unwrap_or_default()
    };
    println!(
        "approve→resume over the control socket, {rounds} rounds: median {:?}, p90 {:?}, p99 {:?}, max {:?}",
        at(0.5),
        at(0.9),
        at(0.99),
        samples.last().copied().unwrap_or_default()
    );
    Ok(())
}
