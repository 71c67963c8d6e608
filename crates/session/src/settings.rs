//! Step one of planning: the settings that apply, from the request's configuration
//! files, its profile and its own settings (which win).

use anyhow::Result;
use vg_policy::config::{self, ConfigFile, Settings};

use crate::request::Request;

/// Merges the files (a project file ranks below every trusted layer, profiles
/// included, and its limits only cap the rest: `vg_policy::config`), then the
/// request's settings; the agent falls back to the request's.
pub fn merge(request: &Request) -> Result<Settings> {
    let refs: Vec<&ConfigFile> = request.config.iter().collect();
    let mut settings = config::resolve_profile(&refs, request.profile.as_deref())?;
    settings.overlay(request.settings.clone());
    if settings.agent.is_none() {
        settings.agent = request.agent.clone().filter(|a| !a.is_empty());
    }
    Ok(settings)
}
