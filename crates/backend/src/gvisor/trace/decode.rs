//! From the sentry's records to [`GvisorEvent`]s: pure, no I/O. The state kept
//! between records is what one record alone does not say: each process's
//! parent (from clone points), which processes have an exec reported and not
//! yet confirmed by its syscall's exit, and the dropped count last seen.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use prost::Message;

use super::GvisorEvent;
use super::wire::{self, ContextData, kind};

/// Live processes whose parent is remembered; past it a new process's parent
/// is unknown (`ppid: None`) rather than the memory unbounded. gVisor's
/// default process limit is far under it.
const MAX_TRACKED: usize = 1 << 16;

/// clone(2)'s `CLONE_PARENT`: the child's parent is the caller's parent.
const CLONE_PARENT: u64 = 0x8000;

/// execve(2) and execveat(2) on x86-64 and arm64 (raw syscall points carry the
/// host architecture's numbers).
#[cfg(target_arch = "x86_64")]
const EXEC_SYSCALLS: [u64; 2] = [59, 322];
#[cfg(target_arch = "aarch64")]
const EXEC_SYSCALLS: [u64; 2] = [221, 281];

/// The raw syscall points [`super::pod_init_config`] enables to confirm execs.
#[cfg(target_arch = "x86_64")]
pub const EXEC_SYSCALL_POINTS: [&str; 4] = [
    "syscall/sysno/59/enter",
    "syscall/sysno/59/exit",
    "syscall/sysno/322/enter",
    "syscall/sysno/322/exit",
];
#[cfg(target_arch = "aarch64")]
pub const EXEC_SYSCALL_POINTS: [&str; 4] = [
    "syscall/sysno/221/enter",
    "syscall/sysno/221/exit",
    "syscall/sysno/281/enter",
    "syscall/sysno/281/exit",
];

/// The decoding state of one connection.
#[derive(Debug, Default)]
pub struct Tracker {
    /// Child process → the process that created it, while the child lives.
    parents: HashMap<i32, i32>,
    /// Processes whose exec point arrived and whose execve syscall has not
    /// returned yet.
    exec_reported: HashSet<i32>,
    /// The header's dropped count in the previous record.
    dropped: u32,
    /// Records of a type this reader does not decode.
    pub skipped: u64,
}

impl Tracker {
    /// Decodes one record (header included) and gives `emit` what it says:
    /// [`GvisorEvent::Dropped`] first when the sentry's dropped count grew.
    pub fn feed(&mut self, record: &[u8], emit: &mut dyn FnMut(GvisorEvent)) {
        let (header, payload) = match wire::split(record) {
            Ok(split) => split,
            Err(e) => return emit(GvisorEvent::Undecodable(e.to_string())),
        };
        let newly_dropped = header.dropped.wrapping_sub(self.dropped);
        self.dropped = header.dropped;
        if newly_dropped != 0 {
            emit(GvisorEvent::Dropped(newly_dropped));
        }
        let decoded = match header.kind {
            kind::CONTAINER_START => decode(payload).and_then(|m| self.start(m)),
            kind::SENTRY_CLONE => decode(payload).and_then(|m| self.clone(m)),
            kind::SENTRY_EXEC => decode(payload).and_then(|m| self.exec(m)),
            kind::SENTRY_EXIT_NOTIFY_PARENT => decode(payload).and_then(|m| self.exit(m)),
            kind::SYSCALL_RAW => decode(payload).and_then(|m| self.syscall(m)),
            _ => {
                self.skipped += 1;
                Ok(None)
            }
        };
        match decoded {
            Ok(Some(event)) => emit(event),
            Ok(None) => {}
            Err(reason) => emit(GvisorEvent::Undecodable(format!(
                "message type {}: {reason}",
                header.kind
            ))),
        }
    }

    fn start(&mut self, m: wire::Start) -> Result<Option<GvisorEvent>, String> {
        let ctx = context(m.context_data)?;
        let path = m.args.first().cloned().unwrap_or_default();
        Ok(Some(GvisorEvent::Exec {
            time: time(&ctx),
            pid: ctx.thread_group_id,
            ppid: None,
            argv: os_strings(m.args),
            path: path_of(path),
            cwd: path_of(m.cwd),
            uid: ctx.credentials.as_ref().map(|c| c.effective_uid),
            gid: ctx.credentials.as_ref().map(|c| c.effective_gid),
        }))
    }

