//! Looking up an exec's path the way the traced process will, inside the sandbox.
//!
//! The supervisor is outside: following `/proc/PID/cwd/PATH` itself would resolve an
//! absolute symlink met on the way (`ln -s /tmp/x r; ./r`) in the *host's* root, which
//! both fails legitimate execs and lets the sandbox probe which host files exist.
//! Every lookup here is `openat2(RESOLVE_IN_ROOT)` from the sandbox's root directory
//! (`/proc/PID/root`), so `/` and `..` stop at the sandbox's root and absolute symlinks
//! land inside it. A relative path is joined to its base directory's path *as seen
//! inside* (the kernel names a directory of the sandbox's mount namespace from its own
//! root), and that name is used only once it is checked to be the same directory.

use std::ffi::CString;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;

use crate::sys;

/// Whether the file an exec names is there, as far as the sandbox can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Presence {
    /// No such file inside: the kernel would fail the exec with ENOENT.
    Missing,
    /// There, or not for us to decide (permissions, loops): the kernel decides.
    Present,
    /// Reached through a `/proc` link to an open file or directory (`/proc/PID/cwd/x`)
    /// that cannot be named from outside: not run, since it could not be recorded.
    ThroughProcLink,
    /// The supervisor has no descriptor left to look it up with (EMFILE, ENFILE):
    /// not run, since what runs could not be checked.
    NoDescriptor,
    /// An open descriptor executed (`execveat(fd, "", AT_EMPTY_PATH)`) whose file the
    /// supervisor cannot name (it cannot read the process's descriptors, e.g. a
    /// rootless Podman container's, whose processes run as other uids): not run.
    Unnamed,
    /// A relative path from a directory (the working directory or a descriptor's)
    /// that has no name from the sandbox's root (deeper than `PATH_MAX`, removed):
    /// the file cannot be read for what it starts, so it is not run.
    NoBase,
}

/// The file an exec names and its honest name for the record.
#[derive(Debug)]
pub(super) struct Lookup {
    pub presence: Presence,
    /// What to record as `exe`: the path as passed for `execve`; for `execveat`, the
    /// descriptor's file (`AT_EMPTY_PATH`, e.g. `/memfd:name (deleted)`) or the path
    /// joined to its directory; the path as passed when that directory cannot be named.
    pub exe: Vec<u8>,
    /// The file found, when it was looked up from the sandbox's root: what should be
    /// running once the exec succeeded (see `trace.rs`).
    pub file: Option<FileId>,
    /// The file itself (`O_PATH`), for an approval gate to look at.
    pub opened: Option<OwnedFd>,
}

/// A file by device and inode, with the path inside the sandbox it was found at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FileId {
    pub dev: u64,
    pub ino: u64,
    /// Change time when it was looked up: any write (a loader path rewritten in
    /// place, a `#!` line) or chmod after that changes it.
    pub ctime: (i64, i64),
    pub path: Vec<u8>,
}

/// Where a relative path starts: the process's working directory or a descriptor.
#[derive(Debug, Clone, Copy)]
pub(super) enum Base {
    Cwd,
    Fd(i32),
}

impl Base {
    fn proc_link(self, host_pid: libc::pid_t) -> String {
        match self {
            Base::Cwd => format!("/proc/{host_pid}/cwd"),
            Base::Fd(fd) => format!("/proc/{host_pid}/fd/{fd}"),
        }
    }
}

