//! Attacks through the network: the host's loopback services, its abstract and
//! path-based unix sockets. The default network mode is loopback only, in a network
//! namespace of the sandbox's own.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};

use super::harness::{TempDir, Workspace, each_identity, py, python, unique};

/// Python that connects to `target` (an expression) with `family` and reports the
/// outcome as `connect=...`.
fn connect_script(family: &str, target: &str) -> String {
    py(&format!(
        r#"
s = socket.socket({family}, socket.SOCK_STREAM)
s.settimeout(3)
def go():
    s.connect({target})
    s.sendall(b"vg-e2e-hello")
report("connect", attempt(go))
"#
    ))
}

#[test]
fn tcp_listener_on_the_host_loopback_is_unreachable() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let out = python(
            runner,
            &ws,
            &connect_script("socket.AF_INET", &format!("(\"127.0.0.1\", {port})")),
        );
        out.assert_success();
        assert_ne!(
            out.field("connect"),
            "OK",
            "the sandbox reached the host's loopback\n{out}"
        );
        match listener.accept() {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Ok((_, peer)) => panic!("the host listener accepted a connection from {peer}\n{out}"),
            Err(e) => panic!("accept: {e}"),
        }
    });
}

#[test]
fn abstract_unix_socket_on_the_host_is_unreachable() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let name = format!("vg-e2e-abstract-{}", unique());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixListener::bind_addr(&addr).unwrap();
        listener.set_nonblocking(true).unwrap();
        let out = python(
            runner,
            &ws,
            &connect_script("socket.AF_UNIX", &format!("\"\\0{name}\"")),
        );
        out.assert_success();
        assert_ne!(
            out.field("connect"),
            "OK",
            "the sandbox reached a host abstract socket\n{out}"
        );
        match listener.accept() {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Ok(_) => panic!("the host abstract socket accepted a connection\n{out}"),
            Err(e) => panic!("accept: {e}"),
        }
    });
}

#[test]
fn unix_socket_file_outside_the_workspace_is_unreachable() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let dir = TempDir::new("sock");
        let path = dir.join("agent.sock");
        let listener = UnixListener::bind(&path).unwrap();
        listener.set_nonblocking(true).unwrap();
        if super::harness::is_root() {
            // Let the test user reach it on the host, as their own agent socket would be.
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o777))
                .unwrap();
        }
        let out = python(
            runner,
            &ws,
            &connect_script(
                "socket.AF_UNIX",
                &format!("{:?}", path.display().to_string()),
            ),
        );
        out.assert_success();
        assert_ne!(
            out.field("connect"),
            "OK",
            "the sandbox reached a host unix socket\n{out}"
        );
        assert!(
            matches!(listener.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock),
            "{out}"
        );
    });
}

/// "none" means loopback only: programs in the sandbox can still talk to each other
/// over 127.0.0.1 (test servers, language servers, databases started by the script).
#[test]
fn loopback_works_inside_the_sandbox() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = python(
            runner,
            &ws,
            &py(r#"
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.bind(("127.0.0.1", 0)); srv.listen(1)
c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
c.settimeout(3)
report("tcp", attempt(lambda: c.connect(srv.getsockname())))
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("127.0.0.1", 0))
report("udp", attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", u.getsockname())))
"#),
        );
        out.assert_success();
        assert_eq!(
            out.field("tcp"),
            "OK",
            "TCP over the sandbox's loopback fails\n{out}"
        );
        assert_eq!(
            out.field("udp"),
            "OK",
            "UDP over the sandbox's loopback fails\n{out}"
        );
    });
}

#[test]
fn only_the_loopback_interface_exists() {
    each_identity(|runner| {
        let ws = Workspace::new();
        let out = python(
            runner,
            &ws,
            &py("report('ifaces', ' '.join(sorted(n for _, n in socket.if_nameindex())))"),
        );
        out.assert_success();
        assert_eq!(out.field("ifaces"), "lo", "{out}");
    });
}
