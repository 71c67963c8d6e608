//! The compiler checked by running its programs in the interpreter.

use super::*;
use crate::data::SeccompData;
use crate::interp;
use crate::rules::{AUDIT_ARCH_I386, Cmp};
use crate::syscalls::{Syscall, sys};

const EPERM: Action = Action::Errno(1);

/// Argument values that exercise both halves of each word.
const VALUES: [u64; 8] = [
    0,
    1,
    0x5412,
    0xffff_ffff,
    0x1_0000_0000,
    0x1_0000_5412,
    0x8000_0000_0000_0003,
    u64::MAX,
];

fn syscall(nr: u32) -> Syscall {
    Syscall { name: "test", nr }
}

fn run(prog: &[SockFilter], data: &SeccompData) -> Action {
    let ret = interp::run(prog, data).unwrap_or_else(|e| panic!("{e}"));
    Action::from_ret_value(ret).unwrap_or_else(|| panic!("unknown ret {ret:#x}"))
}

/// Compiled program and model agree on `nrs` × every argument in VALUES
/// placed in every argument slot.
fn assert_agrees(filter: &Filter, nrs: impl IntoIterator<Item = u32>) -> Vec<SockFilter> {
    let prog = compile(filter).unwrap_or_else(|e| panic!("{e}"));
    for nr in nrs {
        for slot in 0..ARG_COUNT {
            for v in VALUES {
                let mut args = [0x0123_4567_89ab_cdef; ARG_COUNT];
                args[slot] = v;
                let data = SeccompData::x86_64(nr, args);
                assert_eq!(
                    run(&prog, &data),
                    filter.evaluate(&data),
                    "nr {nr} args {args:x?}"
                );
            }
        }
    }
    prog
}

#[test]
fn sock_filter_has_kernel_layout() {
    assert_eq!(size_of::<SockFilter>(), size_of::<libc::sock_filter>());
    assert_eq!(align_of::<SockFilter>(), align_of::<libc::sock_filter>());
    assert_eq!(size_of::<SockFilter>(), 8);
    let raw: libc::sock_filter = SockFilter::jump(op::JEQ_K, 7, 1, 2).into();
    assert_eq!((raw.code, raw.jt, raw.jf, raw.k), (op::JEQ_K, 1, 2, 7));
}

#[test]
fn opcodes_match_bpf_common_h() {
    let u = |v: u32| u16::try_from(v).unwrap();
    assert_eq!(op::LD_W_ABS, u(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS));
    assert_eq!(op::LD_IMM, u(libc::BPF_LD | libc::BPF_W | libc::BPF_IMM));
    assert_eq!(op::LDX_IMM, u(libc::BPF_LDX | libc::BPF_W | libc::BPF_IMM));
    assert_eq!(
        op::ALU_AND_K,
        u(libc::BPF_ALU | libc::BPF_AND | libc::BPF_K)
    );
    assert_eq!(op::ALU_OR_K, u(libc::BPF_ALU | libc::BPF_OR | libc::BPF_K));
    assert_eq!(op::TAX, u(libc::BPF_MISC | libc::BPF_TAX));
    assert_eq!(op::TXA, u(libc::BPF_MISC | libc::BPF_TXA));
    assert_eq!(op::JA, u(libc::BPF_JMP | libc::BPF_JA));
    assert_eq!(op::JEQ_K, u(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K));
    assert_eq!(op::JGT_K, u(libc::BPF_JMP | libc::BPF_JGT | libc::BPF_K));
    assert_eq!(op::JGE_K, u(libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K));
    assert_eq!(op::JSET_K, u(libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K));
    assert_eq!(op::RET_K, u(libc::BPF_RET | libc::BPF_K));
    assert_eq!(op::RET_A, u(libc::BPF_RET | libc::BPF_A));
    assert_eq!(BPF_MAXINSNS, usize::try_from(libc::BPF_MAXINSNS).unwrap());
}

