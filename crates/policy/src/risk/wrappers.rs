//! Programs that run other programs, so that the command that actually runs is the one
//! rated: wrappers (`sudo rm -rf /` is an `rm`), wrappers with a leading operand
//! (`chroot DIR`, `timeout 5`), multi-call binaries (`busybox rm`), inline command
//! strings (`sh -c SCRIPT`, `env -S STRING`) and `find -exec`.

use super::script::{basename, command_line};

/// A program (or a shell reserved word) that runs the rest of its arguments as a
/// command.
struct Wrapper {
    name: &'static str,
    /// Letters of the short options that take a value: `sudo -u root`, `nice -n 5`.
    short: &'static str,
    /// Long options whose value is the next word unless written `--option=value`.
    long: &'static [&'static str],
    /// Operands between the options and the command: chroot's NEWROOT, timeout's
    /// DURATION, taskset's MASK.
    operands: usize,
}

const fn plain(name: &'static str) -> Wrapper {
    Wrapper {
        name,
        short: "",
        long: &[],
        operands: 0,
    }
}

const WRAPPERS: &[Wrapper] = &[
    // Shell reserved words and builtins that can start a command.
    plain("if"),
    plain("then"),
    plain("else"),
    plain("elif"),
    plain("do"),
    plain("while"),
    plain("until"),
    plain("!"),
    plain("{"),
    plain("}"),
    plain("builtin"),
    plain("command"),
    Wrapper {
        short: "a",
        ..plain("exec")
    },
    // bash's `time -p`, and /usr/bin/time's `-o FILE -f FORMAT`.
    Wrapper {
        short: "fo",
        long: &["--format", "--output"],
        ..plain("time")
    },
    plain("nohup"),
    plain("setsid"),
    Wrapper {
        short: "ioe",
        long: &["--input", "--output", "--error"],
        ..plain("stdbuf")
    },
    Wrapper {
        short: "n",
        long: &["--adjustment"],
        ..plain("nice")
    },
    Wrapper {
        short: "cnpPu",
        long: &["--class", "--classdata", "--pid", "--pgid", "--uid"],
        ..plain("ionice")
    },
    Wrapper {
        short: "aCcDgpRrTtUu",
        long: &[
            "--auth-type",
            "--close-from",
            "--login-class",
            "--chdir",
            "--group",
            "--host",
            "--prompt",
            "--chroot",
            "--role",
            "--type",
            "--command-timeout",
            "--other-user",
            "--user",
        ],
        ..plain("sudo")
    },
    Wrapper {
        short: "aCu",
        ..plain("doas")
    },
    Wrapper {
        short: "CSu",
        long: &["--chdir", "--split-string", "--unset"],
        ..plain("env")
    },
    Wrapper {
        short: "ks",
        long: &["--kill-after", "--signal"],
        operands: 1,
        ..plain("timeout")
    },
    Wrapper {
        short: "adEILnPs",
        long: &[
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-procs",
            "--max-chars",
            "--process-slot-var",
        ],
        ..plain("xargs")
    },
    Wrapper {
        long: &["--userspec", "--groups"],
        operands: 1,
        ..plain("chroot")
    },
    Wrapper {
        operands: 1,
        ..plain("taskset")
    },
    Wrapper {
        short: "TPD",
        long: &["--sched-runtime", "--sched-period", "--sched-deadline"],
        operands: 1,
        ..plain("chrt")
    },
    Wrapper {
        short: "wE",
        long: &["--timeout", "--wait", "--conflict-exit-code"],
        operands: 1,
        ..plain("flock")
    },
];

/// Multi-call binaries: run under their own name, the next word is the tool to run,
/// `busybox rm -rf /`; under any other name they run the tool of that name, as a
/// symlink `/bin/rm -> busybox` does. busybox and toybox take any name that starts with
/// theirs as their own (`busybox.static`); uutils' `coreutils` only its own.
const MULTI_CALL_PREFIXES: &[&str] = &["busybox", "toybox"];

