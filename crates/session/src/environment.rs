//! Step four of planning: the command's environment. `PATH`, `HOME`, `USER` (the
//! image user's inside an image), `TERM` and `LANG` from the front end (an image may
//! not have the host's locale: it gets C.UTF-8 unless it says more), then the image's
//! Env, env files and the settings' `env`, in that order.

use anyhow::{Context, Result};
use vg_policy::Identity;
use vg_policy::config::Settings;
use vg_policy::env::{EnvAssignment, Environment, parse_env_file};

use crate::image::ImageRun;
use crate::request::Request;

/// The environment, as `(key, value)` pairs sorted by key.
pub fn compose(
    request: &Request,
    settings: &Settings,
    identity: &Identity,
    image: Option<&ImageRun>,
) -> Result<Vec<(String, String)>> {
    let env_identity = match image {
        Some(img) => Identity {
            home: img.home.clone(),
            name: img.user.clone(),
            ..identity.clone()
        },
        None => identity.clone(),
    };
    let mut env = Environment::base(
        &env_identity,
        request.env_var("TERM"),
        request.env_var("LANG").filter(|_| image.is_none()),
    );
    let mut assignments: Vec<EnvAssignment> = image.map(ImageRun::env).unwrap_or_default();
    for file in &settings.env_files {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read --env-file {}", file.display()))?;
        assignments.extend(
            parse_env_file(&text, &file.display().to_string()).map_err(anyhow::Error::from)?,
        );
    }
    assignments.extend(settings.env.iter().cloned());
    env.apply(&assignments, |k| request.env_var(k).map(str::to_owned));
    Ok(env
        .iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect())
}
