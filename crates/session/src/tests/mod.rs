//! Planning as values: a request in, a plan out, nothing spawned or created.

mod plan;
