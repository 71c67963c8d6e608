//! A [`Learned`] as a configuration file that `--profile NAME` loads (see
//! `vg_policy::config::parse_learned`): `read_only` and `read_write` paths mounted at the
//! same place beside the workspace, `network = "allow"` with `network_rules` and
//! `add_hosts` when the command reached the network, and comments saying what each
//! entry was learned from and what was left out.
//!
//! Everything in it that the command chose (paths, names, its argv) is untrusted text:
//! values are TOML strings with every special character escaped, and comments are
//! escaped for terminals (no line breaks), so nothing can end a comment early and add
//! a key.

use std::fmt::Write as _;
use std::path::Path;
use std::time::SystemTime;

use vg_records::quote::{escape_hidden, quote_argv};
use vg_records::time::format_rfc3339;

use crate::context::HostKind;
use crate::learn::{Grant, Learned};

/// Where the profile came from, for its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The profile's name (`--learn NAME`).
    pub name: String,
    /// The command that was learned, as run.
    pub command: Vec<String>,
    pub learned_at: SystemTime,
    /// The learning run's session.
    pub session_id: String,
}

/// How the first line of a learned profile starts; `profile ls` shows the rest.
pub const LEARNED_FROM: &str = "Learned from: ";

/// At most this many entries of each list that is only a comment.
const LISTED: usize = 50;
/// The command line in the header is cut at this many characters.
const COMMAND_SHOWN: usize = 300;

impl Learned {
    /// The profile file for `header`.
    pub fn to_toml(&self, header: &Header) -> String {
        let mut out = String::new();
        self.header(&mut out, header);
        self.files(&mut out);
        self.network(&mut out);
        self.left_out(&mut out);
        out
    }

    fn header(&self, out: &mut String, header: &Header) {
        let mut command = quote_argv(header.command.iter().map(String::as_bytes));
        if command.chars().count() > COMMAND_SHOWN {
            command = command.chars().take(COMMAND_SHOWN).collect::<String>() + " …";
        }
        let name = &header.name;
        comment(out, &format!("{LEARNED_FROM}{command}"));
        comment(
            out,
            &format!(
                "Learned profile '{name}', written by `vectraguard sandbox run --learn {name}` at {} (session {}).",
                format_rfc3339(header.learned_at),
                header.session_id
            ),
        );
        comment(
            out,
            &format!("Use it with: vectraguard sandbox run --profile {name} -- COMMAND"),
        );
        comment(
            out,
            "Learning trusted this command: each entry below is something it did, not a judgement",
        );
        comment(
            out,
            "that it should. Review them before relying on this profile.",
        );
        comment(
            out,
            "Sensitive locations are never granted; those it used are listed at the end.",
        );
    }

    fn files(&self, out: &mut String) {
        let read_only: Vec<&Grant> = self.read_only().collect();
        if !read_only.is_empty() {
            out.push('\n');
            comment(out, "Read-only, at the same path.");
            out.push_str("read_only = [\n");
            for grant in read_only {
                self.grant(out, grant);
            }
            out.push_str("]\n");
        }
        let read_write: Vec<&Grant> = self.read_write().collect();
        if !read_write.is_empty() {
            out.push('\n');
            comment(
                out,
                "Writable, at the same path, beside the workspace (changes stay on the host).",
            );
            out.push_str("read_write = [\n");
            for grant in read_write {
                self.grant(out, grant);
            }
            out.push_str("]\n");
        }
    }

    fn grant(&self, out: &mut String, grant: &Grant) {
        let e = &grant.evidence;
        let itself = grant.kind == HostKind::File
            || e.example.as_deref() == Some(grant.path.as_path()) && e.read + e.written == 1;
        let what = if itself {
            let what = if grant.kind == HostKind::File {
                "file"
            } else {
                "folder"
            };
            if e.written > 0 {
                format!("changed this {what}")
            } else {
                format!("read this {what}")
            }
        } else {
            let mut parts = Vec::new();
            if e.read > 0 {
                parts.push(format!("read {}", paths(e.read)));
            }
            if e.written > 0 {
                parts.push(format!("wrote {}", paths(e.written)));
            }
            let mut what = parts.join(" and ");
            if let Some(example) = &e.example {
                let _ = write!(what, ", e.g. {}", self.shown(example));
            }
            what
        };
        indented_comment(out, &what);
        if grant.missing {
            indented_comment(
                out,
                "not on the host before learning: created empty (mode 0700) when this profile was saved",
            );
        }
        let _ = writeln!(out, "    {},", toml_string(&grant.path.to_string_lossy()));
    }

