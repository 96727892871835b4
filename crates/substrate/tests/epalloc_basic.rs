//! EPallocator (SPEC P7) behaviour without crashes: the reserve/publish/free protocol,
//! size classes and extents, reuse of freed space, reopen, statistics, the checker,
//! refusal of corrupt metadata, a full pool, and `reclaim_orphans`.

mod epalloc_util;

use epalloc_util::*;
use pmkv_substrate::epalloc::{chunk, class_of, root, EpAlloc, ReservedRun, TypeId, CLASSES, EPALLOC_ROOT, SLOTS};
use pmkv_substrate::{Mode, Pool, PoolError};
use std::collections::HashSet;
use std::sync::Arc;

const A: TypeId = TypeId(1);
const B: TypeId = TypeId(2);

#[test]
fn p7_reserve_publish_free_protocol() {
    let ep = EpAlloc::create(new_sim(&opts())).unwrap();
    let off = ep.alloc(A, 24).unwrap();
    assert_eq!(ep.capacity(off), 24);
    assert!(!ep.is_used(off), "a reserved slot is not used until published");
    assert_eq!(used_set(&ep, &[A]).len(), 0);
    write_tag(ep.pool(), off, 7);
    ep.publish(off);
    assert!(ep.is_used(off));
    assert_eq!(ep.type_of(off), Some(A));
    assert!(ep.try_publish(off).is_err(), "publishing twice is refused");
    assert!(ep.try_unreserve(off).is_err(), "a published object cannot be unreserved");
    ep.free(off);
    assert!(!ep.is_used(off));
    assert!(ep.try_free(off).is_err(), "double free is refused");
    assert!(ep.try_free(off + 1).is_err(), "an offset inside a slot is not an object");
    assert!(ep.try_publish(12345).is_err());
    assert!(!ep.is_used(0) && ep.capacity(0) == 0);
    // A reserved, unpublished slot handed back is reused.
    let r = ep.alloc(A, 24).unwrap();
    ep.unreserve(r);
    assert!(ep.try_unreserve(r).is_err());
    ep.check().unwrap();
}

#[test]
fn p7_reservation_handles_publish_without_a_lookup_and_refuse_what_is_stale_or_damaged() {
    let ep = EpAlloc::create(new_sim(&opts())).unwrap();
    let r = ep.reserve(A, 8).unwrap();
    let off = r.off();
    assert!(!ep.is_used(off));
    write_tag(ep.pool(), off, 1);
    ep.publish_reserved_lazy(r);
    assert!(ep.is_used(off), "published through its handle");
    assert_eq!(ep.type_of(off), Some(A));
    // A handle given back by offset is stale: publishing it changes nothing.
    let r = ep.reserve(A, 8).unwrap();
    let stale = r.off();
    ep.unreserve(stale);
    ep.publish_reserved_lazy(r);
    assert!(!ep.is_used(stale), "a reservation given back is not published");
    ep.check().unwrap();
    // A damaged header word is not built upon, with a handle or without.
    let r = ep.reserve(A, 8).unwrap();
    let other = ep.alloc(A, 8).unwrap();
    let c = off - 16;
    let h = read_u64(ep.pool(), c);
    let bad = h ^ 1 << 60; // a flipped bit of the word's check
    write_u64(ep.pool(), c, bad);
    let next = r.off();
    ep.publish_reserved_lazy(r);
    assert_eq!(read_u64(ep.pool(), c), bad, "nothing written over the damaged word");
    assert!(ep.try_publish(other).unwrap_err().to_string().contains("damaged"));
    write_u64(ep.pool(), c, h);
    assert!(!ep.is_used(next) && !ep.is_used(other));
    ep.unreserve(next);
    ep.unreserve(other);
    ep.check().unwrap();
    // Slots only: an extent needs `alloc`.
    assert!(ep.reserve(A, 64 << 10).is_err());
}

