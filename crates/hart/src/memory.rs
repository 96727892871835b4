//! Memory accounting by structure (SPEC H9).

use crate::art::ArtStats;
use crate::hart::Hart;
use crate::layout::*;

/// Bytes in use, by structure name (SPEC H9).
pub(crate) type ByStructure = Vec<(String, u64)>;

impl Hart {
    /// DRAM and PM use by structure (SPEC H9).
    pub fn memory(&self) -> (ByStructure, ByStructure) {
        let mut st = ArtStats::default();
        let mut arts = 0u64;
        self.table.for_each(|_, a| {
            a.stats(&mut st);
            arts += 1;
        });
        let (table, ordered) = self.table.dram_bytes();
        let mut dram = vec![
            ("hash table".to_string(), table),
            ("hash-key order index".to_string(), ordered),
            ("art headers".to_string(), arts * std::mem::size_of::<crate::hash_table::Cell>() as u64),
        ];
        for (i, t) in crate::art::node::NodeType::ALL.iter().enumerate() {
            dram.push((format!("{} ({} nodes)", t.name(), st.nodes[i]), st.bytes[i]));
        }
        // Heap prefixes are counted with their nodes but live outside the arena.
        let in_nodes: u64 =
            crate::art::node::NodeType::ALL.iter().enumerate().map(|(i, t)| st.nodes[i] * t.slot_bytes() as u64).sum();
        dram.push((
            "art arena (free nodes, uncarved blocks)".to_string(),
            self.table.arena().reserved().saturating_sub(in_nodes),
        ));
        let s = self.pm.alloc.stats();
        let mut pm = Vec::new();
        for (name, ty) in [("leaves", LEAF), ("values", VALUE), ("key objects", KEY)] {
            let (used, total) = s.of_type(ty);
            pm.push((format!("{name} (used bytes)"), used));
            pm.push((format!("{name} (allocator overhead and free slots)"), total.saturating_sub(used)));
        }
        pm.push(("superblock and micro-logs".to_string(), SUPER_SIZE + NUM_LOGS as u64 * LOG_SIZE));
        (dram, pm)
    }
}
