//! The flag and config values a user, or a project file, writes (`vg-policy`): network
//! rules `--allow/--deny` and config lines (with method and path rules), `--add-host`,
//! CIDRs and host names, mount specs, limit values, `--secret` specs, `--env` and env
//! files. Input: selector byte (which parser), then the text.
//!
//! Properties: a rule's canonical text parses back to the same rule; a host name, a
//! CIDR and an `--add-host` print back to themselves; a request path's canonical form
//! has no empty, parameter or dot segment.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vg_policy::network::{
    Action, AddHost, Cidr, HostName, NetworkMode, Rule, canonical_path, path_problem,
};
use vg_policy::{MountSpec, env, limits, secrets};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let (sel, text) = common::selector(data);
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    match sel % 16 {
        0 | 1 => {
            let parsed = if sel % 16 == 0 {
                Rule::parse_line(text)
            } else {
                Rule::parse(Action::Allow, text)
            };
            if let Ok(rule) = parsed {
                let again = Rule::parse_line(&rule.text)
                    .unwrap_or_else(|e| panic!("{text:?} → {:?}: {e}", rule.text));
                assert_eq!(again, rule, "{text:?} → {:?}", rule.text);
            }
        }
        2 => {
            if let Ok(host) = AddHost::parse(text) {
                let shown = host.to_string();
                assert_eq!(
                    AddHost::parse(&shown).ok(),
                    Some(host),
                    "{text:?} → {shown:?}"
                );
            }
        }
        3 => {
            if let Ok(cidr) = Cidr::parse(text) {
                let shown = cidr.to_string();
                assert_eq!(Cidr::parse(&shown).ok(), Some(cidr), "{text:?} → {shown:?}");
            }
        }
        4 | 5 => {
            let parsed = if sel % 16 == 4 {
                HostName::parse(text)
            } else {
                HostName::parse_wire(text)
            };
            if let Ok(name) = parsed {
                assert_eq!(
                    HostName::parse(name.as_str()).ok(),
                    Some(name.clone()),
                    "{text:?}"
                );
            }
        }
        6 => {
            let _ = MountSpec::parse(text);
            let _ = MountSpec::read_only_path(text);
        }
        7 => {
            let _ = limits::parse_size("memory", text);
            let _ = limits::parse_duration("timeout", text);
            let _ = limits::parse_cpus(text);
            let _ = limits::parse_pids(text);
            let _ = limits::parse_ptys(text);
            if let Ok(bytes) = limits::parse_size("memory", text) {
                let _ = limits::format_size(bytes);
            }
        }
        8 => {
            let _ = secrets::SecretSpec::parse(text);
        }
        9 => {
            let _ = secrets::SecretSource::parse(text);
            let _ = secrets::check_name(text);
            let _ = secrets::host_target(text);
        }
        10 => {
            let _ = env::EnvAssignment::parse(text);
            let _ = env::parse_env_file(text, "env-file");
        }
        11 => {
            let _ = NetworkMode::parse(text);
        }
        _ => {
            // Request paths, canonical as servers route on them: rooted, no empty
            // segment, no `;` parameters, and no dot segment once a path has no problem.
            // (Not a fixed point: it is decoded once, as servers do, and decoding twice
            // is what it must not do.)
            let canonical = canonical_path(text);
            assert!(canonical.starts_with('/'), "{text:?} → {canonical:?}");
            assert!(!canonical[1..].contains("//"), "{text:?} → {canonical:?}");
            assert!(!canonical.contains(';'), "{text:?} → {canonical:?}");
            if path_problem(text).is_none() {
                assert!(
                    canonical.split('/').all(|s| s != "." && s != ".."),
                    "{text:?} → {canonical:?}"
                );
            }
        }
    }
});