#[test]
fn p7_a_run_of_reservations_hands_out_distinct_slots_and_gives_back_the_rest() {
    let pool = new_sim(&opts());
    let ep = EpAlloc::create(pool.clone()).unwrap();
    let mut run = ReservedRun::default();
    // A fresh list has no current chunk: the slow path makes one and reserves one slot.
    let r0 = ep.reserve_run(A, 64, 5, &mut run).unwrap();
    assert!(run.is_empty());
    // Then up to `want` slots of the current chunk with one compare-and-swap.
    let r1 = ep.reserve_run(A, 64, 5, &mut run).unwrap();
    assert_eq!(run.len(), 4);
    let mut published = vec![];
    for r in [r0, r1] {
        write_tag(ep.pool(), r.off(), 1);
        published.push(r.off());
        ep.publish_reserved_lazy(r);
    }
    // Nobody else gets the run's slots.
    let other = ep.alloc(A, 64).unwrap();
    for _ in 0..2 {
        let r = ep.take_reserved(&mut run).expect("the run holds slots");
        assert!(!published.contains(&r.off()) && r.off() != other, "{:#x} handed out twice", r.off());
        assert!(!ep.is_used(r.off()));
        write_tag(ep.pool(), r.off(), 2);
        published.push(r.off());
        ep.publish_reserved_lazy(r);
    }
    assert!(published.iter().all(|&o| ep.is_used(o)));
    assert_eq!(run.len(), 2);
    assert_eq!(ep.check().unwrap().reserved_slots, 3, "two in the run, `other`");
    // Given back: the two slots are free again, and the next allocations find them.
    ep.unreserve_run(&mut run);
    assert!(run.is_empty() && ep.take_reserved(&mut run).is_none());
    ep.unreserve(other);
    assert_eq!(ep.check().unwrap().reserved_slots, 0);
    // A run dropped without being given back (a crash, or a close) leaks nothing: the
    // reservations are DRAM state, and the reopened allocator sees only what was published.
    let _ = ep.reserve_run(A, 64, 8, &mut run).unwrap();
    assert!(!run.is_empty());
    drop(ep);
    let ep = EpAlloc::open(pool).unwrap();
    let used: Vec<u64> = used_set(&ep, &[A]).keys().copied().collect();
    published.sort_unstable();
    assert_eq!(used, published);
    assert_eq!(ep.check().unwrap().reserved_slots, 0);
}

#[test]
fn p7_prefetch_hints_change_nothing_for_any_offset() {
    // `prefetch_meta` takes any offset (engines pass words read from PM, which damage can
    // make anything) and must neither fault, panic nor write, and must not disturb the
    // free path's per-thread cache of the chunk located last.
    let ep = EpAlloc::create(new_sim(&opts().max_size(64 << 20))).unwrap();
    let mut live: Vec<u64> = (0..200u64).map(|i| put(&ep, A, [24, 64, 200, 1000][i as usize % 4], i)).collect();
    live.push(put(&ep, B, 10_000, 999));
    let freed: Vec<u64> = live.drain(..50).collect();
    for &off in &freed {
        ep.free(off);
    }
    let reserved = ep.alloc(A, 64).unwrap();
    let used = used_set(&ep, &[A, B]);
    let size = ep.pool().size();
    let image = |ep: &EpAlloc| ep.pool().sim().unwrap().image_now(ep.pool(), pmkv_substrate::Eviction::All);
    let before = image(&ep);
    let mut probes: Vec<u64> =
        vec![0, 1, 8, 4095, 4096, size - 1, size, size + 4096, 64 << 20, u64::MAX, u64::MAX - 255];
    probes.extend(live.iter().chain(&freed).flat_map(|&o| [o, o + 1, o.saturating_sub(256), o + 256]));
    probes.push(reserved);
    for &p in &probes {
        ep.prefetch_meta(p);
    }
    assert_eq!(image(&ep), before, "a prefetch hint wrote to the pool");
    assert_eq!(used_set(&ep, &[A, B]), used);
    // Interleaved with frees (which use and refill the per-thread cache), every free and
    // publish still lands on its own object.
    for (i, &off) in live.iter().enumerate() {
        ep.prefetch_meta(live[(i * 7 + 3) % live.len()]);
        ep.prefetch_meta(freed[i % freed.len()]);
        assert!(ep.is_used(off));
        ep.try_free(off).unwrap();
        assert!(!ep.is_used(off));
    }
    ep.prefetch_meta(reserved);
    ep.try_publish(reserved).unwrap();
    assert!(ep.is_used(reserved));
    assert_eq!(used_set(&ep, &[A, B]).len(), 1);
    ep.check().unwrap();
}

