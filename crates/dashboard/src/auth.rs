//! Who may use the dashboard, decided as plain data: every request's facts in,
//! a [`Verdict`] out.
//!
//! The model (README "Dashboard"): the server prints a URL with a random token,
//! like Jupyter. The page and its static assets hold no record data and are
//! served to anyone who passes the Host and peer checks; the page's script takes
//! the token from the URL, keeps it in `localStorage` (scoped to scheme, host
//! AND port) and sends it as `Authorization: Bearer` on every API call. No
//! cookie is ever set or read: browsers send a host's cookies to every port of
//! it, so any other server on this host that the user opens would receive one.
//! Before anything, the `Host` header must name this server by an address or
//! `localhost` (a DNS-rebinding page reaches us under its own name), and with a
//! loopback bind the peer must be on the loopback too. State-changing requests
//! also need a JSON body and, when the browser sends them, a same-origin
//! `Origin` and `Sec-Fetch-Site` (a bearer token is never sent by a browser on
//! its own, so no CSRF token is needed).

use std::io::Read;
use std::net::{IpAddr, SocketAddr};

use subtle::ConstantTimeEq;

/// The token of one dashboard run and the address it is bound to.
#[derive(Clone)]
pub struct Auth {
    token: String,
    bound: SocketAddr,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token, even in a debug print.
        f.debug_struct("Auth").field("bound", &self.bound).finish()
    }
}

/// 32 bytes from the kernel's generator, as 64 lowercase hex characters.
pub fn random_hex() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// What the guard needs to know of one request.
#[derive(Debug, Clone, Default)]
pub struct Facts<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub host: Option<&'a str>,
    /// `None` when the connection's peer address is unknown (refused).
    pub peer: Option<IpAddr>,
    /// The `Authorization` header: the only place the token is accepted.
    pub authorization: Option<&'a str>,
    pub content_type: Option<&'a str>,
    pub origin: Option<&'a str>,
    pub sec_fetch_site: Option<&'a str>,
}

