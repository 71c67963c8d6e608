//! Method and path rules (`allow GET,HEAD https://api.github.com/repos/acme/**`): what
//! may be *said* to a host, not only whether it may be reached. A host named in such a
//! rule is inspected: the mediator terminates the sandbox's TLS with the session's CA
//! and decides each request with [`super::NetworkPolicy::decide_request`].
//!
//! Paths (without the query) are refused first when servers would read them
//! differently from any matcher: a `.` or `..` segment once percent-decoded (`%2e%2e`,
//! `..;x` for servers that drop path parameters, `%2f..%2f`), a backslash, a NUL or
//! another control character. The rest are matched in the form servers route on
//! ([`canonical_path`]): unreserved characters and `/` percent-decoded, `;` parameters
//! dropped, runs of `/` merged, so that `/ok/%61dmin`, `/ok//admin`, `/ok/admin;x` and
//! `/ok%2fadmin` meet the rules for `/ok/admin`. A glob's `*` is any run of bytes without `/`,
//! `**` any run at all; a trailing `/**` also matches the folder itself
//! (`/repos/acme/**` matches `/repos/acme`).

use std::fmt;

/// What a method and path rule's host speaks on its port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Https => "https",
        }
    }

    pub fn default_port(self) -> u16 {
        match self {
            Self::Http => 80,
            Self::Https => 443,
        }
    }

    pub(super) fn parse(text: &str) -> Option<Self> {
        match text {
            "http" => Some(Self::Http),
            "https" => Some(Self::Https),
            _ => None,
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The methods a rule covers: any, or a list of upper-case method names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Methods {
    Any,
    Only(Vec<String>),
}

impl Methods {
    /// `*`, or `GET,HEAD,…`: each an upper-case token (HTTP methods are case-sensitive).
    pub(super) fn parse(text: &str) -> Result<Self, String> {
        if text == "*" {
            return Ok(Self::Any);
        }
        let mut methods = Vec::new();
        for word in text.split(',') {
            if word.is_empty() {
                return Err(format!(
                    "the method list '{}' has an empty entry; write methods separated by commas, e.g. GET,HEAD",
                    super::shown(text)
                ));
            }
            if !word.bytes().all(|b| b.is_ascii_uppercase() || b == b'-') {
                let upper = word.to_ascii_uppercase();
                let hint = if upper.bytes().all(|b| b.is_ascii_uppercase() || b == b'-') {
                    format!("; HTTP methods are upper case: {upper}")
                } else {
                    String::new()
                };
                return Err(format!(
                    "'{}' is not an HTTP method{hint} (write METHODS as GET,HEAD or * for any)",
                    super::shown(word)
                ));
            }
            if word == "CONNECT" {
                return Err(
                    "CONNECT opens a tunnel no rule could inspect, and is always refused; leave it out"
                        .to_owned(),
                );
            }
            if !methods.iter().any(|m| m == word) {
                methods.push(word.to_owned());
            }
        }
        Ok(Self::Only(methods))
    }

    pub fn contains(&self, method: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Only(list) => list.iter().any(|m| m == method),
        }
    }
}

impl fmt::Display for Methods {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Any => f.write_str("*"),
            Self::Only(list) => f.write_str(&list.join(",")),
        }
    }
}

/// One piece of a compiled path glob.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Piece {
    Byte(u8),
    /// `*`: any run of bytes but `/`.
    Star,
    /// `**`: any run of bytes.
    Any,
}

/// A path glob: `/repos/acme/**`, `/v1/*/items`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PathGlob {
    text: String,
    pieces: Vec<Piece>,
    /// The glob ends in `/**`: the folder itself (without the slash) matches too.
    folder: Option<Vec<Piece>>,
}

impl PathGlob {
    pub(super) fn parse(text: &str) -> Result<Self, String> {
        if !text.starts_with('/') {
            return Err(format!(
                "the path '{}' must start with '/'",
                super::shown(text)
            ));
        }
        if let Some(c) = text
            .chars()
            .find(|c| !c.is_ascii_graphic() || matches!(c, '?' | '#' | '\\'))
        {
            return Err(format!(
                "the path '{}' has {c:?}; a rule matches the path only (no query or fragment), in visible ASCII",
                super::shown(text)
            ));
        }
        if text.contains("***") {
            return Err(format!(
                "the path '{}' has '***'; write * (within a segment) or ** (across segments)",
                super::shown(text)
            ));
        }
        if path_problem(text.replace('*', "x").as_str()).is_some() {
            return Err(format!(
                "the path '{}' has a '.' or '..' segment, which no request is matched against",
                super::shown(text)
            ));
        }
        let pieces = compile(text);
        let folder = text
            .strip_suffix("/**")
            .filter(|prefix| !prefix.is_empty())
            .map(compile);
        Ok(Self {
            text: text.to_owned(),
            pieces,
            folder,
        })
    }

