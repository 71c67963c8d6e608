//! The risk classifier on what the sandbox runs (`risk/`): every exec's argv, with
//! `sh -c` scripts parsed into pipelines, wrappers (`env`, `sudo`, `xargs` …)
//! stripped, and destinations. The argv comes from inside the sandbox. Input: argv
//! words as `common::split` parts (the first is also the executable's path).
#![no_main]

use std::path::PathBuf;
use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use vg_policy::risk::{Classifier, DestFacts, ExecFacts, defaults, script};

#[path = "common.rs"]
mod common;

static CLASSIFIER: LazyLock<Classifier> =
    LazyLock::new(|| Classifier::new(defaults::rules().expect("built-in rules")));

fuzz_target!(|data: &[u8]| {
    let argv: Vec<String> = common::split(data)
        .iter()
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    let Some(first) = argv.first() else {
        return;
    };
    for word in &argv {
        let _ = script::parse(word);
    }
    let facts = ExecFacts {
        path: first.clone(),
        argv: argv.clone(),
        cwd: Some(PathBuf::from("/work")),
        parents: vec![vec!["sh".to_owned(), "-c".to_owned(), argv.join(" ")]],
        program: None,
        workspaces: vec![PathBuf::from("/work")],
    };
    let _ = CLASSIFIER.classify_exec(&facts);
    let _ = CLASSIFIER.classify_destination(&DestFacts {
        host: first.clone(),
        port: 443,
        allowed_by_policy: false,
        process: Some(argv),
    });
});
