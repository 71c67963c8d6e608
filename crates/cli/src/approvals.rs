//! `approvals`, `approve` and `deny`: deciding what a running session's approval gate
//! (`--ask LEVEL`) holds, through its control channel.

use anyhow::{Result, bail};
use clap::Args;
use vg_control::broker::{PendingView, Subject};
use vg_control::{Scope, Verdict};

use crate::live::{connect, exit_code, root};

#[derive(Debug, Args)]
pub struct ApprovalsArgs {
    /// Only this session (id, unique prefix or suffix, name, or `last`); without it,
    /// every running session
    pub session: Option<String>,
    /// Print [{"session", "id", "kind", "level", "reason", "rule", "asked_at_ms",
    /// "timeout_in_ms", …what is held}] as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DecideArgs {
    /// The session: id, unique prefix or suffix, name, or `last`
    pub session: String,
    /// The request's id, as `vectraguard approvals` shows it
    pub id: u64,
    /// once: this request only; session: every identical request (same program and
    /// arguments, or same destination and port) for the rest of the session
    #[arg(long, value_name = "SCOPE", default_value = "once")]
    pub scope: String,
}

pub fn approvals(args: ApprovalsArgs) -> i32 {
    exit_code(|| {
        let mut held: Vec<(String, PendingView)> = Vec::new();
        match &args.session {
            Some(query) => {
                let mut client = connect(query)?;
                let session = client.session().to_owned();
                held.extend(
                    client
                        .approvals()?
                        .into_iter()
                        .map(|p| (session.clone(), p)),
                );
            }
            None => {
                let found = vg_control::discover::running(&root()?)?;
                for mut live in found.live {
                    let session = live.client.session().to_owned();
                    match live.client.approvals() {
                        Ok(pending) => {
                            held.extend(pending.into_iter().map(|p| (session.clone(), p)))
                        }
                        Err(e) if vg_control::client::is_not_running(&e) => {}
                        Err(e) => crate::report::warning(format_args!("{e}")),
                    }
                }
            }
        }
        if args.json {
            let rows: Vec<serde_json::Value> = held
                .iter()
                .map(|(session, p)| {
                    let mut value = serde_json::to_value(p).unwrap_or_default();
                    if let Some(map) = value.as_object_mut() {
                        map.insert("session".into(), session.clone().into());
                    }
                    value
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&rows)?);
            return Ok(());
        }
        if held.is_empty() {
            println!("Nothing is waiting for approval.");
            return Ok(());
        }
        for (session, p) in &held {
            print!("{}", describe(session, p));
        }
        Ok(())
    })
}

/// A held request for people: what, who asked, why, and how to answer.
pub fn describe(session: &str, p: &PendingView) -> String {
    let r = &p.request;
    let mut out = format!(
        "{session}  request {}  {}  denied in {}s\n",
        p.id,
        r.level.as_str(),
        p.timeout_in_ms.div_ceil(1000)
    );
    match &r.subject {
        Subject::Exec {
            pid,
            path,
            argv,
            cwd,
            parents,
            ..
        } => {
            out.push_str(&format!(
                "  exec     {}\n  program  {}\n  cwd      {}   pid {pid}\n",
                vg_records::quote_argv(argv),
                vg_records::quote_arg(path.as_bytes()),
                vg_records::quote_arg(cwd.as_bytes()),
            ));
            for parent in parents {
                out.push_str(&format!(
                    "  parent   {} (pid {})\n",
                    parent.command, parent.pid
                ));
            }
        }
        Subject::Destination {
            name,
            port,
            asked_by,
        } => {
            out.push_str(&format!(
                "  connect  {}\n",
                vg_control::broker::destination_text(
                    &vg_records::quote_arg(name.as_bytes()),
                    *port
                )
            ));
            if let Some(by) = asked_by {
                out.push_str(&format!("  by       {}\n", vg_records::escape_hidden(by)));
            }
        }
    }
    out.push_str(&format!(
        "  reason   {}{}\n  answer   vectraguard approve {session} {id}   |   vectraguard deny {session} {id}\n",
        vg_records::escape_hidden(&r.reason),
        r.rule
            .as_deref()
            .map(|rule| format!(" (rule {rule})"))
            .unwrap_or_default(),
        id = p.id,
    ));
    out
}

pub fn approve(args: DecideArgs) -> i32 {
    exit_code(|| decide(&args, Verdict::Approve))
}

pub fn deny(args: DecideArgs) -> i32 {
    exit_code(|| decide(&args, Verdict::Deny))
}

fn decide(args: &DecideArgs, verdict: Verdict) -> Result<()> {
    let scope = match args.scope.as_str() {
        "once" => Scope::Once,
        "session" => Scope::Session,
        other => bail!("--scope {other}: use once or session"),
    };
    let mut client = connect(&args.session)?;
    client.decide(args.id, verdict, scope)?;
    let word = match verdict {
        Verdict::Approve => "Approved",
        Verdict::Deny => "Denied",
    };
    let reach = match scope {
        Scope::Once => String::new(),
        Scope::Session => " (and every identical request for the rest of the session)".into(),
    };
    println!("{word} request {} in {}{reach}", args.id, client.session());
    Ok(())
}
