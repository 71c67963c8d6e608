//! Whether an exec line also names the file its path reached (`ran=`).
//!
//! An exec line names the path the program gave (`exe=`). Through a symlink that
//! path can reach another file, and the link can be pointed elsewhere once the
//! program runs: `ln -s payload x; ./x; ln -sf /usr/bin/true x` left a line whose
//! path then named an innocent program (session-22 red team). Both recorders know
//! the file the exec reached by its own path inside the sandbox: seccomp
//! notification from the file it opened to look the path up, the BPF recorder from
//! the kernel's file after the exec. The line names it too whenever the path, read
//! as written, does not name that file.

/// The file's own path to record beside `exe`, or `None` when `exe` (from `cwd`
/// when relative) already names it. Only `.` components and repeated slashes are
/// read away: any other difference (a symlink, a `..` whose meaning a symlink
/// could change) names the file.
pub fn other_file(cwd: &[u8], exe: &[u8], reached: &[u8]) -> Option<Vec<u8>> {
    if reached.is_empty() {
        return None;
    }
    let mut given = Vec::with_capacity(cwd.len() + exe.len() + 1);
    if !exe.starts_with(b"/") {
        given.extend_from_slice(cwd);
        given.push(b'/');
    }
    given.extend_from_slice(exe);
    (normal(&given) != normal(reached)).then(|| reached.to_vec())
}

/// The path's components, without `.` and empty ones.
fn normal(path: &[u8]) -> Vec<&[u8]> {
    path.split(|&b| b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_that_names_the_file_is_not_repeated() {
        assert_eq!(other_file(b"/w", b"/usr/bin/true", b"/usr/bin/true"), None);
        assert_eq!(other_file(b"/w", b"./tool", b"/w/tool"), None);
        assert_eq!(other_file(b"/w/", b"bin//./tool", b"/w/bin/tool"), None);
        assert_eq!(other_file(b"/", b"tool", b"/tool"), None);
        // Nothing known about the file: nothing added.
        assert_eq!(other_file(b"/w", b"./x", b""), None);
    }

    #[test]
    fn a_path_through_a_link_names_the_file_it_reached() {
        // `ln -s payload x; ./x`: the line keeps the file even if x is re-pointed.
        assert_eq!(
            other_file(b"/w", b"./x", b"/w/payload"),
            Some(b"/w/payload".to_vec())
        );
        assert_eq!(
            other_file(b"/w", b"/bin/sh", b"/usr/bin/dash"),
            Some(b"/usr/bin/dash".to_vec())
        );
        // `..` is not read away: through a linked folder it goes elsewhere.
        assert_eq!(
            other_file(b"/w", b"link/../tool", b"/w/tool"),
            Some(b"/w/tool".to_vec())
        );
        // A file of no folder (a memfd) as the kernel names it.
        assert_eq!(
            other_file(b"/w", b"/tmp/l", b"/memfd:x (deleted)"),
            Some(b"/memfd:x (deleted)".to_vec())
        );
    }
}
