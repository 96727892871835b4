//! Per-command counters for `INFO commandstats`, as Redis keeps them: calls, the time
//! they took, and the calls refused before they ran (`rejected_calls`: wrong arity, a
//! busy script) or that ran and answered an error (`failed_calls`).
//!
//! One set of relaxed atomics per entry of the command table, so counting costs an
//! uncontended add and no lock. Pipelined plain GETs and SETs take the connection's fast
//! path, which counts their calls but does not time them (two clock reads would cost
//! more than the GET); `usec_per_call` divides by the calls that were timed.
//!
//! Error replies are counted per error code (the reply's first word: `ERR`,
//! `WRONGTYPE`, a script's own code), for `INFO errorstats`, as Redis counts them; at
//! most [`ERROR_CODES`] codes are kept (a script can make up any number of codes), the
//! others count in the total only.

use crate::command::Command;
use crate::table;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

/// Most error codes `INFO errorstats` lists (Redis's `ERROR_STATS_NUMBER`).
pub const ERROR_CODES: usize = 128;

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
    /// Error replies by code.
    errors: Mutex<BTreeMap<String, u64>>,
    /// Every error reply (`total_error_replies`).
    total_errors: AtomicU64,
}

impl Default for CommandStats {
    fn default() -> Self {
        CommandStats {
            per: table::commands().iter().map(|_| One::default()).collect(),
            errors: Mutex::default(),
            total_errors: AtomicU64::new(0),
        }
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

    /// An error reply `msg` sent to a client: counted under its code (its first word).
    pub fn error_reply(&self, msg: &str) {
        self.total_errors.fetch_add(1, Relaxed);
        let code = msg.split(' ').next().unwrap_or_default();
        let mut e = self.errors.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = e.get_mut(code) {
            *n += 1;
        } else if e.len() < ERROR_CODES {
            e.insert(code.to_string(), 1);
        }
    }

    /// `total_error_replies`.
    pub fn total_errors(&self) -> u64 {
        self.total_errors.load(Relaxed)
    }

    /// The `# Errorstats` section's lines (`errorstat_CODE:count=n`).
    pub fn error_lines(&self) -> String {
        let e = self.errors.lock().unwrap_or_else(|p| p.into_inner());
        e.iter().map(|(code, n)| format!("errorstat_{code}:count={n}\r\n")).collect()
    }

    /// Forget every count (CONFIG RESETSTAT).
    pub fn reset(&self) {
        for o in &self.per {
            for c in [&o.calls, &o.timed, &o.usec, &o.rejected, &o.failed] {
                c.store(0, Relaxed);
            }
        }
        self.errors.lock().unwrap_or_else(|p| p.into_inner()).clear();
        self.total_errors.store(0, Relaxed);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_count_by_code_up_to_the_limit_and_reset_clears_all() {
        let s = CommandStats::default();
        s.error_reply("ERR syntax error");
        s.error_reply("ERR other");
        s.error_reply("MY_CODE custom");
        assert_eq!(s.error_lines(), "errorstat_ERR:count=2\r\nerrorstat_MY_CODE:count=1\r\n");
        for i in 0..2 * ERROR_CODES {
            s.error_reply(&format!("C{i} x"));
        }
        assert_eq!(s.error_lines().lines().count(), ERROR_CODES, "bounded");
        assert_eq!(s.total_errors(), 3 + 2 * ERROR_CODES as u64);
        let get = table::lookup(b"GET").unwrap();
        s.ran(get, None, true);
        assert!(s.lines().contains("cmdstat_get:calls=1"));
        s.reset();
        assert_eq!((s.error_lines(), s.lines(), s.total_errors()), (String::new(), String::new(), 0));
    }
}
