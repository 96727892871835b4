//! Running the experiments of HART's Figures 4–10: one function per figure group adds its
//! measurements (every target engine and latency setting) to a [`Plan`], which then runs
//! them, each group `--runs` times in alternating rounds.

use super::*;
use crate::progress::Plan;
use crate::stats;

/// The key sets of a run: for each kind the largest any figure needs. Every kind the
/// reproduction uses is a prefix-stable sequence (the first n keys of a larger set are the
/// set of n), so a figure's keys are a prefix of one of these.
pub(super) struct HartKeys {
    pub dict: KeySet,
    pub seq: KeySet,
    pub rand: KeySet,
}

impl HartKeys {
    fn generate(sc: &HartScale, s: &Settings) -> Result<HartKeys> {
        let mix_need = hart_mixes()
            .iter()
            .map(|m| experiment::mix_keys_needed(s, m, sc.mix_load, sc.mix_ops, 1) as usize)
            .max()
            .unwrap_or(0);
        let rand = [sc.rand, mix_need, sc.scal_keys]
            .into_iter()
            .chain(sc.fig8.iter().copied())
            .chain(sc.recovery.iter().copied())
            .max()
            .unwrap_or(0);
        let seq = sc.seq.max(sc.range_keys).max(sc.mem_keys);
        Ok(HartKeys {
            dict: KeySet::generate(KeyKind::Dictionary, sc.dict, s.seed)?,
            seq: KeySet::generate(KeyKind::Sequential, seq, s.seed)?,
            rand: KeySet::generate(KeyKind::Random, rand, s.seed)?,
        })
    }

    /// The first `n` keys of `kind` (a copy unless it is the whole set).
    fn of(&self, kind: KeyKind, n: usize) -> std::borrow::Cow<'_, KeySet> {
        let ks = match kind {
            KeyKind::Dictionary => &self.dict,
            KeyKind::Sequential => &self.seq,
            _ => &self.rand,
        };
        if n >= ks.len() {
            std::borrow::Cow::Borrowed(ks)
        } else {
            std::borrow::Cow::Owned(ks.prefix(n))
        }
    }
}

/// The paper's three mixes (Fig. 9).
fn hart_mixes() -> [Mix; 3] {
    [Mix::hart_read_intensive(), Mix::hart_read_modify_write(), Mix::hart_write_intensive()]
}

/// What every figure's steps read: settings, scale, targets and key sets.
struct Ctx<'a> {
    s: &'a Settings,
    sc: &'a HartScale,
    keys: &'a HartKeys,
    /// Targets at the three latency settings, at 300/100 only, and without latency.
    t3: &'a [Target],
    t1: &'a [Target],
    t0: &'a [Target],
}

/// Print the failed measurements of a finished step above the progress display.
pub(crate) fn report_failures(pg: &Progress, label: &str, recs: &[Record]) {
    for x in recs.iter().filter(|x| x.error.is_some()) {
        pg.println(&format!("  {}: {} — {}", label, x.engine, x.error.as_deref().unwrap_or("")));
    }
}

/// The steps of `reproduce hart` at scale `sc` for these targets, each figure group a group
/// of `runs` rounds.
fn plan<'a>(c: &Ctx<'a>, runs: usize) -> Plan<'a, Vec<Record>> {
    let mut plan = Plan::new();
    fig4_7(&mut plan, c);
    plan.rounds(runs, "Figs. 4–7");
    fig8(&mut plan, c);
    plan.rounds(runs, "Fig. 8");
    fig9(&mut plan, c);
    plan.rounds(runs, "Fig. 9");
    fig10(&mut plan, c);
    plan.rounds(runs, "Fig. 10");
    plan
}

