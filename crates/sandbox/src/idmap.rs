//! An image's files, owned on disk by whoever pulled it, shown as the image user's.
//!
//! When root runs a sandbox from its image store as another user, the image's files
//! belong to host root, which the sandbox's user namespace does not map: the image's
//! root user could not write anywhere in its own image (not even to create a mount
//! point). The supervisor, still root, makes an idmapped clone of the image directory
//! whose owners are translated through a user namespace with the sandbox's mapping, so
//! that files owned by root on disk appear owned by the image's user. The image on disk
//! is not touched; the sandbox's init mounts the clone as its overlay's lower layer.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use crate::error::SetupError;
use crate::sys;

/// An idmapped, detached clone of `lower` in which files owned by host root appear
/// owned by `host`: the host ids the sandbox's user namespace gives the image's user.
pub(crate) fn image_for(lower: &Path, host: (u32, u32)) -> Result<OwnedFd, SetupError> {
    let fail = |e: io::Error| SetupError::MountSource {
        path: lower.to_path_buf(),
        source: io::Error::new(
            e.kind(),
            format!(
                "cannot show the image's files as the sandbox user's (idmapped mount): {e}; the image store's file system must support idmapped mounts (ext4, xfs, btrfs, tmpfs), or run vectraguard as the sandbox user"
            ),
        ),
    };
    // Opened without following any symlink and checked to be root's: an idmapped
    // mount shows everything root owns beneath it as the sandbox user's, so it must
    // be the image in root's store and nothing a symlink could point it at.
    let root = File::open("/").map_err(fail)?;
    let rel = lower.strip_prefix("/").unwrap_or(lower);
    let path = std::ffi::CString::new(rel.as_os_str().as_encoded_bytes())
        .map_err(|_| SetupError::BadPath(lower.to_path_buf()))?;
    let dir = sys::openat2(
        root.as_fd(),
        &path,
        libc::O_PATH | libc::O_DIRECTORY,
        sys::RESOLVE_NO_SYMLINKS | sys::RESOLVE_NO_MAGICLINKS,
    )
    .map_err(fail)?;
    let st = sys::fstat(dir.as_fd()).map_err(fail)?;
    if st.st_uid != 0 {
        return Err(fail(io::Error::other(
            "the image store is not root's; as root, use root's own VECTRAGUARD_HOME",
        )));
    }
    let userns = user_namespace(host).map_err(fail)?;
    let tree = sys::open_tree(dir.as_fd(), c"", sys::OPEN_TREE_CLONE).map_err(fail)?;
    sys::mount_setattr_idmap(tree.as_fd(), userns.as_fd()).map_err(fail)?;
    Ok(tree)
}

/// A user namespace whose id 0 is `host`: an idmapped mount through it shows a file
/// owned by on-disk id 0 (everything in a store root pulled into) as owned by `host`.
/// Made by a short-lived child that unshares it; the returned descriptor keeps it.
fn user_namespace(host: (u32, u32)) -> io::Result<OwnedFd> {
    let (mut ready_r, mut ready_w) = std::io::pipe()?;
    let (mut hold_r, hold_w) = std::io::pipe()?;
    // SAFETY: the child makes only async-signal-safe system calls (unshare, write,
    // read, _exit) and allocates nothing, so it is sound whatever threads exist.
    #[allow(unsafe_code)]
    let forked = unsafe { sys::fork() };
    match forked? {
        None => {
            drop(ready_r);
            drop(hold_w);
            let ok = sys::unshare(libc::CLONE_NEWUSER).is_ok();
            let _ = ready_w.write_all(&[u8::from(ok)]);
            // Wait until the parent has what it needs (our namespace), then go.
            let _ = hold_r.read(&mut [0u8; 1]);
            sys::exit_now(0)
        }
        Some(pid) => {
            drop(ready_w);
            drop(hold_r);
            let result = (|| {
                let mut ok = [0u8; 1];
                ready_r.read_exact(&mut ok)?;
                if ok[0] != 1 {
                    return Err(io::Error::other("cannot create a user namespace"));
                }
                std::fs::write(format!("/proc/{pid}/uid_map"), format!("0 {} 1\n", host.0))?;
                std::fs::write(format!("/proc/{pid}/gid_map"), format!("0 {} 1\n", host.1))?;
                File::open(format!("/proc/{pid}/ns/user")).map(OwnedFd::from)
            })();
            drop(hold_w);
            let _ = sys::waitpid(pid, 0);
            result
        }
    }
}
