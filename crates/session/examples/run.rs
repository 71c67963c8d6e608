//! Starts a recorded session from code, waits for it, and reads its record back:
//! `cargo run -p vg-session --example run`.
//!
//! The workspace and the records folder are fresh temporary folders; the command
//! prints a line, which reaches our stdout through the session's relay and lands in
//! the record's `stdout.log`.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use vg_records::{SessionStore, layout, read_metadata};
use vg_session::{Plan, Recording, Request, image};

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("run: {e:#}");
            ExitCode::from(125)
        }
    }
}

fn run() -> Result<ExitCode> {
    let workspace = tempfile::tempdir().context("a workspace")?;
    let records = tempfile::tempdir().context("a records folder")?;
    let request = Request {
        args: vec![
            "sh".into(),
            "-c".into(),
            "echo hello from the sandbox; exit 3".into(),
        ],
        after_dash_dash: true,
        // Mounts name real paths: /tmp may be a symlink.
        cwd: std::fs::canonicalize(workspace.path())?,
        record: Recording::On {
            root: Some(records.path().to_owned()),
        },
        host_env: Request::process_env(),
        ..Request::default()
    };
    // Pure: nothing is created until `start`.
    let plan = Plan::new(&request, &mut image::none)?;
    println!(
        "planned: {:?} in {}",
        plan.spec.argv,
        plan.spec.workdir.display()
    );
    let running = vg_session::start(plan)?;
    let Some(id) = running.id().map(str::to_owned) else {
        bail!("a recorded session has an id");
    };
    let state = running.state();
    println!(
        "started: {id}, init is host pid {}, every layer in place: {:?}",
        state.pid, state.started
    );
    let outcome = running.wait()?;
    println!(
        "ended: exit code {}, {:?}, timed out: {}",
        outcome.exit_code, outcome.termination, outcome.timed_out
    );

    // The record, read back as `vectraguard logs` would.
    let store = SessionStore::at(records.path());
    let dir = store.resolve(&id)?;
    let meta = read_metadata(&dir)?;
    let stdout = std::fs::read_to_string(dir.join(layout::STDOUT))?;
    let intact = store.verify(&id)?.is_intact();
    println!(
        "record: status {}, exit code {:?}, command {:?}",
        meta.status, meta.exit_code, meta.command
    );
    println!("record: stdout.log: {:?}", stdout.trim_end());
    println!(
        "record: integrity {}",
        if intact { "verified" } else { "BROKEN" }
    );
    let consistent =
        intact && meta.exit_code == Some(outcome.exit_code) && stdout == "hello from the sandbox\n";
    Ok(if consistent {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
