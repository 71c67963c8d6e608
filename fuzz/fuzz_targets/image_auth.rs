//! What a registry or the user's Docker configuration says about credentials
//! (`registry/auth.rs`): `WWW-Authenticate` challenges and `config.json`. Input:
//! selector byte (bit 0: a config file, else a challenge), then the text; for a config
//! file, the registry asked about is its first `common::split` part.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vg_image::registry::auth;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let (sel, rest) = common::selector(data);
    if sel & 1 == 0 {
        if let Ok(header) = std::str::from_utf8(rest)
            && let Some(challenge) = auth::parse_challenge(header)
        {
            assert!(!challenge.scheme.is_empty());
            assert_eq!(challenge.scheme, challenge.scheme.to_ascii_lowercase());
        }
        return;
    }
    let parts = common::split(rest);
    let (Some(registry), Some(config)) = (parts.first(), parts.get(1)) else {
        return;
    };
    let Ok(registry) = std::str::from_utf8(registry) else {
        return;
    };
    if let Ok(found) = auth::parse_docker_config(config, registry)
        && let Some(credentials) = found.credentials
    {
        let _ = credentials.basic_header();
    }
});
