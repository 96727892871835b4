//! The plain structure, as a program writes it with no thought of durability: an
//! inverted index, word → the documents holding it. Compiled twice, unchanged: into the
//! program (which reads it, and uses it plain) and into the captured module
//! (`durable_part.rs`, which writes it).

use std::collections::HashMap;

/// Word → postings (document numbers, increasing), and the number of postings.
#[derive(Default, Debug, Clone, PartialEq)]
pub struct Index {
    pub postings: HashMap<String, Vec<u32>>,
    pub total: u64,
}

impl Index {
    /// Add `doc` to `word`'s postings; how many documents hold `word` now. Documents come
    /// in increasing order: an older one panics (a caller's bug), with the word's entry
    /// already made.
    pub fn add(&mut self, word: &str, doc: u32) -> usize {
        let p = self.postings.entry(word.to_string()).or_default();
        if let Some(&last) = p.last() {
            assert!(doc > last, "postings of {word:?} out of order: {doc} after {last}");
        }
        p.push(doc);
        self.total += 1;
        p.len()
    }

    /// Add document `doc`, holding `words` (each once); the postings added.
    pub fn add_doc(&mut self, doc: u32, words: &[&str]) -> usize {
        words.iter().map(|w| self.add(w, doc)).count()
    }

    /// Add documents `first..first + n` to `word`'s postings.
    pub fn add_range(&mut self, word: &str, first: u32, n: u32) -> usize {
        (first..first + n).fold(0, |_, d| self.add(word, d))
    }

    /// Drop `word`; how many postings it had.
    pub fn remove(&mut self, word: &str) -> usize {
        let n = self.postings.remove(word).map_or(0, |p| p.len());
        self.total -= n as u64;
        n
    }

    /// The documents holding `word`.
    pub fn get(&self, word: &str) -> &[u32] {
        self.postings.get(word).map_or(&[], Vec::as_slice)
    }
}
