//! Syscall names and their x86_64 numbers.
//!
//! Numbers come from `libc::SYS_*`, with a small local table for syscalls that
//! are newer than the libc release we build against. Pairing a name with its
//! number goes through the `sys!` macro, which derives the name from the
//! constant's identifier, so a name can never drift away from its number.

use crate::rules::X32_SYSCALL_BIT;

/// A syscall as the policy names it: its name (for humans and reports) and its
/// x86_64 number (for the filter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Syscall {
    /// Name without the `SYS_` prefix, e.g. `"openat"`.
    pub name: &'static str,
    /// x86_64 syscall number.
    pub nr: u32,
}

impl Syscall {
    /// Builds a `Syscall` from a `SYS_*` constant's identifier and value.
    ///
    /// Evaluated at compile time (every use is in a `const`), so a malformed
    /// identifier or an out-of-range number fails the build instead of
    /// producing a wrong filter.
    #[allow(clippy::cast_possible_truncation)] // range asserted just above the cast
    pub(crate) const fn from_const(ident: &'static str, nr: libc::c_long) -> Self {
        let bytes = ident.as_bytes();
        assert!(
            bytes.len() > 4
                && bytes[0] == b'S'
                && bytes[1] == b'Y'
                && bytes[2] == b'S'
                && bytes[3] == b'_',
            "syscall constant must be named SYS_<name>"
        );
        let (_, rest) = bytes.split_at(4);
        let name = match core::str::from_utf8(rest) {
            Ok(name) => name,
            Err(_) => panic!("syscall name is not UTF-8"),
        };
        assert!(
            nr >= 0 && nr < X32_SYSCALL_BIT as libc::c_long,
            "not a native x86_64 syscall number"
        );
        Self {
            name,
            nr: nr as u32,
        }
    }
}

/// `sys!(SYS_openat)` → `Syscall { name: "openat", nr: 257 }`.
macro_rules! sys {
    ($ident:ident) => {
        $crate::syscalls::Syscall::from_const(stringify!($ident), $crate::syscalls::nr::$ident)
    };
}
pub(crate) use sys;

/// x86_64 syscall numbers: everything from libc, plus the syscalls libc does
/// not (yet) define.
///
/// Local definitions shadow the glob import, so when a future libc adds one of
/// these the build keeps working unchanged.
#[allow(non_upper_case_globals)] // keep libc's `SYS_name` spelling so `sys!` works uniformly
pub(crate) mod nr {
    pub(crate) use libc::*;

    // From the kernel's arch/x86/entry/syscalls/syscall_64.tbl. Removed
    // syscalls keep their slot in the table; the kernel answers ENOSYS, but we
    // list them so the deny list is explicit.
    pub(crate) const SYS_create_module: c_long = 174;
    pub(crate) const SYS_get_kernel_syms: c_long = 177;
    pub(crate) const SYS_query_module: c_long = 178;
    pub(crate) const SYS_io_pgetevents: c_long = 333;
    pub(crate) const SYS_uretprobe: c_long = 335;
    pub(crate) const SYS_cachestat: c_long = 451;
    pub(crate) const SYS_map_shadow_stack: c_long = 453;
    pub(crate) const SYS_futex_wake: c_long = 454;
    pub(crate) const SYS_futex_wait: c_long = 455;
    pub(crate) const SYS_futex_requeue: c_long = 456;
    pub(crate) const SYS_statmount: c_long = 457;
    pub(crate) const SYS_listmount: c_long = 458;
    pub(crate) const SYS_lsm_get_self_attr: c_long = 459;
    pub(crate) const SYS_lsm_set_self_attr: c_long = 460;
    pub(crate) const SYS_lsm_list_modules: c_long = 461;
    pub(crate) const SYS_setxattrat: c_long = 463;
    pub(crate) const SYS_getxattrat: c_long = 464;
    pub(crate) const SYS_listxattrat: c_long = 465;
    pub(crate) const SYS_removexattrat: c_long = 466;
    pub(crate) const SYS_open_tree_attr: c_long = 467;
}

#[cfg(test)]
mod tests {

    #[test]
    fn macro_pairs_name_with_libc_number() {
        let s = sys!(SYS_openat);
        assert_eq!(s.name, "openat");
        assert_eq!(i64::from(s.nr), libc::SYS_openat);
        let s = sys!(SYS_get_robust_list);
        assert_eq!(s.name, "get_robust_list");
        assert_eq!(s.nr, 274);
    }

    #[test]
    fn local_numbers_are_the_x86_64_ones() {
        // Spot checks against well-known neighbours in libc's table: the local
        // numbers must sit where the kernel table puts them.
        assert_eq!(sys!(SYS_rseq).nr + 1, sys!(SYS_uretprobe).nr);
        assert_eq!(sys!(SYS_fchmodat2).nr + 1, sys!(SYS_map_shadow_stack).nr);
        assert_eq!(sys!(SYS_mseal).nr - 1, sys!(SYS_lsm_list_modules).nr);
        assert_eq!(sys!(SYS_mseal).nr + 5, sys!(SYS_open_tree_attr).nr);
        assert_eq!(sys!(SYS_statx).nr + 1, sys!(SYS_io_pgetevents).nr);
    }
}
