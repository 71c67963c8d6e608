//! Secrets the sandbox never sees: it holds a placeholder of the same length, which the
//! inspector swaps for the real value in the headers of requests to the hosts the secret
//! is bound to, after the rules allowed them. The same placeholder going anywhere else —
//! in a header, Basic credentials, the URL or the body — is an exfiltration attempt and
//! is refused; a value coming back in a response is turned back into its placeholder,
//! and so is its base64 encoding, from the hosts it is bound to (see
//! [`SecretSet::for_connection`]).

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use http::{HeaderMap, HeaderName, HeaderValue};
use vg_policy::network::{HostName, Target};
use zeroize::Zeroizing;

use crate::error::Error;
use crate::scan::Patterns;

/// A credential to inject. `value` is never logged, put in an error or in an event.
pub struct Secret {
    /// The environment variable that holds the placeholder inside the sandbox.
    pub name: String,
    /// The real secret.
    pub value: Zeroizing<String>,
    /// What the sandbox holds instead: same length as `value` ([`placeholder_for`]).
    pub placeholder: String,
    /// The hosts it is for (names or `*.` wildcards).
    pub hosts: Vec<Target>,
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secret")
            .field("name", &self.name)
            .field("value", &"<redacted>")
            .field("placeholder", &self.placeholder)
            .field("hosts", &self.hosts)
            .finish()
    }
}

/// The fewest bytes, and letters or digits, a secret value may have: fewer would make
/// a placeholder guessable or likely to appear by chance.
const MIN_LEN: usize = 8;

/// Why `value` cannot be a secret, if it cannot; never quotes it.
fn value_problem(value: &[u8]) -> Option<String> {
    if value.len() < MIN_LEN {
        return Some(format!(
            "the value is {} bytes long; a secret must have at least {MIN_LEN} so that its placeholder cannot be guessed",
            value.len()
        ));
    }
    if let Some(at) = value.iter().position(|b| !(0x21..=0x7e).contains(b)) {
        return Some(format!(
            "the value has a space, control character (such as CR or LF) or non-ASCII byte at byte {at}; only visible ASCII can go into an HTTP header without changing the request"
        ));
    }
    let alnum = value.iter().filter(|b| b.is_ascii_alphanumeric()).count();
    if alnum < MIN_LEN {
        return Some(format!(
            "the value has {alnum} letters or digits; at least {MIN_LEN} are needed for a placeholder that cannot be guessed"
        ));
    }
    None
}

/// A random placeholder for `value`, of the same length: each ASCII letter or digit is
/// replaced by a random one of the same class (lower case, upper case, digit), other
/// bytes are kept, so a format check on the sandbox's side (`sk-…`) still passes.
///
/// Refuses values shorter than 8 bytes, with fewer than 8 letters or digits, or with a
/// byte outside visible ASCII (0x21..=0x7e): a space, CR or LF could change a request.
pub fn placeholder_for(value: &str) -> Result<String, String> {
    if let Some(problem) = value_problem(value.as_bytes()) {
        return Err(problem);
    }
    let mut random = vec![0u8; value.len() * 2];
    loop {
        getrandom::getrandom(&mut random)
            .map_err(|e| format!("could not read the system's random number source: {e}"))?;
        let mut pool = random.iter().copied();
        let mut out = String::with_capacity(value.len());
        for c in value.chars() {
            let next = match c {
                'a'..='z' => pick(&mut pool, b'a', 26),
                'A'..='Z' => pick(&mut pool, b'A', 26),
                '0'..='9' => pick(&mut pool, b'0', 10),
                other => Some(other),
            };
            match next {
                Some(c) => out.push(c),
                // The pool ran out (rejection sampling): draw again.
                None => break,
            }
        }
        if out.len() == value.len() && out != value {
            return Ok(out);
        }
    }
}

/// A uniformly random character in `base..base+n`, by rejection sampling.
fn pick(pool: &mut impl Iterator<Item = u8>, base: u8, n: u8) -> Option<char> {
    let limit = 256 - (256 % u16::from(n));
    pool.find(|b| u16::from(*b) < limit)
        .map(|b| char::from(base + b % n))
}

