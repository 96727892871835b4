//! The allocator checker (SPEC P7): reads the persistent state afresh and proves it
//! consistent and leak-free, and that the DRAM state agrees with it.
//!
//! What it proves, and how:
//!
//! * **Lists are well formed**: every directory tag decodes, no (type, class) has two
//!   lists, every recycle log is empty (open finished them), every list ends (no cycle),
//!   every item is in bounds and aligned, no chunk is reached twice (so none is on two
//!   lists).
//! * **Every trusted word is valid**: format 3, each chunk header, `PNext`, `PHead`,
//!   `PCurrent`, `PPrev`, tag and the directory count passes its check, used directory
//!   entries come first and their number is the count; format 2, each chunk's next-free
//!   index and full indicator are the ones its bitmap implies. Each extent has its magic,
//!   a page-multiple length and (format 3) the length's check.
//! * **The heap decomposes exactly**: the items the lists reach, the DRAM free-space
//!   blocks and the reserved (unpublished) extents, sorted, never overlap and cover
//!   `[heap_start, heap_top)` without a gap. No gap means no leaked byte; and since bits
//!   exist only inside chunks, and every chunk-holding byte is reached by a list, **every
//!   used slot is reachable from its list** — there is nowhere else a used slot could be.
//! * **DRAM agrees with PM**: each list's DRAM mirror is its persistent list in the same
//!   order; each chunk's reservation word contains its used bits; the offset index finds
//!   every chunk and extent; every live DRAM item is on a list or a reserved extent.
//!
//! The check needs a quiescent allocator (no concurrent alloc, publish or free).

use super::check::Format;
use super::chunk::{self, HeaderWord, IND_FULL};
use super::extent::{self, EXT_HEAD, EXT_RESERVED, EXT_USED, PAGE};
use super::index::LOCKED;
use super::recovery::item_ok;
use super::root::{decode_tag, Root, ROOT_SIZE};
use super::size_class::{EXTENT_CLASS, GEOMETRY, SLOTS};
use super::{EpAlloc, EPALLOC_ROOT};
use crate::error::{PoolError, Result};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

/// What the checker counted. `Display` prints it for `pmkv check`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    pub root_at: u64,
    pub heap_start: u64,
    pub heap_top: u64,
    /// Chunk lists (directory entries in use), including extent lists.
    pub lists: usize,
    pub chunks: u64,
    pub slots: u64,
    pub used_slots: u64,
    /// Slots reserved in DRAM but not published.
    pub reserved_slots: u64,
    pub free_slots: u64,
    /// Bytes of used slots.
    pub used_slot_bytes: u64,
    pub chunk_bytes: u64,
    /// Published extents and their bytes (headers included).
    pub extents: u64,
    pub extent_bytes: u64,
    /// Reserved, unpublished extents.
    pub reserved_extents: u64,
    pub free_space_bytes: u64,
    pub free_blocks: usize,
    /// Problems found; empty when the check passes.
    pub problems: Vec<String>,
}

impl std::fmt::Display for CheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "allocator root   {:#x}", self.root_at)?;
        writeln!(
            f,
            "heap             {:#x}..{:#x} ({} bytes)",
            self.heap_start,
            self.heap_top,
            self.heap_top - self.heap_start
        )?;
        writeln!(f, "lists            {}", self.lists)?;
        writeln!(
            f,
            "chunks           {} ({} bytes): {} slots, {} used ({} bytes), {} reserved, {} free",
            self.chunks,
            self.chunk_bytes,
            self.slots,
            self.used_slots,
            self.used_slot_bytes,
            self.reserved_slots,
            self.free_slots
        )?;
        writeln!(
            f,
            "extents          {} ({} bytes), {} reserved",
            self.extents, self.extent_bytes, self.reserved_extents
        )?;
        writeln!(f, "free space       {} bytes in {} blocks", self.free_space_bytes, self.free_blocks)?;
        if self.problems.is_empty() {
            write!(f, "result           OK: lists acyclic, headers consistent, no overlap, no leak")
        } else {
            writeln!(f, "result           {} problem(s):", self.problems.len())?;
            for p in &self.problems {
                writeln!(f, "  - {p}")?;
            }
            Ok(())
        }
    }
}

/// Check `ep` and return the report; an error if any problem was found (its message
/// names the first problem and the count).
pub(crate) fn check(ep: &EpAlloc) -> Result<CheckReport> {
    let r = report(ep);
    match r.problems.first() {
        None => Ok(r),
        Some(first) => Err(PoolError::CorruptAllocator(format!(
            "check failed with {} problem(s); first: {first}",
            r.problems.len()
        ))),
    }
}

