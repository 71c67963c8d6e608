//! `vectraguard logs`: list, show, follow, replay, verify and remove the session
//! records kept under `$VECTRAGUARD_HOME/logs/` (default
//! `~/.vectraguard/logs/`), on top of the `vg-records` library.
//!
//! Exit statuses: 0 on success; 1 when `verify` finds the records tampered
//! with; 125 when the command itself fails (unknown or ambiguous session,
//! unreadable records, bad flags), with an error saying what to do next.

mod follow;
mod format;
mod list;
mod manage;
mod network;
mod replay;
mod show;
mod summary;
mod views;

use std::io::{self, Write};
use std::time::{Duration, SystemTime};

use anyhow::{Result, anyhow};
use clap::{Args, Subcommand};
use vg_records::{RecordsError, SessionStore, Status};

use crate::EXIT_FAILURE;

/// Exit status of `logs verify` when the records do not match their chain.
pub const EXIT_TAMPERED: i32 = 1;

#[derive(Debug, Subcommand)]
pub enum LogsCommand {
    /// List recorded sessions, oldest first (the newest is at the bottom)
    #[command(
        visible_alias = "ls",
        after_help = "On a terminal, only the newest 20 are shown unless --all.\n\nExamples:\n  vectraguard logs list\n  vectraguard logs list --agent codex --since 2d\n  vectraguard logs list --status interrupted --json"
    )]
    List(ListArgs),
    /// Show a session: its metadata and commands, or one of its files
    #[command(
        after_help = "SESSION is `last` (the newest session), a session id\n(session-20251219T101053Z-9af4c3), the id without `session-`, a session name\n(the newest with that name), or a unique prefix or suffix of the id (9af4c3).\n\nExamples:\n  vectraguard logs show 20251219T1010\n  vectraguard logs show 20251219T1010 --stdout > out.txt   # the exact bytes\n  vectraguard logs show 20251219T1010 --events --json\n  vectraguard logs show 20251219T1010 --follow      # commands as they run"
    )]
    Show(ShowArgs),
    /// Play back the terminal of a session run with a terminal (tty.cast)
    #[command(
        after_help = "Writes what the terminal showed to stdout, with the recorded pauses; keystrokes\nare not replayed. tty.cast is asciicast v2, so `asciinema play` and other\nasciicast players can play it too.\n\nExamples:\n  vectraguard logs replay 20251219T1010\n  vectraguard logs replay 20251219T1010 --speed 2 --idle-limit 1\n  vectraguard logs replay 20251219T1010 --speed 1000 > screen.txt"
    )]
    Replay(ReplayArgs),
    /// Check that a session's records are exactly as recorded (--all: every session, against the ledger)
    #[command(
        after_help = "With --all, also checks the ledger (ledger.log in the records folder), which\nchains every session's start, final head and removal, and names each session\nfolder deleted, replaced or rewritten outside Vectra Guard, and each folder not\nin the ledger. It prints the ledger's head: keep it elsewhere and give it back\nwith --anchor to catch the ledger itself being rewritten.\n\nExit status: 0 when the records are intact, 1 when a file was changed, cut\nshort or removed (each problem is named with its file and line or byte), 125\nwhen the session cannot be found or read.\n\nExamples:\n  vectraguard logs verify last\n  vectraguard logs verify --all\n  vectraguard logs verify --all --anchor 3f9a…c2"
    )]
    Verify(VerifyArgs),
    /// Remove the records of one or more sessions
    #[command(
        visible_alias = "remove",
        after_help = "Every SESSION is resolved first: if one is unknown, ambiguous or still running,\nnothing is removed."
    )]
    Rm(RmArgs),
    /// Remove the records of sessions that ended more than DURATION ago
    #[command(
        after_help = "Running sessions are never removed. A session counts from its end; one whose\nrecord was never finished, from its start; a damaged folder, from the time in\nits name.\n\nExamples:\n  vectraguard logs prune --older-than 30d\n  vectraguard logs prune --older-than 1w --dry-run"
    )]
    Prune(PruneArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only sessions of this agent
    #[arg(long, value_name = "AGENT")]
    pub agent: Option<String>,

    /// Only sessions with this name
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,

    /// Only sessions started in the last DURATION (45s, 90m, 12h, 2d, 1w) or since a
    /// time (2025-12-19, 2025-12-19T10:00:00Z)
    #[arg(long, value_name = "DURATION|TIME", value_parser = parse_since)]
    pub since: Option<SystemTime>,

    /// Only sessions in this state: running, exited, signalled, timeout,
    /// failed-to-start, interrupted, or damaged (unreadable metadata)
    #[arg(long, value_name = "STATUS", value_parser = parse_status_filter)]
    pub status: Option<StatusFilter>,

    /// Print a JSON array of sessions instead of a table
    #[arg(long)]
    pub json: bool,

    /// Show only the newest N sessions (on a terminal the default is 20)
    #[arg(long, short = 'n', value_name = "N", conflicts_with = "all")]
    pub limit: Option<usize>,

    /// Show every session, also on a terminal
    #[arg(long)]
    pub all: bool,

    /// Do not cut long commands, names and agents to fit the terminal
    #[arg(long)]
    pub no_trunc: bool,
}

