//! Starting a planned session: what planning left out because it changes the host.
//! The cgroup is created (or the limits fall back, or the run is refused), the
//! generated `/etc` files are written, the session record is created (unless
//! `Recording::Off`), the sandbox is spawned with its output on pipes or a terminal,
//! and the record's relays, tracer and network mediator are attached. The result is
//! a [`Running`] session to wait on.

use std::os::fd::{AsFd, AsRawFd};
use std::path::PathBuf;

use anyhow::Result;
use vg_policy::NetworkMode;
use vg_sandbox::Sandbox;
use vg_sandbox::cgroup::Cgroup;
use vg_sandbox::terminal::{RawTerminal, SavedTerminals};

use crate::etc::Generated;
use crate::exit::Error;
use crate::limits::Enforced;
use crate::notes::Notes;
use crate::plan::Plan;
use crate::record::{Output, Session};
use crate::request::Recording;
use crate::running::{Mode, Running};

/// Starts `plan`: when this returns, the command is running (or about to: init
/// starts it once every layer is in place).
pub fn start(mut plan: Plan) -> Result<Running, Error> {
    crate::backend::engine_limits(&mut plan)?;
    let mut enforced = plan.limits.enforce()?;
    crate::backend::limits(
        plan.backend,
        crate::backend::Asked {
            memory: plan.settings.limits.memory.is_some(),
            pids: plan.settings.limits.pids.is_some(),
            ptys: plan.settings.limits.ptys.is_some(),
        },
        &mut plan.limits,
        &mut enforced,
    )?;
    plan.spec.rlimit_nproc = enforced.rlimit_nproc;
    // One policy handle for the mediator, the inspector and the control channel.
    let policy = plan.network.handle();
    // The inspector and its CA, the secrets read from their sources.
    let inspection = match (&plan.inspection, &policy) {
        (Some(inspection), Some(handle)) => Some(crate::inspection::prepare(
            inspection,
            handle.clone(),
            plan.image.as_ref().map(|i| i.image.rootfs.as_path()),
        )?),
        _ => None,
    };
    let mut files: Vec<(PathBuf, String)> = plan
        .etc
        .iter()
        .map(|(name, contents)| (PathBuf::from("/etc").join(name), contents.clone()))
        .collect();
    if let Some(inspection) = &inspection {
        files.extend(inspection.files.iter().cloned());
        // The placeholders and the CA variables outrank what the caller set.
        plan.spec
            .env
            .retain(|(k, _)| !inspection.env.iter().any(|(name, _)| name == k));
        plan.spec.env.extend(inspection.env.iter().cloned());
    }
    // Generated files, kept until the session ends.
    let generated = Generated::write(&files)?;
    if let Some(g) = &generated {
        plan.spec.view.ops.extend(g.mounts());
        if let Some(container) = &mut plan.container {
            crate::backend::engine_etc(container, plan.spec.network, &g.mounts());
        }
    }
    let network = Network { policy, inspection };
    match plan.record.clone() {
        Recording::Off => start_unrecorded(plan, enforced, generated, network),
        Recording::On { root } => start_recorded(plan, enforced, generated, root, network),
    }
}

/// The session's network side, made once in [`start`].
struct Network {
    policy: Option<vg_netstack::PolicyHandle>,
    inspection: Option<crate::inspection::Prepared>,
}

impl Network {
    fn interceptor(&self) -> Option<std::sync::Arc<dyn vg_netstack::intercept::Interceptor>> {
        self.inspection.as_ref().map(|i| {
            std::sync::Arc::clone(&i.inspector)
                as std::sync::Arc<dyn vg_netstack::intercept::Interceptor>
        })
    }
}

