//! The places learning never grants, as data: credentials, keys, browser profiles,
//! history and the like in the user's home, `.env*` files anywhere, the sockets that
//! control the host, and, for writing only, the shell startup files (a line added there
//! runs outside the sandbox the next time the user opens a shell).
//!
//! Learning mode (`sandbox run --learn`) reports an access to one of these and leaves
//! it out of the profile it writes; its relaxed view hides the read-sensitive ones
//! ([`home_masks`], [`host_masks`]). The home-relative locations assume the default
//! folders: a tool moved elsewhere (`XDG_CONFIG_HOME`, `GNUPGHOME`, …) is not known here.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use crate::paths::is_within;

/// What kind of secret a sensitive location holds, for messages and profile comments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Sensitive {
    SshKeys,
    GpgKeys,
    CloudCredentials,
    ClusterCredentials,
    RegistryCredentials,
    Passwords,
    Keyring,
    Certificates,
    BrowserProfile,
    History,
    EnvFile,
    ShellStartup,
    HostSocket,
    ApiTokens,
    AgentCredentials,
    RunsOnHost,
    VectraGuard,
    /// A folder learning could not look through for the others (unreadable, another
    /// file system, too large): not granted rather than granted unchecked.
    Unchecked,
}

impl Sensitive {
    /// A short description: "SSH keys", "shell history".
    pub fn describe(self) -> &'static str {
        match self {
            Sensitive::SshKeys => "SSH keys",
            Sensitive::GpgKeys => "GnuPG keys",
            Sensitive::CloudCredentials => "cloud credentials",
            Sensitive::ClusterCredentials => "Kubernetes credentials",
            Sensitive::RegistryCredentials => "container registry credentials",
            Sensitive::Passwords => "stored passwords",
            Sensitive::Keyring => "the desktop keyring",
            Sensitive::Certificates => "certificates and their keys",
            Sensitive::BrowserProfile => "a browser profile (cookies, saved passwords)",
            Sensitive::History => "shell or REPL history",
            Sensitive::EnvFile => "an .env file (often API keys)",
            Sensitive::ShellStartup => "a shell startup file (runs in every new shell)",
            Sensitive::HostSocket => "a socket that controls the host or the desktop session",
            Sensitive::ApiTokens => "access tokens (a code host, a package registry or a service)",
            Sensitive::AgentCredentials => "an AI agent's login and settings (API keys, tokens)",
            Sensitive::RunsOnHost => {
                "a place the host runs programs from (user services, autostart, PATH, git's configuration)"
            }
            Sensitive::VectraGuard => {
                "Vectra Guard's own records, configuration or learned profiles"
            }
            Sensitive::Unchecked => {
                "a folder Vectra Guard could not look through for secrets (unreadable, another file system, too large, or holding too many)"
            }
        }
    }
}

impl fmt::Display for Sensitive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// One sensitive location: a path relative to the home (or absolute, for
/// [`HOST_LOCATIONS`]), what it holds, and whether only writing it is sensitive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub path: &'static str,
    pub category: Sensitive,
    /// Readable, but never granted for writing (shell startup files).
    pub write_only: bool,
}

const fn read(path: &'static str, category: Sensitive) -> Location {
    Location {
        path,
        category,
        write_only: false,
    }
}

const fn write(path: &'static str, category: Sensitive) -> Location {
    Location {
        path,
        category,
        write_only: true,
    }
}