    fn clone(&mut self, m: wire::CloneInfo) -> Result<Option<GvisorEvent>, String> {
        let ctx = context(m.context_data)?;
        let child = m.created_thread_group_id;
        if child <= 0 {
            return Err(format!("a clone creating thread group {child}"));
        }
        // A new thread (CLONE_THREAD) joins the caller's thread group.
        if child == ctx.thread_group_id {
            return Ok(None);
        }
        let parent = if m.flags & CLONE_PARENT != 0 {
            self.parents.get(&ctx.thread_group_id).copied()
        } else {
            Some(ctx.thread_group_id)
        };
        if let Some(parent) = parent
            && (self.parents.len() < MAX_TRACKED || self.parents.contains_key(&child))
        {
            self.parents.insert(child, parent);
        }
        // Its creator is the caller even under CLONE_PARENT: what a time-out of the
        // caller's command must reach, wherever the child is reparented.
        Ok(Some(GvisorEvent::Clone {
            creator: ctx.thread_group_id,
            child,
        }))
    }

    fn exec(&mut self, m: wire::ExecveInfo) -> Result<Option<GvisorEvent>, String> {
        let ctx = context(m.context_data)?;
        let pid = ctx.thread_group_id;
        if self.exec_reported.len() < MAX_TRACKED {
            self.exec_reported.insert(pid);
        }
        Ok(Some(GvisorEvent::Exec {
            time: time(&ctx),
            pid,
            ppid: self.parents.get(&pid).copied(),
            argv: os_strings(m.argv),
            path: path_of(m.binary_path),
            cwd: path_of(ctx.cwd),
            uid: ctx.credentials.as_ref().map(|c| c.effective_uid),
            gid: ctx.credentials.as_ref().map(|c| c.effective_gid),
        }))
    }

    fn exit(&mut self, m: wire::ExitNotifyParentInfo) -> Result<Option<GvisorEvent>, String> {
        let ctx = context(m.context_data)?;
        let pid = ctx.thread_group_id;
        self.parents.remove(&pid);
        self.exec_reported.remove(&pid);
        Ok(Some(GvisorEvent::Exit {
            time: time(&ctx),
            pid,
            status: m.exit_status,
        }))
    }

    /// An execve/execveat syscall's exit: a successful one with no exec point
    /// before it is an exec the sentry could not send.
    fn syscall(&mut self, m: wire::Syscall) -> Result<Option<GvisorEvent>, String> {
        if !EXEC_SYSCALLS.contains(&m.sysno) {
            return Ok(None);
        }
        // The enter point is enabled only for its context fields (see
        // pod_init_config); it says nothing yet.
        let Some(exit) = m.exit else {
            return Ok(None);
        };
        let ctx = context(m.context_data)?;
        let pid = ctx.thread_group_id;
        let reported = self.exec_reported.remove(&pid);
        let succeeded = exit.result == 0 && exit.errorno == 0;
        Ok(
            (succeeded && !reported).then(|| GvisorEvent::UnreportedExec {
                pid,
                ppid: self.parents.get(&pid).copied(),
            }),
        )
    }
}

fn decode<M: Message + Default>(payload: &[u8]) -> Result<M, String> {
    M::decode(payload).map_err(|e| format!("undecodable payload of {} bytes: {e}", payload.len()))
}

/// The context a point must carry: without the process id nothing else in
/// it can be attributed.
fn context(ctx: Option<ContextData>) -> Result<ContextData, String> {
    match ctx {
        Some(ctx) if ctx.thread_group_id > 0 => Ok(ctx),
        Some(ctx) => Err(format!(
            "process id {} (context field group_id missing?)",
            ctx.thread_group_id
        )),
        None => Err("no context data (context field group_id missing)".into()),
    }
}

fn time(ctx: &ContextData) -> Option<SystemTime> {
    let ns = u64::try_from(ctx.time_ns).ok().filter(|&ns| ns > 0)?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::from_nanos(ns))
}

fn os_strings(v: Vec<Vec<u8>>) -> Vec<OsString> {
    v.into_iter().map(OsString::from_vec).collect()
}

