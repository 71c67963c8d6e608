//! Credentials the mediator injects (`--secret NAME=SOURCE@HOST[,HOST…]`, or
//! `[secrets.NAME]` in a configuration file), as data: the name the sandbox sees, where
//! the host reads the value, and the hosts the value may be sent to.
//!
//! Inside the sandbox `NAME` holds a placeholder; the mediator swaps in the value only on
//! requests to the bound hosts. Nothing here reads a value: a [`SecretSpec`] says where
//! the value is, and it may be printed (in errors and records) without leaking it.

use std::fmt;
use std::path::PathBuf;

use crate::network::{Action, NetworkError, Rule, Target};

/// Variables that tell programs which CA bundle to trust. The sandbox sets them to a
/// bundle that includes the session's CA, so a secret may not take their name.
pub const CA_VARIABLES: &[&str] = &[
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "PIP_CERT",
    "CARGO_HTTP_CAINFO",
];

/// Variables the sandbox's own environment needs, which a secret may not replace
/// (besides [`CA_VARIABLES`] and every `LD_*` variable).
const ENVIRONMENT_VARIABLES: &[&str] = &["PATH", "HOME", "USER", "SHELL", "TERM", "LANG", "PWD"];

/// Where the host reads a secret's value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SecretSource {
    /// `env:VAR`: a variable of the environment that runs `vectra-guard`.
    Env(String),
    /// `file:PATH`: the whole file, read on the host. A relative path given with
    /// `--secret` is the caller's to resolve against its working directory; one written
    /// in a configuration file has been resolved against that file's directory.
    File(PathBuf),
    /// `cmd:COMMAND`: the standard output of a command run on the host (`pass show x`,
    /// `op read …`); a failing command fails the session.
    Command(String),
}

impl SecretSource {
    /// `env:VAR`, `file:PATH` or `cmd:COMMAND`.
    pub fn parse(text: &str) -> Result<Self, SecretError> {
        let fail = |problem: String| SecretError::Source {
            input: shown_source(text),
            problem,
        };
        match text.split_once(':') {
            Some(("env", "")) => Err(fail(
                "'env:' needs the name of a variable, e.g. env:GH_TOKEN".to_owned(),
            )),
            Some(("env", var)) if !crate::env::valid_name(var) => Err(fail(format!(
                "'{}' is not a variable name (letters, digits and '_', not starting with a digit)",
                shown(var)
            ))),
            Some(("env", var)) => Ok(Self::Env(var.to_owned())),
            Some(("file", "")) => Err(fail(
                "'file:' needs a path, e.g. file:/run/secrets/gh_token".to_owned(),
            )),
            Some(("file", path)) if path.starts_with('~') => Err(fail(
                "'~' is not expanded; write the path in full, e.g. file:/home/me/.gh_token"
                    .to_owned(),
            )),
            Some(("file", path)) if path.contains('\0') => {
                Err(fail("the path contains a NUL byte".to_owned()))
            }
            Some(("file", path)) => Ok(Self::File(PathBuf::from(path))),
            Some(("cmd", command)) if command.trim().is_empty() => Err(fail(
                "'cmd:' needs a command, e.g. cmd:pass show github/token".to_owned(),
            )),
            Some(("cmd", command)) if command.contains('\0') => {
                Err(fail("the command contains a NUL byte".to_owned()))
            }
            Some(("cmd", command)) => Ok(Self::Command(command.to_owned())),
            Some((kind, _)) => Err(fail(format!("'{}' is not a kind of source", shown(kind)))),
            None => Err(fail("there is no ':' after the kind of source".to_owned())),
        }
    }
}

impl fmt::Display for SecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Env(var) => write!(f, "env:{var}"),
            Self::File(path) => write!(f, "file:{}", path.display()),
            Self::Command(command) => write!(f, "cmd:{command}"),
        }
    }
}

/// One secret: the variable `name` the sandbox sees (holding a placeholder), where the
/// value comes from, and the hosts the value may be sent to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SecretSpec {
    pub name: String,
    pub source: SecretSource,
    /// At least one; each a [`Target::Name`], [`Target::Wildcard`] or [`Target::Ip`],
    /// without repeats.
    pub hosts: Vec<Target>,
}

