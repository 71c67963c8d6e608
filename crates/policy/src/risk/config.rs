//! `[[risk.rules]]` in configuration files, and the classifier they make with the
//! built-in rules.
//!
//! The user's files (and `--config`) may add rules and replace a built-in one by giving
//! its id. A project's `vectraguard.toml` is written by whoever wrote the repository, and
//! sandboxed code can edit it, so it may only add rules that raise levels: no LOW rule,
//! no id already in use. As the highest level wins and project rules come last, a project
//! rule can never lower a rating or take over another rule's reason on a tie.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::classify::Classifier;
use super::defaults;
use super::level::Level;
use super::rule::{Rule, RuleSpec};
use crate::config::{ConfigError, ConfigFile, ConfigSource, line_of};

/// The `[risk]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [risk] table")]
pub(crate) struct RawRisk {
    #[serde(default)]
    rules: Vec<Spanned<RuleSpec>>,
}

/// A rule from a file, with the line of its table for later errors.
#[derive(Debug, Clone)]
pub struct ConfiguredRule {
    pub spec: RuleSpec,
    pub rule: Rule,
    pub line: usize,
}

impl PartialEq for ConfiguredRule {
    fn eq(&self, other: &Self) -> bool {
        self.spec == other.spec && self.line == other.line
    }
}

/// Checks and compiles a file's rules.
pub(crate) fn rules(
    raw: Option<RawRisk>,
    text: &str,
    path: &Path,
    source: ConfigSource,
) -> Result<Vec<ConfiguredRule>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(Vec::new());
    };
    let builtin: BTreeSet<String> = defaults::specs().into_iter().map(|s| s.id).collect();
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for spanned in raw.rules {
        let line = line_of(text, spanned.span().start);
        let spec = spanned.into_inner();
        let invalid = |message: String, hint: &str| ConfigError::Invalid {
            file: path.to_path_buf(),
            line,
            message,
            hint: hint.to_owned(),
        };
        let rule = spec
            .compile()
            .map_err(|e| invalid(format!("risk rule '{}': {}", e.rule, e.message), &e.hint))?;
        if !seen.insert(spec.id.clone()) {
            return Err(invalid(
                format!("risk rule '{}' is defined twice in this file", spec.id),
                "give each [[risk.rules]] table its own id",
            ));
        }
        if source == ConfigSource::Project {
            if rule.level == Level::Low {
                return Err(invalid(
                    format!(
                        "risk rule '{}': a project file may only add rules that raise the level, and LOW raises nothing",
                        spec.id
                    ),
                    "use medium, high or critical, or put rules that lower levels in ~/.config/vectraguard/config.toml",
                ));
            }
            if builtin.contains(&spec.id) {
                return Err(invalid(
                    format!(
                        "risk rule '{}': a project file cannot replace a built-in rule",
                        spec.id
                    ),
                    "give the rule a new id; to change a built-in rule, replace it in ~/.config/vectraguard/config.toml",
                ));
            }
        }
        out.push(ConfiguredRule { spec, rule, line });
    }
    Ok(out)
}

