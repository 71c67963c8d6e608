//! `vectraguard doctor`: every layer's availability on this host, with the fix for
//! each missing one. (Exec tracing, through seccomp user notification, is required:
//! every recorded session uses it.)

use vg_sandbox::probe;

/// Checks whose absence only limits what can be asked for: Landlock scoping is
/// used when the kernel has it; memory and CPU limits are refused (or, with
/// --best-effort-limits, skipped) where cgroups are missing; the process cap then
/// falls back to RLIMIT_NPROC; without TUN access only `--network allow` is refused,
/// and without overlayfs in a user namespace only `--image`.
const OPTIONAL: &[&str] = &[
    probe::TUN_LAYER,
    probe::IMAGE_LAYER,
    "Landlock scoping",
    "limits: memory, cpus",
    "limits: pids without cgroups",
];

pub fn doctor() -> i32 {
    let checks = probe::all();
    let width = checks.iter().map(|c| c.layer.len()).max().unwrap_or(10);
    let mut missing = 0;
    for c in &checks {
        let required = !OPTIONAL.contains(&c.layer.as_str());
        let mark = match (c.ok, required) {
            (true, _) => "ok     ",
            (false, true) => "MISSING",
            (false, false) => "absent ",
        };
        println!("{mark}  {:width$}  {}", c.layer, c.detail);
        if let Some(fix) = &c.fix {
            println!("         {:width$}  fix: {fix}", "");
        }
        if !c.ok && required {
            missing += 1;
        }
    }
    if missing == 0 {
        println!("\nEvery layer the default policy requires is available.");
        0
    } else {
        println!(
            "\n{missing} required layer(s) missing: `vectraguard sandbox run` refuses to start until they are fixed."
        );
        1
    }
}
