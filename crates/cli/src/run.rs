//! `vectraguard sandbox run`: turn flags and configuration into a sandbox spec, run
//! it, and map the outcome to an exit status.

use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use vg_policy::config::{self, ConfigFile, ConfigSource, Settings};
use vg_policy::env::{EnvAssignment, Environment, parse_env_file};
use vg_policy::mount::MountSpec;
use vg_policy::paths::{is_within, normalize_absolute};
use vg_policy::view::{NodeKind, ResolvedMount, ViewOptions};
use vg_policy::{FsView, NetworkMode};

use crate::image_run::{ImageRun, PullPolicy};
use vg_records::{Metadata, Origin, UserInfo};
use vg_sandbox::{SandboxSpec, Termination};

use crate::EXIT_FAILURE;
use crate::cli::{RunArgs, SandboxOptions, ShellArgs};
use crate::host;
use crate::session::{Output, Session};

/// Exit status when the session was stopped by `--timeout`, as `timeout(1)`.
pub const EXIT_TIMEOUT: i32 = 124;

/// Exit status for "command not found".
const EXIT_NOT_FOUND: i32 = 127;

/// A failure with the exit status it should produce.
struct Failure {
    code: i32,
    error: anyhow::Error,
}

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Self {
        Self {
            code: EXIT_FAILURE,
            error,
        }
    }
}

pub fn run(args: RunArgs) -> i32 {
    report(run_inner(args))
}

/// `vectraguard sandbox shell`: `sandbox run -t SHELL`, refusing to start without a
/// terminal unless `-T` asks for a shell that reads stdin.
pub fn shell(args: ShellArgs) -> i32 {
    let stdin_is_terminal = vg_sandbox::terminal::is_terminal(std::io::stdin());
    if !args.no_tty && !stdin_is_terminal {
        crate::report::error(format_args!(
            "`sandbox shell` needs a terminal on stdin; pass -T/--no-tty to run the shell reading commands from stdin"
        ));
        return EXIT_FAILURE;
    }
    // The host's tools are what a sandbox without an image sees; an image is only
    // sure to have /bin/sh.
    let shell = args.shell.unwrap_or_else(|| {
        if args.options.image.is_none() && Path::new("/bin/bash").exists() {
            "/bin/bash".to_owned()
        } else {
            "/bin/sh".to_owned()
        }
    });
    report(run_inner(RunArgs {
        options: args.options,
        args: vec![shell],
        tty: !args.no_tty,
        after_dash_dash: true,
        shell: true,
    }))
}

fn report(result: Result<i32, Failure>) -> i32 {
    match result {
        Ok(code) => code,
        Err(Failure { code, error }) => {
            crate::report::error(format_args!("{error:#}"));
            code
        }
    }
}

fn run_inner(args: RunArgs) -> Result<i32, Failure> {
    let planned = plan_run(&args)?;
    if args.options.no_record {
        if planned.spec.tty {
            return Err(anyhow::anyhow!(
                "a terminal (sandbox shell, run -t) is relayed and recorded by the session; remove --no-record"
            )
            .into());
        }
        let notes = crate::notes::wanted(args.options.no_network_notes || args.options.quiet)
            .then(|| crate::notes::Notes::new(false));
        return run_unrecorded(&planned.spec, &planned.plan, &planned.network, notes);
    }
    run_recorded(&args, &planned)
}

/// Everything one run needs, decided before anything is spawned. Holding it keeps
/// the image's root filesystem leased, the generated /etc files and the cgroup.
struct Planned {
    spec: SandboxSpec,
    plan: crate::limits::Plan,
    network: crate::network::Plan,
    image: Option<ImageRun>,
    _generated: Option<crate::etc::Generated>,
    settings: Settings,
    mounts: Vec<ResolvedMount>,
    cwd: PathBuf,
}

