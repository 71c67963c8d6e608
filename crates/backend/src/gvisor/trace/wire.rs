//! The remote sink's wire format, as gVisor release 20221219 (Debian's `runsc`
//! 0.0~20221219) speaks it: learnt from `pkg/sentry/seccheck/sinks/remote/`
//! (`remote.go`, `wire/wire.go`) and `pkg/sentry/seccheck/points/*.proto`.
//!
//! - One `SOCK_SEQPACKET` record per message, so the socket keeps the
//!   boundaries.
//! - The connection opens with a [`Handshake`] each way, bare protobuf without a
//!   header: the sentry's first (sent by the `runsc` process that connects,
//!   before it hands the socket to the sandbox), then ours; we never write
//!   again.
//! - Every later record is the sentry's: an 8-byte little-endian header
//!   (`u16` header size, `u16` [message type](kind), `u32` count of points
//!   dropped so far, wrapping) then the protobuf payload, which starts at the
//!   header size (a newer sentry may send a longer header).
//!
//! The structs below declare only the fields this reader uses; prost skips
//! the others (`env`, `binary_sha256`, ...). Every `string` of the `.proto`
//! files is read as `bytes`: the same encoding, and a byte string that is not
//! UTF-8 then stays exactly what it was instead of failing the message.

use std::fmt;

/// The protocol version this reader speaks (`wire.CurrentVersion`), sent in
/// its handshake; also the oldest it accepts from the sentry.
pub const PROTOCOL_VERSION: u32 = 1;

/// Bytes of the header this version defines (`wire.HeaderStructSize`).
pub const HEADER_SIZE: usize = 8;

/// The message types of `common.proto`'s `MessageType` that this reader
/// decodes; every other value is skipped (new ones may be added freely).
pub mod kind {
    pub const CONTAINER_START: u16 = 1;
    pub const SENTRY_CLONE: u16 = 2;
    pub const SENTRY_EXEC: u16 = 3;
    pub const SENTRY_EXIT_NOTIFY_PARENT: u16 = 4;
    pub const SYSCALL_RAW: u16 = 6;
}

/// `gvisor.common.Handshake`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Handshake {
    #[prost(uint32, tag = "1")]
    pub version: u32,
}

/// `gvisor.common.Credentials`: the ids of the sentry's root user namespace.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Credentials {
    #[prost(uint32, tag = "1")]
    pub real_uid: u32,
    #[prost(uint32, tag = "2")]
    pub effective_uid: u32,
    #[prost(uint32, tag = "4")]
    pub real_gid: u32,
    #[prost(uint32, tag = "5")]
    pub effective_gid: u32,
}

/// `gvisor.common.ContextData`: what the point's context fields asked for
/// (thread id 2, start times 3 and 5, container id 6 and process name 9 are
/// not used here).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContextData {
    /// The sentry's `CLOCK_REALTIME` at the point, in nanoseconds.
    #[prost(int64, tag = "1")]
    pub time_ns: i64,
    /// The thread group (process) id in the sandbox's root PID namespace.
    #[prost(int32, tag = "4")]
    pub thread_group_id: i32,
    #[prost(message, optional, tag = "7")]
    pub credentials: Option<Credentials>,
    #[prost(bytes = "vec", tag = "8")]
    pub cwd: Vec<u8>,
}

/// `gvisor.container.Start`: the container's first process, which no exec
/// point reports (the sentry loads it itself).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Start {
    #[prost(message, optional, tag = "1")]
    pub context_data: Option<ContextData>,
    /// The OCI spec's `process.cwd`.
    #[prost(bytes = "vec", tag = "3")]
    pub cwd: Vec<u8>,
    /// The OCI spec's `process.args`.
    #[prost(bytes = "vec", repeated, tag = "4")]
    pub args: Vec<Vec<u8>>,
}

/// `gvisor.sentry.CloneInfo`; its context is the task that called clone.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CloneInfo {
    #[prost(message, optional, tag = "1")]
    pub context_data: Option<ContextData>,
    #[prost(int32, tag = "4")]
    pub created_thread_group_id: i32,
    /// The flags passed to clone(2).
    #[prost(uint64, tag = "6")]
    pub flags: u64,
}

/// `gvisor.sentry.ExecveInfo`; its context is the task before the exec.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExecveInfo {
    #[prost(message, optional, tag = "1")]
    pub context_data: Option<ContextData>,
    /// The file executed, in the mount namespace that opened it.
    #[prost(bytes = "vec", tag = "2")]
    pub binary_path: Vec<u8>,
    #[prost(bytes = "vec", repeated, tag = "3")]
    pub argv: Vec<Vec<u8>>,
}

/// `gvisor.sentry.ExitNotifyParentInfo`; its context is the exiting
/// thread group's leader.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExitNotifyParentInfo {
    #[prost(message, optional, tag = "1")]
    pub context_data: Option<ContextData>,
    /// A wait(2) status.
    #[prost(int32, tag = "2")]
    pub exit_status: i32,
}

