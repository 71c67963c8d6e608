//! The loader an ELF program names (`PT_INTERP`): the kernel maps it next to the
//! program and starts it first, inside the one `execve`, with no call of its own. A
//! program whose loader is not the system's runs that file's code before its own, so
//! the record names it (`interp=`), as it names a `#!` script's interpreter.
//!
//! Read as `load_elf_binary` reads it: the program headers where the ELF header says
//! they are (each of the size its layout has, 64 KiB at most), the first `PT_INTERP`
//! among them, its bytes ending in a NUL, at most `PATH_MAX`, the path up to its
//! first NUL. The kernel ignores the class and byte order the header's `e_ident`
//! claims: it reads a program for its own machine as native 64-bit, and
//! `compat_binfmt_elf` one for the 32-bit machine as 32-bit, both in the native byte
//! order (session-21 red team: one byte of `e_ident` changed hid the loader). So
//! both layouts are read, natively, and every loader either finds is returned.
//! Anything malformed in both names nothing: the kernel refuses to run it.

/// An ELF file's first bytes.
pub(super) const MAGIC: &[u8] = b"\x7fELF";

/// The loaders programs are linked against for the architectures Linux runs
/// (glibc's and musl's): a program naming one of them runs the system's loader,
/// which the record does not repeat on every line.
pub(super) const SYSTEM_LOADERS: &[&[u8]] = &[
    b"/lib64/ld-linux-x86-64.so.2",
    b"/lib/ld-linux.so.2",
    b"/libx32/ld-linux-x32.so.2",
    b"/lib/ld-linux-aarch64.so.1",
    b"/lib/ld-linux-armhf.so.3",
    b"/lib/ld-linux.so.3",
    b"/lib/ld-linux-riscv64-lp64d.so.1",
    b"/lib64/ld64.so.2",
    b"/lib64/ld64.so.1",
    b"/lib/ld64.so.1",
    b"/lib/ld-musl-x86_64.so.1",
    b"/lib/ld-musl-aarch64.so.1",
    b"/lib/ld-musl-i386.so.1",
    b"/lib/ld-musl-armhf.so.1",
    b"/lib/ld-musl-riscv64.so.1",
];

const PT_INTERP: u64 = 3;
const ET_EXEC: u64 = 2;
const ET_DYN: u64 = 3;
/// The kernel's bound on a loader's path, NUL included.
const PATH_MAX: u64 = 4096;
/// The kernel's bound on the program headers' size (`elf_read_phdrs`).
const MAX_PHDRS_BYTES: u64 = 65536;

/// Whether `loader` is one of [`SYSTEM_LOADERS`].
pub(super) fn is_system_loader(loader: &[u8]) -> bool {
    SYSTEM_LOADERS.contains(&loader)
}

/// How to read a number of the file's byte order.
#[derive(Clone, Copy)]
struct Order {
    big: bool,
}

impl Order {
    fn read(self, bytes: &[u8], at: usize, len: usize) -> Option<u64> {
        let field = bytes.get(at..at.checked_add(len)?)?;
        let mut value = 0u64;
        for i in 0..len {
            let byte = if self.big {
                field[i]
            } else {
                field[len - 1 - i]
            };
            value = (value << 8) | u64::from(byte);
        }
        Some(value)
    }
}

/// `len` bytes at `offset` of the file: from `head` (its first bytes) when they hold
/// them, else through `read_at`.
fn bytes_at(
    head: &[u8],
    offset: u64,
    len: u64,
    read_at: &impl Fn(u64, usize) -> Option<Vec<u8>>,
) -> Option<Vec<u8>> {
    let end = offset.checked_add(len)?;
    if let (Ok(start), Ok(end)) = (usize::try_from(offset), usize::try_from(end))
        && let Some(found) = head.get(start..end)
    {
        return Some(found.to_vec());
    }
    let got = read_at(offset, usize::try_from(len).ok()?)?;
    (got.len() as u64 == len).then_some(got)
}

