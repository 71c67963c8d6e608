//! `vectraguard`: a thin binary over the library crates.

mod agent;
mod approvals;
mod cli;
mod dashboard;
mod deferred;
mod doctor;
mod image;
mod learn;
mod live;
mod logs;
mod mcp;
mod persistent;
mod profile;
mod report;
mod request;
mod risk;
mod run;
mod typo;

use clap::{CommandFactory, FromArgMatches};

use cli::{Cli, Command, Deferred, SandboxCommand};

pub use vg_session::exit::EXIT_FAILURE;

fn main() {
    // Started as a container's init (`--backend docker|podman`, recorded): before
    // anything else, with nothing parsed, no thread and no file opened.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if args.first().map(std::ffi::OsString::as_os_str)
        == Some(vg_sandbox::engine_init::MODE.as_ref())
    {
        vg_sandbox::engine_init::main(&args);
    }
    // A gVisor command's terminal (`-t`): a terminal of gVisor's own, made inside.
    if args.first().map(std::ffi::OsString::as_os_str)
        == Some(vg_sandbox::gvisor_terminal::MODE.as_ref())
    {
        vg_sandbox::gvisor_terminal::main(&args);
    }
    // A persistent gVisor sandbox's command launcher (`runsc exec`): it sets
    // no_new_privs and a filter, then executes the command.
    if args.first().map(std::ffi::OsString::as_os_str)
        == Some(vg_sandbox::gvisor_launch::MODE.as_ref())
    {
        vg_sandbox::gvisor_launch::main(&args);
    }
    // A persistent gVisor sandbox's first process (`--backend gvisor`): it only
    // keeps the sandbox, inside gVisor, until runsc is told to end it.
    if args.first().map(std::ffi::OsString::as_os_str)
        == Some(vg_backend::gvisor::exec::PAUSE_MODE.as_ref())
    {
        vg_backend::gvisor::exec::pause();
    }
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => std::process::exit(typo::report(&e)),
    };
    let code = match cli.command {
        Command::Sandbox(Deferred(SandboxCommand::Run(mut args))) => {
            args.after_dash_dash = follows_dash_dash(args.args.len());
            args.options.rules_in_order = rules_in_order(&matches);
            run::run(*args)
        }
        Command::Sandbox(Deferred(SandboxCommand::Shell(args))) => {
            let Deferred(mut args) = *args;
            args.options.rules_in_order = rules_in_order(&matches);
            run::shell(args)
        }
        Command::Sandbox(Deferred(SandboxCommand::Create(args))) => {
            let Deferred(mut args) = *args;
            args.options.rules_in_order = rules_in_order(&matches);
            persistent::create(args)
        }
        Command::Sandbox(Deferred(SandboxCommand::Exec(Deferred(args)))) => persistent::exec(args),
        Command::Sandbox(Deferred(SandboxCommand::Ls(args))) => persistent::ls(&args),
        Command::Sandbox(Deferred(SandboxCommand::Stop(args))) => persistent::stop(&args),
        Command::Sandbox(Deferred(SandboxCommand::Rm(args))) => persistent::rm(&args),
        Command::Mcp(Deferred(cli::McpCommand::Serve(args))) => mcp::serve(args),
        Command::Agent(Deferred(cli::AgentCommand::Start(mut args))) => {
            args.options.rules_in_order = rules_in_order(&matches);
            agent::start(*args)
        }
        Command::Logs(Deferred(cmd)) => logs::run(cmd),
        Command::Image(Deferred(cmd)) => image::run(cmd),
        Command::Profile(Deferred(cmd)) => profile::run(cmd),
        Command::Doctor(args) => doctor::doctor(args.json),
        Command::Risk(Deferred(cmd)) => risk::run(cmd),
        Command::Ps(Deferred(args)) => live::ps(args),
        Command::Stop(Deferred(args)) => live::stop(args),
        Command::Net(Deferred(cmd)) => live::net(cmd),
        Command::Approvals(Deferred(args)) => approvals::approvals(args),
        Command::Approve(Deferred(args)) => approvals::approve(args),
        Command::Deny(Deferred(args)) => approvals::deny(args),
        Command::Dashboard(args) => dashboard::serve(&args),
        Command::Completions(args) => completions(args.shell),
        Command::Man => man(),
    };
    std::process::exit(code);
}

/// `vectraguard completions SHELL`: generated from the same definitions that parse.
fn completions(shell: clap_complete::Shell) -> i32 {
    deferred::define_everything();
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "vectraguard", &mut out);
    write_stdout(&out, "the completion script")
}

/// `vectraguard man`: one page for the command and all its subcommands.
fn man() -> i32 {
    deferred::define_everything();
    let cmd = Cli::command();
    let mut out = Vec::new();
    if let Err(e) = render_man(&cmd, &mut out) {
        report::error(format!("cannot render the manual page: {e}"));
        return EXIT_FAILURE;
    }
    write_stdout(&out, "the manual page")
}

/// The page of `cmd`, then a section per subcommand (recursively), so that every
/// option of `sandbox run` is in `man vectraguard`.
fn render_man(cmd: &clap::Command, out: &mut Vec<u8>) -> std::io::Result<()> {
    clap_mangen::Man::new(cmd.clone()).render(out)?;
    fn sections(cmd: &clap::Command, path: &str, out: &mut Vec<u8>) -> std::io::Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            let name = format!("{path} {}", sub.get_name());
            let page = clap_mangen::Man::new(sub.clone().name(name.clone()));
            out.extend_from_slice(format!(".SH \"{}\"\n", name.to_uppercase()).as_bytes());
            page.render_description_section(out)?;
            page.render_options_section(out)?;
            sections(sub, &name, out)?;
        }
        Ok(())
    }
    sections(cmd, "vectraguard", out)
}

fn write_stdout(bytes: &[u8], what: &str) -> i32 {
    use std::io::Write;
    match std::io::stdout().lock().write_all(bytes) {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            report::error(format!("cannot write {what}: {e}"));
            EXIT_FAILURE
        }
    }
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
