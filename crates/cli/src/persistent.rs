//! `vectraguard sandbox create|exec|ls|stop|rm`: persistent named sandboxes.
//!
//! `create` starts a host — this same program, detached from the terminal in a
//! process group of its own, with `VECTRAGUARD_SANDBOX_HOST` set — that claims the
//! name, starts the sandbox through `vg_session::persistent`, says `ready` (or why
//! not) on the pipe that is its stdout, and keeps the sandbox until it is stopped.
//! The other commands find it through the registry (`vg_session::persistent::registry`).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use vg_session::persistent::registry::{self, Entry, State};
use vg_session::persistent::{Ended, ExecOptions};

use crate::EXIT_FAILURE;
use crate::cli::{CreateArgs, ExecArgs, RunArgs, SandboxLsArgs, SandboxRmArgs, SandboxStopArgs};
use crate::live::exit_code;

/// Set in the host's environment: this process is the one that keeps the sandbox.
const HOST_ENV: &str = "VECTRAGUARD_SANDBOX_HOST";

/// How long `create` waits for the host to say it is ready (an image may unpack).
const READY_WAIT: Duration = Duration::from_secs(120);

pub fn create(args: CreateArgs) -> i32 {
    if std::env::var_os(HOST_ENV).is_some() {
        return host(args);
    }
    exit_code(|| {
        registry::check_name(&args.name)?;
        idle_timeout(&args.idle_timeout)?;
        let root = registry::root()?;
        registry::ensure_private(&root)?;
        // Appended to: a refused name must not lose another sandbox's log.
        let log = registry::open_log(&root, &args.name)?;
        let exe = std::env::current_exe().context("cannot find this program")?;
        let mut child = std::process::Command::new(exe)
            .args(std::env::args_os().skip(1))
            .env(HOST_ENV, "1")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(log)
            // Not in the terminal's process group: Ctrl-C and hangups are not its.
            .process_group(0)
            .spawn()
            .context("cannot start the sandbox's host process")?;
        let stdout = child.stdout.take().context("the host has no stdout")?;
        let started = Instant::now();
        for line in BufReader::new(stdout).lines() {
            let line = line?;
            if let Some(session) = line.strip_prefix("ready\t") {
                println!("{}\t{session}", args.name);
                return Ok(());
            }
            if let Some(message) = line.strip_prefix("error\t") {
                let _ = child.wait();
                bail!("{message}");
            }
            if started.elapsed() > READY_WAIT {
                break;
            }
        }
        let status = child.wait()?;
        Err(anyhow!(
            "the sandbox's host ended before it was ready ({status}); see {}",
            registry::log_path(&root, &args.name).display()
        ))
    })
}

fn idle_timeout(text: &str) -> Result<Option<Duration>> {
    if text.trim() == "0" {
        return Ok(None);
    }
    Ok(Some(vg_policy::limits::parse_duration(
        "--idle-timeout",
        text,
    )?))
}

fn now() -> String {
    vg_records::time::format_rfc3339(std::time::SystemTime::now())
}

/// The detached host: claims the name, starts the sandbox, serves it.
fn host(args: CreateArgs) -> i32 {
    let mut say = std::io::stdout();
    let mut tell = |line: String| {
        let _ = writeln!(say, "{line}");
        let _ = say.flush();
    };
    let root = match registry::root() {
        Ok(root) => root,
        Err(e) => {
            tell(format!("error\t{}", vg_session::diag::chain(&e)));
            return EXIT_FAILURE;
        }
    };
    let pid = i32::try_from(std::process::id()).unwrap_or(0);
    let mut entry = Entry {
        name: args.name.clone(),
        session: None,
        session_dir: None,
        host_pid: pid,
        host_start: registry::start_time(pid).unwrap_or(0),
        boot_id: registry::boot_id(),
        created: now(),
        idle_timeout_ms: None,
        image: args.options.image.clone(),
        workspace: std::env::current_dir()
            .ok()
            .map(|d| d.display().to_string()),
        ended: None,
    };
    let started = (|| -> Result<vg_session::persistent::Host, vg_session::Error> {
        let idle = idle_timeout(&args.idle_timeout)?;
        entry.idle_timeout_ms = idle.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        if args.options.name.as_deref().is_some_and(|n| n != args.name) {
            return Err(anyhow!(
                "--name {:?} differs from the sandbox's name {:?}: leave --name out",
                args.options.name.as_deref().unwrap_or_default(),
                args.name
            )
            .into());
        }
        registry::claim(&root, &entry)?;
        let mut options = args.options.clone();
        options.name = Some(args.name.clone());
        let run = RunArgs {
            options,
            args: Vec::new(),
            tty: false,
            after_dash_dash: true,
            shell: false,
        };
        let result = crate::request::request(&run)
            .map_err(vg_session::Error::from)
            .and_then(|mut request| {
                request.persistent = true;
                request.network_notes = false;
                let mut pull = crate::image::pull_for_run;
                vg_session::Plan::new(&request, &mut vg_session::image::from_store(&mut pull))
            })
            .and_then(|plan| vg_session::persistent::create(plan, idle));
        if result.is_err() {
            let _ = registry::remove(&root, &args.name);
        }
        result
    })();
    let host = match started {
        Ok(host) => host,
        Err(e) => {
            tell(format!("error\t{}", vg_session::diag::chain(&e.error)));
            return e.code;
        }
    };
    let records = vg_session::home::records_root().ok();
    entry.session = Some(host.id().to_owned());
    entry.session_dir = records.map(|r| r.join(host.id()));
    if let Err(e) = registry::update(&root, &entry) {
        tell(format!("error\t{}", vg_session::diag::chain(&e)));
        return EXIT_FAILURE;
    }
    tell(format!("ready\t{}", host.id()));
    let outcome = host.serve();
    // Only our own entry (a `sandbox rm` may have forgotten it meanwhile).
    if registry::read(&root, &entry.name).is_ok_and(|e| e.host_pid == pid) {
        entry.ended = Some(now());
        let _ = registry::update(&root, &entry);
    }
    match outcome {
        Ok(_) => 0,
        Err(e) => {
            crate::report::error(format_args!("{}", vg_session::diag::chain(&e.error)));
            e.code
        }
    }
}

