//! Paths the file tools accept: inside `/workspace`, named relative to it or
//! absolutely, never leaving it. Checked lexically here (`..`, NUL, length); the
//! command that touches the file checks again inside the sandbox with `realpath`, so
//! a symlink cannot lead out either.

/// Where the tools' files live, inside the sandbox.
pub const WORKSPACE: &str = "/workspace";

/// The longest path accepted.
const MAX_PATH: usize = 4096;

/// `path` as an absolute, normalised path inside [`WORKSPACE`], or why not.
pub fn resolve(path: &str) -> Result<String, String> {
    if path.contains('\0') {
        return Err("the path contains a NUL byte".into());
    }
    if path.len() > MAX_PATH {
        return Err(format!("the path is longer than {MAX_PATH} bytes"));
    }
    let full = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{WORKSPACE}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in full.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(format!(
                        "{path:?} leaves {WORKSPACE}: the file tools only reach the workspace"
                    ));
                }
            }
            other => parts.push(other),
        }
    }
    let normal = format!("/{}", parts.join("/"));
    if normal == WORKSPACE || normal.starts_with(&format!("{WORKSPACE}/")) {
        Ok(normal)
    } else {
        Err(format!(
            "{path:?} is outside {WORKSPACE}: the file tools only reach the workspace"
        ))
    }
}

/// A shell snippet that sets `$p` to the real path of `$1` (symlinks followed, the
/// trailing components may be missing) and fails with status 3 unless it is still
/// inside the workspace. `realpath -m` is GNU's; an image with BusyBox (whose
/// `realpath` takes no options and wants all but the last component to exist) gets
/// the real path of the deepest part that exists, with the missing rest appended:
/// what does not exist cannot be a symbolic link. `$1` is absolute (see
/// [`resolve`]), so it never reads as an option.
pub const GUARD: &str = r#"p=$(realpath -m -- "$1" 2>/dev/null) || {
q=$1 r=
while [ -n "$q" ] && [ ! -e "$q" ] && [ ! -L "$q" ]; do r=/${q##*/}$r; q=${q%/*}; done
p=$(realpath "${q:-/}")$r || exit 3
}
case "$p" in /workspace|/workspace/*) ;; *) echo "$1 leads outside /workspace (to $p)" >&2; exit 3;; esac
"#;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_in_the_workspace() {
        assert_eq!(resolve("a.py").unwrap(), "/workspace/a.py");
        assert_eq!(resolve("./d/../b.txt").unwrap(), "/workspace/b.txt");
        assert_eq!(resolve("/workspace/x/y").unwrap(), "/workspace/x/y");
        assert_eq!(resolve("").unwrap(), "/workspace");
        assert_eq!(resolve("/workspace").unwrap(), "/workspace");
        for bad in [
            "../etc/passwd",
            "/etc/passwd",
            "/workspace/../root",
            "/workspacex/a",
            "a/../../b",
        ] {
            assert!(resolve(bad).is_err(), "{bad}");
        }
        assert!(resolve("a\0b").unwrap_err().contains("NUL"));
        assert!(resolve(&"a/".repeat(3000)).is_err());
    }
}
