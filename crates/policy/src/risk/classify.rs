//! Rating one exec or one destination with a list of rules.
//!
//! The exec itself (by the name it was run under and as the file it is) and, for
//! `sh -c SCRIPT`, every pipeline of the script (nested `-c` scripts and substitutions
//! included), with the commands `find -exec` runs, are the candidates; every rule is
//! tried on every candidate. The highest level wins, ties go to the earlier rule, and
//! nothing matched is LOW.

use std::path::{Component, Path, PathBuf};

use super::level::Level;
use super::rule::{ExecMatcher, Matcher, Rule};
use super::script::{self, command_line};
use super::wrappers::{
    command_name, find_commands, inline_script, is_multi_call, split_string, strip_wrappers,
    wrapped,
};

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
    /// The tool the executable file is, known by its identity rather than by the name
    /// it was run under: a symlink to, or a copy of, `/usr/bin/rm` is `rm`.
    pub program: Option<String>,
    /// The workspace folders (the sandbox's writable mounts): a path in none of them
    /// is "outside the workspace". Empty: the working directory is taken as it.
    pub workspaces: Vec<PathBuf>,
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
        let name = command_name(program);
        let stem = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        INTERPRETERS.contains(&name) || INTERPRETERS.contains(&stem)
    })
}

/// One command to try rules on, prepared once.
struct Command {
    /// The program and its arguments, wrappers such as `sudo` removed.
    words: Vec<String>,
    /// What the program is known as: its word, and for the exec itself, when these are
    /// its file's words, the resolved path and the tool the file is.
    identities: Vec<String>,
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
    workspaces: &'a [PathBuf],
}

impl<'a> Candidates<'a> {
    fn of(facts: &'a ExecFacts) -> Self {
        let cwd = facts.cwd.as_deref();
        let mut candidates = Candidates {
            groups: Vec::new(),
            parents: facts.parents.iter().map(|p| command_line(p)).collect(),
            cwd,
            workspaces: &facts.workspaces,
        };
        candidates.add_group(exec_commands(facts, cwd), None, 0);
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
                    let words = strip_wrappers(&c.words).to_vec();
                    Command::new(words, Vec::new(), &c.redirects, self.cwd)
                })
                .collect();
            self.add_group(commands, script_text, depth);
        }
    }

    /// Adds one group, with the commands its `find -exec`s run, then the scripts they
    /// all run, nested up to `MAX_SHELL_DEPTH`.
    fn add_group(&mut self, mut commands: Vec<Command>, script_text: Option<String>, depth: usize) {
        let found: Vec<Command> = commands
            .iter()
            .flat_map(|c| c.found_commands(self.cwd))
            .collect();
        commands.extend(found);
        let mut scripts: Vec<String> = Vec::new();
        for script in commands.iter().flat_map(Command::scripts) {
            if !scripts.contains(&script) {
                scripts.push(script);
            }
        }
        self.groups.push(Group {
            commands,
            script_text,
        });
        if depth < MAX_SHELL_DEPTH {
            for script in scripts {
                self.add_script(&script, depth + 1);
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
            !per_command
                || group
                    .commands
                    .iter()
                    .any(|c| c.matches(m, self.cwd, self.workspaces))
        })
    }
}

/// The exec itself as commands to try.
///
/// It is read by the name it was run under, wrappers removed, and also as the file it
/// is, when that is known by its resolved path or its identity (`ExecFacts::program`):
/// whatever it was called, a wrapper's file runs what follows (`x rm -rf /` with `x` a
/// copy of `env`), and any other file is the command with all of argv (`x -rf /` with
/// `x` a copy of `rm`). A file's identity is never given to the command a wrapper
/// runs. A multi-call binary (`busybox`) picks its tool by the name it was run under,
/// which the reading by name follows already.
fn exec_commands(facts: &ExecFacts, cwd: Option<&Path>) -> Vec<Command> {
    let argv = facts.argv.as_slice();
    let args = argv.get(1..).unwrap_or_default();
    let by_name = strip_wrappers(argv);
    let unwrapped = by_name.len() == argv.len();
    let identities = [
        Some(facts.path.as_str()).filter(|p| !p.is_empty()),
        facts.program.as_deref(),
    ];
    // The file's identities, when it is the command itself; what it runs, when a wrapper.
    let mut file_is: Vec<String> = Vec::new();
    let mut runs: Vec<&[String]> = Vec::new();
    for identity in identities.into_iter().flatten() {
        let name = command_name(identity);
        if is_multi_call(name) {
            if unwrapped {
                file_is.push(identity.to_owned());
            }
            continue;
        }
        match wrapped(name, args) {
            Some(command) => runs.push(strip_wrappers(command)),
            None => file_is.push(identity.to_owned()),
        }
    }
    let mut commands = Vec::new();
    if unwrapped {
        commands.push(Command::new(argv.to_vec(), file_is, &[], cwd));
    } else {
        commands.push(Command::new(by_name.to_vec(), Vec::new(), &[], cwd));
        if !file_is.is_empty() {
            commands.push(Command::new(argv.to_vec(), file_is, &[], cwd));
        }
    }
    for words in runs {
        if !commands.iter().any(|c| c.words == words) {
            commands.push(Command::new(words.to_vec(), Vec::new(), &[], cwd));
        }
    }
    commands
}

