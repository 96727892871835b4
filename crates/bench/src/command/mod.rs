//! `pmkv bench ...`: the benchmark commands, parsed by the `pmkv` CLI (with its `bench`
//! feature) and run here, so that the plain CLI does not link the harness, LMDB, plotters
//! or the PMDK loader. One module per subcommand:
//!
//! * [`main_job`] — `pmkv bench` with no subcommand;
//! * [`persist`] — `pmkv bench persist`, the substrate's flush and fence costs;
//! * [`alloc`] — `pmkv bench alloc`, EPallocator against PMDK's libpmemobj;
//! * [`run`] — `pmkv bench run`, any workload on chosen engines and settings;
//! * [`server`] — `pmkv bench server`, redis-benchmark against pmkv serve and Redis;
//! * `pmkv bench reproduce` — [`crate::reproduce`].

pub mod alloc;
pub mod main_job;
pub mod main_report;
pub mod persist;
pub mod run;
pub mod server;
pub mod server_types;

/// What a benchmark command returns.
pub type CmdResult = std::result::Result<(), Box<dyn std::error::Error>>;

#[derive(clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "With no subcommand: the main job, ~2.5 min on an idle 2-core machine (2 min 34 s of CPU; 7 min \
                  wall on this project's machine under load 9) — the Dictionary, Sequential and Random workloads, \
                  whole, on every engine in eadr and adr plus baselines, each measurement 3 times (--runs). It \
                  prints which durable engine was fastest per workload and operation, and writes a report \
                  directory (--out): summary.md, tables.md, results.csv/.json, plots/."
)]
pub struct Args {
    #[command(subcommand)]
    pub what: Option<What>,
    /// The main job: runs of each measurement, in alternating rounds (the table gives the
    /// median and the range).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// The main job: give engines whose every write is a slow durability step
    /// (`engines::SLOW_WRITES`) the whole key sets too, not their first 50,000 keys. No
    /// engine the main job runs is one now (mangosteen was, with page capture), so this
    /// changes nothing today; kept so that scripts that pass it keep working.
    #[arg(long)]
    pub full: bool,
    /// The main job: the report directory (summary.md, tables.md, results.csv/.json,
    /// plots/); default `pmkv-report-<UTC time>` here. Printed at the end.
    #[arg(long, value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,
}

#[derive(clap::Subcommand)]
pub enum What {
    /// ns per persist (write + flush + fence) of 64 B, 256 B and 4 KiB in each mode.
    Persist(persist::PersistArgs),
    /// ns per allocate+free pair: EPallocator vs PMDK libpmemobj, 1 and 2 threads (SPEC P7).
    Alloc(alloc::AllocArgs),
    /// Run a workload on chosen engines, modes, latencies and thread counts (SPEC U5, W).
    Run(Box<run::RunArgs>),
    /// Reproduce a paper's experiments: report.md, results.json/.csv, plots (SPEC U5).
    Reproduce(Box<crate::reproduce::ReproduceArgs>),
    /// redis-benchmark against pmkv serve and redis-server (always, everysec, no persistence).
    Server(server::ServerArgs),
    /// From a main job's results.json: the README's figures table and engine advice.
    Report(main_report::ReportArgs),
}

/// Run the command `a` names.
pub fn execute(a: Args) -> CmdResult {
    match a.what {
        Some(What::Persist(p)) => persist::persist(p),
        Some(What::Alloc(a)) => alloc::run(a),
        Some(What::Run(r)) => run::run(*r).map_err(Into::into),
        Some(What::Reproduce(r)) => crate::reproduce::reproduce(&r).map_err(Into::into),
        Some(What::Server(s)) if s.types => server_types::run(&s),
        Some(What::Server(s)) => server::run(s),
        Some(What::Report(r)) => main_report::run(r),
        // No subcommand: the main job (Dictionary, every engine, eadr and adr, baselines).
        None => {
            let out = a.out.unwrap_or_else(main_report::default_dir);
            main_job::main_job(a.runs as usize, a.full, &out).map_err(Into::into)
        }
    }
}
