//! One error type for the image store, one variant per failing step, each message
//! saying what failed and what to do about it.

use std::io;
use std::path::PathBuf;

use crate::digest::Digest;

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("invalid image reference {input:?}: {reason}")]
    BadReference { input: String, reason: String },

    #[error(
        "no image {name} in the store; pull it with `vectraguard image pull {input}`, \
         or see `vectraguard image ls`"
    )]
    NotFound { name: String, input: String },

    #[error(
        "{input:?} matches more than one image ({matches}); use the full name or a \
         longer image id"
    )]
    Ambiguous { input: String, matches: String },

    #[error(
        "digest mismatch for {what}: expected {expected}, got {actual}; the content was \
         changed or corrupted in transit or at its source, and nothing of it was kept"
    )]
    DigestMismatch {
        what: String,
        expected: Digest,
        actual: Digest,
    },

    #[error("size mismatch for {what}: expected {expected} bytes, got {actual}")]
    SizeMismatch {
        what: String,
        expected: u64,
        actual: u64,
    },

    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error(
        "the image store {path} cannot be used: {source}; check its permissions, or set VECTRAGUARD_HOME to another absolute folder"
    )]
    StoreAccess {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("{what} is not valid: {reason}")]
    BadContent { what: String, reason: String },

    #[error("unsafe layer entry {entry:?} in {layer}: {reason}; the image was not unpacked")]
    UnsafeEntry {
        layer: String,
        entry: String,
        reason: String,
    },

    #[error("{0}")]
    Unsupported(String),

    #[error("registry {registry}: {message}")]
    Registry { registry: String, message: String },

    #[error("{0}")]
    Archive(String),
}

impl ImageError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    pub fn bad(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::BadContent {
            what: what.into(),
            reason: reason.into(),
        }
    }
}

pub type Result<T, E = ImageError> = std::result::Result<T, E>;
