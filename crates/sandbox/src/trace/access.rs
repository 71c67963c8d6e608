//! A traced file call (`vg_seccomp::TRACED_FILE_SYSCALLS`): the paths it names, each
//! made absolute as seen inside the sandbox, and what the call does to each.
//!
//! Everything is read while the call waits: the path strings from the process's
//! memory (one read each, where a path does not cross a page), openat2's flags from
//! its `struct open_how`, and only for a relative path the link of the working
//! directory or of the directory descriptor it starts from. The kernel names those
//! from the sandbox's own root (see `resolve.rs`), so the result is the path inside.
//!
//! Paths are normalised lexically: `.`, `..` and repeated `/` go without looking at
//! the file system. Symbolic links are not resolved, so a path is the one the
//! program named (with a `..` after a link taken as written), not necessarily the
//! file the kernel reaches. And what is read is what was asked at that moment: another
//! thread of the program can change its memory before the kernel reads it. These
//! records are observation (for learning what a program uses), never enforcement,
//! which stays with the sandbox's view and Landlock.

use super::{PATH_MAX, read_cstring, resolve};

/// What a traced call does to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileAccess {
    /// Opened for reading only (`O_PATH` and `O_DIRECTORY` opens included), or the
    /// existing file a hard link is made to.
    Read,
    /// Opened for writing (`O_WRONLY`, `O_RDWR`, `O_TRUNC`), or truncated.
    Write,
    /// Made: a file opened with `O_CREAT` (which also opens one that exists), a
    /// directory, a symbolic or hard link, or a rename's new name.
    Create,
    /// Removed: unlinked, a directory removed, or a rename's old name.
    Remove,
}

/// One path a traced call names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Named {
    /// Absolute, as seen inside the sandbox, normalised lexically.
    pub path: Vec<u8>,
    pub access: FileAccess,
}

/// Where a relative path starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Cwd,
    /// The directory descriptor in this argument (`AT_FDCWD`: the working directory).
    Arg(usize),
}

/// How the access to a path is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Fixed(FileAccess),
    /// From the `open(2)` flags in this argument.
    Flags(usize),
    /// From openat2's `struct open_how`, at the address in this argument, of the
    /// size in the next.
    OpenHow(usize),
}

/// One path argument of a traced call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PathArg {
    dir: Dir,
    /// The argument holding the path's address.
    path: usize,
    how: Source,
}

const fn arg(dir: Dir, path: usize, how: Source) -> PathArg {
    PathArg { dir, path, how }
}

/// The path arguments of traced call `nr`, in the order they are reported (a
/// rename's old name before its new one); empty for any other call.
fn path_args(nr: i64) -> &'static [PathArg] {
    use Dir::{Arg, Cwd};
    use FileAccess::{Create, Read, Remove, Write};
    use Source::{Fixed, Flags, OpenHow};
    const OPEN: &[PathArg] = &[arg(Cwd, 0, Flags(1))];
    const OPENAT: &[PathArg] = &[arg(Arg(0), 1, Flags(2))];
    const OPENAT2: &[PathArg] = &[arg(Arg(0), 1, OpenHow(2))];
    const CREAT: &[PathArg] = &[arg(Cwd, 0, Fixed(Create))];
    const RENAME: &[PathArg] = &[arg(Cwd, 0, Fixed(Remove)), arg(Cwd, 1, Fixed(Create))];
    const RENAMEAT: &[PathArg] = &[arg(Arg(0), 1, Fixed(Remove)), arg(Arg(2), 3, Fixed(Create))];
    const REMOVE: &[PathArg] = &[arg(Cwd, 0, Fixed(Remove))];
    const UNLINKAT: &[PathArg] = &[arg(Arg(0), 1, Fixed(Remove))];
    const MKDIR: &[PathArg] = &[arg(Cwd, 0, Fixed(Create))];
    const MKDIRAT: &[PathArg] = &[arg(Arg(0), 1, Fixed(Create))];
    const LINK: &[PathArg] = &[arg(Cwd, 0, Fixed(Read)), arg(Cwd, 1, Fixed(Create))];
    const LINKAT: &[PathArg] = &[arg(Arg(0), 1, Fixed(Read)), arg(Arg(2), 3, Fixed(Create))];
    // The target of a symbolic link is only text: only the link is made.
    const SYMLINK: &[PathArg] = &[arg(Cwd, 1, Fixed(Create))];
    const SYMLINKAT: &[PathArg] = &[arg(Arg(1), 2, Fixed(Create))];
    const TRUNCATE: &[PathArg] = &[arg(Cwd, 0, Fixed(Write))];
    match nr {
        libc::SYS_open => OPEN,
        libc::SYS_openat => OPENAT,
        libc::SYS_openat2 => OPENAT2,
        libc::SYS_creat => CREAT,
        libc::SYS_rename => RENAME,
        libc::SYS_renameat | libc::SYS_renameat2 => RENAMEAT,
        libc::SYS_unlink | libc::SYS_rmdir => REMOVE,
        // With AT_REMOVEDIR too: a directory removed is still a removal.
        libc::SYS_unlinkat => UNLINKAT,
        libc::SYS_mkdir => MKDIR,
        libc::SYS_mkdirat => MKDIRAT,
        libc::SYS_link => LINK,
        libc::SYS_linkat => LINKAT,
        libc::SYS_symlink => SYMLINK,
        libc::SYS_symlinkat => SYMLINKAT,
        libc::SYS_truncate => TRUNCATE,
        _ => &[],
    }
}

