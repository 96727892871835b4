// TEMPORARY (not to be committed): drives the harness while pmkv-cli does not build.
use clap::Parser;
#[derive(Parser)]
struct A {
    #[command(subcommand)]
    w: Option<W>,
}
#[derive(clap::Subcommand)]
enum W {
    Run(Box<pmkv_bench::cli::RunArgs>),
    Reproduce(Box<pmkv_bench::cli::ReproduceArgs>),
}
fn main() {
    let r = match A::parse().w {
        None => pmkv_bench::cli::default_main_job(),
        Some(W::Run(a)) => pmkv_bench::cli::run(*a),
        Some(W::Reproduce(a)) => pmkv_bench::cli::reproduce(*a),
    };
    if let Err(e) = r {
        eprintln!("pmkv: {e}");
        std::process::exit(2);
    }
}
