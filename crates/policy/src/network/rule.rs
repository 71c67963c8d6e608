//! Rules (`allow github.com:443`, `deny *.evil.com`, `allow 10.0.0.0/8:5432`) and
//! pinned names (`--add-host db.internal:10.0.0.5`), parsed from flags and config lines.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

use super::http::{HttpScope, Methods, PathGlob, Scheme};
use super::{Cidr, HostName, NetworkError, canonical, shown};

/// Appended to rule errors: every form a rule target can take.
const RULE_FORMS: &str = "a rule is DOMAIN, *.DOMAIN, *, an IP address or a CIDR network, optionally followed by :PORT or :LOW-HIGH, e.g. github.com:443, *.example.com, 10.0.0.0/8, [2001:db8::1]:443; or [METHODS] http(s)://HOST[:PORT][/PATH-GLOB], e.g. 'GET,HEAD https://api.github.com/repos/acme/**'";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Allow,
    Deny,
}

impl Action {
    pub fn parse(word: &str) -> Result<Self, NetworkError> {
        match word {
            "allow" => Ok(Self::Allow),
            "deny" => Ok(Self::Deny),
            other => Err(NetworkError::Rule {
                input: shown(other),
                problem: "the action must be 'allow' or 'deny'".to_owned(),
            }),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a rule is about. Name targets match the name the sandbox looked up through our
/// resolver; address targets match the address it connects to. Neither kind matches
/// the other: `*` is any name, never a bare IP connection.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// Exactly this name.
    Name(HostName),
    /// `*.example.com`: names strictly below it, at a label boundary; never the apex.
    Wildcard(HostName),
    /// `*`: any name.
    AnyName,
    Ip(IpAddr),
    Cidr(Cidr),
}

impl Target {
    pub fn matches_name(&self, name: &HostName) -> bool {
        match self {
            Self::Name(n) => n == name,
            Self::Wildcard(parent) => name.is_subdomain_of(parent),
            Self::AnyName => true,
            Self::Ip(_) | Self::Cidr(_) => false,
        }
    }

    /// Compared in [`canonical`] form: `::ffff:1.2.3.4` and `64:ff9b::102:304` match
    /// `1.2.3.4`.
    pub fn matches_addr(&self, addr: IpAddr) -> bool {
        match self {
            Self::Ip(ip) => canonical(*ip) == canonical(addr),
            Self::Cidr(net) => net.contains(addr),
            Self::Name(_) | Self::Wildcard(_) | Self::AnyName => false,
        }
    }

    /// Whether this names exactly `addr` (one address, not a network containing it),
    /// compared in [`canonical`] form.
    pub fn is_exactly(&self, addr: IpAddr) -> bool {
        matches!(self, Self::Ip(ip) if canonical(*ip) == canonical(addr))
    }

    /// Whether this names an address or network rather than a name.
    pub fn is_address(&self) -> bool {
        matches!(self, Self::Ip(_) | Self::Cidr(_))
    }

    /// Whether the target is an IPv6 address or network, which needs brackets before a port.
    fn is_ipv6(&self) -> bool {
        match self {
            Self::Ip(ip) => ip.is_ipv6(),
            Self::Cidr(net) => net.addr().is_ipv6(),
            _ => false,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Name(n) => write!(f, "{n}"),
            Self::Wildcard(n) => write!(f, "*.{n}"),
            Self::AnyName => f.write_str("*"),
            Self::Ip(ip) => write!(f, "{ip}"),
            Self::Cidr(net) => write!(f, "{net}"),
        }
    }
}

/// Ports `start..=end`, within 1..=65535.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortRange {
    start: u16,
    end: u16,
}

impl PortRange {
    pub const ALL: Self = Self {
        start: 1,
        end: u16::MAX,
    };

    /// `None` when `start` is 0 or greater than `end`.
    pub fn new(start: u16, end: u16) -> Option<Self> {
        (start >= 1 && start <= end).then_some(Self { start, end })
    }

