// NBTree for writers in random order: several threads write one store at once (the
// engine is lock-free), then a range scan reads the keys back in byte order.
//
// ```sh
// cargo run --release -p pmkv --example nbtree_writers
// ```

use pmkv::{KeyRange, Options, Store};
use std::ops::Bound;

fn main() -> Result<(), pmkv::Error> {
    let store = Store::open("orders.pool", "nbtree", &Options::default())?;
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..4u64)
            .map(|t| {
                let store = &store;
                s.spawn(move || -> Result<(), pmkv::Error> {
                    for i in 0..1000u64 {
                        // Random-looking ids: what NBTree is picked for.
                        let id = (t * 1000 + i).wrapping_mul(0x9e37_79b9_7f4a_7c15) % 1_000_000;
                        store.put(format!("order:{id:06}").as_bytes(), format!("writer {t}").as_bytes())?;
                    }
                    Ok(())
                })
            })
            .collect();
        writers.into_iter().try_for_each(|w| w.join().expect("a writer panicked"))
    })?;
    println!("{} orders", store.len()?);
    let first = KeyRange { start: Bound::Included(b"order:".to_vec()), end: Bound::Excluded(b"order;".to_vec()) };
    for record in store.range(&first).take(3) {
        let (key, value) = record?;
        println!("{} = {}", String::from_utf8_lossy(&key), String::from_utf8_lossy(&value));
    }
    store.close()
}
