//! What `metadata.json` says when the session starts: the plan, as the record
//! states it (the end is added by [`super::Session::finish`]).

use vg_records::{Metadata, Origin, UserInfo};

use crate::host;
use crate::limits::Enforced;
use crate::plan::Plan;

/// What `metadata.json` says when the session starts.
pub fn initial(plan: &Plan, enforced: &Enforced) -> Metadata {
    let Plan {
        settings,
        spec,
        mounts,
        cwd,
        ..
    } = plan;
    let mut meta = Metadata::new(if settings.agent.is_some() {
        Origin::Agent
    } else {
        Origin::Cli
    });
    meta.name = settings.name.clone();
    meta.agent = settings.agent.clone();
    meta.agent_preset = plan.agent_preset.clone();
    meta.prompt = plan.prompt.clone();
    meta.description = settings.description.clone();
    meta.script = plan.script.clone();
    meta.command = spec.argv.clone();
    meta.cwd_outside = Some(cwd.display().to_string());
    meta.cwd_inside = Some(spec.workdir.display().to_string());
    meta.cwd = meta.cwd_inside.clone();
    meta.user = UserInfo::current();
    if meta.user.name.is_none() {
        meta.user.name = host::invoker_name();
    }
    meta.mounts = mounts
        .iter()
        .map(|m| {
            format!(
                "{}:{}{}",
                m.host.display(),
                m.container.display(),
                if m.read_only { ":ro" } else { "" }
            )
        })
        .collect();
    meta.set_env_keys(spec.env.iter().map(|(k, _)| k.as_str()));
    meta.layers
        .extra
        .insert("hostname".into(), spec.hostname.clone().into());
    meta.layers.extra.insert(
        "sandbox_user".into(),
        serde_json::json!({ "uid": spec.identity.uid, "gid": spec.identity.gid }),
    );
    plan.network.record(&mut meta);
    if let Some(img) = &plan.image {
        meta.image = Some(img.image.name.clone());
        meta.image_digest = Some(img.image.digest.to_string());
    }
    plan.limits.record(enforced, &mut meta.limits);
    if let Some(cg) = &enforced.cgroup {
        meta.layers.cgroup_version = Some(cg.version.as_str().to_owned());
        meta.layers.cgroup_controllers = cg.controllers.iter().map(|c| (*c).to_owned()).collect();
    }
    meta
}
