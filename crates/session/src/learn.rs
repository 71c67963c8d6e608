//! Learning mode (`--learn NAME`): one run with a relaxed view whose every file
//! access, program and destination is traced, turned into a least-privilege profile.
//!
//! Planning (`plan`): the home is the user's own, read-only, with writes going to a
//! throwaway layer (`MountOp::Overlay`); the host's other non-secret folders
//! ([`EXTRA_READ_ONLY`]) are visible read-only; the sensitive places under the home
//! (`vg_policy::sensitive`) stay hidden; the network is mediated with every public
//! destination allowed (and recorded); every other layer stays in force. After the
//! run, [`learned`] gathers what the tracer saw (file accesses), what the
//! mediator recorded (names and ports) and the programs from `commands.log`, for
//! `vg_learn` to collapse and render.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use vg_policy::config::Settings;
use vg_policy::network::Rule;
use vg_policy::view::{HostLayout, LearnView, NodeKind, ViewOptions};
use vg_policy::{FsView, NetworkMode};

mod grant_scan;
mod mount_views;

/// Host folders shown read-only while learning, besides the system folders of the
/// default view and the home. Secrets in them stay hidden by the host's own
/// permissions: the sandbox runs as the user.
pub const EXTRA_READ_ONLY: &[&str] = vg_policy::view::LEARN_READ_ONLY;

/// Rules that allow every public destination while learning, after the user's own
/// (which still decide first). The private-address guard stays: only `--add-host`
/// pins and rules naming a private address open one.
const OPEN_RULES: &[&str] = &["allow *", "allow 0.0.0.0/0", "allow ::/0"];

/// What learning needs from the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The profile to write.
    pub name: String,
    /// The home folder shown read-only (the sandbox user's own), when it exists.
    pub home: Option<PathBuf>,
}

/// Refuses what learning cannot be combined with, naming the fix.
pub fn check(
    image: bool,
    persistent: bool,
    recording: bool,
    mode: Option<NetworkMode>,
) -> Result<()> {
    if image {
        bail!(
            "--learn builds a profile for the host's own view (host tools read-only): drop --image"
        );
    }
    if persistent {
        bail!(
            "--learn runs one command and writes its profile when it ends: use it with `sandbox run` or `agent start`, not `sandbox create`"
        );
    }
    if !recording {
        bail!("--learn learns from the session's trace and record: remove --no-record");
    }
    if mode == Some(NetworkMode::Host) {
        bail!(
            "--learn records the destinations the command reaches, which --network host does not mediate: drop --network host"
        );
    }
    Ok(())
}

/// The settings' network opened to every public destination, unless the user asked
/// for none (`--network none`: nothing is learned about the network then).
pub fn open_network(settings: &mut Settings) -> Result<()> {
    if settings.network == Some(NetworkMode::None) {
        return Ok(());
    }
    settings.network = Some(NetworkMode::Allow);
    for line in OPEN_RULES {
        let rule = Rule::parse_line(line)
            .map_err(|e| anyhow::anyhow!("built-in learning rule {line:?}: {e}"))?;
        settings.network_rules.push(rule);
    }
    Ok(())
}

/// The home to show read-only while learning: the sandbox user's home when it is a
/// real folder on the host.
pub fn home(home: &Path) -> Option<PathBuf> {
    let meta = std::fs::symlink_metadata(home).ok()?;
    meta.is_dir().then(|| home.to_path_buf())
}

/// Refuses to learn with `home` when something is mounted inside it: the kernel
/// does not let a user namespace's overlay take a folder whose mounts it would
/// uncover as its lower layer ("failed to clone lowerpath"), and said so only as a
/// bare `EINVAL` at the overlay (session-26 red team).
pub fn check_home(home: &Path) -> anyhow::Result<()> {
    home_without_mounts(home, &mount_views::Mounts::read())
}

