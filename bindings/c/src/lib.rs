//! The C API of pmkv (SPEC U4): `include/pmkv.h` is generated from this file by cbindgen
//! (the `header_is_current` test fails if the checked-in header is stale).
//!
//! Every function catches panics (none may cross into C), checks its pointers, and returns
//! 0, [`PMKV_ABSENT`], or a negative error code: minus the stable code of
//! `pmkv::ErrorKind` (`PMKV_E_*`), with a message in [`pmkv_last_error`] (per thread).
//! Every engine of the build is reachable by name, with no code per engine.

#![allow(non_camel_case_types)] // C type names: pmkv_store, pmkv_cursor, pmkv_options

pub mod mangosteen;
mod split;

use pmkv::{ErrorKind, KeyRange, Options, Store};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::ops::Bound;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Split allocation for the `mangosteen` engine (SPEC M7): the system allocator, except
/// inside Mangosteen's read-write requests.
#[global_allocator]
static ALLOC: pmkv::SplitAlloc = pmkv::SplitAlloc;

/// Success.
pub const PMKV_OK: c_int = 0;
/// The key (or, for a cursor, a further record) is not there: not an error.
pub const PMKV_ABSENT: c_int = 1;
/// The caller's buffer is too small; `*value_len` says how large the value is.
pub const PMKV_E_BUFFER: c_int = -100;
pub const PMKV_E_INVALID_ARGUMENT: c_int = -1;
pub const PMKV_E_KEY_TOO_LARGE: c_int = -2;
pub const PMKV_E_VALUE_TOO_LARGE: c_int = -3;
pub const PMKV_E_UNKNOWN_ENGINE: c_int = -4;
pub const PMKV_E_NOT_FOUND: c_int = -5;
pub const PMKV_E_ALREADY_EXISTS: c_int = -6;
pub const PMKV_E_NOT_A_POOL: c_int = -7;
pub const PMKV_E_WRONG_ENGINE: c_int = -8;
pub const PMKV_E_VERSION: c_int = -9;
pub const PMKV_E_CORRUPT: c_int = -10;
pub const PMKV_E_LOCKED: c_int = -11;
pub const PMKV_E_READ_ONLY: c_int = -12;
pub const PMKV_E_NEEDS_RECOVERY: c_int = -13;
pub const PMKV_E_FULL: c_int = -14;
pub const PMKV_E_UNSUPPORTED: c_int = -15;
pub const PMKV_E_IO: c_int = -16;
pub const PMKV_E_POISONED: c_int = -17;
pub const PMKV_E_INTERNAL: c_int = -18;

/// How to open a store. Zero-initialise it and set what you need: a NULL `engine` means
/// "hart" for a new pool (an existing pool's engine is read from its header), a NULL
/// `mode` means "wal" for a pool on a disk file and "adr" elsewhere (as the CLI), a NULL
/// `sync` means "always", `initial_size` 0 means the default.
#[repr(C)]
pub struct pmkv_options {
    /// Engine name for a new pool ("hart", "volatile", ...), or NULL.
    pub engine: *const c_char,
    /// Persistence mode: "adr", "eadr", "msync", "wal" or "none", or NULL.
    pub mode: *const c_char,
    /// Create the pool if it does not exist (non-zero).
    pub create: c_int,
    /// Open read-only (non-zero): writes fail with PMKV_E_READ_ONLY.
    pub read_only: c_int,
    /// Initial pool size in bytes for a new pool (0: the default, 64 KiB; a pool grows on
    /// demand).
    pub initial_size: u64,
    /// Mode wal: when a write is acknowledged, as Redis's appendfsync. "always" (on the
    /// device: nothing acknowledged is lost by a power loss), "everysec" (written to the
    /// kernel, synced every second: a power loss loses at most about the last second) or
    /// "no" (synced when the kernel writes back); NULL means "always". Ignored in other
    /// modes. (Appended after `initial_size`: programs built against an older header
    /// must be rebuilt.)
    pub sync: *const c_char,
}

/// An open store (opaque).
pub struct pmkv_store {
    store: Option<Store>,
}