/// `--status`: a recorded state, or the folders whose metadata is damaged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFilter {
    Is(Status),
    Damaged,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The session: last, its id, its name, or a unique prefix or suffix of the id
    pub session: String,

    /// Print the commands run in the sandbox (commands.log)
    #[arg(long)]
    pub commands: bool,

    /// Print the session's events: network decisions, limits, failures (events.jsonl)
    #[arg(long)]
    pub events: bool,

    /// Print only the network events
    #[arg(long, conflicts_with = "events")]
    pub network: bool,

    /// Print only the approval events: what the gate held (--ask), who decided, how
    /// fast
    #[arg(long, conflicts_with_all = ["events", "network"])]
    pub approvals: bool,

    /// Print only the violations: file accesses the view refused and system calls
    /// seccomp refused, each with the program that tried
    #[arg(long, conflicts_with_all = ["events", "network", "approvals"])]
    pub violations: bool,

    /// Print the recorded stdout, byte for byte
    #[arg(long, conflicts_with_all = ["commands", "events", "network", "approvals", "violations", "json", "stderr"])]
    pub stdout: bool,

    /// Print the recorded stderr, byte for byte
    #[arg(long, conflicts_with_all = ["commands", "events", "network", "approvals", "violations", "json"])]
    pub stderr: bool,

    /// Print JSON: the metadata, plus "commands" and "events" arrays when asked for;
    /// with --follow, one JSON object per line
    #[arg(long)]
    pub json: bool,

    /// Keep printing what a running session writes until it ends (the commands,
    /// unless --stdout, --stderr, --events or --network)
    #[arg(long, short = 'f')]
    pub follow: bool,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The session: last, its id, its name, or a unique prefix or suffix of the id
    pub session: String,

    /// Play N times as fast (0.5: half as fast); N must be greater than 0
    #[arg(
        long,
        value_name = "N",
        default_value = "1",
        value_parser = replay::parse_speed,
        allow_negative_numbers = true
    )]
    pub speed: f64,

    /// Shorten every pause longer than SECONDS to SECONDS (before --speed applies)
    #[arg(
        long,
        value_name = "SECONDS",
        value_parser = replay::parse_idle_limit,
        allow_negative_numbers = true
    )]
    pub idle_limit: Option<f64>,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The session: last, its id, its name, or a unique prefix or suffix of the id
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub session: Option<String>,

    /// Every session, and the ledger that chains them
    #[arg(long)]
    pub all: bool,

    /// A ledger head printed by an earlier `--all` (64 hex digits), which the
    /// ledger must still hold
    #[arg(long, value_name = "HEAD", conflicts_with = "session", value_parser = parse_anchor)]
    pub anchor: Option<[u8; 32]>,

    /// Print the result as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RmArgs {
    /// The sessions: last, ids, names, or unique prefixes or suffixes of ids
    #[arg(required = true, value_name = "SESSION")]
    pub sessions: Vec<String>,

    /// Remove a session even while it is running (its further records are lost)
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Remove sessions that ended more than DURATION ago (45s, 90m, 12h, 30d, 2w, 1h30m)
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, required = true)]
    pub older_than: Duration,

    /// Only print what would be removed
    #[arg(long)]
    pub dry_run: bool,
}

