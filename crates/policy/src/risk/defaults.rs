//! The built-in rules, after seed 002: dangerous patterns (`rm -rf`, `curl … | sh`,
//! `eval`), package installs from registries the user did not choose, writes of files
//! that other programs will run, and code that reaches the network are HIGH or
//! CRITICAL. A configuration file adds to them; the user's file may also replace one by
//! its id.

use super::level::Level::{Critical, High, Medium};
use super::rule::{Rule, RuleError, RuleSpec};

/// Shells that run what they read, as they appear after `|`.
const SHELL_RE: &str = r"(?:\S*/)?(?:ba|da|z|k|a)?sh";

/// What runs text it reads as code, after `|`: a shell (also `$SHELL`, `(sh)`) or an
/// interpreter, with any arguments (`sh -s -- --yes`, `sh /dev/stdin`), to the
/// pipeline's end.
fn runs_piped_code() -> String {
    format!(
        r"\|\s*\(?\s*(?:sudo\s+)?(?:{SHELL_RE}|'?\$\{{?SHELL\}}?'?|(?:\S*/)?(?:python[0-9.]*|perl|ruby|node|php[0-9.]*))(?:\s[^|]*)?\)?\s*$"
    )
}

/// A word of a command line as `command_line` quotes it: `a`, `'a b'`, `'it'\''s'`.
const WORD_RE: &str = r"(?:'[^']*'(?:\\''[^']*')*|[^\s']\S*)";

/// An option word, other than `-C` and `-c` alone (whose value follows).
const FLAG_RE: &str = r"(?:-[^\sCc]\S*|-[Cc]\S+|'-[^']*'(?:\\''[^']*')*)";

/// `git`, its global options (`-C DIR`, `-c NAME=VALUE`, `--git-dir DIR`, `--no-pager`),
/// then `subcommand`: `git -C dir clean` is a clean, `git commit -m clean -f` is not.
fn git(subcommand: &str) -> String {
    format!(
        r"^{WORD_RE}(?:\s+(?:-[Cc]|--(?:git-dir|work-tree|namespace|exec-path|config-env))\s+{WORD_RE}|\s+{FLAG_RE})*\s+{subcommand}(?:\s|$)"
    )
}

/// A regex matching ` --NAME` and every beginning of it at least `shortest` letters
/// long, as a whole word (GNU getopt accepts unambiguous abbreviations).
fn long_option(name: &str, shortest: usize) -> String {
    let prefixes: Vec<&str> = (shortest..=name.len()).rev().map(|n| &name[..n]).collect();
    format!(r" --(?:{})(?:\s|=|$)", prefixes.join("|"))
}

/// The built-in rules, in order (on equal levels the earlier one is reported).
pub fn rules() -> Result<Vec<Rule>, RuleError> {
    specs().iter().map(RuleSpec::compile).collect()
}

