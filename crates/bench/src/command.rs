//! `pmkv bench ...`: the benchmark commands, parsed by the `pmkv` CLI (with its `bench`
//! feature) and run here, so that the plain CLI does not link the harness, LMDB, plotters
//! or the PMDK loader. `persist` and `alloc` measure the substrate itself; `run`,
//! `reproduce` and the main job (no subcommand) are the harness.

/// What a benchmark command returns.
pub type CmdResult = std::result::Result<(), Box<dyn std::error::Error>>;
use pmkv_substrate::{counters, flush_insn, Mode, Pool, PoolOptions};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args)]
#[command(after_help = "With no subcommand: the main job (~1 min) — the Dictionary workload on every engine \
                         in eadr and adr plus baselines, ns/op and persistence counters per operation.")]
pub struct Args {
    #[command(subcommand)]
    pub what: Option<What>,
}

#[derive(clap::Subcommand)]
pub enum What {
    /// ns per persist (write + flush + fence) of 64 B, 256 B and 4 KiB in each mode.
    Persist(PersistArgs),
    /// ns per allocate+free pair: EPallocator vs PMDK libpmemobj, 1 and 2 threads (SPEC P7).
    Alloc(crate::alloc_bench::AllocArgs),
    /// Run a workload on chosen engines, modes, latencies and thread counts (SPEC U5, W).
    Run(Box<crate::cli::RunArgs>),
    /// Reproduce a paper's experiments: report.md, results.json/.csv, plots (SPEC U5).
    Reproduce(Box<crate::cli::ReproduceArgs>),
}

#[derive(clap::Args)]
pub struct PersistArgs {
    /// Directory for the temporary pool (default /dev/shm if present, else the temp dir).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Persists per size and mode.
    #[arg(long, default_value_t = 20_000)]
    pub iters: u64,
}

pub fn run(a: Args) -> CmdResult {
    match a.what {
        Some(What::Persist(p)) => persist(p),
        Some(What::Alloc(a)) => crate::alloc_bench::run(a),
        Some(What::Run(r)) => crate::cli::run(*r).map_err(Into::into),
        Some(What::Reproduce(r)) => crate::cli::reproduce(*r).map_err(Into::into),
        // No subcommand: the main job (Dictionary, every engine, eadr and adr, baselines).
        None => crate::cli::default_main_job().map_err(Into::into),
    }
}

/// A directory for temporary pools: /dev/shm (memory, the closest thing to PM here) if it
/// exists, else the system temp directory.
pub fn temp_dir(dir: Option<PathBuf>) -> PathBuf {
    dir.unwrap_or_else(|| {
        let shm = PathBuf::from("/dev/shm");
        if shm.is_dir() {
            shm
        } else {
            std::env::temp_dir()
        }
    })
}

fn persist(a: PersistArgs) -> CmdResult {
    let dir = temp_dir(a.dir);
    let sizes = [64usize, 256, 4096];
    println!("flush instruction: {} (from CPUID)", flush_insn().name());
    println!("pool directory:    {}", dir.display());
    println!(
        "{:<6} {:>10} {:>10} {:>10}   (ns per write+persist; fences/flushes per op)",
        "mode", "64 B", "256 B", "4 KiB"
    );
    for mode in Mode::ALL {
        let path = dir.join(format!("pmkv-bench-persist-{}-{}.pool", std::process::id(), mode));
        let _ = std::fs::remove_file(&path);
        let opts = PoolOptions::default().mode(mode).initial_size(4 << 20);
        let pool = Pool::create(&path, "bench", &opts)?;
        let mut cells = Vec::new();
        let mut note = String::new();
        for &sz in &sizes {
            // Syncing a page to a file costs ~10 us or more: fewer iterations in msync mode.
            let iters = if mode == Mode::Msync { (a.iters / 20).max(100) } else { a.iters };
            let region = 1 << 20;
            let slots = (region / sz) as u64;
            let base = 8192u64;
            // Warm up: fault the region in so the first size does not pay for page faults.
            // SAFETY: the region lies inside the 4 MiB pool.
            unsafe { std::ptr::write_bytes(pool.at::<u8>(base), 0, region) };
            let c0 = counters::snapshot();
            let t = Instant::now();
            for i in 0..iters {
                let off = base + (i % slots) * sz as u64;
                let p = pool.at::<u8>(off);
                // SAFETY: [off, off+sz) lies inside the 4 MiB pool.
                unsafe { std::ptr::write_bytes(p, (i & 0xff) as u8, sz) };
                pool.persist_off(off, sz);
            }
            let ns = t.elapsed().as_nanos() as f64 / iters as f64;
            let c = counters::snapshot().since(&c0);
            cells.push(format!("{ns:>10.1}"));
            if sz == 64 {
                note = format!(
                    "{:.0} fence, {:.0} flush per 64 B op",
                    c.fences as f64 / iters as f64,
                    c.flushes as f64 / iters as f64
                );
            }
        }
        println!("{:<6} {}   {}", mode.name(), cells.join(" "), note);
        drop(pool);
        let _ = std::fs::remove_file(&path);
    }
    Ok(())
}
