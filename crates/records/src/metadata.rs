//! `metadata.json`: what a session was, what was actually enforced, and how
//! it ended. Written when the session starts and replaced atomically when
//! it changes or ends.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::layout::ProcessIdentity;
use crate::time;

/// Version of the on-disk record format written by this crate.
pub const RECORD_FORMAT: u32 = 1;

/// Lifecycle state of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Running,
    Exited,
    Signalled,
    Timeout,
    FailedToStart,
    /// The supervisor died without finishing the record (e.g. SIGKILL).
    Interrupted,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::Running,
        Status::Exited,
        Status::Signalled,
        Status::Timeout,
        Status::FailedToStart,
        Status::Interrupted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Exited => "exited",
            Status::Signalled => "signalled",
            Status::Timeout => "timeout",
            Status::FailedToStart => "failed-to-start",
            Status::Interrupted => "interrupted",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Status {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Status::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
                format!("unknown status {s:?}; expected one of {}", names.join(", "))
            })
    }
}

/// Who started the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    #[default]
    Cli,
    Agent,
    Mcp,
    Api,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Cli => "cli",
            Origin::Agent => "agent",
            Origin::Mcp => "mcp",
            Origin::Api => "api",
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The invoking (host) user.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UserInfo {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub name: Option<String>,
}

impl UserInfo {
    /// Real uid/gid from `/proc/self/status`, name from `$USER`/`$LOGNAME`.
    pub fn current() -> Self {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let field = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        };
        Self {
            uid: field("Uid:"),
            gid: field("Gid:"),
            name: std::env::var("USER")
                .or_else(|_| std::env::var("LOGNAME"))
                .ok(),
        }
    }
}

/// The network policy in force. `extra` keeps whatever else the policy
/// layer wants to record (allow-lists, added hosts, ...).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NetworkRecord {
    /// `none`, `allow` or `host`.
    pub mode: Option<String>,
    /// Rules in order, as written by the user (`allow example.com:443`).
    pub rules: Vec<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// Resource limits requested and applied.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    pub memory_bytes: Option<u64>,
    pub cpus: Option<f64>,
    pub pids: Option<u64>,
    pub timeout_secs: Option<u64>,
    pub max_output_bytes: Option<u64>,
    pub disk_bytes: Option<u64>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// The isolation layers actually enforced (never merely requested).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Layers {
    /// Landlock ABI version in force; `None` when Landlock was not applied.
    pub landlock_abi: Option<u32>,
    /// Seccomp mode, e.g. `filter`, `filter+notify`; `None` when not applied.
    pub seccomp: Option<String>,
    /// Namespaces unshared: `user`, `mount`, `pid`, `net`, `ipc`, `uts`, `cgroup`.
    pub namespaces: Vec<String>,
    pub no_new_privs: Option<bool>,
    /// Capabilities left to the sandboxed process (empty = none).
    pub capabilities: Option<Vec<String>>,
    /// `v1`, `v2` or `None` when no cgroup was used.
    pub cgroup_version: Option<String>,
    pub cgroup_controllers: Vec<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// The head of the integrity chain when metadata was last written: lets
/// `verify` notice an `integrity.log` cut short together with the data files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntegrityHead {
    /// Number of `integrity.log` lines before this version of metadata.
    pub records: u64,
    /// Hash of the last of them (hex).
    pub head: String,
}

