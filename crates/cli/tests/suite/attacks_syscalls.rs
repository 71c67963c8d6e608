//! Attacks through system calls: terminal injection, mounts and namespaces, debugging
//! and kernel interfaces, unusual socket families. Each attempt is a precise
//! `syscall(2)` from python's ctypes, checked by errno. The arguments are valid, so
//! that without the sandbox most of these calls would succeed (or fail differently).
//!
//! x86_64 system call numbers.

use super::harness::{Workspace, each_identity, py, python};

/// Runs `body` (after the python prelude) and checks every `name=value` line it
/// reports against `expected`.
fn expect_errnos(body: &str, expected: &[(&str, &str)]) {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = python(runner, &ws, &py(body));
        out.assert_success();
        for (name, errno) in expected {
            assert_eq!(out.field(name), *errno, "{name}: unexpected result\n{out}");
        }
    });
}

#[test]
fn tiocsti_cannot_inject_terminal_input() {
    // With legacy_tiocsti=1 a process may push bytes into its controlling terminal's
    // input; the sandbox must refuse the ioctl whatever the sysctl says.
    expect_errnos(
        r#"
import fcntl, termios, tty, pty
TIOCSTI = 0x5412
check("stdin", lambda: attempt(lambda: fcntl.ioctl(0, TIOCSTI, b"x")))
def on_controlling_pty():
    # A child whose controlling terminal is a fresh pty, as an interactive shell's is.
    r, w = os.pipe()
    pid, master = pty.fork()
    if pid == 0:
        tty.setraw(0)  # so that an injected byte is readable at once
        c = ctypes.c_char(b"Q")
        res = [attempt(lambda: fcntl.ioctl(0, TIOCSTI, b"Q")),
               # The kernel reads the request as an unsigned int: high bits must
               # not get it past the filter.
               sc(16, 0, 0x100000000 | TIOCSTI, ctypes.byref(c)),
               attempt(lambda: fcntl.ioctl(0, termios.TIOCGWINSZ, b"\0" * 8))]
        os.set_blocking(0, False)
        res.append(attempt(lambda: os.read(0, 16)))
        os.write(w, " ".join(res).encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    return os.read(r, 200).decode().split()
res = on_controlling_pty()
for name, value in zip(["pty", "pty-high-bits", "control-winsize", "injected"], res):
    report(name, value)
"#,
        &[
            ("stdin", "EPERM"),
            ("pty", "EPERM"),
            ("pty-high-bits", "EPERM"),
            ("control-winsize", "OK"),
            ("injected", "EAGAIN"),
        ],
    );
}

#[test]
fn tioclinux_is_refused() {
    expect_errnos(
        r#"
import fcntl
TIOCLINUX = 0x541C
master, slave = os.openpty()
check("pty", lambda: attempt(lambda: fcntl.ioctl(slave, TIOCLINUX, b"\x02" + b"\0" * 12)))
check("stdin", lambda: attempt(lambda: fcntl.ioctl(0, TIOCLINUX, b"\x0c")))
"#,
        &[("pty", "EPERM"), ("stdin", "EPERM")],
    );
}

#[test]
fn mount_and_umount_are_refused() {
    expect_errnos(
        r#"
open("/tmp/before", "w").write("x")
check("mount", lambda: sc(165, b"none", b"/tmp", b"tmpfs", 0, None))
# As root of a user namespace of its own, a process could mount its own tmpfs.
def mount_in_own_namespace():
    sc(272, 0x10020000)  # unshare(CLONE_NEWUSER | CLONE_NEWNS)
    return sc(165, b"none", b"/tmp", b"tmpfs", 0, None)
check("mount in own namespace", mount_in_own_namespace)
check("umount2", lambda: sc(166, b"/tmp", 2))
check("pivot_root", lambda: sc(155, b"/tmp", b"/tmp"))
check("chroot", lambda: sc(161, b"/tmp"))
check("fsopen", lambda: sc(430, b"tmpfs", 0))
check("open_tree", lambda: sc(428, -100, b"/tmp", 1))
report("tmp-unchanged", os.path.exists("/tmp/before"))
"#,
        &[
            ("mount", "EPERM"),
            ("mount in own namespace", "EPERM"),
            ("umount2", "EPERM"),
            ("pivot_root", "EPERM"),
            ("chroot", "EPERM"),
            ("fsopen", "EPERM"),
            ("open_tree", "EPERM"),
            ("tmp-unchanged", "True"),
        ],
    );
}

#[test]
fn no_namespace_can_be_created_or_joined() {
    expect_errnos(
        r#"
USER = 0x10000000
flags = {"mnt": 0x00020000, "net": 0x40000000, "pid": 0x20000000, "ipc": 0x08000000,
         "uts": 0x04000000, "cgroup": 0x02000000, "time": 0x00000080}
check("unshare user", lambda: sc(272, USER))
for name, f in flags.items():
    check("unshare " + name, lambda: sc(272, f))
    # With a user namespace, an unprivileged process could create every other kind.
    check("unshare user+" + name, lambda: sc(272, USER | f))
def setns():
    sc(272, USER | flags["uts"])
    return sc(308, os.open("/proc/self/ns/uts", os.O_RDONLY), flags["uts"])
check("setns", setns)
def clone(flags):
    me = os.getpid()
    r = sc(56, flags | 17, 0, 0, 0, 0)  # SIGCHLD as exit signal: fork-like
    if os.getpid() != me:
        os._exit(0)  # the clone succeeded and this is its child
    return r
check("clone user", lambda: clone(USER))
for name in ["net", "mnt", "pid"]:
    check("clone user+" + name, lambda: clone(USER | flags[name]))
check("clone plain", lambda: clone(0))
"#,
        &[
            ("unshare user", "EPERM"),
            ("unshare mnt", "EPERM"),
            ("unshare user+mnt", "EPERM"),
            ("unshare net", "EPERM"),
            ("unshare user+net", "EPERM"),
            ("unshare pid", "EPERM"),
            ("unshare user+pid", "EPERM"),
            ("unshare ipc", "EPERM"),
            ("unshare user+ipc", "EPERM"),
            ("unshare uts", "EPERM"),
            ("unshare user+uts", "EPERM"),
            ("unshare cgroup", "EPERM"),
            ("unshare user+cgroup", "EPERM"),
            ("unshare time", "EPERM"),
            ("unshare user+time", "EPERM"),
            ("setns", "EPERM"),
            ("clone user", "EPERM"),
            ("clone user+net", "EPERM"),
            ("clone user+mnt", "EPERM"),
            ("clone user+pid", "EPERM"),
            ("clone plain", "OK"),
        ],
    );
}

#[test]
fn clone3_is_reported_as_unavailable() {
    // clone3 hides its flags in memory where seccomp cannot see them; ENOSYS makes
    // libcs fall back to clone, whose flags are checked.
    expect_errnos(
        r#"
args = (ctypes.c_uint64 * 11)()
args[0] = 0x10000000  # CLONE_NEWUSER
args[4] = 17          # exit_signal = SIGCHLD
def clone3():
    me = os.getpid()
    r = sc(435, ctypes.byref(args), 88)
    if os.getpid() != me:
        os._exit(0)
    return r
check("clone3 newuser", clone3)
check("clone3 null", lambda: sc(435, None, 0))
"#,
        &[("clone3 newuser", "ENOSYS"), ("clone3 null", "ENOSYS")],
    );
}

#[test]
fn ptrace_and_process_memory_access_are_refused() {
    expect_errnos(
        r#"
check("ptrace traceme", lambda: sc(101, 0, 0, 0, 0))
check("ptrace attach init", lambda: sc(101, 16, 1, 0, 0))
buf = ctypes.create_string_buffer(8)
local = (ctypes.c_uint64 * 2)(ctypes.addressof(buf), 8)
remote = (ctypes.c_uint64 * 2)(ctypes.addressof(buf), 8)
# The target is a child of ours: same user, so only the sandbox stands in the way.
import signal, time
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
check("ptrace attach child", lambda: sc(101, 16, child, 0, 0))
report("process_vm_readv", sc(310, child, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
report("kcmp", sc(312, os.getpid(), child, 0, 0, 0))
os.kill(child, signal.SIGKILL)
os.waitpid(child, 0)
"#,
        &[
            ("ptrace traceme", "EPERM"),
            ("ptrace attach init", "EPERM"),
            ("ptrace attach child", "EPERM"),
            ("process_vm_readv", "EPERM"),
            ("kcmp", "EPERM"),
        ],
    );
}

#[test]
fn kernel_attack_surface_syscalls_are_refused() {
    expect_errnos(
        r#"
# bpf(BPF_MAP_CREATE) of a small array map.
attr = (ctypes.c_uint32 * 30)()
attr[0], attr[1], attr[2], attr[3] = 2, 4, 4, 1
check("bpf", lambda: sc(321, 0, ctypes.byref(attr), 120))
params = (ctypes.c_uint8 * 120)()
check("io_uring_setup", lambda: sc(425, 4, ctypes.byref(params)))
# keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, create)
check("keyctl", lambda: sc(250, 0, -3, 1))
check("add_key", lambda: sc(248, b"user", b"vg-e2e", b"x", 1, -2))
check("request_key", lambda: sc(249, b"user", b"vg-e2e", None, -2))
# perf_event_open: software cpu-clock counter on ourselves, user space only.
pattr = (ctypes.c_uint8 * 128)()
ctypes.c_uint32.from_buffer(pattr, 0).value = 1      # PERF_TYPE_SOFTWARE
ctypes.c_uint32.from_buffer(pattr, 4).value = 128    # size
ctypes.c_uint64.from_buffer(pattr, 40).value = 1 | (1 << 5) | (1 << 6)  # disabled, exclude_kernel, exclude_hv
check("perf_event_open", lambda: sc(298, ctypes.byref(pattr), 0, -1, -1, 0))
check("userfaultfd", lambda: sc(323, 1))  # UFFD_USER_MODE_ONLY
check("personality READ_IMPLIES_EXEC", lambda: sc(135, 0x0400000))
check("personality query", lambda: sc(135, 0xffffffff))
check("init_module", lambda: sc(175, None, 0, b""))
check("open_by_handle_at", lambda: sc(304, -100, None, 0))
check("syslog", lambda: sc(103, 3, None, 0))
"#,
        &[
            ("bpf", "EPERM"),
            ("io_uring_setup", "EPERM"),
            ("keyctl", "EPERM"),
            ("add_key", "EPERM"),
            ("request_key", "EPERM"),
            ("perf_event_open", "EPERM"),
            ("userfaultfd", "EPERM"),
            ("personality READ_IMPLIES_EXEC", "EPERM"),
            ("personality query", "OK"),
            ("init_module", "EPERM"),
            ("open_by_handle_at", "EPERM"),
            ("syslog", "EPERM"),
        ],
    );
}

#[test]
fn raw_packet_and_exotic_sockets_are_refused() {
    expect_errnos(
        r#"
def sock(family, kind, proto=0):
    return isolated(lambda: attempt(lambda: socket.socket(family, kind, proto).close()))
report("inet raw", sock(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
# As root of its own user and network namespaces, a process could open raw sockets.
def raw_in_own_netns():
    sc(272, 0x50000000)  # unshare(CLONE_NEWUSER | CLONE_NEWNET)
    return attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close())
check("inet raw in own netns", raw_in_own_netns)
report("inet6 raw", sock(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6))
report("inet packet", sock(socket.AF_INET, 10))
report("packet", sock(17, socket.SOCK_RAW))
report("alg", sock(38, socket.SOCK_SEQPACKET))
report("vsock", sock(40, socket.SOCK_STREAM))
report("bluetooth", sock(31, socket.SOCK_STREAM))
report("control inet stream", sock(socket.AF_INET, socket.SOCK_STREAM))
report("control unix", sock(socket.AF_UNIX, socket.SOCK_STREAM))
"#,
        &[
            ("inet raw", "EPERM"),
            ("inet raw in own netns", "EPERM"),
            ("inet6 raw", "EPERM"),
            ("inet packet", "EPERM"),
            ("packet", "EAFNOSUPPORT"),
            ("alg", "EAFNOSUPPORT"),
            ("vsock", "EAFNOSUPPORT"),
            ("bluetooth", "EAFNOSUPPORT"),
            ("control inet stream", "OK"),
            ("control unix", "OK"),
        ],
    );
}
