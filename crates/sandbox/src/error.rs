//! Errors, one variant per failing step, each naming the isolation layer it belongs to
//! and what the user can do about it.

use std::io;
use std::path::PathBuf;

/// A failure while building the sandbox. Displayed text says what failed, why, and
/// how to fix it; [`SetupError::layer`] names the isolation layer.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cannot create the sandbox's namespaces: {source}. {hint}")]
    Namespaces { source: io::Error, hint: String },
    #[error("cannot write {file} for the sandbox's user namespace: {source}")]
    IdMap {
        file: &'static str,
        source: io::Error,
    },
    #[error("cannot {what}: {source}")]
    Mount {
        what: &'static str,
        source: io::Error,
    },
    #[error("cannot mount {target} in the sandbox: {source}{}", mount_hint(source))]
    MountOp { target: PathBuf, source: io::Error },
    #[error(
        "cannot show host {lower} at {target} through a throwaway layer ({step}): {source}{}",
        overlay_hint(step, source)
    )]
    Overlay {
        lower: PathBuf,
        target: PathBuf,
        step: &'static str,
        source: io::Error,
    },
    #[error("cannot open mount source {path}: {source}")]
    MountSource { path: PathBuf, source: io::Error },
    #[error("path {0} cannot be used in the sandbox (it contains a NUL byte)")]
    BadPath(PathBuf),
    #[error("cannot bring up the sandbox's loopback interface: {source}")]
    Network { source: io::Error },
    #[error(
        "cannot create the sandbox's TUN interface for --network allow: {source} (hint: {})",
        tun_hint(source)
    )]
    Tun { source: io::Error },
    #[error("cannot set the sandbox hostname: {0}")]
    Hostname(io::Error),
    #[error(
        "working directory {path} is not usable inside the sandbox: {source} (pass --workdir with a directory that is mounted)"
    )]
    Workdir { path: PathBuf, source: io::Error },
    #[error("cannot {step}: {source}")]
    Credentials {
        step: &'static str,
        source: io::Error,
    },
    #[error("cannot drop capabilities ({step}): {source}")]
    Capabilities {
        step: &'static str,
        source: io::Error,
    },
    #[error("cannot set no_new_privs: {0}")]
    NoNewPrivs(io::Error),
    #[error(
        "Landlock is required but {reason}. Fix: use a kernel >= 5.13 with Landlock enabled (CONFIG_SECURITY_LANDLOCK=y and 'landlock' in the lsm= boot parameter); `vectraguard doctor` shows the details"
    )]
    Landlock { reason: String },
    #[error(
        "cannot install the seccomp filter: {reason}. Fix: use a kernel with CONFIG_SECCOMP_FILTER=y; `vectraguard doctor` shows the details"
    )]
    Seccomp { reason: String },
    #[error(
        "cannot point the exec recorder at the sandbox: {0}. Fix: run without root to record execs through seccomp, or see `vectraguard doctor`"
    )]
    ExecRecorder(String),
    #[error("the Vectra Guard supervisor went away during setup")]
    ParentGone,
    #[error("cannot start the sandbox's init process: {0}")]
    Fork(io::Error),
    #[error("cannot place the sandbox in its cgroup: {0}")]
    Cgroup(io::Error),
    #[error("cannot set the sandbox's resource limit {what}: {source}")]
    Rlimit {
        what: &'static str,
        source: io::Error,
    },
    #[error("cannot create the sandbox's terminal: {0}")]
    Terminal(io::Error),
    #[error("cannot block the forwarded signals in the supervisor (signal mask): {0}")]
    SignalMask(io::Error),
    #[error("cannot open a pidfd for the sandbox's init (Linux 5.3 or later is required): {0}")]
    Pidfd(io::Error),
    #[error("cannot set init's parent-death signal (PR_SET_PDEATHSIG): {0}")]
    ParentDeathSignal(io::Error),
    #[error("cannot move init out of the caller's session (setsid): {0}")]
    NewSession(io::Error),
    #[error("cannot make init non-dumpable (PR_SET_DUMPABLE): {0}")]
    NotDumpable(io::Error),
    #[error(
        "a sandbox can only be started while the supervisor has one thread, and it has {threads}: the sandbox's init is a copy of the calling thread and would wait for ever on a lock another thread held. Start sandboxes before starting threads, or from a process of their own (as `vectraguard sandbox run` does)"
    )]
    Threads { threads: usize },
    /// The other runtime's command could not be prepared (see `runtime.rs`).
    #[error("cannot start the runtime: {0}")]
    Runtime(String),
}