/// A cursor over a range of a store (opaque). Its key and value pointers stay valid until
/// the next call on the cursor.
pub struct pmkv_cursor {
    // Borrows the store: the header's contract is that cursors are closed first.
    it: pmkv::Cursor<'static>,
    reverse: bool,
    current: Option<(Vec<u8>, Vec<u8>)>,
}

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last(msg: &str) {
    // Called from inside a split_heap request too (pmkv_mg_set_root, ...): the message
    // must come from the C library, not the region, which it would outlive (and which,
    // under page capture, is read-only outside batches: replacing it there faulted).
    pmkv_mangosteen::SplitAlloc::transient(|| {
        let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
        LAST.with(|l| *l.borrow_mut() = c);
    })
}

fn fail(kind: ErrorKind, msg: &str) -> c_int {
    set_last(msg);
    -kind.code()
}

fn from_err(e: pmkv::Error) -> c_int {
    fail(e.kind(), &e.to_string())
}

/// Run `f`, turning a panic into PMKV_E_INTERNAL.
fn guard(f: impl FnOnce() -> c_int) -> c_int {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|_| fail(ErrorKind::Internal, "internal error (a panic was caught)"))
}

/// `len` bytes at `p` (NULL only with 0).
unsafe fn bytes<'a>(p: *const u8, len: usize) -> Result<&'a [u8], c_int> {
    if p.is_null() {
        return if len == 0 {
            Ok(&[])
        } else {
            Err(fail(ErrorKind::InvalidArgument, "NULL pointer with a non-zero length"))
        };
    }
    if len > isize::MAX as usize {
        return Err(fail(ErrorKind::InvalidArgument, "length too large"));
    }
    // SAFETY: the caller passes `len` readable bytes at `p` (the header's contract).
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

unsafe fn cstr<'a>(p: *const c_char, what: &str) -> Result<Option<&'a str>, c_int> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: a NUL-terminated string (the header's contract).
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map(Some)
        .map_err(|_| fail(ErrorKind::InvalidArgument, &format!("{what} is not UTF-8")))
}

unsafe fn store<'a>(s: *const pmkv_store) -> Result<&'a Store, c_int> {
    // SAFETY: a store from pmkv_open, not yet closed (the header's contract).
    match unsafe { s.as_ref() }.and_then(|s| s.store.as_ref()) {
        Some(st) => Ok(st),
        None => Err(fail(ErrorKind::InvalidArgument, "NULL or closed store")),
    }
}

/// The calling thread's last error message (empty if none); valid until its next failing
/// call.
#[no_mangle]
pub extern "C" fn pmkv_last_error() -> *const c_char {
    LAST.with(|l| l.borrow().as_ptr())
}

/// Open (or create, with `opts->create`) the pool at `path`; `*out` receives the store, or
/// NULL on failure (so a handle closed before cannot be used by mistake).
/// `opts` may be NULL (open an existing pool read-write).
///
/// # Safety
///
/// Pointers are as the header says: strings NUL-terminated, byte pointers valid for their
/// lengths (NULL only with 0), out pointers writable, stores and cursors live (from
/// pmkv_open / pmkv_cursor_open and not yet closed).
#[no_mangle]
pub unsafe extern "C" fn pmkv_open(path: *const c_char, opts: *const pmkv_options, out: *mut *mut pmkv_store) -> c_int {
    guard(|| {
        if out.is_null() {
            return fail(ErrorKind::InvalidArgument, "NULL out pointer");
        }
        // SAFETY: `out` is non-NULL (checked) and writable (the contract).
        unsafe { *out = std::ptr::null_mut() };
        // SAFETY: caller's contract (see the header).
        let r = (|| unsafe {
            let path = cstr(path, "path")?.ok_or_else(|| fail(ErrorKind::InvalidArgument, "NULL path"))?;
            let o = opts.as_ref();
            let engine = match o {
                Some(o) => cstr(o.engine, "engine")?,
                None => None,
            };
            let mode = match o {
                Some(o) => cstr(o.mode, "mode")?,
                None => None,
            };
            let sync = match o {
                Some(o) => cstr(o.sync, "sync")?,
                None => None,
            };
            // No mode given: mode wal on a disk file, as the CLI (the library's own default
            // stays adr; docs/design/substrate.md, "Defaults").
            let mut options = Options::default().wal_on_disk(true);
            if let Some(m) = mode {
                options = options.mode(m.parse().map_err(|e: String| fail(ErrorKind::InvalidArgument, &e))?);
            }
            if let Some(p) = sync {
                options = options.sync(p.parse().map_err(|e: String| fail(ErrorKind::InvalidArgument, &e))?);
            }
            if let Some(o) = o {
                options = options.create(o.create != 0).read_only(o.read_only != 0);
                if o.initial_size > 0 {
                    options = options.initial_size(o.initial_size);
                }
            } else {
                options = options.create(false);
            }
            let exists = std::path::Path::new(path).exists();
            let st = if exists && engine.is_none() {
                Store::open_existing(path, &options)
            } else {
                Store::open(path, engine.unwrap_or("hart"), &options)
            };
            st.map_err(from_err)
        })();
        match r {
            Ok(st) => {
                // SAFETY: `out` is non-NULL (checked) and writable (the contract).
                unsafe { *out = Box::into_raw(Box::new(pmkv_store { store: Some(st) })) };
                PMKV_OK
            }
            Err(code) => code,
        }
    })
}

/// Close a store (making everything durable) and free it; `s` is invalid afterwards, even
/// when an error is returned. NULL is accepted and does nothing.
///
/// # Safety
///
/// Pointers are as the header says: strings NUL-terminated, byte pointers valid for their
/// lengths (NULL only with 0), out pointers writable, stores and cursors live (from
/// pmkv_open / pmkv_cursor_open and not yet closed).
#[no_mangle]
pub unsafe extern "C" fn pmkv_close(s: *mut pmkv_store) -> c_int {
    guard(|| {
        if s.is_null() {
            return PMKV_OK;
        }
        // SAFETY: a store from pmkv_open, closed once (the contract).
        let mut b = unsafe { Box::from_raw(s) };
        match b.store.take() {
            Some(st) => st.close().map(|_| PMKV_OK).unwrap_or_else(from_err),
            None => PMKV_OK,
        }
    })
}

/// Look `key` up and copy its value into `buf` (capacity `cap`); `*value_len` gets the
/// value's length. Returns PMKV_ABSENT if there is no such key, PMKV_E_BUFFER (with
/// `*value_len` set) if `cap` is too small.
///
/// # Safety
///
/// Pointers are as the header says: strings NUL-terminated, byte pointers valid for their
/// lengths (NULL only with 0), out pointers writable, stores and cursors live (from
/// pmkv_open / pmkv_cursor_open and not yet closed).
#[no_mangle]
pub unsafe extern "C" fn pmkv_get(
    s: *const pmkv_store,
    key: *const u8,
    key_len: usize,
    buf: *mut u8,
    cap: usize,
    value_len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: store, key and out pointers are the caller's per this function's `# Safety`: `store`
        // and `bytes` reject NULL, and `buf` is written only within `cap`, `value_len` only if non-NULL.
        let r = (|| unsafe {
            let st = store(s)?;
            let k = bytes(key, key_len)?;
            if value_len.is_null() || (buf.is_null() && cap > 0) {
                return Err(fail(ErrorKind::InvalidArgument, "NULL value_len, or NULL buf with a capacity"));
            }
            match st.get(k).map_err(from_err)? {
                None => Ok(PMKV_ABSENT),
                Some(v) => {
                    *value_len = v.len();
                    if v.len() > cap {
                        set_last("buffer too small");
                        return Ok(PMKV_E_BUFFER);
                    }
                    if !v.is_empty() {
                        std::ptr::copy_nonoverlapping(v.as_ptr(), buf, v.len());
                    }
                    Ok(PMKV_OK)
                }
            }
        })();
        r.unwrap_or_else(|c| c)
    })
}

