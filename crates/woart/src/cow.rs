//! ART+CoW, the paper's third radix tree (§4): the adaptive radix tree kept wholly in PM
//! and made failure-atomic by copy-on-write. A change that is one 8-byte pointer store
//! (a leaf pointer replaced, a terminal slot set or cleared, a Node256 child added or
//! removed, a new Node4 linked in place of a leaf) is done in place, persisted. Every
//! other change (a child added to or removed from a Node4, 16 or 48, a growth, a
//! path-compression split) copies the node, changes the copy, persists and publishes it,
//! then swings the parent's pointer with one 8-byte store and frees the old node. No log.
//!
//! The node kinds, leaves, readers, the open's walk and sweep and the checker are
//! WOART's (this crate); only the write paths differ, chosen by [`Variant`] inside the
//! shared `tree` code (the split and add of `insert`, and `cow_unlink` for deletes).
//! This module holds the tree type ART+CoW is opened as.

use crate::error::Result;
use crate::layout::Variant;
use crate::tree::{Options, Woart};
use std::sync::Arc;

/// An ART+CoW tree in one pool: a [`Woart`] opened with ART+CoW's write paths, whose
/// operations (`get_with`, `put`, `delete`, `scan`, `check`, ...) it derefs to.
pub struct ArtCow(Woart);

impl ArtCow {
    /// Open (or, in a new pool, format) the tree in `pool`.
    pub fn open_with(pool: Arc<pmkv_substrate::Pool>, _opts: Options) -> Result<ArtCow> {
        Ok(ArtCow(crate::recovery::open(pool, Variant::ArtCow)?))
    }

    /// Seal, close the pool and mark it clean.
    pub fn close(self) -> Result<()> {
        self.0.close()
    }

    pub(crate) fn into_inner(self) -> Woart {
        self.0
    }
}

