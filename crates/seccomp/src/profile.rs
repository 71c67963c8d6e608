//! The default sandbox profile.
//!
//! Allowlist model: start from Docker's default seccomp allowlist for x86_64
//! (moby `profiles/seccomp/default.json`, module `github.com/moby/profiles/seccomp`
//! v0.2.3), without the entries Docker only enables for processes holding a
//! capability, since sandboxed programs hold none. Then remove [`DENYLIST`]
//! and add argument rules for a handful of syscalls. Everything else fails
//! with `EPERM` (with [`ProfileOptions::report_refusals`], failed so by the
//! supervisor, which reports it).

use crate::rules::{Action, Cmp, Cond, Filter, SyscallRule, X32_SYSCALL_BIT};
use crate::syscalls::{Syscall, sys};

/// Terminal ioctls refused in every sandbox: see the ioctl rules.
pub const TERMINAL_IOCTLS_DENIED: [u64; 5] = [
    libc::TIOCSTI,
    libc::TIOCLINUX,
    libc::TIOCSETD,
    libc::TIOCEXCL,
    libc::TIOCCONS,
];

/// Knobs for [`default_profile`].
///
/// All three route system calls to one seccomp user-notification listener, which
/// the supervisor serves; [`notified_call`] tells it what each notification is.
/// `trace_files` and `report_refusals` are meant to go with `trace_exec`: the
/// supervisor names the program behind a file access or a refusal from the execs
/// it saw, so `vg-sandbox` refuses them without it. The profile itself is plain
/// data and applies each option on its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProfileOptions {
    /// Route `execve`/`execveat` to the seccomp user-notification supervisor
    /// (`SECCOMP_RET_USER_NOTIF`) instead of allowing them, so every exec can be
    /// recorded.
    pub trace_exec: bool,
    /// Route `exit_group`, which carries a program's exit status, to the listener
    /// too: how exits are seen where the kernel cannot tell the supervisor a
    /// process's status after it was reaped (before Linux 6.15). Each program then
    /// waits for a second round trip as it exits.
    pub trace_exit: bool,
    /// Route the path-based file system calls of [`TRACED_FILE_SYSCALLS`] to the
    /// listener instead of allowing them, so that every file opened, created,
    /// renamed or removed can be recorded (learning mode). The supervisor lets each
    /// one continue: this is observation, not enforcement (the view and Landlock
    /// still decide), and it costs each of those calls a round trip to the
    /// supervisor.
    pub trace_files: bool,
    /// Without `trace_files`: route only the file system calls that change
    /// something — `open`/`openat` asking to write, create or truncate (their flags
    /// are in registers, which the filter reads), `creat`, `openat2` (its flags are
    /// in memory, which it cannot read), and every rename, link, removal and
    /// `mkdir` — so that refused changes can be reported while the far more common
    /// read-only opens cost nothing.
    pub trace_file_changes: bool,
    /// Route every refusal that would be a plain `EPERM` — the default action
    /// (anything not allowed, unknown numbers included), the [`DENYLIST`], and the
    /// argument-based refusals (`clone` with namespace flags, `personality`,
    /// terminal ioctls, raw sockets) — to the listener, which fails it with `EPERM`
    /// and reports it. What the program sees does not change. Probes keep their own
    /// plain errno, unreported: `clone3` (`ENOSYS`, so libcs fall back to `clone`)
    /// and socket families outside the allowlist (`EAFNOSUPPORT`). x32 numbers stay
    /// a plain `EPERM` and foreign arches are still killed: neither reaches the
    /// listener.
    pub report_refusals: bool,
}

impl ProfileOptions {
    /// Whether the profile hands any system call to a listener. A filter with
    /// [`Action::Notify`] rules installed without one fails those calls with
    /// `ENOSYS`, so its installer must ask for a listener (and serve it) exactly
    /// when this holds.
    pub const fn notifies(self) -> bool {
        self.trace_exec
            || self.trace_exit
            || self.trace_files
            || self.trace_file_changes
            || self.report_refusals
    }
}

/// The `open`/`openat` flags that make an open a change: writing, creating or
/// truncating (`O_TMPFILE` needs a write mode, so it is one too).
pub const OPEN_CHANGE_FLAGS: u64 =
    bits(libc::O_WRONLY) | bits(libc::O_RDWR) | bits(libc::O_CREAT) | bits(libc::O_TRUNC);

/// The file system calls [`ProfileOptions::trace_files`] routes to the listener:
/// those that name a path to open, create, rename, link or remove. (Calls that only
/// look — `stat`, `access`, `readlink` — and those on open descriptors are not
/// traced.)
#[rustfmt::skip]
pub const TRACED_FILE_SYSCALLS: &[Syscall] = &[
    sys!(SYS_open), sys!(SYS_openat), sys!(SYS_openat2), sys!(SYS_creat),
    sys!(SYS_rename), sys!(SYS_renameat), sys!(SYS_renameat2),
    sys!(SYS_unlink), sys!(SYS_unlinkat), sys!(SYS_mkdir), sys!(SYS_mkdirat), sys!(SYS_rmdir),
    sys!(SYS_link), sys!(SYS_linkat), sys!(SYS_symlink), sys!(SYS_symlinkat),
    sys!(SYS_truncate),
];

/// What a notification from a [`default_profile`] filter is, by its syscall number:
/// the one place the supervisor learns which calls reach it and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotifiedCall {
    /// `execve` or `execveat` ([`ProfileOptions::trace_exec`]).
    Exec,
    /// `exit_group` ([`ProfileOptions::trace_exit`]).
    Exit,
    /// One of [`TRACED_FILE_SYSCALLS`] ([`ProfileOptions::trace_files`]): to be let
    /// go once recorded.
    File(Syscall),
    /// Anything else. Only a refusal reaches the listener this way
    /// ([`ProfileOptions::report_refusals`]), so it must be failed with `EPERM`,
    /// never let go: letting it continue would run a call the profile refuses.
    Refused,
}

/// Classifies a notification by its syscall number (`seccomp_data.nr`, as the
/// kernel gives it). Fails closed: every number that is not an exec, an exit or a
/// traced file call is [`NotifiedCall::Refused`].
pub fn notified_call(nr: i64) -> NotifiedCall {
    let Ok(nr) = u32::try_from(nr) else {
        return NotifiedCall::Refused;
    };
    if nr == sys!(SYS_execve).nr || nr == sys!(SYS_execveat).nr {
        NotifiedCall::Exec
    } else if nr == sys!(SYS_exit_group).nr {
        NotifiedCall::Exit
    } else if let Some(&file) = TRACED_FILE_SYSCALLS.iter().find(|s| s.nr == nr) {
        NotifiedCall::File(file)
    } else {
        NotifiedCall::Refused
    }
}

/// Converts a libc errno constant to the 16-bit form `SECCOMP_RET_ERRNO` carries.
#[allow(clippy::cast_possible_truncation)] // range asserted (at compile time: used in consts)
const fn errno(e: libc::c_int) -> u16 {
    assert!(e > 0 && e <= crate::rules::MAX_ERRNO as libc::c_int);
    e as u16
}

/// A non-negative libc `c_int` flag or constant as a 64-bit argument value.
#[allow(clippy::cast_sign_loss)] // non-negativity asserted
const fn bits(v: libc::c_int) -> u64 {
    assert!(v >= 0);
    v as u64
}

/// `EPERM`, the answer for everything not allowed.
pub const EPERM: u16 = errno(libc::EPERM);
/// `ENOSYS`, for `clone3` (so libcs fall back to `clone`).
pub const ENOSYS: u16 = errno(libc::ENOSYS);
/// `EAFNOSUPPORT`, for socket families outside the allowlist.
pub const EAFNOSUPPORT: u16 = errno(libc::EAFNOSUPPORT);

