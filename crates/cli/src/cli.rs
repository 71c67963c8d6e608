//! The command-line surface, in the shape of `docker run`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use crate::deferred::Deferred;
pub use crate::image::ImageCommand;
pub use crate::logs::LogsCommand;

#[derive(Debug, Parser)]
#[command(
    name = "vectraguard",
    version,
    about = "Run scripts, shells and AI agents in a default-deny Linux sandbox",
    long_about = None,
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run commands in a sandbox
    #[command(subcommand)]
    Sandbox(Deferred<SandboxCommand>),
    /// List, show, follow, verify and remove recorded sessions
    #[command(subcommand)]
    Logs(Deferred<LogsCommand>),
    /// Pull, load, import, list, inspect and remove container images
    #[command(subcommand)]
    Image(Deferred<ImageCommand>),
    /// List, show, compare and remove learned profiles (`sandbox run --learn NAME`)
    #[command(subcommand)]
    Profile(Deferred<crate::profile::ProfileCommand>),
    /// Show which isolation layers this host supports, and how to fix missing ones
    Doctor(Deferred<DoctorArgs>),
    /// Explain how risky a command or a network destination is rated, and by which rule
    #[command(subcommand)]
    Risk(Deferred<crate::risk::RiskCommand>),
    /// Run an AI agent CLI in a sandbox, recorded under the agent's name
    #[command(subcommand)]
    Agent(Deferred<AgentCommand>),
    /// Serve code-execution tools to AI agents over MCP (stdio, or --http)
    #[command(subcommand)]
    Mcp(Deferred<McpCommand>),
    /// List the running sessions
    Ps(Deferred<crate::live::PsArgs>),
    /// Stop a running session: SIGTERM, then SIGKILL after the kill-grace (or --kill)
    Stop(Deferred<crate::live::StopArgs>),
    /// Change or list a running session's network rules
    #[command(subcommand)]
    Net(Deferred<crate::live::NetCommand>),
    /// List what running sessions hold for approval (--ask LEVEL)
    Approvals(Deferred<crate::approvals::ApprovalsArgs>),
    /// Approve a held exec or destination: it runs (or connects) now
    Approve(Deferred<crate::approvals::DecideArgs>),
    /// Deny a held exec or destination: it fails with "Operation not permitted"
    Deny(Deferred<crate::approvals::DecideArgs>),
    /// Serve a live web dashboard of your sessions on the loopback (a URL with a token is printed)
    #[command(
        after_help = "Sessions, their commands, connections, output and approvals, live; allow or deny a destination, approve a held exec or stop a session at a click. The dashboard can do what you can do with `vectraguard stop`, `net` and `approve`, nothing more.\n\nExamples:\n  vectraguard dashboard\n  vectraguard dashboard --listen 127.0.0.1:0"
    )]
    Dashboard(Deferred<crate::dashboard::DashboardArgs>),
    /// Print a shell completion script: bash, zsh or fish
    #[command(
        after_help = "Examples:\n  vectraguard completions bash > ~/.local/share/bash-completion/completions/vectraguard\n  vectraguard completions zsh > \"${fpath[1]}/_vectraguard\"\n  vectraguard completions fish > ~/.config/fish/completions/vectraguard.fish"
    )]
    Completions(Deferred<CompletionsArgs>),
    /// Print the manual page (roff), generated from these commands and options
    #[command(
        after_help = "Examples:\n  vectraguard man | man -l -\n  vectraguard man > /usr/local/share/man/man1/vectraguard.1"
    )]
    Man,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print every probe as JSON: {"ok", "missing_required", "checks": [{"layer",
    /// "ok", "required", "detail", "fix"}]}
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Run a script (with its shebang, or sh) or `-- CMD ARGS...` in a sandbox
    #[command(
        after_help = "Examples:\n  vectraguard sandbox run build.sh\n  vectraguard sandbox run --mount \"$PWD\":/workspace --env NODE_ENV=production script.sh\n  vectraguard sandbox run -- make test"
    )]
    Run(Box<RunArgs>),
    /// Open an interactive shell in a sandbox, on a terminal of its own, recorded
    #[command(
        after_help = "Examples:\n  vectraguard sandbox shell\n  vectraguard sandbox shell --name review --mount \"$PWD\":/workspace --no-network\n  echo 'ls' | vectraguard sandbox shell -T"
    )]
    Shell(Box<Deferred<ShellArgs>>),
    /// Create a persistent sandbox NAME: commands started later with `sandbox exec`
    /// share its files, /tmp, processes and network policy, each recorded in its session
    #[command(
        after_help = "Examples:\n  vectraguard sandbox create dev --mount \"$PWD\":/workspace --network allow --allow pypi.org\n  vectraguard sandbox exec dev -- python3 -c 'print(1)'\n  vectraguard sandbox exec -t dev -- bash\n  vectraguard sandbox ls\n  vectraguard sandbox rm -f dev"
    )]
    Create(Box<Deferred<CreateArgs>>),
    /// Run a command in the persistent sandbox NAME, with this terminal's stdio
    Exec(Deferred<ExecArgs>),
    /// List the persistent sandboxes and whether each still runs
    Ls(SandboxLsArgs),
    /// Stop the persistent sandbox NAME (its processes and /tmp are gone; its record stays)
    Stop(SandboxStopArgs),
    /// Forget the persistent sandbox NAME (stopping it first with -f); its record stays
    Rm(SandboxRmArgs),
}

