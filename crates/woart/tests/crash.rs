//! Every write path of WOART and of ART+CoW under the crash simulator, in `adr` (every flush and fence
//! is a crash point; images keep what was persisted, plus random lines or torn 8-byte
//! words) and in `eadr` (every PM store is a crash point): leaf inserts into each node
//! kind, the growths Node4 → 16 → 48 → 256, path-compression splits (inside the 4 header
//! bytes and beyond them, and a key that ends inside a prefix), keys that end at a node,
//! updates, deletes that empty and unlink nodes (ART+CoW: copies of every kind, removals
//! from Node4/16/48 by copy, cut-off chains). The recovered tree must pass `check` (no
//! leak, every object verified) and hold exactly the state before or after the op.

use pmkv_substrate::{Eviction, Mode, Pool};
use pmkv_testutil::sim_opts;
use pmkv_testutil::CrashFindings;
use pmkv_testutil::{apply, model_of_scan, Model, Op};
use pmkv_woart::{ArtCow, Options, Woart};
use std::ops::Deref;
use std::sync::Arc;

/// Which of the crate's two trees a test runs.
#[derive(Clone, Copy, Debug)]
enum Variant {
    Woart,
    ArtCow,
}

impl Variant {
    fn layout(self) -> &'static str {
        match self {
            Variant::Woart => "woart",
            Variant::ArtCow => "artcow",
        }
    }
    fn open(self, pool: Pool) -> Result<Tree, String> {
        let pool = Arc::new(pool);
        match self {
            Variant::Woart => Woart::open_with(pool, Options::default()).map(Tree::Woart),
            Variant::ArtCow => ArtCow::open_with(pool, Options::default()).map(Tree::ArtCow),
        }
        .map_err(|e| e.to_string())
    }
}

enum Tree {
    Woart(Woart),
    ArtCow(ArtCow),
}

impl Deref for Tree {
    type Target = Woart;
    fn deref(&self) -> &Woart {
        match self {
            Tree::Woart(t) => t,
            Tree::ArtCow(t) => t,
        }
    }
}

fn contents(t: &Woart) -> Model {
    let mut out = Vec::new();
    t.scan(&pmkv_core::KeyRange::all(), usize::MAX, false, &mut |k, v| {
        out.push((k.to_vec(), v.to_vec()));
        true
    })
    .expect("scan");
    model_of_scan(out)
}

fn recover(img: &[u8], mode: Mode, v: Variant) -> Result<Tree, String> {
    let pool = Pool::from_image(img, Some(v.layout()), &sim_opts(1 << 20).mode(mode)).map_err(|e| e.to_string())?;
    v.open(pool)
}

fn evictions(seed: u64, i: u64) -> Vec<Eviction> {
    let s = seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut v = Eviction::standard(i).to_vec();
    v.extend([Eviction::Lines(s), Eviction::Words(s ^ 0x5555)]);
    v
}

/// Run `ops` on a fresh simulated pool in `mode`, checking the crash images of every
/// crash point of each op. Returns the images checked.
fn explore(ops: &[Op], mode: Mode, v: Variant) -> u64 {
    let seed = 0x00c0_ffee_u64;
    let t = v.open(Pool::create_sim(v.layout(), &sim_opts(2 << 20).mode(mode)).expect("sim pool")).expect("format");
    let stores = mode == Mode::Eadr;
    let found = CrashFindings::new();
    let mut model = Model::new();
    for (i, op) in ops.iter().enumerate() {
        let before = model.clone();
        apply(&mut model, op);
        let after = model.clone();
        let (f, desc) = (found.clone(), format!("{v:?} {mode:?} op {i} {op:?}"));
        t.pool().sim().unwrap().set_hook_with(true, stores, move |pt| {
            f.check_images(pt, evictions(seed, pt.index), &desc, |img| {
                let r = recover(img, mode, v)?;
                r.check().map_err(|e| e.to_string())?;
                let got = contents(&r);
                if got != before && got != after {
                    return Err(format!("state is neither before nor after ({} keys)", got.len()));
                }
                // Live on: the repaired tree takes writes and stays sound.
                r.put(b"k0ab-probe", b"p").map_err(|e| e.to_string())?;
                r.delete(b"k0ab-probe").map_err(|e| e.to_string())?;
                r.check().map_err(|e| e.to_string())?;
                Ok(())
            });
        });
        match op {
            Op::Put(k, v) => t.put(k, v).unwrap(),
            Op::Delete(k) => assert!(t.delete(k).unwrap()),
        }
        t.pool().sim().unwrap().clear_hook();
    }
    found.assert_none("crash consistency violated");
    assert_eq!(contents(&t), model);
    t.check().unwrap();
    let img = t.pool().sim().unwrap().image_now(t.pool(), Eviction::None);
    let r = recover(&img, mode, v).unwrap();
    r.check().unwrap();
    assert_eq!(contents(&r), model);
    found.images()
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

/// The workload under every crash point of `mode` for variant `v`.
fn run(mode: Mode, v: Variant) {
    let n = explore(&workload(), mode, v);
    eprintln!("{v:?} {mode:?}: {n} crash images checked");
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
    adr_every_crash_point: Mode::Adr, Variant::Woart;
    eadr_every_store_point: Mode::Eadr, Variant::Woart;
    artcow_adr_every_crash_point: Mode::Adr, Variant::ArtCow;
    artcow_eadr_every_store_point: Mode::Eadr, Variant::ArtCow;
}
