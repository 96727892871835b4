//! Pools written by older builds of pmkv, kept as files (the way redb keeps its
//! backward-compatibility fixtures), opened by this build.
//!
//! Each fixture in `tests/fixtures` was written by `scripts/format-fixtures COMMIT ENGINE
//! NAME` with the build at COMMIT (named in NAME.commit): the records of records.tsv loaded,
//! one key updated to a long value, one to a short one, one deleted, closed cleanly. NAME.tsv
//! is what that build's `pmkv dump` printed. A format this build reads must give exactly
//! those records, read-only without changing a byte of the file, and take writes; a format it
//! no longer reads must be refused with a version error, again without changing a byte.
//! The current formats have fixtures too, so that a change to a layout that forgets to bump
//! its version (or to keep reading the old one) fails here.
//!
//! The docs that name each version's changes: docs/format/.

use pmkv::{ErrorKind, KeyRange, Options, Store};
use std::io::Read;
use std::path::{Path, PathBuf};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

/// Rebuilds NAME.pool from NAME.pool.gz (see scripts/format-fixtures for the packing).
fn unpack(name: &str, dir: &Path) -> PathBuf {
    let gz = std::fs::File::open(Path::new(FIXTURES).join(format!("{name}.pool.gz"))).unwrap();
    let mut packed = Vec::new();
    flate2::read::GzDecoder::new(gz).read_to_end(&mut packed).unwrap();
    assert_eq!(&packed[..8], b"PMKVFIX1", "{name}: not a packed fixture");
    let len = u64::from_le_bytes(packed[8..16].try_into().unwrap());
    let mut image = vec![0u8; len as usize];
    for page in packed[16..].chunks(8 + 4096) {
        let index = u64::from_le_bytes(page[..8].try_into().unwrap()) as usize;
        image[index * 4096..index * 4096 + 4096].copy_from_slice(&page[8..]);
    }
    let path = dir.join(format!("{name}.pool"));
    std::fs::write(&path, image).unwrap();
    path
}

