//! Space accounting of the allocator by object type and size class (SPEC H9): what
//! `pmkv check --stats` prints and engines report as PM use.

use super::*;

/// Space accounting of one list (SPEC H9).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassStats {
    pub ty: TypeId,
    /// Slot size; `None` for the type's extents.
    pub class_size: Option<usize>,
    /// Chunks (or extents) on the list.
    pub chunks: u64,
    /// Slots in those chunks (extents: one each).
    pub slots: u64,
    /// Used slots (published objects).
    pub used: u64,
    /// Bytes of used slots (extents: their capacity).
    pub used_bytes: u64,
    /// Bytes of free slots in those chunks.
    pub free_slot_bytes: u64,
    /// Allocator metadata inside the chunks: chunk heads, extent headers.
    pub overhead_bytes: u64,
    /// All bytes of the list's chunks: used + free slots + overhead.
    pub chunk_bytes: u64,
}

/// Space accounting of the whole allocator.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllocStats {
    pub lists: Vec<ClassStats>,
    pub used_bytes: u64,
    pub free_slot_bytes: u64,
    pub overhead_bytes: u64,
    pub chunk_bytes: u64,
    /// Heap bytes not in any chunk or extent (includes reserved, unpublished extents).
    pub free_space_bytes: u64,
    /// The root block (directory and recycle logs).
    pub root_bytes: u64,
    /// The allocator's whole heap, root block included.
    pub heap_bytes: u64,
}

impl AllocStats {
    /// (used bytes, chunk bytes) of one type.
    pub fn of_type(&self, ty: TypeId) -> (u64, u64) {
        self.lists.iter().filter(|l| l.ty == ty).fold((0, 0), |a, l| (a.0 + l.used_bytes, a.1 + l.chunk_bytes))
    }
}

impl std::fmt::Display for AllocStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{:>6} {:>7} {:>7} {:>8} {:>12} {:>12} {:>10}",
            "type", "class", "chunks", "used", "used B", "chunk B", "overhead B"
        )?;
        for l in &self.lists {
            let class = l.class_size.map_or("extent".to_string(), |c| c.to_string());
            writeln!(
                f,
                "{:>6} {:>7} {:>7} {:>8} {:>12} {:>12} {:>10}",
                l.ty.0, class, l.chunks, l.used, l.used_bytes, l.chunk_bytes, l.overhead_bytes
            )?;
        }
        write!(
            f,
            "total: {} B used, {} B in free slots, {} B chunk overhead, {} B free space, {} B root, {} B heap",
            self.used_bytes,
            self.free_slot_bytes,
            self.overhead_bytes,
            self.free_space_bytes,
            self.root_bytes,
            self.heap_bytes
        )
    }
}

impl EpAlloc {
    /// Space accounting by type and class (SPEC H9). Takes each list's lock in turn.
    pub fn stats(&self) -> AllocStats {
        let mut s = AllocStats::default();
        let mut lists: Vec<&ListState> = self.lists.iter().filter_map(|l| l.get()).collect();
        lists.sort_by_key(|l| (l.ty, l.class));
        for list in lists {
            let chunks = {
                let g = list.inner.lock();
                self.walk_list(&g)
            };
            let mut c = ClassStats {
                ty: list.ty,
                class_size: list.geo.map(|g| g.slot),
                chunks: chunks.len() as u64,
                slots: 0,
                used: 0,
                used_bytes: 0,
                free_slot_bytes: 0,
                overhead_bytes: 0,
                chunk_bytes: 0,
            };
            for off in chunks {
                match list.geo {
                    Some(g) => {
                        let used = chunk::header(&self.pool, off).used_count() as u64;
                        c.slots += SLOTS as u64;
                        c.used += used;
                        c.used_bytes += used * g.slot as u64;
                        c.free_slot_bytes += (SLOTS as u64 - used) * g.slot as u64;
                        c.overhead_bytes += g.head as u64;
                        c.chunk_bytes += g.chunk_len as u64;
                    }
                    None => {
                        let len = chunk::word(&self.pool, off + 16).load(Ordering::Acquire);
                        c.slots += 1;
                        c.used += 1;
                        c.used_bytes += len - EXT_HEAD;
                        c.overhead_bytes += EXT_HEAD;
                        c.chunk_bytes += len;
                    }
                }
            }
            s.used_bytes += c.used_bytes;
            s.free_slot_bytes += c.free_slot_bytes;
            s.overhead_bytes += c.overhead_bytes;
            s.chunk_bytes += c.chunk_bytes;
            s.lists.push(c);
        }
        s.root_bytes = root::ROOT_SIZE;
        s.heap_bytes = self.pool.heap_top() - self.root.at;
        s.free_space_bytes = s.heap_bytes - s.root_bytes - s.chunk_bytes;
        s
    }
}