#[test]
fn p7_every_class_and_extents() {
    let ep = EpAlloc::create(new_sim(&opts().max_size(64 << 20))).unwrap();
    let mut offs = HashSet::new();
    for (i, &c) in CLASSES.iter().enumerate() {
        for size in [c - 7, c] {
            let off = put(&ep, A, size, i as u64);
            assert_eq!(ep.capacity(off), c, "size {size} goes to class {c}");
            assert!(offs.insert(off));
            if c % 64 == 0 {
                assert_eq!(off % 64, 0, "line-multiple classes are line aligned");
            }
        }
    }
    for size in [4097, 8192, 100_000] {
        let off = put(&ep, B, size, size as u64);
        assert!(ep.capacity(off) >= size && ep.capacity(off) < size + 4096);
        assert_eq!(off % 64, 0);
        assert!(offs.insert(off));
    }
    let rep = ep.check().unwrap();
    assert_eq!(rep.lists, CLASSES.len() + 1);
    assert_eq!(rep.extents, 3);
    assert_eq!(rep.used_slots, 2 * CLASSES.len() as u64);
    let st = ep.stats();
    assert_eq!(st.lists.len(), CLASSES.len() + 1);
    assert!(st.of_type(B).0 >= 4097 + 8192 + 100_000);
    assert_eq!(st.used_bytes + st.free_slot_bytes + st.overhead_bytes, st.chunk_bytes);
    assert!(st.to_string().contains("extent"));
    // Freeing everything recycles every chunk and extent: all space returns.
    for off in offs {
        ep.free(off);
    }
    ep.release_empty_chunks();
    let rep = ep.check().unwrap();
    assert_eq!((rep.chunks, rep.extents, rep.used_slots), (0, 0, 0));
    assert_eq!(rep.free_space_bytes, rep.heap_top - rep.heap_start);
}

#[test]
fn p7_chunks_fill_in_slot_order_and_recycled_space_is_reused() {
    let ep = EpAlloc::create(new_sim(&opts())).unwrap();
    let first: Vec<u64> = (0..SLOTS as u64).map(|i| put(&ep, A, 64, i)).collect();
    for w in first.windows(2) {
        assert_eq!(w[1] - w[0], 64, "slots of one chunk are consecutive");
    }
    let chunk0 = first[0] - 64;
    assert_eq!(chunk::HeaderWord(read_u64(ep.pool(), chunk0)).bitmap(), chunk::BITMAP_MASK);
    let more: Vec<u64> = (0..10).map(|i| put(&ep, A, 64, 100 + i)).collect();
    assert_eq!(ep.check().unwrap().chunks, 2);
    let top = ep.pool().heap_top();
    // Free the whole first chunk: it is not the current chunk, so it is recycled.
    for &o in &first {
        ep.free(o);
    }
    let rep = ep.check().unwrap();
    assert_eq!(rep.chunks, 1);
    assert!(rep.free_space_bytes >= 64 + 64 * 56);
    // A (smaller) chunk of another class takes the recycled space: the heap does not grow.
    // The frees above left this thread's locate cache naming the recycled chunk, whose
    // range the new chunk now overlaps: every answer must come from the new chunk.
    let x = put(&ep, B, 48, 1);
    assert!(x < top, "recycled space is reused");
    assert_eq!(ep.pool().heap_top(), top);
    assert_eq!(ep.type_of(x), Some(B));
    assert_eq!(ep.capacity(x), CLASSES[class_of(48).unwrap()]);
    for &o in first.iter().filter(|&&o| o != x) {
        assert!(!ep.is_used(o), "{o:#x} belonged to the recycled chunk");
    }
    for o in more {
        ep.free(o);
    }
    ep.free(x);
    ep.check().unwrap();
}

#[test]
fn p7_reopen_file_pool_keeps_objects() {
    let (_dir, path) = pool_file("ep.pool");
    let o = pool_opts(Mode::Adr, 1 << 20, 16 << 20);
    let mut want = Used::new();
    {
        let pool = Arc::new(Pool::create(&path, LAYOUT, &o).unwrap());
        let ep = EpAlloc::create(pool).unwrap();
        for i in 0..300u64 {
            let size = [8, 40, 64, 300, 5000][i as usize % 5];
            let ty = if i % 2 == 0 { A } else { B };
            let off = put(&ep, ty, size, i);
            want.insert(off, (ty.0, i));
        }
        let reserved = ep.alloc(A, 8).unwrap(); // never published: free after reopen
        write_tag(ep.pool(), reserved, 999);
        for (&off, _) in want.clone().iter().step_by(3) {
            ep.free(off);
            want.remove(&off);
        }
        assert!(ep.try_publish(reserved + 3).is_err());
    }
    let pool = Arc::new(Pool::open(&path, Some(LAYOUT), &o).unwrap());
    let ep = EpAlloc::open(pool).unwrap();
    assert_eq!(used_set(&ep, &[A, B]), want);
    ep.check().unwrap();
    assert!(EpAlloc::create(ep.pool().clone()).is_err(), "a second create is refused");
}

