//! Structural modification (Algorithm 2, §4.2, SPEC N4): a full leaf is replaced by one
//! or two new leaves in a *copy* phase and a *link* phase, cooperatively: any thread that
//! meets a leaf in SMO runs the phases that are not done yet, and CAS decides which
//! thread's result counts.
//!
//! **Freezing instead of the sync phase.** The paper lets updates and deletes keep
//! writing the old leaf during the copy, then repairs the lost writes in a *sync* phase,
//! with *sync-on-write* and *sync-on-read* (Algorithms 2, 3, 5), serialised by the
//! payload's `copy_bit` and `sync_bit`. pmkv uses those two payload bits differently:
//! the copy phase sets [`FROZEN`] on each entry it copies with a CAS, and every update
//! and delete is a CAS that expects the bit clear (a delete sets [`DEL`] by CAS before it
//! empties the key word). So each write either lands before its entry is frozen, and the
//! copy carries it, or fails and is redone in the new leaf after the SMO (cooperative SMO).
//! Nothing can be lost, so there is nothing to sync. Readers need no sync-on-read: an
//! old leaf is exactly up to date until `copy_ptr` is set, and after that readers go to
//! the new leaves (see `tree::get_with`). This also settles something the paper leaves
//! open: which entry owns an out-of-line value. With sync, old and new entries can hold
//! different versions at once, so which object to free is unclear. With freezing, the
//! owner is the live entry, and the old leaf's objects pass to the copies.
//! Cost: one CAS per copied entry, on the old block, which is freed right after (the
//! frozen bit needs no flush: it only matters while the tree is open, and recovery
//! clears it).
//!
//! **Durability point** (§4.2): the CAS of the predecessor block's `next` from the old
//! block to the first new one. Before it, the old block is in the PM list; after it, the
//! new ones are, already complete and published. A crash between publishing the new
//! blocks and that CAS leaves them unreachable: the next open sweeps them (`recovery`).

use crate::error::{Error, Result};
use crate::inner;
use crate::layout::*;
use crate::leaf::{self, load, Leaf, LINKED, SLOTS_MASK};
use crate::tree::NbTree;
use crossbeam_epoch::Guard;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A copied entry: key, key word, second key word, payload (unfrozen), value word,
/// fingerprint (taken from the old leaf, not recomputed). Keys are read in place (inline
/// bytes or a slice of the key object), not copied to the heap.
type Rec<'a> = (leaf::KeyBytes<'a>, u64, u64, u64, u64, u8);

impl NbTree {
    /// Complete the SMO of `leaf` (whose SMO bit is set): the copy phase if no thread has
    /// published its copy yet, then the link phase if it is not done.
    pub(crate) fn smo(&self, leaf: &Leaf, g: &Guard) -> Result<()> {
        if leaf.copy.load(Ordering::Acquire).is_null() {
            self.copy_phase(leaf, g)?;
        }
        if leaf.flag.load(Ordering::Acquire) & LINKED == 0 {
            self.link_phase(leaf, g)?;
        }
        Ok(())
    }

