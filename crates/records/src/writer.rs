//! `SessionWriter`: appends a running session's records, hash-chained, safe
//! to share between the stdout relay, the stderr relay, the exec tracer and
//! the main thread.
//!
//! Every record goes to its file with a single `write_all` on an `O_APPEND`
//! descriptor, then its `integrity.log` line likewise, under one lock so
//! offsets and chain order agree. Nothing is buffered in user space: when the
//! supervisor is SIGKILLed, everything recorded so far is in the kernel's
//! page cache and reaches the disk. Nothing is fsynced, the final
//! `metadata.json` included (its fsync and its folder's cost 1 ms on a quiet
//! disk and 3-30 ms on a busy one, on every run's path): each version of it is
//! written to a temporary file and renamed over the last, so a killed
//! supervisor leaves one whole version or the other. Only a power cut or
//! kernel crash can lose the unsynced tail of the files, which `verify` then
//! reports as truncated rather than passing silently, or the final
//! `metadata.json`, in which case the session reads as `interrupted` (the
//! version before says `running`, for a supervisor that is gone), like its
//! ledger `end` line, which is not fsynced either.
//!
//! `commands.log` has one line per record:
//!
//! ```text
//! <time> exec pid=<pid> ppid=<ppid> cwd=<quoted cwd> [exe=<quoted path>] [ran=<quoted path>] [interp=<quoted path>] [interp_ran=<quoted path>] [status=<n>|signal=<n>|denied=<errno>] [truncated=<args>,<bytes>] -- <quoted argv>
//! <time> exit pid=<pid> status=<n>
//! <time> exit pid=<pid> signal=<n>
//! ```
//!
//! e.g. `2025-12-19T10:10:53.123Z exec pid=42 ppid=1 cwd=/work exe=/usr/bin/grep -- grep -r 'a b' .`.
//! `exe` is the file passed to execve; argv[0] is whatever the caller chose. `ran`
//! names the file that path reached, by its own path, when symlinks on the way make
//! it another (`exe=/bin/sh ran=/usr/bin/dash`): a link pointed elsewhere after the
//! exec does not change what the line says ran. `interp`
//! names what the kernel started first in place of that file's own code: for a `#!`
//! script, the last interpreter of its chain as the `#!` line names it (`#!/tmp/x`
//! runs `/tmp/x`, which the line says, whatever the script's name); for an ELF
//! program whose loader is not the system's, that loader. `interp_ran` is to
//! `interp` what `ran` is to `exe` (`interp=/bin/sh interp_ran=/usr/bin/dash`).
//! The exit status of a command usually comes later, as its own `exit` line
//! naming the pid (the file is append-only). Quoting follows [`crate::quote`],
//! so the part after ` -- ` pastes back into a shell.
//!
//! One line holds at most [`MAX_RECORDED_ARG_BYTES`] of each argument and
//! [`MAX_RECORDED_ARGV_BYTES`] of the whole argv (arguments past it are left out;
//! an empty argument counts as one byte), so that a hostile argv cannot make every exec cost a megabyte of record. A line
//! cut that way says `truncated=<args>,<bytes>`: the argument count and byte count
//! of the argv in full.
//!
//! A session run with a terminal also gets `tty.cast` ([`crate::cast`]):
//! [`SessionWriter::start_cast`] writes its header, then every
//! `cast_output`, `cast_input` and `cast_resize` appends one event line,
//! timed from the start under the same lock, so times never go backwards.

use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::cast::{self, Utf8Carry};
use crate::chain::Chain;
use crate::error::RecordsError;
use crate::event::{Event, EventSink, kind};
use crate::layout::{self, RecordFile};
use crate::metadata::{IntegrityHead, Metadata, Status};
use crate::quote::{quote_arg, quote_argv};
use crate::time;

/// How a command inside the sandbox ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandExit {
    Code(i32),
    Signal(i32),
    /// The exec was refused (by the approval gate) and failed with this errno:
    /// the program never ran.
    Denied(i32),
}

impl From<i32> for CommandExit {
    fn from(code: i32) -> Self {
        CommandExit::Code(code)
    }
}

impl fmt::Display for CommandExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandExit::Code(c) => write!(f, "status={c}"),
            CommandExit::Signal(s) => write!(f, "signal={s}"),
            CommandExit::Denied(errno) => write!(f, "denied={errno}"),
        }
    }
}

