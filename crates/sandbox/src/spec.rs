//! The sandbox as the caller describes it, and what the supervisor and init both know:
//! the spec, its network and terminal settings, the signals between them, and how
//! the command ended.

use std::path::PathBuf;

use vg_policy::{FsView, Identity};

/// Signals the supervisor passes on to the sandboxed command.
pub const FORWARDED_SIGNALS: &[libc::c_int] = &[
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGWINCH,
    libc::SIGCONT,
];

/// Every namespace the sandbox gets. All are created by a single `clone`.
pub const NAMESPACES: &[(&str, libc::c_int)] = &[
    ("user", libc::CLONE_NEWUSER),
    ("mount", libc::CLONE_NEWNS),
    ("pid", libc::CLONE_NEWPID),
    ("network", libc::CLONE_NEWNET),
    ("ipc", libc::CLONE_NEWIPC),
    ("uts", libc::CLONE_NEWUTS),
    ("cgroup", libc::CLONE_NEWCGROUP),
];

/// What to run and how to confine it.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    pub hostname: String,
    /// The command; `argv[0]` is looked up in the sandbox's PATH when it has no `/`.
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub workdir: PathBuf,
    pub view: FsView,
    pub identity: Identity,
    /// The uid and gid the command has inside its user namespace, mapped to
    /// `identity`'s on the host. `None`: the same numbers as on the host. An image's
    /// root user is `Some((0, 0))`: root inside, an unprivileged user outside.
    pub inside: Option<(u32, u32)>,
    /// Send every exec to the supervisor ([`Sandbox::exec_listener`]), and each
    /// traced program's exit the way `exits` says.
    pub trace_exec: bool,
    /// With `trace_exec`: record execs and exits with the BPF recorder
    /// ([`crate::exectrace`]) when it loads (root, a kernel with BTF), so that no
    /// exec waits for the supervisor; the seccomp filter then sends execs nowhere.
    /// If it does not load, execs go to the listener as without it, and
    /// [`crate::Sandbox::exec_trace`] says why. Not for an approval gate, which
    /// must hold execs.
    pub exec_by_bpf: bool,
    /// How the supervisor learns how traced programs ended (with `trace_exec`);
    /// [`crate::trace::Exits::Pidfd`] needs [`crate::trace::Exits::pidfd_available`].
    /// The tracer must be served with the same.
    pub exits: crate::trace::Exits,
    /// Also send the path-based file calls (the open family, create, rename, link,
    /// remove, truncate: `vg_seccomp::TRACED_FILE_SYSCALLS`) to the supervisor, which
    /// records each as a [`crate::trace::TraceEvent::File`] and lets it run. Needs
    /// `trace_exec` (the same listener, and the execs name who accessed a file).
    pub trace_files: bool,
    /// Without `trace_files`, send only the file calls that change something
    /// (`vg_seccomp::ProfileOptions::trace_file_changes`): refused writes, creations
    /// and removals are seen while read-only opens cost nothing. Needs `trace_exec`.
    pub trace_file_changes: bool,
    /// Hand every refusal that would be a plain `EPERM` to the supervisor, which
    /// fails it with `EPERM` and reports it as a [`crate::trace::TraceEvent::Denied`].
    /// Needs `trace_exec`.
    pub report_refusals: bool,
    /// `RLIMIT_NPROC` for the sandbox user, counted within the sandbox's own user
    /// namespace (Linux 5.14+ keeps per-namespace counts): a process cap where no
    /// cgroup is available.
    pub rlimit_nproc: Option<u64>,
    /// Mount points inside the sandbox whose filling up is reported as a limit hit.
    pub watch_full: Vec<PathBuf>,
    /// Give the command a pseudo-terminal of the sandbox's own devpts as its stdio
    /// (the `stdio` passed to spawn is then not used); the supervisor gets the
    /// master from [`Sandbox::tty_master`].
    pub tty: bool,
    pub network: SandboxNetwork,
    /// No command of its own (`argv` is not used): init starts each command sent
    /// through [`crate::Sandbox::spawner`] until the sandbox is stopped.
    pub persistent: bool,
}

/// The sandbox's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxNetwork {
    /// A private network namespace with loopback only.
    #[default]
    Loopback,
    /// A private network namespace whose only way out is a TUN interface; the
    /// supervisor gets the other end from [`Sandbox::tun`] and decides what passes.
    Tun(TunConfig),
    /// The host's network namespace: no network isolation at all.
    Host,
}

/// How the sandbox's TUN interface is addressed. Everything not on loopback is
/// routed through `gateway` on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunConfig {
    pub name: &'static str,
    pub address: std::net::Ipv4Addr,
    pub netmask: std::net::Ipv4Addr,
    pub gateway: std::net::Ipv4Addr,
    pub mtu: u16,
}

impl SandboxNetwork {
    /// Whether the sandbox gets its own network namespace.
    pub fn private(self) -> bool {
        !matches!(self, Self::Host)
    }
}

/// The namespaces a sandbox with `network` gets, by name and clone flag.
pub fn namespaces(
    network: SandboxNetwork,
) -> impl Iterator<Item = &'static (&'static str, libc::c_int)> {
    NAMESPACES
        .iter()
        .filter(move |(_, flag)| *flag != libc::CLONE_NEWNET || network.private())
}

/// Tells init to send SIGTERM to every process in the sandbox (a timeout). Not a
/// forwarded signal, and processes inside cannot send it to init: the kernel drops
/// signals to a namespace's init that it has no handler for.
pub const TERMINATE_ALL: libc::c_int = libc::SIGPWR;

/// The command was found but cannot be executed, as a shell says it. The one
/// definition: init exits with it, and `vg_session::exit` lists it with the others.
pub const EXIT_CANNOT_EXECUTE: i32 = 126;

/// The command was not found, as a shell says it (see [`EXIT_CANNOT_EXECUTE`]).
pub const EXIT_NOT_FOUND: i32 = 127;

/// How the sandboxed command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    Exited(i32),
    Signalled(i32),
    /// `execve` failed with this errno.
    ExecFailed(i32),
}

impl Termination {
    /// The exit status Vectra Guard reports, shell-style.
    pub fn exit_code(self) -> i32 {
        match self {
            Self::Exited(code) => code,
            Self::Signalled(sig) => 128 + sig,
            Self::ExecFailed(libc::ENOENT | libc::ENOTDIR) => EXIT_NOT_FOUND,
            Self::ExecFailed(_) => EXIT_CANNOT_EXECUTE,
        }
    }
}
