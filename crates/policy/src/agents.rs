//! Presets for the common AI agent CLIs (`vectraguard agent start --preset P`), as
//! data: how each takes a prompt, which of its own folders it needs (mounted so that
//! it keeps its login and history), which API hosts it must reach, which variables
//! hold its API key, and how its own sandbox is turned off where it would nest inside
//! ours.

/// One agent CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preset {
    pub name: &'static str,
    /// What it is, for `--help` and errors.
    pub title: &'static str,
    /// The program, looked up on the sandbox's PATH.
    pub program: &'static str,
    /// Arguments that go before the prompt in a headless run; the prompt is the
    /// last argument.
    pub headless: &'static [&'static str],
    /// Arguments of an interactive run (a terminal).
    pub interactive: &'static [&'static str],
    /// Its folders and files under the home folder (`~/…`), mounted read-write.
    pub state: &'static [&'static str],
    /// Its settings files among them that make it run commands on the host (hooks,
    /// notify programs): mounted read-only when they exist, so that the agent in the
    /// sandbox cannot plant a command the next run outside it would execute.
    pub settings: &'static [&'static str],
    /// The API hosts it must reach (allowed on port 443).
    pub hosts: &'static [&'static str],
    /// Variables passed from the caller's environment when set (its API keys and
    /// endpoints).
    pub keys: &'static [&'static str],
    /// Those of `keys` that are credentials: given to the agent as secrets (a
    /// placeholder inside, the key swapped in by the mediator on requests to the
    /// credential's hosts), never as the key itself.
    pub credentials: &'static [Credential],
    /// Variables set for it (its own sandbox off: ours is around it).
    pub env: &'static [(&'static str, &'static str)],
}

/// An API key variable and where it may be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub var: &'static str,
    /// The hosts that take it (HTTPS on 443).
    pub hosts: &'static [&'static str],
    /// The variable that moves the agent's endpoint elsewhere (a proxy, a local
    /// model server): the key is bound to that URL's host too when it is set.
    pub base_url: Option<&'static str>,
}

const ANTHROPIC: Credential = Credential {
    var: "ANTHROPIC_API_KEY",
    hosts: &["api.anthropic.com"],
    base_url: Some("ANTHROPIC_BASE_URL"),
};
const OPENAI: Credential = Credential {
    var: "OPENAI_API_KEY",
    hosts: &["api.openai.com"],
    base_url: Some("OPENAI_BASE_URL"),
};

/// The presets, by name.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "claude",
        title: "Claude Code (npm @anthropic-ai/claude-code)",
        program: "claude",
        headless: &["-p"],
        interactive: &[],
        state: &["~/.claude", "~/.claude.json"],
        settings: &["~/.claude/settings.json", "~/.claude/settings.local.json"],
        hosts: &["api.anthropic.com"],
        keys: &["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"],
        credentials: &[ANTHROPIC],
        env: &[("DISABLE_AUTOUPDATER", "1")],
    },
    Preset {
        name: "codex",
        title: "Codex CLI (npm @openai/codex)",
        program: "codex",
        // Its Landlock/seccomp sandbox would nest inside ours: ours is the one.
        headless: &[
            "exec",
            "--skip-git-repo-check",
            "--sandbox",
            "danger-full-access",
        ],
        interactive: &["--sandbox", "danger-full-access"],
        state: &["~/.codex"],
        settings: &["~/.codex/config.toml"],
        hosts: &["api.openai.com", "chatgpt.com"],
        keys: &["OPENAI_API_KEY", "OPENAI_BASE_URL"],
        credentials: &[OPENAI],
        env: &[],
    },
    Preset {
        name: "gemini",
        title: "Gemini CLI (npm @google/gemini-cli)",
        program: "gemini",
        headless: &["-p"],
        interactive: &[],
        state: &["~/.gemini"],
        settings: &["~/.gemini/settings.json"],
        hosts: &["generativelanguage.googleapis.com", "oauth2.googleapis.com"],
        keys: &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        credentials: &[
            Credential {
                var: "GEMINI_API_KEY",
                hosts: &["generativelanguage.googleapis.com"],
                base_url: None,
            },
            Credential {
                var: "GOOGLE_API_KEY",
                hosts: &["generativelanguage.googleapis.com"],
                base_url: None,
            },
        ],
        // Its container sandbox would need a container engine inside ours.
        env: &[("GEMINI_SANDBOX", "false")],
    },
    Preset {
        name: "aider",
        title: "aider (PyPI aider-chat)",
        program: "aider",
        headless: &["--yes-always", "--no-check-update", "--message"],
        interactive: &["--no-check-update"],
        state: &["~/.aider", "~/.aider.conf.yml"],
        settings: &["~/.aider.conf.yml"],
        hosts: &["api.openai.com", "api.anthropic.com"],
        keys: &["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_BASE"],
        credentials: &[
            Credential {
                base_url: Some("OPENAI_API_BASE"),
                ..OPENAI
            },
            Credential {
                base_url: None,
                ..ANTHROPIC
            },
        ],
        env: &[],
    },
    Preset {
        name: "opencode",
        title: "opencode (npm opencode-ai)",
        program: "opencode",
        headless: &["run"],
        interactive: &[],
        state: &["~/.local/share/opencode", "~/.config/opencode"],
        settings: &["~/.config/opencode"],
        hosts: &["api.anthropic.com", "api.openai.com"],
        keys: &["ANTHROPIC_API_KEY", "OPENAI_API_KEY"],
        credentials: &[
            Credential {
                base_url: None,
                ..ANTHROPIC
            },
            Credential {
                base_url: None,
                ..OPENAI
            },
        ],
        env: &[],
    },
];

