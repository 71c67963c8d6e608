//! `vectraguard sandbox run` and `sandbox shell`: flags to a request
//! (`request.rs`), the session library plans and runs it, and the outcome is printed
//! here and becomes the exit status.

use std::path::Path;
use vg_records::quote::escape_hidden;

use vg_sandbox::Termination;
use vg_session::{Outcome, Plan};

use crate::EXIT_FAILURE;
use crate::cli::{RunArgs, ShellArgs};
use crate::report::{SessionLine, quiet};

pub fn run(args: RunArgs) -> i32 {
    run_inner(&args)
}

/// `vectraguard sandbox shell`: `sandbox run -t SHELL`, refusing to start without a
/// terminal unless `-T` asks for a shell that reads stdin.
pub fn shell(args: ShellArgs) -> i32 {
    let stdin_is_terminal = vg_sandbox::terminal::is_terminal(std::io::stdin());
    if !args.no_tty && !stdin_is_terminal {
        crate::report::error(format_args!(
            "`sandbox shell` needs a terminal on stdin; pass -T/--no-tty to run the shell reading commands from stdin"
        ));
        return EXIT_FAILURE;
    }
    // The host's tools are what a sandbox without an image sees; an image is only
    // sure to have /bin/sh.
    let shell = args.shell.unwrap_or_else(|| {
        if args.options.image.is_none() && Path::new("/bin/bash").exists() {
            "/bin/bash".to_owned()
        } else {
            "/bin/sh".to_owned()
        }
    });
    run_inner(&RunArgs {
        options: args.options,
        args: vec![shell],
        tty: !args.no_tty,
        after_dash_dash: true,
        shell: true,
    })
}

/// Plans, starts and waits for the session; prints why it ended when a limit ended
/// it, then the line naming its record; returns the exit status.
fn run_inner(args: &RunArgs) -> i32 {
    run_with(args, |_| {})
}

/// [`run_inner`], with the request adjusted by `adjust` before it is planned (what
/// `agent start` adds: its preset and prompt).
pub fn run_with(args: &RunArgs, adjust: impl FnOnce(&mut vg_session::Request)) -> i32 {
    let quiet = quiet(args.options.quiet);
    let learning = match crate::learn::before(&args.options) {
        Ok(learning) => learning,
        Err(e) => {
            crate::report::error(format_args!("{}", vg_session::diag::chain(&e)));
            return crate::EXIT_FAILURE;
        }
    };
    let result = crate::request::request(args)
        .map_err(vg_session::Error::from)
        .and_then(|mut request| {
            adjust(&mut request);
            let mut pull = crate::image::pull_for_run;
            Plan::new(&request, &mut vg_session::image::from_store(&mut pull))
        })
        .inspect(|_| {
            if let Some(learning) = &learning {
                learning.warn();
            }
        })
        .and_then(vg_session::start)
        .and_then(vg_session::Running::wait);
    match result {
        Ok(outcome) => {
            // Printed last, as the session's final line.
            let _line = outcome
                .session
                .as_deref()
                .map(|id| SessionLine::new(id, quiet));
            report_outcome(&outcome);
            if let (Some(learning), Some(learned)) = (&learning, &outcome.learned)
                && let Err(e) = learning.after(learned)
            {
                crate::report::error(format_args!("{}", vg_session::diag::chain(&e)));
                return crate::EXIT_FAILURE;
            }
            outcome.exit_code
        }
        Err(e) => {
            drop(e.session.as_deref().map(|id| SessionLine::new(id, quiet)));
            crate::report::error(format_args!("{}", vg_session::diag::chain(&e.error)));
            e.code
        }
    }
}