/// Docker's unconditional x86_64 allowlist, in Docker's order.
///
/// Names Docker lists only for other ABIs (`*32`, `*_time64`, `socketcall`,
/// `ipc`, `mmap2`, `_llseek`, ...) do not exist as x86_64 syscalls and are
/// left out. `arch_prctl` and `modify_ldt` come from Docker's amd64-only
/// entries. `socket` and `personality` are only allowed by Docker with
/// argument conditions and get argument rules of their own here.
#[rustfmt::skip]
pub const DOCKER_ALLOWLIST: &[Syscall] = &[
    sys!(SYS_accept), sys!(SYS_accept4), sys!(SYS_access), sys!(SYS_adjtimex), sys!(SYS_alarm),
    sys!(SYS_bind), sys!(SYS_brk), sys!(SYS_cachestat), sys!(SYS_capget), sys!(SYS_capset),
    sys!(SYS_chdir), sys!(SYS_chmod), sys!(SYS_chown), sys!(SYS_clock_adjtime),
    sys!(SYS_clock_getres), sys!(SYS_clock_gettime), sys!(SYS_clock_nanosleep),
    sys!(SYS_close), sys!(SYS_close_range), sys!(SYS_connect), sys!(SYS_copy_file_range),
    sys!(SYS_creat), sys!(SYS_dup), sys!(SYS_dup2), sys!(SYS_dup3), sys!(SYS_epoll_create),
    sys!(SYS_epoll_create1), sys!(SYS_epoll_ctl), sys!(SYS_epoll_ctl_old),
    sys!(SYS_epoll_pwait), sys!(SYS_epoll_pwait2), sys!(SYS_epoll_wait),
    sys!(SYS_epoll_wait_old), sys!(SYS_eventfd), sys!(SYS_eventfd2), sys!(SYS_execve),
    sys!(SYS_execveat), sys!(SYS_exit), sys!(SYS_exit_group), sys!(SYS_faccessat),
    sys!(SYS_faccessat2), sys!(SYS_fadvise64), sys!(SYS_fallocate), sys!(SYS_fanotify_mark),
    sys!(SYS_fchdir), sys!(SYS_fchmod), sys!(SYS_fchmodat), sys!(SYS_fchmodat2),
    sys!(SYS_fchown), sys!(SYS_fchownat), sys!(SYS_fcntl), sys!(SYS_fdatasync),
    sys!(SYS_fgetxattr), sys!(SYS_flistxattr), sys!(SYS_flock), sys!(SYS_fork),
    sys!(SYS_fremovexattr), sys!(SYS_fsetxattr), sys!(SYS_fstat), sys!(SYS_fstatfs),
    sys!(SYS_fsync), sys!(SYS_ftruncate), sys!(SYS_futex), sys!(SYS_futex_requeue),
    sys!(SYS_futex_wait), sys!(SYS_futex_waitv), sys!(SYS_futex_wake), sys!(SYS_futimesat),
    sys!(SYS_getcpu), sys!(SYS_getcwd), sys!(SYS_getdents), sys!(SYS_getdents64),
    sys!(SYS_getegid), sys!(SYS_geteuid), sys!(SYS_getgid), sys!(SYS_getgroups),
    sys!(SYS_getitimer), sys!(SYS_getpeername), sys!(SYS_getpgid), sys!(SYS_getpgrp),
    sys!(SYS_getpid), sys!(SYS_getppid), sys!(SYS_getpriority), sys!(SYS_getrandom),
    sys!(SYS_getresgid), sys!(SYS_getresuid), sys!(SYS_getrlimit), sys!(SYS_get_robust_list),
    sys!(SYS_getrusage), sys!(SYS_getsid), sys!(SYS_getsockname), sys!(SYS_getsockopt),
    sys!(SYS_get_thread_area), sys!(SYS_gettid), sys!(SYS_gettimeofday), sys!(SYS_getuid),
    sys!(SYS_getxattr), sys!(SYS_getxattrat), sys!(SYS_inotify_add_watch),
    sys!(SYS_inotify_init), sys!(SYS_inotify_init1), sys!(SYS_inotify_rm_watch),
    sys!(SYS_io_cancel), sys!(SYS_ioctl), sys!(SYS_io_destroy), sys!(SYS_io_getevents),
    sys!(SYS_io_pgetevents), sys!(SYS_ioprio_get), sys!(SYS_ioprio_set), sys!(SYS_io_setup),
    sys!(SYS_io_submit), sys!(SYS_kill), sys!(SYS_landlock_add_rule),
    sys!(SYS_landlock_create_ruleset), sys!(SYS_landlock_restrict_self), sys!(SYS_lchown),
    sys!(SYS_lgetxattr), sys!(SYS_link), sys!(SYS_linkat), sys!(SYS_listen),
    sys!(SYS_listmount), sys!(SYS_listxattr), sys!(SYS_listxattrat), sys!(SYS_llistxattr),
    sys!(SYS_lremovexattr), sys!(SYS_lseek), sys!(SYS_lsetxattr), sys!(SYS_lstat),
    sys!(SYS_madvise), sys!(SYS_map_shadow_stack), sys!(SYS_membarrier),
    sys!(SYS_memfd_create), sys!(SYS_memfd_secret), sys!(SYS_mincore), sys!(SYS_mkdir),
    sys!(SYS_mkdirat), sys!(SYS_mknod), sys!(SYS_mknodat), sys!(SYS_mlock), sys!(SYS_mlock2),
    sys!(SYS_mlockall), sys!(SYS_mmap), sys!(SYS_mprotect), sys!(SYS_mq_getsetattr),
    sys!(SYS_mq_notify), sys!(SYS_mq_open), sys!(SYS_mq_timedreceive), sys!(SYS_mq_timedsend),
    sys!(SYS_mq_unlink), sys!(SYS_mremap), sys!(SYS_mseal), sys!(SYS_msgctl), sys!(SYS_msgget),
    sys!(SYS_msgrcv), sys!(SYS_msgsnd), sys!(SYS_msync), sys!(SYS_munlock),
    sys!(SYS_munlockall), sys!(SYS_munmap), sys!(SYS_name_to_handle_at), sys!(SYS_nanosleep),
    sys!(SYS_newfstatat), sys!(SYS_open), sys!(SYS_openat), sys!(SYS_openat2), sys!(SYS_pause),
    sys!(SYS_pidfd_open), sys!(SYS_pidfd_send_signal), sys!(SYS_pipe), sys!(SYS_pipe2),
    sys!(SYS_pkey_alloc), sys!(SYS_pkey_free), sys!(SYS_pkey_mprotect), sys!(SYS_poll),
    sys!(SYS_ppoll), sys!(SYS_prctl), sys!(SYS_pread64), sys!(SYS_preadv), sys!(SYS_preadv2),
    sys!(SYS_prlimit64), sys!(SYS_process_mrelease), sys!(SYS_pselect6), sys!(SYS_pwrite64),
    sys!(SYS_pwritev), sys!(SYS_pwritev2), sys!(SYS_read), sys!(SYS_readahead),
    sys!(SYS_readlink), sys!(SYS_readlinkat), sys!(SYS_readv), sys!(SYS_recvfrom),
    sys!(SYS_recvmmsg), sys!(SYS_recvmsg), sys!(SYS_remap_file_pages), sys!(SYS_removexattr),
    sys!(SYS_removexattrat), sys!(SYS_rename), sys!(SYS_renameat), sys!(SYS_renameat2),
    sys!(SYS_restart_syscall), sys!(SYS_rmdir), sys!(SYS_rseq), sys!(SYS_rt_sigaction),
    sys!(SYS_rt_sigpending), sys!(SYS_rt_sigprocmask), sys!(SYS_rt_sigqueueinfo),
    sys!(SYS_rt_sigreturn), sys!(SYS_rt_sigsuspend), sys!(SYS_rt_sigtimedwait),
    sys!(SYS_rt_tgsigqueueinfo), sys!(SYS_sched_getaffinity), sys!(SYS_sched_getattr),
    sys!(SYS_sched_getparam), sys!(SYS_sched_get_priority_max),
    sys!(SYS_sched_get_priority_min), sys!(SYS_sched_getscheduler),
    sys!(SYS_sched_rr_get_interval), sys!(SYS_sched_setaffinity), sys!(SYS_sched_setattr),
    sys!(SYS_sched_setparam), sys!(SYS_sched_setscheduler), sys!(SYS_sched_yield),
    sys!(SYS_seccomp), sys!(SYS_select), sys!(SYS_semctl), sys!(SYS_semget), sys!(SYS_semop),
    sys!(SYS_semtimedop), sys!(SYS_sendfile), sys!(SYS_sendmmsg), sys!(SYS_sendmsg),
    sys!(SYS_sendto), sys!(SYS_setfsgid), sys!(SYS_setfsuid), sys!(SYS_setgid),
    sys!(SYS_setgroups), sys!(SYS_setitimer), sys!(SYS_setpgid), sys!(SYS_setpriority),
    sys!(SYS_setregid), sys!(SYS_setresgid), sys!(SYS_setresuid), sys!(SYS_setreuid),
    sys!(SYS_setrlimit), sys!(SYS_set_robust_list), sys!(SYS_setsid), sys!(SYS_setsockopt),
    sys!(SYS_set_thread_area), sys!(SYS_set_tid_address), sys!(SYS_setuid), sys!(SYS_setxattr),
    sys!(SYS_setxattrat), sys!(SYS_shmat), sys!(SYS_shmctl), sys!(SYS_shmdt), sys!(SYS_shmget),
    sys!(SYS_shutdown), sys!(SYS_sigaltstack), sys!(SYS_signalfd), sys!(SYS_signalfd4),
    sys!(SYS_socketpair), sys!(SYS_splice), sys!(SYS_stat), sys!(SYS_statfs),
    sys!(SYS_statmount), sys!(SYS_statx), sys!(SYS_symlink), sys!(SYS_symlinkat),
    sys!(SYS_sync), sys!(SYS_sync_file_range), sys!(SYS_syncfs), sys!(SYS_sysinfo),
    sys!(SYS_tee), sys!(SYS_tgkill), sys!(SYS_time), sys!(SYS_timer_create),
    sys!(SYS_timer_delete), sys!(SYS_timer_getoverrun), sys!(SYS_timer_gettime),
    sys!(SYS_timer_settime), sys!(SYS_timerfd_create), sys!(SYS_timerfd_gettime),
    sys!(SYS_timerfd_settime), sys!(SYS_times), sys!(SYS_tkill), sys!(SYS_truncate),
    sys!(SYS_umask), sys!(SYS_uname), sys!(SYS_unlink), sys!(SYS_unlinkat),
    sys!(SYS_uretprobe), sys!(SYS_utime), sys!(SYS_utimensat), sys!(SYS_utimes),
    sys!(SYS_vfork), sys!(SYS_vmsplice), sys!(SYS_wait4), sys!(SYS_waitid), sys!(SYS_write),
    sys!(SYS_writev),
    // amd64-only entries.
    sys!(SYS_arch_prctl), sys!(SYS_modify_ldt),
    // Allowed by Docker on kernels >= 4.8 without any capability; we deny them.
    sys!(SYS_ptrace), sys!(SYS_process_vm_readv), sys!(SYS_process_vm_writev),
];

