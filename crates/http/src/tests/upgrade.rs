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
