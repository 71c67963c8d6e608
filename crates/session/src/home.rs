//! Vectra Guard's own folder and what it holds: the session records (`logs/`), the
//! image store (`images/`) and what the container engines' sessions keep
//! (`engines/`). The library and the CLI's `logs` and `image`
//! commands find them here, the same way.

use std::path::PathBuf;

use anyhow::{Result, bail};

use crate::host::invoker_home;

/// Vectra Guard's own folder: `$VECTRAGUARD_HOME` when set and not empty (it must
/// be absolute), else `~/.vectraguard` of the invoking user. `what` and `holds` name
/// what is being looked for in errors ("the session records", "logs/").
pub fn vectraguard_home(what: &str, holds: &str) -> Result<PathBuf> {
    let env_home = std::env::var_os("VECTRAGUARD_HOME")
        .map(PathBuf::from)
        .filter(|h| !h.as_os_str().is_empty());
    // A relative HOME (or an empty one) would put the folder wherever the command
    // happens to run.
    let home = invoker_home().filter(|h| h.is_absolute());
    match (env_home, home) {
        (Some(h), _) if !h.is_absolute() => bail!(
            "VECTRAGUARD_HOME={} is a relative path: set it to an absolute one",
            h.display()
        ),
        (Some(h), _) => Ok(h),
        (None, Some(home)) => Ok(home.join(".vectraguard")),
        (None, None) => bail!(
            "cannot find your home directory to locate {what}; \
             set HOME, or set VECTRAGUARD_HOME to the folder that holds {holds}"
        ),
    }
}

/// `$VECTRAGUARD_HOME/logs` when set and not empty, else
/// `~/.vectraguard/logs` of the invoking user.
pub fn records_root() -> Result<PathBuf> {
    Ok(vectraguard_home("the session records", "logs/")?.join("logs"))
}

/// What the container engines' sessions keep for the next ones (`engines/` in
/// Vectra Guard's folder): the limits a Docker daemon said it can hold
/// (`vg_backend::engine::api::LimitsCache`).
pub fn engines_root() -> Result<PathBuf> {
    Ok(vectraguard_home("the engines' folder", "engines/")?.join("engines"))
}

/// The image store: `images/` in Vectra Guard's folder.
pub fn images_root() -> Result<PathBuf> {
    Ok(vg_image::Store::default_root(&vectraguard_home(
        "the image store",
        "images/",
    )?))
}