impl std::ops::Deref for ArtCow {
    type Target = Woart;
    fn deref(&self) -> &Woart {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{untag, Kind, N4};
    use pmkv_substrate::Eviction;
    use pmkv_substrate::{Mode, Pool, PoolOptions};

    fn sim(name: &str, mode: Mode) -> Arc<Pool> {
        let o = PoolOptions::default().mode(mode).initial_size(1 << 20).max_size(256 << 20);
        Arc::new(Pool::create_sim(name, &o).expect("sim pool"))
    }

    /// The node under root byte `b`.
    fn under(t: &Woart, b: u8) -> u64 {
        let pm = t.pm();
        let s = pm.find_child(Kind::N256, t.root, b).expect("a slot");
        untag(pm.load(s)).expect("a node").1
    }
    fn node_a(t: &Woart) -> u64 {
        under(t, b'a')
    }
    fn node_q(t: &Woart) -> u64 {
        under(t, b'q')
    }

    fn used_n4(t: &Woart) -> Vec<u64> {
        let mut v = Vec::new();
        t.alloc.for_each_used(N4, |o| v.push(o));
        v
    }

    /// The difference the two variants exist for: WOART adds a child to a Node4 in place
    /// (its commit word), ART+CoW replaces the node by a copy and frees the old one; a
    /// split leaves WOART's node where it was and gives ART+CoW's a new place.
    #[test]
    fn artcow_copies_where_woart_writes_in_place() {
        let w = Woart::open_with(sim("woart", Mode::Adr), Options::default()).unwrap();
        let c = ArtCow::open_with(sim("artcow", Mode::Adr), Options::default()).unwrap();
        for t in [&w, &*c] {
            t.put(b"a1", b"x").unwrap();
            t.put(b"a2", b"y").unwrap();
        }
        let (w0, c0) = (node_a(&w), node_a(&c));
        for t in [&w, &*c] {
            t.put(b"a3", b"z").unwrap();
        }
        assert_eq!(node_a(&w), w0, "WOART adds in place");
        assert_ne!(node_a(&c), c0, "ART+CoW links a copy");
        assert_eq!(used_n4(&c), vec![node_a(&c)], "the old Node4 is freed");
        let c1 = node_a(&c);
        for t in [&w, &*c] {
            assert!(t.delete(b"a2").unwrap());
        }
        assert_eq!(node_a(&w), w0, "WOART removes in place");
        assert_ne!(node_a(&c), c1, "ART+CoW removes by copy");
        assert_eq!(used_n4(&c), vec![node_a(&c)]);
        for t in [&w, &*c] {
            t.check().unwrap();
            assert_eq!(t.len(), 2);
        }
    }

    /// A delete that empties a chain of nodes cuts the whole chain with one store and
    /// frees every node of it; an unclean open of the image then finds nothing to repair.
    #[test]
    fn a_delete_cuts_the_emptied_chain_at_once() {
        let c = ArtCow::open_with(sim("artcow", Mode::Adr), Options::default()).unwrap();
        c.put(b"q", b"0").unwrap();
        for k in [&b"qa1"[..], b"qa2", b"qab1", b"qab2"] {
            c.put(k, b"v").unwrap();
        }
        for k in [&b"qa1"[..], b"qa2", b"qab1"] {
            assert!(c.delete(k).unwrap());
        }
        c.check().unwrap();
        assert_eq!(used_n4(&c).len(), 3, "a chain of three Node4s under q");
        assert!(c.delete(b"qab2").unwrap());
        c.check().unwrap();
        // Left: the Node4 under "q" holding only its terminal leaf "q" (nodes do not shrink).
        assert_eq!(used_n4(&c), vec![node_q(&c)], "every node of the cut chain is freed");
        let img = c.pool().sim().unwrap().image_now(c.pool(), Eviction::None);
        let o = PoolOptions::default().mode(Mode::Adr).max_size(256 << 20);
        let r = ArtCow::open_with(Arc::new(Pool::from_image(&img, Some("artcow"), &o).unwrap()), Options::default())
            .unwrap();
        assert!(!r.recovery_report().clean_shutdown);
        assert_eq!(r.len(), 1);
        r.check().unwrap();
    }

    /// A WOART pool is not opened as ART+CoW (nor the other way round): the superblock's
    /// magic names the variant.
    #[test]
    fn the_variants_refuse_each_others_pools() {
        let w = Woart::open_with(sim("woart", Mode::Eadr), Options::default()).unwrap();
        w.put(b"k", b"v").unwrap();
        let img = w.pool().sim().unwrap().image_now(w.pool(), Eviction::None);
        let o = PoolOptions::default().mode(Mode::Eadr).max_size(256 << 20);
        let e = ArtCow::open_with(Arc::new(Pool::from_image(&img, None, &o).unwrap()), Options::default());
        assert!(matches!(e, Err(crate::Error::Corrupt(m)) if m.contains("artcow")));
    }

    /// Keys that are each a prefix of the next make a chain of one node per byte; the
    /// open's walk and the scans use explicit stacks, so a thread with a small stack
    /// walks, scans and reopens it.
    #[test]
    fn a_deep_chain_needs_no_deep_stack() {
        let run = || {
            for v in [Variant::Woart, Variant::ArtCow] {
                let pool = sim(v.name(), Mode::Eadr);
                let t = crate::recovery::open(pool, v).unwrap();
                let n = 3000;
                for i in 1..=n {
                    t.put(&vec![b'a'; i], &i.to_le_bytes()).unwrap();
                }
                let mut seen = 0;
                t.scan(&pmkv_core::KeyRange::all(), usize::MAX, true, &mut |k, _| {
                    seen += 1;
                    k.len() == n + 1 - seen
                })
                .unwrap();
                assert_eq!(seen, n);
                t.check().unwrap();
                let img = t.pool().sim().unwrap().image_now(t.pool(), Eviction::None);
                let o = PoolOptions::default().mode(Mode::Eadr).max_size(256 << 20);
                let pool = Arc::new(Pool::from_image(&img, Some(v.name()), &o).unwrap());
                drop(t);
                let r = crate::recovery::open(pool, v).unwrap();
                assert_eq!(r.len(), n as u64);
            }
        };
        std::thread::Builder::new().stack_size(256 << 10).spawn(run).unwrap().join().unwrap();
    }
}
