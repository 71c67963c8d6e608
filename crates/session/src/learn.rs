//! Learning mode (`--learn NAME`): one run with a relaxed view whose every file
//! access, program and destination is traced, turned into a least-privilege profile.
//!
//! Planning (`plan`): the home is the user's own, read-only, with writes going to a
//! throwaway layer (`MountOp::Overlay`); the host's other non-secret folders
//! ([`EXTRA_READ_ONLY`]) are visible read-only; the sensitive places under the home
//! (`vg_policy::sensitive`) stay hidden; the network is mediated with every public
//! destination allowed (and recorded); every other layer stays in force. After the
//! run, [`observations`] gathers what the tracer saw (file accesses), what the
//! mediator recorded (names and ports) and the programs from `commands.log`, for
//! `vg_learn` to collapse and render.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use vg_policy::config::Settings;
use vg_policy::network::Rule;
use vg_policy::view::{HostLayout, LearnView, NodeKind, ViewOptions};
use vg_policy::{FsView, NetworkMode};

/// Host folders shown read-only while learning, besides the system folders of the
/// default view and the home. Secrets in them stay hidden by the host's own
/// permissions: the sandbox runs as the user.
pub const EXTRA_READ_ONLY: &[&str] = &["/srv", "/var", "/mnt", "/media"];

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
pub fn check(image: bool, persistent: bool, recording: bool, mode: Option<NetworkMode>) -> Result<()> {
    if image {
        bail!(
            "--learn builds a profile for the host's own view (host tools read-only): drop --image"
        );
    }
    if persistent {
        bail!("--learn runs one command and writes its profile when it ends: use it with `sandbox run` or `agent start`, not `sandbox create`");
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

/// The relaxed view: the default view with the home shown read-only through a
/// throwaway layer, [`extra_read_only`] folders read-only, and the sensitive places
/// that exist hidden on top. Without a home folder on the host, the home stays the
/// usual empty one.
pub fn view(host: &HostLayout, options: &ViewOptions, plan: &Plan) -> FsView {
    let Some(home) = &plan.home else {
        return FsView::default_view(host, options);
    };
    let masks = vg_policy::sensitive::home_masks(home)
        .into_iter()
        .chain(vg_policy::sensitive::host_masks())
        .filter_map(|path| {
            let meta = std::fs::symlink_metadata(&path).ok()?;
            let kind = if meta.is_dir() {
                NodeKind::Dir
            } else {
                NodeKind::File
            };
            Some((path, kind))
        })
        .collect();
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

/// Of [`EXTRA_READ_ONLY`], the folders this host has (real folders, not links).
pub fn extra_read_only() -> Vec<PathBuf> {
    EXTRA_READ_ONLY
        .iter()
        .map(PathBuf::from)
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learning_opens_public_destinations_after_the_users_rules() {
        let mut settings = Settings {
            network_rules: vec![Rule::parse_line("deny *.evil.test").unwrap()],
            ..Settings::default()
        };
        open_network(&mut settings).unwrap();
        assert_eq!(settings.network, Some(NetworkMode::Allow));
        let texts: Vec<&str> = settings.network_rules.iter().map(|r| r.text.as_str()).collect();
        assert_eq!(texts, ["deny *.evil.test", "allow *", "allow 0.0.0.0/0", "allow ::/0"]);
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
    fn what_learning_cannot_combine_with_is_refused_with_the_fix() {
        for (args, fix) in [
            ((true, false, true, None), "drop --image"),
            ((false, true, true, None), "not `sandbox create`"),
            ((false, false, false, None), "remove --no-record"),
            ((false, false, true, Some(NetworkMode::Host)), "drop --network host"),
        ] {
            let e = check(args.0, args.1, args.2, args.3).unwrap_err().to_string();
            assert!(e.contains(fix), "{e}");
        }
        check(false, false, true, Some(NetworkMode::None)).unwrap();
    }
}