/// Targets at the three latency settings, at 300/100 only, and without latency, with
/// reads charged as `reads` says.
fn hart_targets(engines: &[EngineSpec], reads: Reads) -> (Vec<Target>, Vec<Target>, Vec<Target>) {
    (
        targets(engines, &HART_LATENCIES, reads),
        targets(engines, &[HART_LATENCIES[0]], reads),
        targets(engines, &[Latency::NONE], Reads::PerLine),
    )
}

/// The paper's record count for Sequential and Random at 300/300 and 600/300, the settings
/// where reads cost more than DRAM's (§4: "we set the default number of records to 1
/// million"); its Dictionary is the whole word list, as here.
const PAPER_RECORDS: usize = 1_000_000;

/// `tg` with its cache model (if any) scaled to `n` records where the paper had `paper`,
/// so that about the paper's share of each tree fits in the modelled L3.
fn scaled(tg: Target, n: usize, paper: usize) -> Target {
    Target { latency: tg.latency.with_reads(tg.latency.read_model.scaled(n, paper)), ..tg }
}

/// Reproduce HART's Figures 4–10: run, then write results, plots and report.md.
pub fn hart(a: &ReproduceArgs) -> Result<Report> {
    let started = Instant::now();
    let sc = HartScale::of(a.scale);
    let engines = hart_engines(&a.engines)?;
    let runs = a.runs.max(1) as usize;
    let tmp = pool_dir(a.dir.as_deref())?;
    let mut s = Settings::new(tmp.path(), a.seed);
    s.keep_cdf = true;
    let (t3, t1, t0) = hart_targets(&engines, a.reads);
    let keys = HartKeys::generate(&sc, &s)?;
    let c = Ctx { s: &s, sc: &sc, keys: &keys, t3: &t3, t1: &t1, t0: &t0 };
    let plan = plan(&c, runs);
    if !a.quiet {
        eprintln!(
            "reproduce hart --scale {}: engines {}; {} measurements ({} runs of each){}",
            a.scale.name(),
            engines.iter().map(|e| e.name()).collect::<Vec<_>>().join(", "),
            plan.len(),
            runs,
            if a.engines.is_empty() { left_out_note(&engines, HART_DEFAULT) } else { String::new() }
        );
    }
    measure::calibrate();
    let (ran, timings) = plan.run(a.quiet, |pg, label, recs| report_failures(pg, label, recs));
    let mut recs = stats::combine_steps(ran);
    // The results name each setting as the paper does (the claims look them up so); the
    // notes say how reads were charged, and the cache's size follows from the records.
    for r in &mut recs {
        if let Some(i) = r.latency.find("/llc") {
            r.latency.truncate(i);
        }
    }
    drop(keys);
    drop(tmp);
    // Outputs.
    let total = format!("total {:.1} s", started.elapsed().as_secs_f64());
    let rep = super::save_results(a, &sc, runs, &timings, &[total], recs)?;
    let figs = super::plots_or_none(figures::figures(&rep.records, &a.out, &engines));
    let max_t = sc.threads.iter().copied().max().unwrap_or(1);
    let checked = claims::check(claims::HART, &rep.records, max_t);
    claims::add_to_json(&a.out, &checked)?;
    let ctx = report_md::Ctx {
        rep: &rep,
        sc: &sc,
        a,
        engines: &engines,
        figs: &figs,
        secs: started.elapsed().as_secs_f64(),
        claims: &checked,
    };
    let md = report_md::report_md(&ctx);
    std::fs::write(a.out.join("report.md"), md)?;
    println!("{}", summary_table(&rep.records));
    println!(
        "wrote {}/report.md, results.json, results.csv and {} plots ({})",
        a.out.display(),
        figs.len() * 2,
        crate::human::duration(started.elapsed().as_secs_f64())
    );
    Ok(rep)
}

