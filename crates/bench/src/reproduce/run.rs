//! Running the experiments of HART's Figures 4–10: one method per figure group, each
//! measuring every target engine and latency setting and collecting the records.

use super::*;

/// One `reproduce hart` run: its settings, targets, progress and the records so far.
struct Run<'a> {
    a: &'a ReproduceArgs,
    sc: HartScale,
    s: Settings,
    pg: Progress,
    recs: Vec<Record>,
    timings: Vec<(String, f64)>,
    /// Targets at the three latency settings, at 300/100 only, and without latency.
    t3: Vec<Target>,
    t1: Vec<Target>,
    t0: Vec<Target>,
}

/// Run one measurement step: progress label, the records, failures printed.
pub(super) fn step(pg: &mut Progress, recs: &mut Vec<Record>, label: String, f: &mut dyn FnMut() -> Vec<Record>) {
    pg.set(&label);
    let r = f();
    for x in r.iter().filter(|x| x.error.is_some()) {
        pg.println(&format!("  {}: {} — {}", label, x.engine, x.error.as_deref().unwrap_or("")));
    }
    recs.extend(r);
    pg.inc(&label);
}

/// Reproduce HART's Figures 4–10: run, then write results, plots and report.md.
pub fn hart(a: &ReproduceArgs) -> Result<Report> {
    let started = Instant::now();
    let sc = HartScale::of(a.scale);
    let engines = engines::parse_list(&a.engines)?;
    let tmp = pool_dir(a.dir.as_deref())?;
    let mut s = Settings::new(tmp.path(), a.seed);
    s.keep_cdf = true;
    let l1 = [HART_LATENCIES[0]];
    let t3 = targets(&engines, &HART_LATENCIES);
    let t1 = targets(&engines, &l1);
    let t0 = targets(&engines, &[Latency::NONE]);
    let steps = WORKLOADS.len() * t3.len()
        + sc.fig8.len() * t1.len()
        + 3 * t3.len()
        + t3.len()
        + t0.len()
        + sc.recovery.len() * t1.len()
        + sc.threads.len() * t1.len();
    let pg = Progress::new(steps as u64, a.quiet);
    pg.println(&format!(
        "reproduce hart --scale {}: engines {}; {} measurements",
        a.scale.name(),
        engines.iter().map(|e| e.name()).collect::<Vec<_>>().join(", "),
        steps
    ));
    measure::calibrate();
    let mut run = Run { a, sc, s, pg, recs: Vec::new(), timings: Vec::new(), t3, t1, t0 };
    run.fig4_7()?;
    run.fig8()?;
    run.fig9()?;
    run.fig10()?;
    let Run { sc, pg, recs, timings, .. } = run;
    pg.finish();
    drop(pg);
    drop(tmp);
    // Outputs.
    std::fs::create_dir_all(&a.out)?;
    let mut meta = Meta::new(
        &format!("pmkv bench reproduce hart --scale {} --out {}", a.scale.name(), a.out.display()),
        a.seed,
        a.dir.as_deref().unwrap_or(Path::new("/dev/shm")),
    );
    meta.notes.push(format!("scale {:?}", sc));
    meta.notes.extend(timings.iter().map(|(k, v)| format!("{k}: {v:.1} s")));
    meta.notes.push(format!("total {:.1} s", started.elapsed().as_secs_f64()));
    let rep = Report { meta, records: recs };
    report::write_files(&a.out, "results", &rep)?;
    let figs = match figures::figures(&rep.records, &a.out, &engines) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("pmkv bench: plots skipped: {e}");
            vec![]
        }
    };
    let ctx =
        report_md::Ctx { rep: &rep, sc: &sc, a, engines: &engines, figs: &figs, secs: started.elapsed().as_secs_f64() };
    let md = report_md::report_md(&ctx);
    std::fs::write(a.out.join("report.md"), md)?;
    println!("{}", summary_table(&rep.records));
    println!(
        "wrote {}/report.md, results.json, results.csv and {} plots ({:.0} s)",
        a.out.display(),
        figs.len() * 2,
        started.elapsed().as_secs_f64()
    );
    Ok(rep)
}