/// Bytes of one argument an `exec` line keeps; the rest is cut.
pub const MAX_RECORDED_ARG_BYTES: usize = 4 * 1024;
/// Bytes of the whole argv an `exec` line keeps; later arguments are left out.
pub const MAX_RECORDED_ARGV_BYTES: usize = 16 * 1024;

/// The size of an argv in full, stated by an `exec` line that was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgvSize {
    pub args: u64,
    pub bytes: u64,
}

impl fmt::Display for ArgvSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "truncated={},{}", self.args, self.bytes)
    }
}

/// The argv as an `exec` line keeps it, and its size in full when that is less.
fn recorded_argv(argv: &[OsString]) -> (Vec<&[u8]>, Option<ArgvSize>) {
    let mut kept = Vec::new();
    let mut room = MAX_RECORDED_ARGV_BYTES;
    let mut cut = false;
    for arg in argv {
        // An empty argument costs a byte of room, as its NUL does in the kernel's
        // argv: free, 60,000 of them made one line of 180 KB (session 23).
        if room == 0 {
            break;
        }
        let arg = arg.as_bytes();
        let keep = char_boundary(arg, arg.len().min(MAX_RECORDED_ARG_BYTES).min(room));
        cut |= keep < arg.len();
        if keep == 0 && !arg.is_empty() {
            break;
        }
        kept.push(&arg[..keep]);
        room -= keep.max(1);
    }
    cut |= kept.len() < argv.len();
    let size = cut.then(|| ArgvSize {
        args: u64::try_from(argv.len()).unwrap_or(u64::MAX),
        bytes: argv
            .iter()
            .map(|a| u64::try_from(a.len()).unwrap_or(u64::MAX))
            .fold(0, u64::saturating_add),
    });
    (kept, size)
}

/// `at`, moved back so as not to split a UTF-8 sequence of `bytes` (when it is one).
fn char_boundary(bytes: &[u8], at: usize) -> usize {
    if at >= bytes.len() {
        return at;
    }
    let mut i = at;
    while i > 0 && at - i < 3 && bytes[i] & 0xC0 == 0x80 {
        i -= 1;
    }
    if i < at && std::str::from_utf8(&bytes[i..at.min(i + 4)]).is_err() {
        i
    } else {
        at
    }
}

/// One program executed in the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRecord {
    pub time: SystemTime,
    pub pid: u32,
    pub ppid: u32,
    pub cwd: PathBuf,
    /// The file executed, as passed to execve (argv[0] can say anything).
    pub exe: Option<PathBuf>,
    /// The file `exe` reached, by its own path inside the sandbox, when that is not
    /// what `exe` names (a symlink on the way): what ran, even once the link is
    /// pointed elsewhere.
    pub ran: Option<PathBuf>,
    /// What the kernel started first in place of that file's own code: a `#!`
    /// script's last interpreter, or an ELF program's loader that is not the system's.
    pub interp: Option<PathBuf>,
    /// `interp`'s own file, when `interp` reaches it through a link (as `ran` for
    /// `exe`): what started, even once the link is pointed elsewhere.
    pub interp_ran: Option<PathBuf>,
    pub argv: Vec<OsString>,
    /// Known only when the exec is recorded after the fact.
    pub exit: Option<CommandExit>,
}

impl CommandRecord {
    /// A command started now, exit status not yet known.
    pub fn new<I, A>(pid: u32, ppid: u32, cwd: impl Into<PathBuf>, argv: I) -> Self
    where
        I: IntoIterator<Item = A>,
        A: Into<OsString>,
    {
        Self {
            time: SystemTime::now(),
            pid,
            ppid,
            cwd: cwd.into(),
            exe: None,
            ran: None,
            interp: None,
            interp_ran: None,
            argv: argv.into_iter().map(Into::into).collect(),
            exit: None,
        }
    }

    /// The same record naming the file executed.
    pub fn with_exe(mut self, exe: impl Into<PathBuf>) -> Self {
        self.exe = Some(exe.into());
        self
    }

    /// The same record naming the file the path reached (see `ran`).
    pub fn with_ran(mut self, ran: impl Into<PathBuf>) -> Self {
        self.ran = Some(ran.into());
        self
    }

