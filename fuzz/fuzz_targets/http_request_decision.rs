//! The request decision of HTTPS inspection (`exchange.rs` → `NetworkPolicy::
//! decide_request` in `network/policy.rs` and `network/http.rs`): method, path and host
//! as the sandbox sends them, against method and path rules. Input: `common::split`
//! parts: host, method, path, then rule lines (`allow GET https://host/path/**`);
//! selector byte first (bit 0: http, else https; the rest a port offset).
//!
//! Properties: a path with a problem (escaped dot segments, control characters …) is
//! never allowed; a path decides as the same path with some unreserved characters
//! percent-encoded does (servers route both alike).
#![no_main]

use libfuzzer_sys::fuzz_target;
use vg_policy::network::{
    Destination, HostName, HttpRequest, NetworkPolicy, Rule, Scheme, path_problem,
};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let (sel, rest) = common::selector(data);
    let parts = common::split(rest);
    let text = |i: usize| {
        parts
            .get(i)
            .map(|p| String::from_utf8_lossy(p).into_owned())
    };
    let (Some(host), Some(method), Some(path)) = (text(0), text(1), text(2)) else {
        return;
    };
    let rules: Vec<Rule> = (3..parts.len())
        .filter_map(|i| Rule::parse_line(&text(i)?).ok())
        .collect();
    let policy = NetworkPolicy::new(rules, Vec::new());
    let scheme = if sel & 1 == 1 {
        Scheme::Http
    } else {
        Scheme::Https
    };
    let port = scheme.default_port().wrapping_add(u16::from(sel >> 6));
    let dest = Destination {
        name: HostName::parse(&host).ok(),
        addr: std::net::IpAddr::from([93, 184, 215, 14]),
        pinned: false,
    };
    let decide = |path: &str| {
        policy.decide_request(
            &dest,
            port,
            &HttpRequest {
                scheme,
                method: &method,
                path,
            },
        )
    };
    let decision = decide(&path);
    if path_problem(&path).is_some() {
        assert!(!decision.allowed, "{method} {path:?} allowed");
        return;
    }
    let encoded = encode_some(&path, sel);
    let same = decide(&encoded);
    assert_eq!(
        decision.allowed, same.allowed,
        "{method} {path:?} / {encoded:?}"
    );
    assert_eq!(
        decision.rule.map(|r| r.index),
        same.rule.map(|r| r.index),
        "{method} {path:?} / {encoded:?}"
    );
    let _ = policy.inspection(&dest, port);
    let _ = policy.request_rules(&dest, port);
});

/// `path` with unreserved characters percent-encoded, every other one or so (by `seed`),
/// except those of an escape (the two bytes after a `%`) and `%` itself.
fn encode_some(path: &str, seed: u8) -> String {
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(path.len() * 3);
    for (i, c) in path.char_indices() {
        let in_escape = (i >= 1 && bytes[i - 1] == b'%') || (i >= 2 && bytes[i - 2] == b'%');
        let unreserved = c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~');
        if unreserved && !in_escape && (i + usize::from(seed)) % 2 == 0 {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}