/// Looks up `path` for an exec by `host_pid`, relative to `base`, with `root` the
/// sandbox's root directory. `empty_path_ok` is execveat's `AT_EMPTY_PATH`.
pub(super) fn lookup(
    host_pid: libc::pid_t,
    root: Option<BorrowedFd<'_>>,
    base: Base,
    path: &[u8],
    empty_path_ok: bool,
) -> Lookup {
    let present = |exe: Vec<u8>| Lookup {
        presence: Presence::Present,
        exe,
        file: None,
        opened: None,
    };
    if path.is_empty() {
        if !empty_path_ok {
            return Lookup {
                presence: Presence::Missing,
                exe: Vec::new(),
                file: None,
                opened: None,
            };
        }
        // The descriptor itself runs: name the file it is open on (a memfd shows as
        // `/memfd:NAME (deleted)`), never what argv[0] claims.
        let link = base.proc_link(host_pid);
        let Some(exe) = read_link(&link) else {
            return Lookup {
                presence: Presence::Unnamed,
                exe: Vec::new(),
                file: None,
                opened: None,
            };
        };
        return Lookup {
            opened: open_link(&link),
            ..present(exe)
        };
    }
    let Some(root) = root else {
        // Without the sandbox's root nothing can be looked up inside: leave it to the
        // kernel (the exec is recorded either way).
        return present(path.to_vec());
    };
    if path.starts_with(b"/") {
        if let Some(found) = descriptor_link(host_pid, path) {
            return found;
        }
        let (presence, file, opened) = presence_in(root, path);
        return Lookup {
            presence,
            exe: path.to_vec(),
            file,
            opened,
        };
    }
    let Some(dir) = inside_dir(host_pid, root, base) else {
        return Lookup {
            presence: Presence::NoBase,
            ..present(path.to_vec())
        };
    };
    let mut joined = dir;
    if !joined.ends_with(b"/") {
        joined.push(b'/');
    }
    joined.extend_from_slice(path);
    if let Some(found) = descriptor_link(host_pid, &joined) {
        return found;
    }
    let (presence, file, opened) = presence_in(root, &joined);
    let exe = match base {
        // The cwd is recorded next to it.
        Base::Cwd => path.to_vec(),
        // The descriptor is not: record the whole path.
        Base::Fd(_) => joined,
    };
    Lookup {
        presence,
        exe,
        file,
        opened,
    }
}

/// The file a `/proc` magic link names, opened through it (`O_PATH`: a link to a
/// FIFO or a device must not block or act).
fn open_link(link: &str) -> Option<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(link)
        .ok()
        .map(OwnedFd::from)
}

/// The path, inside the sandbox, of the directory `base` of `host_pid`: the kernel's
/// name for it, used only if resolving that name from the sandbox's root reaches the
/// very same directory (not when it was deleted or moved out of reach).
pub(super) fn inside_dir(
    host_pid: libc::pid_t,
    root: BorrowedFd<'_>,
    base: Base,
) -> Option<Vec<u8>> {
    let link = base.proc_link(host_pid);
    let name = read_link(&link)?;
    if !name.starts_with(b"/") {
        return None;
    }
    // Following the magic link reaches the directory itself, whatever its name.
    let real = std::fs::metadata(&link).ok()?;
    let c_name = CString::new(name.clone()).ok()?;
    let fd = sys::openat2(
        root,
        &c_name,
        libc::O_PATH | libc::O_DIRECTORY,
        sys::RESOLVE_IN_ROOT,
    )
    .ok()?;
    let named = sys::fstat(std::os::fd::AsFd::as_fd(&fd)).ok()?;
    (named.st_dev == real.dev() && named.st_ino == real.ino()).then_some(name)
}

/// The target of a `/proc` magic link, as bytes.
pub(super) fn read_link(link: &str) -> Option<Vec<u8>> {
    std::fs::read_link(link)
        .ok()
        .map(|p| p.as_os_str().as_bytes().to_vec())
}

