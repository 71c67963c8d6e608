//! What the ledger adds to every session: one `start` and one `end` append (each:
//! open, lock, read the tail, write one line, close; neither fsynced), timed over
//! a ledger that already holds many entries.
//!
//! `cargo run --release -p vg-records --example ledger_append [APPENDS] [DIR]`
//! (DIR: a folder on the file system the records live on; default the temp dir).

use std::time::Instant;

use vg_records::Ledger;
use vg_records::ledger::Head;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(2000);
    let base = args
        .next()
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let root = base.join(format!("vg-ledger-bench-{}", std::process::id()));
    std::fs::create_dir_all(&root)?;
    let ledger = Ledger::at(&root);
    let id = "session-20261125T130001Z-aaaaaa";
    let head = Head {
        records: 12,
        hash: [7; 32],
    };
    // A ledger of 10,000 entries first: appends read only its end.
    for _ in 0..5000 {
        ledger.started(id)?;
        ledger.ended(id, head)?;
    }
    let mut start = Vec::with_capacity(n);
    let mut end = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        ledger.started(id)?;
        start.push(t.elapsed());
        let t = Instant::now();
        ledger.ended(id, head)?;
        end.push(t.elapsed());
    }
    start.sort_unstable();
    end.sort_unstable();
    let pct = |v: &[std::time::Duration], p: usize| v[(v.len() - 1) * p / 100];
    println!(
        "start append: median {:?}, p99 {:?}",
        pct(&start, 50),
        pct(&start, 99)
    );
    println!(
        "end append:   median {:?}, p99 {:?}",
        pct(&end, 50),
        pct(&end, 99)
    );
    let chain = ledger.read()?;
    println!(
        "{} entries, {} problems",
        chain.entries.len(),
        chain.problems.len()
    );
    std::fs::remove_dir_all(&root)?;
    Ok(())
}
