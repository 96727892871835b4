//! `check` for HART (extends EPallocator's checker): every used leaf is reachable from
//! exactly one ART and found by its own key; every key once; every used leaf's value and
//! key object are used, owned by that leaf alone; no used value or key object is
//! unreferenced (no leak); no micro-log left valid; no write batch log in use.

use crate::art::{Art, KeySource};
use crate::error::{Error, Result};
use crate::hart::Hart;
use crate::hash_table::{hash_key, hash_key_bytes, HashKey};
use crate::layout::*;
use crate::pm::{leaf_damage, meta, read_u32, read_u64, PmKeys};
use std::collections::HashSet;

impl Hart {
    /// Verify HART's persistent invariants (and EPallocator's); returns a summary.
    ///
    /// `check` excludes every operation while it runs: it waits for those under way and
    /// holds new ones until it returns (see `HashTable::quiesced`), so it sees the HART at
    /// rest and reads PM that nothing writes. It must not be called from a scan's visitor.
    pub fn check(&self) -> Result<String> {
        // Batches first (a batch holds ART locks only between its operations, and takes
        // them after the gate), so that a log in use is one a batch left, not one running.
        self.pm.batches.quiesced(|| self.table.quiesced(|arts| self.check_quiesced(arts)))
    }

    fn check_quiesced(&self, arts: &[(HashKey, &Art)]) -> Result<String> {
        let alloc_report = self.pm.alloc.check().map_err(Error::Pool)?;
        let pool = &*self.pm.pool;
        // SAFETY: the table is quiesced: no operation runs, so nothing writes PM.
        let ks = unsafe { PmKeys::new(pool) };
        let mut problems: Vec<String> = Vec::new();
        let mut tree = HashSet::new();
        for &(hk, art) in arts {
            art.scan(&hash_key_bytes(hk), None, &mut |leaf| {
                if !tree.insert(leaf) {
                    problems.push(format!("leaf {leaf:#x} is in the trees twice"));
                }
                if !self.pm.alloc.is_used(leaf) {
                    problems.push(format!("leaf {leaf:#x} is in a tree but its leaf bit is clear"));
                }
                ks.with_key(leaf, |k| {
                    if hash_key(k, self.pm.kh) != hk {
                        problems.push(format!("leaf {leaf:#x} is in the ART of another hash key"));
                    }
                });
                true
            });
        }
        let mut used_leaves = 0u64;
        self.pm.alloc.for_each_used(LEAF, |l| {
            used_leaves += 1;
            if !tree.contains(&l) {
                problems.push(format!("used leaf {l:#x} is unreachable from every ART"));
            }
        });
        // Each key found at its own leaf (so each key once).
        for &leaf in &tree {
            let key = ks.with_key(leaf, |k| k.to_vec());
            let hk = hash_key(&key, self.pm.kh);
            let found = arts.binary_search_by_key(&hk, |&(k, _)| k).ok().and_then(|i| arts[i].1.get(&key, &ks));
            if found != Some(leaf) {
                problems.push(format!("key of leaf {leaf:#x} resolves to {found:?}"));
            }
        }
        let mut values = HashSet::new();
        let mut keys = HashSet::new();
        let mut inline = 0u64;
        for &leaf in &tree {
            // SAFETY: quiesced: nothing writes leaves, keys or values meanwhile.
            if let Some(why) = unsafe { leaf_damage(pool, leaf, false) } {
                problems.push(why);
                continue;
            }
            // SAFETY: quiesced: no operation runs, so nothing writes this leaf or its value
            // while the slice `value_of` returns is in use.
            if let Err(e) = unsafe { self.pm.value_of(leaf) } {
                problems.push(e.to_string());
                continue;
            }
            let v = read_u64(pool, leaf + LEAF_P_VALUE);
            let flags = meta(pool, leaf).flags;
            if let Some(n) = inline_len(flags) {
                inline += 1;
                if n > INLINE_VALUE {
                    problems.push(format!("leaf {leaf:#x} claims an inline value of {n} bytes"));
                }
            } else if !self.pm.alloc.is_used(v) {
                problems.push(format!("leaf {leaf:#x} names value {v:#x} whose value bit is clear"));
            } else if (read_u32(pool, v) as usize + VALUE_HDR) > self.pm.alloc.capacity(v) {
                problems.push(format!("value {v:#x} is longer than its slot"));
            }
            if inline_len(flags).is_none() && !values.insert(v) {
                problems.push(format!("value {v:#x} is shared by two leaves"));
            }
            if flags & FLAG_KEY_OUT != 0 {
                let k = read_u64(pool, leaf + LEAF_KEY);
                if !self.pm.alloc.is_used(k) || !keys.insert(k) {
                    problems.push(format!("leaf {leaf:#x} key object {k:#x} is free or shared"));
                }
            }
        }
        let mut used_values = 0u64;
        self.pm.alloc.for_each_used(VALUE, |v| {
            used_values += 1;
            if !values.contains(&v) {
                problems.push(format!("value {v:#x} is used but no leaf names it (leak)"));
            }
        });
        self.pm.alloc.for_each_used(KEY, |k| {
            if !keys.contains(&k) {
                problems.push(format!("key object {k:#x} is used but no leaf names it (leak)"));
            }
        });
        let mut supers = Vec::new();
        self.pm.alloc.for_each_used(SUPER, |o| supers.push(o));
        if supers != [pool.root(SUPER_ROOT)] {
            problems.push(format!("superblock objects {supers:x?} but the root names {:#x}", pool.root(SUPER_ROOT)));
        }
        problems.extend(pmkv_substrate::batch_log::problems(&self.pm.alloc));
        for i in 0..NUM_LOGS as u64 {
            // SAFETY: quiesced: no update holds or writes a log.
            if unsafe { crate::micro_log::read(pool, self.pm.logs_off + i * LOG_SIZE) }.is_some() {
                problems.push(format!("update micro-log {i} is still valid"));
            }
        }
        let len: u64 = arts.iter().map(|(_, a)| a.len()).sum();
        if used_leaves != len {
            problems.push(format!("{used_leaves} used leaves but the count says {len}"));
        }
        if !problems.is_empty() {
            let n = problems.len();
            problems.truncate(10);
            return Err(Error::Corrupt(format!("{n} problem(s): {}", problems.join("; "))));
        }
        Ok(format!(
            "{alloc_report}\nhart: ok — {} keys in {} ARTs, {used_values} value objects, {inline} inline values, {} key objects, no leaks",
            tree.len(),
            arts.len(),
            keys.len()
        ))
    }
}
