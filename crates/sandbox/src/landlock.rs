//! Installs Landlock rules that mirror the filesystem view.

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use vg_policy::landlock::{Access as Class, LandlockRules};

use crate::error::SetupError;
use crate::sys;

/// Puts the calling process in a Landlock domain of its own, nested in the sandbox's
/// and no narrower in practice (its one rule forbids making block devices, which the
/// sandbox cannot do anyway). Landlock lets a process inspect another (`ptrace`,
/// `/proc/PID/mem`, `environ`, `fd/`) only when that one's domain is its own or nested
/// in it: a persistent sandbox's commands, each in a domain of its own, cannot reach
/// each other, nor a command init is still starting.
pub fn nest() -> Result<(), SetupError> {
    let fail = |e: &dyn std::fmt::Display| SetupError::Landlock {
        reason: format!("cannot give the command a domain of its own: {e}"),
    };
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::MakeBlock)
        .map_err(|e| fail(&e))?
        .create()
        .map_err(|e| fail(&e))?
        .restrict_self()
        .map_err(|e| fail(&e))
        .map(drop)
}

/// What Landlock actually enforces in this session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LandlockReport {
    pub kernel_abi: i32,
    pub abi_used: i32,
    pub scoped_signals: bool,
    pub scoped_abstract_unix: bool,
}

/// The newest ABI this build knows how to use.
const NEWEST: ABI = ABI::V6;

fn abi_from(version: i32) -> ABI {
    match version {
        i32::MIN..=0 => ABI::Unsupported,
        1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        _ => NEWEST,
    }
}

fn abi_number(abi: ABI) -> i32 {
    abi as i32
}

/// The access rights of each class, restricted to what `abi` supports.
pub fn access_for(class: Class, abi: ABI) -> BitFlags<AccessFs> {
    let all = AccessFs::from_all(abi);
    let rights = match class {
        Class::ReadDir => AccessFs::ReadDir.into(),
        Class::ReadExec => AccessFs::ReadDir | AccessFs::ReadFile | AccessFs::Execute,
        Class::ReadWrite => all,
        Class::Device => {
            AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev
        }
        Class::Proc => AccessFs::ReadDir | AccessFs::ReadFile | AccessFs::WriteFile,
    };
    rights & all
}

/// Restricts the calling thread (and its future children) to `rules`.
pub fn restrict(rules: &LandlockRules) -> Result<LandlockReport, SetupError> {
    let kernel_abi = sys::landlock_abi_version().map_err(|e| SetupError::Landlock {
        reason: match e.raw_os_error() {
            Some(libc::ENOSYS) => "this kernel was built without Landlock".to_owned(),
            Some(libc::EOPNOTSUPP) => "Landlock is disabled on this kernel".to_owned(),
            _ => format!("probing it failed: {e}"),
        },
    })?;
    let abi = abi_from(kernel_abi);
    let fail = |e: &dyn std::fmt::Display| SetupError::Landlock {
        reason: format!("building the ruleset failed: {e}"),
    };
    let scopes_supported = kernel_abi >= 6;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(|e| fail(&e))?;
    if scopes_supported {
        ruleset = ruleset
            .scope(Scope::Signal | Scope::AbstractUnixSocket)
            .map_err(|e| fail(&e))?;
    }
    let mut created = ruleset.create().map_err(|e| fail(&e))?;
    for (path, class) in &rules.rules {
        let fd = PathFd::new(path).map_err(|e| SetupError::Landlock {
            reason: format!("cannot open {} for a rule: {e}", path.display()),
        })?;
        // Files (single-file mounts) only take file rights.
        let mut access = access_for(*class, abi);
        if !path.is_dir() {
            access &= AccessFs::from_file(abi);
        }
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| fail(&e))?;
    }
    let status = created.restrict_self().map_err(|e| fail(&e))?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(SetupError::Landlock {
            reason: format!(
                "the kernel enforced it only partially ({:?})",
                status.ruleset
            ),
        });
    }
    Ok(LandlockReport {
        kernel_abi,
        abi_used: abi_number(abi),
        scoped_signals: scopes_supported,
        scoped_abstract_unix: scopes_supported,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_only_classes_never_write() {
        for abi in [ABI::V1, ABI::V3, ABI::V5, NEWEST] {
            for class in [Class::ReadDir, Class::ReadExec] {
                let a = access_for(class, abi);
                assert!(
                    !a.intersects(AccessFs::from_write(abi)),
                    "{class:?} {abi:?}"
                );
            }
            assert!(!access_for(Class::Device, abi).contains(AccessFs::MakeReg));
            assert!(!access_for(Class::Proc, abi).contains(AccessFs::Execute));
            assert_eq!(access_for(Class::ReadWrite, abi), AccessFs::from_all(abi));
        }
    }

    #[test]
    fn rights_follow_the_abi() {
        assert!(!access_for(Class::ReadWrite, ABI::V1).contains(AccessFs::Refer));
        assert!(access_for(Class::ReadWrite, ABI::V2).contains(AccessFs::Refer));
        assert!(!access_for(Class::Device, ABI::V4).contains(AccessFs::IoctlDev));
        assert!(access_for(Class::Device, ABI::V5).contains(AccessFs::IoctlDev));
        assert_eq!(abi_from(0), ABI::Unsupported);
        assert_eq!(abi_from(99), NEWEST);
    }
}
