//! The inspector on a TCP port, to try real clients against it without a sandbox:
//! each connection accepted is handed to the inspector as if the sandbox had looked up
//! NAME and connected to UPSTREAM.
//!
//! ```text
//! cargo run -p vg-http --example bridge -- 127.0.0.1:8443 api.test 127.0.0.1:9443 \
//!     upstream-ca.pem 'allow GET https://api.test:9443/**'
//! curl --cacert session-ca.pem --connect-to api.test:9443:127.0.0.1:8443 https://api.test:9443/
//! ```
//!
//! The session CA is written to `session-ca.pem` in the current folder; events are
//! printed on standard error. Runs until interrupted.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use vg_http::{Inspector, Options};
use vg_netstack::PolicyHandle;
use vg_netstack::intercept::{Intercepted, Interceptor};
use vg_policy::network::{HostName, NetworkPolicy, Rule, Scheme};

fn pump(mut from: impl Read, mut to: impl Write) {
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
}

fn bridge(tcp: TcpStream, ours: UnixStream) -> std::io::Result<()> {
    let (tcp2, ours2) = (tcp.try_clone()?, ours.try_clone()?);
    std::thread::spawn(move || {
        pump(&tcp2, &ours2);
        let _ = ours2.shutdown(std::net::Shutdown::Write);
    });
    pump(&ours, &tcp);
    tcp.shutdown(std::net::Shutdown::Write)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [listen, name, upstream, ca, rules @ ..] = args.as_slice() else {
        return Err("usage: bridge LISTEN NAME UPSTREAM UPSTREAM-CA.pem RULE...".into());
    };
    let upstream: SocketAddr = upstream.parse()?;
    let name = HostName::parse(name)?;
    let rules = rules
        .iter()
        .map(|r| Rule::parse_line(r))
        .collect::<Result<Vec<_>, _>>()?;
    let scheme = match rules.iter().find_map(|r| r.http.as_ref()) {
        Some(scope) => scope.scheme,
        None => Scheme::Https,
    };
    let roots = CertificateDer::pem_file_iter(ca)?.collect::<Result<Vec<_>, _>>()?;
    let inspector = Inspector::new(Options {
        policy: PolicyHandle::new(NetworkPolicy::new(rules, Vec::new())),
        extra_upstream_roots: roots,
        secrets: Vec::new(),
        events: Arc::new(|event| eprintln!("{event:?}")),
    })?;
    std::fs::write("session-ca.pem", inspector.ca_pem())?;
    let listener = TcpListener::bind(listen)?;
    eprintln!("listening on {listen}; session CA in session-ca.pem");
    for (connection, tcp) in (1..).zip(listener.incoming()) {
        let (ours, theirs) = UnixStream::pair()?;
        inspector.intercept(
            Intercepted {
                connection,
                name: Some(name.clone()),
                addr: upstream.ip(),
                port: upstream.port(),
                scheme,
            },
            theirs,
        );
        let tcp = tcp?;
        std::thread::spawn(move || bridge(tcp, ours));
    }
    Ok(())
}
