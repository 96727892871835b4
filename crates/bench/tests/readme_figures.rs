//! The README's figures table is generated, not typed: every row of it must be a row that
//! `pmkv bench report` prints from the results of the run the README links to
//! (docs/results/<run>.md, whose JSON sits beside it as <run>.json), and the engine advice
//! quotes that report's verdict line word for word.

use pmkv_bench::command::main_report::{advice, figures_table};
use pmkv_bench::report::Report;
use std::path::Path;

#[test]
fn the_readme_figures_are_rows_of_the_linked_run() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let section = readme.split("## Current figures").nth(1).expect("README has a Current figures section");
    let section = section.split("\n## ").next().unwrap();
    let link = section
        .split("](docs/results/")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .expect("the section links the run's results file");
    let json = root.join("docs/results").join(link.replace(".md", ".json"));
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{}: {e}", json.display()));
    let rep: Report = serde_json::from_str(&text).unwrap();
    let generated = figures_table(&rep.records, "dictionary");
    let rows: Vec<&str> = section.lines().filter(|l| l.starts_with('|')).collect();
    assert!(rows.len() >= 5, "the README's table has {} lines", rows.len());
    let gen: Vec<&str> = generated.lines().collect();
    assert_eq!(rows[..2], gen[..2], "the table's header differs from the report's");
    for r in &rows[2..] {
        assert!(gen.contains(r), "README row {r:?} is not in the report of {}:\n{generated}", json.display());
    }
    let verdict = advice(&rep.records)
        .lines()
        .find(|l| l.starts_with("Durable engines"))
        .expect("the report has a verdict line")
        .to_string();
    let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains(&verdict), "the README does not quote the report's verdict: {verdict}");
}