#[test]
fn empty_filter_checks_arch_and_x32_then_defaults() {
    let mut f = Filter::new(Action::Allow);
    f.x32_action = EPERM;
    let prog = assert_agrees(&f, [0, 1, 500, X32_SYSCALL_BIT - 1]);
    assert_eq!(run(&prog, &SeccompData::x86_64(3, [0; 6])), Action::Allow);
    let i386 = SeccompData {
        arch: AUDIT_ARCH_I386,
        ..SeccompData::x86_64(3, [0; 6])
    };
    assert_eq!(run(&prog, &i386), Action::KillProcess);
    for nr in [X32_SYSCALL_BIT, X32_SYSCALL_BIT + 1, 0x8000_0000, u32::MAX] {
        assert_eq!(run(&prog, &SeccompData::x86_64(nr, [0; 6])), EPERM);
    }
}

#[test]
fn every_comparison_kind_agrees_with_the_model() {
    let cmps = [
        Cmp::Eq(0x5412),
        Cmp::Ne(0x5412),
        Cmp::Eq(0xffff_ffff),
        Cmp::MaskedEq {
            mask: 0xf,
            value: 3,
        },
        Cmp::MaskedNe {
            mask: 0xff00_00ff,
            value: 0x1200_0003,
        },
        Cmp::MaskedEq {
            mask: 0xf0,
            value: 0x0f, // can never match
        },
    ];
    let wide = [
        Cmp::Eq(0x1_0000_5412),
        Cmp::Ne(u64::MAX),
        Cmp::MaskedEq {
            mask: 0x8000_0000_0000_000f,
            value: 0x8000_0000_0000_0003,
        },
        Cmp::MaskedNe {
            mask: 0xffff_ffff_0000_0000,
            value: 0,
        },
    ];
    let mut f = Filter::new(EPERM);
    let mut nr = 0;
    for arg in 0..6u8 {
        for cmp in cmps {
            for cond in [Cond::arg32(arg, cmp), Cond::arg64(arg, cmp)] {
                f.push(SyscallRule::when(syscall(nr), vec![cond], Action::Allow));
                nr += 1;
            }
        }
        for cmp in wide {
            f.push(SyscallRule::when(
                syscall(nr),
                vec![Cond::arg64(arg, cmp)],
                Action::Allow,
            ));
            nr += 1;
        }
    }
    assert_agrees(&f, 0..=nr);
}

#[test]
fn multi_condition_rules_and_fallbacks() {
    let s = syscall(41);
    let mut f = Filter::new(EPERM);
    f.push(SyscallRule::when(
        s,
        vec![
            Cond::arg32(0, Cmp::Eq(2)),
            Cond::arg32(
                1,
                Cmp::MaskedEq {
                    mask: 0xf,
                    value: 3,
                },
            ),
        ],
        Action::Errno(13),
    ));
    f.push(SyscallRule::when(
        s,
        vec![Cond::arg32(0, Cmp::Eq(2))],
        Action::Log,
    ));
    f.push(SyscallRule::always(s, Action::Errno(97)));
    let prog = compile(&f).unwrap();
    let act = |a0, a1| run(&prog, &SeccompData::x86_64(41, [a0, a1, 0, 0, 0, 0]));
    assert_eq!(act(2, 3), Action::Errno(13));
    assert_eq!(act(2, 0x80803), Action::Errno(13));
    assert_eq!(act(0xffff_ffff_0000_0002, 1), Action::Log);
    assert_eq!(act(10, 3), Action::Errno(97));
    assert_agrees(&f, 39..44);
}

/// Many conditional syscalls spread over the number space: forces jumps
/// far beyond 255 instructions in the tree, the rule blocks and to the
/// shared returns at the end.
fn big_filter(syscalls: u32) -> Filter {
    let mut f = Filter::new(EPERM);
    for nr in 0..syscalls {
        let s = syscall(nr * 3);
        let arg = u8::try_from(nr % 6).unwrap();
        f.push(SyscallRule::when(
            s,
            vec![Cond::arg64(arg, Cmp::Eq(u64::from(nr)))],
            Action::Errno(u16::try_from(nr % 4000 + 2).unwrap()),
        ));
        f.push(SyscallRule::when(
            s,
            vec![Cond::arg32(
                arg,
                Cmp::MaskedNe {
                    mask: 0xff,
                    value: 0x12,
                },
            )],
            Action::Log,
        ));
        if nr % 2 == 0 {
            f.push(SyscallRule::always(s, Action::Allow));
        }
        // Two neighbouring plain actions: the tree node separating them
        // jumps to two far-away shared returns.
        f.push(SyscallRule::always(syscall(nr * 3 + 1), Action::Allow));
        f.push(SyscallRule::always(syscall(nr * 3 + 2), Action::Log));
    }
    f
}

