//! LMDB (through the `heed` crate) adapted to [`pmkv::Engine`], in two durability variants:
//!
//! * [`LmdbVariant::WriteMapNoSync`] (`lmdb-wm-nosync`): `MDB_WRITEMAP | MDB_NOSYNC` — commits
//!   write straight into a shared file mapping and never sync: a committed transaction
//!   **survives a process crash** (the page cache has it) **but not a power loss** or kernel
//!   crash. The closest analogue of pmkv's `eadr` promise on real PM.
//! * [`LmdbVariant::Synced`] (`lmdb-sync`): default flags — every commit is written and
//!   `fdatasync`ed: **durable against power loss** on a real disk. (On tmpfs, e.g. /dev/shm,
//!   the sync is nearly free, so there it measures LMDB's software path only.)
//!
//! Every `put`/`delete` is its own write transaction and every `get`/`scan` its own read
//! transaction, which is what a key-value API call means for pmkv's engines too.

use heed::types::Bytes;
use heed::{Database, Env, EnvFlags, EnvOpenOptions};
use pmkv::{CheckReport, Direction, Engine, EngineInfo, Error, ErrorKind, KeyRange, MemoryUsage, Result, Visitor};
use std::path::{Path, PathBuf};

/// Address space reserved for the map (sparse: only pages in use take memory or disk).
const MAP_SIZE: usize = 32 << 30;

/// Which durability LMDB is run with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LmdbVariant {
    WriteMapNoSync,
    Synced,
}

impl LmdbVariant {
    pub const ALL: [LmdbVariant; 2] = [LmdbVariant::WriteMapNoSync, LmdbVariant::Synced];

    pub fn name(self) -> &'static str {
        match self {
            LmdbVariant::WriteMapNoSync => "lmdb-wm-nosync",
            LmdbVariant::Synced => "lmdb-sync",
        }
    }

    /// What a committed write survives.
    pub fn durability(self) -> &'static str {
        match self {
            LmdbVariant::WriteMapNoSync => "survives a process crash, not power loss (MDB_WRITEMAP|MDB_NOSYNC)",
            LmdbVariant::Synced => "durable against power loss (fdatasync per commit)",
        }
    }

    fn flags(self) -> EnvFlags {
        match self {
            LmdbVariant::WriteMapNoSync => EnvFlags::WRITE_MAP | EnvFlags::NO_SYNC,
            LmdbVariant::Synced => EnvFlags::empty(),
        }
    }
}

/// One LMDB environment (a directory holding `data.mdb` and `lock.mdb`) with its unnamed
/// database.
pub struct Lmdb {
    env: Env,
    db: Database<Bytes, Bytes>,
    variant: LmdbVariant,
    dir: PathBuf,
}

fn err(e: heed::Error) -> Error {
    Error::new(ErrorKind::Io, format!("lmdb: {e}"))
}

impl Lmdb {
    /// Open (with `create`, create) the environment in directory `dir`.
    pub fn open(dir: &Path, variant: LmdbVariant, create: bool) -> Result<Lmdb> {
        if create {
            std::fs::create_dir_all(dir).map_err(|e| Error::new(ErrorKind::Io, format!("{}: {e}", dir.display())))?;
        } else if !dir.join("data.mdb").exists() {
            return Err(Error::new(ErrorKind::NotFound, format!("{}: no LMDB environment", dir.display())));
        }
        let mut opts = EnvOpenOptions::new();
        opts.map_size(MAP_SIZE).max_readers(512).max_dbs(1);
        // SAFETY: NO_SYNC and WRITE_MAP only weaken durability (documented above) and let
        // stray writes through the map corrupt the file; nothing here writes through the map
        // except LMDB itself. The environment is opened once per path in this process.
        let env = unsafe {
            opts.flags(variant.flags());
            opts.open(dir)
        }
        .map_err(err)?;
        let mut wtxn = env.write_txn().map_err(err)?;
        let db: Database<Bytes, Bytes> = env.create_database(&mut wtxn, None).map_err(err)?;
        wtxn.commit().map_err(err)?;
        Ok(Lmdb { env, db, variant, dir: dir.to_path_buf() })
    }

    pub fn variant(&self) -> LmdbVariant {
        self.variant
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Engine for Lmdb {
    fn info(&self) -> EngineInfo {
        EngineInfo::new(self.variant.name(), self.variant.durability()).persistent(true).limits(511, usize::MAX)
    }

    fn get_with(&self, key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        let rtxn = self.env.read_txn().map_err(err)?;
        match self.db.get(&rtxn, key).map_err(err)? {
            Some(v) => {
                f(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut wtxn = self.env.write_txn().map_err(err)?;
        self.db.put(&mut wtxn, key, value).map_err(err)?;
        wtxn.commit().map_err(err)
    }

    fn delete(&self, key: &[u8]) -> Result<bool> {
        let mut wtxn = self.env.write_txn().map_err(err)?;
        let found = self.db.delete(&mut wtxn, key).map_err(err)?;
        wtxn.commit().map_err(err)?;
        Ok(found)
    }

    fn scan(&self, range: &KeyRange, dir: Direction, limit: usize, f: Visitor<'_>) -> Result<()> {
        if range.is_empty() {
            return Ok(());
        }
        let rtxn = self.env.read_txn().map_err(err)?;
        let bounds = (range.start_bound(), range.end_bound());
        let mut visit = |item: heed::Result<(&[u8], &[u8])>| -> Result<bool> {
            let (k, v) = item.map_err(err)?;
            Ok(f(k, v))
        };
        match dir {
            Direction::Forward => {
                for item in self.db.range(&rtxn, &bounds).map_err(err)?.take(limit) {
                    if !visit(item)? {
                        break;
                    }
                }
            }
            Direction::Reverse => {
                for item in self.db.rev_range(&rtxn, &bounds).map_err(err)?.take(limit) {
                    if !visit(item)? {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    fn len(&self) -> u64 {
        self.env.read_txn().ok().and_then(|t| self.db.len(&t).ok()).unwrap_or(0)
    }

    fn memory(&self) -> MemoryUsage {
        let pages = self.env.non_free_pages_size().unwrap_or(0);
        MemoryUsage { dram: vec![], pm: vec![("lmdb pages in use (mapped file)".into(), pages)] }
    }

    fn check(&self) -> Result<CheckReport> {
        let mut r = CheckReport::new(self.variant.name());
        r.fact("records", self.len());
        Ok(r)
    }

    fn sync(&self) -> Result<()> {
        self.env.force_sync().map_err(err)
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }

    fn poison(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_variants_round_trip_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        for v in LmdbVariant::ALL {
            let p = dir.path().join(v.name());
            {
                let e = Lmdb::open(&p, v, true).unwrap();
                e.put(b"b", b"2").unwrap();
                e.put(b"a", b"1").unwrap();
                e.put(b"c", b"3").unwrap();
                assert!(e.delete(b"c").unwrap());
                assert!(!e.delete(b"c").unwrap());
                assert_eq!(e.len(), 2);
                let mut got = Vec::new();
                e.scan(&KeyRange::all(), Direction::Forward, usize::MAX, &mut |k, v| {
                    got.push((k.to_vec(), v.to_vec()));
                    true
                })
                .unwrap();
                assert_eq!(got, vec![(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), b"2".to_vec())]);
            }
            let e = Lmdb::open(&p, v, false).unwrap();
            assert_eq!(e.len(), 2);
            let mut v2 = None;
            assert!(e.get_with(b"b", &mut |x| v2 = Some(x.to_vec())).unwrap());
            assert_eq!(v2.as_deref(), Some(&b"2"[..]));
        }
    }
}