impl SecretSpec {
    /// The value of `--secret NAME=SOURCE@HOST[,HOST…]`. SOURCE is `env:VAR`,
    /// `file:PATH` or `cmd:COMMAND`; the split between SOURCE and HOSTS is at the last
    /// '@' (a command may contain '@'). Spaces around each host are ignored.
    pub fn parse(value: &str) -> Result<Self, SecretError> {
        let form = |problem: &str| SecretError::Form {
            input: shown_source(value),
            problem: problem.to_owned(),
        };
        let (name, rest) = value
            .split_once('=')
            .ok_or_else(|| form("there is no '=' after the name"))?;
        let (source, hosts) = rest
            .rsplit_once('@')
            .ok_or_else(|| form("there is no '@' before the hosts"))?;
        check_name(name)?;
        let source = SecretSource::parse(source)?;
        let hosts: Vec<&str> = if hosts.trim().is_empty() {
            Vec::new()
        } else {
            hosts.split(',').map(str::trim).collect()
        };
        Ok(Self {
            name: name.to_owned(),
            source,
            hosts: bound_hosts(name, &hosts)?,
        })
    }

    /// From config: `[secrets.NAME] source = "…" hosts = ["…"]`, one host per item.
    pub fn from_parts(name: &str, source: &str, hosts: &[String]) -> Result<Self, SecretError> {
        check_name(name)?;
        let source = SecretSource::parse(source)?;
        let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
        Ok(Self {
            name: name.to_owned(),
            source,
            hosts: bound_hosts(name, &hosts)?,
        })
    }
}

/// `NAME=SOURCE@HOST,HOST`, the form [`SecretSpec::parse`] reads. Never the value, but a
/// `cmd:` source is printed in full, and a command may carry a token inline.
impl fmt::Display for SecretSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}@", self.name, self.source)?;
        for (i, host) in self.hosts.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{host}")?;
        }
        Ok(())
    }
}

/// Every way a secret can be written wrong. The offending text is quoted (control
/// characters escaped, long input shortened) and each message says what to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error(
        "invalid secret '{input}': {problem} (write NAME=SOURCE@HOST[,HOST…], e.g. GITHUB_TOKEN=env:GH_TOKEN@api.github.com)"
    )]
    Form { input: String, problem: String },
    #[error(
        "invalid secret name '{input}': {problem} (the name is the environment variable the sandbox sees, e.g. GITHUB_TOKEN)"
    )]
    Name { input: String, problem: String },
    #[error(
        "the secret name '{input}' cannot be used: {why} (choose another name, e.g. GITHUB_TOKEN)"
    )]
    Reserved { input: String, why: String },
    #[error(
        "invalid secret source '{input}': {problem} (write env:VAR, file:PATH or cmd:COMMAND, e.g. env:GH_TOKEN)"
    )]
    Source { input: String, problem: String },
    /// `position` counts the hosts from 0, to point at the one concerned.
    #[error(
        "invalid secret host '{input}': {problem} (a secret is bound to named hosts: write each as a host name, *.DOMAIN or an IP address, e.g. api.github.com or *.githubusercontent.com)"
    )]
    Host {
        input: String,
        problem: String,
        position: usize,
    },
    #[error(
        "secret '{name}' names no host (a secret is bound to named hosts: write NAME=SOURCE@HOST[,HOST…], e.g. GITHUB_TOKEN=env:GH_TOKEN@api.github.com)"
    )]
    NoHosts { name: String },
}

/// Checks that `name` can be a secret's variable: `[A-Za-z_][A-Za-z0-9_]*`, and not one
/// the sandbox's own environment needs.
pub fn check_name(name: &str) -> Result<(), SecretError> {
    let problem = if name.is_empty() {
        Some("the name is empty")
    } else if !crate::env::valid_name(name) {
        Some("use letters, digits and '_', not starting with a digit")
    } else {
        None
    };
    if let Some(problem) = problem {
        return Err(SecretError::Name {
            input: shown(name),
            problem: problem.to_owned(),
        });
    }
    let why = if name.starts_with("LD_") {
        Some("LD_ variables change how every program in the sandbox is loaded")
    } else if CA_VARIABLES.contains(&name) {
        Some("the sandbox sets it to the CA bundle that trusts its inspection")
    } else if ENVIRONMENT_VARIABLES.contains(&name) {
        Some("the sandbox's own environment needs it")
    } else {
        None
    };
    match why {
        Some(why) => Err(SecretError::Reserved {
            input: shown(name),
            why: why.to_owned(),
        }),
        None => Ok(()),
    }
}

