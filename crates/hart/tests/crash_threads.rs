//! SPEC H7 + P6: several writers under the crash simulator at once. At sampled fence
//! points, crash images (random eviction, torn words) are recovered; the recovered HART
//! must pass `check` (no leak, every leaf reachable once) and every key must hold a value
//! some writer wrote for it.

mod common;
use common::*;
use pmkv_substrate::Eviction;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

#[test]
fn concurrent_writers_crash_anywhere() {
    let h = Arc::new(sim_hart(2 << 20, 2));
    let images = Arc::new(AtomicU64::new(0));
    let failures: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let (imgs, fails) = (images.clone(), failures.clone());
    h.pool().sim().unwrap().set_hook(false, move |pt| {
        if pt.index % 7 != 0 {
            return;
        }
        for ev in [Eviction::Lines(pt.index), Eviction::Words(pt.index + 1)] {
            imgs.fetch_add(1, Ordering::Relaxed);
            let r = recover(&pt.image(ev)).and_then(|r| {
                r.check().map_err(|e| e.to_string())?;
                for (k, v) in contents(&r) {
                    // Values are "<key>=<version>".
                    if !v.starts_with(&k) || v.get(k.len()) != Some(&b'=') {
                        return Err(format!(
                            "{} holds foreign value {}",
                            String::from_utf8_lossy(&k),
                            String::from_utf8_lossy(&v)
                        ));
                    }
                }
                Ok(())
            });
            if let Err(e) = r {
                let mut f = fails.lock().unwrap();
                if f.len() < 5 {
                    f.push(format!("point {} {ev:?}: {e}", pt.index));
                }
            }
        }
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
                        let v = if round % 2 == 0 {
                            format!("{k}={round}")
                        } else {
                            format!("{k}={round}-{}", "x".repeat(40))
                        };
                        h.put(k.as_bytes(), v.as_bytes()).unwrap();
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
    let f = failures.lock().unwrap();
    assert!(f.is_empty(), "crash consistency violated with concurrent writers:\n{}", f.join("\n"));
    eprintln!("concurrent writers: {} crash images checked", images.load(Ordering::Relaxed));
    assert!(images.load(Ordering::Relaxed) > 50);
    h.check().unwrap();
}
