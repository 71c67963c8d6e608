//! Exec recording by BPF: the sandbox's execs and exits, read in the kernel as they
//! happen, without the program waiting for the supervisor.
//!
//! `exectrace/exec.bpf.c`, compiled by `build.rs` with clang when it is installed,
//! is loaded here with `aya` and attached to the `sched_process_exec` and
//! `sched_process_exit` raw trace points (no tracefs needed). It keeps only the
//! tasks of recorded sandboxes' pid namespaces (or of ones nested in them), each
//! added by [`ExecRecorder::watch_namespace_of`] between init's clone and its go, so nothing of
//! the sandbox's runs before. Each exec is read after it has succeeded, from the
//! kernel's own copies: the path given to `execve` (`bprm->filename`), the argv in
//! the new program's memory, the working directory walked up to the task's root
//! (crossing mounts), its pid and its parent's at the sandbox's level. An exec
//! that cannot be put in the ring buffer is killed before its first instruction
//! and counted ([`TraceEvent::Refused`]); no exec runs unrecorded.
//!
//! The programs are loaded once per boot and pinned in a bpf file system of our
//! own (`exectrace/loaded.rs`): a session's start only makes its ring buffer and
//! adds it and its namespace, keyed by the namespace's id, to the pinned maps; its
//! end removes them, and the entries of a supervisor that died without removing
//! its own are swept by the next session's start.
//!
//! What differs from seccomp notification (`trace.rs`), by construction:
//! - an exec the kernel fails (no such file, not executable) ran nothing and is not
//!   recorded;
//! - a `#!` script's argv is recorded as the kernel keeps it once it has started
//!   the interpreter: its `argv[0]` is the script's path as given (the kernel
//!   replaces the original `argv[0]`, which no program ever sees, by it);
//! - argv is read up to [`ARGV_CAP`] bytes (the record keeps 16 KiB anyway); past
//!   it the exec line says `truncated=` with the size read;
//! - what ran is what was recorded (read after the exec), so there is never a
//!   `Mismatch` to report.

use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use crate::trace::{ExitStatus, TraceEvent};

/// Bytes of argv read per exec (the BPF program's `ARGV_CAP`).
pub const ARGV_CAP: usize = 65536;

const KIND_EXEC: u32 = 1;
const KIND_EXIT: u32 = 2;
const PATH_CAP: usize = 4096;
const CWD_CAP: usize = 4096 + 256;
/// `struct exec_event`'s layout (`exec.bpf.c`): the header, then fixed regions.
const HEADER: usize = 88;
/// The path goes through a descriptor (`/dev/fd/N`, `/proc/...`): the program is
/// named by its file's own path.
const FLAG_VIA_FD: u32 = 1;
const FLAG_ARGV_CUT: u32 = 2;
/// How a walk up from a directory or file ended (the cwd's flags; the file's are
/// these shifted by [`FILE_FLAGS`]).
const FLAG_OUTSIDE_ROOT: u32 = 4;
const FLAG_DETACHED: u32 = 16;
const FLAG_DELETED: u32 = 32;
const FLAG_DEEP: u32 = 64;
const FILE_FLAGS: u32 = 8;
const LOADER_FLAGS: u32 = 16;
const FLAG_LOADER_READ_ONLY: u32 = 128;
/// The program is on an overlay: the loader is the first instruction's file, which
/// may be the program's own (see [`Loader::uncompared`]).
const FLAG_LOADER_UNCOMPARED: u32 = 1 << 24;

/// Whether this binary carries the BPF recorder, or why not (for `doctor`).
pub fn built() -> Result<(), String> {
    #[cfg(vg_exec_bpf)]
    {
        Ok(())
    }
    #[cfg(not(vg_exec_bpf))]
    {
        Err(format!(
            "this binary was built without it ({}); install clang and libbpf-dev and rebuild",
            include_str!(concat!(env!("OUT_DIR"), "/exec.bpf.why")).trim()
        ))
    }
}