/// What `open(2)` flags do to the path: `O_CREAT` makes it, `O_WRONLY`/`O_RDWR`/
/// `O_TRUNC` write it, anything else reads it. `O_PATH` reads whatever else is set
/// (the kernel ignores the rest). `O_TMPFILE` (always with write access) writes the
/// directory it names.
pub(super) fn open_access(flags: u64) -> FileAccess {
    const O_PATH: u64 = libc::O_PATH as u64;
    const O_CREAT: u64 = libc::O_CREAT as u64;
    const O_TRUNC: u64 = libc::O_TRUNC as u64;
    const O_ACCMODE: u64 = libc::O_ACCMODE as u64;
    if flags & O_PATH != 0 {
        FileAccess::Read
    } else if flags & O_CREAT != 0 {
        FileAccess::Create
    } else if flags & O_ACCMODE != 0 || flags & O_TRUNC != 0 {
        FileAccess::Write
    } else {
        FileAccess::Read
    }
}

/// `path` made absolute from `base` (an absolute directory, for a relative path) and
/// normalised lexically: no `.`, `..` or empty components, no `..` above `/`, no
/// trailing `/`.
pub(super) fn normalize(base: &[u8], path: &[u8]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = Vec::new();
    let start: &[u8] = if path.starts_with(b"/") { b"" } else { base };
    for part in start
        .split(|&b| b == b'/')
        .chain(path.split(|&b| b == b'/'))
    {
        match part {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            name => parts.push(name),
        }
    }
    if parts.is_empty() {
        return b"/".to_vec();
    }
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 1).sum());
    for part in parts {
        out.push(b'/');
        out.extend_from_slice(part);
    }
    out
}

/// An `int` argument as the kernel reads it: the low 32 bits of the register.
fn int_arg(value: u64) -> i32 {
    i32::from_ne_bytes(
        u32::try_from(value & 0xffff_ffff)
            .unwrap_or(0)
            .to_ne_bytes(),
    )
}

/// openat2's `struct open_how`, as far as it matters here.
struct OpenHow {
    flags: u64,
    resolve: u64,
}

/// The first version of `struct open_how` (`OPEN_HOW_SIZE_VER0`): flags, mode, resolve.
const OPEN_HOW_SIZE: u64 = 24;

fn read_open_how(host_pid: libc::pid_t, addr: u64, size: u64) -> Option<OpenHow> {
    // Smaller than the first version, the kernel refuses the call (EINVAL).
    if size < OPEN_HOW_SIZE {
        return None;
    }
    let mut raw = [0u8; 24];
    let n = crate::sys::read_process_memory(host_pid, addr, &mut raw).ok()?;
    if n != raw.len() {
        return None;
    }
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(raw.get(i * 8..i * 8 + 8)?);
        Some(u64::from_ne_bytes(w))
    };
    Some(OpenHow {
        flags: word(0)?,
        resolve: word(2)?,
    })
}

/// `RESOLVE_IN_ROOT`: an absolute path starts at the directory descriptor.
const RESOLVE_IN_ROOT: u64 = 0x10;