/// Look `key` up; `*value` receives a buffer of `*value_len` bytes to release with
/// pmkv_free. Returns PMKV_ABSENT (and `*value` = NULL) if there is no such key.
///
/// # Safety
///
/// Pointers are as the header says: strings NUL-terminated, byte pointers valid for their
/// lengths (NULL only with 0), out pointers writable, stores and cursors live (from
/// pmkv_open / pmkv_cursor_open and not yet closed).
#[no_mangle]
pub unsafe extern "C" fn pmkv_get_alloc(
    s: *const pmkv_store,
    key: *const u8,
    key_len: usize,
    value: *mut *mut u8,
    value_len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: `store` and `bytes` reject NULL; the key is valid for `key_len` and the out pointers
        // are writable (this function's `# Safety`); they are written only after a NULL check.
        let r = (|| unsafe {
            let st = store(s)?;
            let k = bytes(key, key_len)?;
            if value.is_null() || value_len.is_null() {
                return Err(fail(ErrorKind::InvalidArgument, "NULL value or value_len"));
            }
            *value = std::ptr::null_mut();
            *value_len = 0;
            match st.get(k).map_err(from_err)? {
                None => Ok(PMKV_ABSENT),
                Some(v) => {
                    let b = v.into_boxed_slice();
                    *value_len = b.len();
                    *value = Box::into_raw(b) as *mut u8;
                    Ok(PMKV_OK)
                }
            }
        })();
        r.unwrap_or_else(|c| c)
    })
}

