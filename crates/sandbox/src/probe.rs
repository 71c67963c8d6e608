//! Probes which isolation layers this host supports, for `vectraguard doctor` and for
//! session records. Each probe runs the real mechanism (in a throwaway child where it
//! would change our own state), never just a version check.

use std::os::fd::AsFd;

use crate::spec::NAMESPACES;
use crate::sys;

/// The result of one probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub layer: String,
    pub ok: bool,
    /// What was found (version, mode, or the error).
    pub detail: String,
    /// How to fix it when `ok` is false (or when it is degraded).
    pub fix: Option<String>,
}

impl Check {
    fn ok(layer: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            layer: layer.into(),
            ok: true,
            detail: detail.into(),
            fix: None,
        }
    }

    fn missing(
        layer: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self {
            layer: layer.into(),
            ok: false,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// Runs `f` in a forked child and returns its exit code (an errno, 0 for success).
fn in_child(f: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the probes' children allocate; `vectraguard doctor`, their only caller,
    // runs them from its one thread before starting any other.
    #[allow(unsafe_code)]
    let forked = unsafe { sys::fork() };
    match forked {
        Ok(None) => sys::exit_now(f()),
        Ok(Some(pid)) => match sys::waitpid(pid, 0) {
            Ok(Some((_, status))) if libc::WIFEXITED(status) => libc::WEXITSTATUS(status),
            _ => libc::ECHILD,
        },
        Err(e) => e.raw_os_error().unwrap_or(libc::EAGAIN),
    }
}

fn errno_text(errno: i32) -> String {
    std::io::Error::from_raw_os_error(errno).to_string()
}

fn errno_of(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

pub fn namespaces() -> Vec<Check> {
    let mut out = Vec::new();
    let user = in_child(|| sys::unshare(libc::CLONE_NEWUSER).map_or_else(|e| errno_of(&e), |()| 0));
    if user != 0 {
        let hint = crate::spawn::namespace_hint(&std::io::Error::from_raw_os_error(user));
        out.push(Check::missing("user namespace", errno_text(user), hint));
        return out;
    }
    out.push(Check::ok("user namespace", "available"));
    for (name, flag) in NAMESPACES.iter().filter(|(n, _)| *n != "user") {
        let flag = *flag;
        let r = in_child(move || {
            sys::unshare(libc::CLONE_NEWUSER | flag).map_or_else(|e| errno_of(&e), |()| 0)
        });
        let layer = format!("{name} namespace");
        out.push(if r == 0 {
            Check::ok(layer, "available")
        } else {
            Check::missing(
                layer,
                errno_text(r),
                format!("enable CONFIG_{}_NS in the kernel", name.to_uppercase()),
            )
        });
    }
    out
}

pub fn mount_api() -> Check {
    let r = in_child(|| {
        if let Err(e) = sys::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) {
            return errno_of(&e);
        }
        let fs = match sys::fsopen(c"tmpfs") {
            Ok(fs) => fs,
            Err(e) => return errno_of(&e),
        };
        if let Err(e) = sys::fsconfig_create(fs.as_fd()) {
            return errno_of(&e);
        }
        match sys::fsmount(fs.as_fd(), 0)
            .and_then(|m| sys::mount_setattr(m.as_fd(), true, sys::MOUNT_ATTR_RDONLY))
        {
            Ok(()) => 0,
            Err(e) => errno_of(&e),
        }
    });
    if r == 0 {
        Check::ok("mount API", "fsopen, fsmount, open_tree, mount_setattr")
    } else {
        Check::missing(
            "mount API",
            errno_text(r),
            "Linux >= 5.12 is required (fsopen/fsmount/mount_setattr)",
        )
    }
}

pub fn landlock() -> Vec<Check> {
    match sys::landlock_abi_version() {
        Ok(abi) => {
            let mut v = vec![Check::ok("Landlock", format!("ABI {abi}"))];
            v.push(if abi >= 6 {
                Check::ok("Landlock scoping", "signals and abstract unix sockets")
            } else {
                Check::missing(
                    "Landlock scoping",
                    format!("needs ABI 6, kernel has {abi} (runs without it; namespaces still separate signals and abstract sockets)"),
                    "upgrade to Linux >= 6.12",
                )
            });
            v
        }
        Err(e) => vec![Check::missing(
            "Landlock",
            match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) => "built in but disabled".to_owned(),
                Some(libc::ENOSYS) => "not built into this kernel".to_owned(),
                _ => e.to_string(),
            },
            "use Linux >= 5.13 with CONFIG_SECURITY_LANDLOCK=y and 'landlock' in the lsm= boot parameter",
        )],
    }
}

