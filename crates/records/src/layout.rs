//! Where records live and how they are created: folder and file names,
//! session ids, owner-only permissions, atomic replacement, and the identity
//! of the supervising process (to tell a crashed session from a running one).

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use crate::error::RecordsError;
use crate::time;

pub const METADATA: &str = "metadata.json";
pub const COMMANDS: &str = "commands.log";
pub const STDOUT: &str = "stdout.log";
pub const STDERR: &str = "stderr.log";
pub const EVENTS: &str = "events.jsonl";
pub const INTEGRITY: &str = "integrity.log";
/// The terminal stream of a session that had one, in asciicast v2 (see `cast`).
pub const CAST: &str = "tty.cast";

/// Prefix of every session folder name.
pub const SESSION_PREFIX: &str = "session-";

pub const DIR_MODE: u32 = 0o700;
pub const FILE_MODE: u32 = 0o600;

/// A file of a session covered by the integrity chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RecordFile {
    Metadata,
    Commands,
    Stdout,
    Stderr,
    Events,
    /// `tty.cast`: present only for sessions run with a terminal.
    Cast,
}

impl RecordFile {
    /// The append-only files, in the order they are created.
    pub const APPENDED: [RecordFile; 4] = [
        RecordFile::Commands,
        RecordFile::Stdout,
        RecordFile::Stderr,
        RecordFile::Events,
    ];

    /// Append-only files that only some sessions have: their absence is not
    /// a problem unless `integrity.log` names them.
    pub const OPTIONAL: [RecordFile; 1] = [RecordFile::Cast];

    pub fn name(self) -> &'static str {
        match self {
            RecordFile::Metadata => METADATA,
            RecordFile::Commands => COMMANDS,
            RecordFile::Stdout => STDOUT,
            RecordFile::Stderr => STDERR,
            RecordFile::Events => EVENTS,
            RecordFile::Cast => CAST,
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            METADATA => Some(RecordFile::Metadata),
            COMMANDS => Some(RecordFile::Commands),
            STDOUT => Some(RecordFile::Stdout),
            STDERR => Some(RecordFile::Stderr),
            EVENTS => Some(RecordFile::Events),
            CAST => Some(RecordFile::Cast),
            _ => None,
        }
    }

    /// Line files hold exactly one record per line; streams hold raw chunks.
    pub fn is_line_file(self) -> bool {
        matches!(
            self,
            RecordFile::Commands | RecordFile::Events | RecordFile::Cast
        )
    }

    pub fn is_optional(self) -> bool {
        Self::OPTIONAL.contains(&self)
    }
}

/// A fresh session id (also the folder name): `session-20251219T101053Z-9af4c3`.
pub fn new_session_id(now: SystemTime) -> Result<String, RecordsError> {
    let mut rnd = [0u8; 3];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut rnd))
        .map_err(|source| RecordsError::Random { source })?;
    Ok(format!(
        "{SESSION_PREFIX}{}-{}",
        time::format_compact(now),
        hex_encode(&rnd)
    ))
}

/// If `name` is a session folder name, the start time encoded in it.
pub fn parse_session_name(name: &str) -> Option<SystemTime> {
    let rest = name.strip_prefix(SESSION_PREFIX)?;
    let (stamp, suffix) = rest.split_once('-')?;
    if suffix.len() != 6 || !suffix.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    time::parse_compact(stamp)
}

/// Creates `path` and any missing parents with mode 0700.
pub fn create_private_dir_all(path: &Path) -> io::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(path)
}

/// Creates a new directory with exactly mode 0700 (whatever the umask);
/// fails if it exists.
pub fn create_private_dir(path: &Path) -> io::Result<()> {
    DirBuilder::new().mode(DIR_MODE).create(path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(DIR_MODE))
}

/// Creates a new, empty, append-only file with exactly mode 0600.
pub fn create_append_file(path: &Path) -> io::Result<File> {
    let f = OpenOptions::new()
        .append(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)?;
    f.set_permissions(fs::Permissions::from_mode(FILE_MODE))?;
    Ok(f)
}