#[test]
fn p7_open_refuses_corrupt_metadata() {
    let o = opts();
    let pool = new_sim(&o);
    assert!(matches!(EpAlloc::open(pool.clone()), Err(PoolError::Allocator(_))), "no allocator yet");
    let ep = EpAlloc::create(pool).unwrap();
    let offs: Vec<u64> = (0..60).map(|i| put(&ep, A, 64, i)).collect();
    let r = ep.pool().root(EPALLOC_ROOT);
    let img = ep.pool().sim().unwrap().image_now(ep.pool(), pmkv_substrate::Eviction::All);
    let reopen = |img: &[u8]| EpAlloc::open(Arc::new(Pool::from_image(img, None, &o).unwrap()));
    assert!(reopen(&img).is_ok());
    let w = |img: &mut Vec<u8>, at: u64, v: u64| img[at as usize..at as usize + 8].copy_from_slice(&v.to_le_bytes());
    let rd = |img: &Vec<u8>, at: u64| u64::from_le_bytes(img[at as usize..at as usize + 8].try_into().unwrap());
    // Bad magic in the root block.
    let mut bad = img.clone();
    bad[r as usize] ^= 0xff;
    assert!(matches!(reopen(&bad), Err(PoolError::CorruptAllocator(_))));
    // Root block checksum.
    let mut bad = img.clone();
    bad[r as usize + 20] ^= 1;
    assert!(matches!(reopen(&bad), Err(PoolError::CorruptAllocator(_))));
    // Find the list of class 64 and damage it.
    let entry = find_entry(r, |at| rd(&img, at), A, class_of(64).unwrap() as u8).0;
    let head = link_off(entry + 8, rd(&img, entry + 8));
    let second = link_off(head + 8, rd(&img, head + 8));
    assert!(second != 0, "two chunks");
    // A cycle (a valid link word).
    let mut bad = img.clone();
    w(&mut bad, second + 8, link(second + 8, head));
    assert!(matches!(reopen(&bad), Err(PoolError::CorruptAllocator(_))));
    // A head outside the heap, a misaligned head: as raw words (which fail their check)
    // and as valid link words (which fail the walk's bounds and alignment checks).
    for h in [u64::MAX - 7, img.len() as u64 + 4096, head + 8] {
        let mut words = vec![h];
        if h < 1 << 56 {
            words.push(link(entry + 8, h));
        }
        for v in words {
            let mut bad = img.clone();
            w(&mut bad, entry + 8, v);
            assert!(matches!(reopen(&bad), Err(PoolError::CorruptAllocator(_))), "head {h:#x} as {v:#x}");
        }
    }
    // An inconsistent header word (bitmap says free, indicator says full).
    let mut bad = img.clone();
    w(&mut bad, head, 1 << 62);
    assert!(matches!(reopen(&bad), Err(PoolError::CorruptAllocator(_))));
    // A garbage tag, a recycle log naming a non-chunk.
    let mut bad = img.clone();
    w(&mut bad, entry, 0x1234);
    assert!(matches!(reopen(&bad), Err(PoolError::CorruptAllocator(_))));
    let mut bad = img.clone();
    w(&mut bad, entry + 16, head + 3);
    assert!(matches!(reopen(&bad), Err(PoolError::CorruptAllocator(_))));
    let mut bad = img.clone();
    w(&mut bad, entry + 16, link(entry + 16, head + 3));
    assert!(matches!(reopen(&bad), Err(PoolError::CorruptAllocator(_))));
    // Root 0 pointing outside the pool: from_image validates roots, so patch a live pool.
    let p = Arc::new(Pool::from_image(&img, None, &o).unwrap());
    p.set_root(EPALLOC_ROOT, p.size() - 64);
    assert!(EpAlloc::open(p).is_err());
    drop(offs);
}

