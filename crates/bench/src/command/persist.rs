//! `pmkv bench persist`: ns per write + persist of 64 B, 256 B and 4 KiB in each
//! persistence mode, with the fences and flushes one 64-byte persist costs.

use super::CmdResult;
use pmkv_substrate::{counters, flush_insn, Mode, Pool, PoolOptions};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args)]
pub struct PersistArgs {
    /// Directory for the temporary pool (default /dev/shm if present, else the temp dir).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Persists per size and mode.
    #[arg(long, default_value_t = 20_000)]
    pub iters: u64,
}

pub fn persist(a: PersistArgs) -> CmdResult {
    let dir = crate::pool_base(a.dir.as_deref());
    let sizes = [64usize, 256, 4096];
    println!("flush instruction: {} (from CPUID)", flush_insn().name());
    println!("pool directory:    {}", dir.display());
    println!(
        "{:<6} {:>10} {:>10} {:>10}   (ns per write+persist; fences/flushes per op)",
        "mode", "64 B", "256 B", "4 KiB"
    );
    for mode in Mode::ALL {
        let path = dir.join(format!("pmkv-bench-persist-{}-{}.pool", std::process::id(), mode));
        let _ = pmkv_substrate::remove_pool(&path);
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
        let _ = pmkv_substrate::remove_pool(&path);
    }
    Ok(())
}