pub fn seccomp() -> Vec<Check> {
    const RET_KILL_PROCESS: u32 = 0x8000_0000;
    const RET_USER_NOTIF: u32 = 0x7fc0_0000;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let filter = status.lines().any(|l| l.starts_with("Seccomp:"));
    let mut v = vec![
        if filter && sys::seccomp_action_available(RET_KILL_PROCESS) {
            Check::ok("seccomp", "filter mode with SECCOMP_RET_KILL_PROCESS")
        } else {
            Check::missing(
                "seccomp",
                "seccomp filters are not available",
                "use a kernel with CONFIG_SECCOMP_FILTER=y (Linux >= 4.14)",
            )
        },
    ];
    v.push(if sys::seccomp_action_available(RET_USER_NOTIF) {
        Check::ok("seccomp user notification", "available")
    } else {
        Check::missing(
            "seccomp user notification",
            "not available",
            "Linux >= 5.0 is required",
        )
    });
    v
}

/// Resource limits: which mechanism would enforce each one here, found by really
/// creating (and removing) a cgroup with every controller.
pub fn limits() -> Vec<Check> {
    use crate::cgroup::{Cgroup, CgroupLimits};
    let all = CgroupLimits {
        memory: Some(u64::MAX / 2),
        cpus: Some(1.0),
        pids: Some(1 << 20),
    };
    let name = format!("vectraguard-doctor-{}", std::process::id());
    let cgroup = match Cgroup::create(&name, &all) {
        Ok(cg) => Check::ok(
            "limits: memory, cpus, pids",
            format!("enforced with {}", cg.version.as_str()),
        ),
        Err(why) => Check {
            layer: "limits: memory, cpus".into(),
            ok: false,
            detail: format!("cannot be enforced: {why}"),
            fix: Some("run as root on a cgroup v1 host, or start vectraguard in a delegated cgroup v2 subtree (`systemd-run --user --scope -p Delegate=yes vectraguard ...`); --best-effort-limits runs without them (memory then held only by the supervisor's polling watchdog)".into()),
        },
    };
    let mut out = vec![cgroup];
    out.push(if nproc_counts_per_namespace() {
        Check::ok(
            "limits: pids without cgroups",
            "RLIMIT_NPROC, counted per user namespace",
        )
    } else {
        Check::missing(
            "limits: pids without cgroups",
            "this kernel counts RLIMIT_NPROC per user, not per sandbox",
            "use Linux >= 5.14, or cgroups for --pids",
        )
    });
    out.push(Check::ok(
        "limits: disk, timeout, max-output, max-record",
        "tmpfs sizes and the supervisor (always available)",
    ));
    out
}

/// Whether this kernel (5.14+) counts RLIMIT_NPROC per user namespace, which makes
/// it a per-sandbox process cap.
pub fn nproc_counts_per_namespace() -> bool {
    kernel_at_least(5, 14)
}

/// Whether the running kernel's version is at least `major.minor` (read once).
pub fn kernel_at_least(major: u32, minor: u32) -> bool {
    static VERSION: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    *VERSION.get_or_init(|| {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        kernel_version(&release)
    }) >= (major, minor)
}

/// `major.minor` of a kernel release such as `6.1.0-18-amd64`; `(0, 0)` when it
/// cannot be read, so that no feature is assumed.
fn kernel_version(release: &str) -> (u32, u32) {
    let mut numbers = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().ok());
    match (numbers.next().flatten(), numbers.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor),
        _ => (0, 0),
    }
}

/// The layer name of [`tun`], which `doctor` shows as optional.
pub const TUN_LAYER: &str = "network: mediated (--network allow)";

/// Whether `--network allow` can work: really creates a TUN interface in a throwaway
/// user and network namespace, as a sandbox would.
pub fn tun() -> Check {
    let r = in_child(|| {
        if let Err(e) = sys::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) {
            return errno_of(&e);
        }
        sys::tun_create("vgprobe0").map_or_else(|e| errno_of(&e), |_| 0)
    });
    if r == 0 {
        Check::ok(
            TUN_LAYER,
            "TUN interfaces can be created in a sandbox's namespace",
        )
    } else {
        let e = std::io::Error::from_raw_os_error(r);
        Check::missing(
            TUN_LAYER,
            format!("cannot create a TUN interface: {e}"),
            crate::error::tun_hint(&e),
        )
    }
}

/// The layer name of [`image_root`], which `doctor` shows as optional.
pub const IMAGE_LAYER: &str = "images: overlay root (--image)";

