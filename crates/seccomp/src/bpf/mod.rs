//! Compiles a [`Filter`] to a classic BPF program.
//!
//! Program shape:
//!
//! ```text
//!   ld  [arch]
//!   jeq #filter.arch, native, → ret bad_arch_action
//! native:
//!   ld  [nr]
//!   jge #X32_SYSCALL_BIT, → ret x32_action, dispatch
//! dispatch:
//!   binary search on nr (jge) over intervals of equal behaviour
//!   leaves: either a shared `ret` (e.g. a run of plainly allowed syscalls)
//!           or an inline block evaluating that syscall's argument rules
//! epilogue:
//!   one `ret` per distinct action
//! ```
//!
//! Consecutive syscall numbers with the same unconditional action collapse
//! into one interval, so the search tree stays small and a syscall costs about
//! `log2(intervals)` comparisons instead of a linear scan.
//!
//! Code is generated against symbolic labels; an assembler lays it out and
//! resolves them. Conditional jumps have 8-bit offsets, so any conditional
//! jump whose target ends up more than 255 instructions away is rewritten to
//! jump to an adjacent `ja` (32-bit offset) trampoline. Programs longer than
//! 255 instructions therefore need no special care from the code generator.

use std::collections::BTreeMap;

use crate::data::{ARG_COUNT, OFFSET_ARCH, OFFSET_NR, arg_high_offset, arg_low_offset};
use crate::rules::{Action, Cond, Filter, MAX_ERRNO, SyscallRule, Width, X32_SYSCALL_BIT};

/// Maximum number of instructions the kernel accepts (`BPF_MAXINSNS`).
pub const BPF_MAXINSNS: usize = 4096;

/// One classic BPF instruction, laid out exactly like the kernel's
/// `struct sock_filter`, so a `&[SockFilter]` can be handed to `seccomp(2)`
/// via `struct sock_fprog`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SockFilter {
    /// Opcode.
    pub code: u16,
    /// Jump offset if the condition is true.
    pub jt: u8,
    /// Jump offset if the condition is false.
    pub jf: u8,
    /// Operand.
    pub k: u32,
}

impl SockFilter {
    /// A non-branching instruction (`BPF_STMT`).
    pub const fn stmt(code: u16, k: u32) -> Self {
        Self {
            code,
            jt: 0,
            jf: 0,
            k,
        }
    }

    /// A conditional jump (`BPF_JUMP`).
    pub const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> Self {
        Self { code, jt, jf, k }
    }
}

impl From<SockFilter> for libc::sock_filter {
    fn from(insn: SockFilter) -> Self {
        libc::sock_filter {
            code: insn.code,
            jt: insn.jt,
            jf: insn.jf,
            k: insn.k,
        }
    }
}

/// The opcodes used here, composed from `linux/bpf_common.h` constants
/// (class | size | mode, or class | op | source).
pub mod op {
    const LD: u16 = 0x00;
    const LDX: u16 = 0x01;
    const ALU: u16 = 0x04;
    const JMP: u16 = 0x05;
    const RET: u16 = 0x06;
    const MISC: u16 = 0x07;
    const W: u16 = 0x00;
    const IMM: u16 = 0x00;
    const ABS: u16 = 0x20;
    const AND: u16 = 0x50;
    const OR: u16 = 0x40;
    const K: u16 = 0x00;
    const A: u16 = 0x10;
    const TAX_OP: u16 = 0x00;
    const TXA_OP: u16 = 0x80;
    const JA_OP: u16 = 0x00;
    const JEQ: u16 = 0x10;
    const JGT: u16 = 0x20;
    const JGE: u16 = 0x30;
    const JSET: u16 = 0x40;

