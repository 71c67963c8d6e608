//! Which sandboxed process asked for a destination: the owner of the socket that sent
//! the DNS question or the SYN, found from the sandbox's own `/proc/net` tables (read
//! through its init, whose network namespace is the sandbox's) and the descriptors of
//! the processes under init. Best effort: a process that already exited, or one whose
//! descriptors we may not read, leaves the question unanswered.

use std::fs;

/// Processes looked at, at most, for one question.
const MAX_PROCESSES: usize = 4096;

/// The command line (quoted) of the process under `init` (a host pid) that owns the
/// `udp` or `tcp` socket bound to local `port` (inside the sandbox).
pub fn command_of(init: libc::pid_t, source: vg_netstack::gate::Source) -> Option<String> {
    let table = fs::read_to_string(format!("/proc/{init}/net/{}", source.protocol)).ok()?;
    let inode = inode_of(&table, source.port)?;
    let wanted = format!("socket:[{inode}]");
    let mut stack = vec![init];
    let mut seen = 0;
    while let Some(pid) = stack.pop() {
        seen += 1;
        if seen > MAX_PROCESSES {
            return None;
        }
        stack.extend(children(pid));
        if pid == init {
            continue;
        }
        let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        let owns = fds.flatten().any(|fd| {
            fs::read_link(fd.path()).is_ok_and(|target| target.as_os_str() == wanted.as_str())
        });
        if owns {
            let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let argv: Vec<&[u8]> = cmdline
                .strip_suffix(b"\0")
                .unwrap_or(&cmdline)
                .split(|b| *b == 0)
                .collect();
            return Some(vg_records::quote_argv(argv));
        }
    }
    None
}

/// The inode of the socket bound to local `port` in a `/proc/net/{udp,tcp}` table.
fn inode_of(table: &str, port: u16) -> Option<u64> {
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (_, local_port) = fields.get(1)?.rsplit_once(':')?;
        if u16::from_str_radix(local_port, 16).ok()? != port {
            return None;
        }
        fields.get(9)?.parse().ok().filter(|inode| *inode != 0)
    })
}

/// The children of every thread of `pid`.
fn children(pid: libc::pid_t) -> Vec<libc::pid_t> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<libc::pid_t>>()
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const UDP: &str = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  123: 0100000A:A1B2 0100000A:0035 01 00000000:00000000 00:00000000 00000000  1000        0 98765 2 0000000000000000 0
  124: 0100000A:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000  1000        0 11111 2 0000000000000000 0
";

    #[test]
    fn a_sockets_inode_is_found_by_its_local_port() {
        assert_eq!(inode_of(UDP, 0xA1B2), Some(98765));
        assert_eq!(inode_of(UDP, 53), Some(11111));
        assert_eq!(inode_of(UDP, 1), None);
    }

    #[test]
    fn our_own_socket_is_found_under_our_parent() {
        // This test process is a child of its parent: walking from the parent finds
        // the socket it owns.
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = socket.local_addr().unwrap().port();
        let parent = std::os::unix::process::parent_id() as libc::pid_t;
        let found = command_of(
            parent,
            vg_netstack::gate::Source {
                protocol: "udp",
                port,
            },
        );
        // The parent's network namespace is ours; its descriptors may be unreadable
        // to us only if it is another user's, which a test runner never is.
        assert!(found.is_some_and(|c| !c.is_empty()));
    }
}
