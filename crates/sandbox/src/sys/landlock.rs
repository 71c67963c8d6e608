//! Landlock: the kernel's ABI version (the rules go through the `landlock` crate).

use std::io;

use libc::c_uint;

use super::check_long;

/// The Landlock ABI version of the running kernel, or the errno explaining its absence
/// (ENOSYS: not built in; EOPNOTSUPP: built in but disabled at boot).
pub fn landlock_abi_version() -> Result<i32, io::Error> {
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag (1) the call
    // only returns the ABI number.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1 as c_uint,
        )
    };
    let v = check_long(ret)?;
    i32::try_from(v).map_err(|_| io::Error::from_raw_os_error(libc::ERANGE))
}
