//! What a pull, load or import reports while it works. The library only emits
//! events; the command line draws them (progress bars on a terminal, plain lines
//! otherwise).

use crate::digest::Digest;

/// One step of adding an image to the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgressEvent<'a> {
    /// A free-form status line ("resolving docker.io/library/ubuntu:22.04").
    Status(&'a str),
    /// The image's layers are known: `index` 0.. of `count`, with their sizes.
    Layers { layers: &'a [(Digest, u64)] },
    /// A layer's download starts (`index` into the `Layers` list).
    LayerStart { index: usize },
    /// `bytes` more of a layer arrived.
    LayerBytes { index: usize, bytes: u64 },
    /// A layer is in the store: downloaded and verified, or already there.
    LayerDone { index: usize, cached: bool },
    /// Unpacking layer `index` into the root filesystem cache.
    Unpacking { index: usize },
}

/// Receives progress events.
pub trait Progress {
    fn event(&mut self, event: ProgressEvent<'_>);
}

/// Reports nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Silent;

impl Progress for Silent {
    fn event(&mut self, _: ProgressEvent<'_>) {}
}
