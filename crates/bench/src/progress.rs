//! Progress for long runs (SPEC U5), on stderr: which step runs, how many are done of how
//! many, how long this step has taken, and an estimate of the time left. An indicatif bar
//! when stderr is a terminal (redrawn every second); otherwise one plain line per finished
//! step, and a line every [`HEARTBEAT`] while one step runs long, so that a log shows where
//! a run is and that it is alive.
//!
//! **The count cannot overrun.** A command first builds a [`Plan`] (every step it will
//! run, each round of repeated runs included) and the progress total is that plan's
//! length: the loop that runs the steps is the plan's own. (Totals computed by a separate
//! formula drifted from their loops: `[91/87]`.)
//!
//! **The estimate.** A step that ran before (an earlier round of the same measurement) is
//! expected to take what it took then; a step never seen before, the mean of the first
//! rounds seen so far. Rounds after the first are therefore estimated from measurements,
//! not from an average over very different engines.

use crate::human;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often a plain (non-terminal) progress log says which step is still running.
pub const HEARTBEAT: Duration = Duration::from_secs(30);

/// The bookkeeping behind the display, shared with the thread that redraws it.
struct State {
    started: Instant,
    /// The estimate key of every step in run order; its length is the total.
    keys: Vec<String>,
    done: usize,
    /// Seconds the last finished step of each key took.
    took: HashMap<String, f64>,
    /// Seconds and count of finished steps whose key ran for the first time.
    first: (f64, usize),
    /// Label of the running step and when it started.
    current: Option<(String, Instant)>,
    /// When the plain display last printed a line.
    last_line: Instant,
}

impl State {
    fn new(keys: Vec<String>) -> State {
        let now = Instant::now();
        State { started: now, keys, done: 0, took: HashMap::new(), first: (0.0, 0), current: None, last_line: now }
    }

    fn total(&self) -> usize {
        self.keys.len()
    }

    /// Expected seconds of step `i`: what its key took last time, else the mean first run.
    fn expect(&self, i: usize) -> Option<f64> {
        self.keys.get(i).and_then(|k| self.took.get(k)).copied().or_else(|| {
            let (s, n) = self.first;
            (n > 0).then(|| s / n as f64)
        })
    }

    /// Seconds left: the rest of the running step and every step after it; `None` until
    /// one step has finished.
    fn eta(&self) -> Option<f64> {
        let mut left = 0.0;
        for i in self.done..self.total() {
            let e = self.expect(i)?;
            left += if i == self.done {
                let ran = self.current.as_ref().map_or(0.0, |c| c.1.elapsed().as_secs_f64());
                (e - ran).max(0.0)
            } else {
                e
            };
        }
        Some(left)
    }

    fn eta_text(&self) -> String {
        match self.eta() {
            Some(s) => format!("eta {}", human::duration(s)),
            None => "eta ?".into(),
        }
    }

    /// The running step as the bar's message: label, time in it, estimate.
    fn message(&self) -> String {
        match &self.current {
            Some((label, t)) => {
                format!("{label} · {} in step · {}", human::duration(t.elapsed().as_secs_f64()), self.eta_text())
            }
            None => self.eta_text(),
        }
    }

    /// `[  12/150]   34 s`: the prefix of every plain line (step, total, time so far).
    fn prefix(&self, n: usize) -> String {
        format!("[{:>4}/{}] {:>11}", n, self.total(), human::duration(self.started.elapsed().as_secs_f64()))
    }
}

pub struct Progress {
    state: Arc<Mutex<State>>,
    bar: Option<ProgressBar>,
    quiet: bool,
    /// The thread that redraws the bar or prints the heartbeat; stopped by dropping the sender.
    ticker: Option<(mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
}

impl Progress {
    /// A progress display over `total` distinct steps. `quiet` silences it.
    pub fn new(total: u64, quiet: bool) -> Progress {
        Progress::with_keys((0..total).map(|i| format!("#{i}")).collect(), quiet)
    }

