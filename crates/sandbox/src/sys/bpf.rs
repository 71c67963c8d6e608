//! The `bpf` system calls the pinned exec recorder needs beyond what its loader
//! (aya) offers: a ring buffer and a map of maps made without an object file, a
//! map's elements by raw bytes, and pins.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use libc::c_int;

use super::check_long;

const BPF_MAP_CREATE: c_int = 0;
const BPF_MAP_LOOKUP_ELEM: c_int = 1;
const BPF_MAP_UPDATE_ELEM: c_int = 2;
const BPF_MAP_DELETE_ELEM: c_int = 3;
const BPF_MAP_GET_NEXT_KEY: c_int = 4;
const BPF_OBJ_PIN: c_int = 6;
const BPF_OBJ_GET: c_int = 7;
const BPF_MAP_GET_FD_BY_ID: c_int = 14;

pub const BPF_MAP_TYPE_HASH_OF_MAPS: u32 = 13;
pub const BPF_MAP_TYPE_RINGBUF: u32 = 27;
/// `BPF_NOEXIST`: an update that only adds.
pub const BPF_NOEXIST: u64 = 1;
/// The bpf file system's `statfs` type.
pub const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

/// `union bpf_attr` for `BPF_MAP_CREATE`, up to the map's name.
#[repr(C)]
#[derive(Default)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

/// `union bpf_attr` for the element commands.
#[repr(C)]
struct Elem {
    map_fd: u32,
    pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// `union bpf_attr` for `BPF_OBJ_PIN` and `BPF_OBJ_GET`.
#[repr(C)]
struct Obj {
    pathname: u64,
    bpf_fd: u32,
    file_flags: u32,
}

fn bpf<T>(cmd: c_int, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: attr is a plain `union bpf_attr` prefix of the size given, whose
    // pointers (if any) the caller made point at live buffers of the map's sizes.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            std::ptr::from_mut(attr).cast::<libc::c_void>(),
            std::mem::size_of::<T>(),
        )
    })
}

fn new_fd(fd: libc::c_long) -> io::Result<OwnedFd> {
    let fd = c_int::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: the kernel just returned this descriptor, which nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A new map. `inner` is a map of maps' template, whose kind and size every map
/// put in it must have.
pub fn bpf_map_create(
    name: &str,
    map_type: u32,
    (key_size, value_size): (u32, u32),
    max_entries: u32,
    inner: Option<BorrowedFd<'_>>,
) -> io::Result<OwnedFd> {
    let mut attr = MapCreate {
        map_type,
        key_size,
        value_size,
        max_entries,
        inner_map_fd: inner.map_or(0, |fd| fd.as_raw_fd() as u32),
        ..MapCreate::default()
    };
    let n = name.len().min(15);
    attr.map_name[..n].copy_from_slice(&name.as_bytes()[..n]);
    new_fd(bpf(BPF_MAP_CREATE, &mut attr)?)
}

fn elem(map: BorrowedFd<'_>, key: &[u8], value: u64, flags: u64) -> Elem {
    Elem {
        map_fd: map.as_raw_fd() as u32,
        pad: 0,
        key: key.as_ptr() as u64,
        value,
        flags,
    }
}

/// Sets `key` to `value` (for a map of maps: a map's descriptor, as a `u32`).
/// The slices must have the map's key and value sizes.
pub fn bpf_map_update(map: BorrowedFd<'_>, key: &[u8], value: &[u8], flags: u64) -> io::Result<()> {
    let mut attr = elem(map, key, value.as_ptr() as u64, flags);
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
}

/// Removes `key`; `Ok(false)` when it was not there.
pub fn bpf_map_delete(map: BorrowedFd<'_>, key: &[u8]) -> io::Result<bool> {
    let mut attr = elem(map, key, 0, 0);
    match bpf(BPF_MAP_DELETE_ELEM, &mut attr) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Reads `key`'s value into `value` (the map's value size); `Ok(false)` when
/// there is none.
pub fn bpf_map_lookup(map: BorrowedFd<'_>, key: &[u8], value: &mut [u8]) -> io::Result<bool> {
    let mut attr = elem(map, key, value.as_mut_ptr() as u64, 0);
    match bpf(BPF_MAP_LOOKUP_ELEM, &mut attr) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The key after `key` (the first with `None`) into `next`; `Ok(false)` past
/// the last.
pub fn bpf_map_next_key(
    map: BorrowedFd<'_>,
    key: Option<&[u8]>,
    next: &mut [u8],
) -> io::Result<bool> {
    let mut attr = Elem {
        map_fd: map.as_raw_fd() as u32,
        pad: 0,
        key: key.map_or(0, |k| k.as_ptr() as u64),
        value: next.as_mut_ptr() as u64,
        flags: 0,
    };
    match bpf(BPF_MAP_GET_NEXT_KEY, &mut attr) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Pins a map, program or link at `path` on a bpf file system.
pub fn bpf_obj_pin(fd: BorrowedFd<'_>, path: &CStr) -> io::Result<()> {
    let mut attr = Obj {
        pathname: path.as_ptr() as u64,
        bpf_fd: fd.as_raw_fd() as u32,
        file_flags: 0,
    };
    bpf(BPF_OBJ_PIN, &mut attr).map(drop)
}

/// Opens what is pinned at `path`.
pub fn bpf_obj_get(path: &CStr) -> io::Result<OwnedFd> {
    let mut attr = Obj {
        pathname: path.as_ptr() as u64,
        bpf_fd: 0,
        file_flags: 0,
    };
    new_fd(bpf(BPF_OBJ_GET, &mut attr)?)
}

/// Opens the map with id `id` (a map of maps' lookup gives its inner map's id).
pub fn bpf_map_get_fd_by_id(id: u32) -> io::Result<OwnedFd> {
    let mut attr: [u32; 3] = [id, 0, 0];
    new_fd(bpf(BPF_MAP_GET_FD_BY_ID, &mut attr)?)
}