    /// Every path.
    pub fn any() -> Self {
        Self {
            text: "/**".to_owned(),
            pieces: compile("/**"),
            folder: None,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `path` (no query) matches. Call [`path_problem`] first: a path servers
    /// may read differently is refused before any rule is tried.
    pub fn matches(&self, path: &str) -> bool {
        glob_matches(&self.pieces, path.as_bytes())
            || self
                .folder
                .as_ref()
                .is_some_and(|f| glob_matches(f, path.as_bytes()))
    }
}

fn compile(text: &str) -> Vec<Piece> {
    let bytes = text.as_bytes();
    let mut pieces = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'*' {
            if bytes.get(i + 1) == Some(&b'*') {
                pieces.push(Piece::Any);
                i += 2;
            } else {
                pieces.push(Piece::Star);
                i += 1;
            }
        } else {
            pieces.push(Piece::Byte(bytes[i]));
            i += 1;
        }
    }
    pieces
}

/// The set of glob positions reachable after each byte (an NFA run): linear in the
/// path's length times the glob's, whatever the input.
fn glob_matches(pieces: &[Piece], path: &[u8]) -> bool {
    let n = pieces.len();
    let mut now = vec![false; n + 1];
    let mut next = vec![false; n + 1];
    now[0] = true;
    close(pieces, &mut now);
    for &b in path {
        next.iter_mut().for_each(|s| *s = false);
        for (i, piece) in pieces.iter().enumerate() {
            if !now[i] {
                continue;
            }
            match piece {
                Piece::Byte(c) if *c == b => next[i + 1] = true,
                Piece::Byte(_) => {}
                Piece::Star if b != b'/' => next[i] = true,
                Piece::Star => {}
                Piece::Any => next[i] = true,
            }
        }
        close(pieces, &mut next);
        if !next.iter().any(|s| *s) {
            return false;
        }
        std::mem::swap(&mut now, &mut next);
    }
    now[n]
}

/// Stars match nothing too: a state before a star also reaches the state after it.
fn close(pieces: &[Piece], states: &mut [bool]) {
    for (i, piece) in pieces.iter().enumerate() {
        if states[i] && matches!(piece, Piece::Star | Piece::Any) {
            states[i + 1] = true;
        }
    }
}

/// Why a request path cannot be matched safely, if it cannot: servers decode
/// percent-escapes, drop `;` parameters and resolve dot segments before routing, so a
/// matcher that did not would be fooled by `/repos/acme/%2e%2e/other`.
pub fn path_problem(path: &str) -> Option<&'static str> {
    if !path.starts_with('/') {
        return Some("the path does not start with '/'");
    }
    let decoded = percent_decode(path.as_bytes());
    if decoded.iter().any(|&b| b < 0x20 || b == 0x7f) {
        return Some("the path has a control character");
    }
    if decoded.contains(&b'\\') {
        return Some("the path has a backslash");
    }
    let dotted = decoded.split(|&b| b == b'/').any(|segment| {
        let segment = segment.split(|&b| b == b';').next().unwrap_or(segment);
        segment == b"." || segment == b".."
    });
    dotted.then_some("the path has a '.' or '..' segment")
}

/// `%XX` decoded once; a `%` not followed by two hex digits is kept.
fn percent_decode(bytes: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).and_then(|&b| hex(b)),
                bytes.get(i + 2).and_then(|&b| hex(b)),
            )
        {
            out.push(u8::try_from(h * 16 + l).unwrap_or(b'%'));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// What a method and path rule adds to a host rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HttpScope {
    pub scheme: Scheme,
    pub methods: Methods,
    pub path: PathGlob,
}

impl HttpScope {
    /// Whether the scope covers `req`; its path must be in [`canonical_path`] form and
    /// its method upper-cased (see [`super::NetworkPolicy::decide_request`]).
    pub fn matches(&self, req: &HttpRequest<'_>) -> bool {
        self.scheme == req.scheme
            && self.methods.contains(req.method)
            && self.path.matches(req.path)
    }
}

/// `path` as servers route on it: percent-escapes of unreserved characters and of `/`
/// decoded (other escapes kept, in upper case), each segment's `;` parameters
/// dropped, and runs of `/` merged. A double escape (`%252e`) is decoded once only,
/// as servers do.
pub fn canonical_path(path: &str) -> String {
    let bytes = path.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16);
    let mut decoded = String::with_capacity(path.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).and_then(|&b| hex(b)),
                bytes.get(i + 2).and_then(|&b| hex(b)),
            )
        {
            let c = char::from(u8::try_from(h * 16 + l).unwrap_or(b'%'));
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~' | '/') {
                decoded.push(c);
            } else {
                decoded.push('%');
                decoded.push_str(&path[i + 1..i + 3].to_ascii_uppercase());
            }
            i += 3;
        } else {
            let len = path[i..].chars().next().map_or(1, char::len_utf8);
            decoded.push_str(&path[i..i + len]);
            i += len;
        }
    }
    let mut out = String::with_capacity(decoded.len());
    for segment in decoded.split('/') {
        let segment = segment.split(';').next().unwrap_or(segment);
        if !out.ends_with('/') {
            out.push('/');
        }
        out.push_str(segment);
    }
    out
}

