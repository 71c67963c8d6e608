//! Upgrades (WebSocket): relayed both ways once allowed.

use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use vg_policy::network::{HostName, Target};
use zeroize::Zeroizing;

use super::harness::*;
use crate::{Secret, placeholder_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_is_relayed_both_ways_with_values_masked() {
    const VALUE: &str = "ws-Secret-Value-123";
    let placeholder = placeholder_for(VALUE).unwrap();
    let pki = Pki::new("Test Root");
    let upstream = Upstream::start(Some(pki.server_config(&[b"h2", b"http/1.1"]))).await;
    let port = upstream.addr.port();
    let mut s = Setup::new(
        &[format!("allow GET https://api.test:{port}/ws")],
        vec![Secret {
            name: "WS".to_owned(),
            value: Zeroizing::new(VALUE.to_owned()),
            placeholder: placeholder.clone(),
            hosts: vec![Target::Name(HostName::parse("api.test").unwrap())],
        }],
        vec![pki.ca.clone()],
    );
    let tls = s
        .tls(Some("api.test"), port, "api.test", &[b"h2", b"http/1.1"])
        .await
        .unwrap();
    // A client that wants to upgrade offers HTTP/1.1 only... this one offered h2 too and
    // got it; upgrades need HTTP/1.1, so open another connection.
    drop(tls);
    let tls = s
        .tls(Some("api.test"), port, "api.test", &[b"http/1.1"])
        .await
        .unwrap();
    let mut client = Client::new(tls, false).await;
    let req = request(
        "GET",
        &format!("api.test:{port}"),
        &format!("/ws?secret={VALUE}"),
        false,
    )
    .header("connection", "Upgrade")
    .header("upgrade", "websocket")
    .header("sec-websocket-version", "13")
    .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
    .header("sec-websocket-extensions", "permessage-deflate")
    .header("authorization", format!("Bearer {placeholder}"))
    .body(empty())
    .unwrap();
    // The query carries the value, which the rules allow (the sandbox could not know it;
    // this only makes the upstream send it back through the tunnel).
    let mut response = client.send(req).await.unwrap();
    assert_eq!(response.status().as_u16(), 101);
    assert_eq!(response.headers()["upgrade"], "websocket");
    let seen = upstream.seen().await;
    assert_eq!(seen.headers["upgrade"], "websocket");
    assert_eq!(seen.headers["connection"], "upgrade");
    assert_eq!(
        seen.headers["authorization"],
        format!("Bearer {VALUE}").as_str()
    );
    assert!(seen.headers.get("sec-websocket-extensions").is_none());
    let upgraded = hyper::upgrade::on(&mut response).await.unwrap();
    let mut io = TokioIo::new(upgraded);
    let mut got = vec![0u8; VALUE.len()];
    tokio::time::timeout(WAIT, io.read_exact(&mut got))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        got,
        placeholder.as_bytes(),
        "the value came back as the placeholder"
    );
    io.write_all(b"hello").await.unwrap();
    let mut reply = vec![0u8; "echo: hello".len()];
    tokio::time::timeout(WAIT, io.read_exact(&mut reply))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reply, b"echo: hello");
    drop(io);
    let ex = s.exchange().await;
    assert_eq!(ex.status, Some(101));
    assert_eq!(ex.secrets, ["WS"]);
    assert_eq!(ex.bytes_out, 5);
    assert_eq!(ex.bytes_in, (VALUE.len() + "echo: hello".len()) as u64);
    assert_eq!(ex.path, "/ws?secret=REDACTED");
}