fn home_without_mounts(home: &Path, mounts: &mount_views::Mounts) -> anyhow::Result<()> {
    let inside = mounts.inside(home);
    if inside.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = inside.iter().map(|p| p.display().to_string()).collect();
    bail!(
        "learning shows your home {} to the command through a throwaway layer, which the kernel does not allow while something is mounted inside it ({}): unmount it while learning, or learn as a user whose home holds no mount",
        home.display(),
        list.join(", ")
    )
}

/// The relaxed view: the default view with the home shown read-only through a
/// throwaway layer, [`extra_read_only`] folders read-only, and the sensitive places
/// that exist hidden on top. Without a home folder on the host, the home stays the
/// usual empty one.
pub fn view(host: &HostLayout, options: &ViewOptions, plan: &Plan) -> FsView {
    let Some(home) = &plan.home else {
        return FsView::default_view(host, options);
    };
    // The records folder is made now, not when the session is created a moment later:
    // a folder that does not exist yet cannot be masked, and the home's layer shows
    // what appears on the host below it. Failing here is for the record to report.
    if let Ok(records) = crate::home::records_root() {
        let _ = vg_records::layout::create_private_dir_all(&records);
    }
    let places = vg_policy::sensitive::home_masks(home)
        .into_iter()
        .chain(vg_policy::sensitive::host_masks())
        .chain(own_folders(home));
    let mut masks: Vec<(PathBuf, NodeKind)> = Vec::new();
    for path in places {
        for (place, kind) in mask_targets(&path, home) {
            if !masks.iter().any(|(p, _)| *p == place) {
                masks.push((place, kind));
            }
        }
    }
    FsView::learn_view(
        host,
        options,
        &LearnView {
            host_home: home.clone(),
            extra_read_only: extra_read_only(),
            masks,
        },
    )
}

/// Vectra Guard's own folders, which stay hidden and are never granted: its folder
/// (`$VECTRAGUARD_HOME`: the records of other sessions, the image store, the
/// persistent sandboxes' registry and logs), or only the records and the image store
/// when that folder is `home` or holds it, and the invoker's configuration and learned
/// profiles.
fn own_folders(home: &Path) -> Vec<PathBuf> {
    let whole = crate::home::vectraguard_home("Vectra Guard's folder", "logs/")
        .ok()
        .filter(|folder| !vg_policy::paths::is_within(home, folder));
    let parts = match whole {
        Some(folder) => vec![Some(folder)],
        None => vec![
            crate::home::records_root().ok(),
            crate::home::images_root().ok(),
        ],
    };
    parts
        .into_iter()
        .chain([crate::host::invoker_home().map(|h| {
            let xdg = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from);
            vg_policy::config::user_config_path(&h, xdg.as_deref())
                .parent()
                .map_or_else(|| h.join(".config/vectraguard"), Path::to_path_buf)
        })])
        .flatten()
        .collect()
}

/// What to mask so that the sensitive place `path` cannot be read: the place itself
/// when it is there at its own path, and its real path when it is reached through a
/// symlink (`~/.gnupg -> dotfiles/gnupg`: masking the link alone would leave the keys
/// readable under their real name). The link itself is masked too when only its last
/// component is one (a mount cannot be placed through a symlinked folder). A real path
/// that is the home or holds it is left alone: masking it would hide the whole view.
fn mask_targets(path: &Path, home: &Path) -> Vec<(PathBuf, NodeKind)> {
    let kind_of = |p: &Path| match std::fs::symlink_metadata(p) {
        Ok(meta) if meta.is_dir() => Some(NodeKind::Dir),
        Ok(_) => Some(NodeKind::File),
        Err(_) => None,
    };
    let Some(kind) = kind_of(path) else {
        return Vec::new();
    };
    let real = std::fs::canonicalize(path).ok();
    if real.as_deref() == Some(path) {
        return vec![(path.to_path_buf(), kind)];
    }
    let mut out = Vec::new();
    let parent_is_real = path
        .parent()
        .is_some_and(|p| std::fs::canonicalize(p).is_ok_and(|r| r == p));
    if parent_is_real {
        out.push((path.to_path_buf(), kind));
    }
    if let Some(real) = real
        && !vg_policy::paths::is_within(home, &real)
        && let Some(kind) = kind_of(&real)
    {
        out.push((real, kind));
    }
    out
}

