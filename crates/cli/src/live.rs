//! Commands on running sessions, through their control channel (`vg-control`):
//! `ps`, `stop`, and `net allow|deny|rules`. A session is named as for `logs show`
//! (id, unique prefix or suffix, name, `last`); one that is not running is an error.

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use vg_control::ControlClient;
use vg_control::protocol::{NetRule, RuleAction};
use vg_records::SessionStore;

use crate::EXIT_FAILURE;

#[derive(Debug, Args)]
pub struct PsArgs {
    /// Print the running sessions as JSON: [{"id", "name", "agent", "command",
    /// "started", "pid", "pending_approvals"}]
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StopArgs {
    /// The session: id, unique prefix or suffix, name, or `last`
    pub session: String,
    /// SIGKILL at once, without the kill-grace period
    #[arg(long)]
    pub kill: bool,
}

#[derive(Debug, Subcommand)]
pub enum NetCommand {
    /// Allow TARGET[:PORT] in a running session, in front of its rules
    Allow(NetAddArgs),
    /// Deny TARGET[:PORT] in a running session, in front of its rules
    Deny(NetAddArgs),
    /// List a running session's network rules, live ones first
    Rules(NetRulesArgs),
}

#[derive(Debug, Args)]
pub struct NetAddArgs {
    /// The session: id, unique prefix or suffix, name, or `last`
    pub session: String,
    /// DOMAIN, *.DOMAIN, *, an IP address or CIDR, optionally :PORT or :LOW-HIGH
    pub target: String,
}

#[derive(Debug, Args)]
pub struct NetRulesArgs {
    /// The session: id, unique prefix or suffix, name, or `last`
    pub session: String,
}

/// Runs `body`, printing its error and returning 125 on failure.
pub(crate) fn exit_code(body: impl FnOnce() -> Result<()>) -> i32 {
    match body() {
        Ok(()) => 0,
        Err(e) => {
            crate::report::error(format_args!("{}", vg_session::diag::chain(&e)));
            EXIT_FAILURE
        }
    }
}

pub(crate) fn root() -> Result<std::path::PathBuf> {
    vg_session::home::records_root()
}

/// Connects to the running session `query` names.
pub(crate) fn connect(query: &str) -> Result<ControlClient> {
    let store = SessionStore::at(&root()?);
    let dir = store.resolve(query)?;
    Ok(ControlClient::connect(&vg_control::socket_path(&dir))?)
}

pub fn ps(args: PsArgs) -> i32 {
    exit_code(|| {
        let found =
            vg_control::discover::running(&root()?).context("cannot read the records folder")?;
        let mut sessions = Vec::new();
        for mut live in found.live {
            match live.client.status() {
                Ok(status) => sessions.push(status),
                // It ended between the listing and the question.
                Err(e) if vg_control::client::is_not_running(&e) => {}
                Err(e) => crate::report::warning(format_args!("{e}")),
            }
        }
        for e in found.unreachable {
            crate::report::warning(format_args!("{e}"));
        }
        if args.json {
            println!("{}", serde_json::to_string_pretty(&sessions)?);
            return Ok(());
        }
        if sessions.is_empty() {
            println!("No running sessions.");
            return Ok(());
        }
        println!(
            "{:<38} {:<16} {:<8} {:<25} {:>7}  COMMAND",
            "SESSION", "NAME", "PID", "STARTED", "PENDING"
        );
        for s in sessions {
            println!(
                "{:<38} {:<16} {:<8} {:<25} {:>7}  {}",
                s.id,
                s.name.as_deref().unwrap_or("-"),
                s.pid,
                s.started,
                s.pending_approvals,
                vg_records::quote_argv(&s.command),
            );
        }
        Ok(())
    })
}

pub fn stop(args: StopArgs) -> i32 {
    exit_code(|| {
        let mut client = connect(&args.session)?;
        client.stop(args.kill)?;
        println!(
            "Stopping {}{}",
            client.session(),
            if args.kill { " (SIGKILL)" } else { "" }
        );
        Ok(())
    })
}

pub fn net(cmd: NetCommand) -> i32 {
    exit_code(|| match cmd {
        NetCommand::Allow(args) => add(RuleAction::Allow, &args),
        NetCommand::Deny(args) => add(RuleAction::Deny, &args),
        NetCommand::Rules(args) => {
            let mut client = connect(&args.session)?;
            let rules = client.net_rules()?;
            if rules.is_empty() {
                println!("No network rules (everything is denied).");
            }
            for rule in rules {
                println!("{}", show(&rule));
            }
            Ok(())
        }
    })
}

fn add(action: RuleAction, args: &NetAddArgs) -> Result<()> {
    let mut client = connect(&args.session)?;
    let rule = client.net_add(action, &args.target)?;
    println!("{} in {}", show(&rule), client.session());
    Ok(())
}

fn show(rule: &NetRule) -> String {
    let action = match rule.action {
        RuleAction::Allow => "allow",
        RuleAction::Deny => "deny",
    };
    let live = if rule.live { "  (live)" } else { "" };
    format!("{action} {}{live}", rule.target)
}
