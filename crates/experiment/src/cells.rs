//! The settings users have (issue 10 item 7): each [`CellConfig`] is the main experiment with
//! another library, cluster, arrivals or budget. Every scheduler runs on every class and
//! evaluation seed of every cell, the trained agents unchanged (trained once, on the main
//! setting's cluster; the scorer told the cell's budget); only summaries are kept (the runs of a 120-job cell are large).

use indicatif::ProgressBar;

use crate::agents::TrainedAgent;
use crate::config::{CellConfig, ClusterConfig, ExperimentConfig};
use crate::error::ExperimentError;
use crate::results::{self, SummaryRow, TrainingRecord};
use crate::runner::{self, Setup};

/// The config of `cell`: the main one with the cell's library, cluster, jobs, arrivals, budget.
pub fn cell_config(cfg: &ExperimentConfig, cell: &CellConfig) -> ExperimentConfig {
    let mut c = cfg.clone();
    c.library = cell.library.clone();
    c.cluster = ClusterConfig { gpus: cell.gpus.clone(), file: None };
    c.workloads.jobs = cell.jobs;
    c.workloads.arrival_rate = cell.arrival_rate;
    c.max_slowdown_pct = cell.max_slowdown_pct;
    c.cells.clear();
    c
}

/// Labels `rows` with the cell they come from.
pub fn label(rows: &mut [SummaryRow], cell: &CellConfig) {
    for r in rows {
        r.cell = cell.name.clone();
        r.library = cell.library.clone();
        r.cluster = cell.gpus.clone();
        r.arrivals = cell.arrivals();
        r.max_slowdown = cell.budget();
        r.jobs_per_set = cell.jobs;
    }
}

/// The main setting as a cell (its rows are labelled `main`).
pub fn main_cell(cfg: &ExperimentConfig) -> CellConfig {
    CellConfig {
        name: crate::config::MAIN_CELL.into(),
        library: cfg.library.clone(),
        gpus: cfg.cluster.file.clone().unwrap_or_else(|| cfg.cluster.gpus.clone()),
        jobs: cfg.workloads.jobs,
        arrival_rate: cfg.workloads.arrival_rate,
        max_slowdown_pct: cfg.max_slowdown_pct,
    }
}

/// Evaluates `schedulers` in every cell of `cfg`; returns the summary rows, labelled.
pub fn run(
    cfg: &ExperimentConfig,
    schedulers: &[String],
    trained: &[TrainedAgent],
    training: &[TrainingRecord],
    bar: &ProgressBar,
) -> Result<Vec<SummaryRow>, ExperimentError> {
    let mut out = Vec::new();
    for cell in &cfg.cells {
        let c = cell_config(cfg, cell);
        let named = |e: ExperimentError| ExperimentError::Cell { cell: cell.name.clone(), source: Box::new(e) };
        let setup = Setup::new(&c).map_err(named)?;
        let budget = cell.max_slowdown_pct.map(|p| p / 100.0);
        let make_policy = |name: &str, seed: u64| crate::policy_for(trained, name, seed, budget, &setup);
        let (runs, _) = runner::evaluate(&c, &setup, schedulers, &make_policy, bar).map_err(named)?;
        let mut rows = results::summarise(&runs, &c.workloads.classes, schedulers, training);
        label(&mut rows, cell);
        out.extend(rows);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CellConfig;

    /// A run that fails in a cell keeps its cause in the error's chain (here the simulator's:
    /// an app larger than the GPU), not only the run's name.
    #[test]
    fn a_cells_failed_run_keeps_its_cause() {
        let mut cfg = ExperimentConfig::default();
        cfg.workloads.classes = vec!["mem_heavy".into()];
        cfg.workloads.focus = "mem_heavy".into();
        cfg.evaluation.seeds = 1;
        cfg.cells = vec![CellConfig {
            name: "lucid-small".into(),
            library: "lucid".into(),
            gpus: "titanxp:1".into(),
            jobs: 5,
            arrival_rate: None,
            max_slowdown_pct: None,
        }];
        let e = run(&cfg, &["sjf".into()], &[], &[], &ProgressBar::hidden()).unwrap_err();
        let mut chain = vec![e.to_string()];
        let mut cause = std::error::Error::source(&e);
        while let Some(c) = cause {
            chain.push(c.to_string());
            cause = c.source();
        }
        let all = chain.join(" | ");
        assert!(all.contains("lucid-small") && all.contains("largest GPU"), "{all}");
    }
}