/// Syscalls we always deny with `EPERM`, whatever Docker does. Most are not
/// in Docker's capability-less allowlist either; listing them makes the
/// intent explicit and lets tests check each one.
#[rustfmt::skip]
pub const DENYLIST: &[Syscall] = &[
    // Large kernel attack surface, reachable from an unprivileged process.
    sys!(SYS_io_uring_setup), sys!(SYS_io_uring_enter), sys!(SYS_io_uring_register),
    sys!(SYS_userfaultfd), sys!(SYS_bpf), sys!(SYS_perf_event_open),
    // Inspecting or manipulating other processes.
    sys!(SYS_ptrace), sys!(SYS_process_vm_readv), sys!(SYS_process_vm_writev),
    sys!(SYS_kcmp), sys!(SYS_pidfd_getfd),
    // Kernel keyrings are not namespaced.
    sys!(SYS_add_key), sys!(SYS_request_key), sys!(SYS_keyctl),
    // Mounts and namespaces: the sandbox sets these up; the sandboxed program
    // must not change them.
    sys!(SYS_mount), sys!(SYS_umount2), sys!(SYS_pivot_root), sys!(SYS_chroot),
    sys!(SYS_open_tree), sys!(SYS_open_tree_attr), sys!(SYS_move_mount), sys!(SYS_fsopen),
    sys!(SYS_fsconfig), sys!(SYS_fsmount), sys!(SYS_fspick), sys!(SYS_mount_setattr),
    sys!(SYS_unshare), sys!(SYS_setns),
    // File handles bypass path-based checks (the "shocker" container escape).
    sys!(SYS_name_to_handle_at), sys!(SYS_open_by_handle_at),
    // Kernels, modules and the machine itself.
    sys!(SYS_kexec_load), sys!(SYS_kexec_file_load), sys!(SYS_init_module),
    sys!(SYS_finit_module), sys!(SYS_delete_module), sys!(SYS_acct), sys!(SYS_swapon),
    sys!(SYS_swapoff), sys!(SYS_reboot), sys!(SYS_syslog), sys!(SYS_quotactl),
    sys!(SYS_quotactl_fd), sys!(SYS_lookup_dcookie), sys!(SYS_vhangup), sys!(SYS_iopl),
    sys!(SYS_ioperm), sys!(SYS_fanotify_init),
    // Obsolete or removed; nothing legitimate calls them.
    sys!(SYS_nfsservctl), sys!(SYS_create_module), sys!(SYS_get_kernel_syms),
    sys!(SYS_query_module), sys!(SYS_uselib), sys!(SYS_ustat), sys!(SYS_sysfs),
    sys!(SYS__sysctl),
    // The clock is global. (adjtimex/clock_adjtime stay: Docker allows them
    // and the kernel requires CAP_SYS_TIME to change anything.)
    sys!(SYS_settimeofday), sys!(SYS_clock_settime),
    // Secret memory is invisible to the supervisor; LSM self-attributes are
    // Docker-gated on CAP_SYS_ADMIN.
    sys!(SYS_memfd_secret), sys!(SYS_lsm_get_self_attr), sys!(SYS_lsm_set_self_attr),
    sys!(SYS_lsm_list_modules),
];

/// Syscalls whose treatment depends on arguments or options; see [`special_rules`].
#[rustfmt::skip]
const SPECIAL: &[Syscall] = &[
    sys!(SYS_clone), sys!(SYS_clone3), sys!(SYS_personality), sys!(SYS_ioctl),
    sys!(SYS_socket), sys!(SYS_socketpair), sys!(SYS_execve), sys!(SYS_execveat),
    sys!(SYS_exit_group),
];

/// Namespace-creating clone flags. `CLONE_NEWTIME` (0x80) overlaps the exit
/// signal field (`CSIGNAL`) of legacy `clone`, where the kernel does not read
/// it as a flag; no valid signal number (1..=64) has that bit, so denying it
/// costs nothing and stays correct if the ABI ever changes.
const CLONE_NAMESPACE_FLAGS: u64 = bits(libc::CLONE_NEWNS)
    | bits(libc::CLONE_NEWUTS)
    | bits(libc::CLONE_NEWIPC)
    | bits(libc::CLONE_NEWUSER)
    | bits(libc::CLONE_NEWPID)
    | bits(libc::CLONE_NEWNET)
    | bits(libc::CLONE_NEWCGROUP)
    | bits(libc::CLONE_NEWTIME);

/// The `personality(2)` values Docker allows: `PER_LINUX` (0), `UNAME26` (8),
/// `ADDR_NO_RANDOMIZE` (0x20000), both (0x20008), and 0xffffffff (query).
const PERSONALITY_ALLOWED: [u64; 5] = [0x0, 0x8, 0x2_0000, 0x2_0008, 0xffff_ffff];

/// `SOCK_TYPE_MASK`: the socket type without `SOCK_NONBLOCK`/`SOCK_CLOEXEC`.
const SOCK_TYPE_MASK: u64 = 0xf;
/// `SOCK_RAW`.
const SOCK_RAW: u64 = 3;
/// `SOCK_PACKET` (obsolete link-level packets, via `AF_INET`).
const SOCK_PACKET: u64 = 10;

/// Socket families a sandboxed program may use.
const SOCKET_FAMILIES: [libc::c_int; 4] = [
    libc::AF_UNIX,
    libc::AF_INET,
    libc::AF_INET6,
    libc::AF_NETLINK,
];

