//! The raw, spanned form of a configuration file, and errors from the TOML layer.

use super::*;

// ---------------------------------------------------------------------------------------
// Raw, spanned form of a file. Values keep their byte spans so that errors found while
// validating them can name the line.

pub(super) type Text = Option<Spanned<String>>;
/// A limit: `memory = "512m"`, `pids = 100`, `cpus = 0.5`.
pub(super) type Scalar = Option<Spanned<RawScalar>>;

#[derive(Deserialize)]
#[serde(untagged, expecting = "a string or a number")]
pub(super) enum RawScalar {
    Int(i64),
    Float(f64),
    Str(String),
}

impl RawScalar {
    pub(super) fn text(&self) -> String {
        match self {
            RawScalar::Int(i) => i.to_string(),
            RawScalar::Float(f) => f.to_string(),
            RawScalar::Str(s) => s.clone(),
        }
    }
}
pub(super) type TextList = Vec<Spanned<String>>;

/// The keys of a `[profiles.NAME]` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table of settings")]
pub(super) struct RawSettings {
    pub(super) name: Text,
    pub(super) agent: Text,
    pub(super) description: Text,
    pub(super) workdir: Text,
    pub(super) user: Text,
    pub(super) network: Text,
    #[serde(default)]
    pub(super) network_rules: TextList,
    #[serde(default)]
    pub(super) add_hosts: TextList,
    #[serde(default)]
    pub(super) mounts: TextList,
    #[serde(default)]
    pub(super) read_only: TextList,
    pub(super) env: Option<RawEnv>,
    #[serde(default)]
    pub(super) env_files: TextList,
    pub(super) memory: Scalar,
    pub(super) cpus: Scalar,
    pub(super) pids: Scalar,
    pub(super) timeout: Scalar,
    pub(super) max_output: Scalar,
    pub(super) disk: Scalar,
    pub(super) kill_grace: Scalar,
    pub(super) ptys: Scalar,
    pub(super) best_effort_limits: Option<Spanned<bool>>,
}

/// The top level: the keys of a profile plus `profile` and `profiles`. (A separate
/// struct rather than `#[serde(flatten)]`, which would lose spans and unknown-key errors.)
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table of settings")]
pub(super) struct RawFile {
    pub(super) name: Text,
    pub(super) agent: Text,
    pub(super) description: Text,
    pub(super) workdir: Text,
    pub(super) user: Text,
    pub(super) network: Text,
    #[serde(default)]
    pub(super) network_rules: TextList,
    #[serde(default)]
    pub(super) add_hosts: TextList,
    #[serde(default)]
    pub(super) mounts: TextList,
    #[serde(default)]
    pub(super) read_only: TextList,
    pub(super) env: Option<RawEnv>,
    #[serde(default)]
    pub(super) env_files: TextList,
    pub(super) memory: Scalar,
    pub(super) cpus: Scalar,
    pub(super) pids: Scalar,
    pub(super) timeout: Scalar,
    pub(super) max_output: Scalar,
    pub(super) disk: Scalar,
    pub(super) kill_grace: Scalar,
    pub(super) ptys: Scalar,
    pub(super) best_effort_limits: Option<Spanned<bool>>,
    pub(super) profile: Text,
    #[serde(default)]
    pub(super) profiles: BTreeMap<String, RawSettings>,
}

impl RawFile {
    pub(super) fn split(self) -> (RawSettings, Text, BTreeMap<String, RawSettings>) {
        let RawFile {
            name,
            agent,
            description,
            workdir,
            user,
            network,
            network_rules,
            add_hosts,
            mounts,
            read_only,
            env,
            env_files,
            memory,
            cpus,
            pids,
            timeout,
            max_output,
            disk,
            kill_grace,
            ptys,
            best_effort_limits,
            profile,
            profiles,
        } = self;
        let settings = RawSettings {
            name,
            agent,
            description,
            workdir,
            user,
            network,
            network_rules,
            add_hosts,
            mounts,
            read_only,
            env,
            env_files,
            memory,
            cpus,
            pids,
            timeout,
            max_output,
            disk,
            kill_grace,
            ptys,
            best_effort_limits,
        };
        (settings, profile, profiles)
    }
}

/// `env` as an array of `"KEY=VALUE"`/`"KEY"` strings or as a table `KEY = "VALUE"`.
pub(super) enum RawEnv {
    List(TextList),
    Table(Vec<(Spanned<String>, Spanned<String>)>),
}

impl<'de> Deserialize<'de> for RawEnv {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EnvVisitor;

        impl<'de> Visitor<'de> for EnvVisitor {
            type Value = RawEnv;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of \"KEY=VALUE\" strings or a table of KEY = \"VALUE\"")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawEnv, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(RawEnv::List(items))
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawEnv, A::Error> {
                let mut pairs = Vec::new();
                while let Some(pair) = map.next_entry()? {
                    pairs.push(pair);
                }
                Ok(RawEnv::Table(pairs))
            }
        }

        deserializer.deserialize_any(EnvVisitor)
    }
}

// ---------------------------------------------------------------------------------------
// Errors from the TOML layer (syntax, unknown keys, wrong types).

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
pub(super) fn setting_key(path: &str) -> &str {
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
        "network_rules" => {
            "network_rules is an array of \"allow TARGET[:PORTS]\" or \"deny TARGET[:PORTS]\" strings, tried in order, e.g. network_rules = [\"allow github.com:443\", \"deny *.evil.com\"]"
        }
        "add_hosts" => {
            "add_hosts is an array of \"NAME:IP\" strings, e.g. add_hosts = [\"db.internal:10.0.0.5\"]"
        }
        "mounts" => {
            "mounts is an array of \"HOST:CONTAINER[:ro]\" strings, e.g. mounts = [\"./src:/workspace\"]"
        }
        "read_only" => "read_only is an array of absolute paths, e.g. read_only = [\"/etc\"]",
        "env" => {
            "env is an array of \"KEY=VALUE\" or \"KEY\" strings, or a table such as env = { NODE_ENV = \"production\" }"
        }
        "env_files" => "env_files is an array of paths, e.g. env_files = [\".env\"]",
        "profile" => "profile names a [profiles.NAME] table, e.g. profile = \"strict\"",
        "profiles" => "each profile is a table: a [profiles.NAME] header followed by keys",
        _ => "see the Configuration section of the documentation",
    }
}

/// 1-based line of a byte offset.
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}
