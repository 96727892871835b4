//! Format 3's inline entries: which pairs live in the leaf entry, keys whose key word an
//! inline entry would share (both become records, and an inline entry again once the
//! tie is gone), value words that cannot be inline, and a format 2 pool refused.

use pmkv_fastfair::{Error, FastFair};
use pmkv_substrate::{Eviction, Mode, Pool};
use pmkv_testutil::{native_contents as contents, read_bytes, sim_opts};
use std::sync::Arc;

fn tree() -> FastFair {
    let pool = Arc::new(Pool::create_sim("fastfair", &sim_opts(8 << 20).mode(Mode::Adr)).expect("sim pool"));
    FastFair::open(pool).expect("format")
}

fn get(t: &FastFair, k: &[u8]) -> Option<Vec<u8>> {
    let mut out = None;
    t.get_with(k, &mut |v| out = Some(v.to_vec())).unwrap();
    out
}

/// PM bytes the tree's records hold (`memory`'s "records" row).
fn record_bytes(t: &FastFair) -> u64 {
    t.memory().iter().find(|(n, _)| n == "records").map(|r| r.1).unwrap()
}

#[test]
fn an_8_byte_pair_is_inline_and_a_tie_makes_records() {
    let t = tree();
    t.put(b"abcdefgh", b"12345678").unwrap();
    assert_eq!(record_bytes(&t), 0, "an 8-byte key with an 8-byte value needs no record");
    // A longer key with the same first 8 bytes: the inline entry becomes a record too.
    t.put(b"abcdefgh+more", b"x").unwrap();
    let two = record_bytes(&t);
    assert!(two > 0);
    t.check().unwrap();
    // While the tie lasts an update of the 8-byte key stays a record.
    t.put(b"abcdefgh", b"87654321").unwrap();
    assert_eq!(record_bytes(&t), two);
    assert_eq!(get(&t, b"abcdefgh").as_deref(), Some(&b"87654321"[..]));
    assert_eq!(get(&t, b"abcdefgh+more").as_deref(), Some(&b"x"[..]));
    // A short key whose zero-padded key word is another 8-byte key's.
    t.put(b"abc\0\0\0\0\0", b"zeropad!").unwrap();
    t.put(b"abc", b"shortkey").unwrap();
    assert_eq!(get(&t, b"abc\0\0\0\0\0").as_deref(), Some(&b"zeropad!"[..]));
    assert_eq!(get(&t, b"abc").as_deref(), Some(&b"shortkey"[..]));
    t.check().unwrap();
    // Tie gone: the next update puts the value inline and frees the record.
    assert!(t.delete(b"abcdefgh+more").unwrap());
    assert!(t.delete(b"abc").unwrap());
    t.put(b"abcdefgh", b"inline!!").unwrap();
    t.put(b"abc\0\0\0\0\0", b"inline:)").unwrap();
    assert_eq!(record_bytes(&t), 0);
    assert_eq!(get(&t, b"abcdefgh").as_deref(), Some(&b"inline!!"[..]));
    t.check().unwrap();
}

#[test]
fn value_words_that_cannot_be_inline_are_records() {
    let t = tree();
    // The word 0 ends a leaf's entries; a record-shaped word names a record.
    let zero = [0u8; 8];
    let rec_shaped = (0xffffu64 << 48 | 0x1000).to_le_bytes();
    t.put(b"key-0001", &zero).unwrap();
    t.put(b"key-0002", &rec_shaped).unwrap();
    assert!(record_bytes(&t) > 0);
    assert_eq!(get(&t, b"key-0001").as_deref(), Some(&zero[..]));
    assert_eq!(get(&t, b"key-0002").as_deref(), Some(&rec_shaped[..]));
    // Equal inline values in neighbouring entries (value words repeat).
    for i in 0..300u32 {
        t.put(format!("eq-{i:05}").as_bytes(), b"samesame").unwrap();
    }
    for i in (0..300u32).step_by(3) {
        assert!(t.delete(format!("eq-{i:05}").as_bytes()).unwrap());
    }
    let got = contents(&t);
    assert_eq!(got.len(), 2 + 200);
    assert!(got.iter().filter(|(k, _)| k.starts_with(b"eq-")).all(|(_, v)| v == b"samesame"));
    t.check().unwrap();
}

#[test]
fn format_2_is_refused_with_a_version_error() {
    let t = tree();
    t.put(b"abcdefgh", b"12345678").unwrap();
    let pool = t.pool().clone();
    let sb = pool.root(1);
    let mut img = pool.sim().unwrap().image_now(&pool, Eviction::All);
    drop(t);
    // The superblock's version word (bytes 8..12) set to 2, its CRC (of bytes 0..24)
    // made right again: only the version is wrong.
    let at = sb as usize;
    img[at + 8..at + 12].copy_from_slice(&2u32.to_le_bytes());
    let crc = crc32c::crc32c(&img[at..at + 24]);
    img[at + 24..at + 28].copy_from_slice(&crc.to_le_bytes());
    let p = Arc::new(Pool::from_image(&img, Some("fastfair"), &sim_opts(8 << 20).mode(Mode::Adr)).unwrap());
    let before = read_bytes(&p, sb, 64);
    match FastFair::open(p.clone()) {
        Err(Error::Version(m)) => assert!(m.contains("version 2"), "{m}"),
        Err(e) => panic!("not a version error: {e}"),
        Ok(_) => panic!("a format 2 pool opened"),
    }
    assert_eq!(read_bytes(&p, sb, 64), before, "a refused open changed the superblock");
}
