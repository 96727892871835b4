//! Progress for long runs (SPEC U5): an indicatif bar on stderr when stderr is a terminal;
//! otherwise one plain line per finished step, so CI logs show where a run is.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

pub struct Progress {
    bar: Option<ProgressBar>,
    quiet: bool,
    started: Instant,
    done: u64,
    total: u64,
}

impl Progress {
    /// A progress display over `total` steps. `quiet` silences the plain-line fallback.
    pub fn new(total: u64, quiet: bool) -> Progress {
        let bar = if std::io::stderr().is_terminal() && !quiet {
            let b = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar());
            b.set_style(style);
            b.enable_steady_tick(Duration::from_millis(200));
            Some(b)
        } else {
            None
        };
        Progress { bar, quiet, started: Instant::now(), done: 0, total }
    }

    /// Say what is being measured now.
    pub fn set(&self, msg: &str) {
        if let Some(b) = &self.bar {
            b.set_message(msg.to_string());
        }
    }

    /// One step finished. A count that would pass the total raises the total instead, so
    /// a miscounted plan shows `[n/n]`, never `[91/87]`.
    pub fn inc(&mut self, what: &str) {
        self.done += 1;
        if self.done > self.total {
            self.total = self.done;
            if let Some(b) = &self.bar {
                b.set_length(self.total);
            }
        }
        match &self.bar {
            Some(b) => b.inc(1),
            None if !self.quiet => {
                eprintln!("[{:>4}/{}] {:>7.1}s  {what}", self.done, self.total, self.started.elapsed().as_secs_f64())
            }
            None => {}
        }
    }

    /// Print a line above the bar (or plainly).
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("{line}"),
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_never_passes_the_total() {
        let mut p = Progress::new(1, true);
        p.inc("a");
        p.inc("b");
        assert_eq!((p.done, p.total), (2, 2));
    }
}
