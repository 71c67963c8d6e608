//! `commands.log` while the session runs: each traced exec and exit, under a cap on
//! the file's total size.
//!
//! One line is bounded by `vg_records` (each argument and the whole argv cut, with
//! the full size stated); the file as a whole by [`CommandsLog::limit`]: the
//! `--max-output` value when one is set (the same promise, "this many bytes recorded",
//! now for the record of programs too), else [`DEFAULT_LIMIT`]. Past it, execs are
//! still traced (and could still be refused) but only counted, and one `limit-hit`
//! event says how many were left out.

use std::collections::HashSet;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::time::SystemTime;

use vg_records::event::kind::LIMIT_HIT;
use vg_records::{CommandExit, CommandRecord, Event, RecordFile, StreamRecord};
use vg_sandbox::trace::{self, TraceEvent, Verdict};

use super::Shared;

/// The size of `commands.log` past which lines are counted, not written, when
/// `--max-output` is not set: a million ordinary exec lines.
pub const DEFAULT_LIMIT: u64 = 64 * 1024 * 1024;

/// What the tracer has written of `commands.log`, and what it left out.
pub struct CommandsLog {
    limit: u64,
    written: u64,
    /// Sandbox pids whose exec was traced and whose exit is still to come.
    live: HashSet<i32>,
    dropped_execs: u64,
    dropped_exits: u64,
    /// When the limit was reached.
    full_since: Option<SystemTime>,
    /// Lines written but not chained yet, with their bytes: an exec waits while its
    /// line is written, which is chained after it was let go, in a batch (see
    /// [`Self::between`], which the tracer calls after each answer).
    pending: Vec<(StreamRecord, String)>,
    /// Lines not written yet (only while batching), in order: `exec` lines, formatted
    /// and written just after their exec was let go, and `exit` lines, written with
    /// the next `exec` line (one write for all) or at the next quiet moment
    /// ([`Self::flush`]).
    held: Vec<Held>,
    /// The bytes of the `exit` lines in `held`.
    held_exits: usize,
    /// `held` has an `exec` line: it is written as soon as the tracer answered.
    exec_due: bool,
    /// Whether writes and chain entries are batched (see [`Self::batching`]).
    batch: bool,
}

/// A line held while batching (see [`CommandsLog::batching`]).
enum Held {
    /// Formatted when written: the time in it is when the exec was read.
    Exec(CommandRecord),
    Exit(String),
}

/// Unchained records past which the tracer chains them as soon as it answered (one
/// `integrity.log` write for them all), without waiting for a quiet moment.
const MAX_PENDING: usize = 32;
/// Bytes of `exit` lines held past which the tracer writes them once it answered.
const MAX_UNWRITTEN: usize = 4096;

impl CommandsLog {
    pub fn new(max_output: Option<u64>) -> Self {
        Self {
            limit: max_output.unwrap_or(DEFAULT_LIMIT),
            written: 0,
            live: HashSet::new(),
            dropped_execs: 0,
            dropped_exits: 0,
            full_since: None,
            pending: Vec::new(),
            held: Vec::new(),
            held_exits: 0,
            exec_due: false,
            batch: false,
        }
    }

    /// Batches what can wait (plain recording, where the tracer thread alone writes
    /// these lines, in the order of the notifications): an `exec` line is written
    /// just after its exec was let go, before the tracer takes the next
    /// notification, with the `exit` lines held since; lines are chained several in
    /// one `integrity.log` write; all of it at the latest when the tracer is idle
    /// (see [`Self::between`]). Without it, each line is written and chained at
    /// once, an `exec` line while its exec waits: with the approval gate, threads
    /// that hold execs write lines too, possibly as the session ends.
    pub fn batching(mut self) -> Self {
        self.batch = true;
        self
    }

    /// The tracer's hook between notifications ([`vg_sandbox::trace::serve`]'s
    /// `between`): just after an exec was let go, writes its line (with the exits
    /// held); when the tracer is idle, or a batch is full, writes and chains what
    /// waits. Returns whether something still waits for an idle moment.
    pub fn between(&mut self, shared: &Shared, moment: trace::Between) -> bool {
        if moment == trace::Between::Idle {
            self.flush(shared);
        } else {
            if self.exec_due || self.held_exits >= MAX_UNWRITTEN {
                self.write_held(shared);
            }
            if self.pending.len() >= MAX_PENDING {
                self.flush(shared);
            }
        }
        !self.pending.is_empty() || !self.held.is_empty()
    }

    /// Writes the lines held, in one write; they are chained by [`Self::flush`].
    fn write_held(&mut self, shared: &Shared) {
        self.exec_due = false;
        self.held_exits = 0;
        if self.held.is_empty() {
            return;
        }
        let mut lines = String::new();
        for held in self.held.drain(..) {
            match held {
                Held::Exec(record) => {
                    let line = record.to_line();
                    self.written = self
                        .written
                        .saturating_add(u64::try_from(line.len()).unwrap_or(u64::MAX));
                    lines.push_str(&line);
                }
                Held::Exit(line) => lines.push_str(&line),
            }
        }
        match shared
            .writer
            .write_stream(RecordFile::Commands, lines.as_bytes())
        {
            Ok(written) => self.pending.push((written, lines)),
            Err(e) => shared.fail("commands.log", e),
        }
    }