    /// A progress display over one step per key, in this order; steps with equal keys are
    /// the same measurement repeated (the estimate uses one's time for the next).
    pub fn with_keys(keys: Vec<String>, quiet: bool) -> Progress {
        let total = keys.len() as u64;
        let state = Arc::new(Mutex::new(State::new(keys)));
        let bar = if std::io::stderr().is_terminal() && !quiet {
            let b = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len}\n  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar());
            b.set_style(style);
            b.enable_steady_tick(Duration::from_millis(200));
            Some(b)
        } else {
            None
        };
        let ticker = (!quiet).then(|| {
            let (tx, rx) = mpsc::channel::<()>();
            let (st, b) = (state.clone(), bar.clone());
            let tick = if b.is_some() { Duration::from_secs(1) } else { HEARTBEAT.min(Duration::from_secs(5)) };
            let h = std::thread::spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(tick) {
                    let mut s = lock(&st);
                    match &b {
                        Some(b) => b.set_message(s.message()),
                        None => heartbeat(&mut s),
                    }
                }
            });
            (tx, h)
        });
        Progress { state, bar, quiet, ticker }
    }

    /// Step `label` starts now.
    pub fn set(&self, label: &str) {
        let mut s = lock(&self.state);
        s.current = Some((label.to_string(), Instant::now()));
        if let Some(b) = &self.bar {
            b.set_message(s.message());
        }
    }

    /// One step finished. A count that would pass the total raises the total instead, so a
    /// miscounted plan shows `[n/n]`, never `[91/87]` (a [`Plan`] cannot miscount).
    pub fn inc(&mut self, what: &str) {
        let mut s = lock(&self.state);
        let secs = s.current.take().map_or(0.0, |c| c.1.elapsed().as_secs_f64());
        if s.done >= s.total() {
            let extra = format!("#extra{}", s.done);
            s.keys.push(extra);
            if let Some(b) = &self.bar {
                b.set_length(s.total() as u64);
            }
        }
        let key = s.keys[s.done].clone();
        if !s.took.contains_key(&key) {
            s.first.0 += secs;
            s.first.1 += 1;
        }
        s.took.insert(key, secs);
        s.done += 1;
        match &self.bar {
            Some(b) => {
                b.inc(1);
                b.set_message(s.message());
            }
            None if !self.quiet => {
                eprintln!("{}  {what}: took {}; {}", s.prefix(s.done), human::duration(secs), s.eta_text());
                s.last_line = Instant::now();
            }
            None => {}
        }
    }

    /// Print a line above the bar (or plainly).
    pub fn println(&self, line: &str) {
        if self.quiet {
            return;
        }
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// Seconds since the display was made.
    pub fn elapsed(&self) -> f64 {
        lock(&self.state).started.elapsed().as_secs_f64()
    }

    pub fn finish(&mut self) {
        if let Some((tx, h)) = self.ticker.take() {
            drop(tx);
            let _ = h.join();
        }
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// The state, even if a panicking step poisoned the lock (the numbers are still right).
fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A plain line if the running step has run for a [`HEARTBEAT`] since the last line.
fn heartbeat(s: &mut State) {
    let Some((label, t)) = &s.current else { return };
    if s.last_line.elapsed() < HEARTBEAT || t.elapsed() < HEARTBEAT {
        return;
    }
    eprintln!(
        "{}  … {label}: {} in this step; {}",
        s.prefix(s.done + 1),
        human::duration(t.elapsed().as_secs_f64()),
        s.eta_text()
    );
    s.last_line = Instant::now();
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// One step of a [`Plan`]: what the progress shows, and the work.
struct Step<'a, T> {
    label: String,
    run: Box<dyn FnMut() -> T + 'a>,
}

/// Every step a command will run, built before any runs, so the progress total is the
/// number of steps run. Steps are added in groups; [`Plan::rounds`] closes a group and
/// repeats it: round 1 of every step of the group, then round 2, … (alternating rounds,
/// so that slow drift of the machine spreads over every measurement of the group rather
/// than landing on one engine's runs).
pub struct Plan<'a, T> {
    steps: Vec<Step<'a, T>>,
    /// (step, round, rounds) in run order.
    order: Vec<(usize, usize, usize)>,
    /// The first step of the group being built.
    open: usize,
    /// Each closed group's name and its first step.
    groups: Vec<(String, usize)>,
}

impl<T> Default for Plan<'_, T> {
    fn default() -> Self {
        Plan { steps: Vec::new(), order: Vec::new(), open: 0, groups: Vec::new() }
    }
}

