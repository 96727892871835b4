//! `include/pmkv.h` is what cbindgen generates from `src/lib.rs` now: a stale header fails
//! here. `PMKV_BLESS=1 cargo test -p pmkv-c --test header` rewrites it.

#[test]
fn header_is_current() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let cfg = cbindgen::Config::from_file(format!("{dir}/cbindgen.toml")).expect("cbindgen.toml");
    let mut out = Vec::new();
    cbindgen::Builder::new().with_crate(dir).with_config(cfg).generate().expect("cbindgen").write(&mut out);
    let path = format!("{dir}/include/pmkv.h");
    let have = std::fs::read(&path).unwrap_or_default();
    if have != out {
        if std::env::var_os("PMKV_BLESS").is_some() {
            std::fs::write(&path, &out).expect("write the header");
            return;
        }
        panic!("{path} is stale: run `PMKV_BLESS=1 cargo test -p pmkv-c --test header` and commit it");
    }
}
