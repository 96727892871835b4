//! The C ABI between the runtime and the instrumented application library (`app.rs`),
//! compiled into both: the host through `#[path]` in `compiler_capture`, the library as a
//! module of its own. One source, so the two sides cannot disagree on a layout.

use std::ffi::c_void;

/// Bumped whenever anything in this file or the exported functions' signatures changes;
/// the loader refuses a library that reports another.
pub const ABI: u32 = 5;

/// Bytes every module built by pmkv-mangosteen-build carries (`rt.rs`), its ABI in the
/// last digits: the loader looks for them in the image before loading it, so a library
/// built any other way is refused without running its code.
pub const MARK: [u8; 36] = *b"pmkv-mangosteen-build module abi 05\0";
const _: () = assert!(ABI == 5, "update MARK with ABI");

/// Writes of at least this many blocks are ranges: the runtime's deduplication set keeps
/// each as one entry (`dedup::DedupSet`); shorter writes are appended to [`Ctx::buf`] by
/// the hooks, one entry each, whose low bits ([`SPAN_MASK`]) must hold the longest one's
/// block count. One constant for both sides, since the entries' encoding rests on it.
pub const RANGE_BLOCKS: usize = 8;

/// The low bits of an entry of [`Ctx::buf`] that hold its write's block count less one
/// (the rest is the first block's region offset). Blocks are at least 8 bytes, so a
/// block offset leaves these bits zero, and a short write spans at most 7 blocks.
pub const SPAN_MASK: u64 = 7;
const _: () = assert!(RANGE_BLOCKS as u64 - 1 <= SPAN_MASK);

/// Called for every captured write: the region offset of its first byte and its length
/// (already clipped to the region).
pub type RecordFn = unsafe extern "C" fn(arg: *mut c_void, off: usize, len: usize);

/// What a thread captures while a batch runs on it: every write into `lo..hi` is handed
/// to `record`. Owned by the runtime for the batch; the hooks only read it, except
/// `last`, the block last recorded, which spares the call for the stores that follow
/// into the same block (most of a node update).
#[repr(C)]
pub struct Ctx {
    pub lo: usize,
    pub hi: usize,
    /// The deduplication block size (a power of two).
    pub block: usize,
    /// Region offset of the block last recorded, or `usize::MAX`.
    pub last: usize,
    pub record: RecordFn,
    pub arg: *mut c_void,
    /// How `memcpy`, `memmove` and `memset` are reported: 0, as one write of their whole
    /// length (the paper's memcpy interception); n > 0, as the n-byte stores a copy loop
    /// makes, each through the store hook (the paper's "nomemcpy", where the binary
    /// instrumentation sees every store of the copy: Fig. 8d).
    pub mem_store: usize,
    /// Where a write of fewer than [`RANGE_BLOCKS`] blocks is appended instead of calling
    /// `record`, while `len < cap`: one entry per write, its first block's region offset
    /// with its block count less one in the low bits ([`SPAN_MASK`]), in capture order, a
    /// block again when other blocks were written in between. The runtime sorts and
    /// merges them at the commit, which deduplicates them (an append is a store and an
    /// increment; a callback and a hash probe per write made a Dictionary insert ~6%
    /// slower). `cap` 0: every write goes to `record`; once full, the rest do.
    pub buf: *mut u64,
    pub len: usize,
    pub cap: usize,
}

/// One end of a key range: `kind` 0 = unbounded, 1 = included, 2 = excluded.
#[repr(C)]
pub struct Bound {
    pub kind: u8,
    pub ptr: *const u8,
    pub len: usize,
}

/// A value seen by a get: `(arg, value, len)`.
pub type ValueFn = unsafe extern "C" fn(arg: *mut c_void, v: *const u8, len: usize);

/// A record seen by a scan: `(arg, key, key_len, value, value_len)`; false stops the scan.
pub type RecordVisitFn = unsafe extern "C" fn(*mut c_void, *const u8, usize, *const u8, usize) -> bool;

/// A write's outcome, returned by a module's write entry points (`rt.rs`, `run`).
pub const WRITE_OK: u32 = 0;
/// The region's heap ran out during the write: roll it back.
pub const WRITE_FULL: u32 = 1;
/// The write's code panicked (the message is in the `Msg`): roll it back.
pub const WRITE_PANICKED: u32 = 2;

/// Where a module copies a panic's message: `cap` bytes at `ptr`, `len` set to how many
/// it wrote.
#[repr(C)]
pub struct Msg {
    pub ptr: *mut u8,
    pub cap: usize,
    pub len: usize,
}

/// A write entry point: `(base, len, root, args, out, msg) -> WRITE_*`; `args` points to
/// the arguments (moved in), `out` to room for the result.
pub type WriteFn = unsafe extern "C" fn(*mut u8, usize, u64, *const u8, *mut u8, *mut Msg) -> u32;

/// FNV-1a of `bytes`, continuing from `h` (start: [`FNV_START`]).
pub fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    h
}

pub const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// A type's name as the compiler spells it, each path cut to its last segment
/// (`my_index::user::Index` in a module and `app::index::Index` in the program are
/// both `Index`), hashed with its size and alignment: how a module and the program
/// agree that they mean the same type.
pub fn type_tag<T>(h: u64) -> u64 {
    let mut h = h;
    let mut word = Vec::new();
    for c in std::any::type_name::<T>().bytes() {
        if c.is_ascii_alphanumeric() || c == b'_' || c == b':' {
            word.push(c);
        } else {
            h = fnv(h, last_segment(&word));
            h = fnv(h, &[c]);
            word.clear();
        }
    }
    h = fnv(h, last_segment(&word));
    h = fnv(h, &(std::mem::size_of::<T>() as u64).to_le_bytes());
    fnv(h, &(std::mem::align_of::<T>() as u64).to_le_bytes())
}

fn last_segment(path: &[u8]) -> &[u8] {
    match path.windows(2).rposition(|w| w == b"::") {
        Some(i) => &path[i + 2..],
        None => path,
    }
}

/// The tag of a write taking `A` and returning `R` on a `T`.
pub fn write_tag<T, A, R>() -> u64 {
    type_tag::<R>(type_tag::<A>(type_tag::<T>(FNV_START)))
}

/// The root block of a module's structure (`capture_root!`): its type's tag
/// ([`type_tag`]), then the value.
#[repr(C)]
pub struct Root<T> {
    pub tag: u64,
    pub value: T,
}
