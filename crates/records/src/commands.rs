//! Reading `commands.log` back: each line parsed into the record it was
//! written from (see [`crate::writer`] for the format).

use std::time::SystemTime;

use crate::quote::{unquote_argv, unquote_word};
use crate::time;
use crate::writer::{ArgvSize, CommandExit};

/// An `exec` line: a program started in the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecLine {
    pub time: SystemTime,
    pub pid: u32,
    pub ppid: u32,
    /// The working directory's bytes.
    pub cwd: Vec<u8>,
    /// The file executed, when recorded.
    pub exe: Option<Vec<u8>>,
    /// The file that path reached, by its own path, when that is another one
    /// (symlinks on the way): what ran, whatever the path names later.
    pub ran: Option<Vec<u8>>,
    /// What the kernel started first in place of the file's own code (a script's
    /// interpreter, a program's own loader), when recorded.
    pub interp: Option<Vec<u8>>,
    /// `interp`'s own file when a link made it another (as `ran` for `exe`).
    pub interp_ran: Option<Vec<u8>>,
    /// Present when the exit was known as the exec was recorded.
    pub exit: Option<CommandExit>,
    /// The argv's bytes, unquoted: cut to the recording limits when `truncated`.
    pub argv: Vec<Vec<u8>>,
    /// Present when the line keeps only part of the argv: its size in full.
    pub truncated: Option<ArgvSize>,
    /// The argv as written: quoted for a shell, safe to print.
    pub command: String,
}

/// One parsed line of `commands.log`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandLogLine {
    Exec(ExecLine),
    /// The exit of an earlier `exec` of `pid`.
    Exit {
        time: SystemTime,
        pid: u32,
        exit: CommandExit,
    },
}

impl CommandLogLine {
    pub fn time(&self) -> SystemTime {
        match self {
            CommandLogLine::Exec(e) => e.time,
            CommandLogLine::Exit { time, .. } => *time,
        }
    }

    /// Parses one line, with or without its newline; `None` when it does
    /// not have the shape the writer gives lines (e.g. it was edited).
    pub fn parse(line: &str) -> Option<Self> {
        let line = line.strip_suffix('\n').unwrap_or(line);
        let (stamp, rest) = line.split_once(' ')?;
        let time = time::parse_rfc3339(stamp).ok()?;
        if let Some(rest) = rest.strip_prefix("exec ") {
            parse_exec(time, rest).map(CommandLogLine::Exec)
        } else {
            let rest = rest.strip_prefix("exit ")?;
            let (pid, rest) = field(rest, "pid=")?;
            let (exit, rest) = parse_exit(rest.strip_prefix(' ')?)?;
            rest.is_empty()
                .then_some(CommandLogLine::Exit { time, pid, exit })
        }
    }
}

/// `name=<u32>` at the start of `text`, and what follows it.
fn field<'a>(text: &'a str, name: &str) -> Option<(u32, &'a str)> {
    let rest = text.strip_prefix(name)?;
    let end = rest.find(' ').unwrap_or(rest.len());
    Some((rest[..end].parse().ok()?, &rest[end..]))
}

/// `status=<n>` or `signal=<n>` at the start of `text`, and what follows it.
fn parse_exit(text: &str) -> Option<(CommandExit, &str)> {
    let (kind, rest) = text.split_once('=')?;
    let end = rest.find(' ').unwrap_or(rest.len());
    let n: i32 = rest[..end].parse().ok()?;
    let exit = match kind {
        "status" => CommandExit::Code(n),
        "signal" => CommandExit::Signal(n),
        "denied" => CommandExit::Denied(n),
        _ => return None,
    };
    Some((exit, &rest[end..]))
}

/// `truncated=<args>,<bytes>` at the start of `text`, and what follows it.
fn parse_truncated(text: &str) -> Option<(ArgvSize, &str)> {
    let rest = text.strip_prefix("truncated=")?;
    let end = rest.find(' ').unwrap_or(rest.len());
    let (args, bytes) = rest[..end].split_once(',')?;
    let size = ArgvSize {
        args: args.parse().ok()?,
        bytes: bytes.parse().ok()?,
    };
    Some((size, &rest[end..]))
}