/// Release a buffer from pmkv_get_alloc or pmkv_mg_client_cmd (with the length it came
/// with). NULL is accepted.
///
/// # Safety
///
/// Pointers are as the header says: strings NUL-terminated, byte pointers valid for their
/// lengths (NULL only with 0), out pointers writable, stores and cursors live (from
/// pmkv_open / pmkv_cursor_open and not yet closed).
#[no_mangle]
pub unsafe extern "C" fn pmkv_free(value: *mut u8, value_len: usize) {
    if !value.is_null() {
        let _ = catch_unwind(|| {
            // SAFETY: a buffer of exactly `value_len` bytes from pmkv_get_alloc or
            // pmkv_mg_client_cmd (the contract).
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(value, value_len)) });
        });
    }
}

/// Insert or replace `key` with `value`; durable when it returns (in the store's mode).
///
/// # Safety
///
/// Pointers are as the header says: strings NUL-terminated, byte pointers valid for their
/// lengths (NULL only with 0), out pointers writable, stores and cursors live (from
/// pmkv_open / pmkv_cursor_open and not yet closed).
#[no_mangle]
pub unsafe extern "C" fn pmkv_put(
    s: *const pmkv_store,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: `store` rejects NULL and otherwise names a live store; `bytes` rejects NULL with a
        // length and the caller guarantees key and value are valid for their lengths (`# Safety`).
        let r = (|| unsafe {
            let st = store(s)?;
            st.put(bytes(key, key_len)?, bytes(value, value_len)?).map_err(from_err)?;
            Ok(PMKV_OK)
        })();
        r.unwrap_or_else(|c| c)
    })
}

/// Delete `key`; PMKV_ABSENT if it was not there.
///
/// # Safety
///
/// Pointers are as the header says: strings NUL-terminated, byte pointers valid for their
/// lengths (NULL only with 0), out pointers writable, stores and cursors live (from
/// pmkv_open / pmkv_cursor_open and not yet closed).
#[no_mangle]
pub unsafe extern "C" fn pmkv_delete(s: *const pmkv_store, key: *const u8, key_len: usize) -> c_int {
    guard(|| {
        // SAFETY: `store` rejects NULL and otherwise names a live store; `bytes` rejects NULL with a
        // length and the caller guarantees the key is valid for `key_len` (`# Safety`).
        let r = (|| unsafe {
            let st = store(s)?;
            Ok(if st.delete(bytes(key, key_len)?).map_err(from_err)? { PMKV_OK } else { PMKV_ABSENT })
        })();
        r.unwrap_or_else(|c| c)
    })
}

/// The number of records, into `*out`.
///
/// # Safety
///
/// Pointers are as the header says: strings NUL-terminated, byte pointers valid for their
/// lengths (NULL only with 0), out pointers writable, stores and cursors live (from
/// pmkv_open / pmkv_cursor_open and not yet closed).
#[no_mangle]
pub unsafe extern "C" fn pmkv_len(s: *const pmkv_store, out: *mut u64) -> c_int {
    guard(|| {
        // SAFETY: `store` rejects NULL and otherwise names a live store; `out` is checked for NULL
        // below and is writable by the caller's contract (`# Safety`).
        let r = (|| unsafe {
            let st = store(s)?;
            if out.is_null() {
                return Err(fail(ErrorKind::InvalidArgument, "NULL out pointer"));
            }
            *out = st.len().map_err(from_err)?;
            Ok(PMKV_OK)
        })();
        r.unwrap_or_else(|c| c)
    })
}