/// What to do with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Serve it.
    Pass,
    /// 401: no token, or a wrong one.
    Unauthorized(&'static str),
    /// 403: a foreign `Host`, a remote peer, a cross-site request.
    Forbidden(&'static str),
}

impl Auth {
    pub fn new(token: String, bound: SocketAddr) -> Self {
        Self { token, bound }
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    fn is_token(&self, given: &str) -> bool {
        given.as_bytes().ct_eq(self.token.as_bytes()).into()
    }

    /// Whether `host` (the `Host` header) names this server: `localhost` or an IP
    /// address, with the bound port. An address cannot be rebound by DNS; it must
    /// be a loopback one, or the bound one (any, when bound to all addresses).
    pub fn host_allowed(&self, host: &str) -> bool {
        let port = self.bound.port();
        let Some((name, given_port)) = split_host(host) else {
            return false;
        };
        if given_port != port {
            return false;
        }
        if name.eq_ignore_ascii_case("localhost") {
            return true;
        }
        let Ok(ip) = name.parse::<IpAddr>() else {
            return false;
        };
        ip.is_loopback() || ip == self.bound.ip() || self.bound.ip().is_unspecified()
    }

    /// Decides one request; see the module comment.
    pub fn check(&self, f: &Facts<'_>) -> Verdict {
        let Some(peer) = f.peer else {
            return Verdict::Forbidden("the connection's peer address is unknown");
        };
        if self.bound.ip().is_loopback() && !peer.is_loopback() {
            return Verdict::Forbidden("this dashboard serves the loopback only");
        }
        if !f.host.is_some_and(|h| self.host_allowed(h)) {
            return Verdict::Forbidden(
                "the Host header does not name this dashboard (open it by the printed URL)",
            );
        }
        if matches!(f.method, "GET" | "HEAD") && is_public(f.path) {
            return Verdict::Pass;
        }
        let bearer = f
            .authorization
            .and_then(|a| a.strip_prefix("Bearer "))
            .map(str::trim);
        if !bearer.is_some_and(|t| self.is_token(t)) {
            return Verdict::Unauthorized(
                "no or wrong token: open the URL `vectraguard dashboard` printed (it has ?token=…)",
            );
        }
        match f.method {
            "GET" | "HEAD" => Verdict::Pass,
            "POST" => check_post(f),
            _ => Verdict::Forbidden("only GET and POST are served"),
        }
    }
}

fn check_post(f: &Facts<'_>) -> Verdict {
    let json = f.content_type.is_some_and(|c| {
        c.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
    });
    if !json {
        return Verdict::Forbidden("a change must be sent as application/json");
    }
    if let Some(origin) = f.origin {
        let same = f.host.is_some_and(|h| origin == format!("http://{h}"));
        if !same {
            return Verdict::Forbidden("cross-origin request refused");
        }
    }
    if f.sec_fetch_site.is_some_and(|s| s != "same-origin") {
        return Verdict::Forbidden("cross-site request refused");
    }
    Verdict::Pass
}

/// What is served without the token: the page shell and its static assets,
/// which hold no record data (the script fetches everything with the token).
pub fn is_public(path: &str) -> bool {
    is_page(path) || matches!(path, "/app.js" | "/app.css" | "/icon.svg")
}

/// The page paths: `/`, `/approvals` and `/sessions/ID` with an id of the
/// characters session ids use.
pub fn is_page(path: &str) -> bool {
    match path.strip_prefix("/sessions/") {
        Some(id) => {
            !id.is_empty()
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
                && !id.starts_with('.')
        }
        None => path == "/" || path == "/approvals",
    }
}

/// The host a request names: its `Host` header, or, for an absolute-form target
/// (`GET http://name:port/path`), the target's authority, which RFC 9112 §3.2.2
/// says a server must use instead of `Host`. When both are given and differ,
/// `None` (refused): otherwise a target naming another site would be judged by a
/// `Host` header that a proxy or a client may not have checked against it.
pub fn request_host<'a>(target: Option<&'a str>, header: Option<&'a str>) -> Option<&'a str> {
    match (target, header) {
        (Some(t), Some(h)) => t.eq_ignore_ascii_case(h).then_some(t),
        (Some(t), None) => Some(t),
        (None, h) => h,
    }
}

/// `name:port`, `[v6]:port` → (name without brackets, port).
fn split_host(host: &str) -> Option<(&str, u16)> {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (name, after) = rest.split_once(']')?;
        (name, after.strip_prefix(':')?)
    } else {
        let (name, port) = host.rsplit_once(':')?;
        if name.contains(':') {
            return None;
        }
        (name, port)
    };
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((name, port.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const BEARER: &str = "Bearer aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    fn auth(bound: &str) -> Auth {
        Auth::new(TOKEN.into(), bound.parse().unwrap())
    }

    fn local() -> Option<IpAddr> {
        Some("127.0.0.1".parse().unwrap())
    }

    fn get<'a>(path: &'a str, host: &'a str) -> Facts<'a> {
        Facts {
            method: "GET",
            path,
            host: Some(host),
            peer: local(),
            ..Facts::default()
        }
    }

    fn post<'a>(host: &'a str) -> Facts<'a> {
        Facts {
            method: "POST",
            path: "/api/sessions/x/stop",
            host: Some(host),
            peer: local(),
            authorization: Some(BEARER),
            content_type: Some("application/json"),
            ..Facts::default()
        }
    }

    #[test]
    fn the_page_is_public_and_every_api_call_needs_the_bearer_token() {
        let a = auth("127.0.0.1:7420");
        // The page shell and its assets: no record data, no token needed.
        for path in [
            "/",
            "/approvals",
            "/sessions/session-20251219T101053Z-9af4c3",
            "/app.js",
            "/app.css",
            "/icon.svg",
        ] {
            assert_eq!(
                a.check(&get(path, "127.0.0.1:7420")),
                Verdict::Pass,
                "{path}"
            );
        }
        // Everything else without the token: 401.
        for path in [
            "/api/sessions",
            "/api/live",
            "/api/approvals",
            "/sessions/",
            "/sessions/a/b",
            "/sessions/..",
            "//evil.example",
            "/nothing",
        ] {
            assert!(
                matches!(
                    a.check(&get(path, "127.0.0.1:7420")),
                    Verdict::Unauthorized(_)
                ),
                "{path}"
            );
        }
        let mut f = get("/api/sessions", "localhost:7420");
        f.authorization = Some(BEARER);
        assert_eq!(a.check(&f), Verdict::Pass);
        for wrong in [
            TOKEN,
            "Bearer nope",
            "Bearer ",
            "bearer aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "Basic aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        ] {
            f.authorization = Some(wrong);
            assert!(matches!(a.check(&f), Verdict::Unauthorized(_)), "{wrong}");
        }
        // A page POSTed to is not public.
        let mut f = post("127.0.0.1:7420");
        f.path = "/";
        f.authorization = None;
        assert!(matches!(a.check(&f), Verdict::Unauthorized(_)));
    }

    #[test]
    fn only_this_servers_names_pass_the_host_check() {
        let a = auth("127.0.0.1:7420");
        for ok in [
            "127.0.0.1:7420",
            "localhost:7420",
            "LOCALHOST:7420",
            "[::1]:7420",
        ] {
            assert!(a.host_allowed(ok), "{ok}");
        }
        for bad in [
            "evil.example:7420",
            "127.0.0.1:7421",
            "127.0.0.1",
            "localhost",
            "127.0.0.1.nip.io:7420",
            "10.0.0.5:7420",
            "[::1]",
            "::1:7420",
            "localhost:7420x",
            "",
        ] {
            assert!(!a.host_allowed(bad), "{bad}");
        }
        // A bad Host is refused before the token is even looked at, pages included.
        let mut f = get("/api/sessions", "evil.example:7420");
        f.authorization = Some(BEARER);
        assert!(matches!(a.check(&f), Verdict::Forbidden(_)));
        f.host = None;
        assert!(matches!(a.check(&f), Verdict::Forbidden(_)));
        assert!(matches!(
            a.check(&get("/", "evil.example:7420")),
            Verdict::Forbidden(_)
        ));
        // Bound to all addresses: any address literal, still never a name.
        let any = auth("0.0.0.0:7420");
        assert!(any.host_allowed("192.168.1.9:7420"));
        assert!(!any.host_allowed("attacker.example:7420"));
        let one = auth("192.168.1.9:7420");
        assert!(one.host_allowed("192.168.1.9:7420"));
        assert!(!one.host_allowed("192.168.1.10:7420"));
    }

    #[test]
    fn a_loopback_bind_refuses_other_peers() {
        let a = auth("127.0.0.1:7420");
        let mut f = get("/api/sessions", "127.0.0.1:7420");
        f.authorization = Some(BEARER);
        f.peer = Some("192.168.1.20".parse().unwrap());
        assert!(matches!(a.check(&f), Verdict::Forbidden(_)));
        f.path = "/";
        assert!(matches!(a.check(&f), Verdict::Forbidden(_)));
        f.peer = None;
        assert!(matches!(a.check(&f), Verdict::Forbidden(_)));
        f.peer = Some("::1".parse().unwrap());
        assert_eq!(a.check(&f), Verdict::Pass);
        // Bound elsewhere on purpose: remote peers are the point (the CLI warns).
        let wide = auth("0.0.0.0:7420");
        let mut f = get("/api/sessions", "192.168.1.9:7420");
        f.authorization = Some(BEARER);
        f.peer = Some("192.168.1.20".parse().unwrap());
        assert_eq!(wide.check(&f), Verdict::Pass);
    }

    #[test]
    fn changes_need_the_token_json_and_the_same_origin() {
        let a = auth("127.0.0.1:7420");
        let host = "127.0.0.1:7420";
        assert_eq!(a.check(&post(host)), Verdict::Pass);
        let mut f = post(host);
        f.content_type = Some("application/json; charset=utf-8");
        f.origin = Some("http://127.0.0.1:7420");
        f.sec_fetch_site = Some("same-origin");
        assert_eq!(a.check(&f), Verdict::Pass);
        let refused = |edit: &dyn Fn(&mut Facts<'_>)| {
            let mut f = post(host);
            edit(&mut f);
            a.check(&f)
        };
        for content_type in [
            None,
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data"),
            Some("application/jsonx"),
        ] {
            assert!(
                matches!(
                    refused(&|f| f.content_type = content_type),
                    Verdict::Forbidden(_)
                ),
                "{content_type:?}"
            );
        }
        for origin in [
            "http://evil.example",
            "null",
            "http://localhost:7420",
            "http://127.0.0.1:7421",
        ] {
            assert!(
                matches!(refused(&|f| f.origin = Some(origin)), Verdict::Forbidden(_)),
                "{origin}"
            );
        }
        for site in ["cross-site", "same-site", "none"] {
            assert!(
                matches!(
                    refused(&|f| f.sec_fetch_site = Some(site)),
                    Verdict::Forbidden(_)
                ),
                "{site}"
            );
        }
        // Without the token a change is 401 like anything else.
        assert!(matches!(
            refused(&|f| f.authorization = None),
            Verdict::Unauthorized(_)
        ));
        assert!(matches!(
            refused(&|f| f.method = "PUT"),
            Verdict::Forbidden(_)
        ));
    }

    #[test]
    fn headers_are_read_strictly() {
        assert_eq!(split_host("[::1]:80"), Some(("::1", 80)));
        assert_eq!(split_host("host:99999"), None);
        let t = random_hex().unwrap();
        assert_eq!(t.len(), 64);
        assert!(
            t.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_ne!(t, random_hex().unwrap());
        assert!(!format!("{:?}", auth("127.0.0.1:1")).contains(TOKEN));
    }

    /// Red-team finding: `GET http://evil.example:7420/api/… ` with
    /// `Host: 127.0.0.1:7420` was judged by the Host header alone.
    #[test]
    fn an_absolute_target_is_the_host_judged() {
        let a = auth("127.0.0.1:7420");
        let host = |t, h| request_host(t, h).is_some_and(|h| a.host_allowed(h));
        assert!(host(None, Some("127.0.0.1:7420")));
        assert!(host(Some("127.0.0.1:7420"), Some("127.0.0.1:7420")));
        assert!(host(Some("localhost:7420"), Some("LOCALHOST:7420")));
        assert!(host(Some("127.0.0.1:7420"), None));
        assert!(!host(Some("evil.example:7420"), Some("127.0.0.1:7420")));
        assert!(!host(Some("127.0.0.1:7420"), Some("evil.example:7420")));
        assert!(!host(Some("evil.example:7420"), None));
        assert!(!host(None, None));
    }
}