#[test]
fn p7_checker_reports_damage_in_a_live_allocator() {
    let ep = EpAlloc::create(new_sim(&opts())).unwrap();
    let offs: Vec<u64> = (0..3).map(|i| put(&ep, A, 8, i)).collect();
    let report = ep.check().unwrap();
    assert!(report.to_string().contains("OK"));
    assert_eq!(report.used_slots, 3);
    // Set a bit behind the allocator's back: the header no longer matches its index.
    let c = offs[0] - 16;
    let h = chunk::HeaderWord(read_u64(ep.pool(), c));
    write_u64(ep.pool(), c, h.0 | 1 << 10);
    let err = ep.check().unwrap_err().to_string();
    assert!(err.contains("fails its check") || err.contains("not reserved"), "{err}");
    write_u64(ep.pool(), c, h.0);
    ep.check().unwrap();
}

#[test]
fn p7_full_pool_is_an_error_not_a_panic() {
    let o = pool_opts(Mode::Adr, 256 << 10, 256 << 10);
    let ep = EpAlloc::create(new_sim(&o)).unwrap();
    let mut live = Vec::new();
    let err = loop {
        match ep.alloc(A, 64) {
            Ok(off) => {
                write_tag(ep.pool(), off, live.len() as u64);
                ep.publish(off);
                live.push(off);
            }
            Err(e) => break e,
        }
        assert!(live.len() < 10_000);
    };
    assert!(matches!(err, PoolError::Full { .. }), "{err}");
    assert!(live.len() > 56 * 3);
    assert!(matches!(ep.alloc(B, 100_000), Err(PoolError::Full { .. })));
    assert!(matches!(ep.alloc(B, usize::MAX), Err(PoolError::Full { .. })));
    assert!(matches!(ep.alloc(B, usize::MAX - 10), Err(PoolError::Full { .. })));
    ep.check().unwrap();
    // Freeing a whole chunk makes room again, for another class too.
    for off in live.drain(..56) {
        ep.free(off);
    }
    put(&ep, B, 48, 1);
    ep.check().unwrap();
}

#[test]
fn p7_many_types_and_the_directory_limit() {
    let ep = EpAlloc::create(new_sim(&opts().max_size(64 << 20))).unwrap();
    let mut n = 0;
    let err = loop {
        match ep.alloc(TypeId(300 + n), 8) {
            Ok(off) => ep.unreserve(off),
            Err(e) => break e,
        }
        n += 1;
    };
    assert_eq!(n as usize, root::DIR_CAP);
    assert!(matches!(err, PoolError::Allocator(_)), "{err}");
    ep.check().unwrap();
}

#[test]
fn p7_reclaim_orphans_frees_only_unreferenced_children() {
    const LEAF: TypeId = TypeId(1);
    const VALUE: TypeId = TypeId(2);
    let ep = EpAlloc::create(new_sim(&opts())).unwrap();
    let pool = ep.pool().clone();
    let set_pvalue = |leaf: u64, v: u64| {
        write_u64(&pool, leaf, v);
        pool.persist_off(leaf, 8);
    };
    // A complete insert: value and leaf used, leaf references value.
    let v1 = put(&ep, VALUE, 16, 1);
    let l1 = ep.alloc(LEAF, 64).unwrap();
    set_pvalue(l1, v1);
    ep.publish(l1);
    // A half insert (Algorithm 1 crashed between lines 14 and 18): value used, leaf free.
    let v2 = put(&ep, VALUE, 16, 2);
    let l2 = ep.alloc(LEAF, 64).unwrap();
    set_pvalue(l2, v2);
    // A deleted leaf whose stale p_value names a value slot that another leaf reuses.
    let v3 = put(&ep, VALUE, 16, 3);
    let l3 = ep.alloc(LEAF, 64).unwrap();
    set_pvalue(l3, v3);
    ep.publish(l3);
    let l4 = ep.alloc(LEAF, 64).unwrap();
    set_pvalue(l4, v3);
    ep.publish(l4);
    ep.free(l3); // l3 is free but still says v3, which l4 uses
                 // Garbage in a free leaf slot.
    let l5 = ep.alloc(LEAF, 64).unwrap();
    set_pvalue(l5, 0xdead_beef);
    // SAFETY: this thread is the only one using the pool.
    let n = unsafe { ep.reclaim_orphans(LEAF, 0, VALUE) }.unwrap();
    assert_eq!(n, 1, "only the half-inserted leaf's value is an orphan");
    assert!(ep.is_used(v1) && !ep.is_used(v2) && ep.is_used(v3));
    // SAFETY: this thread is still the only one using the pool (no allocation runs
    // concurrently with the sweep).
    assert_eq!(unsafe { ep.reclaim_orphans(LEAF, 0, VALUE) }.unwrap(), 0);
    ep.check().unwrap();
}