    /// `BPF_LD | BPF_W | BPF_ABS`: `A = seccomp_data[k]`.
    pub const LD_W_ABS: u16 = LD | W | ABS;
    /// `BPF_LD | BPF_W | BPF_IMM`: `A = k`.
    pub const LD_IMM: u16 = LD | W | IMM;
    /// `BPF_LDX | BPF_W | BPF_IMM`: `X = k`.
    pub const LDX_IMM: u16 = LDX | W | IMM;
    /// `BPF_ALU | BPF_AND | BPF_K`: `A &= k`.
    pub const ALU_AND_K: u16 = ALU | AND | K;
    /// `BPF_ALU | BPF_OR | BPF_K`: `A |= k`.
    pub const ALU_OR_K: u16 = ALU | OR | K;
    /// `BPF_MISC | BPF_TAX`: `X = A`.
    pub const TAX: u16 = MISC | TAX_OP;
    /// `BPF_MISC | BPF_TXA`: `A = X`.
    pub const TXA: u16 = MISC | TXA_OP;
    /// `BPF_JMP | BPF_JA`: `pc += k` (32-bit offset).
    pub const JA: u16 = JMP | JA_OP;
    /// `BPF_JMP | BPF_JEQ | BPF_K`.
    pub const JEQ_K: u16 = JMP | JEQ | K;
    /// `BPF_JMP | BPF_JGT | BPF_K` (unsigned).
    pub const JGT_K: u16 = JMP | JGT | K;
    /// `BPF_JMP | BPF_JGE | BPF_K` (unsigned).
    pub const JGE_K: u16 = JMP | JGE | K;
    /// `BPF_JMP | BPF_JSET | BPF_K`: taken if `A & k != 0`.
    pub const JSET_K: u16 = JMP | JSET | K;
    /// `BPF_RET | BPF_K`.
    pub const RET_K: u16 = RET | K;
    /// `BPF_RET | BPF_A`.
    pub const RET_A: u16 = RET | A;
}

/// Why a [`Filter`] could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// A condition names an argument seccomp does not have.
    #[error("rule for {syscall}: argument index {index} is out of range (0..{ARG_COUNT})")]
    BadArgIndex {
        /// Syscall name.
        syscall: &'static str,
        /// The bad index.
        index: u8,
    },
    /// A 32-bit condition with a mask or value that does not fit in 32 bits;
    /// silently truncating it would change the rule's meaning.
    #[error("rule for {syscall}: 32-bit comparison uses {value:#x}, which needs more than 32 bits")]
    ValueTooWide {
        /// Syscall name.
        syscall: &'static str,
        /// The offending mask or value.
        value: u64,
    },
    /// A rule for a number that can never reach the rule dispatch.
    #[error("rule for {syscall}: syscall number {nr:#x} is not a native x86_64 number")]
    BadSyscallNumber {
        /// Syscall name.
        syscall: &'static str,
        /// The number.
        nr: u32,
    },
    /// An errno above `MAX_ERRNO`, which the kernel would clamp.
    #[error("errno {errno} exceeds MAX_ERRNO ({MAX_ERRNO})")]
    ErrnoOutOfRange {
        /// The errno.
        errno: u16,
    },
    /// A rule placed after an unconditional rule for the same syscall. It can
    /// never match, which almost always means a deny was written in the
    /// wrong place.
    #[error(
        "rule {position} for {syscall} is unreachable: an earlier rule for it has no conditions"
    )]
    UnreachableRule {
        /// Syscall name.
        syscall: &'static str,
        /// Position of the dead rule among this syscall's rules (0-based).
        position: usize,
    },
    /// The program exceeds the kernel's limit.
    #[error("compiled program has {len} instructions; the kernel accepts at most {BPF_MAXINSNS}")]
    TooLong {
        /// Program length.
        len: usize,
    },
    /// A bug in this compiler (the output failed its own checks).
    #[error("internal compiler error: {0}")]
    Internal(String),
}

/// Compiles `filter` to a program the kernel will accept, or explains why not.
pub fn compile(filter: &Filter) -> Result<Vec<SockFilter>, CompileError> {
    validate(filter)?;
    let mut codegen = Codegen::default();
    codegen.program(filter);
    let prog = codegen.asm.assemble()?;
    if prog.len() > BPF_MAXINSNS {
        return Err(CompileError::TooLong { len: prog.len() });
    }
    // Belt and braces: the output must pass the same checks the kernel makes.
    crate::interp::verify(&prog).map_err(|e| CompileError::Internal(e.to_string()))?;
    Ok(prog)
}

