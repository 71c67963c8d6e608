//! Socket paths of any length. `sun_path` holds 107 bytes, and a records folder under a
//! long home directory goes past that. A path that long is reached through its folder
//! instead: the folder is opened (`O_PATH`) and the socket named as
//! `/proc/self/fd/N/NAME`, which the kernel resolves like the full path.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The longest path `bind(2)` and `connect(2)` take (`sun_path` less its NUL).
pub const MAX_PATH: usize = 107;

/// Calls `f` with `path`, or, when `path` is too long for a socket address, with the
/// same socket named through a descriptor of its folder (held open during the call).
pub fn with_socket_path<T>(path: &Path, f: impl FnOnce(&Path) -> io::Result<T>) -> io::Result<T> {
    if path.as_os_str().len() <= MAX_PATH {
        return f(path);
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return f(path);
    };
    let folder: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)?;
    let short: PathBuf = Path::new(&format!("/proc/self/fd/{}", folder.as_raw_fd())).join(name);
    if short.as_os_str().len() > MAX_PATH {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    let result = f(&short);
    drop(folder);
    result
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::os::unix::net::{UnixListener, UnixStream};

    use super::*;

    #[test]
    fn a_socket_deeper_than_sun_path_is_bound_and_reached() {
        let root = tempfile::tempdir().unwrap();
        let mut dir = root.path().to_path_buf();
        while dir.as_os_str().len() < 150 {
            dir.push("a-rather-long-folder-name");
        }
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("control.sock");
        assert!(
            UnixListener::bind(&path).is_err(),
            "too long for bind itself"
        );
        let listener = with_socket_path(&path, |p| UnixListener::bind(p)).unwrap();
        assert!(path.exists(), "bound at the full path");
        with_socket_path(&path, |p| UnixStream::connect(p)).unwrap();
        listener.accept().unwrap();
    }
}