/// Builds the default profile. The result is plain data: inspect it with
/// [`Filter::action_for`], compile it with [`Filter::compile`].
pub fn default_profile(opts: ProfileOptions) -> Filter {
    let mut filter = Filter::new(refusal(opts));
    // Other arches (e.g. i386 via int 0x80) have different syscall numbers, so
    // rules written for x86_64 mean nothing there: kill rather than guess.
    filter.bad_arch_action = Action::KillProcess;
    // x32 reuses AUDIT_ARCH_X86_64 with bit 30 set in the number. Nothing we
    // run uses x32, but a plain error (unlike a kill) lets a probing libc or
    // runtime fall back gracefully.
    filter.x32_action = Action::Errno(EPERM);

    for &syscall in DOCKER_ALLOWLIST {
        if !DENYLIST.contains(&syscall) && !SPECIAL.contains(&syscall) {
            let traced = TRACED_FILE_SYSCALLS.contains(&syscall);
            // Only changes: a plain open is notified when its flags ask to change.
            let flags_arg = match syscall {
                s if s == sys!(SYS_open) => Some(1),
                s if s == sys!(SYS_openat) => Some(2),
                _ => None,
            };
            let action = match (traced, opts.trace_files, opts.trace_file_changes, flags_arg) {
                (true, true, _, _) => Action::Notify,
                (true, false, true, Some(arg)) => {
                    filter.push(SyscallRule::when(
                        syscall,
                        vec![Cond::arg32(
                            arg,
                            Cmp::MaskedNe {
                                mask: OPEN_CHANGE_FLAGS,
                                value: 0,
                            },
                        )],
                        Action::Notify,
                    ));
                    Action::Allow
                }
                (true, false, true, None) => Action::Notify,
                _ => Action::Allow,
            };
            filter.push(SyscallRule::always(syscall, action));
        }
    }
    for rule in special_rules(opts) {
        filter.push(rule);
    }
    filter
}

/// What a refused call gets: `EPERM`, from the filter itself or, to be reported,
/// from the supervisor (see [`ProfileOptions::report_refusals`]).
const fn refusal(opts: ProfileOptions) -> Action {
    if opts.report_refusals {
        Action::Notify
    } else {
        Action::Errno(EPERM)
    }
}

/// Argument-dependent rules.
fn special_rules(opts: ProfileOptions) -> Vec<SyscallRule> {
    let deny = refusal(opts);
    let mut rules = Vec::new();

    // clone: threads and forks yes, new namespaces no. clone's flags are an
    // unsigned long, but the kernel only reads the low 32 bits
    // (lower_32_bits(clone_flags)), so compare exactly those.
    let clone = sys!(SYS_clone);
    rules.push(SyscallRule::when(
        clone,
        vec![Cond::arg32(
            0,
            Cmp::MaskedNe {
                mask: CLONE_NAMESPACE_FLAGS,
                value: 0,
            },
        )],
        deny,
    ));
    rules.push(SyscallRule::always(clone, Action::Allow));

    // clone3 passes its flags in memory, which seccomp cannot read. ENOSYS
    // makes glibc and musl fall back to clone, whose flags we can check.
    rules.push(SyscallRule::always(sys!(SYS_clone3), Action::Errno(ENOSYS)));

    // personality: only Docker's values. Others (e.g. READ_IMPLIES_EXEC)
    // weaken memory protections. The argument is an unsigned int.
    let personality = sys!(SYS_personality);
    for value in PERSONALITY_ALLOWED {
        rules.push(SyscallRule::when(
            personality,
            vec![Cond::arg32(0, Cmp::Eq(value))],
            Action::Allow,
        ));
    }
    rules.push(SyscallRule::always(personality, deny));

    // ioctl: TIOCSTI pushes bytes into the terminal's input queue, TIOCLINUX
    // can paste the console selection: both let a sandboxed program type
    // commands into the user's shell. TIOCSETD (line discipline), TIOCEXCL
    // (no further opens) and TIOCCONS (console output redirected) change a
    // terminal beyond the session, and with --no-record the terminal is the
    // user's. `cmd` is an unsigned int and the kernel ignores the high half, so
    // a 64-bit comparison could be bypassed.
    let ioctl = sys!(SYS_ioctl);
    for request in TERMINAL_IOCTLS_DENIED {
        rules.push(SyscallRule::when(
            ioctl,
            vec![Cond::arg32(1, Cmp::Eq(request))],
            deny,
        ));
    }
    rules.push(SyscallRule::always(ioctl, Action::Allow));

    // socket/socketpair: UNIX, IP and netlink only, and no raw IP sockets
    // (packet forging/sniffing). AF_NETLINK + SOCK_RAW stays allowed: that
    // is how ip(8), glibc's getifaddrs and many tools talk to the kernel.
    // domain and type are ints: compare the low 32 bits.
    for socket in [sys!(SYS_socket), sys!(SYS_socketpair)] {
        for family in [libc::AF_INET, libc::AF_INET6] {
            for sock_type in [SOCK_RAW, SOCK_PACKET] {
                rules.push(SyscallRule::when(
                    socket,
                    vec![
                        Cond::arg32(0, Cmp::Eq(bits(family))),
                        Cond::arg32(
                            1,
                            Cmp::MaskedEq {
                                mask: SOCK_TYPE_MASK,
                                value: sock_type,
                            },
                        ),
                    ],
                    deny,
                ));
            }
        }
        for family in SOCKET_FAMILIES {
            rules.push(SyscallRule::when(
                socket,
                vec![Cond::arg32(0, Cmp::Eq(bits(family)))],
                Action::Allow,
            ));
        }
        rules.push(SyscallRule::always(socket, Action::Errno(EAFNOSUPPORT)));
    }

    let exec = if opts.trace_exec {
        Action::Notify
    } else {
        Action::Allow
    };
    rules.push(SyscallRule::always(sys!(SYS_execve), exec));
    rules.push(SyscallRule::always(sys!(SYS_execveat), exec));
    let exit = if opts.trace_exit {
        Action::Notify
    } else {
        Action::Allow
    };
    rules.push(SyscallRule::always(sys!(SYS_exit_group), exit));
    rules
}

/// Names of syscalls Docker's default profile allows (to a process without
/// capabilities) that this profile denies outright.
pub fn syscall_names_denied_beyond_docker() -> Vec<&'static str> {
    DENYLIST
        .iter()
        .filter(|s| DOCKER_ALLOWLIST.contains(s))
        .map(|s| s.name)
        .collect()
}

/// The filter a persistent gVisor sandbox's launcher installs on each command
/// before it executes it (`vg_sandbox::gvisor_launch`): everything is allowed (the
/// sentry is the command's kernel and filters nothing it should not serve) but
/// what lets a command have gVisor send a signal of its choosing to the sandbox's
/// first process, which ends the sandbox when it ends. gVisor lets an owner whose
/// effective uid is 0 (the commands' inside gVisor) signal any process through
/// an I/O notification: the owner set by `F_SETOWN`, `F_SETOWN_EX`, `FIOSETOWN`
/// or `SIOCSPGRP` gets `SIGIO` (and `SIGURG`), which the first process ignores,
/// unless `F_SETSIG` chose another, so `F_SETSIG` is refused. A child's exit
/// signal goes to its parent, the first process once its own parent ended
/// (gVisor gives it orphans): `clone` with any exit signal but `SIGCHLD` (or none,
/// a thread's) is refused, and `clone3`, whose flags seccomp cannot read, says
/// `ENOSYS` so that libcs fall back to `clone`. A new user namespace (`clone` or
/// `unshare` with `CLONE_NEWUSER`) is refused: in one, gVisor does not count a
/// task against the process cap. x32 numbers say `ENOSYS`, as
/// gVisor does for them, never reaching it unfiltered. `ptrace` and
/// `process_vm_*` are refused (see below).
pub fn gvisor_exec_profile() -> Filter {
    let mut filter = Filter::new(Action::Allow);
    filter.x32_action = Action::Errno(ENOSYS);
    filter.push(SyscallRule::when(
        sys!(SYS_fcntl),
        vec![Cond::arg32(1, Cmp::Eq(bits(F_SETSIG)))],
        Action::Errno(EPERM),
    ));
    let clone = sys!(SYS_clone);
    // A user namespace of its own gives a task the capabilities that make gVisor
    // skip its process count (`RLIMIT_NPROC`, the sandbox's `--pids`): refused
    // here as the bundle's filter refuses it to the first process's tree
    // (`vg_backend::gvisor::bundle::seccomp`).
    let new_user = Cmp::MaskedEq {
        mask: CLONE_NEWUSER,
        value: CLONE_NEWUSER,
    };
    for call in [sys!(SYS_unshare), clone] {
        filter.push(SyscallRule::when(
            call,
            vec![Cond::arg32(0, new_user)],
            Action::Errno(EPERM),
        ));
    }
    for allowed in [0, bits(libc::SIGCHLD)] {
        filter.push(SyscallRule::when(
            clone,
            vec![Cond::arg32(
                0,
                Cmp::MaskedEq {
                    mask: CSIGNAL,
                    value: allowed,
                },
            )],
            Action::Allow,
        ));
    }
    filter.push(SyscallRule::always(clone, Action::Errno(EPERM)));
    filter.push(SyscallRule::always(sys!(SYS_clone3), Action::Errno(ENOSYS)));
    // Another command's launcher runs unfiltered until it installs this: a
    // command of the same user could otherwise trace it (gVisor lets a process
    // trace its own user's) and make it choose the signal. Refused natively too.
    for call in [
        sys!(SYS_ptrace),
        sys!(SYS_process_vm_readv),
        sys!(SYS_process_vm_writev),
    ] {
        filter.push(SyscallRule::always(call, Action::Errno(EPERM)));
    }
    filter
}

