//! The exec channel of a persistent sandbox: `session-…/exec.sock`, owner-only, next
//! to `control.sock`. A client connects once per command and sends one JSON line,
//! [`ExecRequest`], with its stdin, stdout and stderr attached (SCM_RIGHTS); then
//! [`ClientLine`]s (signals, window sizes). The host answers with [`HostLine`]s:
//! `started`, then `exited` (or `error`).

use serde::{Deserialize, Serialize};

/// The socket's file name inside the session's folder.
pub const EXEC_SOCKET: &str = "exec.sock";

/// The protocol's version.
pub const VERSION: u32 = 1;

/// The longest request line (argv and environment included).
pub const MAX_REQUEST: usize = 512 * 1024;

/// One command to start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecRequest {
    pub v: u32,
    pub argv: Vec<String>,
    /// Added to (or replacing) the sandbox's environment.
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// The working directory inside; the sandbox's workdir when absent.
    #[serde(default)]
    pub cwd: Option<String>,
    /// A terminal of this size (rows, columns) instead of the passed descriptors;
    /// the client's stdin then arrives through the first descriptor as a pipe.
    #[serde(default)]
    pub tty: Option<(u16, u16)>,
    /// A time limit for this command, in milliseconds (the sandbox's `--timeout`
    /// still applies when it is shorter).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// What a client sends after its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum ClientLine {
    /// Deliver this signal to the command's process group.
    Signal { signal: i32 },
    /// The client's terminal changed size.
    Resize { rows: u16, cols: u16 },
}

/// What the host answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum HostLine {
    /// The command was forked: its request id in the session and its pid inside.
    Started { id: u64, pid: i32 },
    /// It ended: the exit status a shell would give (128+N for signal N), the
    /// signal if one ended it, whether its time-out did.
    Exited {
        code: i32,
        signal: Option<i32>,
        timed_out: bool,
    },
    /// It could not be started, or the request was refused.
    Error { message: String, code: i32 },
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_back_as_written() {
        let request = ExecRequest {
            v: VERSION,
            argv: vec!["sh".into(), "-c".into(), "echo hi".into()],
            env: vec![("A".into(), "b".into())],
            cwd: Some("/work".into()),
            tty: Some((24, 80)),
            timeout_ms: Some(1500),
        };
        let text = serde_json::to_string(&request).unwrap();
        assert_eq!(serde_json::from_str::<ExecRequest>(&text).unwrap(), request);
        let minimal: ExecRequest = serde_json::from_str(r#"{"v":1,"argv":["true"]}"#).unwrap();
        assert_eq!((minimal.cwd, minimal.tty), (None, None));
        for line in [
            HostLine::Started { id: 1, pid: 7 },
            HostLine::Exited {
                code: 130,
                signal: Some(2),
                timed_out: false,
            },
        ] {
            let text = serde_json::to_string(&line).unwrap();
            assert_eq!(serde_json::from_str::<HostLine>(&text).unwrap(), line);
        }
        assert_eq!(
            serde_json::from_str::<ClientLine>(r#"{"op":"signal","signal":2}"#).unwrap(),
            ClientLine::Signal { signal: 2 }
        );
    }
}