/// The places a learned profile never grants beyond `vg_policy::sensitive`'s, as
/// `vg_learn` takes them: Vectra Guard's own folders (wherever they are), AI agents'
/// login folders moved by the environment ([`moved_agent_folders`]), and the real
/// paths of the home's sensitive locations that are symlinks (a shell startup file's
/// for writing only).
pub fn withheld(home: &Path) -> Vec<vg_learn::Withheld> {
    use vg_policy::sensitive::{HOME_LOCATIONS, HOST_LOCATIONS, Sensitive};
    let mut out: Vec<vg_learn::Withheld> = Vec::new();
    let own = own_folders(home)
        .into_iter()
        .map(|folder| (folder, Sensitive::VectraGuard));
    let agents = moved_agent_folders(|name| std::env::var_os(name))
        .into_iter()
        .map(|folder| (folder, Sensitive::AgentCredentials));
    for (folder, category) in own.chain(agents) {
        let real = std::fs::canonicalize(&folder).unwrap_or_else(|_| folder.clone());
        for path in [folder, real] {
            out.push(vg_learn::Withheld::new(path, category));
        }
    }
    let locations = HOME_LOCATIONS
        .iter()
        .map(|l| (home.join(l.path), l))
        .chain(HOST_LOCATIONS.iter().map(|l| (PathBuf::from(l.path), l)));
    for (path, location) in locations {
        if let Ok(real) = std::fs::canonicalize(&path)
            && real != path
        {
            out.push(vg_learn::Withheld {
                write_only: location.write_only,
                ..vg_learn::Withheld::new(real, location.category)
            });
        }
    }
    out.dedup();
    out
}

