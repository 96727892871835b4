//! Write capture without recompilation: page protection (
//! "write capture, first path"; the paper captures with binary instrumentation, §3.2).
//!
//! The DRAM copy of the region is an anonymous mapping of whole pages ([`RegionBuf`]),
//! kept read-only while a capture exists; the first write of a batch to each page faults, and
//! the SIGSEGV handler saves the page's content (the *before* image), makes the page
//! writable again and lets the write proceed. At the end of the batch every faulted page
//! is compared with its before image, block by block, and exactly the blocks whose bytes
//! changed go to the deduplication set, and the page is made read-only again — so
//! ordinary code that writes the region through plain pointers (an unchanged data
//! structure) is made durable without a single `record` call. Cost: one fault (a few µs) per page per batch, and a compare of each
//! written page at commit.
//!
//! One capture can be active per process at a time (the handler is process-wide); faults
//! anywhere else go to the handler that was installed before (Rust's stack-overflow
//! handler, or the default action). The handler does only async-signal-safe work: loads
//! and stores to memory prepared before the batch, a copy, and `mprotect`.

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Once;

/// Page-aligned anonymous memory: the DRAM copy.
pub struct RegionBuf {
    ptr: *mut u8,
    len: usize,
    map_len: usize,
    /// Mapped at a fixed address (`new_at`), so listed in [`FIXED`].
    fixed: bool,
}

/// The fixed-address mappings of this process (start, length): what salvage's child
/// process unmaps to take a copy's address that a live store holds (`salvage.rs`).
static FIXED: std::sync::Mutex<Vec<(usize, usize)>> = std::sync::Mutex::new(Vec::new());

/// The fixed-address mappings, locked: held across a `fork`, so that the child's copy of
/// the list is consistent (the guard, dropped in both processes, unlocks each one's copy).
pub(crate) fn fixed_mappings() -> std::sync::MutexGuard<'static, Vec<(usize, usize)>> {
    FIXED.lock().unwrap_or_else(|e| e.into_inner())
}

// SAFETY: a plain owned buffer; access is governed by the borrow rules of `&`/`&mut`.
unsafe impl Send for RegionBuf {}
// SAFETY: through `&RegionBuf` the bytes are only read (`Deref`) or made read-only
// (`protect(PROT_READ)`, which never stops a read); writing them needs `&mut`
// (`DerefMut`, `fill_from`), so shared use from several threads cannot race.
unsafe impl Sync for RegionBuf {}

impl RegionBuf {
    /// `len` zero bytes, page-aligned.
    pub fn new(len: usize) -> std::io::Result<RegionBuf> {
        let map_len = len.max(1).next_multiple_of(page_size());
        // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(RegionBuf { ptr: p as *mut u8, len, map_len, fixed: false })
    }

    /// `len` zero bytes mapped exactly at `addr` (page-aligned), for state that holds
    /// absolute pointers into itself (the split heap, M7). Fails with `AddrInUse` if
    /// anything is mapped there already (`MAP_FIXED_NOREPLACE`: nothing is replaced).
    pub fn new_at(addr: usize, len: usize) -> std::io::Result<RegionBuf> {
        let map_len = len.max(1).next_multiple_of(page_size());
        if !addr.is_multiple_of(page_size()) {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "unaligned region address"));
        }
        // SAFETY: a private anonymous mapping that may not replace an existing one.
        let p = unsafe {
            libc::mmap(
                addr as *mut libc::c_void,
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        if p as usize != addr {
            // An old kernel without MAP_FIXED_NOREPLACE treats it as a hint.
            // SAFETY: the mapping just made, unused.
            unsafe { libc::munmap(p, map_len) };
            return Err(std::io::Error::new(std::io::ErrorKind::AddrInUse, "the region's address is taken"));
        }
        fixed_mappings().push((addr, map_len));
        Ok(RegionBuf { ptr: p as *mut u8, len, map_len, fixed: true })
    }

    /// A free address for a new fixed region of `len` bytes: random (so that pools
    /// created in one process do not collide), 2 MiB-aligned, in the middle of the user
    /// address space, and not mapped now.
    pub fn pick_address(len: usize) -> std::io::Result<usize> {
        const LO: usize = 0x2000_0000_0000;
        const SPAN: usize = 0x3000_0000_0000;
        const ALIGN: usize = 2 << 20;
        let mut seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
            ^ ((std::process::id() as u64) << 32)
            ^ (&SEED_MARKER as *const u8 as u64);
        for _ in 0..64 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let addr = LO + (seed as usize % (SPAN / ALIGN)) * ALIGN;
            if let Ok(r) = RegionBuf::new_at(addr, len) {
                drop(r);
                return Ok(addr);
            }
        }
        Err(std::io::Error::new(std::io::ErrorKind::AddrInUse, "no free address for the region"))
    }

    /// The first byte's address.
    pub fn base(&self) -> usize {
        self.ptr as usize
    }

    /// Copy `src` (as long as the buffer) into this freshly mapped, all-zero buffer,
    /// writing only the pages of `src` that hold a nonzero byte. The rest stay
    /// unpopulated, so the empty part of a large region (by default a 64th of the pool,
    /// mostly unused at first) costs no DRAM. Only for a buffer that nothing has written
    /// yet (the skipped pages are assumed zero), hence crate-private.
    ///
    /// # Panics
    /// If `src` is not exactly as long as the buffer (a bug of the caller).
    pub(crate) fn fill_from(&mut self, src: &[u8]) {
        const CHUNK: usize = 4096;
        static ZERO: [u8; CHUNK] = [0; CHUNK];
        assert_eq!(src.len(), self.len, "fill_from: lengths differ");
        for (i, chunk) in src.chunks(CHUNK).enumerate() {
            if chunk != &ZERO[..chunk.len()] {
                self[i * CHUNK..i * CHUNK + chunk.len()].copy_from_slice(chunk);
            }
        }
    }

    pub(crate) fn protect(&self, prot: libc::c_int) {
        // SAFETY: the whole mapping, owned by `self`.
        let r = unsafe { libc::mprotect(self.ptr as *mut libc::c_void, self.map_len, prot) };
        assert_eq!(r, 0, "mprotect of the region failed: {}", std::io::Error::last_os_error());
    }
}

