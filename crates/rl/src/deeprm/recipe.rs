//! How DeepRM's network is trained: the settings ([`Recipe`], with the paper's as a preset),
//! and training that keeps the weights scoring best on validation job sets
//! ([`train_keep_best`]).

use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{job_sets, train_until, validate, DeepRmParams};
use crate::net::{OptimizerKind, PolicyNet};
use crate::reinforce::{IterStats, LrDecay, Schedule, TrainConfig};
use crate::RlError;

/// Seed of the training job sets unless the recipe says otherwise.
pub const TRAIN_SEED: u64 = 42;
/// Seed of the evaluation job sets (DeepRM's `unseen` seed); never a training or validation seed.
pub const EVAL_SEED: u64 = 314_159;
/// Seed of the validation job sets that pick the best weights during training; distinct from
/// both, so the evaluation sets are never looked at while training.
pub const VAL_SEED: u64 = 271_828;

/// Validation episodes stop at this time step (jobs not started count as finishing there):
/// ten times the arrival window, far beyond what any useful policy needs.
pub fn val_max_time(p: &DeepRmParams) -> usize {
    p.simu_len.saturating_mul(10).max(500)
}

/// Every setting of a DeepRM training run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recipe {
    /// Training job sets.
    pub jobsets: usize,
    /// Job sets per iteration (a window cycling over all of them).
    pub jobsets_per_iter: usize,
    /// Episodes per job set per iteration (the baseline's N).
    pub episodes: usize,
    /// Iterations (the time limit usually ends training first).
    pub iterations: usize,
    /// Learning rate at the start.
    pub lr: f64,
    /// Learning rate at the end (None: constant).
    pub lr_final: Option<f64>,
    /// Shape of the decay to `lr_final`.
    pub lr_decay: LrDecay,
    /// Optimiser.
    pub optimizer: OptimizerKind,
    /// Hidden layer sizes.
    pub hidden: Vec<usize>,
    /// Seed of the training job sets, the initial weights and the sampled actions.
    pub seed: u64,
    /// Wall-time budget, s.
    pub time_limit_s: Option<f64>,
    /// Every this many iterations, a greedy evaluation on the validation sets; the best
    /// weights seen (the final ones included) are kept (0: never; the final weights are kept).
    pub eval_every: usize,
    /// Validation job sets.
    pub val_jobsets: usize,
    /// Seed of the validation job sets.
    pub val_seed: u64,
}

impl Recipe {
    /// The setting that meets the paper's 2.81 average slowdown at 130% load on this project's
    /// 2-core dev box within 30 minutes (docs/BENCHMARKS.md, "DeepRM training in 30
    /// minutes", run 4): 20,000 training sets, 4 per iteration, 20 episodes each, RMSProp,
    /// learning rate 1e-3 falling to 1e-4 along a cosine over a 1,740 s budget, the best of
    /// the validation checks every 100 iterations on 200 sets kept.
    pub fn paper() -> Self {
        Recipe {
            jobsets: 20_000,
            jobsets_per_iter: 4,
            episodes: 20,
            iterations: 1_000_000,
            lr: 1e-3,
            lr_final: Some(1e-4),
            lr_decay: LrDecay::Cosine,
            optimizer: OptimizerKind::Rmsprop,
            hidden: vec![20],
            seed: TRAIN_SEED,
            time_limit_s: Some(1740.0),
            eval_every: 100,
            val_jobsets: 200,
            val_seed: VAL_SEED,
        }
    }

    /// The earlier defaults, a short run for smoke tests and sweeps: 100 training sets, 10
    /// per iteration, 1,000 iterations, constant learning rate, no time limit, final weights.
    pub fn classic() -> Self {
        Recipe {
            jobsets: 100,
            jobsets_per_iter: 10,
            iterations: 1000,
            lr_final: None,
            time_limit_s: None,
            eval_every: 0,
            val_jobsets: 100,
            ..Recipe::paper()
        }
    }