    /// The same record naming what the kernel started first (see `interp`).
    pub fn with_interp(mut self, interp: impl Into<PathBuf>) -> Self {
        self.interp = Some(interp.into());
        self
    }

    /// The `commands.log` line, newline included.
    pub fn to_line(&self) -> String {
        let mut s = format!(
            "{} exec pid={} ppid={} cwd={}",
            time::format_rfc3339(self.time),
            self.pid,
            self.ppid,
            quote_arg(self.cwd.as_os_str().as_bytes())
        );
        if let Some(exe) = &self.exe {
            s.push_str(" exe=");
            s.push_str(&quote_arg(exe.as_os_str().as_bytes()));
        }
        if let Some(ran) = &self.ran {
            s.push_str(" ran=");
            s.push_str(&quote_arg(ran.as_os_str().as_bytes()));
        }
        if let Some(interp) = &self.interp {
            s.push_str(" interp=");
            s.push_str(&quote_arg(interp.as_os_str().as_bytes()));
        }
        if let Some(file) = &self.interp_ran {
            s.push_str(" interp_ran=");
            s.push_str(&quote_arg(file.as_os_str().as_bytes()));
        }
        if let Some(exit) = self.exit {
            s.push_str(&format!(" {exit}"));
        }
        let (argv, full) = recorded_argv(&self.argv);
        if let Some(full) = full {
            s.push_str(&format!(" {full}"));
        }
        s.push_str(" -- ");
        s.push_str(&quote_argv(argv));
        s.push('\n');
        s
    }
}

/// Bytes written by [`SessionWriter::write_stream`], not yet chained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a stream record must be chained, or verify reports it as unrecorded"]
pub struct StreamRecord {
    file: RecordFile,
    offset: u64,
    len: u64,
}

/// How a session ended; see the constructors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct End {
    pub end_time: SystemTime,
    pub status: Status,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub error: Option<String>,
}

impl End {
    pub fn exited(code: i32) -> Self {
        Self::now(Status::Exited, Some(code), None, None)
    }

    /// Killed by `signal`; the exit code is 128 + signal, as a shell reports it.
    pub fn signalled(signal: i32) -> Self {
        Self::now(
            Status::Signalled,
            Some(128_i32.saturating_add(signal)),
            Some(signal),
            None,
        )
    }

    pub fn timeout(exit_code: Option<i32>) -> Self {
        Self::now(Status::Timeout, exit_code, None, None)
    }

    /// Vectra Guard failed before the command ran (exit code 125).
    pub fn failed_to_start(error: impl Into<String>) -> Self {
        Self::now(Status::FailedToStart, Some(125), None, Some(error.into()))
    }

    fn now(
        status: Status,
        exit_code: Option<i32>,
        signal: Option<i32>,
        error: Option<String>,
    ) -> Self {
        Self {
            end_time: SystemTime::now(),
            status,
            exit_code,
            signal,
            error,
        }
    }
}

/// The `commands.log` line of `pid`'s exit at `time`, as [`SessionWriter::record_exit_at`]
/// writes it: for a caller that writes it in a two-step append with other lines.
pub fn exit_line(time: SystemTime, pid: u32, exit: &CommandExit) -> String {
    format!("{} exit pid={pid} {exit}\n", time::format_rfc3339(time))
}

struct Appender {
    file: File,
    path: PathBuf,
    len: u64,
    /// Where the chained bytes end: past it, bytes written (a two-step append's
    /// first half) whose chaining has not succeeded (yet).
    chained: u64,
}

impl Appender {
    fn create(dir: &Path, name: &str) -> Result<Self, RecordsError> {
        let path = dir.join(name);
        let file = layout::create_append_file(&path).map_err(|source| RecordsError::Write {
            path: path.clone(),
            source,
        })?;
        Ok(Self {
            file,
            path,
            len: 0,
            chained: 0,
        })
    }

