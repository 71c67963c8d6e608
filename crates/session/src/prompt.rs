//! The approval gate's prompt on the user's own terminal.
//!
//! Vectra Guard owns the user's terminal for the whole session: its input relay
//! forwards keystrokes to the sandbox (through a pipe, or the sandbox's own pty with
//! `-t`) and its output relays show what the sandbox writes. So the prompt needs no
//! terminal of its own: while a request is shown, the input relays hand every key to
//! the prompt instead of the sandbox ([`TerminalPrompt::intercept`]), and the output
//! relays wait ([`TerminalPrompt::wait_clear`]) so that nothing the sandbox writes
//! lands in the middle of the question (the kernel buffers it meanwhile). The sandbox
//! can neither see the prompt nor answer it.
//!
//! One request at a time, oldest first; one decided elsewhere (`vectraguard approve`,
//! its time-out) while shown is withdrawn. Keys: `y` approves this exec, `a` approves
//! it for the rest of the session, `n` or Enter denies.

use std::fs::File;
use std::io::Write;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use vg_control::broker::{PendingView, Subject};
use vg_control::{Broker, Decider, Scope, Verdict};

/// How often a shown request is checked for a decision made elsewhere.
const RECHECK: Duration = Duration::from_millis(200);
/// Keys typed this soon after the prompt appears were meant for what was on screen
/// before it (typeahead), not for the question: they are swallowed, never an answer.
const TYPEAHEAD: Duration = Duration::from_millis(300);
/// Before the question: attributes off (the sandbox may have left the terminal
/// writing invisible text, `ESC[8m`, or in a line-drawing charset), ASCII charset,
/// cursor shown. The sandbox's own attributes are not restored after.
const SANE: &str = "\x1b[0m\x1b(B\x1b[?25h";

/// The prompt of one session, shared by its relays and its prompt thread.
pub struct TerminalPrompt {
    state: Mutex<State>,
    changed: Condvar,
    /// The terminal is in raw mode (`-t`): lines end in `\r\n`, and a full-screen
    /// program is asked to redraw once the prompt is gone.
    raw: bool,
    /// The sandbox's terminal, for that redraw.
    master: Mutex<Option<File>>,
}

#[derive(Default)]
struct State {
    /// A request is on screen.
    showing: bool,
    /// Keys before this instant are typeahead (see [`TYPEAHEAD`]).
    answer_from: Option<std::time::Instant>,
    /// The first answer key typed while it is.
    key: Option<u8>,
}

/// What a key answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Decide(Verdict, Scope),
    /// Not an answer: keep asking.
    Ignore,
}

/// `y`: approve once; `a`: approve for the session; `n`, Enter: deny.
pub fn answer_for(key: u8) -> Answer {
    match key {
        b'y' | b'Y' => Answer::Decide(Verdict::Approve, Scope::Once),
        b'a' | b'A' => Answer::Decide(Verdict::Approve, Scope::Session),
        b'n' | b'N' | b'\r' | b'\n' => Answer::Decide(Verdict::Deny, Scope::Once),
        _ => Answer::Ignore,
    }
}

/// The question, as lines (without line ends). Everything from the sandbox is
/// quoted: it is hostile input and must not drive the user's terminal.
pub fn render(session: &str, p: &PendingView) -> Vec<String> {
    let r = &p.request;
    let level = r.level.as_str();
    let mut lines = vec![format!(
        "[vectraguard] {level} — approval needed (request {}, denied in {}s)",
        p.id,
        p.timeout_in_ms.div_ceil(1000)
    )];
    match &r.subject {
        Subject::Exec {
            argv,
            path,
            cwd,
            parents,
            ..
        } => {
            lines.push(format!("  exec    {}", vg_records::quote_argv(argv)));
            lines.push(format!(
                "  program {}   cwd {}",
                vg_records::quote_arg(path.as_bytes()),
                vg_records::quote_arg(cwd.as_bytes())
            ));
            for parent in parents.iter().take(3) {
                lines.push(format!(
                    "  parent  {}",
                    vg_records::escape_hidden(&parent.command)
                ));
            }
        }
        Subject::Destination {
            name,
            port,
            asked_by,
        } => {
            lines.push(format!(
                "  connect {}",
                vg_control::broker::destination_text(
                    &vg_records::quote_arg(name.as_bytes()),
                    *port
                )
            ));
            if let Some(by) = asked_by {
                lines.push(format!("  by      {}", vg_records::escape_hidden(by)));
            }
        }
    }
    lines.push(format!(
        "  reason  {}{}",
        r.reason,
        r.rule
            .as_deref()
            .map(|rule| format!(" (rule {rule})"))
            .unwrap_or_default()
    ));
    // The id's random suffix names the session as well as the whole id does.
    let short = session.rsplit('-').next().unwrap_or(session);
    lines.push(format!(
        "  or from another terminal: vectraguard approve|deny {short} {}",
        p.id
    ));
    lines.push("Approve? [y]es once, [a]lways this session, [N]o: ".to_owned());
    lines
}

