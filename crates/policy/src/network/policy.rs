//! Decisions: whether a name may be resolved and whether a connection may be made.
//!
//! Rules are tried in order and the first that matches decides; nothing matching means
//! deny. An allowed connection to special space ([`is_special`]) is then refused
//! unless the user opened that space on purpose: by a rule whose address or network
//! lies entirely inside it (`--allow 127.0.0.1`, `--allow 10.0.0.0/8`, not
//! `--allow 0.0.0.0/0`), or by pinning the name with `--add-host`. A name allowed by
//! a name rule that resolves to such an address is DNS rebinding, and is refused.
//! This machine's own addresses ([`OwnAddresses`]) are closed the same way, except
//! that only a rule naming exactly the address (or a pin) opens one.
//!
//! Every address is compared in [`canonical`] form, so an IPv6 spelling of an IPv4
//! address (`::ffff:a.b.c.d`, `::a.b.c.d`, `64:ff9b::a.b.c.d`) is judged as that address.

use std::collections::HashSet;
use std::fmt;
use std::net::IpAddr;

use super::{
    Action, AddHost, HostName, HttpRequest, Rule, Scheme, Target, canonical, is_special,
    path_problem,
};

/// The rules and pinned names of `--network allow`. Plain data: cheap to share behind
/// an `Arc` and to replace as a whole when the policy changes at run time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkPolicy {
    /// In precedence order: the first that matches decides.
    pub rules: Vec<Rule>,
    /// In the order given; for the same name a later pin wins (flags come last).
    pub hosts: Vec<AddHost>,
    /// Hosts whose TLS is never inspected (`--tls-passthrough`), for clients that pin
    /// their server's certificate: method and path rules naming them do not apply.
    pub passthrough: Vec<Target>,
}

/// Where a connection goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The name the sandbox resolved through our resolver to reach `addr`, if any.
    pub name: Option<HostName>,
    /// The address the connection would really reach.
    pub addr: IpAddr,
    /// Whether `addr` is the address `--add-host` pinned `name` to (see
    /// [`NetworkPolicy::destination`], which sets it).
    pub pinned: bool,
}

/// The rule that decided, by position in [`NetworkPolicy::rules`] and canonical text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleMatch {
    pub index: usize,
    pub text: String,
}

/// Why a decision came out as it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// A rule matched and its action decided.
    Rule,
    /// No rule matched.
    DefaultDeny,
    /// An allow rule matched an address in special space that it does not name.
    PrivateAddress,
    /// A name allowed by a rule resolved to an address in special space.
    DnsRebinding,
    /// An allow rule matched one of this machine's own addresses without naming it.
    OwnAddress,
    /// An inspected host's request that no method and path rule covers.
    NoHttpRule,
    /// A request path that servers may read differently from the rules (`..`, `%2e`).
    AmbiguousPath,
}

impl Reason {
    /// The short form used in session events.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rule => "rule",
            Self::DefaultDeny => "default deny",
            Self::PrivateAddress => "private address",
            Self::DnsRebinding => "dns rebinding",
            Self::OwnAddress => "own address",
            Self::NoHttpRule => "no method and path rule",
            Self::AmbiguousPath => "ambiguous path",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// The rule that matched, if any; for the private-address refusals, the allow
    /// rule that was overruled.
    pub rule: Option<RuleMatch>,
    pub reason: Reason,
}

impl Decision {
    fn by_rule(allowed: bool, index: usize, rule: &Rule) -> Self {
        Self {
            allowed,
            rule: Some(RuleMatch {
                index,
                text: rule.text.clone(),
            }),
            reason: Reason::Rule,
        }
    }

    fn default_deny() -> Self {
        Self {
            allowed: false,
            rule: None,
            reason: Reason::DefaultDeny,
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.allowed { "allowed" } else { "denied" };
        match (&self.rule, self.reason) {
            (Some(rule), Reason::Rule) => write!(f, "{verdict} by '{}'", rule.text),
            (_, Reason::NoHttpRule) => write!(
                f,
                "{verdict}: no method and path rule for this host matched the request"
            ),
            (_, Reason::AmbiguousPath) => write!(
                f,
                "{verdict}: the path has a '.' or '..' segment, a backslash or a control character (encoded or not), which servers may read differently"
            ),
            (_, Reason::DefaultDeny) | (None, _) => write!(f, "{verdict}: no rule matched"),
            (Some(rule), Reason::PrivateAddress) => write!(
                f,
                "{verdict}: private address ('{}' matched, but only a rule naming the address or --add-host opens private space)",
                rule.text
            ),
            (Some(rule), Reason::DnsRebinding) => write!(
                f,
                "{verdict}: a public name resolved to a private address (DNS rebinding; '{}' matched)",
                rule.text
            ),
            (Some(rule), Reason::OwnAddress) => write!(
                f,
                "{verdict}: this machine's own address ('{}' matched, but only a rule naming exactly the address or --add-host opens it)",
                rule.text
            ),
        }
    }
}

impl NetworkPolicy {
    pub fn new(rules: Vec<Rule>, hosts: Vec<AddHost>) -> Self {
        Self {
            rules,
            hosts,
            passthrough: Vec::new(),
        }
    }