    fn append(&mut self, data: &[u8]) -> Result<u64, RecordsError> {
        let offset = self.len;
        match self.file.write_all(data) {
            Ok(()) => {
                self.len += u64::try_from(data.len()).unwrap_or(u64::MAX);
                Ok(offset)
            }
            Err(source) => {
                // A partial write may have landed (a full disk takes what fits):
                // take it back, so that the file holds exactly what was chained.
                // Left there, whole lines of an `integrity.log` batch that failed
                // would follow a head the ledger then records as the session's
                // last, which `verify` must call rewriting. Truncating frees blocks,
                // so it works on a full disk; if it fails, keep offsets true to the
                // file.
                if self.file.set_len(offset).is_err()
                    && let Ok(m) = self.file.metadata()
                {
                    self.len = m.len();
                }
                Err(RecordsError::Write {
                    path: self.path.clone(),
                    source,
                })
            }
        }
    }

    /// Takes back the bytes written but never chained (a two-step append whose
    /// chaining failed on a full disk): left there, they follow the head the ledger
    /// ends the session with, and `verify` must call them appended after the fact.
    fn take_back_unchained(&mut self) -> Result<(), RecordsError> {
        if self.len <= self.chained {
            return Ok(());
        }
        self.file
            .set_len(self.chained)
            .map_err(|source| RecordsError::Write {
                path: self.path.clone(),
                source,
            })?;
        self.len = self.chained;
        Ok(())
    }
}

/// `tty.cast` once [`SessionWriter::start_cast`] created it.
struct Cast {
    file: Appender,
    start: Instant,
    output: Utf8Carry,
    input: Utf8Carry,
}

impl Cast {
    fn carry(&mut self, code: &str) -> &mut Utf8Carry {
        if code == cast::code::INPUT {
            &mut self.input
        } else {
            &mut self.output
        }
    }
}

struct State {
    /// commands, stdout, stderr, events (the order of `RecordFile::APPENDED`).
    files: [Appender; 4],
    cast: Option<Cast>,
    integrity: Appender,
    chain: Chain,
    metadata: Metadata,
    /// Whether `metadata.json` exists: from then on each version replaces one.
    metadata_written: bool,
    /// A kept file the next `metadata.json` version is written into instead of a new
    /// one (`layout::spare`, then each version `layout::retire` kept).
    spare: Option<PathBuf>,
    finished: bool,
}

impl State {
    /// The open append-only file, if the session has it.
    fn appender(&mut self, file: RecordFile) -> Option<&mut Appender> {
        let [commands, stdout, stderr, events] = &mut self.files;
        match file {
            RecordFile::Metadata => None,
            RecordFile::Commands => Some(commands),
            RecordFile::Stdout => Some(stdout),
            RecordFile::Stderr => Some(stderr),
            RecordFile::Events => Some(events),
            RecordFile::Cast => self.cast.as_mut().map(|c| &mut c.file),
        }
    }

    /// Writes one record of an append-only file and chains it.
    fn append(&mut self, file: RecordFile, data: &[u8]) -> Result<(), RecordsError> {
        if data.is_empty() {
            return Ok(());
        }
        let Some(appender) = self.appender(file) else {
            return Ok(());
        };
        let offset = appender.append(data)?;
        self.chain_record(file, offset, data)
    }

    /// Appends a `tty.cast` event timed now; empty text writes nothing.
    fn cast_event(&mut self, code: &str, text: &str) -> Result<(), RecordsError> {
        let Some(c) = &self.cast else {
            return Ok(());
        };
        if text.is_empty() {
            return Ok(());
        }
        let line = cast::event_line(c.start.elapsed(), code, text).map_err(|source| {
            RecordsError::Encode {
                what: "terminal recording event",
                source,
            }
        })?;
        self.append(RecordFile::Cast, &line)
    }

    /// Writes what the UTF-8 carries still hold (an incomplete sequence
    /// that never got its last bytes) as U+FFFD.
    fn flush_cast(&mut self) -> Result<(), RecordsError> {
        for code in [cast::code::OUTPUT, cast::code::INPUT] {
            let text = match self.cast.as_mut() {
                Some(c) => c.carry(code).flush(),
                None => return Ok(()),
            };
            self.cast_event(code, &text)?;
        }
        Ok(())
    }

    fn chain_record(
        &mut self,
        file: RecordFile,
        offset: u64,
        data: &[u8],
    ) -> Result<(), RecordsError> {
        let len = u64::try_from(data.len()).unwrap_or(u64::MAX);
        self.chain_digest(file, offset, len, &crate::chain::digest(data))
    }

