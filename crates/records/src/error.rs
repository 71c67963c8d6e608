//! Errors of the records library: each names the failing step, the path and,
//! where there is one, the fix.

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RecordsError {
    #[error(
        "cannot create the session records folder {path}: {source}; \
         create it by hand or set VECTRAGUARD_HOME to a writable folder"
    )]
    CreateRoot { path: PathBuf, source: io::Error },

    #[error(
        "the session records folder {path} is not writable: {source}; \
         fix its permissions (chmod u+rwx) or set VECTRAGUARD_HOME to a writable folder"
    )]
    RootNotWritable { path: PathBuf, source: io::Error },

    #[error(
        "the session records path {path} exists but is not a folder; \
         move it away or set VECTRAGUARD_HOME elsewhere"
    )]
    RootNotDirectory { path: PathBuf },

    #[error("cannot read the session records folder {path}: {source}")]
    ReadRoot { path: PathBuf, source: io::Error },

    #[error("cannot create the session folder {path}: {source}")]
    CreateSession { path: PathBuf, source: io::Error },

    #[error("cannot read random bytes for a session id from /dev/urandom: {source}")]
    Random { source: io::Error },

    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },

    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },

    #[error("cannot encode {what} as JSON: {source}")]
    Encode {
        what: &'static str,
        source: serde_json::Error,
    },

    #[error("the session's metadata file {path} is damaged: {reason}")]
    DamagedMetadata { path: PathBuf, reason: String },

    #[error(
        "no session matches {query:?} in {root}; run `vectraguard logs list` to see the sessions"
    )]
    UnknownSession { query: String, root: PathBuf },

    #[error("{query:?} matches {} sessions: {}; give more characters of the id", candidates.len(), candidates.join(", "))]
    AmbiguousSession {
        query: String,
        candidates: Vec<String>,
    },

    #[error(
        "session {id} is still running (supervisor pid {pid}); stop it before removing its records"
    )]
    SessionRunning { id: String, pid: u32 },

    #[error("cannot remove {path}: {source}")]
    Remove { path: PathBuf, source: io::Error },

    #[error("invalid duration {input:?}: {reason}")]
    InvalidDuration { input: String, reason: String },

    #[error("invalid time {input:?}: {reason}")]
    InvalidTime { input: String, reason: String },

    #[error("the session {id} is already finished")]
    AlreadyFinished { id: String },

    #[error("the terminal recording of session {id} was already started")]
    CastAlreadyStarted { id: String },

    #[error("the terminal recording of session {id} was not started; call start_cast first")]
    CastNotStarted { id: String },

    #[error(
        "cannot open the session ledger {path}: {source}; make it a regular file you can \
         read and write (chmod u+rw), or move it aside and a new ledger is started"
    )]
    LedgerOpen { path: PathBuf, source: io::Error },

    #[error(
        "cannot append to the session ledger {path}: {source}; check free space and \
         permissions (the session records themselves are unaffected)"
    )]
    LedgerWrite { path: PathBuf, source: io::Error },

    #[error(
        "the session ledger {path} stayed locked by another process for 10 s; \
         find it with `fuser {path}` (a stopped vectraguard?) and let it finish"
    )]
    LedgerLocked { path: PathBuf },

    #[error(
        "the session ledger {path} is damaged: {reason}; `vectraguard logs verify --all` \
         shows what is wrong; move it aside to start a new ledger (which adopts the \
         sessions there as they are now)"
    )]
    LedgerDamaged { path: PathBuf, reason: String },
}

impl RecordsError {
    /// Whether this failed because the disk holding the records is full (or the
    /// user's quota on it is used up): the fix is space, not permissions.
    pub fn is_disk_full(&self) -> bool {
        let source = match self {
            RecordsError::CreateRoot { source, .. }
            | RecordsError::RootNotWritable { source, .. }
            | RecordsError::CreateSession { source, .. }
            | RecordsError::Write { source, .. } => source,
            _ => return false,
        };
        matches!(
            source.kind(),
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_told_apart() {
        let full = RecordsError::Write {
            path: "/r/s/stdout.log".into(),
            source: io::Error::from_raw_os_error(28), // ENOSPC
        };
        assert!(full.is_disk_full());
        let denied = RecordsError::Write {
            path: "/r/s/stdout.log".into(),
            source: io::Error::from(io::ErrorKind::PermissionDenied),
        };
        assert!(!denied.is_disk_full());
    }
}