/// True for the name of a multi-call binary's file: `busybox`, `busybox.static`.
pub fn is_multi_call(name: &str) -> bool {
    name == "coreutils" || MULTI_CALL_PREFIXES.iter().any(|m| name.starts_with(m))
}

/// The name a word runs a program by: its last component, without the `-` a login
/// shell's name starts with (`-bash`), which shells and busybox ignore.
pub fn command_name(word: &str) -> &str {
    let name = basename(word);
    name.strip_prefix('-')
        .filter(|n| !n.is_empty())
        .unwrap_or(name)
}

/// The command a program named `name` runs when given `args`: what follows a wrapper's
/// options and leading operands. `None` when `name` is no wrapper, or when it runs no
/// command of its own (`sudo -l`, `env` alone, `busybox --list`) or a string rather
/// than words (`env -S STRING`, see [`split_string`]): it is then the command itself.
pub fn wrapped<'a>(name: &str, args: &'a [String]) -> Option<&'a [String]> {
    if is_multi_call(name) {
        // No options before the applet: `busybox --list` is busybox's own.
        return args
            .first()
            .filter(|applet| !applet.starts_with('-'))
            .map(|_| args);
    }
    let wrapper = WRAPPERS.iter().find(|w| w.name == name)?;
    let mut rest = args;
    while let Some((first, tail)) = rest.split_first() {
        if first == "--" {
            rest = tail;
            break;
        }
        if !is_option(wrapper, first) {
            break;
        }
        if wrapper.name == "env" && splits_string(first) {
            return None;
        }
        rest = if value_follows(wrapper, first) {
            tail.get(1..).unwrap_or_default()
        } else {
            tail
        };
    }
    rest.get(wrapper.operands..)
        .filter(|command| !command.is_empty())
}

/// `-` alone is an option of `env` only (`-i`); otherwise it is an operand.
fn is_option(wrapper: &Wrapper, word: &str) -> bool {
    word.starts_with('-') && (word.len() > 1 || wrapper.name == "env")
}

/// True when the option's value is the next word: `-u root`, `-Eu root`, `--user root`,
/// but not `-uroot` or `--user=root`.
fn value_follows(wrapper: &Wrapper, option: &str) -> bool {
    if option.starts_with("--") {
        return wrapper.long.contains(&option);
    }
    short_value(option, wrapper.short).is_some_and(|(_, attached)| attached.is_empty())
}

/// In a cluster of short options (`-iu NAME`, `-uNAME`), the first letter that takes a
/// value, and the value when it is written in the same word.
fn short_value<'a>(option: &'a str, letters: &str) -> Option<(char, &'a str)> {
    let cluster = option.strip_prefix('-')?;
    let (i, letter) = cluster.char_indices().find(|(_, c)| letters.contains(*c))?;
    Some((letter, &cluster[i + letter.len_utf8()..]))
}

/// env's `-S`/`--split-string` option, alone or in a cluster (`-vS`).
fn splits_string(option: &str) -> bool {
    option == "--split-string"
        || option.starts_with("--split-string=")
        || (!option.starts_with("--") && short_value(option, "uCS").is_some_and(|(c, _)| c == 'S'))
}

