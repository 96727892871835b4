//! EPRecycle (HART Algorithm 6): unlinking an empty chunk from its persistent singly
//! linked list with the `PCurrent` / `PPrev` micro-log, and every recovery case.
//!
//! ```text
//! Algorithm 6 EPRecycle(mem_chunk)
//!  1: if mem_chunk has a used object then      \ the caller (mod.rs): the chunk's DRAM
//!  2:   return                                  / reservation word went 0 -> LOCKED
//!  3: rlog = GetMicroLog(RECYCLE)               the list's own log (root.rs)
//!  4: rlog.PCurrent = &mem_chunk; persistent()
//!  5: if rlog.PCurrent == PHead then
//!  6:   PHead = mem_chunk.PNext; persistent()
//!  7: else
//!  8:   pre = GetPrev(mem_chunk)                the DRAM mirror of the list: O(1)
//!  9:   rlog.PPrev = &pre; persistent()
//! 10:   pre.PNext = mem_chunk.PNext; persistent()
//! 11: pfree(mem_chunk)                          DRAM only, after line 12 (see below)
//! 12: LogReclaim(rlog)                          PCurrent = 0; persistent(); PPrev = 0; persistent()
//! ```
//!
//! **pfree.** pmkv has no persistent free-space list: free space is, by definition, every
//! byte of the heap that no chunk list reaches (`space.rs`). A chunk that line 6 or 10
//! unlinked is therefore already free in PM; `pfree` only returns it to the DRAM free-space
//! map, and it does so *after* the log is reclaimed, because recovery reads
//! `PCurrent.PNext` and must find the chunk untouched until then.
//!
//! **What the log buys in pmkv.** In the paper the log ties the unlink to `pfree`, a
//! persistent operation of the underlying allocator. With implicit free space the unlink
//! store (line 6 or 10) is by itself the single atomic moment the chunk stops being
//! allocated, so a crash anywhere in EPRecycle leaves a consistent list even without the
//! log. The log is kept because it is the paper's protocol (SPEC P7) and still earns its
//! keep: recovery completes every recycle that had begun (an emptied chunk is unlinked
//! rather than left on the list) and cross-checks `PCurrent`/`PPrev` against the list,
//! turning a damaged list into an error at open. It costs 2 extra fences per recycle at the
//! head and 4 in the middle, once per emptied chunk.
//!
//! **LogReclaim** clears `PCurrent` first and `PPrev` second, each persisted, so that the
//! log never holds a stale `PPrev` next to a fresh `PCurrent`: the next recycle persists
//! `PCurrent` (line 4) only after the previous reclaim has made `PPrev` durably 0.
//!
//! **Recovery** (`recover`) — the paper's cases, plus the two it leaves out:
//!
//! | log state | where the crash was | action |
//! |---|---|---|
//! | both 0 | no recycle in flight | nothing |
//! | `PCurrent` 0, `PPrev` set | inside LogReclaim | clear `PPrev` |
//! | both set | lines 9–12 | resume from line 10 (idempotent) |
//! | only `PCurrent`, `PCurrent == PHead` | lines 4–6 (head case) | resume from line 6 |
//! | only `PCurrent`, `PCurrent.PNext == PHead` | lines 6–12 (head case) | resume from line 11 |
//! | only `PCurrent`, chunk linked after the head | lines 4–9 (middle case, not in the paper) | resume from line 8 |
//!
//! The last row is missing from the paper: between line 4 and line 9 of the middle case
//! neither `PPrev` is set nor does `PCurrent` relate to `PHead`. The chunk is still fully
//! linked; recovery finds its predecessor by walking the list and finishes the unlink.
//! Each of these rows is reached by the crash tests (`tests/epalloc_crash.rs`).

use super::check::Format;
use super::chunk::{next, set_next};
use super::root::Entry;
use crate::error::{PoolError, Result};
use crate::pool::Pool;

/// The recovery case that `recover` applied to one list's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RecycleCase {
    /// The log was empty.
    Clean,
    /// `PCurrent` was already cleared: the crash came inside LogReclaim.
    ReclaimPPrev,
    /// Both pointers valid: resumed from line 10.
    FromLine10,
    /// Only `PCurrent`, and it was `PHead`: resumed from line 6.
    FromLine6,
    /// Only `PCurrent`, and `PCurrent.PNext == PHead`: resumed from line 11.
    FromLine11,
    /// Only `PCurrent`, still linked after the head (case missing from the paper):
    /// resumed from line 8.
    FromLine8,
}