/// A pool marked clean whose recycle log is not empty is damaged (a recycle completes
/// inside one `free`, and a pool is marked clean only by an orderly close), not a pool to
/// repair: "finishing" the recycle would unlink live objects. Read-only and read-write
/// opens both refuse it as corrupt; the read-only one leaves the file as it was, and
/// neither touches the log or the list.
#[test]
fn p7_a_log_left_in_a_clean_pool_is_damage_not_repaired() {
    use std::os::unix::fs::FileExt;
    let (_dir, path) = pool_file("ro.pool");
    let o = opts();
    let entry = {
        let ep = EpAlloc::create(Arc::new(Pool::create(&path, LAYOUT, &o).unwrap())).unwrap();
        let _ = put(&ep, A, 64, 1);
        let r = ep.pool().root(EPALLOC_ROOT);
        find_entry(r, |at| read_u64(ep.pool(), at), A, class_of(64).unwrap() as u8)
    };
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    let logged = link(entry.pprev_at(), 4096);
    file.write_all_at(&logged.to_le_bytes(), entry.pprev_at()).unwrap();
    drop(file);
    let before = std::fs::read(&path).unwrap();
    let pool = Arc::new(Pool::open_read_only(&path, Some(LAYOUT), &o).unwrap());
    assert!(matches!(EpAlloc::open(pool), Err(PoolError::CorruptAllocator(_))));
    assert!(std::fs::read(&path).unwrap() == before, "a read-only open changed the file");
    let pool = Arc::new(Pool::open(&path, Some(LAYOUT), &o).unwrap());
    assert!(matches!(EpAlloc::open(pool.clone()), Err(PoolError::CorruptAllocator(_))));
    drop(pool);
    let mut word = [0u8; 8];
    std::fs::File::open(&path).unwrap().read_exact_at(&mut word, entry.pprev_at()).unwrap();
    assert_eq!(u64::from_le_bytes(word), logged, "the refused open changed the log");
}

/// The seal (see `epalloc::seal`): damage that leaves every list walkable and every header
/// consistent — a cut list, a bitmap bit flipped either way, a chunk dropped from the
/// middle of its list — is found when a cleanly closed pool is opened, read-only or not,
/// and the file is not changed.
#[test]
fn p7_the_seal_finds_a_cut_list_and_flipped_bits_after_a_clean_shutdown() {
    use std::os::unix::fs::FileExt;
    let (_dir, path) = pool_file("seal.pool");
    let o = opts();
    let (entry, chunks) = {
        let ep = EpAlloc::create(Arc::new(Pool::create(&path, LAYOUT, &o).unwrap())).unwrap();
        for i in 0..3 * SLOTS as u64 - 10 {
            put(&ep, A, 64, i);
        }
        let r = ep.pool().root(EPALLOC_ROOT);
        let e = find_entry(r, |at| read_u64(ep.pool(), at), A, class_of(64).unwrap() as u8);
        let mut chunks = vec![link_off(e.head_at(), read_u64(ep.pool(), e.head_at()))];
        while let Some(&c) = chunks.last() {
            let n = link_off(c + 8, read_u64(ep.pool(), c + 8));
            if n == 0 {
                break;
            }
            chunks.push(n);
        }
        assert_eq!(chunks.len(), 3);
        (e, chunks)
    };
    let good = std::fs::read(&path).unwrap();
    // Valid words in the wrong place or with the wrong content (each passes its own
    // check): only the seal can tell. Damage that fails a word's check is refused by the
    // checks themselves (`p7_damage_after_a_crash_is_refused`).
    let cases: Vec<(&str, u64, u64)> = vec![
        ("the first chunk's link set to the end (a cut list)", chunks[0] + 8, link(chunks[0] + 8, 0)),
        ("the middle chunk skipped", chunks[0] + 8, link(chunks[0] + 8, chunks[2])),
        // The partly filled chunk (at the head): a free slot marked used, check redone.
        ("a free bit set", chunks[0], header3(chunks[0], read_word(&good, chunks[0]) & chunk::BITMAP_MASK | 1 << 50)),
        ("the head moved to the second chunk", entry.head_at(), link(entry.head_at(), chunks[1])),
    ];
    for (what, at, v) in cases {
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        file.write_all_at(&good, 0).unwrap();
        file.write_all_at(&v.to_le_bytes(), at).unwrap();
        drop(file);
        let before = std::fs::read(&path).unwrap();
        let ro = Arc::new(Pool::open_read_only(&path, Some(LAYOUT), &o).unwrap());
        let r = EpAlloc::open(ro);
        assert!(matches!(r, Err(PoolError::CorruptAllocator(ref m)) if m.contains("sealed")), "{what}: {:?}", r.err());
        let rw = Arc::new(Pool::open(&path, Some(LAYOUT), &o).unwrap());
        assert!(matches!(EpAlloc::open(rw), Err(PoolError::CorruptAllocator(_))), "{what}");
        assert!(std::fs::read(&path).unwrap()[4096..] == before[4096..], "{what}: the refused opens changed the heap");
    }
    // The undamaged pool still opens, with every object.
    let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
    file.write_all_at(&good, 0).unwrap();
    drop(file);
    let ep = EpAlloc::open(Arc::new(Pool::open(&path, Some(LAYOUT), &o).unwrap())).unwrap();
    assert_eq!(ep.recovery().used_slots, 3 * SLOTS as u64 - 10);
}