    /// Whether our resolver may answer for `name`: whether some port exists on which a
    /// connection to it could be allowed. Only name rules take part. A deny rule limited
    /// to some ports does not decide, since other ports may still be allowed further
    /// down. A pinned name needs an allow rule like any other: pinning only fixes the
    /// address.
    pub fn decide_name(&self, name: &HostName) -> Decision {
        for (index, rule) in self.rules.iter().enumerate() {
            if !rule.target.matches_name(name) {
                continue;
            }
            match (rule.action, rule.ports, &rule.http) {
                (Action::Allow, _, _) => return Decision::by_rule(true, index, rule),
                (Action::Deny, None, None) => return Decision::by_rule(false, index, rule),
                // A method and path deny refuses some requests, never the name.
                (Action::Deny, _, _) => {}
            }
        }
        Decision::default_deny()
    }

    /// Whether a connection to `dest` on `port` may be made. Name rules match
    /// `dest.name`, address rules match `dest.addr`; the first rule that matches either
    /// on this port decides, and an allow is then checked against special space.
    ///
    /// The caller must only set `dest.name` to a name whose lookup through our resolver
    /// returned `dest.addr`, or a name rule would vouch for an address it never saw.
    pub fn decide_connect(&self, dest: &Destination, port: u16) -> Decision {
        let addr = canonical(dest.addr);
        // A method and path deny refuses requests, not the connection.
        let matches = |rule: &Rule| {
            !(rule.http.is_some() && rule.action == Action::Deny)
                && rule.covers_port(port)
                && (rule.target.matches_addr(addr)
                    || dest
                        .name
                        .as_ref()
                        .is_some_and(|n| rule.target.matches_name(n)))
        };
        let Some((index, rule)) = self.rules.iter().enumerate().find(|(_, r)| matches(r)) else {
            return Decision::default_deny();
        };
        let decision = Decision::by_rule(rule.action == Action::Allow, index, rule);
        if !decision.allowed || !is_special(addr) || dest.pinned || opens_special(&rule.target) {
            return decision;
        }
        Decision {
            allowed: false,
            reason: if dest.name.is_some() {
                Reason::DnsRebinding
            } else {
                Reason::PrivateAddress
            },
            ..decision
        }
    }

    /// [`NetworkPolicy::decide_connect`], with this machine's own addresses closed too:
    /// a service bound to all interfaces, hidden from the network by a firewall, must
    /// not be reachable through "allow 0.0.0.0/0" or a name that resolves to it. Only a
    /// pin or the rule that decided naming exactly that address opens it.
    pub fn decide_connect_from(
        &self,
        own: &OwnAddresses,
        dest: &Destination,
        port: u16,
    ) -> Decision {
        let decision = self.decide_connect(dest, port);
        if !decision.allowed || dest.pinned || !own.contains(dest.addr) {
            return decision;
        }
        let exact = decision
            .rule
            .as_ref()
            .and_then(|m| self.rules.get(m.index))
            .is_some_and(|r| r.target.is_exactly(dest.addr));
        if exact {
            return decision;
        }
        Decision {
            allowed: false,
            reason: Reason::OwnAddress,
            ..decision
        }
    }

    /// Whether connections to `dest` on `port` are inspected, and as what: the first
    /// method and path rule naming the destination on that port says. Hosts under
    /// `--tls-passthrough` never are.
    pub fn inspection(&self, dest: &Destination, port: u16) -> Option<Scheme> {
        if let Some(name) = &dest.name
            && self.passthrough.iter().any(|t| t.matches_name(name))
        {
            return None;
        }
        if self.passthrough.iter().any(|t| t.matches_addr(dest.addr)) {
            return None;
        }
        self.rules
            .iter()
            .filter(|rule| rule.covers_port(port) && targets(rule, dest))
            .find_map(|rule| rule.http.as_ref().map(|scope| scope.scheme))
    }

