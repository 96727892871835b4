//! Structured reports: what `check` found, what recovery did, where memory goes.
//!
//! Front ends print these, the server serves them in INFO, bindings return them as
//! objects: each is data with a `Display`, not a preformatted string.

use std::fmt;
use std::time::Duration;

/// What an integrity check found (SPEC P7, R1).
#[non_exhaustive]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// The engine checked.
    pub engine: String,
    /// Each violated invariant, one line each. Empty: the pool is sound.
    pub problems: Vec<String>,
    /// What was counted on the way (records, chunks, objects, ...), by name.
    pub facts: Vec<(String, String)>,
}

impl CheckReport {
    /// An empty report for `engine`.
    pub fn new(engine: impl Into<String>) -> CheckReport {
        CheckReport { engine: engine.into(), ..CheckReport::default() }
    }
    /// Whether no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
    /// Record a fact.
    pub fn fact(&mut self, name: impl Into<String>, value: impl fmt::Display) -> &mut Self {
        self.facts.push((name.into(), value.to_string()));
        self
    }
    /// Record a problem.
    pub fn problem(&mut self, what: impl Into<String>) -> &mut Self {
        self.problems.push(what.into());
        self
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_ok() {
            write!(f, "{}: OK", self.engine)?;
        } else {
            write!(f, "{}: {} problem(s)", self.engine, self.problems.len())?;
        }
        for (k, v) in &self.facts {
            if v.contains('\n') {
                // A report of its own (an allocator check's table): its lines, indented, as
                // they are; a "summary:" before its first line would read as part of it.
                for line in v.lines() {
                    write!(f, "\n  {line}")?;
                }
            } else {
                write!(f, "\n  {k}: {v}")?;
            }
        }
        for p in &self.problems {
            write!(f, "\n  PROBLEM: {p}")?;
        }
        Ok(())
    }
}

/// What opening a store did to bring it to a consistent state (SPEC H5, N6, M8).
#[non_exhaustive]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The engine.
    pub engine: String,
    /// The pool was closed cleanly (no crash recovery was needed).
    pub clean_shutdown: bool,
    /// Records found.
    pub records: u64,
    /// Interrupted operations completed from their logs.
    pub rolled_forward: u64,
    /// Interrupted operations undone from their logs.
    pub rolled_back: u64,
    /// Persistent objects that nothing referenced and were freed (orphans of a crash).
    pub orphans_freed: u64,
    /// Time the open's recovery took (rebuilding DRAM structures included).
    pub duration: Duration,
    /// Engine-specific figures, by name.
    pub details: Vec<(String, String)>,
}

impl RecoveryReport {
    /// An empty report for `engine`.
    pub fn new(engine: impl Into<String>) -> RecoveryReport {
        RecoveryReport { engine: engine.into(), ..RecoveryReport::default() }
    }

    /// Adds an engine-specific figure (kept in `details`, shown by `Display`).
    pub fn with_detail(mut self, name: impl Into<String>, value: impl ToString) -> RecoveryReport {
        self.details.push((name.into(), value.to_string()));
        self
    }

    /// The engine-specific figure `name`, as recorded.
    pub fn detail(&self, name: &str) -> Option<&str> {
        self.details.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The engine-specific figure `name` as a number; `None` if absent or not a number.
    pub fn detail_u64(&self, name: &str) -> Option<u64> {
        self.detail(name)?.parse().ok()
    }
}

impl fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} shutdown; {} records in {:.3} ms; rolled forward {}, rolled back {}; orphans freed {}",
            self.engine,
            if self.clean_shutdown { "clean" } else { "unclean" },
            self.records,
            self.duration.as_secs_f64() * 1e3,
            self.rolled_forward,
            self.rolled_back,
            self.orphans_freed
        )?;
        for (k, v) in &self.details {
            write!(f, "; {k} {v}")?;
        }
        Ok(())
    }
}

/// DRAM and PM bytes in use, by structure (SPEC H9).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryUsage {
    /// DRAM bytes by structure.
    pub dram: Vec<(String, u64)>,
    /// PM bytes by structure.
    pub pm: Vec<(String, u64)>,
}

impl MemoryUsage {
    /// Total DRAM bytes.
    pub fn dram_total(&self) -> u64 {
        self.dram.iter().map(|x| x.1).sum()
    }
    /// Total PM bytes.
    pub fn pm_total(&self) -> u64 {
        self.pm.iter().map(|x| x.1).sum()
    }
}

/// What [`EngineFactory::salvage`](crate::EngineFactory::salvage) found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SalvageReport {
    /// Records whose every check passed, handed to `emit` (each key once).
    pub records: u64,
    /// Records whose key was intact but whose value failed its check: lost, and listed
    /// (up to 100 keys) in `lost_keys`; and records known to be lost whose key is gone
    /// (an NBTree format-4 entry whose key word was zeroed), counted but not listed.
    pub damaged: u64,
    /// Keys found intact more than once (a delete interrupted by a crash can leave a
    /// stale copy); the first copy found was kept.
    pub duplicates: u64,
    /// Keys of damaged records (at most 100).
    pub lost_keys: Vec<Vec<u8>>,
}

#[cfg(test)]
mod tests {
    use super::{CheckReport, RecoveryReport};

    /// A one-line fact is `name: value`; a multi-line one (an allocator's report) is its
    /// lines, indented, with no name glued to its first line.
    #[test]
    fn multi_line_facts_are_blocks() {
        let mut r = CheckReport::new("x");
        r.fact("keys", 3).fact("summary", "allocator root   0x1000\nheap             0x5000");
        assert_eq!(r.to_string(), "x: OK\n  keys: 3\n  allocator root   0x1000\n  heap             0x5000");
    }

    #[test]
    fn details_are_found_by_name_and_parsed() {
        let r = RecoveryReport::new("x").with_detail("leaves", 42).with_detail("phase", "sweep");
        assert_eq!(r.detail("leaves"), Some("42"));
        assert_eq!(r.detail_u64("leaves"), Some(42));
        assert_eq!(r.detail("phase"), Some("sweep"));
        assert_eq!(r.detail_u64("phase"), None);
        assert_eq!(r.detail("missing"), None);
        assert!(r.to_string().ends_with("; leaves 42; phase sweep"), "{r}");
    }
}
