//! `vectraguard agent start`: an AI agent CLI run as a recorded sandbox session under
//! the agent's name. A preset (`vg_policy::agents`) says how to run the agent; the
//! run itself is `sandbox run`'s (the same request, plan and session).

use std::path::{Path, PathBuf};

use std::os::unix::fs::DirBuilderExt;

use anyhow::{Context, Result, anyhow, bail};
use vg_policy::agents::{self, Preset};

use crate::EXIT_FAILURE;
use crate::cli::{AgentStartArgs, RunArgs};

pub fn start(args: AgentStartArgs) -> i32 {
    match prepare(args) {
        Ok((run, preset, prompt)) => crate::run::run_with(&run, |request| {
            request.agent_preset = preset;
            request.prompt = prompt;
        }),
        Err(e) => {
            crate::report::error(format_args!("{}", vg_session::diag::chain(&e)));
            EXIT_FAILURE
        }
    }
}

/// The first preset whose program is on the caller's PATH.
fn detect() -> Option<&'static Preset> {
    let path = std::env::var_os("PATH")?;
    agents::PRESETS
        .iter()
        .find(|p| std::env::split_paths(&path).any(|dir| dir.join(p.program).is_file()))
}

/// `~/x` under `home`.
fn expand(path: &str, home: &Path) -> PathBuf {
    path.strip_prefix("~/")
        .map_or_else(|| PathBuf::from(path), |rest| home.join(rest))
}

/// A credential as a `--secret` (from the caller's variable of the same name) and the
/// method and path rules that make its hosts inspected: the preset's hosts, and the
/// host of its base URL variable when the caller set one.
fn credential_secret(credential: &agents::Credential) -> Result<(String, Vec<String>)> {
    let mut hosts: Vec<String> = credential.hosts.iter().map(|h| (*h).to_owned()).collect();
    let mut rules: Vec<String> = credential
        .hosts
        .iter()
        .map(|h| format!("* https://{h}/**"))
        .collect();
    if let Some(var) = credential.base_url
        && let Some(url) = std::env::var_os(var)
    {
        let url = url.to_string_lossy().into_owned();
        let (scheme, rest) = url.split_once("://").with_context(|| {
            format!("{var}={url}: not a URL; give http(s)://HOST[:PORT]/…, or use --pass-keys")
        })?;
        let authority = rest.split('/').next().unwrap_or_default();
        let host = authority
            .rsplit_once(':')
            .map_or(authority, |(host, _)| host)
            .to_owned();
        if host.is_empty() || !matches!(scheme, "http" | "https") {
            bail!("{var}={url}: not an http(s) URL with a host; fix it, or use --pass-keys");
        }
        rules.push(format!("* {scheme}://{authority}/**"));
        hosts.push(host);
    }
    Ok((
        format!(
            "{}=env:{}@{}",
            credential.var,
            credential.var,
            hosts.join(",")
        ),
        rules,
    ))
}

