//! Every write path of WOART and of ART+CoW under the crash simulator, in `adr` (every flush and fence
//! is a crash point; images keep what was persisted, plus random lines or torn 8-byte
//! words) and in `eadr` (every PM store is a crash point): leaf inserts into each node
//! kind, the growths Node4 → 16 → 48 → 256, path-compression splits (inside the 4 header
//! bytes and beyond them, and a key that ends inside a prefix), keys that end at a node,
//! updates (out of place, and in place in a leaf's value word), deletes that empty and unlink nodes (ART+CoW: copies of every kind, removals
//! from Node4/16/48 by copy, cut-off chains). The recovered tree must pass `check` (no
//! leak, every object verified) and hold exactly the state before or after the op.

use pmkv_substrate::Mode;
use pmkv_testutil::{probe_write, NativeCrash, Op};
use pmkv_woart::{WoartFactory, ARTCOW_FACTORY, FACTORY};

/// Run `ops` on a fresh simulated pool in `mode` with the tree of factory `f` (WOART's or
/// ART+CoW's), under the kit's crash harness: every crash point of each op, and each
/// recovered tree must take a write and its delete. Returns the images checked.
fn explore(ops: &[Op], mode: Mode, f: &'static WoartFactory) -> u64 {
    let mut run = NativeCrash::new(f, mode);
    run.seed = 0x00c0_ffee;
    run.live_on = Some(probe_write);
    run.explore(ops, |_| true)
}

fn workload() -> Vec<Op> {
    let v = |i: usize| vec![i as u8; [1, 8, 30, 300][i % 4]];
    let mut ops = Vec::new();
    // 60 children under "k": Node4 → 16 → 48 → 256 growths at depth 1.
    for i in 0..60usize {
        ops.push(Op::Put(vec![b'k', b'0' + i as u8], v(i)));
    }
    // A Node16 under "m" and a Node48 under "n" (ART+CoW copies them whole).
    for i in 0..6usize {
        ops.push(Op::Put(vec![b'm', b'a' + i as u8, b'x'], v(i)));
    }
    for i in 0..17usize {
        ops.push(Op::Put(vec![b'n', b'a' + i as u8], v(i)));
    }
    // A key ending at a node, long shared prefixes and their splits.
    ops.push(Op::Put(b"k".to_vec(), v(1)));
    ops.push(Op::Put(b"k0abcdefghij".to_vec(), v(2)));
    ops.push(Op::Put(b"k0abcdefgXYZ".to_vec(), v(3)));
    ops.push(Op::Put(b"k0abQ".to_vec(), v(4)));
    ops.push(Op::Put(b"k0abcd".to_vec(), v(5)));
    ops.push(Op::Put(b"k0a".to_vec(), v(6)));
    // Updates of every kind of slot.
    ops.push(Op::Put(b"k".to_vec(), v(7)));
    ops.push(Op::Put(b"k0abcdefghij".to_vec(), v(8)));
    ops.push(Op::Put(b"k5".to_vec(), v(9)));
    // In place (a value of at most 8 bytes over one of the same length): a child's leaf
    // with 1- and 8-byte values, and a terminal leaf.
    ops.push(Op::Put(b"k0abQ".to_vec(), v(12)));
    ops.push(Op::Put(b"k1".to_vec(), v(13)));
    ops.push(Op::Put(b"k".to_vec(), v(1)));
    ops.push(Op::Put(b"k".to_vec(), v(5)));
    // Deletes that empty nodes, then inserts into what is left.
    for k in [&b"k0abcdefgXYZ"[..], b"k0abcdefghij", b"k0abcd", b"k0abQ", b"k0a", b"k"] {
        ops.push(Op::Delete(k.to_vec()));
    }
    ops.push(Op::Put(b"k0abzz".to_vec(), v(10)));
    // Removals from a Node16 and a Node48 (in place for WOART, by copy for ART+CoW).
    ops.push(Op::Delete(b"mbx".to_vec()));
    ops.push(Op::Delete(b"nc".to_vec()));
    for i in (0..60usize).step_by(7) {
        ops.push(Op::Delete(vec![b'k', b'0' + i as u8]));
    }
    ops
}

/// The workload under every crash point of `mode` for the tree of `f`.
fn run(mode: Mode, f: &'static WoartFactory) {
    let n = explore(&workload(), mode, f);
    eprintln!("{f:?} {mode:?}: {n} crash images checked");
}

/// One test per (mode, variant), so each runs (and fails) on its own.
macro_rules! crash_tests {
    ($($name:ident: $mode:expr, $v:expr;)*) => {
        $(
            #[test]
            fn $name() {
                run($mode, $v);
            }
        )*
    };
}

crash_tests! {
    adr_every_crash_point: Mode::Adr, &FACTORY;
    eadr_every_store_point: Mode::Eadr, &FACTORY;
    artcow_adr_every_crash_point: Mode::Adr, &ARTCOW_FACTORY;
    artcow_eadr_every_store_point: Mode::Eadr, &ARTCOW_FACTORY;
}
