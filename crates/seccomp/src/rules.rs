//! The rule model: what a filter *means*, independent of how it is compiled.
//!
//! [`Filter::evaluate`] is the reference semantics. The BPF compiler
//! ([`crate::bpf`]) must agree with it for every input, and the tests check
//! exactly that by running the compiled program in [`crate::interp`].

use crate::data::{ARG_COUNT, SeccompData};
use crate::syscalls::Syscall;

/// `AUDIT_ARCH_X86_64` = `EM_X86_64 (62) | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE`.
pub const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
/// `AUDIT_ARCH_I386` = `EM_386 (3) | __AUDIT_ARCH_LE` (the int 0x80 / 32-bit ABI).
pub const AUDIT_ARCH_I386: u32 = 0x4000_0003;
/// `__X32_SYSCALL_BIT`: x32 syscalls arrive with `AUDIT_ARCH_X86_64` and
/// this bit set in the number, so the arch check alone does not catch them.
pub const X32_SYSCALL_BIT: u32 = 0x4000_0000;
/// Largest errno a `SECCOMP_RET_ERRNO` may carry (the kernel's `MAX_ERRNO`).
pub const MAX_ERRNO: u16 = 4095;

/// `SECCOMP_RET_KILL_PROCESS`.
pub const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
/// `SECCOMP_RET_ERRNO`; the low 16 bits carry the errno.
pub const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
/// `SECCOMP_RET_USER_NOTIF`.
pub const SECCOMP_RET_USER_NOTIF: u32 = 0x7fc0_0000;
/// `SECCOMP_RET_LOG`.
pub const SECCOMP_RET_LOG: u32 = 0x7ffc_0000;
/// `SECCOMP_RET_ALLOW`.
pub const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
/// Mask of the data part of a return value.
pub const SECCOMP_RET_DATA: u32 = 0x0000_ffff;

/// What the kernel does with a syscall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// Run the syscall.
    Allow,
    /// Fail the syscall with this errno, without running it.
    Errno(u16),
    /// Kill the whole process (not just the thread), as if by SIGSYS.
    KillProcess,
    /// Hand the syscall to a supervisor via the seccomp user-notification fd
    /// (`SECCOMP_RET_USER_NOTIF`). Without a listener the kernel fails the
    /// syscall with `ENOSYS`.
    Notify,
    /// Run the syscall and log it to the audit log.
    Log,
}

impl Action {
    /// The 32-bit `SECCOMP_RET_*` value a BPF program returns for this action.
    pub const fn ret_value(self) -> u32 {
        match self {
            Action::Allow => SECCOMP_RET_ALLOW,
            Action::Errno(errno) => SECCOMP_RET_ERRNO | errno as u32,
            Action::KillProcess => SECCOMP_RET_KILL_PROCESS,
            Action::Notify => SECCOMP_RET_USER_NOTIF,
            Action::Log => SECCOMP_RET_LOG,
        }
    }

    /// Inverse of [`Action::ret_value`]; `None` for values this crate never emits.
    pub fn from_ret_value(value: u32) -> Option<Action> {
        match value {
            SECCOMP_RET_ALLOW => Some(Action::Allow),
            SECCOMP_RET_KILL_PROCESS => Some(Action::KillProcess),
            SECCOMP_RET_USER_NOTIF => Some(Action::Notify),
            SECCOMP_RET_LOG => Some(Action::Log),
            v if v & !SECCOMP_RET_DATA == SECCOMP_RET_ERRNO => {
                u16::try_from(v & SECCOMP_RET_DATA).ok().map(Action::Errno)
            }
            _ => None,
        }
    }
}

/// How much of a 64-bit argument register a condition looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Width {
    /// Only the low 32 bits. Use this for arguments the kernel declares as
    /// `int` / `unsigned int` (ioctl cmd, socket domain, personality): the
    /// kernel ignores the high half, so a 64-bit comparison could be bypassed
    /// by putting garbage there.
    Low32,
    /// All 64 bits (pointers, `unsigned long` flags, sizes).
    Full64,
}

/// A comparison of the (width-truncated) argument value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cmp {
    /// `arg == v`
    Eq(u64),
    /// `arg != v`
    Ne(u64),
    /// `arg & mask == value`
    MaskedEq { mask: u64, value: u64 },
    /// `arg & mask != value`
    MaskedNe { mask: u64, value: u64 },
}

impl Cmp {
    /// `(mask, value, negated)`: every comparison is "masked equality",
    /// possibly negated. The compiler relies on this normal form.
    pub const fn normal_form(self) -> (u64, u64, bool) {
        match self {
            Cmp::Eq(v) => (u64::MAX, v, false),
            Cmp::Ne(v) => (u64::MAX, v, true),
            Cmp::MaskedEq { mask, value } => (mask, value, false),
            Cmp::MaskedNe { mask, value } => (mask, value, true),
        }
    }
}