    /// Whether a request on an inspected connection to `dest` on `port` may be sent:
    /// the first method and path rule naming the destination, port, scheme, method and
    /// path decides; none means refused ([`Reason::NoHttpRule`]). A path servers may
    /// read differently from the matcher is refused first ([`Reason::AmbiguousPath`]).
    pub fn decide_request(&self, dest: &Destination, port: u16, req: &HttpRequest<'_>) -> Decision {
        if path_problem(req.path).is_some() {
            return Decision {
                allowed: false,
                rule: None,
                reason: Reason::AmbiguousPath,
            };
        }
        // Matched as servers route: the canonical path, the method in upper case.
        let path = super::canonical_path(req.path);
        let method = req.method.to_ascii_uppercase();
        let req = HttpRequest {
            scheme: req.scheme,
            method: &method,
            path: &path,
        };
        let found = self.rules.iter().enumerate().find(|(_, rule)| {
            rule.covers_port(port)
                && rule.http.as_ref().is_some_and(|scope| scope.matches(&req))
                && targets(rule, dest)
        });
        match found {
            Some((index, rule)) => Decision::by_rule(rule.action == Action::Allow, index, rule),
            None => Decision {
                allowed: false,
                rule: None,
                reason: Reason::NoHttpRule,
            },
        }
    }

    /// The method and path rules that name `dest` on `port`, for a refusal's message.
    pub fn request_rules(&self, dest: &Destination, port: u16) -> Vec<&str> {
        self.rules
            .iter()
            .filter(|rule| rule.http.is_some() && rule.covers_port(port) && targets(rule, dest))
            .map(|rule| rule.text.as_str())
            .collect()
    }

    /// The addresses `--add-host` pinned `name` to, the winning (latest) pin first.
    pub fn pins<'a>(&'a self, name: &'a HostName) -> impl Iterator<Item = IpAddr> + 'a {
        self.hosts
            .iter()
            .rev()
            .filter(move |pin| pin.name == *name)
            .map(|pin| pin.addr)
    }

    /// The address `name` is pinned to: the last `--add-host` for it wins, so that a
    /// flag outranks a config file (which come first). Use [`NetworkPolicy::pins`] to
    /// answer for each address family.
    pub fn pinned(&self, name: &HostName) -> Option<IpAddr> {
        self.pins(name).next()
    }