/// Reads the paths traced call `nr` of task `host_pid` names, with `args` its
/// arguments. A path that cannot be read (unreadable memory, longer than the kernel
/// accepts, empty, or relative to a directory that cannot be named) is left out: the
/// kernel refuses such calls, or decides them on its own.
pub(super) fn read(host_pid: libc::pid_t, nr: i64, args: &[u64; 6]) -> Vec<Named> {
    let wanted = path_args(nr);
    let mut named = Vec::with_capacity(wanted.len());
    // Both paths of a rename or a link usually start from the working directory:
    // read its link once.
    let mut cwd: Option<Option<Vec<u8>>> = None;
    for want in wanted {
        let Some(&addr) = args.get(want.path) else {
            continue;
        };
        let Some((path, too_long)) = read_cstring(host_pid, addr, PATH_MAX) else {
            continue;
        };
        if too_long {
            continue;
        }
        let (access, in_root) = match want.how {
            Source::Fixed(access) => (access, false),
            Source::Flags(i) => (
                open_access(args.get(i).map_or(0, |f| f & 0xffff_ffff)),
                false,
            ),
            Source::OpenHow(i) => {
                let (Some(&at), Some(&size)) = (args.get(i), args.get(i + 1)) else {
                    continue;
                };
                let Some(how) = read_open_how(host_pid, at, size) else {
                    continue;
                };
                (open_access(how.flags), how.resolve & RESOLVE_IN_ROOT != 0)
            }
        };
        // linkat's AT_EMPTY_PATH: an empty old path is the descriptor's own file.
        let empty_path_ok = nr == libc::SYS_linkat
            && want.path == 1
            && args
                .get(4)
                .is_some_and(|f| int_arg(*f) & libc::AT_EMPTY_PATH != 0);
        if path.is_empty() && !empty_path_ok {
            continue;
        }
        if path.starts_with(b"/") && !in_root {
            named.push(Named {
                path: normalize(b"/", &path),
                access,
            });
            continue;
        }
        let dirfd = match want.dir {
            Dir::Cwd => libc::AT_FDCWD,
            Dir::Arg(i) => args.get(i).map_or(libc::AT_FDCWD, |&fd| int_arg(fd)),
        };
        let base = if dirfd == libc::AT_FDCWD {
            cwd.get_or_insert_with(|| resolve::read_link(&format!("/proc/{host_pid}/cwd")))
                .clone()
        } else {
            resolve::read_link(&format!("/proc/{host_pid}/fd/{dirfd}"))
        };
        // Not a directory of the sandbox's tree (a pipe, a socket): nothing to name.
        let Some(base) = base.filter(|b| b.starts_with(b"/")) else {
            continue;
        };
        let path = if in_root {
            // `..` stops at the descriptor: normalise below it, then place it there.
            let below = normalize(b"/", &path);
            normalize(&base, below.strip_prefix(b"/").unwrap_or(&below))
        } else {
            normalize(&base, &path)
        };
        named.push(Named { path, access });
    }
    named
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_traced_call_has_its_paths_and_no_other_call_has_any() {
        for s in vg_seccomp::TRACED_FILE_SYSCALLS {
            let args = path_args(i64::from(s.nr));
            assert!(!args.is_empty(), "{}", s.name);
            for a in args {
                assert!(a.path < 6, "{}", s.name);
                if let Dir::Arg(i) = a.dir {
                    assert!(i < 6 && i != a.path, "{}", s.name);
                }
            }
        }
        for nr in (0..=470).chain([-1, i64::MAX]) {
            let traced = vg_seccomp::TRACED_FILE_SYSCALLS
                .iter()
                .any(|s| i64::from(s.nr) == nr);
            assert_eq!(!path_args(nr).is_empty(), traced, "{nr}");
        }
    }

    #[test]
    fn each_call_reports_what_it_does_to_each_path() {
        use FileAccess::{Create, Read, Remove, Write};
        let fixed = |nr| -> Vec<FileAccess> {
            path_args(nr)
                .iter()
                .map(|a| match a.how {
                    Source::Fixed(access) => access,
                    other => panic!("{nr}: {other:?}"),
                })
                .collect()
        };
        assert_eq!(fixed(libc::SYS_rename), [Remove, Create]);
        assert_eq!(fixed(libc::SYS_renameat), [Remove, Create]);
        assert_eq!(fixed(libc::SYS_renameat2), [Remove, Create]);
        assert_eq!(fixed(libc::SYS_link), [Read, Create]);
        assert_eq!(fixed(libc::SYS_linkat), [Read, Create]);
        assert_eq!(fixed(libc::SYS_symlink), [Create]);
        assert_eq!(fixed(libc::SYS_symlinkat), [Create]);
        assert_eq!(fixed(libc::SYS_mkdir), [Create]);
        assert_eq!(fixed(libc::SYS_mkdirat), [Create]);
        assert_eq!(fixed(libc::SYS_creat), [Create]);
        assert_eq!(fixed(libc::SYS_unlink), [Remove]);
        assert_eq!(fixed(libc::SYS_unlinkat), [Remove]);
        assert_eq!(fixed(libc::SYS_rmdir), [Remove]);
        assert_eq!(fixed(libc::SYS_truncate), [Write]);
        // The link's own name, not its target, for symlink(target, linkpath).
        assert_eq!(path_args(libc::SYS_symlink)[0].path, 1);
        assert_eq!(path_args(libc::SYS_symlinkat)[0].dir, Dir::Arg(1));
        assert_eq!(path_args(libc::SYS_open)[0].how, Source::Flags(1));
        assert_eq!(path_args(libc::SYS_openat)[0].how, Source::Flags(2));
        assert_eq!(path_args(libc::SYS_openat2)[0].how, Source::OpenHow(2));
    }

    #[test]
    fn open_flags_give_the_access() {
        let f = |v: libc::c_int| u64::try_from(v).unwrap();
        use FileAccess::{Create, Read, Write};
        assert_eq!(open_access(f(libc::O_RDONLY)), Read);
        assert_eq!(open_access(f(libc::O_RDONLY | libc::O_CLOEXEC)), Read);
        assert_eq!(open_access(f(libc::O_DIRECTORY | libc::O_NOFOLLOW)), Read);
        assert_eq!(open_access(f(libc::O_PATH)), Read);
        assert_eq!(
            open_access(f(libc::O_PATH | libc::O_CREAT | libc::O_RDWR)),
            Read
        );
        assert_eq!(open_access(f(libc::O_WRONLY)), Write);
        assert_eq!(open_access(f(libc::O_RDWR)), Write);
        assert_eq!(open_access(f(libc::O_RDONLY | libc::O_TRUNC)), Write);
        assert_eq!(open_access(f(libc::O_WRONLY | libc::O_APPEND)), Write);
        assert_eq!(open_access(f(libc::O_TMPFILE | libc::O_RDWR)), Write);
        assert_eq!(open_access(f(libc::O_CREAT)), Create);
        assert_eq!(
            open_access(f(libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC)),
            Create
        );
        assert_eq!(
            open_access(f(libc::O_CREAT | libc::O_EXCL | libc::O_RDWR)),
            Create
        );
    }

    #[test]
    fn paths_are_made_absolute_and_normalised_lexically() {
        let n = |base: &str, path: &str| {
            String::from_utf8(normalize(base.as_bytes(), path.as_bytes())).unwrap()
        };
        assert_eq!(n("/", "/etc/passwd"), "/etc/passwd");
        assert_eq!(n("/home/u", "/etc//./passwd"), "/etc/passwd");
        assert_eq!(n("/home/u", "notes.txt"), "/home/u/notes.txt");
        assert_eq!(n("/home/u/", "./a/../b/"), "/home/u/b");
        assert_eq!(n("/home/u", "../../../../x"), "/x");
        assert_eq!(n("/", "/.."), "/");
        assert_eq!(n("/tmp", "."), "/tmp");
        assert_eq!(n("/tmp", ".."), "/");
        assert_eq!(n("/a", "b/./c//d/.."), "/a/b/c");
        // Bytes, not text: any file name is kept as it is.
        assert_eq!(normalize(b"/d", b"\xff\xfe/x"), b"/d/\xff\xfe/x".to_vec());
    }

    #[test]
    fn int_arguments_are_the_low_32_bits() {
        assert_eq!(int_arg(0xffff_ffff_ffff_ff9c), libc::AT_FDCWD);
        assert_eq!(int_arg(0x0000_0000_ffff_ff9c), libc::AT_FDCWD);
        assert_eq!(int_arg(0xdead_beef_0000_0003), 3);
    }

    /// Our own calls, read like another process's: the strings and the directory
    /// descriptor are ours.
    #[test]
    fn reads_paths_flags_and_bases_from_a_process() {
        use std::os::fd::AsRawFd;
        let pid = libc::pid_t::try_from(std::process::id()).unwrap();
        let addr = |s: &std::ffi::CStr| s.as_ptr() as u64;
        let dir = std::env::temp_dir().join(format!("vg-access-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dir_fd = std::fs::File::open(&dir).unwrap();
        let fd = u64::try_from(dir_fd.as_raw_fd()).unwrap();
        let cwd = std::env::current_dir().unwrap();
        let old = c"old/../a.txt";
        let new = c"/tmp//b.txt";
        let got = read(
            pid,
            libc::SYS_renameat2,
            &[fd, addr(old), u64::MAX - 99, addr(new), 0, 0],
        );
        let dir_bytes = dir.as_os_str().as_encoded_bytes();
        let mut a = dir_bytes.to_vec();
        a.extend_from_slice(b"/a.txt");
        assert_eq!(
            got,
            [
                Named {
                    path: a,
                    access: FileAccess::Remove
                },
                Named {
                    path: b"/tmp/b.txt".to_vec(),
                    access: FileAccess::Create
                },
            ]
        );
        // AT_FDCWD (as a zero-extended int too): the working directory.
        let rel = c"x/y";
        let got = read(
            pid,
            libc::SYS_openat,
            &[
                0xffff_ff9c,
                addr(rel),
                u64::try_from(libc::O_WRONLY).unwrap(),
                0,
                0,
                0,
            ],
        );
        let mut x = cwd.as_os_str().as_encoded_bytes().to_vec();
        x.extend_from_slice(b"/x/y");
        assert_eq!(
            got,
            [Named {
                path: x,
                access: FileAccess::Write
            }]
        );
        // openat2: flags and resolve from open_how; RESOLVE_IN_ROOT keeps `..` and
        // `/` at the descriptor.
        let how: [u64; 3] = [
            u64::try_from(libc::O_CREAT | libc::O_RDWR).unwrap(),
            0o600,
            RESOLVE_IN_ROOT,
        ];
        let abs = c"/../c";
        let got = read(
            pid,
            libc::SYS_openat2,
            &[fd, addr(abs), how.as_ptr() as u64, 24, 0, 0],
        );
        let mut c = dir_bytes.to_vec();
        c.extend_from_slice(b"/c");
        assert_eq!(
            got,
            [Named {
                path: c,
                access: FileAccess::Create
            }]
        );
        // A size the kernel refuses, an unreadable path, an empty one: nothing.
        assert!(
            read(
                pid,
                libc::SYS_openat2,
                &[fd, addr(abs), how.as_ptr() as u64, 8, 0, 0]
            )
            .is_empty()
        );
        assert!(read(pid, libc::SYS_unlink, &[8, 0, 0, 0, 0, 0]).is_empty());
        assert!(read(pid, libc::SYS_unlink, &[addr(c""), 0, 0, 0, 0, 0]).is_empty());
        // A descriptor that is no directory: a relative path cannot be named.
        let (pipe_r, _pipe_w) = std::io::pipe().unwrap();
        let p = u64::try_from(pipe_r.as_raw_fd()).unwrap();
        assert!(read(pid, libc::SYS_mkdirat, &[p, addr(rel), 0, 0, 0, 0]).is_empty());
        // linkat(fd, "", AT_EMPTY_PATH): the descriptor's own file.
        let got = read(
            pid,
            libc::SYS_linkat,
            &[
                fd,
                addr(c""),
                u64::MAX - 99,
                addr(new),
                u64::try_from(libc::AT_EMPTY_PATH).unwrap(),
                0,
            ],
        );
        assert_eq!(
            got[0],
            Named {
                path: dir_bytes.to_vec(),
                access: FileAccess::Read
            }
        );
        assert_eq!(got.len(), 2);
        // Not a traced call.
        assert!(read(pid, libc::SYS_read, &[0; 6]).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
