//! Docker and Podman, driven through their command-line clients.
//!
//! The same session plan as the native sandbox, translated for a container engine:
//! - [`plan`]: [`ContainerPlan`] (a value) and [`run_args`] (pure), the engine's
//!   `run` arguments with our posture (no capabilities, `no-new-privileges`, a
//!   read-only root with our tmpfs layout, a non-root user, limits, our seccomp
//!   profile, the environment in a 0600 file rather than on the command line);
//! - [`seccomp`]: [`seccomp_profile`], vg-seccomp's rule model as the engines'
//!   seccomp JSON;
//! - [`cli`]: what runs the engine's client: [`probe`], [`image_present`],
//!   [`prepare_run`], [`stop`], [`remove`], [`inspect`];
//! - [`api`]: Docker's daemon asked over its socket for `info` and an image's
//!   config, where the client would ask that socket (a client start saved each).

pub mod api;
pub mod cli;
pub mod plan;
pub mod seccomp;

pub use cli::{
    ContainerState, ENGINE_FAILED, EngineError, EngineInfo, LimitSupport, PreparedRun,
    check_limits, client_path, containers_with_label, image_config, image_present, inspect,
    limit_support, limit_support_cached, prepare_run, probe, remove, removed_with_client,
    require_image, stop,
};
pub use plan::{
    ContainerPlan, EngineMount, EngineNetwork, ExecRecording, INIT_DIR, INIT_DIR_SIZE, INIT_LIB,
    INIT_PROGRAM, INIT_RUN, ImageConfig, LOADER_PRELOAD_FILE, LOADER_VARIABLES, PlanError,
    check_loader_environment, env_file_contents, resolve_command, run_args,
};
pub use seccomp::{SeccompExportError, seccomp_profile};

/// A container engine, driven through its command-line client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Engine {
    Docker,
    Podman,
}

impl Engine {
    /// Both engines, for probing.
    pub const ALL: [Engine; 2] = [Engine::Docker, Engine::Podman];

    /// The client program, looked up on `PATH`.
    pub const fn program(self) -> &'static str {
        match self {
            Engine::Docker => "docker",
            Engine::Podman => "podman",
        }
    }

    /// The name shown to users ("Docker", "Podman").
    pub const fn display_name(self) -> &'static str {
        match self {
            Engine::Docker => "Docker",
            Engine::Podman => "Podman",
        }
    }

    /// The backend's name in `--backend` and in records (`docker`, `podman`).
    pub const fn backend_name(self) -> &'static str {
        self.program()
    }

    /// The engine called `name` (`docker` or `podman`), as `--backend` spells it.
    pub fn from_backend_name(name: &str) -> Option<Engine> {
        Engine::ALL.into_iter().find(|e| e.backend_name() == name)
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.display_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(Engine::Docker.program(), "docker");
        assert_eq!(Engine::Podman.program(), "podman");
        assert_eq!(Engine::Podman.to_string(), "Podman");
        assert_eq!(Engine::from_backend_name("docker"), Some(Engine::Docker));
        assert_eq!(Engine::from_backend_name("podman"), Some(Engine::Podman));
        assert_eq!(Engine::from_backend_name("Docker"), None);
        assert_eq!(Engine::from_backend_name("native"), None);
    }
}