/// The built-in rules, then each trusted file's (replacing a rule of the same id in
/// place, else appended), then the project files' rules, which may not reuse an id.
pub fn classifier(files: &[&ConfigFile]) -> Result<Classifier, ConfigError> {
    let mut rules = defaults::rules().map_err(|e| ConfigError::Invalid {
        file: PathBuf::from("<built-in risk rules>"),
        line: 0,
        message: e.to_string(),
        hint: "this is a bug in Vectra Guard; please report it".to_owned(),
    })?;
    let (project, trusted): (Vec<&ConfigFile>, Vec<&ConfigFile>) = files
        .iter()
        .copied()
        .partition(|f| f.source == ConfigSource::Project);
    for file in trusted {
        for configured in &file.risk_rules {
            match rules.iter_mut().find(|r| r.id == configured.rule.id) {
                Some(existing) => *existing = configured.rule.clone(),
                None => rules.push(configured.rule.clone()),
            }
        }
    }
    for file in project {
        for configured in &file.risk_rules {
            if rules.iter().any(|r| r.id == configured.rule.id) {
                return Err(ConfigError::Invalid {
                    file: file.path.clone(),
                    line: configured.line,
                    message: format!(
                        "risk rule '{}': a project file cannot replace an existing rule (built-in or from the user's configuration)",
                        configured.rule.id
                    ),
                    hint: "give the rule a new id".to_owned(),
                });
            }
            rules.push(configured.rule.clone());
        }
    }
    Ok(Classifier::new(rules))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::config::parse;
    use crate::risk::ExecFacts;

    fn file(text: &str, source: ConfigSource) -> Result<ConfigFile, ConfigError> {
        let dir = std::env::temp_dir();
        parse(text, &dir.join("vectraguard.toml"), source)
    }

    fn message(result: Result<ConfigFile, ConfigError>) -> String {
        result.err().map(|e| e.to_string()).unwrap_or_default()
    }

    fn rate(classifier: &Classifier, argv: &[&str]) -> (Level, String) {
        let a = classifier.classify_exec(&ExecFacts {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            cwd: Some(PathBuf::from("/w")),
            ..ExecFacts::default()
        });
        (a.level, a.rule)
    }

    const CURL_PY: &str = r#"
name = "x"

[[risk.rules]]
id = "curl-to-jq"
level = "critical"
reason = "downloaded data piped into jq"
script = '\bcurl\b.*\|\s*jq'

[[risk.rules]]
id = "terraform"
level = "HIGH"
reason = "changes real infrastructure"
executable = "terraform"
argv = ['\s(apply|destroy)\b']
"#;

    #[test]
    fn rules_parse_and_add_to_the_defaults() {
        let user = file(CURL_PY, ConfigSource::User).unwrap();
        assert_eq!(user.risk_rules.len(), 2);
        assert_eq!(user.risk_rules[0].line, 4);
        assert_eq!(user.risk_rules[1].rule.level, Level::High);
        let c = classifier(&[&user]).unwrap();
        assert_eq!(
            rate(&c, &["sh", "-c", "curl x | jq ."]),
            (Level::Critical, "curl-to-jq".to_owned())
        );
        assert_eq!(
            rate(&c, &["terraform", "apply"]),
            (Level::High, "terraform".to_owned())
        );
        assert_eq!(rate(&c, &["terraform", "plan"]).0, Level::Low);
        // The defaults are still there.
        assert_eq!(rate(&c, &["rm", "-rf", "/"]).0, Level::Critical);
    }

    #[test]
    fn the_users_file_may_replace_a_default_by_id() {
        let user = file(
            "[[risk.rules]]\nid = \"package-install\"\nlevel = \"medium\"\nreason = \"ours\"\nexecutable = \"pip\"\nargv = 'install'\n",
            ConfigSource::User,
        )
        .unwrap();
        let c = classifier(&[&user]).unwrap();
        assert_eq!(
            rate(&c, &["pip", "install", "requests"]),
            (Level::Medium, "package-install".to_owned())
        );
    }

    #[test]
    fn a_project_file_may_only_add_rules_that_raise_levels() {
        let project = file(CURL_PY, ConfigSource::Project).unwrap();
        let c = classifier(&[&project]).unwrap();
        assert_eq!(rate(&c, &["terraform", "destroy"]).0, Level::High);

        let low = "[[risk.rules]]\nid = \"quiet\"\nlevel = \"low\"\nreason = \"fine\"\nexecutable = \"rm\"\n";
        let m = message(file(low, ConfigSource::Project));
        assert!(m.contains("vectraguard.toml:1: risk rule 'quiet': a project file may only add rules that raise the level"), "{m}");
        assert!(m.contains("~/.config/vectraguard/config.toml"), "{m}");
        // The same rule is fine in the user's file (it lowers nothing either way).
        assert!(file(low, ConfigSource::User).is_ok());

        let replace = "[[risk.rules]]\nid = \"rm-rf\"\nlevel = \"medium\"\nreason = \"fine\"\nexecutable = \"rm\"\n";
        let m = message(file(replace, ConfigSource::Project));
        assert!(
            m.contains("risk rule 'rm-rf': a project file cannot replace a built-in rule"),
            "{m}"
        );

        // Nor a rule of the user's file.
        let user = file(CURL_PY, ConfigSource::User).unwrap();
        let m = classifier(&[&project, &user])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            m.contains("risk rule 'curl-to-jq': a project file cannot replace an existing rule"),
            "{m}"
        );
    }

    #[test]
    fn malformed_rules_name_the_file_line_rule_and_fix() {
        let cases = [
            (
                "[[risk.rules]]\nid = \"x\"\nlevel = \"severe\"\nreason = \"r\"\nexecutable = \"a\"\n",
                "vectraguard.toml:1: risk rule 'x': unknown level 'severe' (hint: use one of low, medium, high, critical)",
            ),
            (
                "[[risk.rules]]\nid = \"x\"\nlevel = \"high\"\nreason = \"r\"\nargv = '(unclosed'\n",
                "vectraguard.toml:1: risk rule 'x': argv is not a valid regular expression",
            ),
            (
                "[[risk.rules]]\nid = \"x\"\nlevel = \"high\"\nreason = \"r\"\n",
                "risk rule 'x': it matches nothing",
            ),
            (
                "[[risk.rules]]\nid = \"x\"\nlevel = \"high\"\nreason = \"r\"\nexecutable = \"a\"\nraw_ip = true\n",
                "risk rule 'x': it mixes exec matchers",
            ),
            (
                "[[risk.rules]]\nid = \"x\"\nlevel = \"high\"\nreason = \"r\"\nexecutabel = \"a\"\n",
                "unknown key 'executabel'",
            ),
            (
                "[[risk.rules]]\nlevel = \"high\"\nreason = \"r\"\nexecutable = \"a\"\n",
                "missing field `id`",
            ),
            (
                "[[risk.rules]]\nid = \"x\"\nlevel = \"high\"\nreason = \"r\"\nexecutable = \"a\"\n[[risk.rules]]\nid = \"x\"\nlevel = \"high\"\nreason = \"r\"\nexecutable = \"b\"\n",
                "vectraguard.toml:6: risk rule 'x' is defined twice",
            ),
            ("[risk]\nrule = []\n", "unknown key 'rule'"),
        ];
        for (text, expected) in cases {
            let m = message(file(text, ConfigSource::User));
            assert!(m.contains(expected), "{text:?}: {m}");
            assert!(m.contains("hint:"), "{text:?}: {m}");
        }
    }
}
