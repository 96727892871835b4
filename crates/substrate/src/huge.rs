//! DRAM blocks backed by 2 MiB pages where the kernel gives them: for the engines' DRAM
//! structures (HART's node arena, ...), whose random accesses over hundreds of megabytes
//! are TLB misses with 4 KiB pages — and under virtualisation a TLB miss walks the guest's
//! and the host's page tables.
//!
//! Why not `std::alloc` with a 2 MiB alignment and `madvise` afterwards: `alloc_zeroed`
//! of an over-aligned layout zeroes the block itself, so every page is faulted in as a
//! 4 KiB page before the advice can apply (measured: no huge page at all). Here the block
//! is a fresh anonymous mapping (zero without being touched), aligned by trimming a larger
//! one, and advised `MADV_HUGEPAGE` before its first touch; with transparent huge pages in
//! `madvise` or `always` mode its pages are then 2 MiB ones.

use parking_lot::{Condvar, Mutex};
use std::ptr::NonNull;
use std::sync::Arc;

/// The huge-page size the blocks are aligned to.
pub const HUGE_PAGE: usize = 2 << 20;

/// A zeroed, 2 MiB-aligned block of `len` bytes of anonymous memory, unmapped on drop.
pub struct HugeBlock {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: plain owned memory; access goes through the pointer under the owner's rules.
unsafe impl Send for HugeBlock {}
// SAFETY: `&HugeBlock` gives only the pointer and length (no access to the bytes by
// itself); callers that share the block synchronise their accesses to its bytes.
unsafe impl Sync for HugeBlock {}

impl HugeBlock {
    /// Map `len` bytes (rounded up to 2 MiB); `None` if the system refuses the memory.
    pub fn new(len: usize) -> Option<HugeBlock> {
        let len = len.max(1).checked_next_multiple_of(HUGE_PAGE)?;
        let total = len.checked_add(HUGE_PAGE)?;
        // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                total,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        let start = p as usize;
        let aligned = start.next_multiple_of(HUGE_PAGE);
        // SAFETY: the slack before and after `[aligned, aligned + len)` lies in the
        // mapping just made and is not used.
        unsafe {
            if aligned > start {
                libc::munmap(p, aligned - start);
            }
            let end = aligned + len;
            if start + total > end {
                libc::munmap(end as *mut libc::c_void, start + total - end);
            }
            // Advice only: without transparent huge pages it changes nothing.
            libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
        Some(HugeBlock { ptr: NonNull::new(aligned as *mut u8)?, len })
    }

    /// The first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Bytes in the block.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never: a block has at least one huge page.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Fault every page of the block in now (zeroed, as huge pages where the kernel gives
    /// them), so that its first use takes no page fault. `MADV_POPULATE_WRITE` (Linux ≥
    /// 5.14) does it in one call; where that is refused, one write per 4 KiB page does.
    pub fn populate(&self) {
        // SAFETY: advice on this block's own mapping; populating writes no contents.
        let r = unsafe { libc::madvise(self.ptr.as_ptr().cast(), self.len, libc::MADV_POPULATE_WRITE) };
        if r != 0 {
            for at in (0..self.len).step_by(4096) {
                // SAFETY: inside the block, which this handle owns; the byte is zero
                // already (fresh anonymous memory), so writing zero changes nothing.
                unsafe { self.ptr.as_ptr().add(at).write_volatile(0) };
            }
        }
    }
}

/// Zeroed 2 MiB blocks made ahead of need, their pages already faulted in, by a helper
/// thread: for a DRAM arena that grows a block at a time while an engine inserts.
///
/// Why: the first touch of a fresh 2 MiB page makes the kernel find (perhaps compact
/// memory for) and zero a huge page, and under virtualisation the host back it too:
/// measured here at ~5 ms per block, 70–100 ns of every insert into a 16M-key HART (whose
/// arena grows by ~250 blocks), paid on the inserting thread (docs/design/hart.md,
/// "Tried and measured"; figures in docs/results/hart-growth.md). The pool does the same for PM (`PoolOptions::prefault`); the node
/// arena's growth cannot be sized up front, so its blocks are made one step ahead
/// instead. The work is not saved, it moves to a helper thread: the CPU time an insert
/// no longer takes is spent there.
///
/// The helper starts at the second [`HugeSupply::take`] (a structure that fits in one
/// block, as most of the test suite's do, never starts one) and then keeps `ahead` blocks
/// ready; it stops and is joined when the supply drops. If no thread can be started or
/// no block was made ahead, `take` maps one itself, as without a supply.
pub struct HugeSupply {
    shared: Arc<Shared>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
}

struct Shared {
    state: Mutex<SupplyState>,
    wake: Condvar,
    ahead: usize,
}

struct SupplyState {
    ready: Vec<HugeBlock>,
    stop: bool,
    /// Blocks handed out that were made ahead, and made on the spot (their sum: the takes
    /// so far; the helper starts at the second).
    from_ahead: u64,
    on_the_spot: u64,
}

impl HugeSupply {
    /// A supply that keeps `ahead` blocks ready from the second take on.
    pub fn new(ahead: usize) -> HugeSupply {
        HugeSupply {
            shared: Arc::new(Shared {
                state: Mutex::new(SupplyState { ready: Vec::new(), stop: false, from_ahead: 0, on_the_spot: 0 }),
                wake: Condvar::new(),
                ahead,
            }),
            worker: Mutex::new(None),
        }
    }