/// A condition on one syscall argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cond {
    /// Argument index, `0..6`. Out-of-range indexes are rejected by the compiler.
    pub arg: u8,
    /// Which bits of the argument are compared.
    pub width: Width,
    /// The comparison.
    pub cmp: Cmp,
}

impl Cond {
    /// Condition on the low 32 bits of argument `arg`.
    pub const fn arg32(arg: u8, cmp: Cmp) -> Self {
        Self {
            arg,
            width: Width::Low32,
            cmp,
        }
    }

    /// Condition on all 64 bits of argument `arg`.
    pub const fn arg64(arg: u8, cmp: Cmp) -> Self {
        Self {
            arg,
            width: Width::Full64,
            cmp,
        }
    }

    /// Whether the condition holds for these arguments. A condition on a
    /// nonexistent argument never holds (and never compiles).
    pub fn holds(&self, args: &[u64; ARG_COUNT]) -> bool {
        let Some(&raw) = args.get(usize::from(self.arg)) else {
            return false;
        };
        let value = match self.width {
            Width::Low32 => raw & u64::from(u32::MAX),
            Width::Full64 => raw,
        };
        let (mask, expected, negated) = self.cmp.normal_form();
        (value & mask == expected) != negated
    }
}

/// One rule: if every condition holds, `action` applies.
///
/// A rule without conditions always matches; it is how a syscall's fallback
/// is written (e.g. "deny TIOCSTI, deny TIOCLINUX, otherwise allow ioctl").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyscallRule {
    /// Syscall name, for reports.
    pub name: &'static str,
    /// x86_64 syscall number.
    pub nr: u32,
    /// All must hold for the rule to match; empty means "always".
    pub conditions: Vec<Cond>,
    /// What happens when the rule matches.
    pub action: Action,
}

impl SyscallRule {
    /// A rule that always matches.
    pub fn always(syscall: Syscall, action: Action) -> Self {
        Self::when(syscall, Vec::new(), action)
    }

    /// A rule that matches when all `conditions` hold.
    pub fn when(syscall: Syscall, conditions: Vec<Cond>, action: Action) -> Self {
        Self {
            name: syscall.name,
            nr: syscall.nr,
            conditions,
            action,
        }
    }

    /// Whether every condition holds.
    pub fn matches(&self, args: &[u64; ARG_COUNT]) -> bool {
        self.conditions.iter().all(|c| c.holds(args))
    }
}

/// A whole seccomp policy as a plain value.
///
/// Evaluation order, mirrored exactly by the compiled program:
/// 1. `arch != self.arch` → `bad_arch_action`;
/// 2. `nr >= X32_SYSCALL_BIT` → `x32_action`;
/// 3. the rules for `nr`, in the order they appear in `rules`; the first whose
///    conditions all hold decides;
/// 4. otherwise `default_action`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// Expected `AUDIT_ARCH_*` (syscall numbers are only meaningful per arch).
    pub arch: u32,
    /// Action for any other arch (e.g. the i386 `int 0x80` ABI).
    pub bad_arch_action: Action,
    /// Action for syscall numbers with the x32 bit set (or larger).
    pub x32_action: Action,
    /// Action when no rule matches.
    pub default_action: Action,
    /// Rules; only the relative order of rules for the same syscall matters.
    pub rules: Vec<SyscallRule>,
}

impl Filter {
    /// An x86_64 filter with no rules: other arches are killed, x32 and
    /// everything else get `default_action`.
    pub fn new(default_action: Action) -> Self {
        Self {
            arch: AUDIT_ARCH_X86_64,
            bad_arch_action: Action::KillProcess,
            x32_action: default_action,
            default_action,
            rules: Vec::new(),
        }
    }

    /// Appends a rule (checked after earlier rules for the same syscall).
    pub fn push(&mut self, rule: SyscallRule) {
        self.rules.push(rule);
    }

    /// The action for a native-arch syscall `nr` with `args`.
    pub fn action_for(&self, nr: u32, args: [u64; ARG_COUNT]) -> Action {
        if nr >= X32_SYSCALL_BIT {
            return self.x32_action;
        }
        self.rules_for(nr)
            .find(|rule| rule.matches(&args))
            .map_or(self.default_action, |rule| rule.action)
    }

    /// The action for a complete `seccomp_data`, including the arch check.
    pub fn evaluate(&self, data: &SeccompData) -> Action {
        if data.arch != self.arch {
            return self.bad_arch_action;
        }
        self.action_for(data.nr, data.args)
    }

    /// The rules for syscall `nr`, in evaluation order.
    pub fn rules_for(&self, nr: u32) -> impl Iterator<Item = &SyscallRule> {
        self.rules.iter().filter(move |rule| rule.nr == nr)
    }

    /// The number of the syscall called `name`, if any rule mentions it.
    pub fn nr_of(&self, name: &str) -> Option<u32> {
        self.rules.iter().find(|r| r.name == name).map(|r| r.nr)
    }

