//! The child's plan: the spec turned into what init needs, built by the supervisor
//! before `clone` and read by init.

use std::ffi::CString;
use std::os::fd::{OwnedFd, RawFd};
use std::path::PathBuf;

use vg_policy::{Identity, LandlockRules};

use crate::error::SandboxError;
use crate::spec::{SandboxNetwork, SandboxSpec};
use crate::{seccomp, sys};

/// Everything the child needs, prepared before `clone` so the child allocates little
/// and every host-side check has already happened.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub ops: Vec<vg_policy::MountOp>,
    pub landlock: LandlockRules,
    pub seccomp: Vec<vg_seccomp::SockFilter>,
    pub argv: Vec<CString>,
    pub envp: Vec<CString>,
    pub path_dirs: Vec<CString>,
    pub hostname: Vec<u8>,
    pub workdir: PathBuf,
    pub identity: Identity,
    /// `identity` as seen inside the user namespace.
    pub inside: (u32, u32),
    pub switch_identity: bool,
    pub stdio: [RawFd; 3],
    /// A listener is made and handed to the supervisor (exec tracing, by either way).
    pub trace_exec: bool,
    /// Execs are recorded by the BPF recorder, not sent to the listener.
    pub exec_by_bpf: bool,
    /// `exit_group` goes to the listener too ([`crate::trace::Exits::Trap`]).
    pub trace_exit: bool,
    pub trace_files: bool,
    pub trace_file_changes: bool,
    pub report_refusals: bool,
    pub rlimit_nproc: Option<u64>,
    pub watch_full: Vec<CString>,
    pub tty: bool,
    pub network: SandboxNetwork,
    pub persistent: bool,
    /// With an image in a run started as root: the image as an idmapped mount.
    pub image_lower: Option<OwnedFd>,
    /// The child's end of the socket that carries the seccomp listener.
    pub notify_sock: Option<std::os::fd::OwnedFd>,
    /// The supervisor's CPU affinity when it cloned init, which init gives back to
    /// itself once it has built the sandbox (see `spawn_in`: while it builds, it is
    /// kept off the supervisor's CPU), and the CPU the supervisor was on.
    pub cpus: Option<(sys::CpuSet, usize)>,
}

fn cstring(s: impl AsRef<[u8]>, what: &str) -> Result<CString, SandboxError> {
    CString::new(s.as_ref()).map_err(|_| SandboxError::Usage(format!("{what} contains a NUL byte")))
}

impl Prepared {
    pub(crate) fn new(
        spec: &SandboxSpec,
        stdio: [RawFd; 3],
        exec_by_bpf: bool,
    ) -> Result<Self, SandboxError> {
        let invoker = sys::getuid();
        if spec.identity.uid == 0 {
            return Err(SandboxError::Usage(
                "the sandboxed command never runs as root: choose an unprivileged --user".into(),
            ));
        }
        if invoker != 0 && (spec.identity.uid != invoker || spec.identity.gid != sys::getgid()) {
            return Err(SandboxError::Usage(
                "--user needs root: an unprivileged user can only run the sandbox as itself".into(),
            ));
        }
        if (spec.trace_files || spec.trace_file_changes || spec.report_refusals) && !spec.trace_exec
        {
            // Their notifications arrive on the exec listener, which only exists with
            // exec tracing, and are attributed to programs through the execs it saw.
            return Err(SandboxError::Usage(
                "tracing files or reporting refusals needs exec tracing: set trace_exec too".into(),
            ));
        }
        let argv = spec
            .argv
            .iter()
            .map(|a| cstring(a, "an argument"))
            .collect::<Result<Vec<_>, _>>()?;
        if argv.is_empty() && !spec.persistent {
            return Err(SandboxError::Usage("no command to run".into()));
        }
        let envp = spec
            .env
            .iter()
            .map(|(k, v)| cstring(format!("{k}={v}"), "an environment variable"))
            .collect::<Result<Vec<_>, _>>()?;
        let path = spec
            .env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str())
            .unwrap_or(vg_policy::env::SANDBOX_PATH);
        let path_dirs = path
            .split(':')
            .filter(|d| !d.is_empty())
            .map(|d| cstring(d, "PATH"))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            ops: spec.view.ops.clone(),
            landlock: spec.view.landlock_rules(),
            seccomp: seccomp::compile(vg_seccomp::ProfileOptions {
                trace_exec: spec.trace_exec && !exec_by_bpf,
                trace_exit: spec.trace_exec
                    && !exec_by_bpf
                    && spec.exits == crate::trace::Exits::Trap,
                trace_files: spec.trace_files,
                trace_file_changes: spec.trace_file_changes,
                report_refusals: spec.report_refusals,
            })?,
            argv,
            envp,
            path_dirs,
            hostname: spec.hostname.as_bytes().to_vec(),
            workdir: spec.workdir.clone(),
            identity: spec.identity.clone(),
            inside: spec
                .inside
                .unwrap_or((spec.identity.uid, spec.identity.gid)),
            switch_identity: invoker == 0,
            stdio,
            trace_exec: spec.trace_exec,
            exec_by_bpf: spec.trace_exec && exec_by_bpf,
            trace_exit: spec.trace_exec && !exec_by_bpf && spec.exits == crate::trace::Exits::Trap,
            trace_files: spec.trace_files,
            trace_file_changes: spec.trace_file_changes,
            report_refusals: spec.report_refusals,
            rlimit_nproc: spec.rlimit_nproc,
            tty: spec.tty && !spec.persistent,
            network: spec.network,
            persistent: spec.persistent,
            watch_full: spec
                .watch_full
                .iter()
                .map(|p| cstring(p.as_os_str().as_encoded_bytes(), "a watched path"))
                .collect::<Result<_, _>>()?,
            image_lower: match spec.view.ops.first() {
                Some(vg_policy::MountOp::ImageRoot { lower, .. }) if invoker == 0 => Some(
                    crate::idmap::image_for(lower, (spec.identity.uid, spec.identity.gid))?,
                ),
                _ => None,
            },
            notify_sock: None,
            cpus: None,
        })
    }
}