    /// Writes the lines held, then chains every line written since the last call,
    /// with one write to `integrity.log`. Called by the tracer when it is idle or a
    /// batch is full, before any other line of `commands.log` is written (its
    /// records must be chained in file order), and when tracing ends.
    pub fn flush(&mut self, shared: &Shared) {
        self.write_held(shared);
        if self.pending.is_empty() {
            return;
        }
        let records: Vec<(StreamRecord, vg_records::chain::Hash)> = self
            .pending
            .drain(..)
            .map(|(record, line)| (record, vg_records::chain::digest(line.as_bytes())))
            .collect();
        if let Err(e) = shared.writer.chain_streams(&records) {
            shared.fail("integrity.log", e);
        }
    }

    /// Whether `pid`'s exec was traced and its exit not yet seen.
    pub fn is_live(&self, pid: i32) -> bool {
        self.live.contains(&pid)
    }

    /// Whether the next line may be written; once the limit is reached, nothing more
    /// is (a line started below it is written whole, so the file ends on a line).
    fn room(&mut self) -> bool {
        if self.written < self.limit {
            return true;
        }
        self.full_since.get_or_insert_with(SystemTime::now);
        false
    }

    /// Records one traced exec or exit. Exits are recorded only for processes whose
    /// exec was traced: a forked subshell that never executes anything is not a
    /// command.
    pub fn record(&mut self, shared: &Shared, event: TraceEvent) -> Verdict {
        match event {
            event @ TraceEvent::Exec { .. } => self.exec(shared, event, None),
            TraceEvent::Refused { host_pid, reason } => {
                eprintln!(
                    "vectraguard: refused a program that cannot be recorded (host pid {host_pid}): {reason}"
                );
                if let Err(e) = shared.writer.event(
                    Event::new(vg_records::event::kind::FAILURE)
                        .with("error", format!("exec refused: {reason}"))
                        .with("host_pid", host_pid),
                ) {
                    shared.fail("events.jsonl", e);
                }
            }
            TraceEvent::Mismatch { pid, ran } => {
                // The exec line already written names the file the process asked
                // for; this says what ran instead (a thread changed the path).
                if let Err(e) = shared.writer.event(
                    Event::new("exec-mismatch")
                        .with("pid", pid)
                        .with("ran", vg_records::quote_arg(&ran))
                        .with(
                            "reason",
                            "the program that ran is not the file the exec line names: its path was changed as the exec happened",
                        ),
                ) {
                    shared.fail("events.jsonl", e);
                }
            }
            TraceEvent::Exit { pid, status, at } => {
                if self.live.remove(&pid) {
                    let exit = match status {
                        trace::ExitStatus::Code(code) => CommandExit::Code(code),
                        trace::ExitStatus::Signal(signal) => CommandExit::Signal(signal),
                    };
                    self.traced_exit(pid, exit, at, shared);
                }
            }
            // Only traced when the session asks for them, which it does not yet.
            TraceEvent::File { .. } | TraceEvent::Denied { .. } => {}
        }
        Verdict::Continue
    }

    /// The exit of a process whose exec was recorded, with how it ended (gVisor's
    /// trace points give a wait status, signals included).
    pub fn exited(&mut self, shared: &Shared, pid: i32, exit: CommandExit) {
        if self.live.remove(&pid) {
            self.traced_exit(pid, exit, None, shared);
        }
    }

    /// Records an exec the approval gate refused: an `exec … denied=EPERM` line (the
    /// program never ran, so no `exit` line follows).
    pub fn denied(&mut self, shared: &Shared, event: TraceEvent) {
        self.exec(shared, event, Some(CommandExit::Denied(libc::EPERM)));
        // Nothing waits on it, and a held exec may be denied as the session ends.
        self.flush(shared);
    }