    /// The trainer's configuration.
    pub fn train_config(&self) -> TrainConfig {
        TrainConfig {
            iterations: self.iterations,
            episodes: self.episodes,
            jobsets_per_iter: self.jobsets_per_iter,
            lr: self.lr,
            optimizer: self.optimizer,
            gamma: 1.0,
            hidden: self.hidden.clone(),
            max_steps: 2000,
            seed: self.seed,
            // DeepRM's environment has its own reward (slowdown); the field is unused there.
            objective: crate::reinforce::Objective::default(),
        }
    }

    /// The learning-rate schedule.
    pub fn schedule(&self) -> Schedule {
        Schedule { lr_final: self.lr_final, decay: self.lr_decay, time_limit_s: self.time_limit_s }
    }

    /// Checks the settings: seeds apart from the evaluation seed, validation sets when
    /// validating, a usable schedule.
    pub fn validate(&self) -> Result<(), RlError> {
        let bad = |field, message: String| Err(RlError::Config { field, message });
        if self.seed == EVAL_SEED {
            return bad("seed", format!("{EVAL_SEED} draws the evaluation job sets; pick another training seed"));
        }
        if self.jobsets == 0 || self.jobsets_per_iter == 0 || self.episodes == 0 {
            return bad("jobsets", "training job sets, job sets per iteration and episodes must be at least 1".into());
        }
        if self.jobsets > super::MAX_JOBSETS || self.val_jobsets > super::MAX_JOBSETS {
            return bad(
                "jobsets",
                format!(
                    "training ({}) and validation ({}) job sets must each be at most {}",
                    self.jobsets,
                    self.val_jobsets,
                    super::MAX_JOBSETS
                ),
            );
        }
        crate::reinforce::check_hidden(&self.hidden)?;
        if self.eval_every > 0 {
            if self.val_jobsets == 0 {
                return bad("val-jobsets", format!("--eval-every {} needs at least 1", self.eval_every));
            }
            if self.val_seed == EVAL_SEED || self.val_seed == self.seed {
                return bad(
                    "val-seed",
                    format!(
                        "{} must differ from the training seed ({}) and the evaluation seed ({EVAL_SEED})",
                        self.val_seed, self.seed
                    ),
                );
            }
        }
        self.schedule().validate()
    }
}

/// How the kept weights were chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// The rule, in words.
    pub rule: String,
    /// Validation seed.
    pub val_seed: u64,
    /// Validation job sets.
    pub val_jobsets: usize,
    /// Time step where validation episodes stop.
    pub val_max_time: usize,
    /// Iterations between checks.
    pub eval_every: usize,
    /// The iteration whose weights were kept.
    pub best_iteration: usize,
    /// Their validation average slowdown.
    pub best_val_avg_slowdown: f64,
    /// Every check: (iteration, validation average slowdown).
    pub evaluations: Vec<(usize, f64)>,
}

/// A finished training run.
pub struct Trained {
    /// The kept weights (the best on validation, else the final ones).
    pub net: PolicyNet,
    /// The training curve.
    pub curve: Vec<IterStats>,
    /// How `net` was chosen (None: the final weights, no validation).
    pub selection: Option<Selection>,
    /// The iteration where the time limit stopped training.
    pub stopped_at: Option<usize>,
    /// Wall time, s.
    pub wall_s: f64,
}

/// What [`train_keep_best`] reports after each iteration.
pub enum Progress<'a> {
    /// An iteration finished.
    Iteration(&'a IterStats),
    /// A validation check scored the current weights.
    Validated {
        /// The iteration's statistics.
        stats: &'a IterStats,
        /// Validation average slowdown.
        score: f64,
    },
}

/// The best weights seen on the validation sets.
struct Best {
    iteration: usize,
    score: f64,
    net: PolicyNet,
}

