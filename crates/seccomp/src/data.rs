//! `struct seccomp_data`: what a seccomp filter sees for each syscall.
//!
//! ```text
//! struct seccomp_data {
//!     int   nr;                    // offset 0
//!     __u32 arch;                  // offset 4
//!     __u64 instruction_pointer;   // offset 8
//!     __u64 args[6];               // offset 16 + 8 * i
//! };
//! ```
//!
//! Classic BPF can only load 32-bit words, so a 64-bit argument is two loads.
//! The struct is in native byte order; on x86_64 (little-endian) the low word
//! of `args[i]` is at `16 + 8*i` and the high word at `16 + 8*i + 4`.

/// Size of `struct seccomp_data`; the kernel rejects loads beyond it.
pub const SECCOMP_DATA_SIZE: u32 = 64;
/// Offset of `nr`.
pub const OFFSET_NR: u32 = 0;
/// Offset of `arch`.
pub const OFFSET_ARCH: u32 = 4;
/// Offset of `instruction_pointer`.
pub const OFFSET_IP: u32 = 8;
/// Number of syscall arguments in `seccomp_data`.
pub const ARG_COUNT: usize = 6;

/// Offset of the low 32 bits of argument `index` (little-endian).
pub const fn arg_low_offset(index: u8) -> u32 {
    16 + 8 * index as u32
}

/// Offset of the high 32 bits of argument `index` (little-endian).
pub const fn arg_high_offset(index: u8) -> u32 {
    arg_low_offset(index) + 4
}

/// A plain-Rust `struct seccomp_data`, used to drive the model and the
/// interpreter in tests.
///
/// `nr` is an `int` in the kernel, but BPF loads it as an unsigned 32-bit
/// word, which is the view that matters for filtering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SeccompData {
    /// Syscall number as the filter sees it.
    pub nr: u32,
    /// `AUDIT_ARCH_*` value of the calling convention.
    pub arch: u32,
    /// Address of the syscall instruction.
    pub instruction_pointer: u64,
    /// Raw syscall arguments, as 64-bit registers.
    pub args: [u64; ARG_COUNT],
}

impl SeccompData {
    /// A native x86_64 syscall with the given number and arguments.
    pub const fn x86_64(nr: u32, args: [u64; ARG_COUNT]) -> Self {
        Self {
            nr,
            arch: crate::rules::AUDIT_ARCH_X86_64,
            instruction_pointer: 0,
            args,
        }
    }

    /// The exact bytes the kernel hands to the filter (x86_64 layout).
    pub fn to_bytes(&self) -> [u8; SECCOMP_DATA_SIZE as usize] {
        let mut out = [0u8; SECCOMP_DATA_SIZE as usize];
        out[0..4].copy_from_slice(&self.nr.to_le_bytes());
        out[4..8].copy_from_slice(&self.arch.to_le_bytes());
        out[8..16].copy_from_slice(&self.instruction_pointer.to_le_bytes());
        for (i, arg) in self.args.iter().enumerate() {
            let start = 16 + 8 * i;
            out[start..start + 8].copy_from_slice(&arg.to_le_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_layout_matches_kernel_struct() {
        let d = SeccompData {
            nr: 0x0102_0304,
            arch: 0xC000_003E,
            instruction_pointer: 0x1122_3344_5566_7788,
            args: [0, 0xAAAA_BBBB_CCCC_DDDD, 0, 0, 0, u64::MAX],
        };
        let b = d.to_bytes();
        assert_eq!(&b[0..4], &[4, 3, 2, 1]);
        assert_eq!(&b[4..8], &0xC000_003Eu32.to_le_bytes());
        let lo = arg_low_offset(1) as usize;
        let hi = arg_high_offset(1) as usize;
        assert_eq!(&b[lo..lo + 4], &0xCCCC_DDDDu32.to_le_bytes());
        assert_eq!(&b[hi..hi + 4], &0xAAAA_BBBBu32.to_le_bytes());
        assert_eq!(arg_high_offset(5) + 4, SECCOMP_DATA_SIZE);
    }
}
