//! gVisor's trace points, read from its remote sink: each exec and exit the
//! sentry reports, for the session's `commands.log`.
//!
//! Use: [`Sink::bind`] a socket path in a private directory, write
//! [`pod_init_config`]'s JSON to a file, run [`Sink::serve`] on a thread of its
//! own, then run `runsc --pod-init-config FILE … run …` (or `… do …`: both
//! honour the file; the `runsc` process sets the sinks up as it creates the
//! sandbox). When the runsc child has exited, [`StopHandle::stop`] and join
//! the thread.
//!
//! # Timing
//!
//! - runsc itself connects to the sink and exchanges the handshake before it
//!   starts the sandbox, and waits for our answer: serve must be running
//!   before runsc starts. If nothing listens at the path, runsc refuses to
//!   start the sandbox (the session config leaves `ignore_setup_error`
//!   false): the trace is never silently absent.
//! - Each point is written by the sentry task that hits it, in that task,
//!   before it goes on: an exec is in the socket before the exec replaces the
//!   old program, so before the new program's first instruction; a clone
//!   before the child runs; an exit before the parent's wait(2) can return
//!   it. The sentry does not wait for this reader to process a point, only
//!   for room in the socket: when the socket's buffer is full it retries
//!   (backoff from 25 µs to 10 ms, [`RETRIES`] times, about a minute), then
//!   drops the point and counts it. While it retries, that task (for an
//!   exit, the whole sandbox's task table) waits: a stalled reader stalls
//!   the sandbox, at most that minute a point, never the reverse.
//! - The count of drops rides on the next record's header and arrives as
//!   [`GvisorEvent::Dropped`]; drops after the last record are never
//!   reported. A point larger than the sentry's socket send buffer
//!   (`net.core.wmem_default`, 208 KiB by default: an exec with a huge
//!   environment, which the exec point always carries) is dropped at once
//!   the same way; a dropped exec also arrives as
//!   [`GvisorEvent::UnreportedExec`].

//! # What the sentry never reports
//!
//! - The exit of the container's first process (pid 1): runsc's own exit
//!   status is that process's.
//! - An exec whose argv, environment, binary path or working directory is not
//!   valid UTF-8: gVisor's protobuf encoder refuses the point and it is lost
//!   without a drop counted. The execve/execveat syscall's own exit point
//!   (raw, numbers only) still arrives, so such an exec reaches the caller as
//!   [`GvisorEvent::UnreportedExec`]: that a program was executed, by which
//!   process, not what.

mod decode;
mod sink;
mod wire;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::Context;
use serde_json::json;

pub use sink::{MAX_MESSAGE, Served, Sink, StopHandle};

/// For `fuzz/` (`gvisor_trace`): the records of one connection fed to its decoder
/// in turn, as [`Sink::serve`] feeds them, and what each one emitted. Changes no
/// behaviour.
#[doc(hidden)]
pub fn fuzz_feed(records: &[&[u8]]) -> Vec<Vec<GvisorEvent>> {
    let mut tracker = decode::Tracker::default();
    records
        .iter()
        .map(|record| {
            let mut events = Vec::new();
            tracker.feed(record, &mut |event| events.push(event));
            events
        })
        .collect()
}

/// How many times the sentry retries a point that finds the socket full
/// before dropping it (the sink's `retries`); with the sink's backoff capped
/// at 10 ms, about a minute of a stalled reader.
pub const RETRIES: u32 = 6000;