/// A run with its session record: create it, start the sandbox, attach the relays,
/// the tracer and the mediator.
fn start_recorded(
    plan: Plan,
    enforced: Enforced,
    generated: Option<Generated>,
    root: Option<PathBuf>,
    network: Network,
) -> Result<Running, Error> {
    let root = match root {
        Some(root) => root,
        None => crate::home::records_root()?,
    };
    crate::mounts::check_hidden("the session records folder", &root, &plan.mounts)?;
    let mut meta = crate::record::metadata::initial(&plan, &enforced);
    if let Some(inspection) = &network.inspection {
        inspection.record(&mut meta);
    }
    // Raw mode (and its guardian process) before any thread exists.
    let spec = &plan.spec;
    let stdin_is_terminal = vg_sandbox::terminal::is_terminal(std::io::stdin());
    let raw = match (spec.tty && stdin_is_terminal).then(RawTerminal::enter) {
        Some(Err(e)) => {
            let error = anyhow::anyhow!("cannot put the terminal in raw mode: {e}");
            let session = Session::create(&root, meta)?;
            let id = session.id().to_owned();
            if let Err(e) = session.failed_to_start(&error) {
                crate::diag::error(format_args!("{}", crate::diag::chain(&e)));
            }
            return Err(Error::from(error).in_session(&id));
        }
        Some(Ok(raw)) => Some(raw),
        None => None,
    };
    // The approval prompt, when someone is at a terminal to answer it.
    let prompt = (plan.gate.is_some()
        && stdin_is_terminal
        && vg_sandbox::terminal::is_terminal(std::io::stderr()))
    .then(|| crate::prompt::TerminalPrompt::new(spec.tty));
    // The sandbox first, its record next: the record is made while init builds the
    // sandbox (nothing of the command's runs before `attach` below has its relays and
    // tracer in place: init forks the command only after handing over the exec
    // listener and reporting ready, and its output waits in the pipes).
    let mut held = crate::backend::Held::default();
    let spawned = spawn(
        plan.backend,
        plan.container.as_ref(),
        spec,
        enforced.cgroup.as_ref(),
        stdin_is_terminal,
        prompt.clone(),
        &mut held,
    );
    let mut session = match Session::create(&root, meta) {
        Ok(session) => session,
        Err(error) => {
            // Fail closed: no sandbox runs unrecorded.
            if let Ok((sandbox, _)) = &spawned {
                let _ = sandbox.killer().kill();
            }
            drop(raw);
            return Err(error.into());
        }
    };
    let id = session.id().to_owned();
    let in_session = |e: anyhow::Error| Error::from(e).in_session(&id);
    if let Some(sink) = held.sink.take() {
        session.gvisor_trace(sink);
    }
    if let Some(engine) = held.engine_trace.take()
        && let Err(error) = session.engine_trace(engine)
    {
        if let Ok((sandbox, _)) = &spawned {
            let _ = sandbox.killer().kill();
        }
        drop(raw);
        if let Err(e) = session.failed_to_start(&error) {
            crate::diag::error(format_args!("{}", crate::diag::chain(&e)));
        }
        return Err(in_session(error));
    }
    let (mut sandbox, output) = match spawned {
        Ok(started) => started,
        Err(error) => {
            drop(raw);
            if let Err(e) = session.failed_to_start(&error) {
                crate::diag::error(format_args!("{}", crate::diag::chain(&e)));
            }
            return Err(in_session(error));
        }
    };
    if plan.network.mode == NetworkMode::Host
        && let Err(error) = session.event(
            // Loudly: in the events as well as in metadata.json.
            vg_records::Event::new(vg_records::event::kind::NETWORK)
                .with("event", "host-network")
                .with("decision", "allow")
                .with(
                    "warning",
                    "--network host: the sandbox shares this machine's network, unmediated and unrecorded",
                ),
        )
    {
        let _ = sandbox.killer().kill();
        drop(raw);
        return Err(in_session(error));
    }
    // After the spawn, so that its timer thread inherits the blocked signals; before
    // `attach`, whose tracer consults it.
    if let Some(gate) = plan.gate.clone()
        && let Err(error) = session.gate(gate, prompt)
    {
        let _ = sandbox.killer().kill();
        drop(raw);
        if let Err(e) = session.failed_to_start(&error) {
            crate::diag::error(format_args!("{}", crate::diag::chain(&e)));
        }
        return Err(in_session(error));
    }
    // In a raw terminal the note's line ends in "\r\n".
    let notes = plan
        .network_notes
        .then(|| Notes::new(spec.tty && stdin_is_terminal));
    let live_network = match (&network.policy, &plan.network.policy) {
        (Some(handle), Some(base)) => Some(crate::control::LiveNetwork::new(
            handle.clone(),
            base.clone(),
            network.inspection.is_some(),
        )),
        _ => None,
    };
    if spec.trace_files || spec.trace_file_changes || spec.report_refusals {
        session.observe(crate::record::observe::Observer::new(
            spec.view.clone(),
            sandbox.pid(),
            plan.learn.is_some(),
        ));
    }
    let terminal = session.attach(
        &mut sandbox,
        output,
        spec.trace_exec.then_some(spec.exits),
        plan.limits.output_caps(),
        network
            .policy
            .map(|policy| (policy, notes, network.inspection.as_ref())),
        live_network,
    );
    if let Some(master) = terminal.as_ref().and_then(|slot| slot.get())
        && stdin_is_terminal
    {
        let _ = vg_sandbox::terminal::copy_size(std::io::stdin().as_fd(), master.as_fd());
    }
    Ok(Running::new(
        sandbox,
        plan,
        enforced,
        (generated, held),
        Mode::Recorded {
            session: Box::new(session),
            raw,
            terminal,
            stdin_is_terminal,
        },
    ))
}