/// `pmkv dump`'s escaping undone: `\xNN` is a byte, anything else stands for itself.
fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && b.get(i + 1) == Some(&b'x') && i + 4 <= b.len() {
            out.push(u8::from_str_radix(&s[i + 2..i + 4], 16).unwrap());
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

fn expected(name: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    let text = std::fs::read_to_string(Path::new(FIXTURES).join(format!("{name}.tsv"))).unwrap();
    let records: Vec<_> = text
        .lines()
        .map(|l| {
            let (k, v) = l.split_once('\t').unwrap();
            (unescape(k), unescape(v))
        })
        .collect();
    assert!(records.len() > 100, "{name}.tsv holds {} records", records.len());
    records
}

fn all(store: &Store) -> Vec<(Vec<u8>, Vec<u8>)> {
    store.range(&KeyRange::all()).collect::<pmkv::Result<_>>().unwrap()
}

/// The version word of the engine's superblock: the 4 bytes after its 8-byte magic.
fn super_version(path: &Path, magic: &[u8; 8]) -> u32 {
    let image = std::fs::read(path).unwrap();
    let at = image.windows(8).position(|w| w == magic).expect("superblock magic");
    u32::from_le_bytes(image[at + 8..at + 12].try_into().unwrap())
}

/// Opens a fixture read-only and read-write, as a user of an old pool would.
fn reads_and_writes(name: &str, engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = unpack(name, dir.path());
    let want = expected(name);
    let before = std::fs::read(&path).unwrap();

    let store = Store::open(&path, engine, &Options::default().read_only(true))
        .unwrap_or_else(|e| panic!("{name}: read-only open: {e}"));
    assert_eq!(all(&store), want, "{name}: records read-only");
    assert_eq!(store.len().unwrap(), want.len() as u64);
    assert_eq!(store.get(b"key-0013").unwrap(), None, "{name}: the deleted key");
    assert_eq!(
        store.get(b"key-0007").unwrap().as_deref(),
        Some(&b"updated-to-a-value-longer-than-eight-bytes"[..]),
        "{name}: the updated key"
    );
    let report = store.check().unwrap();
    assert!(report.is_ok(), "{name}: {report}");
    store.close().unwrap();
    assert!(std::fs::read(&path).unwrap() == before, "{name}: a read-only open changed the file");

    let store = Store::open(&path, engine, &Options::default()).unwrap_or_else(|e| panic!("{name}: open: {e}"));
    assert_eq!(all(&store), want, "{name}: records read-write");
    store.put(b"new-key", b"a value written by this build").unwrap();
    store.put(b"key-0000", b"x").unwrap();
    assert!(store.delete(b"key-0001").unwrap());
    store.close().unwrap();

    let store = Store::open(&path, engine, &Options::default().read_only(true)).unwrap();
    let mut want2 = want.clone();
    want2.retain(|(k, _)| k != b"key-0001");
    want2.iter_mut().find(|(k, _)| k == b"key-0000").unwrap().1 = b"x".to_vec();
    want2.push((b"new-key".to_vec(), b"a value written by this build".to_vec()));
    want2.sort();
    assert_eq!(all(&store), want2, "{name}: records after this build's writes");
    let report = store.check().unwrap();
    assert!(report.is_ok(), "{name} after writes: {report}");
}

/// A format this build no longer reads: a version error, and the file as it was.
fn refused(name: &str, engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = unpack(name, dir.path());
    let before = std::fs::read(&path).unwrap();
    for read_only in [true, false] {
        let err = match Store::open(&path, engine, &Options::default().read_only(read_only)) {
            Ok(_) => panic!("{name}: an unsupported format opened (read_only {read_only})"),
            Err(e) => e,
        };
        assert_eq!(err.kind(), ErrorKind::Version, "{name}: {err}");
        assert!(err.to_string().contains("version"), "{name}: the error does not say why: {err}");
        assert!(std::fs::read(&path).unwrap() == before, "{name}: a refused open changed the file");
    }
}

#[test]
fn hart_format_1_is_refused_unchanged() {
    refused("hart-v1", "hart");
}

#[test]
fn hart_format_2_is_refused_unchanged() {
    refused("hart-v2", "hart");
}

#[test]
fn hart_format_3_is_read_and_upgraded_by_a_write() {
    reads_and_writes("hart-v3", "hart");
}

#[test]
fn hart_format_4_is_read_and_upgraded_by_a_write() {
    reads_and_writes("hart-v4", "hart");
}

#[test]
fn hart_format_5_is_read_and_upgraded_by_a_write() {
    reads_and_writes("hart-v5", "hart");
}

#[test]
fn hart_format_6_is_read_and_upgraded_by_a_write() {
    reads_and_writes("hart-v6", "hart");
}

#[test]
fn hart_format_7_is_read_and_upgraded_by_a_write() {
    reads_and_writes("hart-v7", "hart");
}

/// A read-write open of an older HART pool marks it format 8 (docs/format/hart.md says
/// why and in which steps); a read-only one leaves the version as it was.
#[test]
fn hart_old_formats_are_marked_current_by_a_writable_open() {
    for (name, old) in [("hart-v3", 3), ("hart-v4", 4), ("hart-v5", 5), ("hart-v6", 6), ("hart-v7", 7)] {
        let dir = tempfile::tempdir().unwrap();
        let path = unpack(name, dir.path());
        assert_eq!(super_version(&path, b"HARTSB01"), old);
        Store::open(&path, "hart", &Options::default().read_only(true)).unwrap().close().unwrap();
        assert_eq!(super_version(&path, b"HARTSB01"), old, "{name}: read-only open changed the version");
        Store::open(&path, "hart", &Options::default()).unwrap().close().unwrap();
        assert_eq!(super_version(&path, b"HARTSB01"), 8, "{name}");
    }
}

#[test]
fn nbtree_format_1_is_read_and_written_as_format_1() {
    reads_and_writes("nbtree-v1", "nbtree");
    // Format 1 stays format 1 (the binaries that wrote it can still read it).
    let dir = tempfile::tempdir().unwrap();
    let path = unpack("nbtree-v1", dir.path());
    let store = Store::open(&path, "nbtree", &Options::default()).unwrap();
    store.put(b"a-twelve-byte", b"v").unwrap();
    store.close().unwrap();
    assert_eq!(super_version(&path, b"NBTREE01"), 1);
}

#[test]
fn nbtree_format_2_is_read_and_written_as_format_2() {
    reads_and_writes("nbtree-v2", "nbtree");
    // Format 2 stays format 2: no entry checks are added to its entries.
    let dir = tempfile::tempdir().unwrap();
    let path = unpack("nbtree-v2", dir.path());
    let store = Store::open(&path, "nbtree", &Options::default()).unwrap();
    store.put(b"k", b"12345678").unwrap();
    store.put(b"k", b"87654321").unwrap();
    store.close().unwrap();
    assert_eq!(super_version(&path, b"NBTREE01"), 2);
    let store = Store::open(&path, "nbtree", &Options::default().read_only(true)).unwrap();
    assert_eq!(store.get(b"k").unwrap().as_deref(), Some(&b"87654321"[..]));
    store.close().unwrap();
}

#[test]
fn nbtree_format_3_is_read_and_written_as_format_3() {
    reads_and_writes("nbtree-v3", "nbtree");
}

/// NBTree's batch-log flag (bit 16 of the version word, docs/format/nbtree.md): plain
/// writes leave an older pool as its builds can read it; the first atomic batch of two
/// or more operations sets the flag, keeping the format, and the pool reads back.
#[test]
fn nbtree_old_formats_get_the_batch_log_flag_from_their_first_atomic_batch() {
    for (name, v) in [("nbtree-v1", 1), ("nbtree-v2", 2), ("nbtree-v3", 3)] {
        let dir = tempfile::tempdir().unwrap();
        let path = unpack(name, dir.path());
        let store = Store::open(&path, "nbtree", &Options::default()).unwrap();
        store.put(b"plain", b"1").unwrap();
        let mut b = pmkv::WriteBatch::independent();
        b.put("independent-1", "a").put("independent-2", "b");
        store.write(&b).unwrap();
        store.close().unwrap();
        assert_eq!(super_version(&path, b"NBTREE01"), v, "{name}: no atomic batch, no flag");
        let store = Store::open(&path, "nbtree", &Options::default()).unwrap();
        let mut b = pmkv::WriteBatch::new();
        b.put("atomic-1", "a").delete("key-0002").put("atomic-2", "b");
        store.write(&b).unwrap();
        store.close().unwrap();
        assert_eq!(super_version(&path, b"NBTREE01"), v | 1 << 16, "{name}: an atomic batch sets the flag");
        let store = Store::open(&path, "nbtree", &Options::default().read_only(true)).unwrap();
        assert_eq!(store.get(b"atomic-2").unwrap().as_deref(), Some(&b"b"[..]), "{name}");
        assert_eq!(store.get(b"key-0002").unwrap(), None, "{name}");
        assert!(store.check().unwrap().is_ok(), "{name}");
    }
}

/// Format 2 (per-line checks, docs/format/mangosteen.md) no longer reads format 1's page
/// checks: a version error, and the file as it was.
#[test]
fn mangosteen_format_1_is_refused_unchanged() {
    refused("mangosteen-v1", "mangosteen");
}

#[test]
fn mangosteen_format_2_is_read_and_upgraded_by_a_write() {
    reads_and_writes("mangosteen-v2", "mangosteen");
}

/// A current format: this build reads its fixture and writes it, and the version word
/// stays what it was (a change to the layout that forgets to bump the version, or to
/// read the old bytes, fails here).
fn current(name: &str, engine: &str, (magic, version): (&[u8; 8], u32)) {
    reads_and_writes(name, engine);
    let dir = tempfile::tempdir().unwrap();
    let path = unpack(name, dir.path());
    assert_eq!(super_version(&path, magic), version, "{name}: the fixture's version");
    let store = Store::open(&path, engine, &Options::default()).unwrap();
    store.put(b"written-by-this-build", b"v").unwrap();
    store.close().unwrap();
    assert_eq!(super_version(&path, magic), version, "{name}: a write changed the version");
}

#[test]
fn hart_format_8_is_current() {
    current("hart-v8", "hart", (b"HARTSB01", 8));
}

#[test]
fn mangosteen_format_3_is_current() {
    current("mangosteen-v3", "mangosteen", (b"MANGOST1", 3));
}

#[test]
fn fptree_format_1_is_current() {
    current("fptree-v1", "fptree", (b"FPTREE01", 1));
}

/// Format 1 (512-byte nodes, the lock word in the node header) is refused: format 2's
/// nodes are 1 KB.
#[test]
fn fastfair_format_1_is_refused_unchanged() {
    refused("fastfair-v1", "fastfair");
}

/// Format 2 (every record out of line, checked) is refused since format 3 keeps 8-byte
/// keys with 8-byte values inline in the leaf entries.
#[test]
fn fastfair_format_2_is_refused_unchanged() {
    refused("fastfair-v2", "fastfair");
}

#[test]
fn fastfair_format_3_is_current() {
    current("fastfair-v3", "fastfair", (b"FASTFAIR", 3));
}

/// Format 1 (every value after the key, an update a new leaf) is refused: format 2
/// keeps values of at most 8 bytes in the leaf's value word and updates them in place.
#[test]
fn woart_format_1_is_refused_unchanged() {
    refused("woart-v1", "woart");
}

#[test]
fn artcow_format_1_is_refused_unchanged() {
    refused("artcow-v1", "artcow");
}

#[test]
fn woart_format_2_is_current() {
    current("woart-v2", "woart", (b"WOART\0\0\0", 2));
}

#[test]
fn artcow_format_2_is_current() {
    current("artcow-v2", "artcow", (b"ARTCOW\0\0", 2));
}