fn parse_anchor(input: &str) -> Result<[u8; 32], String> {
    vg_records::layout::hex_decode_32(input.trim())
        .ok_or_else(|| "expected the 64 lowercase hex digits of a ledger head".to_owned())
}

fn parse_since(input: &str) -> Result<SystemTime, String> {
    vg_records::parse_since(input, SystemTime::now()).map_err(|e| e.to_string())
}

fn parse_duration(input: &str) -> Result<Duration, String> {
    vg_records::parse_duration(input).map_err(|e| e.to_string())
}

fn parse_status_filter(input: &str) -> Result<StatusFilter, String> {
    if input == "damaged" {
        return Ok(StatusFilter::Damaged);
    }
    input.parse().map(StatusFilter::Is).map_err(|_| {
        let mut names: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
        names.push("damaged");
        format!(
            "unknown status {input:?}; expected one of {}",
            names.join(", ")
        )
    })
}

pub fn run(cmd: LogsCommand) -> i32 {
    let result = store().and_then(|store| {
        let stdout = io::stdout();
        let mut out = io::BufWriter::new(stdout.lock());
        let code = match cmd {
            LogsCommand::List(args) => list::list(&store, &args, &mut out),
            LogsCommand::Show(args) => show::show(&store, &args, &mut out),
            LogsCommand::Replay(args) => replay::replay(&store, &args, &mut out),
            LogsCommand::Verify(args) => manage::verify(&store, &args, &mut out),
            LogsCommand::Rm(args) => manage::remove(&store, &args, &mut out),
            LogsCommand::Prune(args) => manage::prune(&store, &args, &mut out),
        };
        // What was printed before a failure still goes out, before the error.
        let flushed = out.flush();
        let code = code?;
        flushed?;
        Ok(code)
    });
    match result {
        Ok(code) => code,
        // `logs show --stdout | head`: the reader has all it wanted.
        Err(e) if is_broken_pipe(&e) => 0,
        Err(e) => {
            crate::report::error(format_args!("{}", vg_session::diag::chain(&e)));
            EXIT_FAILURE
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// The records folder, for reading: nothing is created.
fn store() -> Result<SessionStore> {
    Ok(SessionStore::at(&vg_session::home::records_root()?))
}

/// A records error as the user should read it: what failed and what to do.
fn explain(e: RecordsError) -> anyhow::Error {
    match &e {
        RecordsError::DamagedMetadata { path, .. } => {
            let id = path
                .parent()
                .and_then(|d| d.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            anyhow!(
                "{e}; the folder can still be checked with `vectraguard logs verify {id}` \
                 or removed with `vectraguard logs rm {id}`"
            )
        }
        RecordsError::ReadRoot { .. } => anyhow!(
            "{e}; check the folder's permissions, or set VECTRAGUARD_HOME to the folder \
             that holds the logs/ you want"
        ),
        RecordsError::Read { source, .. } if source.kind() == io::ErrorKind::PermissionDenied => {
            anyhow!("{e}; session records are readable only by the user who recorded them")
        }
        _ => anyhow::Error::new(e),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn parse(args: &[&str]) -> Result<LogsCommand, clap::Error> {
        let argv = std::iter::once("vectraguard").chain(args.iter().copied());
        Cli::try_parse_from(argv).map(|cli| match cli.command {
            Command::Logs(cmd) => cmd.0,
            other => panic!("parsed as {other:?}"),
        })
    }

    #[test]
    fn status_filter_accepts_every_state_and_names_them_when_wrong() {
        for st in Status::ALL {
            assert_eq!(parse_status_filter(st.as_str()), Ok(StatusFilter::Is(st)));
        }
        assert_eq!(parse_status_filter("damaged"), Ok(StatusFilter::Damaged));
        let e = parse_status_filter("done").unwrap_err();
        assert!(
            e.contains(
                "running, exited, signalled, timeout, failed-to-start, interrupted, damaged"
            ),
            "{e}"
        );
    }

    #[test]
    fn flags_parse_and_conflicts_are_rejected() {
        let Ok(LogsCommand::List(l)) =
            parse(&["logs", "list", "--since", "2d", "--status", "exited"])
        else {
            panic!("list did not parse");
        };
        assert!(l.since.is_some_and(|t| t < SystemTime::now()));
        assert!(parse(&["logs", "list", "--since", "yesterday"]).is_err());
        assert!(parse(&["logs", "show", "x", "--stdout", "--json"]).is_err());
        assert!(parse(&["logs", "show", "x", "--stdout", "--stderr"]).is_err());
        assert!(parse(&["logs", "show", "x", "--events", "--network"]).is_err());
        assert!(parse(&["logs", "show", "x", "--stderr", "--follow"]).is_ok());
        assert!(parse(&["logs", "verify"]).is_err());
        assert!(parse(&["logs", "verify", "x", "--all"]).is_err());
        assert!(parse(&["logs", "verify", "x", "--anchor", &"0".repeat(64)]).is_err());
        assert!(parse(&["logs", "verify", "--all", "--anchor", "abc"]).is_err());
        let Ok(LogsCommand::Verify(v)) =
            parse(&["logs", "verify", "--all", "--anchor", &"0a".repeat(32)])
        else {
            panic!("verify --all did not parse");
        };
        assert_eq!((v.all, v.anchor), (true, Some([0x0a; 32])));
        assert!(parse(&["logs", "rm"]).is_err());
        assert!(parse(&["logs", "prune"]).is_err());
        let Ok(LogsCommand::Prune(p)) = parse(&["logs", "prune", "--older-than", "1h30m"]) else {
            panic!("prune did not parse");
        };
        assert_eq!(p.older_than, Duration::from_secs(5400));
        let Ok(LogsCommand::Replay(r)) = parse(&["logs", "replay", "x"]) else {
            panic!("replay did not parse");
        };
        assert_eq!((r.speed, r.idle_limit), (1.0, None));
        let Ok(LogsCommand::Replay(r)) = parse(&[
            "logs",
            "replay",
            "x",
            "--speed",
            "2.5",
            "--idle-limit",
            "0.5",
        ]) else {
            panic!("replay did not parse");
        };
        assert_eq!((r.speed, r.idle_limit), (2.5, Some(0.5)));
        assert!(parse(&["logs", "replay", "x", "--speed", "0"]).is_err());
        assert!(parse(&["logs", "replay", "x", "--idle-limit", "-1"]).is_err());
        assert!(parse(&["logs", "replay"]).is_err());
    }

    #[test]
    fn damaged_metadata_errors_say_what_still_works() {
        let e = explain(RecordsError::DamagedMetadata {
            path: "/r/logs/session-20251219T101053Z-9af4c3/metadata.json".into(),
            reason: "the file is missing".into(),
        });
        let msg = format!("{e:#}");
        assert!(msg.contains("metadata.json is damaged"), "{msg}");
        assert!(
            msg.contains("`vectraguard logs verify session-20251219T101053Z-9af4c3`"),
            "{msg}"
        );
        assert!(
            msg.contains("`vectraguard logs rm session-20251219T101053Z-9af4c3`"),
            "{msg}"
        );
    }
}