    fn network(&self, out: &mut String) {
        if self.rules.is_empty() && self.add_hosts.is_empty() {
            return;
        }
        out.push('\n');
        comment(
            out,
            "The network: each destination it reached, allowed by name (or address) and port.",
        );
        out.push_str("network = \"allow\"\n");
        if !self.rules.is_empty() {
            out.push_str("network_rules = [\n");
            for grant in &self.rules {
                let mut addresses: Vec<String> = grant
                    .addresses
                    .iter()
                    .take(4)
                    .map(ToString::to_string)
                    .collect();
                if grant.addresses.len() > 4 {
                    addresses.push(format!("and {} more", grant.addresses.len() - 4));
                }
                indented_comment(
                    out,
                    &format!(
                        "{}, to {}",
                        plural(grant.connections, "connection", "connections"),
                        addresses.join(", ")
                    ),
                );
                let _ = writeln!(out, "    {},", toml_string(&grant.rule.text));
            }
            out.push_str("]\n");
        }
        if !self.add_hosts.is_empty() {
            comment(out, "Names pinned with --add-host while learning.");
            out.push_str("add_hosts = [\n");
            for pin in &self.add_hosts {
                let _ = writeln!(out, "    {},", toml_string(&pin.to_string()));
            }
            out.push_str("]\n");
        }
    }

    /// The comment-only lists: what was used and is not granted, and the programs.
    fn left_out(&self, out: &mut String) {
        let sensitive = self.sensitive.iter().map(|s| {
            let how = match (s.read, s.write) {
                (true, true) => "read and written",
                (false, true) => "written",
                _ => "read",
            };
            format!("{}: {how} ({})", self.shown(&s.path), s.category)
        });
        section(
            out,
            "Sensitive, not granted (learning never grants these):",
            sensitive,
            self.sensitive.len(),
        );
        let refused = self.refused.iter().map(|r| {
            let how = if r.write { "written" } else { "read" };
            let example = if r.paths > 1 || r.example != r.path {
                format!(", {}, e.g. {}", paths(r.paths), self.shown(&r.example))
            } else {
                String::new()
            };
            format!(
                "{}: {how}{example} ({})",
                self.shown(&r.path),
                r.reason.describe()
            )
        });
        section(out, "Not granted:", refused, self.refused.len());
        let not_found = self.not_found.iter().map(|p| self.shown(p));
        section(
            out,
            "Not found on the host (only read, so not granted):",
            not_found,
            self.not_found.len(),
        );
        let destinations = self.refused_destinations.iter().map(|r| {
            let d = &r.destination;
            let whom = match &d.name {
                Some(name) => format!("{name} ({})", d.ip),
                None => d.ip.to_string(),
            };
            format!(
                "{whom} port {}, {}: {}",
                d.port,
                plural(r.connections, "connection", "connections"),
                r.why
            )
        });
        section(
            out,
            "Destinations not allowed:",
            destinations,
            self.refused_destinations.len(),
        );
        let programs = self
            .programs
            .iter()
            .map(|(path, runs)| format!("{} ({})", self.shown(path), plural(*runs, "run", "runs")));
        section(out, "Programs it ran:", programs, self.programs.len());
        let mut unseen = Vec::new();
        if self.overflow > 0 {
            unseen.push(format!(
                "{} not kept (learning keeps at most {} distinct paths, and 32 MiB of their names)",
                plural(self.overflow, "file access", "file accesses"),
                self.max_paths
            ));
        }
        if self.unplaced > 0 {
            unseen.push(format!(
                "{} whose path could not be placed",
                plural(self.unplaced, "file access", "file accesses")
            ));
        }
        if self.overflow_other > 0 {
            unseen.push(format!(
                "{} and program runs beyond the lists' caps",
                plural(self.overflow_other, "destination", "destinations")
            ));
        }
        let count = unseen.len();
        section(out, "Not looked at:", unseen.into_iter(), count);
    }

    /// `path` for a comment: `~/…` in the home.
    fn shown(&self, path: &Path) -> String {
        match path.strip_prefix(&self.home) {
            Ok(rest) if self.home != Path::new("/") => {
                if rest.as_os_str().is_empty() {
                    "~".to_owned()
                } else {
                    format!("~/{}", rest.display())
                }
            }
            _ => path.display().to_string(),
        }
    }
}

