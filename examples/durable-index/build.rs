//! The one line a program adds to make its own structure durable with compiler capture:
//! compile the module that holds its writes with the engine's instrumentation.

fn main() {
    pmkv_mangosteen_build::compile("src/durable_part.rs", "index");
}