    pub fn single(port: u16) -> Option<Self> {
        Self::new(port, port)
    }

    pub fn start(&self) -> u16 {
        self.start
    }

    pub fn end(&self) -> u16 {
        self.end
    }

    pub fn contains(&self, port: u16) -> bool {
        (self.start..=self.end).contains(&port)
    }

    /// `PORT` or `LOW-HIGH`; the problem and how to fix it otherwise.
    fn parse(text: &str) -> Result<Self, String> {
        if text.is_empty() {
            return Err(
                "nothing follows ':'; write a port such as :443 or a range such as :8000-8080"
                    .to_owned(),
            );
        }
        let (low, high) = text.split_once('-').unwrap_or((text, text));
        let (low, high) = (parse_port(low)?, parse_port(high)?);
        Self::new(low, high).ok_or_else(|| {
            format!("the port range '{low}-{high}' is reversed; write the lower port first, as {high}-{low}")
        })
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.start == self.end {
            write!(f, "{}", self.start)
        } else {
            write!(f, "{}-{}", self.start, self.end)
        }
    }
}

fn parse_port(text: &str) -> Result<u16, String> {
    text.parse::<u16>()
        .ok()
        .filter(|port| *port != 0 && text.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| format!("the port '{}' is not a number from 1 to 65535", shown(text)))
}

/// One rule. `text` is its canonical form (`allow *.github.com:443`), the way decisions
/// name it in session events.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rule {
    pub action: Action,
    pub target: Target,
    /// `None`: every port. A range covering every port is stored as `None` too.
    pub ports: Option<PortRange>,
    /// Set for a method and path rule (`allow GET https://host/path/**`): the host is
    /// inspected, and the rule decides requests, not connections (see
    /// [`super::NetworkPolicy::decide_request`]). Its `ports` is its one port.
    pub http: Option<HttpScope>,
    pub text: String,
}

impl Rule {
    pub fn new(action: Action, target: Target, ports: Option<PortRange>) -> Self {
        let ports = ports.filter(|range| *range != PortRange::ALL);
        let text = match ports {
            None => format!("{action} {target}"),
            Some(range) if target.is_ipv6() => format!("{action} [{target}]:{range}"),
            Some(range) => format!("{action} {target}:{range}"),
        };
        Self {
            action,
            target,
            ports,
            http: None,
            text,
        }
    }

    /// A method and path rule: `target` on `port`, for the requests `scope` covers.
    pub fn http(action: Action, target: Target, port: u16, scope: HttpScope) -> Self {
        let host = if target.is_ipv6() {
            format!("[{target}]")
        } else {
            target.to_string()
        };
        let port_text = if port == scope.scheme.default_port() {
            String::new()
        } else {
            format!(":{port}")
        };
        let text = format!(
            "{action} {} {}://{host}{port_text}{}",
            scope.methods,
            scope.scheme,
            scope.path.as_str()
        );
        Self {
            action,
            target,
            ports: PortRange::single(port),
            http: Some(scope),
            text,
        }
    }

    /// The value of `--allow`/`--deny`: `DOMAIN`, `*.DOMAIN`, `*`, `IPV4`, `IPV4/PREFIX`,
    /// `[IPV6]`, `IPV6`, `IPV6/PREFIX` or `[IPV6/PREFIX]`, then optionally `:PORT` or
    /// `:LOW-HIGH` (after the brackets for IPv6; a bare IPv6 address takes no port).
    pub fn parse(action: Action, spec: &str) -> Result<Self, NetworkError> {
        if spec.contains("://") {
            return parse_http(spec)
                .map(|(target, port, scope)| Self::http(action, target, port, scope))
                .map_err(|problem| NetworkError::Rule {
                    input: shown(&format!("{action} {spec}")),
                    problem: format!("{problem} ({HTTP_FORMS})"),
                });
        }
        let (target, ports) = parse_spec(spec).map_err(|problem| NetworkError::Rule {
            input: shown(&format!("{action} {spec}")),
            problem: format!("{problem} ({RULE_FORMS})"),
        })?;
        Ok(Self::new(action, target, ports))
    }

