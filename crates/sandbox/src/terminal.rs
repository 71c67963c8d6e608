//! The user's terminal while a sandbox has a pseudo-terminal of its own: raw mode on
//! ours (so keys like Ctrl-C reach the sandbox's terminal instead of signalling
//! Vectra Guard), window size passed along, and the original settings restored on
//! every way out — by a guardian process when Vectra Guard itself is killed.

use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::sys;

/// Whether `fd` is a terminal.
pub fn is_terminal(fd: impl AsFd) -> bool {
    sys::is_terminal(fd.as_fd())
}

/// Our terminal (stdin) in raw mode until this is dropped.
#[derive(Debug)]
pub struct RawTerminal {
    saved: libc::termios,
    /// Closing it (on drop, or by our death) tells the guardian to restore.
    guardian: std::io::PipeWriter,
}

impl RawTerminal {
    /// Switches stdin's terminal to raw mode. Call before starting threads: the
    /// guardian is forked.
    pub fn enter() -> io::Result<Self> {
        let stdin = io::stdin();
        let tty = stdin.as_fd();
        let saved = sys::tcgetattr(tty)?;
        let (wait_r, wait_w) = std::io::pipe()?;
        // Stdout, where the relay writes the sandbox's output, gets the modes' reset
        // (as in `drop`) when it is a terminal.
        let stdout = io::stdout();
        let modes_off = sys::is_terminal(stdout.as_fd()).then(|| (stdout.as_fd(), MODES_OFF));
        // SAFETY: `enter`'s contract is to be called before any thread starts (the CLI
        // calls it before spawning the sandbox), so the process has one thread.
        #[allow(unsafe_code)]
        let guardian =
            unsafe { sys::spawn_terminal_guardian(tty, &saved, OwnedFd::from(wait_r), modes_off) };
        guardian?;
        sys::tcsetattr(tty, &sys::raw_termios(&saved))?;
        Ok(Self {
            saved,
            guardian: wait_w,
        })
    }
}

/// Written to the user's terminal when a `-t` session ends: turns off the modes a
/// sandboxed program may have switched on and left on (by exiting mid-screen, being
/// killed, or on purpose): the alternate screen, a hidden cursor, application cursor
/// keys and keypad, mouse and focus reporting, bracketed paste, text attributes.
/// Each is a "mode off" that is harmless when the mode was not on; none moves the
/// cursor or clears the screen, so the shell's prompt and scroll-back stay as they
/// were. It goes to the terminal only, never into the record (the record keeps the
/// sandbox's bytes exactly). A title or a clipboard (OSC 52) already set cannot be
/// taken back by any sequence; they are not listed here.
pub const MODES_OFF: &[u8] = b"\x1b[?1049l\x1b[?1047l\x1b[?25h\x1b[?1l\x1b>\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l\x1b[?1004l\x1b[?2004l\x1b[0m";

impl Drop for RawTerminal {
    fn drop(&mut self) {
        // Stdout, where the relay wrote the sandbox's output: when that is a file,
        // the modes never reached a terminal.
        let mut stdout = io::stdout();
        if sys::is_terminal(stdout.as_fd()) {
            let _ = stdout.write_all(MODES_OFF).and_then(|()| stdout.flush());
        }
        if sys::tcsetattr(io::stdin().as_fd(), &self.saved).is_ok() {
            // Restored: the guardian must not restore again (and flush typed-ahead
            // keys) when its pipe closes.
            let _ = self.guardian.write_all(b"d");
        }
    }
}

/// The settings of the user's terminals on our fds 0-2, put back when this is
/// dropped, or by a guardian process when Vectra Guard is killed first. For runs that
/// hand those fds to the sandbox (`--no-record`): what the command does to their modes
/// (`stty -echo`, raw mode, suspended output) does not outlast the session.
#[derive(Debug, Default)]
pub struct SavedTerminals {
    /// Restored by their `Drop`.
    _terminals: Vec<SavedTerminal>,
}

#[derive(Debug)]
struct SavedTerminal {
    tty: OwnedFd,
    saved: libc::termios,
    guardian: std::io::PipeWriter,
}

impl SavedTerminals {
    /// Saves each distinct terminal among fds 0-2 (none: nothing to do). Call before
    /// starting threads: the guardians are forked.
    pub fn save_stdio() -> io::Result<Self> {
        use std::os::unix::fs::MetadataExt;
        let mut seen = Vec::new();
        let mut saved = Vec::new();
        for fd in [
            io::stdin().as_fd(),
            io::stdout().as_fd(),
            io::stderr().as_fd(),
        ] {
            if !sys::is_terminal(fd) {
                continue;
            }
            let tty = fd.try_clone_to_owned()?;
            let device = std::fs::File::from(tty.try_clone()?).metadata()?.rdev();
            if seen.contains(&device) {
                continue;
            }
            seen.push(device);
            let settings = sys::tcgetattr(tty.as_fd())?;
            let (wait_r, wait_w) = std::io::pipe()?;
            // SAFETY: `save_stdio`'s contract is to be called before any thread starts
            // (the CLI calls it before spawning the sandbox), so the process has one thread.
            #[allow(unsafe_code)]
            let guardian = unsafe {
                sys::spawn_terminal_guardian(tty.as_fd(), &settings, OwnedFd::from(wait_r), None)
            };
            guardian?;
            saved.push(SavedTerminal {
                tty,
                saved: settings,
                guardian: wait_w,
            });
        }
        Ok(Self { _terminals: saved })
    }
}

