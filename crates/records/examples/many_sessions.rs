//! Fills a records folder with many finished sessions, written as the supervisor writes
//! them (`SessionStore::create`, exec records, output, `finish`: hash chain, ledger and
//! all), for measuring what reads them back (`bench/dashboard.sh`: the dashboard's
//! sessions page at 10,000 sessions).
//!
//! `cargo run --release -p vg-records --example many_sessions -- COUNT HOME`
//!
//! HOME is a throwaway `VECTRAGUARD_HOME`: the sessions go to `HOME/logs`. Their start
//! times are spread over the 30 days before now, one every few minutes, so that time
//! filters select a part; agents, names and end states rotate so that each filter
//! value selects a known share: agent `agent-K` (K = i mod 4), name `job-J`
//! (J = i mod 100), and one session in 10 exits 1, one in 50 times out.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use vg_records::{CommandRecord, End, Metadata, Origin, SessionStore};

const AGENTS: usize = 4;
const NAMES: usize = 100;
const SPREAD: Duration = Duration::from_secs(30 * 24 * 3600);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: many_sessions COUNT HOME (HOME: a throwaway VECTRAGUARD_HOME)";
    let count: u32 = args.next().ok_or(usage)?.parse()?;
    let home = PathBuf::from(args.next().ok_or(usage)?);
    let store = SessionStore::open(&home.join("logs"))?;
    let now = SystemTime::now();
    let step = SPREAD / count.max(1);
    let started = Instant::now();
    for i in 0..count {
        let mut meta = Metadata::new(Origin::Cli);
        // Oldest first, as they would have been written; each lasts two seconds.
        let start = now - SPREAD + step * i;
        meta.start_time = start;
        meta.agent = Some(format!("agent-{}", i as usize % AGENTS));
        meta.name = Some(format!("job-{}", i as usize % NAMES));
        meta.command = vec!["sh".into(), "-c".into(), format!("make test-{i}")];
        meta.cwd_outside = Some("/home/dev/project".into());
        meta.cwd_inside = Some("/home/dev/project".into());
        meta.cwd = meta.cwd_inside.clone();
        let writer = store.create(meta)?;
        let argvs = [
            vec!["sh".to_owned(), "-c".to_owned(), format!("make test-{i}")],
            vec!["make".to_owned(), format!("test-{i}")],
            vec!["cc".to_owned(), "-c".to_owned(), "main.c".to_owned()],
        ];
        for (n, argv) in (2u32..).zip(argvs) {
            writer.record_command(&CommandRecord::new(n, n - 1, "/home/dev/project", argv))?;
        }
        writer.append_stdout(format!("test-{i}: ok\n").as_bytes())?;
        let mut end = if i % 50 == 49 {
            End::timeout(Some(124))
        } else if i % 10 == 9 {
            End::exited(1)
        } else {
            End::exited(0)
        };
        end.end_time = start + Duration::from_secs(2);
        writer.finish(end)?;
    }
    println!(
        "wrote {count} sessions to {} in {:.1} s",
        store.root().display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