/// The entry of a sandbox that runs now.
fn running(name: &str) -> Result<Entry> {
    let entry = registry::read(&registry::root()?, name)?;
    match entry.state() {
        State::Running => Ok(entry),
        State::Starting => bail!("the sandbox {name:?} is still starting; try again in a moment"),
        state => bail!(
            "the sandbox {name:?} is {}: `vectraguard sandbox rm {name}`, then create it again",
            state.as_str()
        ),
    }
}

pub fn exec(args: ExecArgs) -> i32 {
    let result = (|| -> Result<Ended> {
        let entry = running(&args.name)?;
        let dir = entry
            .session_dir
            .ok_or_else(|| anyhow!("the sandbox {:?} has no session yet", args.name))?;
        let mut env = Vec::new();
        for assignment in &args.env {
            let Some((key, value)) = assignment.split_once('=') else {
                bail!("-e {assignment}: use KEY=VALUE");
            };
            env.push((key.to_owned(), value.to_owned()));
        }
        vg_session::persistent::exec(
            &dir,
            ExecOptions {
                argv: args.command.clone(),
                env,
                cwd: args.workdir.clone(),
                tty: args.tty,
                timeout: None,
            },
        )
    })();
    match result {
        Ok(Ended::Exited { code, timed_out }) => {
            if timed_out {
                eprintln!(
                    "vectraguard: the command reached the sandbox's --timeout and was stopped"
                );
            }
            code
        }
        Ok(Ended::Refused { message, code }) => {
            crate::report::error(format_args!("{message}"));
            code
        }
        Err(e) => {
            crate::report::error(format_args!("{}", vg_session::diag::chain(&e)));
            EXIT_FAILURE
        }
    }
}

pub fn ls(args: &SandboxLsArgs) -> i32 {
    exit_code(|| {
        let entries = registry::list(&registry::root()?)?;
        if args.json {
            let listed: Vec<serde_json::Value> = entries
                .iter()
                .map(|e| {
                    let mut value = serde_json::to_value(e).unwrap_or_default();
                    value["state"] = serde_json::to_value(e.state()).unwrap_or_default();
                    value
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&listed)?);
            return Ok(());
        }
        if entries.is_empty() {
            println!("No persistent sandboxes. `vectraguard sandbox create NAME` makes one.");
            return Ok(());
        }
        println!("{:<20} {:<30} {:<36} CREATED", "NAME", "STATE", "SESSION");
        for e in &entries {
            println!(
                "{:<20} {:<30} {:<36} {}",
                e.name,
                e.state().as_str(),
                e.session.as_deref().unwrap_or("-"),
                e.created
            );
        }
        Ok(())
    })
}

/// Stops the sandbox through its control channel and waits for its host to end.
fn stop_and_wait(entry: &Entry, kill: bool) -> Result<()> {
    let dir = entry
        .session_dir
        .as_ref()
        .ok_or_else(|| anyhow!("the sandbox {:?} has no session", entry.name))?;
    let mut client = vg_control::ControlClient::connect(&vg_control::socket_path(dir))?;
    client.stop(kill)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while registry::start_time(entry.host_pid) == Some(entry.host_start) {
        if Instant::now() > deadline {
            bail!(
                "the sandbox {:?} did not stop within 30 s (try --kill)",
                entry.name
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

pub fn stop(args: &SandboxStopArgs) -> i32 {
    exit_code(|| {
        let entry = running(&args.name)?;
        stop_and_wait(&entry, args.kill)?;
        println!("Stopped {}", args.name);
        Ok(())
    })
}

pub fn rm(args: &SandboxRmArgs) -> i32 {
    exit_code(|| {
        let root = registry::root()?;
        let entry = registry::read(&root, &args.name)?;
        match entry.state() {
            State::Running | State::Starting if !args.force => bail!(
                "the sandbox {:?} is running: `vectraguard sandbox stop {0}` first, or rm -f",
                args.name
            ),
            State::Running => stop_and_wait(&entry, true)?,
            State::Starting => bail!(
                "the sandbox {:?} is still starting; try again in a moment",
                args.name
            ),
            State::Stopped | State::LostInReboot => {}
        }
        registry::remove(&root, &args.name)?;
        println!("Removed {}", args.name);
        Ok(())
    })
}
