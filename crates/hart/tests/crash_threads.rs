//! SPEC H7 + P6: several writers under the crash simulator at once. At sampled fence
//! points, crash images (random eviction, torn words) are recovered; the recovered HART
//! must pass `check` (no leak, every leaf reachable once) and every key must hold a value
//! some writer wrote for it (a value that names its key).

mod common;
use common::*;
use pmkv_substrate::Eviction;
use std::sync::Arc;

#[test]
fn concurrent_writers_crash_anywhere() {
    let h = Arc::new(sim_hart(2 << 20, 2));
    let found = CrashFindings::new();
    let f = found.clone();
    h.pool().sim().unwrap().set_hook(false, move |pt| {
        if pt.index % 7 != 0 {
            return;
        }
        f.check_images(pt, [Eviction::Lines(pt.index), Eviction::Words(pt.index + 1)], "", |img| {
            let r = recover(img)?;
            r.check().map_err(|e| e.to_string())?;
            for (k, v) in contents(&r) {
                if tag_of(&k, &v).is_none() {
                    return Err(format!("{} holds foreign value {v:02x?}", String::from_utf8_lossy(&k)));
                }
            }
            Ok(())
        });
    });
    let writers: Vec<_> = ["aa", "zz", "mm"]
        .into_iter()
        .map(|p| {
            let h = h.clone();
            std::thread::spawn(move || {
                for round in 0..3u32 {
                    for i in 0..60u32 {
                        let k = format!("{p}{i:03}");
                        // Alternate 8-byte (in place) and longer (Algorithm 3) values.
                        let v = tagged_value(k.as_bytes(), round, if round % 2 == 0 { 8 } else { 48 });
                        h.put(k.as_bytes(), &v).unwrap();
                    }
                    for i in (0..60u32).filter(|i| i % 3 == round % 3) {
                        h.delete(format!("{p}{i:03}").as_bytes()).unwrap();
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    h.pool().sim().unwrap().clear_hook();
    found.assert_none("crash consistency violated with concurrent writers");
    eprintln!("concurrent writers: {} crash images checked", found.images());
    assert!(found.images() > 50);
    h.check().unwrap();
}