    /// A zeroed 2 MiB block: one made ahead if one is ready, else one mapped now (its
    /// pages then fault in on first touch); `None` if the system refuses the memory.
    pub fn take(&self) -> Option<HugeBlock> {
        let mut st = self.shared.state.lock();
        let b = st.ready.pop();
        if b.is_some() {
            st.from_ahead += 1;
        } else {
            st.on_the_spot += 1;
        }
        let takes = st.from_ahead + st.on_the_spot;
        drop(st);
        let (start, running) = (takes == 2, takes > 2);
        if start {
            let shared = Arc::clone(&self.shared);
            // A helper that cannot start leaves every block to be mapped on the spot.
            let h = std::thread::Builder::new().name("pmkv-prefault".into()).spawn(move || shared.make_ahead());
            *self.worker.lock() = h.ok();
        } else if running {
            self.shared.wake.notify_one();
        }
        b.or_else(|| HugeBlock::new(HUGE_PAGE))
    }

    /// Bytes of the blocks ready and not taken (memory the supply holds).
    pub fn spare_bytes(&self) -> usize {
        self.shared.state.lock().ready.len() * HUGE_PAGE
    }

    /// Blocks handed out so far that were made ahead, and that were mapped on the spot.
    pub fn taken(&self) -> (u64, u64) {
        let st = self.shared.state.lock();
        (st.from_ahead, st.on_the_spot)
    }
}

impl Shared {
    /// The helper: keep `ahead` blocks ready until told to stop.
    fn make_ahead(&self) {
        let mut st = self.state.lock();
        loop {
            while !st.stop && st.ready.len() >= self.ahead {
                self.wake.wait(&mut st);
            }
            if st.stop {
                return;
            }
            drop(st);
            let b = HugeBlock::new(HUGE_PAGE);
            if let Some(b) = &b {
                b.populate();
            }
            st = self.state.lock();
            match b {
                Some(b) => st.ready.push(b),
                // Out of memory: wait for the next take instead of retrying in a loop.
                None if !st.stop => self.wake.wait(&mut st),
                None => {}
            }
        }
    }
}

impl Drop for HugeSupply {
    fn drop(&mut self) {
        self.shared.state.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(h) = self.worker.get_mut().take() {
            // The helper only maps and touches memory: it cannot panic short of an abort.
            let _ = h.join();
        }
    }
}

/// Advise the 2 MiB pages wholly inside `buf` to be huge pages: for a large buffer about
/// to be written for the first time (say, one `Vec::with_capacity`), so that its first
/// touch faults and zeroes a few 2 MiB pages instead of thousands of 4 KiB ones. Advice
/// only: memory already touched keeps its pages, and without transparent huge pages
/// nothing changes.
pub fn advise<T>(buf: &mut [std::mem::MaybeUninit<T>]) {
    let start = (buf.as_mut_ptr() as usize).next_multiple_of(HUGE_PAGE);
    let end = (buf.as_mut_ptr() as usize + std::mem::size_of_val(buf)) / HUGE_PAGE * HUGE_PAGE;
    if end > start {
        // SAFETY: advice on pages of memory `buf` borrows mutably; it changes no contents.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

impl Drop for HugeBlock {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, released once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether every 4 KiB page of `b` is resident (`mincore` faults nothing in).
    fn resident(b: &HugeBlock) -> bool {
        let mut v = vec![0u8; b.len() / 4096];
        // SAFETY: the block's own mapping, one status byte per page in `v`.
        assert_eq!(unsafe { libc::mincore(b.as_ptr().cast(), b.len(), v.as_mut_ptr()) }, 0);
        v.iter().all(|&x| x & 1 == 1)
    }

    #[test]
    fn populate_faults_every_page_in() {
        let b = HugeBlock::new(HUGE_PAGE).unwrap();
        assert!(!resident(&b), "a fresh mapping is not resident");
        b.populate();
        assert!(resident(&b));
        // SAFETY: `b` maps `b.len()` readable bytes for its life, and nothing writes them.
        assert!(unsafe { std::slice::from_raw_parts(b.as_ptr(), b.len()) }.iter().all(|&x| x == 0));
    }

    #[test]
    fn a_supply_makes_blocks_ahead_from_the_second_take() {
        let s = HugeSupply::new(2);
        let first = s.take().unwrap();
        assert_eq!(s.taken(), (0, 1));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(s.spare_bytes(), 0, "nothing is made ahead for a structure of one block");
        let _second = s.take().unwrap();
        assert_eq!(s.taken(), (0, 2));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while s.spare_bytes() < 2 * HUGE_PAGE {
            assert!(std::time::Instant::now() < deadline, "the helper made no block in 60 s");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let third = s.take().unwrap();
        assert_eq!(s.taken(), (1, 2));
        assert!(resident(&third), "a block made ahead is faulted in");
        assert_eq!(third.as_ptr() as usize % HUGE_PAGE, 0);
        assert_ne!(first.as_ptr(), third.as_ptr());
        // Dropping the supply joins the helper and unmaps the spare block; the blocks
        // taken outlive it.
        drop(s);
        // SAFETY: `third` is a live block of this thread (taken blocks outlive the supply),
        // its first byte mapped and writable, and no reference to it exists.
        unsafe { third.as_ptr().write(1) };
        // SAFETY: `first` is a distinct live block mapping `first.len()` readable bytes that
        // nothing writes while the slice exists.
        assert!(unsafe { std::slice::from_raw_parts(first.as_ptr(), first.len()) }.iter().all(|&x| x == 0));
    }

    #[test]
    fn blocks_are_aligned_zeroed_and_writable() {
        let b = HugeBlock::new(3 << 20).unwrap();
        assert_eq!(b.len(), 4 << 20);
        assert_eq!(b.as_ptr() as usize % HUGE_PAGE, 0);
        // SAFETY: `b` maps `b.len()` writable bytes for its life, and this slice is the only
        // access to them.
        let s = unsafe { std::slice::from_raw_parts_mut(b.as_ptr(), b.len()) };
        assert!(s.iter().step_by(4096).all(|&x| x == 0));
        s[b.len() - 1] = 7;
        assert_eq!(s[b.len() - 1], 7);
    }
}
