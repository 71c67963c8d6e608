//! `--mount HOST:CONTAINER[:ro|:rw]` specifications.

use std::path::{Path, PathBuf};

use crate::paths::normalize_absolute;

/// A user-requested bind mount, parsed but not yet checked against the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountSpec {
    pub host: PathBuf,
    pub container: PathBuf,
    pub read_only: bool,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MountSpecError {
    #[error("invalid mount '{spec}': expected HOST:CONTAINER[:ro|:rw]")]
    Shape { spec: String },
    #[error("invalid mount '{spec}': host path '{path}' must be absolute (try \"$PWD/{path}\")")]
    RelativeHost { spec: String, path: String },
    #[error(
        "invalid mount '{spec}': container path '{path}' must be absolute and must not contain '..'"
    )]
    BadContainer { spec: String, path: String },
    #[error("invalid mount '{spec}': unknown option '{option}' (use 'ro' or 'rw')")]
    Option { spec: String, option: String },
    #[error(
        "invalid mount '{spec}': '{path}' is managed by the sandbox and cannot be a mount target"
    )]
    ReservedTarget { spec: String, path: String },
}

/// Targets that the sandbox builds itself; mounting over them would undo a layer.
const RESERVED_TARGETS: &[&str] = &["/", "/proc", "/dev"];

impl MountSpec {
    /// Parses `HOST:CONTAINER[:OPTIONS]`. Colons inside paths are not supported, as
    /// with Docker's `-v`.
    pub fn parse(spec: &str) -> Result<Self, MountSpecError> {
        let parts: Vec<&str> = spec.split(':').collect();
        let (host, container, option) = match parts.as_slice() {
            [h, c] => (*h, *c, None),
            [h, c, o] => (*h, *c, Some(*o)),
            _ => {
                return Err(MountSpecError::Shape {
                    spec: spec.to_owned(),
                });
            }
        };
        if host.is_empty() || container.is_empty() {
            return Err(MountSpecError::Shape {
                spec: spec.to_owned(),
            });
        }
        let read_only = match option {
            None | Some("rw") => false,
            Some("ro") => true,
            Some(other) => {
                return Err(MountSpecError::Option {
                    spec: spec.to_owned(),
                    option: other.to_owned(),
                });
            }
        };
        let host_path = Path::new(host);
        let host = normalize_absolute(host_path).ok_or_else(|| MountSpecError::RelativeHost {
            spec: spec.to_owned(),
            path: host.to_owned(),
        })?;
        let container = checked_target(container).map_err(|reserved| {
            if reserved {
                MountSpecError::ReservedTarget {
                    spec: spec.to_owned(),
                    path: container.to_owned(),
                }
            } else {
                MountSpecError::BadContainer {
                    spec: spec.to_owned(),
                    path: container.to_owned(),
                }
            }
        })?;
        Ok(Self {
            host,
            container,
            read_only,
        })
    }

    /// A read-only mount of `path` at the same place (`--read-only PATH`).
    pub fn read_only_path(path: &str) -> Result<Self, MountSpecError> {
        Self::parse(&format!("{path}:{path}:ro"))
    }

    /// A writable mount of `path` at the same place (a config file's `read_write`).
    pub fn read_write_path(path: &str) -> Result<Self, MountSpecError> {
        Self::parse(&format!("{path}:{path}:rw"))
    }
}

/// Validates a path inside the sandbox. `Err(true)` means reserved, `Err(false)` malformed.
fn checked_target(path: &str) -> Result<PathBuf, bool> {
    let normalized = normalize_absolute(Path::new(path)).ok_or(false)?;
    let reserved = RESERVED_TARGETS
        .iter()
        .any(|r| normalized == Path::new(r) || (*r != "/" && normalized.starts_with(r)));
    if reserved {
        return Err(true);
    }
    Ok(normalized)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_read_write_by_default_and_ro_option() {
        let m = MountSpec::parse("/home/a/p:/workspace").unwrap();
        assert_eq!(m.host, PathBuf::from("/home/a/p"));
        assert_eq!(m.container, PathBuf::from("/workspace"));
        assert!(!m.read_only);
        assert!(
            MountSpec::parse("/tmp/logs:/tmp/logs:ro")
                .unwrap()
                .read_only
        );
        assert!(!MountSpec::parse("/x:/y:rw").unwrap().read_only);
    }

    #[test]
    fn rejects_bad_specs_with_specific_errors() {
        assert!(matches!(
            MountSpec::parse("relative:/w"),
            Err(MountSpecError::RelativeHost { .. })
        ));
        assert!(matches!(
            MountSpec::parse("/x:relative"),
            Err(MountSpecError::BadContainer { .. })
        ));
        assert!(matches!(
            MountSpec::parse("/x:/a/../b"),
            Err(MountSpecError::BadContainer { .. })
        ));
        assert!(matches!(
            MountSpec::parse("/x:/y:rx"),
            Err(MountSpecError::Option { .. })
        ));
        assert!(matches!(
            MountSpec::parse("/x"),
            Err(MountSpecError::Shape { .. })
        ));
        assert!(matches!(
            MountSpec::parse("/x:/y:ro:z"),
            Err(MountSpecError::Shape { .. })
        ));
        for reserved in ["/", "/proc", "/proc/1", "/dev", "/dev/shm"] {
            assert!(
                matches!(
                    MountSpec::parse(&format!("/x:{reserved}")),
                    Err(MountSpecError::ReservedTarget { .. })
                ),
                "{reserved}"
            );
        }
        // Looks like /dev but is not beneath it.
        assert!(MountSpec::parse("/x:/devices").is_ok());
    }

    #[test]
    fn read_only_path_mounts_in_place() {
        let m = MountSpec::read_only_path("/etc").unwrap();
        assert_eq!(m.host, m.container);
        assert!(m.read_only);
    }
}
