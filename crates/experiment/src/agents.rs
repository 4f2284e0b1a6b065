//! The RL schedulers (`dqngpu`, `deeprm-max`, `deeprm-mean`): trained here through
//! `dqngpu-rl` on the config's training job sets (seeds disjoint from the evaluation seeds),
//! one agent after the other, each with a progress bar.

use std::time::Instant;

use dqngpu_model::{Policy, WorkloadClass};
use dqngpu_rl::gpu::{self, AgentKind, GpuEncoding};
use dqngpu_rl::reinforce::TrainConfig;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::config::ExperimentConfig;
use crate::error::ExperimentError;
use crate::results::{CurvePoint, Skipped, TrainingRecord};
use crate::runner::Setup;

/// What a trained agent places with.
pub enum AgentPolicy {
    /// A fixed policy (the thesis's image agent, DeepRM Max / Mean), shared by every run.
    Fixed(Box<dyn Policy>),
    /// The DqnGPU scorer, told each cell's budget.
    Scorer(dqngpu_rl::scorer::ScorerPolicy),
}

/// A trained agent, ready to place jobs.
pub struct TrainedAgent {
    /// Scheduler name.
    pub name: String,
    /// The policy (pure; shared by every evaluation run).
    pub policy: AgentPolicy,
    /// How it was trained.
    pub record: TrainingRecord,
}

/// A training curve as the results record it (non-finite values dropped), its iterations
/// numbered 1, 2, ... on through the phases (the scorer's restart at 1 in each).
fn curve_points(curve: &[dqngpu_rl::reinforce::IterStats]) -> Vec<CurvePoint> {
    curve
        .iter()
        .zip(1..)
        .map(|(s, iteration)| CurvePoint {
            iteration,
            mean_return: Some(s.mean_return).filter(|v| v.is_finite()),
            mean_objective: Some(s.mean_score).filter(|v| v.is_finite()),
        })
        .collect()
}

