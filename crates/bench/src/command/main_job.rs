//! `pmkv bench` with no subcommand, the main job: the Dictionary workload (and Sequential
//! and Random at 500,000 records), insert/search/update/delete, every engine of
//! `pmkv::Registry::builtin()` in `eadr` and `adr`, the volatile baseline and LMDB (write-map,
//! no-sync), one thread; a table of ns/op and persistence counters per operation.

use crate::engines;
use crate::experiment::{self, Settings, Target};
use crate::progress::Progress;
use crate::report;
use crate::workload::{KeyKind, KeySet};
use crate::{measure, pool_dir, Result};
use pmkv::{Latency, Mode};
use std::time::Instant;

/// The engines of `pmkv::Registry::builtin()` that use a pool, comma-separated ("none yet" if none).
pub fn pool_engine_names() -> String {
    let v: Vec<&str> = engines::pmkv_pool_engines().iter().map(|e| e.name()).collect();
    if v.is_empty() {
        "(none yet)".into()
    } else {
        v.join(", ")
    }
}

/// `pmkv bench` with no subcommand: the main job.
pub fn main_job() -> Result<()> {
    let started = Instant::now();
    let tmp = pool_dir(None)?;
    let s = Settings::new(tmp.path(), 42);
    let lat = Latency::from_env();
    let mut tg = Vec::new();
    for e in engines::all() {
        match e.kind {
            engines::EngineKind::Lmdb(crate::baseline::lmdb::LmdbVariant::Synced) => {}
            _ if e.uses_pool() => {
                tg.push(Target::new(e, Mode::Eadr, lat));
                tg.push(Target::new(e, Mode::Adr, lat));
            }
            _ => tg.push(Target::new(e, Mode::None, Latency::NONE)),
        }
    }
    // HART's three string workloads (SPEC W): Dictionary whole, Sequential and Random at
    // 500,000 records, so the job takes seconds per engine (minutes with mangosteen, whose
    // every write is a page-captured batch).
    let sets = [
        ("dictionary", KeySet::generate(KeyKind::Dictionary, crate::workload::dictionary::WORDS, 42)?),
        ("sequential", KeySet::generate(KeyKind::Sequential, 500_000, 42)?),
        ("random", KeySet::generate(KeyKind::Random, 500_000, 42)?),
    ];
    println!(
        "pmkv bench — main job: Dictionary ({} words), Sequential and Random ({} keys) workloads,\n\
         insert / search / update / delete (the last three in the insert order, as in the HART paper), 1 thread, {}-byte values; engines {} in eadr and adr, plus baselines;\n\
         PM latency emulation: {}; pools in {}; flush: {}\n{}",
        sets[0].1.len(),
        sets[1].1.len(),
        s.value_size,
        pool_engine_names(),
        engines::latency_name(lat),
        tmp.path().parent().map_or("?".into(), |p| p.display().to_string()),
        pmkv_substrate::flush_insn().name(),
        crate::pages::pool_pages(tmp.path())
    );
    if pmkv::Registry::builtin().names().iter().all(|n| *n == engines::VOLATILE) {
        println!("(pmkv::Registry::builtin() has no persistent engine yet: only the baselines run)");
    }
    measure::calibrate();
    let mut pg = Progress::new((tg.len() * sets.len()) as u64, false);
    let mut records = Vec::new();
    for (name, keys) in &sets {
        for t in &tg {
            let label = format!("{name} {} [{}]", t.engine.name(), t.engine.mode_label(t.mode));
            pg.set(&label);
            records.extend(experiment::basic_ops(&s, t, "main", name, keys, 1));
            pg.inc(&label);
        }
    }
    pg.finish();
    drop(tmp);
    println!();
    print!("{}", report::table(&records, &report::main_job_columns()));
    println!("\ndurability:\n{}", report::legend(&records));
    println!(
        "{:.0} s. More: pmkv bench run --help; pmkv bench reproduce hart --scale small --out DIR",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
