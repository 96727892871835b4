//! Damage is never silent (SPEC P1, P7, R1), for every engine
//! with a pool file: copies of a pool are damaged at random (a flipped bit, 64 bytes of
//! garbage, a zeroed 4 KiB page), mostly where the data is, and each copy is opened
//! read-only and read whole, by cursor and key by key. Every read must return exactly
//! what was written or fail with an error — never other data, never a panic — and a
//! refused or read-only open must leave the copy byte for byte as it was. `check` may
//! pass only on a copy that read back exactly. Engines that salvage must salvage only
//! records that were written.

use crate::util::*;
use pmkv::{EngineFactory, KeyRange, Store};
use pmkv_testutil::XorShift;

/// Read every record of `s` by cursor and every key of `m` by `get`: `Ok(true)` if all
/// came back exactly, `Ok(false)` if some read failed with an error, `Err` on wrong data.
fn read_all(s: &Store, m: &Model) -> Result<bool, String> {
    let mut exact = true;
    let mut seen = Model::new();
    for r in s.range(&KeyRange::all()) {
        match r {
            Ok((k, v)) => {
                if m.get(&k) != Some(&v) {
                    return Err(format!("the cursor returned {k:x?} = {v:x?}, which was never written"));
                }
                seen.insert(k, v);
            }
            Err(_) => {
                exact = false;
                break;
            }
        }
    }
    if exact && seen != *m {
        return Err(format!("the cursor ended cleanly with {} of {} records", seen.len(), m.len()));
    }
    for (k, v) in m {
        match s.get(k) {
            Ok(Some(got)) if &got == v => {}
            Ok(Some(got)) => return Err(format!("get {k:x?} returned {got:x?}, not {v:x?}")),
            Ok(None) => return Err(format!("get {k:x?} says absent without an error")),
            Err(_) => exact = false,
        }
    }
    Ok(exact)
}

/// See the module doc.
pub fn damaged_copies_read_right_or_fail(f: &'static dyn EngineFactory) {
    if !f.info().persistent {
        return; // nothing on a file to damage
    }
    let d = pool_dir();
    let (s, path) = fresh(f, &d);
    let mut m = Model::new();
    fill(
        &s,
        &mut m,
        (0..800u32).map(|i| (format!("k{i:04}").into_bytes(), tagged_value(b"k", i, [4, 8, 30, 200][i as usize % 4]))),
    );
    fill(&s, &mut m, (0..20u32).map(|i| (vec![b'L'; 60 + i as usize], vec![i as u8; 9])));
    for i in (0..800u32).step_by(5) {
        let k = format!("k{i:04}").into_bytes();
        s.delete(&k).unwrap();
        m.remove(&k);
    }
    // Same-length updates of short values: an engine may keep them in place or, as HART
    // in adr does, alternate them between two slots; either must read right or fail.
    for (step, tag) in [(3u32, b"u"), (9, b"w")] {
        for i in (0..800u32)
            .step_by(step as usize)
            .filter(|i| i % 5 != 0 && [4, 8].contains(&[4, 8, 30, 200][*i as usize % 4]))
        {
            let k = format!("k{i:04}").into_bytes();
            let v = tagged_value(tag, i, [4, 8, 30, 200][i as usize % 4]);
            s.put(&k, &v).unwrap();
            m.insert(k, v);
        }
    }
    s.close().unwrap();
    let good = std::fs::read(&path).unwrap();
    // Where the data is: up to the last non-zero page.
    let used = good.chunks(4096).rposition(|p| p.iter().any(|&b| b != 0)).map_or(good.len(), |i| (i + 1) * 4096);
    let mut rng = XorShift::new(0x9e37_79b9_7f4a_7c15 ^ f.info().name.len() as u64);
    let copy = d.path().join("damaged.pool");
    let ro = opts().read_only(true).create(false);
    let (mut exact, mut refused) = (0, 0);
    for c in 0..60 {
        let mut b = good.clone();
        let at = rng.below(used as u64) as usize;
        let what = match rng.below(3) {
            0 => {
                b[at] ^= 1 << rng.below(8);
                format!("bit flipped at {at:#x}")
            }
            1 => {
                let at = at.min(b.len() - 64);
                b[at..at + 64].iter_mut().for_each(|x| *x = rng.next_u64() as u8);
                format!("64 bytes of garbage at {at:#x}")
            }
            _ => {
                let at = at / 4096 * 4096;
                b[at..at + 4096].fill(0);
                format!("page {at:#x} zeroed")
            }
        };
        std::fs::write(&copy, &b).unwrap();
        let ctx = format!("{}: copy {c}: {what}", f.info().name);
        match Store::open_with(f, &copy, &ro) {
            Ok(s) => {
                let ok = read_all(&s, &m).unwrap_or_else(|e| panic!("{ctx}: {e}"));
                let checked = s.check().map(|r| r.is_ok()).unwrap_or(false);
                assert!(!checked || ok, "{ctx}: check passes but reads failed");
                if ok {
                    exact += 1;
                } else {
                    refused += 1;
                }
            }
            Err(_) => refused += 1,
        }
        assert!(std::fs::read(&copy).unwrap() == b, "{ctx}: a read-only open changed the file");
        // Salvage, where the engine has it, never invents a record.
        let mut invented = None;
        let r = f.salvage(&b, &mut |k, v| {
            if m.get(k).map(Vec::as_slice) != Some(v) && invented.is_none() {
                invented = Some(format!("{k:x?} = {v:x?}"));
            }
            Ok(())
        });
        if r.is_ok() {
            assert!(invented.is_none(), "{ctx}: salvage produced {}", invented.unwrap());
        }
    }
    eprintln!("{}: 60 damaged copies: {exact} read exactly, {refused} refused or failed reads, 0 wrong", f.info().name);
    assert!(exact + refused == 60 && refused > 0, "the damage must have hit something");
}