/// What a store's acknowledged writes survive (pmkv_store_durability): the medium its pool sits
/// on, detected at open, its mode and (mode wal) sync policy. The strings are static: never
/// freed, valid for the life of the program.
#[repr(C)]
pub struct pmkv_durability {
    /// "dax" (persistent memory mapped with MAP_SYNC), "memory" (tmpfs, ramfs), "disk"
    /// (any other file system) or "anonymous" (an engine without a pool).
    pub medium: *const c_char,
    /// "adr", "eadr", "msync", "wal" or "none".
    pub mode: *const c_char,
    /// For each event: 1 acknowledged writes survive it, 0 they may be lost, -1 only on
    /// eADR hardware (mode eadr on DAX; no interface tells whether a machine has eADR),
    /// -2 all but about the last second of them (mode wal, sync "everysec"), -3 a
    /// consistent prefix of them of unbounded age (mode wal, sync "no"). Only a value
    /// above 0 means every acknowledged write survives.
    pub process_crash: c_int,
    pub kernel_crash: c_int,
    pub power_loss: c_int,
    pub reboot: c_int,
    /// Why the mode promises more than the medium gives (e.g. "adr" on a disk file or on
    /// tmpfs), for the application to show once; NULL when it does not.
    pub warning: *const c_char,
    /// Mode wal's sync policy: "always", "everysec" or "no"; NULL in other modes.
    /// (Appended after `warning`: programs built against an older header must be rebuilt.)
    pub sync: *const c_char,
}

/// `s` as a static C string (the durability texts are a fixed set: each is made once).
fn static_cstr(s: &'static str) -> *const c_char {
    static MADE: std::sync::Mutex<Vec<(&'static str, &'static CStr)>> = std::sync::Mutex::new(Vec::new());
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, c)) = made.iter().find(|(k, _)| std::ptr::eq(*k, s) || *k == s) {
        return c.as_ptr();
    }
    let c: &'static CStr = Box::leak(CString::new(s).unwrap_or_default().into_boxed_c_str());
    made.push((s, c));
    c.as_ptr()
}

/// Fill `*out` with what the store's acknowledged writes survive (the struct pmkv_durability).
/// An application that opened the store for writing should show `out->warning`, if
/// not NULL, once.
///
/// # Safety
///
/// Pointers are as the header says: strings NUL-terminated, byte pointers valid for their
/// lengths (NULL only with 0), out pointers writable, stores and cursors live (from
/// pmkv_open / pmkv_cursor_open and not yet closed).
#[no_mangle]
pub unsafe extern "C" fn pmkv_store_durability(s: *const pmkv_store, out: *mut pmkv_durability) -> c_int {
    guard(|| {
        // SAFETY: `store` rejects NULL and otherwise names a live store; `out` is checked for NULL
        // below and is writable by the caller's contract (`# Safety`).
        let r = (|| unsafe {
            let st = store(s)?;
            if out.is_null() {
                return Err(fail(ErrorKind::InvalidArgument, "NULL out pointer"));
            }
            let d = st.durability();
            let code = |e| d.survives(e).code();
            *out = pmkv_durability {
                medium: static_cstr(d.medium.name()),
                mode: static_cstr(d.mode.name()),
                process_crash: code(pmkv::Event::ProcessCrash),
                kernel_crash: code(pmkv::Event::KernelCrash),
                power_loss: code(pmkv::Event::PowerLoss),
                reboot: code(pmkv::Event::Reboot),
                warning: d.warning().map_or(std::ptr::null(), static_cstr),
                sync: d.sync.map_or(std::ptr::null(), |p| static_cstr(p.name())),
            };
            Ok(PMKV_OK)
        })();
        r.unwrap_or_else(|c| c)
    })
}

/// Check the store's invariants: PMKV_OK, or PMKV_E_CORRUPT with the problems in
/// pmkv_last_error().
///
/// # Safety
///
/// Pointers are as the header says: strings NUL-terminated, byte pointers valid for their
/// lengths (NULL only with 0), out pointers writable, stores and cursors live (from
/// pmkv_open / pmkv_cursor_open and not yet closed).
#[no_mangle]
pub unsafe extern "C" fn pmkv_check(s: *const pmkv_store) -> c_int {
    guard(|| {
        // SAFETY: `store` rejects NULL and otherwise names a live store, open until `pmkv_close`
        // (this function's `# Safety`); nothing else is dereferenced.
        let r = (|| unsafe {
            let rep = store(s)?.check().map_err(from_err)?;
            if rep.is_ok() {
                Ok(PMKV_OK)
            } else {
                Err(fail(ErrorKind::Corrupt, &rep.to_string()))
            }
        })();
        r.unwrap_or_else(|c| c)
    })
}

