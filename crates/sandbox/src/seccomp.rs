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

/// Compiles the default profile. Done in the supervisor, before the sandbox starts, so
/// a compile error is reported before anything runs.
pub fn compile(trace_exec: bool) -> Result<Vec<vg_seccomp::SockFilter>, SetupError> {
    let filter = vg_seccomp::default_profile(vg_seccomp::ProfileOptions { trace_exec });
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
    let flags = if notify {
        sys::SECCOMP_FILTER_FLAG_NEW_LISTENER
    } else {
        0
    };
    sys::seccomp_set_filter(program, flags).map_err(|e| SetupError::Seccomp {
        reason: e.to_string(),
    })
}