/// One thing the sentry reported. Process ids are those of the sandbox's root
/// PID namespace (the container's first process is 1), not the host's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GvisorEvent {
    /// A program about to run: each successful execve/execveat, reported
    /// before the exec completes, and the container's first process (from the
    /// container start point, which names it by the OCI spec's
    /// `process.args`).
    Exec {
        /// The sentry's realtime clock at the exec; `None` if the record
        /// had no time.
        time: Option<SystemTime>,
        /// The process (thread group) executing.
        pid: i32,
        /// The process that created it by fork/clone (its caller's parent for
        /// `CLONE_PARENT`), not updated if it is reparented; `None` for the
        /// container's first process or a parent not seen (e.g. a clone
        /// point dropped).
        ppid: Option<i32>,
        /// The new program's argument vector, bytes as they were.
        argv: Vec<OsString>,
        /// The file executed, resolved by the sentry in the sandbox's mount
        /// namespace (e.g. `/usr/bin/echo` for `/bin/echo` where `/bin` is a
        /// symlink). For the first process: `argv[0]` as the spec names it
        /// (empty if the spec has no args).
        path: PathBuf,
        /// The working directory inside the sandbox (for the first process,
        /// the spec's `process.cwd`); empty if the sentry could not name it.
        cwd: PathBuf,
        /// Effective user and group ids before the exec (a set-user-ID
        /// program's new id is not shown), as ids of the sandbox's root user
        /// namespace; `None` when the record carried no credentials.
        uid: Option<u32>,
        gid: Option<u32>,
    },
    /// A process ended: its whole thread group has exited and its parent is
    /// notified. Never sent for pid 1.
    Exit {
        /// The sentry's realtime clock at the exit; `None` if not carried.
        time: Option<SystemTime>,
        pid: i32,
        /// A wait(2) status: `WIFEXITED`/`WEXITSTATUS`, `WIFSIGNALED`/
        /// `WTERMSIG` apply.
        status: i32,
    },
    /// `creator` made a new process `child` (fork, vfork, clone without
    /// `CLONE_THREAD`; also with `CLONE_PARENT`, whose child's parent is the
    /// creator's parent), reported before the child runs: the lineage that outlives
    /// reparenting (a child whose parent ended is the first process's, and keeps
    /// no trace of who made it).
    Clone { creator: i32, child: i32 },
    /// `pid` executed a program successfully but its exec point never came
    /// (not UTF-8, too large, or dropped): what ran is unknown.
    UnreportedExec { pid: i32, ppid: Option<i32> },
    /// The sentry dropped this many points since the previous record
    /// (execs, exits or clones: which ones is unknown).
    Dropped(u32),
    /// A record this reader could not decode, skipped; the text says why.
    Undecodable(String),
}

/// The `--pod-init-config` JSON that sends this reader every point it
/// decodes, to the sink at `endpoint`: the container's start, each
/// execve (binary path, argv, cwd, credentials), each clone (for parent ids),
/// each process's exit with its status, and the execve/execveat syscalls'
/// raw exits (to spot execs whose point was lost).
///
/// The raw points' enter halves are enabled too: in this gVisor version a raw
/// exit point takes its context fields from the enter point's settings, so
/// without them the exit carries no process id.
///
/// Errors when `endpoint` is not UTF-8 (the file is JSON).
pub fn pod_init_config(endpoint: &Path) -> anyhow::Result<serde_json::Value> {
    let endpoint = endpoint.to_str().with_context(|| {
        format!(
            "the gVisor trace sink's path {} is not UTF-8, which runsc's JSON config cannot hold: choose another",
            endpoint.display()
        )
    })?;
    let mut points = vec![
        json!({"name": "container/start", "context_fields": ["time", "group_id", "credentials"]}),
        json!({"name": "sentry/clone", "context_fields": ["group_id"]}),
        json!({"name": "sentry/execve",
               "context_fields": ["time", "group_id", "credentials", "cwd"]}),
        json!({"name": "sentry/exit_notify_parent", "context_fields": ["time", "group_id"]}),
    ];
    points.extend(
        decode::EXEC_SYSCALL_POINTS
            .iter()
            .map(|name| json!({"name": name, "context_fields": ["group_id"]})),
    );
    Ok(json!({
        "trace_session": {
            "name": "Default",
            "points": points,
            "sinks": [{
                "name": "remote",
                "config": {
                    "endpoint": endpoint,
                    "retries": RETRIES,
                    "backoff": "25us",
                    "backoff_max": "10ms",
                },
            }],
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_names_the_session_points_and_sink() {
        let v = pod_init_config(Path::new("/run/vg/s.sock")).unwrap();
        let session = &v["trace_session"];
        assert_eq!(session["name"], "Default");
        let names: Vec<&str> = session["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names[..4],
            [
                "container/start",
                "sentry/clone",
                "sentry/execve",
                "sentry/exit_notify_parent"
            ]
        );
        assert_eq!(names[4..], decode::EXEC_SYSCALL_POINTS);
        for p in session["points"].as_array().unwrap() {
            let ctx = p["context_fields"].as_array().unwrap();
            assert!(ctx.contains(&json!("group_id")), "{p}");
        }
        let sink = &session["sinks"][0];
        assert_eq!(sink["name"], "remote");
        assert_eq!(sink["config"]["endpoint"], "/run/vg/s.sock");
        assert_eq!(sink["config"]["retries"], 6000);
        assert!(sink.get("ignore_setup_error").is_none());
        assert!(session.get("ignore_missing").is_none());
    }

    #[test]
    fn a_path_that_is_not_utf8_is_refused() {
        use std::os::unix::ffi::OsStrExt;
        let p = Path::new(std::ffi::OsStr::from_bytes(b"/tmp/\xff.sock"));
        let err = pod_init_config(p).unwrap_err().to_string();
        assert!(err.contains("not UTF-8"), "{err}");
    }
}