fn read_word(img: &[u8], at: u64) -> u64 {
    u64::from_le_bytes(img[at as usize..at as usize + 8].try_into().unwrap())
}

/// Format-2 pools (written before the words had checks) are still opened and written in
/// format 2: the paper's header layout, raw links, no directory count.
#[test]
fn p7_format_2_pools_keep_their_encoding() {
    use pmkv_substrate::epalloc::Format;
    let o = opts();
    let ep = EpAlloc::create_format(new_sim(&o), Format::V2).unwrap();
    let a: Vec<u64> = (0..2 * SLOTS as u64 + 5).map(|i| put(&ep, A, 64, i)).collect();
    let x = put(&ep, B, 9000, 77);
    for &off in &a[..SLOTS] {
        ep.free(off); // empties the first chunk: a recycle in the middle of the list
    }
    ep.check().unwrap();
    let r = ep.pool().root(EPALLOC_ROOT);
    let entry = (0..root::DIR_CAP as u64)
        .map(|i| root::Entry(r + root::DIR_AT + i * root::ENTRY_LEN))
        .find(|e| read_u64(ep.pool(), e.tag_at()) == root::tag(A, class_of(64).unwrap() as u8))
        .expect("a format-2 tag");
    let head = read_u64(ep.pool(), entry.head_at());
    let h = chunk::HeaderWord(read_u64(ep.pool(), head));
    assert_eq!(h, chunk::HeaderWord::from_bitmap(h.bitmap()), "the paper's header layout");
    assert_eq!(read_u64(ep.pool(), r + root::DIR_AT + 32), 0, "no count word in format 2");
    let want = used_set(&ep, &[A, B]);
    assert!(want.contains_key(&x));
    // A crash image reopens in format 2 and takes writes.
    let img = ep.pool().sim().unwrap().image_now(ep.pool(), pmkv_substrate::Eviction::All);
    let ep2 = EpAlloc::open(Arc::new(Pool::from_image(&img, None, &o).unwrap())).unwrap();
    assert_eq!(used_set(&ep2, &[A, B]), want);
    let y = put(&ep2, A, 64, 99);
    ep2.free(a[SLOTS]);
    ep2.check().unwrap();
    let r2 = ep2.pool().root(EPALLOC_ROOT);
    assert_eq!(read_u64(ep2.pool(), r2 + 8) as u32, 2, "still version 2");
    assert!(ep2.is_used(y));
    let head2 = read_u64(ep2.pool(), entry.head_at());
    assert!(chunk::HeaderWord(read_u64(ep2.pool(), head2)).is_consistent(), "format-2 headers after writes");
}