/// The words of the command that actually runs: without leading reserved words,
/// `NAME=value` assignments and wrappers such as `sudo`, `env`, `timeout 5`, `nohup`,
/// `chroot DIR`, `busybox`.
pub fn strip_wrappers(words: &[String]) -> &[String] {
    let mut rest = words;
    loop {
        while let Some((first, tail)) = rest.split_first()
            && is_assignment(first)
        {
            rest = tail;
        }
        let Some((first, args)) = rest.split_first() else {
            return rest;
        };
        match wrapped(command_name(first), args) {
            Some(command) => rest = command,
            None => return rest,
        }
    }
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// Shells whose `-c` runs a script given as an argument.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"];

/// The script of `sh|bash|dash|zsh … -c SCRIPT` (also `-lc`, `-ec`, `-xec`, options
/// before or between, wrappers before: `busybox sh -c`), or `None` when `words` is not
/// a shell running an inline script.
pub fn shell_script(words: &[String]) -> Option<&str> {
    let (program, args) = strip_wrappers(words).split_first()?;
    inline_script(command_name(program), args)
}

/// The script a shell named `name` runs, given `args`: its `-c` operand.
pub fn inline_script<'a>(name: &str, args: &'a [String]) -> Option<&'a str> {
    if !SHELLS.contains(&name) {
        return None;
    }
    let mut inline = false;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--" {
            break;
        }
        let is_option = (arg.starts_with('-') || arg.starts_with('+')) && arg.len() > 1;
        if !is_option {
            return inline.then_some(arg.as_str());
        }
        if arg.starts_with("--") {
            continue; // --login, --norc, --posix …
        }
        let letters = &arg[1..];
        if letters.contains('c') {
            inline = true;
        }
        // `-o NAME`, `-O NAME`: the option's name is the next argument.
        if letters.ends_with('o') || letters.ends_with('O') {
            iter.next();
        }
    }
    if inline {
        iter.next().map(String::as_str)
    } else {
        None
    }
}

/// `env -S STRING ARGS…` (also `-SSTRING`, `-vS STRING`, `--split-string=STRING`): env
/// splits STRING into words, quotes respected, and runs them followed by ARGS. Returned
/// as the script `env STRING ARGS…`, so that what it runs is read like a shell's.
pub fn split_string(name: &str, args: &[String]) -> Option<String> {
    if name != "env" {
        return None;
    }
    let script = |string: &str, rest: &[String]| format!("env {string} {}", command_line(rest));
    let mut rest = args;
    while let Some((option, tail)) = rest.split_first() {
        if option == "--" || !option.starts_with('-') {
            return None;
        }
        if let Some(string) = option.strip_prefix("--split-string=") {
            return Some(script(string, tail));
        }
        if option == "--split-string" {
            let (string, rest) = tail.split_first()?;
            return Some(script(string, rest));
        }
        rest = match short_value(option, "uCS") {
            _ if option.starts_with("--") => {
                let takes_value = ["--unset", "--chdir"].contains(&option.as_str());
                if takes_value {
                    tail.get(1..).unwrap_or_default()
                } else {
                    tail
                }
            }
            Some(('S', "")) => {
                let (string, rest) = tail.split_first()?;
                return Some(script(string, rest));
            }
            Some(('S', string)) => return Some(script(string, tail)),
            Some((_, "")) => tail.get(1..).unwrap_or_default(),
            _ => tail,
        };
    }
    None
}