fn plan_run(args: &RunArgs) -> Result<Planned, Failure> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let settings = settings(&args.options, &cwd)?;
    let network = crate::network::Plan::new(&settings)?;
    let image = image_of(&args.options)?;

    let mounts = resolve_mounts(&settings, &cwd)?;
    check_images_hidden(&mounts)?;
    let primary = mounts
        .first()
        .map(|m| m.host.clone())
        .unwrap_or_else(|| cwd.clone());
    let identity = host::resolve_identity(settings.user.as_deref(), &primary)?;
    let argv = match &image {
        Some(img) => {
            // As with `docker run IMAGE ls`: with an image, arguments that do not
            // name a script on the host are the command itself.
            let script = args
                .args
                .first()
                .is_some_and(|a| !args.after_dash_dash && cwd.join(a).is_file());
            let given = if script {
                command_argv(args, &cwd, &mounts)?
            } else {
                args.args.clone()
            };
            img.argv(given, args.options.entrypoint.as_deref(), args.shell)?
        }
        None => command_argv(args, &cwd, &mounts)?,
    };
    let workdir = settings
        .workdir
        .clone()
        .or_else(|| image.as_ref().and_then(ImageRun::workdir))
        .unwrap_or_else(|| default_workdir(&cwd, &mounts));

    // HOME and USER are the image user's inside an image, then the image's Env, then
    // env files and --env, in that order.
    let env_identity = match &image {
        Some(img) => vg_policy::Identity {
            home: img.home.clone(),
            name: img.user.clone(),
            ..identity.clone()
        },
        None => identity.clone(),
    };
    // An image may not have the host's locale: it gets C.UTF-8 unless it says more.
    let mut env = Environment::base(
        &env_identity,
        std::env::var("TERM").ok().as_deref(),
        std::env::var("LANG")
            .ok()
            .filter(|_| image.is_none())
            .as_deref(),
    );
    let mut assignments: Vec<EnvAssignment> = image.as_ref().map(ImageRun::env).unwrap_or_default();
    for file in &settings.env_files {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read --env-file {}", file.display()))?;
        assignments.extend(
            parse_env_file(&text, &file.display().to_string()).map_err(anyhow::Error::from)?,
        );
    }
    assignments.extend(settings.env.iter().cloned());
    env.apply(&assignments, |k| std::env::var(k).ok());

    let hostname = match &settings.name {
        Some(name) => checked_hostname(name)?,
        None => "vectraguard".to_owned(),
    };

    let record = !args.options.no_record;
    // The cgroup, if any, is named after this process: unique while it runs.
    let plan = crate::limits::plan(
        &settings.limits,
        &format!("vectraguard-{}", std::process::id()),
        record,
    )?;
    let options = ViewOptions {
        mounts: mounts.clone(),
        home: identity.home.clone(),
        uid: identity.uid,
        gid: identity.gid,
        tmp_size: plan.disk,
        home_size: plan.disk,
        ptys: plan.ptys,
    };
    let mut view = match &image {
        Some(img) => FsView::image_view(&img.image.rootfs, &options),
        None => FsView::default_view(&host::layout(), &options),
    };
    // Generated /etc files, kept until the session ends.
    let mut etc = Vec::new();
    if let Some(resolv) = network.resolv_conf(image.is_some()) {
        etc.push(("resolv.conf", resolv));
    }
    if image.is_some() {
        etc.push(("hosts", crate::etc::hosts(&hostname)));
        etc.push(("hostname", format!("{hostname}\n")));
    }
    let generated = crate::etc::Generated::write(&etc)?;
    if let Some(g) = &generated {
        view.ops.extend(g.mounts());
    }
    // An image's writable layer is its root.
    let watch_full = match &image {
        Some(_) => vec![PathBuf::from("/tmp"), PathBuf::from("/")],
        None => vec![PathBuf::from("/tmp"), identity.home.clone()],
    };
    let spec = SandboxSpec {
        hostname,
        argv,
        env: env
            .iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        workdir,
        view,
        identity,
        trace_exec: record,
        rlimit_nproc: plan.rlimit_nproc,
        watch_full,
        tty: args.tty,
        network: network.sandbox_network(),
        inside: image.as_ref().map(|img| img.inside),
    };
    Ok(Planned {
        spec,
        plan,
        network,
        image,
        _generated: generated,
        settings,
        mounts,
        cwd,
    })
}

