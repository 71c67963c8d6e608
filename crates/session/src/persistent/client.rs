//! The client side of the exec channel: runs one command in a persistent sandbox with
//! this process's stdio, as `sandbox exec` does, and returns its exit status.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};

use super::protocol::{ClientLine, EXEC_SOCKET, ExecRequest, HostLine, VERSION};

/// One command for [`exec`].
#[derive(Debug, Clone, Default)]
pub struct ExecOptions {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<String>,
    /// Give it a terminal (our stdin must be one).
    pub tty: bool,
    /// A time limit for this command (the sandbox's `--timeout` applies if shorter).
    pub timeout: Option<std::time::Duration>,
}

/// How a command run by [`exec`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Its exit status (128+N for signal N; 124 when its time-out ended it).
    Exited { code: i32, timed_out: bool },
    /// It never ran: why, and the status to exit with.
    Refused { message: String, code: i32 },
}

/// Signals passed on to the command (without a terminal; with one, the keys that
/// make them go through the terminal itself).
const FORWARDED: &[libc::c_int] = &[libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

fn connect(session_dir: &Path) -> Result<UnixStream> {
    let socket = session_dir.join(EXEC_SOCKET);
    let stream = vg_control::short_path::with_socket_path(&socket, |p| UnixStream::connect(p))
        .with_context(|| {
            format!(
                "cannot reach the sandbox's exec channel {} (is it still running? `vectraguard sandbox ls`)",
                socket.display()
            )
        })?;
    // Our descriptors go to whoever listens: only to a host of ours (or root's).
    let own = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self")
            .map(|m| m.uid())
            .unwrap_or(u32::MAX)
    };
    let peer = vg_control::peer::peer_of(&stream).context("cannot check who serves the sandbox")?;
    if peer.uid != own && peer.uid != 0 {
        bail!(
            "{} is served by another user (uid {}): refusing to hand it this terminal",
            socket.display(),
            peer.uid
        );
    }
    Ok(stream)
}

/// Sends the request line with the command's stdin, stdout and stderr.
fn send_request(stream: &UnixStream, request: &ExecRequest, fds: [&OwnedFd; 3]) -> Result<()> {
    let mut line = serde_json::to_vec(request)?;
    line.push(b'\n');
    let sent = vg_sandbox::fdpass::send(stream.as_fd(), &line, &fds.map(AsFd::as_fd))
        .context("cannot send the request to the sandbox")?;
    (&*stream)
        .write_all(&line[sent..])
        .context("cannot send the request to the sandbox")
}

/// What [`exec_captured`] collected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    pub ended: Ended,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Output past `max_output` was dropped (per stream).
    pub truncated: bool,
}

/// Runs `argv` in the sandbox with `input` on its stdin and its output collected (up
/// to `max_output` bytes per stream; the rest is drained and dropped), for front
/// ends that are not a terminal (the MCP server).
pub fn exec_captured(
    session_dir: &Path,
    options: ExecOptions,
    input: Vec<u8>,
    max_output: usize,
) -> Result<Captured> {
    let stream = connect(session_dir)?;
    let (stdin_r, mut stdin_w) = std::io::pipe().context("cannot create a pipe")?;
    let (out_r, out_w) = std::io::pipe().context("cannot create a pipe")?;
    let (err_r, err_w) = std::io::pipe().context("cannot create a pipe")?;
    let request = ExecRequest {
        v: VERSION,
        argv: options.argv,
        env: options.env,
        cwd: options.cwd,
        tty: None,
        timeout_ms: options.timeout.map(millis),
    };
    let (stdin_r, out_w, err_w): (OwnedFd, OwnedFd, OwnedFd) =
        (stdin_r.into(), out_w.into(), err_w.into());
    send_request(&stream, &request, [&stdin_r, &out_w, &err_w])?;
    drop((stdin_r, out_w, err_w));
    let feeder = std::thread::spawn(move || {
        let _ = stdin_w.write_all(&input);
    });
    let collect = |mut from: std::io::PipeReader| {
        std::thread::spawn(move || {
            use std::io::Read;
            let mut kept = Vec::new();
            let mut cut = false;
            let mut buf = [0u8; 16 * 1024];
            loop {
                match from.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let room = max_output.saturating_sub(kept.len());
                        kept.extend_from_slice(&buf[..n.min(room)]);
                        cut |= n > room;
                    }
                }
            }
            (kept, cut)
        })
    };
    let (out, err) = (collect(out_r), collect(err_r));
    let ended = wait(&stream)?;
    let _ = feeder.join();
    let (stdout, cut_out) = out.join().unwrap_or_default();
    let (stderr, cut_err) = err.join().unwrap_or_default();
    Ok(Captured {
        ended,
        stdout,
        stderr,
        truncated: cut_out || cut_err,
    })
}