/// An inspector allowing GET and POST on api.test, with secret WS, and its upstream.
async fn ws_setup(value: &str) -> (Setup, Upstream, String) {
    let placeholder = placeholder_for(value).unwrap();
    let pki = Pki::new("Test Root");
    let upstream = Upstream::start(Some(pki.server_config(&[b"http/1.1"]))).await;
    let port = upstream.addr.port();
    let s = Setup::new(
        &[format!("allow GET,POST https://api.test:{port}/**")],
        vec![Secret {
            name: "WS".to_owned(),
            value: Zeroizing::new(value.to_owned()),
            placeholder: placeholder.clone(),
            hosts: vec![Target::Name(HostName::parse("api.test").unwrap())],
        }],
        vec![pki.ca.clone()],
    );
    (s, upstream, placeholder)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_dripped_into_a_websocket_is_still_masked() {
    const VALUE: &str = "ws-Secret-Value-123";
    let (mut s, upstream, placeholder) = ws_setup(VALUE).await;
    let port = upstream.addr.port();
    let tls = s
        .tls(Some("api.test"), port, "api.test", &[b"http/1.1"])
        .await
        .unwrap();
    let mut client = Client::new(tls, false).await;
    let req = request(
        "GET",
        &format!("api.test:{port}"),
        &format!("/ws?drip={VALUE}"),
        false,
    )
    .header("connection", "Upgrade")
    .header("upgrade", "websocket")
    .header("sec-websocket-version", "13")
    .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
    .body(empty())
    .unwrap();
    let mut response = client.send(req).await.unwrap();
    assert_eq!(response.status().as_u16(), 101);
    let mut io = TokioIo::new(hyper::upgrade::on(&mut response).await.unwrap());
    let mut got = vec![0u8; VALUE.len()];
    tokio::time::timeout(WAIT, io.read_exact(&mut got))
        .await
        .unwrap()
        .unwrap();
    assert!(
        super::streaming::at_most_two_bytes_through(&got, VALUE, &placeholder),
        "{:?} (placeholder {placeholder})",
        String::from_utf8_lossy(&got)
    );
    drop(io);
    upstream.seen().await;
    assert_eq!(s.exchange().await.status, Some(101));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrades_other_than_websocket_are_refused() {
    let (mut s, upstream, _) = ws_setup("ws-Secret-Value-123").await;
    let port = upstream.addr.port();
    let authority = format!("api.test:{port}");
    let tls = s
        .tls(Some("api.test"), port, "api.test", &[b"http/1.1"])
        .await
        .unwrap();
    let mut client = Client::new(tls, false).await;
    let websocket = |method: &str| {
        request(method, &authority, "/ws", false)
            .header("connection", "Upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-version", "13")
    };
    let cases = [
        (
            request("GET", &authority, "/x", false)
                .header("connection", "Upgrade, HTTP2-Settings")
                .header("upgrade", "h2c")
                .header("http2-settings", "AAMAAABkAAQCAAAAAAIAAAAA"),
            "'h2c'",
        ),
        (
            request("GET", &authority, "/x", false)
                .header("connection", "upgrade")
                .header("upgrade", "TLS/1.2"),
            "'tls/1.2'",
        ),
        (
            request("GET", &authority, "/x", false)
                .header("connection", "upgrade")
                .header("upgrade", "websocket, h2c"),
            "'websocket, h2c'",
        ),
        (
            websocket("POST").header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
            "must be a GET",
        ),
        (websocket("GET"), "Sec-WebSocket-Key"),
    ];
    for (req, why) in cases {
        let (status, _, body) =
            read_text(client.send(req.body(empty()).unwrap()).await.unwrap()).await;
        assert_eq!(status.as_u16(), 403, "{body}");
        assert!(body.contains(why), "{body}");
        let ex = s.exchange().await;
        assert_eq!(
            (ex.decision, ex.reason.as_str(), ex.status),
            ("deny", "upgrade not allowed", Some(403))
        );
    }
    assert!(upstream.nothing_seen());
    assert_eq!(
        upstream.accepted.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
    // An Upgrade header without `Connection: upgrade` asks for nothing: it is dropped.
    let req = request("GET", &authority, "/x", false)
        .header("upgrade", "h2c")
        .body(empty())
        .unwrap();
    let (status, _, _) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!(status.as_u16(), 200);
    assert!(upstream.seen().await.headers.get("upgrade").is_none());
    s.exchange().await;
}
