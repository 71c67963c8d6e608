//! Rating one exec or one destination with a list of rules.
//!
//! The exec itself and, for `sh -c SCRIPT`, every pipeline of the script (nested `-c`
//! scripts and substitutions included) are the candidates; every rule is tried on every
//! candidate. The highest level wins, ties go to the earlier rule, and nothing matched
//! is LOW.

use std::path::{Component, Path, PathBuf};

use super::level::Level;
use super::rule::{ExecMatcher, Matcher, Rule};
use super::script::{self, basename, command_line, shell_script, strip_wrappers};

/// What is known of an exec when it is decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecFacts {
    /// The executable's path as resolved; empty when unknown.
    pub path: String,
    pub argv: Vec<String>,
    /// The working directory, taken as the workspace: paths outside it are "outside".
    pub cwd: Option<PathBuf>,
    /// The argv of the parent, grandparent … when known, nearest first.
    pub parents: Vec<Vec<String>>,
}

/// What is known of a new network destination when it is decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DestFacts {
    /// A name or an IP address.
    pub host: String,
    pub port: u16,
    /// Whether the network policy already allows it.
    pub allowed_by_policy: bool,
    /// The argv of the process that asked, when known.
    pub process: Option<Vec<String>>,
}

/// A rating: the level, the rule that set it, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assessment {
    pub level: Level,
    pub rule: String,
    pub reason: String,
}

impl Assessment {
    fn unmatched() -> Self {
        Assessment {
            level: Level::Low,
            rule: String::new(),
            reason: "no rule matched".to_owned(),
        }
    }
}

/// How deep `sh -c "bash -c '…'"` is followed.
const MAX_SHELL_DEPTH: usize = 4;

/// An ordered list of rules.
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    rules: Vec<Rule>,
}

impl Classifier {
    pub fn new(rules: Vec<Rule>) -> Self {
        Classifier { rules }
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn classify_exec(&self, facts: &ExecFacts) -> Assessment {
        let candidates = Candidates::of(facts);
        self.best(|matcher| match matcher {
            Matcher::Exec(m) => candidates.matches(m),
            Matcher::Destination(_) => false,
        })
    }

    pub fn classify_destination(&self, facts: &DestFacts) -> Assessment {
        let from_code = facts.process.as_deref().is_some_and(runs_code);
        self.best(|matcher| match matcher {
            Matcher::Destination(m) => {
                m.matches(&facts.host, facts.port, facts.allowed_by_policy, from_code)
            }
            Matcher::Exec(_) => false,
        })
    }

    fn best(&self, matches: impl Fn(&Matcher) -> bool) -> Assessment {
        let mut best: Option<&Rule> = None;
        for rule in &self.rules {
            if best.is_none_or(|b| rule.level > b.level) && matches(&rule.matcher) {
                best = Some(rule);
            }
        }
        best.map_or_else(Assessment::unmatched, |rule| Assessment {
            level: rule.level,
            rule: rule.id.clone(),
            reason: rule.reason.clone(),
        })
    }
}

/// Interpreters: a process of one of these that connects out is code doing so.
const INTERPRETERS: &[&str] = &[
    "python", "python2", "python3", "node", "nodejs", "deno", "bun", "perl", "ruby", "php", "lua",
    "luajit", "Rscript", "julia", "sh", "bash", "dash", "zsh", "ksh", "pwsh",
];

/// True when `argv` is an interpreter (`python3.12` counts as `python3`).
pub fn runs_code(argv: &[String]) -> bool {
    let words = strip_wrappers(argv);
    words.first().is_some_and(|program| {
        let name = basename(program);
        let stem = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        INTERPRETERS.contains(&name) || INTERPRETERS.contains(&stem)
    })
}

/// One command to try rules on, prepared once.
struct Command {
    /// The program and its arguments, wrappers such as `sudo` removed.
    words: Vec<String>,
    /// The resolved executable, for the exec itself when no wrapper was removed.
    path: Option<String>,
    line: String,
    /// Absolute, lexically normalised paths this command writes.
    writes: Vec<String>,
}

struct Group {
    commands: Vec<Command>,
    /// The pipeline's text, for pipelines of a script only.
    script_text: Option<String>,
}

struct Candidates<'a> {
    groups: Vec<Group>,
    parents: Vec<String>,
    cwd: Option<&'a Path>,
}

impl<'a> Candidates<'a> {
    fn of(facts: &'a ExecFacts) -> Self {
        let cwd = facts.cwd.as_deref();
        let words = strip_wrappers(&facts.argv);
        let path =
            (words.len() == facts.argv.len() && !facts.path.is_empty()).then(|| facts.path.clone());
        let mut candidates = Candidates {
            groups: vec![Group {
                commands: vec![Command::new(words.to_vec(), path, &[], cwd)],
                script_text: None,
            }],
            parents: facts.parents.iter().map(|p| command_line(p)).collect(),
            cwd,
        };
        if let Some(script) = shell_script(words) {
            candidates.add_script(script, 1);
        }
        candidates
    }

    /// The script's pipelines, and those of the `-c` scripts its commands run.
    fn add_script(&mut self, script: &str, depth: usize) {
        for pipeline in script::parse(script) {
            let script_text = Some(pipeline.text());
            let commands: Vec<Command> = pipeline
                .commands
                .into_iter()
                .map(|c| {
                    Command::new(
                        strip_wrappers(&c.words).to_vec(),
                        None,
                        &c.redirects,
                        self.cwd,
                    )
                })
                .collect();
            let inner: Vec<String> = commands
                .iter()
                .filter_map(|c| shell_script(&c.words).map(str::to_owned))
                .collect();
            self.groups.push(Group {
                commands,
                script_text,
            });
            if depth < MAX_SHELL_DEPTH {
                for script in inner {
                    self.add_script(&script, depth + 1);
                }
            }
        }
    }