/// The preset `name`, or an error listing the known ones.
pub fn preset(name: &str) -> Result<&'static Preset, String> {
    PRESETS.iter().find(|p| p.name == name).ok_or_else(|| {
        format!(
            "no agent preset {name:?}: use {} (or `-- COMMAND` for another agent)",
            names()
        )
    })
}

/// The presets' names, for messages.
pub fn names() -> String {
    PRESETS
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Preset {
    /// The command that runs the agent: headless with `prompt`, else interactive.
    pub fn command(&self, prompt: Option<&str>) -> Vec<String> {
        let mut argv = vec![self.program.to_owned()];
        match prompt {
            Some(prompt) => {
                argv.extend(self.headless.iter().map(|a| (*a).to_owned()));
                argv.push(prompt.to_owned());
            }
            None => argv.extend(self.interactive.iter().map(|a| (*a).to_owned())),
        }
        argv
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_complete_and_named_once() {
        for p in PRESETS {
            assert!(
                !p.hosts.is_empty() && !p.state.is_empty() && !p.keys.is_empty(),
                "{p:?}"
            );
            assert!(p.state.iter().all(|s| s.starts_with("~/")), "{p:?}");
            // Every credential is one of its keys, sent only to hosts it reaches.
            for c in p.credentials {
                assert!(p.keys.contains(&c.var), "{p:?}");
                assert!(c.hosts.iter().all(|h| p.hosts.contains(h)), "{p:?}");
                assert!(c.base_url.is_none_or(|b| p.keys.contains(&b)), "{p:?}");
            }
            assert!(!p.credentials.is_empty(), "{p:?}");
            assert_eq!(PRESETS.iter().filter(|q| q.name == p.name).count(), 1);
        }
        for name in ["claude", "codex", "gemini", "aider", "opencode"] {
            assert!(preset(name).is_ok(), "{name}");
        }
        assert!(preset("copilot").unwrap_err().contains("claude, codex"));
    }

    #[test]
    fn the_prompt_is_the_last_argument_of_a_headless_run() {
        let codex = preset("codex").unwrap();
        assert_eq!(
            codex.command(Some("fix the tests")),
            [
                "codex",
                "exec",
                "--skip-git-repo-check",
                "--sandbox",
                "danger-full-access",
                "fix the tests"
            ]
        );
        assert_eq!(
            codex.command(None),
            ["codex", "--sandbox", "danger-full-access"]
        );
        assert_eq!(
            preset("claude").unwrap().command(Some("hi")),
            ["claude", "-p", "hi"]
        );
        assert_eq!(
            preset("aider")
                .unwrap()
                .command(Some("hi"))
                .last()
                .map(String::as_str),
            Some("hi")
        );
    }
}
