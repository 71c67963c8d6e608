//! The sandbox's TLS: the session CA's leaves, and the SNI check.

use rustls::RootCertStore;
use vg_policy::network::Scheme;

use super::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sni_must_be_the_connections_name() {
    let mut s = Setup::new(
        &["allow GET https://api.test/**".to_owned()],
        Vec::new(),
        Vec::new(),
    );
    let err = s
        .tls(Some("api.test"), 443, "evil.test", &[])
        .await
        .unwrap_err();
    assert!(!err.to_string().is_empty());
    let failure = s.tls_failure().await;
    assert_eq!(failure.sni.as_deref(), Some("evil.test"));
    assert_eq!((failure.host.as_str(), failure.port), ("api.test", 443));
    assert!(
        failure.error.contains("'evil.test'") && failure.error.contains("'api.test'"),
        "{}",
        failure.error
    );
    // The right name passes, and its leaf verifies with the session CA.
    let tls = s.tls(Some("api.test"), 443, "api.test", &[]).await.unwrap();
    drop(tls);
    assert!(s.no_more_events().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_rejects_our_certificate_is_recorded() {
    let mut s = Setup::new(
        &["allow GET https://api.test/**".to_owned()],
        Vec::new(),
        Vec::new(),
    );
    let stream = s.connect(Some("api.test"), 443, Scheme::Https);
    // This client trusts another CA only.
    let mut roots = RootCertStore::empty();
    roots.add(Pki::new("Someone Else").ca.clone()).unwrap();
    let err = tls_client(stream, roots, "api.test", &[])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("UnknownIssuer"), "{err}");
    let failure = s.tls_failure().await;
    assert_eq!(failure.sni.as_deref(), Some("api.test"));
    assert!(failure.error.contains("alert"), "{}", failure.error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_without_a_name_is_certified_for_its_address() {
    let mut s = Setup::new(
        &["allow GET https://127.0.0.1/**".to_owned()],
        Vec::new(),
        Vec::new(),
    );
    // rustls sends no SNI for an address: the leaf names the address.
    let tls = s.tls(None, 443, "127.0.0.1", &[]).await.unwrap();
    let certs = tls.get_ref().1.peer_certificates().unwrap();
    assert_eq!(certs.len(), 2);
    drop(tls);
    let err = s.tls(None, 443, "api.test", &[]).await.unwrap_err();
    assert!(!err.to_string().is_empty());
    let failure = s.tls_failure().await;
    assert_eq!(failure.host, "127.0.0.1");
    assert!(
        failure.error.contains("without a name"),
        "{}",
        failure.error
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_bytes_on_an_https_connection_are_a_tls_failure() {
    use tokio::io::AsyncWriteExt;
    let mut s = Setup::new(
        &["allow GET https://api.test/**".to_owned()],
        Vec::new(),
        Vec::new(),
    );
    let mut stream = s.connect(Some("api.test"), 443, Scheme::Https);
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: api.test\r\n\r\n")
        .await
        .unwrap();
    let failure = s.tls_failure().await;
    assert_eq!(failure.sni, None);
    assert!(failure.error.contains("ClientHello"), "{}", failure.error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_cuts_and_refuses_connections() {
    use tokio::io::AsyncReadExt;
    let mut s = Setup::new(
        &["allow GET https://api.test/**".to_owned()],
        Vec::new(),
        Vec::new(),
    );
    let open = s.connect(Some("api.test"), 443, Scheme::Https);
    // Give the runtime a moment to take the connection.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    s.inspector.shutdown();
    s.inspector.shutdown();
    let mut later = s.connect(Some("api.test"), 443, Scheme::Https);
    let mut buf = [0u8; 8];
    let read = tokio::time::timeout(WAIT, later.read(&mut buf))
        .await
        .unwrap();
    assert_eq!(read.unwrap(), 0, "closed at once");
    let mut open = open;
    let read = tokio::time::timeout(WAIT, open.read(&mut buf))
        .await
        .unwrap();
    assert!(matches!(read, Ok(0) | Err(_)), "cut");
}
