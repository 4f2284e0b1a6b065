//! The thesis's Section V end to end: draw job sets, train the RL agents, evaluate every
//! scheduler on every workload class over seeds never used in training, and write
//! `results.json`, `summary.csv`, `report.md`, `report.html` and the plots.
//!
//! ```no_run
//! let cfg = dqngpu_experiment::ExperimentConfig::default().quick();
//! let res = dqngpu_experiment::run(&cfg, true, false).unwrap();
//! dqngpu_experiment::output::write_all(&res, std::path::Path::new("results")).unwrap();
//! ```

pub mod agents;
pub mod cells;
pub mod config;
pub mod error;
pub mod league;
pub mod output;
pub mod plots;
pub mod report;
pub mod reported;
pub mod results;
pub mod runner;
pub mod stats;

use std::time::Instant;

use dqngpu_model::Policy;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

pub use config::ExperimentConfig;
pub use error::ExperimentError;
pub use results::ExperimentResults;

/// Runs the experiment `cfg` describes (`quick` only labels the results; pass
/// `cfg.quick()` for the small version). `progress` draws bars on stderr.
pub fn run(cfg: &ExperimentConfig, quick: bool, progress: bool) -> Result<ExperimentResults, ExperimentError> {
    let started = Instant::now();
    cfg.validate(None)?;
    cfg.check_references(None)?;
    let rl = agents_to_train(&cfg.schedulers()?);
    let setup = runner::Setup::new(cfg)?;
    let bars = MultiProgress::with_draw_target(if progress {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });

    let (trained, mut skipped) = agents::train(cfg, &setup, &rl, &bars)?;
    // `dqngpu-plan` searches over the `dqngpu` scorer: without one it cannot run.
    let plan = dqngpu_rl::scheduler::PLAN;
    if cfg.schedulers.names.iter().any(|n| n == plan) && trained_scorer(&trained).is_none() {
        skipped.push(results::Skipped {
            scheduler: plan.into(),
            reason: "it searches over the dqngpu scorer, which was not trained (algorithm `scorer`)".into(),
        });
    }
    let evaluated: Vec<String> =
        cfg.schedulers.names.iter().filter(|n| !skipped.iter().any(|s| &s.scheduler == *n)).cloned().collect();
    if !evaluated.contains(&cfg.schedulers.baseline) {
        return Err(ExperimentError::Run {
            what: format!("baseline `{}`", cfg.schedulers.baseline),
            message: "was skipped; every comparison is normalised to it".into(),
        });
    }

    let bar = bars.add(ProgressBar::new(0));
    bar.set_style(
        ProgressStyle::with_template("evaluate {bar:30} {pos}/{len} runs [{elapsed_precise} < {eta_precise}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let budget = cfg.max_slowdown_pct.map(|p| p / 100.0);
    let factory = |name: &str, seed: u64| policy_for(&trained, name, seed, budget, &setup);
    let (runs, timelines) = runner::evaluate(cfg, &setup, &evaluated, &factory, &bar)?;

    let training: Vec<results::TrainingRecord> = trained.iter().map(|a| a.record.clone()).collect();
    let mut summary = results::summarise(&runs, &cfg.workloads.classes, &evaluated, &training);
    cells::label(&mut summary, &cells::main_cell(cfg));
    let cell_rows = cells::run(cfg, &evaluated, &trained, &training, &bar)?;
    bar.finish_and_clear();
    let focus = &cfg.workloads.focus;
    Ok(ExperimentResults {
        version: env!("CARGO_PKG_VERSION").to_string(),
        commit: option_env!("DQNGPU_COMMIT").map(str::to_string),
        config: cfg.clone(),
        quick,
        eval_seeds: cfg.eval_seeds(),
        training_seeds: cfg.training_seeds(),
        slowdown: results::slowdown_means(&runs, focus, &evaluated),
        training_overhead: results::training_overhead(&summary, focus, &cfg.schedulers.baseline),
        cost: results::costs(&summary, focus, cfg),
        schedulers: evaluated,
        skipped,
        runs,
        summary,
        timelines,
        training,
        wall_s: started.elapsed().as_secs_f64(),
        cells: cell_rows,
    })
}

/// The policy called `name` for a run on job set `seed` under a slowdown budget (a fraction)
/// and the setup's interference model: a trained agent (the scorer choosing within what they
/// admit), else a heuristic.
pub(crate) fn policy_for<'a>(
    trained: &'a [agents::TrainedAgent],
    name: &str,
    seed: u64,
    budget: Option<f64>,
    setup: &runner::Setup,
) -> Result<Box<dyn Policy + 'a>, ExperimentError> {
    let caller = dqngpu_rl::scorer::Caller {
        max_slowdown: budget,
        ..dqngpu_rl::scorer::Caller::for_config(&setup.sim, setup.interference.clone())
    };
    if name == dqngpu_rl::scheduler::PLAN {
        let Some(base) = trained_scorer(trained) else {
            return Err(ExperimentError::Run { what: name.into(), message: "no dqngpu scorer to search over".into() });
        };
        return Ok(Box::new(dqngpu_rl::scorer::plan::PlanPolicy::new(base.clone().with_caller(caller), setup.plan)));
    }
    match trained.iter().find(|a| a.name == name) {
        Some(a) => match &a.policy {
            agents::AgentPolicy::Scorer(s) => Ok(Box::new(s.clone().with_caller(caller))),
            agents::AgentPolicy::Fixed(p) => Ok(Box::new(Shared(p.as_ref()))),
        },
        None => Ok(dqngpu_policy::by_name_within(name, seed, Some(setup.interference.clone()), caller.admission())?),
    }
}

/// The `dqngpu` scorer among the trained agents (none when `dqngpu` was not trained, or was
/// trained as the thesis's image agent).
fn trained_scorer(trained: &[agents::TrainedAgent]) -> Option<&dqngpu_rl::scorer::ScorerPolicy> {
    trained.iter().find_map(|a| match &a.policy {
        agents::AgentPolicy::Scorer(s) if a.name == dqngpu_rl::gpu::AgentKind::Dqngpu.name() => Some(s),
        _ => None,
    })
}

/// The RL agents to train for `names`: each agent once; `dqngpu-plan` needs `dqngpu`'s scorer.
fn agents_to_train(names: &[dqngpu_rl::SchedulerName]) -> Vec<String> {
    let mut rl: Vec<String> = Vec::new();
    for n in names.iter().filter_map(|n| n.agent()) {
        if !rl.iter().any(|r| r == n.name()) {
            rl.push(n.name().to_string());
        }
    }
    rl
}

/// A borrowed policy, boxed for the factory.
struct Shared<'a>(&'a dyn Policy);

impl Policy for Shared<'_> {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn decide(&self, view: &dqngpu_model::ClusterView<'_>) -> Vec<dqngpu_model::Placement> {
        self.0.decide(view)
    }
    fn wants_every_tick(&self) -> bool {
        self.0.wants_every_tick()
    }
}
