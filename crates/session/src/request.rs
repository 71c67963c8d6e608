//! What a front end asks for: one sandboxed run, as plain data. The `vectraguard`
//! CLI builds it from its flags and the configuration files it discovered; other
//! front ends build it in code. Nothing here is checked yet: [`crate::plan`] does that.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Result, bail};
use vg_policy::config::{ConfigFile, Settings};

/// One run to plan.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// A script on the host (its path relative to `cwd`, then its arguments), or,
    /// with `after_dash_dash`, the command itself.
    pub args: Vec<String>,
    /// `args` came after `--`: a command, never a script.
    pub after_dash_dash: bool,
    /// The directory the run starts from: the default workspace and workdir.
    pub cwd: PathBuf,
    /// Configuration files the front end found, lowest rank first
    /// (project, then user; or the one given explicitly).
    pub config: Vec<ConfigFile>,
    /// The profile to apply from them (`--profile`).
    pub profile: Option<String>,
    /// Settings given directly (the CLI's flags): they rank above every file.
    pub settings: Settings,
    /// The agent's name when no setting names one (the CLI: `VECTRAGUARD_AGENT`).
    pub agent: Option<String>,
    /// Run from an image of the store instead of the host's system directories.
    pub image: Option<ImageChoice>,
    /// The command gets a terminal (`-t`, `sandbox shell`).
    pub tty: bool,
    /// The command is an interactive shell: with an image, it replaces the image's
    /// entrypoint and command.
    pub shell: bool,
    /// A persistent sandbox (`sandbox create`): no command of its own; commands are
    /// started in it later, each recorded in its session ([`crate::persistent`]).
    pub persistent: bool,
    /// Private tmpfs folders inside the sandbox (`--tmpfs PATH`), each `--disk` big.
    pub tmpfs: Vec<PathBuf>,
    /// Which refused file accesses are reported as `violation` events.
    pub violations: Violations,
    /// Learning mode (`--learn NAME`): the relaxed view and the file tracing that
    /// [`crate::learn`] turns into the profile NAME once the run ends.
    pub learn: Option<String>,
    /// `agent start`: the preset and the prompt, for the record.
    pub agent_preset: Option<String>,
    pub prompt: Option<String>,
    /// Keep a session record (the default) or not (`--no-record`).
    pub record: Recording,
    /// Show a note on stderr the first time each destination is refused.
    pub network_notes: bool,
    /// The environment of the front end: `TERM`, `LANG` and `--env KEY` without a
    /// value come from here.
    pub host_env: BTreeMap<String, String>,
}

/// Which refused file accesses a recorded run reports (`--violations`). Refused
/// system calls are always reported (they cost nothing until one is refused).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Violations {
    /// Refused writes, creations, renames and removals: only the file calls that
    /// change something are traced, read-only opens cost nothing.
    #[default]
    Changes,
    /// Every refused access, reads of hidden files too: every open is traced, at a
    /// round trip to the supervisor each (tens of microseconds).
    All,
}

impl Violations {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "changes" => Ok(Self::Changes),
            "all" => Ok(Self::All),
            _ => bail!(
                "--violations {s:?}: use 'changes' (refused writes, creations and removals, the default) or 'all' (refused reads too; every open is traced)"
            ),
        }
    }
}

/// An image to run from.
#[derive(Debug, Clone)]
pub struct ImageChoice {
    pub name: String,
    pub pull: PullPolicy,
    /// Replaces the image's entrypoint; an empty one clears it.
    pub entrypoint: Option<String>,
}

/// Whether and where the session is recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recording {
    /// No record, no relays: the command gets the caller's stdio.
    Off,
    /// Recorded under `root`, or the default records folder when `None`
    /// ([`crate::home::records_root`]).
    On { root: Option<PathBuf> },
}

impl Default for Recording {
    fn default() -> Self {
        Self::On { root: None }
    }
}

impl Request {
    /// The front end's own environment, as far as it is text.
    pub fn process_env() -> BTreeMap<String, String> {
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect()
    }

    pub(crate) fn env_var(&self, key: &str) -> Option<&str> {
        self.host_env.get(key).map(String::as_str)
    }
}

/// When to pull the image (`--pull`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullPolicy {
    Never,
    Missing,
    Always,
}

impl PullPolicy {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "never" => Ok(Self::Never),
            "missing" => Ok(Self::Missing),
            "always" => Ok(Self::Always),
            other => bail!("--pull {other}: use never, missing (the default) or always"),
        }
    }
}
