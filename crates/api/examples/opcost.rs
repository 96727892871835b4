//! Instructions and persistence counters per operation of any engine, through the `pmkv`
//! API, for builds compared under callgrind (timings on a shared host cannot resolve a few
//! percent). Loads N spread 8-byte integer keys (the papers' workloads) with 8-byte
//! values, then runs the phases named: `i` insert all, `s` search all, `u` update all,
//! `d` delete all, printing each phase's lines written, flushes and fences per operation.
//! Run it under `valgrind --tool=callgrind` with one more phase each time; the difference
//! of two runs' totals divided by N is one phase's instructions per operation.
//!
//! `cargo build --release -p pmkv --example opcost`
//! `valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/opcost ENGINE N eadr|adr isud`

use pmkv::{Mode, Options, Registry, Store};

fn main() -> Result<(), pmkv::Error> {
    let args: Vec<String> = std::env::args().collect();
    let engine = Registry::builtin().get(&args[1])?;
    let n: u64 = args[2].parse().expect("key count");
    let mode = if args[3] == "adr" { Mode::Adr } else { Mode::Eadr };
    let phases = args.get(4).cloned().unwrap_or_default();
    let keys: Vec<[u8; 8]> = (0..n).map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1).to_be_bytes()).collect();
    let path = std::path::PathBuf::from(format!("/dev/shm/pmkv-opcost-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let o = Options::default().mode(mode).initial_size(64 << 20).max_size(1 << 30);
    let s = Store::open_with(engine, &path, &o)?;
    let mut found = 0usize;
    for p in phases.chars() {
        let c0 = pmkv_substrate::counters::snapshot();
        for (i, k) in keys.iter().enumerate() {
            match p {
                'i' => s.put(k, &(i as u64).to_le_bytes())?,
                's' => found += s.get(k)?.is_some() as usize,
                'u' => s.put(k, &(!(i as u64)).to_le_bytes())?,
                'd' => found += s.delete(k)? as usize,
                _ => panic!("phase {p}"),
            }
        }
        let c = pmkv_substrate::counters::snapshot().since(&c0);
        let per = |x: u64| x as f64 / n as f64;
        println!(
            "{p}: lines_written {:.3} flushes {:.3} fences {:.3} per op",
            per(c.lines_written),
            per(c.flushes),
            per(c.fences)
        );
    }
    s.close()?;
    let _ = std::fs::remove_file(&path);
    println!("found {found}");
    Ok(())
}
