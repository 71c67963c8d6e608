//! Signals as messages, for front ends that pass them on (a `sandbox exec` client).

use std::io;

use crate::sys;

/// Blocks `signals` in the calling thread — and so in every thread it starts from
/// now on: call it before starting any — and hands each one that arrives to
/// `on_signal`, on a thread of its own.
pub fn forward(
    signals: &[libc::c_int],
    mut on_signal: impl FnMut(libc::c_int) + Send + 'static,
) -> io::Result<()> {
    let set = sys::sigset(signals);
    sys::sigmask_block(&set)?;
    std::thread::Builder::new()
        .name("vg-signals".into())
        .spawn(move || {
            while let Ok((signal, _)) = sys::sigwait(&set) {
                on_signal(signal);
            }
        })
        .map(drop)
}
