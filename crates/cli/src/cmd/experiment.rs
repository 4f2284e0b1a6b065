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
    /// Evaluation job sets per class (seeds never used in training); overrides the config and `--quick`.
    #[arg(long)]
    pub seeds: Option<u64>,
    /// Small run for CI and smoke tests: 2 seeds (unless --seeds), 10 jobs, short training, one
    /// small training setting, and only the cells thesis-4x2-0.1 and heldout-1gpu (a warning
    /// names the others dropped); every file is still written.
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
    // Every cell and training setting is checked, `--quick`'s dropped ones too, and the out
    // dir is made ready, before minutes of work.
    cfg.check_references(args.config.as_deref())?;
    if args.quick {
        if args.config.is_some() {
            warn_dropped_cells(&cfg);
        }
        cfg = cfg.quick();
    }
    // An explicit --seeds wins over the config and over --quick's 2.
    if let Some(n) = args.seeds {
        cfg.evaluation.seeds = n;
        cfg.validate(args.config.as_deref()).context("--seeds")?;
    }
    for w in cfg.step_warnings() {
        eprintln!("{w}");
    }
    output::prepare(&args.out).with_context(|| format!("--out {}", args.out.display()))?;
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

/// Warns of the cells of the user's config that `--quick` leaves out, naming those it keeps
/// (none, where the config has neither quick cell: then only the main setting runs).
fn warn_dropped_cells(cfg: &ExperimentConfig) {
    let quick = dqngpu_experiment::config::QUICK_CELLS;
    let (kept, dropped): (Vec<&str>, Vec<&str>) =
        cfg.cells.iter().map(|c| c.name.as_str()).partition(|n| quick.contains(n));
    if !dropped.is_empty() {
        let kept = if kept.is_empty() { "no cell, only the main setting".to_string() } else { kept.join(" and ") };
        eprintln!("warning: --quick evaluates {kept}; it leaves out {}", dropped.join(", "));
    }
}
