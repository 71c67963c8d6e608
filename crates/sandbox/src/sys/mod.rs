//! Raw system calls. This is the only module of Vectra Guard with `unsafe` code: tiny
//! functions that pass checked arguments to the kernel and turn `-1` into `io::Error`.
//! Everything above this layer is safe Rust.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use libc::{c_int, c_long};

#[cfg(vg_exec_bpf)]
mod bpf;
mod creds;
mod fd;
mod fs;
mod landlock;
mod mount;
mod msg;
mod net;
mod netns;
mod pidfd;
mod process;
mod ptrace;
#[cfg(vg_exec_bpf)]
mod ring;
mod seccomp;
mod signal;
mod tty;

#[cfg(vg_exec_bpf)]
pub use bpf::{
    BPF_FS_MAGIC, BPF_MAP_TYPE_HASH_OF_MAPS, BPF_MAP_TYPE_RINGBUF, BPF_NOEXIST, bpf_map_create,
    bpf_map_delete, bpf_map_get_fd_by_id, bpf_map_lookup, bpf_map_next_key, bpf_map_update,
    bpf_obj_get, bpf_obj_pin,
};
pub use creds::{
    capset_empty, capset_only, getgid, getuid, setfsgid, setfsuid, setgroups, setresgid, setresuid,
    thread_file_identity,
};
pub use fd::{
    Epoll, Polled, cloexec_from, close_all_except, close_range, dup2, keep_on_exec, peer_closed,
    peer_cred, poll_hup_within, recv_fd, send_fd, seqpacket_pair, set_nonblocking, set_pipe_size,
    shutdown, socket_type,
};
#[cfg(vg_exec_bpf)]
pub use fs::fs_type;
pub use fs::{
    RESOLVE_BENEATH, RESOLVE_IN_ROOT, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS, fchdir, fchown,
    fchownat, fstat, mkdirat, on_read_only_mount, openat, openat2, statfs_available, symlinkat,
};
pub use landlock::landlock_abi_version;
pub use mount::{
    AT_RECURSIVE, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOEXEC, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY,
    OPEN_TREE_CLONE, fsconfig_create, fsconfig_set, fsmount, fsopen, mount, mount_setattr,
    mount_setattr_idmap, move_mount, open_tree, pivot_root, umount2,
};
pub use msg::{poll_read, recv_msg, send_msg, signalfd, signalfd_read};
pub use net::{
    discard, iface_configure, loopback_up, set_peek_offset, set_receive_buffer_force, tun_create,
};
#[cfg(vg_exec_bpf)]
pub use netns::ns_get_id;
pub use netns::{TUN_STEPS, TunSettings, join_before_exec, ns_owner, peer_pidfd, tun_in_namespace};
pub use pidfd::{
    pidfd_exit_status, pidfd_exited, pidfd_open, pidfd_parent, pidfd_send_signal, pidns_host_pid,
    pidns_tgid,
};
#[cfg(vg_exec_bpf)]
pub use process::boottime_ns;
pub use process::{
    CpuSet, affinity, clone_fork, current_cpu, execve, exit_now, fork, kill, loaded_objects,
    new_process_group, prctl, raise_open_files_limit, read_process_memory, set_affinity,
    sethostname, setrlimit, setsid, unshare, waitpid,
};
pub use ptrace::{ptrace_detach, ptrace_interrupt, ptrace_seize_exec};
#[cfg(vg_exec_bpf)]
pub use ring::Ring;
pub use seccomp::{
    SECCOMP_FILTER_FLAG_NEW_LISTENER, SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, SeccompNotif,
    notif_continue, notif_fail, notif_id_valid, notif_recv, notif_sync_wakeup,
    seccomp_action_available, seccomp_set_filter,
};
pub use signal::{
    ignore_signal, reset_signal_dispositions, sigmask_block, sigmask_set, sigset, sigtimedwait,
    sigtimedwait_info, sigwait, sigwait_info,
};
pub use tty::{
    foreground_group, get_winsize, is_terminal, open_pty, pty_number, pty_peer, raw_termios,
    set_controlling_terminal, set_foreground_group, set_winsize, spawn_terminal_guardian,
    status_flags, take_controlling_terminal, tcflow_resume, tcgetattr, tcsetattr,
};

fn check(ret: c_int) -> io::Result<c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn check_long(ret: c_long) -> io::Result<c_long> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn owned(ret: c_long) -> io::Result<OwnedFd> {
    let fd = check_long(ret)?;
    let fd = RawFd::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
