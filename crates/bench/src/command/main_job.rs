//! `pmkv bench` with no subcommand, the main job: the Dictionary workload (and Sequential
//! and Random at 500,000 records), insert/search/update/delete, every engine of
//! `pmkv::Registry::builtin()` but the papers' competitors (left to `reproduce`) in `eadr`
//! and `adr`, the volatile baseline and LMDB (write-map, no-sync), one thread; each
//! measurement three times (`--runs`) in alternating rounds. It prints which durable engine
//! was fastest per workload and operation, and writes the report directory of
//! [`super::main_report`] (median ns/op with the range of the runs, persistence counters
//! per operation, plots).

use crate::engines;
use crate::experiment::{self, Settings, Target};
use crate::human;
use crate::progress::Plan;
use crate::report;
use crate::stats;
use crate::workload::{KeyKind, KeySet};
use crate::{measure, pool_dir, Result};
use pmkv::{Latency, Mode};
use std::time::Instant;

/// The engines of `pmkv::Registry::builtin()` that use a pool, comma-separated ("none yet" if none).
pub fn pool_engine_names() -> String {
    let v: Vec<&str> = engines::pmkv_pool_engines().iter().filter(|e| !e.is_competitor()).map(|e| e.name()).collect();
    if v.is_empty() {
        "(none yet)".into()
    } else {
        v.join(", ")
    }
}

/// `pmkv bench` with no subcommand: the main job, each measurement `runs` times in
/// alternating rounds; with `full`, engines of [`engines::SLOW_WRITES`] get the whole key
/// sets instead of their first [`engines::SLOW_WRITES_KEYS`] keys.
pub fn main_job(runs: usize, full: bool, out: &std::path::Path) -> Result<()> {
    let started = Instant::now();
    // Refused before the run, not after it: a report that cannot be written is minutes lost.
    if out.exists() && !out.is_dir() {
        return Err(format!("--out {}: exists and is not a directory", out.display()).into());
    }
    let tmp = pool_dir(None)?;
    let s = Settings::new(tmp.path(), 42);
    let lat = Latency::from_env();
    let mut tg = Vec::new();
    for e in engines::all() {
        match e.kind {
            engines::EngineKind::Lmdb(crate::baseline::lmdb::LmdbVariant::Synced) => {}
            // The papers' competitors run in `reproduce`.
            _ if e.is_competitor() => {}
            _ if e.uses_pool() => {
                tg.push(Target::new(e, Mode::Eadr, lat));
                tg.push(Target::new(e, Mode::Adr, lat));
            }
            _ => tg.push(Target::new(e, Mode::None, Latency::NONE)),
        }
    }
    // HART's three string workloads (SPEC W): Dictionary whole, Sequential and Random at
    // 500,000 records, so the job takes seconds per engine; an engine of
    // `engines::SLOW_WRITES` (every write tens of us) would get the first 50,000 keys of
    // each, labelled so (none that the main job runs is one now: mangosteen's writes take
    // 1-3.5 us since compiler capture).
    let sets = [
        ("dictionary", KeySet::generate(KeyKind::Dictionary, crate::workload::dictionary::WORDS, 42)?),
        ("sequential", KeySet::generate(KeyKind::Sequential, 500_000, 42)?),
        ("random", KeySet::generate(KeyKind::Random, 500_000, 42)?),
    ];
    let cut = engines::SLOW_WRITES_KEYS;
    let short: Vec<(String, KeySet)> = sets
        .iter()
        .map(|(name, k)| (format!("{name} (first {})", human::thousands(cut as u64)), k.prefix(cut)))
        .collect();
    let slow: Vec<&str> = tg.iter().filter(|t| t.engine.slow_writes()).map(|t| t.engine.name()).collect();
    let slow_note = match (slow.first(), full) {
        (None, _) => String::new(),
        (Some(_), true) => "; --full: every engine on the whole sets".into(),
        (Some(_), false) => format!(
            "; {} on the first {} keys of each (every write a slow durability step; --full: the whole sets)",
            dedup(&slow).join(", "),
            human::thousands(cut as u64)
        ),
    };
    let header = format!(
        "pmkv bench — main job: Dictionary ({} words), Sequential and Random ({} keys) workloads,\n\
         insert / search / update / delete (the last three in the insert order, as in the HART paper), 1 thread, {}-byte values; engines {} in eadr and adr, plus baselines{slow_note};\n\
         each measurement {runs} times in alternating rounds: ns/op is the median, with the range of the runs;\n\
         PM latency emulation: {}; pools in {}; flush: {}\n{}",
        human::thousands(sets[0].1.len() as u64),
        human::thousands(sets[1].1.len() as u64),
        s.value_size,
        pool_engine_names(),
        engines::latency_name(lat),
        tmp.path().parent().map_or("?".into(), |p| p.display().to_string()),
        pmkv_substrate::flush_insn().name(),
        crate::pages::pool_pages(tmp.path())
    );
    println!("{header}");
    if pmkv::Registry::builtin().names().iter().all(|n| *n == engines::VOLATILE) {
        println!("(pmkv::Registry::builtin() has no persistent engine yet: only the baselines run)");
    }
    measure::calibrate();
    let mut plan = Plan::new();
    for (i, (name, keys)) in sets.iter().enumerate() {
        for &t in &tg {
            let (name, keys) =
                if t.engine.slow_writes() && !full { (&short[i].0[..], &short[i].1) } else { (*name, keys) };
            let label = format!("{name} {} [{}]", t.engine.name(), t.engine.mode_label(t.mode));
            let s = &s;
            plan.step(label, move || experiment::basic_ops(s, &t, "main", name, keys, 1));
        }
    }
    plan.rounds(runs, "main job");
    let (ran, _) = plan.run(false, |pg, label, recs| crate::reproduce::report_failures(pg, label, recs));
    let records = stats::combine_steps(ran);
    let mut rep = report::Report { meta: report::Meta::new("pmkv bench", 42, tmp.path()), records };
    drop(tmp);
    let took = crate::human::duration(started.elapsed().as_secs_f64());
    rep.meta.notes.push(format!("run length {took}"));
    let header = format!("{}\nRun length: {took}.", header.trim_end());
    let files = super::main_report::write(out, &rep, &header)?;
    println!();
    print!("{}", super::main_report::advice(&rep.records));
    println!(
        "\n{took}. Report in {}/: summary.md (read first), tables.md, results.csv, results.json, {} plot(s) in plots/.\n\
         More: pmkv bench run --help; pmkv bench reproduce hart --scale small --out DIR",
        out.display(),
        files.iter().filter(|f| f.extension().is_some_and(|e| e == "svg")).count()
    );
    Ok(())
}

/// The names once each, in order.
fn dedup<'a>(v: &[&'a str]) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for n in v {
        if !out.contains(n) {
            out.push(n);
        }
    }
    out
}