    /// Algorithm 2 lines 1-9: freeze and copy the live entries into new leaves (two if
    /// more than half the capacity is live, split at the median key), then install them
    /// with a CAS of `copy_ptr`. A thread that loses the CAS frees its copy.
    fn copy_phase(&self, leaf: &Leaf, g: &Guard) -> Result<()> {
        let _ = g;
        // The SMO bit is set: no insert can commit any more, so the bitmap is final.
        let mut bits = leaf.bits(&self.pool) & SLOTS_MASK;
        let mut recs: Vec<Rec> = Vec::with_capacity(bits.count_ones() as usize);
        while bits != 0 {
            let slot = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let po = leaf.payload_at(slot);
            loop {
                let p = load(&self.pool, po);
                if p & DEL != 0 {
                    break;
                }
                // SAFETY: entry words are changed only by CAS once committed.
                if p & FROZEN == 0 && unsafe { self.pool.cas_u64(po, p, p | FROZEN) }.is_err() {
                    continue;
                }
                crate::chaos::point();
                let kw = load(&self.pool, leaf.key_at(slot));
                if kw == self.fmt.empty {
                    break;
                }
                let mut p = p & !FROZEN;
                // SAFETY: the leaf is pinned by the caller; its key objects stay allocated.
                let k = unsafe { leaf::entry_key(&self.pool, leaf.key_at(slot), kw, p, false) }
                    .ok_or_else(|| Error::Corrupt(format!("block {:#x} slot {slot}: bad key", leaf.block)))?;
                // Read after the freeze: no update can change the value word any more
                // without seeing the frozen bit and redoing itself in the new leaf (the
                // payload that selects the slot is frozen).
                let w = load(&self.pool, leaf.key_at(slot) + value_word_off(p));
                let mut kw2 = load(&self.pool, leaf.key_at(slot) + E_KEY2);
                if self.fmt.checks {
                    // The copy is at rest, its value in slot A: an update the freeze
                    // interrupted is redone in the new leaf, and its BUSY bit goes.
                    if two_slots(p) {
                        kw2 = 0;
                    }
                    p = entry_check(kw, kw2, p & !SLOT_B, w);
                }
                recs.push((k, kw, kw2, p, w, leaf.fp(&self.pool, slot)));
                break;
            }
        }
        if !leaf.copy.load(Ordering::Acquire).is_null() {
            return Ok(());
        }
        let next_word = load(&self.pool, leaf.block + BLK_NEXT);
        let next_pm = next_of(next_word, leaf.block, self.fmt.checks).ok_or_else(|| {
            Error::Corrupt(format!("block {:#x}: the next word {next_word:#x} fails its check", leaf.block))
        })?;
        let next = leaf.next.load(Ordering::Acquire);
        let (left, right) = if recs.len() > (self.fmt.cap() - self.first_slot()) / 2 {
            let mid = recs.len() / 2;
            // Only the split needs an order (a block's entries are unsorted, §3.1): the
            // median key at `mid`, the smaller ones before it, the larger after it. It is
            // selected over small (first 16 key bytes as two words, index) records
            // instead of the entries themselves: the words decide nearly every comparison
            // in registers (`KeyBytes::cmp_key`), and a swap moves 24 bytes, not 64.
            let mut order: Vec<((u64, u64), usize)> = recs.iter().enumerate().map(|(i, r)| (r.0.words(), i)).collect();
            order.select_nth_unstable_by(mid, |a, b| recs[a.1].0.cmp_key(a.0, &recs[b.1].0, b.0));
            let split: Arc<[u8]> = Arc::from(recs[order[mid].1].0.as_slice());
            let right = self.build_leaf(order[mid..].iter().map(|o| &recs[o.1]), split.clone(), None, next_pm, next)?;
            // SAFETY: `right` was just returned by `build_leaf`, a live slot of the arena that no
            // other thread can reach before the `copy` CAS below.
            let rblock = unsafe { &*right }.block;
            let left = match self.build_leaf(
                order[..mid].iter().map(|o| &recs[o.1]),
                leaf.low.clone(),
                Some(split),
                rblock,
                right,
            ) {
                Ok(l) => l,
                Err(e) => {
                    self.discard(right);
                    return Err(e);
                }
            };
            // SAFETY: `left` was just returned by `build_leaf`: alive, and unpublished until the
            // `copy` CAS below, so no other thread reads `sibling` yet.
            unsafe { &*left }.sibling.store(right, Ordering::Release);
            (left, Some(right))
        } else {
            (self.build_leaf(recs.iter(), leaf.low.clone(), None, next_pm, next)?, None)
        };
        crate::chaos::point();
        if leaf.copy.compare_exchange(std::ptr::null_mut(), left, Ordering::AcqRel, Ordering::Acquire).is_err() {
            // Another thread's copy won (cooperative SMO): ours was never visible.
            self.discard(left);
            if let Some(r) = right {
                self.discard(r);
            }
        }
        Ok(())
    }