/// The secrets of a session, checked.
pub(crate) struct SecretSet {
    entries: Vec<Entry>,
}

struct Entry {
    name: String,
    value: Zeroizing<Vec<u8>>,
    placeholder: Vec<u8>,
    hosts: Vec<Target>,
    hosts_text: String,
}

impl fmt::Debug for SecretSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| &e.name))
            .finish()
    }
}

/// The secrets as one connection sees them.
pub(crate) struct ConnSecrets {
    set: Arc<SecretSet>,
    /// Placeholders of the secrets bound to this connection's host → their values.
    inject: Patterns,
    /// Placeholders of every other secret: never to be sent here.
    foreign: Arc<Patterns>,
    /// For responses: every value → its placeholder, and the base64 forms of the bound
    /// secrets' values → the same forms of their placeholders.
    responses: Arc<Patterns>,
}

impl SecretSet {
    pub(crate) fn new(secrets: Vec<Secret>) -> Result<Self, Error> {
        let mut entries: Vec<Entry> = Vec::with_capacity(secrets.len());
        for secret in secrets {
            let problem = |problem: String| Error::Secret {
                name: secret.name.clone(),
                problem,
            };
            if secret.name.is_empty() {
                return Err(Error::Secret {
                    name: "(unnamed)".to_owned(),
                    problem: "a secret needs the name of the variable that holds its placeholder"
                        .to_owned(),
                });
            }
            if let Some(p) = value_problem(secret.value.as_bytes()) {
                return Err(problem(p));
            }
            let placeholder = secret.placeholder.as_bytes();
            if placeholder.len() != secret.value.len()
                || value_problem(placeholder).is_some()
                || placeholder == secret.value.as_bytes()
            {
                return Err(problem(
                    "the placeholder must be as long as the value, differ from it and be visible ASCII (make it with placeholder_for)".to_owned(),
                ));
            }
            if secret.hosts.is_empty() {
                return Err(problem(
                    "it is bound to no host: name the hosts it may be sent to".to_owned(),
                ));
            }
            if let Some(other) = entries.iter().find(|e| {
                e.name == secret.name
                    || e.placeholder == placeholder
                    || e.value.as_slice() == secret.value.as_bytes()
            }) {
                return Err(problem(format!(
                    "it has the same name, value or placeholder as secret {}",
                    other.name
                )));
            }
            let hosts_text = secret
                .hosts
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            entries.push(Entry {
                value: Zeroizing::new(secret.value.as_bytes().to_vec()),
                placeholder: placeholder.to_vec(),
                hosts: secret.hosts,
                hosts_text,
                name: secret.name,
            });
        }
        Ok(Self { entries })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn name(&self, index: usize) -> &str {
        self.entries.get(index).map_or("?", |e| e.name.as_str())
    }

    pub(crate) fn hosts_text(&self, index: usize) -> &str {
        self.entries
            .get(index)
            .map_or("?", |e| e.hosts_text.as_str())
    }

    pub(crate) fn hosts_text_of(&self, name: &str) -> &str {
        self.entries
            .iter()
            .find(|e| e.name == name)
            .map_or("?", |e| e.hosts_text.as_str())
    }

    /// Which secrets go to a connection to `name` (or `addr` when it has no name), and
    /// what its responses are scanned for: every secret's value, and the base64
    /// encodings of the values of the secrets bound to it (which it may echo back as
    /// `Basic` credentials it received).
    pub(crate) fn for_connection(
        self: &Arc<Self>,
        name: Option<&HostName>,
        addr: IpAddr,
    ) -> ConnSecrets {
        let bound = |e: &Entry| {
            e.hosts.iter().any(|t| match name {
                Some(n) => t.matches_name(n),
                None => t.matches_addr(addr),
            })
        };
        let inject = Patterns::new(
            self.entries
                .iter()
                .enumerate()
                .filter(|(_, e)| bound(e))
                .map(|(i, e)| (e.placeholder.as_slice(), e.value.as_slice(), i)),
        );
        let foreign = Arc::new(Patterns::new(
            self.entries
                .iter()
                .enumerate()
                .filter(|(_, e)| !bound(e))
                .map(|(i, e)| (e.placeholder.as_slice(), &[][..], i)),
        ));
        let encoded: Vec<(usize, Zeroizing<Vec<u8>>, Vec<u8>)> = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| bound(e))
            .flat_map(|(i, e)| {
                base64_forms(&e.value, &e.placeholder)
                    .into_iter()
                    .map(move |(needle, replacement)| (i, needle, replacement))
            })
            .collect();
        let responses = Arc::new(Patterns::new(
            self.entries
                .iter()
                .enumerate()
                .map(|(i, e)| (e.value.as_slice(), e.placeholder.as_slice(), i))
                .chain(
                    encoded
                        .iter()
                        .map(|(i, n, r)| (n.as_slice(), r.as_slice(), *i)),
                ),
        ));
        ConnSecrets {
            set: Arc::clone(self),
            inject,
            foreign,
            responses,
        }
    }
}

