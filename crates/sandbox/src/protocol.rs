//! Messages from the sandbox's init process to the supervisor, over a pipe.
//!
//! Each message is `tag: u8, len: u32 (LE), payload`. Messages are small and written
//! once; the supervisor reads `Ready` (or the setup failure) as soon as it arrives and
//! the rest as it comes while it waits for the sandbox to end.

use std::io::{self, Read, Write};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Every layer is in place; `key=value` lines describing what is enforced.
    Ready(String),
    /// Setup failed: the layer and the full message.
    SetupFailed { layer: String, message: String },
    /// The command was forked with this pid (as seen inside the sandbox).
    Started(i32),
    /// The command could not be executed (errno of execve).
    ExecFailed(i32),
    /// The command ended with this wait status.
    Exited(i32),
    /// Sent after `Exited` when init has killed and reaped every other process of
    /// the sandbox: nothing of it runs any more but init, which only exits. The
    /// supervisor completes the record from here instead of waiting for init's own
    /// end (the namespaces' teardown), and reaps init afterwards.
    Alone,
    /// A limit was reached, e.g. `disk` with the full mount point.
    LimitHit {
        limit: String,
        detail: String,
        unix_ms: u64,
    },
}

impl Message {
    pub fn encode(&self) -> Vec<u8> {
        let (tag, payload): (u8, Vec<u8>) = match self {
            Self::Ready(text) => (b'R', text.as_bytes().to_vec()),
            Self::SetupFailed { layer, message } => {
                (b'E', format!("{layer}\0{message}").into_bytes())
            }
            Self::Started(pid) => (b'P', pid.to_le_bytes().to_vec()),
            Self::ExecFailed(errno) => (b'X', errno.to_le_bytes().to_vec()),
            Self::Exited(status) => (b'S', status.to_le_bytes().to_vec()),
            Self::Alone => (b'A', Vec::new()),
            Self::LimitHit {
                limit,
                detail,
                unix_ms,
            } => (b'L', format!("{unix_ms}\0{limit}\0{detail}").into_bytes()),
        };
        let mut out = Vec::with_capacity(5 + payload.len());
        out.push(tag);
        out.extend_from_slice(&u32::try_from(payload.len()).unwrap_or(0).to_le_bytes());
        out.extend_from_slice(&payload);
        out
    }

    pub fn send(&self, w: &mut impl Write) -> io::Result<()> {
        w.write_all(&self.encode())
    }

    /// Decodes every message in `bytes`; a truncated tail is ignored.
    pub fn decode_all(mut bytes: &[u8]) -> Vec<Self> {
        let mut out = Vec::new();
        while bytes.len() >= 5 {
            let tag = bytes[0];
            let len = u32::from_le_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
            let Some(payload) = bytes.get(5..5 + len) else {
                break;
            };
            let int = || {
                payload
                    .try_into()
                    .map(i32::from_le_bytes)
                    .unwrap_or(i32::MIN)
            };
            match tag {
                b'R' => out.push(Self::Ready(String::from_utf8_lossy(payload).into_owned())),
                b'E' => {
                    let text = String::from_utf8_lossy(payload);
                    let (layer, message) = text.split_once('\0').unwrap_or(("sandbox", &text));
                    out.push(Self::SetupFailed {
                        layer: layer.to_owned(),
                        message: message.to_owned(),
                    });
                }
                b'P' => out.push(Self::Started(int())),
                b'X' => out.push(Self::ExecFailed(int())),
                b'S' => out.push(Self::Exited(int())),
                b'A' => out.push(Self::Alone),
                b'L' => {
                    let text = String::from_utf8_lossy(payload);
                    let mut parts = text.splitn(3, '\0');
                    let unix_ms = parts.next().and_then(|t| t.parse().ok()).unwrap_or(0);
                    out.push(Self::LimitHit {
                        limit: parts.next().unwrap_or("").to_owned(),
                        detail: parts.next().unwrap_or("").to_owned(),
                        unix_ms,
                    });
                }
                _ => {}
            }
            bytes = &bytes[5 + len..];
        }
        out
    }

    /// Reads the next message; `None` at end-of-file (or a truncated message).
    pub fn read_one(r: &mut impl Read) -> io::Result<Option<Self>> {
        let mut header = [0u8; 5];
        if let Err(e) = r.read_exact(&mut header) {
            return match e.kind() {
                io::ErrorKind::UnexpectedEof => Ok(None),
                _ => Err(e),
            };
        }
        let len = u32::from_le_bytes([header[1], header[2], header[3], header[4]]) as usize;
        // Init writes a few hundred bytes at most; anything larger is corrupt.
        if len > 1 << 20 {
            return Ok(None);
        }
        let mut bytes = header.to_vec();
        bytes.resize(5 + len, 0);
        if let Err(e) = r.read_exact(&mut bytes[5..]) {
            return match e.kind() {
                io::ErrorKind::UnexpectedEof => Ok(None),
                _ => Err(e),
            };
        }
        Ok(Self::decode_all(&bytes).into_iter().next())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_ignores_truncation() {
        let msgs = vec![
            Message::Ready("landlock_abi=7".into()),
            Message::SetupFailed {
                layer: "seccomp".into(),
                message: "boom".into(),
            },
            Message::Started(2),
            Message::ExecFailed(2),
            Message::Exited(256),
            Message::Alone,
            Message::LimitHit {
                limit: "disk".into(),
                detail: "/tmp".into(),
                unix_ms: 17,
            },
        ];
        let mut bytes: Vec<u8> = msgs.iter().flat_map(Message::encode).collect();
        assert_eq!(Message::decode_all(&bytes), msgs);
        let mut reader = &bytes[..];
        for m in &msgs {
            assert_eq!(Message::read_one(&mut reader).unwrap().as_ref(), Some(m));
        }
        assert_eq!(Message::read_one(&mut reader).unwrap(), None);
        bytes.truncate(bytes.len() - 2);
        assert_eq!(Message::decode_all(&bytes), msgs[..6]);
        let mut reader = &bytes[..];
        for m in &msgs[..6] {
            assert_eq!(Message::read_one(&mut reader).unwrap().as_ref(), Some(m));
        }
        assert_eq!(Message::read_one(&mut reader).unwrap(), None);
    }
}