impl TerminalPrompt {
    pub fn new(raw: bool) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            raw,
            master: Mutex::new(None),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The sandbox's terminal, asked to redraw after a prompt (`-t` only).
    pub fn set_master(&self, master: File) {
        *self.master.lock().unwrap_or_else(PoisonError::into_inner) = Some(master);
    }

    /// What of `keys` goes on to the sandbox: nothing while a request is shown (the
    /// first key is the answer).
    pub fn intercept<'a>(&self, keys: &'a [u8]) -> &'a [u8] {
        let mut state = self.state();
        if !state.showing {
            return keys;
        }
        let typeahead = state
            .answer_from
            .is_some_and(|from| std::time::Instant::now() < from);
        if state.key.is_none() && !typeahead {
            state.key = keys
                .iter()
                .copied()
                .find(|k| answer_for(*k) != Answer::Ignore);
            self.changed.notify_all();
        }
        &[]
    }

    /// Blocks an output relay while a request is on screen.
    pub fn wait_clear(&self) {
        let mut state = self.state();
        while state.showing {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Asks about each request `broker` holds, on a thread of its own.
    pub fn serve(self: &Arc<Self>, broker: &Arc<Broker>, session: String) -> std::io::Result<()> {
        let (tx, rx): (Sender<PendingView>, Receiver<PendingView>) = channel();
        let tx = Mutex::new(tx);
        broker.subscribe(move |view| {
            let _ = tx
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .send(view.clone());
        });
        let prompt = Arc::clone(self);
        // Weak: the prompt thread must not keep the broker (and the record) alive.
        let broker = Arc::downgrade(broker);
        std::thread::Builder::new()
            .name("vg-prompt".into())
            .spawn(move || {
                for view in rx {
                    let Some(broker) = broker.upgrade() else {
                        return;
                    };
                    prompt.ask(&broker, &session, &view);
                }
            })
            .map(drop)
    }

    fn ask(&self, broker: &Broker, session: &str, view: &PendingView) {
        let still_held = |b: &Broker| b.pending().iter().any(|p| p.id == view.id);
        if !still_held(broker) {
            return;
        }
        {
            let mut state = self.state();
            state.showing = true;
            state.key = None;
            state.answer_from = Some(std::time::Instant::now() + TYPEAHEAD);
        }
        let eol = if self.raw { "\r\n" } else { "\n" };
        let lines = render(session, view);
        let mut text = String::from(SANE);
        text.push_str(eol);
        for (i, line) in lines.iter().enumerate() {
            text.push_str(line);
            if i + 1 < lines.len() {
                text.push_str(eol);
            }
        }
        self.show(&text);
        let outcome = loop {
            let key = {
                let state = self.state();
                let (state, _) = self
                    .changed
                    .wait_timeout_while(state, RECHECK, |s| s.key.is_none())
                    .unwrap_or_else(PoisonError::into_inner);
                state.key
            };
            match key.map(answer_for) {
                Some(Answer::Decide(verdict, scope)) => {
                    let done = broker.decide(view.id, verdict, scope, Decider::Tty);
                    break match (done, verdict, scope) {
                        (Err(_), _, _) => "decided elsewhere".to_owned(),
                        (Ok(_), Verdict::Approve, Scope::Session) => {
                            "approved for this session".to_owned()
                        }
                        (Ok(_), Verdict::Approve, Scope::Once) => "approved".to_owned(),
                        (Ok(_), Verdict::Deny, _) => "denied".to_owned(),
                    };
                }
                Some(Answer::Ignore) | None => {
                    if !still_held(broker) {
                        break "decided elsewhere (or timed out): denied unless approved there"
                            .to_owned();
                    }
                }
            }
        };
        self.show(&format!("→ {outcome}{eol}"));
        {
            let mut state = self.state();
            state.showing = false;
            state.key = None;
        }
        self.changed.notify_all();
        self.redraw();
    }

    fn show(&self, text: &str) {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(text.as_bytes());
        let _ = err.flush();
    }

    /// With `-t`, a full-screen program (an editor, a pager) has just had lines
    /// written over it: changing the sandbox terminal's size and back sends it two
    /// SIGWINCHes, on which such programs repaint the whole screen. A line-mode shell
    /// only redraws its current line, which the prompt has left intact below it.
    fn redraw(&self) {
        if !self.raw {
            return;
        }
        let master = self.master.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(master) = master.as_ref() else {
            return;
        };
        use std::os::fd::AsFd;
        if let Ok(size) = vg_sandbox::terminal::size(master.as_fd()) {
            let smaller = vg_sandbox::terminal::Size {
                rows: size.rows.saturating_sub(1).max(1),
                cols: size.cols,
            };
            let _ = vg_sandbox::terminal::set_size(master.as_fd(), smaller);
            std::thread::sleep(Duration::from_millis(20));
            let _ = vg_sandbox::terminal::set_size(master.as_fd(), size);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use vg_control::broker::{Ancestor, Request};

    #[test]
    fn keys_answer_or_are_ignored() {
        assert_eq!(
            answer_for(b'y'),
            Answer::Decide(Verdict::Approve, Scope::Once)
        );
        assert_eq!(
            answer_for(b'A'),
            Answer::Decide(Verdict::Approve, Scope::Session)
        );
        for key in [b'n', b'\r', b'\n'] {
            assert_eq!(answer_for(key), Answer::Decide(Verdict::Deny, Scope::Once));
        }
        assert_eq!(answer_for(b'x'), Answer::Ignore);
        assert_eq!(answer_for(0x1b), Answer::Ignore);
    }

    #[test]
    fn hostile_text_is_quoted_not_sent_to_the_terminal() {
        let view = PendingView {
            id: 7,
            request: Request {
                subject: Subject::Exec {
                    pid: 3,
                    path: "/usr/bin/rm\x1b]0;owned\x07".into(),
                    argv: vec!["rm".into(), "-rf".into(), "/tmp/\x1b[2Jx".into()],
                    cwd: "/w".into(),
                    parents: vec![Ancestor {
                        pid: 2,
                        command: "sh ./run.sh".into(),
                    }],
                    exact: String::new(),
                },
                level: vg_control::Level::Critical,
                reason: "recursive forced delete".into(),
                rule: Some("rm-rf-outside".into()),
            },
            asked_at_ms: 0,
            timeout_in_ms: 29_500,
        };
        let lines = render("session-x", &view);
        let all = lines.join("\n");
        assert!(!all.contains('\x1b') && !all.contains('\x07'), "{all}");
        assert!(
            lines[0].contains("CRITICAL") && lines[0].contains("30s"),
            "{all}"
        );
        assert!(all.contains("parent  sh ./run.sh"), "{all}");
        assert!(all.contains("vectraguard approve|deny x 7"), "{all}");
    }

    #[test]
    fn keys_go_to_the_prompt_only_while_it_is_shown() {
        let prompt = TerminalPrompt::new(false);
        assert_eq!(prompt.intercept(b"ls\n"), b"ls\n");
        prompt.state().showing = true;
        // Typeahead: swallowed, not an answer.
        prompt.state().answer_from =
            Some(std::time::Instant::now() + std::time::Duration::from_secs(60));
        assert_eq!(prompt.intercept(b"y"), b"");
        assert_eq!(prompt.state().key, None);
        prompt.state().answer_from = None;
        assert_eq!(prompt.intercept(b"qy"), b"");
        assert_eq!(prompt.state().key, Some(b'y'));
        // Later keys while still shown are swallowed too, and do not change the answer.
        assert_eq!(prompt.intercept(b"n"), b"");
        assert_eq!(prompt.state().key, Some(b'y'));
    }
}
