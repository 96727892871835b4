//! What durability adds to the plain index, in lines: `src/durable_part.rs` (the module
//! the build script compiles with capture), the build script's call, and `src/lib.rs`'s
//! program side. docs/design/mangosteen.md ("Compiler capture of a program's own
//! structure") states these counts; the test fails if the example grows past them.

/// Lines that are neither blank nor comments.
fn code_lines(text: &str) -> usize {
    text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("//")).count()
}

fn file(path: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

#[test]
fn durability_adds_no_more_lines_than_the_docs_say() {
    let module = code_lines(&file("src/durable_part.rs"));
    let build = code_lines(&file("build.rs"));
    let program = code_lines(&file("src/lib.rs"));
    let plain = code_lines(&file("src/index.rs"));
    println!("plain index {plain} lines; durable part {module}, build.rs {build}, program side {program}");
    assert!(module <= 10, "src/durable_part.rs: {module} lines of code, the docs say at most 10");
    assert!(build <= 3, "build.rs: {build} lines of code, the docs say at most 3");
    assert!(program <= 40, "src/lib.rs: {program} lines of code, the docs say at most 40");
    // The plain structure is compiled unchanged into both: durability edits none of it.
    assert!(!file("src/index.rs").contains("pmkv"), "the plain index names nothing of pmkv");
}