/// Replaces `dir/name` with `bytes` so that readers see the old or the new
/// content, never a mix: temp file in the same folder, rename. With
/// `durable`, the file is fsynced before the rename and the folder after it,
/// so the new content also survives a power cut; without, it survives the
/// writer being killed (the page cache is the kernel's), which is what a
/// running session needs, at a fraction of the cost.
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8], durable: bool) -> io::Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.tmp-{}-{n}", std::process::id()));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(FILE_MODE)
            .open(&tmp)?;
        f.set_permissions(fs::Permissions::from_mode(FILE_MODE))?;
        f.write_all(bytes)?;
        if durable {
            f.sync_all()?;
        }
        fs::rename(&tmp, dir.join(name))?;
        if durable {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// The folder, in the records folder, of what is not (yet or any more) a session:
/// the staging folders of sessions being made (`partial-PID-ID`, see
/// `SessionStore::create`) and the replaced `metadata.json` versions kept aside
/// (`retired-PID-N`, see [`retire`]). It is a folder of its own so that what each
/// session's start cleans up is found by reading it alone: scanning the records
/// folder itself grows with every session kept (with 5,000 sessions, 10 ms of CPU at
/// each start, measured). Owner-only like every record; never listed as a session.
pub const PENDING: &str = ".pending";

/// The name prefix, in [`PENDING`], of a replaced `metadata.json` kept until a later
/// run removes it (`retired-PID-N`, see [`retire`]).
pub const RETIRED: &str = "retired-";

/// The names earlier versions gave staging folders (`.partial-PID-ID`) and kept
/// metadata versions (`.retired-PID-N`) in the records folder itself: what a
/// supervisor of such a version left there is removed by `logs rm` and `prune`, which
/// read the records folder anyway.
pub const LEGACY_STAGING: &str = ".partial-";
pub const LEGACY_RETIRED: &str = ".retired-";

/// `root`'s [`PENDING`] folder, made (0700) if missing. Fails rather than follow
/// something other than a folder planted under that name.
pub fn pending_dir(root: &Path) -> io::Result<PathBuf> {
    let dir = root.join(PENDING);
    match fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => return Ok(dir),
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} is not a folder: remove it", dir.display()),
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    match create_private_dir(&dir) {
        Ok(()) => Ok(dir),
        // Another supervisor made it meanwhile: checked as above.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            if fs::symlink_metadata(&dir)?.is_dir() {
                Ok(dir)
            } else {
                Err(e)
            }
        }
        Err(e) => Err(e),
    }
}

/// Gives the current version of `dir/name` a second name in the records folder's
/// [`PENDING`] folder (`dir`'s parent is the records folder) before [`write_atomic`]
/// replaces it, so that the rename does not free the old version's blocks: a file
/// system mounted with `discard` and no journal (this project's test machines)
/// discards freed blocks synchronously, which made the final `metadata.json` rename
/// of a run cost 0.3-17 ms. The version kept is removed by the next session's start,
/// in the records folder's clean-up, while that session's sandbox builds itself
/// ([`remove_retired`]). Best effort: when the link cannot be made, the rename frees
/// the blocks as before. Nothing changes for readers: `metadata.json` is still
/// replaced by one rename, the version kept is owner-only like every record and is
/// not in a session folder.
///
/// Returns the second name when it was made: the version kept is this process's to
/// reuse, with [`replace_with`], for a later version of the file (see [`spare`]).
pub fn retire(dir: &Path, name: &str) -> Option<PathBuf> {
    let root = dir.parent()?;
    let kept = kept_name(root);
    fs::hard_link(dir.join(name), &kept).ok()?;
    Some(kept)
}

/// A new name for a kept file in `root`'s [`PENDING`] folder (`retired-PID-N`):
/// removed by [`remove_retired`] once this process is gone, whatever it holds.
fn kept_name(root: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    root.join(PENDING)
        .join(format!("{RETIRED}{}-{n}", std::process::id()))
}

