//! What Vectra Guard itself says on stderr while it plans and runs a session: one
//! prefix (`vectraguard: error: …`, `warning:`, `note:`) everywhere, coloured only on
//! a terminal and never with `NO_COLOR` set (anstream strips the styles otherwise).
//! The front end prints its own lines with the same functions.

use std::fmt::Display;

use anstyle::{AnsiColor, Style};

pub const ERROR: Style = AnsiColor::Red.on_default().bold();
pub const WARNING: Style = AnsiColor::Yellow.on_default().bold();
const NOTE: Style = AnsiColor::Cyan.on_default().bold();

pub fn error(message: impl Display) {
    anstream::eprintln!("vectraguard: {ERROR}error:{ERROR:#} {message}");
}

pub fn warning(message: impl Display) {
    anstream::eprintln!("vectraguard: {WARNING}warning:{WARNING:#} {message}");
}

pub fn note(message: impl Display) {
    anstream::eprintln!("vectraguard: {NOTE}note:{NOTE:#} {message}");
}

/// An error and its causes on one line, `outer: cause: cause`, as `{:#}` prints
/// them, but without a cause whose text the line already holds: many errors quote
/// their source in their own message (`cannot write X: {source}`) and report it as
/// their source too, which `{:#}` would print twice.
pub fn chain(error: &anyhow::Error) -> Chain<'_> {
    Chain(error)
}

/// See [`chain`].
pub struct Chain<'a>(&'a anyhow::Error);

impl Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&chained(self.0.chain().map(ToString::to_string)))
    }
}

/// The messages joined by `: `, each left out when the line so far contains it (pure).
fn chained(messages: impl IntoIterator<Item = String>) -> String {
    let mut line = String::new();
    for message in messages {
        if line.is_empty() {
            line = message;
        } else if !message.is_empty() && !line.contains(&message) {
            line.push_str(": ");
            line.push_str(&message);
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_quoted_is_not_repeated() {
        let quoted = ["cannot write a: denied".to_owned(), "denied".to_owned()];
        assert_eq!(chained(quoted), "cannot write a: denied");
        let new = ["cannot start".to_owned(), "no such file".to_owned()];
        assert_eq!(chained(new), "cannot start: no such file");
        assert_eq!(chained(Vec::new()), "");
    }

    #[test]
    fn chain_prints_a_real_error_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("cannot write x: {source}")]
        struct Quoting {
            source: std::io::Error,
        }
        let io = std::io::Error::from_raw_os_error(libc::EACCES);
        let text = io.to_string();
        let error = anyhow::Error::new(Quoting { source: io }).context("the record");
        let line = chain(&error).to_string();
        assert_eq!(line, format!("the record: cannot write x: {text}"));
        // What `{:#}` alone prints, for contrast: the cause twice.
        assert_eq!(format!("{error:#}").matches(&text).count(), 2);
    }
}
