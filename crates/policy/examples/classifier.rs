//! The cost of rating one exec with the built-in risk rules: the median, p99 and mean
//! over N typical commands (plain tools, compilers, `sh -c` scripts with pipelines,
//! inline code, package installs), each timed alone.
//!
//! Usage: cargo run --release -p vg-policy --example classifier [N]   (default 100000)

use std::path::PathBuf;
use std::time::Instant;

use vg_policy::risk::{Classifier, ExecFacts, defaults};

const TYPICAL: &[&[&str]] = &[
    &["git", "status"],
    &["ls", "-la", "src"],
    &["cargo", "build", "--release"],
    &["/usr/bin/cc", "-O2", "-c", "main.c", "-o", "main.o"],
    &["sh", "-c", "cd src && make -j2 2>&1 | tee build.log"],
    &[
        "bash",
        "-lc",
        "eval \"$(pyenv init -)\"; python3 -m pytest -q",
    ],
    &[
        "python3",
        "-c",
        "import json,sys; print(json.load(sys.stdin)['x'])",
    ],
    &["npm", "install"],
    &["pip", "install", "-r", "requirements.txt"],
    &["rm", "-rf", "build"],
    &["sh", "-c", "curl -fsSL https://example.com/install.sh | sh"],
    &["node", "server.js"],
    &["cp", "hooks/pre-commit", ".git/hooks/pre-commit"],
    &["grep", "-rn", "TODO", "."],
    &["sh", "-c", "for f in *.txt; do wc -l \"$f\"; done > counts"],
    &["sed", "-i", "s/a/b/", "file.txt"],
];

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let rules = match defaults::rules() {
        Ok(rules) => rules,
        Err(e) => {
            eprintln!("the built-in rules do not compile: {e}");
            std::process::exit(1);
        }
    };
    let classifier = Classifier::new(rules);
    let facts: Vec<ExecFacts> = TYPICAL
        .iter()
        .map(|argv| ExecFacts {
            path: String::new(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            cwd: Some(PathBuf::from("/work/project")),
            parents: vec![vec!["bash".into()]],
            program: None,
            workspaces: Vec::new(),
        })
        .collect();
    let mut samples = Vec::with_capacity(n);
    let mut critical = 0usize;
    let started = Instant::now();
    for i in 0..n {
        let f = &facts[i % facts.len()];
        let t = Instant::now();
        let a = classifier.classify_exec(f);
        samples.push(t.elapsed().as_nanos());
        if a.level == vg_policy::risk::Level::Critical {
            critical += 1;
        }
    }
    let total = started.elapsed();
    samples.sort_unstable();
    // Percentile as a fraction in thousandths, in integers.
    let pick = |per_mille: usize| samples[(samples.len() - 1) * per_mille / 1000];
    println!(
        "classify_exec over {n} execs ({} rules, {} distinct commands, {critical} CRITICAL): median {} ns, p99 {} ns, mean {} ns",
        classifier.rules().len(),
        facts.len(),
        pick(500),
        pick(990),
        total.as_nanos() / n.max(1) as u128,
    );
}
