//! What a leaf certificate costs: the median time to mint one for a new name, and to
//! look one up once cached.
//!
//! `cargo run --release -p vg-http --example mint [N]` (N defaults to 500).

use std::sync::Arc;
use std::time::{Duration, Instant};

use vg_http::{Inspector, Options};
use vg_netstack::PolicyHandle;
use vg_policy::network::NetworkPolicy;

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times.get(times.len() / 2).copied().unwrap_or_default()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = match std::env::args().nth(1) {
        Some(n) => n.parse()?,
        None => 500,
    };
    let started = Instant::now();
    let inspector = Inspector::new(Options {
        policy: PolicyHandle::new(NetworkPolicy::default()),
        extra_upstream_roots: Vec::new(),
        secrets: Vec::new(),
        events: Arc::new(|_| {}),
    })?;
    let setup = started.elapsed();

    let mut mints = Vec::with_capacity(n);
    for i in 0..n {
        let name = format!("host-{i}.example.com");
        let t = Instant::now();
        inspector.leaf_for(&name)?;
        mints.push(t.elapsed());
    }
    let mut lookups = Vec::with_capacity(n);
    for i in 0..n {
        let name = format!("host-{i}.example.com");
        let t = Instant::now();
        inspector.leaf_for(&name)?;
        lookups.push(t.elapsed());
    }
    println!("session CA generated in {setup:?}");
    println!("mint a leaf (new name), median of {n}: {:?}", median(mints));
    println!("cached lookup, median of {n}: {:?}", median(lookups));
    Ok(())
}
