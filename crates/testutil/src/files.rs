//! Pool files for tests that inspect, copy or damage them: a good pool to start from, files
//! of given bytes, and damaged copies of a good pool.

use pmkv_substrate::header::Immutable;
use pmkv_substrate::{Pool, PoolOptions};
use std::path::{Path, PathBuf};

/// Create a pool file at `path` with layout `layout` holding `data` (persisted) in its
/// heap, with root `root` pointing at it, and close it cleanly; returns the data's offset.
/// The good pool that tests of reading, locking, `pmkv info` and damaged headers start
/// from.
#[track_caller]
pub fn write_pool(path: &Path, layout: &str, opts: &PoolOptions, root: usize, data: &[u8]) -> u64 {
    let pool = Pool::create(path, layout, opts).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    let off = pool.take_heap(data.len() as u64, 64).expect("heap for the data");
    crate::write_bytes(&pool, off, data);
    pool.persist_off(off, data.len());
    pool.set_root(root, off);
    pool.close().unwrap_or_else(|e| panic!("close {}: {e}", path.display()));
    off
}

/// Write `contents` to a new file `name` in `dir` and return its path: inputs for the
/// CLI, and files that are not pools.
#[track_caller]
pub fn write_file(dir: &Path, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path
}

/// The bytes `good` changed by `patch`, written to a new file `name` in `dir`; returns its
/// path: one damaged (or forged) variant of a good pool file.
#[track_caller]
pub fn patched_copy(dir: &Path, name: &str, good: &[u8], patch: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let mut bytes = good.to_vec();
    patch(&mut bytes);
    write_file(dir, name, bytes)
}

/// Make the pool file bytes `b` (of a good pool of this build's format) say format version
/// `version`, with a valid header checksum: a well-formed pool of another version, which an
/// open must tell from a corrupt one.
#[track_caller]
pub fn forge_version(b: &mut [u8], version: u32) {
    let mut imm = Immutable::read(b, Path::new("forged")).unwrap_or_else(|e| panic!("not a good pool header: {e}"));
    imm.version = version;
    imm.write(b);
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmkv_substrate::header::FORMAT_VERSION;
    use pmkv_substrate::{Mode, PoolError};

    #[test]
    fn a_written_pool_is_clean_and_holds_its_data() {
        let (_dir, path) = crate::pool_file("w.pool");
        let opts = crate::pool_opts(Mode::Adr, 64 << 10, 1 << 20);
        let off = write_pool(&path, "t", &opts, 3, b"persisted data");
        let pool = Pool::open_read_only(&path, Some("t"), &opts).unwrap();
        assert!(pool.was_clean(), "closed cleanly");
        assert_eq!(pool.root(3), off);
        assert_eq!(crate::read_bytes(&pool, off, 14), b"persisted data");
    }

    #[test]
    fn files_and_patched_copies() {
        let dir = crate::pool_dir();
        let p = write_file(dir.path(), "a.txt", "alpha\n");
        assert_eq!((p.parent(), std::fs::read(&p).unwrap()), (Some(dir.path()), b"alpha\n".to_vec()));
        let q = patched_copy(dir.path(), "b.txt", b"alpha\n", |b| b[0] = b'A');
        assert_eq!(std::fs::read(q).unwrap(), b"Alpha\n");
        assert_eq!(std::fs::read(&p).unwrap(), b"alpha\n", "the original is left alone");
        let empty = patched_copy(dir.path(), "c.txt", b"xyz", Vec::clear);
        assert_eq!(std::fs::metadata(empty).unwrap().len(), 0);
    }

    #[test]
    fn a_forged_version_is_another_version_not_damage() {
        let dir = crate::pool_dir();
        let good = dir.path().join("good.pool");
        let opts = crate::pool_opts(Mode::Adr, 64 << 10, 1 << 20);
        write_pool(&good, "t", &opts, 0, b"x");
        let good = std::fs::read(good).unwrap();
        let v2 = patched_copy(dir.path(), "v2.pool", &good, |b| forge_version(b, FORMAT_VERSION + 1));
        match Pool::open(&v2, None, &opts) {
            Err(PoolError::Version { found, .. }) => assert_eq!(found, FORMAT_VERSION + 1),
            other => panic!("expected a version error, got {:?}", other.map(|_| ())),
        }
        let same = patched_copy(dir.path(), "v1.pool", &good, |b| forge_version(b, FORMAT_VERSION));
        assert_eq!(std::fs::read(same).unwrap(), good, "forging the same version changes nothing");
    }
}
