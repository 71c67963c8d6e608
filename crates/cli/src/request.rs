//! `sandbox run` and `sandbox shell` flags, and the configuration files found for
//! them, as a [`Request`] for the session library. Flags are only parsed here; what
//! they mean is decided by `vg_session::plan`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use vg_policy::NetworkMode;
use vg_policy::config::{self, ConfigFile, ConfigSource, Settings};
use vg_policy::env::EnvAssignment;
use vg_policy::mount::MountSpec;
use vg_policy::paths::normalize_absolute;
use vg_session::request::PullPolicy;
use vg_session::{ImageChoice, Recording, Request};

use crate::cli::{RunArgs, SandboxOptions};

/// The request for `args`, started from `cwd`.
pub fn request(args: &RunArgs) -> Result<Request> {
    let o = &args.options;
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let mut config = config_files(o.config.as_deref(), &cwd)?;
    if let Some(dir) = learned_profiles_dir() {
        config::add_learned_profile(&mut config, o.profile.as_deref(), &dir)?;
    }
    let settings = flag_settings(o)?;
    let image = image_of(o)?;
    Ok(Request {
        args: args.args.clone(),
        after_dash_dash: args.after_dash_dash,
        cwd,
        config,
        profile: o.profile.clone(),
        settings,
        agent: std::env::var("VECTRAGUARD_AGENT").ok(),
        image,
        tty: args.tty,
        shell: args.shell,
        persistent: false,
        tmpfs: o.tmpfs.clone(),
        learn: o.learn.clone(),
        violations: o
            .violations
            .as_deref()
            .map(vg_session::request::Violations::parse)
            .transpose()?
            .unwrap_or_default(),
        agent_preset: None,
        prompt: None,
        record: if o.no_record {
            Recording::Off
        } else {
            Recording::On { root: None }
        },
        network_notes: vg_session::notes::wanted(o.no_network_notes || o.quiet),
        host_env: Request::process_env(),
    })
}

/// The configuration files that apply: `--config`, or the project's
/// `vectraguard.toml` and the user's config file, lowest rank first. (`request` then
/// adds the learned profile `--profile` names, if no file defines it.)
/// `sandbox run` and `risk explain` read the same ones.
pub fn config_files(explicit: Option<&Path>, cwd: &Path) -> Result<Vec<ConfigFile>> {
    let mut files: Vec<ConfigFile> = Vec::new();
    if let Some(path) = explicit {
        files.push(config::load(path, ConfigSource::Explicit)?);
    } else {
        if let Some(project) = config::discover_project(cwd) {
            files.push(config::load(&project, ConfigSource::Project)?);
        }
        if let Some(home) = vg_session::host::invoker_home() {
            let xdg = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from);
            let user = config::user_config_path(&home, xdg.as_deref());
            if user.exists() {
                files.push(config::load(&user, ConfigSource::User)?);
            }
        }
    }
    Ok(files)
}

/// Where learned profiles are kept (`profiles/` beside the user's config file), when
/// the invoker has a home.
pub fn learned_profiles_dir() -> Option<PathBuf> {
    let home = vg_session::host::invoker_home()?;
    let xdg = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from);
    Some(config::learned_profiles_dir(&home, xdg.as_deref()))
}

fn flag_settings(o: &SandboxOptions) -> Result<Settings> {
    let mut network = if o.no_network {
        Some(NetworkMode::None)
    } else {
        o.network.as_deref().map(NetworkMode::parse).transpose()?
    };
    let network_rules = o
        .rules_in_order
        .iter()
        .map(|(action, spec)| {
            vg_policy::network::Rule::parse(*action, spec)
                .with_context(|| format!("--{} {spec}", action.as_str()))
        })
        .collect::<Result<Vec<_>>>()?;
    let add_hosts = o
        .add_host
        .iter()
        .map(|h| vg_policy::network::AddHost::parse(h).with_context(|| format!("--add-host {h}")))
        .collect::<Result<Vec<_>>>()?;
    let secrets = o
        .secret
        .iter()
        .map(|s| {
            vg_policy::secrets::SecretSpec::parse(s)
                .with_context(|| format!("--secret {}", secret_shown(s)))
        })
        .collect::<Result<Vec<_>>>()?;
    let tls_passthrough = o
        .tls_passthrough
        .iter()
        .map(|h| {
            vg_policy::secrets::host_target(h).with_context(|| format!("--tls-passthrough {h}"))
        })
        .collect::<Result<Vec<_>>>()?;
    let upstream_ca = o
        .upstream_ca
        .iter()
        .map(|p| std::path::absolute(p).with_context(|| format!("--upstream-ca {}", p.display())))
        .collect::<Result<Vec<_>>>()?;
    let mediated = network_rules.len()
        + add_hosts.len()
        + secrets.len()
        + tls_passthrough.len()
        + upstream_ca.len();
    vg_session::network::check_flags(network, mediated, 0)?;
    if network.is_none() && mediated > 0 {
        network = Some(NetworkMode::Allow);
    }
    let workdir = match &o.workdir {
        Some(w) => Some(normalize_absolute(w).with_context(|| {
            format!(
                "--workdir {}: must be an absolute path inside the sandbox, without '..'",
                w.display()
            )
        })?),
        None => None,
    };
    let read_only = o
        .read_only
        .iter()
        .map(|p| {
            normalize_absolute(Path::new(p))
                .with_context(|| format!("--read-only {p}: must be an absolute path without '..'"))
        })
        .collect::<Result<Vec<_>>>()?;
    let backend = o
        .backend
        .as_deref()
        .map(|b| {
            b.parse::<vg_policy::Backend>()
                .map_err(|e| anyhow::anyhow!("--backend: {e}"))
        })
        .transpose()?;
    Ok(Settings {
        name: o.name.clone(),
        agent: o.agent.clone(),
        description: o.description.clone(),
        workdir,
        user: o.user.clone(),
        network,
        backend,
        // A config file's key only: no flag sets it.
        exec_check: None,
        exec_trace: None,
        mounts: o
            .mounts
            .iter()
            .map(|m| MountSpec::parse(m))
            .collect::<Result<Vec<_>, _>>()?,
        read_only,
        // A config file's key only (learned profiles); no flag sets it.
        read_write: Vec::new(),
        env: o
            .env
            .iter()
            .map(|e| EnvAssignment::parse(e))
            .collect::<Result<Vec<_>, _>>()?,
        env_files: o.env_files.clone(),
        limits: limits_from_flags(o)?,
        approval: approval_from_flags(o)?,
        network_rules,
        add_hosts,
        secrets,
        tls_passthrough,
        upstream_ca,
        project_access: vg_policy::config::ProjectAccess::default(),
    })
}