/// A host a secret or `--tls-passthrough` names that cannot be one. The offending text
/// is quoted; `problem` says what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid host '{input}': {problem} (write a host name, *.DOMAIN or an IP address, without a port, e.g. pinned.example.com or *.corp.example)"
)]
pub struct HostError {
    pub input: String,
    pub problem: String,
}

/// A host a secret is bound to, or one under `--tls-passthrough`: a host name,
/// `*.DOMAIN` or an IP address, parsed as in a network rule but without a port, a
/// network, `*` or a URL.
pub fn host_target(text: &str) -> Result<Target, HostError> {
    let fail = |problem: String| HostError {
        input: shown(text),
        problem,
    };
    if text.is_empty() {
        return Err(fail("the host is empty".to_owned()));
    }
    if text.contains("://") {
        return Err(fail(
            "it is a URL; write the host alone, e.g. api.github.com".to_owned(),
        ));
    }
    let rule = Rule::parse(Action::Allow, text).map_err(|e| {
        fail(match e {
            // Without the rule's list of forms, which offers ports and networks.
            NetworkError::Rule { problem, .. } => problem
                .split(" (a rule is ")
                .next()
                .unwrap_or_default()
                .to_owned(),
            other => other.to_string(),
        })
    })?;
    // The same split as a rule's: brackets for IPv6 with a port, a bare IPv6 address
    // has several ':' and no port, anything else has a port after its one ':'.
    let has_port = rule.ports.is_some()
        || match text.strip_prefix('[') {
            Some(rest) => rest.contains("]:"),
            None => text.matches(':').count() == 1,
        };
    match rule.target {
        Target::AnyName => Err(fail(
            "'*' is every host; name the hosts, e.g. api.github.com or *.example.com".to_owned(),
        )),
        Target::Cidr(_) => Err(fail(
            "it is a network; name single hosts or addresses".to_owned(),
        )),
        _ if has_port => Err(fail(
            "it has a port; write the host alone (it is bound on every port)".to_owned(),
        )),
        target => Ok(target),
    }
}

/// The hosts of secret `name`: at least one, each a [`host_target`], repeats dropped.
fn bound_hosts(name: &str, hosts: &[&str]) -> Result<Vec<Target>, SecretError> {
    if hosts.is_empty() {
        return Err(SecretError::NoHosts { name: shown(name) });
    }
    let mut out: Vec<Target> = Vec::with_capacity(hosts.len());
    for (position, host) in hosts.iter().enumerate() {
        let target = host_target(host).map_err(|e| SecretError::Host {
            input: e.input,
            problem: e.problem,
            position,
        })?;
        if !out.contains(&target) {
            out.push(target);
        }
    }
    Ok(out)
}

/// A `--secret` value or a source as an error quotes it: like [`shown`], but a `cmd:`
/// command is cut off after `cmd:`, since it may carry a token inline
/// (`cmd:curl -H 'Authorization: Bearer …'`).
fn shown_source(text: &str) -> String {
    match text.find("cmd:") {
        Some(i) if !text[i + 4..].trim().is_empty() => format!("{}…", shown(&text[..i + 4])),
        _ => shown(text),
    }
}

