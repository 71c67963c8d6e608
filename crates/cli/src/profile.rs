//! `vectraguard profile`: list, show, compare and remove the learned profiles
//! (`sandbox run --learn NAME` writes them; `--profile NAME` loads them), on top of
//! `vg_learn::ProfileStore`.
//!
//! Exit statuses: 0 on success, 125 when the command fails, with an error that says
//! what to do.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use vg_learn::{ProfileStore, diff};
use vg_records::quote::escape_hidden;

use crate::EXIT_FAILURE;

#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// List the learned profiles: name, when it was written, what it was learned from
    #[command(visible_alias = "list")]
    Ls(LsArgs),
    /// Print a learned profile
    Show(ShowArgs),
    /// Show what changes from the learned profile NAME to OTHER (or to --file FILE):
    /// paths and their access, network rules, pins
    #[command(
        after_help = "Examples:\n  vectraguard profile diff opencode opencode-new\n  vectraguard profile diff opencode --file ./opencode.toml"
    )]
    Diff(DiffArgs),
    /// Remove learned profiles
    #[command(visible_alias = "remove")]
    Rm(RmArgs),
}

#[derive(Debug, Args)]
pub struct LsArgs {
    /// Print only the names
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The learned profile
    #[arg(value_name = "NAME")]
    pub name: String,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The learned profile compared from
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The learned profile compared to
    #[arg(value_name = "OTHER", required_unless_present = "file")]
    pub other: Option<String>,
    /// Compare to this file (a profile in the same format) instead
    #[arg(long, value_name = "FILE", conflicts_with = "other")]
    pub file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RmArgs {
    /// The learned profiles to remove
    #[arg(required = true, value_name = "NAME")]
    pub names: Vec<String>,
}

pub fn run(cmd: ProfileCommand) -> i32 {
    let result = (|| {
        let store = store()?;
        let stdout = io::stdout();
        let mut out = io::BufWriter::new(stdout.lock());
        match cmd {
            ProfileCommand::Ls(a) => list(&store, &a, &mut out),
            ProfileCommand::Show(a) => show(&store, &a, &mut out),
            ProfileCommand::Diff(a) => compare(&store, &a, &mut out),
            ProfileCommand::Rm(a) => remove(&store, &a, &mut out),
        }?;
        out.flush()?;
        Ok::<_, anyhow::Error>(())
    })();
    match result {
        Ok(()) => 0,
        Err(e) => {
            crate::report::error(format_args!("{}", vg_session::diag::chain(&e)));
            EXIT_FAILURE
        }
    }
}

/// The invoker's learned profiles, where `--profile` looks.
fn store() -> Result<ProfileStore> {
    crate::request::learned_profiles_dir()
        .map(ProfileStore::new)
        .context("cannot tell where your learned profiles are: HOME is not set and your user has no home folder in /etc/passwd (set HOME or XDG_CONFIG_HOME)")
}

fn list(store: &ProfileStore, a: &LsArgs, out: &mut dyn Write) -> Result<()> {
    let profiles = store.list()?;
    if a.quiet {
        for p in &profiles {
            writeln!(out, "{}", p.name)?;
        }
        return Ok(());
    }
    if profiles.is_empty() {
        crate::report::note(format_args!(
            "no learned profiles in {} (learn one with `vectraguard sandbox run --learn NAME -- COMMAND`)",
            store.dir().display()
        ));
        return Ok(());
    }
    let width = profiles
        .iter()
        .map(|p| p.name.len())
        .max()
        .unwrap_or(0)
        .max(4);
    writeln!(
        out,
        "{:<width$}  {:<19}  LEARNED FROM",
        "NAME", "MODIFIED (UTC)"
    )?;
    for p in &profiles {
        let modified = p.modified.map_or_else(
            || "-".to_owned(),
            |t| {
                let stamp = vg_records::time::format_rfc3339(t);
                stamp.get(..19).unwrap_or(&stamp).replace('T', " ")
            },
        );
        let from = p.learned_from().map_or_else(|| "-".to_owned(), cut);
        writeln!(out, "{:<width$}  {modified:<19}  {from}", p.name)?;
    }
    Ok(())
}

/// One line of a table: escaped for the terminal, at most 100 characters.
fn cut(text: &str) -> String {
    let shown = escape_hidden(text);
    if shown.chars().count() > 100 {
        shown.chars().take(99).collect::<String>() + "…"
    } else {
        shown.into_owned()
    }
}

fn show(store: &ProfileStore, a: &ShowArgs, out: &mut dyn Write) -> Result<()> {
    let (path, text) = store.read_text(&a.name)?;
    // Line by line, so line breaks stay and anything a terminal would obey does not.
    for line in text.lines() {
        writeln!(out, "{}", escape_hidden(line))?;
    }
    out.flush()?;
    // Shown all the same, so that it can be fixed; but it is not usable as it is.
    store.read(&a.name).map(|_| ()).with_context(|| {
        format!(
            "{} does not load, so --profile {} fails",
            path.display(),
            a.name
        )
    })
}

fn compare(store: &ProfileStore, a: &DiffArgs, out: &mut dyn Write) -> Result<()> {
    let (old_path, old_text) = store.read_text(&a.name)?;
    let (new_label, new_path, new_text) = match (&a.other, &a.file) {
        (_, Some(file)) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let path = std::path::absolute(file)
                .with_context(|| format!("cannot resolve {}", file.display()))?;
            (file.display().to_string(), path, text)
        }
        (Some(other), None) => {
            let (path, text) = store.read_text(other)?;
            (other.clone(), path, text)
        }
        (None, None) => anyhow::bail!("name the other profile, or a file with --file FILE"),
    };
    let changes = diff(&old_path, &old_text, &new_path, &new_text)?;
    writeln!(out, "--- {} ({})", a.name, shown(&old_path))?;
    writeln!(
        out,
        "+++ {} ({})",
        escape_hidden(&new_label),
        shown(&new_path)
    )?;
    write!(out, "{changes}")?;
    Ok(())
}