/// `/proc/self/fd/N` and its aliases (`/proc/thread-self/fd/N`, `/dev/fd/N`,
/// `/dev/stdin`…), `/proc/PID/fd/N` and `/proc/…/exe`: links the kernel resolves for
/// the process itself to a file it has open, maybe a memfd. From the sandbox's root
/// they cannot be looked up: `RESOLVE_IN_ROOT` refuses magic links, and our own
/// `/proc/self` is not in the sandbox's pid namespace. So they are read through the
/// process's entry in our `/proc` (`self`) or through the sandbox's own procfs, reached
/// from its root (a pid, numbered inside), and recorded as the file they name, like
/// `execveat(fd, "", AT_EMPTY_PATH)`. `None` for any other path.
pub(super) fn descriptor_link(host_pid: libc::pid_t, path: &[u8]) -> Option<Lookup> {
    let text = std::str::from_utf8(path).ok()?;
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let own = |rest: &str| format!("/proc/{host_pid}/{rest}");
    // The sandbox's /dev links (made by its init, read-only to it), checked all the
    // same: what else sits there is looked up like any other file.
    let dev_link = |name: &str, target: &str| {
        read_link(&own(&format!("root/dev/{name}"))).is_some_and(|t| t == target.as_bytes())
    };
    let link = match text.split('/').collect::<Vec<_>>().as_slice() {
        ["", "dev", "stdin"] if dev_link("stdin", "/proc/self/fd/0") => own("fd/0"),
        ["", "dev", "stdout"] if dev_link("stdout", "/proc/self/fd/1") => own("fd/1"),
        ["", "dev", "stderr"] if dev_link("stderr", "/proc/self/fd/2") => own("fd/2"),
        ["", "dev", "fd", n] if number(n) && dev_link("fd", "/proc/self/fd") => {
            own(&format!("fd/{n}"))
        }
        ["", "proc", "self" | "thread-self", "fd", n] if number(n) => own(&format!("fd/{n}")),
        ["", "proc", "self" | "thread-self", "exe"] => own("exe"),
        ["", "proc", pid, "fd", n] if number(pid) && number(n) => {
            own(&format!("root/proc/{pid}/fd/{n}"))
        }
        ["", "proc", pid, "task", tid, "fd", n] if number(pid) && number(tid) && number(n) => {
            own(&format!("root/proc/{pid}/task/{tid}/fd/{n}"))
        }
        ["", "proc", pid, "exe"] if number(pid) => own(&format!("root/proc/{pid}/exe")),
        _ => return None,
    };
    Some(match read_link(&link) {
        Some(exe) => Lookup {
            presence: Presence::Present,
            exe,
            file: None,
            opened: open_link(&link),
        },
        // There, but not ours to read (a rootless Podman container's descriptors):
        // not run, since it could not be recorded.
        None if std::fs::read_link(&link)
            .is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied) =>
        {
            Lookup {
                presence: Presence::Unnamed,
                exe: path.to_vec(),
                file: None,
                opened: None,
            }
        }
        // No such descriptor or process: the kernel fails the exec the same way.
        None => Lookup {
            presence: Presence::Missing,
            exe: path.to_vec(),
            file: None,
            opened: None,
        },
    })
}

/// Whether an error says the supervisor (or the system) has no descriptor left.
pub(super) fn is_out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

