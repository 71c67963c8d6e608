//! `vectraguard doctor`: every layer's availability on this host, with the fix for
//! each missing one. (Exec tracing, through seccomp user notification, is required:
//! every recorded session uses it; as root, where the BPF exec recorder loads, for
//! file calls and refusals only.)

use vg_sandbox::probe;

use crate::report::{self, State};

/// Checks whose absence only limits what can be asked for: Landlock scoping is
/// used when the kernel has it; memory and CPU limits are refused (or, with
/// --best-effort-limits, skipped) where cgroups are missing; the process cap then
/// falls back to RLIMIT_NPROC; without TUN access only `--network allow` is refused,
/// and without overlayfs in a user namespace only `--image`; without the BPF exec
/// recorder execs are recorded through seccomp notification.
const OPTIONAL: &[&str] = &[
    probe::TUN_LAYER,
    probe::EXEC_RECORDER_LAYER,
    probe::IMAGE_LAYER,
    "Landlock scoping",
    "limits: memory, cpus",
    "limits: pids without cgroups",
    GVISOR_LAYER,
    "backend: docker",
    "backend: podman",
];

/// The gVisor backend (`--backend gvisor`): optional, only it needs runsc.
const GVISOR_LAYER: &str = "backend: gvisor";

/// Exit status 0 when every required layer is there, 1 when one is missing (with
/// `--json` too, so scripts can use either).
pub fn doctor(json: bool) -> i32 {
    let mut checks = probe::all();
    let at = checks
        .iter()
        .position(|c| c.layer.starts_with("limits: memory"))
        .map_or(checks.len(), |i| i + 1);
    checks.insert(at, default_memory(&checks));
    checks.push(gvisor());
    checks.extend(vg_backend::engine::Engine::ALL.into_iter().map(engine));
    let missing = checks.iter().filter(|c| !c.ok && required(c)).count();
    if json {
        print_json(&checks, missing);
    } else {
        print_text(&checks, missing);
    }
    i32::from(missing > 0)
}

/// What holds the process cap on gVisor here: its kernel inside, and a pids
/// cgroup (where a session can make one) on gVisor's own host tasks.
fn gvisor_pids() -> String {
    let default = vg_policy::limits::DEFAULT_PIDS;
    let pids = vg_session::backend::gvisor_pids(default, vg_session::backend::host_task_max());
    format!(
        "processes capped inside by gVisor's kernel (RLIMIT_NPROC, {default} by default), gVisor's own host tasks by a pids cgroup of {} where one can be made{}",
        pids.host,
        pids.clamped_to.map_or_else(String::new, |max| format!(
            " (half of this host's {max} tasks: fewer than gVisor may need for {default} busy processes)"
        ))
    )
}

/// Whether runsc is installed and starts a sandbox here, and on which platform.
fn gvisor() -> probe::Check {
    let found = vg_backend::gvisor::probe(std::env::var_os("PATH").as_deref());
    let version = found
        .version
        .clone()
        .unwrap_or_else(|| "version unknown".into());
    match (&found.runsc, &found.platform, &found.error) {
        (Some(runsc), Some(platform), _) => probe::Check {
            layer: GVISOR_LAYER.into(),
            ok: true,
            detail: format!(
                "{} ({version}), platform {platform}; {}",
                runsc.display(),
                gvisor_pids()
            ),
            fix: None,
        },
        (None, _, error) => probe::Check {
            layer: GVISOR_LAYER.into(),
            ok: false,
            detail: "runsc is not installed".into(),
            fix: Some(error.clone().unwrap_or_else(|| "install runsc".into())),
        },
        (Some(runsc), None, error) => probe::Check {
            layer: GVISOR_LAYER.into(),
            ok: false,
            detail: format!(
                "{} ({version}) cannot start a sandbox: {}",
                runsc.display(),
                error.clone().unwrap_or_default()
            ),
            fix: Some(
                "runsc needs user namespaces and ptrace; check `runsc --rootless --network=none do /bin/true` by hand".into(),
            ),
        },
    }
}