/// The loader paths the ELF program whose first bytes are `head` names, read as a
/// 64-bit and as a 32-bit program in the native byte order (at most one each);
/// `read_at(offset, len)` reads what lies past `head`.
pub(super) fn loaders(
    head: &[u8],
    read_at: impl Fn(u64, usize) -> Option<Vec<u8>>,
) -> Vec<Vec<u8>> {
    if !head.starts_with(MAGIC) {
        return Vec::new();
    }
    let order = Order {
        big: cfg!(target_endian = "big"),
    };
    [true, false]
        .into_iter()
        .filter_map(|wide| loader(head, &read_at, wide, order))
        .collect()
}

/// The loader path a program read in one layout names, if that layout reads.
fn loader(
    head: &[u8],
    read_at: &impl Fn(u64, usize) -> Option<Vec<u8>>,
    wide: bool,
    order: Order,
) -> Option<Vec<u8>> {
    let kind = order.read(head, 16, 2)?;
    if kind != ET_EXEC && kind != ET_DYN {
        return None;
    }
    let (phoff, phentsize, phnum, entry) = if wide {
        (
            order.read(head, 32, 8)?,
            order.read(head, 54, 2)?,
            order.read(head, 56, 2)?,
            56,
        )
    } else {
        (
            order.read(head, 28, 4)?,
            order.read(head, 42, 2)?,
            order.read(head, 44, 2)?,
            32,
        )
    };
    let total = phnum.checked_mul(entry)?;
    if phentsize != entry || phnum == 0 || total > MAX_PHDRS_BYTES {
        return None;
    }
    let phdrs = bytes_at(head, phoff, total, read_at)?;
    for header in phdrs.chunks_exact(usize::try_from(entry).ok()?) {
        if order.read(header, 0, 4)? != PT_INTERP {
            continue;
        }
        let (offset, size) = if wide {
            (order.read(header, 8, 8)?, order.read(header, 32, 8)?)
        } else {
            (order.read(header, 4, 4)?, order.read(header, 16, 4)?)
        };
        if !(2..=PATH_MAX).contains(&size) {
            return None;
        }
        let bytes = bytes_at(head, offset, size, read_at)?;
        if bytes.last() != Some(&0) {
            return None;
        }
        let path = bytes.split(|b| *b == 0).next()?;
        return (!path.is_empty()).then(|| path.to_vec());
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// An ELF program, 64-bit (`wide`) or 32-bit, big-endian or little, with three
    /// program headers at `phoff`, the second a `PT_INTERP` of `interp` at 0x318.
    fn program(wide: bool, big: bool, interp: &[u8], phoff: u64) -> Vec<u8> {
        let put = |b: &mut Vec<u8>, at: usize, len: usize, v: u64| {
            if b.len() < at + len {
                b.resize(at + len, 0);
            }
            for i in 0..len {
                let shift = 8 * if big { len - 1 - i } else { i };
                b[at + i] = ((v >> shift) & 0xff) as u8;
            }
        };
        let mut b = b"\x7fELF".to_vec();
        b.resize(64, 0);
        b[4] = if wide { 2 } else { 1 };
        b[5] = if big { 2 } else { 1 };
        put(&mut b, 16, 2, ET_DYN);
        let at = usize::try_from(phoff).unwrap();
        let entry = if wide { 56 } else { 32 };
        if wide {
            put(&mut b, 32, 8, phoff);
            put(&mut b, 54, 2, 56);
            put(&mut b, 56, 2, 3);
        } else {
            put(&mut b, 28, 4, phoff);
            put(&mut b, 42, 2, 32);
            put(&mut b, 44, 2, 3);
        }
        b.resize(b.len().max(at + 3 * entry), 0);
        // PT_PHDR, PT_INTERP, PT_LOAD.
        for (i, kind) in [6u64, PT_INTERP, 1].into_iter().enumerate() {
            let h = at + i * entry;
            put(&mut b, h, 4, kind);
            if kind == PT_INTERP {
                let len = interp.len() as u64;
                if wide {
                    put(&mut b, h + 8, 8, 0x318);
                    put(&mut b, h + 32, 8, len);
                } else {
                    put(&mut b, h + 4, 4, 0x318);
                    put(&mut b, h + 16, 4, len);
                }
            }
        }
        if b.len() < 0x318 + interp.len() {
            b.resize(0x318 + interp.len(), 0);
        }
        b[0x318..0x318 + interp.len()].copy_from_slice(interp);
        b
    }

    /// `loaders` over the first `head` bytes of `file`, the rest read as asked: the
    /// one found, if exactly one layout reads.
    fn loader_of(file: &[u8], head: usize) -> Option<Vec<u8>> {
        let found = loaders(&file[..head.min(file.len())], |offset, len| {
            let start = usize::try_from(offset).ok()?;
            Some(file.get(start..)?.iter().take(len).copied().collect())
        });
        assert!(found.len() <= 1, "{found:?}");
        found.into_iter().next()
    }

    #[test]
    fn the_loader_is_read_from_the_head_or_past_it_in_both_layouts() {
        for wide in [true, false] {
            let file = program(wide, false, b"/tmp/payload\0", 64);
            for head in [256, 1024, 4096] {
                assert_eq!(
                    loader_of(&file, head),
                    Some(b"/tmp/payload".to_vec()),
                    "wide {wide} head {head}"
                );
            }
        }
        // Program headers far past the head are read too.
        let file = program(true, false, b"/x\0", 2000);
        assert_eq!(loader_of(&file, 1024), Some(b"/x".to_vec()));
    }

    #[test]
    fn what_the_kernel_would_refuse_names_no_loader() {
        // No NUL at its end, too short, an empty path.
        assert_eq!(
            loader_of(&program(true, false, b"/tmp/payload", 64), 1024),
            None
        );
        assert_eq!(loader_of(&program(true, false, b"\0", 64), 1024), None);
        assert_eq!(loader_of(&program(true, false, b"\0\0", 64), 1024), None);
        // The path stops at its first NUL, as the kernel's open does.
        assert_eq!(
            loader_of(&program(true, false, b"/a\0/b\0", 64), 1024),
            Some(b"/a".to_vec())
        );
        let mut wrong_size = program(true, false, b"/tmp/x\0", 64);
        wrong_size[54] = 55;
        assert_eq!(loader_of(&wrong_size, 1024), None);
        // A program in the other byte order is read natively, as the kernel reads
        // it, and then makes no sense.
        assert_eq!(loader_of(&program(true, true, b"/tmp/x\0", 64), 1024), None);
        let mut core = program(true, false, b"/tmp/x\0", 64);
        core[16] = 4;
        assert_eq!(loader_of(&core, 1024), None);
        // Cut short: the headers or the path cannot be read.
        let file = program(true, false, b"/tmp/x\0", 64);
        assert!(loaders(&file[..100], |_, _| None).is_empty());
        assert!(loaders(&file[..0x318], |_, _| Some(Vec::new())).is_empty());
        assert_eq!(loader_of(b"#!/bin/sh\n", 256), None);
    }

    /// Red team (session 21): the kernel ignores `e_ident`'s class and byte order,
    /// so changing them hides nothing.
    #[test]
    fn the_class_and_byte_order_the_header_claims_change_nothing() {
        for wide in [true, false] {
            for (at, value) in [
                (4, 0),
                (4, 1),
                (4, 2),
                (4, 3),
                (5, 0),
                (5, 1),
                (5, 2),
                (5, 9),
            ] {
                let mut file = program(wide, false, b"/tmp/payload\0", 64);
                file[at] = value;
                assert_eq!(
                    loader_of(&file, 1024),
                    Some(b"/tmp/payload".to_vec()),
                    "wide {wide}: byte {at} = {value}"
                );
            }
        }
    }

    #[test]
    fn this_machines_programs_name_the_system_loader() {
        let file = std::fs::read("/bin/true").unwrap();
        let found = loader_of(&file, 1024).unwrap();
        assert!(
            is_system_loader(&found),
            "{}",
            String::from_utf8_lossy(&found)
        );
        assert!(!is_system_loader(b"/tmp/payload"));
    }
}
