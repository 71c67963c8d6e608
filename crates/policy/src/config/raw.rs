//! The raw, spanned form of a file, as serde reads it. Values keep their byte spans so
//! that errors found while validating them can name the line.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use toml::Spanned;

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
/// A list whose presence matters, not only its items (a project file may not set it).
pub(super) type SpannedList = Option<Spanned<TextList>>;
/// The top level's `[secrets.NAME]` tables.
pub(super) type RawSecrets = Option<Spanned<BTreeMap<Spanned<String>, RawSecret>>>;

/// One `[secrets.NAME]` table. Both keys are required; their absence is reported by
/// the validation, with the line of the name.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table with source = \"env:VAR\", \"file:PATH\" or \"cmd:COMMAND\" and hosts = [\"HOST\", …]"
)]
pub(super) struct RawSecret {
    pub(super) source: Text,
    pub(super) hosts: SpannedList,
}

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
    pub(super) backend: Text,
    pub(super) exec_check: Text,
    pub(super) exec_trace: Text,
    #[serde(default)]
    pub(super) network_rules: TextList,
    #[serde(default)]
    pub(super) add_hosts: TextList,
    pub(super) tls_passthrough: SpannedList,
    pub(super) upstream_ca: SpannedList,
    /// Only to refuse it with a clear message: secrets are defined at the top level.
    /// Always `None` for the top level, whose secrets are [`RawFile`]'s.
    pub(super) secrets: Option<Spanned<IgnoredAny>>,
    #[serde(default)]
    pub(super) mounts: TextList,
    #[serde(default)]
    pub(super) read_only: TextList,
    #[serde(default)]
    pub(super) read_write: TextList,
    pub(super) env: Option<RawEnv>,
    #[serde(default)]
    pub(super) env_files: TextList,
    pub(super) memory: Scalar,
    pub(super) cpus: Scalar,
    pub(super) pids: Scalar,
    pub(super) timeout: Scalar,
    pub(super) max_output: Scalar,
    pub(super) max_record: Scalar,
    pub(super) disk: Scalar,
    pub(super) kill_grace: Scalar,
    pub(super) ptys: Scalar,
    pub(super) best_effort_limits: Option<Spanned<bool>>,
    pub(super) ask: Text,
    pub(super) approval_timeout: Scalar,
}

/// The top level: the keys of a profile plus `profile` and `profiles`. (A separate
/// struct rather than `#[serde(flatten)]`, which would lose spans and unknown-key errors.)
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table of settings")]
pub(super) struct RawFile {
    name: Text,
    agent: Text,
    description: Text,
    workdir: Text,
    user: Text,
    network: Text,
    backend: Text,
    exec_check: Text,
    exec_trace: Text,
    #[serde(default)]
    network_rules: TextList,
    #[serde(default)]
    add_hosts: TextList,
    tls_passthrough: SpannedList,
    upstream_ca: SpannedList,
    secrets: RawSecrets,
    #[serde(default)]
    mounts: TextList,
    #[serde(default)]
    read_only: TextList,
    #[serde(default)]
    read_write: TextList,
    env: Option<RawEnv>,
    #[serde(default)]
    env_files: TextList,
    memory: Scalar,
    cpus: Scalar,
    pids: Scalar,
    timeout: Scalar,
    max_output: Scalar,
    max_record: Scalar,
    disk: Scalar,
    kill_grace: Scalar,
    ptys: Scalar,
    best_effort_limits: Option<Spanned<bool>>,
    ask: Text,
    approval_timeout: Scalar,
    profile: Text,
    #[serde(default)]
    profiles: BTreeMap<String, RawSettings>,
    pub(super) risk: Option<crate::risk::config::RawRisk>,
}

impl RawFile {
    /// The top level's settings, its secrets, the `profile` key and the profiles.
    pub(super) fn split(self) -> (RawSettings, RawSecrets, Text, BTreeMap<String, RawSettings>) {
        let RawFile {
            name,
            agent,
            description,
            workdir,
            user,
            network,
            backend,
            exec_check,
            exec_trace,
            network_rules,
            add_hosts,
            tls_passthrough,
            upstream_ca,
            secrets,
            mounts,
            read_only,
            read_write,
            env,
            env_files,
            memory,
            cpus,
            pids,
            timeout,
            max_output,
            max_record,
            disk,
            kill_grace,
            ptys,
            best_effort_limits,
            ask,
            approval_timeout,
            profile,
            profiles,
            risk: _,
        } = self;
        let settings = RawSettings {
            name,
            agent,
            description,
            workdir,
            user,
            network,
            backend,
            exec_check,
            exec_trace,
            network_rules,
            add_hosts,
            tls_passthrough,
            upstream_ca,
            secrets: None,
            mounts,
            read_only,
            read_write,
            env,
            env_files,
            memory,
            cpus,
            pids,
            timeout,
            max_output,
            max_record,
            disk,
            kill_grace,
            ptys,
            best_effort_limits,
            ask,
            approval_timeout,
        };
        (settings, secrets, profile, profiles)
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