impl Command {
    /// `known_as`: other identities of the program than its word (a path, a tool name).
    fn new(
        words: Vec<String>,
        known_as: Vec<String>,
        redirects: &[String],
        cwd: Option<&Path>,
    ) -> Self {
        let mut identities: Vec<String> = Vec::with_capacity(known_as.len() + 1);
        for identity in words.first().into_iter().cloned().chain(known_as) {
            // `-bash` (a login shell) is also `bash`, for globs on a whole path too.
            let login = identity
                .strip_prefix('-')
                .filter(|name| !name.is_empty())
                .map(str::to_owned);
            for identity in [Some(identity), login].into_iter().flatten() {
                if !identities.contains(&identity) {
                    identities.push(identity);
                }
            }
        }
        let args = words.get(1..).unwrap_or_default();
        let writes = redirects
            .iter()
            .map(String::as_str)
            .chain(
                names(&identities)
                    .into_iter()
                    .flat_map(|n| write_targets(n, args)),
            )
            .map(|target| absolute(target, cwd))
            .collect();
        Command {
            line: command_line(&words),
            words,
            identities,
            writes,
        }
    }

    fn args(&self) -> &[String] {
        self.words.get(1..).unwrap_or_default()
    }

    /// The scripts this command runs: a shell's `-c SCRIPT`, `env -S STRING`.
    fn scripts(&self) -> Vec<String> {
        names(&self.identities)
            .into_iter()
            .filter_map(|name| {
                inline_script(name, self.args())
                    .map(str::to_owned)
                    .or_else(|| split_string(name, self.args()))
            })
            .collect()
    }

    /// The commands it runs on what it finds: `find … -exec rm {} +`.
    fn found_commands(&self, cwd: Option<&Path>) -> Vec<Command> {
        names(&self.identities)
            .into_iter()
            .flat_map(|name| find_commands(name, self.args()))
            .map(|words| Command::new(words.to_vec(), Vec::new(), &[], cwd))
            .collect()
    }

    fn matches(&self, m: &ExecMatcher, cwd: Option<&Path>, workspaces: &[PathBuf]) -> bool {
        if self.words.is_empty() {
            return false;
        }
        let args = self.args();
        let executable = m.executable.is_empty()
            || m.executable
                .iter()
                .any(|g| self.identities.iter().any(|id| g.matches(id)));
        executable
            && m.argv.iter().all(|r| r.is_match(&self.line))
            && m.arg
                .as_ref()
                .is_none_or(|r| args.iter().any(|a| r.is_match(a)))
            && (m.writes.is_empty()
                || self
                    .writes
                    .iter()
                    .any(|w| m.writes.iter().any(|g| g.matches(w))))
            && (!m.outside_cwd || args.iter().any(|a| outside(a, cwd, workspaces)))
    }
}

/// The names of the program, once each, for telling what it does: `rm` for `/bin/rm`.
fn names(identities: &[String]) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::with_capacity(identities.len());
    for name in identities.iter().map(|id| command_name(id)) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// The paths a writing program writes: the destination of `cp`/`mv`/`install`/`ln`,
/// every file of `tee`, `dd of=`, `curl -o`, `wget -O`, and the files `chmod` makes
/// executable.
fn write_targets<'a>(program: &str, args: &'a [String]) -> Vec<&'a str> {
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
    match program {
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
fn outside(arg: &str, cwd: Option<&Path>, workspaces: &[PathBuf]) -> bool {
    if arg.starts_with('-') && arg.len() > 1 {
        return false;
    }
    if arg.starts_with('~') || arg.starts_with('$') {
        return true;
    }
    if !workspaces.is_empty() {
        // Judged against the workspace, not where the process happens to be:
        // `cd /tmp && rm -rf victim` is outside it.
        let path = match cwd {
            Some(cwd) => normalize(&cwd.join(arg)),
            None if arg.starts_with('/') => normalize(Path::new(arg)),
            None => return true,
        };
        return !workspaces.iter().any(|w| path.starts_with(w) && path != *w);
    }
    let Some(cwd) = cwd.filter(|c| c.parent().is_some()) else {
        return true;
    };
    let path = normalize(&cwd.join(arg));
    !(path.starts_with(cwd) && path != cwd)
}