/// A run with its session record: create it, start the sandbox, attach the relays,
/// the tracer and the mediator, wait, and finish the record.
fn run_recorded(args: &RunArgs, p: &Planned) -> Result<i32, Failure> {
    let Planned {
        spec,
        plan,
        network,
        image,
        settings,
        mounts,
        cwd,
        ..
    } = p;
    let root = crate::logs::records_root()?;
    check_hidden("the session records folder", &root, mounts)?;
    let mut meta = metadata(settings, args, spec, mounts, cwd);
    network.record(&mut meta);
    if let Some(img) = &image {
        meta.image = Some(img.image.name.clone());
        meta.image_digest = Some(img.image.digest.to_string());
    }
    plan.record(&mut meta.limits);
    if let Some(cg) = &plan.cgroup {
        meta.layers.cgroup_version = Some(cg.version.as_str().to_owned());
        meta.layers.cgroup_controllers = cg.controllers.iter().map(|c| (*c).to_owned()).collect();
    }
    let mut session = Session::create(&root, meta)?;
    // Declared before the terminal's raw mode: dropped after it, so printed last.
    let _line =
        crate::report::SessionLine::new(session.id(), crate::report::quiet(args.options.quiet));
    if network.mode == NetworkMode::Host {
        // Loudly: in the events as well as in metadata.json.
        session.event(
            vg_records::Event::new(vg_records::event::kind::NETWORK)
                .with("event", "host-network")
                .with("decision", "allow")
                .with(
                    "warning",
                    "--network host: the sandbox shares this machine's network, unmediated and unrecorded",
                ),
        )?;
    }
    // Raw mode (and its guardian process) before any thread exists.
    let stdin_is_terminal = vg_sandbox::terminal::is_terminal(std::io::stdin());
    let raw = match (spec.tty && stdin_is_terminal).then(vg_sandbox::terminal::RawTerminal::enter) {
        Some(Err(e)) => {
            let error = anyhow::anyhow!("cannot put the terminal in raw mode: {e}");
            if let Err(e) = session.failed_to_start(&error) {
                crate::report::error(format_args!("{e:#}"));
            }
            return Err(error.into());
        }
        Some(Ok(raw)) => Some(raw),
        None => None,
    };
    let started = start(spec, plan, stdin_is_terminal);
    let (mut sandbox, output) = match started {
        Ok(started) => started,
        Err(error) => {
            drop(raw);
            if let Err(e) = session.failed_to_start(&error) {
                crate::report::error(format_args!("{e:#}"));
            }
            return Err(error.into());
        }
    };
    // In a raw terminal the note's line ends in "\r\n".
    let notes = crate::notes::wanted(args.options.no_network_notes || args.options.quiet)
        .then(|| crate::notes::Notes::new(spec.tty && stdin_is_terminal));
    let terminal = session.attach(
        &mut sandbox,
        output,
        spec.trace_exec,
        plan.max_output,
        network.handle().map(|policy| (policy, notes)),
    );
    if let Some(master) = &terminal
        && stdin_is_terminal
    {
        let _ = vg_sandbox::terminal::copy_size(std::io::stdin().as_fd(), master.as_fd());
    }
    let result = sandbox.wait_with(deadline(plan), &mut |sig| {
        // A resized window: resize the sandbox's terminal (the kernel tells its
        // foreground job) instead of signalling the shell.
        match (&terminal, sig == libc::SIGWINCH && stdin_is_terminal) {
            (Some(master), true) => {
                if let Ok(size) =
                    vg_sandbox::terminal::copy_size(std::io::stdin().as_fd(), master.as_fd())
                {
                    session.resized(size);
                }
                true
            }
            _ => false,
        }
    });
    let hits = plan.cgroup.as_ref().map(|cg| cg.hits()).unwrap_or_default();
    session.finish(&result, &hits)?;
    drop(raw);
    let outcome = result.map_err(anyhow::Error::from)?;
    report_outcome(spec, &outcome, plan, &hits);
    Ok(exit_code(&outcome))
}

