//! A terminal for a Docker or Podman container's command (`sandbox run -t`,
//! `sandbox shell`, `sandbox exec -t`): our init opens a pseudo-terminal in the
//! container's own devpts (`/dev/ptmx` of the `/dev/pts` the engine mounts), makes
//! the slave the command's controlling terminal, and sends the master to the
//! supervisor, which relays and records it as the native sandbox's terminal. The
//! engine's own terminal (`docker run -t`) is never used: its bytes would reach the
//! user without passing through the record.
//!
//! The supervisor never trusts the descriptor it receives: it must be a pty master
//! open for reading and writing, whose devpts is one mounted in the init's mount
//! namespace and not the supervisor's own (the host's terminals). Anything else —
//! a slave, a file, a socket, an `O_PATH` descriptor, a host terminal — is refused
//! ([`check_master`]), and the command gets no go.

use std::os::fd::{AsFd, BorrowedFd};

use crate::sys;

/// The device number every pty master's file has: the multiplexer (`/dev/ptmx`,
/// `/dev/pts/ptmx`), major 5 (`TTYAUX_MAJOR`), minor 2.
const PTMX: (u32, u32) = (5, 2);

/// What the supervisor knows of a descriptor a container's init sent as its
/// terminal's master (pure input of [`check_master`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterFacts {
    /// Its device number (major, minor) when it is a character device.
    pub char_device: Option<(u32, u32)>,
    /// Its file status flags (`F_GETFL`); `None`: unreadable.
    pub flags: Option<i32>,
    /// `TIOCGPTN`: its pty's number, answered by a master only.
    pub pty_number: Option<u32>,
    /// The device of the devpts its slave lives in (opened through the master,
    /// `TIOCGPTPEER`); `None`: no slave could be opened.
    pub devpts: Option<u64>,
    /// The devices of the devpts file systems mounted in the init's mount namespace
    /// (its `/proc/PID/mountinfo`).
    pub container_devpts: Vec<u64>,
    /// The device of the supervisor's own `/dev/pts` (the host's terminals).
    pub host_devpts: Option<u64>,
}

/// Whether the descriptor may be relayed as the container's terminal (pure).
pub fn check_master(facts: &MasterFacts) -> Result<(), String> {
    let Some(flags) = facts.flags else {
        return Err("its open flags cannot be read".into());
    };
    if flags & libc::O_PATH != 0 || flags & libc::O_ACCMODE != libc::O_RDWR {
        return Err("it is not open for reading and writing".into());
    }
    match facts.char_device {
        Some(device) if device == PTMX => {}
        Some((major, minor)) => {
            return Err(format!(
                "it is the character device {major}:{minor}, not a pseudo-terminal master"
            ));
        }
        None => return Err("it is not a character device".into()),
    }
    if facts.pty_number.is_none() {
        return Err("it is not a pseudo-terminal master (it has no pty number)".into());
    }
    let Some(devpts) = facts.devpts else {
        return Err("its terminal's slave side cannot be opened (locked, or gone)".into());
    };
    if facts.host_devpts == Some(devpts) {
        return Err("it is one of this host's own terminals".into());
    }
    if !facts.container_devpts.contains(&devpts) {
        return Err("its terminal is not of the devpts mounted in the container".into());
    }
    Ok(())
}

/// The devices (`st_dev`) of the devpts file systems a `mountinfo` lists (pure).
pub fn devpts_devices(mountinfo: &str) -> Vec<u64> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (mount, fs) = line.split_once(" - ")?;
            if fs.split(' ').next() != Some("devpts") {
                return None;
            }
            let (major, minor) = mount.split(' ').nth(2)?.split_once(':')?;
            Some(libc::makedev(major.parse().ok()?, minor.parse().ok()?))
        })
        .collect()
}

/// [`MasterFacts`] of `master`, sent by the init whose pid (in our pid namespace)
/// is `init`.
pub fn master_facts(master: BorrowedFd<'_>, init: i32) -> MasterFacts {
    use std::os::unix::fs::MetadataExt;
    let char_device = sys::fstat(master).ok().and_then(|st| {
        (st.st_mode & libc::S_IFMT == libc::S_IFCHR)
            .then(|| (libc::major(st.st_rdev), libc::minor(st.st_rdev)))
    });
    let pty_number = sys::pty_number(master).ok();
    // Opened read-only and at once closed: never our controlling terminal
    // (`O_NOCTTY`), and never read or written.
    let devpts = pty_number
        .and_then(|_| sys::pty_peer(master, libc::O_RDONLY).ok())
        .and_then(|slave| sys::fstat(slave.as_fd()).ok())
        .map(|st| st.st_dev);
    MasterFacts {
        char_device,
        flags: sys::status_flags(master).ok(),
        pty_number,
        devpts,
        container_devpts: std::fs::read_to_string(format!("/proc/{init}/mountinfo"))
            .map(|text| devpts_devices(&text))
            .unwrap_or_default(),
        host_devpts: std::fs::metadata("/dev/pts").ok().map(|m| m.dev()),
    }
}

