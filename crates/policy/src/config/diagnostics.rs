//! Errors from the TOML layer (syntax, unknown keys, wrong types), the hint for each key,
//! and line numbers.

use std::path::Path;

use super::ConfigError;

/// Turns a toml error into a `ConfigError` with a line, the key concerned and a hint.
pub(super) fn toml_error(mut error: toml::de::Error, text: &str, file: &Path) -> ConfigError {
    let line = error.span().map_or(0, |span| line_of(text, span.start));
    // Without its input, toml's Display ends with "in `a.b`", the path of the key whose
    // value failed: the only public way to learn which key a type error is about.
    error.set_input(None);
    let rendered = error.to_string();
    let key_path = rendered
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("in `")?.strip_suffix('`'))
        .map(str::to_owned);
    let message = error.message();
    let invalid = |message: String, hint: String| ConfigError::Invalid {
        file: file.to_path_buf(),
        line,
        message,
        hint,
    };

    // serde's wording: "unknown field `x`, expected one of `a`, `b`".
    if let Some((key, expected)) = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split_once('`'))
    {
        let valid = expected
            .trim_start_matches(", ")
            .trim_start_matches("expected one of ")
            .trim_start_matches("expected ")
            .replace('`', "");
        let place = key_path.map_or_else(String::new, |p| format!(" in [{p}]"));
        let guess = [key.replace('-', "_"), format!("{}s", key.replace('-', "_"))]
            .into_iter()
            .find(|candidate| valid.split(", ").any(|v| v == candidate));
        let hint = match guess {
            Some(guess) => format!("did you mean '{guess}'? valid keys: {valid}"),
            None => format!("valid keys: {valid}"),
        };
        return invalid(format!("unknown key '{key}'{place}"), hint);
    }
    match key_path {
        Some(path) => invalid(
            format!("invalid value for '{path}': {message}"),
            key_hint(setting_key(&path)).to_owned(),
        ),
        None => invalid(
            format!("invalid TOML: {message}"),
            "check the syntax on this line: strings need quotes, arrays use [ ], tables use { } or [name] headers".to_owned(),
        ),
    }
}

/// The setting a key path is about: `mounts` for both `mounts` and
/// `profiles.strict.mounts.0`.
fn setting_key(path: &str) -> &str {
    let mut parts = path.split('.');
    match parts.next() {
        Some("profiles") => parts.nth(1).unwrap_or("profiles"),
        Some(first) => first,
        None => path,
    }
}

/// What each key expects, for type errors.
pub(super) fn key_hint(key: &str) -> &'static str {
    match key {
        "name" => "name is a string, e.g. name = \"nightly\"",
        "agent" => "agent is a string, e.g. agent = \"dev-assistant\"",
        "description" => "description is a string",
        "workdir" => {
            "workdir is an absolute path inside the sandbox, e.g. workdir = \"/workspace\""
        }
        "user" => "user is a user name or \"uid[:gid]\", e.g. user = \"1000:1000\"",
        "network" => "network is one of \"none\", \"allow\", \"host\"",
        "backend" => {
            "backend is one of \"native\" (the default), \"gvisor\", \"docker\", \"podman\""
        }
        "exec_check" => {
            "exec_check is \"next-exec\" (the default) or \"exit\" (each recorded program is also checked against its exec line as it exits, at the cost of a round trip per program)"
        }
        "exec_trace" => {
            "exec_trace is \"seccomp\" (every exec waits while Vectra Guard reads it) or \"bpf\" (as root, natively, without an approval gate: execs recorded by a BPF program with no wait for each); unset, root's native runs without an image use bpf and the rest seccomp"
        }
        "network_rules" => {
            "network_rules is an array of \"allow TARGET[:PORTS]\" or \"deny TARGET[:PORTS]\" strings, or \"allow METHODS URL-GLOB\" for method and path rules, tried in order, e.g. network_rules = [\"allow github.com:443\", \"allow GET,HEAD https://api.github.com/repos/acme/**\", \"deny *.evil.com\"]"
        }
        "tls_passthrough" => {
            "tls_passthrough is an array of hosts whose HTTPS is not inspected (clients that pin certificates), each a host name, *.DOMAIN or IP address without a port, e.g. tls_passthrough = [\"pinned.example.com\", \"*.corp.example\"]"
        }
        "upstream_ca" => {
            "upstream_ca is an array of paths to PEM CA certificates trusted for upstream servers besides the system's (relative paths are taken from this file's directory), e.g. upstream_ca = [\"/etc/ssl/private-ca.pem\"]"
        }
        "secrets" => {
            "each secret is a [secrets.NAME] table at the top level, NAME the variable the sandbox sees, with source = \"env:VAR\", \"file:PATH\" or \"cmd:COMMAND\" and hosts = [\"HOST\", …] (host names, *.DOMAIN or IP addresses), e.g. [secrets.GITHUB_TOKEN] source = \"env:GH_TOKEN\" hosts = [\"api.github.com\"]"
        }
        "add_hosts" => {
            "add_hosts is an array of \"NAME:IP\" strings, e.g. add_hosts = [\"db.internal:10.0.0.5\"]"
        }
        "mounts" => {
            "mounts is an array of \"HOST:CONTAINER[:ro]\" strings, e.g. mounts = [\"./src:/workspace\"]"
        }
        "read_only" => "read_only is an array of absolute paths, e.g. read_only = [\"/etc\"]",
        "read_write" => {
            "read_write is an array of absolute paths mounted writable at the same place beside the workspace, e.g. read_write = [\"/home/me/.cache/tool\"]"
        }
        "env" => {
            "env is an array of \"KEY=VALUE\" or \"KEY\" strings, or a table such as env = { NODE_ENV = \"production\" }"
        }
        "env_files" => "env_files is an array of paths, e.g. env_files = [\".env\"]",
        "profile" => "profile names a [profiles.NAME] table, e.g. profile = \"strict\"",
        "profiles" => "each profile is a table: a [profiles.NAME] header followed by keys",
        "risk" => {
            "each risk rule is a [[risk.rules]] table with id, level (low, medium, high, critical), reason and matchers such as executable = \"pip*\", argv = \"REGEX\", script = \"REGEX\"; see the Risk levels section of the README"
        }
        _ => "see the Configuration section of the documentation",
    }
}