/// Trains DeepRM's network on `params` by `recipe`, checking it on validation job sets every
/// `recipe.eval_every` iterations and keeping the best-scoring weights (the final ones
/// compete too). `report` sees every iteration and every check (for progress output).
pub fn train_keep_best(
    params: &DeepRmParams,
    recipe: &Recipe,
    report: &mut dyn FnMut(Progress<'_>),
) -> Result<Trained, RlError> {
    recipe.validate()?;
    let cfg = recipe.train_config();
    let schedule = recipe.schedule();
    let validating = recipe.eval_every > 0;
    let sets = job_sets(params, recipe.seed, recipe.jobsets);
    let val_sets = if validating { job_sets(params, recipe.val_seed, recipe.val_jobsets) } else { Vec::new() };
    let max_time = val_max_time(params);
    let started = Instant::now();
    let mut stopped_at = None;
    let mut best: Option<Best> = None;
    let mut evaluations: Vec<(usize, f64)> = Vec::new();
    let mut failure: Option<RlError> = None;
    let mut check = |iteration: usize, net: &PolicyNet| -> Result<f64, RlError> {
        let v = validate(params, &val_sets, net, max_time)?;
        evaluations.push((iteration, v));
        if best.as_ref().is_none_or(|b| v < b.score) {
            best = Some(Best { iteration, score: v, net: net.snapshot()? });
        }
        Ok(v)
    };
    let (net, curve) = train_until(params, sets, &cfg, &schedule, &mut |s, net| {
        report(Progress::Iteration(s));
        if validating && s.iteration % recipe.eval_every == 0 {
            match check(s.iteration, net) {
                Ok(score) => report(Progress::Validated { stats: s, score }),
                Err(e) => {
                    failure = Some(e);
                    return false;
                }
            }
        }
        let over = recipe.time_limit_s.is_some_and(|l| started.elapsed().as_secs_f64() >= l);
        if over {
            stopped_at = Some(s.iteration);
        }
        !over
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    let wall_s = started.elapsed().as_secs_f64();
    if validating && !curve.len().is_multiple_of(recipe.eval_every) {
        check(curve.len(), &net)?;
    }
    let (net, selection) = match best {
        Some(b) => (
            b.net,
            Some(Selection {
                rule: "lowest greedy avg slowdown on the validation job sets".into(),
                val_seed: recipe.val_seed,
                val_jobsets: recipe.val_jobsets,
                val_max_time: max_time,
                eval_every: recipe.eval_every,
                best_iteration: b.iteration,
                best_val_avg_slowdown: b.score,
                evaluations,
            }),
        ),
        None => (net, None),
    };
    Ok(Trained { net, curve, selection, stopped_at, wall_s })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid_and_the_paper_one_keeps_the_best() {
        assert!(Recipe::paper().validate().is_ok());
        assert!(Recipe::classic().validate().is_ok());
        assert!(Recipe::paper().eval_every > 0 && Recipe::paper().time_limit_s.is_some_and(|t| t <= 1800.0));
    }

    #[test]
    fn seeds_that_would_leak_the_evaluation_sets_are_refused() {
        assert!(Recipe { seed: EVAL_SEED, ..Recipe::paper() }.validate().is_err());
        assert!(Recipe { val_seed: EVAL_SEED, ..Recipe::paper() }.validate().is_err());
        assert!(Recipe { val_seed: TRAIN_SEED, ..Recipe::paper() }.validate().is_err());
        // Without validation the validation seed does not matter.
        assert!(Recipe { val_seed: EVAL_SEED, ..Recipe::classic() }.validate().is_ok());
    }

    #[test]
    fn a_short_run_keeps_the_best_checked_weights() {
        let params = DeepRmParams { simu_len: 10, ..DeepRmParams::default() };
        let recipe = Recipe {
            jobsets: 2,
            jobsets_per_iter: 1,
            episodes: 2,
            iterations: 3,
            eval_every: 2,
            val_jobsets: 2,
            time_limit_s: None,
            ..Recipe::paper()
        };
        let mut checks = 0;
        let t = train_keep_best(&params, &recipe, &mut |p| checks += matches!(p, Progress::Validated { .. }) as usize)
            .unwrap_or_else(|e| panic!("{e}"));
        let sel = t.selection.unwrap_or_else(|| panic!("no selection"));
        assert_eq!(checks, 1, "one check at iteration 2 reported");
        assert_eq!(sel.evaluations.len(), 2, "iteration 2 and the final 3: {:?}", sel.evaluations);
        let best = sel.evaluations.iter().map(|e| e.1).fold(f64::INFINITY, f64::min);
        assert_eq!(sel.best_val_avg_slowdown, best);
        assert_eq!(t.curve.len(), 3);
    }
}