    /// Compiles to a classic BPF program; see [`crate::bpf::compile`].
    pub fn compile(&self) -> Result<Vec<crate::bpf::SockFilter>, crate::bpf::CompileError> {
        crate::bpf::compile(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syscalls::sys;

    const EPERM: u16 = 1;

    #[test]
    fn ret_values_match_kernel_abi() {
        assert_eq!(Action::Allow.ret_value(), libc::SECCOMP_RET_ALLOW);
        assert_eq!(Action::Errno(13).ret_value(), libc::SECCOMP_RET_ERRNO | 13);
        assert_eq!(
            Action::KillProcess.ret_value(),
            libc::SECCOMP_RET_KILL_PROCESS
        );
        assert_eq!(Action::Notify.ret_value(), libc::SECCOMP_RET_USER_NOTIF);
        assert_eq!(Action::Log.ret_value(), libc::SECCOMP_RET_LOG);
        for a in [
            Action::Allow,
            Action::Errno(0),
            Action::Errno(MAX_ERRNO),
            Action::KillProcess,
            Action::Notify,
            Action::Log,
        ] {
            assert_eq!(Action::from_ret_value(a.ret_value()), Some(a));
        }
        assert_eq!(Action::from_ret_value(0x0003_0000), None); // RET_TRAP
    }

    #[test]
    fn low32_ignores_high_half() {
        let c = Cond::arg32(1, Cmp::Eq(0x5412));
        assert!(c.holds(&[0, 0x5412, 0, 0, 0, 0]));
        assert!(c.holds(&[0, 0xdead_beef_0000_5412, 0, 0, 0, 0]));
        assert!(!c.holds(&[0, 0x5413, 0, 0, 0, 0]));
        let c = Cond::arg64(1, Cmp::Eq(0x5412));
        assert!(!c.holds(&[0, 0xdead_beef_0000_5412, 0, 0, 0, 0]));
    }

    #[test]
    fn masked_and_negated_comparisons() {
        let args = |a0| [a0, 0, 0, 0, 0, 0];
        let eq = Cond::arg64(
            0,
            Cmp::MaskedEq {
                mask: 0xf0,
                value: 0x30,
            },
        );
        let ne = Cond::arg64(
            0,
            Cmp::MaskedNe {
                mask: 0xf0,
                value: 0x30,
            },
        );
        for v in [0x30, 0x3f, 0x1_0000_0035, 0x40, 0] {
            assert_eq!(eq.holds(&args(v)), v & 0xf0 == 0x30, "{v:#x}");
            assert_eq!(ne.holds(&args(v)), !eq.holds(&args(v)), "{v:#x}");
        }
        assert!(Cond::arg64(0, Cmp::Ne(7)).holds(&args(8)));
        assert!(!Cond::arg64(0, Cmp::Ne(7)).holds(&args(7)));
        assert!(!Cond::arg64(6, Cmp::Ne(7)).holds(&args(8)), "bad index");
    }

    #[test]
    fn first_matching_rule_wins_then_default() {
        let ioctl = sys!(SYS_ioctl);
        let mut f = Filter::new(Action::Errno(EPERM));
        f.push(SyscallRule::when(
            ioctl,
            vec![Cond::arg32(1, Cmp::Eq(0x5412))],
            Action::Errno(EPERM),
        ));
        f.push(SyscallRule::always(ioctl, Action::Allow));
        f.push(SyscallRule::when(
            sys!(SYS_read),
            vec![Cond::arg64(0, Cmp::Eq(0))],
            Action::Log,
        ));
        assert_eq!(
            f.action_for(ioctl.nr, [0, 0x5412, 0, 0, 0, 0]),
            Action::Errno(EPERM)
        );
        assert_eq!(
            f.action_for(ioctl.nr, [0, 0x5401, 0, 0, 0, 0]),
            Action::Allow
        );
        assert_eq!(f.action_for(0, [0; 6]), Action::Log);
        assert_eq!(f.action_for(0, [1, 0, 0, 0, 0, 0]), Action::Errno(EPERM));
        assert_eq!(f.action_for(999, [0; 6]), Action::Errno(EPERM));
        assert_eq!(f.nr_of("ioctl"), Some(16));
        assert_eq!(f.nr_of("nope"), None);
    }

    #[test]
    fn arch_and_x32_are_checked_first() {
        let mut f = Filter::new(Action::Allow);
        f.x32_action = Action::Errno(EPERM);
        assert_eq!(
            f.evaluate(&SeccompData {
                arch: AUDIT_ARCH_I386,
                ..SeccompData::x86_64(0, [0; 6])
            }),
            Action::KillProcess
        );
        assert_eq!(
            f.evaluate(&SeccompData::x86_64(X32_SYSCALL_BIT, [0; 6])),
            Action::Errno(EPERM)
        );
        assert_eq!(
            f.evaluate(&SeccompData::x86_64(u32::MAX, [0; 6])),
            Action::Errno(EPERM)
        );
        assert_eq!(
            f.evaluate(&SeccompData::x86_64(X32_SYSCALL_BIT - 1, [0; 6])),
            Action::Allow
        );
    }
}