/// Figs. 4–7: the four basic operations, three workloads, three latency settings.
fn fig4_7<'a>(plan: &mut Plan<'a, Vec<Record>>, c: &Ctx<'a>) {
    let (s, sc, keys) = (c.s, c.sc, c.keys);
    for kind in WORKLOADS {
        let n = match kind {
            KeyKind::Dictionary => sc.dict,
            KeyKind::Sequential => sc.seq,
            _ => sc.rand,
        };
        let paper = if kind == KeyKind::Dictionary { crate::workload::dictionary::WORDS } else { PAPER_RECORDS };
        for &tg in c.t3 {
            let tg = scaled(tg, n, paper);
            let label = format!("fig4-7 {} {} {}", kind.name(), tg.engine.name(), tg.engine.latency_label(tg.latency));
            plan.step(label, move || experiment::basic_ops(s, &tg, "fig4-7", kind.name(), &keys.of(kind, n), 1));
        }
    }
}

/// Fig. 8: number of records, Random keys, 300/100.
fn fig8<'a>(plan: &mut Plan<'a, Vec<Record>>, c: &Ctx<'a>) {
    let (s, keys) = (c.s, c.keys);
    for &n in &c.sc.fig8 {
        for &tg in c.t1 {
            let label = format!("fig8 {n} records {}", tg.engine.name());
            plan.step(label, move || {
                experiment::basic_ops(s, &tg, "fig8", &format!("random {n}"), &keys.of(KeyKind::Random, n), 1)
            });
        }
    }
}

/// Fig. 9: mixed workloads over Random keys, uniform requests.
fn fig9<'a>(plan: &mut Plan<'a, Vec<Record>>, c: &Ctx<'a>) {
    let (s, sc, keys) = (c.s, c.sc, c.keys);
    for m in hart_mixes() {
        for &tg in c.t3 {
            let tg = scaled(tg, sc.mix_load as usize, PAPER_RECORDS);
            let label = format!("fig9 {} {} {}", m.name, tg.engine.name(), tg.engine.latency_label(tg.latency));
            let m = m.clone();
            plan.step(label, move || {
                experiment::mix_run(s, &tg, "fig9", "random (uniform)", &keys.rand, &m, sc.mix_load, sc.mix_ops, 1)
            });
        }
    }
}

/// Fig. 10: (a) range query, (b) memory, (c) build vs recovery, (d) threads.
fn fig10<'a>(plan: &mut Plan<'a, Vec<Record>>, c: &Ctx<'a>) {
    let (s, sc, keys) = (c.s, c.sc, c.keys);
    // Fig. 10a: range query of 100,000 records under Sequential.
    for &tg in c.t3 {
        let tg = scaled(tg, sc.range_keys, PAPER_RECORDS);
        let label = format!("fig10a range {} {}", tg.engine.name(), tg.engine.latency_label(tg.latency));
        plan.step(label, move || {
            let k = keys.of(KeyKind::Sequential, sc.range_keys);
            experiment::range_query(s, &tg, "fig10a", "sequential", &k, sc.range_len, sc.range_reps)
        });
    }
    // Fig. 10b: memory after loading Sequential records (latency does not change it).
    for &tg in c.t0 {
        plan.step(format!("fig10b memory {}", tg.engine.name()), move || {
            experiment::memory(s, &tg, "fig10b", "sequential", &keys.of(KeyKind::Sequential, sc.mem_keys))
        });
    }
    // Fig. 10c: build vs recovery, Random, 300/100.
    for &n in &sc.recovery {
        for &tg in c.t1 {
            plan.step(format!("fig10c recovery {n} {}", tg.engine.name()), move || {
                experiment::build_recover(s, &tg, "fig10c", "random", &keys.of(KeyKind::Random, n))
            });
        }
    }
    // Fig. 10d: threads, Random, 300/100.
    for &th in &sc.threads {
        for &tg in c.t1 {
            plan.step(format!("fig10d {th} threads {}", tg.engine.name()), move || {
                experiment::basic_ops(s, &tg, "fig10d", "random", &keys.of(KeyKind::Random, sc.scal_keys), th)
            });
        }
    }
}
