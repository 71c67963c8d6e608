//! Step one of planning: the settings that apply, from the request's configuration
//! files, its profile and its own settings (which win).

use std::path::Path;

use anyhow::Result;
use vg_policy::config::{self, ConfigFile, Settings};

use crate::request::Request;

/// Merges the files (a project file ranks below every trusted layer, profiles
/// included, and its limits only cap the rest: `vg_policy::config`), then the
/// request's settings; the agent falls back to the request's.
pub fn merge(request: &Request) -> Result<Settings> {
    let refs: Vec<&ConfigFile> = request.config.iter().collect();
    let mut settings = config::resolve_profile_over(
        &refs,
        request.profile.as_deref(),
        crate::limits::default_memory(),
    )?;
    settings.overlay(request.settings.clone());
    settings.admit_project_access(&exposed_without_project(&settings, &request.cwd))?;
    if settings.agent.is_none() {
        settings.agent = request.agent.clone().filter(|a| !a.is_empty());
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
    let read_write = settings.read_write.iter().map(|p| config::Exposed {
        host: p.clone(),
        writable: true,
    });
    mounts
        .chain(workspace)
        .chain(read_only)
        .chain(read_write)
        .collect()
}
