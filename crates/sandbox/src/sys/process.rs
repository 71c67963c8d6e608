//! Processes: clone and fork, exec, exit, wait, signals to a pid, prctl, rlimits, another process's memory.

use std::ffi::{CStr, CString};
use std::io;

use libc::{c_int, c_long, c_ulong, pid_t};

use super::{check, check_long};

/// `clone(2)` without a new stack: like `fork`, but with namespace flags. Returns
/// `Some(pid)` in the parent and `None` in the child.
///
/// # Safety
///
/// The child is a copy of the calling thread only. Unless the process has no other
/// thread, the child may use only async-signal-safe calls (no allocation, no locks)
/// until it execs or exits: another thread may have held the allocator's or any other
/// lock at the moment of the copy, and nothing in the child would ever release it.
pub unsafe fn clone_fork(flags: c_int) -> io::Result<Option<pid_t>> {
    let flags = c_ulong::try_from(flags | libc::SIGCHLD)
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: a null stack makes clone behave like fork (the child runs on a copy of our
    // stack); the pointer arguments are null because no CLONE_*TID/SETTLS flag is given.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<c_int>(),
            std::ptr::null_mut::<c_int>(),
            0 as c_ulong,
        )
    };
    let pid = check_long(ret)?;
    Ok(if pid == 0 {
        None
    } else {
        Some(pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ERANGE))?)
    })
}

/// Plain `fork(2)`.
///
/// # Safety
///
/// As for [`clone_fork`]: either the process has one thread, or the child uses only
/// async-signal-safe calls until it execs or exits.
pub unsafe fn fork() -> io::Result<Option<pid_t>> {
    // SAFETY: fork itself has no memory-safety preconditions; what the child may do
    // afterwards is our caller's obligation (see # Safety).
    let pid = check(unsafe { libc::fork() })?;
    Ok(if pid == 0 { None } else { Some(pid) })
}

/// The boot clock (`CLOCK_BOOTTIME`, which the BPF recorder stamps events with), in
/// nanoseconds; `None` if it cannot be read.
#[cfg(vg_exec_bpf)]
pub fn boottime_ns() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which `ts` is.
    check(unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &raw mut ts) }).ok()?;
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u64::try_from(ts.tv_nsec).ok()?;
    secs.checked_mul(1_000_000_000)?.checked_add(nanos)
}

pub fn unshare(flags: c_int) -> io::Result<()> {
    // SAFETY: unshare takes a flag word only.
    check(unsafe { libc::unshare(flags) }).map(drop)
}

pub fn sethostname(name: &[u8]) -> io::Result<()> {
    // SAFETY: the pointer and length describe a live byte slice.
    check(unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) }).map(drop)
}

pub fn prctl(option: c_int, arg2: c_ulong, arg3: c_ulong) -> io::Result<c_int> {
    // SAFETY: every prctl option we use takes integer arguments only.
    check(unsafe { libc::prctl(option, arg2, arg3, 0 as c_ulong, 0 as c_ulong) })
}

pub fn setsid() -> io::Result<()> {
    // SAFETY: setsid takes no arguments.
    check(unsafe { libc::setsid() }).map(drop)
}

/// `setpgid(0, 0)`: this process leads a new process group.
pub fn new_process_group() -> io::Result<()> {
    // SAFETY: setpgid takes two integers.
    check(unsafe { libc::setpgid(0, 0) }).map(drop)
}

/// Replaces the process image. Returns only on failure.
pub fn execve(path: &CStr, argv: &[CString], envp: &[CString]) -> io::Error {
    let mut a: Vec<*const libc::c_char> = argv.iter().map(|s| s.as_ptr()).collect();
    a.push(std::ptr::null());
    let mut e: Vec<*const libc::c_char> = envp.iter().map(|s| s.as_ptr()).collect();
    e.push(std::ptr::null());
    // SAFETY: both arrays are null-terminated arrays of valid C strings that outlive the call.
    unsafe { libc::execve(path.as_ptr(), a.as_ptr(), e.as_ptr()) };
    io::Error::last_os_error()
}

pub fn exit_now(code: c_int) -> ! {
    // SAFETY: _exit ends the process without running destructors or atexit handlers,
    // which is what a forked child must do.
    unsafe { libc::_exit(code) }
}

/// `waitpid(2)`; returns `None` with WNOHANG when nothing changed.
pub fn waitpid(pid: pid_t, flags: c_int) -> io::Result<Option<(pid_t, c_int)>> {
    let mut status: c_int = 0;
    // SAFETY: status points at a live c_int.
    let ret = check(unsafe { libc::waitpid(pid, &mut status, flags) })?;
    Ok((ret != 0).then_some((ret, status)))
}

pub fn kill(pid: pid_t, signal: c_int) -> io::Result<()> {
    // SAFETY: kill takes integers.
    check(unsafe { libc::kill(pid, signal) }).map(drop)
}