#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Start an agent: a preset (claude, codex, gemini, aider, opencode) or `-- CMD`;
    /// headless with --prompt, interactive on this terminal without it
    #[command(
        after_help = "A preset mounts the agent's own folders (its login and history), allows its API hosts (--network allow), passes its API key variables when set, and turns its own sandbox off where it would nest inside this one. A custom command gets the prompt in VECTRAGUARD_PROMPT. Without --preset or a command, the first preset whose program is installed is used.\n\nExamples:\n  vectraguard agent start --name dev-assistant --prompt \"Refactor the code for performance\" --mount \"$PWD\":/workspace\n  vectraguard agent start --name reviewer --preset claude\n  vectraguard agent start --name bot --prompt \"triage\" -- ./my-agent.py"
    )]
    Start(Box<AgentStartArgs>),
}

#[derive(Debug, Args)]
pub struct AgentStartArgs {
    #[command(flatten)]
    pub options: SandboxOptions,

    /// The task: the agent runs headless with it (and a custom command gets it in
    /// VECTRAGUARD_PROMPT); without it, interactive on this terminal
    #[arg(long, value_name = "TEXT")]
    pub prompt: Option<String>,

    /// The agent CLI: claude, codex, gemini, aider or opencode
    #[arg(long, value_name = "P")]
    pub preset: Option<String>,

    /// Accepted for the seed's command line: an agent always runs in a sandbox
    #[arg(long)]
    pub sandbox: bool,

    /// Give the agent its API keys themselves, as before HTTPS inspection, for an
    /// agent that does not trust the session CA. By default a preset's key is a
    /// --secret: the agent holds a placeholder, the mediator sends the key
    #[arg(long)]
    pub pass_keys: bool,

    /// -- CMD [ARGS...]: a custom agent command (instead of, or with, a preset)
    #[arg(value_name = "CMD", trailing_var_arg = true)]
    pub command: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Serve the tools code_execute, code_install_package, code_write_file,
    /// code_read_file, code_list_files and code_destroy_sandbox
    #[command(
        after_help = "Each client connection gets a persistent sandbox of its own (made on first use, removed when a stdio client hangs up), with /workspace, the code-exec limits (512 MiB, 0.5 CPU, 1 GiB disk, 30 s per command, 1 MiB output), no network but what a call allows, and every exec rated and held at --ask. Options after -- go to `sandbox create`.\n\nExamples:\n  vectraguard mcp serve\n  vectraguard mcp serve --http 127.0.0.1:8765\n  vectraguard mcp serve --ask critical -- --image python:3.12 --best-effort-limits"
    )]
    Serve(McpServeArgs),
}

#[derive(Debug, Args)]
pub struct McpServeArgs {
    /// Serve streamable HTTP on this loopback address (a bearer token is printed)
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,

    /// Hold every command a tool starts rated at or above LEVEL until approved
    /// (`vectraguard approvals`): low, medium, high (default), critical, never
    #[arg(long, value_name = "LEVEL", default_value = "high")]
    pub ask: String,

    /// Keep N sandboxes ready, so that a connection's first call does not wait for one
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub pool: usize,

    /// The Python package index code_install_package installs from
    #[arg(long, value_name = "URL", default_value = "https://pypi.org/simple")]
    pub pypi_index: String,

