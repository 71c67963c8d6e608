//! Upstream failures: each a 502 that names the problem, and recorded.

use std::path::PathBuf;

use super::harness::*;

async fn get_through(s: &mut Setup, port: u16) -> (u16, String) {
    let tls = s
        .tls(Some("api.test"), port, "api.test", &[b"http/1.1"])
        .await
        .unwrap();
    let mut client = Client::new(tls, false).await;
    let req = request("GET", &format!("api.test:{port}"), "/x", false)
        .body(empty())
        .unwrap();
    let (status, _, body) = read_text(client.send(req).await.unwrap()).await;
    (status.as_u16(), body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_certificate_from_an_unknown_ca_is_a_502() {
    let trusted = Pki::new("Trusted Root");
    let unknown = Pki::new("Unknown Root");
    let upstream = Upstream::start(Some(unknown.server_config(&[b"http/1.1"]))).await;
    let port = upstream.addr.port();
    let mut s = Setup::new(
        &[format!("allow GET https://api.test:{port}/**")],
        Vec::new(),
        vec![trusted.ca.clone()],
    );
    let (status, body) = get_through(&mut s, port).await;
    assert_eq!(status, 502);
    assert!(
        body.starts_with("vectraguard: could not forward GET https://api.test:"),
        "{body}"
    );
    assert!(body.contains("UnknownIssuer"), "{body}");
    let ex = s.exchange().await;
    assert_eq!((ex.decision, ex.status), ("allow", Some(502)));
    assert!(
        ex.error
            .unwrap()
            .contains("TLS handshake with upstream api.test")
    );
    assert!(upstream.nothing_seen());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_upstream_is_a_502() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut s = Setup::new(
        &[format!("allow GET https://api.test:{port}/**")],
        Vec::new(),
        Vec::new(),
    );
    let (status, body) = get_through(&mut s, port).await;
    assert_eq!(status, 502);
    assert!(
        body.contains("could not connect to upstream api.test"),
        "{body}"
    );
    let ex = s.exchange().await;
    assert!(ex.error.unwrap().to_lowercase().contains("refused"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_to_trust_fails_closed() {
    let pki = Pki::new("Test Root");
    let upstream = Upstream::start(Some(pki.server_config(&[b"http/1.1"]))).await;
    let port = upstream.addr.port();
    let mut s = Setup::with_bundles(
        &[format!("allow GET https://api.test:{port}/**")],
        Vec::new(),
        Vec::new(),
        vec![PathBuf::from("/nonexistent/vg-http-test/bundle.pem")],
    );
    let (status, body) = get_through(&mut s, port).await;
    assert_eq!(status, 502);
    assert!(body.contains("no trusted root certificates"), "{body}");
    assert!(body.contains("--upstream-ca"), "{body}");
    assert!(s.exchange().await.error.unwrap().contains("bundle.pem"));
    assert!(upstream.nothing_seen());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_alive_connection_the_server_closed_is_replaced() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // Answers one request per connection, saying keep-alive, then closes.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = std::sync::Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let n = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    let Ok(read) = tcp.read(&mut buf).await else {
                        return;
                    };
                    if read == 0 {
                        return;
                    }
                    got.extend_from_slice(&buf[..read]);
                }
                let body = format!("conn {n}");
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: keep-alive\r\n\r\n{body}",
                    body.len()
                );
                let _ = tcp.write_all(reply.as_bytes()).await;
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            });
        }
    });
    let mut s = Setup::new(
        &[format!("allow GET http://api.test:{port}/**")],
        Vec::new(),
        Vec::new(),
    );
    let stream = s.connect(Some("api.test"), port, vg_policy::network::Scheme::Http);
    let mut client = Client::new(stream, false).await;
    for i in 0..3 {
        let req = request("GET", &format!("api.test:{port}"), "/x", false)
            .body(empty())
            .unwrap();
        let (status, _, body) = read_text(client.send(req).await.unwrap()).await;
        assert_eq!((status.as_u16(), body), (200, format!("conn {i}")));
        assert_eq!(s.exchange().await.status, Some(200));
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_http2_streams_share_a_bounded_number_of_upstream_connections() {
    // An HTTP/1.1-only upstream: each request open at once needs a connection.
    let pki = Pki::new("Test Root");
    let upstream = Upstream::start(Some(pki.server_config(&[b"http/1.1"]))).await;
    let port = upstream.addr.port();
    let authority = format!("api.test:{port}");
    let mut s = Setup::new(
        &[format!("allow GET https://api.test:{port}/**")],
        Vec::new(),
        vec![pki.ca.clone()],
    );
    let tls = s
        .tls(Some("api.test"), port, "api.test", &[b"h2"])
        .await
        .unwrap();
    let client = Client::new(tls, true).await;
    // A first request, by which the client has the server's SETTINGS (its limit of
    // streams, 32: more at once before then would be refused).
    let mut first = client.fork();
    let req = request("GET", &authority, "/x", true)
        .body(empty())
        .unwrap();
    assert_eq!(
        read_text(first.send(req).await.unwrap()).await.0.as_u16(),
        200
    );
    s.exchange().await;
    upstream.seen().await;
    // 48 requests at once, each held 300 ms by the upstream.
    let mut requests = tokio::task::JoinSet::new();
    for _ in 0..48 {
        let mut client = client.fork();
        let authority = authority.clone();
        requests.spawn(async move {
            let req = request("GET", &authority, "/slow", true)
                .body(empty())
                .unwrap();
            read_text(client.send(req).await.unwrap()).await
        });
    }
    while let Some(done) = requests.join_next().await {
        let (status, _, body) = done.unwrap();
        assert_eq!((status.as_u16(), body.as_str()), (200, "ok"));
    }
    for _ in 0..48 {
        assert_eq!(s.exchange().await.status, Some(200));
    }
    let max = upstream.max_open.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        (2..=crate::MAX_UPSTREAM_PER_CONNECTION).contains(&max),
        "{max} upstream connections were open at once"
    );
}
