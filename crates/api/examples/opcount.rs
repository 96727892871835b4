//! Instructions per operation through the public API, for A/B comparisons that timings on a
//! shared machine cannot settle: `opcount ENGINE MODE N PHASES` runs the phases named by
//! PHASES (a prefix of "isud": insert, search, update, delete, each over the same N
//! pseudo-random keys) on a fresh pool in /dev/shm. Run it under
//! `valgrind --tool=callgrind --callgrind-out-file=/dev/null` once per prefix ("", "i",
//! "is", "isu", "isud"); the difference of two totals divided by N is one operation's
//! instructions. Deterministic: repeated runs agree to a few instructions in 10^8.
//! docs/design/engine-kit.md ("What the kit costs") used it.
//!
//! An optional fifth argument `u64` uses spread 8-byte integer keys (the papers'
//! workloads) instead of the default string keys. Each phase prints its persistence
//! counters per operation; `EXACT=1` in the environment counts lines written exactly
//! (`counters::set_exact`: distinct lines each operation dirtied), which is how
//! docs/design/substrate.md measured that counting's cost.
use pmkv::{Mode, Options, Store};
use pmkv_substrate::counters;
fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 5 && !(a.len() == 6 && a[5] == "u64") {
        eprintln!("usage: opcount ENGINE MODE N PHASES [u64] (PHASES: a prefix of isud, may be empty)");
        std::process::exit(2);
    }
    counters::set_exact(std::env::var("EXACT").is_ok_and(|v| v == "1"));
    let (engine, mode, n, phases) = (&a[1], a[2].parse::<Mode>().unwrap(), a[3].parse::<u64>().unwrap(), &a[4]);
    let path = format!("/dev/shm/opcount-{}.pool", std::process::id());
    let _ = std::fs::remove_file(&path);
    let opts = Options::default().mode(mode).initial_size(64 << 20).max_size(1 << 30).prefault(true);
    let st = Store::open(&path, engine, &opts).unwrap();
    let mut x: u64 = 0x9E3779B97F4A7C15;
    let keys: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            if a.len() == 6 {
                (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1).to_be_bytes().to_vec()
            } else {
                format!("{:x}-{i}", x >> 20).into_bytes()
            }
        })
        .collect();
    for p in phases.chars() {
        let c0 = counters::snapshot();
        for k in &keys {
            match p {
                'i' => st.put(k, b"value-01").unwrap(),
                's' => assert!(st.get(k).unwrap().is_some()),
                'u' => st.put(k, b"value-02").unwrap(),
                'd' => {
                    st.delete(k).unwrap();
                }
                _ => panic!("phase {p}"),
            }
        }
        let c = counters::snapshot().since(&c0);
        let per = |x: u64| x as f64 / n.max(1) as f64;
        println!(
            "{p}: lines_written {:.3} flushes {:.3} fences {:.3} per op",
            per(c.lines_written),
            per(c.flushes),
            per(c.fences)
        );
    }
    st.close().unwrap();
    let _ = std::fs::remove_file(&path);
}