/// A comment-only list: a title, up to [`LISTED`] lines, a count of the rest.
fn section(out: &mut String, title: &str, lines: impl Iterator<Item = String>, len: usize) {
    if len == 0 {
        return;
    }
    out.push('\n');
    comment(out, title);
    for line in lines.take(LISTED) {
        comment(out, &format!("  {line}"));
    }
    if len > LISTED {
        comment(out, &format!("  … and {} more", len - LISTED));
    }
}

fn comment(out: &mut String, text: &str) {
    let _ = writeln!(out, "# {}", escape_hidden(text));
}

fn indented_comment(out: &mut String, text: &str) {
    let _ = writeln!(out, "    # {}", escape_hidden(text));
}

fn paths(n: u64) -> String {
    plural(n, "path", "paths")
}

fn plural(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// A TOML basic string: quotes, backslashes, control and invisible characters escaped.
pub(crate) fn toml_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            // Invisible characters too (bidi overrides, zero widths), so that the
            // file shows what it holds; TOML reads them back.
            c if c.is_control() || vg_records::invisible::is_invisible(c) => {
                if u32::from(c) > 0xFFFF {
                    let _ = write!(out, "\\U{:08X}", u32::from(c));
                } else {
                    let _ = write!(out, "\\u{:04X}", u32::from(c));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::path::PathBuf;
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::context::LearnContext;
    use crate::learn::learn;
    use crate::learn::tests::{FakeHost, observe};
    use crate::observe::{Access, Destination, Observations};
    use vg_policy::NetworkMode;
    use vg_policy::config::{parse_learned, resolve_profile};

    fn header() -> Header {
        Header {
            name: "tool".into(),
            command: vec!["tool".into(), "run".into(), "it's".into()],
            learned_at: UNIX_EPOCH + Duration::from_secs(1_766_000_000),
            session_id: "20251217T193320Z-abcd".into(),
        }
    }

    fn example() -> Learned {
        let host = FakeHost::new(&[
            "/home/u/.config/tool/config.toml",
            "/home/u/.cache/tool/a",
            "/home/u/.cache/tool/b",
            "/home/u/.gitconfig",
            "/home/u/.ssh/id_ed25519",
        ]);
        let mut o = observe(&[
            ("/home/u/.config/tool/config.toml", Access::Read),
            ("/home/u/.cache/tool/a", Access::Read),
            ("/home/u/.cache/tool/b", Access::Write),
            ("/home/u/.gitconfig", Access::Read),
            ("/home/u/.local/state/tool/log", Access::Create),
            ("/home/u/.ssh/id_ed25519", Access::Read),
            ("/home/u/.config/other/missing", Access::Read),
            ("/usr/bin/tool-helper", Access::Read),
        ]);
        o.program(Path::new("/usr/bin/tool-helper"));
        o.destination(Destination {
            name: Some("api.test".into()),
            ip: "127.0.0.1".parse().unwrap(),
            port: 8080,
            allowed: true,
        });
        o.destination(Destination {
            name: None,
            ip: "10.9.9.9".parse().unwrap(),
            port: 22,
            allowed: false,
        });
        o.add_host(vg_policy::AddHost::parse("api.test:127.0.0.1").unwrap());
        let cx = LearnContext::new("/home/u".into(), vec!["/home/u/proj".into()], &host);
        learn(&o, &cx)
    }

    #[test]
    fn the_rendering_loads_as_the_profile_it_describes() {
        let learned = example();
        let text = learned.to_toml(&header());
        let file = parse_learned(&text, Path::new("/c/profiles/tool.toml"), "tool")
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        let s = resolve_profile(&[&file], Some("tool")).unwrap();
        assert_eq!(
            s.read_only,
            [
                PathBuf::from("/home/u/.config/tool"),
                PathBuf::from("/home/u/.gitconfig")
            ]
        );
        assert_eq!(
            s.read_write,
            [
                PathBuf::from("/home/u/.cache/tool"),
                PathBuf::from("/home/u/.local/state/tool")
            ]
        );
        assert!(s.mounts.is_empty(), "the workspace must stay");
        assert_eq!(s.network, Some(NetworkMode::Allow));
        let rules: Vec<&str> = s.network_rules.iter().map(|r| r.text.as_str()).collect();
        assert_eq!(rules, ["allow api.test:8080"]);
        let pins: Vec<String> = s.add_hosts.iter().map(ToString::to_string).collect();
        assert_eq!(pins, ["api.test:127.0.0.1"]);
        // Nothing else is set.
        let bare = vg_policy::config::Settings {
            read_only: s.read_only.clone(),
            read_write: s.read_write.clone(),
            network: s.network,
            network_rules: s.network_rules.clone(),
            add_hosts: s.add_hosts.clone(),
            ..Default::default()
        };
        assert_eq!(s, bare);
    }

    #[test]
    fn comments_say_where_each_entry_came_from_and_what_was_left_out() {
        let text = example().to_toml(&header());
        let first = text.lines().next().unwrap();
        assert_eq!(first, "# Learned from: tool run 'it'\\''s'");
        for needle in [
            "2025-12-17T19:33:20.000Z (session 20251217T193320Z-abcd)",
            "Learning trusted this command",
            "--profile tool",
            "    # read 1 path and wrote 1 path, e.g. ~/.cache/tool/b\n    \"/home/u/.cache/tool\",",
            "    # read this file\n    \"/home/u/.gitconfig\",",
            "created empty (mode 0700)",
            "# 1 connection, to 127.0.0.1\n",
            "#   ~/.ssh/id_ed25519: read (SSH keys)",
            "#   ~/.config/other/missing",
            "#   10.9.9.9 port 22, 1 connection: refused while learning",
            "#   /usr/bin/tool-helper (1 run)",
        ] {
            assert!(text.contains(needle), "{needle:?} not in\n{text}");
        }
        assert!(!text.contains("\"/home/u/.ssh"), "{text}");
    }

    #[test]
    fn an_empty_run_renders_a_loadable_empty_profile() {
        let host = FakeHost::new(&[]);
        let cx = LearnContext::new("/home/u".into(), Vec::new(), &host);
        let text = learn(&Observations::new(), &cx).to_toml(&header());
        let file = parse_learned(&text, Path::new("/c/tool.toml"), "tool").unwrap();
        assert_eq!(
            file.profiles["tool"],
            vg_policy::config::Settings::default()
        );
    }

    #[test]
    fn hostile_names_stay_values_and_comments() {
        // A folder name with a line break, quotes and a backslash: it could end a
        // comment or a string early and add a key, were it not escaped.
        let weird = "/home/u/.config/x\"\\\nnetwork = \"host\"\n#\u{202e}";
        let host = FakeHost::new(&[&format!("{weird}/f")]);
        let mut o = observe(&[(&format!("{weird}/f"), Access::Read)]);
        o.program(Path::new("/usr/bin/\nnetwork = \"host\""));
        let cx = LearnContext::new("/home/u".into(), Vec::new(), &host);
        let learned = learn(&o, &cx);
        assert_eq!(learned.grants.len(), 1, "{learned:?}");
        let mut h = header();
        h.command = vec!["x\nnetwork = \"host\"".into()];
        let text = learned.to_toml(&h);
        let file = parse_learned(&text, Path::new("/c/tool.toml"), "tool")
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        let s = &file.profiles["tool"];
        assert_eq!(s.network, None, "{text}");
        assert_eq!(s.read_only, [PathBuf::from(weird)]);
        assert!(text.lines().all(|l| l.is_empty()
            || l.starts_with('#')
            || l.starts_with("    ")
            || l.starts_with(']')
            || l.starts_with("read_only = [")));
        assert!(!text.contains('\u{202e}'));
    }

    #[test]
    fn long_lists_are_cut_and_counted() {
        let host = FakeHost::new(&[]);
        let mut o = Observations::new();
        for i in 0..60 {
            o.file(Path::new(&format!("/home/u/.config/t{i}/x")), Access::Read);
        }
        let cx = LearnContext::new("/home/u".into(), Vec::new(), &host);
        let text = learn(&o, &cx).to_toml(&header());
        assert!(text.contains("#   … and 10 more"), "{text}");
    }

    #[test]
    fn toml_strings_escape_what_they_must() {
        assert_eq!(
            toml_string("a\"b\\c\nd\u{1}\u{202e}\u{E0001}"),
            "\"a\\\"b\\\\c\\nd\\u0001\\u202E\\U000E0001\""
        );
    }
}
