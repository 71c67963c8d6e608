//! A risk rule as data: an id, a level, a reason, and what it matches.
//!
//! [`RuleSpec`] is the written form (built-in defaults and `[[risk.rules]]` in a
//! configuration file); [`Rule`] is the same rule checked and compiled. A rule matches
//! either execs or network destinations; every matcher it states must match.

use std::net::IpAddr;

use regex::Regex;
use serde::{Deserialize, Deserializer};

use super::level::Level;

/// A rule as written. Unset matchers match anything; a rule must state at least one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a risk rule table")]
pub struct RuleSpec {
    pub id: String,
    /// `low`, `medium`, `high` or `critical`, any case; checked by [`RuleSpec::compile`]
    /// so that the error can name the rule.
    pub level: String,
    pub reason: String,

    // Exec matchers, tried on the exec itself and on every simple command of a shell's
    // `-c` script (a pipeline's commands being tried one by one).
    /// Globs on the program: a basename (`pip*`) or, with a `/`, the whole path.
    #[serde(default, deserialize_with = "one_or_many")]
    pub executable: Vec<String>,
    /// Regexes that must all match the command line, quoted as a shell would show it.
    #[serde(default, deserialize_with = "one_or_many")]
    pub argv: Vec<String>,
    /// A regex that one argument (after the program) must match in full or in part.
    pub arg: Option<String>,
    /// A regex over one pipeline of a shell's `-c` script, `curl x | sh`; never over a
    /// plain exec.
    pub script: Option<String>,
    /// Path globs (`**/.git/hooks/**`, `~/.bashrc`): the command writes one of them, by
    /// redirection or as the destination of `cp`, `mv`, `tee`, `install`, `ln`, `dd`,
    /// `curl -o`, `wget -O`, or `chmod` adding execute permission.
    #[serde(default)]
    pub writes: Vec<String>,
    /// An argument names a path that is not inside the working directory.
    #[serde(default)]
    pub outside_cwd: bool,
    /// A regex over the command line of a parent (any ancestor) of the exec.
    pub parent: Option<String>,

    // Destination matchers.
    /// Globs on the host name, `*.example.com`.
    #[serde(default, deserialize_with = "one_or_many")]
    pub host: Vec<String>,
    /// The destination is an IP address rather than a name.
    #[serde(default)]
    pub raw_ip: bool,
    /// The port is one of these.
    #[serde(default)]
    pub ports: Vec<u16>,
    /// The port is none of these.
    #[serde(default)]
    pub port_not_in: Vec<u16>,
    /// The policy does not allow the name (yet).
    #[serde(default)]
    pub unlisted: bool,
    /// The process that asked is an interpreter running code (python, node, a shell…).
    #[serde(default)]
    pub from_code: bool,
}

fn one_or_many<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged, expecting = "a string or an array of strings")]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(deserializer)? {
        OneOrMany::One(one) => vec![one],
        OneOrMany::Many(many) => many,
    })
}

/// Why a rule cannot be used; names the rule, what is wrong and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("risk rule '{rule}': {message} (hint: {hint})")]
pub struct RuleError {
    pub rule: String,
    pub message: String,
    pub hint: String,
}

/// A checked rule, ready to match.
#[derive(Debug, Clone)]
pub struct Rule {
    pub id: String,
    pub level: Level,
    pub reason: String,
    pub matcher: Matcher,
}

#[derive(Debug, Clone)]
pub enum Matcher {
    Exec(ExecMatcher),
    Destination(DestMatcher),
}

#[derive(Debug, Clone, Default)]
pub struct ExecMatcher {
    pub executable: Vec<Glob>,
    pub argv: Vec<Regex>,
    pub arg: Option<Regex>,
    pub script: Option<Regex>,
    pub writes: Vec<Glob>,
    pub outside_cwd: bool,
    pub parent: Option<Regex>,
}

impl ExecMatcher {
    /// True when a matcher applies to single commands (not only to a script's pipeline).
    pub fn has_command_matchers(&self) -> bool {
        !self.executable.is_empty()
            || !self.argv.is_empty()
            || self.arg.is_some()
            || !self.writes.is_empty()
            || self.outside_cwd
            || self.parent.is_some()
    }
}

#[derive(Debug, Clone, Default)]
pub struct DestMatcher {
    pub host: Vec<Glob>,
    pub raw_ip: bool,
    pub ports: Vec<u16>,
    pub port_not_in: Vec<u16>,
    pub unlisted: bool,
    pub from_code: bool,
}

impl RuleSpec {
    /// A rule about execs, to be completed with the builder methods below.
    pub fn new(id: &str, level: Level, reason: &str) -> Self {
        RuleSpec {
            id: id.to_owned(),
            level: level.as_str().to_owned(),
            reason: reason.to_owned(),
            ..RuleSpec::default()
        }
    }