/// The base64 forms of `value` → the same forms of `placeholder` (same length).
///
/// Wherever `value` falls in a base64-encoded stream, it starts at one of three
/// offsets within a 3-byte group: 0, 1 or 2 of its bytes share a group with what comes
/// before. For each, the run of whole groups made of the value's bytes only encodes to
/// text that depends on the value alone; it is replaced by the same groups of the
/// placeholder, encoded the same way. The characters at either end, which mix in
/// neighbouring bytes, encode at most two bytes of the value each and are left as they
/// are. Standard and URL-safe alphabets; padding never falls inside whole groups.
fn base64_forms(value: &[u8], placeholder: &[u8]) -> Vec<(Zeroizing<Vec<u8>>, Vec<u8>)> {
    let mut forms: Vec<(Zeroizing<Vec<u8>>, Vec<u8>)> = Vec::new();
    for skip in 0..3 {
        let whole = value.len().saturating_sub(skip) / 3 * 3;
        let (Some(value), Some(placeholder)) = (
            value.get(skip..skip + whole),
            placeholder.get(skip..skip + whole),
        ) else {
            continue;
        };
        if value.is_empty() {
            continue;
        }
        for engine in [STANDARD_NO_PAD, URL_SAFE_NO_PAD] {
            let needle = Zeroizing::new(engine.encode(value).into_bytes());
            if forms.iter().any(|(n, _)| **n == *needle) {
                continue;
            }
            forms.push((needle, engine.encode(placeholder).into_bytes()));
        }
    }
    forms
}

impl ConnSecrets {
    pub(crate) fn set(&self) -> &Arc<SecretSet> {
        &self.set
    }

    /// Placeholders that must not be sent on this connection.
    pub(crate) fn foreign(&self) -> &Arc<Patterns> {
        &self.foreign
    }

    /// What responses on this connection are scanned for, and replaced by.
    pub(crate) fn responses(&self) -> &Arc<Patterns> {
        &self.responses
    }

    /// The secret whose foreign placeholder a header value (or Basic credentials in
    /// one) or the URL carries.
    pub(crate) fn find_foreign(&self, headers: &HeaderMap, path_and_query: &str) -> Option<usize> {
        if self.foreign.is_empty() {
            return None;
        }
        for (name, value) in headers {
            if let Some(found) = self.foreign.find_any(value.as_bytes()) {
                return Some(found);
            }
            if value.as_bytes().contains(&b'%')
                && let Some(found) = find_in_url(&self.foreign, value.as_bytes())
            {
                return Some(found);
            }
            if is_credentials(name)
                && let Some(decoded) = basic_credentials(value.as_bytes())
                && let Some(found) = self.foreign.find_any(&decoded)
            {
                return Some(found);
            }
        }
        find_in_url(&self.foreign, path_and_query.as_bytes())
    }