/// Checks `master`, sent by the init whose pid is `init` (see [`check_master`]).
pub fn check_terminal(master: BorrowedFd<'_>, init: i32) -> Result<(), String> {
    check_master(&master_facts(master, init))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn good() -> MasterFacts {
        MasterFacts {
            char_device: Some(PTMX),
            flags: Some(libc::O_RDWR),
            pty_number: Some(0),
            devpts: Some(libc::makedev(0, 77)),
            container_devpts: vec![libc::makedev(0, 60), libc::makedev(0, 77)],
            host_devpts: Some(libc::makedev(0, 25)),
        }
    }

    #[test]
    fn a_master_of_the_container_s_devpts_is_taken() {
        assert_eq!(check_master(&good()), Ok(()));
        // Without a /dev/pts of our own, the container's is still required.
        let no_host = MasterFacts {
            host_devpts: None,
            ..good()
        };
        assert_eq!(check_master(&no_host), Ok(()));
    }

    #[test]
    fn anything_else_is_refused() {
        let cases: [(MasterFacts, &str); 9] = [
            (
                MasterFacts {
                    flags: Some(libc::O_RDONLY),
                    ..good()
                },
                "reading and writing",
            ),
            (
                MasterFacts {
                    flags: Some(libc::O_PATH | libc::O_RDWR),
                    ..good()
                },
                "reading and writing",
            ),
            (
                MasterFacts {
                    flags: None,
                    ..good()
                },
                "flags",
            ),
            // A slave (/dev/pts/N: major 136).
            (
                MasterFacts {
                    char_device: Some((136, 0)),
                    ..good()
                },
                "136:0",
            ),
            // A file, a socket, a pipe.
            (
                MasterFacts {
                    char_device: None,
                    ..good()
                },
                "not a character device",
            ),
            (
                MasterFacts {
                    pty_number: None,
                    ..good()
                },
                "no pty number",
            ),
            (
                MasterFacts {
                    devpts: None,
                    ..good()
                },
                "cannot be opened",
            ),
            // The host's own terminals, even were they mounted in the container.
            (
                MasterFacts {
                    devpts: Some(libc::makedev(0, 25)),
                    container_devpts: vec![libc::makedev(0, 25)],
                    ..good()
                },
                "this host's own terminals",
            ),
            // Another devpts (another container's, another session's).
            (
                MasterFacts {
                    devpts: Some(libc::makedev(0, 99)),
                    ..good()
                },
                "not of the devpts mounted in the container",
            ),
        ];
        for (facts, why) in cases {
            let e = check_master(&facts).unwrap_err();
            assert!(e.contains(why), "{facts:?}: {e}");
        }
    }

    #[test]
    fn devpts_mounts_are_read_from_mountinfo() {
        let text = "\
615 614 0:60 / / rw,relatime - overlay overlay rw,lowerdir=/a
617 615 0:64 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
618 617 0:65 / /dev/pts rw,nosuid,noexec,relatime - devpts devpts rw,gid=5,mode=620,ptmxmode=666
620 617 259:1 /x /dev/devpts-look-alike rw - ext4 /dev/nvme0n1p1 rw
621 617 0:66 / /dev/pts2 rw shared:4 master:1 - devpts devpts rw
bad line
";
        assert_eq!(
            devpts_devices(text),
            vec![libc::makedev(0, 65), libc::makedev(0, 66)]
        );
        assert!(devpts_devices("").is_empty());
    }

    #[test]
    fn a_pty_of_the_host_s_devpts_is_refused_and_a_slave_never_passes() {
        // A pty of our own devpts, judged as if our process were the container's
        // init: it is of a devpts in "its" mount namespace, but the host's own,
        // which is refused; a slave or another device never passes.
        let (master, slave) = sys::open_pty().unwrap();
        let pid = i32::try_from(std::process::id()).unwrap();
        let facts = master_facts(master.as_fd(), pid);
        assert_eq!(facts.char_device, Some(PTMX));
        assert!(facts.pty_number.is_some());
        assert!(facts.devpts.is_some());
        assert!(facts.container_devpts.contains(&facts.devpts.unwrap()));
        assert_eq!(facts.host_devpts, facts.devpts);
        let e = check_terminal(master.as_fd(), pid).unwrap_err();
        assert!(e.contains("this host's own terminals"), "{e}");
        let e = check_terminal(slave.as_fd(), pid).unwrap_err();
        assert!(e.contains("not a pseudo-terminal master"), "{e}");
        let null = std::fs::File::options()
            .read(true)
            .write(true)
            .open("/dev/null")
            .unwrap();
        assert!(
            check_terminal(null.as_fd(), pid)
                .unwrap_err()
                .contains("1:3")
        );
    }
}