/// Whether `--image` can work: really mounts an overlay in a throwaway user and mount
/// namespace, as a sandbox's init does over an image.
pub fn image_root() -> Check {
    let base = std::env::temp_dir().join(format!("vectraguard-doctor-{}", std::process::id()));
    let dirs = ["lower", "upper", "work"].map(|d| base.join(d));
    let made = dirs.iter().try_for_each(std::fs::create_dir_all);
    let (uid, gid) = (sys::getuid(), sys::getgid());
    let r = match made {
        Err(e) => errno_of(&e),
        Ok(()) => in_child(|| {
            if let Err(e) = sys::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) {
                return errno_of(&e);
            }
            // Map ourselves, as the supervisor maps the sandbox's user.
            let mapped = std::fs::write("/proc/self/setgroups", "deny")
                .and_then(|()| std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1\n")))
                .and_then(|()| std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1\n")));
            if let Err(e) = mapped {
                return errno_of(&e);
            }
            let opts: Vec<(std::ffi::CString, std::ffi::CString)> =
                ["lowerdir", "upperdir", "workdir"]
                    .iter()
                    .zip(&dirs)
                    .filter_map(|(k, d)| {
                        Some((
                            std::ffi::CString::new(*k).ok()?,
                            std::ffi::CString::new(d.as_os_str().as_encoded_bytes()).ok()?,
                        ))
                    })
                    .collect();
            let mount = || -> std::io::Result<()> {
                let fs = sys::fsopen(c"overlay")?;
                for (k, v) in &opts {
                    sys::fsconfig_set(fs.as_fd(), k, Some(v))?;
                }
                sys::fsconfig_set(fs.as_fd(), c"userxattr", None)?;
                sys::fsconfig_create(fs.as_fd())?;
                sys::fsmount(fs.as_fd(), 0).map(drop)
            };
            mount().map_or_else(|e| errno_of(&e), |()| 0)
        }),
    };
    let _ = std::fs::remove_dir_all(&base);
    if r == 0 {
        Check::ok(IMAGE_LAYER, "overlayfs mounts in a user namespace")
    } else {
        Check::missing(
            IMAGE_LAYER,
            format!(
                "cannot mount an overlay in a user namespace: {}",
                errno_text(r)
            ),
            "use Linux >= 5.11 with overlayfs (modprobe overlay); without it only --image is refused",
        )
    }
}

/// `doctor`'s name for [`exec_recorder`]'s check.
pub const EXEC_RECORDER_LAYER: &str = "exec recording by BPF";

/// Whether a root run's execs are recorded by the BPF recorder
/// ([`crate::exectrace`]), found by loading and attaching it (and dropping it at
/// once, which detaches it). Optional: without it execs are recorded through
/// seccomp notification, each waiting for the supervisor.
pub fn exec_recorder() -> Check {
    let fallback =
        "execs are recorded through seccomp notification instead (each waits for the supervisor)";
    if let Err(why) = crate::exectrace::built() {
        return Check::missing(
            EXEC_RECORDER_LAYER,
            format!("not in this binary: {why}; {fallback}"),
            "install clang and libbpf-dev (apt-get install clang libbpf-dev) and rebuild",
        );
    }
    if sys::getuid() != 0 {
        return Check::missing(
            EXEC_RECORDER_LAYER,
            format!("used only by root, which can load BPF programs; {fallback}"),
            "run as root for exec recording without the wait",
        );
    }
    match crate::exectrace::ExecRecorder::load() {
        Ok(_) => Check::ok(
            EXEC_RECORDER_LAYER,
            "loads and attaches (sched_process_exec and sched_process_exit raw trace points; loaded once per boot, pinned in /run/vectraguard/bpf): a root run without --ask or --image records its execs with it by default, without making them wait (exec_trace = \"seccomp\" turns it off)",
        ),
        Err(why) => Check::missing(
            EXEC_RECORDER_LAYER,
            format!("{why}; {fallback}"),
            "use a kernel with BTF (CONFIG_DEBUG_INFO_BTF=y), BPF trace points and pid namespace ids (Linux >= 6.18)",
        ),
    }
}

/// Every probe, in the order `doctor` prints them.
pub fn all() -> Vec<Check> {
    let mut out = namespaces();
    out.push(mount_api());
    out.extend(landlock());
    out.extend(seccomp());
    out.push(exec_recorder());
    out.extend(limits());
    out.push(tun());
    out.push(image_root());
    out
}

#[cfg(test)]
mod tests {
    use super::kernel_version;

    #[test]
    fn kernel_versions_are_read_from_releases() {
        assert_eq!(kernel_version("6.1.0-18-amd64\n"), (6, 1));
        assert_eq!(kernel_version("6.18.44-fc-v782"), (6, 18));
        assert_eq!(kernel_version("5.14"), (5, 14));
        assert_eq!(kernel_version("6"), (0, 0));
        assert_eq!(kernel_version(""), (0, 0));
        assert!((6, 15) <= kernel_version("6.15.0") && (6, 15) > kernel_version("6.9.12"));
    }
}