/// Says on stderr why the command ended when a limit ended it.
fn report_outcome(outcome: &Outcome) {
    if let Termination::ExecFailed(errno) = outcome.termination {
        match &outcome.denied {
            Some(who) => eprintln!(
                "vectraguard: {}: the approval gate denied it {who} (see `vectraguard logs show … --approvals`)",
                outcome.program
            ),
            None => eprintln!(
                "vectraguard: {}: {}",
                outcome.program,
                std::io::Error::from_raw_os_error(errno)
            ),
        }
    }
    if outcome.timed_out
        && let Some(t) = outcome.timeout
    {
        eprintln!("vectraguard: the session reached its timeout of {t:?} and was stopped");
    }
    if outcome.stopped && !outcome.timed_out {
        eprintln!("vectraguard: the session was stopped by `vectraguard stop`");
    }
    let hits = &outcome.cgroup_hits;
    if hits.oom_kills > 0 {
        eprintln!(
            "vectraguard: the memory limit was reached: {} process(es) killed by the OOM killer",
            hits.oom_kills
        );
    }
    if let Some(hit) = &outcome.memory_watchdog {
        use vg_policy::limits::human_size;
        eprintln!(
            "vectraguard: the memory limit of {} was reached: the supervisor's watchdog measured {} in {} process(es) and killed the sandbox (raise it with --memory SIZE, or --memory unlimited)",
            human_size(hit.limit),
            human_size(hit.measured),
            hit.processes
        );
    }
    match (hits.pids_max, outcome.gvisor_host_pids) {
        (0, _) => {}
        (n, Some(cap)) => eprintln!(
            "vectraguard: gVisor's own host tasks reached their cap of {cap} ({n} refused): gVisor could not make a thread or process of its own, and the sandbox ended; run fewer processes at once, give the host more pids (kernel.pid_max), or use --backend native"
        ),
        (n, None) => {
            eprintln!("vectraguard: the process limit was reached {n} time(s) (fork failed)")
        }
    }
    for hit in &outcome.limit_hits {
        eprintln!("vectraguard: {} is full (--disk limit)", hit.detail);
    }
    if let Some(line) = violations_line(
        &outcome.violations,
        outcome.session.as_deref(),
        outcome.learned.is_none(),
    ) {
        eprintln!("{line}");
    }
}

/// A path in the end-of-run line: at most this many characters, the rest `…` (a
/// command may try paths of 4 KiB; the record has them whole).
const PATH_SHOWN: usize = 120;

fn clipped(text: &str) -> String {
    if text.chars().count() <= PATH_SHOWN {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(PATH_SHOWN - 1).collect();
    out.push('…');
    out
}

/// The end-of-run line about refused accesses: `vectraguard: 3 accesses refused:
/// ~/.cache/foo (read), … (see `logs show ID --violations`; run with --learn NAME
/// to build a profile)`.
fn violations_line(
    summary: &vg_session::record::observe::Summary,
    session: Option<&str>,
    hint_learning: bool,
) -> Option<String> {
    const SHOWN: usize = 5;
    if summary.total == 0 {
        return None;
    }
    let home = vg_session::host::invoker_home();
    let mut shown: Vec<String> = summary
        .refused
        .iter()
        .take(SHOWN)
        .map(|(r, _)| match r.access.as_str() {
            "syscall" => format!("{} (system call)", escape_hidden(&r.what)),
            access => format!(
                "{} ({access})",
                clipped(&crate::learn::tilde(Path::new(&r.what), home.as_deref()))
            ),
        })
        .collect();
    let distinct = summary.refused.len() as u64 + summary.not_recorded;
    if distinct > SHOWN as u64 {
        shown.push(format!("and {} more", distinct - SHOWN as u64));
    }
    let noun = if summary.total == 1 {
        "access"
    } else {
        "accesses"
    };
    let mut then = Vec::new();
    if let Some(id) = session {
        then.push(format!("see `vectraguard logs show {id} --violations`"));
    }
    if hint_learning {
        then.push("run with --learn NAME to build a profile".to_owned());
    }
    let then = if then.is_empty() {
        String::new()
    } else {
        format!(" ({})", then.join("; "))
    };
    Some(format!(
        "vectraguard: {} {noun} refused: {}{then}",
        summary.total,
        shown.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use vg_session::record::observe::{Refused, Summary};

    /// Red team: the path a command tried is its own text; the end-of-run line must not
    /// carry its escape sequences or line breaks to the terminal (a forged
    /// "vectraguard:" line, a cleared screen, a changed title).
    #[test]
    fn the_end_of_run_line_escapes_what_the_command_chose() {
        let hostile = "/usr/\x1b[2J\x1b]0;PWNED\x07\r\nvectraguard: all good\u{202e}";
        let summary = Summary {
            refused: vec![
                (
                    Refused {
                        layer: "read-only".into(),
                        what: hostile.into(),
                        access: "create".into(),
                    },
                    1,
                ),
                (
                    Refused {
                        layer: "seccomp".into(),
                        what: "mount\x1b[31m".into(),
                        access: "syscall".into(),
                    },
                    1,
                ),
            ],
            total: 2,
            not_recorded: 0,
        };
        let line = violations_line(&summary, Some("s"), false).unwrap();
        let long = Summary {
            refused: vec![(
                Refused {
                    layer: "read-only".into(),
                    what: format!("/usr/{}", "a".repeat(4000)),
                    access: "create".into(),
                },
                1,
            )],
            total: 1,
            not_recorded: 0,
        };
        let short = violations_line(&long, None, false).unwrap();
        assert!(short.chars().count() < 200, "{short}");
        assert!(short.contains("a… (create)"), "{short}");
        assert!(
            !line.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{line:?}"
        );
        assert!(line.contains("\\u{1b}[2J"), "{line}");
        assert!(line.contains("\\r\\n"), "{line}");
    }
}
