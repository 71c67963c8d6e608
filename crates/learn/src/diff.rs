//! What changed between two profiles, in what they grant: the paths and their access,
//! the network mode, rules and pins (and, for a file edited by hand, which other
//! settings differ). Comments and the order of entries do not count.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use vg_policy::config::{ConfigError, Settings, parse_learned};
use vg_records::quote::escape_hidden;

/// Lines added, removed and changed (old, new), each as `profile show` would word it:
/// `writable /home/u/.cache/tool`, `allow api.test:443`, `add-host db:10.0.0.5`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProfileDiff {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<(String, String)>,
}

impl ProfileDiff {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// One line per change, `+`, `-` or `~` first; text escaped for a terminal.
impl fmt::Display for ProfileDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return writeln!(f, "  no change in what the profile grants");
        }
        for line in &self.removed {
            writeln!(f, "- {}", escape_hidden(line))?;
        }
        for (old, new) in &self.changed {
            writeln!(f, "~ {} → {}", escape_hidden(old), escape_hidden(new))?;
        }
        for line in &self.added {
            writeln!(f, "+ {}", escape_hidden(line))?;
        }
        Ok(())
    }
}

/// Compares two learned-profile files (each parsed as `--profile` would load it, so an
/// error names the file and line).
pub fn diff(
    old_path: &Path,
    old_text: &str,
    new_path: &Path,
    new_text: &str,
) -> Result<ProfileDiff, ConfigError> {
    let old = effective(old_path, old_text)?;
    let new = effective(new_path, new_text)?;
    Ok(diff_settings(&old, &new))
}

/// The settings a learned-profile file applies.
fn effective(path: &Path, text: &str) -> Result<Settings, ConfigError> {
    let mut file = parse_learned(text, path, "profile")?;
    Ok(file.profiles.remove("profile").unwrap_or_default())
}

/// Compares two profiles' settings.
pub fn diff_settings(old: &Settings, new: &Settings) -> ProfileDiff {
    let (old, new) = (entries(old), entries(new));
    let mut out = ProfileDiff::default();
    for (key, (line, value)) in &old {
        match new.get(key) {
            None => out.removed.push(line.clone()),
            Some((new_line, new_value)) if new_value != value => {
                out.changed.push((line.clone(), new_line.clone()));
            }
            Some(_) => {}
        }
    }
    for (key, (line, _)) in &new {
        if !old.contains_key(key) {
            out.added.push(line.clone());
        }
    }
    out
}

