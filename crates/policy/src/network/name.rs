//! Canonical DNS names.
//!
//! A rule and a query are compared as strings, so every way of writing the same name
//! must end in the same string, and nothing that is not a plain DNS name may get through:
//! a trailing dot, upper case, Unicode, an embedded NUL or `@`, or an IPv4 address in
//! one of the forms C resolvers accept (`127.1`, `2130706433`, `0x7f.1`) would otherwise
//! let a query miss a deny rule or match an allow rule it should not.

use std::fmt;
use std::net::IpAddr;

use idna::uts46::{AsciiDenyList, DnsLength, Hyphens, Uts46};

use super::{NetworkError, shown};

/// RFC 1035 limits, counted on the ASCII form without the trailing dot.
const MAX_NAME_LEN: usize = 253;
const MAX_LABEL_LEN: usize = 63;

/// A canonical DNS name: lowercase ASCII labels of `a-z`, `0-9`, `-` and `_` (Unicode
/// already converted to its IDNA `xn--` form), no trailing dot, never an IP address.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostName(String);

impl HostName {
    /// A name the user wrote (a rule, `--add-host`, a config file). Unicode is converted
    /// with UTS 46 (non-transitional, invalid input rejected), so `bücher.de` and
    /// `xn--bcher-kva.de` are the same name.
    pub fn parse(input: &str) -> Result<Self, NetworkError> {
        Self::canonicalize(input).map_err(|problem| NetworkError::Name {
            input: shown(input),
            problem,
        })
    }

    /// A name from a DNS query. The same rules as [`HostName::parse`], except that the
    /// name must already be ASCII: names travel in their `xn--` form on the wire, and a
    /// resolver upstream would not apply our Unicode mapping to raw bytes.
    pub fn parse_wire(input: &str) -> Result<Self, NetworkError> {
        if !input.is_ascii() {
            return Err(NetworkError::Name {
                input: shown(input),
                problem: "a name in a DNS query must be ASCII (Unicode names are sent in their 'xn--' form)".to_owned(),
            });
        }
        Self::parse(input)
    }