    fn matches(&self, m: &ExecMatcher) -> bool {
        if let Some(parent) = &m.parent
            && !self.parents.iter().any(|p| parent.is_match(p))
        {
            return false;
        }
        let per_command = !m.executable.is_empty()
            || !m.argv.is_empty()
            || m.arg.is_some()
            || !m.writes.is_empty()
            || m.outside_cwd;
        self.groups.iter().any(|group| {
            if let Some(script) = &m.script {
                match &group.script_text {
                    Some(text) if script.is_match(text) => {}
                    _ => return false,
                }
            }
            !per_command || group.commands.iter().any(|c| c.matches(m, self.cwd))
        })
    }
}

impl Command {
    fn new(
        words: Vec<String>,
        path: Option<String>,
        redirects: &[String],
        cwd: Option<&Path>,
    ) -> Self {
        let writes = redirects
            .iter()
            .map(String::as_str)
            .chain(write_targets(&words))
            .map(|target| absolute(target, cwd))
            .collect();
        Command {
            line: command_line(&words),
            words,
            path,
            writes,
        }
    }

    fn matches(&self, m: &ExecMatcher, cwd: Option<&Path>) -> bool {
        let Some(program) = self.words.first() else {
            return false;
        };
        let executable = m.executable.is_empty()
            || m.executable
                .iter()
                .any(|g| g.matches(program) || self.path.as_deref().is_some_and(|p| g.matches(p)));
        executable
            && m.argv.iter().all(|r| r.is_match(&self.line))
            && m.arg
                .as_ref()
                .is_none_or(|r| self.words[1..].iter().any(|a| r.is_match(a)))
            && (m.writes.is_empty()
                || self
                    .writes
                    .iter()
                    .any(|w| m.writes.iter().any(|g| g.matches(w))))
            && (!m.outside_cwd || self.words[1..].iter().any(|a| outside(a, cwd)))
    }
}

/// The paths a writing program writes: the destination of `cp`/`mv`/`install`/`ln`,
/// every file of `tee`, `dd of=`, `curl -o`, `wget -O`, and the files `chmod` makes
/// executable.
fn write_targets(words: &[String]) -> Vec<&str> {
    let Some((program, args)) = words.split_first() else {
        return Vec::new();
    };
    let operands = || {
        args.iter()
            .filter(|a| !a.starts_with('-'))
            .map(String::as_str)
    };
    let after = |flags: &[&str]| {
        args.windows(2)
            .filter(|w| flags.contains(&w[0].as_str()))
            .map(|w| w[1].as_str())
            .collect::<Vec<_>>()
    };
    match basename(program) {
        "cp" | "mv" | "install" | "ln" | "rsync" | "scp" => {
            let mut targets = after(&["-t", "--target-directory"]);
            targets.extend(
                args.iter()
                    .filter_map(|a| a.strip_prefix("--target-directory=")),
            );
            if targets.is_empty() && operands().count() >= 2 {
                targets.extend(operands().next_back());
            }
            targets
        }
        "tee" | "touch" | "truncate" => operands().collect(),
        "dd" => args.iter().filter_map(|a| a.strip_prefix("of=")).collect(),
        "curl" => after(&["-o", "--output"]),
        "wget" => after(&["-O", "--output-document"])
            .into_iter()
            .filter(|t| *t != "-")
            .collect(),
        "chmod" => {
            let mut operands = operands();
            match operands.next() {
                Some(mode) if adds_execute(mode) => operands.collect(),
                _ => Vec::new(),
            }
        }
        _ => Vec::new(),
    }
}

/// `+x`, `u+x`, `a=rwx`, `755`: a mode that gives execute permission.
fn adds_execute(mode: &str) -> bool {
    if mode.chars().all(|c| c.is_ascii_digit()) {
        return mode
            .chars()
            .rev()
            .take(3)
            .any(|d| d.to_digit(8).is_some_and(|d| d & 1 == 1));
    }
    mode.split(',')
        .any(|clause| (clause.contains('+') || clause.contains('=')) && clause.contains('x'))
}

/// `target` as an absolute, lexically normalised path (`..` removed, `$HOME` as `~`);
/// relative ones joined to the working directory when known.
fn absolute(target: &str, cwd: Option<&Path>) -> String {
    let home = ["$HOME/", "${HOME}/"]
        .iter()
        .find_map(|prefix| target.strip_prefix(prefix));
    if let Some(rest) = home {
        return format!("~/{rest}");
    }
    if target.starts_with('~') {
        return target.to_owned();
    }
    let path = match cwd {
        Some(cwd) => cwd.join(target),
        None => PathBuf::from(target),
    };
    normalize(&path).to_string_lossy().into_owned()
}

fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// An argument that names a path outside the working directory: absolute or `..` paths
/// that leave it, the home folder, a variable. With no working directory, or `/` as
/// one, every path is outside.
fn outside(arg: &str, cwd: Option<&Path>) -> bool {
    if arg.starts_with('-') && arg.len() > 1 {
        return false;
    }
    if arg.starts_with('~') || arg.starts_with('$') {
        return true;
    }
    let Some(cwd) = cwd.filter(|c| c.parent().is_some()) else {
        return true;
    };
    let path = normalize(&cwd.join(arg));
    !(path.starts_with(cwd) && path != cwd)
}