/// Starts the sandbox with its output on pipes to the relays, or on its own terminal.
fn start(
    spec: &SandboxSpec,
    plan: &crate::limits::Plan,
    stdin_is_terminal: bool,
) -> Result<(vg_sandbox::Sandbox, Output)> {
    if spec.tty {
        vg_sandbox::spawn_in(spec, [0, 1, 2], plan.cgroup.as_ref())
            .map(|sandbox| {
                let size = stdin_is_terminal
                    .then(|| vg_sandbox::terminal::size(std::io::stdin().as_fd()).ok())
                    .flatten();
                (sandbox, Output::Tty { size })
            })
            .map_err(anyhow::Error::from)
    } else {
        // A terminal on our stdin is relayed through a pipe too: handed over, it would
        // let the command write to the screen unrecorded and change the terminal's
        // settings beyond the session.
        let input = stdin_is_terminal
            .then(std::io::pipe)
            .transpose()
            .map_err(|e| anyhow::anyhow!("cannot create the input pipe: {e}"))?;
        vg_sandbox::output_pipe()
            .and_then(|out| Ok((out, vg_sandbox::output_pipe()?)))
            .map_err(|e| anyhow::anyhow!("cannot create the output pipes: {e}"))
            .and_then(|((out_r, out_w), (err_r, err_w))| {
                let stdin = input.as_ref().map_or(0, |(r, _)| r.as_raw_fd());
                let fds = [stdin, out_w.as_raw_fd(), err_w.as_raw_fd()];
                let sandbox = vg_sandbox::spawn_in(spec, fds, plan.cgroup.as_ref())
                    .map_err(anyhow::Error::from)?;
                // Our copies of the write ends must go, or the relays never see the end.
                drop((out_w, err_w));
                if let Some((in_r, in_w)) = input {
                    drop(in_r);
                    // Started after spawn_in, so it inherits the blocked signals.
                    std::thread::spawn(move || crate::session::relay_terminal_input(in_w));
                }
                Ok((sandbox, Output::Pipes(out_r, err_r)))
            })
    }
}

/// `--no-record`: the same sandbox, with the caller's stdio and no session record.
fn run_unrecorded(
    spec: &SandboxSpec,
    plan: &crate::limits::Plan,
    network: &crate::network::Plan,
    mut notes: Option<crate::notes::Notes>,
) -> Result<i32, Failure> {
    // The command gets our own fds: whatever it does to a terminal among them (its
    // modes; seccomp refuses line disciplines and input injection) is undone after it,
    // by a guardian process if we are killed. Saved before any thread starts.
    let saved = vg_sandbox::terminal::SavedTerminals::save_stdio()
        .map_err(|e| anyhow::anyhow!("cannot save the terminal's settings: {e}"))?;
    let mut sandbox =
        vg_sandbox::spawn_in(spec, [0, 1, 2], plan.cgroup.as_ref()).map_err(anyhow::Error::from)?;
    // Mediated as always; only the records of it are not kept.
    let mediator = match (network.handle(), sandbox.tun()) {
        (Some(policy), Some(tun)) => Some(
            vg_netstack::Mediator::start(
                tun,
                policy,
                Box::new(move |event| {
                    if let Some(notes) = notes.as_mut() {
                        notes.show(&event);
                    }
                }),
            )
            .map_err(|e| anyhow::anyhow!("cannot start the network mediator: {e}"))?,
        ),
        _ => None,
    };
    let outcome = sandbox.wait_until(deadline(plan));
    if let Some(mediator) = mediator {
        let _ = mediator.stop();
    }
    // Init is gone, and with it every process of the sandbox: restore now.
    drop(saved);
    let outcome = outcome.map_err(anyhow::Error::from)?;
    let hits = plan.cgroup.as_ref().map(|cg| cg.hits()).unwrap_or_default();
    report_outcome(spec, &outcome, plan, &hits);
    Ok(exit_code(&outcome))
}