/// Makes an empty owner-only file in the records folder `root`'s [`PENDING`] folder,
/// named like a kept version (so that it is removed once this process is gone, used
/// or not), for [`replace_with`] to turn into a later version of a file: a session's
/// start makes it while its sandbox builds itself, so that the version written once
/// the sandbox is ready, as the command starts, creates no file. Creating a file is
/// what costs there: 60-200 µs per file on this project's test machines (ext4 without
/// a journal looks past every recently deleted inode for a free one), against 5 µs
/// on a tmpfs; opening one that exists, 2.5 µs.
///
/// A version a gone process kept, of one block at most, is taken instead when there is
/// one (renamed to a name of ours: of two processes taking it, one gets it): that is
/// one file fewer for [`remove_retired`] to remove, and removing files is what makes
/// creating them slow there. (Of one block, so that cutting it to a shorter version
/// frees nothing, which a file system mounted with `discard` does synchronously.)
pub fn spare(root: &Path) -> io::Result<PathBuf> {
    let path = kept_name(root);
    if let Ok(entries) = fs::read_dir(root.join(PENDING)) {
        for entry in entries.filter_map(Result::ok) {
            if entry.file_type().is_ok_and(|t| t.is_file())
                && kept_by_a_gone_process(&entry.file_name(), RETIRED)
                && entry.metadata().is_ok_and(|m| m.len() <= SPARE_MAX_LEN)
                && fs::rename(entry.path(), &path).is_ok()
            {
                // Its only name now ours (see `replace_with`); else left to be removed.
                if fs::symlink_metadata(&path).is_ok_and(|m| m.nlink() == 1) {
                    return Ok(path);
                }
                return spare(root);
            }
        }
    }
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(FILE_MODE)
        .open(&path)?;
    f.set_permissions(fs::Permissions::from_mode(FILE_MODE))?;
    Ok(path)
}

/// The largest kept version [`spare`] takes: one block.
const SPARE_MAX_LEN: u64 = 4096;

/// Like [`write_atomic`] (not durable), with the file `kept` (this process's: made
/// by [`spare`] or kept by [`retire`], in the same file system) as the new version
/// instead of a new temporary file: overwritten in place, cut to `bytes`' length,
/// then renamed over `dir/name`. Readers see one version or the other as with
/// [`write_atomic`]: `kept` is not `dir/name` until the rename. A failure leaves
/// `kept` where it was, for [`remove_retired`] to remove once this process is gone.
pub fn replace_with(kept: &Path, dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(kept)?;
    // Written in place only when no other name leads to it: a version kept by a
    // `retire` whose replacement then failed is still `dir/name` itself (or another
    // session's), which must only ever be replaced whole.
    if f.metadata()?.nlink() != 1 {
        return Err(io::Error::other(format!(
            "{} has other names: not written in place",
            kept.display()
        )));
    }
    f.write_all(bytes)?;
    // Longer before, shorter now: the rest goes (within its block, nothing is freed).
    f.set_len(u64::try_from(bytes.len()).unwrap_or(u64::MAX))?;
    drop(f);
    fs::rename(kept, dir.join(name))
}

/// Removes, from the folder `dir` whose entries are `entries`, the versions
/// [`retire`] kept (named `prefix` + `PID-N`) for supervisors that are gone (a
/// version whose supervisor's pid was reused stays until that process is gone too).
pub fn remove_retired(dir: &Path, prefix: &str, entries: &[(std::ffi::OsString, bool)]) {
    for (name, is_file) in entries {
        if *is_file && kept_by_a_gone_process(name, prefix) {
            let _ = fs::remove_file(dir.join(name));
        }
    }
}

/// Whether `name` is `prefix` + `PID-N` for a process that is gone (not this one).
fn kept_by_a_gone_process(name: &std::ffi::OsStr, prefix: &str) -> bool {
    name.to_str()
        .and_then(|n| n.strip_prefix(prefix))
        .and_then(|rest| rest.split('-').next())
        .and_then(|pid| pid.parse::<u32>().ok())
        .is_some_and(|pid| {
            pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists()
        })
}

/// Identity of a process that survives pid reuse: the pid, its start time in
/// clock ticks since boot (field 22 of `/proc/PID/stat`) and the boot id.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessIdentity {
    pub pid: u32,
    pub start_ticks: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
}

impl ProcessIdentity {
    /// The identity of the calling process.
    pub fn current() -> Option<Self> {
        let pid = std::process::id();
        Some(Self {
            pid,
            start_ticks: proc_start_ticks(pid)?,
            boot_id: boot_id(),
        })
    }