/// `gvisor.syscall.Exit`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SyscallExit {
    #[prost(int64, tag = "1")]
    pub result: i64,
    #[prost(int64, tag = "2")]
    pub errorno: i64,
}

/// `gvisor.syscall.Syscall`, a raw syscall point: `exit` is present only on
/// the exit point.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Syscall {
    #[prost(message, optional, tag = "1")]
    pub context_data: Option<ContextData>,
    #[prost(message, optional, tag = "2")]
    pub exit: Option<SyscallExit>,
    #[prost(uint64, tag = "4")]
    pub sysno: u64,
}

/// A message's header, as sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub size: u16,
    pub kind: u16,
    /// Points the sentry failed to send so far, wrapping after `u32::MAX`.
    pub dropped: u32,
}

/// Why a record could not be split into header and payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderError {
    /// Fewer bytes than this version's header.
    Short(usize),
    /// The header claims a size under this version's or past the record.
    BadSize { claimed: u16, record: usize },
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::Short(n) => {
                write!(
                    f,
                    "a record of {n} bytes, shorter than the {HEADER_SIZE}-byte header"
                )
            }
            HeaderError::BadSize { claimed, record } => write!(
                f,
                "a header claiming {claimed} bytes in a record of {record} (at least {HEADER_SIZE})"
            ),
        }
    }
}

/// Splits one record into its header and its payload.
pub fn split(record: &[u8]) -> Result<(Header, &[u8]), HeaderError> {
    let [s0, s1, k0, k1, d0, d1, d2, d3, ..] = *record else {
        return Err(HeaderError::Short(record.len()));
    };
    let header = Header {
        size: u16::from_le_bytes([s0, s1]),
        kind: u16::from_le_bytes([k0, k1]),
        dropped: u32::from_le_bytes([d0, d1, d2, d3]),
    };
    let start = usize::from(header.size);
    if start < HEADER_SIZE || start > record.len() {
        return Err(HeaderError::BadSize {
            claimed: header.size,
            record: record.len(),
        });
    }
    Ok((header, &record[start..]))
}

/// The record of a message as the sentry sends it.
#[cfg(test)]
pub fn record(kind: u16, dropped: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_SIZE + payload.len());
    out.extend_from_slice(&8u16.to_le_bytes());
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&dropped.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn a_header_and_its_payload() {
        let rec = record(kind::SENTRY_EXEC, 7, b"abc");
        assert_eq!(rec[..8], [8, 0, 3, 0, 7, 0, 0, 0]);
        let (h, payload) = split(&rec).unwrap();
        assert_eq!(
            h,
            Header {
                size: 8,
                kind: 3,
                dropped: 7
            }
        );
        assert_eq!(payload, b"abc");
    }

    #[test]
    fn a_longer_header_from_a_newer_sentry_is_skipped_over() {
        let mut rec = vec![12, 0, 4, 0, 0, 0, 0, 0, 0xee, 0xee, 0xee, 0xee];
        rec.extend_from_slice(b"xy");
        let (h, payload) = split(&rec).unwrap();
        assert_eq!((h.size, h.kind), (12, 4));
        assert_eq!(payload, b"xy");
    }

    #[test]
    fn short_and_inconsistent_headers_are_errors() {
        assert_eq!(split(&[8, 0, 3]), Err(HeaderError::Short(3)));
        assert_eq!(split(&[]), Err(HeaderError::Short(0)));
        assert_eq!(
            split(&[4, 0, 3, 0, 0, 0, 0, 0]),
            Err(HeaderError::BadSize {
                claimed: 4,
                record: 8
            })
        );
        assert_eq!(
            split(&[9, 0, 3, 0, 0, 0, 0, 0]),
            Err(HeaderError::BadSize {
                claimed: 9,
                record: 8
            })
        );
    }

    /// Bytes as this runsc build sent them (captured from `runsc do
    /// /bin/echo hi`), decoded with the field numbers above.
    #[test]
    fn an_exec_record_captured_from_runsc() {
        let hex = "0a1d08e8e1eebdab9181f618100320033a0042072f746d702f67764a027368\
                   120d2f7573722f62696e2f6563686f1a092f62696e2f6563686f1a026869";
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let info = ExecveInfo::decode(bytes.as_slice()).unwrap();
        let ctx = info.context_data.unwrap();
        assert_eq!(ctx.thread_group_id, 3);
        assert_eq!(ctx.cwd, b"/tmp/gv");
        assert_eq!(ctx.credentials, Some(Credentials::default()));
        assert!(ctx.time_ns > 0);
        assert_eq!(info.binary_path, b"/usr/bin/echo");
        assert_eq!(info.argv, [b"/bin/echo".to_vec(), b"hi".to_vec()]);
    }
}