    fn chain_digest(
        &mut self,
        file: RecordFile,
        offset: u64,
        len: u64,
        digest: &crate::chain::Hash,
    ) -> Result<(), RecordsError> {
        let (line, hash) = self.chain.line_for(file.name(), offset, len, digest);
        self.integrity.append(line.as_bytes())?;
        self.chain.commit(hash);
        self.mark_chained(file, offset, len);
        Ok(())
    }

    fn mark_chained(&mut self, file: RecordFile, offset: u64, len: u64) {
        if let Some(appender) = self.appender(file) {
            appender.chained = appender.chained.max(offset.saturating_add(len));
        }
    }

    /// Every append-only file cut back to its chained end (see
    /// [`Appender::take_back_unchained`]).
    fn take_back_unchained(&mut self) -> Result<(), RecordsError> {
        for appender in self
            .files
            .iter_mut()
            .chain(self.cast.as_mut().map(|c| &mut c.file))
        {
            appender.take_back_unchained()?;
        }
        Ok(())
    }

    /// The chain's head, as the ledger records it.
    fn head(&self) -> crate::ledger::Head {
        crate::ledger::Head {
            records: self.chain.records(),
            hash: self.chain.head(),
        }
    }

    /// Chains several records with one write to `integrity.log`; the chain only
    /// advances if that write succeeds.
    fn chain_digests(
        &mut self,
        records: &[(StreamRecord, crate::chain::Hash)],
    ) -> Result<(), RecordsError> {
        let mut chain = self.chain.clone();
        let mut lines = String::new();
        for (record, digest) in records.iter().filter(|(r, _)| r.len > 0) {
            let (line, hash) =
                chain.line_for(record.file.name(), record.offset, record.len, digest);
            lines.push_str(&line);
            chain.commit(hash);
        }
        if lines.is_empty() {
            return Ok(());
        }
        self.integrity.append(lines.as_bytes())?;
        self.chain = chain;
        for (record, _) in records {
            self.mark_chained(record.file, record.offset, record.len);
        }
        Ok(())
    }

    /// Replaces `metadata.json` atomically (a temporary file renamed over it)
    /// and chains its new content. Not fsynced: see the module's notes.
    ///
    /// With `reuse`, the spare file is the new version when there is one. Not for the
    /// last version of a session that failed: written into a file that has its block,
    /// it would succeed on a full disk, where a new file fails and leaves the version
    /// before (`running`), which is what explains a record cut short by the full disk
    /// to `verify`.
    fn write_metadata(&mut self, dir: &Path, reuse: bool) -> Result<(), RecordsError> {
        self.metadata.integrity = Some(IntegrityHead {
            records: self.chain.records(),
            head: layout::hex_encode(&self.chain.head()),
        });
        let json = self
            .metadata
            .to_json()
            .map_err(|source| RecordsError::Encode {
                what: "metadata",
                source,
            })?;
        let kept = if self.metadata_written {
            layout::retire(dir, layout::METADATA)
        } else {
            None
        };
        // Into the spare file when there is one (no file created: see `layout::spare`),
        // else a new temporary file.
        let written = match self.spare.take().filter(|_| reuse) {
            Some(spare) => layout::replace_with(&spare, dir, layout::METADATA, &json)
                .or_else(|_| layout::write_atomic(dir, layout::METADATA, &json, false)),
            None => layout::write_atomic(dir, layout::METADATA, &json, false),
        };
        // The version just replaced is the next one's file.
        self.spare = kept;
        written.map_err(|source| RecordsError::Write {
            path: dir.join(layout::METADATA),
            source,
        })?;
        self.metadata_written = true;
        self.chain_record(RecordFile::Metadata, 0, &json)
    }
}

/// The writing side of one session's records. `Send + Sync`: share it by
/// reference or in an `Arc`.
pub struct SessionWriter {
    dir: PathBuf,
    id: String,
    state: Mutex<State>,
    sinks: RwLock<Vec<Arc<dyn EventSink>>>,
    /// Where the session's end goes (set by `SessionStore::create`).
    pub(crate) ledger: Option<crate::ledger::Ledger>,
}