/// The run `sandbox run` would make of it, with the preset's name and the prompt.
fn prepare(args: AgentStartArgs) -> Result<(RunArgs, Option<String>, Option<String>)> {
    let AgentStartArgs {
        mut options,
        prompt,
        preset,
        sandbox: _,
        pass_keys,
        command,
    } = args;
    let name = options
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| anyhow!("agent start needs --name NAME: the agent's name in the record"))?;
    let preset = match (&preset, command.is_empty()) {
        (Some(p), _) => Some(agents::preset(p).map_err(|e| anyhow!("--preset {p}: {e}"))?),
        (None, false) => None,
        (None, true) => Some(detect().ok_or_else(|| {
            anyhow!(
                "no agent CLI found on PATH: install one of {} and give --preset, or run another agent with `-- COMMAND`",
                agents::names()
            )
        })?),
    };
    if prompt.as_deref().is_some_and(str::is_empty) {
        bail!("--prompt is empty: give the task, or leave --prompt out for an interactive agent");
    }
    if prompt.as_deref().is_some_and(|p| p.starts_with('-')) {
        bail!(
            "--prompt starts with '-', which the agent would take for one of its options: start it with a word"
        );
    }
    options.agent.get_or_insert_with(|| name.clone());
    let argv = if command.is_empty() {
        preset
            .map(|p| p.command(prompt.as_deref()))
            .unwrap_or_default()
    } else {
        command
    };
    if let Some(prompt) = &prompt {
        options.env.push(format!("VECTRAGUARD_PROMPT={prompt}"));
    }
    if let Some(preset) = preset {
        for (key, value) in preset.env {
            options.env.push(format!("{key}={value}"));
        }
        // Its API keys, when the caller has them and the run does not set them: as
        // secrets, so that the agent holds a placeholder and the mediator sends the
        // key to the key's hosts alone (HTTPS inspection), or with --pass-keys, or
        // without a mediated network, the keys themselves.
        let mediated = !options.no_network
            && options
                .network
                .as_deref()
                .is_none_or(|mode| mode == "allow");
        let set_by_run = |key: &str| options.env.iter().any(|e| e.split('=').next() == Some(key));
        let mut secrets = Vec::new();
        let mut passed = Vec::new();
        for key in preset.keys {
            if std::env::var_os(key).is_none() || set_by_run(key) {
                continue;
            }
            match preset.credentials.iter().find(|c| c.var == *key) {
                Some(credential) if mediated && !pass_keys => {
                    secrets.push(credential_secret(credential)?);
                }
                _ => passed.push((*key).to_owned()),
            }
        }
        options.env.extend(passed);
        for (spec, rules) in secrets {
            options.secret.push(spec);
            for rule in rules {
                options
                    .rules_in_order
                    .push((vg_policy::network::Action::Allow, rule));
            }
        }
        // Its own folders, so it keeps its login and history; mounted beside the
        // workspace, which without a --mount of the caller's is this directory.
        if options.mounts.is_empty() {
            let cwd = std::env::current_dir().context("cannot read the current directory")?;
            options
                .mounts
                .push(format!("{}:{}", cwd.display(), cwd.display()));
        }
        // Whose folders: the user the sandbox runs as (as root, the workspace's
        // owner or --user), whose home the sandbox gets.
        let primary = options
            .mounts
            .first()
            .and_then(|m| m.split(':').next())
            .map(PathBuf::from)
            .context("no workspace")?;
        let identity = vg_session::host::resolve_identity(options.user.as_deref(), &primary)?;
        let as_root = vg_session::host::is_root();
        for state in preset.state {
            let path = expand(state, &identity.home);
            let is_file = Path::new(state).extension().is_some();
            if std::fs::symlink_metadata(&path).is_err() {
                // Root never creates anything in another user's home: a folder there
                // can be swapped for a symlink under it (red team). The user's own
                // runs create theirs.
                if is_file || as_root {
                    if !is_file {
                        crate::report::note(format_args!(
                            "{} does not exist: the agent's login and history are not kept (create it, or run as its user)",
                            path.display()
                        ));
                    }
                    continue;
                }
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&path)
                    .with_context(|| format!("cannot create {}", path.display()))?;
            }
            options
                .mounts
                .push(format!("{}:{}", path.display(), path.display()));
        }
        // Settings that make the agent run commands on the host: read-only.
        for settings in preset.settings {
            let path = expand(settings, &identity.home);
            if std::fs::symlink_metadata(&path).is_ok() {
                options.read_only.push(path.display().to_string());
            }
        }
        // Its API hosts, unless the network was chosen explicitly.
        if options.network.is_none() && !options.no_network {
            options.network = Some("allow".into());
            for host in preset.hosts {
                options
                    .rules_in_order
                    .push((vg_policy::network::Action::Allow, format!("{host}:443")));
            }
        }
    }
    // Without a prompt it is a conversation: on this terminal when there is one.
    let tty = prompt.is_none() && vg_sandbox::terminal::is_terminal(std::io::stdin());
    let run = RunArgs {
        options,
        args: argv,
        tty,
        after_dash_dash: true,
        shell: false,
    };
    Ok((run, preset.map(|p| p.name.to_owned()), prompt))
}
