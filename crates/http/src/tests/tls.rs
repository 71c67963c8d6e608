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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_for_every_task_and_lets_go_of_the_events_callback() {
    use http_body_util::BodyExt;
    let pki = Pki::new("Test Root");
    let upstream = Upstream::start(Some(pki.server_config(&[b"h2", b"http/1.1"]))).await;
    let port = upstream.addr.port();
    let mut s = Setup::new(
        &[format!("allow GET https://api.test:{port}/**")],
        Vec::new(),
        vec![pki.ca.clone()],
    );
    // A response still streaming (the upstream holds its second event), on each of
    // HTTP/1.1 and HTTP/2.
    let mut bodies = Vec::new();
    for h2 in [false, true] {
        let alpn: &[&[u8]] = if h2 { &[b"h2"] } else { &[b"http/1.1"] };
        let tls = s
            .tls(Some("api.test"), port, "api.test", alpn)
            .await
            .unwrap();
        let mut client = Client::new(tls, h2).await;
        let req = request("GET", &format!("api.test:{port}"), "/sse", h2)
            .body(empty())
            .unwrap();
        let mut body = client.send(req).await.unwrap().into_body();
        let first = tokio::time::timeout(WAIT, body.frame()).await.unwrap();
        assert_eq!(
            first.unwrap().unwrap().into_data().unwrap(),
            "data: one\n\n"
        );
        bodies.push((client, body));
        upstream.seen().await;
    }
    let (events, closed) = s.events_so_far();
    assert!(events.is_empty() && !closed);

    let started = std::time::Instant::now();
    s.inspector.shutdown();
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
    // Both cut requests were reported before it returned, and the callback is gone.
    let (events, closed) = s.events_so_far();
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        events
            .iter()
            .all(|e| matches!(e, crate::HttpEvent::Exchange(ex) if ex.path == "/sse"))
    );
    assert!(closed, "a task still holds the events callback");
    for (_client, body) in bodies {
        let rest = tokio::time::timeout(WAIT, body.collect()).await.unwrap();
        assert!(rest.is_err(), "the response was cut");
    }
    // Later connections are refused without an event.
    drop(s.connect(Some("api.test"), port, Scheme::Https));
    assert!(s.events_so_far().0.is_empty());
}

/// Every byte is encrypted twice: the cheaper AES-128-GCM comes first, and our side
/// chooses by its own order whatever the client prefers.
#[test]
fn aes_128_gcm_is_preferred_on_both_sides() {
    let provider = crate::crypto_provider();
    assert_eq!(
        provider.cipher_suites[0].suite(),
        rustls::CipherSuite::TLS13_AES_128_GCM_SHA256
    );
    assert_eq!(
        provider.cipher_suites.len(),
        rustls::crypto::ring::default_provider().cipher_suites.len(),
        "reordered, none dropped"
    );
}

/// Red team (second pass): a request whose head trickles in never completing held one
/// of the session's 256 connections for ever. Its head now has `HEADER_TIMEOUT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_head_that_never_completes_is_cut() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = Setup::new(
        &["allow GET https://api.test/**".to_owned()],
        Vec::new(),
        Vec::new(),
    );
    let mut tls = s
        .tls(Some("api.test"), 443, "api.test", &[b"http/1.1"])
        .await
        .unwrap();
    tls.write_all(b"GET /x HTTP/1.1\r\nHost: api.test\r\n")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(
        crate::server::HEADER_TIMEOUT * 5,
        tls.read_to_end(&mut rest),
    )
    .await;
    assert!(read.is_ok(), "still open after {:?}", started.elapsed());
    assert!(started.elapsed() >= crate::server::HEADER_TIMEOUT / 2);
}
