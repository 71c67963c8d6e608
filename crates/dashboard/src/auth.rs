//! Who may use the dashboard, decided as plain data: every request's facts in,
//! a [`Verdict`] out.
//!
//! The model (README "Dashboard"): the server prints a URL with a random token,
//! like Jupyter; `GET /?token=…` trades it for an HttpOnly, SameSite=Strict cookie
//! and every other request needs that cookie (or `Authorization: Bearer`). Before
//! that, the `Host` header must name this server by an address or `localhost`
//! (a DNS-rebinding page reaches us under its own name), and with a loopback bind
//! the peer must be on the loopback too. State-changing requests also need the
//! page's CSRF token in `X-Vectraguard-Csrf`, a JSON body, and, when the browser
//! sends them, a same-origin `Origin` and `Sec-Fetch-Site`.

use std::io::Read;
use std::net::{IpAddr, SocketAddr};

use subtle::ConstantTimeEq;

/// The cookie that carries the token once the URL was opened.
pub const COOKIE: &str = "vg_dashboard";
/// The header a state-changing request carries the CSRF token in.
pub const CSRF_HEADER: &str = "x-vectraguard-csrf";

/// The secrets of one dashboard run and the address it is bound to.
#[derive(Clone)]
pub struct Auth {
    token: String,
    csrf: String,
    bound: SocketAddr,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secrets, even in a debug print.
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
    /// `token=` of the query string, on `GET /` only.
    pub query_token: Option<&'a str>,
    pub host: Option<&'a str>,
    /// `None` when the connection's peer address is unknown (refused).
    pub peer: Option<IpAddr>,
    /// The value of the `vg_dashboard` cookie.
    pub cookie: Option<&'a str>,
    /// The `Authorization` header.
    pub authorization: Option<&'a str>,
    pub content_type: Option<&'a str>,
    pub csrf: Option<&'a str>,
    pub origin: Option<&'a str>,
    pub sec_fetch_site: Option<&'a str>,
}