/// Rejects filters whose compiled form could differ from [`Filter::evaluate`].
fn validate(filter: &Filter) -> Result<(), CompileError> {
    let check_errno = |action: Action| match action {
        Action::Errno(errno) if errno > MAX_ERRNO => Err(CompileError::ErrnoOutOfRange { errno }),
        _ => Ok(()),
    };
    check_errno(filter.default_action)?;
    check_errno(filter.bad_arch_action)?;
    check_errno(filter.x32_action)?;

    // Per syscall: how many rules seen so far, and whether one was unconditional.
    let mut seen: BTreeMap<u32, (usize, bool)> = BTreeMap::new();
    for rule in &filter.rules {
        let syscall = rule.name;
        if rule.nr >= X32_SYSCALL_BIT {
            return Err(CompileError::BadSyscallNumber {
                syscall,
                nr: rule.nr,
            });
        }
        check_errno(rule.action)?;
        for cond in &rule.conditions {
            if usize::from(cond.arg) >= ARG_COUNT {
                return Err(CompileError::BadArgIndex {
                    syscall,
                    index: cond.arg,
                });
            }
            if cond.width == Width::Low32 {
                let (mask, value, _) = cond.cmp.normal_form();
                let fits = |v: u64| v <= u64::from(u32::MAX);
                // An all-ones mask is how Eq/Ne are encoded; it is fine.
                if !fits(value) {
                    return Err(CompileError::ValueTooWide { syscall, value });
                }
                if !fits(mask) && mask != u64::MAX {
                    return Err(CompileError::ValueTooWide {
                        syscall,
                        value: mask,
                    });
                }
            }
        }
        let (count, closed) = seen.entry(rule.nr).or_default();
        if *closed {
            return Err(CompileError::UnreachableRule {
                syscall,
                position: *count,
            });
        }
        *closed = rule.conditions.is_empty();
        *count += 1;
    }
    Ok(())
}

/// High and low halves of a 64-bit value.
#[allow(clippy::cast_possible_truncation)] // splitting into words is the point
const fn halves(v: u64) -> (u32, u32) {
    ((v >> 32) as u32, v as u32)
}

/// What a range of syscall numbers does.
#[derive(Debug, Clone)]
enum Leaf<'a> {
    /// Every number in the range gets this action, whatever the arguments.
    Ret(Action),
    /// A single syscall whose rules inspect arguments.
    Rules(Vec<&'a SyscallRule>),
}

/// Syscall numbers `start..` (up to the next interval's start) behave as `leaf`.
#[derive(Debug, Clone)]
struct Interval<'a> {
    start: u32,
    leaf: Leaf<'a>,
}

/// Splits `0..X32_SYSCALL_BIT` into intervals of identical behaviour.
fn intervals(filter: &Filter) -> Vec<Interval<'_>> {
    let mut by_nr: BTreeMap<u32, Vec<&SyscallRule>> = BTreeMap::new();
    for rule in &filter.rules {
        by_nr.entry(rule.nr).or_default().push(rule);
    }

    let mut out: Vec<Interval<'_>> = Vec::new();
    let mut next_free = 0u32;
    for (nr, rules) in by_nr {
        if nr > next_free {
            push_interval(&mut out, next_free, Leaf::Ret(filter.default_action));
        }
        let leaf = match rules.first() {
            Some(first) if first.conditions.is_empty() => Leaf::Ret(first.action),
            _ => Leaf::Rules(rules),
        };
        push_interval(&mut out, nr, leaf);
        next_free = nr + 1;
    }
    if next_free < X32_SYSCALL_BIT {
        push_interval(&mut out, next_free, Leaf::Ret(filter.default_action));
    }
    out
}

/// Appends an interval, merging it into the previous one when both simply
/// return the same action.
fn push_interval<'a>(out: &mut Vec<Interval<'a>>, start: u32, leaf: Leaf<'a>) {
    if let (
        Leaf::Ret(action),
        Some(Interval {
            leaf: Leaf::Ret(prev),
            ..
        }),
    ) = (&leaf, out.last())
        && action == prev
    {
        return;
    }
    out.push(Interval { start, leaf });
}

type Label = usize;

/// Code with symbolic jump targets.
#[derive(Debug, Clone, Copy)]
enum Ir {
    /// A non-branching instruction.
    Stmt(SockFilter),
    /// A conditional jump (`code` is a `JMP | Jxx | K` opcode).
    Jump {
        code: u16,
        k: u32,
        jt: Label,
        jf: Label,
    },
    /// An unconditional jump.
    Goto(Label),
    /// Defines a label at this point; emits nothing.
    Bind(Label),
}

#[derive(Debug, Default)]
struct Assembler {
    ir: Vec<Ir>,
    labels: usize,
}

impl Assembler {
    fn new_label(&mut self) -> Label {
        self.labels += 1;
        self.labels - 1
    }

    fn bind(&mut self, label: Label) {
        self.ir.push(Ir::Bind(label));
    }

    fn stmt(&mut self, code: u16, k: u32) {
        self.ir.push(Ir::Stmt(SockFilter::stmt(code, k)));
    }

    fn jump(&mut self, code: u16, k: u32, jt: Label, jf: Label) {
        self.ir.push(Ir::Jump { code, k, jt, jf });
    }

    fn goto(&mut self, target: Label) {
        self.ir.push(Ir::Goto(target));
    }