fn deadline(plan: &crate::limits::Plan) -> Option<(std::time::Instant, std::time::Duration)> {
    plan.timeout
        .map(|t| (std::time::Instant::now() + t, plan.kill_grace))
}

/// Like `timeout(1)`: 124 when the session was stopped at its deadline.
fn exit_code(outcome: &vg_sandbox::Outcome) -> i32 {
    if outcome.timed_out {
        EXIT_TIMEOUT
    } else {
        outcome.termination.exit_code()
    }
}

/// Says on stderr why the command ended when a limit ended it.
fn report_outcome(
    spec: &SandboxSpec,
    outcome: &vg_sandbox::Outcome,
    plan: &crate::limits::Plan,
    hits: &vg_sandbox::cgroup::Hits,
) {
    report_exec_failure(spec, outcome);
    if outcome.timed_out
        && let Some(t) = plan.timeout
    {
        eprintln!("vectraguard: the session reached its timeout of {t:?} and was stopped");
    }
    if hits.oom_kills > 0 {
        eprintln!(
            "vectraguard: the memory limit was reached: {} process(es) killed by the OOM killer",
            hits.oom_kills
        );
    }
    if hits.pids_max > 0 {
        eprintln!(
            "vectraguard: the process limit was reached {} time(s) (fork failed)",
            hits.pids_max
        );
    }
    for hit in &outcome.limit_hits {
        eprintln!("vectraguard: {} is full (--disk limit)", hit.detail);
    }
}

fn report_exec_failure(spec: &SandboxSpec, outcome: &vg_sandbox::Outcome) {
    if let Termination::ExecFailed(errno) = outcome.termination {
        eprintln!(
            "vectraguard: {}: {}",
            spec.argv[0],
            std::io::Error::from_raw_os_error(errno)
        );
    }
}

/// The image store must stay out of every sandbox: one that could write it would
/// change the root filesystems later sessions run on (not verified again per run).
fn check_images_hidden(mounts: &[ResolvedMount]) -> Result<()> {
    match crate::image::store_root() {
        Ok(store) => check_hidden("the image store", &store, mounts),
        // No home to hold a store: there is nothing to hide.
        Err(_) => Ok(()),
    }
}

/// Refuses a run in which `folder` would be visible: inside a system directory every
/// sandbox reads, or holding or inside a mount. For the records folder, a sandbox that
/// saw it could read other sessions' output or rewrite its own history.
fn check_hidden(what: &str, folder: &Path, mounts: &[ResolvedMount]) -> Result<()> {
    let root = nearest_real_path(folder);
    // The system directories are visible (read-only) in every sandbox.
    if let Some(dir) = vg_policy::view::SYSTEM_DIRS
        .iter()
        .find(|d| is_within(&root, Path::new(d)))
    {
        bail!(
            "{what} {} is inside {dir}, which every sandbox can read: set VECTRAGUARD_HOME to a private folder (the default is ~/.vectraguard)",
            root.display()
        );
    }
    for m in mounts {
        if is_within(&root, &m.host) || is_within(&m.host, &root) {
            bail!(
                "{what} {} would be visible inside the sandbox through the mount of {}: set VECTRAGUARD_HOME to a folder outside every mounted path",
                root.display(),
                m.host.display()
            );
        }
    }
    Ok(())
}