    /// Whether this process is still alive. `current_boot` is the boot id
    /// of the running system (read once by callers checking many sessions).
    pub fn is_alive(&self, current_boot: Option<&str>) -> bool {
        if let (Some(mine), Some(now)) = (self.boot_id.as_deref(), current_boot)
            && mine != now
        {
            return false;
        }
        proc_start_ticks(self.pid) == Some(self.start_ticks)
    }
}

/// Field 22 (`starttime`) of `/proc/PID/stat`. The command name (field 2) may
/// contain spaces and parentheses, so fields are counted after the last `)`.
pub fn proc_start_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read(format!("/proc/{pid}/stat")).ok()?;
    parse_start_ticks(&stat)
}

fn parse_start_ticks(stat: &[u8]) -> Option<u64> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(stat.get(close + 1..)?).ok()?;
    // After ")" come field 3 (state) onwards; starttime is field 22.
    rest.split_ascii_whitespace().nth(22 - 3)?.parse().ok()
}

/// The kernel's boot id, which changes at every boot.
pub fn boot_id() -> Option<String> {
    let s = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(s.trim().to_owned())
}

/// Paths of the files of the session folder `dir`.
pub fn file_path(dir: &Path, file: RecordFile) -> PathBuf {
    dir.join(file.name())
}

const HEX: &[u8; 16] = b"0123456789abcdef";

pub fn hex_encode(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    s
}

pub fn hex_decode_32(s: &str) -> Option<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (i, pair) in b.chunks_exact(2).enumerate() {
        out[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_have_the_documented_shape() {
        let now = SystemTime::now();
        let id = new_session_id(now).unwrap();
        assert!(id.starts_with("session-"), "{id}");
        assert_eq!(id.len(), "session-20251219T101053Z-9af4c3".len());
        let t = parse_session_name(&id).unwrap();
        assert!(now.duration_since(t).unwrap().as_secs() < 2);
        assert!(parse_session_name("session-20251219T101053Z-9af4c").is_none());
        assert!(parse_session_name("session-20251219T101053Z-9af4cz").is_none());
        assert!(parse_session_name("other-20251219T101053Z-9af4c3").is_none());
        assert!(parse_session_name("session-20251219T101053Z-9af4c3").is_some());
    }

    #[test]
    fn start_ticks_survive_odd_command_names() {
        let mut stat = b"42 (a) b) c) S 1".to_vec();
        for i in 5..=21 {
            stat.extend_from_slice(format!(" {i}").as_bytes());
        }
        stat.extend_from_slice(b" 987654 0 0\n");
        assert_eq!(parse_start_ticks(&stat), Some(987_654));
        let me = ProcessIdentity::current().unwrap();
        assert!(me.is_alive(boot_id().as_deref()));
        let other_boot = ProcessIdentity {
            boot_id: Some("not-this-boot".into()),
            ..me.clone()
        };
        assert!(!other_boot.is_alive(boot_id().as_deref()));
        let restarted = ProcessIdentity {
            start_ticks: me.start_ticks + 1,
            ..me
        };
        assert!(!restarted.is_alive(None));
    }

    #[test]
    fn the_pending_folder_is_made_private_and_never_followed_elsewhere() {
        let tmp = crate::tests::TempDir::new("pending");
        let root = tmp.path().join("logs");
        fs::create_dir(&root).unwrap();
        let dir = pending_dir(&root).unwrap();
        assert_eq!(dir, root.join(PENDING));
        let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, DIR_MODE);
        // Found again as it is.
        assert_eq!(pending_dir(&root).unwrap(), dir);
        // A symlink planted in its place is refused, not followed.
        fs::remove_dir(&dir).unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &dir).unwrap();
        let e = pending_dir(&root).unwrap_err();
        assert!(e.to_string().contains("not a folder"), "{e}");
        // So is a file.
        fs::remove_file(&dir).unwrap();
        fs::write(&dir, b"").unwrap();
        assert!(pending_dir(&root).is_err());
    }

    #[test]
    fn hex_round_trip() {
        let bytes: Vec<u8> = (0..32).map(|i| i * 7).collect();
        let s = hex_encode(&bytes);
        assert_eq!(hex_decode_32(&s).unwrap().to_vec(), bytes);
        assert!(hex_decode_32(&s.to_uppercase()).is_none());
    }
}