impl std::ops::Deref for RegionBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` mapped bytes, alive as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl std::ops::DerefMut for RegionBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` is the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for RegionBuf {
    fn drop(&mut self) {
        if self.fixed {
            let mut f = fixed_mappings();
            if let Some(i) = f.iter().position(|&(a, _)| a == self.ptr as usize) {
                f.swap_remove(i);
            }
        }
        // SAFETY: the mapping made in `new`, no longer borrowed.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.map_len) };
    }
}

/// Its address adds the binary's load address (ASLR) to the seed of `pick_address`.
static SEED_MARKER: u8 = 0;

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as usize
}

/// What the handler needs during one batch, prepared before the region is protected.
struct Active {
    base: usize,
    map_len: usize,
    page: usize,
    /// Before images, one page per faulted page, in fault order.
    before: *mut u8,
    /// The faulted pages' indices; `count` of them are valid.
    pages: *mut usize,
    count: AtomicUsize,
}

static ACTIVE: AtomicPtr<Active> = AtomicPtr::new(std::ptr::null_mut());
static mut PREVIOUS: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::uninit();
static INSTALL: Once = Once::new();

extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let a = ACTIVE.load(Ordering::Acquire);
    // SAFETY: the kernel passes a valid siginfo for SIGSEGV.
    let addr = unsafe { (*info).si_addr() } as usize;
    if !a.is_null() {
        // SAFETY: `ACTIVE` points to the `Active` of the batch in progress, which the
        // batch keeps alive until it has cleared `ACTIVE` (see `PageCapture::end`).
        let a = unsafe { &*a };
        if addr >= a.base && addr < a.base + a.map_len {
            let page = (addr - a.base) / a.page;
            let start = a.base + page * a.page;
            let i = a.count.fetch_add(1, Ordering::AcqRel);
            // SAFETY: `before` and `pages` hold one slot per page of the region, and a page
            // faults at most once per batch (it is writable afterwards), so `i` is in
            // bounds; the page is readable (read-only, not unmapped).
            unsafe {
                std::ptr::copy_nonoverlapping(start as *const u8, a.before.add(i * a.page), a.page);
                *a.pages.add(i) = page;
                libc::mprotect(start as *mut libc::c_void, a.page, libc::PROT_READ | libc::PROT_WRITE);
            }
            return;
        }
    }
    // Not ours: hand the fault to whoever handled it before us.
    // SAFETY: `PREVIOUS` was written once, before this handler was installed.
    let prev = unsafe { (*std::ptr::addr_of!(PREVIOUS)).assume_init_ref() };
    if prev.sa_flags & libc::SA_SIGINFO != 0 && prev.sa_sigaction > libc::SIG_IGN {
        // SAFETY: an SA_SIGINFO handler takes exactly these arguments.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(prev.sa_sigaction) };
        f(sig, info, ctx);
    } else {
        // Restore the previous disposition and return: the faulting instruction runs again
        // and faults under it (the default action: the process ends with SIGSEGV).
        // SAFETY: reinstalling a disposition that was installed before.
        unsafe { libc::sigaction(libc::SIGSEGV, prev, std::ptr::null_mut()) };
    }
}