    pub fn executable(mut self, globs: &[&str]) -> Self {
        self.executable = globs.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn argv(mut self, regexes: &[&str]) -> Self {
        self.argv = regexes.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn arg(mut self, regex: &str) -> Self {
        self.arg = Some(regex.to_owned());
        self
    }

    pub fn script(mut self, regex: &str) -> Self {
        self.script = Some(regex.to_owned());
        self
    }

    pub fn writes(mut self, globs: &[&str]) -> Self {
        self.writes = globs.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn outside_cwd(mut self) -> Self {
        self.outside_cwd = true;
        self
    }

    pub fn parent(mut self, regex: &str) -> Self {
        self.parent = Some(regex.to_owned());
        self
    }

    /// Checks and compiles the rule.
    pub fn compile(&self) -> Result<Rule, RuleError> {
        let error = |message: String, hint: &str| RuleError {
            rule: self.id.clone(),
            message,
            hint: hint.to_owned(),
        };
        let valid_id = !self.id.is_empty()
            && self
                .id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
        if !valid_id {
            return Err(error(
                "the id must be letters, digits, '-', '_' or '.'".to_owned(),
                "give the rule a short name such as id = \"curl-to-python\"",
            ));
        }
        let level: Level = self.level.parse().map_err(|_| {
            error(
                format!("unknown level '{}'", self.level),
                "use one of low, medium, high, critical",
            )
        })?;
        if self.reason.trim().is_empty() {
            return Err(error(
                "the reason is empty".to_owned(),
                "say in a few words why this is risky; it is shown to the person who decides",
            ));
        }
        let regex = |field: &str, text: &str| {
            Regex::new(text).map_err(|e| {
                error(
                    format!("{field} is not a valid regular expression: {e}"),
                    "use Rust regex syntax (https://docs.rs/regex); escape '|', '.', '(' with '\\'",
                )
            })
        };
        let glob = |text: &str| {
            Glob::new(text).map_err(|message| {
                error(
                    message,
                    "use * within a name, ** across folders, ~ for a home folder",
                )
            })
        };
        let exec = ExecMatcher {
            executable: self
                .executable
                .iter()
                .map(|g| glob(g))
                .collect::<Result<_, _>>()?,
            argv: self
                .argv
                .iter()
                .map(|r| regex("argv", r))
                .collect::<Result<_, _>>()?,
            arg: self.arg.as_deref().map(|r| regex("arg", r)).transpose()?,
            script: self
                .script
                .as_deref()
                .map(|r| regex("script", r))
                .transpose()?,
            writes: self
                .writes
                .iter()
                .map(|g| glob(g))
                .collect::<Result<_, _>>()?,
            outside_cwd: self.outside_cwd,
            parent: self
                .parent
                .as_deref()
                .map(|r| regex("parent", r))
                .transpose()?,
        };
        let dest = DestMatcher {
            host: self
                .host
                .iter()
                .map(|g| glob(g))
                .collect::<Result<_, _>>()?,
            raw_ip: self.raw_ip,
            ports: self.ports.clone(),
            port_not_in: self.port_not_in.clone(),
            unlisted: self.unlisted,
            from_code: self.from_code,
        };
        let is_exec = exec.has_command_matchers() || exec.script.is_some();
        let is_dest = !dest.host.is_empty()
            || dest.raw_ip
            || !dest.ports.is_empty()
            || !dest.port_not_in.is_empty()
            || dest.unlisted
            || dest.from_code;
        let matcher = match (is_exec, is_dest) {
            (true, false) => Matcher::Exec(exec),
            (false, true) => Matcher::Destination(dest),
            (true, true) => {
                return Err(error(
                    "it mixes exec matchers (executable, argv, arg, script, writes, outside_cwd, parent) with destination matchers (host, raw_ip, ports, port_not_in, unlisted, from_code)".to_owned(),
                    "split it into two rules, one for execs and one for destinations",
                ));
            }
            (false, false) => {
                return Err(error(
                    "it matches nothing: no matcher is set".to_owned(),
                    "add at least one of executable, argv, arg, script, writes, outside_cwd, parent, host, raw_ip, ports, port_not_in, unlisted, from_code",
                ));
            }
        };
        Ok(Rule {
            id: self.id.clone(),
            level,
            reason: self.reason.clone(),
            matcher,
        })
    }
}

/// A shell-style pattern: `*` within one path component, `**` across components, `?`
/// one character, a leading `~/` any home folder (`~`, `/root`, `/home/NAME`). Without
/// a `/`, a pattern is matched against the last component only.
#[derive(Debug, Clone)]
pub struct Glob {
    pub text: String,
    regex: Regex,
    basename_only: bool,
}

impl Glob {
    pub fn new(text: &str) -> Result<Glob, String> {
        if text.is_empty() {
            return Err("a pattern is empty".to_owned());
        }
        let mut pattern = String::from("^");
        let mut rest = text;
        if let Some(tail) = rest.strip_prefix("~/") {
            pattern.push_str("(?:~|/root|/home/[^/]+)/");
            rest = tail;
        }
        let chars: Vec<char> = rest.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '*' if chars.get(i + 1) == Some(&'*') => {
                    let slash_after = chars.get(i + 2) == Some(&'/');
                    let slash_before = i > 0 && chars[i - 1] == '/';
                    if slash_after {
                        // `**/`: any number of whole components, none included.
                        pattern.push_str("(?:.*/)?");
                        i += 3;
                        continue;
                    }
                    if slash_before && i + 2 == chars.len() {
                        // A trailing `/**`: the folder itself or anything in it.
                        pattern.pop();
                        pattern.push_str("(?:/.*)?");
                    } else {
                        pattern.push_str(".*");
                    }
                    i += 2;
                    continue;
                }
                '*' => pattern.push_str("[^/]*"),
                '?' => pattern.push_str("[^/]"),
                c => pattern.push_str(&regex::escape(&c.to_string())),
            }
            i += 1;
        }
        pattern.push('$');
        let regex = Regex::new(&pattern).map_err(|e| format!("pattern '{text}': {e}"))?;
        Ok(Glob {
            text: text.to_owned(),
            regex,
            basename_only: !text.contains('/'),
        })
    }

    pub fn matches(&self, path: &str) -> bool {
        let subject = if self.basename_only {
            path.rsplit('/').next().unwrap_or(path)
        } else {
            path
        };
        self.regex.is_match(subject)
    }
}

impl DestMatcher {
    pub fn matches(&self, host: &str, port: u16, allowed: bool, from_code: bool) -> bool {
        (self.host.is_empty() || self.host.iter().any(|g| g.matches(host)))
            && (!self.raw_ip || is_ip(host))
            // Port 0: not known yet (a DNS question); port matchers then do not match.
            && (self.ports.is_empty() || (port != 0 && self.ports.contains(&port)))
            && (self.port_not_in.is_empty() || (port != 0 && !self.port_not_in.contains(&port)))
            && (!self.unlisted || !allowed)
            && (!self.from_code || from_code)
    }
}

/// `192.0.2.1`, `::1` or `[::1]`.
pub fn is_ip(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse::<IpAddr>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_names_paths_and_homes() {
        let g = |p: &str| Glob::new(p).map_err(|e| e.to_string());
        let hooks = g("**/.git/hooks/**").unwrap();
        assert!(hooks.matches("/w/.git/hooks/pre-commit"));
        assert!(hooks.matches("/w/.git/hooks"));
        assert!(hooks.matches(".git/hooks/x"));
        assert!(!hooks.matches("/w/.git/hooksx"));
        assert!(!hooks.matches("/w/git/hooks/x"));
        let rc = g("~/.bashrc").unwrap();
        assert!(rc.matches("/home/ann/.bashrc"));
        assert!(rc.matches("/root/.bashrc"));
        assert!(rc.matches("~/.bashrc"));
        assert!(!rc.matches("/home/ann/x/.bashrc"));
        let pip = g("pip*").unwrap();
        assert!(pip.matches("/usr/bin/pip3"));
        assert!(!pip.matches("/usr/bin/pipx/x/python"));
        let bin = g("/usr/local/bin/*").unwrap();
        assert!(bin.matches("/usr/local/bin/tool"));
        assert!(!bin.matches("/usr/local/bin/a/b"));
    }

    #[test]
    fn rules_must_match_something_of_one_kind() {
        let bare = RuleSpec::new("x", Level::High, "why");
        assert!(
            bare.compile()
                .unwrap_err()
                .message
                .contains("matches nothing")
        );
        let mut mixed = RuleSpec::new("x", Level::High, "why").executable(&["nc"]);
        mixed.raw_ip = true;
        assert!(mixed.compile().unwrap_err().message.contains("mixes"));
        let bad = RuleSpec::new("x", Level::High, "why").argv(&["(unclosed"]);
        let err = bad.compile().unwrap_err();
        assert_eq!(err.rule, "x");
        assert!(
            err.message
                .starts_with("argv is not a valid regular expression")
        );
        assert!(
            RuleSpec::new("bad id", Level::High, "why")
                .executable(&["x"])
                .compile()
                .is_err()
        );
        assert!(
            RuleSpec::new("x", Level::High, " ")
                .executable(&["x"])
                .compile()
                .is_err()
        );
    }

    #[test]
    fn destination_matchers() {
        let mut spec = RuleSpec::new("d", Level::High, "why");
        spec.raw_ip = true;
        spec.port_not_in = vec![80, 443];
        let rule = spec.compile().unwrap();
        let Matcher::Destination(d) = rule.matcher else {
            panic!("not a destination rule");
        };
        assert!(d.matches("10.0.0.1", 22, true, false));
        assert!(d.matches("[::1]", 8080, true, false));
        assert!(!d.matches("10.0.0.1", 443, true, false));
        assert!(!d.matches("example.com", 22, true, false));
    }
}
