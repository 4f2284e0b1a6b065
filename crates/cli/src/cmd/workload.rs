//! `dqngpu workload`: draw a job set from a workload class (CSV on stdout, or a file).

use std::path::PathBuf;

use anyhow::Context;
use dqngpu_model::{library, WorkloadClass};
use dqngpu_sim::{draw, Arrivals, DEFAULT_JOBS};

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Workload class: gpu_heavy, gpu_light, mem_heavy, mem_light or random.
    #[arg(long, default_value = "random")]
    pub class: String,
    /// Number of jobs (1 to 1,000,000).
    #[arg(long, default_value_t = DEFAULT_JOBS, value_parser = super::parse_job_count)]
    pub jobs: usize,
    /// Seed of every random choice (apps and arrival times).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// App library: thesis, lucid, `generated:SEED[:COUNT]`, or a directory of profiles.
    #[arg(long, default_value = "thesis")]
    pub library: String,
    /// Poisson arrivals at this rate (jobs per second); without it every job is submitted at t = 0.
    #[arg(long, allow_negative_numbers = true)]
    pub arrival_rate: Option<f64>,
    /// Write the job set here (`.csv`, else JSON) instead of printing CSV on stdout.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// The arrival process a rate flag asks for.
pub fn arrivals(rate: Option<f64>) -> Arrivals {
    match rate {
        Some(rate_per_s) => Arrivals::Poisson { rate_per_s },
        None => Arrivals::AllAtZero,
    }
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let class: WorkloadClass = args.class.parse()?;
    let lib = library::resolve(&args.library)?;
    let mut set = draw(&lib, class, args.jobs, args.seed, arrivals(args.arrival_rate))?;
    // A directory is recorded as a whole path, so the file names its library from anywhere.
    let dir = std::path::Path::new(&args.library);
    if !library::is_builtin(&args.library) && dir.is_dir() {
        if let Ok(whole) = dir.canonicalize() {
            set.library = Some(whole.display().to_string());
        }
    }
    match &args.output {
        Some(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            }
            set.write(path).with_context(|| format!("writing the job set to {}", path.display()))?;
            eprintln!("wrote {} jobs ({class}, seed {}) to {}", set.jobs.len(), args.seed, path.display());
        }
        None => print!("{}", set.to_csv()),
    }
    Ok(())
}