    /// The npm registry code_install_package installs from
    #[arg(
        long,
        value_name = "URL",
        default_value = "https://registry.npmjs.org/"
    )]
    pub npm_registry: String,

    /// Options for each sandbox, as `sandbox create` takes them (after --)
    #[arg(
        value_name = "SANDBOX OPTIONS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub sandbox_options: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The sandbox's name (its hostname, and the name of its session)
    #[arg(id = "sandbox_name", value_name = "NAME")]
    pub name: String,

    #[command(flatten)]
    pub options: SandboxOptions,

    /// Stop the sandbox after this long with no command running (`0` never stops it)
    #[arg(long, value_name = "DURATION", default_value = "30m")]
    pub idle_timeout: String,
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Give the command a terminal (interactive programs, shells)
    #[arg(short = 't', long)]
    pub tty: bool,

    /// Set an environment variable for this command (repeatable)
    #[arg(short = 'e', long = "env", value_name = "KEY=VAL")]
    pub env: Vec<String>,

    /// The working directory inside the sandbox (default: the sandbox's workdir)
    #[arg(short = 'w', long, value_name = "PATH")]
    pub workdir: Option<String>,

    /// The sandbox
    #[arg(value_name = "NAME")]
    pub name: String,

    /// -- CMD [ARGS...]
    #[arg(value_name = "CMD", trailing_var_arg = true, required = true)]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct SandboxLsArgs {
    /// Print them as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SandboxStopArgs {
    #[arg(value_name = "NAME")]
    pub name: String,
    /// SIGKILL at once instead of SIGTERM, then SIGKILL after the kill-grace
    #[arg(long)]
    pub kill: bool,
}

#[derive(Debug, Args)]
pub struct SandboxRmArgs {
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Stop it first if it runs
    #[arg(short = 'f', long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct ShellArgs {
    #[command(flatten)]
    pub options: SandboxOptions,

    /// The shell to run (default: /bin/bash, else /bin/sh)
    #[arg(long, value_name = "PATH")]
    pub shell: Option<String>,

    /// Run the shell without a terminal, reading commands from stdin
    #[arg(short = 'T', long)]
    pub no_tty: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub options: SandboxOptions,

    /// SCRIPT [ARGS...] (run with its shebang, or sh), or `-- CMD [ARGS...]`
    #[arg(value_name = "SCRIPT | -- CMD", trailing_var_arg = true)]
    pub args: Vec<String>,

    /// Give the command a pseudo-terminal (for programs that need one)
    #[arg(short = 't', long)]
    pub tty: bool,

    /// Set by `main` from the raw arguments: whether `args` came after `--`.
    #[arg(skip)]
    pub after_dash_dash: bool,

    /// Set by `sandbox shell`: `args` is the shell (an image's entrypoint is skipped).
    #[arg(skip)]
    pub shell: bool,
}

/// Options shared by every way of starting a sandbox.
#[derive(Debug, Clone, Args, Default)]
pub struct SandboxOptions {
    /// Bind-mount a host path: HOST:CONTAINER[:ro] (repeatable; read-write by default).
    /// Without any --mount, the current directory is the workspace.
    #[arg(long = "mount", short = 'v', value_name = "HOST:CONTAINER[:ro]")]
    pub mounts: Vec<String>,

    /// Expose a host path read-only at the same place (repeatable)
    #[arg(long = "read-only", value_name = "PATH")]
    pub read_only: Vec<String>,

    /// A private, empty folder in memory at PATH inside the sandbox, of the --disk
    /// size, gone with the sandbox (repeatable)
    #[arg(long = "tmpfs", value_name = "PATH")]
    pub tmpfs: Vec<PathBuf>,

    /// Set an environment variable: KEY=VALUE, or KEY to copy the host's value (repeatable)
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE")]
    pub env: Vec<String>,

    /// Read environment variables from a file of KEY=VALUE lines (repeatable)
    #[arg(long = "env-file", value_name = "FILE")]
    pub env_files: Vec<PathBuf>,

    /// Working directory inside the sandbox
    #[arg(long, short = 'w', value_name = "PATH")]
    pub workdir: Option<PathBuf>,

    /// Session name (also the sandbox's hostname)
    #[arg(long)]
    pub name: Option<String>,

    /// Name of the agent running this session (default: $VECTRAGUARD_AGENT)
    #[arg(long)]
    pub agent: Option<String>,

    /// Free-text description recorded with the session
    #[arg(long)]
    pub description: Option<String>,

    /// Run as this host user when started as root: NAME or UID[:GID]
    #[arg(long, short = 'u', value_name = "USER")]
    pub user: Option<String>,

