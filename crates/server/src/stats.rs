//! Per-command counters for `INFO commandstats`, as Redis keeps them: calls, the time
//! they took, and the calls refused before they ran (`rejected_calls`: wrong arity, a
//! busy script) or that ran and answered an error (`failed_calls`).
//!
//! One set of relaxed atomics per entry of the command table, so counting costs an
//! uncontended add and no lock. Pipelined plain GETs and SETs take the connection's fast
//! path, which counts their calls but does not time them (two clock reads would cost
//! more than the GET); `usec_per_call` divides by the calls that were timed.

use crate::command::Command;
use crate::table;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

#[derive(Default)]
struct One {
    calls: AtomicU64,
    timed: AtomicU64,
    usec: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
}

/// The counters of every command.
pub struct CommandStats {
    per: Vec<One>,
}

impl Default for CommandStats {
    fn default() -> Self {
        CommandStats { per: table::commands().iter().map(|_| One::default()).collect() }
    }
}

impl CommandStats {
    /// A call of `cmd` that ran for `took` (`None`: not timed), and whether it failed.
    pub fn ran(&self, cmd: &Command, took: Option<Duration>, failed: bool) {
        let o = &self.per[table::index(cmd)];
        o.calls.fetch_add(1, Relaxed);
        if let Some(t) = took {
            o.timed.fetch_add(1, Relaxed);
            o.usec.fetch_add(t.as_micros() as u64, Relaxed);
        }
        if failed {
            o.failed.fetch_add(1, Relaxed);
        }
    }

    /// `n` untimed calls of `cmd` that succeeded (the fast paths).
    pub fn ran_fast(&self, cmd: &Command, n: u64) {
        self.per[table::index(cmd)].calls.fetch_add(n, Relaxed);
    }

    /// A call of `cmd` refused before it ran.
    pub fn rejected(&self, cmd: &Command) {
        self.per[table::index(cmd)].rejected.fetch_add(1, Relaxed);
    }

    /// The `# Commandstats` section's lines, Redis's format, commands seen only.
    pub fn lines(&self) -> String {
        let mut t = String::new();
        for (cmd, o) in table::commands().iter().zip(&self.per) {
            let (calls, rejected) = (o.calls.load(Relaxed), o.rejected.load(Relaxed));
            if calls + rejected == 0 {
                continue;
            }
            let (usec, timed) = (o.usec.load(Relaxed), o.timed.load(Relaxed));
            let per_call = if timed == 0 { 0.0 } else { usec as f64 / timed as f64 };
            t.push_str(&format!(
                "cmdstat_{}:calls={calls},usec={usec},usec_per_call={per_call:.2},rejected_calls={rejected},failed_calls={}\r\n",
                cmd.name.to_ascii_lowercase().replace('.', "_"),
                o.failed.load(Relaxed)
            ));
        }
        t
    }
}
