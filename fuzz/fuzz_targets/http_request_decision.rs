//! The request decision of HTTPS inspection (`exchange.rs` → `NetworkPolicy::
//! decide_request` in `network/policy.rs` and `network/http.rs`): method, path and host
//! as the sandbox sends them, against method and path rules. Input: `common::split`
//! parts: host, method, path, then rule lines (`allow GET https://host/path/**`);
//! selector byte first (bit 0: http, else https; the rest a port offset).
//!
//! Properties: a path with a problem (escaped dot segments, control characters …) is
//! never allowed; a path decides as its canonical form does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vg_policy::network::{
    Destination, HostName, HttpRequest, NetworkPolicy, Rule, Scheme, canonical_path,
    path_problem,
};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let (sel, rest) = common::selector(data);
    let parts = common::split(rest);
    let text = |i: usize| parts.get(i).map(|p| String::from_utf8_lossy(p).into_owned());
    let (Some(host), Some(method), Some(path)) = (text(0), text(1), text(2)) else {
        return;
    };
    let rules: Vec<Rule> = (3..parts.len())
        .filter_map(|i| Rule::parse_line(&text(i)?).ok())
        .collect();
    let policy = NetworkPolicy::new(rules, Vec::new());
    let scheme = if sel & 1 == 1 { Scheme::Http } else { Scheme::Https };
    let port = scheme.default_port().wrapping_add(u16::from(sel >> 6));
    let dest = Destination {
        name: HostName::parse(&host).ok(),
        addr: std::net::IpAddr::from([93, 184, 215, 14]),
        pinned: false,
    };
    let decide = |path: &str| {
        policy.decide_request(&dest, port, &HttpRequest {
            scheme,
            method: &method,
            path,
        })
    };
    let decision = decide(&path);
    if path_problem(&path).is_some() {
        assert!(!decision.allowed, "{method} {path:?} allowed");
        return;
    }
    let canonical = decide(&canonical_path(&path));
    assert_eq!(decision.allowed, canonical.allowed, "{method} {path:?}");
    assert_eq!(
        decision.rule.map(|r| r.index),
        canonical.rule.map(|r| r.index),
        "{method} {path:?}"
    );
    let _ = policy.inspection(&dest, port);
    let _ = policy.request_rules(&dest, port);
});
