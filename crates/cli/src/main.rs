//! `vectraguard`: a thin binary over the library crates.

mod cli;
mod doctor;
mod host;
mod image;
mod layers;
mod limits;
mod logs;
mod run;
mod session;

use clap::Parser;

use cli::{Cli, Command, SandboxCommand};

/// Exit status when Vectra Guard itself fails (bad flag, layer unavailable), as Docker.
pub const EXIT_FAILURE: i32 = 125;

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_FAILURE } else { 0 };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let code = match cli.command {
        Command::Sandbox(SandboxCommand::Run(mut args)) => {
            args.after_dash_dash = follows_dash_dash(args.args.len());
            run::run(*args)
        }
        Command::Sandbox(SandboxCommand::Shell(args)) => run::shell(*args),
        Command::Logs(cmd) => logs::run(cmd),
        Command::Image(cmd) => image::run(cmd),
        Command::Doctor => doctor::doctor(),
    };
    std::process::exit(code);
}

/// Clap cannot tell `run -- CMD` from `run SCRIPT`; the trailing arguments are always
/// the tail of argv, so look at what precedes them.
fn follows_dash_dash(tail_len: usize) -> bool {
    let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
    raw.len()
        .checked_sub(tail_len + 1)
        .is_some_and(|i| i > 0 && raw[i] == "--")
}