    /// Puts the bound secrets' values in place of their placeholders in every header
    /// value, Basic credentials included. Returns the secrets injected; an error (a
    /// value that is not a valid header value) names the secret, never its value.
    pub(crate) fn inject(&self, headers: &mut HeaderMap) -> Result<Vec<usize>, String> {
        let mut used = Vec::new();
        if self.inject.is_empty() {
            return Ok(used);
        }
        for (name, value) in headers.iter_mut() {
            let mut found = Vec::new();
            let replaced = if is_credentials(name)
                && let Some(mut decoded) = basic_credentials(value.as_bytes())
                && self.inject.matches(&decoded)
            {
                self.inject
                    .replace_in_place(&mut decoded, |i| found.push(i));
                let mut text = Zeroizing::new(b"Basic ".to_vec());
                text.extend_from_slice(STANDARD.encode(decoded.as_slice()).as_bytes());
                Some(text)
            } else if self.inject.matches(value.as_bytes()) {
                let mut text = Zeroizing::new(value.as_bytes().to_vec());
                self.inject.replace_in_place(&mut text, |i| found.push(i));
                Some(text)
            } else {
                None
            };
            let Some(text) = replaced else { continue };
            let mut new = HeaderValue::from_bytes(&text).map_err(|_| {
                let names: Vec<&str> = found.iter().map(|i| self.set.name(*i)).collect();
                format!(
                    "the value of secret {} does not make a valid '{name}' header value",
                    names.join(", ")
                )
            })?;
            new.set_sensitive(true);
            *value = new;
            for i in found {
                if !used.contains(&i) {
                    used.push(i);
                }
            }
        }
        Ok(used)
    }
}

/// Replaces every secret value in header values by its placeholder (responses).
pub(crate) fn mask_values(values: &Patterns, headers: &mut HeaderMap) {
    if values.is_empty() {
        return;
    }
    for value in headers.values_mut() {
        if values.matches(value.as_bytes()) {
            let mut text = value.as_bytes().to_vec();
            values.replace_in_place(&mut text, |_| {});
            // Same length, visible ASCII for visible ASCII: always valid; if not, drop it.
            *value =
                HeaderValue::from_bytes(&text).unwrap_or_else(|_| HeaderValue::from_static(""));
        }
    }
}

fn is_credentials(name: &HeaderName) -> bool {
    name == http::header::AUTHORIZATION || name == http::header::PROXY_AUTHORIZATION
}

/// Base64 that accepts padding or none: clients differ.
const STANDARD: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The decoded `user:password` of a `Basic` credentials header value.
fn basic_credentials(value: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
    let scheme = value.get(..6)?;
    if !scheme.eq_ignore_ascii_case(b"basic ") {
        return None;
    }
    let rest = value.get(6..)?.trim_ascii();
    STANDARD.decode(rest).ok().map(Zeroizing::new)
}

/// The secret whose needle `raw` (a URL, a cookie) carries, as sent or percent-decoded
/// once or twice.
fn find_in_url(patterns: &Patterns, raw: &[u8]) -> Option<usize> {
    if let Some(found) = patterns.find_any(raw) {
        return Some(found);
    }
    let once = percent_decode(raw);
    if let Some(found) = patterns.find_any(&once) {
        return Some(found);
    }
    patterns.find_any(&percent_decode(&once))
}