/// Whether a container engine's client is installed and its daemon or service
/// answers, with its version and whether it is rootless.
fn engine(engine: vg_backend::engine::Engine) -> probe::Check {
    let layer = format!("backend: {}", engine.backend_name());
    match vg_backend::engine::probe(engine) {
        Ok(info) => probe::Check {
            layer,
            ok: true,
            detail: format!(
                "{} {}{}, runtime {}",
                engine.display_name(),
                info.server_version,
                if info.rootless { " (rootless)" } else { "" },
                info.default_runtime
            ),
            fix: None,
        },
        Err(e) => probe::Check {
            layer,
            ok: false,
            detail: format!("{} is not usable here", engine.display_name()),
            fix: Some(e.to_string()),
        },
    }
}

/// The memory cap every session gets unless told otherwise, and what holds it
/// here: the cgroup the limits probe could create, or the supervisor's watchdog.
fn default_memory(checks: &[probe::Check]) -> probe::Check {
    use vg_policy::limits::human_size;
    let cgroup = checks
        .iter()
        .find(|c| c.layer == "limits: memory, cpus, pids" && c.ok)
        .and_then(|c| c.detail.strip_prefix("enforced with "));
    match vg_session::limits::default_memory() {
        None => probe::Check {
            layer: DEFAULT_MEMORY.into(),
            ok: false,
            detail: "cannot read MemTotal from /proc/meminfo".into(),
            fix: Some("mount /proc, or give every run --memory SIZE".into()),
        },
        Some(cap) => probe::Check {
            layer: DEFAULT_MEMORY.into(),
            ok: true,
            detail: match cgroup {
                Some(version) => format!(
                    "{} (half of physical memory), held by {}",
                    human_size(cap),
                    version.replace('-', " ")
                ),
                None => format!(
                    "{} (half of physical memory), held by the supervisor's watchdog (resident memory of the sandbox's processes, polled every {} ms)",
                    human_size(cap),
                    vg_session::watchdog::INTERVAL.as_millis()
                ),
            },
            fix: None,
        },
    }
}

const DEFAULT_MEMORY: &str = "limits: default memory cap";

fn required(c: &probe::Check) -> bool {
    !OPTIONAL.contains(&c.layer.as_str())
}

/// The machine-readable form: stable key names, one object per probe, in the
/// order of the text form.
fn to_json(checks: &[probe::Check], missing: usize) -> serde_json::Value {
    let checks: Vec<serde_json::Value> = checks
        .iter()
        .map(|c| {
            serde_json::json!({
                "layer": c.layer,
                "ok": c.ok,
                "required": required(c),
                "detail": c.detail,
                "fix": c.fix,
            })
        })
        .collect();
    serde_json::json!({
        "ok": missing == 0,
        "missing_required": missing,
        "checks": checks,
    })
}

fn print_json(checks: &[probe::Check], missing: usize) {
    let text = serde_json::to_string_pretty(&to_json(checks, missing))
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    println!("{text}");
}

fn print_text(checks: &[probe::Check], missing: usize) {
    let width = checks.iter().map(|c| c.layer.len()).max().unwrap_or(10);
    for c in checks {
        let mark = match (c.ok, required(c)) {
            (true, _) => report::status("ok     ", State::Good),
            (false, true) => report::status("MISSING", State::Bad),
            (false, false) => report::status("absent ", State::Warn),
        };
        anstream::println!("{mark}  {:width$}  {}", c.layer, c.detail);
        if let Some(fix) = &c.fix {
            println!("         {:width$}  fix: {fix}", "");
        }
    }
    if missing == 0 {
        println!("\nEvery layer the default policy requires is available.");
    } else {
        println!(
            "\n{missing} required layer(s) missing: `vectraguard sandbox run` refuses to start until they are fixed."
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_every_probe_with_stable_keys() {
        let checks = vec![
            probe::Check {
                layer: "seccomp".into(),
                ok: false,
                detail: "not in the kernel".into(),
                fix: Some("enable CONFIG_SECCOMP".into()),
            },
            probe::Check {
                layer: probe::TUN_LAYER.into(),
                ok: true,
                detail: "/dev/net/tun".into(),
                fix: None,
            },
        ];
        let v = to_json(&checks, 1);
        assert_eq!(v["ok"], false);
        assert_eq!(v["missing_required"], 1);
        assert_eq!(v["checks"][0]["layer"], "seccomp");
        assert_eq!(v["checks"][0]["required"], true);
        assert_eq!(v["checks"][0]["fix"], "enable CONFIG_SECCOMP");
        assert_eq!(v["checks"][1]["required"], false);
        assert!(v["checks"][1]["fix"].is_null());
    }
}