    /// A new leaf holding `recs` (in any order): its block written, persisted and published,
    /// its metadata built. Not linked anywhere yet.
    ///
    /// The block's image is built in DRAM and copied. Streaming (non-temporal) stores, to
    /// spare the read for ownership of the new block's lines, were measured twice and were
    /// no faster (docs/design/nbtree.md, "Protocols").
    fn build_leaf<'r, 'a: 'r>(
        &self,
        recs: impl ExactSizeIterator<Item = &'r Rec<'a>>,
        low: Arc<[u8]>,
        split: Option<Arc<[u8]>>,
        next_pm: u64,
        next: *mut Leaf,
    ) -> Result<*mut Leaf> {
        let first = self.first_slot();
        let n = recs.len();
        debug_assert!(first + n <= self.fmt.cap());
        let mut img = [0u64; BLOCK_SIZE / 8];
        // Format 4: every slot the records do not fill holds the empty key word. The block
        // is written and flushed whole anyway: no store or line more.
        self.fmt.mark_empty(&mut img, first + n);
        let mut fps = [0u8; CAP];
        for (i, (_, kw, kw2, p, w, fp)) in recs.enumerate() {
            let at = ((BLK_ENTRIES + (first + i) as u64 * ENTRY) / 8) as usize;
            img[at + (E_PAYLOAD / 8) as usize] = p.to_le();
            img[at + (E_VALUE / 8) as usize] = w.to_le();
            img[at + (E_KEY2 / 8) as usize] = kw2.to_le();
            img[at] = kw.to_le();
            fps[first + i] = *fp;
        }
        let mut l = Leaf::new(0, low);
        l.split = split;
        l.init_meta(&fps, first + n, if n == 0 { 0 } else { (u64::MAX >> (64 - n)) << first });
        if self.sl {
            for (o, v) in l.meta_words() {
                img[(o / 8) as usize] = v.to_le();
            }
        }
        let block = self.alloc.alloc(BLOCK, BLOCK_SIZE)?;
        // Its `next` word's check covers the block's own offset, known only now.
        img[(BLK_NEXT / 8) as usize] = next_word(next_pm, block, self.fmt.checks).to_le();
        if self.fmt.checks {
            img[(BLK_TRAILER / 8) as usize] = trailer_word(block).to_le();
        }
        // SAFETY: a reserved block nobody else can reach: plain writes inside it.
        unsafe { std::ptr::copy_nonoverlapping(img.as_ptr(), self.pool.at::<u64>(block), BLOCK_SIZE / 8) };
        self.pool.flush_off(block, BLOCK_SIZE);
        self.pool.fence();
        if let Err(e) = self.alloc.try_publish(block) {
            self.alloc.unreserve(block);
            return Err(e.into());
        }
        l.block = block;
        l.sl = self.sl;
        l.next.store(next, Ordering::Relaxed);
        Ok(self.arena.alloc(l))
    }

    /// Free a new leaf that lost the copy race (never reachable by another thread).
    fn discard(&self, l: *mut Leaf) {
        // SAFETY: built by this thread and never published.
        let block = unsafe { &*l }.block;
        // SAFETY: as above: freed once, never used again.
        unsafe { self.arena.free(l) };
        self.alloc.free(block);
    }

    /// The leaf whose `next` is `leaf` in the live list, or `None` if `leaf` is no longer
    /// in it (another thread linked its replacement). The walk starts at the leaf the
    /// inner nodes give for the keys just below `leaf`'s fence.
    fn find_pred<'g>(&self, leaf: &Leaf, g: &'g Guard) -> Option<&'g Leaf> {
        let target = leaf as *const Leaf as *mut Leaf;
        let mut p: &Leaf = if leaf.low.is_empty() {
            // SAFETY: the sentinel lives as long as the tree.
            unsafe { &*self.head }
        } else {
            self.find_leaf(&leaf.low, false, g)
        };
        loop {
            let n = p.next.load(Ordering::Acquire);
            if n == target {
                return Some(p);
            }
            if n.is_null() {
                return None;
            }
            // SAFETY: a leaf reachable from one we hold while pinned: a stale `next`
            // names a leaf retired after the one holding it, so still alive (docs/design/nbtree.md, "Protocols").
            let nl = unsafe { &*n };
            if *nl.low >= *leaf.low {
                return None;
            }
            p = nl;
        }
    }

    /// Algorithm 2 lines 25-36: link the new leaves into both lists in place of `leaf`
    /// (helping the predecessor's own SMO first if it has one, lines 29-31, so that its
    /// copy does not keep a stale `next`), then replace `leaf` in the inner nodes and set
    /// `flag.link` under the inner-node mutex (the paper's HTM transaction).
    fn link_phase(&self, leaf: &Leaf, g: &Guard) -> Result<()> {
        // SAFETY: `copy` is set (the copy phase ran) and lives while `leaf` is pinned.
        let left = unsafe { &*leaf.copy.load(Ordering::Acquire) };
        let me = leaf as *const Leaf as *mut Leaf;
        while let Some(pred) = self.find_pred(leaf, g) {
            // PM first: the durability point.
            let (from, to) = (
                next_word(leaf.block, pred.block, self.fmt.checks),
                next_word(left.block, pred.block, self.fmt.checks),
            );
            // SAFETY: the `next` word of a published block, changed only by CAS.
            if unsafe { self.pool.cas_u64(pred.block + BLK_NEXT, from, to) }.is_ok() {
                self.pool.flush_off(pred.block + BLK_NEXT, 8);
                self.pool.fence();
            }
            crate::chaos::point();
            let _ =
                pred.next.compare_exchange(me, left as *const Leaf as *mut Leaf, Ordering::AcqRel, Ordering::Acquire);
            pred.touch();
            if !std::ptr::eq(pred, self.head) && pred.in_smo(&self.pool) {
                self.smo(pred, g)?;
                continue;
            }
            break;
        }
        crate::chaos::point();
        let _l = self.inner_lock.lock();
        if leaf.flag.load(Ordering::Acquire) & LINKED != 0 {
            return Ok(());
        }
        let right = leaf::sibling_of(left);
        let root = self.root.load(Ordering::Acquire);
        // SAFETY: we hold the writers' mutex; nodes reachable from the root are alive.
        let (new_root, replaced) = unsafe { inner::replace(root, me, &leaf.low, left, right, &self.nodes) }
            .ok_or_else(|| Error::Corrupt(format!("leaf of block {:#x} is not in the inner nodes", leaf.block)))?;
        self.root.store(new_root, Ordering::Release);
        leaf.flag.store(LINKED, Ordering::Release);
        for n in replaced {
            let nodes = self.nodes.clone();
            // SAFETY: unreachable from the new root; freed after every pinned reader; the
            // slab outlives the closure (it holds a reference).
            unsafe { g.defer_unchecked(move || nodes.free(n)) };
        }
        let arena = self.arena.clone();
        // SAFETY: unreachable from the inner nodes and both lists (its predecessor points
        // past it); readers that still hold it are pinned, and it is freed after them; the
        // arena outlives the closure (it holds a reference).
        unsafe { g.defer_unchecked(move || arena.free(me)) };
        self.retire(leaf.block, g);
        Ok(())
    }
}
