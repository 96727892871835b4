//! Instruction counts per NBTree operation, for builds compared under callgrind (where
//! timings on a shared host cannot resolve a few percent). Loads the first N words of a
//! word list (or N spread 8-byte integers, `ints`) as keys with 8-byte values, then runs the phases named: `i` insert all, `s`
//! search all, `u` update all, `d` delete all. Run it under
//! `valgrind --tool=callgrind` with one more phase each time; the difference of two runs'
//! totals divided by N is one phase's instructions per operation.
//!
//! `cargo build --release -p pmkv-nbtree --example opcost`
//! `valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/opcost WORDS|ints N eadr|adr isud`

use pmkv_nbtree::NbTree;
use pmkv_substrate::{Mode, Pool, PoolOptions};
use std::io::BufRead;
use std::sync::Arc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args[2].parse().expect("key count");
    let mode = if args[3] == "adr" { Mode::Adr } else { Mode::Eadr };
    let phases = args.get(4).cloned().unwrap_or_default();
    // `ints`: 8-byte keys spread uniformly (the int-uniform workload's shape).
    let keys: Vec<Vec<u8>> = if args[1] == "ints" {
        (0..n as u64).map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1).to_be_bytes().to_vec()).collect()
    } else {
        let words = std::fs::File::open(&args[1]).expect("word list");
        std::io::BufReader::new(words).lines().map_while(|l| l.ok()).take(n).map(String::into_bytes).collect()
    };
    let path = std::path::PathBuf::from(format!("/dev/shm/pmkv-opcost-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let opts = PoolOptions::default().mode(mode).initial_size(64 << 20).max_size(1 << 30).prefault(true);
    let t = NbTree::open(Arc::new(Pool::create(&path, "nbtree", &opts).unwrap())).unwrap();
    let mut found = 0usize;
    for p in phases.chars() {
        for (i, k) in keys.iter().enumerate() {
            match p {
                'i' => drop(t.put(k, &(i as u64).to_le_bytes()).unwrap()),
                's' => found += t.get_with(k, &mut |_| {}).unwrap() as usize,
                'u' => drop(t.put(k, &(!(i as u64)).to_le_bytes()).unwrap()),
                'd' => found += t.delete(k).unwrap() as usize,
                _ => panic!("phase {p}"),
            }
        }
    }
    println!("{} keys, phases {phases}, found {found}", keys.len());
    drop(t);
    let _ = std::fs::remove_file(&path);
}