fn install() {
    INSTALL.call_once(|| {
        // SAFETY: sigaction with a zeroed struct, our handler and SA_SIGINFO | SA_ONSTACK;
        // the previous disposition is saved first, before any fault can reach `on_fault`.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_fault as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
            libc::sigemptyset(&mut sa.sa_mask);
            let mut prev: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGSEGV, std::ptr::null(), &mut prev);
            (*std::ptr::addr_of_mut!(PREVIOUS)).write(prev);
            libc::sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut());
        }
    });
}

/// Page-protection capture of one region (see the module doc).
pub struct PageCapture {
    before: Vec<u8>,
    pages: Vec<usize>,
    active: Box<Active>,
}

// SAFETY: the raw pointers in `active` point into this value's own buffers (`before`,
// `pages`), which move with it; the signal handler uses them only while `run` holds
// `&mut self`, on whichever thread runs the batch.
unsafe impl Send for PageCapture {}

/// Only one region may be captured at a time in a process.
static BUSY: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl PageCapture {
    /// Capture for `region` (buffers sized for every page of it).
    pub fn new(region: &RegionBuf) -> PageCapture {
        install();
        let page = page_size();
        let n = region.map_len / page;
        let mut before = vec![0u8; region.map_len];
        let mut pages = vec![0usize; n];
        let active = Box::new(Active {
            base: region.ptr as usize,
            map_len: region.map_len,
            page,
            before: before.as_mut_ptr(),
            pages: pages.as_mut_ptr(),
            count: AtomicUsize::new(0),
        });
        // Read-only from now on, between batches too: a batch then pays only for the pages
        // it writes (a fault each, and one `mprotect` each at its end), not for two
        // `mprotect`s of the whole region, which cost in proportion to its size.
        region.protect(libc::PROT_READ);
        PageCapture { before, pages, active }
    }

    /// Run `f` (which writes `region` through plain pointers) with every page it changes
    /// captured; then report each changed `block`-byte block's offset to `dirty`.
    pub fn run<R>(
        &mut self,
        region: &mut RegionBuf,
        block: usize,
        f: impl FnOnce(&mut RegionBuf) -> R,
        mut dirty: impl FnMut(u64),
    ) -> R {
        let _one = BUSY.lock().unwrap_or_else(|e| e.into_inner());
        self.active.count.store(0, Ordering::Relaxed);
        ACTIVE.store(&mut *self.active as *mut Active, Ordering::Release);
        // A panic in `f` must still deactivate the handler and protect the pages again.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(region)));
        ACTIVE.store(std::ptr::null_mut(), Ordering::Release);
        let n = self.active.count.load(Ordering::Acquire);
        let page = self.active.page;
        for &p in &self.pages[..n] {
            // SAFETY: a page of the region's own mapping.
            let r = unsafe { libc::mprotect(region.ptr.add(p * page) as *mut libc::c_void, page, libc::PROT_READ) };
            assert_eq!(r, 0, "mprotect of a region page failed: {}", std::io::Error::last_os_error());
        }
        for i in 0..n {
            let p = self.pages[i];
            let now = &region[..];
            let was = &self.before[i * page..(i + 1) * page];
            let start = p * page;
            for (b, chunk) in was.chunks(block).enumerate() {
                let off = start + b * block;
                if off >= now.len() {
                    break;
                }
                let end = (off + block).min(now.len());
                if now[off..end] != chunk[..end - off] {
                    dirty(off as u64);
                }
            }
        }
        match r {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages of `buf` the kernel has populated (mincore does not fault them in).
    fn resident(buf: &RegionBuf) -> Vec<bool> {
        let pages = buf.map_len / page_size();
        let mut v = vec![0u8; pages];
        // SAFETY: `buf`'s whole mapping, and a vector with one byte per page.
        let r = unsafe { libc::mincore(buf.base() as *mut libc::c_void, buf.map_len, v.as_mut_ptr()) };
        assert_eq!(r, 0, "mincore: {}", std::io::Error::last_os_error());
        v.into_iter().map(|b| b & 1 == 1).collect()
    }

    #[test]
    fn fill_from_copies_everything_and_populates_only_nonzero_pages() {
        let ps = page_size();
        let len = 6 * ps + 100;
        let mut src = vec![0u8; len];
        src[ps + 17] = 1; // page 1
        src[3 * ps] = 2; // page 3, first byte
        src[4 * ps - 1] = 3; // page 3, last byte
        src[6 * ps + 99] = 4; // the partial last page
        let mut buf = RegionBuf::new(len).unwrap();
        buf.fill_from(&src);
        assert_eq!(resident(&buf), vec![false, true, false, true, false, false, true]);
        assert_eq!(&buf[..], &src[..]);
    }
}
