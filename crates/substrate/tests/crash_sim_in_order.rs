//! The crash simulator's line-granular, in-order model (`Eviction::InOrder`, the
//! `CrashModel::LinesInOrder` an engine may declare): each dirty line reaches PM holding
//! a prefix of the 8-byte stores made to it since it was last persisted, never a subset
//! that skips an earlier store; a line its logged stores do not explain reaches PM whole
//! or not at all.

use pmkv_substrate::{CrashModel, Eviction, Pool};
use pmkv_testutil::{sim_opts, write_bytes};
use std::collections::HashSet;

fn line(img: &[u8], off: u64) -> Vec<u64> {
    img[off as usize..off as usize + 64].chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap())).collect()
}

#[test]
fn in_order_images_are_prefixes_of_each_lines_stores() {
    let pool = Pool::create_sim("inorder", &sim_opts(128 << 10)).expect("sim pool");
    let off = pool.take_heap(64 * 4, 64).expect("heap");
    let sim = pool.sim().unwrap();
    // The store log is kept while a hook is installed.
    sim.set_hook(true, |_| {});
    // Line a: stores to words 7, 2, 5, 0 in that order (not address order).
    let (a, b, c) = (off, off + 64, off + 128);
    let order = [7u64, 2, 5, 0];
    for (n, &w) in order.iter().enumerate() {
        // SAFETY: a word of this test's heap, no reference to it is alive.
        unsafe { pool.store_u64(a + 8 * w, 100 + n as u64) };
    }
    // Line b: persisted once, then stored to again: only the later stores are prefixes.
    // SAFETY: as above.
    unsafe { pool.store_u64(b, 1) };
    pool.persist_off(b, 64);
    // SAFETY: as above.
    unsafe {
        pool.store_u64(b + 8, 2);
        pool.store_u64(b + 16, 3);
    }
    // Line c: written by a copy the log does not see: whole or nothing.
    write_bytes(&pool, c, &[9; 64]);
    let mut seen_a = HashSet::new();
    let mut seen_b = HashSet::new();
    let mut seen_c = HashSet::new();
    for seed in 0..200 {
        let img = sim.image_now(&pool, Eviction::InOrder(seed));
        let la = line(&img, a);
        // Which prefix: the stores present must be exactly the first k.
        let k = order.iter().take_while(|&&w| la[w as usize] != 0).count();
        for (n, &w) in order.iter().enumerate() {
            let want = if n < k { 100 + n as u64 } else { 0 };
            assert_eq!(la[w as usize], want, "seed {seed}: line a is not a prefix of its stores: {la:?}");
        }
        assert!(la.iter().enumerate().all(|(i, &v)| order.contains(&(i as u64)) || v == 0));
        seen_a.insert(k);
        let lb = line(&img, b);
        assert_eq!(lb[0], 1, "seed {seed}: a persisted store is lost");
        assert!(!(lb[2] == 3 && lb[1] != 2), "seed {seed}: a later store without an earlier one: {lb:?}");
        seen_b.insert((lb[1], lb[2]));
        let lc = &img[c as usize..c as usize + 64];
        assert!(lc == [0; 64] || lc == [9; 64], "seed {seed}: an unlogged line torn");
        seen_c.insert(lc[0]);
    }
    assert_eq!(seen_a, (0..=4).collect::<HashSet<_>>(), "every prefix of line a occurs");
    assert_eq!(seen_b.len(), 3, "line b: none, the first, both");
    assert_eq!(seen_c.len(), 2, "line c: whole or nothing");
    // After a flush and fence of line a, its stores are persisted: every image holds them.
    pool.persist_off(a, 64);
    for seed in 0..20 {
        let la = line(&sim.image_now(&pool, Eviction::InOrder(seed)), a);
        assert_eq!(order.iter().map(|&w| la[w as usize]).collect::<Vec<_>>(), [100, 101, 102, 103]);
    }
    sim.clear_hook();
}

#[test]
fn each_model_gets_its_own_evictions() {
    let strict = Eviction::for_model(CrashModel::Words, 3, 9);
    assert!(strict.iter().any(|e| matches!(e, Eviction::Words(_))));
    assert!(!strict.iter().any(|e| matches!(e, Eviction::InOrder(_))));
    let lines = Eviction::for_model(CrashModel::LinesInOrder, 3, 9);
    assert!(!lines.iter().any(|e| matches!(e, Eviction::Words(_))), "torn words are outside the line model");
    assert_eq!(lines.iter().filter(|e| matches!(e, Eviction::InOrder(_))).count(), 3);
}
