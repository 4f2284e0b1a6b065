//! `dqngpu bench`: time whole simulations (median wall time per simulation on this thread)
//! and report job-steps per second (job-steps = sum over steps of the jobs running).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use dqngpu_interference::Interference;
use dqngpu_model::{library, WorkloadClass};
use dqngpu_sim::{draw, Arrivals, SimConfig, DEFAULT_JOBS};
use serde::Serialize;

use dqngpu_rl::SchedulerName;

use super::simulate::{cluster, resolve_scheduler};
use super::Format;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Schedulers to time, comma-separated (heuristics; any case).
    #[arg(long, default_value = "sjf,tetris", value_delimiter = ',')]
    pub schedulers: Vec<SchedulerName>,
    /// Timed simulations per scheduler (after one untimed warm-up); the median is reported.
    #[arg(long, default_value_t = 51)]
    pub runs: usize,
    /// Workload class to draw.
    #[arg(long, default_value = "random")]
    pub workload: String,
    /// Jobs to draw (1 to 1,000,000).
    #[arg(long, default_value_t = DEFAULT_JOBS, value_parser = super::parse_job_count)]
    pub n_jobs: usize,
    /// Seed of the workload.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The cluster, e.g. `titanxp:1`.
    #[arg(long, default_value = "titanxp:1", conflicts_with = "cluster")]
    pub gpus: String,
    /// The cluster as a TOML file.
    #[arg(long)]
    pub cluster: Option<PathBuf>,
    /// Interference model: contention, contention-h100 (fitted on an H100, time-sliced), measured or none.
    #[arg(long, default_value = "contention")]
    pub interference: String,
    /// App library.
    #[arg(long, default_value = "thesis")]
    pub library: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// One scheduler's timing.
#[derive(Debug, Serialize)]
pub struct BenchRow {
    /// Scheduler.
    pub scheduler: String,
    /// Timed runs.
    pub runs: usize,
    /// Median wall time of one simulation, microseconds.
    pub median_us: f64,
    /// Fastest run, microseconds.
    pub min_us: f64,
    /// Slowest run, microseconds.
    pub max_us: f64,
    /// Steps of one simulation.
    pub steps: u64,
    /// Job-steps of one simulation.
    pub job_steps: u64,
    /// Decisions asked of the scheduler in one simulation.
    pub decisions: u64,
    /// job_steps / median time.
    pub job_steps_per_s: f64,
    /// The simulated makespan (a sanity check that the runs did the work).
    pub makespan_s: f64,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!((1..=100_000).contains(&args.runs), "--runs {}: expected 1 to 100000 timed runs", args.runs);
    let cluster = cluster(&args.gpus, args.cluster.as_deref())?;
    let class: WorkloadClass = args.workload.parse()?;
    let lib = library::resolve(&args.library)?;
    let set = draw(&lib, class, args.n_jobs, args.seed, Arrivals::AllAtZero)?;
    let interference: Arc<dyn Interference> = Arc::from(dqngpu_interference::by_name(&args.interference)?);
    let mut rows = Vec::new();
    let caller = dqngpu_rl::scorer::Caller::for_config(&SimConfig::default(), interference.clone());
    if let Some(agent) = args.schedulers.iter().find(|n| n.is_agent()) {
        anyhow::bail!(
            "--schedulers {agent}: bench times the heuristics and takes no model; time an agent's decisions with `cargo run --release -p dqngpu-rl --example decision_latency -- MODEL`"
        );
    }
    for name in &args.schedulers {
        let policy = resolve_scheduler(*name, None, args.seed, &caller, None)?;
        let sim = || dqngpu_sim::run(policy.as_ref(), &cluster, &lib, &set, interference.clone(), SimConfig::default());
        let first = sim()?;
        let mut times = Vec::with_capacity(args.runs);
        for _ in 0..args.runs {
            let t = Instant::now();
            let r = sim()?;
            times.push(t.elapsed().as_secs_f64());
            anyhow::ensure!(r == first, "simulations of the same input differ");
        }
        times.sort_by(f64::total_cmp);
        let median = if times.len() % 2 == 1 {
            times[times.len() / 2]
        } else {
            (times[times.len() / 2 - 1] + times[times.len() / 2]) / 2.0
        };
        rows.push(BenchRow {
            scheduler: first.scheduler.clone(),
            runs: args.runs,
            median_us: median * 1e6,
            min_us: times[0] * 1e6,
            max_us: times[times.len() - 1] * 1e6,
            steps: first.steps,
            job_steps: first.job_steps,
            decisions: first.decisions,
            job_steps_per_s: first.job_steps as f64 / median,
            makespan_s: first.makespan_s,
        });
    }
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
        Format::Table => {
            println!(
                "workload {} ({} jobs, seed {}), library {}, {} GPU(s), interference {}; median of {} runs, one thread",
                class,
                set.jobs.len(),
                args.seed,
                lib.name,
                cluster.gpus().len(),
                args.interference,
                args.runs
            );
            println!(
                "{:<10} {:>12} {:>10} {:>10} {:>8} {:>10} {:>9} {:>16} {:>11}",
                "scheduler",
                "median_us",
                "min_us",
                "max_us",
                "steps",
                "job_steps",
                "decisions",
                "job_steps_per_s",
                "makespan_s"
            );
            for r in &rows {
                println!(
                    "{:<10} {:>12.1} {:>10.1} {:>10.1} {:>8} {:>10} {:>9} {:>16.3e} {:>11.1}",
                    r.scheduler,
                    r.median_us,
                    r.min_us,
                    r.max_us,
                    r.steps,
                    r.job_steps,
                    r.decisions,
                    r.job_steps_per_s,
                    r.makespan_s
                );
            }
        }
    }
    Ok(())
}