fn shown(path: &Path) -> String {
    escape_hidden(&path.display().to_string()).into_owned()
}

fn remove(store: &ProfileStore, a: &RmArgs, out: &mut dyn Write) -> Result<()> {
    // Every name is checked before any file is removed: a typo in the list removes
    // nothing.
    for name in &a.names {
        store.path_of(name)?;
    }
    for name in &a.names {
        let path = store.remove(name)?;
        writeln!(out, "Removed: {name} ({})", shown(&path))?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn parse(args: &[&str]) -> Result<ProfileCommand, clap::Error> {
        let mut argv = vec!["vectraguard", "profile"];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv)?.command {
            Command::Profile(cmd) => Ok(cmd.0),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_commands_parse() {
        assert!(matches!(parse(&["ls"]), Ok(ProfileCommand::Ls(_))));
        assert!(matches!(
            parse(&["list", "-q"]),
            Ok(ProfileCommand::Ls(LsArgs { quiet: true }))
        ));
        assert!(matches!(parse(&["show", "a"]), Ok(ProfileCommand::Show(_))));
        assert!(parse(&["show"]).is_err());
        assert!(matches!(
            parse(&["diff", "a", "b"]),
            Ok(ProfileCommand::Diff(_))
        ));
        assert!(matches!(
            parse(&["diff", "a", "--file", "x.toml"]),
            Ok(ProfileCommand::Diff(DiffArgs {
                file: Some(_),
                other: None,
                ..
            }))
        ));
        assert!(parse(&["diff", "a"]).is_err(), "OTHER or --file is needed");
        assert!(parse(&["diff", "a", "b", "--file", "x"]).is_err());
        assert!(matches!(
            parse(&["rm", "a", "b"]),
            Ok(ProfileCommand::Rm(_))
        ));
        assert!(parse(&["rm"]).is_err());
    }

    #[test]
    fn cut_escapes_and_shortens() {
        assert_eq!(cut("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        let long = "x".repeat(150);
        assert_eq!(cut(&long).chars().count(), 100);
    }
}