/// The commands `find` runs on what it finds: `-exec CMD … ;` or `… {} +`, `-execdir`,
/// `-ok`, `-okdir`, each without its wrappers.
pub fn find_commands<'a>(name: &str, args: &'a [String]) -> Vec<&'a [String]> {
    let mut commands = Vec::new();
    if name != "find" {
        return commands;
    }
    let mut rest = args;
    while let Some(start) = rest
        .iter()
        .position(|a| matches!(a.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir"))
    {
        let command = &rest[start + 1..];
        let end = command
            .iter()
            .enumerate()
            .position(|(i, a)| a == ";" || (a == "+" && i > 0 && command[i - 1] == "{}"))
            .unwrap_or(command.len());
        let words = strip_wrappers(&command[..end]);
        if !words.is_empty() {
            commands.push(words);
        }
        rest = command.get(end + 1..).unwrap_or_default();
    }
    commands
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_owned).collect()
    }

    #[track_caller]
    fn stripped(line: &str, expected: &str) {
        let w = words(line);
        assert_eq!(strip_wrappers(&w), words(expected).as_slice(), "{line}");
    }

    #[test]
    fn wrappers_and_assignments_are_skipped() {
        stripped(
            "sudo -u root env -i A=1 timeout 5 nohup rm -rf /",
            "rm -rf /",
        );
        stripped("if FOO=1 make", "make");
        // A bare wrapper, or one that runs nothing, is the command itself.
        stripped("env", "env");
        stripped("sudo -l", "sudo -l");
        stripped("sudo env", "env");
        stripped("busybox --list", "busybox --list");
    }

    #[test]
    fn option_values_and_leading_operands_are_skipped() {
        stripped("sudo -Eu root rm -rf /", "rm -rf /");
        stripped("sudo -uroot -- rm -rf /", "rm -rf /");
        stripped("sudo --user root rm x", "rm x");
        stripped("nice -n5 ionice -c 3 rm x", "rm x");
        stripped("timeout -s KILL 1m rm x", "rm x");
        stripped("timeout --signal=KILL .5 rm x", "rm x");
        stripped("chroot / rm -rf /x", "rm -rf /x");
        stripped("chroot --userspec=1:1 --skip-chdir /srv rm x", "rm x");
        stripped("chroot --groups g /srv rm x", "rm x");
        stripped("taskset -c 0-3 rm x", "rm x");
        stripped("flock -w 5 /tmp/lock rm x", "rm x");
        stripped("xargs -0 -I {} rm -rf {}", "rm -rf {}");
    }

    #[test]
    fn multi_call_binaries_run_their_next_word() {
        stripped("busybox rm -rf /", "rm -rf /");
        stripped("/bin/busybox.static sudo rm x", "rm x");
        stripped("toybox timeout 5 rm x", "rm x");
        stripped("-busybox rm x", "rm x");
        assert!(is_multi_call("busybox-x86_64"));
        assert!(!is_multi_call("rm"));
    }

    #[test]
    fn shell_inline_scripts_are_found() {
        let s = |argv: &[&str]| {
            let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
            shell_script(&argv).map(str::to_owned)
        };
        assert_eq!(s(&["sh", "-c", "ls"]).as_deref(), Some("ls"));
        assert_eq!(s(&["/bin/bash", "-lc", "ls"]).as_deref(), Some("ls"));
        assert_eq!(s(&["-bash", "-c", "ls"]).as_deref(), Some("ls"));
        assert_eq!(
            s(&["bash", "-e", "-o", "pipefail", "-c", "ls", "arg0"]).as_deref(),
            Some("ls")
        );
        assert_eq!(s(&["dash", "-xec", "ls"]).as_deref(), Some("ls"));
        assert_eq!(s(&["zsh", "--login", "-c", "ls"]).as_deref(), Some("ls"));
        assert_eq!(s(&["busybox", "sh", "-c", "ls"]).as_deref(), Some("ls"));
        assert_eq!(s(&["toybox", "sh", "-c", "ls"]).as_deref(), Some("ls"));
        assert_eq!(s(&["sudo", "bash", "-c", "ls"]).as_deref(), Some("ls"));
        assert_eq!(s(&["bash", "script.sh"]), None);
        assert_eq!(s(&["bash", "-x", "script.sh"]), None);
        assert_eq!(s(&["python3", "-c", "ls"]), None);
        assert_eq!(s(&["busybox", "-c", "ls"]), None);
    }

    #[test]
    fn env_split_strings_are_scripts() {
        let s = |line: &str| {
            let w = words(line);
            split_string("env", &w[1..])
        };
        assert_eq!(s("env -S rm x").as_deref(), Some("env rm x"));
        assert_eq!(s("env -i -Srm x").as_deref(), Some("env rm x"));
        assert_eq!(
            s("env -u S --split-string=rm x").as_deref(),
            Some("env rm x")
        );
        assert_eq!(s("env -u S rm").as_deref(), None);
        // env -S is not a plain wrapper: what follows the string is not the command.
        stripped("env -S rm x", "env -S rm x");
    }

    #[test]
    fn find_runs_its_exec_commands() {
        let w = words("find . -name *.o -exec sudo rm -f {} ; -execdir sh -c x {} +");
        assert_eq!(
            find_commands("find", &w[1..]),
            [words("rm -f {}"), words("sh -c x {}")]
        );
        assert!(find_commands("find", &words(". -name x")).is_empty());
        assert!(find_commands("echo", &words("-exec rm ;")).is_empty());
    }
}