impl<'a, T> Plan<'a, T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a step to the open group.
    pub fn step(&mut self, label: impl Into<String>, run: impl FnMut() -> T + 'a) {
        self.steps.push(Step { label: label.into(), run: Box::new(run) });
    }

    /// Close the open group, named `group` (for the timings [`Plan::run`] returns): its
    /// steps run `rounds` times (at least once), round by round.
    pub fn rounds(&mut self, rounds: usize, group: &str) {
        let rounds = rounds.max(1);
        for r in 0..rounds {
            self.order.extend((self.open..self.steps.len()).map(|i| (i, r, rounds)));
        }
        self.groups.push((group.to_string(), self.open));
        self.open = self.steps.len();
    }

    /// Steps the plan will run (every round counted): the progress total.
    pub fn len(&self) -> usize {
        self.order.len() + (self.steps.len() - self.open)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The label of each step in run order, `(run r/n)` added for repeated ones.
    pub fn labels(&self) -> Vec<String> {
        self.order_all().into_iter().map(|(i, r, n)| self.label(i, r, n)).collect()
    }

    fn label(&self, i: usize, r: usize, n: usize) -> String {
        if n > 1 {
            format!("{} (run {}/{n})", self.steps[i].label, r + 1)
        } else {
            self.steps[i].label.clone()
        }
    }

    /// The run order, a still-open group run once.
    fn order_all(&self) -> Vec<(usize, usize, usize)> {
        let mut o = self.order.clone();
        o.extend((self.open..self.steps.len()).map(|i| (i, 0, 1)));
        o
    }

    /// Run every step in order with a progress display (silent if `quiet`); `done` sees
    /// each step's label and result as it finishes (to print failures above the bar).
    /// Returns the results in run order, each with its step's index (the rounds of one step
    /// share it), and the seconds each group took (every round).
    #[allow(clippy::type_complexity)]
    pub fn run(
        mut self,
        quiet: bool,
        mut done: impl FnMut(&Progress, &str, &T),
    ) -> (Vec<(usize, T)>, Vec<(String, f64)>) {
        let order = self.order_all();
        let mut pg = Progress::with_keys(order.iter().map(|(i, _, _)| format!("{i}")).collect(), quiet);
        let mut out = Vec::with_capacity(order.len());
        let mut secs = vec![0.0; self.groups.len()];
        for (i, r, n) in order {
            let label = self.label(i, r, n);
            pg.set(&label);
            let t0 = Instant::now();
            let t = (self.steps[i].run)();
            if let Some(g) = self.groups.iter().rposition(|g| g.1 <= i).filter(|_| i < self.open) {
                secs[g] += t0.elapsed().as_secs_f64();
            }
            done(&pg, &label, &t);
            pg.inc(&label);
            out.push((i, t));
        }
        pg.finish();
        (out, self.groups.iter().map(|g| g.0.clone()).zip(secs).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_never_passes_the_total() {
        let mut p = Progress::new(1, true);
        p.set("a");
        p.inc("a");
        p.inc("b");
        let s = lock(&p.state);
        assert_eq!((s.done, s.total()), (2, 2));
    }

    /// The total is the plan: groups times their rounds, plus a group left open (run once);
    /// running it runs exactly that many steps, round by round.
    #[test]
    fn a_plan_runs_as_many_steps_as_it_counts() {
        let ran = std::cell::RefCell::new(Vec::new());
        let mut plan: Plan<'_, usize> = Plan::new();
        for g in 0..2 {
            plan.step(format!("g{g} a"), || {
                ran.borrow_mut().push("a");
                1
            });
            plan.step(format!("g{g} b"), || {
                ran.borrow_mut().push("b");
                2
            });
            plan.rounds(3, &format!("g{g}"));
        }
        plan.step("open", || 3);
        assert_eq!(plan.len(), 2 * 2 * 3 + 1);
        let labels = plan.labels();
        assert_eq!(labels.len(), plan.len());
        assert_eq!(&labels[..3], ["g0 a (run 1/3)", "g0 b (run 1/3)", "g0 a (run 2/3)"]);
        assert_eq!(labels.last().map(String::as_str), Some("open"));
        let n = plan.len();
        let mut seen = 0;
        let (out, groups) = plan.run(true, |_, _, _| seen += 1);
        assert_eq!((out.len(), seen), (n, n));
        assert_eq!(groups.iter().map(|g| g.0.as_str()).collect::<Vec<_>>(), ["g0", "g1"]);
        assert_eq!(ran.borrow().len(), n - 1);
        assert_eq!(ran.borrow()[..4], ["a", "b", "a", "b"]);
        let steps: Vec<usize> = out.iter().map(|o| o.0).collect();
        assert_eq!(steps[..5], [0, 1, 0, 1, 0], "rounds of a step share its index");
    }

    /// A repeated step is expected to take what it took last time; a new one the mean of the
    /// first runs; nothing is known before a step finishes.
    #[test]
    fn the_estimate_uses_earlier_rounds() {
        let mut s = State::new(vec!["x".into(), "y".into(), "x".into(), "y".into()]);
        assert_eq!(s.eta(), None);
        s.took.insert("x".into(), 10.0);
        s.took.insert("y".into(), 2.0);
        s.first = (12.0, 2);
        s.done = 2;
        assert_eq!(s.eta(), Some(12.0));
        let mut s = State::new(vec!["x".into(), "z".into()]);
        s.took.insert("x".into(), 4.0);
        s.first = (4.0, 1);
        s.done = 1;
        assert_eq!(s.eta(), Some(4.0));
    }
}
