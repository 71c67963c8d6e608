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
