use pmkv_substrate::{Latency, Mode, Pool, PoolOptions};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
fn main() {
    let path = "/dev/shm/flushprobe.pool";
    let _ = std::fs::remove_file(path);
    let o = PoolOptions::default().mode(Mode::Adr).latency(Latency::NONE).initial_size(8 << 20);
    let pool = Pool::create(path, "x", &o).unwrap();
    let n = 1_000_000u64;
    for (name, stride, lines) in
        [("same line", 0u64, 1u64), ("2 lines alternating", 64, 2), ("1MiB cycle", 64, 16384), ("4 lines", 64, 4)]
    {
        let t = Instant::now();
        for i in 0..n {
            let off = 8192 + (i % lines) * stride;
            let w = unsafe { AtomicU64::from_ptr(pool.at::<u64>(off)) };
            w.fetch_add(1, Ordering::AcqRel);
            pool.persist_off(off, 8);
        }
        println!("{name}: {:.1} ns per CAS+persist", t.elapsed().as_nanos() as f64 / n as f64);
        let t = Instant::now();
        for i in 0..n {
            let off = 8192 + (i % lines) * stride;
            unsafe { pool.at::<u64>(off).write(i) };
            pool.persist_off(off, 8);
        }
        println!("{name}: {:.1} ns per store+persist", t.elapsed().as_nanos() as f64 / n as f64);
    }
    let _ = std::fs::remove_file(path);
}
