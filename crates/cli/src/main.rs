//! `vectraguard`: a thin binary over the library crates.

mod cli;
mod doctor;
mod etc;
mod host;
mod image;
mod image_run;
mod layers;
mod limits;
mod logs;
mod network;
mod notes;
mod run;
mod session;

use clap::{CommandFactory, FromArgMatches};

use cli::{Cli, Command, SandboxCommand};

/// Exit status when Vectra Guard itself fails (bad flag, layer unavailable), as Docker.
pub const EXIT_FAILURE: i32 = 125;

fn main() {
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_FAILURE } else { 0 };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let code = match cli.command {
        Command::Sandbox(SandboxCommand::Run(mut args)) => {
            args.after_dash_dash = follows_dash_dash(args.args.len());
            args.options.rules_in_order = rules_in_order(&matches);
            run::run(*args)
        }
        Command::Sandbox(SandboxCommand::Shell(mut args)) => {
            args.options.rules_in_order = rules_in_order(&matches);
            run::shell(*args)
        }
        Command::Logs(cmd) => logs::run(cmd),
        Command::Image(cmd) => image::run(cmd),
        Command::Doctor => doctor::doctor(),
    };
    std::process::exit(code);
}

/// `--allow` and `--deny` interleaved as they were typed: first match wins, so their
/// relative order is part of the policy (clap keeps each list separately).
fn rules_in_order(matches: &clap::ArgMatches) -> Vec<(vg_policy::network::Action, String)> {
    let Some((_, sandbox)) = matches.subcommand() else {
        return Vec::new();
    };
    let Some((_, command)) = sandbox.subcommand() else {
        return Vec::new();
    };
    let mut rules: Vec<(usize, vg_policy::network::Action, String)> = Vec::new();
    for (id, action) in [
        ("allow", vg_policy::network::Action::Allow),
        ("deny", vg_policy::network::Action::Deny),
    ] {
        if let (Some(indices), Some(values)) =
            (command.indices_of(id), command.get_many::<String>(id))
        {
            rules.extend(indices.zip(values).map(|(i, v)| (i, action, v.clone())));
        }
    }
    rules.sort_by_key(|(i, _, _)| *i);
    rules.into_iter().map(|(_, a, v)| (a, v)).collect()
}

/// Clap cannot tell `run -- CMD` from `run SCRIPT`; the trailing arguments are always
/// the tail of argv, so look at what precedes them.
fn follows_dash_dash(tail_len: usize) -> bool {
    let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
    raw.len()
        .checked_sub(tail_len + 1)
        .is_some_and(|i| i > 0 && raw[i] == "--")
}
