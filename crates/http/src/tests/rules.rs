//! Requests decided by method and path, and the Host check.

use vg_policy::network::Scheme;

use super::harness::*;

/// An inspector allowing GET and HEAD under /repos/ of api.test, and an HTTPS upstream.
async fn setup(extra: &[&str]) -> (Setup, Upstream, String) {
    let pki = Pki::new("Test Root");
    let upstream = Upstream::start(Some(pki.server_config(&[b"h2", b"http/1.1"]))).await;
    let port = upstream.addr.port();
    let mut rules: Vec<String> = extra
        .iter()
        .map(|r| r.replace("PORT", &port.to_string()))
        .collect();
    rules.push(format!("allow GET,HEAD https://api.test:{port}/repos/**"));
    let setup = Setup::new(&rules, Vec::new(), vec![pki.ca.clone()]);
    (setup, upstream, format!("api.test:{port}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_get_and_head_are_forwarded_and_recorded() {
    let (mut s, upstream, authority) = setup(&[]).await;
    let port = upstream.addr.port();
    let tls = s
        .tls(Some("api.test"), port, "api.test", &[b"http/1.1"])
        .await
        .unwrap();
    let mut client = Client::new(tls, false).await;

    let req = request("GET", &authority, "/repos/acme/x?token=abc&page=2", false)
        .body(empty())
        .unwrap();
    let (status, _, body) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!(
        (status.as_u16(), body.as_str()),
        (200, "ok GET /repos/acme/x")
    );
    let seen = upstream.seen().await;
    assert_eq!(seen.uri, "/repos/acme/x?token=abc&page=2");
    assert_eq!(seen.headers["host"], authority.as_str());
    let ex = s.exchange().await;
    assert_eq!(ex.decision, "allow");
    assert_eq!(ex.method, "GET");
    assert_eq!(ex.scheme, Scheme::Https);
    assert_eq!(ex.host, "api.test");
    assert_eq!(ex.port, port);
    assert_eq!(ex.version, "HTTP/1.1");
    assert_eq!(ex.path, "/repos/acme/x?token=REDACTED&page=REDACTED");
    assert_eq!(ex.status, Some(200));
    assert_eq!(ex.bytes_in, "ok GET /repos/acme/x".len() as u64);
    assert_eq!(
        ex.rule.as_deref(),
        Some(format!("allow GET,HEAD https://api.test:{port}/repos/**").as_str())
    );
    assert_eq!(ex.reason, "rule");
    assert!(ex.error.is_none() && ex.secrets.is_empty() && ex.exfiltration.is_none());

    // HEAD on the same connection (keep-alive), and the same upstream connection.
    let req = request("HEAD", &authority, "/repos/acme/y", false)
        .body(empty())
        .unwrap();
    let (status, headers, body) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!((status.as_u16(), body.as_str()), (200, ""));
    assert_eq!(
        headers["content-length"],
        "ok HEAD /repos/acme/y".len().to_string().as_str()
    );
    assert_eq!(upstream.seen().await.method, "HEAD");
    let ex = s.exchange().await;
    assert_eq!((ex.method.as_str(), ex.status), ("HEAD", Some(200)));
    assert_eq!(
        upstream.accepted.load(std::sync::atomic::Ordering::SeqCst),
        1
    );
    assert!(s.no_more_events().await, "one event per request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_requests_get_a_403_that_says_why_and_never_go_upstream() {
    let (mut s, upstream, authority) =
        setup(&["deny GET https://api.test:PORT/repos/secret/**"]).await;
    let port = upstream.addr.port();
    let tls = s
        .tls(Some("api.test"), port, "api.test", &[b"http/1.1"])
        .await
        .unwrap();
    let mut client = Client::new(tls, false).await;

    let req = request("POST", &authority, "/repos/acme/x", false)
        .body(text("payload"))
        .unwrap();
    let (status, headers, body) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!(status.as_u16(), 403);
    assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(
        body,
        format!(
            "vectraguard: refused POST https://api.test:{port}/repos/acme/x: no rule allows it (rules for this host: deny GET https://api.test:{port}/repos/secret/**; allow GET,HEAD https://api.test:{port}/repos/**)\n"
        )
    );
    let ex = s.exchange().await;
    assert_eq!((ex.decision, ex.status), ("deny", Some(403)));
    assert_eq!(ex.reason, "no method and path rule");
    assert_eq!(ex.rule, None);

    let req = request("GET", &authority, "/elsewhere", false)
        .body(empty())
        .unwrap();
    let (status, _, body) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!(status.as_u16(), 403);
    assert!(body.contains("refused GET https://api.test:"), "{body}");
    assert_eq!(s.exchange().await.decision, "deny");

    let req = request("GET", &authority, "/repos/secret/keys", false)
        .body(empty())
        .unwrap();
    let (status, _, body) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!(status.as_u16(), 403);
    assert!(
        body.contains(&format!(
            "denied by 'deny GET https://api.test:{port}/repos/secret/**'"
        )),
        "{body}"
    );
    let ex = s.exchange().await;
    assert_eq!((ex.decision, ex.reason.as_str()), ("deny", "rule"));
    assert!(ex.rule.unwrap().starts_with("deny GET"));

    // A path servers may read differently from the rules.
    let req = request("GET", &authority, "/repos/acme/%2e%2e/secret/keys", false)
        .body(empty())
        .unwrap();
    let (status, _, body) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!(status.as_u16(), 403);
    assert!(body.contains("'..'"), "{body}");
    assert_eq!(s.exchange().await.reason, "ambiguous path");

    assert!(upstream.nothing_seen());
    assert_eq!(
        upstream.accepted.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "never connected"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_header_naming_another_host_or_port_is_refused() {
    let (mut s, upstream, authority) = setup(&[]).await;
    let port = upstream.addr.port();
    let tls = s
        .tls(Some("api.test"), port, "api.test", &[b"http/1.1"])
        .await
        .unwrap();
    let mut client = Client::new(tls, false).await;
    let req = request("GET", "evil.test", "/repos/acme/x", false)
        .body(empty())
        .unwrap();
    let (status, _, body) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!(status.as_u16(), 403);
    assert_eq!(
        body,
        "vectraguard: refused: Host 'evil.test' does not match the connection's name 'api.test'\n"
    );
    let ex = s.exchange().await;
    assert_eq!((ex.decision, ex.reason.as_str()), ("deny", "host mismatch"));

    let req = request("GET", "api.test:1", "/repos/acme/x", false)
        .body(empty())
        .unwrap();
    let (status, _, body) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!(status.as_u16(), 403);
    assert!(body.contains("names port 1"), "{body}");
    assert_eq!(s.exchange().await.reason, "host mismatch");

    // The same name in another case, with the port: fine.
    let req = request("GET", &authority.replace("api", "API"), "/repos/x", false)
        .body(empty())
        .unwrap();
    let (status, _, _) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!(status.as_u16(), 200);
    assert_eq!(s.exchange().await.decision, "allow");

    // HTTP/2: the :authority is checked the same way.
    let tls = s
        .tls(Some("api.test"), port, "api.test", &[b"h2"])
        .await
        .unwrap();
    let mut client = Client::new(tls, true).await;
    let req = request("GET", "evil.test", "/repos/acme/x", true)
        .body(empty())
        .unwrap();
    let (status, _, body) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!(status.as_u16(), 403);
    assert!(body.contains("Host 'evil.test'"), "{body}");
    assert_eq!(s.exchange().await.reason, "host mismatch");
    assert_eq!(upstream.seen().await.uri, "/repos/x");
    assert!(upstream.nothing_seen());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_is_served_and_translated_both_ways() {
    // HTTP/2 on both sides.
    let (mut s, upstream, authority) = setup(&[]).await;
    let port = upstream.addr.port();
    let tls = s
        .tls(Some("api.test"), port, "api.test", &[b"h2", b"http/1.1"])
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let mut client = Client::new(tls, true).await;
    let req = request("GET", &authority, "/repos/a", true)
        .body(empty())
        .unwrap();
    let (status, _, body) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!((status.as_u16(), body.as_str()), (200, "ok GET /repos/a"));
    let seen = upstream.seen().await;
    assert_eq!(seen.version, http::Version::HTTP_2);
    assert_eq!(seen.uri, format!("https://{authority}/repos/a"));
    assert_eq!(s.exchange().await.version, "HTTP/2");
    // Concurrent streams on one connection.
    let mut other = client.fork();
    let (a, b) = tokio::join!(
        client.send(
            request("GET", &authority, "/repos/b", true)
                .body(empty())
                .unwrap()
        ),
        other.send(
            request("GET", &authority, "/repos/c", true)
                .body(empty())
                .unwrap()
        )
    );
    assert_eq!(read_text(a.unwrap()).await.2, "ok GET /repos/b");
    assert_eq!(read_text(b.unwrap()).await.2, "ok GET /repos/c");

    // HTTP/2 from the sandbox, an HTTP/1.1-only upstream: Host from :authority.
    let pki = Pki::new("Test Root");
    let h1_upstream = Upstream::start(Some(pki.server_config(&[b"http/1.1"]))).await;
    let port = h1_upstream.addr.port();
    let mut s = Setup::new(
        &[format!("allow GET https://api.test:{port}/**")],
        Vec::new(),
        vec![pki.ca.clone()],
    );
    let tls = s
        .tls(Some("api.test"), port, "api.test", &[b"h2"])
        .await
        .unwrap();
    let mut client = Client::new(tls, true).await;
    let authority = format!("api.test:{port}");
    for path in ["/one", "/two"] {
        let req = request("GET", &authority, path, true)
            .body(empty())
            .unwrap();
        let (status, _, body) = read_text(client.send(req).await.unwrap()).await;
        assert_eq!((status.as_u16(), body), (200, format!("ok GET {path}")));
        let seen = h1_upstream.seen().await;
        assert_eq!(seen.version, http::Version::HTTP_11);
        assert_eq!(seen.uri, path);
        assert_eq!(seen.headers["host"], authority.as_str());
        assert_eq!(s.exchange().await.version, "HTTP/2");
    }

    // HTTP/1.1 from the sandbox to an upstream that speaks h2: only http/1.1 is offered.
    let (mut s, upstream, authority) = setup(&[]).await;
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
    let req = request("GET", &authority, "/repos/z", false)
        .body(empty())
        .unwrap();
    assert_eq!(
        read_text(client.send(req).await.unwrap()).await.0.as_u16(),
        200
    );
    assert_eq!(upstream.seen().await.version, http::Version::HTTP_11);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_is_inspected_too() {
    let upstream = Upstream::start(None).await;
    let port = upstream.addr.port();
    let mut s = Setup::new(
        &[format!("allow GET http://api.test:{port}/ok/**")],
        Vec::new(),
        Vec::new(),
    );
    let stream = s.connect(Some("api.test"), port, Scheme::Http);
    let mut client = Client::new(stream, false).await;
    let authority = format!("api.test:{port}");
    let req = request("GET", &authority, "/ok/1", false)
        .body(empty())
        .unwrap();
    let (status, _, body) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!((status.as_u16(), body.as_str()), (200, "ok GET /ok/1"));
    assert_eq!(s.exchange().await.scheme, Scheme::Http);
    let req = request("GET", &authority, "/no", false)
        .body(empty())
        .unwrap();
    let (status, _, body) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!(status.as_u16(), 403);
    assert!(
        body.contains(&format!("refused GET http://api.test:{port}/no")),
        "{body}"
    );
    assert_eq!(upstream.seen().await.uri, "/ok/1");
    assert!(upstream.nothing_seen());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn method_and_path_overrides_must_be_allowed_too() {
    let (mut s, upstream, authority) =
        setup(&["deny DELETE https://api.test:PORT/repos/locked/**"]).await;
    let port = upstream.addr.port();
    let tls = s
        .tls(Some("api.test"), port, "api.test", &[b"http/1.1"])
        .await
        .unwrap();
    let mut client = Client::new(tls, false).await;
    let refused = [
        // (path, header, value, in the body, reason)
        (
            "/repos/a",
            "x-http-method-override",
            "delete",
            format!(
                "with x-http-method-override it asks for DELETE https://api.test:{port}/repos/a, and no rule allows it"
            ),
            "no method and path rule",
        ),
        (
            "/repos/locked/x",
            "x-http-method",
            "DELETE",
            format!("denied by 'deny DELETE https://api.test:{port}/repos/locked/**'"),
            "rule",
        ),
        (
            "/repos/a",
            "x-method-override",
            "PUT",
            "asks for PUT".to_owned(),
            "no method and path rule",
        ),
        (
            "/repos/a",
            "x-original-url",
            "/admin/keys?x=1",
            format!("with x-original-url it asks for GET https://api.test:{port}/admin/keys,"),
            "no method and path rule",
        ),
        (
            "/repos/a",
            "x-rewrite-url",
            "https://api.test/repos/../admin",
            "asks for GET".to_owned(),
            "ambiguous path",
        ),
        (
            "/repos/a",
            "x-original-url",
            "admin",
            "neither a path nor an absolute URL".to_owned(),
            "override not understood",
        ),
    ];
    for (path, name, value, text, reason) in refused {
        let req = request("GET", &authority, path, false)
            .header(name, value)
            .body(empty())
            .unwrap();
        let (status, _, body) = read_text(client.send(req).await.unwrap()).await;
        assert_eq!(status.as_u16(), 403, "{name}: {value}: {body}");
        assert!(body.contains(&text), "{body}");
        let ex = s.exchange().await;
        assert_eq!(
            (ex.decision, ex.reason.as_str()),
            ("deny", reason),
            "{name}"
        );
        if reason == "rule" {
            assert!(ex.rule.unwrap().starts_with("deny DELETE"));
        }
    }
    // A method and a path override together: the method on that path.
    let req = request("GET", &authority, "/repos/a", false)
        .header("x-http-method-override", "HEAD")
        .header("x-original-url", "/repos/locked/x")
        .body(empty())
        .unwrap();
    assert_eq!(
        read_text(client.send(req).await.unwrap()).await.0.as_u16(),
        200
    );
    s.exchange().await;
    upstream.seen().await;
    let req = request("GET", &authority, "/repos/a", false)
        .header("x-http-method-override", "DELETE")
        .header("x-original-url", "/repos/locked/x")
        .body(empty())
        .unwrap();
    let (status, _, body) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!(status.as_u16(), 403);
    assert!(
        body.contains("with x-http-method-override it asks for DELETE"),
        "{body}"
    );
    assert_eq!(s.exchange().await.decision, "deny");
    assert!(upstream.nothing_seen());

    // Overrides that the rules allow pass, untouched.
    let req = request("GET", &authority, "/repos/a", false)
        .header("x-method-override", "head")
        .header("x-rewrite-url", "https://api.test/repos/b?page=2")
        .body(empty())
        .unwrap();
    let (status, _, body) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!((status.as_u16(), body.as_str()), (200, "ok GET /repos/a"));
    assert_eq!(upstream.seen().await.headers["x-method-override"], "head");
    assert_eq!(s.exchange().await.decision, "allow");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn methods_are_decided_upper_cased() {
    let (mut s, upstream, authority) =
        setup(&["deny GET https://api.test:PORT/repos/locked/**"]).await;
    let port = upstream.addr.port();
    let tls = s
        .tls(Some("api.test"), port, "api.test", &[b"http/1.1"])
        .await
        .unwrap();
    let mut client = Client::new(tls, false).await;
    let req = request("get", &authority, "/repos/locked/x", false)
        .body(empty())
        .unwrap();
    let (status, _, body) = read_text(client.send(req).await.unwrap()).await;
    assert_eq!(status.as_u16(), 403, "{body}");
    assert!(body.contains("denied by 'deny GET"), "{body}");
    let ex = s.exchange().await;
    assert_eq!((ex.method.as_str(), ex.reason.as_str()), ("get", "rule"));
    assert!(upstream.nothing_seen());
}