    /// Resolves labels. A conditional jump whose true (false) target is more
    /// than 255 instructions away becomes
    /// `jxx → [ja true-target] [ja false-target]`, with the trampoline(s)
    /// placed right after it. Adding trampolines only ever lengthens other
    /// jumps, so marking jumps "far" until nothing changes terminates.
    fn assemble(&self) -> Result<Vec<SockFilter>, CompileError> {
        let mut far = vec![(false, false); self.ir.len()];
        let (addrs, label_addrs) = loop {
            let (addrs, label_addrs) = self.layout(&far)?;
            let mut changed = false;
            for (i, ir) in self.ir.iter().enumerate() {
                if let Ir::Jump { jt, jf, .. } = *ir {
                    let from = addrs[i] + 1;
                    let (far_t, far_f) = &mut far[i];
                    for (target, is_far) in [(jt, far_t), (jf, far_f)] {
                        if !*is_far && offset(from, label_addrs[target])? > usize::from(u8::MAX) {
                            *is_far = true;
                            changed = true;
                        }
                    }
                }
            }
            if !changed {
                break (addrs, label_addrs);
            }
        };

        let mut out = Vec::new();
        for (i, ir) in self.ir.iter().enumerate() {
            let from = addrs[i] + 1;
            match *ir {
                Ir::Stmt(insn) => out.push(insn),
                Ir::Bind(_) => {}
                Ir::Goto(target) => out.push(ja(from, label_addrs[target])?),
                Ir::Jump { code, k, jt, jf } => {
                    let (far_t, far_f) = far[i];
                    let (t, f) = (label_addrs[jt], label_addrs[jf]);
                    // Trampolines sit at from, from+1 (in that order).
                    let jt_off = if far_t { 0 } else { short(from, t)? };
                    let jf_off = if far_f {
                        u8::from(far_t)
                    } else {
                        short(from, f)?
                    };
                    out.push(SockFilter::jump(code, k, jt_off, jf_off));
                    if far_t {
                        out.push(ja(from + 1, t)?);
                    }
                    if far_f {
                        out.push(ja(from + 1 + usize::from(far_t), f)?);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Address of each IR item and of each label, given which jumps are far.
    fn layout(&self, far: &[(bool, bool)]) -> Result<(Vec<usize>, Vec<usize>), CompileError> {
        let mut addrs = Vec::with_capacity(self.ir.len());
        let mut label_addrs = vec![None; self.labels];
        let mut pc = 0usize;
        for (i, ir) in self.ir.iter().enumerate() {
            addrs.push(pc);
            pc += match *ir {
                Ir::Stmt(_) | Ir::Goto(_) => 1,
                Ir::Bind(label) => {
                    label_addrs[label] = Some(pc);
                    0
                }
                Ir::Jump { .. } => {
                    let (t, f) = far[i];
                    1 + usize::from(t) + usize::from(f)
                }
            };
        }
        let label_addrs = label_addrs
            .into_iter()
            .map(|a| a.ok_or_else(|| CompileError::Internal("unbound label".into())))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((addrs, label_addrs))
    }
}

/// Forward distance from the instruction after a jump (`from`) to `to`.
fn offset(from: usize, to: usize) -> Result<usize, CompileError> {
    to.checked_sub(from)
        .ok_or_else(|| CompileError::Internal("backward jump".into()))
}

/// An 8-bit conditional-jump offset; callers only use it for near targets.
fn short(from: usize, to: usize) -> Result<u8, CompileError> {
    u8::try_from(offset(from, to)?).map_err(|_| CompileError::Internal("short jump too far".into()))
}

/// A `ja` at the instruction before `from`, to `to`.
fn ja(from: usize, to: usize) -> Result<SockFilter, CompileError> {
    let k = u32::try_from(offset(from, to)?)
        .map_err(|_| CompileError::Internal("jump offset overflow".into()))?;
    Ok(SockFilter::stmt(op::JA, k))
}

/// Emits the program for one filter.
#[derive(Debug, Default)]
struct Codegen {
    asm: Assembler,
    /// One shared `ret` per distinct action, emitted at the end.
    rets: Vec<(Action, Label)>,
}

impl Codegen {
    fn program(&mut self, filter: &Filter) {
        let intervals = intervals(filter);
        let native = self.asm.new_label();
        let bad_arch = self.ret(filter.bad_arch_action);
        let x32 = self.ret(filter.x32_action);
        let root = self.entry(&intervals);

        self.asm.stmt(op::LD_W_ABS, OFFSET_ARCH);
        self.asm.jump(op::JEQ_K, filter.arch, native, bad_arch);
        self.asm.bind(native);
        self.asm.stmt(op::LD_W_ABS, OFFSET_NR);
        // x32 syscalls share AUDIT_ARCH_X86_64 but set bit 30 of the number;
        // unsigned >= also catches "negative" numbers.
        self.asm.jump(op::JGE_K, X32_SYSCALL_BIT, x32, root);
        self.tree(&intervals, root, filter.default_action);

        for (action, label) in std::mem::take(&mut self.rets) {
            self.asm.bind(label);
            self.asm.stmt(op::RET_K, action.ret_value());
        }
    }

    /// Label of the shared `ret` for `action`.
    fn ret(&mut self, action: Action) -> Label {
        if let Some(&(_, label)) = self.rets.iter().find(|(a, _)| *a == action) {
            return label;
        }
        let label = self.asm.new_label();
        self.rets.push((action, label));
        label
    }

    /// Where control goes to decide `intervals`: a shared `ret` if they are a
    /// single plain action, else a fresh label that [`Codegen::tree`] binds.
    fn entry(&mut self, intervals: &[Interval<'_>]) -> Label {
        match intervals {
            [
                Interval {
                    leaf: Leaf::Ret(action),
                    ..
                },
            ] => self.ret(*action),
            _ => self.asm.new_label(),
        }
    }

    /// Emits the decision for `intervals` at `entry` (obtained from
    /// [`Codegen::entry`]). `A` holds the syscall number on entry.
    fn tree(&mut self, intervals: &[Interval<'_>], entry: Label, default: Action) {
        match intervals {
            []
            | [
                Interval {
                    leaf: Leaf::Ret(_), ..
                },
            ] => {} // shared ret, nothing to emit
            [
                Interval {
                    leaf: Leaf::Rules(rules),
                    ..
                },
            ] => {
                self.asm.bind(entry);
                self.rules(rules, default);
            }
            _ => {
                let (low, high) = intervals.split_at(intervals.len() / 2);
                let low_entry = self.entry(low);
                let high_entry = self.entry(high);
                self.asm.bind(entry);
                self.asm
                    .jump(op::JGE_K, high[0].start, high_entry, low_entry);
                self.tree(low, low_entry, default);
                self.tree(high, high_entry, default);
            }
        }
    }

    /// Evaluates one syscall's rules in order, falling back to `default`.
    /// Clobbers `A`, which is fine: every path ends in a `ret`.
    fn rules(&mut self, rules: &[&SyscallRule], default: Action) {
        for rule in rules {
            let hit = self.ret(rule.action);
            if rule.conditions.is_empty() {
                // Validation guarantees nothing follows an unconditional rule.
                self.asm.goto(hit);
                return;
            }
            let next_rule = self.asm.new_label();
            let count = rule.conditions.len();
            for (i, cond) in rule.conditions.iter().enumerate() {
                let pass = if i + 1 == count {
                    hit
                } else {
                    self.asm.new_label()
                };
                self.condition(cond, pass, next_rule);
                if pass != hit {
                    self.asm.bind(pass);
                }
            }
            self.asm.bind(next_rule);
        }
        let fallback = self.ret(default);
        self.asm.goto(fallback);
    }

    /// Jumps to `pass` if `cond` holds, else to `fail`.
    fn condition(&mut self, cond: &Cond, pass: Label, fail: Label) {
        let (mask, value, negated) = cond.cmp.normal_form();
        // Everything is "masked equality"; negation swaps the outcomes.
        let (equal, unequal) = if negated { (fail, pass) } else { (pass, fail) };
        let (mask_hi, mask_lo) = halves(mask);
        let (value_hi, value_lo) = halves(value);
        if cond.width == Width::Full64 {
            // Equal only if both words are equal: check the high word first.
            let check_low = self.asm.new_label();
            self.load_masked(arg_high_offset(cond.arg), mask_hi);
            self.asm.jump(op::JEQ_K, value_hi, check_low, unequal);
            self.asm.bind(check_low);
        }
        self.load_masked(arg_low_offset(cond.arg), mask_lo);
        self.asm.jump(op::JEQ_K, value_lo, equal, unequal);
    }

    fn load_masked(&mut self, offset: u32, mask: u32) {
        self.asm.stmt(op::LD_W_ABS, offset);
        if mask != u32::MAX {
            self.asm.stmt(op::ALU_AND_K, mask);
        }
    }
}

#[cfg(test)]
mod tests;