/// The built-in rules as written, for `risk explain` and the documentation.
pub fn specs() -> Vec<RuleSpec> {
    // GNU getopt takes any unambiguous beginning of a long option: `--rec`, `--f`.
    let recursive = format!(r" -[a-zA-Z]*[rR]|{}", long_option("recursive", 1));
    let force = format!(r" -[a-zA-Z]*f|{}", long_option("force", 1));
    let rf = [recursive.as_str(), force.as_str()];
    let mut dest_raw_ip = RuleSpec::new(
        "raw-ip",
        High,
        "connects to an IP address instead of a name, which name rules cannot check",
    );
    dest_raw_ip.raw_ip = true;
    let mut dest_from_code = RuleSpec::new(
        "code-network",
        Critical,
        "code run by an interpreter opens a network connection",
    );
    dest_from_code.from_code = true;
    let mut dest_unlisted = RuleSpec::new(
        "unlisted-host",
        High,
        "the network policy does not allow this destination",
    );
    dest_unlisted.unlisted = true;
    let mut dest_port = RuleSpec::new(
        "unusual-port",
        Medium,
        "a port other than HTTP's and HTTPS's",
    );
    dest_port.port_not_in = vec![80, 443];

    vec![
        // Seed 002 lists `curl | sh` as CRITICAL: code fetched at run time, unseen by
        // anyone, runs with everything the sandbox allows.
        RuleSpec::new("pipe-to-shell", Critical, "downloaded code piped into a shell").script(
            &format!(r"\b(?:curl|wget|fetch|aria2c|http|nc|ncat)\b[^|]*(?:\|[^|]*)*{}", runs_piped_code()),
        ),
        // The same, without a pipe: `bash <(curl …)`, `sh -c "$(curl …)"`.
        RuleSpec::new("download-to-shell", Critical, "downloaded code run by a shell").script(
            &format!(r"(?:^|\|\s*)(?:sudo\s+)?(?:{SHELL_RE}|source|\.)\s+(?:-\S+\s+)*'?(?:<\(|\$\()\s*(?:curl|wget)\b"),
        ),
        // `eval` runs text built at run time; seed 002 lists it as CRITICAL.
        RuleSpec::new("eval", Critical, "eval runs text built at run time as code")
            .executable(&["eval"]),
        // Anything else piped into a shell (`base64 -d | sh`) hides what runs.
        RuleSpec::new("pipe-into-shell", High, "text piped into a shell runs as code").script(
            &runs_piped_code(),
        ),
        // rm -rf reaching beyond the workspace: `/`, `~`, `..`, absolute paths.
        // Forced or not: without a terminal on stdin rm asks nothing.
        RuleSpec::new(
            "rm-rf-outside",
            Critical,
            "recursive delete of a path outside the workspace",
        )
        .executable(&["rm"])
        .argv(&rf[..1])
        .outside_cwd(),
        // find deletes everything it matches, however many files that is (the commands
        // `-exec` runs are also rated on their own). Before rm-rf, which `-exec rm -rf`
        // also matches, so that the reason names find.
        RuleSpec::new("find-delete", High, "find deletes the files it finds")
            .executable(&["find"])
            .argv(&[r"\s(?:-delete|-(?:exec|execdir|ok|okdir)\s+(?:(?:\S*/)?(?:sudo|doas|busybox|toybox)\s+)*(?:\S*/)?(?:rm|unlink))(?:\s|$)"]),
        // rm -rf inside the workspace is common (`rm -rf build`) but still irreversible.
        RuleSpec::new("rm-rf", High, "recursive forced delete").executable(&["rm"]).argv(&rf),
        // Formatting or overwriting a block device destroys a disk.
        RuleSpec::new("disk-write", Critical, "formats or overwrites a disk")
            .executable(&["mkfs", "mkfs.*", "mke2fs", "wipefs", "blkdiscard", "shred"])
            .outside_cwd(),
        RuleSpec::new("dd-device", Critical, "formats or overwrites a disk")
            .executable(&["dd"])
            // Disks only: `of=/dev/null` is how output is thrown away.
            .arg(r"^of=/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|md|dm-|loop|mapper/|disk/)"),
        // The same by any other writer: `cat img > /dev/sda`, `cp img /dev/nvme0n1`.
        RuleSpec::new("device-write", Critical, "overwrites a disk device").writes(&[
            "/dev/sd*",
            "/dev/hd*",
            "/dev/vd*",
            "/dev/xvd*",
            "/dev/nvme*",
            "/dev/mmcblk*",
            "/dev/md*",
            "/dev/dm-*",
            "/dev/loop*",
            "/dev/mapper/**",
            "/dev/disk/**",
        ]),
        // Files destroyed beyond recovery, or emptied, wherever they are.
        RuleSpec::new("shred", High, "overwrites files so that they cannot be recovered")
            .executable(&["shred"]),
        RuleSpec::new("truncate", High, "discards file contents").executable(&["truncate"]),
        // rsync --delete removes from the destination whatever the source lacks.
        RuleSpec::new("rsync-delete", High, "deletes destination files missing from the source")
            .executable(&["rsync"])
            .argv(&[r"\s--del(?:ete(?:-[a-z]+)?)?(?:[\s=]|$)"]),
        // Work that was never committed is in no commit to go back to. `git clean` only
        // deletes with -f (or clean.requireForce off); `-n` alone is a dry run.
        RuleSpec::new("git-clean", High, "git clean deletes untracked files, which no commit holds")
            .executable(&["git"])
            .argv(&[
                &git("clean"),
                r"\s(?:-[a-zA-Z]*f[a-zA-Z]*|--force)(?:\s|$)|(?i:clean\.requireForce)=(?:false|no|off|0)(?:\s|$)",
            ]),
        RuleSpec::new("git-reset-hard", High, "git reset --hard discards uncommitted work")
            .executable(&["git"])
            .argv(&[&git("reset"), r"\s--hard(?:\s|$)"]),
        RuleSpec::new("git-discard", High, "a forced checkout discards uncommitted changes")
            .executable(&["git"])
            .argv(&[
                &git("(?:checkout|switch)"),
                r"\s(?:-[a-zA-Z]*f[a-zA-Z]*|--force|--discard-changes)(?:\s|$)",
            ]),
        // Git runs hooks, and programs named in .git/config, on the host, outside any
        // sandbox, the next time a person uses the repository.
        RuleSpec::new(
            "git-hooks-write",
            Critical,
            "writes a git hook or git config, which git runs outside the sandbox",
        )
        .writes(&["**/.git/hooks/**", "**/.git/config", "**/.husky/**"]),
        RuleSpec::new(
            "git-hooks-config",
            Critical,
            "points git at programs it runs outside the sandbox",
        )
        .executable(&["git"])
        .argv(&[r"\bconfig\b.*\b(?:core\.hooksPath|core\.fsmonitor|core\.sshCommand|core\.pager|alias\.)"]),
        // Startup files run in every later shell: persistence.
        RuleSpec::new(
            "startup-file-write",
            Critical,
            "writes a shell startup file, which runs in every later shell",
        )
        .writes(&[
            "~/.bashrc",
            "~/.bash_profile",
            "~/.bash_login",
            "~/.profile",
            "~/.zshrc",
            "~/.zprofile",
            "~/.zshenv",
            "~/.config/fish/**",
            "~/.config/autostart/**",
            "/etc/profile.d/**",
        ]),
        // Seed 002: writing executables is HIGH; these folders are on PATH.
        RuleSpec::new(
            "bin-write",
            High,
            "writes an executable into a folder on PATH",
        )
        .writes(&[
            "/usr/local/bin/**",
            "/usr/local/sbin/**",
            "/usr/bin/**",
            "/bin/**",
            "~/.local/bin/**",
            "~/bin/**",
            "~/.cargo/bin/**",
        ]),
        // Seed 002: CRITICAL for packages from registries the user did not choose.
        RuleSpec::new(
            "pip-custom-index",
            Critical,
            "installs Python packages from a non-standard registry",
        )
        .executable(&["pip", "pip3", "pip3.*", "python", "python3", "python3.*", "uv"])
        .argv(&[
            r"(?:^|\s)(?:-m\s+pip\s+|pip\s+)?install\b",
            r"(?:\s|^)(?:-i|--index-url|--extra-index-url|-f|--find-links|--trusted-host)(?:[\s=]|$)|\bgit\+|\s'?https?://",
        ]),
        RuleSpec::new(
            "npm-custom-registry",
            Critical,
            "installs JavaScript packages from a non-standard registry",
        )
        .executable(&["npm", "pnpm", "yarn", "bun"])
        .argv(&[
            r"\s(?:install|i|add|ci)\b",
            r"--registry\b|\bgit\+|\s'?https?://|\sgithub:",
        ]),
        RuleSpec::new(
            "cargo-custom-source",
            Critical,
            "installs a Rust program from a non-standard source",
        )
        .executable(&["cargo"])
        .argv(&[r"\sinstall\b", r"\s--(?:git|registry|index)\b"]),
        RuleSpec::new(
            "gem-custom-source",
            Critical,
            "installs Ruby gems from a non-standard source",
        )
        .executable(&["gem"])
        .argv(&[r"\sinstall\b", r"\s(?:-s|--source|--clear-sources)\b"]),
        // Seed 002: a package install from a standard registry is HIGH (install scripts
        // run arbitrary code).
        RuleSpec::new("package-install", High, "installs packages, whose install scripts run code")
            .executable(&[
                "pip", "pip3", "pip3.*", "python", "python3", "python3.*", "uv", "npm", "pnpm",
                "yarn", "bun", "cargo", "gem", "go", "apt", "apt-get", "apk", "dnf", "yum",
            ])
            .argv(&[r"\s(?:install|i|add|ci|get)\b"]),
        // Seed 002: code that calls out to the system from inline code is CRITICAL.
        RuleSpec::new(
            "inline-code-system",
            Critical,
            "inline code runs system commands or evaluates strings",
        )
        .executable(&["python*", "node", "nodejs", "deno", "bun", "perl", "ruby", "php*"])
        .argv(&[r"\s(?:-c|-e|-E|-r|-p|--eval|--print)\s"])
        .arg(r"\bos\.(?:system|popen|exec\w*|spawn\w*)\b|\bsubprocess\b|\bpty\.spawn\b|\bchild_process\b|\b(?:eval|exec)\s*\(|\bsystem\s*\(|`[^`]+`|\bsocket\b"),
        // Seed 002: any code execution is HIGH.
        RuleSpec::new("inline-code", High, "runs code given on the command line")
            .executable(&["python*", "node", "nodejs", "deno", "bun", "perl", "ruby", "php*"])
            .argv(&[r"\s(?:-c|-e|-E|-r|-p|--eval|--print)\s"]),
        // A shell started by inline code is how that code runs commands.
        RuleSpec::new("shell-from-code", High, "inline code started a shell")
            .executable(&["sh", "bash", "dash", "zsh"])
            .parent(r"^(?:\S*/)?(?:python[0-9.]*|node|perl|ruby|php[0-9.]*)\s(?:.*\s)?(?:-c|-e|-E|-r)\s"),
        // Raw network tools open connections no HTTP client would.
        RuleSpec::new("raw-network-tool", High, "a raw network tool (listener or reverse shell)")
            .executable(&["nc", "ncat", "netcat", "socat", "telnet"]),
        // Plain downloads: something is fetched to be used; worth a look.
        RuleSpec::new("download", Medium, "downloads from the network")
            .executable(&["curl", "wget", "aria2c"]),
        // Making a file executable anywhere (seed 002: writing executable files).
        RuleSpec::new("make-executable", High, "makes a file executable")
            .executable(&["chmod"])
            .argv(&[r"\s(?:[ugoa]*[+=][rwX]*x|[0-7]*[1357][0-7]{0,2})\s"]),
        dest_from_code,
        dest_raw_ip,
        dest_unlisted,
        dest_port,
    ]
}