#[test]
fn long_programs_use_trampolines_and_still_agree() {
    let f = big_filter(200);
    let prog = assert_agrees(&f, 0..620);
    assert!(prog.len() > 1000, "len {}", prog.len());
    let far_ja = prog
        .iter()
        .filter(|i| i.code == op::JA && i.k > 255)
        .count();
    assert!(far_ja > 0, "expected far JA trampolines");
    // Both targets far: `jxx 0, 1` followed by two trampolines.
    let both_far = prog.windows(3).any(|w| {
        w[0].code == op::JGE_K
            && (w[0].jt, w[0].jf) == (0, 1)
            && w[1].code == op::JA
            && w[2].code == op::JA
    });
    assert!(both_far, "expected a jump with two trampolines");
    // Spot-check the distinct errnos, which live at the far end.
    for nr in [0u32, 1, 100, 199] {
        let mut args = [0; 6];
        args[usize::try_from(nr % 6).unwrap()] = u64::from(nr);
        let data = SeccompData::x86_64(nr * 3, args);
        assert_eq!(
            run(&prog, &data),
            Action::Errno(u16::try_from(nr + 2).unwrap())
        );
    }
}

#[test]
fn too_long_is_an_error() {
    let f = big_filter(1000);
    assert!(matches!(compile(&f), Err(CompileError::TooLong { len }) if len > BPF_MAXINSNS));
}

#[test]
fn invalid_filters_are_rejected() {
    let s = sys!(SYS_ioctl);
    let with = |rule: SyscallRule| {
        let mut f = Filter::new(EPERM);
        f.push(rule);
        compile(&f)
    };
    assert_eq!(
        with(SyscallRule::when(
            s,
            vec![Cond::arg32(6, Cmp::Eq(0))],
            Action::Allow
        )),
        Err(CompileError::BadArgIndex {
            syscall: "ioctl",
            index: 6
        })
    );
    assert_eq!(
        with(SyscallRule::when(
            s,
            vec![Cond::arg32(1, Cmp::Eq(0x1_0000_0000))],
            Action::Allow
        )),
        Err(CompileError::ValueTooWide {
            syscall: "ioctl",
            value: 0x1_0000_0000
        })
    );
    assert!(matches!(
        with(SyscallRule::when(
            s,
            vec![Cond::arg32(
                1,
                Cmp::MaskedEq {
                    mask: 0x1_0000_0000,
                    value: 0
                }
            )],
            Action::Allow
        )),
        Err(CompileError::ValueTooWide { .. })
    ));
    assert_eq!(
        with(SyscallRule::always(
            syscall(X32_SYSCALL_BIT + 1),
            Action::Allow
        )),
        Err(CompileError::BadSyscallNumber {
            syscall: "test",
            nr: X32_SYSCALL_BIT + 1
        })
    );
    assert_eq!(
        with(SyscallRule::always(s, Action::Errno(4096))),
        Err(CompileError::ErrnoOutOfRange { errno: 4096 })
    );

    let mut f = Filter::new(EPERM);
    f.push(SyscallRule::always(s, Action::Allow));
    f.push(SyscallRule::always(sys!(SYS_read), Action::Allow));
    f.push(SyscallRule::when(
        s,
        vec![Cond::arg32(1, Cmp::Eq(0x5412))],
        EPERM,
    ));
    assert_eq!(
        compile(&f),
        Err(CompileError::UnreachableRule {
            syscall: "ioctl",
            position: 1
        })
    );
}

#[test]
fn runs_of_equal_actions_collapse() {
    let mut f = Filter::new(EPERM);
    for nr in 0..100 {
        f.push(SyscallRule::always(syscall(nr), Action::Allow));
    }
    let prog = assert_agrees(&f, 0..110);
    // arch check, nr load, x32 check, one split, rets.
    assert!(prog.len() <= 8, "{prog:?}");
}

#[test]
fn output_is_deterministic() {
    let f = big_filter(50);
    assert_eq!(compile(&f).unwrap(), compile(&f).unwrap());
}
