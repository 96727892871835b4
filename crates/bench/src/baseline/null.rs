//! The `null` engine: does nothing, so that the harness's own cost per operation is known
//! (a harness that does not weigh on what it measures).
//!
//! It answers every `get` with one 8-byte value (so the harness does the same work with
//! the result as for a hit), accepts every `put` and `delete`, and keeps no state at all:
//! its figures are the harness alone — generating or fetching the key, filling the value,
//! the dynamic call, the sampling of latencies — and every table prints them beside the
//! engines, so an engine's figure can be read as "engine + this".

use pmkv::{CheckReport, Direction, Engine, EngineInfo, KeyRange, MemoryUsage, Result, Visitor};

/// See the module doc.
pub struct Null;

/// The name in tables and on the command line.
pub const NAME: &str = "null";

static VALUE: [u8; 8] = *b"nullnull";

impl Engine for Null {
    fn info(&self) -> EngineInfo {
        EngineInfo::new(NAME, "does nothing: the benchmark harness's own cost").persistent(false)
    }

    #[inline]
    fn get_with(&self, _key: &[u8], f: &mut dyn FnMut(&[u8])) -> Result<bool> {
        f(&VALUE);
        Ok(true)
    }

    #[inline]
    fn put(&self, _key: &[u8], _value: &[u8]) -> Result<()> {
        Ok(())
    }

    #[inline]
    fn delete(&self, _key: &[u8]) -> Result<bool> {
        Ok(true)
    }

    /// `limit` records, all the same (the harness counts and touches what it is given).
    fn scan(&self, _range: &KeyRange, _dir: Direction, limit: usize, f: Visitor<'_>) -> Result<()> {
        for _ in 0..limit {
            if !f(b"", &VALUE) {
                break;
            }
        }
        Ok(())
    }

    fn len(&self) -> u64 {
        0
    }

    fn memory(&self) -> MemoryUsage {
        MemoryUsage { dram: vec![], pm: vec![] }
    }

    fn check(&self) -> Result<CheckReport> {
        Ok(CheckReport::new(NAME))
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }

    fn poison(&self) {}
}