/// Input as it may be quoted in an error: control characters escaped (a NUL or an
/// escape sequence must not reach the terminal) and at most `MAX_SHOWN` characters.
/// The same as the network module's.
pub(crate) fn shown(input: &str) -> String {
    const MAX_SHOWN: usize = 100;
    let mut out: String = input
        .chars()
        .take(MAX_SHOWN)
        .flat_map(char::escape_debug)
        .collect();
    if input.chars().nth(MAX_SHOWN).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::network::HostName;

    fn name(s: &str) -> HostName {
        HostName::parse(s).unwrap()
    }

    /// The rendered error of a `--secret` value that must be refused.
    fn refused(value: &str) -> String {
        match SecretSpec::parse(value) {
            Ok(spec) => panic!("{value:?} was accepted as {spec}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn every_source_form_parses() {
        let s = SecretSpec::parse("GITHUB_TOKEN=env:GH_TOKEN@api.github.com").unwrap();
        assert_eq!(s.name, "GITHUB_TOKEN");
        assert_eq!(s.source, SecretSource::Env("GH_TOKEN".into()));
        assert_eq!(s.hosts, vec![Target::Name(name("api.github.com"))]);

        let s = SecretSpec::parse("K=file:.secrets/k@a.test").unwrap();
        assert_eq!(s.source, SecretSource::File(".secrets/k".into()));
        let s = SecretSpec::parse("K=file:/run/secrets/k@a.test").unwrap();
        assert_eq!(s.source, SecretSource::File("/run/secrets/k".into()));

        let s = SecretSpec::parse("_k1=cmd:op read op://vault/item/field@a.test").unwrap();
        assert_eq!(s.name, "_k1");
        assert_eq!(
            s.source,
            SecretSource::Command("op read op://vault/item/field".into())
        );
    }

    #[test]
    fn the_split_is_at_the_last_at_sign() {
        let s = SecretSpec::parse("TOKEN=cmd:ssh me@vault.lan cat /t@api.test").unwrap();
        assert_eq!(
            s.source,
            SecretSource::Command("ssh me@vault.lan cat /t".into())
        );
        assert_eq!(s.hosts, vec![Target::Name(name("api.test"))]);
        // '=' in the command is the command's: the name ends at the first '='.
        let s = SecretSpec::parse("T=cmd:env A=b sh -c x@h.test").unwrap();
        assert_eq!(s.source, SecretSource::Command("env A=b sh -c x".into()));
    }

    #[test]
    fn several_hosts_of_every_named_form() {
        let s = SecretSpec::parse(
            "T=env:V@API.GitHub.com, *.githubusercontent.com,10.0.0.5,2001:db8::1,[2001:db8::2],api.github.com",
        )
        .unwrap();
        assert_eq!(
            s.hosts,
            vec![
                Target::Name(name("api.github.com")),
                Target::Wildcard(name("githubusercontent.com")),
                Target::Ip("10.0.0.5".parse().unwrap()),
                Target::Ip("2001:db8::1".parse().unwrap()),
                Target::Ip("2001:db8::2".parse().unwrap()),
            ],
            "canonical, and the repeated host kept once"
        );
        assert_eq!(
            s.to_string(),
            "T=env:V@api.github.com,*.githubusercontent.com,10.0.0.5,2001:db8::1,2001:db8::2"
        );
    }

    #[test]
    fn display_round_trips() {
        for value in [
            "GITHUB_TOKEN=env:GH_TOKEN@api.github.com",
            "K=file:/run/k@*.example.com,a.test",
            "K=cmd:pass show a@b@1.2.3.4",
        ] {
            let spec = SecretSpec::parse(value).unwrap();
            assert_eq!(spec.to_string(), value);
            assert_eq!(SecretSpec::parse(&spec.to_string()).unwrap(), spec);
        }
        for source in ["env:X", "file:rel/p", "cmd:a b"] {
            assert_eq!(SecretSource::parse(source).unwrap().to_string(), source);
        }
    }

    #[test]
    fn from_parts_reads_config_values() {
        let s = SecretSpec::from_parts(
            "NPM_TOKEN",
            "cmd:vault kv get -field=t secret/npm",
            &["registry.npmjs.org".to_owned(), "*.npmjs.com".to_owned()],
        )
        .unwrap();
        assert_eq!(s.name, "NPM_TOKEN");
        assert_eq!(
            s.source,
            SecretSource::Command("vault kv get -field=t secret/npm".into())
        );
        assert_eq!(s.hosts.len(), 2);
        // Config items are one host each: no comma lists.
        let e = SecretSpec::from_parts("T", "env:V", &["a.test,b.test".to_owned()]).unwrap_err();
        assert!(matches!(e, SecretError::Host { position: 0, .. }), "{e}");
        let e = SecretSpec::from_parts("T", "env:V", &[]).unwrap_err();
        assert_eq!(e, SecretError::NoHosts { name: "T".into() });
        let e = SecretSpec::from_parts("PATH", "env:V", &["a.test".to_owned()]).unwrap_err();
        assert!(matches!(e, SecretError::Reserved { .. }), "{e}");
        let e = SecretSpec::from_parts("T", "vault:x", &["a.test".to_owned()]).unwrap_err();
        assert!(matches!(e, SecretError::Source { .. }), "{e}");
    }

    #[test]
    fn the_shape_of_the_value_is_explained() {
        for (value, expected) in [
            ("GITHUB_TOKEN", "no '=' after the name"),
            ("T=env:V", "no '@' before the hosts"),
            ("", "no '=' after the name"),
        ] {
            let msg = refused(value);
            assert!(msg.contains(expected), "{value:?}: {msg}");
            assert!(msg.contains(&format!("invalid secret '{value}'")), "{msg}");
            assert!(
                msg.contains(
                    "write NAME=SOURCE@HOST[,HOST…], e.g. GITHUB_TOKEN=env:GH_TOKEN@api.github.com"
                ),
                "{msg}"
            );
        }
    }

    #[test]
    fn bad_names_are_refused() {
        for (value, expected) in [
            ("=env:V@a.test", "invalid secret name '': the name is empty"),
            (
                "1TOKEN=env:V@a.test",
                "'1TOKEN': use letters, digits and '_'",
            ),
            ("MY-TOKEN=env:V@a.test", "'MY-TOKEN'"),
            ("A B=env:V@a.test", "'A B'"),
            ("TOKÉN=env:V@a.test", "'TOKÉN'"),
        ] {
            let msg = refused(value);
            assert!(msg.contains(expected), "{value:?}: {msg}");
            assert!(msg.contains("e.g. GITHUB_TOKEN"), "{msg}");
        }
    }

    #[test]
    fn names_the_sandbox_needs_are_reserved() {
        for reserved in [
            "PATH",
            "HOME",
            "USER",
            "SHELL",
            "TERM",
            "LANG",
            "PWD",
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "SSL_CERT_FILE",
            "REQUESTS_CA_BUNDLE",
            "NODE_EXTRA_CA_CERTS",
            "CURL_CA_BUNDLE",
            "GIT_SSL_CAINFO",
            "PIP_CERT",
            "CARGO_HTTP_CAINFO",
        ] {
            let msg = refused(&format!("{reserved}=env:V@a.test"));
            assert!(
                msg.contains(&format!("the secret name '{reserved}' cannot be used")),
                "{msg}"
            );
            assert!(msg.contains("choose another name"), "{msg}");
        }
        assert!(refused("LD_AUDIT=env:V@a.test").contains("LD_ variables"));
        assert!(refused("PIP_CERT=env:V@a.test").contains("CA bundle"));
        // Close but not the same: allowed.
        for fine in [
            "PATHS",
            "path",
            "HOME_TOKEN",
            "LDAP_TOKEN",
            "SSL_CERT_FILE_X",
        ] {
            assert!(
                SecretSpec::parse(&format!("{fine}=env:V@a.test")).is_ok(),
                "{fine}"
            );
        }
    }

    #[test]
    fn bad_sources_list_the_three_forms() {
        for (value, expected) in [
            ("T=vault:x@a.test", "'vault' is not a kind of source"),
            ("T=GH_TOKEN@a.test", "no ':' after the kind of source"),
            ("T=ENV:X@a.test", "'ENV' is not a kind of source"),
            ("T=env:@a.test", "'env:' needs the name of a variable"),
            ("T=env:1X@a.test", "'1X' is not a variable name"),
            ("T=env:$X@a.test", "'$X' is not a variable name"),
            ("T=file:@a.test", "'file:' needs a path"),
            ("T=file:~/.token@a.test", "'~' is not expanded"),
            ("T=file:a\0b@a.test", "NUL"),
            ("T=cmd:@a.test", "'cmd:' needs a command"),
            ("T=cmd:   @a.test", "'cmd:' needs a command"),
        ] {
            let msg = refused(value);
            assert!(msg.contains(expected), "{value:?}: {msg}");
            assert!(msg.starts_with("invalid secret source '"), "{msg}");
            assert!(
                msg.contains("write env:VAR, file:PATH or cmd:COMMAND"),
                "{msg}"
            );
        }
        // The offending source is quoted, escaped.
        assert!(refused("T=vault:\u{1b}[2J@a.test").contains("'vault:\\u{1b}[2J'"));
    }

    #[test]
    fn hosts_must_be_named_hosts() {
        for (value, expected, position) in [
            ("T=env:V@*", "'*' is every host", 0),
            ("T=env:V@a.test,*", "'*' is every host", 1),
            ("T=env:V@10.0.0.0/8", "'10.0.0.0/8': it is a network", 0),
            ("T=env:V@[2001:db8::/32]", "is a network", 0),
            (
                "T=env:V@api.github.com:443",
                "'api.github.com:443': it has a port",
                0,
            ),
            ("T=env:V@api.github.com:1-65535", "has a port", 0),
            ("T=env:V@[2001:db8::1]:443", "has a port", 0),
            ("T=env:V@1.2.3.4:80", "has a port", 0),
            ("T=env:V@*.a.test:443", "has a port", 0),
            (
                "T=env:V@https://api.github.com",
                "'https://api.github.com': it is a URL",
                0,
            ),
            ("T=env:V@a.test,,b.test", "the host is empty", 1),
            ("T=env:V@a.test,", "the host is empty", 1),
            ("T=env:V@a..test", "empty label", 0),
            ("T=env:V@foo*.test", "wrong place", 0),
            ("T=env:V@github.com/x", "not a URL or a path", 0),
            ("T=env:V@127.1", "looks like an IPv4 address", 0),
        ] {
            let err = SecretSpec::parse(value).unwrap_err();
            let msg = err.to_string();
            assert!(
                matches!(err, SecretError::Host { position: p, .. } if p == position),
                "{value:?}: {msg}"
            );
            assert!(msg.contains(expected), "{value:?}: {msg}");
            assert!(msg.starts_with("invalid secret host '"), "{msg}");
            assert!(msg.contains("a secret is bound to named hosts"), "{msg}");
            // The network rule's own list of forms (ports, networks) is not offered.
            assert!(!msg.contains("a rule is DOMAIN"), "{msg}");
        }
        for value in ["T=env:V@", "T=env:V@  "] {
            let msg = refused(value);
            assert!(msg.contains("secret 'T' names no host"), "{msg}");
            assert!(msg.contains("a secret is bound to named hosts"), "{msg}");
        }
        // A host with control characters is quoted escaped.
        assert!(refused("T=env:V@a\u{1b}.test").contains("\\u{1b}"));
    }

    #[test]
    fn host_target_accepts_names_wildcards_and_addresses_only() {
        assert_eq!(
            host_target("Pinned.Example.com").unwrap(),
            Target::Name(name("pinned.example.com"))
        );
        assert_eq!(
            host_target("*.corp.example").unwrap(),
            Target::Wildcard(name("corp.example"))
        );
        assert_eq!(
            host_target("::ffff:1.2.3.4").unwrap(),
            Target::Ip("1.2.3.4".parse().unwrap())
        );
        for bad in [
            "",
            "*",
            "*:443",
            "a.test:443",
            "10.0.0.0/8",
            "http://a.test",
        ] {
            let msg = host_target(bad).unwrap_err().to_string();
            assert!(msg.starts_with(&format!("invalid host '{bad}': ")), "{msg}");
            assert!(
                msg.contains("without a port, e.g. pinned.example.com"),
                "{msg}"
            );
            // Not worded for secrets: --tls-passthrough uses it too.
            assert!(!msg.contains("secret"), "{msg}");
        }
    }

    #[test]
    fn a_command_is_not_quoted_in_errors() {
        let token = "Bearer ghp_0123456789";
        for value in [
            format!("T=cmd:curl -H 'Authorization: {token}' https://vault"),
            format!("cmd:echo {token}@api.test"),
            format!("T=cmd:echo {token}\0@api.test"),
        ] {
            let msg = refused(&value);
            assert!(!msg.contains("ghp_"), "{msg}");
            assert!(msg.contains("cmd:…'"), "{msg}");
        }
        // An empty command is quoted as it is.
        assert!(refused("T=cmd: @a.test").contains("'cmd: '"));
    }

    #[test]
    fn long_input_is_shortened_in_errors() {
        let long = format!("T={}@a.test", "x".repeat(500));
        let msg = refused(&long);
        assert!(msg.contains('…'), "{msg}");
        assert!(msg.len() < 400, "{msg}");
        assert_eq!(shown("a\0b"), "a\\0b");
    }
}