/// Locations relative to the user's home.
pub const HOME_LOCATIONS: &[Location] = &[
    read(".ssh", Sensitive::SshKeys),
    read(".gnupg", Sensitive::GpgKeys),
    read(".aws", Sensitive::CloudCredentials),
    read(".config/gcloud", Sensitive::CloudCredentials),
    read(".azure", Sensitive::CloudCredentials),
    read(".kube", Sensitive::ClusterCredentials),
    read(".docker/config.json", Sensitive::RegistryCredentials),
    read(".netrc", Sensitive::Passwords),
    read(".git-credentials", Sensitive::Passwords),
    read(".password-store", Sensitive::Passwords),
    read(".local/share/keyrings", Sensitive::Keyring),
    read(".pki", Sensitive::Certificates),
    read(".mozilla", Sensitive::BrowserProfile),
    read(".config/google-chrome", Sensitive::BrowserProfile),
    read(".config/chromium", Sensitive::BrowserProfile),
    read(".config/BraveSoftware", Sensitive::BrowserProfile),
    read(".config/microsoft-edge", Sensitive::BrowserProfile),
    read(".bash_history", Sensitive::History),
    read(".zsh_history", Sensitive::History),
    read(".local/share/fish/fish_history", Sensitive::History),
    read(".python_history", Sensitive::History),
    read(".node_repl_history", Sensitive::History),
    read(".psql_history", Sensitive::History),
    read(".mysql_history", Sensitive::History),
    read(".lesshst", Sensitive::History),
    write(".bashrc", Sensitive::ShellStartup),
    write(".bash_profile", Sensitive::ShellStartup),
    write(".bash_login", Sensitive::ShellStartup),
    write(".bash_logout", Sensitive::ShellStartup),
    write(".profile", Sensitive::ShellStartup),
    write(".zshrc", Sensitive::ShellStartup),
    write(".zprofile", Sensitive::ShellStartup),
    write(".zshenv", Sensitive::ShellStartup),
    write(".zlogin", Sensitive::ShellStartup),
    write(".config/fish", Sensitive::ShellStartup),
    // Tokens that tools keep in plain files.
    read(".config/gh", Sensitive::ApiTokens),
    read(".config/hub", Sensitive::ApiTokens),
    read(".npmrc", Sensitive::ApiTokens),
    read(".pypirc", Sensitive::ApiTokens),
    read(".cargo/credentials", Sensitive::ApiTokens),
    read(".cargo/credentials.toml", Sensitive::ApiTokens),
    read(".gem/credentials", Sensitive::ApiTokens),
    read(".vault-token", Sensitive::ApiTokens),
    read(".terraform.d/credentials.tfrc.json", Sensitive::ApiTokens),
    read(".config/rclone", Sensitive::ApiTokens),
    // AI agents' logins and settings, which hold their API keys and tokens (the
    // session-24 red team had learning grant `~/.codex`). `agent start` mounts an
    // agent's own folders (`agents.rs`); learning never grants any.
    read(".claude", Sensitive::AgentCredentials),
    read(".claude.json", Sensitive::AgentCredentials),
    read(".claude.json.backup", Sensitive::AgentCredentials),
    read(".codex", Sensitive::AgentCredentials),
    read(".gemini", Sensitive::AgentCredentials),
    read(".qwen", Sensitive::AgentCredentials),
    read(".aider", Sensitive::AgentCredentials),
    read(".aider.conf.yml", Sensitive::AgentCredentials),
    read(".copilot", Sensitive::AgentCredentials),
    read(".config/github-copilot", Sensitive::AgentCredentials),
    read(".local/share/opencode", Sensitive::AgentCredentials),
    // Vectra Guard's own folders at their default places (a sandbox that could write
    // its configuration or learned profiles would choose its next sandbox; the records
    // hold other sessions' output). Elsewhere (`XDG_CONFIG_HOME`, `VECTRAGUARD_HOME`),
    // the caller adds them.
    read(".config/vectraguard", Sensitive::VectraGuard),
    read(".vectraguard", Sensitive::VectraGuard),
    // What the host runs outside the sandbox: written there, a change would run
    // unsandboxed (a user service, an autostart entry, a program first on PATH, a git
    // alias, hook path or pager).
    write(".config/systemd", Sensitive::RunsOnHost),
    write(".config/autostart", Sensitive::RunsOnHost),
    write(".config/environment.d", Sensitive::RunsOnHost),
    write(".local/bin", Sensitive::RunsOnHost),
    write("bin", Sensitive::RunsOnHost),
    write(".pam_environment", Sensitive::RunsOnHost),
    write(".xprofile", Sensitive::RunsOnHost),
    write(".xsession", Sensitive::RunsOnHost),
    write(".xsessionrc", Sensitive::RunsOnHost),
    write(".xinitrc", Sensitive::RunsOnHost),
    write(".gitconfig", Sensitive::RunsOnHost),
    write(".config/git", Sensitive::RunsOnHost),
];

