//! Looking at a running sandbox's file system from the supervisor, as the sandbox
//! sees it: through its init's root directory, every path resolved inside it
//! (`openat2(RESOLVE_IN_ROOT)`: `..` and absolute symlinks stop at the sandbox's
//! root, never reach the host's). Used to tell, when reporting a refused access,
//! whether a path exists inside.

use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::sys;

/// The root directory of a running sandbox, held open.
#[derive(Debug)]
pub struct InsideRoot(OwnedFd);

impl InsideRoot {
    /// The root of the sandbox whose init (or any process in it) is `host_pid`.
    /// Opened once the sandbox has pivoted into its own root (after its first
    /// traced system call, say), it stays that root: nothing inside may chroot.
    pub fn of(host_pid: i32) -> std::io::Result<Self> {
        let root = std::fs::File::open(format!("/proc/{host_pid}/root"))?;
        Ok(Self(OwnedFd::from(root)))
    }

    /// The root a tracer's event carries (see `TraceEvent::File::root`), for a
    /// supervisor that cannot open its init's: the init is not dumpable.
    pub fn from_traced(root: &crate::trace::SandboxRoot) -> std::io::Result<Self> {
        root.open().map(|file| Self(OwnedFd::from(file)))
    }

    /// Whether `path` (absolute, as seen inside) names something inside the sandbox.
    /// Symlinks are followed inside; a dangling one counts as missing.
    pub fn exists(&self, path: &Path) -> bool {
        let relative = path.strip_prefix("/").unwrap_or(path);
        let name = if relative.as_os_str().is_empty() {
            CString::new(".")
        } else {
            CString::new(relative.as_os_str().as_bytes())
        };
        let Ok(name) = name else {
            return false;
        };
        sys::openat2(
            self.0.as_fd(),
            &name,
            libc::O_PATH,
            sys::RESOLVE_IN_ROOT | sys::RESOLVE_NO_MAGICLINKS,
        )
        .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_root_sees_what_exists() {
        let me = i32::try_from(std::process::id()).unwrap();
        let root = InsideRoot::of(me).unwrap();
        assert!(root.exists(Path::new("/proc/self")));
        assert!(root.exists(Path::new("/")));
        assert!(!root.exists(Path::new("/no/such/place/vectraguard")));
        // `..` stops at the root.
        assert!(root.exists(Path::new("/../../proc")));
    }
}