/// What to do with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Serve it.
    Pass,
    /// The right token in the URL: set the cookie and redirect to this page
    /// (the same path, without the token).
    Login(String),
    /// 401: no token, or a wrong one.
    Unauthorized(&'static str),
    /// 403: a foreign `Host`, a remote peer, a cross-site request.
    Forbidden(&'static str),
}

impl Auth {
    pub fn new(token: String, csrf: String, bound: SocketAddr) -> Self {
        Self { token, csrf, bound }
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    pub fn csrf(&self) -> &str {
        &self.csrf
    }

    /// The `Set-Cookie` value that [`Verdict::Login`] answers with.
    pub fn cookie(&self) -> String {
        format!("{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/", self.token)
    }

    /// The `vg_dashboard` cookie to judge among the `Cookie` headers: the one
    /// holding this dashboard's token if any, else the first. Cookies are not
    /// scoped by port, so a server on another port of this host (another user's,
    /// another dashboard) can set a `vg_dashboard` cookie with a longer `Path`,
    /// which the browser then sends first: judging only the first would lock the
    /// user out.
    pub fn pick_cookie<'a>(&self, headers: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
        let mut first = None;
        for value in headers.into_iter().flat_map(|h| cookie_values(h, COOKIE)) {
            if self.is_token(value) {
                return Some(value);
            }
            first = first.or(Some(value));
        }
        first
    }

    fn is_token(&self, given: &str) -> bool {
        given.as_bytes().ct_eq(self.token.as_bytes()).into()
    }

    fn is_csrf(&self, given: &str) -> bool {
        given.as_bytes().ct_eq(self.csrf.as_bytes()).into()
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
        if f.method == "GET"
            && is_page(f.path)
            && let Some(given) = f.query_token
        {
            return if self.is_token(given) {
                Verdict::Login(f.path.to_owned())
            } else {
                Verdict::Unauthorized("wrong token: open the URL the dashboard printed")
            };
        }
        let bearer = f
            .authorization
            .and_then(|a| a.strip_prefix("Bearer "))
            .map(str::trim);
        let authed = [f.cookie, bearer]
            .into_iter()
            .flatten()
            .any(|t| self.is_token(t));
        if !authed {
            return Verdict::Unauthorized(
                "no or wrong token: open the URL the dashboard printed (it has ?token=…)",
            );
        }
        match f.method {
            "GET" | "HEAD" => Verdict::Pass,
            "POST" => self.check_post(f),
            _ => Verdict::Forbidden("only GET and POST are served"),
        }
    }

    fn check_post(&self, f: &Facts<'_>) -> Verdict {
        let json = f.content_type.is_some_and(|c| {
            c.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
        });
        if !json {
            return Verdict::Forbidden("a change must be sent as application/json");
        }
        if !f.csrf.is_some_and(|c| self.is_csrf(c)) {
            return Verdict::Forbidden("missing or wrong X-Vectraguard-Csrf header");
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
}

/// The pages a token URL may open (and so redirect to): `/`, `/approvals` and
/// `/sessions/ID` with an id of the characters session ids use. Nothing else, so
/// the redirect can never lead elsewhere.
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

/// The value of cookie `name` in a `Cookie` header (the first, if several).
pub fn cookie_value<'a>(header: &'a str, name: &'a str) -> Option<&'a str> {
    cookie_values(header, name).next()
}

/// Every value of cookie `name` in a `Cookie` header, in order.
pub fn cookie_values<'a>(header: &'a str, name: &'a str) -> impl Iterator<Item = &'a str> {
    header.split(';').filter_map(move |pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}

/// `token=` of a query string.
pub fn query_token(query: &str) -> Option<&str> {
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const CSRF: &str = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

    fn auth(bound: &str) -> Auth {
        Auth::new(TOKEN.into(), CSRF.into(), bound.parse().unwrap())
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
            cookie: Some(TOKEN),
            content_type: Some("application/json"),
            csrf: Some(CSRF),
            ..Facts::default()
        }
    }

    #[test]
    fn the_url_token_logs_in_and_nothing_else_does() {
        let a = auth("127.0.0.1:7420");
        let mut f = get("/", "127.0.0.1:7420");
        f.query_token = Some(TOKEN);
        assert_eq!(a.check(&f), Verdict::Login("/".into()));
        f.query_token = Some(&TOKEN[1..]);
        assert!(matches!(a.check(&f), Verdict::Unauthorized(_)));
        f.query_token = Some("");
        assert!(matches!(a.check(&f), Verdict::Unauthorized(_)));
        // No token at all, on any path.
        for path in ["/", "/api/sessions", "/app.js", "/api/live"] {
            assert!(matches!(
                a.check(&get(path, "127.0.0.1:7420")),
                Verdict::Unauthorized(_)
            ));
        }
        // The cookie or a bearer header.
        let mut f = get("/api/sessions", "localhost:7420");
        f.cookie = Some(TOKEN);
        assert_eq!(a.check(&f), Verdict::Pass);
        f.cookie = Some("nope");
        assert!(matches!(a.check(&f), Verdict::Unauthorized(_)));
        f.authorization =
            Some("Bearer aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
        assert_eq!(a.check(&f), Verdict::Pass);
        f.authorization = Some(TOKEN);
        assert!(matches!(a.check(&f), Verdict::Unauthorized(_)));
        assert!(a.cookie().contains("HttpOnly; SameSite=Strict; Path=/"));
        // Any page may be opened with the token, and is where the redirect goes.
        let mut f = get(
            "/sessions/session-20251219T101053Z-9af4c3",
            "127.0.0.1:7420",
        );
        f.query_token = Some(TOKEN);
        assert_eq!(
            a.check(&f),
            Verdict::Login("/sessions/session-20251219T101053Z-9af4c3".into())
        );
        for not_a_page in [
            "/api/sessions",
            "/sessions/",
            "/sessions/a/b",
            "/sessions/..",
            "//evil.example",
            "/sessions/%2e%2e",
        ] {
            assert!(!is_page(not_a_page), "{not_a_page}");
            let mut f = get(not_a_page, "127.0.0.1:7420");
            f.query_token = Some(TOKEN);
            assert!(
                matches!(a.check(&f), Verdict::Unauthorized(_)),
                "{not_a_page}"
            );
        }
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
        // A bad Host is refused before the token is even looked at.
        let mut f = get("/api/sessions", "evil.example:7420");
        f.cookie = Some(TOKEN);
        assert!(matches!(a.check(&f), Verdict::Forbidden(_)));
        f.host = None;
        assert!(matches!(a.check(&f), Verdict::Forbidden(_)));
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
        let mut f = get("/", "127.0.0.1:7420");
        f.query_token = Some(TOKEN);
        f.peer = Some("192.168.1.20".parse().unwrap());
        assert!(matches!(a.check(&f), Verdict::Forbidden(_)));
        f.peer = None;
        assert!(matches!(a.check(&f), Verdict::Forbidden(_)));
        f.peer = Some("::1".parse().unwrap());
        assert_eq!(a.check(&f), Verdict::Login("/".into()));
        // Bound elsewhere on purpose: remote peers are the point (the CLI warns).
        let wide = auth("0.0.0.0:7420");
        let mut f = get("/", "192.168.1.9:7420");
        f.query_token = Some(TOKEN);
        f.peer = Some("192.168.1.20".parse().unwrap());
        assert_eq!(wide.check(&f), Verdict::Login("/".into()));
    }

    #[test]
    fn changes_need_json_the_csrf_token_and_the_same_origin() {
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
        assert!(matches!(refused(&|f| f.csrf = None), Verdict::Forbidden(_)));
        assert!(matches!(
            refused(&|f| f.csrf = Some(TOKEN)),
            Verdict::Forbidden(_)
        ));
        assert!(matches!(
            refused(&|f| f.origin = Some("http://evil.example")),
            Verdict::Forbidden(_)
        ));
        assert!(matches!(
            refused(&|f| f.origin = Some("null")),
            Verdict::Forbidden(_)
        ));
        assert!(matches!(
            refused(&|f| f.origin = Some("http://localhost:7420")),
            Verdict::Forbidden(_)
        ));
        assert!(matches!(
            refused(&|f| f.sec_fetch_site = Some("cross-site")),
            Verdict::Forbidden(_)
        ));
        assert!(matches!(
            refused(&|f| f.sec_fetch_site = Some("same-site")),
            Verdict::Forbidden(_)
        ));
        // Without the token a change is 401 like anything else.
        assert!(matches!(
            refused(&|f| f.cookie = None),
            Verdict::Unauthorized(_)
        ));
        assert!(matches!(
            refused(&|f| f.method = "PUT"),
            Verdict::Forbidden(_)
        ));
    }

    #[test]
    fn headers_are_read_strictly() {
        assert_eq!(
            cookie_value("a=1; vg_dashboard=xyz; b=2", COOKIE),
            Some("xyz")
        );
        assert_eq!(cookie_value("vg_dashboardx=1", COOKIE), None);
        assert_eq!(query_token("a=1&token=abc"), Some("abc"));
        assert_eq!(query_token("xtoken=abc"), None);
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

    /// Red-team finding: a cookie tossed by another server on this host (cookies
    /// ignore ports) and sent before ours must not lock the user out.
    #[test]
    fn a_foreign_cookie_of_the_same_name_does_not_hide_ours() {
        let a = auth("127.0.0.1:7420");
        let tossed = format!("vg_dashboard=junk; other=1; vg_dashboard={TOKEN}");
        assert_eq!(a.pick_cookie([tossed.as_str()]), Some(TOKEN));
        let ours = format!("vg_dashboard={TOKEN}");
        assert_eq!(
            a.pick_cookie(["vg_dashboard=junk", ours.as_str()]),
            Some(TOKEN)
        );
        // Without the right one, the first is judged (and refused).
        assert_eq!(
            a.pick_cookie(["a=1; vg_dashboard=junk; vg_dashboard=more"]),
            Some("junk")
        );
        assert_eq!(a.pick_cookie(["a=1"]), None);
        let mut f = get("/api/sessions", "127.0.0.1:7420");
        f.cookie = a.pick_cookie([tossed.as_str()]);
        assert_eq!(a.check(&f), Verdict::Pass);
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