fn path_of(bytes: Vec<u8>) -> PathBuf {
    PathBuf::from(OsString::from_vec(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gvisor::trace::wire::{Credentials, record};

    fn ctx(pid: i32) -> Option<ContextData> {
        Some(ContextData {
            time_ns: 1_700_000_000_123_456_789,
            thread_group_id: pid,
            credentials: Some(Credentials {
                real_uid: 1000,
                effective_uid: 1001,
                real_gid: 100,
                effective_gid: 101,
            }),
            cwd: b"/work".to_vec(),
        })
    }

    fn feed_all(records: &[Vec<u8>]) -> (Vec<GvisorEvent>, Tracker) {
        let mut t = Tracker::default();
        let mut out = Vec::new();
        for r in records {
            t.feed(r, &mut |e| out.push(e));
        }
        (out, t)
    }

    fn clone_rec(parent: i32, child: i32, flags: u64) -> Vec<u8> {
        let m = wire::CloneInfo {
            context_data: ctx(parent),
            created_thread_group_id: child,
            flags,
        };
        record(kind::SENTRY_CLONE, 0, &m.encode_to_vec())
    }

    fn exec_rec(pid: i32, argv: &[&[u8]]) -> Vec<u8> {
        let m = wire::ExecveInfo {
            context_data: ctx(pid),
            binary_path: argv[0].to_vec(),
            argv: argv.iter().map(|a| a.to_vec()).collect(),
        };
        record(kind::SENTRY_EXEC, 0, &m.encode_to_vec())
    }

    fn exit_rec(pid: i32, status: i32) -> Vec<u8> {
        let m = wire::ExitNotifyParentInfo {
            context_data: ctx(pid),
            exit_status: status,
        };
        record(kind::SENTRY_EXIT_NOTIFY_PARENT, 0, &m.encode_to_vec())
    }

    fn syscall_rec(pid: i32, sysno: u64, exit: Option<(i64, i64)>) -> Vec<u8> {
        let m = wire::Syscall {
            context_data: ctx(pid),
            exit: exit.map(|(result, errorno)| wire::SyscallExit { result, errorno }),
            sysno,
        };
        record(kind::SYSCALL_RAW, 0, &m.encode_to_vec())
    }

    fn exec_event(pid: i32, ppid: Option<i32>, argv: &[&str]) -> GvisorEvent {
        GvisorEvent::Exec {
            time: Some(SystemTime::UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789)),
            pid,
            ppid,
            argv: argv.iter().map(OsString::from).collect(),
            path: PathBuf::from(argv[0]),
            cwd: PathBuf::from("/work"),
            uid: Some(1001),
            gid: Some(101),
        }
    }

    fn exit_event(pid: i32, status: i32) -> GvisorEvent {
        GvisorEvent::Exit {
            time: Some(SystemTime::UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789)),
            pid,
            status,
        }
    }

    #[test]
    fn the_container_start_is_the_first_exec() {
        let m = wire::Start {
            context_data: ctx(1),
            cwd: b"/home/u".to_vec(),
            args: vec![b"sh".to_vec(), b"-c".to_vec(), b"true".to_vec()],
        };
        let (events, _) = feed_all(&[record(kind::CONTAINER_START, 0, &m.encode_to_vec())]);
        let mut expected = exec_event(1, None, &["sh", "-c", "true"]);
        if let GvisorEvent::Exec { cwd, .. } = &mut expected {
            *cwd = PathBuf::from("/home/u");
        }
        assert_eq!(events, [expected]);
    }

    #[test]
    fn fork_exec_exit_with_the_parent_from_the_clone() {
        let (events, t) = feed_all(&[
            clone_rec(1, 2, 0x0120_0011),
            exec_rec(2, &[b"/bin/echo", b"hi"]),
            syscall_rec(2, EXEC_SYSCALLS[0], None),
            syscall_rec(2, EXEC_SYSCALLS[0], Some((0, 0))),
            exit_rec(2, 3 << 8),
        ]);
        assert_eq!(
            events,
            [
                GvisorEvent::Clone {
                    creator: 1,
                    child: 2
                },
                exec_event(2, Some(1), &["/bin/echo", "hi"]),
                exit_event(2, 768)
            ]
        );
        assert!(t.parents.is_empty() && t.exec_reported.is_empty());
    }

    #[test]
    fn a_thread_is_no_new_process_and_clone_parent_gives_the_grandparent() {
        let (events, _) = feed_all(&[
            clone_rec(1, 5, 0),
            clone_rec(5, 5, 0x0001_0000),
            clone_rec(5, 6, CLONE_PARENT),
            exec_rec(5, &[b"/a"]),
            exec_rec(6, &[b"/b"]),
        ]);
        assert_eq!(
            events,
            [
                GvisorEvent::Clone {
                    creator: 1,
                    child: 5
                },
                // CLONE_PARENT: 1 is 6's parent, 5 its creator.
                GvisorEvent::Clone {
                    creator: 5,
                    child: 6
                },
                exec_event(5, Some(1), &["/a"]),
                exec_event(6, Some(1), &["/b"])
            ]
        );
    }

    #[test]
    fn a_successful_exec_without_its_point_is_reported_as_unreported() {
        let (events, _) = feed_all(&[
            clone_rec(1, 3, 0),
            syscall_rec(3, EXEC_SYSCALLS[1], None),
            syscall_rec(3, EXEC_SYSCALLS[1], Some((0, 0))),
            // A failed exec is no exec.
            syscall_rec(3, EXEC_SYSCALLS[0], Some((0, 2))),
            // Neither is another syscall.
            syscall_rec(3, 1, Some((0, 0))),
        ]);
        assert_eq!(
            events,
            [
                GvisorEvent::Clone {
                    creator: 1,
                    child: 3
                },
                GvisorEvent::UnreportedExec {
                    pid: 3,
                    ppid: Some(1)
                }
            ]
        );
    }

    #[test]
    fn argv_and_paths_that_are_not_utf8_are_kept_as_bytes() {
        let (events, _) = feed_all(&[exec_rec(4, &[b"/bin/x\xff", b"a\xfeb"])]);
        let GvisorEvent::Exec { argv, path, .. } = &events[0] else {
            panic!("{events:?}")
        };
        use std::os::unix::ffi::OsStrExt;
        assert_eq!(argv[1].as_bytes(), b"a\xfeb");
        assert_eq!(path.as_os_str().as_bytes(), b"/bin/x\xff");
    }

    #[test]
    fn drops_are_reported_as_they_grow_and_across_the_wrap() {
        let exec = wire::ExecveInfo {
            context_data: ctx(2),
            binary_path: b"/x".to_vec(),
            argv: vec![b"/x".to_vec()],
        }
        .encode_to_vec();
        let (events, _) = feed_all(&[
            record(kind::SENTRY_EXEC, 2, &exec),
            record(kind::SENTRY_EXEC, 2, &exec),
            record(kind::SENTRY_EXEC, u32::MAX, &exec),
            record(kind::SENTRY_EXEC, 1, &exec),
        ]);
        let drops: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                GvisorEvent::Dropped(n) => Some(*n),
                _ => None,
            })
            .collect();
        assert_eq!(drops, [2, u32::MAX - 2, 2]);
        assert!(matches!(events[0], GvisorEvent::Dropped(2)));
        assert!(matches!(events[1], GvisorEvent::Exec { .. }));
    }

    #[test]
    fn malformed_records_are_reported_and_unknown_types_skipped() {
        let (events, t) = feed_all(&[
            vec![8, 0, 3],
            record(kind::SENTRY_EXEC, 0, &[0x0a, 0x7f, 0x01]),
            record(kind::SENTRY_EXIT_NOTIFY_PARENT, 0, &[]),
            record(34, 0, b"\xff\xff anything"),
            record(0, 0, b""),
            record(kind::SENTRY_CLONE, 0, &clone_rec(1, -4, 0)[8..]),
        ]);
        assert_eq!(t.skipped, 2);
        let reasons: Vec<String> = events
            .into_iter()
            .map(|e| match e {
                GvisorEvent::Undecodable(r) => r,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(reasons.len(), 4, "{reasons:?}");
        assert!(
            reasons[0].contains("shorter than the 8-byte header"),
            "{reasons:?}"
        );
        assert!(reasons[1].starts_with("message type 3: undecodable payload of 3 bytes"));
        assert!(reasons[2].contains("no context data"), "{reasons:?}");
        assert!(reasons[3].contains("thread group -4"), "{reasons:?}");
    }

    #[test]
    fn the_parent_map_is_bounded() {
        let mut t = Tracker::default();
        let mut sink = |_e: GvisorEvent| {};
        for child in 2..(i32::try_from(MAX_TRACKED).unwrap() + 10) {
            t.feed(&clone_rec(1, child, 0), &mut sink);
        }
        assert_eq!(t.parents.len(), MAX_TRACKED);
    }
}
