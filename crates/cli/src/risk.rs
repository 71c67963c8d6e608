//! `vectraguard risk explain`: how the risk rules rate a command or a destination,
//! without running anything. The same classifier will decide `--ask LEVEL`.

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use vg_policy::config::{self, ConfigFile};
use vg_policy::risk::{self, Assessment, DestFacts, ExecFacts};
use vg_policy::{Destination, HostName, NetworkPolicy};

use crate::EXIT_FAILURE;

#[derive(Debug, Subcommand)]
pub enum RiskCommand {
    /// Rate a command (or a network destination) with the risk rules, without running it
    #[command(
        after_help = "Prints LEVEL  rule=ID  reason=WHY. Rules: the built-in ones plus [[risk.rules]] in vectraguard.toml and ~/.config/vectraguard/config.toml.\n\nExamples:\n  vectraguard risk explain -- sh -c 'curl -fsSL https://x/install.sh | sh'\n  vectraguard risk explain -- pip install --index-url http://mirror/simple pkg\n  vectraguard risk explain --destination 203.0.113.7:22\n  vectraguard risk explain --destination api.example.com:443 -- python3 fetch.py"
    )]
    Explain(ExplainArgs),
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// Use this configuration file instead of vectraguard.toml and the user config
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print {"subject", "level", "rule", "reason", "timeout_seconds"} as JSON
    #[arg(long)]
    pub json: bool,
    /// Rate a new connection to HOST:PORT instead; a command after -- is then the
    /// process that asked for it
    #[arg(long, value_name = "HOST:PORT")]
    pub destination: Option<String>,
    /// The command to rate, as it would be executed
    #[arg(
        last = true,
        value_name = "CMD",
        required_unless_present = "destination"
    )]
    pub command: Vec<String>,
}

pub fn run(cmd: RiskCommand) -> i32 {
    let RiskCommand::Explain(args) = cmd;
    match explain(&args) {
        Ok(()) => 0,
        Err(e) => {
            crate::report::error(format_args!("{}", vg_session::diag::chain(&e)));
            EXIT_FAILURE
        }
    }
}

fn explain(args: &ExplainArgs) -> Result<()> {
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let files = crate::request::config_files(args.config.as_deref(), &cwd)?;
    let refs: Vec<&ConfigFile> = files.iter().collect();
    let classifier = risk::config::classifier(&refs)?;
    let (subject, assessment) = match &args.destination {
        Some(destination) => {
            let settings = config::resolve_profile(&refs, None)?;
            let policy = NetworkPolicy::new(settings.network_rules, settings.add_hosts);
            let facts = destination_facts(destination, &policy, &args.command)?;
            ("destination", classifier.classify_destination(&facts))
        }
        None => {
            let facts = ExecFacts {
                path: args
                    .command
                    .first()
                    .filter(|program| program.contains('/'))
                    .cloned()
                    .unwrap_or_default(),
                argv: args.command.clone(),
                cwd: Some(cwd),
                parents: Vec::new(),
                program: None,
                workspaces: Vec::new(),
            };
            ("exec", classifier.classify_exec(&facts))
        }
    };
    print(subject, &assessment, args.json);
    Ok(())
}

fn print(subject: &str, a: &Assessment, json: bool) {
    let rule = if a.rule.is_empty() { "-" } else { &a.rule };
    if json {
        let value = serde_json::json!({
            "subject": subject,
            "level": a.level.as_str(),
            "rule": (!a.rule.is_empty()).then_some(&a.rule),
            "reason": a.reason,
            "timeout_seconds": a.level.timeout().map(|t| t.as_secs()),
        });
        println!("{value}");
    } else {
        println!("{:<8}  rule={rule}  reason={}", a.level, a.reason);
    }
}

/// `HOST:PORT` (`[IPv6]:PORT`), with whether the configured network rules allow it.
fn destination_facts(text: &str, policy: &NetworkPolicy, asker: &[String]) -> Result<DestFacts> {
    let Some((host, port)) = text.rsplit_once(':') else {
        bail!(
            "--destination {text}: expected HOST:PORT, e.g. example.com:443 or [2001:db8::1]:443"
        );
    };
    let port: u16 = port.parse().ok().filter(|p| *p != 0).with_context(|| {
        format!("--destination {text}: the port must be a number from 1 to 65535")
    })?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let allowed = match bare.parse::<IpAddr>() {
        Ok(addr) => {
            policy
                .decide_connect(
                    &Destination {
                        name: None,
                        addr,
                        pinned: false,
                    },
                    port,
                )
                .allowed
        }
        Err(_) => {
            let name = HostName::parse(host)
                .with_context(|| format!("--destination {text}: not a host name or IP address"))?;
            policy.decide_name(&name).allowed
        }
    };
    Ok(DestFacts {
        host: host.to_owned(),
        port,
        allowed_by_policy: allowed,
        process: (!asker.is_empty()).then(|| asker.to_vec()),
    })
}
