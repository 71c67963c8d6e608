//! Who the sandboxed command runs as.

use std::path::PathBuf;

/// An unprivileged host identity. The sandboxed command runs with exactly this uid and
/// gid on the host, mapped to the same numbers inside its user namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
    pub name: String,
    pub home: PathBuf,
}

/// One entry of a passwd-format file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasswdEntry {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
}

/// Parses `/etc/passwd` text, skipping malformed lines rather than failing: one bad
/// line in a system file must not stop the sandbox.
pub fn parse_passwd(text: &str) -> Vec<PasswdEntry> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(':').collect();
            if f.len() < 7 {
                return None;
            }
            Some(PasswdEntry {
                name: f[0].to_owned(),
                uid: f[2].parse().ok()?,
                gid: f[3].parse().ok()?,
                home: PathBuf::from(f[5]),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_passwd_and_skips_junk() {
        let text = "root:x:0:0:root:/root:/bin/bash\njunk\nbob:x:1001:1002::/home/bob:/bin/sh\nbad:x:notanumber:1::/:/bin/sh\n";
        let e = parse_passwd(text);
        assert_eq!(e.len(), 2);
        assert_eq!(e[1].name, "bob");
        assert_eq!(e[1].gid, 1002);
        assert_eq!(e[1].home, PathBuf::from("/home/bob"));
    }
}