/// A cursor over `[start, end)`: `start` included, `end` excluded, as every pmkv range
/// (an `end` at or before `start` is an empty range, not an error). A NULL `start` or
/// `end` (with length 0) leaves that side open; a non-NULL pointer with length 0 is the
/// empty key, a bound like any other. In key order or, with `reverse` non-zero, the same
/// records backwards. For the keys with a prefix P, pass [P, the successor of P): P with
/// its trailing 0xff bytes dropped and its last byte then incremented (no end if P is all
/// 0xff). Close the cursor (pmkv_cursor_close) before the store. `*out` is NULL on failure.
///
/// # Safety
///
/// Pointers are as the header says: strings NUL-terminated, byte pointers valid for their
/// lengths (NULL only with 0), out pointers writable, stores and cursors live (from
/// pmkv_open / pmkv_cursor_open and not yet closed).
#[no_mangle]
pub unsafe extern "C" fn pmkv_cursor_open(
    s: *const pmkv_store,
    start: *const u8,
    start_len: usize,
    end: *const u8,
    end_len: usize,
    reverse: c_int,
    out: *mut *mut pmkv_cursor,
) -> c_int {
    guard(|| {
        // SAFETY: `store` rejects NULL and names a live store, which the header requires to outlive its
        // cursors (hence the 'static borrow below); bounds are valid for their lengths, `out` writable.
        let r = (|| unsafe {
            let st: &'static Store = std::mem::transmute::<&Store, &'static Store>(store(s)?);
            if out.is_null() {
                return Err(fail(ErrorKind::InvalidArgument, "NULL out pointer"));
            }
            *out = std::ptr::null_mut();
            // `bytes` refuses NULL with a non-zero length: an open end is NULL with 0.
            let lo = match bytes(start, start_len)? {
                _ if start.is_null() => Bound::Unbounded,
                k => Bound::Included(k.to_vec()),
            };
            let hi = match bytes(end, end_len)? {
                _ if end.is_null() => Bound::Unbounded,
                k => Bound::Excluded(k.to_vec()),
            };
            let it = st.range(&KeyRange { start: lo, end: hi });
            *out = Box::into_raw(Box::new(pmkv_cursor { it, reverse: reverse != 0, current: None }));
            Ok(PMKV_OK)
        })();
        r.unwrap_or_else(|c| c)
    })
}

/// Step the cursor: `*key`/`*value` point at the next record's bytes (valid until the next
/// call on this cursor). PMKV_ABSENT at the end.
///
/// # Safety
///
/// Pointers are as the header says: strings NUL-terminated, byte pointers valid for their
/// lengths (NULL only with 0), out pointers writable, stores and cursors live (from
/// pmkv_open / pmkv_cursor_open and not yet closed).
#[no_mangle]
pub unsafe extern "C" fn pmkv_cursor_next(
    c: *mut pmkv_cursor,
    key: *mut *const u8,
    key_len: *mut usize,
    value: *mut *const u8,
    value_len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: the cursor is NULL-checked and otherwise live and used by one thread (`# Safety`);
        // the four out pointers are NULL-checked below and writable by the caller's contract.
        let r = (|| unsafe {
            let c = c.as_mut().ok_or_else(|| fail(ErrorKind::InvalidArgument, "NULL cursor"))?;
            if key.is_null() || key_len.is_null() || value.is_null() || value_len.is_null() {
                return Err(fail(ErrorKind::InvalidArgument, "NULL out pointer"));
            }
            let step = if c.reverse { c.it.next_back() } else { c.it.next() };
            match step {
                None => Ok(PMKV_ABSENT),
                Some(Err(e)) => Err(from_err(e)),
                Some(Ok(kv)) => {
                    let (k, v) = c.current.insert(kv);
                    (*key, *key_len, *value, *value_len) = (k.as_ptr(), k.len(), v.as_ptr(), v.len());
                    Ok(PMKV_OK)
                }
            }
        })();
        r.unwrap_or_else(|c| c)
    })
}

/// Release a cursor. NULL is accepted.
///
/// # Safety
///
/// Pointers are as the header says: strings NUL-terminated, byte pointers valid for their
/// lengths (NULL only with 0), out pointers writable, stores and cursors live (from
/// pmkv_open / pmkv_cursor_open and not yet closed).
#[no_mangle]
pub unsafe extern "C" fn pmkv_cursor_close(c: *mut pmkv_cursor) {
    if !c.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: a cursor from pmkv_cursor_open, closed once (the contract).
            drop(unsafe { Box::from_raw(c) });
        }));
    }
}
