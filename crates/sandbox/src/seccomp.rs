//! Installs the seccomp filter built (as data) by `vg-seccomp`.

use std::os::fd::OwnedFd;

use crate::error::SetupError;
use crate::sys;

/// What the seccomp layer enforces in this session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeccompReport {
    pub instructions: usize,
    pub exec_notify: bool,
}

/// Compiles the default profile with `options`. Done in the supervisor, before the
/// sandbox starts, so a compile error is reported before anything runs.
pub fn compile(
    options: vg_seccomp::ProfileOptions,
) -> Result<Vec<vg_seccomp::SockFilter>, SetupError> {
    let filter = vg_seccomp::default_profile(options);
    filter.compile().map_err(|e| SetupError::Seccomp {
        reason: format!("the filter did not compile: {e}"),
    })
}

/// Installs `program` on the calling thread. With `notify`, returns the listener
/// descriptor for user notifications.
pub fn install(
    program: &[vg_seccomp::SockFilter],
    notify: bool,
) -> Result<Option<OwnedFd>, SetupError> {
    if !notify {
        return sys::seccomp_set_filter(program, 0).map_err(|e| SetupError::Seccomp {
            reason: e.to_string(),
        });
    }
    // Killable waits keep a held exec from being restarted (and asked about twice)
    // by an ordinary signal; kernels before 5.19 refuse the flag, and there the
    // approval gate recognises a restarted exec instead (see `trace.rs`).
    let killable =
        sys::SECCOMP_FILTER_FLAG_NEW_LISTENER | sys::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    match sys::seccomp_set_filter(program, killable) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            sys::seccomp_set_filter(program, sys::SECCOMP_FILTER_FLAG_NEW_LISTENER)
        }
        other => other,
    }
    .map_err(|e| SetupError::Seccomp {
        reason: e.to_string(),
    })
}
