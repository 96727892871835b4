//! The durable part: the index's writes, compiled with compiler capture by build.rs
//! (pmkv-mangosteen-build). Every line here is what durability adds to the plain index;
//! `tests/changed_lines.rs` keeps the count to what docs/design/mangosteen.md says.
#[path = "index.rs"]
mod index;
use index::Index;
capture_root!(Index);
capture_write! {
    fn add(i: &mut Index, a: (&str, u32)) -> usize { i.add(a.0, a.1) }
    fn add_doc(i: &mut Index, a: (u32, &[&str])) -> usize { i.add_doc(a.0, a.1) }
    fn add_range(i: &mut Index, a: (&str, u32, u32)) -> usize { i.add_range(a.0, a.1, a.2) }
    fn remove(i: &mut Index, word: &str) -> usize { i.remove(word) }
}