/// `fcntl`'s command that chooses an owner's I/O signal (Linux's, which the libc
/// crate does not name).
const F_SETSIG: libc::c_int = 10;

/// `clone`'s exit signal field.
const CSIGNAL: u64 = 0xff;

/// `CLONE_NEWUSER` (`linux/sched.h`), for `clone` and `unshare`.
const CLONE_NEWUSER: u64 = 0x1000_0000;

// Compile-time guard: all syscall numbers above are x86_64 numbers taken from
// libc for the build target, so building for another target would silently
// produce a wrong profile.
#[cfg(not(all(
    target_os = "linux",
    target_arch = "x86_64",
    target_pointer_width = "64"
)))]
compile_error!("vg-seccomp's profile uses x86_64 syscall numbers; build for x86_64 Linux");

const _: () = assert!(sys!(SYS_read).nr == 0 && sys!(SYS_execve).nr == 59 && X32_SYSCALL_BIT > 470);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::SockFilter;
    use crate::data::SeccompData;
    use crate::interp;
    use crate::rules::AUDIT_ARCH_I386;
    use std::collections::BTreeSet;

    const ALLOW: Action = Action::Allow;
    const DENY: Action = Action::Errno(EPERM);

    /// Capability-gated syscalls in Docker's profile (x86_64 names only).
    /// Without capabilities Docker denies them, and so must we.
    #[rustfmt::skip]
    const DOCKER_CAP_GATED: &[Syscall] = &[
        sys!(SYS_open_by_handle_at), sys!(SYS_bpf), sys!(SYS_fanotify_init),
        sys!(SYS_fsconfig), sys!(SYS_fsmount), sys!(SYS_fsopen), sys!(SYS_fspick),
        sys!(SYS_lookup_dcookie), sys!(SYS_lsm_get_self_attr), sys!(SYS_lsm_list_modules),
        sys!(SYS_lsm_set_self_attr), sys!(SYS_mount), sys!(SYS_mount_setattr),
        sys!(SYS_move_mount), sys!(SYS_open_tree), sys!(SYS_perf_event_open),
        sys!(SYS_quotactl), sys!(SYS_quotactl_fd), sys!(SYS_setdomainname),
        sys!(SYS_sethostname), sys!(SYS_setns), sys!(SYS_syslog), sys!(SYS_umount2),
        sys!(SYS_unshare), sys!(SYS_reboot), sys!(SYS_chroot), sys!(SYS_delete_module),
        sys!(SYS_init_module), sys!(SYS_finit_module), sys!(SYS_acct), sys!(SYS_kcmp),
        sys!(SYS_pidfd_getfd), sys!(SYS_process_madvise), sys!(SYS_iopl), sys!(SYS_ioperm),
        sys!(SYS_settimeofday), sys!(SYS_clock_settime), sys!(SYS_vhangup),
        sys!(SYS_get_mempolicy), sys!(SYS_mbind), sys!(SYS_set_mempolicy),
        sys!(SYS_set_mempolicy_home_node),
    ];

    /// Argument patterns for "allowed whatever the arguments" checks.
    const ARG_PATTERNS: [[u64; 6]; 4] = [
        [0; 6],
        [u64::MAX; 6],
        [0x5412, 0x5412, 0x541C, 3, 0x1000_0000, 0x80],
        [
            0xdead_beef_0000_0011,
            0x0000_0001_0000_0003,
            17,
            0x7e02_0080,
            1,
            2,
        ],
    ];

    /// Every combination of the options.
    fn all_options() -> Vec<ProfileOptions> {
        (0..32u8)
            .map(|bits| ProfileOptions {
                trace_exec: bits & 1 != 0,
                trace_files: bits & 2 != 0,
                report_refusals: bits & 4 != 0,
                trace_file_changes: bits & 8 != 0,
                trace_exit: bits & 16 != 0,
            })
            .collect()
    }

    fn compiled(opts: ProfileOptions) -> (Filter, Vec<SockFilter>) {
        let filter = default_profile(opts);
        let prog = filter.compile().unwrap_or_else(|e| panic!("{e}"));
        (filter, prog)
    }

    fn run(prog: &[SockFilter], data: &SeccompData) -> Action {
        let ret = interp::run(prog, data).unwrap_or_else(|e| panic!("{e}"));
        Action::from_ret_value(ret).unwrap_or_else(|| panic!("unknown ret {ret:#x}"))
    }

    fn call(prog: &[SockFilter], syscall: Syscall, args: [u64; 6]) -> Action {
        run(prog, &SeccompData::x86_64(syscall.nr, args))
    }

    fn args(a0: u64, a1: u64) -> [u64; 6] {
        [a0, a1, 0, 0, 0, 0]
    }

    fn flag(v: libc::c_int) -> u64 {
        u64::try_from(v).unwrap()
    }

    #[test]
    fn lists_are_consistent() {
        for list in [DOCKER_ALLOWLIST, DENYLIST, SPECIAL] {
            let names: BTreeSet<_> = list.iter().map(|s| s.name).collect();
            let nrs: BTreeSet<_> = list.iter().map(|s| s.nr).collect();
            assert_eq!(names.len(), list.len(), "duplicate name");
            assert_eq!(nrs.len(), list.len(), "duplicate number");
        }
        for s in SPECIAL {
            assert!(
                !DENYLIST.contains(s),
                "{} is both special and denied",
                s.name
            );
        }
        assert_eq!(
            syscall_names_denied_beyond_docker(),
            [
                "ptrace",
                "process_vm_readv",
                "process_vm_writev",
                "name_to_handle_at",
                "memfd_secret"
            ]
        );
    }

    #[test]
    fn the_name_table_knows_every_syscall_the_profile_names() {
        for list in [DOCKER_ALLOWLIST, DENYLIST, SPECIAL, DOCKER_CAP_GATED] {
            for &s in list {
                assert_eq!(crate::syscalls::by_number(s.nr), Some(s), "{}", s.name);
            }
        }
    }

    #[test]
    fn docker_allowlist_minus_denylist_is_allowed() {
        let (filter, prog) = compiled(ProfileOptions::default());
        let mut checked = 0;
        for &s in DOCKER_ALLOWLIST {
            if DENYLIST.contains(&s) || SPECIAL.contains(&s) {
                continue;
            }
            for a in ARG_PATTERNS {
                assert_eq!(call(&prog, s, a), ALLOW, "{}", s.name);
                assert_eq!(filter.action_for(s.nr, a), ALLOW, "{}", s.name);
            }
            checked += 1;
        }
        assert!(checked > 250, "only {checked} syscalls allowed");
        for name in [
            "read",
            "openat",
            "mmap",
            "rt_sigreturn",
            "landlock_restrict_self",
            "seccomp",
        ] {
            assert!(filter.nr_of(name).is_some(), "{name} missing");
        }
    }

    #[test]
    fn denylist_and_cap_gated_syscalls_are_eperm() {
        let (filter, prog) = compiled(ProfileOptions {
            trace_exec: true,
            ..ProfileOptions::default()
        });
        for &s in DENYLIST.iter().chain(DOCKER_CAP_GATED) {
            for a in ARG_PATTERNS {
                assert_eq!(call(&prog, s, a), DENY, "{}", s.name);
            }
            assert_eq!(filter.rules_for(s.nr).count(), 0, "{} has rules", s.name);
        }
    }

    #[test]
    fn clone_forbids_namespaces_only() {
        let (_, prog) = compiled(ProfileOptions::default());
        let clone = sys!(SYS_clone);
        let thread = flag(
            libc::CLONE_VM
                | libc::CLONE_FS
                | libc::CLONE_FILES
                | libc::CLONE_SIGHAND
                | libc::CLONE_THREAD
                | libc::CLONE_SYSVSEM
                | libc::CLONE_SETTLS
                | libc::CLONE_PARENT_SETTID
                | libc::CLONE_CHILD_CLEARTID,
        );
        let fork = flag(libc::SIGCHLD | libc::CLONE_CHILD_SETTID | libc::CLONE_CHILD_CLEARTID);
        assert_eq!(call(&prog, clone, args(thread, 0)), ALLOW);
        assert_eq!(call(&prog, clone, args(fork, 0)), ALLOW);
        assert_eq!(call(&prog, clone, args(flag(libc::SIGCHLD), 0)), ALLOW);
        // High bits are not flags: the kernel truncates to 32 bits.
        assert_eq!(
            call(&prog, clone, args(0xffff_ffff_0000_0000 | fork, 0)),
            ALLOW
        );
        for ns in [
            libc::CLONE_NEWNS,
            libc::CLONE_NEWUTS,
            libc::CLONE_NEWIPC,
            libc::CLONE_NEWUSER,
            libc::CLONE_NEWPID,
            libc::CLONE_NEWNET,
            libc::CLONE_NEWCGROUP,
            libc::CLONE_NEWTIME,
        ] {
            assert_eq!(
                call(&prog, clone, args(fork | flag(ns), 0)),
                DENY,
                "{ns:#x}"
            );
            assert_eq!(call(&prog, clone, args(flag(ns), 0)), DENY, "{ns:#x}");
        }
        assert_eq!(
            call(&prog, sys!(SYS_clone3), args(0, 0)),
            Action::Errno(ENOSYS)
        );
    }

    #[test]
    fn ioctl_blocks_terminal_injection_in_low_32_bits() {
        let (_, prog) = compiled(ProfileOptions::default());
        let ioctl = sys!(SYS_ioctl);
        for garbage in [0, 0x1_0000_0000, 0xffff_ffff_0000_0000] {
            for request in TERMINAL_IOCTLS_DENIED {
                assert_eq!(call(&prog, ioctl, args(0, garbage | request)), DENY);
            }
            assert_eq!(call(&prog, ioctl, args(0, garbage | libc::TIOCSETD)), DENY);
            assert_eq!(call(&prog, ioctl, args(0, garbage | libc::TCGETS)), ALLOW);
            assert_eq!(call(&prog, ioctl, args(0, garbage | libc::FIONREAD)), ALLOW);
        }
        // The fd argument is irrelevant.
        assert_eq!(call(&prog, ioctl, args(libc::TIOCSTI, libc::TCGETS)), ALLOW);
    }

    #[test]
    fn socket_families_and_raw_sockets() {
        let (_, prog) = compiled(ProfileOptions::default());
        let nonblock_cloexec = flag(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
        for socket in [sys!(SYS_socket), sys!(SYS_socketpair)] {
            let s = |family: libc::c_int, ty: u64| call(&prog, socket, args(flag(family), ty));
            let eafnosupport = Action::Errno(EAFNOSUPPORT);
            for family in [
                libc::AF_PACKET,
                libc::AF_ALG,
                libc::AF_VSOCK,
                libc::AF_KEY,
                libc::AF_BLUETOOTH,
                libc::AF_CAN,
                libc::AF_TIPC,
                libc::AF_RDS,
                libc::AF_XDP,
            ] {
                assert_eq!(s(family, SOCK_RAW), eafnosupport, "{family}");
                assert_eq!(s(family, flag(libc::SOCK_DGRAM)), eafnosupport, "{family}");
            }
            for family in [libc::AF_INET, libc::AF_INET6] {
                assert_eq!(s(family, SOCK_RAW | flag(libc::SOCK_CLOEXEC)), DENY);
                assert_eq!(s(family, SOCK_RAW), DENY);
                assert_eq!(s(family, SOCK_PACKET | nonblock_cloexec), DENY);
                assert_eq!(
                    s(family, flag(libc::SOCK_STREAM | libc::SOCK_NONBLOCK)),
                    ALLOW
                );
                assert_eq!(s(family, flag(libc::SOCK_DGRAM) | nonblock_cloexec), ALLOW);
            }
            assert_eq!(s(libc::AF_NETLINK, SOCK_RAW), ALLOW);
            assert_eq!(s(libc::AF_NETLINK, SOCK_RAW | nonblock_cloexec), ALLOW);
            assert_eq!(s(libc::AF_UNIX, flag(libc::SOCK_STREAM)), ALLOW);
            assert_eq!(s(libc::AF_UNIX, flag(libc::SOCK_SEQPACKET)), ALLOW);
            // The domain is an int: high garbage does not change the family.
            assert_eq!(
                call(
                    &prog,
                    socket,
                    args(0xffff_0000_0000_0000 | flag(libc::AF_PACKET), 3)
                ),
                eafnosupport
            );
            assert_eq!(
                call(
                    &prog,
                    socket,
                    args(0x1_0000_0000 | flag(libc::AF_INET), SOCK_RAW)
                ),
                DENY
            );
        }
    }

    #[test]
    fn personality_only_docker_values() {
        let (_, prog) = compiled(ProfileOptions::default());
        let p = sys!(SYS_personality);
        for v in PERSONALITY_ALLOWED {
            assert_eq!(call(&prog, p, args(v, 0)), ALLOW, "{v:#x}");
        }
        // personality(-1) passed as a sign-extended 64-bit value is the query too.
        assert_eq!(call(&prog, p, args(u64::MAX, 0)), ALLOW);
        let read_implies_exec = 0x040_0000;
        assert_eq!(call(&prog, p, args(read_implies_exec, 0)), DENY);
        assert_eq!(call(&prog, p, args(0x9, 0)), DENY);
        assert_eq!(call(&prog, p, args(0x2_0000 | read_implies_exec, 0)), DENY);
    }

    #[test]
    fn arch_x32_and_unknown_numbers() {
        let (_, prog) = compiled(ProfileOptions::default());
        let read = SeccompData::x86_64(sys!(SYS_read).nr, [0; 6]);
        assert_eq!(run(&prog, &read), ALLOW);
        let i386 = SeccompData {
            arch: AUDIT_ARCH_I386,
            ..read
        };
        assert_eq!(run(&prog, &i386), Action::KillProcess);
        let unknown_arch = SeccompData { arch: 0, ..read };
        assert_eq!(run(&prog, &unknown_arch), Action::KillProcess);
        // x32 read (0x40000000), x32 execve (0x40000000 + 520), huge numbers.
        for nr in [
            X32_SYSCALL_BIT,
            X32_SYSCALL_BIT + 520,
            0x8000_0000,
            u32::MAX,
        ] {
            assert_eq!(
                run(&prog, &SeccompData::x86_64(nr, [0; 6])),
                DENY,
                "{nr:#x}"
            );
        }
        for nr in [999, 470, 1000, 100_000, X32_SYSCALL_BIT - 1] {
            assert_eq!(run(&prog, &SeccompData::x86_64(nr, [0; 6])), DENY, "{nr}");
        }
    }

    #[test]
    fn exec_and_exit_are_notified_only_when_traced() {
        for trace_exec in [false, true] {
            for trace_exit in [false, true] {
                let (filter, prog) = compiled(ProfileOptions {
                    trace_exec,
                    trace_exit,
                    ..ProfileOptions::default()
                });
                for (call_, traced) in [
                    (sys!(SYS_execve), trace_exec),
                    (sys!(SYS_execveat), trace_exec),
                    (sys!(SYS_exit_group), trace_exit),
                ] {
                    let expected = if traced { Action::Notify } else { ALLOW };
                    assert_eq!(call(&prog, call_, args(0, 0)), expected, "{}", call_.name);
                    assert_eq!(filter.action_for(call_.nr, [0; 6]), expected);
                }
                assert_eq!(call(&prog, sys!(SYS_exit), args(0, 0)), ALLOW);
                assert_eq!(call(&prog, sys!(SYS_read), args(0, 0)), ALLOW);
            }
        }
    }

    /// The compiler must agree with the model everywhere, not only where the
    /// hand-written tests look.
    #[test]
    fn compiled_program_matches_model_for_all_syscalls() {
        let mut patterns: Vec<[u64; 6]> = ARG_PATTERNS.to_vec();
        // Values that hit the interesting comparisons in any argument slot.
        for v in [
            flag(libc::AF_INET),
            flag(libc::AF_NETLINK),
            SOCK_RAW,
            SOCK_PACKET | 0x80800,
            libc::TIOCSTI,
            libc::TIOCLINUX | 0xf_0000_0000,
            libc::TIOCSETD | 0xf_0000_0000,
            flag(libc::CLONE_NEWUSER | libc::SIGCHLD),
            0x2_0008,
            0xffff_ffff,
        ] {
            for slot in 0..2 {
                let mut a = [0; 6];
                a[slot] = v;
                patterns.push(a);
            }
            patterns.push([flag(libc::AF_INET6), v, 0, 0, 0, 0]);
        }
        for opts in all_options() {
            let (filter, prog) = compiled(opts);
            let nrs = (0..=470).chain([
                512,
                547,
                999,
                0x3fff_ffff,
                0x4000_0000,
                0x4000_0001,
                u32::MAX,
            ]);
            for nr in nrs {
                for a in &patterns {
                    for arch in [crate::rules::AUDIT_ARCH_X86_64, AUDIT_ARCH_I386] {
                        let data = SeccompData {
                            arch,
                            ..SeccompData::x86_64(nr, *a)
                        };
                        assert_eq!(run(&prog, &data), filter.evaluate(&data), "nr {nr} {a:x?}");
                    }
                }
            }
        }
    }

    #[test]
    fn compiled_size_is_reasonable() {
        let (_, prog) = compiled(ProfileOptions::default());
        let (_, traced) = compiled(ProfileOptions {
            trace_exec: true,
            ..ProfileOptions::default()
        });
        let (_, everything) = compiled(ProfileOptions {
            trace_exec: true,
            trace_exit: true,
            trace_files: true,
            trace_file_changes: true,
            report_refusals: true,
        });
        assert!(
            everything.len() <= 600,
            "{} instructions with every option",
            everything.len()
        );
        // Small enough for the kernel with lots of room to grow, and big
        // enough that a regression to "allow everything" would show.
        assert!(
            (50..=600).contains(&prog.len()),
            "{} instructions",
            prog.len()
        );
        assert!(traced.len() >= prog.len());
    }

    const REPORTING: ProfileOptions = ProfileOptions {
        trace_exec: true,
        trace_exit: false,
        trace_files: false,
        trace_file_changes: false,
        report_refusals: true,
    };

    #[test]
    fn refusals_are_notified_only_when_reported() {
        let fork = flag(libc::SIGCHLD);
        for (report_refusals, refused) in [(false, DENY), (true, Action::Notify)] {
            let opts = ProfileOptions {
                report_refusals,
                ..REPORTING
            };
            let (filter, prog) = compiled(opts);
            for s in [
                sys!(SYS_mount),
                sys!(SYS_unshare),
                sys!(SYS_ptrace),
                sys!(SYS_bpf),
            ] {
                assert_eq!(call(&prog, s, args(0, 0)), refused, "{}", s.name);
            }
            // Neither Docker's list nor ours names these: the default action.
            for nr in [sys!(SYS_sethostname).nr, 400, 999, X32_SYSCALL_BIT - 1] {
                assert_eq!(
                    run(&prog, &SeccompData::x86_64(nr, [0; 6])),
                    refused,
                    "{nr}"
                );
                assert_eq!(filter.action_for(nr, [0; 6]), refused, "{nr}");
            }
            let clone = sys!(SYS_clone);
            let new_user = fork | flag(libc::CLONE_NEWUSER);
            assert_eq!(call(&prog, clone, args(new_user, 0)), refused);
            assert_eq!(call(&prog, clone, args(fork, 0)), ALLOW);
            let p = sys!(SYS_personality);
            assert_eq!(call(&prog, p, args(0x040_0000, 0)), refused);
            assert_eq!(call(&prog, p, args(0, 0)), ALLOW);
            let ioctl = sys!(SYS_ioctl);
            assert_eq!(call(&prog, ioctl, args(0, libc::TIOCSTI)), refused);
            assert_eq!(call(&prog, ioctl, args(0, libc::TCGETS)), ALLOW);
            let socket = sys!(SYS_socket);
            let raw = args(flag(libc::AF_INET), SOCK_RAW);
            assert_eq!(call(&prog, socket, raw), refused);
            // Probes keep their own plain errno.
            assert_eq!(
                call(&prog, sys!(SYS_clone3), args(0, 0)),
                Action::Errno(ENOSYS)
            );
            assert_eq!(
                call(&prog, socket, args(flag(libc::AF_PACKET), SOCK_RAW)),
                Action::Errno(EAFNOSUPPORT)
            );
            // x32 and foreign arches never reach the listener.
            let x32 = SeccompData::x86_64(X32_SYSCALL_BIT + sys!(SYS_mount).nr, [0; 6]);
            assert_eq!(run(&prog, &x32), DENY);
            let i386 = SeccompData {
                arch: AUDIT_ARCH_I386,
                ..SeccompData::x86_64(sys!(SYS_mount).nr, [0; 6])
            };
            assert_eq!(run(&prog, &i386), Action::KillProcess);
            // What is allowed stays allowed, and files are not traced.
            for s in [sys!(SYS_read), sys!(SYS_openat), sys!(SYS_rename)] {
                assert_eq!(call(&prog, s, args(0, 0)), ALLOW, "{}", s.name);
            }
        }
    }

    #[test]
    fn only_changing_file_calls_are_notified_when_only_changes_are_traced() {
        let (filter, prog) = compiled(ProfileOptions {
            trace_exec: true,
            trace_file_changes: true,
            ..ProfileOptions::default()
        });
        let read_only = [
            flag(libc::O_RDONLY),
            flag(libc::O_RDONLY | libc::O_CLOEXEC | libc::O_DIRECTORY),
            flag(libc::O_PATH),
            flag(libc::O_RDONLY | libc::O_APPEND),
        ];
        let changing = [
            flag(libc::O_WRONLY),
            flag(libc::O_RDWR),
            flag(libc::O_RDONLY | libc::O_CREAT),
            flag(libc::O_RDONLY | libc::O_TRUNC),
            flag(libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC),
            flag(libc::O_TMPFILE | libc::O_RDWR),
        ];
        for (syscall, at) in [(sys!(SYS_open), 1), (sys!(SYS_openat), 2)] {
            for (flags, expected) in read_only
                .iter()
                .map(|f| (*f, ALLOW))
                .chain(changing.iter().map(|f| (*f, Action::Notify)))
            {
                let mut a = [0u64; 6];
                a[at] = flags;
                assert_eq!(
                    call(&prog, syscall, a),
                    expected,
                    "{} {flags:#o}",
                    syscall.name
                );
                assert_eq!(filter.action_for(syscall.nr, a), expected);
                // The kernel reads an int: garbage in the high half changes nothing.
                a[at] = flags | 0xffff_ffff_0000_0000;
                assert_eq!(
                    call(&prog, syscall, a),
                    expected,
                    "{} {flags:#o}",
                    syscall.name
                );
            }
        }
        for &s in TRACED_FILE_SYSCALLS {
            if s == sys!(SYS_open) || s == sys!(SYS_openat) {
                continue;
            }
            for a in ARG_PATTERNS {
                assert_eq!(call(&prog, s, a), Action::Notify, "{}", s.name);
            }
        }
        assert_eq!(call(&prog, sys!(SYS_read), args(0, 0)), ALLOW);
        assert_eq!(call(&prog, sys!(SYS_newfstatat), args(0, 0)), ALLOW);
        // Everything traced is named a file call, never a refusal.
        for &s in TRACED_FILE_SYSCALLS {
            assert_eq!(notified_call(i64::from(s.nr)), NotifiedCall::File(s));
        }
    }

    #[test]
    fn file_calls_are_notified_only_when_traced() {
        assert!(TRACED_FILE_SYSCALLS.len() == 17);
        for (trace_files, expected) in [(false, ALLOW), (true, Action::Notify)] {
            let (filter, prog) = compiled(ProfileOptions {
                trace_files,
                ..ProfileOptions::default()
            });
            for &s in TRACED_FILE_SYSCALLS {
                assert!(DOCKER_ALLOWLIST.contains(&s), "{}", s.name);
                assert!(
                    !DENYLIST.contains(&s) && !SPECIAL.contains(&s),
                    "{}",
                    s.name
                );
                for a in ARG_PATTERNS {
                    assert_eq!(call(&prog, s, a), expected, "{}", s.name);
                    assert_eq!(filter.action_for(s.nr, a), expected, "{}", s.name);
                }
            }
            // Neighbours that only look, or work on open descriptors, are not traced.
            for s in [
                sys!(SYS_stat),
                sys!(SYS_newfstatat),
                sys!(SYS_readlink),
                sys!(SYS_read),
                sys!(SYS_write),
                sys!(SYS_ftruncate),
                sys!(SYS_chdir),
            ] {
                assert_eq!(call(&prog, s, args(0, 0)), ALLOW, "{}", s.name);
            }
            assert_eq!(call(&prog, sys!(SYS_mount), args(0, 0)), DENY);
            assert_eq!(
                call(&prog, sys!(SYS_clone3), args(0, 0)),
                Action::Errno(ENOSYS)
            );
        }
    }

    #[test]
    fn notified_calls_are_classified_fail_closed() {
        assert_eq!(notified_call(libc::SYS_execve), NotifiedCall::Exec);
        assert_eq!(notified_call(libc::SYS_execveat), NotifiedCall::Exec);
        assert_eq!(notified_call(libc::SYS_exit_group), NotifiedCall::Exit);
        assert_eq!(
            notified_call(libc::SYS_openat),
            NotifiedCall::File(sys!(SYS_openat))
        );
        assert_eq!(
            notified_call(libc::SYS_truncate),
            NotifiedCall::File(sys!(SYS_truncate))
        );
        for nr in [
            libc::SYS_mount,
            libc::SYS_unshare,
            libc::SYS_read,
            libc::SYS_exit,
            libc::SYS_ftruncate,
            -1,
            i64::MIN,
            i64::from(u32::MAX),
            i64::from(u32::MAX) + 1 + libc::SYS_execve,
        ] {
            assert_eq!(notified_call(nr), NotifiedCall::Refused, "{nr}");
        }
    }

    /// Every notification the profile can produce is classified as what made it a
    /// notification: a call classified `Refused` is one the same profile without
    /// `report_refusals` fails with EPERM, so failing it loses nothing.
    #[test]
    fn every_notification_is_classified_as_its_cause() {
        let mut patterns: Vec<[u64; 6]> = ARG_PATTERNS.to_vec();
        for v in [
            flag(libc::CLONE_NEWUSER | libc::SIGCHLD),
            flag(libc::SIGCHLD),
            libc::TIOCSTI,
            0x040_0000,
        ] {
            patterns.push([v, 0, 0, 0, 0, 0]);
            patterns.push([0, v, 0, 0, 0, 0]);
        }
        patterns.push([flag(libc::AF_INET), SOCK_RAW, 0, 0, 0, 0]);
        let mut refused_seen = 0;
        for opts in all_options() {
            let (filter, prog) = compiled(opts);
            let unreported = default_profile(ProfileOptions {
                report_refusals: false,
                ..opts
            });
            for nr in (0..=470).chain([512, 999, X32_SYSCALL_BIT - 1]) {
                for a in &patterns {
                    if run(&prog, &SeccompData::x86_64(nr, *a)) != Action::Notify {
                        assert_ne!(filter.action_for(nr, *a), Action::Notify);
                        continue;
                    }
                    match notified_call(i64::from(nr)) {
                        NotifiedCall::Exec => assert!(opts.trace_exec),
                        NotifiedCall::Exit => assert!(opts.trace_exit),
                        NotifiedCall::File(s) => {
                            assert!(opts.trace_files || opts.trace_file_changes);
                            assert_eq!(s.nr, nr);
                        }
                        NotifiedCall::Refused => {
                            assert!(opts.report_refusals, "nr {nr}");
                            assert_eq!(unreported.action_for(nr, *a), DENY, "nr {nr} {a:x?}");
                            refused_seen += 1;
                        }
                    }
                    assert!(opts.notifies());
                }
            }
        }
        assert!(refused_seen > 1000, "{refused_seen}");
    }

    #[test]
    fn a_gvisor_command_cannot_choose_an_io_signal_or_an_exit_signal() {
        let filter = gvisor_exec_profile();
        let prog = filter.compile().unwrap();
        let both = |syscall: Syscall, a: [u64; 6]| {
            let model = filter.action_for(syscall.nr, a);
            assert_eq!(call(&prog, syscall, a), model, "{syscall:?} {a:?}");
            model
        };
        let fcntl = sys!(SYS_fcntl);
        assert_eq!(both(fcntl, args(3, bits(F_SETSIG))), Action::Errno(EPERM));
        // The upper half of an int argument is not read by the kernel.
        assert_eq!(
            both(fcntl, args(3, (1 << 32) | bits(F_SETSIG))),
            Action::Errno(EPERM)
        );
        for cmd in [libc::F_SETOWN, libc::F_SETFL, F_SETSIG + 1, libc::F_SETFD] {
            assert_eq!(both(fcntl, args(3, bits(cmd))), Action::Allow, "{cmd}");
        }
        let clone = sys!(SYS_clone);
        let fork = bits(libc::SIGCHLD);
        let thread = bits(libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_SIGHAND);
        assert_eq!(both(clone, args(fork, 0)), Action::Allow);
        assert_eq!(both(clone, args(thread, 0)), Action::Allow);
        for sig in [libc::SIGKILL, libc::SIGTERM, libc::SIGPWR, 64] {
            assert_eq!(
                both(clone, args(bits(libc::CLONE_PARENT | sig), 0)),
                Action::Errno(EPERM),
                "{sig}"
            );
        }
        assert_eq!(both(sys!(SYS_clone3), args(0, 0)), Action::Errno(ENOSYS));
        for call in [
            sys!(SYS_ptrace),
            sys!(SYS_process_vm_readv),
            sys!(SYS_process_vm_writev),
        ] {
            assert_eq!(both(call, args(16, 5)), Action::Errno(EPERM), "{call:?}");
        }
        assert_eq!(both(sys!(SYS_kill), args(1, 9)), Action::Allow);
        // No user namespace, whose capabilities gVisor's process cap skips: alone,
        // with a fork's or a thread's flags, or among other namespaces.
        let unshare = sys!(SYS_unshare);
        for flags in [CLONE_NEWUSER, CLONE_NEWUSER | bits(libc::CLONE_NEWNS)] {
            assert_eq!(both(unshare, args(flags, 0)), Action::Errno(EPERM));
            assert_eq!(both(clone, args(flags | fork, 0)), Action::Errno(EPERM));
            assert_eq!(both(clone, args(flags, 0)), Action::Errno(EPERM));
        }
        assert_eq!(
            both(unshare, args(bits(libc::CLONE_NEWNS), 0)),
            Action::Allow
        );
        assert_eq!(
            filter.action_for(X32_SYSCALL_BIT | 72, args(3, bits(F_SETSIG))),
            Action::Errno(ENOSYS)
        );
    }
}
