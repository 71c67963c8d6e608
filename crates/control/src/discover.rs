//! Finding running sessions: every `session-*/control.sock` under the records
//! root that answers. A socket whose supervisor is gone (connection refused)
//! is a dead session's leftover and skipped.

use std::io;
use std::path::{Path, PathBuf};

use crate::client::{ClientError, ControlClient, is_not_running};
use crate::socket_path;

/// A running session found under the records root.
pub struct LiveSession {
    pub id: String,
    pub socket: PathBuf,
    pub client: ControlClient,
}

/// What [`running`] found.
#[derive(Default)]
pub struct Discovered {
    /// Sessions that answered, by id.
    pub live: Vec<LiveSession>,
    /// Sockets that exist but could not be reached for another reason
    /// (another user's session, a full descriptor table…).
    pub unreachable: Vec<ClientError>,
}

/// Connects to every running session under `root` (`~/.vectraguard/logs`).
pub fn running(root: &Path) -> io::Result<Discovered> {
    let mut found = Discovered::default();
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(found),
        Err(error) => return Err(error),
    };
    let mut dirs: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            name.starts_with("session-").then(|| (name, entry.path()))
        })
        .collect();
    dirs.sort();
    for (id, dir) in dirs {
        let socket = socket_path(&dir);
        match ControlClient::connect(&socket) {
            Ok(client) => found.live.push(LiveSession { id, socket, client }),
            Err(error) if is_not_running(&error) => {}
            Err(error) => found.unreachable.push(error),
        }
    }
    Ok(found)
}
