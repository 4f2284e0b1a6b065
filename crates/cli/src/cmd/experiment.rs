//! `dqngpu experiment`: the thesis's Section V end to end (train, evaluate, tables, plots,
//! report) into an out dir.

use std::path::PathBuf;

use anyhow::Context;
use dqngpu_experiment::{output, ExperimentConfig};

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Experiment config (TOML); the built-in defaults reproduce the thesis (see configs/thesis.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Output directory (made if missing). An earlier experiment's files there are replaced; a
    /// directory that holds files of the same names but no earlier experiment is refused.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Evaluation job sets per class (seeds never used in training); overrides the config.
    #[arg(long)]
    pub seeds: Option<u64>,
    /// Small run for CI and smoke tests: 2 seeds, 10 jobs, short training; every file is still written.
    #[arg(long)]
    pub quick: bool,
    /// No progress bars.
    #[arg(long)]
    pub no_progress: bool,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let mut cfg = match &args.config {
        Some(p) => ExperimentConfig::read(p)?,
        None => ExperimentConfig::default(),
    };
    if let Some(n) = args.seeds {
        cfg.evaluation.seeds = n;
        cfg.validate(args.config.as_deref()).context("--seeds")?;
    }
    // Every cell and training setting is checked, `--quick`'s dropped ones too, and the out
    // dir is made ready, before minutes of work.
    cfg.check_references(args.config.as_deref())?;
    output::prepare(&args.out).with_context(|| format!("--out {}", args.out.display()))?;
    if args.quick {
        cfg = cfg.quick();
    }
    let res = dqngpu_experiment::run(&cfg, args.quick, !args.no_progress)?;
    output::write_all(&res, &args.out).with_context(|| format!("writing {}", args.out.display()))?;

    for s in &res.skipped {
        eprintln!("skipped {}: {}", s.scheduler, s.reason);
    }
    println!(
        "{:<10} {:<12} {:>11} {:>12} {:>10} {:>11} {:>9} {:>9}",
        "workload", "scheduler", "mean_jct_s", "makespan_s", "ci95_s", "slowed>10%", "gpu_%", "mem_%"
    );
    for r in &res.summary {
        println!(
            "{:<10} {:<12} {:>11.1} {:>12.1} {:>10} {:>10.1}% {:>9.2} {:>9.2}",
            r.workload,
            r.scheduler,
            r.mean_jct_s_mean,
            r.makespan_s_mean,
            r.ci(r.makespan_s_ci95).map_or("-".into(), |c| format!("{c:.1}")),
            r.slowed_over_10_pct_mean,
            r.avg_gpu_util_pct_mean,
            r.avg_gpu_mem_util_pct_mean
        );
    }
    println!("report: {}", args.out.join("report.html").display());
    println!("wall clock: {:.1} s", res.wall_s);
    Ok(())
}
