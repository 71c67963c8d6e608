//! A BPF ring buffer's consumer side, mapped into this process.
//!
//! Written here rather than taken from aya 0.13, whose reader assumes a ring no
//! one has read before: on a ring whose consumer position is not 0 (a slot's ring
//! reused by a later session, `exectrace/loaded.rs`) it takes stale bytes for
//! records and never stops.
//!
//! The kernel's layout (`kernel/bpf/ringbuf.c`): at offset 0, one page holding the
//! consumer position, which the reader writes; at one page, the producer position,
//! then the data pages, mapped twice in a row so that a record that wraps around
//! the end is still contiguous. Each record starts with an 8-byte header whose
//! first word is its length, with a busy bit (being written) and a discard bit.
//!
//! The data pages are mapped apart from the positions ([`Ring::map_data`]): a
//! session's 2 MiB ring is 4 MiB of page table entries, filled at `mmap`, which the
//! supervisor does while init builds the sandbox rather than before its `clone`.
//!
//! A reader starts at the end of what was written: what a ring holds before it is
//! mapped was written for an earlier session. Positions it cannot explain (not
//! behind the kernel's by at most the ring's size) make it start again from the
//! end, so it never reads stale bytes or loops.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

const BUSY: u32 = 1 << 31;
const DISCARD: u32 = 1 << 30;
const HEADER: usize = 8;

/// A mapping, unmapped on drop.
struct Mapped {
    ptr: NonNull<libc::c_void>,
    len: usize,
}

impl Mapped {
    fn new(fd: BorrowedFd<'_>, len: usize, prot: libc::c_int, offset: usize) -> io::Result<Self> {
        let offset = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: a new shared mapping of the map's pages, at an address the kernel
        // chooses; nothing else refers to it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                offset,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr).ok_or_else(|| io::Error::from_raw_os_error(libc::EFAULT))?;
        Ok(Self { ptr, len })
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr(), self.len) };
    }
}

/// The reading end of a BPF ring buffer of `size` bytes (a power of two).
pub struct Ring {
    fd: OwnedFd,
    consumer: Mapped,
    producer: Mapped,
    /// The data pages, twice in a row; `None` until [`Ring::map_data`].
    data: Option<Mapped>,
    page: usize,
    mask: usize,
}

// SAFETY: the mappings are owned by the `Ring` and read or written only through
// `&mut self` (the consumer position) or atomically (the producer's).
unsafe impl Send for Ring {}

impl Ring {
    /// Maps the ring buffer map `fd`'s positions, and starts reading at the end of
    /// what was written; [`Ring::map_data`] must follow before anything is read.
    pub fn open(fd: OwnedFd, size: usize) -> io::Result<Self> {
        if !size.is_power_of_two() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: sysconf takes an integer.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .map_err(|_| io::Error::last_os_error())?;
        let consumer = Mapped::new(fd.as_fd(), page, libc::PROT_READ | libc::PROT_WRITE, 0)?;
        let producer = Mapped::new(fd.as_fd(), page, libc::PROT_READ, page)?;
        let ring = Self {
            fd,
            consumer,
            producer,
            data: None,
            page,
            mask: size - 1,
        };
        ring.skip_all();
        Ok(ring)
    }

    /// Maps the data pages (once; again is a no-op). The kernel writes them whether
    /// or not they are mapped here, so what was written since [`Ring::open`] is read.
    pub fn map_data(&mut self) -> io::Result<()> {
        if self.data.is_none() {
            let size = self.mask + 1;
            let data = Mapped::new(self.fd.as_fd(), 2 * size, libc::PROT_READ, 2 * self.page)?;
            self.data = Some(data);
        }
        Ok(())
    }

    /// Passes over every record written so far: they were written before this
    /// reader (an earlier session's, in a reused ring).
    fn skip_all(&self) {
        let end = self.producer_pos().load(Ordering::Acquire);
        self.consumer_pos().store(end, Ordering::SeqCst);
    }

    fn consumer_pos(&self) -> &AtomicUsize {
        // SAFETY: the consumer page starts with the position, a word the kernel
        // reads and only this reader writes; the page lives as long as `self`.
        unsafe { self.consumer.ptr.cast::<AtomicUsize>().as_ref() }
    }

    fn producer_pos(&self) -> &AtomicUsize {
        // SAFETY: the producer page starts with the position, a word the kernel
        // writes; the page lives as long as `self`.
        unsafe { self.producer.ptr.cast::<AtomicUsize>().as_ref() }
    }