/// Spawns the sandbox with its output on pipes to the relays, or on its own terminal.
fn spawn(
    backend: vg_policy::Backend,
    container: Option<&vg_backend::engine::ContainerPlan>,
    spec: &vg_sandbox::SandboxSpec,
    cgroup: Option<&Cgroup>,
    stdin_is_terminal: bool,
    prompt: Option<std::sync::Arc<crate::prompt::TerminalPrompt>>,
    held: &mut crate::backend::Held,
) -> Result<(Sandbox, Output)> {
    if spec.tty {
        let size = stdin_is_terminal
            .then(|| vg_sandbox::terminal::size(std::io::stdin().as_fd()).ok())
            .flatten();
        if container.is_none() {
            // Init replaces 0-2 by the terminal it opens; nothing of ours reaches
            // the command.
            return crate::backend::spawn(backend, container, spec, [0, 1, 2], cgroup, true, held)
                .map(|sandbox| (sandbox, Output::Tty { size, client: None }));
        }
        // A container engine's client never gets our terminal: its input is empty
        // (the command's comes from the terminal our init opens in the container),
        // its own output (errors) goes to the record's stderr.
        let null = std::fs::File::open("/dev/null")
            .map_err(|e| anyhow::anyhow!("cannot open /dev/null: {e}"))?;
        let (client_r, client_w) = vg_sandbox::output_pipe()
            .map_err(|e| anyhow::anyhow!("cannot create the output pipe: {e}"))?;
        let fds = [null.as_raw_fd(), client_w.as_raw_fd(), client_w.as_raw_fd()];
        let sandbox = crate::backend::spawn(backend, container, spec, fds, cgroup, true, held)?;
        // Our copy of the write end must go, or the relay never sees the end.
        drop(client_w);
        Ok((
            sandbox,
            Output::Tty {
                size,
                client: Some(client_r),
            },
        ))
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
                let sandbox =
                    crate::backend::spawn(backend, container, spec, fds, cgroup, true, held)?;
                // Our copies of the write ends must go, or the relays never see the end.
                drop((out_w, err_w));
                if let Some((in_r, in_w)) = input {
                    drop(in_r);
                    // Started after spawn_in, so it inherits the blocked signals.
                    std::thread::spawn(move || crate::record::relay_terminal_input(in_w, prompt));
                }
                Ok((sandbox, Output::Pipes(out_r, err_r)))
            })
    }
}

/// `Recording::Off`: the same sandbox, with the caller's stdio and no session record.
fn start_unrecorded(
    plan: Plan,
    enforced: Enforced,
    generated: Option<Generated>,
    network: Network,
) -> Result<Running, Error> {
    // The command gets our own fds: whatever it does to a terminal among them (its
    // modes; seccomp refuses line disciplines and input injection) is undone after it,
    // by a guardian process if we are killed. Saved before any thread starts.
    let saved = SavedTerminals::save_stdio()
        .map_err(|e| anyhow::anyhow!("cannot save the terminal's settings: {e}"))?;
    let mut held = crate::backend::Held::default();
    let mut sandbox = crate::backend::spawn(
        plan.backend,
        plan.container.as_ref(),
        &plan.spec,
        [0, 1, 2],
        enforced.cgroup.as_ref(),
        false,
        &mut held,
    )?;
    // Mediated as always; only the records of it are not kept.
    let mut notes = plan.network_notes.then(|| Notes::new(false));
    let interceptor = network.interceptor();
    let mediator = match (network.policy, sandbox.tun()) {
        (Some(policy), Some(tun)) => Some(
            vg_netstack::Mediator::start_with_gate(
                tun,
                policy,
                Box::new(move |event| {
                    if let Some(notes) = notes.as_mut() {
                        notes.show(&event);
                    }
                }),
                None,
                interceptor,
            )
            .map_err(|e| anyhow::anyhow!("cannot start the network mediator: {e}"))?,
        ),
        _ => None,
    };
    Ok(Running::new(
        sandbox,
        plan,
        enforced,
        (generated, held),
        Mode::Unrecorded { saved, mediator },
    ))
}