    /// A name from the labels of a DNS query, as they are on the wire. A label holding a
    /// '.' is refused rather than joined: `["x", "github.com"]` is not `x.github.com`.
    pub fn from_labels<'a>(
        labels: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Self, NetworkError> {
        let mut joined = String::new();
        for label in labels {
            let text = std::str::from_utf8(label)
                .ok()
                .filter(|text| !text.contains('.'))
                .ok_or_else(|| NetworkError::Name {
                    input: shown(&String::from_utf8_lossy(label)),
                    problem: "a DNS label must not contain '.' or bytes that are not ASCII"
                        .to_owned(),
                })?;
            if !joined.is_empty() {
                joined.push('.');
            }
            joined.push_str(text);
        }
        Self::parse_wire(&joined)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `self` lies strictly below `parent`, at a label boundary:
    /// `api.example.com` is below `example.com`; `example.com` and `evilexample.com` are not.
    pub fn is_subdomain_of(&self, parent: &HostName) -> bool {
        self.0
            .strip_suffix(parent.as_str())
            .is_some_and(|prefix| prefix.len() > 1 && prefix.ends_with('.'))
    }

    /// The canonical form of `input`, or what is wrong with it and how to fix it.
    fn canonicalize(input: &str) -> Result<Self, String> {
        if input.is_empty() {
            return Err("the name is empty".to_owned());
        }
        let unbracketed = input
            .strip_prefix('[')
            .and_then(|s| s.strip_suffix(']'))
            .unwrap_or(input);
        if unbracketed.parse::<IpAddr>().is_ok() {
            return Err(format!(
                "this is an IP address, not a host name; write an IP rule such as --allow {unbracketed}, or give a name"
            ));
        }
        check_characters(input, "")?;
        let ascii = Uts46::new()
            // Characters are checked by us (before and after), so that '_' is allowed
            // and each refusal can say which character it was.
            .to_ascii(input.as_bytes(), AsciiDenyList::EMPTY, Hyphens::Allow, DnsLength::Ignore)
            .map_err(|_| {
                "it is not a valid internationalised domain name (UTS 46 / IDNA); check for mixed scripts, stray combining marks or a malformed 'xn--' label".to_owned()
            })?;
        // Unicode mapping can produce ASCII we refuse, e.g. a fullwidth '＠' becomes '@'.
        check_characters(&ascii, " after Unicode normalisation")?;
        let name = ascii.strip_suffix('.').unwrap_or(&ascii);
        check_shape(name)?;
        Ok(Self(name.to_owned()))
    }
}

impl fmt::Display for HostName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Refuses ASCII that has no place in a DNS name, naming the character and the likely
/// mistake. Non-ASCII is left to the IDNA conversion.
fn check_characters(text: &str, when: &str) -> Result<(), String> {
    let Some(bad) = text
        .chars()
        .find(|&c| c.is_ascii() && !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    else {
        return Ok(());
    };
    let why = match bad {
        '\0' => "a NUL byte, which would cut the name short in C code".to_owned(),
        '@' => "'@'; write only the host, not user@host".to_owned(),
        '/' | '\\' => format!("'{bad}'; write a host name, not a URL or a path"),
        ':' => {
            "':'; a port goes after the name in a rule (NAME:PORT), and an address needs an IP rule"
                .to_owned()
        }
        '*' => {
            "'*', which is only allowed as a leading '*.' in a rule (e.g. *.example.com)".to_owned()
        }
        c if c.is_ascii_whitespace() => "whitespace".to_owned(),
        c if c.is_ascii_control() => format!("the control character '{}'", c.escape_debug()),
        c => format!("'{c}'"),
    };
    Err(format!(
        "it contains {why}{when}; a host name has only letters, digits, '-', '_' and '.'"
    ))
}

/// Label and length limits, and no IPv4 address in disguise.
fn check_shape(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".to_owned());
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!(
            "it is {} bytes long in ASCII form; a DNS name has at most {MAX_NAME_LEN}",
            name.len()
        ));
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err("it has an empty label (two dots in a row, or a leading dot)".to_owned());
        }
        if label.len() > MAX_LABEL_LEN {
            return Err(format!(
                "the label '{label}' is {} bytes long; a DNS label has at most {MAX_LABEL_LEN}",
                label.len()
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(format!("the label '{label}' starts or ends with '-'"));
        }
    }
    if name.rsplit('.').next().is_some_and(is_numeric_label) {
        return Err(
            "it looks like an IPv4 address (C resolvers read forms such as 127.1, 2130706433, 0177.0.0.1 and 0x7f.1 as addresses); write an IP rule with the address in dotted decimal instead, e.g. --allow 127.0.0.1".to_owned(),
        );
    }
    Ok(())
}

/// A label that `inet_aton` would read as a number: decimal (octal with a leading 0
/// too) or `0x` hex. No top-level domain is numeric, so a name ending in one is an
/// address in disguise (the WHATWG URL rule "ends in a number").
fn is_numeric_label(label: &str) -> bool {
    match label.strip_prefix("0x") {
        Some(hex) => hex.bytes().all(|b| b.is_ascii_hexdigit()),
        None => label.bytes().all(|b| b.is_ascii_digit()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn name(s: &str) -> HostName {
        HostName::parse(s).unwrap()
    }

    /// The rendered error for a name that must be refused.
    fn refused(s: &str) -> String {
        match HostName::parse(s) {
            Ok(n) => panic!("{s:?} was accepted as {n}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn case_and_one_trailing_dot_are_canonicalised() {
        assert_eq!(name("GitHub.COM").as_str(), "github.com");
        assert_eq!(name("ALLOWED.COM."), name("allowed.com"));
        assert_eq!(name("_dmarc.example.com").as_str(), "_dmarc.example.com");
        assert_eq!(
            name("r1---sn-4g5e.googlevideo.com").as_str(),
            "r1---sn-4g5e.googlevideo.com"
        );
        assert_eq!(name("localhost").as_str(), "localhost");
        assert!(refused("allowed.com..").contains("empty label"));
        assert!(refused(".").contains("empty"));
    }

    #[test]
    fn unicode_names_become_their_idna_form() {
        assert_eq!(name("bücher.de").as_str(), "xn--bcher-kva.de");
        assert_eq!(name("BÜCHER.DE."), name("xn--bcher-kva.de"));
        assert_eq!(name("XN--BCHER-KVA.DE"), name("bücher.de"));
        // Non-transitional processing: 'ß' is kept, not folded to "ss".
        assert_eq!(name("faß.de").as_str(), "xn--fa-hia.de");
        // Fullwidth forms and ideographic dots map to their ASCII equivalents.
        assert_eq!(name("ｇｉｔｈｕｂ。com"), name("github.com"));
    }

    #[test]
    fn a_cyrillic_look_alike_stays_a_different_name() {
        // "аpple.com" with U+0430 CYRILLIC SMALL LETTER A.
        let look_alike = name("\u{430}pple.com");
        assert_ne!(look_alike, name("apple.com"));
        assert!(look_alike.as_str().starts_with("xn--"), "{look_alike}");
    }

    #[test]
    fn invalid_idna_is_refused() {
        assert!(refused("xn--zz.com").contains("IDNA"));
        // A combining mark cannot start a label.
        assert!(refused("\u{301}abc.com").contains("IDNA"));
        // U+FF20 FULLWIDTH COMMERCIAL AT maps to '@'.
        let msg = refused("user\u{ff20}example.com");
        assert!(
            msg.contains("'@'") && msg.contains("after Unicode normalisation"),
            "{msg}"
        );
    }

    #[test]
    fn forbidden_characters_are_named() {
        assert!(refused("").contains("empty"));
        assert!(refused("a..b").contains("empty label"));
        assert!(refused(".a.com").contains("empty label"));
        assert!(refused("-a.com").contains("'-a'"));
        assert!(refused("a-.com").contains("'a-'"));
        assert!(refused("allowed.com\0.evil.com").contains("NUL"));
        assert!(refused("user@host.com").contains("user@host"));
        assert!(refused("@evil.com").contains("'@'"));
        assert!(refused("host.com/path").contains("URL"));
        assert!(refused("host.com:443").contains("port"));
        assert!(refused("a b.com").contains("whitespace"));
        assert!(refused("a\tb.com").contains("whitespace"));
        assert!(refused("a\x1bb.com").contains("control character '\\u{1b}'"));
        assert!(refused("*.example.com").contains("leading '*.'"));
        assert!(refused("ex%61mple.com").contains("'%'"));
        // The quoted input is escaped, so a NUL never reaches a terminal.
        assert!(refused("a\0b").contains("'a\\0b'"));
    }

    #[test]
    fn lengths_are_limited() {
        let label63 = "a".repeat(63);
        assert!(HostName::parse(&format!("{label63}.com")).is_ok());
        assert!(refused(&format!("{}.com", "a".repeat(64))).contains("at most 63"));
        let long = vec!["abcdefghi"; 25].join("."); // 249 bytes
        assert!(HostName::parse(&format!("{long}.com")).is_ok(), "253 bytes");
        assert!(refused(&format!("{long}.comm")).contains("at most 253"));
        // The limit applies without the trailing dot.
        assert!(HostName::parse(&format!("{long}.com.")).is_ok());
    }

    #[test]
    fn ip_addresses_in_any_form_are_not_names() {
        for ip in [
            "127.0.0.1",
            "::1",
            "[::1]",
            "2001:db8::1",
            "::ffff:127.0.0.1",
        ] {
            let msg = refused(ip);
            assert!(msg.contains("IP address"), "{ip}: {msg}");
        }
        for disguised in [
            "127.1",
            "2130706433",
            "0x7f.1",
            "0x7F000001",
            "0177.0.0.1",
            "127.0.0.1.",
            "010.0.0.1",
            "1.2.3.4.5",
            "evil.0x7f",
            "evil.0x",
            "127.0.0.１", // fullwidth digit one
        ] {
            let msg = refused(disguised);
            assert!(
                msg.contains("looks like an IPv4 address"),
                "{disguised}: {msg}"
            );
            assert!(msg.contains("--allow 127.0.0.1"), "{msg}");
        }
        // Numbers inside a name are fine; only the last label matters.
        assert!(HostName::parse("0x7f.example.com").is_ok());
        assert!(HostName::parse("123.example.com").is_ok());
        assert!(HostName::parse("example.0xg").is_ok());
        assert!(HostName::parse("1e100.net").is_ok());
    }

    #[test]
    fn wire_names_must_be_ascii_and_follow_the_same_rules() {
        assert_eq!(
            HostName::parse_wire("WWW.Example.COM.").unwrap(),
            name("www.example.com")
        );
        assert_eq!(
            HostName::parse_wire("xn--bcher-kva.de").unwrap(),
            name("bücher.de")
        );
        let msg = HostName::parse_wire("bücher.de").unwrap_err().to_string();
        assert!(msg.contains("must be ASCII"), "{msg}");
        assert!(HostName::parse_wire("a\0b.com").is_err());
        assert!(HostName::parse_wire("2130706433").is_err());
    }

    #[test]
    fn labels_are_joined_only_when_none_holds_a_dot() {
        let labels: [&[u8]; 3] = [b"API", b"github", b"com"];
        assert_eq!(
            HostName::from_labels(labels).unwrap(),
            name("api.github.com")
        );
        let smuggled: [&[u8]; 2] = [b"x", b"github.com"];
        assert!(
            HostName::from_labels(smuggled)
                .unwrap_err()
                .to_string()
                .contains("'.'")
        );
        let binary: [&[u8]; 2] = [b"a\xff", b"com"];
        assert!(HostName::from_labels(binary).is_err());
        let nul: [&[u8]; 2] = [b"allowed\0", b"com"];
        assert!(HostName::from_labels(nul).is_err());
        assert!(HostName::from_labels(std::iter::empty()).is_err());
    }

    #[test]
    fn subdomains_match_at_a_label_boundary_only() {
        let parent = name("allowed.com");
        assert!(name("api.allowed.com").is_subdomain_of(&parent));
        assert!(name("a.b.allowed.com").is_subdomain_of(&parent));
        assert!(!name("allowed.com").is_subdomain_of(&parent));
        assert!(!name("evilallowed.com").is_subdomain_of(&parent));
        assert!(!name("allowed.com.evil.com").is_subdomain_of(&parent));
        assert!(!name("com").is_subdomain_of(&parent));
    }
}