/// Absolute locations outside the home: sockets whose holder controls the host
/// (the container engines run as root) or the user's desktop session (`/run/user/UID`
/// holds the session bus, the SSH and GnuPG agents' sockets and the keyring's).
pub const HOST_LOCATIONS: &[Location] = &[
    read("/run/user", Sensitive::HostSocket),
    read("/run/docker.sock", Sensitive::HostSocket),
    read("/var/run/docker.sock", Sensitive::HostSocket),
    read("/run/containerd", Sensitive::HostSocket),
    read("/run/podman", Sensitive::HostSocket),
    read("/run/dbus", Sensitive::HostSocket),
];

/// File names starting with this are secrets anywhere (`.env`, `.env.local`, `.envrc`).
pub const ENV_FILE_PREFIX: &str = ".env";

/// Whether `path` (absolute) is sensitive for reading, or for writing when `write`: the
/// category, or `None` when learning may grant it.
pub fn sensitive(home: &Path, path: &Path, write: bool) -> Option<Sensitive> {
    let applies = |l: &&Location| write || !l.write_only;
    let home_relative = path
        .strip_prefix(home)
        .ok()
        .filter(|_| home != Path::new("/"));
    if let Some(rel) = home_relative
        && let Some(l) = HOME_LOCATIONS
            .iter()
            .filter(applies)
            .find(|l| is_within(rel, Path::new(l.path)))
    {
        return Some(l.category);
    }
    if let Some(l) = HOST_LOCATIONS
        .iter()
        .filter(applies)
        .find(|l| is_within(path, Path::new(l.path)))
    {
        return Some(l.category);
    }
    path.components()
        .any(|c| matches!(c, Component::Normal(name) if name.as_encoded_bytes().starts_with(ENV_FILE_PREFIX.as_bytes())))
        .then_some(Sensitive::EnvFile)
}

/// The first sensitive location strictly inside `dir` (for reading, or for writing
/// when `write`), with its category: granting `dir` would grant it too. `.env*` files
/// are not looked for (they can be anywhere; see [`sensitive`] for a path itself).
pub fn sensitive_inside(home: &Path, dir: &Path, write: bool) -> Option<(PathBuf, Sensitive)> {
    let home_locations = HOME_LOCATIONS.iter().map(|l| (home.join(l.path), l));
    let host_locations = HOST_LOCATIONS.iter().map(|l| (PathBuf::from(l.path), l));
    home_locations
        .chain(host_locations)
        .filter(|(_, l)| write || !l.write_only)
        .find(|(path, _)| path != dir && is_within(path, dir))
        .map(|(path, l)| (path, l.category))
}

/// The read-sensitive locations in `home`, as absolute paths: what a view that shows
/// the home (learning's relaxed view) must hide.
pub fn home_masks(home: &Path) -> Vec<PathBuf> {
    HOME_LOCATIONS
        .iter()
        .filter(|l| !l.write_only)
        .map(|l| home.join(l.path))
        .collect()
}