/// `path` with symlinks resolved as far as it exists (the records folder may not
/// exist yet).
fn nearest_real_path(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = std::fs::canonicalize(at) {
            return rest.iter().rev().fold(real, |p, c| p.join(c));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// What `metadata.json` says when the session starts.
fn metadata(
    settings: &Settings,
    args: &RunArgs,
    spec: &SandboxSpec,
    mounts: &[ResolvedMount],
    cwd: &Path,
) -> Metadata {
    let mut meta = Metadata::new(if settings.agent.is_some() {
        Origin::Agent
    } else {
        Origin::Cli
    });
    meta.name = settings.name.clone();
    meta.agent = settings.agent.clone();
    meta.description = settings.description.clone();
    meta.script = (!args.after_dash_dash)
        .then(|| args.args.first().cloned())
        .flatten();
    meta.command = spec.argv.clone();
    meta.cwd_outside = Some(cwd.display().to_string());
    meta.cwd_inside = Some(spec.workdir.display().to_string());
    meta.cwd = meta.cwd_inside.clone();
    meta.user = UserInfo::current();
    if meta.user.name.is_none() {
        meta.user.name = host::invoker_name();
    }
    meta.mounts = mounts
        .iter()
        .map(|m| {
            format!(
                "{}:{}{}",
                m.host.display(),
                m.container.display(),
                if m.read_only { ":ro" } else { "" }
            )
        })
        .collect();
    meta.set_env_keys(spec.env.iter().map(|(k, _)| k.as_str()));
    meta.layers
        .extra
        .insert("hostname".into(), spec.hostname.clone().into());
    meta.layers.extra.insert(
        "sandbox_user".into(),
        serde_json::json!({ "uid": spec.identity.uid, "gid": spec.identity.gid }),
    );
    meta
}

/// The image to run from, with `--pull` applied; `--pull` and `--entrypoint` without
/// `--image` are mistakes, not no-ops.
fn image_of(o: &SandboxOptions) -> Result<Option<ImageRun>> {
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
    ImageRun::prepare(name, pull).map(Some)
}

/// Merges configuration files and flags (flags win).
fn settings(o: &SandboxOptions, cwd: &Path) -> Result<Settings> {
    let mut files: Vec<ConfigFile> = Vec::new();
    if let Some(path) = &o.config {
        files.push(config::load(path, ConfigSource::Explicit)?);
    } else {
        if let Some(project) = config::discover_project(cwd) {
            files.push(config::load(&project, ConfigSource::Project)?);
        }
        if let Some(home) = host::invoker_home() {
            let xdg = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from);
            let user = config::user_config_path(&home, xdg.as_deref());
            if user.exists() {
                files.push(config::load(&user, ConfigSource::User)?);
            }
        }
    }
    let refs: Vec<&ConfigFile> = files.iter().collect();
    let mut settings = config::resolve_profile(&refs, o.profile.as_deref())?;
    settings.overlay(flag_settings(o)?);
    settings.admit_project_access(&exposed_without_project(&settings, cwd))?;
    if settings.agent.is_none() {
        settings.agent = std::env::var("VECTRAGUARD_AGENT")
            .ok()
            .filter(|a| !a.is_empty());
    }
    Ok(settings)
}

/// The host paths the user's own layers show the sandbox: their mounts (without any,
/// the current directory, the default workspace, writable) and read-only paths. A
/// project file's host access is checked against these.
fn exposed_without_project(settings: &Settings, cwd: &Path) -> Vec<config::Exposed> {
    let mounts = settings.mounts.iter().map(|m| config::Exposed {
        host: m.host.clone(),
        writable: !m.read_only,
    });
    let workspace = settings.mounts.is_empty().then(|| config::Exposed {
        host: cwd.to_path_buf(),
        writable: true,
    });
    let read_only = settings.read_only.iter().map(|p| config::Exposed {
        host: p.clone(),
        writable: false,
    });
    mounts.chain(workspace).chain(read_only).collect()
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
    crate::network::check_flags(network, network_rules.len(), add_hosts.len())?;
    if network.is_none() && !(network_rules.is_empty() && add_hosts.is_empty()) {
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
    Ok(Settings {
        name: o.name.clone(),
        agent: o.agent.clone(),
        description: o.description.clone(),
        workdir,
        user: o.user.clone(),
        network,
        mounts: o
            .mounts
            .iter()
            .map(|m| MountSpec::parse(m))
            .collect::<Result<Vec<_>, _>>()?,
        read_only,
        env: o
            .env
            .iter()
            .map(|e| EnvAssignment::parse(e))
            .collect::<Result<Vec<_>, _>>()?,
        env_files: o.env_files.clone(),
        limits: crate::limits::from_flags(o)?,
        network_rules,
        add_hosts,
        project_access: config::ProjectAccess::default(),
    })
}

/// Checks every mount's host side and resolves it; without `--mount`, the current
/// directory is the workspace, at the same path inside.
fn resolve_mounts(settings: &Settings, cwd: &Path) -> Result<Vec<ResolvedMount>> {
    let mut specs = settings.mounts.clone();
    if specs.is_empty() {
        if cwd == Path::new("/") {
            bail!(
                "refusing to use / as the workspace: cd into a project directory or pass --mount HOST:CONTAINER"
            );
        }
        if host::invoker_home().as_deref() == Some(cwd) {
            bail!(
                "refusing to use your home directory {} as the workspace (it holds your keys and tokens): cd into a project directory or pass --mount HOST:CONTAINER",
                cwd.display()
            );
        }
        specs.push(MountSpec {
            host: cwd.to_path_buf(),
            container: cwd.to_path_buf(),
            read_only: false,
        });
    }
    for path in &settings.read_only {
        specs.push(MountSpec {
            host: path.clone(),
            container: path.clone(),
            read_only: true,
        });
    }
    specs.iter().map(resolve_mount).collect()
}

fn resolve_mount(spec: &MountSpec) -> Result<ResolvedMount> {
    let named = &spec.host;
    let meta = std::fs::metadata(named).with_context(|| {
        format!(
            "mount source {} does not exist or cannot be read",
            named.display()
        )
    })?;
    let real = std::fs::canonicalize(named)
        .with_context(|| format!("cannot resolve mount source {}", named.display()))?;
    if &real != named {
        bail!(
            "mount source {} resolves through a symlink to {}: name the real path instead",
            named.display(),
            real.display()
        );
    }
    Ok(ResolvedMount {
        host: real,
        container: spec.container.clone(),
        read_only: spec.read_only,
        kind: if meta.is_dir() {
            NodeKind::Dir
        } else {
            NodeKind::File
        },
    })
}

/// The host path `path` as seen inside the sandbox, through the mount that holds it.
fn to_container(path: &Path, mounts: &[ResolvedMount]) -> Option<PathBuf> {
    mounts
        .iter()
        .rev()
        .filter(|m| m.kind == NodeKind::Dir && is_within(path, &m.host))
        .max_by_key(|m| m.host.components().count())
        .and_then(|m| {
            path.strip_prefix(&m.host).ok().map(|rest| {
                if rest.as_os_str().is_empty() {
                    m.container.clone()
                } else {
                    m.container.join(rest)
                }
            })
        })
}

fn default_workdir(cwd: &Path, mounts: &[ResolvedMount]) -> PathBuf {
    to_container(cwd, mounts)
        .or_else(|| {
            mounts
                .iter()
                .find(|m| m.kind == NodeKind::Dir)
                .map(|m| m.container.clone())
        })
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// The argv to execute: `-- CMD ARGS...` as given, or the script with its interpreter.
fn command_argv(
    args: &RunArgs,
    cwd: &Path,
    mounts: &[ResolvedMount],
) -> Result<Vec<String>, Failure> {
    match args.args.split_first() {
        None => Err(anyhow::anyhow!(
            "nothing to run: give a script path or `-- CMD ARGS...` (see `vectraguard sandbox run --help`)"
        )
        .into()),
        Some(_) if args.after_dash_dash => Ok(args.args.clone()),
        Some((first, _)) if first.starts_with('-') => Err(anyhow::anyhow!(
            "unknown option '{first}' (see `vectraguard sandbox run --help`; put the command after `--`)"
        )
        .into()),
        Some((script, rest)) => script_argv(Path::new(script), rest, cwd, mounts),
    }
}

fn script_argv(
    script: &Path,
    rest: &[String],
    cwd: &Path,
    mounts: &[ResolvedMount],
) -> Result<Vec<String>, Failure> {
    let host_path = std::fs::canonicalize(cwd.join(script)).map_err(|e| Failure {
        code: EXIT_NOT_FOUND,
        error: anyhow::anyhow!("script {}: {e}", script.display()),
    })?;
    let inside = to_container(&host_path, mounts).ok_or_else(|| {
        anyhow::anyhow!(
            "script {} is outside the workspace; mount its directory with --mount",
            host_path.display()
        )
    })?;
    let head = read_head(&host_path).map_err(|e| Failure {
        code: 126,
        error: anyhow::anyhow!("script {}: {e}", host_path.display()),
    })?;
    let mut argv = shebang(&head).unwrap_or_else(|| vec!["sh".to_owned()]);
    argv.push(inside.display().to_string());
    argv.extend(rest.iter().cloned());
    Ok(argv)
}

fn read_head(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = vec![0u8; 256];
    let n = std::fs::File::open(path)?.read(&mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

/// `#!interp [one-arg]`, split as the kernel does: the interpreter, then everything
/// after the first run of blanks as a single argument.
fn shebang(head: &[u8]) -> Option<Vec<String>> {
    let line = head.strip_prefix(b"#!")?;
    let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
    let line = String::from_utf8_lossy(&line[..end]);
    let line = line.trim_matches(|c| c == ' ' || c == '\t' || c == '\r');
    if line.is_empty() {
        return None;
    }
    let mut parts = line.splitn(2, [' ', '\t']);
    let interp = parts.next()?.to_owned();
    let mut argv = vec![interp];
    if let Some(arg) = parts
        .next()
        .map(|a| a.trim_matches([' ', '\t']))
        .filter(|a| !a.is_empty())
    {
        argv.push(arg.to_owned());
    }
    Some(argv)
}

/// A session name must be a valid hostname label sequence: it becomes the hostname.
fn checked_hostname(name: &str) -> Result<String> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .as_bytes()
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && !name.starts_with(['-', '.']);
    if !ok {
        bail!(
            "--name {name:?}: use 1-63 letters, digits, '-', '_' or '.' (it becomes the sandbox's hostname)"
        );
    }
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebang_is_split_like_the_kernel() {
        assert_eq!(shebang(b"#!/bin/sh\necho"), Some(vec!["/bin/sh".into()]));
        assert_eq!(
            shebang(b"#! /usr/bin/env  python3 -u\n"),
            Some(vec!["/usr/bin/env".into(), "python3 -u".into()])
        );
        assert_eq!(shebang(b"echo hi\n"), None);
        assert_eq!(shebang(b"#!\n"), None);
    }

    #[test]
    fn host_paths_map_through_the_deepest_mount() {
        let mounts = vec![
            ResolvedMount {
                host: "/home/a/p".into(),
                container: "/workspace".into(),
                read_only: false,
                kind: NodeKind::Dir,
            },
            ResolvedMount {
                host: "/home/a/p/sub".into(),
                container: "/other".into(),
                read_only: true,
                kind: NodeKind::Dir,
            },
        ];
        assert_eq!(
            to_container(Path::new("/home/a/p/x.sh"), &mounts),
            Some(PathBuf::from("/workspace/x.sh"))
        );
        assert_eq!(
            to_container(Path::new("/home/a/p/sub/y"), &mounts),
            Some(PathBuf::from("/other/y"))
        );
        assert_eq!(to_container(Path::new("/etc/passwd"), &mounts), None);
        assert_eq!(
            default_workdir(Path::new("/elsewhere"), &mounts),
            PathBuf::from("/workspace")
        );
    }

    #[test]
    fn hostnames_are_checked() {
        assert!(checked_hostname("guard-shell").is_ok());
        assert!(checked_hostname("").is_err());
        assert!(checked_hostname("a b").is_err());
        assert!(checked_hostname(&"x".repeat(64)).is_err());
    }
}