impl Drop for SavedTerminal {
    fn drop(&mut self) {
        let _ = sys::tcflow_resume(self.tty.as_fd());
        if sys::tcsetattr(self.tty.as_fd(), &self.saved).is_ok() {
            let _ = self.guardian.write_all(b"d");
        }
    }
}

/// Waits up to `timeout_ms` (-1: for ever) for `input` to have something to read
/// (or to hang up): true then, false when the time passed.
pub fn wait_readable(input: BorrowedFd<'_>, timeout_ms: i32) -> io::Result<bool> {
    Ok(crate::sys::poll_read(&[input], timeout_ms)?[0] != 0)
}

/// Waits until `input` has something to read (true), or until `output`, the write
/// end of a pipe, has no reader left (false): a relay that stops then takes no
/// input meant for someone else (a question asked after the sandbox is gone).
pub fn wait_input_or_gone(input: BorrowedFd<'_>, output: BorrowedFd<'_>) -> io::Result<bool> {
    let revents = crate::sys::poll_read(&[input, output], -1)?;
    // POLLERR (and POLLHUP) are reported whatever was asked: no reader is left.
    if revents[1] & (libc::POLLERR | libc::POLLHUP) != 0 {
        return Ok(false);
    }
    Ok(revents[0] != 0)
}

/// Makes a read of the terminal by this thread fail with EIO, instead of stopping the
/// whole process with SIGTTIN, when Vectra Guard runs in the background: an input
/// relay then sees the end of its input rather than freezing the session.
pub fn no_stop_on_background_read() -> io::Result<()> {
    sys::sigmask_block(&sys::sigset(&[libc::SIGTTIN]))
}

/// A terminal size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    pub rows: u16,
    pub cols: u16,
}

pub fn size(fd: BorrowedFd<'_>) -> io::Result<Size> {
    let ws = sys::get_winsize(fd)?;
    Ok(Size {
        rows: ws.ws_row,
        cols: ws.ws_col,
    })
}

/// Sets the size of terminal `fd`.
pub fn set_size(fd: BorrowedFd<'_>, size: Size) -> io::Result<()> {
    let ws = libc::winsize {
        ws_row: size.rows,
        ws_col: size.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    sys::set_winsize(fd, &ws)
}

/// Gives terminal `to` the size of terminal `from`; the kernel then sends SIGWINCH
/// to the foreground process group of `to`.
pub fn copy_size(from: BorrowedFd<'_>, to: BorrowedFd<'_>) -> io::Result<Size> {
    let ws = sys::get_winsize(from)?;
    sys::set_winsize(to, &ws)?;
    Ok(Size {
        rows: ws.ws_row,
        cols: ws.ws_col,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The escape sequences in `bytes`, each from ESC up to its final byte.
    fn sequences(bytes: &[u8]) -> Vec<String> {
        let text = std::str::from_utf8(bytes).unwrap();
        text.split('\x1b')
            .skip(1)
            .map(|s| format!("\x1b{s}"))
            .collect()
    }

    #[test]
    fn the_modes_off_turn_off_each_mode_a_sandbox_can_leave_on() {
        let seqs = sequences(MODES_OFF);
        for off in [
            "\x1b[?1049l", // alternate screen
            "\x1b[?25h",   // cursor shown
            "\x1b[?1l",    // normal cursor keys
            "\x1b>",       // normal keypad
            "\x1b[?1000l", // mouse reporting
            "\x1b[?1002l",
            "\x1b[?1003l",
            "\x1b[?1006l",
            "\x1b[?1004l", // focus reporting
            "\x1b[?2004l", // bracketed paste
            "\x1b[0m",     // text attributes
        ] {
            assert!(seqs.iter().any(|s| s == off), "{off:?} missing");
        }
        // Only "off"s: no set (`h` other than showing the cursor), no clear, no
        // cursor move, no full reset, no scroll region (which homes the cursor).
        for s in &seqs {
            let ok = s == "\x1b>"
                || s == "\x1b[0m"
                || s == "\x1b[?25h"
                || (s.starts_with("\x1b[?") && s.ends_with('l'));
            assert!(ok, "{s:?} is not a mode off");
        }
        assert_eq!(seqs.concat().as_bytes(), MODES_OFF, "stray bytes");
    }
}
