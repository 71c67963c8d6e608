//! What Vectra Guard itself says on stderr: one prefix (`vectraguard: error: …`,
//! `warning:`, `note:`) everywhere, coloured only on a terminal and never with
//! `NO_COLOR` set (anstream strips the styles otherwise, as clap's own output does).

use anstyle::{AnsiColor, Style};

use vg_session::diag::{ERROR, WARNING};
pub use vg_session::diag::{error, note, warning};

const GOOD: Style = AnsiColor::Green.on_default().bold();
const DIM: Style = Style::new().dimmed();

/// `text` in the colour of how things stand, for stdout: styled only when stdout
/// is a terminal that may have colour. (Output written through a plain writer, as
/// `logs show` does so that `--stdout` stays byte-exact, is never stripped, hence
/// the check here.)
pub fn status(text: &str, state: State) -> String {
    let style = match state {
        State::Good => GOOD,
        State::Bad => ERROR,
        State::Warn => WARNING,
        State::Plain => return text.to_owned(),
    };
    if anstream::AutoStream::choice(&std::io::stdout()) == anstream::ColorChoice::Never {
        return text.to_owned();
    }
    format!("{style}{text}{style:#}")
}

/// How a status should look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Good,
    Bad,
    Warn,
    Plain,
}

/// Whether the session line is wanted: `--quiet` or `VECTRAGUARD_QUIET=1` turn it off.
pub fn quiet(flag: bool) -> bool {
    flag || std::env::var_os("VECTRAGUARD_QUIET").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Prints, when dropped, the line that names a recorded session and how to look at
/// it. A guard rather than a call at the end, so that every way out of a recorded
/// run (the command's exit, a limit, a failure after the record was created) ends
/// with it, and after the terminal's raw mode, dropped earlier, has been undone.
pub struct SessionLine {
    id: String,
    quiet: bool,
}

impl SessionLine {
    pub fn new(id: &str, quiet: bool) -> Self {
        Self {
            id: id.to_owned(),
            quiet,
        }
    }
}

impl Drop for SessionLine {
    fn drop(&mut self) {
        if !self.quiet {
            anstream::eprintln!("{DIM}{}{DIM:#}", session_line(&self.id));
        }
    }
}

/// `recorded as session-… · vectraguard logs show SUFFIX`: the random suffix is what
/// a person can type, and `logs` resolves it (or says which sessions share it).
pub fn session_line(id: &str) -> String {
    let short = id.rsplit('-').next().unwrap_or(id);
    format!("vectraguard: recorded as {id} · vectraguard logs show {short}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_line_names_the_id_and_the_short_form() {
        assert_eq!(
            session_line("session-20251219T101053Z-9af4c3"),
            "vectraguard: recorded as session-20251219T101053Z-9af4c3 · vectraguard logs show 9af4c3"
        );
    }
}
