//! Bodies stream frame by frame, both ways.

use std::time::Duration;

use http_body_util::BodyExt;

use super::harness::*;

async fn setup() -> (Setup, Upstream, String) {
    let pki = Pki::new("Test Root");
    let upstream = Upstream::start(Some(pki.server_config(&[b"h2", b"http/1.1"]))).await;
    let port = upstream.addr.port();
    let setup = Setup::new(
        &[format!("allow * https://api.test:{port}/**")],
        vec![secret()],
        vec![pki.ca.clone()],
    );
    (setup, upstream, format!("api.test:{port}"))
}

/// A secret whose value starts like the test bodies (`abcdefgh…`), so that frame tails
/// are often held back and released: the scan is on for every test here.
fn secret() -> crate::Secret {
    const VALUE: &str = "abcdefghSECRET42";
    crate::Secret {
        name: "KEY".to_owned(),
        value: zeroize::Zeroizing::new(VALUE.to_owned()),
        placeholder: crate::placeholder_for(VALUE).unwrap(),
        hosts: vec![vg_policy::network::Target::Name(
            vg_policy::network::HostName::parse("api.test").unwrap(),
        )],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_upload_streams_through() {
    const TOTAL: u64 = 64 << 20;
    let (mut s, upstream, authority) = setup().await;
    let tls = s
        .tls(
            Some("api.test"),
            upstream.addr.port(),
            "api.test",
            &[b"http/1.1"],
        )
        .await
        .unwrap();
    let mut client = Client::new(tls, false).await;
    let req = request("PUT", &authority, "/upload", false)
        .body(Chunks::new(TOTAL, 1 << 20).boxed())
        .unwrap();
    let (status, _, body) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!((status.as_u16(), body.as_str()), (200, "ok PUT /upload"));
    let seen = upstream.seen().await;
    assert!(seen.complete);
    assert_eq!(seen.body_len, TOTAL);
    assert_eq!(seen.headers["transfer-encoding"], "chunked");
    assert!(seen.body.starts_with(b"abcdefghijklmnopabcd"));
    let ex = s.exchange().await;
    assert_eq!(ex.bytes_out, TOTAL);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_sent_events_are_not_held_back() {
    let (mut s, upstream, authority) = setup().await;
    for h2 in [false, true] {
        let alpn: &[&[u8]] = if h2 { &[b"h2"] } else { &[b"http/1.1"] };
        let tls = s
            .tls(Some("api.test"), upstream.addr.port(), "api.test", alpn)
            .await
            .unwrap();
        let mut client = Client::new(tls, h2).await;
        let req = request("GET", &authority, "/sse", h2)
            .body(empty())
            .unwrap();
        let response = client.send(req).await.unwrap();
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let mut body = response.into_body();
        // The upstream sends the second event only once the first was received here.
        let first = tokio::time::timeout(Duration::from_secs(10), body.frame())
            .await
            .expect("the first event was held back")
            .unwrap()
            .unwrap();
        assert_eq!(first.into_data().unwrap(), "data: one\n\n");
        upstream.sse_gate.notify_one();
        let rest = tokio::time::timeout(WAIT, body.collect())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(rest.to_bytes(), "data: two\n\n");
        let ex = s.exchange().await;
        assert_eq!(ex.bytes_in, 22);
        upstream.seen().await;
    }
}

/// Reads frames until `want` bytes came, within `limit`.
async fn read_at_least(body: &mut hyper::body::Incoming, want: usize, limit: Duration) -> Vec<u8> {
    let mut got = Vec::new();
    let _ = tokio::time::timeout(limit, async {
        while got.len() < want {
            match body.frame().await {
                Some(Ok(frame)) => got.extend_from_slice(&frame.into_data().unwrap()),
                _ => break,
            }
        }
    })
    .await;
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_that_may_start_a_secret_waits_only_as_long_as_it_must() {
    let (mut s, upstream, authority) = setup().await;
    let tls = s
        .tls(
            Some("api.test"),
            upstream.addr.port(),
            "api.test",
            &[b"http/1.1"],
        )
        .await
        .unwrap();
    let mut client = Client::new(tls, false).await;
    // "ab" may start the value "abcdefgh…": held, then released after a pause.
    let req = request("GET", &authority, "/sse?tail=ab", false)
        .body(empty())
        .unwrap();
    let mut body = client.send(req).await.unwrap().into_body();
    let first = read_at_least(&mut body, 8, Duration::from_secs(5)).await;
    assert_eq!(first, b"data: ab");
    upstream.sse_gate.notify_one();
    let rest = tokio::time::timeout(WAIT, body.collect())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rest.to_bytes(), "data: two\n\n");
    s.exchange().await;

    // "abcdefgh" is half the value: it waits for the next frame, which shows it is not.
    let req = request("GET", &authority, "/sse?tail=abcdefgh", false)
        .body(empty())
        .unwrap();
    let mut body = client.send(req).await.unwrap().into_body();
    let first = read_at_least(&mut body, 14, Duration::from_millis(500)).await;
    assert_eq!(first, b"data: ", "the possible start of the value is held");
    upstream.sse_gate.notify_one();
    let rest = tokio::time::timeout(WAIT, body.collect())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rest.to_bytes(), "abcdefghdata: two\n\n");
    assert_eq!(s.exchange().await.bytes_in, 14 + 11);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_streams_with_its_length() {
    const TOTAL: u64 = 32 << 20;
    let (mut s, upstream, authority) = setup().await;
    let tls = s
        .tls(Some("api.test"), upstream.addr.port(), "api.test", &[b"h2"])
        .await
        .unwrap();
    let mut client = Client::new(tls, true).await;
    let req = request("GET", &authority, &format!("/download/{TOTAL}"), true)
        .body(empty())
        .unwrap();
    let response = client.send(req).await.unwrap();
    assert_eq!(
        response.headers()["content-length"],
        TOTAL.to_string().as_str()
    );
    let mut body = response.into_body();
    let mut received = 0u64;
    let mut frames = 0;
    while let Some(frame) = body.frame().await {
        let data = frame.unwrap().into_data().unwrap();
        // The pattern continues across frames, held-back tails included.
        let offset = usize::try_from(received % 16).unwrap();
        for (i, b) in data.iter().enumerate() {
            assert_eq!(*b, b"abcdefghijklmnop"[(offset + i) % 16]);
        }
        received += data.len() as u64;
        frames += 1;
    }
    assert_eq!(received, TOTAL);
    assert!(frames > 1, "frame by frame");
    assert_eq!(s.exchange().await.bytes_in, TOTAL);
}

/// `got` is the value with at most its first two bytes let through and the rest turned
/// into the placeholder's.
pub(super) fn at_most_two_bytes_through(got: &[u8], value: &str, placeholder: &str) -> bool {
    (0..=2).any(|k| got == format!("{}{}", &value[..k], &placeholder[k..]).as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_dripped_byte_by_byte_is_still_masked() {
    const VALUE: &str = "abcdefghSECRET42";
    let placeholder = crate::placeholder_for(VALUE).unwrap();
    let pki = Pki::new("Test Root");
    let upstream = Upstream::start(Some(pki.server_config(&[b"h2", b"http/1.1"]))).await;
    let port = upstream.addr.port();
    let mut s = Setup::new(
        &[format!("allow GET https://api.test:{port}/**")],
        vec![crate::Secret {
            placeholder: placeholder.clone(),
            ..secret()
        }],
        vec![pki.ca.clone()],
    );
    let authority = format!("api.test:{port}");
    for h2 in [false, true] {
        let alpn: &[&[u8]] = if h2 { &[b"h2"] } else { &[b"http/1.1"] };
        let tls = s
            .tls(Some("api.test"), port, "api.test", alpn)
            .await
            .unwrap();
        let mut client = Client::new(tls, h2).await;
        // One byte every 50 ms: each pause is longer than the inspector waits before it
        // releases a short held tail.
        let req = request("GET", &authority, &format!("/drip?v={VALUE}"), h2)
            .body(empty())
            .unwrap();
        let (status, _, body) = read_text(client.send(req).await.unwrap()).await;
        assert_eq!(status.as_u16(), 200);
        assert!(!body.contains(VALUE), "the whole value came through");
        assert!(
            at_most_two_bytes_through(body.as_bytes(), VALUE, &placeholder),
            "{body:?} (placeholder {placeholder})"
        );
        upstream.seen().await;
        assert_eq!(s.exchange().await.bytes_in, VALUE.len() as u64);
    }
}