/// The read-sensitive locations outside any home (host sockets), likewise.
pub fn host_masks() -> Vec<PathBuf> {
    HOST_LOCATIONS
        .iter()
        .filter(|l| !l.write_only)
        .map(|l| PathBuf::from(l.path))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const HOME: &str = "/home/u";

    fn check(path: &str, write: bool) -> Option<Sensitive> {
        sensitive(Path::new(HOME), Path::new(path), write)
    }

    #[test]
    fn credentials_and_keys_are_sensitive_for_reading_and_writing() {
        for (path, category) in [
            ("/home/u/.ssh", Sensitive::SshKeys),
            ("/home/u/.ssh/id_ed25519", Sensitive::SshKeys),
            ("/home/u/.gnupg/private-keys-v1.d/x.key", Sensitive::GpgKeys),
            ("/home/u/.aws/credentials", Sensitive::CloudCredentials),
            (
                "/home/u/.config/gcloud/adc.json",
                Sensitive::CloudCredentials,
            ),
            (
                "/home/u/.azure/msal_token_cache.json",
                Sensitive::CloudCredentials,
            ),
            ("/home/u/.kube/config", Sensitive::ClusterCredentials),
            (
                "/home/u/.docker/config.json",
                Sensitive::RegistryCredentials,
            ),
            ("/home/u/.netrc", Sensitive::Passwords),
            ("/home/u/.git-credentials", Sensitive::Passwords),
            ("/home/u/.password-store/mail.gpg", Sensitive::Passwords),
            (
                "/home/u/.local/share/keyrings/login.keyring",
                Sensitive::Keyring,
            ),
            ("/home/u/.pki/nssdb/cert9.db", Sensitive::Certificates),
            (
                "/home/u/.mozilla/firefox/x.default/cookies.sqlite",
                Sensitive::BrowserProfile,
            ),
            (
                "/home/u/.config/google-chrome/Default/Cookies",
                Sensitive::BrowserProfile,
            ),
            (
                "/home/u/.config/chromium/Default",
                Sensitive::BrowserProfile,
            ),
            (
                "/home/u/.config/BraveSoftware/Brave-Browser",
                Sensitive::BrowserProfile,
            ),
            (
                "/home/u/.config/microsoft-edge/Default",
                Sensitive::BrowserProfile,
            ),
            ("/home/u/.bash_history", Sensitive::History),
            ("/home/u/.zsh_history", Sensitive::History),
            ("/home/u/.local/share/fish/fish_history", Sensitive::History),
            ("/home/u/.python_history", Sensitive::History),
            ("/home/u/.node_repl_history", Sensitive::History),
            ("/home/u/.psql_history", Sensitive::History),
            ("/home/u/.mysql_history", Sensitive::History),
            ("/home/u/.lesshst", Sensitive::History),
            ("/run/user/1000/bus", Sensitive::HostSocket),
            ("/var/run/docker.sock", Sensitive::HostSocket),
            ("/run/docker.sock", Sensitive::HostSocket),
            ("/home/u/.config/gh/hosts.yml", Sensitive::ApiTokens),
            ("/home/u/.codex", Sensitive::AgentCredentials),
            ("/home/u/.codex/auth.json", Sensitive::AgentCredentials),
            (
                "/home/u/.claude/.credentials.json",
                Sensitive::AgentCredentials,
            ),
            ("/home/u/.claude.json", Sensitive::AgentCredentials),
            ("/home/u/.claude.json.backup", Sensitive::AgentCredentials),
            ("/home/u/.aider/oauth-keys.env", Sensitive::AgentCredentials),
            (
                "/home/u/.local/share/opencode/auth.json",
                Sensitive::AgentCredentials,
            ),
            ("/home/u/.copilot/config.json", Sensitive::AgentCredentials),
            (
                "/home/u/.qwen/oauth_creds.json",
                Sensitive::AgentCredentials,
            ),
            (
                "/home/u/.gemini/oauth_creds.json",
                Sensitive::AgentCredentials,
            ),
            (
                "/home/u/.config/github-copilot/apps.json",
                Sensitive::AgentCredentials,
            ),
            ("/home/u/.npmrc", Sensitive::ApiTokens),
            ("/home/u/.cargo/credentials.toml", Sensitive::ApiTokens),
            (
                "/home/u/.config/vectraguard/profiles/x.toml",
                Sensitive::VectraGuard,
            ),
            ("/home/u/.vectraguard/logs", Sensitive::VectraGuard),
        ] {
            assert_eq!(check(path, false), Some(category), "{path} read");
            assert_eq!(check(path, true), Some(category), "{path} write");
        }
    }

    #[test]
    fn env_files_are_sensitive_anywhere() {
        for path in [
            "/home/u/.env",
            "/home/u/proj/.env.local",
            "/srv/app/.envrc",
            "/work/.env/secret",
        ] {
            assert_eq!(check(path, false), Some(Sensitive::EnvFile), "{path}");
        }
        // A name merely containing "env" is not.
        assert_eq!(check("/home/u/proj/environment.txt", false), None);
        assert_eq!(check("/home/u/proj/x.env", false), None);
    }

    #[test]
    fn startup_files_are_sensitive_for_writing_only() {
        for path in [
            "/home/u/.bashrc",
            "/home/u/.bash_profile",
            "/home/u/.bash_login",
            "/home/u/.profile",
            "/home/u/.zshrc",
            "/home/u/.zprofile",
            "/home/u/.zshenv",
            "/home/u/.config/fish/config.fish",
        ] {
            assert_eq!(check(path, false), None, "{path} read");
            assert_eq!(check(path, true), Some(Sensitive::ShellStartup), "{path}");
        }
    }

    /// Written, each of these runs something outside the sandbox later: a learned
    /// profile must never grant them for writing (red team: a command learned once
    /// could otherwise plant a user service or a program first on PATH).
    #[test]
    fn places_the_host_runs_programs_from_are_sensitive_for_writing() {
        for path in [
            "/home/u/.config/systemd/user/x.service",
            "/home/u/.config/autostart/x.desktop",
            "/home/u/.config/environment.d/x.conf",
            "/home/u/.local/bin/ls",
            "/home/u/bin/git",
            "/home/u/.pam_environment",
            "/home/u/.xprofile",
            "/home/u/.xsessionrc",
            "/home/u/.gitconfig",
            "/home/u/.config/git/config",
        ] {
            assert_eq!(check(path, false), None, "{path} read");
            assert_eq!(check(path, true), Some(Sensitive::RunsOnHost), "{path}");
        }
    }

    #[test]
    fn matching_is_component_wise_and_relative_to_this_home() {
        for path in [
            "/home/u/.sshfoo",
            "/home/u/.docker/buildx/current",
            "/home/u/.config/gcloudish",
            "/home/u/.cache/opencode/version",
            "/home/u/.local/share/fish/other",
            "/home/other/.config/tool",
            "/home/u",
            "/",
        ] {
            assert_eq!(check(path, true), None, "{path}");
        }
        // Another user's home: its locations are not this home's (reading them is
        // still refused by file permissions, not by this list).
        assert_eq!(check("/home/other/.ssh/id_rsa", false), None);
        // A home of "/" does not make every path home-relative.
        assert_eq!(sensitive(Path::new("/"), Path::new("/.ssh/x"), false), None);
    }

    #[test]
    fn sensitive_inside_finds_what_a_folder_would_expose() {
        let home = Path::new(HOME);
        assert_eq!(
            sensitive_inside(home, Path::new("/home/u/.docker"), false),
            Some((
                PathBuf::from("/home/u/.docker/config.json"),
                Sensitive::RegistryCredentials
            ))
        );
        assert_eq!(
            sensitive_inside(home, Path::new("/home/u/.local/share/fish"), false).map(|(_, c)| c),
            Some(Sensitive::History)
        );
        // Write-only locations matter for writing only.
        assert_eq!(
            sensitive_inside(home, Path::new("/home/u/.config"), false).map(|(p, _)| p),
            Some(PathBuf::from("/home/u/.config/gcloud"))
        );
        assert!(sensitive_inside(home, Path::new("/run"), false).is_some());
        assert_eq!(
            sensitive_inside(home, Path::new("/home/u/.cache/tool"), true),
            None
        );
        // The location itself is not "inside".
        assert_eq!(
            sensitive_inside(home, Path::new("/home/u/.ssh"), false),
            None
        );
        assert_eq!(
            sensitive_inside(home, Path::new("/var/lib/tool"), true),
            None
        );
    }

    #[test]
    fn masks_are_the_read_sensitive_locations() {
        let masks = home_masks(Path::new(HOME));
        assert!(masks.contains(&PathBuf::from("/home/u/.ssh")));
        assert!(masks.contains(&PathBuf::from("/home/u/.docker/config.json")));
        assert!(masks.contains(&PathBuf::from("/home/u/.bash_history")));
        assert!(!masks.iter().any(|m| m.ends_with(".bashrc")));
        assert!(masks.iter().all(|m| m.starts_with(HOME)));
        assert_eq!(
            masks.len(),
            HOME_LOCATIONS.iter().filter(|l| !l.write_only).count()
        );
        assert!(host_masks().contains(&PathBuf::from("/run/user")));
    }
}
