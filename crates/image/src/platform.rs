//! The platform this host runs, in OCI terms, for picking a manifest from an index.

use std::fmt;

/// An OCI platform: `linux/amd64`, `linux/arm64/v8`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    pub os: String,
    pub architecture: String,
    pub variant: Option<String>,
}

impl Platform {
    /// The host's platform, from the target this binary was built for (GOOS/GOARCH
    /// spelling, as OCI uses).
    pub fn host() -> Self {
        let arch = std::env::consts::ARCH;
        let architecture = match arch {
            "x86_64" => "amd64",
            "x86" => "386",
            "aarch64" => "arm64",
            "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
            "loongarch64" => "loong64",
            other => other,
        };
        let variant = match arch {
            "aarch64" => Some("v8".to_owned()),
            _ => None,
        };
        Self {
            os: std::env::consts::OS.to_owned(),
            architecture: architecture.to_owned(),
            variant,
        }
    }

    /// Whether an index entry for `os`/`architecture`/`variant` runs here. A missing
    /// variant matches (most indexes omit `v8` for arm64).
    pub fn matches(&self, os: &str, architecture: &str, variant: Option<&str>) -> bool {
        os == self.os
            && architecture == self.architecture
            && match (variant, &self.variant) {
                (None, _) => true,
                (Some(v), Some(mine)) => v == mine,
                (Some(_), None) => false,
            }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_platform_uses_oci_names() {
        let p = Platform::host();
        assert_eq!(p.os, "linux");
        #[cfg(target_arch = "x86_64")]
        assert_eq!(p.to_string(), "linux/amd64");
        assert!(p.matches(&p.os, &p.architecture, None));
        assert!(!p.matches("windows", &p.architecture, None));
        assert!(!p.matches(&p.os, "s390x-not-this", None));
    }

    #[test]
    fn variants_must_agree_when_both_are_given() {
        let arm = Platform {
            os: "linux".into(),
            architecture: "arm64".into(),
            variant: Some("v8".into()),
        };
        assert!(arm.matches("linux", "arm64", Some("v8")));
        assert!(arm.matches("linux", "arm64", None));
        assert!(!arm.matches("linux", "arm64", Some("v9")));
        let amd = Platform {
            os: "linux".into(),
            architecture: "amd64".into(),
            variant: None,
        };
        assert!(!amd.matches("linux", "amd64", Some("v3")));
    }
}
