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

use std::ptr::NonNull;

/// The huge-page size the blocks are aligned to.
pub const HUGE_PAGE: usize = 2 << 20;

/// A zeroed, 2 MiB-aligned block of `len` bytes of anonymous memory, unmapped on drop.
pub struct HugeBlock {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: plain owned memory; access goes through the pointer under the owner's rules.
unsafe impl Send for HugeBlock {}
// SAFETY: as above.
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

    #[test]
    fn blocks_are_aligned_zeroed_and_writable() {
        let b = HugeBlock::new(3 << 20).unwrap();
        assert_eq!(b.len(), 4 << 20);
        assert_eq!(b.as_ptr() as usize % HUGE_PAGE, 0);
        // SAFETY: the block's own bytes.
        let s = unsafe { std::slice::from_raw_parts_mut(b.as_ptr(), b.len()) };
        assert!(s.iter().step_by(4096).all(|&x| x == 0));
        s[b.len() - 1] = 7;
        assert_eq!(s[b.len() - 1], 7);
    }
}