/// Build the full report, problems included.
pub(crate) fn report(ep: &EpAlloc) -> CheckReport {
    let pool = &*ep.pool;
    let mut r = CheckReport::default();
    let problem = |r: &mut CheckReport, p: String| {
        if r.problems.len() < 100 {
            r.problems.push(p)
        }
    };
    let root = match Root::read(pool, pool.root(EPALLOC_ROOT)) {
        Ok(root) => root,
        Err(e) => {
            problem(&mut r, e.to_string());
            return r;
        }
    };
    if root.at != ep.root.at {
        problem(&mut r, "pool root 0 no longer names the allocator's root block".into());
    }
    r.root_at = root.at;
    r.heap_start = root.heap_start;
    r.heap_top = pool.heap_top();
    let (hs, top) = (r.heap_start, r.heap_top);
    if top < hs {
        problem(&mut r, format!("heap top {top:#x} is below the allocator heap start {hs:#x}"));
        return r;
    }
    let max_steps = ep.max_items();
    // Every span that must tile the heap: (start, end, what).
    let mut spans: Vec<(u64, u64, String)> = vec![(root.at, root.at + ROOT_SIZE, "root block".into())];
    let mut owner: HashMap<u64, usize> = HashMap::new();
    let mut tags = HashSet::new();
    let mut on_lists: HashSet<u32> = HashSet::new();
    let fmt = root.fmt;
    if fmt != ep.root.fmt {
        problem(&mut r, "the allocator root block changed its format version".into());
    }
    let guards: Vec<_> = ep.lists.iter().map(|l| l.get().map(|l| l.inner.lock())).collect();
    let mut first_unused = None;
    let mut in_use = 0u64;
    for (i, guard) in guards.iter().enumerate() {
        let e = root.entry(i);
        let (ty, class) = match decode_tag(fmt, e, e.raw_tag(pool)) {
            Err(w) => {
                problem(&mut r, format!("directory entry {i}: {w}"));
                continue;
            }
            Ok(None) => {
                first_unused.get_or_insert(i);
                if !e.links_empty(pool, fmt) {
                    problem(&mut r, format!("unused directory entry {i} at {:#x} has a list or a log", e.0));
                }
                if ep.lists[i].get().is_some() {
                    problem(&mut r, format!("directory entry {i} is unused in PM but known in DRAM"));
                }
                continue;
            }
            Ok(Some(x)) => x,
        };
        in_use += 1;
        if let (true, Some(u)) = (fmt.checked(), first_unused) {
            problem(&mut r, format!("directory entry {i} is in use after unused entry {u} (an entry was zeroed)"));
        }
        r.lists += 1;
        let what = format!("list {i} (type {} class {})", ty.0, class_name(class));
        if !tags.insert((ty, class)) {
            problem(&mut r, format!("{what}: a second list for the same type and class"));
        }
        match (e.pcurrent(pool, fmt), e.pprev(pool, fmt)) {
            (Ok(0), Ok(0)) => {}
            (Ok(_), Ok(_)) => problem(&mut r, format!("{what}: recycle log not empty")),
            (Err(w), _) | (_, Err(w)) => problem(&mut r, format!("{what}: {w}")),
        }
        let geo = (class != EXTENT_CLASS).then(|| GEOMETRY[class as usize]);
        let Some(list) = ep.lists[i].get() else {
            problem(&mut r, format!("{what}: not known in DRAM"));
            continue;
        };
        if list.ty != ty || list.class != class {
            problem(&mut r, format!("{what}: DRAM list has another type or class"));
        }
        // Walk PM and the DRAM mirror side by side.
        let mut dram_id = guard.as_ref().map_or(0, |g| g.head);
        let mut off = match e.head(pool, fmt) {
            Ok(h) => h,
            Err(w) => {
                problem(&mut r, format!("{what}: {w}"));
                0
            }
        };
        let mut steps = 0u64;
        while off != 0 {
            steps += 1;
            if steps > max_steps {
                problem(&mut r, format!("{what}: does not end (cycle)"));
                break;
            }
            if !item_ok(pool, fmt, geo, off, hs, top) {
                problem(&mut r, format!("{what}: reaches {off:#x}, not a valid item (bounds, alignment, header)"));
                break;
            }
            if let Some(other) = owner.insert(off, i) {
                problem(&mut r, format!("{what}: chunk {off:#x} is also reached from list {other} (or twice)"));
                break;
            }
            // DRAM agreement.
            let dram = ep.index.item(dram_id);
            match dram {
                Some(it) if it.off.load(Ordering::Acquire) == off => {
                    on_lists.insert(dram_id);
                }
                _ => problem(&mut r, format!("{what}: DRAM mirror differs from PM at {off:#x}")),
            }
            match geo {
                Some(g) => {
                    let h = chunk::header(pool, off);
                    check_header(&mut r, fmt, &what, off, h);
                    let used = h.used_count() as u64;
                    r.chunks += 1;
                    r.slots += SLOTS as u64;
                    r.used_slots += used;
                    r.used_slot_bytes += used * g.slot as u64;
                    r.chunk_bytes += g.chunk_len as u64;
                    if let Some(it) = dram {
                        let res = it.reserved.load(Ordering::Acquire);
                        if res & LOCKED != 0 || res & h.bitmap() != h.bitmap() {
                            problem(&mut r, format!("{what}: chunk {off:#x} has used slots not reserved in DRAM"));
                        }
                        r.reserved_slots += (res & chunk::BITMAP_MASK & !h.bitmap()).count_ones() as u64;
                        r.free_slots += SLOTS as u64 - (res & chunk::BITMAP_MASK).count_ones() as u64;
                    }
                    if ep.index.lookup(g.slot_off(off, 0)).map(|x| x.0) != Some(dram_id) {
                        problem(&mut r, format!("{what}: offset index does not find chunk {off:#x}"));
                    }
                    spans.push((off, off + g.chunk_len as u64, format!("chunk {off:#x} of {what}")));
                }
                None => {
                    let len = extent::read_len(pool, fmt, off, top).unwrap_or(PAGE);
                    r.extents += 1;
                    r.extent_bytes += len;
                    if dram.is_some_and(|it| it.reserved.load(Ordering::Acquire) != EXT_USED) {
                        problem(&mut r, format!("{what}: extent {off:#x} is on the list but not used in DRAM"));
                    }
                    if ep.index.lookup(off + EXT_HEAD).map(|x| x.0) != Some(dram_id) {
                        problem(&mut r, format!("{what}: offset index does not find extent {off:#x}"));
                    }
                    spans.push((off, off + len, format!("extent {off:#x} of {what}")));
                }
            }
            dram_id = dram.map_or(0, |it| it.next.load(Ordering::Acquire));
            off = match chunk::next(pool, fmt, off) {
                Ok(n) => n,
                Err(w) => {
                    problem(&mut r, format!("{what}: {w}"));
                    break;
                }
            };
        }
        if dram_id != 0 {
            problem(&mut r, format!("{what}: DRAM mirror is longer than the PM list"));
        }
    }
    if fmt.checked() {
        // After open the count is exact (open rewrote a count a crash left one behind).
        match root.count(pool) {
            Ok(n) if n == in_use => {}
            Ok(n) => problem(
                &mut r,
                format!(
                    "directory count word at {:#x} says {n} entries are in use, the directory has {in_use}",
                    root.count_at()
                ),
            ),
            Err(w) => problem(&mut r, w.to_string()),
        }
    }
    // Live DRAM items that no list reached must be reserved extents.
    for id in ep.index.live_ids() {
        if on_lists.contains(&id) {
            continue;
        }
        let Some(it) = ep.index.item(id) else { continue };
        let (off, len) = (it.off.load(Ordering::Acquire), it.len.load(Ordering::Acquire));
        if it.reserved.load(Ordering::Acquire) == EXT_RESERVED {
            r.reserved_extents += 1;
            spans.push((off, off + len, format!("reserved extent {off:#x}")));
        } else {
            problem(&mut r, format!("DRAM item for {off:#x} is on no list"));
        }
    }
    drop(guards);
    {
        let sp = ep.space.lock();
        r.free_space_bytes = sp.bytes();
        r.free_blocks = sp.blocks();
        for (s, e) in sp.iter() {
            spans.push((s, e, format!("free block {s:#x}..{e:#x}")));
        }
    }
    spans.sort_by_key(|s| (s.0, s.1));
    let mut at = root.at;
    let mut last = String::from("start of the allocator");
    for (s, e, what) in &spans {
        if *s < at {
            problem(&mut r, format!("{what} overlaps {last}"));
        } else if *s > at {
            problem(&mut r, format!("{} bytes at {at:#x} are neither allocated nor free (leak), after {last}", s - at));
        }
        if *e > top {
            problem(&mut r, format!("{what} ends beyond the heap top {top:#x}"));
        }
        at = at.max(*e);
        last = what.clone();
    }
    if at < top {
        problem(
            &mut r,
            format!("{} bytes at {at:#x} below the heap top are neither allocated nor free (leak)", top - at),
        );
    }
    r
}

fn check_header(r: &mut CheckReport, fmt: Format, what: &str, off: u64, h: HeaderWord) {
    if fmt.checked() {
        if !h.is_valid(fmt, off) {
            r.problems.push(format!("{what}: chunk {off:#x} header word {:#x} fails its check", h.0));
        }
    } else if h.indicator() > IND_FULL {
        r.problems.push(format!("{what}: chunk {off:#x} has a reserved full-indicator value {}", h.indicator()));
    } else if !h.is_consistent() {
        r.problems.push(format!(
            "{what}: chunk {off:#x} header disagrees with its bitmap (next free {}, indicator {})",
            h.0 >> 56 & 0x3f,
            h.indicator()
        ));
    }
}

fn class_name(class: u8) -> String {
    if class == EXTENT_CLASS {
        "extent".into()
    } else {
        GEOMETRY[class as usize].slot.to_string()
    }
}
