//! Credentials: uids, gids, supplementary groups, the file-system identity, capability sets.

use std::io;

use libc::c_int;

use super::{check, check_long};

pub fn setresuid(uid: u32) -> io::Result<()> {
    // SAFETY: plain integer arguments.
    check(unsafe { libc::setresuid(uid, uid, uid) }).map(drop)
}

pub fn setresgid(gid: u32) -> io::Result<()> {
    // SAFETY: plain integer arguments.
    check(unsafe { libc::setresgid(gid, gid, gid) }).map(drop)
}

pub fn setgroups(groups: &[u32]) -> io::Result<()> {
    // SAFETY: the pointer and length describe a live slice of gid_t.
    check(unsafe { libc::setgroups(groups.len(), groups.as_ptr()) }).map(drop)
}

pub fn getuid() -> u32 {
    // SAFETY: getuid cannot fail.
    unsafe { libc::getuid() }
}

pub fn getgid() -> u32 {
    // SAFETY: getgid cannot fail.
    unsafe { libc::getgid() }
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Empties the effective, permitted and inheritable capability sets.
pub fn capset_empty() -> io::Result<()> {
    capset_only(0)
}

/// Keeps only the capabilities in `caps` (bit numbers of `linux/capability.h`) in the
/// effective and permitted sets, none inheritable. Only ever lowers: capset refuses
/// to raise a permitted capability.
pub fn capset_only(caps: u64) -> io::Result<()> {
    let mut header = CapHeader {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3: two 32-bit words
        pid: 0,
    };
    // Each data word holds 32 of the 64 bits.
    let word = |shift: u32| {
        let bits = u32::try_from((caps >> shift) & u64::from(u32::MAX)).unwrap_or(0);
        CapData {
            effective: bits,
            permitted: bits,
            inheritable: 0,
        }
    };
    let data = [word(0), word(32)];
    // SAFETY: header and data have the kernel's layout for version 3 (two data words).
    check_long(unsafe {
        libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapHeader,
            data.as_ptr(),
        )
    })
    .map(drop)
}

pub fn setfsuid(uid: u32) {
    // SAFETY: setfsuid takes an integer; it reports the previous value, not errors.
    unsafe { libc::setfsuid(uid) };
}

pub fn setfsgid(gid: u32) {
    // SAFETY: setfsgid takes an integer; it reports the previous value, not errors.
    unsafe { libc::setfsgid(gid) };
}

/// Makes the calling thread, and it alone, reach files as `uid`:`gid` with no
/// supplementary group. Leaving fsuid 0 takes the file capabilities
/// (`CAP_DAC_OVERRIDE`, `CAP_FOWNER`, ...) out of its effective set, so the kernel
/// then checks its file calls as that user's. Raw system calls: glibc's wrappers
/// of setgroups would change every thread's groups.
pub fn thread_file_identity(uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: a length of 0 with a null list; plain integer arguments below.
    check_long(unsafe { libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) })?;
    // SAFETY: plain integer arguments; each reports the previous value.
    unsafe {
        libc::syscall(libc::SYS_setfsgid, gid);
        libc::syscall(libc::SYS_setfsuid, uid);
    }
    // An invalid id (-1) changes nothing and reports the current one: the change
    // took only if it reads back.
    // SAFETY: as above.
    let (now_uid, now_gid) = unsafe {
        (
            libc::syscall(libc::SYS_setfsuid, u32::MAX),
            libc::syscall(libc::SYS_setfsgid, u32::MAX),
        )
    };
    if now_uid == libc::c_long::from(uid) && now_gid == libc::c_long::from(gid) {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(libc::EPERM))
    }
}
