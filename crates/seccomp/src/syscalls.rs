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

/// Every x86_64 syscall this crate can name, in number order: the kernel's table
/// (`arch/x86/entry/syscalls/syscall_64.tbl`) up to `open_tree_attr` (467); the
/// numbers it leaves unused (336-423) are absent. Each entry goes through `sys!`,
/// so a name always carries its number. Used to name a refused syscall in reports.
#[rustfmt::skip]
pub const ALL: &[Syscall] = &[
    sys!(SYS_read), sys!(SYS_write), sys!(SYS_open), sys!(SYS_close), sys!(SYS_stat),
    sys!(SYS_fstat), sys!(SYS_lstat), sys!(SYS_poll), sys!(SYS_lseek), sys!(SYS_mmap),
    sys!(SYS_mprotect), sys!(SYS_munmap), sys!(SYS_brk), sys!(SYS_rt_sigaction),
    sys!(SYS_rt_sigprocmask), sys!(SYS_rt_sigreturn), sys!(SYS_ioctl), sys!(SYS_pread64),
    sys!(SYS_pwrite64), sys!(SYS_readv), sys!(SYS_writev), sys!(SYS_access), sys!(SYS_pipe),
    sys!(SYS_select), sys!(SYS_sched_yield), sys!(SYS_mremap), sys!(SYS_msync), sys!(SYS_mincore),
    sys!(SYS_madvise), sys!(SYS_shmget), sys!(SYS_shmat), sys!(SYS_shmctl), sys!(SYS_dup),
    sys!(SYS_dup2), sys!(SYS_pause), sys!(SYS_nanosleep), sys!(SYS_getitimer), sys!(SYS_alarm),
    sys!(SYS_setitimer), sys!(SYS_getpid), sys!(SYS_sendfile), sys!(SYS_socket), sys!(SYS_connect),
    sys!(SYS_accept), sys!(SYS_sendto), sys!(SYS_recvfrom), sys!(SYS_sendmsg), sys!(SYS_recvmsg),
    sys!(SYS_shutdown), sys!(SYS_bind), sys!(SYS_listen), sys!(SYS_getsockname),
    sys!(SYS_getpeername), sys!(SYS_socketpair), sys!(SYS_setsockopt), sys!(SYS_getsockopt),
    sys!(SYS_clone), sys!(SYS_fork), sys!(SYS_vfork), sys!(SYS_execve), sys!(SYS_exit),
    sys!(SYS_wait4), sys!(SYS_kill), sys!(SYS_uname), sys!(SYS_semget), sys!(SYS_semop),
    sys!(SYS_semctl), sys!(SYS_shmdt), sys!(SYS_msgget), sys!(SYS_msgsnd), sys!(SYS_msgrcv),
    sys!(SYS_msgctl), sys!(SYS_fcntl), sys!(SYS_flock), sys!(SYS_fsync), sys!(SYS_fdatasync),
    sys!(SYS_truncate), sys!(SYS_ftruncate), sys!(SYS_getdents), sys!(SYS_getcwd), sys!(SYS_chdir),
    sys!(SYS_fchdir), sys!(SYS_rename), sys!(SYS_mkdir), sys!(SYS_rmdir), sys!(SYS_creat),
    sys!(SYS_link), sys!(SYS_unlink), sys!(SYS_symlink), sys!(SYS_readlink), sys!(SYS_chmod),
    sys!(SYS_fchmod), sys!(SYS_chown), sys!(SYS_fchown), sys!(SYS_lchown), sys!(SYS_umask),
    sys!(SYS_gettimeofday), sys!(SYS_getrlimit), sys!(SYS_getrusage), sys!(SYS_sysinfo),
    sys!(SYS_times), sys!(SYS_ptrace), sys!(SYS_getuid), sys!(SYS_syslog), sys!(SYS_getgid),
    sys!(SYS_setuid), sys!(SYS_setgid), sys!(SYS_geteuid), sys!(SYS_getegid), sys!(SYS_setpgid),
    sys!(SYS_getppid), sys!(SYS_getpgrp), sys!(SYS_setsid), sys!(SYS_setreuid), sys!(SYS_setregid),
    sys!(SYS_getgroups), sys!(SYS_setgroups), sys!(SYS_setresuid), sys!(SYS_getresuid),
    sys!(SYS_setresgid), sys!(SYS_getresgid), sys!(SYS_getpgid), sys!(SYS_setfsuid),
    sys!(SYS_setfsgid), sys!(SYS_getsid), sys!(SYS_capget), sys!(SYS_capset),
    sys!(SYS_rt_sigpending), sys!(SYS_rt_sigtimedwait), sys!(SYS_rt_sigqueueinfo),
    sys!(SYS_rt_sigsuspend), sys!(SYS_sigaltstack), sys!(SYS_utime), sys!(SYS_mknod),
    sys!(SYS_uselib), sys!(SYS_personality), sys!(SYS_ustat), sys!(SYS_statfs), sys!(SYS_fstatfs),
    sys!(SYS_sysfs), sys!(SYS_getpriority), sys!(SYS_setpriority), sys!(SYS_sched_setparam),
    sys!(SYS_sched_getparam), sys!(SYS_sched_setscheduler), sys!(SYS_sched_getscheduler),
    sys!(SYS_sched_get_priority_max), sys!(SYS_sched_get_priority_min),
    sys!(SYS_sched_rr_get_interval), sys!(SYS_mlock), sys!(SYS_munlock), sys!(SYS_mlockall),
    sys!(SYS_munlockall), sys!(SYS_vhangup), sys!(SYS_modify_ldt), sys!(SYS_pivot_root),
    sys!(SYS__sysctl), sys!(SYS_prctl), sys!(SYS_arch_prctl), sys!(SYS_adjtimex),
    sys!(SYS_setrlimit), sys!(SYS_chroot), sys!(SYS_sync), sys!(SYS_acct), sys!(SYS_settimeofday),
    sys!(SYS_mount), sys!(SYS_umount2), sys!(SYS_swapon), sys!(SYS_swapoff), sys!(SYS_reboot),
    sys!(SYS_sethostname), sys!(SYS_setdomainname), sys!(SYS_iopl), sys!(SYS_ioperm),
    sys!(SYS_create_module), sys!(SYS_init_module), sys!(SYS_delete_module),
    sys!(SYS_get_kernel_syms), sys!(SYS_query_module), sys!(SYS_quotactl), sys!(SYS_nfsservctl),
    sys!(SYS_getpmsg), sys!(SYS_putpmsg), sys!(SYS_afs_syscall), sys!(SYS_tuxcall),
    sys!(SYS_security), sys!(SYS_gettid), sys!(SYS_readahead), sys!(SYS_setxattr),
    sys!(SYS_lsetxattr), sys!(SYS_fsetxattr), sys!(SYS_getxattr), sys!(SYS_lgetxattr),
    sys!(SYS_fgetxattr), sys!(SYS_listxattr), sys!(SYS_llistxattr), sys!(SYS_flistxattr),
    sys!(SYS_removexattr), sys!(SYS_lremovexattr), sys!(SYS_fremovexattr), sys!(SYS_tkill),
    sys!(SYS_time), sys!(SYS_futex), sys!(SYS_sched_setaffinity), sys!(SYS_sched_getaffinity),
    sys!(SYS_set_thread_area), sys!(SYS_io_setup), sys!(SYS_io_destroy), sys!(SYS_io_getevents),
    sys!(SYS_io_submit), sys!(SYS_io_cancel), sys!(SYS_get_thread_area), sys!(SYS_lookup_dcookie),
    sys!(SYS_epoll_create), sys!(SYS_epoll_ctl_old), sys!(SYS_epoll_wait_old),
    sys!(SYS_remap_file_pages), sys!(SYS_getdents64), sys!(SYS_set_tid_address),
    sys!(SYS_restart_syscall), sys!(SYS_semtimedop), sys!(SYS_fadvise64), sys!(SYS_timer_create),
    sys!(SYS_timer_settime), sys!(SYS_timer_gettime), sys!(SYS_timer_getoverrun),
    sys!(SYS_timer_delete), sys!(SYS_clock_settime), sys!(SYS_clock_gettime),
    sys!(SYS_clock_getres), sys!(SYS_clock_nanosleep), sys!(SYS_exit_group), sys!(SYS_epoll_wait),
    sys!(SYS_epoll_ctl), sys!(SYS_tgkill), sys!(SYS_utimes), sys!(SYS_vserver), sys!(SYS_mbind),
    sys!(SYS_set_mempolicy), sys!(SYS_get_mempolicy), sys!(SYS_mq_open), sys!(SYS_mq_unlink),
    sys!(SYS_mq_timedsend), sys!(SYS_mq_timedreceive), sys!(SYS_mq_notify),
    sys!(SYS_mq_getsetattr), sys!(SYS_kexec_load), sys!(SYS_waitid), sys!(SYS_add_key),
    sys!(SYS_request_key), sys!(SYS_keyctl), sys!(SYS_ioprio_set), sys!(SYS_ioprio_get),
    sys!(SYS_inotify_init), sys!(SYS_inotify_add_watch), sys!(SYS_inotify_rm_watch),
    sys!(SYS_migrate_pages), sys!(SYS_openat), sys!(SYS_mkdirat), sys!(SYS_mknodat),
    sys!(SYS_fchownat), sys!(SYS_futimesat), sys!(SYS_newfstatat), sys!(SYS_unlinkat),
    sys!(SYS_renameat), sys!(SYS_linkat), sys!(SYS_symlinkat), sys!(SYS_readlinkat),
    sys!(SYS_fchmodat), sys!(SYS_faccessat), sys!(SYS_pselect6), sys!(SYS_ppoll),
    sys!(SYS_unshare), sys!(SYS_set_robust_list), sys!(SYS_get_robust_list), sys!(SYS_splice),
    sys!(SYS_tee), sys!(SYS_sync_file_range), sys!(SYS_vmsplice), sys!(SYS_move_pages),
    sys!(SYS_utimensat), sys!(SYS_epoll_pwait), sys!(SYS_signalfd), sys!(SYS_timerfd_create),
    sys!(SYS_eventfd), sys!(SYS_fallocate), sys!(SYS_timerfd_settime), sys!(SYS_timerfd_gettime),
    sys!(SYS_accept4), sys!(SYS_signalfd4), sys!(SYS_eventfd2), sys!(SYS_epoll_create1),
    sys!(SYS_dup3), sys!(SYS_pipe2), sys!(SYS_inotify_init1), sys!(SYS_preadv), sys!(SYS_pwritev),
    sys!(SYS_rt_tgsigqueueinfo), sys!(SYS_perf_event_open), sys!(SYS_recvmmsg),
    sys!(SYS_fanotify_init), sys!(SYS_fanotify_mark), sys!(SYS_prlimit64),
    sys!(SYS_name_to_handle_at), sys!(SYS_open_by_handle_at), sys!(SYS_clock_adjtime),
    sys!(SYS_syncfs), sys!(SYS_sendmmsg), sys!(SYS_setns), sys!(SYS_getcpu),
    sys!(SYS_process_vm_readv), sys!(SYS_process_vm_writev), sys!(SYS_kcmp),
    sys!(SYS_finit_module), sys!(SYS_sched_setattr), sys!(SYS_sched_getattr), sys!(SYS_renameat2),
    sys!(SYS_seccomp), sys!(SYS_getrandom), sys!(SYS_memfd_create), sys!(SYS_kexec_file_load),
    sys!(SYS_bpf), sys!(SYS_execveat), sys!(SYS_userfaultfd), sys!(SYS_membarrier),
    sys!(SYS_mlock2), sys!(SYS_copy_file_range), sys!(SYS_preadv2), sys!(SYS_pwritev2),
    sys!(SYS_pkey_mprotect), sys!(SYS_pkey_alloc), sys!(SYS_pkey_free), sys!(SYS_statx),
    sys!(SYS_io_pgetevents), sys!(SYS_rseq), sys!(SYS_uretprobe), sys!(SYS_pidfd_send_signal),
    sys!(SYS_io_uring_setup), sys!(SYS_io_uring_enter), sys!(SYS_io_uring_register),
    sys!(SYS_open_tree), sys!(SYS_move_mount), sys!(SYS_fsopen), sys!(SYS_fsconfig),
    sys!(SYS_fsmount), sys!(SYS_fspick), sys!(SYS_pidfd_open), sys!(SYS_clone3),
    sys!(SYS_close_range), sys!(SYS_openat2), sys!(SYS_pidfd_getfd), sys!(SYS_faccessat2),
    sys!(SYS_process_madvise), sys!(SYS_epoll_pwait2), sys!(SYS_mount_setattr),
    sys!(SYS_quotactl_fd), sys!(SYS_landlock_create_ruleset), sys!(SYS_landlock_add_rule),
    sys!(SYS_landlock_restrict_self), sys!(SYS_memfd_secret), sys!(SYS_process_mrelease),
    sys!(SYS_futex_waitv), sys!(SYS_set_mempolicy_home_node), sys!(SYS_cachestat),
    sys!(SYS_fchmodat2), sys!(SYS_map_shadow_stack), sys!(SYS_futex_wake), sys!(SYS_futex_wait),
    sys!(SYS_futex_requeue), sys!(SYS_statmount), sys!(SYS_listmount), sys!(SYS_lsm_get_self_attr),
    sys!(SYS_lsm_set_self_attr), sys!(SYS_lsm_list_modules), sys!(SYS_mseal), sys!(SYS_setxattrat),
    sys!(SYS_getxattrat), sys!(SYS_listxattrat), sys!(SYS_removexattrat), sys!(SYS_open_tree_attr),
];

/// The syscall with number `nr`, if [`ALL`] names it.
pub fn by_number(nr: u32) -> Option<Syscall> {
    ALL.binary_search_by_key(&nr, |s| s.nr)
        .ok()
        .and_then(|i| ALL.get(i).copied())
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn the_table_is_in_number_order_without_gaps_in_known_ranges() {
        assert!(ALL.windows(2).all(|w| w[0].nr < w[1].nr), "not sorted");
        let names: std::collections::BTreeSet<_> = ALL.iter().map(|s| s.name).collect();
        assert_eq!(names.len(), ALL.len(), "duplicate name");
        // 0..=334 and 424.. are contiguous in the kernel's table.
        for nr in (0..=335).chain(424..=467) {
            assert!(by_number(nr).is_some(), "{nr} missing");
        }
        assert_eq!(by_number(59).map(|s| s.name), Some("execve"));
        assert_eq!(by_number(165).map(|s| s.name), Some("mount"));
        assert_eq!(by_number(272).map(|s| s.name), Some("unshare"));
        assert_eq!(by_number(437).map(|s| s.name), Some("openat2"));
        assert_eq!(by_number(400), None);
        assert_eq!(by_number(u32::MAX), None);
    }
}
