//! The sandbox environment: a small safe base plus exactly what the user passes.
//!
//! The host environment is never inherited wholesale — it is where tokens and cloud
//! credentials live. Only `TERM` and `LANG` are copied (they carry no secrets and
//! programs misbehave without them); everything else must be named with `--env`.

use std::collections::BTreeMap;

use crate::identity::Identity;

/// The PATH inside the sandbox; the host's PATH may point into hidden directories.
pub const SANDBOX_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EnvError {
    #[error(
        "invalid environment variable '{0}': expected KEY=VALUE with KEY made of letters, digits and '_' (not starting with a digit)"
    )]
    BadName(String),
    #[error("invalid environment variable '{0}': values cannot contain a NUL byte")]
    Nul(String),
    #[error("{file}:{line}: {message}")]
    File {
        file: String,
        line: usize,
        message: String,
    },
}

/// One `--env` item: `KEY=VALUE`, or `KEY` alone to copy the host's value (as Docker).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvAssignment {
    pub key: String,
    pub value: Option<String>,
}

impl EnvAssignment {
    pub fn parse(item: &str) -> Result<Self, EnvError> {
        if item.contains('\0') {
            return Err(EnvError::Nul(item.to_owned()));
        }
        let (key, value) = match item.split_once('=') {
            Some((k, v)) => (k, Some(v.to_owned())),
            None => (item, None),
        };
        if !valid_name(key) {
            return Err(EnvError::BadName(item.to_owned()));
        }
        Ok(Self {
            key: key.to_owned(),
            value,
        })
    }
}

pub(crate) fn valid_name(key: &str) -> bool {
    let mut chars = key.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Parses an env file: `KEY=VALUE` lines, `#` comments, blank lines, an optional
/// `export ` prefix; values are taken literally (no quote or `$` processing), as
/// Docker's `--env-file` does, so what the file says is what the sandbox gets.
pub fn parse_env_file(text: &str, file: &str) -> Result<Vec<EnvAssignment>, EnvError> {
    let mut out = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let item =
            EnvAssignment::parse(line.trim_end_matches('\r')).map_err(|e| EnvError::File {
                file: file.to_owned(),
                line: index + 1,
                message: e.to_string(),
            })?;
        out.push(item);
    }
    Ok(out)
}

/// The final environment of the sandboxed command, sorted by key for reproducibility.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    vars: BTreeMap<String, String>,
}

impl Environment {
    /// The safe base set: PATH, HOME, USER, and the host's TERM and LANG when present.
    pub fn base(identity: &Identity, host_term: Option<&str>, host_lang: Option<&str>) -> Self {
        let mut vars = BTreeMap::new();
        vars.insert("PATH".to_owned(), SANDBOX_PATH.to_owned());
        vars.insert("HOME".to_owned(), identity.home.display().to_string());
        vars.insert("USER".to_owned(), identity.name.clone());
        if let Some(term) = host_term {
            vars.insert("TERM".to_owned(), term.to_owned());
        }
        vars.insert("LANG".to_owned(), host_lang.unwrap_or("C.UTF-8").to_owned());
        Self { vars }
    }

    /// Applies user assignments in order; `KEY` without a value copies `lookup(KEY)`
    /// and is skipped when the host does not have it (Docker's behaviour).
    pub fn apply<'a>(
        &mut self,
        items: impl IntoIterator<Item = &'a EnvAssignment>,
        lookup: impl Fn(&str) -> Option<String>,
    ) {
        for item in items {
            let value = match &item.value {
                Some(v) => Some(v.clone()),
                None => lookup(&item.key),
            };
            if let Some(value) = value {
                self.vars.insert(item.key.clone(), value);
            }
        }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.vars.get(key).map(String::as_str)
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.vars.keys().map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn alice() -> Identity {
        Identity {
            uid: 1000,
            gid: 1000,
            name: "alice".into(),
            home: PathBuf::from("/home/alice"),
        }
    }

    #[test]
    fn base_contains_only_the_safe_set() {
        let env = Environment::base(&alice(), Some("xterm"), None);
        let keys: Vec<_> = env.keys().collect();
        assert_eq!(keys, ["HOME", "LANG", "PATH", "TERM", "USER"]);
        assert_eq!(env.get("LANG"), Some("C.UTF-8"));
        assert_eq!(env.get("HOME"), Some("/home/alice"));
    }

    #[test]
    fn assignments_override_and_copy_from_host_only_when_named() {
        let mut env = Environment::base(&alice(), None, None);
        let items = [
            EnvAssignment::parse("NODE_ENV=production").unwrap(),
            EnvAssignment::parse("EMPTY=").unwrap(),
            EnvAssignment::parse("FROM_HOST").unwrap(),
            EnvAssignment::parse("MISSING_ON_HOST").unwrap(),
            EnvAssignment::parse("A=b=c").unwrap(),
        ];
        env.apply(&items, |k| (k == "FROM_HOST").then(|| "h".to_owned()));
        assert_eq!(env.get("NODE_ENV"), Some("production"));
        assert_eq!(env.get("EMPTY"), Some(""));
        assert_eq!(env.get("FROM_HOST"), Some("h"));
        assert_eq!(env.get("MISSING_ON_HOST"), None);
        assert_eq!(env.get("A"), Some("b=c"));
    }

    #[test]
    fn rejects_bad_names() {
        for bad in ["=x", "1A=x", "A-B=x", "A B=x", "", "A\0=x"] {
            assert!(EnvAssignment::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn env_file_reports_file_and_line() {
        let text = "# comment\n\nexport A=1\nB = 2\n";
        let err = parse_env_file(text, "x.env").unwrap_err();
        assert!(matches!(err, EnvError::File { line: 4, .. }), "{err}");
        let ok = parse_env_file("A=1\n  B='q'\r\n", "x.env").unwrap();
        assert_eq!(ok[1].value.as_deref(), Some("'q'"));
    }
}