/// Reads another process's memory (`process_vm_readv`); returns the bytes read.
pub fn read_process_memory(pid: pid_t, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: usize::try_from(addr).map_err(|_| io::Error::from_raw_os_error(libc::EFAULT))?
            as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `local` describes our live buffer; `remote` is only an address in the
    // other process, which the kernel validates.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    let n = check_long(n as c_long)?;
    usize::try_from(n).map_err(|_| io::Error::from_raw_os_error(libc::ERANGE))
}

/// Raises this process's soft limit on open descriptors to its hard limit, and
/// returns the new soft limit. Only the soft value changes, which any process may do.
pub fn raise_open_files_limit() -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: lim is a valid, writable rlimit.
    check(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) })?;
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: lim is a valid rlimit.
        check(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) })?;
    }
    Ok(lim.rlim_cur)
}

/// Lowers (or sets) both the soft and hard value of a resource limit.
pub fn setrlimit(resource: libc::__rlimit_resource_t, value: u64) -> io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: lim is a valid rlimit.
    check(unsafe { libc::setrlimit(resource, &lim) }).map(drop)
}

/// The files this process's dynamic loader mapped: `(path, is_loader)` for each
/// object with an absolute name, in load order (the program itself, which the
/// kernel mapped, and the vDSO, which is no file, have none). The loader is the
/// object loaded at the auxiliary vector's `AT_BASE`. Empty for a static program.
pub fn loaded_objects() -> Vec<(std::path::PathBuf, bool)> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: getauxval reads this process's auxiliary vector; 0 when absent.
    let base = unsafe { libc::getauxval(libc::AT_BASE) };
    let mut found: (u64, Vec<(std::path::PathBuf, bool)>) = (base, Vec::new());
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> c_int {
        // SAFETY: `data` is the `found` tuple below, alive and not otherwise borrowed
        // during dl_iterate_phdr; `info` is valid for this call, and its name is
        // null or a NUL-terminated string the loader keeps for the object's life.
        unsafe {
            let found = &mut *data.cast::<(u64, Vec<(std::path::PathBuf, bool)>)>();
            let info = &*info;
            if !info.dlpi_name.is_null() {
                let name = CStr::from_ptr(info.dlpi_name).to_bytes();
                if name.first() == Some(&b'/') {
                    let path = std::path::PathBuf::from(std::ffi::OsStr::from_bytes(name));
                    found
                        .1
                        .push((path, found.0 != 0 && info.dlpi_addr == found.0));
                }
            }
        }
        0
    }
    // SAFETY: the callback only reads what the loader passes and writes to `found`,
    // which outlives the call.
    unsafe {
        libc::dl_iterate_phdr(Some(each), (&raw mut found).cast());
    }
    found.1
}

/// The CPUs a process may run on (`sched_getaffinity(2)`).
#[derive(Clone, Copy)]
pub struct CpuSet(libc::cpu_set_t);

impl std::fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: cpu is below CPU_SETSIZE, within the set.
            .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &self.0) })
            .collect();
        f.debug_tuple("CpuSet").field(&cpus).finish()
    }
}

impl CpuSet {
    /// `cpu` alone, when this set has it.
    pub fn only(&self, cpu: usize) -> Option<CpuSet> {
        if cpu >= libc::CPU_SETSIZE as usize {
            return None;
        }
        // SAFETY: cpu is below CPU_SETSIZE, within the set.
        if !unsafe { libc::CPU_ISSET(cpu, &self.0) } {
            return None;
        }
        // SAFETY: an all-zero cpu_set_t is the empty set.
        let mut out = CpuSet(unsafe { std::mem::zeroed() });
        // SAFETY: cpu is below CPU_SETSIZE, within the set.
        unsafe { libc::CPU_SET(cpu, &mut out.0) };
        Some(out)
    }

    /// This set without `cpu`; `None` when nothing would be left.
    pub fn without(&self, cpu: usize) -> Option<CpuSet> {
        let mut out = *self;
        if cpu < libc::CPU_SETSIZE as usize {
            // SAFETY: cpu is below CPU_SETSIZE, within the set.
            unsafe { libc::CPU_CLR(cpu, &mut out.0) };
        }
        // SAFETY: out.0 is a valid cpu_set_t.
        (unsafe { libc::CPU_COUNT(&out.0) } > 0).then_some(out)
    }
}

/// `pid`'s CPU affinity (0: this thread's).
pub fn affinity(pid: pid_t) -> io::Result<CpuSet> {
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is a valid cpu_set_t of the size given.
    check(unsafe {
        libc::sched_getaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &mut set)
    })?;
    Ok(CpuSet(set))
}

/// Sets `pid`'s CPU affinity (0: this thread's).
pub fn set_affinity(pid: pid_t, set: &CpuSet) -> io::Result<()> {
    // SAFETY: set.0 is a valid cpu_set_t of the size given.
    check(unsafe { libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set.0) })
        .map(drop)
}

/// The CPU this thread runs on now (`sched_getcpu(3)`).
pub fn current_cpu() -> Option<usize> {
    // SAFETY: no arguments.
    usize::try_from(unsafe { libc::sched_getcpu() }).ok()
}
