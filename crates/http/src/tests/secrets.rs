//! Secrets: injected for their hosts, refused elsewhere, never let back in.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use vg_policy::network::{HostName, Target};
use zeroize::Zeroizing;

use super::harness::*;
use crate::{Secret, placeholder_for};

const VALUE: &str = "sk-live-Q3v9XkP0a7LmZ2";
const PASSWORD: &str = "hunter2-Correct-Horse";

fn secret(name: &str, value: &str, host: &str) -> (Secret, String) {
    let placeholder = placeholder_for(value).unwrap();
    let secret = Secret {
        name: name.to_owned(),
        value: Zeroizing::new(value.to_owned()),
        placeholder: placeholder.clone(),
        hosts: vec![Target::Name(HostName::parse(host).unwrap())],
    };
    (secret, placeholder)
}

/// API_KEY for api.test, PASSWORD for other.test; GET and POST allowed on both.
async fn setup() -> (Setup, Upstream, String, String) {
    let pki = Pki::new("Test Root");
    let upstream = Upstream::start(Some(pki.server_config(&[b"h2", b"http/1.1"]))).await;
    let port = upstream.addr.port();
    let (key, key_placeholder) = secret("API_KEY", VALUE, "api.test");
    let (pass, pass_placeholder) = secret("PASSWORD", PASSWORD, "other.test");
    let setup = Setup::new(
        &[
            format!("allow GET,POST https://api.test:{port}/**"),
            format!("allow GET,POST https://other.test:{port}/**"),
        ],
        vec![key, pass],
        vec![pki.ca.clone()],
    );
    (setup, upstream, key_placeholder, pass_placeholder)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_secrets_are_injected_and_echoed_values_masked() {
    let (mut s, upstream, key, _) = setup().await;
    let port = upstream.addr.port();
    let authority = format!("api.test:{port}");
    for h2 in [false, true] {
        let alpn: &[&[u8]] = if h2 { &[b"h2"] } else { &[b"http/1.1"] };
        let tls = s
            .tls(Some("api.test"), port, "api.test", alpn)
            .await
            .unwrap();
        let mut client = Client::new(tls, h2).await;
        let req = request("GET", &authority, "/echo", h2)
            .header("authorization", format!("Bearer {key}"))
            .body(empty())
            .unwrap();
        let (status, headers, body) = read_text(client.send(req).await.unwrap()).await;
        assert_eq!(status.as_u16(), 200);
        let seen = upstream.seen().await;
        assert_eq!(
            seen.headers["authorization"],
            format!("Bearer {VALUE}").as_str()
        );
        // The upstream echoed the value; the sandbox gets the placeholder.
        assert_eq!(body, format!("Bearer {key}\n"));
        assert_eq!(headers["x-echo"], format!("Bearer {key}").as_str());
        assert!(!body.contains(VALUE));
        let ex = s.exchange().await;
        assert_eq!(ex.secrets, ["API_KEY"]);
        assert_eq!(ex.exfiltration, None);
        assert!(!format!("{ex:?}").contains(VALUE));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_credentials_carry_the_secret() {
    let (mut s, upstream, _, pass) = setup().await;
    let port = upstream.addr.port();
    let tls = s
        .tls(Some("other.test"), port, "other.test", &[b"http/1.1"])
        .await
        .unwrap();
    let mut client = Client::new(tls, false).await;
    let req = request("GET", &format!("other.test:{port}"), "/echo", false)
        .header(
            "authorization",
            format!("Basic {}", STANDARD.encode(format!("me:{pass}"))),
        )
        .body(empty())
        .unwrap();
    let (status, _, body) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!(status.as_u16(), 200);
    let seen = upstream.seen().await;
    let sent = seen.headers["authorization"].to_str().unwrap().to_owned();
    let decoded = STANDARD
        .decode(sent.strip_prefix("Basic ").unwrap())
        .unwrap();
    assert_eq!(decoded, format!("me:{PASSWORD}").as_bytes());
    // The echo is of the encoded form: with "me:" before it, the value's groups are
    // whole, and all come back as the placeholder's.
    assert_eq!(
        body,
        format!("Basic {}\n", STANDARD.encode(format!("me:{pass}")))
    );
    assert_eq!(s.exchange().await.secrets, ["PASSWORD"]);
}

/// `decoded` is `prefix` and the placeholder in place of the value, but for at most
/// two bytes of the value at each end (those sharing a base64 group with other bytes).
fn masked_but_for_the_ends(decoded: &[u8], prefix: &str, value: &str, placeholder: &str) -> bool {
    let n = value.len();
    (0..=2).any(|k1| {
        (0..=2).any(|k2| {
            let want = format!(
                "{prefix}{}{}{}",
                &value[..k1],
                &placeholder[k1..n - k2],
                &value[n - k2..]
            );
            decoded == want.as_bytes()
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base64_echoes_of_basic_credentials_are_masked_at_any_alignment() {
    let (mut s, upstream, key, _) = setup().await;
    let port = upstream.addr.port();
    let tls = s
        .tls(Some("api.test"), port, "api.test", &[b"http/1.1"])
        .await
        .unwrap();
    let mut client = Client::new(tls, false).await;
    // The sandbox chooses the user, hence where the value falls in base64 groups.
    for user in ["", "u", "us", "use", "user"] {
        let req = request("GET", &format!("api.test:{port}"), "/echo", false)
            .header(
                "authorization",
                format!("Basic {}", STANDARD.encode(format!("{user}:{key}"))),
            )
            .body(empty())
            .unwrap();
        let (status, headers, body) = read_text(client.send(req).await.unwrap()).await;
        assert_eq!(status.as_u16(), 200);
        let seen = upstream.seen().await;
        let sent = seen.headers["authorization"].to_str().unwrap().to_owned();
        assert_eq!(
            STANDARD
                .decode(sent.strip_prefix("Basic ").unwrap())
                .unwrap(),
            format!("{user}:{VALUE}").as_bytes()
        );
        let prefix = format!("{user}:");
        for echoed in [headers["x-echo"].to_str().unwrap(), body.trim_end()] {
            let encoded = echoed.strip_prefix("Basic ").unwrap();
            assert_ne!(
                encoded,
                sent.strip_prefix("Basic ").unwrap(),
                "user {user:?}"
            );
            let decoded = STANDARD.decode(encoded).unwrap();
            assert!(
                masked_but_for_the_ends(&decoded, &prefix, VALUE, &key),
                "user {user:?}: {}",
                String::from_utf8_lossy(&decoded)
            );
        }
        assert_eq!(s.exchange().await.secrets, ["API_KEY"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_echoed_value_never_reaches_the_status_line() {
    let (mut s, upstream, key, _) = setup().await;
    let port = upstream.addr.port();
    let tls = s
        .tls(Some("api.test"), port, "api.test", &[b"http/1.1"])
        .await
        .unwrap();
    let mut client = Client::new(tls, false).await;
    // The upstream puts the Authorization it got in its reason phrase.
    let req = request("GET", &format!("api.test:{port}"), "/reason", false)
        .header("authorization", format!("Bearer {key}"))
        .body(empty())
        .unwrap();
    let response = client.send(req).await.unwrap();
    let reason = response
        .extensions()
        .get::<hyper::ext::ReasonPhrase>()
        .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned());
    assert_eq!(response.status().as_u16(), 200);
    assert!(
        !reason.as_deref().unwrap_or_default().contains(VALUE),
        "the value leaked in the status line"
    );
    assert_eq!(reason, None, "the canonical reason phrase is sent");
    let (_, _, body) = read_text(response).await;
    assert_eq!(body, "reason");
    assert_eq!(
        upstream.seen().await.headers["authorization"],
        format!("Bearer {VALUE}").as_str()
    );
    s.exchange().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compressed_response_to_a_request_with_a_secret_is_refused() {
    let (mut s, upstream, key, _) = setup().await;
    let port = upstream.addr.port();
    let authority = format!("api.test:{port}");
    let tls = s
        .tls(Some("api.test"), port, "api.test", &[b"http/1.1"])
        .await
        .unwrap();
    let mut client = Client::new(tls, false).await;
    let req = request("GET", &authority, "/gzip", false)
        .header("authorization", format!("Bearer {key}"))
        .header("accept-encoding", "gzip, br")
        .body(empty())
        .unwrap();
    let (status, headers, body) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!(status.as_u16(), 502, "{body}");
    assert!(headers.get("content-encoding").is_none());
    assert!(body.contains("Content-Encoding: gzip"), "{body}");
    assert!(body.contains("identity"), "{body}");
    let seen = upstream.seen().await;
    assert_eq!(seen.headers["accept-encoding"], "identity");
    let ex = s.exchange().await;
    assert_eq!((ex.status, ex.decision), (Some(502), "allow"));
    assert_eq!(ex.secrets, ["API_KEY"]);
    assert!(ex.error.unwrap().contains("Content-Encoding: gzip"));

    // Without a secret, compression is the client's and the server's business.
    let req = request("GET", &authority, "/gzip", false)
        .header("accept-encoding", "gzip")
        .body(empty())
        .unwrap();
    let (status, headers, _) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!(status.as_u16(), 200);
    assert_eq!(headers["content-encoding"], "gzip");
    assert_eq!(upstream.seen().await.headers["accept-encoding"], "gzip");
    assert!(s.exchange().await.secrets.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placeholders_for_other_hosts_are_refused_in_headers_and_urls() {
    let (mut s, upstream, key, pass) = setup().await;
    let port = upstream.addr.port();
    let authority = format!("other.test:{port}");
    let tls = s
        .tls(Some("other.test"), port, "other.test", &[b"http/1.1"])
        .await
        .unwrap();
    let mut client = Client::new(tls, false).await;
    let cases = [
        request("GET", &authority, "/x", false).header("x-note", format!("k={key}")),
        request("GET", &authority, "/x", false).header(
            "authorization",
            format!("Basic {}", STANDARD.encode(format!("{key}:x"))),
        ),
        request("GET", &authority, &format!("/x?key={key}"), false),
        request(
            "GET",
            &authority,
            &format!("/p/{}", key.replace('-', "%2D")),
            false,
        ),
    ];
    for req in cases {
        let (status, _, body) =
            read_text(client.send(req.body(empty()).unwrap()).await.unwrap()).await;
        assert_eq!(status.as_u16(), 403);
        assert_eq!(
            body,
            "vectraguard: refused: the request carries the placeholder of secret API_KEY, which is only for api.test\n"
        );
        let ex = s.exchange().await;
        assert_eq!(ex.exfiltration.as_deref(), Some("API_KEY"));
        assert_eq!((ex.decision, ex.status), ("deny", Some(403)));
        assert!(ex.secrets.is_empty());
    }
    assert!(upstream.nothing_seen());
    assert_eq!(
        upstream.accepted.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
    // Its own secret's placeholder is fine there.
    let req = request("GET", &authority, "/echo", false)
        .header("authorization", format!("Bearer {pass}"))
        .body(empty())
        .unwrap();
    assert_eq!(
        read_text(client.send(req).await.unwrap()).await.0.as_u16(),
        200
    );
    assert_eq!(s.exchange().await.secrets, ["PASSWORD"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placeholder_in_the_body_cuts_the_upload() {
    let (mut s, upstream, key, _) = setup().await;
    let port = upstream.addr.port();
    let authority = format!("other.test:{port}");
    let tls = s
        .tls(Some("other.test"), port, "other.test", &[b"http/1.1"])
        .await
        .unwrap();
    let mut client = Client::new(tls, false).await;
    // Streamed: a first frame goes, the frame completing the placeholder does not.
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let req = request("POST", &authority, "/upload", false)
        .body(http_body_util::BodyExt::boxed(ChannelBody(rx)))
        .unwrap();
    let sending = tokio::spawn(async move {
        tx.send(bytes::Bytes::from(format!(
            "{{\"data\": \"harmless\", \"key\": \"{}",
            &key[..5]
        )))
        .await
        .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let _ = tx
            .send(bytes::Bytes::from(format!("{}\"}}", &key[5..])))
            .await;
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        key
    });
    let response = client.send(req).await;
    let key = sending.await.unwrap();
    if let Ok(response) = response {
        let (status, _, body) = read_text(response).await;
        assert_eq!(status.as_u16(), 403, "{body}");
        assert!(body.contains("placeholder of secret API_KEY"), "{body}");
    }
    let seen = upstream.seen().await;
    assert!(!seen.complete, "the upstream must not get a complete body");
    assert!(!String::from_utf8_lossy(&seen.body).contains(&key));
    let ex = s.exchange().await;
    assert_eq!(ex.exfiltration.as_deref(), Some("API_KEY"));
    assert_eq!(ex.decision, "deny");
}
