//! Container images for Vectra Guard: an OCI image store under
//! `$VECTRAGUARD_HOME/images`, filled by pulling from a registry, loading a
//! `docker save` or OCI archive, or importing a root filesystem tarball, and a cache
//! of root filesystems unpacked safely from the images' layers.
//!
//! The entry point is [`Store`]. For a sandbox, [`Store::resolve`] turns a name into
//! an [`Image`]: its digests, the runtime settings of its configuration (Env,
//! WorkingDir, Entrypoint, Cmd, User) and the path of its unpacked root filesystem,
//! ready to be bind-mounted read-only, held by a lease that keeps garbage collection
//! away while the image is in use.
//!
//! Everything that comes from outside — registries, archives, layers — is untrusted:
//! every blob is verified against its digest before it enters the store, and layers
//! are unpacked with every path resolved beneath the image's root (see [`unpack`]).

#![forbid(unsafe_code)]

pub mod archive;
pub mod digest;
pub mod error;
pub mod image;
pub mod import;
pub mod manifest;
pub mod platform;
pub mod progress;
pub mod pull;
pub mod reference;
pub mod registry;
pub mod rootfs;
pub mod store;
pub mod unpack;

pub use digest::Digest;
pub use error::ImageError;
pub use image::{Image, ImageSummary, Inspect, RunConfig};
pub use progress::{Progress, ProgressEvent, Silent};
pub use reference::Reference;
pub use store::{RemoveReport, Store};
