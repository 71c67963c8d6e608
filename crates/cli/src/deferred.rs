//! Commands and options that clap defines only when they are used.
//!
//! clap builds the whole command tree before it parses: every subcommand's every
//! option, about 0.8 ms at each start here, a sixth of a sandboxed `/bin/true`. With
//! a command's definition deferred (`clap::Command::defer`), clap builds it only when
//! the arguments enter that command, or when help, completions or the manual page
//! walk the tree (`Command::build`). `vectraguard sandbox run` then builds the root,
//! `sandbox` and `run`, not `logs`, `image`, `agent`, `shell`, `create`…
//!
//! What walks the whole tree to print it (completions, the manual page) asks for
//! every definition at once ([`define_everything`]): clap's `help` subcommand mirrors
//! the tree as it stands when the root is built, which would miss the deferred parts.

use std::sync::atomic::{AtomicBool, Ordering};

use clap::builder::{Resettable, StyledStr};
use clap::{ArgMatches, Args, Command, FromArgMatches, Subcommand};

/// Set once something needs the whole tree defined up front.
static EAGER: AtomicBool = AtomicBool::new(false);

/// From now on, commands are defined at once, as without deferring.
pub fn define_everything() {
    EAGER.store(true, Ordering::Relaxed);
}

/// `define` applied to `cmd` now, or when `cmd` is entered. A command's description
/// is set by its parent after `define` (clap's derive: the variant's doc comment),
/// and `define` may set another (a flattened struct's doc comment), so a deferred
/// definition keeps the description the command had.
fn defined(cmd: Command, define: fn(Command) -> Command) -> Command {
    if EAGER.load(Ordering::Relaxed) {
        return define(cmd);
    }
    cmd.defer(define)
}

/// `define` run on `cmd`, keeping `cmd`'s description.
fn keeping_description(cmd: Command, define: fn(Command) -> Command) -> Command {
    let about = cmd.get_about().cloned();
    let long_about = cmd.get_long_about().cloned();
    let cmd = define(cmd);
    match about {
        // Without one of its own, the command had what `define` gives it.
        None => cmd,
        Some(about) => cmd.about(about).long_about(match long_about {
            Some(long) => Resettable::Value(long),
            None => Resettable::<StyledStr>::Reset,
        }),
    }
}

/// `T`'s subcommands or options, defined when its command is entered.
#[derive(Debug)]
pub struct Deferred<T>(pub T);

impl<T> std::ops::Deref for Deferred<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: FromArgMatches> FromArgMatches for Deferred<T> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches(matches).map(Self)
    }

    fn from_arg_matches_mut(matches: &mut ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches_mut(matches).map(Self)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }

    fn update_from_arg_matches_mut(&mut self, matches: &mut ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches_mut(matches)
    }
}

impl<T: Subcommand> Subcommand for Deferred<T> {
    fn augment_subcommands(cmd: Command) -> Command {
        defined(cmd, |cmd| keeping_description(cmd, T::augment_subcommands))
    }

    fn augment_subcommands_for_update(cmd: Command) -> Command {
        defined(cmd, |cmd| {
            keeping_description(cmd, T::augment_subcommands_for_update)
        })
    }

    fn has_subcommand(name: &str) -> bool {
        T::has_subcommand(name)
    }
}

impl<T: Args> Args for Deferred<T> {
    fn augment_args(cmd: Command) -> Command {
        defined(cmd, |cmd| keeping_description(cmd, T::augment_args))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        defined(cmd, |cmd| {
            keeping_description(cmd, T::augment_args_for_update)
        })
    }

    fn group_id() -> Option<clap::Id> {
        T::group_id()
    }
}
