//! Dropping every capability for good.

use crate::error::SetupError;
use crate::sys;

// securebits: never grant capabilities to uid 0, never raise ambient capabilities,
// never keep capabilities across setuid — and lock all three.
const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
const SECBIT_KEEP_CAPS_LOCKED: libc::c_ulong = 1 << 5;
const SECBIT_NO_CAP_AMBIENT_RAISE: libc::c_ulong = 1 << 6;
const SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED: libc::c_ulong = 1 << 7;

fn last_cap() -> libc::c_ulong {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(63)
}

/// Clears the bounding set and locks the securebits. Needs CAP_SETPCAP, so it runs
/// before the identity switch.
pub fn drop_bounding_set() -> Result<(), SetupError> {
    let last = last_cap();
    for cap in 0..=last {
        sys::prctl(libc::PR_CAPBSET_DROP, cap, 0).map_err(|source| SetupError::Capabilities {
            step: "clear the bounding set",
            source,
        })?;
    }
    sys::prctl(
        libc::PR_SET_SECUREBITS,
        SECBIT_NOROOT
            | SECBIT_NOROOT_LOCKED
            | SECBIT_KEEP_CAPS_LOCKED
            | SECBIT_NO_CAP_AMBIENT_RAISE
            | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
        0,
    )
    .map_err(|source| SetupError::Capabilities {
        step: "lock the securebits",
        source,
    })?;
    Ok(())
}

/// Empties the ambient, effective, permitted and inheritable sets.
pub fn clear_all() -> Result<(), SetupError> {
    sys::prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
        0,
    )
    .map_err(|source| SetupError::Capabilities {
        step: "clear the ambient set",
        source,
    })?;
    sys::capset_empty().map_err(|source| SetupError::Capabilities {
        step: "empty the capability sets",
        source,
    })
}