/// The content of `metadata.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Metadata {
    pub record_format: u32,
    /// The folder name, `session-<UTC timestamp>-<6 hex>`; set by `create`.
    pub session_id: String,
    pub name: Option<String>,
    pub agent: Option<String>,
    pub origin: Origin,
    /// The agent preset `agent start` ran (`claude`, `codex`…), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_preset: Option<String>,
    /// The prompt an agent was started with, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Path of the script run, when the session ran a script.
    pub script: Option<String>,
    /// The command and its arguments, when the session ran a command.
    pub command: Vec<String>,
    pub description: Option<String>,
    #[serde(with = "time::rfc3339")]
    pub start_time: SystemTime,
    #[serde(with = "time::rfc3339::option")]
    pub end_time: Option<SystemTime>,
    /// Working directory inside the sandbox, under the seed format's name: tools
    /// written against that format read `cwd`. Always equal to `cwd_inside`.
    pub cwd: Option<String>,
    /// Working directory on the host.
    pub cwd_outside: Option<String>,
    /// Working directory inside the sandbox.
    pub cwd_inside: Option<String>,
    pub user: UserInfo,
    /// The image the sandbox ran from (`docker.io/library/debian:bookworm`), if any.
    pub image: Option<String>,
    /// Its manifest digest (`sha256:...`): what `image@digest` pins.
    pub image_digest: Option<String>,
    /// `HOST:CONTAINER[:ro]`.
    pub mounts: Vec<String>,
    /// Names of the variables passed in; values are never recorded.
    pub env_keys: Vec<String>,
    pub network: NetworkRecord,
    pub limits: Limits,
    pub layers: Layers,
    pub status: Status,
    pub exit_code: Option<i32>,
    /// Signal number, when `status` is `signalled`.
    pub signal: Option<i32>,
    /// Why the session failed to start or was cut short.
    pub error: Option<String>,
    /// Vectra Guard version that wrote the record.
    pub version: String,
    /// The supervising process, to recognise a crashed session.
    pub supervisor: Option<ProcessIdentity>,
    pub integrity: Option<IntegrityHead>,
}

impl Default for Metadata {
    fn default() -> Self {
        Self {
            record_format: RECORD_FORMAT,
            session_id: String::new(),
            name: None,
            agent: None,
            origin: Origin::Cli,
            agent_preset: None,
            prompt: None,
            script: None,
            command: Vec::new(),
            description: None,
            start_time: UNIX_EPOCH,
            end_time: None,
            cwd: None,
            cwd_outside: None,
            cwd_inside: None,
            user: UserInfo::default(),
            image: None,
            image_digest: None,
            mounts: Vec::new(),
            env_keys: Vec::new(),
            network: NetworkRecord::default(),
            limits: Limits::default(),
            layers: Layers::default(),
            status: Status::Running,
            exit_code: None,
            signal: None,
            error: None,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            supervisor: None,
            integrity: None,
        }
    }
}

impl Metadata {
    /// Metadata of a session starting now.
    pub fn new(origin: Origin) -> Self {
        Self {
            origin,
            start_time: SystemTime::now(),
            ..Self::default()
        }
    }

    /// Records the names of `KEY=VALUE` pairs (or bare names), never values.
    pub fn set_env_keys<I, S>(&mut self, vars: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.env_keys = vars
            .into_iter()
            .map(|v| env_key(v.as_ref()).to_owned())
            .collect();
    }

    /// Whether a recorded `running` status is stale because the supervisor
    /// is gone (crash, SIGKILL, reboot).
    pub fn effective_status(&self, current_boot: Option<&str>) -> Status {
        effective_status(self.status, self.supervisor.as_ref(), current_boot)
    }

    pub(crate) fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut v = serde_json::to_vec_pretty(self)?;
        v.push(b'\n');
        Ok(v)
    }
}

pub(crate) fn env_key(var: &str) -> &str {
    var.split_once('=').map_or(var, |(k, _)| k)
}

pub(crate) fn effective_status(
    status: Status,
    supervisor: Option<&ProcessIdentity>,
    current_boot: Option<&str>,
) -> Status {
    match (status, supervisor) {
        (Status::Running, Some(s)) if s.is_alive(current_boot) => Status::Running,
        (Status::Running, _) => Status::Interrupted,
        (other, _) => other,
    }
}

