//! HART's Dictionary workload: 466,551 English words (public domain), the repository's
//! `data/words.txt.gz`, compiled into the binary (so the harness runs from any directory)
//! and decompressed with flate2 on first use.

use super::KeySet;
use flate2::read::GzDecoder;
use std::io::Read;
use std::sync::OnceLock;

/// Number of words in the file.
pub const WORDS: usize = 466_551;

static GZ: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/words.txt.gz"));

/// All words, in file order (decompressed once per process).
pub fn all() -> &'static KeySet {
    static ALL: OnceLock<KeySet> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut text = Vec::with_capacity(5 << 20);
        GzDecoder::new(GZ).read_to_end(&mut text).expect("the embedded words.txt.gz is a valid gzip stream");
        let mut ks = KeySet::with_capacity(WORDS, text.len());
        for line in text.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if !line.is_empty() {
                ks.push(line);
            }
        }
        ks
    })
}

/// The first `n` words in file order.
pub fn words(n: usize) -> KeySet {
    let all = all();
    if n >= all.len() {
        all.clone()
    } else {
        all.prefix(n)
    }
}
