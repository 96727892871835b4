//! SPEC W Dictionary on NBTree: all 466,551 words of data/words.txt.gz (value = line
//! number), searched, scanned in order and in reverse, deleted in part, reopened.

mod common;
use common::*;
use std::ops::Bound;

#[test]
fn dictionary_insert_search_scan_delete_reopen() {
    let words = words();
    assert_eq!(words.len(), WORDS);
    let (_dir, path) = pool_file("dict.pool");
    let opts = pool_opts(Mode::Eadr, 64 << 20, 1 << 30);
    let mut model = Model::new();
    {
        let t = create_tree(&path, &opts);
        for (i, w) in words.iter().enumerate() {
            let v = (i + 1).to_string().into_bytes();
            t.put(w, &v).unwrap();
            model.insert(w.clone(), v);
        }
        assert_eq!(t.len(), model.len() as u64);
        for (w, v) in &model {
            assert_eq!(get(&t, w).as_ref(), Some(v));
        }
        assert_eq!(get(&t, b"no-such-word-xyz"), None);
        assert!(contents(&t) == model, "scan differs from the model");
        let rev = scan(&t, Bound::Unbounded, Bound::Unbounded, 1000, true);
        let want: Vec<_> = model.iter().rev().take(1000).map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(rev, want);
        for w in words.iter().step_by(3) {
            if model.remove(w).is_some() {
                assert!(t.delete(w).unwrap());
            }
        }
        t.check().unwrap();
        t.close().unwrap();
    }
    let t = reopen_tree(&path, &opts);
    assert_eq!(t.len(), model.len() as u64);
    assert!(contents(&t) == model);
    t.check().unwrap();
}