    /// Network mode: none (loopback only; the default), allow (every connection and
    /// DNS query mediated by rules and recorded), host (no isolation)
    #[arg(long, value_name = "MODE")]
    pub network: Option<String>,

    /// What runs the sandbox: native (the default), gvisor (gVisor's application
    /// kernel through runsc, for code you believe is hostile), docker, podman
    #[arg(long, value_name = "BACKEND")]
    pub backend: Option<String>,

    /// Same as --network none
    #[arg(long, conflicts_with = "network")]
    pub no_network: bool,

    /// Use this configuration file instead of vectraguard.toml and the user config
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Apply a named profile: a [profiles.NAME] table of the configuration files, or
    /// a learned profile (~/.config/vectraguard/profiles/NAME.toml, see --learn)
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,

    /// Learning mode: run once with your home and the host's other non-secret folders
    /// visible read-only (writes go to a throwaway layer, secrets stay hidden) and
    /// every public destination allowed; every file, program and destination is
    /// traced and written as the profile NAME, for --profile NAME. Learning trusts
    /// the command
    #[arg(long, value_name = "NAME")]
    pub learn: Option<String>,

    /// With --learn: replace an existing profile of that name without asking
    #[arg(long, requires = "learn")]
    pub yes: bool,

    /// Which refused file accesses are recorded as violations: 'changes' (writes,
    /// creations, renames and removals the view refused; the default) or 'all'
    /// (refused reads of hidden files too: every open is traced, tens of
    /// microseconds each). Refused system calls are always recorded
    #[arg(long, value_name = "WHICH")]
    pub violations: Option<String>,

    /// Do not print Vectra Guard's own notes: the line naming the recorded session at
    /// the end and the network refusal notes (also VECTRAGUARD_QUIET=1)
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// Do not write a session record (no logs, no exec tracing): for throwaway runs
    /// and for measuring what recording costs
    #[arg(long)]
    pub no_record: bool,