    /// Hands the next record to `on_record` and consumes it; `false` when no
    /// whole record waits, or before [`Ring::map_data`] (whose caller refuses to
    /// go on without it, so that nothing is left unread unnoticed).
    pub fn next(&mut self, on_record: impl FnOnce(&[u8])) -> bool {
        let mut on_record = Some(on_record);
        let Some(base) = self.data.as_ref().map(|d| d.ptr.cast::<u8>()) else {
            return false;
        };
        loop {
            let at = self.consumer_pos().load(Ordering::Acquire);
            // Pairs with the kernel's release of a committed record's position.
            let waiting = self.producer_pos().load(Ordering::Acquire).wrapping_sub(at);
            if waiting == 0 {
                return false;
            }
            if waiting > self.mask + 1 {
                // A position no reader of ours wrote (the kernel's is always
                // ahead of it by at most the size): start again from the end
                // rather than take old bytes for records.
                self.skip_all();
                return false;
            }
            let offset = at & self.mask;
            // SAFETY: offset is within the first copy of the data pages, and the
            // header is 8-byte aligned (the kernel rounds records to 8 bytes).
            let header =
                unsafe { base.add(offset).cast::<AtomicU32>().as_ref() }.load(Ordering::Acquire);
            if header & BUSY != 0 {
                return false;
            }
            let len = (header & !(BUSY | DISCARD)) as usize;
            if HEADER + len > waiting {
                // Never from the kernel: a record past what was written.
                self.skip_all();
                return false;
            }
            if header & DISCARD == 0 {
                // SAFETY: the record's bytes follow its header, within the data
                // pages' second copy at worst (len < size), and are not written
                // again until the consumer position passes them.
                let data =
                    unsafe { std::slice::from_raw_parts(base.as_ptr().add(offset + HEADER), len) };
                if let Some(on_record) = on_record.take() {
                    on_record(data);
                }
            }
            self.consumer_pos()
                .store(at + (HEADER + len).next_multiple_of(8), Ordering::SeqCst);
            if header & DISCARD == 0 {
                return true;
            }
        }
    }
}

impl AsFd for Ring {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ring buffer map `fd` of `size` bytes, mapped whole.
    fn map(fd: OwnedFd, size: usize) -> io::Result<Ring> {
        let mut ring = Ring::open(fd, size)?;
        ring.map_data()?;
        Ok(ring)
    }

    /// A ring of `size` bytes, mapped, and its map's descriptor. The unit tests run
    /// as root (scripts/test), which making a BPF map needs.
    fn ring(size: u32) -> (Ring, OwnedFd) {
        assert_eq!(
            super::super::getuid(),
            0,
            "run as root: making a BPF map needs it"
        );
        let fd = super::super::bpf_map_create(
            "test_ring",
            super::super::BPF_MAP_TYPE_RINGBUF,
            (0, 0),
            size,
            None,
        )
        .expect("a ring buffer");
        let copy = fd.try_clone().unwrap();
        (map(fd, size as usize).unwrap(), copy)
    }

    /// ATTACK (records): a consumer position no reader of ours wrote (ahead of the
    /// kernel's, as a reader that took stale bytes for records would leave it)
    /// makes the next reader start from the end, never read old bytes or loop.
    #[test]
    fn a_position_ahead_of_the_kernel_s_is_set_back_to_the_end() {
        let (mut ring, fd) = ring(4096 * 4);
        ring.consumer_pos().store(4096 * 100, Ordering::SeqCst);
        assert!(!ring.next(|_| panic!("a record from nothing")));
        assert_eq!(ring.consumer_pos().load(Ordering::SeqCst), 0);
        // A reader mapping the ring later starts at the end as well.
        ring.consumer_pos().store(24, Ordering::SeqCst);
        let mut again = map(fd, 4096 * 4).unwrap();
        assert_eq!(again.consumer_pos().load(Ordering::SeqCst), 0);
        assert!(!again.next(|_| panic!("a record from nothing")));
    }

    /// The data pages are mapped apart, after the start position was taken: before
    /// that nothing is read, after it what the positions say.
    #[test]
    fn an_opened_ring_reads_only_once_its_data_pages_are_mapped() {
        let (_, fd) = ring(4096 * 4);
        let mut opened = Ring::open(fd, 4096 * 4).unwrap();
        assert!(opened.data.is_none());
        assert!(!opened.next(|_| panic!("a record from unmapped pages")));
        opened.map_data().unwrap();
        opened.map_data().unwrap();
        assert!(!opened.next(|_| panic!("a record from nothing")));
        assert_eq!(opened.data.as_ref().map(|d| d.len), Some(2 * 4096 * 4));
    }

    #[test]
    fn a_size_that_is_not_a_power_of_two_is_refused() {
        let (_, fd) = ring(4096);
        assert!(Ring::open(fd, 4096 * 3).is_err());
    }
}