impl Run<'_> {
    /// Figs. 4–7: the four basic operations, three workloads, three latency settings.
    fn fig4_7(&mut self) -> Result<()> {
        let Run { a, ref sc, ref s, ref mut pg, ref mut recs, ref mut timings, ref t3, .. } = *self;
        let t = Instant::now();
        for kind in WORKLOADS {
            let n = match kind {
                KeyKind::Dictionary => sc.dict,
                KeyKind::Sequential => sc.seq,
                _ => sc.rand,
            };
            let keys = KeySet::generate(kind, n, a.seed)?;
            for tg in t3.iter() {
                let label =
                    format!("fig4-7 {} {} {}", kind.name(), tg.engine.name(), tg.engine.latency_label(tg.latency));
                step(pg, recs, label, &mut || experiment::basic_ops(s, tg, "fig4-7", kind.name(), &keys, 1));
            }
        }
        timings.push(("Figs. 4–7".into(), t.elapsed().as_secs_f64()));

        Ok(())
    }

    /// Fig. 8: number of records, Random keys, 300/100.
    fn fig8(&mut self) -> Result<()> {
        let Run { a, ref sc, ref s, ref mut pg, ref mut recs, ref mut timings, ref t1, .. } = *self;
        let t = Instant::now();
        let biggest = KeySet::generate(KeyKind::Random, sc.fig8.iter().copied().max().unwrap_or(0), a.seed)?;
        for &n in &sc.fig8 {
            let keys = biggest.prefix(n);
            for tg in t1.iter() {
                let label = format!("fig8 {n} records {}", tg.engine.name());
                step(pg, recs, label, &mut || experiment::basic_ops(s, tg, "fig8", &format!("random {n}"), &keys, 1));
            }
        }
        drop(biggest);
        timings.push(("Fig. 8".into(), t.elapsed().as_secs_f64()));

        Ok(())
    }

    /// Fig. 9: mixed workloads over Random keys, uniform requests.
    fn fig9(&mut self) -> Result<()> {
        let Run { a, ref sc, ref s, ref mut pg, ref mut recs, ref mut timings, ref t3, .. } = *self;
        let t = Instant::now();
        let mixes = [Mix::hart_read_intensive(), Mix::hart_read_modify_write(), Mix::hart_write_intensive()];
        let need =
            mixes.iter().map(|m| experiment::mix_keys_needed(s, m, sc.mix_load, sc.mix_ops, 1)).max().unwrap_or(0);
        let keys = KeySet::generate(KeyKind::Random, need as usize, a.seed)?;
        for m in &mixes {
            for tg in t3.iter() {
                let label = format!("fig9 {} {} {}", m.name, tg.engine.name(), tg.engine.latency_label(tg.latency));
                step(pg, recs, label, &mut || {
                    experiment::mix_run(s, tg, "fig9", "random (uniform)", &keys, m, sc.mix_load, sc.mix_ops, 1)
                });
            }
        }
        drop(keys);
        timings.push(("Fig. 9".into(), t.elapsed().as_secs_f64()));

        Ok(())
    }

    /// Fig. 10: (a) range query, (b) memory, (c) build vs recovery, (d) threads.
    fn fig10(&mut self) -> Result<()> {
        let Run { a, ref sc, ref s, ref mut pg, ref mut recs, ref mut timings, ref t3, ref t1, ref t0, .. } = *self;
        // Fig. 10a: range query of 100,000 records under Sequential.
        let t = Instant::now();
        let keys = KeySet::generate(KeyKind::Sequential, sc.range_keys, a.seed)?;
        for tg in t3.iter() {
            let label = format!("fig10a range {} {}", tg.engine.name(), tg.engine.latency_label(tg.latency));
            step(pg, recs, label, &mut || {
                experiment::range_query(s, tg, "fig10a", "sequential", &keys, sc.range_len, sc.range_reps)
            });
        }
        // Fig. 10b: memory after loading Sequential records (latency does not change it).
        let keys = KeySet::generate(KeyKind::Sequential, sc.mem_keys, a.seed)?;
        for tg in t0.iter() {
            let label = format!("fig10b memory {}", tg.engine.name());
            step(pg, recs, label, &mut || experiment::memory(s, tg, "fig10b", "sequential", &keys));
        }
        // Fig. 10c: build vs recovery, Random, 300/100.
        let biggest = KeySet::generate(KeyKind::Random, sc.recovery.iter().copied().max().unwrap_or(0), a.seed)?;
        for &n in &sc.recovery {
            let keys = biggest.prefix(n);
            for tg in t1.iter() {
                let label = format!("fig10c recovery {n} {}", tg.engine.name());
                step(pg, recs, label, &mut || experiment::build_recover(s, tg, "fig10c", "random", &keys));
            }
        }
        // Fig. 10d: threads, Random, 300/100.
        let keys = KeySet::generate(KeyKind::Random, sc.scal_keys, a.seed)?;
        for &th in &sc.threads {
            for tg in t1.iter() {
                let label = format!("fig10d {th} threads {}", tg.engine.name());
                step(pg, recs, label, &mut || experiment::basic_ops(s, tg, "fig10d", "random", &keys, th));
            }
        }
        timings.push(("Fig. 10".into(), t.elapsed().as_secs_f64()));
        Ok(())
    }
}