/// AI agents' login folders where the environment moved them (`XDG_CONFIG_HOME`'s
/// `github-copilot`, `CODEX_HOME`, `CLAUDE_CONFIG_DIR`): `vg_policy::sensitive`
/// knows only their places in the home (session-24 red team: learning granted
/// `$XDG_CONFIG_HOME/github-copilot`). Absolute values only, as the tools take them.
fn moved_agent_folders(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Vec<PathBuf> {
    [
        ("XDG_CONFIG_HOME", Some("github-copilot")),
        ("CODEX_HOME", None),
        ("CLAUDE_CONFIG_DIR", None),
    ]
    .into_iter()
    .filter_map(|(name, inside)| {
        let dir = PathBuf::from(var(name)?);
        dir.is_absolute()
            .then(|| inside.map_or_else(|| dir.clone(), |inside| dir.join(inside)))
    })
    .collect()
}

/// Of [`EXTRA_READ_ONLY`], the folders this host has (real folders, not links).
pub fn extra_read_only() -> Vec<PathBuf> {
    EXTRA_READ_ONLY
        .iter()
        .map(PathBuf::from)
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .collect()
}

/// What a learning run learned, for the front end to show and save
/// (`vg_learn::save`).
#[derive(Debug, Clone)]
pub struct Learned {
    /// The profile's name (`--learn NAME`).
    pub name: String,
    /// The learning run's session.
    pub session: String,
    /// The command as run.
    pub command: Vec<String>,
    pub profile: vg_learn::Learned,
}

/// Collapses what the run used into a profile: the file accesses the tracer kept,
/// the programs of `commands.log` (a program run from outside the default view must
/// be readable next time), the destinations of `events.jsonl` and the `--add-host`
/// pins. Paths are learned against the sandbox user's home; the workspace and the
/// user's mounts are writable in every run already.
pub fn learned(
    plan: &crate::Plan,
    learn: &Plan,
    session: &str,
    dir: &Path,
    files: vg_learn::Observations,
) -> Result<Learned> {
    let home = plan.spec.identity.home.clone();
    // Without a real home folder (`nobody`'s `/nonexistent`), the home was the usual
    // empty tmpfs: nothing in it exists on the host to grant.
    let mut observations = match &learn.home {
        Some(_) => files,
        None => files.without_under(&home),
    };
    programs(dir, &mut observations);
    destinations(dir, &mut observations);
    if let Some(policy) = &plan.network.policy {
        for pin in &policy.hosts {
            observations.add_host(pin.clone());
        }
    }
    let workspaces = plan
        .mounts
        .iter()
        .filter(|m| !m.read_only)
        .map(|m| m.container.clone())
        .collect();
    let host = vg_learn::RealHost;
    let mut cx = vg_learn::LearnContext::new(home.clone(), workspaces, &host);
    // What learning's view showed read-only outside the home: its extra folders and
    // the user's read-only mounts. Nothing else there was usable.
    cx.visible = extra_read_only()
        .into_iter()
        .chain(
            plan.mounts
                .iter()
                .filter(|m| m.read_only)
                .map(|m| m.container.clone()),
        )
        .collect();
    cx.withheld = withheld(&home);
    let profile = around_host_secrets(&observations, &mut cx)?;
    Ok(Learned {
        name: learn.name.clone(),
        session: session.to_owned(),
        command: plan.spec.argv.clone(),
        profile,
    })
}

/// Learns, and learns again with what [`grant_scan`] finds inside the grants on the
/// host withheld (a sensitive file's other names, sockets, `.env*` files, folders
/// it cannot look through), until no grant holds any. Each round withholds more, so
/// grants only narrow; a profile still holding one after that many rounds is refused
/// rather than saved.
fn around_host_secrets(
    observations: &vg_learn::Observations,
    cx: &mut vg_learn::LearnContext<'_>,
) -> Result<vg_learn::Learned> {
    const ROUNDS: usize = 16;
    let secrets = grant_scan::Secrets::find(&sensitive_places(&cx.home, &cx.withheld));
    cx.withheld.extend(secrets.linked().iter().cloned());
    // Each grant is looked through once: a round changes only the grants that held
    // something, and a folder can take seconds to walk.
    let mut scanned: std::collections::HashMap<(PathBuf, bool), Vec<vg_learn::Withheld>> =
        std::collections::HashMap::new();
    for _ in 0..ROUNDS {
        let learned = vg_learn::learn(observations, cx);
        let mut more: Vec<vg_learn::Withheld> = Vec::new();
        for grant in learned.grants.iter().filter(|g| !g.missing) {
            let held = scanned
                .entry((grant.path.clone(), grant.write))
                .or_insert_with(|| secrets.held_within(&cx.home, &grant.path, grant.write));
            for held in held.iter() {
                if !cx.withheld.contains(held) && !more.contains(held) {
                    more.push(held.clone());
                }
            }
        }
        if more.is_empty() {
            return Ok(learned);
        }
        cx.withheld.extend(more);
    }
    bail!(
        "learning kept finding secrets (hard links to sensitive files, sockets, .env files) or unreadable folders inside the folders it would grant, and could not leave them out: nothing was saved; remove them (`find ~ -samefile FILE` finds a file's other names) and learn again"
    )
}

/// Every sensitive place of this home, for [`grant_scan::Secrets::find`]:
/// `vg_policy::sensitive`'s and the [`withheld`] ones.
fn sensitive_places(home: &Path, withheld: &[vg_learn::Withheld]) -> Vec<vg_learn::Withheld> {
    use vg_policy::sensitive::{HOME_LOCATIONS, HOST_LOCATIONS};
    HOME_LOCATIONS
        .iter()
        .map(|l| (home.join(l.path), l))
        .chain(HOST_LOCATIONS.iter().map(|l| (PathBuf::from(l.path), l)))
        .map(|(path, l)| vg_learn::Withheld {
            write_only: l.write_only,
            ..vg_learn::Withheld::new(path, l.category)
        })
        .chain(withheld.iter().cloned())
        .collect()
}

/// Every program `commands.log` names, by absolute path (a relative one joined to
/// the exec's working directory), as a program and as a file read: each exec's file,
/// and what the kernel started first for it (`interp=`: a script's interpreter, a
/// program's own loader), which the profile must let run as well; and, where either
/// was reached through a symlink, the file it reached (`ran=`, `interp_ran=`, always
/// absolute), without which the link leads nowhere under the profile.
fn programs(dir: &Path, observations: &mut vg_learn::Observations) {
    use std::os::unix::ffi::OsStrExt;
    let path = vg_records::layout::file_path(dir, vg_records::layout::RecordFile::Commands);
    let Ok(text) = std::fs::read(&path) else {
        return;
    };
    for line in text.split(|b| *b == b'\n') {
        let Ok(line) = std::str::from_utf8(line) else {
            continue;
        };
        let Some(vg_records::CommandLogLine::Exec(exec)) = vg_records::CommandLogLine::parse(line)
        else {
            continue;
        };
        let exe = exec.exe.as_deref().or(exec.argv.first().map(Vec::as_slice));
        // The kernel opens an interpreter or loader named without a slash from the
        // working directory, never from PATH.
        // What a link reached is written absolute, or cut for its depth and no
        // path (`(deeper)/…`).
        let ran = exec.ran.as_deref().filter(|p| p.starts_with(b"/"));
        let interp_ran = exec.interp_ran.as_deref().filter(|p| p.starts_with(b"/"));
        let programs = [
            (exe, false),
            (ran, false),
            (exec.interp.as_deref(), true),
            (interp_ran, false),
        ];
        for (program, from_cwd) in programs {
            let Some(program) = program else {
                continue;
            };
            let program = Path::new(std::ffi::OsStr::from_bytes(program));
            let full = if program.is_absolute() {
                program.to_path_buf()
            } else if from_cwd || program.components().count() > 1 {
                Path::new(std::ffi::OsStr::from_bytes(&exec.cwd)).join(program)
            } else {
                // A bare name looked up in PATH: the file is not known.
                continue;
            };
            let Some(full) = vg_policy::paths::normalize_absolute(&full) else {
                continue;
            };
            observations.program(&full);
            observations.file(&full, vg_learn::Access::Read);
        }
    }
}

/// The destinations the mediator recorded: each connection attempt with its name,
/// address, port and decision.
fn destinations(dir: &Path, observations: &mut vg_learn::Observations) {
    let path = vg_records::layout::file_path(dir, vg_records::layout::RecordFile::Events);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return;
    };
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if event["type"] != "network" || event["event"] != "connect" {
            continue;
        }
        let (Some(ip), Some(port)) = (
            event["address"].as_str().and_then(|a| a.parse().ok()),
            event["port"].as_u64().and_then(|p| u16::try_from(p).ok()),
        ) else {
            continue;
        };
        observations.destination(vg_learn::Destination {
            name: event["name"].as_str().map(str::to_owned),
            ip,
            port,
            allowed: event["decision"] == "allow",
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_login_folders_moved_by_the_environment_are_withheld() {
        let env = |name: &str| match name {
            "XDG_CONFIG_HOME" => Some("/home/u/xdg".into()),
            "CODEX_HOME" => Some("/srv/codex".into()),
            "CLAUDE_CONFIG_DIR" => Some("relative/claude".into()),
            _ => None,
        };
        assert_eq!(
            moved_agent_folders(env),
            [
                PathBuf::from("/home/u/xdg/github-copilot"),
                PathBuf::from("/srv/codex")
            ]
        );
        assert!(moved_agent_folders(|_| None).is_empty());
    }

    /// The programs learned from a `commands.log` holding `log`.
    fn programs_learned_from(name: &str, log: &str) -> Vec<PathBuf> {
        let dir = std::env::temp_dir().join(format!("vg-learn-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            vg_records::layout::file_path(&dir, vg_records::layout::RecordFile::Commands),
            log,
        )
        .unwrap();
        let mut observations = vg_learn::Observations::new();
        programs(&dir, &mut observations);
        std::fs::remove_dir_all(&dir).unwrap();
        observations.programs().keys().cloned().collect()
    }

    /// A script's interpreter is a program the profile must let run: learned from the
    /// exec line's `interp=` (absolute, or from the working directory, as the kernel
    /// opens it), next to the exec's own file.
    #[test]
    fn a_scripts_interpreter_is_learned_as_a_program() {
        let learned = programs_learned_from(
            "interp",
            "2026-01-01T00:00:00.000Z exec pid=2 ppid=1 cwd=/w exe=./s.sh interp=/opt/py/bin/python3 -- ./s.sh a\n\
             2026-01-01T00:00:00.000Z exec pid=3 ppid=2 cwd=/w/sub exe=/w/t interp=tool -- /w/t\n\
             2026-01-01T00:00:00.000Z exec pid=4 ppid=2 cwd=/w exe=/bin/true -- true\n",
        );
        assert_eq!(
            learned,
            [
                Path::new("/bin/true"),
                Path::new("/opt/py/bin/python3"),
                Path::new("/w/s.sh"),
                Path::new("/w/sub/tool"),
                Path::new("/w/t"),
            ]
        );
    }

    /// A program or interpreter run through a symlink: the file the link reached
    /// (`ran=`, `interp_ran=`) is learned next to the link, so that the profile lets
    /// the link lead somewhere. A name cut for its depth (`(deeper)/…`) is no path
    /// and is left out.
    #[test]
    fn the_file_a_symlink_reached_is_learned_with_the_link() {
        let learned = programs_learned_from(
            "ran",
            "2026-01-01T00:00:00.000Z exec pid=2 ppid=1 cwd=/w exe=/bin/sh ran=/usr/bin/dash -- sh\n\
             2026-01-01T00:00:00.000Z exec pid=3 ppid=2 cwd=/w exe=/w/s.sh interp=/w/py interp_ran=/opt/py/bin/python3.13 -- /w/s.sh\n\
             2026-01-01T00:00:00.000Z exec pid=4 ppid=2 cwd=/w exe=/w/deep ran='(deeper)/x/y' -- /w/deep\n",
        );
        assert_eq!(
            learned,
            [
                Path::new("/bin/sh"),
                Path::new("/opt/py/bin/python3.13"),
                Path::new("/usr/bin/dash"),
                Path::new("/w/deep"),
                Path::new("/w/py"),
                Path::new("/w/s.sh"),
            ]
        );
    }

    #[test]
    fn learning_opens_public_destinations_after_the_users_rules() {
        let mut settings = Settings {
            network_rules: vec![Rule::parse_line("deny *.evil.test").unwrap()],
            ..Settings::default()
        };
        open_network(&mut settings).unwrap();
        assert_eq!(settings.network, Some(NetworkMode::Allow));
        let texts: Vec<&str> = settings
            .network_rules
            .iter()
            .map(|r| r.text.as_str())
            .collect();
        assert_eq!(
            texts,
            [
                "deny *.evil.test",
                "allow *",
                "allow 0.0.0.0/0",
                "allow ::/0"
            ]
        );
    }

    /// Red team: `~/.gnupg -> dotfiles/gnupg` left the keys readable at their real
    /// path while learning (only the link was masked), and a secret below a symlinked
    /// folder (`~/.docker -> dotfiles/docker`) failed the run's setup (a mount cannot be
    /// placed through a symlink). The real paths are masked and withheld now.
    #[test]
    fn secrets_behind_symlinks_are_masked_and_withheld_at_their_real_path() {
        use std::os::unix::fs::symlink;
        let root = std::env::temp_dir().join(format!("vg-learn-masks-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let home = root.join("home");
        for dir in ["dotfiles/gnupg", "dotfiles/docker", ".ssh"] {
            std::fs::create_dir_all(home.join(dir)).unwrap();
        }
        let home = std::fs::canonicalize(&home).unwrap();
        std::fs::write(home.join("dotfiles/gnupg/key"), "k").unwrap();
        std::fs::write(home.join("dotfiles/docker/config.json"), "{}").unwrap();
        std::fs::write(home.join("dotfiles/bashrc"), "").unwrap();
        symlink("dotfiles/gnupg", home.join(".gnupg")).unwrap();
        symlink("dotfiles/docker", home.join(".docker")).unwrap();
        symlink("dotfiles/bashrc", home.join(".bashrc")).unwrap();
        symlink("..", home.join(".aws")).unwrap();
        let targets = |rel: &str| mask_targets(&home.join(rel), &home);
        let gnupg = targets(".gnupg");
        let docker = targets(".docker/config.json");
        let ssh = targets(".ssh");
        let aws = targets(".aws");
        let missing = targets(".kube");
        let held = withheld(&home);
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(
            gnupg,
            [
                (home.join(".gnupg"), NodeKind::File),
                (home.join("dotfiles/gnupg"), NodeKind::Dir)
            ]
        );
        assert_eq!(
            docker,
            [(home.join("dotfiles/docker/config.json"), NodeKind::File)]
        );
        assert_eq!(ssh, [(home.join(".ssh"), NodeKind::Dir)]);
        // A link to a folder holding the home: only the link.
        assert_eq!(aws, [(home.join(".aws"), NodeKind::File)]);
        assert!(missing.is_empty());
        use vg_policy::sensitive::Sensitive;
        assert!(held.contains(&vg_learn::Withheld::new(
            home.join("dotfiles/gnupg"),
            Sensitive::GpgKeys
        )));
        assert!(held.contains(&vg_learn::Withheld::new(
            home.join("dotfiles/docker/config.json"),
            Sensitive::RegistryCredentials
        )));
        assert!(held.contains(&vg_learn::Withheld {
            write_only: true,
            ..vg_learn::Withheld::new(home.join("dotfiles/bashrc"), Sensitive::ShellStartup)
        }));
        assert!(held.iter().any(|w| w.category == Sensitive::VectraGuard));
    }

    #[test]
    fn network_none_stays_none_while_learning() {
        let mut settings = Settings {
            network: Some(NetworkMode::None),
            ..Settings::default()
        };
        open_network(&mut settings).unwrap();
        assert_eq!(settings.network, Some(NetworkMode::None));
        assert!(settings.network_rules.is_empty());
    }

    #[test]
    fn a_home_with_a_mount_inside_is_refused_with_the_mounts_named() {
        let mounts = mount_views::Mounts::parse(
            b"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
              2 1 0:40 / /home/u/mnt rw - tmpfs tmpfs rw\n\
              3 1 0:41 / /home/u rw - ext4 /dev/sdb1 rw\n\
              4 1 0:42 / /home/uv/x rw - tmpfs tmpfs rw\n",
        );
        let refused = home_without_mounts(Path::new("/home/u"), &mounts)
            .unwrap_err()
            .to_string();
        assert!(refused.contains("(/home/u/mnt)"), "{refused}");
        assert!(refused.contains("unmount it while learning"), "{refused}");
        // A home that is a mount itself, or a neighbour's mounts, are no reason.
        assert!(home_without_mounts(Path::new("/home/uv"), &mounts).is_err());
        assert!(home_without_mounts(Path::new("/home/w"), &mounts).is_ok());
        let own = mount_views::Mounts::parse(b"3 1 0:41 / /home/u rw - ext4 /dev/sdb1 rw\n");
        assert!(home_without_mounts(Path::new("/home/u"), &own).is_ok());
    }

    #[test]
    fn what_learning_cannot_combine_with_is_refused_with_the_fix() {
        for (args, fix) in [
            ((true, false, true, None), "drop --image"),
            ((false, true, true, None), "not `sandbox create`"),
            ((false, false, false, None), "remove --no-record"),
            (
                (false, false, true, Some(NetworkMode::Host)),
                "drop --network host",
            ),
        ] {
            let e = check(args.0, args.1, args.2, args.3)
                .unwrap_err()
                .to_string();
            assert!(e.contains(fix), "{e}");
        }
        check(false, false, true, Some(NetworkMode::None)).unwrap();
    }
}