/// Why this kernel cannot be trusted with the recorder, given what
/// `/sys/kernel/realtime` holds (absent on most kernels). The programs keep one
/// event per CPU and the kernel skips a program already running on its CPU: that
/// can only happen where a trace point's program can be preempted, as on real-time
/// kernels, and there an exec could pass unrecorded. Not tried on one: refused.
#[cfg_attr(not(vg_exec_bpf), allow(dead_code))]
fn unsafe_kernel(realtime: Option<&str>) -> Option<&'static str> {
    (realtime.map(str::trim) == Some("1")).then_some(
        "this is a real-time kernel, whose trace points can be preempted, so an exec could pass while another's record is written",
    )
}

/// One event decoded from the ring buffer, with the host pid it came from.
#[derive(Debug, PartialEq)]
pub struct Decoded {
    pub host_pid: u32,
    pub event: TraceEvent,
    /// An exec's ELF loader (the program the kernel started first), which the
    /// recorder names in the exec's `interpreter` unless it is the system's.
    pub loader: Option<Loader>,
    /// When it happened, on the kernel's boot clock (`CLOCK_BOOTTIME`, ns); the
    /// drain turns it into the event's `at` ([`wall_time`]).
    pub boot_ns: Option<u64>,
}

/// The wall-clock time of `boot_ns` on the boot clock, given both clocks' readings
/// now: what a line is timed with, rather than when the ring was drained.
pub fn wall_time(
    now: std::time::SystemTime,
    now_boot_ns: u64,
    boot_ns: u64,
) -> std::time::SystemTime {
    let ago = std::time::Duration::from_nanos(now_boot_ns.saturating_sub(boot_ns));
    now.checked_sub(ago).unwrap_or(now)
}

/// The file the kernel mapped as an exec's ELF loader.
#[derive(Debug, PartialEq)]
pub struct Loader {
    /// Its path inside the sandbox.
    pub path: Vec<u8>,
    /// Whether it is on a read-only mount (the sandbox cannot have changed it).
    pub read_only: bool,
    /// Its file's identity: its file system's device, in the kernel's own encoding
    /// (`major << 20 | minor`, see [`kernel_dev`]), and its inode number.
    pub id: (u64, u64),
    /// The program is on an overlay, whose files are mapped as the files beneath
    /// them: this is the file at the first instruction, not compared with the
    /// program's own (the recorder compares it with the file the program's path
    /// names in the overlay's lower folder).
    pub uncompared: bool,
}

