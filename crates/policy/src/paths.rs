//! Lexical path helpers shared by the mount and view modules.

use std::path::{Component, Path, PathBuf};

/// Normalises an absolute path lexically: removes `.` components and repeated slashes.
/// Returns `None` for relative paths and for paths that contain `..`, which we never
/// accept in a policy because their meaning depends on symlinks met on the way.
pub fn normalize_absolute(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(part) => out.push(part),
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// True when `path` is `base` or lies beneath it (component-wise, so `/a/bc` is not
/// beneath `/a/b`).
pub fn is_within(path: &Path, base: &Path) -> bool {
    path.starts_with(base)
}

/// Number of components, used to order mounts parent-first.
pub fn depth(path: &Path) -> usize {
    path.components().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_and_rejects_parent_components() {
        assert_eq!(
            normalize_absolute(Path::new("/a//b/./c/")),
            Some(PathBuf::from("/a/b/c"))
        );
        assert_eq!(normalize_absolute(Path::new("/a/../etc")), None);
        assert_eq!(normalize_absolute(Path::new("a/b")), None);
        assert_eq!(normalize_absolute(Path::new("/")), Some(PathBuf::from("/")));
    }

    #[test]
    fn within_is_component_wise() {
        assert!(is_within(Path::new("/a/b/c"), Path::new("/a/b")));
        assert!(is_within(Path::new("/a/b"), Path::new("/a/b")));
        assert!(!is_within(Path::new("/a/bc"), Path::new("/a/b")));
    }
}