/// Runs `options` in the sandbox recorded in `session_dir`. Call it before starting
/// other threads: it blocks the signals it forwards.
pub fn exec(session_dir: &Path, options: ExecOptions) -> Result<Ended> {
    let stream = connect(session_dir)?;
    let stdin_is_terminal = vg_sandbox::terminal::is_terminal(std::io::stdin());
    if options.tty && !stdin_is_terminal {
        bail!("-t needs a terminal on stdin; run without -t to pass stdin as it is");
    }
    let tty = if options.tty {
        let size = vg_sandbox::terminal::size(std::io::stdin().as_fd())
            .unwrap_or(vg_sandbox::terminal::Size { rows: 24, cols: 80 });
        Some((size.rows, size.cols))
    } else {
        None
    };
    // A terminal is never handed over: its keys go through a pipe.
    let (stdin, keys): (OwnedFd, Option<std::io::PipeWriter>) = if stdin_is_terminal {
        let (r, w) = std::io::pipe().context("cannot create the input pipe")?;
        (r.into(), Some(w))
    } else {
        (
            std::io::stdin()
                .as_fd()
                .try_clone_to_owned()
                .context("cannot pass stdin")?,
            None,
        )
    };
    let stdout = std::io::stdout().as_fd().try_clone_to_owned()?;
    let stderr = std::io::stderr().as_fd().try_clone_to_owned()?;
    let request = ExecRequest {
        v: VERSION,
        argv: options.argv,
        env: options.env,
        cwd: options.cwd,
        tty,
        timeout_ms: options.timeout.map(millis),
    };
    send_request(&stream, &request, [&stdin, &stdout, &stderr])?;
    drop((stdin, stdout, stderr));

    // Signals (or, with a terminal, window sizes) as lines to the host.
    let writer = stream.try_clone()?;
    let watched: Vec<libc::c_int> = if tty.is_some() {
        vec![libc::SIGWINCH]
    } else {
        FORWARDED.to_vec()
    };
    vg_sandbox::signals::forward(&watched, move |signal| {
        let line = if signal == libc::SIGWINCH {
            match vg_sandbox::terminal::size(std::io::stdin().as_fd()) {
                Ok(size) => ClientLine::Resize {
                    rows: size.rows,
                    cols: size.cols,
                },
                Err(_) => return,
            }
        } else {
            ClientLine::Signal { signal }
        };
        if let Ok(mut text) = serde_json::to_vec(&line) {
            text.push(b'\n');
            let _ = (&writer).write_all(&text);
        }
    })
    .context("cannot watch for signals")?;
    let raw = match tty {
        Some(_) => Some(
            vg_sandbox::terminal::RawTerminal::enter()
                .map_err(|e| anyhow!("cannot put the terminal in raw mode: {e}"))?,
        ),
        None => None,
    };
    if let Some(keys) = keys {
        std::thread::spawn(move || crate::record::relay_terminal_input(keys, None));
    }
    let ended = wait(&stream);
    drop(raw);
    ended
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn wait(stream: &UnixStream) -> Result<Ended> {
    let mut lines = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line)? == 0 {
            bail!("the sandbox hung up before the command ended (it was stopped?)");
        }
        match serde_json::from_str::<HostLine>(&line)
            .with_context(|| format!("unexpected answer from the sandbox: {line:?}"))?
        {
            HostLine::Started { .. } => {}
            HostLine::Exited {
                code, timed_out, ..
            } => return Ok(Ended::Exited { code, timed_out }),
            HostLine::Error { message, code } => return Ok(Ended::Refused { message, code }),
        }
    }
}