/// `pid=<pid> ppid=<ppid> cwd=<quoted> [exe=<quoted>] [ran=<quoted>] [interp=<quoted>] [interp_ran=<quoted>] [status=<n>|signal=<n>|denied=<errno>]
/// [truncated=<args>,<bytes>] -- <argv>`.
fn parse_exec(time: SystemTime, text: &str) -> Option<ExecLine> {
    let (pid, rest) = field(text, "pid=")?;
    let (ppid, rest) = field(rest.strip_prefix(' ')?, "ppid=")?;
    let (cwd, mut rest) = unquote_word(rest.strip_prefix(" cwd=")?)?;
    let mut exe = None;
    if let Some(after) = rest.strip_prefix(" exe=") {
        let (path, r) = unquote_word(after)?;
        exe = Some(path);
        rest = r;
    }
    let mut ran = None;
    if let Some(after) = rest.strip_prefix(" ran=") {
        let (path, r) = unquote_word(after)?;
        ran = Some(path);
        rest = r;
    }
    let mut interp = None;
    if let Some(after) = rest.strip_prefix(" interp=") {
        let (path, r) = unquote_word(after)?;
        interp = Some(path);
        rest = r;
    }
    let mut interp_ran = None;
    if let Some(after) = rest.strip_prefix(" interp_ran=") {
        let (path, r) = unquote_word(after)?;
        interp_ran = Some(path);
        rest = r;
    }
    let mut exit = None;
    if let Some(after) = rest.strip_prefix(' ')
        && !after.starts_with("-- ")
        && !after.starts_with("truncated=")
    {
        let (e, r) = parse_exit(after)?;
        exit = Some(e);
        rest = r;
    }
    let mut truncated = None;
    if let Some(after) = rest.strip_prefix(' ')
        && after.starts_with("truncated=")
    {
        let (size, r) = parse_truncated(after)?;
        truncated = Some(size);
        rest = r;
    }
    let command = rest.strip_prefix(" -- ")?;
    Some(ExecLine {
        time,
        pid,
        ppid,
        cwd,
        exe,
        ran,
        interp,
        interp_ran,
        exit,
        argv: unquote_argv(command)?,
        truncated,
        command: command.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::writer::{CommandRecord, MAX_RECORDED_ARG_BYTES, MAX_RECORDED_ARGV_BYTES};

    fn record(argv: Vec<Vec<u8>>, cwd: &[u8], exit: Option<CommandExit>) -> CommandRecord {
        CommandRecord {
            time: UNIX_EPOCH + Duration::from_millis(1_766_139_053_123),
            pid: 42,
            ppid: 7,
            cwd: OsString::from_vec(cwd.to_vec()).into(),
            exe: (argv.len() > 1).then(|| "/usr/bin/x y".into()),
            // The file reached through a link, for one argv length.
            ran: (argv.len() == 3).then(|| "/usr/bin/ran= z".into()),
            // A script's interpreter, for one argv length: written and read back.
            interp: (argv.len() == 2).then(|| "/tmp/it's -- here".into()),
            interp_ran: (argv.len() == 2).then(|| "/usr/bin/interp_ran=x".into()),
            argv: argv.into_iter().map(OsString::from_vec).collect(),
            exit,
        }
    }

    #[test]
    fn exec_lines_parse_back_to_their_record() {
        let cases = [
            record(vec![b"make".to_vec(), b"-j4".to_vec()], b"/work", None),
            record(
                vec![b"grep".to_vec(), b"a b -- c".to_vec(), b"\xff\n".to_vec()],
                b"/dir with -- spaces",
                Some(CommandExit::Code(3)),
            ),
            record(vec![b"sh".to_vec()], b"/", Some(CommandExit::Signal(9))),
            record(vec![], b"/w", None),
        ];
        for rec in cases {
            let line = rec.to_line();
            let Some(CommandLogLine::Exec(e)) = CommandLogLine::parse(&line) else {
                panic!("not parsed: {line}");
            };
            assert_eq!(e.time, rec.time, "{line}");
            assert_eq!((e.pid, e.ppid, e.exit), (42, 7, rec.exit), "{line}");
            assert_eq!(
                e.exe.map(OsString::from_vec),
                rec.exe.clone().map(|p| p.into_os_string()),
                "{line}"
            );
            assert_eq!(
                e.ran.map(OsString::from_vec),
                rec.ran.clone().map(|p| p.into_os_string()),
                "{line}"
            );
            assert_eq!(
                e.interp.map(OsString::from_vec),
                rec.interp.clone().map(|p| p.into_os_string()),
                "{line}"
            );
            assert_eq!(
                e.interp_ran.map(OsString::from_vec),
                rec.interp_ran.clone().map(|p| p.into_os_string()),
                "{line}"
            );
            assert_eq!(
                OsString::from_vec(e.cwd),
                rec.cwd.into_os_string(),
                "{line}"
            );
            let argv: Vec<OsString> = e.argv.into_iter().map(OsString::from_vec).collect();
            assert_eq!(argv, rec.argv, "{line}");
            assert!(line.ends_with(&format!(" -- {}\n", e.command)), "{line}");
        }
    }

    #[test]
    fn empty_arguments_cannot_grow_a_line_past_its_bound() {
        // 60,000 empty arguments: each costs a byte of the line's room.
        let mut argv = vec![b"true".to_vec()];
        argv.extend(std::iter::repeat_n(Vec::new(), 60_000));
        let line = record(argv, b"/w", None).to_line();
        assert!(
            line.len() < 3 * MAX_RECORDED_ARGV_BYTES + 200,
            "{} bytes",
            line.len()
        );
        let Some(CommandLogLine::Exec(e)) = CommandLogLine::parse(&line) else {
            panic!("not parsed");
        };
        let size = e.truncated.expect("the line says it was cut");
        assert_eq!((size.args, size.bytes), (60_001, 4));
    }

    #[test]
    fn long_argv_is_cut_and_the_line_says_its_full_size() {
        // 8 arguments of 128 KiB, as a hostile loop would pass: one line keeps 4 KiB of
        // each, 16 KiB in all, and states the full size.
        let mut argv = vec![b"prog".to_vec()];
        argv.extend((0..8).map(|i| vec![b'a' + i; 128 * 1024]));
        let rec = record(argv.clone(), b"/w", Some(CommandExit::Code(0)));
        let line = rec.to_line();
        assert!(
            line.len() < MAX_RECORDED_ARGV_BYTES + 200,
            "{} bytes",
            line.len()
        );
        let Some(CommandLogLine::Exec(e)) = CommandLogLine::parse(&line) else {
            panic!("not parsed: {line}");
        };
        assert_eq!(
            e.truncated,
            Some(ArgvSize {
                args: 9,
                bytes: 4 + 8 * 128 * 1024
            })
        );
        assert_eq!(e.exit, Some(CommandExit::Code(0)));
        assert_eq!(e.argv[0], b"prog");
        assert_eq!(e.argv[1], vec![b'a'; MAX_RECORDED_ARG_BYTES]);
        let kept: usize = e.argv.iter().map(Vec::len).sum();
        assert!(kept <= MAX_RECORDED_ARGV_BYTES, "{kept}");
        assert_eq!(
            e.argv.len(),
            5,
            "4 + 4 x 4 KiB fill the 16 KiB, the last one cut"
        );
        // Cut at a character boundary: no broken UTF-8 sequence is written.
        let wide = "é".repeat(MAX_RECORDED_ARG_BYTES);
        let line = record(vec![b"echo".to_vec(), wide.into_bytes()], b"/w", None).to_line();
        let Some(CommandLogLine::Exec(e)) = CommandLogLine::parse(&line) else {
            panic!("not parsed: {line}");
        };
        assert!(std::str::from_utf8(&e.argv[1]).is_ok());
        assert_eq!(e.argv[1].len(), MAX_RECORDED_ARG_BYTES);
        // Short argv: no marker.
        let line = record(vec![b"ls".to_vec()], b"/w", None).to_line();
        assert!(!line.contains("truncated="), "{line}");
    }

    #[test]
    fn exit_lines_parse() {
        let l = CommandLogLine::parse("2025-12-19T10:10:53.123Z exit pid=42 signal=9\n").unwrap();
        assert!(matches!(
            l,
            CommandLogLine::Exit {
                pid: 42,
                exit: CommandExit::Signal(9),
                ..
            }
        ));
        let l = CommandLogLine::parse("2025-12-19T10:10:53.123Z exit pid=1 status=0").unwrap();
        assert_eq!(
            l.time(),
            time::parse_rfc3339("2025-12-19T10:10:53.123Z").unwrap()
        );
    }

    #[test]
    fn edited_lines_do_not_parse() {
        for bad in [
            "",
            "garbage",
            "2025-12-19T10:10:53.123Z run pid=1 -- x",
            "2025-12-19T10:10:53.123Z exit pid=1 status=x",
            "2025-12-19T10:10:53.123Z exit pid=1 status=0 extra",
            "2025-12-19T10:10:53.123Z exec pid=1 ppid=0 cwd='/open -- x",
            "2025-12-19T10:10:53.123Z exec pid=1 ppid=0 cwd=/ -- 'x",
            "2025-12-19T10:10:53.123Z exec pid=1 ppid=0 cwd=/ exit=3 -- x",
            "2025-12-19T10:10:53.123Z exec pid=1 ppid=0 cwd=/ truncated=3 -- x",
            "2025-12-19T10:10:53.123Z exec pid=1 ppid=0 cwd=/ truncated=a,1 -- x",
            "yesterday exec pid=1 ppid=0 cwd=/ -- x",
        ] {
            assert_eq!(CommandLogLine::parse(bad), None, "{bad:?}");
        }
    }
}