/// A `--secret` value as an error may quote it: up to the source's kind, since a
/// `cmd:` source may carry a token inline.
fn secret_shown(value: &str) -> String {
    match value.split_once('=') {
        Some((name, rest)) if rest.starts_with("cmd:") => format!("{name}=cmd:…"),
        _ => value.to_owned(),
    }
}

/// `--ask` and `--approval-timeout`, parsed.
fn approval_from_flags(o: &SandboxOptions) -> Result<vg_policy::risk::Approval> {
    Ok(vg_policy::risk::Approval {
        ask: o
            .ask
            .as_deref()
            .map(|v| v.parse().with_context(|| format!("--ask {v}")))
            .transpose()?,
        timeout: o
            .approval_timeout
            .as_deref()
            .map(|v| vg_policy::limits::parse_duration("--approval-timeout", v))
            .transpose()?,
    })
}

/// The limit flags of `sandbox run`, parsed.
fn limits_from_flags(o: &SandboxOptions) -> Result<vg_policy::limits::Limits> {
    Ok(vg_policy::limits::Limits {
        memory: o
            .memory
            .as_deref()
            .map(|v| vg_policy::limits::parse_memory("--memory", v))
            .transpose()?,
        cpus: o
            .cpus
            .as_deref()
            .map(vg_policy::limits::parse_cpus)
            .transpose()?,
        pids: o
            .pids
            .as_deref()
            .map(vg_policy::limits::parse_pids)
            .transpose()?,
        timeout: o
            .timeout
            .as_deref()
            .map(|v| vg_policy::limits::parse_duration("--timeout", v))
            .transpose()?,
        max_output: o
            .max_output
            .as_deref()
            .map(|v| vg_policy::limits::parse_size("--max-output", v))
            .transpose()?,
        max_record: o
            .max_record
            .as_deref()
            .map(|v| vg_policy::limits::parse_size("--max-record", v))
            .transpose()?,
        disk: o
            .disk
            .as_deref()
            .map(|v| vg_policy::limits::parse_size("--disk", v))
            .transpose()?,
        kill_grace: o
            .kill_grace
            .as_deref()
            .map(|v| vg_policy::limits::parse_duration("--kill-grace", v))
            .transpose()?,
        ptys: o
            .ptys
            .as_deref()
            .map(vg_policy::limits::parse_ptys)
            .transpose()?,
        best_effort: o.best_effort_limits.then_some(true),
    })
}

/// The image to run from and its `--pull`; `--pull` and `--entrypoint` without
/// `--image` are mistakes, not no-ops.
fn image_of(o: &SandboxOptions) -> Result<Option<ImageChoice>> {
    let Some(name) = &o.image else {
        for (flag, used) in [
            ("--pull", o.pull.is_some()),
            ("--entrypoint", o.entrypoint.is_some()),
        ] {
            if used {
                bail!("{flag} only applies with --image: add --image NAME or remove {flag}");
            }
        }
        return Ok(None);
    };
    let pull = match &o.pull {
        Some(p) => PullPolicy::parse(p)?,
        None => PullPolicy::Missing,
    };
    Ok(Some(ImageChoice {
        name: name.clone(),
        pull,
        entrypoint: o.entrypoint.clone(),
    }))
}
