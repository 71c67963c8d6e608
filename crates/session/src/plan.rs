//! Planning: a [`Request`] in, a [`Plan`] out, with nothing created, written or
//! spawned (files are only read: config, env files, a script's `#!` line, the image
//! store). In order: settings merged (`settings.rs`), the network plan
//! (`network.rs`), the image (from the caller's [`ImageSource`]), mounts
//! (`mounts.rs`), identity (`host.rs`), argv (`argv.rs`), workdir, environment
//! (`environment.rs`), the limits plan (`limits.rs`), the filesystem view, and the
//! `/etc` files to generate (`etc.rs`). [`crate::start`] carries it out.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Result, bail};
use vg_policy::FsView;
use vg_policy::config::Settings;
use vg_policy::view::{ResolvedMount, ViewOptions};
use vg_sandbox::SandboxSpec;

use crate::exit::Error;
use crate::image::ImageRun;
use crate::request::{ImageChoice, Recording, Request};
use crate::{argv, environment, host, limits, mounts, network, settings};

/// Finds (and, as the front end decides, pulls) the image a request names.
pub type ImageSource<'a> = dyn FnMut(&ImageChoice) -> Result<ImageRun> + 'a;

/// Everything one run needs, decided before anything is spawned. Holding it keeps
/// the image's root filesystem leased.
pub struct Plan {
    /// The sandbox to spawn; [`crate::start`] adds the cgroup's fallbacks and the
    /// generated `/etc` files' mounts.
    pub spec: SandboxSpec,
    pub limits: limits::Plan,
    pub network: network::Plan,
    pub image: Option<ImageRun>,
    /// Files generated for the sandbox's `/etc` (name, contents), written and bound
    /// over the sandbox's copies when it starts.
    pub etc: Vec<(&'static str, String)>,
    pub settings: Settings,
    pub mounts: Vec<ResolvedMount>,
    pub cwd: PathBuf,
    /// The script the command runs, as named in the request (for the record).
    pub script: Option<String>,
    pub record: Recording,
    pub network_notes: bool,
    /// The approval gate, when `--ask` holds anything.
    pub gate: Option<crate::gate::Plan>,
    /// HTTPS inspection and secrets, when a method and path rule or a secret asks.
    pub inspection: Option<crate::inspection::Plan>,
    /// `agent start`'s preset and prompt, for the record.
    pub agent_preset: Option<String>,
    pub prompt: Option<String>,
    /// Learning mode (`--learn NAME`).
    pub learn: Option<crate::learn::Plan>,
    /// What runs the sandbox (`--backend`).
    pub backend: vg_policy::Backend,
    /// With `--backend docker|podman`: the container, as the engine will run it.
    pub container: Option<vg_backend::engine::ContainerPlan>,
}

impl Plan {
    /// Plans `request`; `images` is asked for the image when the request names one.
    pub fn new(request: &Request, images: &mut ImageSource) -> Result<Self, Error> {
        let cwd = request.cwd.clone();
        let mut settings = settings::merge(request)?;
        if request.learn.is_some() {
            crate::learn::check(
                request.image.is_some(),
                request.persistent,
                request.record != Recording::Off,
                settings.network,
            )?;
            crate::learn::open_network(&mut settings)?;
        }
        let network = network::Plan::new(&settings)?;
        let inspection = crate::inspection::Plan::new(
            network.policy.as_ref(),
            &settings.secrets,
            &settings.upstream_ca,
            request,
        )?;
        // A container engine runs an image of its own store: ours is not asked.
        let engine_image = crate::backend::engine_image(settings.backend, request)?;
        let image = match engine_image {
            Some(_) => None,
            None => request.image.as_ref().map(&mut *images).transpose()?,
        };

        let mounts = mounts::resolve_mounts(&settings, &cwd)?;
        mounts::check_images_hidden(&mounts)?;
        mounts::check_engines_hidden(&mounts)?;
        mounts::check_config_unwritable(&mounts)?;
        let primary = mounts
            .first()
            .map(|m| m.host.clone())
            .unwrap_or_else(|| cwd.clone());
        let identity = host::resolve_identity(settings.user.as_deref(), &primary)?;
        // A persistent sandbox starts its commands later (`persistent.rs`).
        let argv = if request.persistent {
            Vec::new()
        } else {
            argv::argv(request, image.as_ref(), &mounts)?
        };
        let workdir = settings
            .workdir
            .clone()
            .or_else(|| image.as_ref().and_then(ImageRun::workdir))
            .unwrap_or_else(|| mounts::default_workdir(&cwd, &mounts));
        let env = environment::compose(request, &settings, &identity, image.as_ref())?;

        let hostname = match &settings.name {
            Some(name) => checked_hostname(name)?,
            None => "vectraguard".to_owned(),
        };

        let recording = request.record != Recording::Off;
        // The cgroup, if any, is named after this process, a count of its plans and
        // its pid namespace: unique while it runs, however many sessions it hosts
        // at once, and known as ours when a later run sweeps the groups of a
        // killed supervisor (only one in the same pid namespace can tell).
        static PLANS: AtomicU64 = AtomicU64::new(0);
        let limits = limits::plan(
            &settings.limits,
            &format!(
                "vectraguard-{}-{}-{}",
                std::process::id(),
                PLANS.fetch_add(1, Ordering::Relaxed),
                vg_sandbox::cgroup::pid_namespace_tag()
            ),
            recording,
            settings.backend.unwrap_or_default() == vg_policy::Backend::Gvisor,
        )?;
        let options = ViewOptions {
            mounts: mounts.clone(),
            home: identity.home.clone(),
            uid: identity.uid,
            gid: identity.gid,
            tmp_size: limits.disk,
            home_size: limits.disk,
            ptys: limits.ptys,
            tmpfs: checked_tmpfs(&request.tmpfs)?,
        };
        if request.violations == crate::request::Violations::All && !recording {
            return Err(anyhow::anyhow!(
                "--violations all records refused accesses in the session record: remove --no-record"
            )
            .into());
        }
        let learn = request.learn.as_ref().map(|name| crate::learn::Plan {
            name: name.clone(),
            home: crate::learn::home(&identity.home),
        });
        if let Some(home) = learn.as_ref().and_then(|l| l.home.as_deref()) {
            crate::learn::check_home(home)?;
        }
        let view = match (&image, &learn) {
            (Some(img), _) => FsView::image_view(&img.image.rootfs, &options),
            (None, Some(learn)) => crate::learn::view(&host::layout(), &options, learn),
            (None, None) => FsView::default_view(&host::layout(), &options),
        };
        let mut etc = Vec::new();
        let held = !matches!(settings.approval.ask(), vg_policy::risk::Ask::Never);
        if let Some(resolv) = network.resolv_conf(image.is_some(), held) {
            etc.push(("resolv.conf", resolv));
        }
        if image.is_some() {
            etc.push(("hosts", crate::etc::hosts(&hostname)));
            etc.push(("hostname", format!("{hostname}\n")));
        }
        // An image's writable layer is its root.
        let watch_full = match &image {
            Some(_) => vec![PathBuf::from("/tmp"), PathBuf::from("/")],
            None => vec![PathBuf::from("/tmp"), identity.home.clone()],
        };
        let gate = {
            let approval = settings.approval;
            let refs: Vec<&vg_policy::config::ConfigFile> = request.config.iter().collect();
            match approval.ask() {
                vg_policy::risk::Ask::Never => None,
                ask => crate::gate::Plan::new(
                    ask,
                    approval.timeout,
                    vg_policy::risk::config::classifier(&refs).map_err(anyhow::Error::from)?,
                )
                .map(|gate| crate::gate::Plan {
                    // The rules' "outside the workspace": every writable mount.
                    workspaces: mounts
                        .iter()
                        .filter(|m| !m.read_only)
                        .map(|m| m.container.clone())
                        .collect(),
                    ..gate
                }),
            }
        };
        if gate.is_some() && !recording {
            return Err(anyhow::anyhow!(
                "--ask holds execs through the session's exec tracer and records every decision; remove --no-record (or use --ask never)"
            )
            .into());
        }
        if request.persistent && (!recording || request.tty) {
            return Err(anyhow::anyhow!(
                "a persistent sandbox records every command started in it, each with its own terminal when asked for: remove --no-record and -t from `sandbox create`"
            )
            .into());
        }
        if request.tty && !recording {
            return Err(anyhow::anyhow!(
                "a terminal (sandbox shell, run -t) is relayed and recorded by the session; remove --no-record"
            )
            .into());
        }
        let backend = settings.backend.unwrap_or_default();
        // gVisor's execs come from its own trace points; a container's from our
        // filter, installed by our init in the container (`backend.rs`), which
        // traces execs only: the engine's own seccomp profile answers a refused call
        // before ours could report it, and file calls are not traced there.
        let traced = recording && backend != vg_policy::Backend::Gvisor;
        let native_traced = traced && backend == vg_policy::Backend::Native;
        let spec = SandboxSpec {
            hostname,
            argv,
            env,
            workdir,
            view,
            identity,
            trace_exec: traced,
            exec_by_bpf: native_traced
                && gate.is_none()
                && !request.persistent
                && exec_by_bpf_allowed(settings.exec_trace),
            exits: exits(settings.exec_check.unwrap_or_default()),
            // Every recorded run reports refused changes and system calls
            // (`violation` events), refused reads too with `--violations all`; a
            // learning run traces and keeps every access (record/observe.rs).
            trace_files: native_traced
                && (learn.is_some() || request.violations == crate::request::Violations::All),
            trace_file_changes: native_traced,
            report_refusals: native_traced,
            rlimit_nproc: limits.rlimit_nproc,
            watch_full,
            tty: request.tty,
            network: network.sandbox_network(),
            inside: image.as_ref().map(|img| img.inside),
            persistent: request.persistent,
        };
        crate::backend::check(
            backend,
            &spec,
            learn.is_some(),
            gate.is_some(),
            inspection.is_some(),
            request.violations == crate::request::Violations::All,
        )?;
        let container = match &engine_image {
            Some(image) => Some(crate::backend::container(
                backend,
                image,
                request.image.as_ref().and_then(|i| i.entrypoint.clone()),
                &spec,
                &mounts,
                &limits,
                &request.tmpfs,
            )?),
            None => None,
        };
        Ok(Self {
            spec,
            limits,
            network,
            image,
            etc,
            settings,
            mounts,
            cwd,
            script: (!request.after_dash_dash)
                .then(|| request.args.first().cloned())
                .flatten(),
            record: request.record.clone(),
            network_notes: request.network_notes,
            gate,
            inspection,
            agent_preset: request.agent_preset.clone(),
            prompt: request.prompt.clone(),
            learn,
            backend,
            container,
        })
    }
}

/// `--tmpfs` folders: absolute, and never where the sandbox's own mounts live.
fn checked_tmpfs(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    paths
        .iter()
        .map(|p| {
            let normal = vg_policy::paths::normalize_absolute(p).ok_or_else(|| {
                anyhow::anyhow!(
                    "--tmpfs {}: use an absolute path inside the sandbox",
                    p.display()
                )
            })?;
            let reserved = [Path::new("/"), Path::new("/proc"), Path::new("/dev")];
            if reserved
                .iter()
                .any(|r| normal == *r || (*r != Path::new("/") && normal.starts_with(r)))
            {
                bail!(
                    "--tmpfs {}: not over /, /proc or /dev, which the sandbox sets up itself",
                    p.display()
                );
            }
            Ok(normal)
        })
        .collect()
}

/// A session name must be a valid hostname label sequence: it becomes the hostname.
pub fn checked_hostname(name: &str) -> Result<String> {
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

/// How the tracer learns the exits of recorded programs, for the `exec_check` asked:
/// from pidfds where the kernel keeps exit statuses for them, else (and for a check
/// at exit) from each program's `exit_group`.
pub fn exits(check: vg_policy::ExecCheck) -> vg_sandbox::trace::Exits {
    use vg_sandbox::trace::Exits;
    match check {
        vg_policy::ExecCheck::NextExec if Exits::pidfd_available() => Exits::Pidfd,
        _ => Exits::Trap,
    }
}

/// Whether execs may be recorded by the BPF recorder (`vg_sandbox::exectrace`): as
/// root, which can load it, by default (see [`bpf_chosen`]), and wherever
/// `exec_trace = "bpf"` (or `VECTRAGUARD_EXEC_TRACE`, which overrides the
/// configuration for one run) asks for it. An approval gate keeps seccomp
/// notification, which can hold an exec; so does a persistent sandbox (the caller's
/// conditions). Where the recorder cannot load, seccomp notification records and
/// the record says why.
pub fn exec_by_bpf_allowed(configured: Option<vg_policy::ExecTrace>) -> bool {
    let wanted = wanted_exec_trace(
        configured,
        std::env::var_os("VECTRAGUARD_EXEC_TRACE").as_deref(),
    );
    bpf_chosen(vg_sandbox::real_ids().0 == 0, wanted)
}

/// The choice of recorder as a value: root's BPF recorder unless seccomp
/// notification was asked for, in an image run too (whose system loader it tells by
/// the identity of the file the kernel mapped, which no race of names can change;
/// seccomp notification checks a name, which a loop swapping it beat, session-24
/// red team F3).
fn bpf_chosen(root: bool, wanted: Option<vg_policy::ExecTrace>) -> bool {
    root && wanted != Some(vg_policy::ExecTrace::Seccomp)
}

/// The exec trace asked for: the environment's, when it names one, over the
/// configuration's; `None` when neither chose (pure).
fn wanted_exec_trace(
    configured: Option<vg_policy::ExecTrace>,
    env: Option<&std::ffi::OsStr>,
) -> Option<vg_policy::ExecTrace> {
    env.and_then(|v| v.to_str())
        .and_then(|v| v.parse().ok())
        .or(configured)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_s_exec_trace_overrides_the_configuration_s() {
        use vg_policy::ExecTrace::{Bpf, Seccomp};
        let env = |v: &'static str| Some(std::ffi::OsStr::new(v));
        assert_eq!(wanted_exec_trace(None, None), None);
        assert_eq!(wanted_exec_trace(Some(Bpf), None), Some(Bpf));
        assert_eq!(wanted_exec_trace(Some(Bpf), env("seccomp")), Some(Seccomp));
        assert_eq!(wanted_exec_trace(None, env("bpf")), Some(Bpf));
        // A value that names none leaves the configuration's.
        assert_eq!(wanted_exec_trace(Some(Seccomp), env("")), Some(Seccomp));
        assert_eq!(wanted_exec_trace(None, env("ebpf")), None);
    }

    #[test]
    fn root_records_by_bpf_by_default_unless_told_not_to() {
        use vg_policy::ExecTrace::{Bpf, Seccomp};
        // (root, asked for) -> BPF
        let cases = [
            ((true, None), true),
            ((true, Some(Bpf)), true),
            ((true, Some(Seccomp)), false),
            // Only root can load it, whatever is asked.
            ((false, None), false),
            ((false, Some(Bpf)), false),
        ];
        for ((root, wanted), bpf) in cases {
            assert_eq!(
                bpf_chosen(root, wanted),
                bpf,
                "root {root}, asked {wanted:?}"
            );
        }
    }

    #[test]
    fn tmpfs_folders_are_absolute_and_stay_off_what_the_sandbox_sets_up() {
        let ok = checked_tmpfs(&[PathBuf::from("/scratch/./x/")]).unwrap_or_default();
        assert_eq!(ok, [PathBuf::from("/scratch/x")]);
        for bad in ["relative", "/", "/proc", "/proc/x", "/dev/shm"] {
            assert!(checked_tmpfs(&[PathBuf::from(bad)]).is_err(), "{bad}");
        }
    }

    #[test]
    fn hostnames_are_checked() {
        assert!(checked_hostname("guard-shell").is_ok());
        assert!(checked_hostname("").is_err());
        assert!(checked_hostname("a b").is_err());
        assert!(checked_hostname(&"x".repeat(64)).is_err());
    }
}