impl fmt::Debug for SessionWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionWriter")
            .field("dir", &self.dir)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl SessionWriter {
    /// Creates the files of the new, empty session folder `dir` and writes
    /// the initial metadata and the `session-start` event. `meta.session_id`
    /// must already be set.
    pub(crate) fn start(
        dir: PathBuf,
        mut meta: Metadata,
        sinks: Vec<Arc<dyn EventSink>>,
    ) -> Result<Self, RecordsError> {
        let integrity = Appender::create(&dir, layout::INTEGRITY)?;
        let files = [
            Appender::create(&dir, layout::COMMANDS)?,
            Appender::create(&dir, layout::STDOUT)?,
            Appender::create(&dir, layout::STDERR)?,
            Appender::create(&dir, layout::EVENTS)?,
        ];
        meta.start_time = time::truncate_millis(meta.start_time);
        meta.status = Status::Running;
        meta.end_time = None;
        meta.exit_code = None;
        meta.signal = None;
        meta.supervisor = layout::ProcessIdentity::current();
        let env_keys = std::mem::take(&mut meta.env_keys);
        meta.set_env_keys(env_keys);
        let id = meta.session_id.clone();
        let start = Event::new(kind::SESSION_START)
            .at(meta.start_time)
            .with("session_id", id.clone())
            .with("origin", meta.origin.as_str());
        let mut state = State {
            files,
            cast: None,
            integrity,
            chain: Chain::new(),
            metadata: meta,
            metadata_written: false,
            spare: None,
            finished: false,
        };
        state.write_metadata(&dir, true)?;
        let writer = Self {
            dir,
            id,
            state: Mutex::new(state),
            sinks: RwLock::new(sinks),
            ledger: None,
        };
        writer.event(start)?;
        Ok(writer)
    }

    /// The session folder was renamed to `dir` (from its staging name): later
    /// writes by path and error messages name the new place. The open files
    /// follow the rename by themselves.
    /// Makes the file the next `metadata.json` version is written into
    /// (`layout::spare`, in the records folder `root`), so that writing it later
    /// creates no file. Best effort: without it, that version is a new file.
    pub(crate) fn make_spare(&mut self, root: &Path) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        if state.spare.is_none() {
            state.spare = layout::spare(root).ok();
        }
    }

    pub(crate) fn moved_to(&mut self, dir: PathBuf) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        for appender in state.files.iter_mut().chain([&mut state.integrity]) {
            if let Some(name) = appender.path.file_name() {
                appender.path = dir.join(name);
            }
        }
        self.dir = dir;
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session id, which is also the folder name.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A copy of the current metadata.
    pub fn metadata(&self) -> Metadata {
        self.lock().metadata.clone()
    }

    /// Appends bytes to `stdout.log`, exactly as received (one record).
    pub fn append_stdout(&self, data: &[u8]) -> Result<(), RecordsError> {
        self.lock().append(RecordFile::Stdout, data)
    }

    /// Appends bytes to `stderr.log`, exactly as received (one record).
    pub fn append_stderr(&self, data: &[u8]) -> Result<(), RecordsError> {
        self.lock().append(RecordFile::Stderr, data)
    }

    /// The first half of a two-step append to `stdout.log`, `stderr.log` or
    /// `commands.log`: writes the bytes now and returns the record to pass to
    /// [`Self::chain_stream`] (or [`Self::chain_streams`]) once its digest is
    /// known. Lets a relay hash a chunk on another thread while it reads the next
    /// one, and the exec tracer chain its lines after the exec they record was let
    /// go. The caller must chain the records of one file in the order it wrote
    /// them, before any one-step append to that file; until it does, `verify`
    /// reports the bytes as an unrecorded tail.
    pub fn write_stream(
        &self,
        file: RecordFile,
        data: &[u8],
    ) -> Result<StreamRecord, RecordsError> {
        if !matches!(
            file,
            RecordFile::Stdout | RecordFile::Stderr | RecordFile::Commands
        ) {
            return Err(RecordsError::Write {
                path: self.dir.join(file.name()),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "only stdout.log, stderr.log and commands.log take two-step appends",
                ),
            });
        }
        let offset = match self.lock().appender(file) {
            Some(appender) if !data.is_empty() => appender.append(data)?,
            _ => 0,
        };
        Ok(StreamRecord {
            file,
            offset,
            len: u64::try_from(data.len()).unwrap_or(u64::MAX),
        })
    }

    /// The second half: chains a record written by [`Self::write_stream`],
    /// given the [`crate::chain::digest`] of its bytes.
    pub fn chain_stream(
        &self,
        record: StreamRecord,
        digest: &crate::chain::Hash,
    ) -> Result<(), RecordsError> {
        if record.len == 0 {
            return Ok(());
        }
        self.lock()
            .chain_digest(record.file, record.offset, record.len, digest)
    }

    /// Chains records written by [`Self::write_stream`], in order, with one write
    /// to `integrity.log`: each with the [`crate::chain::digest`] of its bytes.
    pub fn chain_streams(
        &self,
        records: &[(StreamRecord, crate::chain::Hash)],
    ) -> Result<(), RecordsError> {
        self.lock().chain_digests(records)
    }

    /// Appends an `exec` line to `commands.log`; returns its length in bytes.
    pub fn record_command(&self, cmd: &CommandRecord) -> Result<u64, RecordsError> {
        let line = cmd.to_line();
        self.lock().append(RecordFile::Commands, line.as_bytes())?;
        Ok(u64::try_from(line.len()).unwrap_or(u64::MAX))
    }

    /// Appends an `exit` line for an earlier `exec` of `pid`; returns its length.
    pub fn record_exit(&self, pid: u32, exit: CommandExit) -> Result<u64, RecordsError> {
        self.record_exit_at(SystemTime::now(), pid, exit)
    }

    pub fn record_exit_at(
        &self,
        time: SystemTime,
        pid: u32,
        exit: CommandExit,
    ) -> Result<u64, RecordsError> {
        let line = exit_line(time, pid, &exit);
        self.lock().append(RecordFile::Commands, line.as_bytes())?;
        Ok(u64::try_from(line.len()).unwrap_or(u64::MAX))
    }

    /// Writes an event to `events.jsonl`, then hands it to every sink.
    pub fn event(&self, event: Event) -> Result<(), RecordsError> {
        let line = event.to_line().map_err(|source| RecordsError::Encode {
            what: "event",
            source,
        })?;
        self.lock().append(RecordFile::Events, &line)?;
        self.publish(&event);
        Ok(())
    }

    fn publish(&self, event: &Event) {
        let sinks: Vec<Arc<dyn EventSink>> = self
            .sinks
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for sink in sinks {
            sink.publish(event);
        }
    }

    /// Subscribes another consumer to this session's future events.
    pub fn add_sink(&self, sink: Arc<dyn EventSink>) {
        self.sinks
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(sink);
    }

    /// Starts the terminal recording: creates `tty.cast` (mode 0600) with
    /// its asciicast v2 header, `env` being the terminal's environment
    /// (SHELL and TERM, as asciinema records). Event times count from now.
    /// A session has at most one recording: a second call is an error.
    pub fn start_cast(
        &self,
        width: u16,
        height: u16,
        env: &[(&str, &str)],
    ) -> Result<(), RecordsError> {
        let mut st = self.lock();
        if st.finished {
            return Err(RecordsError::AlreadyFinished {
                id: self.id.clone(),
            });
        }
        if st.cast.is_some() {
            return Err(RecordsError::CastAlreadyStarted {
                id: self.id.clone(),
            });
        }
        let now = SystemTime::now();
        let timestamp = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let header = cast::header_line(width, height, timestamp, env).map_err(|source| {
            RecordsError::Encode {
                what: "terminal recording header",
                source,
            }
        })?;
        st.cast = Some(Cast {
            file: Appender::create(&self.dir, layout::CAST)?,
            start: Instant::now(),
            output: Utf8Carry::default(),
            input: Utf8Carry::default(),
        });
        st.append(RecordFile::Cast, &header)
    }

    /// Records terminal output (an `o` event), bytes as read from the
    /// terminal: an incomplete UTF-8 sequence at the end waits for the next
    /// call, invalid bytes become U+FFFD. Nothing is written when no whole
    /// character results.
    pub fn cast_output(&self, data: &[u8]) -> Result<(), RecordsError> {
        self.cast_bytes(cast::code::OUTPUT, data)
    }

    /// Records keystrokes (an `i` event), like [`Self::cast_output`] with a
    /// UTF-8 carry of its own.
    pub fn cast_input(&self, data: &[u8]) -> Result<(), RecordsError> {
        self.cast_bytes(cast::code::INPUT, data)
    }

    /// Records a terminal resize (an `r` event, `WxH`).
    pub fn cast_resize(&self, width: u16, height: u16) -> Result<(), RecordsError> {
        let mut st = self.open_cast()?;
        st.cast_event(cast::code::RESIZE, &format!("{width}x{height}"))
    }

    fn cast_bytes(&self, code: &str, data: &[u8]) -> Result<(), RecordsError> {
        let mut st = self.open_cast()?;
        let text = match st.cast.as_mut() {
            Some(c) => c.carry(code).decode(data),
            None => String::new(),
        };
        st.cast_event(code, &text)
    }

    /// The locked state, once `start_cast` has run and until `finish`.
    fn open_cast(&self) -> Result<MutexGuard<'_, State>, RecordsError> {
        let st = self.lock();
        if st.finished {
            return Err(RecordsError::AlreadyFinished {
                id: self.id.clone(),
            });
        }
        if st.cast.is_none() {
            return Err(RecordsError::CastNotStarted {
                id: self.id.clone(),
            });
        }
        Ok(st)
    }

    /// Changes metadata mid-session (e.g. the layers once they are in
    /// force) and rewrites `metadata.json` atomically. The id, status,
    /// supervisor and end fields are kept as they are.
    pub fn update_metadata(&self, change: impl FnOnce(&mut Metadata)) -> Result<(), RecordsError> {
        let mut st = self.lock();
        if st.finished {
            return Err(RecordsError::AlreadyFinished {
                id: self.id.clone(),
            });
        }
        let before = st.metadata.clone();
        change(&mut st.metadata);
        let m = &mut st.metadata;
        m.record_format = before.record_format;
        m.session_id = before.session_id;
        m.status = before.status;
        m.supervisor = before.supervisor;
        m.end_time = before.end_time;
        m.exit_code = before.exit_code;
        m.signal = before.signal;
        let env_keys = std::mem::take(&mut m.env_keys);
        m.set_env_keys(env_keys);
        st.write_metadata(&self.dir, true)
    }

    /// Ends the session: writes an incomplete UTF-8 sequence still waiting
    /// in a `tty.cast` carry as U+FFFD, appends the `session-end` event and
    /// completes `metadata.json` atomically. Returns the final metadata.
    pub fn finish(self, end: End) -> Result<Metadata, RecordsError> {
        self.lock().flush_cast()?;
        let mut ev = Event::new(kind::SESSION_END)
            .at(end.end_time)
            .with("session_id", self.id.clone())
            .with("status", end.status.as_str());
        if let Some(c) = end.exit_code {
            ev = ev.with("exit_code", c);
        }
        if let Some(s) = end.signal {
            ev = ev.with("signal", s);
        }
        if let Some(e) = &end.error {
            ev = ev.with("error", e.clone());
        }
        self.event(ev)?;
        let mut st = self.lock();
        st.metadata.end_time = Some(time::truncate_millis(end.end_time));
        st.metadata.status = end.status;
        st.metadata.exit_code = end.exit_code;
        st.metadata.signal = end.signal;
        let failed = end.error.is_some();
        st.metadata.error = end.error;
        st.finished = true;
        st.take_back_unchained()?;
        st.write_metadata(&self.dir, !failed)?;
        let head = st.head();
        let metadata = st.metadata.clone();
        drop(st);
        if let Some(ledger) = &self.ledger {
            ledger.ended(&self.id, head)?;
        }
        Ok(metadata)
    }
}

impl Drop for SessionWriter {
    /// A writer dropped without `finish` (an error path) leaves an
    /// `interrupted` record rather than one that looks alive.
    fn drop(&mut self) {
        let dir = self.dir.clone();
        let st = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        if st.finished {
            return;
        }
        st.finished = true;
        st.metadata.status = Status::Interrupted;
        st.metadata.end_time = Some(time::truncate_millis(SystemTime::now()));
        if st.metadata.error.is_none() {
            st.metadata.error =
                Some("the supervisor stopped recording without finishing the session".into());
        }
        let _ = st.write_metadata(&dir, false);
        if let Some(ledger) = &self.ledger {
            let _ = ledger.ended(&self.id, st.head());
        }
    }
}