/// Every agent's training bar: its name, iterations, a message, time gone and left.
fn train_bar_style() -> ProgressStyle {
    ProgressStyle::with_template(
        "train {prefix:12} {bar:30} iter {pos}/{len} {msg} [{elapsed_precise} < {eta_precise}]",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
}

fn train_config(cfg: &ExperimentConfig) -> TrainConfig {
    let t = &cfg.training;
    TrainConfig {
        iterations: t.iterations as usize,
        episodes: t.episodes as usize,
        jobsets_per_iter: t.jobsets_per_iter as usize,
        lr: t.lr,
        optimizer: t.optimizer,
        gamma: 1.0,
        hidden: t.hidden.clone(),
        max_steps: 5000,
        seed: t.seed,
        objective: t.objective,
    }
}

/// Trains each of `names` (RL schedulers) on the config's training job sets. An agent whose
/// training fails comes back in the second list with the reason (the report shows it).
///
/// One piece on purpose (about 85 lines): one loop over the agents, each with its bar, its
/// training call and its record; the scorer's own training is `train_scorer`.
pub fn train(
    cfg: &ExperimentConfig,
    setup: &Setup,
    names: &[String],
    bars: &MultiProgress,
) -> Result<(Vec<TrainedAgent>, Vec<Skipped>), ExperimentError> {
    let (mut trained, mut skipped) = (Vec::new(), Vec::new());
    if names.is_empty() {
        return Ok((trained, skipped));
    }
    let classes: Vec<WorkloadClass> = cfg.training.workloads.iter().map(|c| c.parse()).collect::<Result<_, _>>()?;
    let seeds = cfg.training_seeds();
    let mut sets = Vec::with_capacity(seeds.len());
    for (i, &seed) in seeds.iter().enumerate() {
        sets.push(setup.jobset(classes[i % classes.len()], cfg.workloads.jobs, seed)?);
    }
    let tc = train_config(cfg);
    let limit = cfg.training.time_limit_s;
    for name in names {
        let Some(kind) = AgentKind::from_name(name) else {
            skipped.push(Skipped { scheduler: name.clone(), reason: "not an RL agent this build can train".into() });
            continue;
        };
        if kind == AgentKind::Dqngpu && cfg.training.algorithm == "scorer" {
            match train_scorer(cfg, setup, bars) {
                Ok(agent) => trained.push(agent),
                Err(e) => skipped.push(Skipped { scheduler: name.clone(), reason: format!("training failed: {e}") }),
            }
            continue;
        }
        let enc = GpuEncoding::new(kind);
        let bar = bars.add(ProgressBar::new(tc.iterations as u64));
        bar.set_style(train_bar_style());
        bar.set_prefix(name.clone());
        let started = Instant::now();
        let mut cut = false;
        let result = gpu::train(
            &enc,
            &setup.cluster,
            &setup.library,
            setup.interference.clone(),
            sets.clone(),
            &tc,
            &mut |s, _| {
                bar.set_position(s.iteration as u64);
                bar.set_message(format!("makespan {:.0} s", s.mean_score));
                let go_on = limit.is_none_or(|l| started.elapsed().as_secs_f64() < l);
                cut |= !go_on && s.iteration < tc.iterations;
                go_on
            },
        );
        let train_s = started.elapsed().as_secs_f64();
        bar.finish_and_clear();
        match result {
            Ok((policy, curve)) => trained.push(TrainedAgent {
                name: name.clone(),
                policy: AgentPolicy::Fixed(Box::new(policy)),
                record: TrainingRecord {
                    scheduler: name.clone(),
                    workloads: cfg.training.workloads.clone(),
                    seeds: seeds.clone(),
                    iterations: curve.len() as u64,
                    iterations_planned: tc.iterations as u64,
                    stopped_by_time_limit: cut,
                    train_s,
                    curve: curve_points(&curve),
                    pass: seeds.len().div_ceil(tc.jobsets_per_iter.max(1)) as u64,
                    scorer: None,
                },
            }),
            Err(e) => skipped.push(Skipped { scheduler: name.clone(), reason: format!("training failed: {e}") }),
        }
    }
    Ok((trained, skipped))
}

/// Trains the generalising DqnGPU scorer (docs/RL.md) in the config's scorer settings; the
/// same model then places jobs in every cell.
fn train_scorer(cfg: &ExperimentConfig, setup: &Setup, bars: &MultiProgress) -> Result<TrainedAgent, ExperimentError> {
    use dqngpu_rl::scorer::train::{self as st, ScorerRecipe, ScorerTask};
    let t = &cfg.training;
    let classes: Vec<WorkloadClass> = t.workloads.iter().map(|c| c.parse()).collect::<Result<_, _>>()?;
    let rl = |e: dqngpu_rl::RlError| ExperimentError::Run { what: "training dqngpu".into(), message: e.to_string() };
    let (train, validation) = st::settings_episodes(&t.scorer_settings, &classes, t.seed).map_err(rl)?;
    let base = st::train_seed_base(t.seed);
    let sets = t.scorer_settings.iter().map(|s| s.jobsets).max().unwrap_or(0);
    // Trained without a budget (each cell tells the scorer its own), at the experiment's step
    // and decision tick (it trained at the defaults whatever `step_s` said, and was evaluated
    // at the config's).
    let train_sets = train.len();
    let config = dqngpu_sim::SimConfig {
        step_s: setup.sim.step_s,
        decision_tick_s: setup.sim.decision_tick_s,
        ..Default::default()
    };
    let task = ScorerTask { train, validation, interference: setup.interference.clone(), config };
    // The scorer's own network and learning rate (`training.lr` and `hidden` are the thesis's
    // agents'), its own iterations and objective.
    let tc = TrainConfig {
        iterations: t.scorer_iterations as usize,
        lr: 1e-3,
        hidden: vec![32, 16],
        objective: t.scorer_objective,
        ..train_config(cfg)
    };
    let bar = bars.add(ProgressBar::new(tc.iterations as u64));
    bar.set_style(train_bar_style());
    bar.set_prefix("dqngpu");
    bar.set_message("imitation and look-ahead");
    let started = Instant::now();
    let recipe = ScorerRecipe {
        improvement_rounds: t.scorer_improvement_rounds as usize,
        makespan_guard: t.scorer_makespan_guard,
        restarts: t.scorer_restarts as usize,
        improvement_near_tie: t.scorer_improvement_near_tie_pct / 100.0,
        ..ScorerRecipe::default()
    };
    // `training.time_limit_s` stops the scorer as `train --time-limit-s` does.
    let (limit, mut cut) = (t.time_limit_s, false);
    let (policy, report, curve) = st::train(&task, &tc, &recipe, &mut |s| {
        bar.set_position(s.iteration as u64);
        bar.set_message(format!("objective {:.0}", s.mean_score));
        let go_on = limit.is_none_or(|l| started.elapsed().as_secs_f64() < l);
        cut |= !go_on;
        go_on
    })
    .map_err(rl)?;
    bar.finish_and_clear();
    let train_s = started.elapsed().as_secs_f64();
    // Policy gradient runs once, then once more in each improvement round.
    let planned = tc.iterations as u64 * (1 + t.scorer_improvement_rounds);
    Ok(TrainedAgent {
        name: "dqngpu".into(),
        policy: AgentPolicy::Scorer(policy),
        record: TrainingRecord {
            scheduler: "dqngpu".into(),
            workloads: t.workloads.clone(),
            seeds: (base..base + sets as u64).collect(),
            iterations: curve.len() as u64,
            iterations_planned: planned,
            stopped_by_time_limit: cut && (curve.len() as u64) < planned,
            train_s,
            curve: curve_points(&curve),
            pass: train_sets.div_ceil(tc.jobsets_per_iter.max(1)) as u64,
            scorer: Some(report),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scorer's phases each count from 1; the recorded curve numbers them on.
    #[test]
    fn curve_iterations_are_numbered_on_through_the_phases() {
        let stats = |iteration| dqngpu_rl::reinforce::IterStats {
            iteration,
            mean_return: -1.0,
            mean_score: 10.0,
            mean_steps: 1.0,
            elapsed_s: 0.0,
            lr: 1e-3,
        };
        let points = curve_points(&[stats(1), stats(2), stats(1), stats(2)]);
        assert_eq!(points.iter().map(|p| p.iteration).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
    }

    /// `training.time_limit_s` stops the scorer too, and its record says so.
    #[test]
    fn the_time_limit_cuts_the_scorers_training_short() {
        let mut cfg = ExperimentConfig::default().quick();
        cfg.cells.clear();
        cfg.training.scorer_iterations = 50;
        cfg.training.scorer_improvement_rounds = 0;
        cfg.training.time_limit_s = Some(1e-9);
        let setup = Setup::new(&cfg).unwrap();
        let bars = MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
        let agent = train_scorer(&cfg, &setup, &bars).unwrap();
        let r = &agent.record;
        assert!(
            r.stopped_by_time_limit && r.iterations < r.iterations_planned,
            "{} of {}",
            r.iterations,
            r.iterations_planned
        );
    }
}
