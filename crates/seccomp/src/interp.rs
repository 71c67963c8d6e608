//! A tiny classic-BPF interpreter for seccomp programs.
//!
//! It exists so that tests can run the *compiled* program, not just the rule
//! model, and compare the two. [`verify`] applies the static checks the
//! kernel applies before accepting a seccomp filter (length, known opcodes,
//! jump targets inside the program, aligned in-bounds loads, final return);
//! [`run`] executes a verified program over a [`SeccompData`].
//!
//! Only the instructions a seccomp filter plausibly needs are supported:
//! absolute word loads, immediates, `AND`/`OR` with a constant, register
//! moves, the conditional jumps, `JA`, and returns.

use crate::bpf::{BPF_MAXINSNS, SockFilter, op};
use crate::data::{SECCOMP_DATA_SIZE, SeccompData};

/// Why a program cannot be (or was not) executed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InterpError {
    /// The kernel rejects empty programs.
    #[error("empty program")]
    Empty,
    /// More than [`BPF_MAXINSNS`] instructions.
    #[error("program has {len} instructions; the kernel accepts at most {BPF_MAXINSNS}")]
    TooLong {
        /// Program length.
        len: usize,
    },
    /// An opcode this interpreter (and our compiler) does not use.
    #[error("instruction {pc}: unsupported opcode {code:#06x}")]
    Unsupported {
        /// Instruction index.
        pc: usize,
        /// The opcode.
        code: u16,
    },
    /// A load that is not an aligned 32-bit word inside `seccomp_data`.
    #[error("instruction {pc}: load from offset {offset} is not an aligned word in seccomp_data")]
    BadLoad {
        /// Instruction index.
        pc: usize,
        /// The offending offset.
        offset: u32,
    },
    /// A jump whose target lies past the end of the program.
    #[error("instruction {pc}: jump target is outside the program")]
    JumpOutOfRange {
        /// Instruction index.
        pc: usize,
    },
    /// The kernel requires the last instruction to be a return.
    #[error("last instruction is not a return")]
    NoFinalReturn,
}

/// Static checks equivalent to what the kernel verifies for seccomp filters.
pub fn verify(prog: &[SockFilter]) -> Result<(), InterpError> {
    if prog.is_empty() {
        return Err(InterpError::Empty);
    }
    if prog.len() > BPF_MAXINSNS {
        return Err(InterpError::TooLong { len: prog.len() });
    }
    let in_range = |pc: usize, offset: u64| {
        let target = (pc as u64) + 1 + offset;
        if target < prog.len() as u64 {
            Ok(())
        } else {
            Err(InterpError::JumpOutOfRange { pc })
        }
    };
    for (pc, insn) in prog.iter().enumerate() {
        match insn.code {
            op::LD_W_ABS => {
                if insn.k % 4 != 0 || insn.k > SECCOMP_DATA_SIZE - 4 {
                    return Err(InterpError::BadLoad { pc, offset: insn.k });
                }
            }
            op::LD_IMM | op::LDX_IMM | op::ALU_AND_K | op::ALU_OR_K | op::TAX | op::TXA => {}
            op::JA => in_range(pc, u64::from(insn.k))?,
            op::JEQ_K | op::JGT_K | op::JGE_K | op::JSET_K => {
                in_range(pc, u64::from(insn.jt))?;
                in_range(pc, u64::from(insn.jf))?;
            }
            op::RET_K | op::RET_A => {}
            code => return Err(InterpError::Unsupported { pc, code }),
        }
    }
    match prog.last().map(|insn| insn.code) {
        Some(op::RET_K | op::RET_A) => Ok(()),
        _ => Err(InterpError::NoFinalReturn),
    }
}

/// Runs `prog` over `data` and returns the 32-bit `SECCOMP_RET_*` value.
///
/// The program is verified first, so malformed programs yield an error rather
/// than a result the kernel would never produce. Classic BPF only jumps
/// forward, so execution always terminates.
pub fn run(prog: &[SockFilter], data: &SeccompData) -> Result<u32, InterpError> {
    verify(prog)?;
    let bytes = data.to_bytes();
    let mut acc: u32 = 0;
    let mut index: u32 = 0;
    let mut pc: usize = 0;
    loop {
        let insn = prog.get(pc).ok_or(InterpError::JumpOutOfRange { pc })?;
        let skip = |taken: bool| usize::from(if taken { insn.jt } else { insn.jf });
        let mut next = pc + 1;
        match insn.code {
            op::LD_W_ABS => {
                acc =
                    load_word(&bytes, insn.k).ok_or(InterpError::BadLoad { pc, offset: insn.k })?;
            }
            op::LD_IMM => acc = insn.k,
            op::LDX_IMM => index = insn.k,
            op::ALU_AND_K => acc &= insn.k,
            op::ALU_OR_K => acc |= insn.k,
            op::TAX => index = acc,
            op::TXA => acc = index,
            op::JA => {
                next += usize::try_from(insn.k).map_err(|_| InterpError::JumpOutOfRange { pc })?;
            }
            op::JEQ_K => next += skip(acc == insn.k),
            op::JGT_K => next += skip(acc > insn.k),
            op::JGE_K => next += skip(acc >= insn.k),
            op::JSET_K => next += skip(acc & insn.k != 0),
            op::RET_K => return Ok(insn.k),
            op::RET_A => return Ok(acc),
            code => return Err(InterpError::Unsupported { pc, code }),
        }
        pc = next;
    }
}

