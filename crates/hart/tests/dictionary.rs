//! SPEC W Dictionary on HART: all 466,551 words of data/words.txt.gz (value = line
//! number), searched, scanned in order, deleted in part, reopened and recovered.

mod common;
use common::*;
use pmkv_substrate::Mode;

#[test]
fn dictionary_insert_search_scan_delete_reopen() {
    let words = words();
    assert_eq!(words.len(), WORDS);
    let (_dir, path) = pool_file("dict.pool");
    let opts = pool_opts(Mode::Eadr, 64 << 20, 1 << 30);
    let mut model = Model::new();
    {
        let h = create_hart(&path, &opts);
        for (i, w) in words.iter().enumerate() {
            let v = (i + 1).to_string().into_bytes();
            h.put(w, &v).unwrap();
            model.insert(w.clone(), v);
        }
        assert_eq!(h.len(), model.len() as u64);
        for (w, v) in &model {
            assert_eq!(get(&h, w).as_ref(), Some(v));
        }
        assert_eq!(get(&h, b"no-such-word-xyz"), None);
        let scanned = contents(&h);
        assert!(scanned == model, "scan differs from the model");
        // Delete every third word.
        for w in words.iter().step_by(3) {
            if model.remove(w).is_some() {
                assert!(h.delete(w).unwrap());
            }
        }
        h.check().unwrap();
    }
    let h = reopen_hart(&path, &opts);
    assert_eq!(h.len(), model.len() as u64);
    assert!(contents(&h) == model);
    h.check().unwrap();
}