/// Each thing a profile sets, by what it is about (a path, a rule, a pin's name, a
/// key): the line shown and the value compared.
fn entries(s: &Settings) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    let mut put = |key: String, line: String, value: String| {
        out.insert(key, (line, value));
    };
    for path in &s.read_only {
        let line = format!("read-only {}", path.display());
        put(format!("path {}", path.display()), line.clone(), line);
    }
    // After read_only: a path in both is writable.
    for path in &s.read_write {
        let line = format!("writable {}", path.display());
        put(format!("path {}", path.display()), line.clone(), line);
    }
    for m in &s.mounts {
        let line = format!(
            "mount {}:{}{}",
            m.host.display(),
            m.container.display(),
            if m.read_only { ":ro" } else { "" }
        );
        put(
            format!("mount {}", m.container.display()),
            line.clone(),
            line,
        );
    }
    if let Some(mode) = s.network {
        let line = format!("network {mode}");
        put("network".to_owned(), line.clone(), line);
    }
    for rule in &s.network_rules {
        put(
            format!("rule {}", rule.text),
            rule.text.clone(),
            rule.text.clone(),
        );
    }
    for pin in &s.add_hosts {
        let line = format!("add-host {pin}");
        put(format!("add-host {}", pin.name), line.clone(), line);
    }
    // Anything else (a file edited by hand): named, compared by value.
    let others: [(&str, String, bool); 12] = [
        ("name", format!("{:?}", s.name), s.name.is_some()),
        ("agent", format!("{:?}", s.agent), s.agent.is_some()),
        (
            "description",
            format!("{:?}", s.description),
            s.description.is_some(),
        ),
        ("workdir", format!("{:?}", s.workdir), s.workdir.is_some()),
        ("user", format!("{:?}", s.user), s.user.is_some()),
        (
            "tls_passthrough",
            format!("{:?}", s.tls_passthrough),
            !s.tls_passthrough.is_empty(),
        ),
        (
            "upstream_ca",
            format!("{:?}", s.upstream_ca),
            !s.upstream_ca.is_empty(),
        ),
        ("secrets", format!("{:?}", s.secrets), !s.secrets.is_empty()),
        ("env", format!("{:?}", s.env), !s.env.is_empty()),
        (
            "env_files",
            format!("{:?}", s.env_files),
            !s.env_files.is_empty(),
        ),
        (
            "limits",
            format!("{:?}", s.limits),
            s.limits != vg_policy::Limits::default(),
        ),
        (
            "ask, approval_timeout",
            format!("{:?}", s.approval),
            s.approval != vg_policy::risk::Approval::default(),
        ),
    ];
    for (key, value, set) in others {
        if set {
            put(format!("setting {key}"), format!("{key} (set)"), value);
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn d(old: &str, new: &str) -> ProfileDiff {
        diff(Path::new("/p/old.toml"), old, Path::new("/p/new.toml"), new).unwrap()
    }

    #[test]
    fn paths_rules_and_pins_added_removed_and_changed() {
        let old = "# old\nread_only = [\"/home/u/.config/t\", \"/home/u/.gitconfig\"]\nread_write = [\"/home/u/.cache/t\"]\nnetwork = \"allow\"\nnetwork_rules = [\"allow a.test:443\"]\nadd_hosts = [\"db:10.0.0.1\"]\n";
        let new = "# new, other comments\nread_write = [\"/home/u/.config/t\", \"/home/u/.cache/t\", \"/home/u/.local/state/t\"]\nnetwork = \"allow\"\nnetwork_rules = [\"allow b.test:443\"]\nadd_hosts = [\"db:10.0.0.2\"]\n";
        let diff = d(old, new);
        assert_eq!(
            diff.removed,
            ["read-only /home/u/.gitconfig", "allow a.test:443"]
        );
        assert_eq!(
            diff.changed,
            [
                (
                    "add-host db:10.0.0.1".to_owned(),
                    "add-host db:10.0.0.2".to_owned()
                ),
                (
                    "read-only /home/u/.config/t".to_owned(),
                    "writable /home/u/.config/t".to_owned()
                ),
            ]
        );
        assert_eq!(
            diff.added,
            ["writable /home/u/.local/state/t", "allow b.test:443"]
        );
        let shown = diff.to_string();
        assert!(
            shown.contains("- read-only /home/u/.gitconfig\n"),
            "{shown}"
        );
        assert!(
            shown.contains("~ read-only /home/u/.config/t → writable /home/u/.config/t\n"),
            "{shown}"
        );
        assert!(shown.contains("+ allow b.test:443\n"), "{shown}");
    }

    #[test]
    fn comments_and_order_do_not_count() {
        let a = "# a\nread_only = [\"/x/y/z\", \"/a/b/c\"]\n";
        let b = "# b, learned again\n\nread_only = [\n  # why\n  \"/a/b/c\",\n  \"/x/y/z\",\n]\n";
        let diff = d(a, b);
        assert!(diff.is_empty(), "{diff:?}");
        assert_eq!(diff.to_string(), "  no change in what the profile grants\n");
    }

    #[test]
    fn other_settings_are_named() {
        let diff = d("env = [\"A=1\"]\n", "env = [\"A=2\"]\nnetwork = \"none\"\n");
        assert_eq!(
            diff.changed,
            [("env (set)".to_owned(), "env (set)".to_owned())]
        );
        assert_eq!(diff.added, ["network none"]);
    }

    #[test]
    fn a_corrupt_side_is_an_error_with_its_file_and_line() {
        let err = diff(
            Path::new("/p/old.toml"),
            "",
            Path::new("/p/new.toml"),
            "\nread_only = [\"relative\"]\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("/p/new.toml:2:"), "{err}");
    }

    #[test]
    fn the_display_escapes_what_a_terminal_would_obey() {
        let diff = ProfileDiff {
            added: vec!["writable /x\u{1b}[2J".to_owned()],
            ..ProfileDiff::default()
        };
        assert_eq!(diff.to_string(), "+ writable /x\\u{1b}[2J\n");
    }
}