/// One request on an inspected connection, as the rules see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpRequest<'a> {
    pub scheme: Scheme,
    pub method: &'a str,
    /// The path as sent on the wire, without the query.
    pub path: &'a str,
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn glob(text: &str) -> PathGlob {
        PathGlob::parse(text).unwrap()
    }

    #[test]
    fn stars_stay_in_their_segment_and_double_stars_cross() {
        let g = glob("/repos/*/issues");
        assert!(g.matches("/repos/acme/issues"));
        assert!(g.matches("/repos//issues"), "a star matches nothing too");
        assert!(!g.matches("/repos/acme/x/issues"));
        assert!(!g.matches("/repos/acme/issues/1"));
        let g = glob("/repos/acme/**");
        assert!(g.matches("/repos/acme/x/y/z"));
        assert!(g.matches("/repos/acme/"));
        assert!(g.matches("/repos/acme"), "the folder itself");
        assert!(!g.matches("/repos/acmex"));
        assert!(!g.matches("/repos/other/x"));
        let g = glob("/a/**/b");
        assert!(g.matches("/a/x/y/b") && g.matches("/a//b") && !g.matches("/a/x/c"));
        let g = glob("/files/*.tar.gz");
        assert!(g.matches("/files/x.tar.gz") && !g.matches("/files/x.zip"));
        assert!(PathGlob::any().matches("/") && PathGlob::any().matches("/a/b"));
    }

    #[test]
    fn paths_are_matched_in_the_form_servers_route_on() {
        for (raw, canonical) in [
            ("/ok/admin/x", "/ok/admin/x"),
            ("/ok/%61dmin/x", "/ok/admin/x"),
            ("/ok//admin///x", "/ok/admin/x"),
            ("/ok/admin;jsessionid=1/x", "/ok/admin/x"),
            ("/ok/admin%2fx", "/ok/admin/x"),
            ("/ok/a%3ab", "/ok/a%3Ab"),
            ("/ok/%252e", "/ok/%252e"),
            ("/", "/"),
            ("//", "/"),
            ("/a/", "/a/"),
            ("/é/x", "/é/x"),
        ] {
            assert_eq!(canonical_path(raw), canonical, "{raw}");
        }
        assert!(glob("/ok/admin/**").matches(&canonical_path("/ok//%61dmin;x/y")));
    }

    #[test]
    fn long_paths_do_not_blow_up() {
        let g = glob("/*a*a*a*a*a*a*a*b");
        let path = format!("/{}", "a".repeat(20_000));
        assert!(!g.matches(&path));
    }

    #[test]
    fn paths_servers_read_differently_are_named() {
        for bad in [
            "/repos/acme/../admin",
            "/repos/acme/%2e%2e/admin",
            "/repos/acme/%2E%2e/admin",
            "/repos/acme/x%2f..%2fadmin",
            "/repos/acme/..;x/admin",
            "/repos/./acme",
            "/repos/acme/%5cadmin",
            "/repos/acme\\admin",
            "/a%00b",
            "/a%0d%0aX: y",
            "relative",
        ] {
            assert!(path_problem(bad).is_some(), "{bad}");
        }
        for good in [
            "/",
            "/a/b",
            "/a/.hidden",
            "/a/..x",
            "/a/x..",
            "/a%2Fb",
            "/%zz",
        ] {
            assert_eq!(path_problem(good), None, "{good}");
        }
    }

    #[test]
    fn bad_globs_and_methods_say_what_to_write() {
        for (bad, says) in [
            ("repos", "must start with '/'"),
            ("/a?x=1", "no query"),
            ("/a#f", "no query"),
            ("/a b", "visible ASCII"),
            ("/a/***", "'***'"),
            ("/a/../b", "'..' segment"),
        ] {
            let err = PathGlob::parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
        assert_eq!(Methods::parse("*").unwrap(), Methods::Any);
        assert_eq!(
            Methods::parse("GET,HEAD,GET").unwrap(),
            Methods::Only(vec!["GET".into(), "HEAD".into()])
        );
        assert!(
            Methods::parse("get")
                .unwrap_err()
                .contains("upper case: GET")
        );
        assert!(Methods::parse("GET,").unwrap_err().contains("empty entry"));
        assert!(Methods::parse("GE T").is_err());
        assert!(
            Methods::parse("GET,CONNECT")
                .unwrap_err()
                .contains("tunnel")
        );
        assert!(Methods::parse("GET").unwrap().contains("GET"));
        assert!(!Methods::parse("GET").unwrap().contains("get"));
    }
}