/// One row of `logs list`: the fields read from `metadata.json`, with the
/// status corrected for crashed supervisors.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub session_id: String,
    pub dir: PathBuf,
    pub name: Option<String>,
    pub agent: Option<String>,
    pub origin: Origin,
    /// Script path, or the command line quoted for a shell.
    pub command: String,
    /// The command and its arguments as recorded (empty for a script): for front
    /// ends that show them one by one. Not in `logs list --json`, which has `command`.
    #[serde(skip)]
    pub argv: Vec<String>,
    pub image: Option<String>,
    pub description: Option<String>,
    #[serde(with = "time::rfc3339")]
    pub start_time: SystemTime,
    #[serde(with = "time::rfc3339::option")]
    pub end_time: Option<SystemTime>,
    /// Effective status (`interrupted` when the supervisor is gone).
    pub status: Status,
    pub exit_code: Option<i32>,
    /// Supervisor pid while the session runs.
    pub pid: Option<u32>,
}

/// Only the fields `list` needs; the rest of the file is skipped unparsed.
#[derive(Deserialize)]
pub(crate) struct SummaryFields {
    #[serde(default)]
    session_id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    origin: Origin,
    #[serde(default)]
    script: Option<String>,
    #[serde(default)]
    command: Vec<String>,
    #[serde(default)]
    image: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(with = "time::rfc3339")]
    start_time: SystemTime,
    #[serde(default, with = "time::rfc3339::option")]
    end_time: Option<SystemTime>,
    status: Status,
    #[serde(default)]
    exit_code: Option<i32>,
    #[serde(default)]
    supervisor: Option<ProcessIdentity>,
}

impl SummaryFields {
    pub(crate) fn into_summary(self, dir: PathBuf, current_boot: Option<&str>) -> Summary {
        let status = effective_status(self.status, self.supervisor.as_ref(), current_boot);
        let command = match self.script {
            Some(s) => s,
            None => crate::quote::quote_argv(self.command.iter().map(|s| s.as_bytes())),
        };
        let argv = self.command;
        let session_id = if self.session_id.is_empty() {
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        } else {
            self.session_id
        };
        Summary {
            session_id,
            dir,
            name: self.name,
            agent: self.agent,
            origin: self.origin,
            command,
            argv,
            image: self.image,
            description: self.description,
            start_time: self.start_time,
            end_time: self.end_time,
            status,
            exit_code: self.exit_code,
            pid: match status {
                Status::Running => self.supervisor.map(|s| s.pid),
                _ => None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_spelling_is_kebab_case() {
        let json = serde_json::to_string(&Status::FailedToStart).unwrap();
        assert_eq!(json, "\"failed-to-start\"");
        for st in Status::ALL {
            assert_eq!(st.as_str().parse::<Status>().unwrap(), st);
            assert_eq!(serde_json::to_string(&st).unwrap(), format!("\"{st}\""));
        }
        assert!("done".parse::<Status>().is_err());
    }

    #[test]
    fn metadata_round_trips_and_keeps_unknown_layer_fields() {
        let mut m = Metadata::new(Origin::Agent);
        m.set_env_keys(["PATH=/usr/bin", "SECRET=hunter2", "TERM"]);
        assert_eq!(m.env_keys, ["PATH", "SECRET", "TERM"]);
        m.layers.landlock_abi = Some(7);
        m.layers
            .extra
            .insert("audit".into(), serde_json::json!({"landlock": true}));
        m.limits.memory_bytes = Some(1 << 30);
        m.mounts = vec!["/src:/work".into(), "/data:/data:ro".into()];
        let json = m.to_json().unwrap();
        let text = String::from_utf8(json.clone()).unwrap();
        assert!(!text.contains("hunter2"));
        assert!(text.contains("\"status\": \"running\""), "{text}");
        let back: Metadata = serde_json::from_slice(&json).unwrap();
        // Millisecond precision on disk.
        let ms = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap().as_millis();
        assert_eq!(ms(back.start_time), ms(m.start_time));
        let mut m2 = back.clone();
        m2.start_time = m.start_time;
        assert_eq!(m2, m);
    }

    #[test]
    fn older_files_missing_fields_still_parse() {
        let m: Metadata =
            serde_json::from_str(r#"{"start_time":"2025-12-19T10:10:53Z","status":"exited"}"#)
                .unwrap();
        assert_eq!(m.status, Status::Exited);
        assert_eq!(m.origin, Origin::Cli);
    }
}