    /// A destination reached through `name` (if any), with `pinned` set when `addr` is
    /// one of the addresses the name was pinned to.
    pub fn destination(&self, name: Option<HostName>, addr: IpAddr) -> Destination {
        let pinned = name
            .as_ref()
            .is_some_and(|n| self.pins(n).any(|pin| canonical(pin) == canonical(addr)));
        Destination { name, addr, pinned }
    }
}

/// Whether `rule`'s target names `dest`, by its name or its address.
fn targets(rule: &Rule, dest: &Destination) -> bool {
    rule.target.matches_addr(dest.addr)
        || dest
            .name
            .as_ref()
            .is_some_and(|n| rule.target.matches_name(n))
}

/// This machine's own addresses, kept and looked up in [`canonical`] form.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnAddresses(HashSet<IpAddr>);

impl OwnAddresses {
    pub fn contains(&self, addr: IpAddr) -> bool {
        self.0.contains(&canonical(addr))
    }
}

impl FromIterator<IpAddr> for OwnAddresses {
    fn from_iter<I: IntoIterator<Item = IpAddr>>(addrs: I) -> Self {
        Self(addrs.into_iter().map(canonical).collect())
    }
}

/// Whether a rule for `target` deliberately opens special space: an address or network
/// that lies entirely inside it.
fn opens_special(target: &Target) -> bool {
    match target {
        Target::Ip(ip) => is_special(*ip),
        Target::Cidr(net) => net.is_special(),
        Target::Name(_) | Target::Wildcard(_) | Target::AnyName => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// A policy from config lines and `NAME:IP` pins.
    fn policy(rules: &[&str], hosts: &[&str]) -> NetworkPolicy {
        NetworkPolicy::new(
            rules.iter().map(|r| Rule::parse_line(r).unwrap()).collect(),
            hosts.iter().map(|h| AddHost::parse(h).unwrap()).collect(),
        )
    }

    fn name(s: &str) -> HostName {
        HostName::parse(s).unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// A connection to a bare address (no name looked up).
    fn to_addr(p: &NetworkPolicy, addr: &str, port: u16) -> Decision {
        p.decide_connect(&p.destination(None, ip(addr)), port)
    }

    /// A connection to `addr`, reached by looking up `host`.
    fn via_name(p: &NetworkPolicy, host: &str, addr: &str, port: u16) -> Decision {
        p.decide_connect(&p.destination(Some(name(host)), ip(addr)), port)
    }

    /// (allowed, index of the deciding rule, reason).
    fn verdict(d: &Decision) -> (bool, Option<usize>, Reason) {
        (d.allowed, d.rule.as_ref().map(|r| r.index), d.reason)
    }

    const PUBLIC: &str = "140.82.112.3";

    #[test]
    fn an_empty_policy_denies_everything() {
        let p = NetworkPolicy::default();
        assert_eq!(
            verdict(&p.decide_name(&name("github.com"))),
            (false, None, Reason::DefaultDeny)
        );
        assert_eq!(
            verdict(&to_addr(&p, PUBLIC, 443)),
            (false, None, Reason::DefaultDeny)
        );
        assert_eq!(
            verdict(&via_name(&p, "github.com", PUBLIC, 443)),
            (false, None, Reason::DefaultDeny)
        );
    }

    #[test]
    fn first_match_wins() {
        let p = policy(
            &[
                "deny api.github.com",
                "allow *.github.com",
                "allow github.com:443",
            ],
            &[],
        );
        let api = p.decide_name(&name("api.github.com"));
        assert_eq!(verdict(&api), (false, Some(0), Reason::Rule));
        assert_eq!(api.rule.unwrap().text, "deny api.github.com");
        assert_eq!(
            verdict(&p.decide_name(&name("raw.github.com"))),
            (true, Some(1), Reason::Rule)
        );
        assert_eq!(
            verdict(&p.decide_name(&name("github.com"))),
            (true, Some(2), Reason::Rule)
        );
        assert_eq!(
            verdict(&via_name(&p, "api.github.com", PUBLIC, 443)),
            (false, Some(0), Reason::Rule)
        );
        assert_eq!(
            verdict(&via_name(&p, "raw.github.com", PUBLIC, 22)),
            (true, Some(1), Reason::Rule)
        );

        // The same rules the other way round: the allow comes first and wins.
        let p = policy(&["allow *.github.com", "deny api.github.com"], &[]);
        assert_eq!(
            verdict(&p.decide_name(&name("api.github.com"))),
            (true, Some(0), Reason::Rule)
        );
    }

    #[test]
    fn tricky_names_do_not_match_rules_they_resemble() {
        let p = policy(&["allow allowed.com", "allow *.allowed.com"], &[]);
        for tricky in ["allowed.com.evil.com", "evilallowed.com", "allowed.co"] {
            assert!(!p.decide_name(&name(tricky)).allowed, "{tricky}");
            assert!(!via_name(&p, tricky, PUBLIC, 443).allowed, "{tricky}");
        }
        assert!(p.decide_name(&name("ALLOWED.COM.")).allowed);
        assert!(
            p.decide_name(&HostName::parse_wire("Allowed.Com.").unwrap())
                .allowed
        );
        assert!(HostName::parse_wire("allowed.com\0.evil.com").is_err());
        // A name rule never matches a bare connection to the name's address.
        assert!(!to_addr(&p, PUBLIC, 443).allowed);
    }

    #[test]
    fn ports_restrict_connections() {
        let p = policy(
            &[
                "allow github.com:443",
                "allow 1.1.1.1:53",
                "allow 8.8.8.0/24:8000-8080",
            ],
            &[],
        );
        assert!(via_name(&p, "github.com", PUBLIC, 443).allowed);
        assert_eq!(
            verdict(&via_name(&p, "github.com", PUBLIC, 22)),
            (false, None, Reason::DefaultDeny)
        );
        assert!(to_addr(&p, "1.1.1.1", 53).allowed);
        assert!(!to_addr(&p, "1.1.1.1", 443).allowed);
        assert!(to_addr(&p, "8.8.8.8", 8000).allowed && to_addr(&p, "8.8.8.8", 8080).allowed);
        assert!(!to_addr(&p, "8.8.8.8", 7999).allowed && !to_addr(&p, "8.8.8.8", 8081).allowed);
        // A deny on one port leaves the others to the rules below it.
        let p = policy(&["deny *.example.com:25", "allow *.example.com"], &[]);
        assert_eq!(
            verdict(&via_name(&p, "mx.example.com", PUBLIC, 25)),
            (false, Some(0), Reason::Rule)
        );
        assert_eq!(
            verdict(&via_name(&p, "mx.example.com", PUBLIC, 587)),
            (true, Some(1), Reason::Rule)
        );
    }

    #[test]
    fn names_are_resolved_only_if_some_port_could_be_allowed() {
        // A port-scoped deny does not decide; the allow below it does.
        let p = policy(&["deny github.com:22", "allow github.com"], &[]);
        assert_eq!(
            verdict(&p.decide_name(&name("github.com"))),
            (true, Some(1), Reason::Rule)
        );
        // A deny on every port decides, written either way.
        for all in ["deny github.com", "deny github.com:1-65535"] {
            let p = policy(&[all, "allow github.com"], &[]);
            assert_eq!(
                verdict(&p.decide_name(&name("github.com"))),
                (false, Some(0), Reason::Rule),
                "{all}"
            );
        }
        // A port-scoped allow is enough to resolve.
        let p = policy(&["deny *.example.com:25", "allow *:443"], &[]);
        assert_eq!(
            verdict(&p.decide_name(&name("a.example.com"))),
            (true, Some(1), Reason::Rule)
        );
        // Only port-scoped denies: default deny.
        let p = policy(&["deny github.com:22"], &[]);
        assert_eq!(
            verdict(&p.decide_name(&name("github.com"))),
            (false, None, Reason::DefaultDeny)
        );
        // Address rules never answer for names.
        let p = policy(&["allow 0.0.0.0/0", "allow 140.82.112.3"], &[]);
        assert_eq!(
            verdict(&p.decide_name(&name("github.com"))),
            (false, None, Reason::DefaultDeny)
        );
    }

    #[test]
    fn any_name_covers_names_but_not_bare_addresses() {
        let p = policy(&["allow *"], &[]);
        assert!(p.decide_name(&name("anything.example")).allowed);
        assert!(via_name(&p, "anything.example", PUBLIC, 443).allowed);
        assert!(!to_addr(&p, PUBLIC, 443).allowed);
    }

    #[test]
    fn address_and_name_rules_compete_in_order() {
        let p = policy(&["deny 140.82.112.0/20", "allow github.com"], &[]);
        assert_eq!(
            verdict(&via_name(&p, "github.com", PUBLIC, 443)),
            (false, Some(0), Reason::Rule)
        );
        let p = policy(&["allow github.com", "deny 140.82.112.0/20"], &[]);
        assert_eq!(
            verdict(&via_name(&p, "github.com", PUBLIC, 443)),
            (true, Some(0), Reason::Rule)
        );
        // A mapped IPv6 destination is its IPv4 address.
        let p = policy(&["deny 140.82.112.0/20", "allow ::/0"], &[]);
        assert_eq!(
            verdict(&to_addr(&p, "::ffff:140.82.112.3", 443)),
            (false, Some(0), Reason::Rule)
        );
    }

    #[test]
    fn special_addresses_need_a_rule_that_names_them() {
        let everything = policy(&["allow 0.0.0.0/0", "allow ::/0"], &[]);
        for special in [
            "0.0.0.0",
            "10.1.2.3",
            "100.64.0.1",
            "127.0.0.1",
            "169.254.169.254",
            "172.16.0.1",
            "192.0.0.170",
            "192.168.1.1",
            "198.18.0.1",
            "224.0.0.251",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "fd00::1",
            "fe80::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::169.254.169.254",
        ] {
            // 0.0.0.0/0 matches IPv4 (mapped too), ::/0 the rest.
            let rule = if canonical(ip(special)).is_ipv4() {
                0
            } else {
                1
            };
            let d = to_addr(&everything, special, 80);
            assert_eq!(
                verdict(&d),
                (false, Some(rule), Reason::PrivateAddress),
                "{special}"
            );
        }
        assert!(to_addr(&everything, PUBLIC, 80).allowed);
        assert!(to_addr(&everything, "2606:4700::1111", 80).allowed);
        assert!(to_addr(&everything, "64:ff9b::8.8.8.8", 80).allowed);

        // Naming the address or a range inside special space opens it.
        let p = policy(
            &[
                "allow 127.0.0.1:8080",
                "allow 10.0.0.0/8",
                "allow 169.254.169.254",
                "allow ::1",
                "allow fd00::/8",
            ],
            &[],
        );
        assert!(to_addr(&p, "127.0.0.1", 8080).allowed);
        assert!(to_addr(&p, "::ffff:127.0.0.1", 8080).allowed);
        assert!(!to_addr(&p, "127.0.0.1", 8081).allowed);
        assert!(to_addr(&p, "10.200.0.1", 5432).allowed);
        assert!(to_addr(&p, "169.254.169.254", 80).allowed);
        assert!(to_addr(&p, "::1", 80).allowed);
        assert!(to_addr(&p, "fd00::5", 80).allowed);
        // A range that reaches beyond special space does not.
        let p = policy(&["allow 10.0.0.0/7", "allow 169.254.0.0/15"], &[]);
        assert_eq!(
            verdict(&to_addr(&p, "10.0.0.1", 80)),
            (false, Some(0), Reason::PrivateAddress)
        );
        assert_eq!(
            verdict(&to_addr(&p, "169.254.169.254", 80)),
            (false, Some(1), Reason::PrivateAddress)
        );
        assert!(to_addr(&p, "11.0.0.1", 80).allowed);
    }

    #[test]
    fn allow_everything_does_not_open_the_metadata_service() {
        let p = policy(&["allow 0.0.0.0/0", "allow *"], &[]);
        let d = to_addr(&p, "169.254.169.254", 80);
        assert_eq!(verdict(&d), (false, Some(0), Reason::PrivateAddress));
        assert_eq!(d.reason.as_str(), "private address");
        assert!(d.to_string().contains("private address"), "{d}");
        // Reached by a name, it is rebinding (0.0.0.0/0 still matches first).
        let d = via_name(&p, "metadata.google.internal", "169.254.169.254", 80);
        assert_eq!(verdict(&d), (false, Some(0), Reason::DnsRebinding));
        let p = policy(&["allow *"], &[]);
        let d = via_name(&p, "metadata.google.internal", "169.254.169.254", 80);
        assert_eq!(verdict(&d), (false, Some(0), Reason::DnsRebinding));
    }

    #[test]
    fn a_public_name_resolving_to_a_private_address_is_rebinding() {
        let p = policy(&["allow *.example.com"], &[]);
        assert!(via_name(&p, "api.example.com", "93.184.216.34", 443).allowed);
        for private in [
            "127.0.0.1",
            "10.0.0.1",
            "192.168.0.1",
            "::1",
            "::ffff:10.0.0.1",
            "fe80::1",
        ] {
            let d = via_name(&p, "api.example.com", private, 443);
            assert_eq!(
                verdict(&d),
                (false, Some(0), Reason::DnsRebinding),
                "{private}"
            );
            assert_eq!(d.reason.as_str(), "dns rebinding");
        }
        // A rule naming the private range still opens it for the name.
        let p = policy(&["allow *.corp.example", "allow 10.0.0.0/8"], &[]);
        assert!(!via_name(&p, "db.corp.example", "10.0.0.1", 5432).allowed);
        let p = policy(&["allow 10.0.0.0/8", "allow *.corp.example"], &[]);
        assert!(via_name(&p, "db.corp.example", "10.0.0.1", 5432).allowed);
    }

    #[test]
    fn pinned_names_reach_private_addresses_but_still_need_a_rule() {
        let p = policy(
            &["allow db.local:5432"],
            &["db.local:127.0.0.1", "other.local:10.0.0.9"],
        );
        assert_eq!(p.pinned(&name("db.local")), Some(ip("127.0.0.1")));
        assert!(via_name(&p, "db.local", "127.0.0.1", 5432).allowed);
        assert!(
            !via_name(&p, "db.local", "127.0.0.1", 22).allowed,
            "the rule's port still applies"
        );
        // Pinned to one address: another private address is still rebinding.
        assert_eq!(
            verdict(&via_name(&p, "db.local", "10.0.0.9", 5432)),
            (false, Some(0), Reason::DnsRebinding)
        );
        // A pinned name without an allow rule is neither resolved nor reachable.
        assert_eq!(
            verdict(&p.decide_name(&name("other.local"))),
            (false, None, Reason::DefaultDeny)
        );
        assert!(!via_name(&p, "other.local", "10.0.0.9", 5432).allowed);
        // Without a name, the pin does not apply.
        assert!(!to_addr(&p, "127.0.0.1", 5432).allowed);
    }

    #[test]
    fn the_last_pin_wins_and_each_is_a_pin() {
        let p = policy(&["allow db"], &["db:10.0.0.1", "db:fd00::1", "db:10.0.0.2"]);
        assert_eq!(p.pinned(&name("db")), Some(ip("10.0.0.2")));
        assert_eq!(
            p.pins(&name("db")).collect::<Vec<_>>(),
            [ip("10.0.0.2"), ip("fd00::1"), ip("10.0.0.1")]
        );
        assert!(p.destination(Some(name("db")), ip("fd00::1")).pinned);
        assert!(
            p.destination(Some(name("db")), ip("::ffff:10.0.0.1"))
                .pinned
        );
        assert!(!p.destination(Some(name("db")), ip("10.0.0.3")).pinned);
        assert_eq!(p.pinned(&name("other")), None);
        assert!(!p.destination(None, ip("10.0.0.1")).pinned);
    }

    #[test]
    fn ipv6_spellings_of_ipv4_addresses_meet_the_same_rules_and_guards() {
        // Private ranges: every spelling of 10.0.0.1 and of the metadata service.
        let everything = policy(&["allow 0.0.0.0/0", "allow ::/0", "allow *"], &[]);
        for spelling in [
            "10.0.0.1",
            "::ffff:10.0.0.1",
            "::10.0.0.1",
            "64:ff9b::10.0.0.1",
            "::ffff:169.254.169.254",
            "::169.254.169.254",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert_eq!(
                verdict(&to_addr(&everything, spelling, 80)),
                (false, Some(0), Reason::PrivateAddress),
                "{spelling}"
            );
            assert_eq!(
                verdict(&via_name(&everything, "a.example", spelling, 80)),
                (false, Some(0), Reason::DnsRebinding),
                "{spelling}"
            );
        }
        // Exact rules and networks match every spelling, and deny rules too.
        let p = policy(&["deny 8.8.8.8", "allow 10.0.0.5", "allow 1.2.3.0/24"], &[]);
        for spelling in ["8.8.8.8", "::ffff:8.8.8.8", "::8.8.8.8", "64:ff9b::808:808"] {
            assert_eq!(
                verdict(&to_addr(&p, spelling, 53)),
                (false, Some(0), Reason::Rule),
                "{spelling}"
            );
        }
        for spelling in ["::ffff:10.0.0.5", "::10.0.0.5", "64:ff9b::a00:5"] {
            assert_eq!(
                verdict(&to_addr(&p, spelling, 80)),
                (true, Some(1), Reason::Rule),
                "{spelling}"
            );
        }
        assert!(to_addr(&p, "64:ff9b::102:309", 80).allowed);
        assert!(!to_addr(&p, "64:ff9b::102:409", 80).allowed);
        // A pin matches the address it pins in any spelling.
        let p = policy(&["allow db.test"], &["db.test:10.0.0.1"]);
        for spelling in ["::ffff:10.0.0.1", "::10.0.0.1", "64:ff9b::a00:1"] {
            assert!(via_name(&p, "db.test", spelling, 80).allowed, "{spelling}");
        }
    }

    #[test]
    fn own_addresses_need_a_rule_naming_exactly_them() {
        let own: OwnAddresses = ["192.0.2.2", "11.22.33.44", "fd00::2"]
            .iter()
            .map(|a| ip(a))
            .collect();
        let decide = |p: &NetworkPolicy, host: Option<&str>, addr: &str| {
            let dest = p.destination(host.map(name), ip(addr));
            verdict(&p.decide_connect_from(&own, &dest, 80))
        };
        // A public address of this machine, reached by an allowed name, in every
        // spelling: the mapped form is what a resolver may return.
        let p = policy(&["allow own.test", "allow 0.0.0.0/0"], &[]);
        for spelling in [
            "11.22.33.44",
            "::ffff:11.22.33.44",
            "::11.22.33.44",
            "64:ff9b::b16:212c",
        ] {
            assert_eq!(
                decide(&p, Some("own.test"), spelling),
                (false, Some(0), Reason::OwnAddress),
                "{spelling}"
            );
            assert_eq!(
                decide(&p, None, spelling),
                (false, Some(1), Reason::OwnAddress),
                "{spelling}"
            );
        }
        assert_eq!(
            decide(&p, Some("own.test"), "11.22.33.45"),
            (true, Some(0), Reason::Rule)
        );
        // A private own address opened by a range is still closed.
        let p = policy(&["allow 192.0.2.0/24", "allow own.test"], &[]);
        for spelling in ["192.0.2.2", "::ffff:192.0.2.2", "64:ff9b::c000:202"] {
            assert_eq!(
                decide(&p, Some("own.test"), spelling),
                (false, Some(0), Reason::OwnAddress),
                "{spelling}"
            );
        }
        assert_eq!(decide(&p, None, "192.0.2.3"), (true, Some(0), Reason::Rule));
        // A rule naming exactly the address opens it, in any spelling of either.
        let p = policy(&["allow ::ffff:192.0.2.2", "allow 64:ff9b::b16:212c"], &[]);
        assert_eq!(decide(&p, None, "192.0.2.2"), (true, Some(0), Reason::Rule));
        assert_eq!(
            decide(&p, None, "::192.0.2.2"),
            (true, Some(0), Reason::Rule)
        );
        assert_eq!(
            decide(&p, None, "11.22.33.44"),
            (true, Some(1), Reason::Rule)
        );
        // So does a pin.
        let p = policy(&["allow own.test"], &["own.test:11.22.33.44"]);
        assert_eq!(
            decide(&p, Some("own.test"), "::ffff:11.22.33.44"),
            (true, Some(0), Reason::Rule)
        );
        // IPv6 own addresses too.
        let p = policy(&["allow fd00::/8"], &[]);
        assert_eq!(
            decide(&p, None, "fd00::2"),
            (false, Some(0), Reason::OwnAddress)
        );
        assert!(
            p.decide_connect_from(&own, &p.destination(None, ip("fd00::2")), 80)
                .to_string()
                .contains("own address")
        );
    }

    #[test]
    fn decisions_render_for_events() {
        let p = policy(&["allow github.com:443"], &[]);
        assert_eq!(
            via_name(&p, "github.com", PUBLIC, 443).to_string(),
            "allowed by 'allow github.com:443'"
        );
        assert_eq!(
            to_addr(&p, PUBLIC, 443).to_string(),
            "denied: no rule matched"
        );
        assert_eq!(Reason::DefaultDeny.to_string(), "default deny");
        assert_eq!(Reason::Rule.as_str(), "rule");
        let rebinding = via_name(&p, "github.com", "10.0.0.1", 443).to_string();
        assert!(
            rebinding.contains("DNS rebinding") && rebinding.contains("allow github.com:443"),
            "{rebinding}"
        );
    }

    fn request<'a>(method: &'a str, path: &'a str) -> HttpRequest<'a> {
        HttpRequest {
            scheme: Scheme::Https,
            method,
            path,
        }
    }

    #[test]
    fn method_and_path_rules_decide_requests_first_match_wins() {
        let p = policy(
            &[
                "deny DELETE https://api.test/**",
                "allow GET,HEAD https://api.test/repos/acme/**",
                "allow POST https://api.test/repos/acme/*/issues",
                "allow other.test:443",
            ],
            &[],
        );
        let api = Destination {
            name: Some(name("api.test")),
            addr: ip("93.184.216.34"),
            pinned: false,
        };
        let decide = |m, path| p.decide_request(&api, 443, &request(m, path));
        let d = decide("GET", "/repos/acme/x");
        assert!(d.allowed);
        assert_eq!(
            d.rule.unwrap().text,
            "allow GET,HEAD https://api.test/repos/acme/**"
        );
        assert!(decide("HEAD", "/repos/acme").allowed);
        assert!(decide("POST", "/repos/acme/x/issues").allowed);
        let d = decide("DELETE", "/repos/acme/x");
        assert!(!d.allowed && d.reason == Reason::Rule);
        let d = decide("POST", "/repos/acme/x/y/issues");
        assert_eq!((d.allowed, d.reason), (false, Reason::NoHttpRule));
        let d = decide("GET", "/repos/other/x");
        assert_eq!((d.allowed, d.reason), (false, Reason::NoHttpRule));
        // Spellings servers route alike meet the same rules.
        for (method, path) in [
            ("delete", "/repos/acme/x"),
            ("DELETE", "/repos//acme/x"),
            ("DELETE", "/repos/%61cme;p=1/x"),
        ] {
            let d = decide(method, path);
            assert!(!d.allowed && d.reason == Reason::Rule, "{method} {path}");
        }
        assert!(decide("get", "/repos/acme%2Fx").allowed);
        let d = decide("GET", "/repos/acme/%2e%2e/other/x");
        assert_eq!((d.allowed, d.reason), (false, Reason::AmbiguousPath));
        assert!(d.to_string().contains("'..'"), "{d}");
        // Another port, or plain http on the same port, is not covered.
        assert!(
            !p.decide_request(&api, 8443, &request("GET", "/repos/acme/x"))
                .allowed
        );
        let plain = HttpRequest {
            scheme: Scheme::Http,
            method: "GET",
            path: "/repos/acme/x",
        };
        assert!(!p.decide_request(&api, 443, &plain).allowed);
        assert_eq!(p.request_rules(&api, 443).len(), 3);
    }

    #[test]
    fn a_method_and_path_rule_opens_its_host_and_marks_it_inspected() {
        let mut p = policy(
            &[
                "deny POST https://blocked.test/**",
                "allow GET https://api.test:8443/**",
                "allow plain.test:443",
            ],
            &[],
        );
        let at = |n: &str| Destination {
            name: Some(name(n)),
            addr: ip("93.184.216.34"),
            pinned: false,
        };
        assert!(p.decide_name(&name("api.test")).allowed);
        assert!(p.decide_connect(&at("api.test"), 8443).allowed);
        assert!(
            !p.decide_connect(&at("api.test"), 443).allowed,
            "its port only"
        );
        assert_eq!(p.inspection(&at("api.test"), 8443), Some(Scheme::Https));
        assert_eq!(p.inspection(&at("api.test"), 443), None);
        assert_eq!(
            p.inspection(&at("plain.test"), 443),
            None,
            "plain rules pass TLS through"
        );
        // A method and path deny refuses requests, never the name or the connection.
        let d = p.decide_name(&name("blocked.test"));
        assert_eq!((d.allowed, d.reason), (false, Reason::DefaultDeny));
        assert_eq!(p.inspection(&at("blocked.test"), 443), Some(Scheme::Https));
        p.passthrough.push(Target::Name(name("api.test")));
        assert_eq!(p.inspection(&at("api.test"), 8443), None);
        assert!(p.decide_connect(&at("api.test"), 8443).allowed);
    }
}