/// Unlink `chunk` from the list of directory entry `e` (Algorithm 6, lines 3–10 and 12).
/// `prev` is the chunk before it (0 if it is the head). The caller holds the list's lock,
/// has made sure nothing in the chunk is used or reserved, and returns the chunk's space
/// to the free-space map after this returns (line 11).
///
/// The chunk's `PNext` is read (and, format 3, verified) before anything is written: a
/// damaged link is an error and the list is left as it was, never spliced with garbage.
pub(crate) fn unlink(pool: &Pool, fmt: Format, e: Entry, chunk: u64, prev: u64) -> Result<()> {
    let after = next(pool, fmt, chunk)?;
    e.set_pcurrent(pool, fmt, chunk); // line 4
    if prev == 0 {
        // Lines 5-6: the chunk is PHead.
        debug_assert_eq!(e.head(pool, fmt).ok(), Some(chunk), "DRAM list and PM list disagree about the head");
        e.set_head(pool, fmt, after);
    } else {
        debug_assert_eq!(
            next(pool, fmt, prev).ok(),
            Some(chunk),
            "DRAM list and PM list disagree about the predecessor"
        );
        e.set_pprev(pool, fmt, prev); // line 9
        set_next(pool, fmt, prev, after); // line 10
    }
    reclaim(pool, fmt, e, prev != 0); // line 12
    Ok(())
}

/// LogReclaim: `PCurrent` first, then `PPrev` (see the module doc).
fn reclaim(pool: &Pool, fmt: Format, e: Entry, had_prev: bool) {
    e.set_pcurrent(pool, fmt, 0);
    if had_prev {
        e.set_pprev(pool, fmt, 0);
    }
}

/// Finish an interrupted recycle of the list of directory entry `e`, before the list is
/// walked at open. `valid` says whether an offset can be a chunk of this list (aligned,
/// inside the heap); `max_steps` bounds list walks so that a corrupt, cyclic list is an
/// error rather than a hang.
/// In format 3 every log and link word read here must pass its check (`Corrupt` names it).
pub(crate) fn recover(
    pool: &Pool,
    fmt: Format,
    e: Entry,
    valid: &dyn Fn(u64) -> bool,
    max_steps: u64,
) -> Result<RecycleCase> {
    let bad = |what: String| Err(PoolError::CorruptAllocator(format!("recycle log of list at {:#x}: {what}", e.0)));
    let cur = e.pcurrent(pool, fmt)?;
    let prev = e.pprev(pool, fmt)?;
    if cur == 0 && prev == 0 {
        return Ok(RecycleCase::Clean);
    }
    // Every other case repairs the list in place. But a recycle runs to completion inside
    // one `free`, and a pool is marked clean only after an orderly close (never after a
    // panic or a poisoned engine), so a log left in a cleanly closed pool is damage, not
    // an interrupted recycle: "finishing" it would unlink a chunk of live objects. Refuse,
    // in read-only and read-write opens alike, and change nothing.
    if pool.was_clean() {
        return bad(format!(
            "PCurrent {cur:#x} / PPrev {prev:#x} left in a cleanly closed pool (damage, not an interrupted recycle)"
        ));
    }
    pool.check_writable()?;
    if cur == 0 {
        e.set_pprev(pool, fmt, 0);
        return Ok(RecycleCase::ReclaimPPrev);
    }
    if !valid(cur) {
        return bad(format!("PCurrent {cur:#x} is not a chunk offset"));
    }
    let cur_next = next(pool, fmt, cur)?;
    if cur_next != 0 && !valid(cur_next) {
        return bad(format!("PCurrent.PNext {cur_next:#x} is not a chunk offset"));
    }
    if prev != 0 {
        if !valid(prev) {
            return bad(format!("PPrev {prev:#x} is not a chunk offset"));
        }
        // Resume from line 10; it is idempotent because PCurrent's chunk is untouched
        // until the log is reclaimed.
        let prev_next = next(pool, fmt, prev)?;
        if prev_next == cur {
            set_next(pool, fmt, prev, cur_next);
        } else if prev_next != cur_next {
            return bad(format!("PPrev.PNext {prev_next:#x} is neither PCurrent nor PCurrent.PNext"));
        }
        reclaim(pool, fmt, e, true);
        return Ok(RecycleCase::FromLine10);
    }
    let head = e.head(pool, fmt)?;
    if head == cur {
        e.set_head(pool, fmt, cur_next); // resume from line 6
        reclaim(pool, fmt, e, false);
        return Ok(RecycleCase::FromLine6);
    }
    if cur_next == head {
        reclaim(pool, fmt, e, false); // line 6 is done: resume from line 11
        return Ok(RecycleCase::FromLine11);
    }
    // Middle case interrupted before line 9: find the predecessor (line 8) and go on.
    let mut p = head;
    let mut steps = 0;
    while p != 0 {
        if !valid(p) {
            return bad(format!("list reaches {p:#x}, not a chunk offset"));
        }
        let n = next(pool, fmt, p)?;
        if n == cur {
            e.set_pprev(pool, fmt, p); // line 9
            set_next(pool, fmt, p, cur_next); // line 10
            reclaim(pool, fmt, e, true);
            return Ok(RecycleCase::FromLine8);
        }
        p = n;
        steps += 1;
        if steps > max_steps {
            return bad("the list does not end (cycle)".into());
        }
    }
    bad(format!("PCurrent {cur:#x} is neither the head, the head's predecessor, nor on the list"))
}