/// 1-based line of a byte offset.
pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
// Tests may panic: the workspace denies unwrap/expect, and has no clippy.toml exempting tests.
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use crate::config::test_support::*;

    #[test]
    fn unknown_top_level_key_names_key_line_and_valid_keys() {
        let (line, msg) = invalid(user_file("name = \"a\"\n\nmount = [\"/a:/b\"]\n"));
        assert_eq!(line, 3, "{msg}");
        assert!(
            msg.starts_with("/p/vectraguard.toml:3: unknown key 'mount'"),
            "{msg}"
        );
        assert!(msg.contains("did you mean 'mounts'?"), "{msg}");
        assert!(
            msg.contains("read_only") && msg.contains("profiles"),
            "{msg}"
        );
    }

    #[test]
    fn unknown_key_inside_profile_has_its_line() {
        let text = "name = \"a\"\n[profiles.strict]\nnetwork = \"none\"\nread-only = [\"/etc\"]\n";
        let (line, msg) = invalid(user_file(text));
        assert_eq!(line, 4, "{msg}");
        assert!(
            msg.contains("unknown key 'read-only' in [profiles.strict]"),
            "{msg}"
        );
        assert!(msg.contains("did you mean 'read_only'?"), "{msg}");
        // A profile cannot hold profiles or choose one.
        assert!(!msg.contains("profiles,"), "{msg}");
        let (line, _) = invalid(user_file("[profiles.a]\nprofile = \"b\"\n"));
        assert_eq!(line, 2);
    }

    #[test]
    fn wrong_type_names_key_and_line() {
        let (line, msg) = invalid(user_file("name = \"a\"\nmounts = \"x\"\n"));
        assert_eq!(line, 2, "{msg}");
        assert!(msg.contains("invalid value for 'mounts'"), "{msg}");
        assert!(msg.contains("HOST:CONTAINER"), "{msg}");
        let (line, msg) = invalid(user_file("[profiles.p]\nname = 3\n"));
        assert_eq!(line, 2, "{msg}");
        assert!(msg.contains("profiles.p.name"), "{msg}");
        let (_, msg) = invalid(user_file("[profiles]\nx = 1\n"));
        assert!(msg.contains("expected a table of settings"), "{msg}");
        let (line, msg) = invalid(user_file("name = \"a\"\nagent = \n"));
        assert_eq!(line, 2, "{msg}");
        assert!(msg.contains("invalid TOML"), "{msg}");
    }

    #[test]
    fn hints_cover_the_inspection_keys_and_method_path_rules() {
        let (_, msg) = invalid(user_file("network_rules = \"allow x.com\"\n"));
        assert!(
            msg.contains("\"allow GET,HEAD https://api.github.com/repos/acme/**\""),
            "{msg}"
        );
        for (text, expected) in [
            (
                "tls_passthrough = 1\n",
                "tls_passthrough is an array of hosts",
            ),
            ("upstream_ca = 1\n", "upstream_ca is an array of paths"),
            ("secrets = 1\n", "each secret is a [secrets.NAME] table"),
            (
                "[secrets.T]\nhosts = \"a.test\"\n",
                "each secret is a [secrets.NAME] table",
            ),
            (
                "[profiles.p]\nupstream_ca = 1\n",
                "upstream_ca is an array of paths",
            ),
        ] {
            let (_, msg) = invalid(user_file(text));
            assert!(msg.contains(expected), "{text}: {msg}");
        }
    }
}
