//! One sandbox session's lifecycle, as a library that front ends (the `vectraguard`
//! CLI, later agents and servers) drive from code. It reads in one direction:
//!
//! 1. a [`Request`] (`request.rs`): plain data — the command, settings, config files,
//!    image, terminal and recording options;
//! 2. a [`Plan`] (`plan.rs`, with `settings.rs`, `network.rs`, `image.rs`,
//!    `mounts.rs`, `host.rs`, `argv.rs`, `environment.rs`, `limits.rs`): pure, nothing
//!    created or spawned;
//! 3. a [`Running`] session (`start.rs`, `running.rs`, `record/`): the cgroup and the
//!    generated `/etc` files created, the record opened, the sandbox spawned, the
//!    relays, tracer and mediator attached;
//! 4. an [`Outcome`] (`exit.rs`): exit status, termination, limit hits, session id.
//!
//! ```no_run
//! use vg_session::{Plan, Request, image};
//!
//! let request = Request {
//!     args: vec!["echo".into(), "hello".into()],
//!     after_dash_dash: true,
//!     cwd: std::env::current_dir()?,
//!     host_env: Request::process_env(),
//!     ..Request::default()
//! };
//! let plan = Plan::new(&request, &mut image::none)?;
//! let outcome = vg_session::start(plan)?.wait()?;
//! println!("exit {} as {:?}", outcome.exit_code, outcome.session);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod argv;
pub mod backend;
pub mod control;
pub mod diag;
pub mod environment;
pub mod etc;
pub mod exit;
pub mod gate;
pub mod home;
pub mod host;
pub mod image;
pub mod inspection;
pub mod learn;
pub mod limits;
pub mod mounts;
pub mod network;
pub mod notes;
pub mod persistent;
pub mod plan;
pub mod prompt;
pub mod record;
pub mod request;
pub mod running;
pub mod settings;
pub mod socket_owner;
pub mod start;
pub mod tools;
pub mod watchdog;

pub use exit::{Error, Outcome};
pub use plan::Plan;
pub use request::{ImageChoice, Recording, Request};
pub use running::{Running, State};
pub use start::start;

#[cfg(test)]
mod tests;