fn presence_in(root: BorrowedFd<'_>, path: &[u8]) -> (Presence, Option<FileId>, Option<OwnedFd>) {
    let Ok(c_path) = CString::new(path) else {
        return (Presence::Present, None, None);
    };
    match sys::openat2(root, &c_path, libc::O_PATH, sys::RESOLVE_IN_ROOT) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
            (Presence::Missing, None, None)
        }
        // A scoped lookup meeting a magic link (`/proc/PID/cwd/…`) fails with EXDEV.
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => (Presence::ThroughProcLink, None, None),
        Err(e) if is_out_of_descriptors(&e) => (Presence::NoDescriptor, None, None),
        // Any other error (permissions, loops) is for the kernel to decide on the
        // real exec.
        Err(_) => (Presence::Present, None, None),
        Ok(fd) => {
            // Only a regular file can be executed: the exec of anything else (a
            // FIFO, a device, a folder) fails, and the process goes on running what
            // it ran, which must not be taken for a changed path.
            let file = sys::fstat(std::os::fd::AsFd::as_fd(&fd))
                .ok()
                .filter(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG)
                .map(|st| FileId {
                    dev: st.st_dev,
                    ino: st.st_ino,
                    ctime: (st.st_ctime, st.st_ctime_nsec),
                    path: path.to_vec(),
                });
            (Presence::Present, file, Some(fd))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;
    use std::os::unix::fs::symlink;

    use super::*;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("vg-resolve-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn absolute_symlinks_resolve_in_the_given_root_not_ours() {
        // A fake "sandbox root" with a file at /bin/tool, and a symlink to it by its
        // absolute path; the same absolute path does not exist on the host.
        let root = dir("root");
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::write(root.join("bin/tool"), b"").unwrap();
        symlink("/bin/tool", root.join("r")).unwrap();
        symlink("/nonexistent-vg-probe", root.join("gone")).unwrap();
        let root_fd = std::fs::File::open(&root).unwrap();
        let pid = libc::pid_t::try_from(std::process::id()).unwrap();
        // Our own cwd is not inside that root: use an absolute path through it.
        let found = lookup(pid, Some(root_fd.as_fd()), Base::Cwd, b"/r", false);
        assert_eq!(found.presence, Presence::Present);
        let missing = lookup(pid, Some(root_fd.as_fd()), Base::Cwd, b"/gone", false);
        assert_eq!(missing.presence, Presence::Missing);
        // `..` stops at the root.
        let up = lookup(
            pid,
            Some(root_fd.as_fd()),
            Base::Cwd,
            b"/../../bin/tool",
            false,
        );
        assert_eq!(up.presence, Presence::Present);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn an_empty_path_needs_at_empty_path_and_names_the_descriptor() {
        let pid = libc::pid_t::try_from(std::process::id()).unwrap();
        assert_eq!(
            lookup(pid, None, Base::Fd(0), b"", false).presence,
            Presence::Missing
        );
        let d = dir("fd");
        let file = std::fs::File::create(d.join("prog")).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        let found = lookup(pid, None, Base::Fd(fd), b"", true);
        assert_eq!(found.presence, Presence::Present);
        assert_eq!(found.exe, d.join("prog").as_os_str().as_bytes());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_relative_path_joins_the_directory_seen_from_the_root() {
        let pid = libc::pid_t::try_from(std::process::id()).unwrap();
        let d = dir("rel");
        std::fs::write(d.join("prog"), b"").unwrap();
        let host_root = std::fs::File::open("/").unwrap();
        let dirfd = std::fs::File::open(&d).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&dirfd);
        let found = lookup(pid, Some(host_root.as_fd()), Base::Fd(fd), b"prog", false);
        assert_eq!(found.presence, Presence::Present);
        assert_eq!(found.exe, d.join("prog").as_os_str().as_bytes());
        let missing = lookup(pid, Some(host_root.as_fd()), Base::Fd(fd), b"nope", false);
        assert_eq!(missing.presence, Presence::Missing);
        // A directory deleted under us cannot be named: nothing can be read of what
        // its files would start, so the exec is not run.
        std::fs::remove_dir_all(&d).unwrap();
        let gone = lookup(pid, Some(host_root.as_fd()), Base::Fd(fd), b"prog", false);
        assert_eq!(gone.presence, Presence::NoBase);
        assert_eq!(gone.exe, b"prog");
    }

    #[test]
    fn descriptor_links_name_the_open_file_only_in_their_exact_forms() {
        let pid = libc::pid_t::try_from(std::process::id()).unwrap();
        let file = std::fs::File::open("/proc/self/exe").unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        let ours = std::fs::read_link("/proc/self/exe").unwrap();
        let ours = ours.as_os_str().as_bytes();
        for path in [
            format!("/proc/self/fd/{fd}"),
            format!("/proc/thread-self/fd/{fd}"),
            format!("/dev/fd/{fd}"),
            "/proc/self/exe".to_owned(),
        ] {
            let found = descriptor_link(pid, path.as_bytes()).unwrap();
            assert_eq!(found.presence, Presence::Present, "{path}");
            assert_eq!(found.exe, ours, "{path}");
        }
        let closed = descriptor_link(pid, b"/proc/self/fd/987654").unwrap();
        assert_eq!(closed.presence, Presence::Missing);
        for other in [
            "/proc/self/fd/x",
            "/proc/self/fd/1/x",
            "/proc/self/cwd",
            "/dev/fdx/1",
        ] {
            assert!(descriptor_link(pid, other.as_bytes()).is_none(), "{other}");
        }
    }
}