/// Native-endian (x86_64: little-endian) word at `offset`, if aligned and in bounds.
fn load_word(bytes: &[u8; SECCOMP_DATA_SIZE as usize], offset: u32) -> Option<u32> {
    if !offset.is_multiple_of(4) {
        return None;
    }
    let start = usize::try_from(offset).ok()?;
    let word: [u8; 4] = bytes.get(start..start.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_le_bytes(word))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{OFFSET_ARCH, OFFSET_NR, arg_high_offset};

    fn stmt(code: u16, k: u32) -> SockFilter {
        SockFilter::stmt(code, k)
    }
    fn jump(code: u16, k: u32, jt: u8, jf: u8) -> SockFilter {
        SockFilter::jump(code, k, jt, jf)
    }

    #[test]
    fn runs_a_hand_written_program() {
        // if nr == 39 { return 1 } else if arg0.hi & 0x10 { return 2 } else { return arch }
        let prog = [
            stmt(op::LD_W_ABS, OFFSET_NR),
            jump(op::JEQ_K, 39, 0, 1),
            stmt(op::RET_K, 1),
            stmt(op::LD_W_ABS, arg_high_offset(0)),
            jump(op::JSET_K, 0x10, 0, 1),
            stmt(op::RET_K, 2),
            stmt(op::LD_W_ABS, OFFSET_ARCH),
            stmt(op::RET_A, 0),
        ];
        let data = |nr, a0| SeccompData::x86_64(nr, [a0, 0, 0, 0, 0, 0]);
        assert_eq!(run(&prog, &data(39, 0)), Ok(1));
        assert_eq!(run(&prog, &data(1, 0x10_0000_0000)), Ok(2));
        assert_eq!(
            run(&prog, &data(1, 0x10)),
            Ok(crate::rules::AUDIT_ARCH_X86_64)
        );
    }

    #[test]
    fn ja_uses_the_full_32_bit_offset() {
        let mut prog = vec![stmt(op::JA, 300)];
        prog.extend(std::iter::repeat_n(stmt(op::RET_K, 1), 300));
        prog.push(stmt(op::RET_K, 2));
        assert_eq!(run(&prog, &SeccompData::default()), Ok(2));
    }

    #[test]
    fn alu_and_register_moves() {
        let prog = [
            stmt(op::LD_IMM, 0xff0),
            stmt(op::ALU_AND_K, 0x0f0),
            stmt(op::ALU_OR_K, 0x1),
            stmt(op::TAX, 0),
            stmt(op::LD_IMM, 0),
            stmt(op::TXA, 0),
            jump(op::JGT_K, 0xf0, 0, 1),
            stmt(op::RET_A, 0),
            stmt(op::RET_K, 0),
        ];
        assert_eq!(run(&prog, &SeccompData::default()), Ok(0xf1));
        let prog = [stmt(op::LDX_IMM, 7), stmt(op::TXA, 0), stmt(op::RET_A, 0)];
        assert_eq!(run(&prog, &SeccompData::default()), Ok(7));
    }

    #[test]
    fn rejects_what_the_kernel_rejects() {
        let d = SeccompData::default();
        assert_eq!(run(&[], &d), Err(InterpError::Empty));
        assert_eq!(
            run(&[stmt(op::LD_W_ABS, 2), stmt(op::RET_K, 0)], &d),
            Err(InterpError::BadLoad { pc: 0, offset: 2 })
        );
        assert_eq!(
            run(&[stmt(op::LD_W_ABS, 64), stmt(op::RET_K, 0)], &d),
            Err(InterpError::BadLoad { pc: 0, offset: 64 })
        );
        assert_eq!(
            run(&[jump(op::JEQ_K, 0, 0, 1), stmt(op::RET_K, 0)], &d),
            Err(InterpError::JumpOutOfRange { pc: 0 })
        );
        assert_eq!(
            run(&[stmt(op::JA, u32::MAX), stmt(op::RET_K, 0)], &d),
            Err(InterpError::JumpOutOfRange { pc: 0 })
        );
        assert_eq!(
            run(&[stmt(op::RET_K, 0), stmt(op::LD_IMM, 0)], &d),
            Err(InterpError::NoFinalReturn)
        );
        // BPF_LD | BPF_B | BPF_ABS: byte loads are not allowed in seccomp.
        assert_eq!(
            run(&[stmt(0x30, 0), stmt(op::RET_K, 0)], &d),
            Err(InterpError::Unsupported { pc: 0, code: 0x30 })
        );
        let long = vec![stmt(op::RET_K, 0); BPF_MAXINSNS + 1];
        assert_eq!(
            verify(&long),
            Err(InterpError::TooLong {
                len: BPF_MAXINSNS + 1
            })
        );
    }
}