    /// A config line: `allow github.com:443`, `deny *.evil.com`.
    pub fn parse_line(line: &str) -> Result<Self, NetworkError> {
        let words: Vec<&str> = line.split_ascii_whitespace().collect();
        match words.as_slice() {
            [action, spec] => {
                Self::parse(Action::parse(action).map_err(|_| line_error(line))?, spec)
            }
            [action, methods, url] if url.contains("://") => Self::parse(
                Action::parse(action).map_err(|_| line_error(line))?,
                &format!("{methods} {url}"),
            ),
            _ => Err(line_error(line)),
        }
    }

    /// Whether the rule applies to connections on `port`.
    pub fn covers_port(&self, port: u16) -> bool {
        self.ports.is_none_or(|range| range.contains(port))
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Appended to method and path rule errors.
const HTTP_FORMS: &str = "a method and path rule is [METHODS] http(s)://HOST[:PORT][/PATH-GLOB], METHODS as GET,HEAD or *, e.g. 'GET,HEAD https://api.github.com/repos/acme/**'";

/// `[METHODS] SCHEME://HOST[:PORT][/PATH-GLOB]`: the host, its port and the scope.
fn parse_http(spec: &str) -> Result<(Target, u16, HttpScope), String> {
    let words: Vec<&str> = spec.split_ascii_whitespace().collect();
    let (methods, url) = match words.as_slice() {
        [url] => (Methods::Any, *url),
        [methods, url] => (Methods::parse(methods)?, *url),
        _ => return Err("write the methods, one space, then the URL".to_owned()),
    };
    let (scheme_text, rest) = url.split_once("://").ok_or("the URL has no scheme")?;
    let scheme = Scheme::parse(scheme_text)
        .ok_or_else(|| format!("the scheme '{}' is not http or https", shown(scheme_text)))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/**"),
    };
    if authority.is_empty() {
        return Err("the URL has no host".to_owned());
    }
    if authority.contains('@') {
        return Err("the URL has a user name; rules name only the host".to_owned());
    }
    if authority.contains(['?', '#']) || rest.starts_with(['?', '#']) {
        return Err("rules match the path only, not a query or fragment".to_owned());
    }
    let (host, port) = if let Some(inside) = authority.strip_prefix('[') {
        let (addr, after) = inside.split_once(']').ok_or("'[' has no closing ']'")?;
        let port = match after {
            "" => None,
            _ => Some(
                after
                    .strip_prefix(':')
                    .ok_or_else(|| format!("'{}' after ']' is not :PORT", shown(after)))?,
            ),
        };
        (parse_ipv6_target(addr)?, port)
    } else {
        let (host, port) = match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        };
        (parse_host_target(host)?, port)
    };
    if matches!(host, Target::Cidr(_)) {
        return Err("a method and path rule names one host, not a network".to_owned());
    }
    let port = match port {
        None => scheme.default_port(),
        Some(text) => parse_port(text)?,
    };
    let path = PathGlob::parse(path)?;
    Ok((
        host,
        port,
        HttpScope {
            scheme,
            methods,
            path,
        },
    ))
}

fn line_error(line: &str) -> NetworkError {
    NetworkError::Rule {
        input: shown(line),
        problem: format!(
            "write 'allow TARGET[:PORTS]' or 'deny TARGET[:PORTS]', e.g. \"allow github.com:443\" ({RULE_FORMS})"
        ),
    }
}

/// The target and ports of a rule, or what is wrong with them.
fn parse_spec(spec: &str) -> Result<(Target, Option<PortRange>), String> {
    if spec.is_empty() {
        return Err("the rule is empty".to_owned());
    }
    if let Some(rest) = spec.strip_prefix('[') {
        let (inside, after) = rest.split_once(']').ok_or("'[' has no closing ']'")?;
        let target = parse_ipv6_target(inside)
            .map_err(|problem| format!("{problem} (brackets are for IPv6 only)"))?;
        let ports = match after {
            "" => None,
            _ => {
                let text = after
                    .strip_prefix(':')
                    .ok_or_else(|| format!("'{}' after ']' is not :PORT", shown(after)))?;
                Some(PortRange::parse(text)?)
            }
        };
        return Ok((target, ports));
    }
    if spec.matches(':').count() > 1 {
        // A bare IPv6 address: its last group cannot be told from a port.
        return parse_ipv6_target(spec).map(|target| (target, None)).map_err(|problem| {
            format!("{problem}; an IPv6 address with a port goes in brackets, e.g. [2001:db8::1]:443")
        });
    }
    let (host, ports) = match spec.split_once(':') {
        Some((host, ports)) => (host, Some(PortRange::parse(ports)?)),
        None => (spec, None),
    };
    Ok((parse_host_target(host)?, ports))
}

/// An IPv6 address or network, as written inside brackets or bare.
fn parse_ipv6_target(text: &str) -> Result<Target, String> {
    let addr = text.split_once('/').map_or(text, |(addr, _)| addr);
    let Ok(ip) = addr.parse::<Ipv6Addr>() else {
        return Err(format!("'{}' is not an IPv6 address", shown(addr)));
    };
    if text.contains('/') {
        Cidr::parse(text)
            .map(Target::Cidr)
            .map_err(|e| e.to_string())
    } else {
        Ok(Target::Ip(IpAddr::V6(ip).to_canonical()))
    }
}

fn parse_host_target(host: &str) -> Result<Target, String> {
    // A network has an address (or a botched one) before the '/'; `github.com/x` is a
    // path, which the name check below refuses with its own advice.
    let looks_like_network = host.split_once('/').is_some_and(|(addr, _)| {
        addr.parse::<IpAddr>().is_ok() || addr.bytes().all(|b| b.is_ascii_digit() || b == b'.')
    });
    if looks_like_network {
        return Cidr::parse(host)
            .map(Target::Cidr)
            .map_err(|e| e.to_string());
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(Target::Ip(ip.to_canonical()));
    }
    if host == "*" {
        return Ok(Target::AnyName);
    }
    let (wildcard, name) = match host.strip_prefix("*.") {
        Some(parent) => (true, parent),
        None => (false, host),
    };
    if name.starts_with('*') || (!wildcard && host.contains('*')) {
        return Err(format!(
            "'{}' has '*' in the wrong place; a wildcard is '*' alone or a leading '*.' as in *.example.com",
            shown(host)
        ));
    }
    let name = HostName::parse(name).map_err(|e| match e {
        NetworkError::Name { input, problem } => {
            format!("the name '{input}' is invalid: {problem}")
        }
        other => other.to_string(),
    })?;
    Ok(if wildcard {
        Target::Wildcard(name)
    } else {
        Target::Name(name)
    })
}

/// A name pinned to an address with `--add-host NAME:IP` (Docker's syntax): the
/// sandbox's resolver answers with `addr`, and connections to it pass the
/// private-address guard. The name still needs an allow rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AddHost {
    pub name: HostName,
    pub addr: IpAddr,
}

impl AddHost {
    /// `NAME:IP` or `NAME=IP`; IPv6 bare or in brackets: `db:fd00::5`, `db:[fd00::5]`.
    pub fn parse(value: &str) -> Result<Self, NetworkError> {
        let fail = |problem: String| NetworkError::AddHost {
            input: shown(value),
            problem,
        };
        let (name, addr) = value
            .split_once([':', '='])
            .ok_or_else(|| fail("there is no ':' between the name and the address".to_owned()))?;
        let name = HostName::parse(name).map_err(|e| match e {
            NetworkError::Name { input, problem } => {
                fail(format!("the name '{input}' is invalid: {problem}"))
            }
            other => fail(other.to_string()),
        })?;
        let unbracketed = addr
            .strip_prefix('[')
            .and_then(|a| a.strip_suffix(']'))
            .unwrap_or(addr);
        let addr = match unbracketed.parse::<IpAddr>() {
            Ok(ip) => ip.to_canonical(),
            Err(_) if addr == "host-gateway" => {
                return Err(fail(
                    "'host-gateway' is not supported; write the host's address".to_owned(),
                ));
            }
            Err(_) => {
                return Err(fail(format!(
                    "'{}' is not an IP address (IPv4 in dotted decimal or IPv6)",
                    shown(addr)
                )));
            }
        };
        if addr.is_unspecified() {
            return Err(fail(format!(
                "{addr} is the unspecified address, which reaches the sandbox host itself; write the address the name should reach"
            )));
        }
        Ok(Self { name, addr })
    }
}

impl fmt::Display for AddHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.addr {
            IpAddr::V4(a) => write!(f, "{}:{a}", self.name),
            IpAddr::V6(a) => write!(f, "{}:[{a}]", self.name),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn allow(spec: &str) -> Rule {
        Rule::parse(Action::Allow, spec).unwrap()
    }

    fn name(s: &str) -> HostName {
        HostName::parse(s).unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// The rendered error of a rule that must be refused.
    fn refused(spec: &str) -> String {
        match Rule::parse(Action::Allow, spec) {
            Ok(rule) => panic!("{spec:?} was accepted as {rule}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn every_rule_form_parses_to_its_target_and_ports() {
        let cases: &[(&str, Target, Option<PortRange>, &str)] = &[
            (
                "GitHub.com",
                Target::Name(name("github.com")),
                None,
                "allow github.com",
            ),
            (
                "github.com:443",
                Target::Name(name("github.com")),
                PortRange::single(443),
                "allow github.com:443",
            ),
            (
                "github.com:8000-8080",
                Target::Name(name("github.com")),
                PortRange::new(8000, 8080),
                "allow github.com:8000-8080",
            ),
            (
                "*.github.com:443",
                Target::Wildcard(name("github.com")),
                PortRange::single(443),
                "allow *.github.com:443",
            ),
            ("*", Target::AnyName, None, "allow *"),
            ("*:53", Target::AnyName, PortRange::single(53), "allow *:53"),
            ("1.2.3.4", Target::Ip(ip("1.2.3.4")), None, "allow 1.2.3.4"),
            (
                "1.2.3.4:22",
                Target::Ip(ip("1.2.3.4")),
                PortRange::single(22),
                "allow 1.2.3.4:22",
            ),
            (
                "10.0.0.0/8",
                Target::Cidr(Cidr::parse("10.0.0.0/8").unwrap()),
                None,
                "allow 10.0.0.0/8",
            ),
            (
                "10.0.0.0/8:5432",
                Target::Cidr(Cidr::parse("10.0.0.0/8").unwrap()),
                PortRange::single(5432),
                "allow 10.0.0.0/8:5432",
            ),
            (
                "[2001:db8::1]:443",
                Target::Ip(ip("2001:db8::1")),
                PortRange::single(443),
                "allow [2001:db8::1]:443",
            ),
            (
                "[2001:db8::1]",
                Target::Ip(ip("2001:db8::1")),
                None,
                "allow 2001:db8::1",
            ),
            (
                "2001:DB8::1",
                Target::Ip(ip("2001:db8::1")),
                None,
                "allow 2001:db8::1",
            ),
            (
                "2001:db8::/32",
                Target::Cidr(Cidr::parse("2001:db8::/32").unwrap()),
                None,
                "allow 2001:db8::/32",
            ),
            (
                "[2001:db8::/32]:443",
                Target::Cidr(Cidr::parse("2001:db8::/32").unwrap()),
                PortRange::single(443),
                "allow [2001:db8::/32]:443",
            ),
            (
                "[2001:db8::/32]:1-1024",
                Target::Cidr(Cidr::parse("2001:db8::/32").unwrap()),
                PortRange::new(1, 1024),
                "allow [2001:db8::/32]:1-1024",
            ),
            ("::1", Target::Ip(ip("::1")), None, "allow ::1"),
            // Mapped IPv6 is the IPv4 address.
            (
                "::ffff:127.0.0.1",
                Target::Ip(ip("127.0.0.1")),
                None,
                "allow 127.0.0.1",
            ),
            // A range of every port is no restriction.
            (
                "example.com:1-65535",
                Target::Name(name("example.com")),
                None,
                "allow example.com",
            ),
            (
                "bücher.de:443",
                Target::Name(name("xn--bcher-kva.de")),
                PortRange::single(443),
                "allow xn--bcher-kva.de:443",
            ),
        ];
        for (spec, target, ports, text) in cases {
            let rule = allow(spec);
            assert_eq!(&rule.target, target, "{spec}");
            assert_eq!(&rule.ports, ports, "{spec}");
            assert_eq!(rule.text, *text, "{spec}");
            assert_eq!(rule.to_string(), *text);
            // The canonical text parses back to the same rule.
            assert_eq!(Rule::parse_line(text).unwrap(), rule, "{text}");
        }
        assert_eq!(
            Rule::parse(Action::Deny, "evil.com").unwrap().text,
            "deny evil.com"
        );
        // A bare IPv6 address takes no port: its last group is part of the address.
        let ambiguous = allow("2001:db8::1:443");
        assert_eq!(ambiguous.target, Target::Ip(ip("2001:db8::1:443")));
        assert_eq!(ambiguous.ports, None);
    }

    #[test]
    fn bad_ports_are_named() {
        for (spec, expected) in [
            ("a.com:0", "port '0' is not a number from 1 to 65535"),
            ("a.com:65536", "port '65536'"),
            ("a.com:x", "port 'x'"),
            ("a.com:+80", "port '+80'"),
            ("a.com:80-", "port ''"),
            ("a.com:-80", "port ''"),
            ("a.com:1-2-3", "port '2-3'"),
            ("a.com:", "nothing follows ':'"),
            (
                "a.com:80-70",
                "'80-70' is reversed; write the lower port first, as 70-80",
            ),
            ("[::1]:0", "port '0'"),
            ("[::1]443", "after ']' is not :PORT"),
        ] {
            let msg = refused(spec);
            assert!(msg.contains(expected), "{spec}: {msg}");
            assert!(
                msg.contains(&format!("invalid network rule 'allow {spec}'")),
                "{msg}"
            );
            assert!(msg.contains("a rule is DOMAIN"), "{msg}");
        }
    }

    #[test]
    fn bad_targets_are_named() {
        for (spec, expected) in [
            ("", "empty"),
            ("*.*.com", "wrong place"),
            ("*foo.com", "wrong place"),
            ("foo*.com", "wrong place"),
            ("a.*.com", "wrong place"),
            ("**", "wrong place"),
            ("*.", "empty"),
            ("a..b", "empty label"),
            ("-a.com", "'-a'"),
            ("allowed.com\0.evil.com", "NUL"),
            ("user@host", "user@host"),
            ("@evil.com", "'@'"),
            ("ftp://github.com", "'ftp' is not http or https"),
            ("https://", "no host"),
            ("https://u@github.com/", "user name"),
            ("https://github.com?x=1", "not a query"),
            ("get https://github.com/", "upper case: GET"),
            ("GET https://github.com/a/../b", "'..' segment"),
            ("GET https://github.com:0/", "from 1 to 65535"),
            ("GET  x https://github.com/", "one space"),
            ("github.com/x", "not a URL or a path"),
            ("10.0.0/8", "'10.0.0' is not an IP address"),
            ("010.0.0.0/8", "'010.0.0.0' is not an IP address"),
            ("10.0.0.1/8", "host bits"),
            ("10.0.0.0/33", "from 0 to 32"),
            ("2001:db8::1/32", "host bits"),
            ("2001:db8:::1", "goes in brackets"),
            (
                "[1.2.3.4]:80",
                "'1.2.3.4' is not an IPv6 address (brackets are for IPv6 only)",
            ),
            ("[10.0.0.0/8]:80", "'10.0.0.0' is not an IPv6 address"),
            ("[fd00::/129]", "from 0 to 128"),
            ("[::1", "no closing ']'"),
            ("127.1", "looks like an IPv4 address"),
            ("2130706433", "looks like an IPv4 address"),
            ("0x7f.1", "looks like an IPv4 address"),
            ("0177.0.0.1", "looks like an IPv4 address"),
            ("*.127.0.0.1", "is an IP address, not a host name"),
        ] {
            let msg = refused(spec);
            assert!(msg.contains(expected), "{spec:?}: {msg}");
        }
        // Control characters are escaped in the message.
        assert!(refused("a\u{1b}[2J.com").contains("\\u{1b}"));
    }

    #[test]
    fn config_lines_need_an_action_and_one_target() {
        let rule = Rule::parse_line("  deny   *.evil.com:1-1024 ").unwrap();
        assert_eq!(rule.action, Action::Deny);
        assert_eq!(rule.text, "deny *.evil.com:1-1024");
        for line in [
            "",
            "allow",
            "github.com",
            "permit github.com",
            "Allow github.com",
            "allow a.com b.com",
        ] {
            let msg = Rule::parse_line(line).unwrap_err().to_string();
            assert!(
                msg.contains("write 'allow TARGET[:PORTS]'"),
                "{line:?}: {msg}"
            );
        }
        let msg = Rule::parse_line("allow a.com:0").unwrap_err().to_string();
        assert!(msg.contains("port '0'"), "{msg}");
        assert!(
            Action::parse("drop")
                .unwrap_err()
                .to_string()
                .contains("'allow' or 'deny'")
        );
    }

    #[test]
    fn name_targets_match_names_only_and_at_label_boundaries() {
        let exact = allow("allowed.com").target;
        let wildcard = allow("*.allowed.com").target;
        for tricky in [
            "allowed.com.evil.com",
            "evilallowed.com",
            "allowed.co",
            "llowed.com",
        ] {
            assert!(!exact.matches_name(&name(tricky)), "{tricky}");
            assert!(!wildcard.matches_name(&name(tricky)), "{tricky}");
        }
        assert!(exact.matches_name(&name("ALLOWED.COM.")));
        assert!(!exact.matches_name(&name("api.allowed.com")));
        assert!(wildcard.matches_name(&name("api.allowed.com")));
        assert!(wildcard.matches_name(&name("a.b.allowed.com")));
        assert!(
            !wildcard.matches_name(&name("allowed.com")),
            "never the apex"
        );
        assert!(Target::AnyName.matches_name(&name("anything.example")));
        // Names never match addresses, and the other way round.
        assert!(!Target::AnyName.matches_addr(ip("1.2.3.4")));
        assert!(!allow("1.2.3.4").target.matches_name(&name("a.com")));
        assert!(allow("1.2.3.4").target.matches_addr(ip("::ffff:1.2.3.4")));
        assert!(!allow("1.2.3.4").target.matches_addr(ip("1.2.3.5")));
        assert!(allow("10.0.0.0/8").target.matches_addr(ip("10.9.9.9")));
    }

    #[test]
    fn port_ranges_are_inclusive() {
        let rule = allow("a.com:8000-8080");
        assert!(!rule.covers_port(7999));
        assert!(rule.covers_port(8000));
        assert!(rule.covers_port(8080));
        assert!(!rule.covers_port(8081));
        assert!(allow("a.com").covers_port(1) && allow("a.com").covers_port(65535));
        assert_eq!(PortRange::new(0, 1), None);
        assert_eq!(PortRange::new(2, 1), None);
        assert_eq!(
            PortRange::single(65535).map(|r| r.to_string()).as_deref(),
            Some("65535")
        );
    }

    #[test]
    fn add_host_accepts_docker_syntax() {
        let h = AddHost::parse("DB.internal:10.0.0.5").unwrap();
        assert_eq!((h.name.as_str(), h.addr), ("db.internal", ip("10.0.0.5")));
        assert_eq!(AddHost::parse("db=10.0.0.5").unwrap().addr, ip("10.0.0.5"));
        assert_eq!(AddHost::parse("db:fd00::5").unwrap().addr, ip("fd00::5"));
        assert_eq!(AddHost::parse("db:[fd00::5]").unwrap().addr, ip("fd00::5"));
        assert_eq!(
            AddHost::parse("db:::ffff:10.0.0.5").unwrap().addr,
            ip("10.0.0.5")
        );
        assert_eq!(
            AddHost::parse("db:[fd00::5]").unwrap().to_string(),
            "db:[fd00::5]"
        );
        assert_eq!(
            AddHost::parse("db:127.0.0.1").unwrap().to_string(),
            "db:127.0.0.1"
        );
    }

    #[test]
    fn add_host_errors_name_the_problem() {
        for (value, expected) in [
            ("db", "no ':'"),
            (":10.0.0.5", "name '' is invalid"),
            ("db:", "'' is not an IP address"),
            ("db:host-gateway", "'host-gateway' is not supported"),
            ("db:10.0.0.256", "'10.0.0.256' is not an IP address"),
            ("db:0.0.0.0", "unspecified"),
            ("db:[::]", "unspecified"),
            ("db@x:10.0.0.5", "'@'"),
            ("127.0.0.1:10.0.0.5", "is an IP address, not a host name"),
            ("*.db:10.0.0.5", "'*'"),
        ] {
            let msg = AddHost::parse(value).unwrap_err().to_string();
            assert!(msg.contains(expected), "{value}: {msg}");
            assert!(msg.contains("write NAME:IP"), "{msg}");
        }
    }

    #[test]
    fn method_and_path_rules_parse_with_their_defaults() {
        let r = Rule::parse(
            Action::Allow,
            "GET,HEAD https://API.GitHub.com/repos/acme/**",
        )
        .unwrap();
        assert_eq!(
            r.text,
            "allow GET,HEAD https://api.github.com/repos/acme/**"
        );
        assert_eq!(r.ports, PortRange::single(443));
        let scope = r.http.as_ref().unwrap();
        assert_eq!(scope.scheme, Scheme::Https);
        assert!(scope.methods.contains("HEAD") && !scope.methods.contains("POST"));
        let r = Rule::parse(Action::Deny, "http://10.0.0.5:8080").unwrap();
        assert_eq!(r.text, "deny * http://10.0.0.5:8080/**");
        assert_eq!(r.ports, PortRange::single(8080));
        assert_eq!(r.target, Target::Ip(ip("10.0.0.5")));
        let r = Rule::parse(Action::Allow, "* https://[2001:db8::1]:8443/x").unwrap();
        assert_eq!(r.text, "allow * https://[2001:db8::1]:8443/x");
        let r = Rule::parse(Action::Allow, "POST https://*.example.com/v1/*").unwrap();
        assert_eq!(r.target, Target::Wildcard(name("example.com")));
        // The canonical text parses back to the same rule, as a config line too.
        for text in [
            "allow GET,HEAD https://api.github.com/repos/acme/**",
            "deny * http://10.0.0.5:8080/**",
            "allow POST https://*.example.com/v1/*",
        ] {
            let again = Rule::parse_line(text).unwrap();
            assert_eq!(again.text, text);
        }
        assert_eq!(
            Rule::parse_line("allow https://a.test/x").unwrap().text,
            "allow * https://a.test/x"
        );
    }
}