    /// Writes one `exec` line; `denied` marks an exec the approval gate refused.
    fn exec(&mut self, shared: &Shared, event: TraceEvent, denied: Option<CommandExit>) {
        let TraceEvent::Exec {
            pid,
            ppid,
            cwd,
            path,
            ran,
            argv,
            truncated,
            interpreter,
            interp_ran,
            at,
            ..
        } = event
        else {
            return;
        };
        if denied.is_none() {
            self.live.insert(pid);
        }
        if !self.room() {
            self.dropped_execs += 1;
            return;
        }
        let argv: Vec<OsString> = if argv.is_empty() {
            vec![OsString::from_vec(path.clone())]
        } else {
            argv.into_iter().map(OsString::from_vec).collect()
        };
        let mut record = CommandRecord::new(
            u32::try_from(pid).unwrap_or(0),
            u32::try_from(ppid).unwrap_or(0),
            cwd,
            argv,
        )
        .with_exe(OsString::from_vec(path));
        if let Some(ran) = ran {
            record = record.with_ran(OsString::from_vec(ran));
        }
        if let Some(at) = at {
            record.time = at;
        }
        if let Some(interp) = interpreter {
            record = record.with_interp(OsString::from_vec(interp));
        }
        if let Some(file) = interp_ran {
            record.interp_ran = Some(OsString::from_vec(file).into());
        }
        record.exit = denied;
        if self.batch && denied.is_none() {
            // Formatted and written once the exec was let go, before the next
            // notification is taken (see `between`): the exec does not wait for it.
            self.held.push(Held::Exec(record));
            self.exec_due = true;
            self.argv_truncated(shared, pid, truncated);
            return;
        }
        // Written now, while the exec waits, after the lines held; chained at once.
        self.write_held(shared);
        let line = record.to_line();
        let len = u64::try_from(line.len()).unwrap_or(u64::MAX);
        match shared
            .writer
            .write_stream(RecordFile::Commands, line.as_bytes())
        {
            Ok(written) => {
                self.written = self.written.saturating_add(len);
                self.pending.push((written, line));
                if !self.batch {
                    self.flush(shared);
                }
            }
            Err(e) => shared.fail("commands.log", e),
        }
        self.argv_truncated(shared, pid, truncated);
    }

    /// The event that says an `exec` line's argv was cut.
    fn argv_truncated(&self, shared: &Shared, pid: i32, truncated: bool) {
        if truncated
            && let Err(e) = shared.writer.event(
                Event::new("argv-truncated")
                    .with("pid", pid)
                    .with("reason", "the argument list exceeds the recording limits"),
            )
        {
            shared.fail("events.jsonl", e);
        }
    }

    /// The `exit` line of a process the tracer saw call `exit_group`: held while
    /// batching (the process was let go already, and what it did is in order in the
    /// file once the line is written before the next `exec` line), else written.
    /// `at`: when it ended, if earlier than now (see `TraceEvent::Exit`).
    fn traced_exit(
        &mut self,
        pid: i32,
        exit: CommandExit,
        at: Option<SystemTime>,
        shared: &Shared,
    ) {
        if !self.batch {
            self.exit_at(shared, pid, exit, at);
            return;
        }
        if !self.room() {
            self.dropped_exits += 1;
            return;
        }
        let time = at.unwrap_or_else(SystemTime::now);
        let line = vg_records::exit_line(time, u32::try_from(pid).unwrap_or(0), &exit);
        self.written = self
            .written
            .saturating_add(u64::try_from(line.len()).unwrap_or(u64::MAX));
        self.held_exits += line.len();
        self.held.push(Held::Exit(line));
    }

    /// Writes the `exit` line of a traced process now (e.g. the command, from init's
    /// report, when it died of a signal), after what was held.
    pub fn exit(&mut self, shared: &Shared, pid: i32, exit: CommandExit) {
        self.exit_at(shared, pid, exit, None);
    }

    /// [`Self::exit`], timed `at` when that is known (else now).
    fn exit_at(&mut self, shared: &Shared, pid: i32, exit: CommandExit, at: Option<SystemTime>) {
        self.live.remove(&pid);
        self.flush(shared);
        if !self.room() {
            self.dropped_exits += 1;
            return;
        }
        match shared.writer.record_exit_at(
            at.unwrap_or_else(SystemTime::now),
            u32::try_from(pid).unwrap_or(0),
            exit,
        ) {
            Ok(len) => self.written = self.written.saturating_add(len),
            Err(e) => shared.fail("commands.log", e),
        }
    }

    /// The `limit-hit` event, when lines were left out.
    pub fn limit_hit(&self) -> Option<Event> {
        let at = self.full_since?;
        Some(
            Event::new(LIMIT_HIT)
                .at(at)
                .with("limit", "commands")
                .with("bytes", self.limit)
                .with("dropped_execs", self.dropped_execs)
                .with("dropped_exits", self.dropped_exits),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_until_the_limit_then_counted() {
        let mut log = CommandsLog::new(Some(100));
        assert!(log.room());
        log.written = 99;
        assert!(
            log.room(),
            "a line started below the limit is written whole"
        );
        log.written = 150;
        assert!(!log.room());
        assert!(log.full_since.is_some());
        log.dropped_execs = 3;
        let event = log.limit_hit().unwrap();
        let line = String::from_utf8(event.to_line().unwrap()).unwrap();
        assert!(line.contains(r#""limit":"commands""#), "{line}");
        assert!(line.contains(r#""dropped_execs":3"#), "{line}");
        assert!(CommandsLog::new(None).limit_hit().is_none());
        assert_eq!(CommandsLog::new(None).limit, DEFAULT_LIMIT);
    }
}