    /// Hold every exec (and, with --network allow, every destination not yet allowed)
    /// rated at or above LEVEL until someone decides: low, medium, high, critical or
    /// never (the default). See `vectraguard risk explain` and `vectraguard approvals`
    #[arg(long, value_name = "LEVEL", help_heading = "Approval")]
    pub ask: Option<String>,
    /// How long a held request waits before it is denied, for every level (defaults:
    /// CRITICAL 30s, HIGH 60s, MEDIUM and LOW 120s)
    #[arg(
        long,
        value_name = "DURATION",
        help_heading = "Approval",
        allow_hyphen_values = true
    )]
    pub approval_timeout: Option<String>,

    /// Run from a container image in the store (pulled when missing): its root
    /// filesystem read-only under a writable layer discarded at the end
    #[arg(long, value_name = "IMAGE", help_heading = "Images")]
    pub image: Option<String>,
    /// When to pull the image: never, missing (the default), always
    #[arg(long, value_name = "WHEN", help_heading = "Images")]
    pub pull: Option<String>,
    /// Replace the image's entrypoint ("" removes it, and the image's Cmd with it)
    #[arg(long, value_name = "CMD", help_heading = "Images")]
    pub entrypoint: Option<String>,

    /// Allow connections to DOMAIN, *.DOMAIN, *, an IP or a CIDR, on every port or
    /// on PORT or LOW-HIGH (repeatable; implies --network allow). Rules are checked
    /// in the order given, --allow and --deny mixed, first match wins, then deny.
    /// Or allow requests: 'METHODS https://HOST[:PORT]/PATH-GLOB' (also http://;
    /// METHODS as GET,HEAD or *; * within a path segment, ** across): the host's
    /// HTTPS is then inspected, and its requests no such rule allows get 403
    #[arg(
        long,
        value_name = "TARGET[:PORT]",
        help_heading = "Network (--network allow)",
        allow_hyphen_values = true
    )]
    pub allow: Vec<String>,
    /// Deny connections to TARGET[:PORT], or requests 'METHODS https://HOST/PATH',
    /// same forms as --allow (repeatable)
    #[arg(
        long,
        value_name = "TARGET[:PORT]",
        help_heading = "Network (--network allow)",
        allow_hyphen_values = true
    )]
    pub deny: Vec<String>,
    /// Give the sandbox a credential it never holds: NAME is set inside to a random
    /// placeholder of the same length, which the mediator replaces with the value in
    /// request headers (also HTTP basic auth) to HOSTS only, after the rules allowed
    /// the request; sent anywhere else it is blocked. SOURCE is env:VAR, file:PATH or
    /// cmd:COMMAND (run on this machine, e.g. cmd:'pass show gh'). Repeatable
    #[arg(
        long,
        value_name = "NAME=SOURCE@HOST[,HOST…]",
        help_heading = "Network (--network allow)",
        allow_hyphen_values = true
    )]
    pub secret: Vec<String>,
    /// Trust this PEM CA file too when verifying inspected hosts' servers (a private
    /// server's CA; the host's trust store is always used). Repeatable
    #[arg(
        long = "upstream-ca",
        value_name = "FILE",
        help_heading = "Network (--network allow)"
    )]
    pub upstream_ca: Vec<PathBuf>,
    /// Never inspect HOST's TLS (clients that pin their server's certificate): its
    /// connections pass through untouched and method and path rules do not apply.
    /// Repeatable
    #[arg(
        long = "tls-passthrough",
        value_name = "HOST",
        help_heading = "Network (--network allow)"
    )]
    pub tls_passthrough: Vec<String>,
    /// Answer NAME with IP (like Docker's --add-host): IP may be private or the
    /// host's loopback, which rules alone never reach (repeatable)
    #[arg(
        long = "add-host",
        value_name = "NAME:IP",
        help_heading = "Network (--network allow)"
    )]
    pub add_host: Vec<String>,
    /// Do not print a note on stderr when a destination is refused (also
    /// VECTRAGUARD_QUIET=1); the refusals are recorded all the same
    #[arg(long, help_heading = "Network (--network allow)")]
    pub no_network_notes: bool,
    /// --allow and --deny in command-line order, filled in by `main`.
    #[arg(skip)]
    pub rules_in_order: Vec<(vg_policy::network::Action, String)>,

    // The limits take values that may start with '-' (`--disk -1g`), so that their
    // own parser refuses them naming the flag, instead of clap calling them options.
    /// Memory limit of the whole sandbox, e.g. 512m, 2g, or unlimited (default: half
    /// of physical memory; cgroups, else the supervisor's watchdog for the default)
    #[arg(
        long,
        value_name = "SIZE",
        help_heading = "Resource limits",
        allow_hyphen_values = true
    )]
    pub memory: Option<String>,
    /// CPU limit as a number of CPUs, e.g. 0.5, 2 (cgroups)
    #[arg(
        long,
        value_name = "N",
        help_heading = "Resource limits",
        allow_hyphen_values = true
    )]
    pub cpus: Option<String>,
    /// Processes and threads alive at once (default 4096)
    #[arg(
        long,
        value_name = "N",
        help_heading = "Resource limits",
        allow_hyphen_values = true
    )]
    pub pids: Option<String>,
    /// Stop the session after this long, e.g. 30s, 5m: SIGTERM to every process,
    /// SIGKILL after --kill-grace; exit status 124
    #[arg(
        long,
        value_name = "DURATION",
        help_heading = "Resource limits",
        allow_hyphen_values = true
    )]
    pub timeout: Option<String>,
    /// Time between SIGTERM and SIGKILL when the session is stopped (default 10s)
    #[arg(
        long,
        value_name = "DURATION",
        help_heading = "Resource limits",
        allow_hyphen_values = true
    )]
    pub kill_grace: Option<String>,
    /// Bytes of stdout and of stderr shown and recorded; the rest is dropped with a
    /// marker while the command keeps running
    #[arg(
        long = "max-output",
        value_name = "SIZE",
        help_heading = "Resource limits",
        allow_hyphen_values = true
    )]
    pub max_output: Option<String>,
    /// Bytes of stdout and of stderr (and of tty.cast) kept in the record, e.g. 100m
    /// (default 1g); past it the output still reaches you, the record keeps a marker
    #[arg(
        long = "max-record",
        value_name = "SIZE",
        help_heading = "Resource limits",
        allow_hyphen_values = true
    )]
    pub max_record: Option<String>,
    /// Size of each private writable area (/tmp, $HOME), e.g. 1g (default 1g)
    #[arg(
        long,
        value_name = "SIZE",
        help_heading = "Resource limits",
        allow_hyphen_values = true
    )]
    pub disk: Option<String>,
    /// Pseudo-terminals the sandbox may have open at once (default 64): its devpts
    /// is mounted with this max, so it cannot drain the host's pool
    #[arg(long, value_name = "N", help_heading = "Resource limits")]
    pub ptys: Option<String>,
    /// Run even if a requested limit cannot be enforced on this host (with a warning)
    #[arg(long, help_heading = "Resource limits")]
    pub best_effort_limits: bool,
}
