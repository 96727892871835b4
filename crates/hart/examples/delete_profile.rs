//! Profiling aid: load the Dictionary, pause 1 s, delete every word (eadr). Run under
//! `perf record -D 1200` to see the delete path alone.

use pmkv_hart::{Hart, HartOptions};
use pmkv_substrate::{Mode, Pool, PoolOptions};
use std::io::Read;
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let mut raw = Vec::new();
    let f = std::fs::File::open(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/words.txt.gz")).unwrap();
    flate2::read::GzDecoder::new(f).read_to_end(&mut raw).unwrap();
    let words: Vec<&[u8]> = raw.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
    let path = format!("/dev/shm/pmkv-delprof-{}.pool", std::process::id());
    let _ = std::fs::remove_file(&path);
    let opts = PoolOptions::default().mode(Mode::Eadr).initial_size(256 << 20);
    let h = Hart::open(Arc::new(Pool::create(&path, "hart", &opts).unwrap()), HartOptions::default()).unwrap();
    for w in &words {
        h.put(w, &[7u8; 8]).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let t = Instant::now();
    for w in &words {
        h.delete(w).unwrap();
    }
    eprintln!("delete {:.1} ns/op", t.elapsed().as_nanos() as f64 / words.len() as f64);
    drop(h);
    let _ = std::fs::remove_file(&path);
}