fn percent_decode(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while let Some(&b) = input.get(i) {
        let hex = |at: usize| input.get(at).and_then(|c| char::from(*c).to_digit(16));
        match (b, hex(i + 1), hex(i + 2)) {
            (b'%', Some(hi), Some(lo)) => {
                // Two hex digits: at most 255.
                out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'%'));
                i += 3;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const VALUE: &str = "sk-live-4f9A8b7C6d5E4f3G";

    fn secret(name: &str, value: &str, hosts: &[&str]) -> Secret {
        Secret {
            name: name.to_owned(),
            value: Zeroizing::new(value.to_owned()),
            placeholder: placeholder_for(value).unwrap(),
            hosts: hosts
                .iter()
                .map(|h| match h.strip_prefix("*.") {
                    Some(parent) => Target::Wildcard(HostName::parse(parent).unwrap()),
                    None => Target::Name(HostName::parse(h).unwrap()),
                })
                .collect(),
        }
    }

    #[test]
    fn placeholders_keep_length_classes_and_punctuation() {
        let p = placeholder_for(VALUE).unwrap();
        assert_eq!(p.len(), VALUE.len());
        assert_ne!(p, VALUE);
        assert!(p.as_bytes()[2] == b'-' && p.as_bytes()[7] == b'-', "{p}");
        for (a, b) in VALUE.bytes().zip(p.bytes()) {
            assert_eq!(a.is_ascii_lowercase(), b.is_ascii_lowercase());
            assert_eq!(a.is_ascii_uppercase(), b.is_ascii_uppercase());
            assert_eq!(a.is_ascii_digit(), b.is_ascii_digit());
            if !a.is_ascii_alphanumeric() {
                assert_eq!(a, b);
            }
        }
        // Random each time.
        assert_ne!(placeholder_for(VALUE).unwrap(), p);
    }

    #[test]
    fn unsafe_or_weak_values_are_refused_without_quoting_them() {
        for (value, hint) in [
            ("short", "at least 8"),
            ("--------__1234", "letters or digits"),
            ("abcd1234\r\nX-Injected: 1", "CR or LF"),
            ("abcd 1234efgh", "space"),
            ("abcdéfgh1234", "non-ASCII"),
            ("abcd1234\0", "control"),
        ] {
            let err = placeholder_for(value).unwrap_err();
            assert!(err.contains(hint), "{value:?}: {err}");
            assert!(!err.contains(value), "{err}");
        }
        assert!(placeholder_for("abcd1234").is_ok());
    }

    #[test]
    fn secret_sets_refuse_bad_definitions() {
        let ok = || secret("API_KEY", VALUE, &["api.example.com"]);
        assert!(SecretSet::new(vec![ok()]).is_ok());
        let mut s = ok();
        s.placeholder.push('x');
        assert!(SecretSet::new(vec![s]).is_err());
        let mut s = ok();
        s.placeholder = VALUE.to_owned();
        assert!(SecretSet::new(vec![s]).is_err());
        let mut s = ok();
        s.hosts.clear();
        let err = SecretSet::new(vec![s]).unwrap_err().to_string();
        assert!(err.contains("API_KEY") && err.contains("no host"), "{err}");
        let err = SecretSet::new(vec![ok(), ok()]).unwrap_err().to_string();
        assert!(!err.contains(VALUE), "{err}");
        let mut s = ok();
        s.value = Zeroizing::new("abc\ndefghijk".to_owned());
        s.placeholder = "abc\nqwertyui".to_owned();
        let err = SecretSet::new(vec![s]).unwrap_err().to_string();
        assert!(
            err.contains("CR or LF") && !err.contains("defghijk"),
            "{err}"
        );
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| {
                (
                    HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    HeaderValue::from_str(v).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn bound_placeholders_are_swapped_in_headers_and_basic_credentials() {
        let set = Arc::new(
            SecretSet::new(vec![
                secret("API_KEY", VALUE, &["api.example.com"]),
                secret("PASS", "pa55word-XYZ", &["*.example.com"]),
            ])
            .unwrap(),
        );
        let key = set.entries[0].placeholder.clone();
        let pass = set.entries[1].placeholder.clone();
        let key = String::from_utf8(key).unwrap();
        let pass = String::from_utf8(pass).unwrap();
        let conn = set.for_connection(
            Some(&HostName::parse("api.example.com").unwrap()),
            [1, 2, 3, 4].into(),
        );
        let basic = STANDARD.encode(format!("me:{pass}"));
        let mut h = headers(&[
            ("authorization", &format!("Bearer {key}")),
            ("proxy-authorization", &format!("basic {basic}")),
            ("x-other", "plain"),
        ]);
        assert_eq!(conn.find_foreign(&h, "/"), None);
        let used = conn.inject(&mut h).unwrap();
        assert_eq!(used, [0, 1]);
        assert_eq!(h["authorization"], format!("Bearer {VALUE}").as_str());
        assert!(h["authorization"].is_sensitive());
        let sent = h["proxy-authorization"].to_str().unwrap();
        let decoded = STANDARD
            .decode(sent.strip_prefix("Basic ").unwrap())
            .unwrap();
        assert_eq!(decoded, b"me:pa55word-XYZ");
        assert_eq!(h["x-other"], "plain");

        // Another host under the wildcard gets PASS only; API_KEY's placeholder there is
        // refused wherever it hides.
        let other = set.for_connection(
            Some(&HostName::parse("www.example.com").unwrap()),
            [1, 2, 3, 4].into(),
        );
        let mut h = headers(&[("authorization", &format!("Bearer {key}"))]);
        assert_eq!(other.find_foreign(&h, "/"), Some(0));
        assert_eq!(other.inject(&mut h).unwrap(), Vec::<usize>::new());
        let basic = STANDARD.encode(format!("{key}:x"));
        let h = headers(&[("authorization", &format!("Basic {basic}"))]);
        assert_eq!(other.find_foreign(&h, "/"), Some(0));
        let empty = HeaderMap::new();
        assert_eq!(other.find_foreign(&empty, &format!("/x?k={key}")), Some(0));
        let encoded: String = key.bytes().map(|b| format!("%{b:02X}")).collect();
        assert_eq!(
            other.find_foreign(&empty, &format!("/x?k={encoded}")),
            Some(0)
        );
        let twice = encoded.replace('%', "%25");
        assert_eq!(other.find_foreign(&empty, &format!("/{twice}")), Some(0));
        assert_eq!(other.find_foreign(&empty, "/x?k=harmless"), None);
        // A name no secret is bound to: both are foreign.
        let none = set.for_connection(
            Some(&HostName::parse("evil.test").unwrap()),
            [1, 2, 3, 4].into(),
        );
        let h = headers(&[("cookie", &format!("a={pass}"))]);
        assert_eq!(none.find_foreign(&h, "/"), Some(1));
        let h = headers(&[("cookie", &format!("a={encoded}"))]);
        assert_eq!(none.find_foreign(&h, "/"), Some(0));
    }

    #[test]
    fn values_in_response_headers_become_placeholders() {
        let set =
            Arc::new(SecretSet::new(vec![secret("API_KEY", VALUE, &["api.example.com"])]).unwrap());
        let placeholder = String::from_utf8(set.entries[0].placeholder.clone()).unwrap();
        let conn = set.for_connection(
            Some(&HostName::parse("api.example.com").unwrap()),
            [1, 2, 3, 4].into(),
        );
        let mut h = headers(&[("x-echo", &format!("got {VALUE}!")), ("x-n", "1")]);
        mask_values(conn.responses(), &mut h);
        assert_eq!(h["x-echo"], format!("got {placeholder}!").as_str());
        assert_eq!(h["x-n"], "1");
    }

    #[test]
    fn base64_forms_cover_every_alignment() {
        let placeholder = placeholder_for(VALUE).unwrap();
        let forms = base64_forms(VALUE.as_bytes(), placeholder.as_bytes());
        let patterns = Patterns::new(forms.iter().map(|(n, r)| (n.as_slice(), r.as_slice(), 0)));
        for engine in [STANDARD, base64::engine::general_purpose::URL_SAFE] {
            for prefix in ["", "u", "us", "use", "user:"] {
                for suffix in ["", "x", "xy", "xyz"] {
                    let plain = format!("{prefix}{VALUE}{suffix}");
                    let mut encoded = engine.encode(&plain).into_bytes();
                    patterns.replace_in_place(&mut encoded, |_| {});
                    assert_eq!(encoded.len(), engine.encode(&plain).len());
                    let decoded = engine.decode(&encoded).unwrap();
                    // The value became the placeholder, but for at most two bytes at
                    // each end.
                    let n = VALUE.len();
                    let ok = (0..=2).any(|k1| {
                        (0..=2).any(|k2| {
                            let want = format!(
                                "{prefix}{}{}{}{suffix}",
                                &VALUE[..k1],
                                &placeholder[k1..n - k2],
                                &VALUE[n - k2..]
                            );
                            decoded == want.as_bytes()
                        })
                    });
                    assert!(
                        ok,
                        "{prefix:?} {suffix:?}: {}",
                        String::from_utf8_lossy(&decoded)
                    );
                }
            }
        }
    }

    #[test]
    fn debug_never_shows_the_value() {
        let s = secret("API_KEY", VALUE, &["api.example.com"]);
        let shown = format!("{s:?}");
        assert!(
            !shown.contains(VALUE) && shown.contains("API_KEY"),
            "{shown}"
        );
    }
}