/// A device number as `stat` gives it, in the kernel's own encoding (its `dev_t`:
/// the major number above the lower 20 bits), as the recorder reads it from a
/// file system.
pub fn kernel_dev(st_dev: u64) -> u64 {
    (u64::from(libc::major(st_dev)) << 20) | u64::from(libc::minor(st_dev))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn i32_at(b: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn region(b: &[u8], at: usize, len: u32, cap: usize) -> Option<&[u8]> {
    let len = usize::try_from(len).ok()?;
    if len > cap {
        return None;
    }
    b.get(at..at + len)
}

/// The session a ring buffer record belongs to (its pid namespace's id): a ring
/// can hold what an earlier session wrote last (`exectrace/loaded.rs`).
pub fn session_of(b: &[u8]) -> Option<u64> {
    match u32_at(b, 0)? {
        KIND_EXEC => u64_at(b, 56),
        KIND_EXIT => u64_at(b, 16),
        _ => None,
    }
}

/// One ring buffer record as an event; `None` for a malformed one (never from
/// our program: the supervisor then says the record is incomplete).
pub fn decode(b: &[u8]) -> Option<Decoded> {
    // Whole, as the program writes it: a record cut short is no event (the drain
    // then says the recorder sent one it cannot read), even where the fields an
    // event shows are there (fuzzing found a 16-byte exit, with no session, taken
    // for one).
    session_of(b)?;
    match u32_at(b, 0)? {
        KIND_EXEC => decode_exec(b),
        KIND_EXIT => Some(Decoded {
            loader: None,
            host_pid: u32_at(b, 4)?,
            event: TraceEvent::Exit {
                pid: i32_at(b, 8)?,
                status: ExitStatus::from_wait_status(i32_at(b, 12)?),
                at: None,
            },
            boot_ns: Some(u64_at(b, 24)?),
        }),
        _ => None,
    }
}

fn decode_exec(b: &[u8]) -> Option<Decoded> {
    let flags = u32_at(b, 4)?;
    let pid = i32_at(b, 8)?;
    let ppid = i32_at(b, 12)?;
    let host_pid = u32_at(b, 16)?;
    // The regions follow the header one after another, each as long as its
    // length says: path, interp, cwd, file, argv.
    let mut at = HEADER;
    let mut next = |len: u32, cap: usize| {
        let r = region(b, at, len, cap);
        at += r.map_or(0, <[u8]>::len);
        r
    };
    let given = next(u32_at(b, 20)?, PATH_CAP)?;
    let interp = next(u32_at(b, 40)?, PATH_CAP)?;
    let cwd = path_from_names(next(u32_at(b, 24)?, CWD_CAP)?, flags);
    let file = next(u32_at(b, 44)?, CWD_CAP)?;
    let loader = next(u32_at(b, 52)?, CWD_CAP)?;
    let raw = next(u32_at(b, 28)?, ARGV_CAP)?;
    // A path through a descriptor (execveat's `/dev/fd/N`, a `/proc` link) names
    // the file by its own path, as seccomp notification does; and so does a file
    // that no path names any more (a memfd or a deleted file reached through a
    // symlink to its descriptor: the path given names only the link), a `#!`
    // script's interpreter included (`#!/proc/self/fd/N` on a memfd).
    let by_file = !file.is_empty()
        && (flags & FLAG_VIA_FD != 0
            || (flags >> FILE_FLAGS) & (FLAG_DETACHED | FLAG_DELETED) != 0);
    let path = if !by_file {
        given.to_vec()
    } else {
        path_from_names(file, flags >> FILE_FLAGS)
            .into_os_string()
            .into_vec()
    };
    let is_script = !interp.is_empty() && interp != given;
    // The program's file by its own path, when the path given (through a symlink)
    // names another; for a script, whose own file is gone from the exec by now, its
    // last interpreter's (the kernel's file), when the `#!` line's name does.
    // A file named only by its last names (`(deeper)/…`, its walk cut) is named
    // always: compared with a cwd cut the same way, two different files could
    // look alike (session-23 red team).
    let reached = (!by_file && !file.is_empty()).then(|| {
        let named: &[u8] = if is_script { interp } else { given };
        let reached = path_from_names(file, flags >> FILE_FLAGS);
        let reached = reached.as_os_str().as_bytes();
        if (flags >> FILE_FLAGS) & FLAG_DEEP != 0 {
            Some(reached.to_vec())
        } else {
            crate::trace::ran::other_file(cwd.as_os_str().as_bytes(), named, reached)
        }
    });
    let (ran, interp_ran) = match reached.flatten() {
        Some(r) if is_script => (None, Some(r)),
        r => (r, None),
    };
    let full = u64_at(b, 32)?;
    let boot_ns = u64_at(b, 64)?;
    let argc = u64::from(u32_at(b, 48)?);
    let cut = flags & FLAG_ARGV_CUT != 0 || (raw.len() as u64) < full;
    let (mut argv, truncated) = split_argv(raw, cut);
    let mut size = (argc, full);
    if is_script {
        let (caller, dropped) = script_argv(argv, given);
        argv = caller;
        size = (
            size.0.saturating_sub(dropped.len() as u64),
            size.1
                .saturating_sub(dropped.iter().map(|a| a.len() as u64 + 1).sum::<u64>()),
        );
    }
    if truncated {
        complete(&mut argv, size.0, size.1.saturating_sub(size.0));
    }
    let loader_id = (u64_at(b, 72)?, u64_at(b, 80)?);
    let loader = (!loader.is_empty()).then(|| Loader {
        path: path_from_names(loader, flags >> LOADER_FLAGS)
            .into_os_string()
            .into_vec(),
        read_only: flags & FLAG_LOADER_READ_ONLY != 0,
        id: loader_id,
        uncompared: flags & FLAG_LOADER_UNCOMPARED != 0,
    });
    Some(Decoded {
        host_pid,
        loader,
        boot_ns: Some(boot_ns),
        event: TraceEvent::Exec {
            pid,
            ppid,
            cwd,
            path,
            ran,
            argv,
            truncated,
            file: None,
            script: None,
            interpreter: is_script.then(|| interp.to_vec()),
            interp_ran,
            root: None,
            cwd_id: None,
            at: None,
        },
    })
}

/// A path inside the sandbox from its names as the walk up found them, last
/// first, named as the kernel's `d_path` names it: ` (deleted)` after a removed
/// file's, and a file of no directory (a memfd) as `/NAME (deleted)`.
fn path_from_names(names: &[u8], flags: u32) -> PathBuf {
    let mut path = Vec::with_capacity(names.len() + 1);
    if flags & FLAG_OUTSIDE_ROOT != 0 {
        // Not under the task's root: an overlay's file mapped as the file in its
        // writable layer (the sandbox has no way to chroot), said, not hidden.
        path.extend_from_slice(b"(outside the root)");
    }
    if flags & FLAG_DEEP != 0 {
        // Deeper than the walk goes: its last names, said to be cut.
        path.extend_from_slice(b"(deeper)");
    }
    let parts: Vec<&[u8]> = names.split(|&c| c == 0).filter(|p| !p.is_empty()).collect();
    for part in parts.iter().rev() {
        path.push(b'/');
        path.extend_from_slice(part);
    }
    if path.is_empty() {
        path.push(b'/');
    }
    if flags & (FLAG_DELETED | FLAG_DETACHED) != 0 {
        path.extend_from_slice(b" (deleted)");
    }
    PathBuf::from(std::ffi::OsString::from_vec(path))
}

/// argv from the bytes between `arg_start` and `arg_end`: each argument ends in a
/// NUL; `cut` when what was read stops short of the end (the last argument read
/// is then partial, and kept as such).
fn split_argv(raw: &[u8], cut: bool) -> (Vec<Vec<u8>>, bool) {
    let mut argv: Vec<Vec<u8>> = raw.split(|&c| c == 0).map(<[u8]>::to_vec).collect();
    if !cut && raw.last() == Some(&0) {
        // The piece after the last NUL.
        argv.pop();
    }
    if raw.is_empty() {
        argv.clear();
    }
    (argv, cut)
}

/// A `#!` script's argv as the caller gave it, from the interpreter's: the kernel
/// put `[interpreter, optional argument, ..., path, argv[1..]]` in place of
/// `argv`; the caller's `argv[0]` is gone, and the path stands for it.
/// Returns it, and the interpreter's arguments dropped.
fn script_argv(mut argv: Vec<Vec<u8>>, path: &[u8]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    match argv.iter().skip(1).position(|a| a == path) {
        Some(i) => {
            let caller = argv.split_off(i + 1);
            (caller, argv)
        }
        None => (argv, Vec::new()),
    }
}

/// What an `exec` line keeps of argv (`vg_records`' `MAX_RECORDED_ARGV_BYTES`).
const RECORDED_ARGV_BYTES: u64 = 16 * 1024;

/// An argv read in part, made its full size (`args` arguments of `bytes` bytes in
/// all), so that the `exec` line's `truncated=` states the real size, as it does
/// for an argv read whole: the arguments not read are stood for by fillers, after
/// what the line keeps. Only when what was read holds more than the line keeps
/// (then no filler can show); otherwise the size read is stated.
fn complete(argv: &mut Vec<Vec<u8>>, args: u64, bytes: u64) {
    let read: u64 = argv.iter().map(|a| a.len() as u64).sum();
    let count = argv.len() as u64;
    if read < RECORDED_ARGV_BYTES || args < count || bytes < read {
        return;
    }
    let (Ok(extra), Ok(more)) = (usize::try_from(bytes - read), usize::try_from(args - count))
    else {
        return;
    };
    if more == 0 {
        if let Some(last) = argv.last_mut() {
            last.resize(last.len() + extra, b'?');
        }
        return;
    }
    argv.push(vec![b'?'; extra]);
    argv.extend(std::iter::repeat_n(Vec::new(), more - 1));
}

/// A load error without the verifier's log, which runs to megabytes: its first
/// line and the log's last words (the verifier's reason).
pub fn short_verifier_error(error: &str) -> String {
    match error.split_once("Verifier output:") {
        Some((head, log)) => {
            let log = log.trim();
            let tail = log
                .char_indices()
                .rev()
                .nth(199)
                .map_or(log, |(at, _)| &log[at..]);
            format!("{} … {tail}", head.trim())
        }
        None => error.to_owned(),
    }
}

#[cfg(vg_exec_bpf)]
pub use loaded::ExecRecorder;

#[cfg(vg_exec_bpf)]
mod loaded;

/// Without clang at build time: never loaded ([`built`] says why).
#[cfg(not(vg_exec_bpf))]
#[derive(Debug)]
pub enum ExecRecorder {}

#[cfg(not(vg_exec_bpf))]
impl ExecRecorder {
    pub fn load() -> Result<Self, String> {
        Err(built().err().unwrap_or_default())
    }
    pub fn watch_namespace_of(&mut self, _: libc::pid_t) -> Result<(), String> {
        match *self {}
    }
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match *self {}
    }
    pub fn drain(&mut self, _: impl FnMut(Decoded)) -> usize {
        match *self {}
    }
}

#[cfg(test)]
// The records built here are a few bytes long.
#[allow(clippy::cast_possible_truncation)]
mod tests {
    use super::*;

    fn exec_record(
        path: &[u8],
        interp: &[u8],
        cwd_names: &[u8],
        argv: &[u8],
        full: u64,
    ) -> Vec<u8> {
        exec_record_of(0, path, interp, [cwd_names, b"", b""], argv, full)
    }

    /// A record as `exec.bpf.c` sends it: the header, then the regions one after
    /// another.
    fn exec_record_of(
        flags: u32,
        path: &[u8],
        interp: &[u8],
        [cwd_names, file_names, loader_names]: [&[u8]; 3],
        argv: &[u8],
        full: u64,
    ) -> Vec<u8> {
        let mut b = vec![0u8; HEADER];
        let put =
            |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        put(&mut b, 0, KIND_EXEC);
        put(&mut b, 4, flags);
        put(&mut b, 8, 7);
        put(&mut b, 12, 3);
        put(&mut b, 16, 4242);
        put(&mut b, 20, path.len() as u32);
        put(&mut b, 24, cwd_names.len() as u32);
        put(&mut b, 28, argv.len() as u32);
        b[32..40].copy_from_slice(&full.to_ne_bytes());
        put(&mut b, 40, interp.len() as u32);
        put(&mut b, 44, file_names.len() as u32);
        let argc = argv.iter().filter(|&&c| c == 0).count() as u32;
        put(&mut b, 48, argc);
        put(&mut b, 52, loader_names.len() as u32);
        b[64..72].copy_from_slice(&123_456_789u64.to_ne_bytes());
        b[72..80].copy_from_slice(&(8u64 << 20 | 1).to_ne_bytes());
        b[80..88].copy_from_slice(&4321u64.to_ne_bytes());
        for region in [path, interp, cwd_names, file_names, loader_names, argv] {
            b.extend_from_slice(region);
        }
        b
    }

    fn exec_of(b: &[u8]) -> (i32, i32, PathBuf, Vec<u8>, Vec<Vec<u8>>, bool) {
        match decode(b).unwrap() {
            Decoded {
                host_pid: 4242,
                event:
                    TraceEvent::Exec {
                        pid,
                        ppid,
                        cwd,
                        path,
                        argv,
                        truncated,
                        ..
                    },
                ..
            } => (pid, ppid, cwd, path, argv, truncated),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_real_time_kernel_is_refused_and_others_are_not() {
        assert!(unsafe_kernel(Some("1\n")).is_some());
        assert_eq!(unsafe_kernel(Some("0\n")), None);
        assert_eq!(unsafe_kernel(None), None);
    }

    #[test]
    fn an_exec_is_decoded_with_its_cwd_from_the_names_walked_up() {
        let b = exec_record(b"/bin/ls", b"", b"b\0a\0", b"ls\0-l\0\xff odd\0\0", 13);
        let (pid, ppid, cwd, path, argv, truncated) = exec_of(&b);
        assert_eq!((pid, ppid), (7, 3));
        assert_eq!(cwd, PathBuf::from("/a/b"));
        assert_eq!(path, b"/bin/ls");
        assert_eq!(
            argv,
            vec![
                b"ls".to_vec(),
                b"-l".to_vec(),
                b"\xff odd".to_vec(),
                Vec::new()
            ]
        );
        assert!(!truncated);
        // At the root: no names.
        let b = exec_record(b"x", b"", b"", b"x\0", 2);
        assert_eq!(exec_of(&b).2, PathBuf::from("/"));
        // No argv at all.
        let b = exec_record(b"x", b"", b"", b"", 0);
        assert!(exec_of(&b).4.is_empty());
    }

    #[test]
    fn a_path_through_a_descriptor_is_named_by_the_files_own_path() {
        let names: &[u8] = b"true\0bin\0usr\0";
        let record = |flags, path: &[u8], cwd: &[u8], file: &[u8]| {
            exec_record_of(flags, path, b"", [cwd, file, b""], b"x\0", 2)
        };
        // Walked, but the path does not go through a descriptor: named as given.
        let b = record(0, b"/dev/fd/3", b"", names);
        assert_eq!(exec_of(&b).3, b"/dev/fd/3");
        let b = record(FLAG_VIA_FD, b"/dev/fd/3", b"", names);
        assert_eq!(exec_of(&b).3, b"/usr/bin/true");
        assert_eq!(HEADER % 8, 0);
        // A memfd: one name, of no directory.
        let b = record(
            FLAG_DETACHED << FILE_FLAGS,
            b"/dev/fd/3",
            b"",
            b"memfd:hidden\0",
        );
        // Even through a path that is no descriptor's (a symlink to one).
        assert_eq!(exec_of(&b).3, b"/memfd:hidden (deleted)");
        // The cwd's flags are its own.
        assert_eq!(exec_of(&b).2, PathBuf::from("/"));
        // A cwd deeper than the walk goes: its last names, marked.
        let b = record(FLAG_DEEP, b"/dev/fd/3", b"c\0b\0", b"memfd:hidden\0");
        assert_eq!(exec_of(&b).2, PathBuf::from("(deeper)/b/c"));
    }

    fn ran_of(b: &[u8]) -> Option<Vec<u8>> {
        match decode(b).unwrap().event {
            TraceEvent::Exec { ran, .. } => ran,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_program_reached_through_a_link_names_its_file_and_a_cut_file_always() {
        let record = |flags, path: &[u8], cwd: &[u8], file: &[u8]| {
            exec_record_of(flags, path, b"", [cwd, file, b""], b"x\0", 2)
        };
        // `/w/x -> /w/payload`, run as `./x` from /w.
        let b = record(0, b"./x", b"w\0", b"payload\0w\0");
        assert_eq!(ran_of(&b), Some(b"/w/payload".to_vec()));
        // The path names its file: nothing more.
        let b = record(0, b"./payload", b"w\0", b"payload\0w\0");
        assert_eq!(ran_of(&b), None);
        // Both walks cut above the same last names: they look alike, and the file
        // is named anyway (session-23 red team).
        let deep = FLAG_DEEP | (FLAG_DEEP << FILE_FLAGS);
        let b = record(deep, b"./link", b"b\0a\0", b"link\0b\0a\0");
        assert_eq!(ran_of(&b), Some(b"(deeper)/a/b/link".to_vec()));
    }

    #[test]
    fn an_argv_longer_than_what_was_read_is_truncated() {
        let b = exec_record(b"/bin/echo", b"", b"", b"echo\0abc", 100_000);
        let (.., argv, truncated) = exec_of(&b);
        assert!(truncated);
        assert_eq!(argv, vec![b"echo".to_vec(), b"abc".to_vec()]);
    }

    #[test]
    fn an_argv_cut_past_what_the_record_keeps_states_its_full_size() {
        // 9 arguments of 100 000 bytes, read as far as the window: the fillers
        // make the size the record states the real one.
        let mut argv = vec![b"true".to_vec()];
        argv.push(vec![b'a'; 20_000]);
        argv.push(vec![b'a'; 3_000]);
        let args = 9;
        let bytes = 4 + 8 * 100_000;
        complete(&mut argv, args, bytes);
        assert_eq!(argv.len() as u64, args);
        assert_eq!(argv.iter().map(|a| a.len() as u64).sum::<u64>(), bytes);
        assert_eq!(argv[1], vec![b'a'; 20_000]);
        // The last argument read is the last one: it is made whole.
        let mut argv = vec![b"true".to_vec(), vec![b'a'; 20_000]];
        complete(&mut argv, 2, 4 + 100_000);
        assert_eq!(argv[1].len(), 100_000);
        // Less read than an exec line keeps: the size read stands.
        let mut argv = vec![b"true".to_vec(), Vec::new()];
        complete(&mut argv, 100_000, 100_000);
        assert_eq!(argv.len(), 2);
    }

    #[test]
    fn a_record_cut_for_a_tight_ring_states_the_full_size() {
        // 2,004 arguments of 51,894 bytes in all, sent with 32 KiB of them (the
        // BPF program's ARGV_TIGHT) as the ring could not take them all.
        let mut raw = b"true\0".to_vec();
        let mut i = 0;
        while raw.len() + 26 <= 32_768 {
            raw.extend_from_slice(format!("/HIDDEN-ARG-{i:013}\0").as_bytes());
            i += 1;
        }
        let mut b = exec_record_of(
            FLAG_ARGV_CUT,
            b"/bin/true",
            b"",
            [b"", b"", b""],
            &raw,
            51_894,
        );
        b[48..52].copy_from_slice(&2004u32.to_ne_bytes());
        let (.., argv, truncated) = exec_of(&b);
        assert!(truncated);
        assert_eq!(argv.len(), 2004);
        assert_eq!(
            argv.iter().map(|a| a.len() as u64).sum::<u64>(),
            51_894 - 2004
        );
    }

    #[test]
    fn a_scripts_argv_is_the_callers_with_its_path_as_argv0() {
        // `#!/bin/sh`: [interp, path, args].
        let b = exec_record(b"./s.sh", b"/bin/sh", b"", b"/bin/sh\0./s.sh\0a\0", 17);
        assert_eq!(exec_of(&b).4, vec![b"./s.sh".to_vec(), b"a".to_vec()]);
        // `#!/usr/bin/env python3`: [interp, arg, path, args].
        let b = exec_record(
            b"t.py",
            b"/usr/bin/env",
            b"",
            b"/usr/bin/env\0python3\0t.py\0x\0",
            28,
        );
        assert_eq!(exec_of(&b).4, vec![b"t.py".to_vec(), b"x".to_vec()]);
    }

    #[test]
    fn an_exit_is_decoded_from_its_wait_status() {
        let mut b = Vec::new();
        for v in [KIND_EXIT, 99, 5] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b.extend_from_slice(&(3i32 << 8).to_ne_bytes());
        b.extend_from_slice(&77u64.to_ne_bytes());
        b.extend_from_slice(&42u64.to_ne_bytes());
        let d = decode(&b).unwrap();
        assert_eq!(d.host_pid, 99);
        assert_eq!(d.boot_ns, Some(42));
        assert_eq!(session_of(&b), Some(77));
        assert_eq!(
            d.event,
            TraceEvent::Exit {
                pid: 5,
                status: ExitStatus::Code(3),
                at: None,
            }
        );
        b[12..16].copy_from_slice(&9i32.to_ne_bytes());
        assert_eq!(
            decode(&b).unwrap().event,
            TraceEvent::Exit {
                pid: 5,
                status: ExitStatus::Signal(9),
                at: None,
            }
        );
    }

    /// ATTACK (records, fuzzing, session 24): a record cut short is no event, even
    /// where every field an event shows is there: a 16-byte exit (no session, no
    /// time) was decoded, and the drain, which skips another session's records by
    /// their session, would have taken it for this session's.
    #[test]
    fn a_record_cut_short_is_no_event() {
        let mut exit = Vec::new();
        for v in [KIND_EXIT, 99, 5, 0] {
            exit.extend_from_slice(&v.to_ne_bytes());
        }
        exit.extend_from_slice(&77u64.to_ne_bytes());
        exit.extend_from_slice(&42u64.to_ne_bytes());
        assert!(decode(&exit).is_some());
        for len in [16, 20, 24, 31] {
            assert!(decode(&exit[..len]).is_none(), "{len} bytes");
        }
        let exec = exec_record(b"/bin/true", b"", b"", b"true\0", 5);
        assert!(decode(&exec).is_some());
        for len in [HEADER - 1, 60, 40] {
            assert!(decode(&exec[..len]).is_none(), "{len} bytes");
        }
    }

    #[test]
    fn an_exec_carries_its_kernel_time_and_a_line_is_timed_with_it() {
        let b = exec_record(b"/bin/true", b"", b"", b"true\0", 5);
        assert_eq!(decode(&b).unwrap().boot_ns, Some(123_456_789));
        let now = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000);
        // 25 ms before the drain read both clocks.
        assert_eq!(
            wall_time(now, 5_000_000_000, 4_975_000_000),
            now - std::time::Duration::from_millis(25)
        );
        // A time after the clocks were read (never from the ring) is now.
        assert_eq!(wall_time(now, 5_000_000_000, 6_000_000_000), now);
    }

    #[test]
    fn an_exec_s_loader_is_named_by_its_file_with_its_mount_s_kind() {
        let names: &[u8] = b"ld.so\0tmp\0";
        let b = exec_record_of(0, b"/bin/ls", b"", [b"", b"", names], b"ls\0", 3);
        let loader = decode(&b).unwrap().loader.unwrap();
        assert_eq!(loader.path, b"/tmp/ld.so");
        assert!(!loader.read_only);
        assert_eq!(loader.id, (8 << 20 | 1, 4321));
        let b = exec_record_of(
            FLAG_LOADER_READ_ONLY,
            b"/bin/ls",
            b"",
            [b"", b"", names],
            b"ls\0",
            3,
        );
        assert!(decode(&b).unwrap().loader.unwrap().read_only);
        // The argv after it is read from its own place.
        assert_eq!(exec_of(&b).4, vec![b"ls".to_vec()]);
        // A static program: none.
        let b = exec_record(b"/bin/ls", b"", b"", b"ls\0", 3);
        assert_eq!(decode(&b).unwrap().loader, None);
    }

    #[test]
    fn a_device_number_from_stat_is_put_in_the_kernel_s_encoding() {
        assert_eq!(kernel_dev(libc::makedev(8, 1)), 8 << 20 | 1);
        assert_eq!(kernel_dev(libc::makedev(259, 70_000)), 259 << 20 | 70_000);
        // This file's file system, as stat and the kernel's own `dev_t` name it.
        let meta = std::fs::metadata("/proc/self/exe").unwrap();
        use std::os::unix::fs::MetadataExt;
        let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let (major, minor) = (libc::major(meta.dev()), libc::minor(meta.dev()));
        assert!(
            text.contains(&format!(" {major}:{minor} ")),
            "{major}:{minor}"
        );
    }

    #[test]
    fn an_exec_names_its_session() {
        let mut b = exec_record(b"/bin/ls", b"", b"", b"ls\0", 3);
        assert_eq!(b.len(), HEADER + 7 + 3, "the regions one after another");
        b[56..64].copy_from_slice(&1234u64.to_ne_bytes());
        assert_eq!(session_of(&b), Some(1234));
        assert_eq!(exec_of(&b).3, b"/bin/ls");
    }

    #[test]
    fn a_short_or_unknown_record_is_not_an_event() {
        assert!(decode(&[]).is_none());
        assert!(decode(&[1, 0, 0, 0]).is_none());
        assert!(decode(&[9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).is_none());
        let mut b = exec_record(b"x", b"", b"", b"x\0", 2);
        // A length past its region.
        b[20..24].copy_from_slice(&(PATH_CAP as u32 + 1).to_ne_bytes());
        assert!(decode(&b).is_none());
    }
}
