//! Parse errors as every other error (`vectraguard: error: …`), with a pointer for
//! the commands people type by habit from other tools (`vectraguard run` is
//! `vectraguard sandbox run`), which clap's similarity check cannot guess.

use clap::error::{ContextKind, ContextValue, ErrorKind};

use crate::EXIT_FAILURE;

/// Top-level words that are not commands, and the command that does what was meant.
const HABITS: &[(&str, &str)] = &[
    ("run", "vectraguard sandbox run"),
    ("shell", "vectraguard sandbox shell"),
    ("exec", "vectraguard sandbox run -- CMD"),
    ("sh", "vectraguard sandbox shell"),
    ("list", "vectraguard logs list"),
    ("ls", "vectraguard logs list"),
    ("show", "vectraguard logs show"),
    ("replay", "vectraguard logs replay"),
    ("verify", "vectraguard logs verify"),
    (
        "rm",
        "vectraguard logs rm (sessions) or vectraguard image rm (images)",
    ),
    ("prune", "vectraguard logs prune"),
    ("pull", "vectraguard image pull"),
    ("images", "vectraguard image ls"),
    ("load", "vectraguard image load"),
    ("import", "vectraguard image import"),
    ("inspect", "vectraguard image inspect"),
    ("check", "vectraguard doctor"),
    ("profiles", "vectraguard profile ls"),
    ("learn", "vectraguard sandbox run --learn NAME -- CMD"),
];

/// Prints a clap error (help and version go to stdout as usual) and returns the
/// exit status: 0 for help and version, 125 for a usage error.
pub fn report(e: &clap::Error) -> i32 {
    if !e.use_stderr() {
        let _ = e.print();
        return 0;
    }
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        // `vectraguard logs`: the help is the answer, not an error message.
        let _ = e.print();
        return EXIT_FAILURE;
    }
    // clap's own rendering starts with a styled "error:"; ours adds the prefix
    // every other error has. anstream drops the styles off a terminal or with NO_COLOR.
    anstream::eprint!("vectraguard: {}", e.render().ansi());
    if let Some(hint) = hint(e) {
        anstream::eprintln!("\n  tip: did you mean `{hint}`?");
    }
    EXIT_FAILURE
}

fn hint(e: &clap::Error) -> Option<&'static str> {
    if e.kind() != ErrorKind::InvalidSubcommand {
        return None;
    }
    let Some(ContextValue::String(word)) = e.get(ContextKind::InvalidSubcommand) else {
        return None;
    };
    habit(word)
}

fn habit(word: &str) -> Option<&'static str> {
    HABITS.iter().find(|(w, _)| *w == word).map(|(_, cmd)| *cmd)
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;
    use crate::cli::Cli;

    #[test]
    fn habits_point_to_real_commands() {
        for (word, _) in HABITS {
            let e = Cli::try_parse_from(["vectraguard", word]).unwrap_err();
            assert_eq!(
                e.kind(),
                ErrorKind::InvalidSubcommand,
                "{word} is a command"
            );
            assert!(hint(&e).is_some(), "{word}");
        }
        // Every pointer names commands that exist.
        crate::deferred::define_everything();
        let cmd = Cli::command();
        for (_, target) in HABITS {
            for alternative in target.split(" or ") {
                let mut words = alternative.split_whitespace().skip(1);
                let mut at = &cmd;
                while let Some(w) = words.next().filter(|w| w.chars().all(char::is_lowercase)) {
                    at = at
                        .find_subcommand(w)
                        .unwrap_or_else(|| panic!("{target}: no {w}"));
                    if at.get_subcommands().next().is_none() {
                        break;
                    }
                }
            }
        }
    }

    #[test]
    fn a_misspelt_option_of_run_is_an_error_with_a_suggestion() {
        let e = Cli::try_parse_from([
            "vectraguard",
            "sandbox",
            "run",
            "--netwrok",
            "none",
            "--",
            "true",
        ])
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnknownArgument);
        assert!(e.to_string().contains("--network"), "{e}");
        // After the script, everything is the script's.
        let ok = Cli::try_parse_from(["vectraguard", "sandbox", "run", "x.sh", "--netwrok"]);
        assert!(ok.is_ok(), "{ok:?}");
    }
}