fn mount_hint(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::ELOOP) => {
            " (a path component is a symlink; mount targets must be real directories)"
        }
        Some(libc::EROFS) => {
            " (the mount point does not exist inside a read-only directory; choose a target that exists or lies outside system directories)"
        }
        Some(libc::ENOSYS) => " (this kernel lacks the new mount API; Linux >= 5.12 is required)",
        _ => "",
    }
}

/// The step of [`SetupError::Overlay`] that mounts overlayfs.
pub(crate) const OVERLAY_MOUNT: &str = "mount the overlay";

/// Why overlayfs may be refused in the sandbox's user namespace, and the fix.
fn overlay_hint(step: &str, e: &io::Error) -> &'static str {
    if step != OVERLAY_MOUNT {
        return mount_hint(e);
    }
    match e.raw_os_error() {
        Some(libc::EPERM | libc::EINVAL | libc::ENODEV | libc::EOPNOTSUPP) => {
            " (this kernel refuses overlayfs in an unprivileged user namespace, or its tmpfs lacks the user extended attributes overlayfs's `userxattr` needs: Linux 6.6 or later with overlayfs (CONFIG_OVERLAY_FS) is required; as root, `dmesg` shows overlayfs's own reason)"
        }
        _ => "",
    }
}

impl SetupError {
    /// The isolation layer that failed, as shown in errors and session records.
    pub fn layer(&self) -> &'static str {
        match self {
            Self::Namespaces { .. } | Self::IdMap { .. } => "user namespace",
            Self::Mount { .. }
            | Self::MountOp { .. }
            | Self::MountSource { .. }
            | Self::Overlay { .. }
            | Self::BadPath(_)
            | Self::Workdir { .. } => "mount namespace",
            Self::Hostname(_) => "UTS namespace",
            Self::Network { .. } | Self::Tun { .. } => "network namespace",
            Self::Credentials { .. } => "privilege drop",
            Self::Capabilities { .. } => "capabilities",
            Self::NoNewPrivs(_) => "no_new_privs",
            Self::Landlock { .. } => "Landlock",
            Self::Seccomp { .. } => "seccomp",
            Self::ExecRecorder(_) => "exec recording",
            Self::Cgroup(_) | Self::Rlimit { .. } => "resource limits",
            Self::Terminal(_) => "terminal",
            Self::ParentGone
            | Self::Fork(_)
            | Self::SignalMask(_)
            | Self::Pidfd(_)
            | Self::ParentDeathSignal(_)
            | Self::NewSession(_)
            | Self::NotDumpable(_)
            | Self::Threads { .. } => "supervisor",
            Self::Runtime(_) => "runtime",
        }
    }
}

/// Errors seen by the caller of [`crate::spawn`].
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("{layer}: {message}")]
    Layer { layer: String, message: String },
    #[error("{0}")]
    Setup(#[from] SetupError),
    #[error("the sandbox's init process ended without reporting a status ({0})")]
    Lost(String),
    #[error("{0}")]
    Usage(String),
}

impl SandboxError {
    pub fn from_setup(e: &SetupError) -> Self {
        Self::Layer {
            layer: e.layer().to_owned(),
            message: e.to_string(),
        }
    }
}

/// Why `/dev/net/tun` could not be used, and the fix.
pub fn tun_hint(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "/dev/net/tun is not readable and writable by this user; most distributions make it mode 0666 (`chmod 0666 /dev/net/tun` as root), or run as root, or use --network none or --network host"
        }
        Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::ENXIO) => {
            "this kernel has no TUN driver: load it with `modprobe tun`, or use --network none or --network host"
        }
        _ => "run `vectraguard doctor` to check TUN access, or use --network none",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tun_failure_names_the_layer_and_the_fix() {
        let e = SetupError::Tun {
            source: io::Error::from_raw_os_error(libc::EACCES),
        };
        assert_eq!(e.layer(), "network namespace");
        let text = e.to_string();
        assert!(text.contains("--network allow"), "{text}");
        assert!(text.contains("chmod 0666 /dev/net/tun"), "{text}");
        let missing = tun_hint(&io::Error::from_raw_os_error(libc::ENOENT));
        assert!(missing.contains("modprobe tun"), "{missing}");
    }
}
