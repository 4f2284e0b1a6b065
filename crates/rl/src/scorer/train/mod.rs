//! Training the scorer: imitation, look-ahead, then policy gradient, keeping the best on
//! validation (docs/RL.md).
//!
//! 1. **Teachers.** Every rule in [`ScorerRecipe::experts`] runs each training job set; on
//!    each set the one with the lowest objective (mean JCT or makespan) teaches.
//! 2. **Imitation** (DL2's warm start). At each of the teacher's decisions its placements are
//!    walked as scorer choices; a step's label is every row the teacher still places (or
//!    hold once it has placed all), and the loss is -log of their summed probability. Then
//!    `dagger_rounds` times (DAgger): the learner drives, the teacher labels the states the
//!    learner reaches, and the data is aggregated.
//! 3. **Look-ahead** (expert iteration, `lookahead_rounds`). At each choice the prior's best
//!    `lookahead_top_k` rows and hold are played out to the end on a clone of the simulator;
//!    the cheapest rows are the labels (near-ties go to the better other metric), weighted by
//!    how much the choice matters; the teacher drives, then the learner.
//! 4. **Policy gradient** (REINFORCE). Each iteration rolls out `episodes` sampled episodes
//!    on each of `jobsets_per_iter` job sets; an episode's advantage is (mean cost of that job
//!    set's episodes - its cost) / their standard deviation (Decima's and DeepRM's
//!    per-sequence baseline; `gradient::set_advantages`), applied to every choice of the
//!    episode; plus an entropy bonus that decays to 0.
//! 5. **Keep best.** After imitation, after each look-ahead round, every `validate_every`
//!    iterations and at the last, the greedy policy runs on the validation job sets; the
//!    weights with the lowest score (objective / the best rule's, per set) are kept.
//!
//! Under the JCT objective every cost above carries the recipe's makespan guard ([`Guard`]):
//! a run whose makespan ends more than 1% over the best rule's on that set is charged for it.
//!
//! Every random choice comes from the seed: rollout `e` of job set `s` at iteration `k` samples
//! with its own ChaCha stream, so results do not depend on the thread count.

mod episode;
mod gradient;
mod guard;
mod labels;
mod recipe;
mod rollout;
mod settings;

use std::time::Instant;

use dqngpu_model::Policy;
use dqngpu_policy::Greedy;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

pub use episode::{Episode, ScorerTask};
pub use guard::{Guard, GUARD_MARGIN};
pub use recipe::{ScorerRecipe, ScorerReport};
pub use rollout::{lookahead_rows, play_out, play_out_placed, play_out_placed_while};
pub use settings::{
    default_settings, episodes, settings_episodes, single_setting_libraries, train_seed_base, validation_seed_base,
    Setting,
};

use super::features::FEATURES;
use super::{Mlp, ScorerPolicy};
use crate::error::RlError;
use crate::net::{Head, Opt, PolicyNet};
use crate::reinforce::{IterStats, Objective, TrainConfig};
use episode::{caller_of, costs, par_episodes, task_caller};
use gradient::{fit_epochs, pg_iteration};
use guard::{guarded_rule_costs, lowest, Rules};
use labels::{imitation_episode, lookahead_episode, Step};
use recipe::NEAR_TIE;

/// Each training set's teacher: the index of the rule with the lowest objective there (the
/// first on ties), from `per_set` (each rule's objective on each training set); records every
/// rule's mean and the teachers' counts in `report`.
fn teachers(rules: &Rules, per_set: &[Vec<f64>], report: &mut ScorerReport) -> Vec<usize> {
    for (i, costs) in per_set.iter().enumerate().take(rules.len()) {
        report.expert_scores.push((rules.name(i).to_string(), costs.iter().sum::<f64>() / costs.len() as f64));
    }
    let sets = per_set.first().map_or(0, Vec::len);
    let teacher_of: Vec<usize> = (0..sets)
        .map(|e| (0..rules.len()).min_by(|&a, &b| per_set[a][e].total_cmp(&per_set[b][e]).then(a.cmp(&b))).unwrap_or(0))
        .collect();
    let mut counts: Vec<String> = Vec::new();
    for r in 0..rules.len() {
        let n = teacher_of.iter().filter(|&&t| t == r).count();
        if n > 0 {
            counts.push(format!("{} x{n}", rules.name(r)));
        }
    }
    report.expert = counts.join(", ");
    teacher_of
}

/// Trains a scorer on `task`. `on_iter` sees each policy-gradient iteration's statistics
/// (mean sampled objective as the score) and returns false to stop.
pub fn train(
    task: &ScorerTask,
    cfg: &TrainConfig,
    recipe: &ScorerRecipe,
    on_iter: &mut dyn FnMut(&IterStats) -> bool,
) -> Result<(ScorerPolicy, ScorerReport, Vec<IterStats>), RlError> {
    cfg.validate()?;
    if task.train.is_empty() {
        return Err(RlError::Config { field: "training", message: "no training job sets".into() });
    }
    let started = Instant::now();
    let objective = cfg.objective;
    let mut report = ScorerReport::default();
    if cfg.iterations == 0 {
        let net = PolicyNet::new(FEATURES, &cfg.hidden, 1, Head::Joint, cfg.seed)?;
        let untrained = ScorerPolicy::new(net)?.with_caller(task_caller(task));
        return Ok((untrained, report, Vec::new()));
    }
    // Validation scores are the mean over validation sets of (objective / the best rule's
    // objective on that set), so short and long job sets weigh the same.
    let rules = Rules::new(task, recipe, cfg.seed)?;
    // Each rule runs every set once: the guard's references, the validation reference (their
    // minimum per set), the best single rule's score and the teachers come from these runs.
    let (train, train_costs) = guarded_rule_costs(task, &task.train, objective, recipe, &rules)?;
    let (validation, validation_costs) = guarded_rule_costs(task, &task.validation, objective, recipe, &rules)?;
    let task = &ScorerTask { train, validation, interference: task.interference.clone(), config: task.config.clone() };
    let reference = lowest(&validation_costs, task.validation.len());
    let validate = |p: &ScorerPolicy| normalised(task, objective, &reference, p);
    report.expert_validation = validation_costs.iter().map(|c| ratio_mean(c, &reference)).fold(f64::INFINITY, f64::min);
    // 1. The teachers: on each training set, the rule with the lowest objective there.
    let teacher_of = teachers(&rules, &train_costs, &mut report);
    report.stage_s.push(("rules".into(), started.elapsed().as_secs_f64()));
    let shared = Shared { task, rules: &rules, teacher_of: &teacher_of, validate: &validate, started };
    // Restarts (steps 2-6 from other initial weights and draws, on the same sets): the one
    // with the best validation score is kept.
    let mut kept: Option<(ScorerPolicy, ScorerReport, Vec<IterStats>)> = None;
    let (mut stage_s, mut restart_validation) = (report.stage_s.clone(), Vec::new());
    for k in 0..recipe.restarts.max(1) {
        let cfg = &TrainConfig { seed: cfg.seed.wrapping_add(RESTART_SEED_STEP * k as u64), ..cfg.clone() };
        let fresh = ScorerReport { stage_s: Vec::new(), ..report.clone() };
        let (policy, run, curve, go_on) = train_run(&shared, cfg, recipe, fresh, on_iter)?;
        let tag = if recipe.restarts > 1 { format!("restart {k} ") } else { String::new() };
        stage_s.extend(run.stage_s.iter().map(|(name, t)| (format!("{tag}{name}"), *t)));
        restart_validation.push(run.final_validation);
        if kept.as_ref().is_none_or(|b| run.final_validation < b.1.final_validation) {
            kept = Some((policy, ScorerReport { kept_restart: k, ..run }, curve));
        }
        if !go_on {
            break;
        }
    }
    let (policy, mut report, curve) = kept.expect("at least one restart runs");
    report.stage_s = stage_s;
    report.restart_validation = restart_validation;
    if recipe.restarts > 1 {
        report.kept = format!("restart {} {}", report.kept_restart, report.kept);
    }
    Ok((policy, report, curve))
}

/// Seed offset between restarts (restart 0 keeps the caller's seed).
const RESTART_SEED_STEP: u64 = 7_919;

/// What every restart of a training shares: the guarded task, the rules and each training
/// set's teacher, the validation, the training's start.
struct Shared<'a> {
    task: &'a ScorerTask,
    rules: &'a Rules,
    teacher_of: &'a [usize],
    validate: &'a dyn Fn(&ScorerPolicy) -> Result<f64, RlError>,
    started: Instant,
}

/// Steps 2-6 of a training from `cfg.seed`'s initial weights: imitation, look-ahead, policy
/// gradient, improvement rounds, keeping the best on validation. Returns the kept policy, the
/// report (`report` filled in), the policy-gradient curve, and false when `on_iter` asked to
/// stop.
fn train_run(
    sh: &Shared<'_>,
    cfg: &TrainConfig,
    recipe: &ScorerRecipe,
    mut report: ScorerReport,
    on_iter: &mut dyn FnMut(&IterStats) -> bool,
) -> Result<(ScorerPolicy, ScorerReport, Vec<IterStats>, bool), RlError> {
    let (task, rules, teacher_of, validate, started) = (sh.task, sh.rules, sh.teacher_of, sh.validate, sh.started);
    let objective = cfg.objective;
    let net = PolicyNet::new(FEATURES, &cfg.hidden, 1, Head::Joint, cfg.seed)?;
    let untrained = ScorerPolicy::new(net.snapshot()?)?.with_caller(task_caller(task));
    let greedy = Greedy::default();
    report.untrained_validation = validate(&untrained)?;
    let mut best = (report.untrained_validation, untrained, "untrained".to_string());
    let mut stage_start = Instant::now();
    let mut stage = |report: &mut ScorerReport, name: &str| {
        report.stage_s.push((name.to_string(), stage_start.elapsed().as_secs_f64()));
        stage_start = Instant::now();
    };
    let learning = Learning { net: &net, greedy: &greedy, objective, recipe };
    let mut opt = Opt::new(cfg.optimizer, net.vars(), cfg.lr)?;
    if !rules.is_empty() {
        // 2. Imitation, with DAgger rounds.
        let mut data: Vec<Step> = Vec::new();
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x1417);
        for round in 0..=recipe.dagger_rounds {
            let learner = if round == 0 { None } else { Some(Mlp::from_net(&net)?) };
            let more = par_episodes(&task.train, |e, ep| {
                imitation_episode(
                    task,
                    ep,
                    rules.for_episode(task, ep)[teacher_of[e]].as_ref(),
                    learner.as_ref(),
                    &greedy,
                )
            })?;
            data.extend(more.into_iter().flatten());
            fit_epochs(&net, &mut opt, &data, recipe.imitation_epochs, &mut rng)?;
        }
        report.imitation_steps = data.len();
        let imitated = ScorerPolicy::new(net.snapshot()?)?.with_caller(task_caller(task));
        report.imitation_validation = validate(&imitated)?;
        if report.imitation_validation <= best.0 {
            best = (report.imitation_validation, imitated, "imitation".into());
        }
        stage(&mut report, "imitation");
        // 2b. Expert iteration: look-ahead labels, then DAgger on them.
        for round in 0..recipe.lookahead_rounds {
            // The scorer plays the futures out once it beats every rule on validation.
            let scorer_base =
                (best.0 < report.expert_validation && best.2 != "untrained").then(|| told_each(task, &best.1));
            let base = |e: usize| -> &dyn Policy {
                match &scorer_base {
                    Some(told) => &told[e],
                    None => rules.for_episode(task, &task.train[e])[teacher_of[e]].as_ref(),
                }
            };
            report.lookahead_steps += expert_round(task, &learning, &mut opt, &mut rng, &base, NEAR_TIE)?;
            let v = keep_if_better(task, &net, validate, &mut best, format!("lookahead {}", round + 1))?;
            report.lookahead_validation.push(v);
        }
        stage(&mut report, "lookahead");
    }

    // 3. Policy gradient.
    let mut curve = Vec::new();
    let mut go_on = pg_stage(task, cfg, &learning, started, "pg", validate, &mut best, &mut curve, on_iter)?;
    stage(&mut report, "policy gradient");
    // 4. Improvement rounds (optional): search over the trained scorer, then policy gradient.
    for round in 0..recipe.improvement_rounds {
        if !go_on {
            break;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x1a2 ^ round as u64);
        let mut opt = Opt::new(cfg.optimizer, net.vars(), cfg.lr)?;
        let base = told_each(task, &best.1);
        report.lookahead_steps +=
            expert_round(task, &learning, &mut opt, &mut rng, &|e| &base[e], recipe.improvement_near_tie)?;
        let name = format!("improvement {}", round + 1);
        let v = keep_if_better(task, &net, validate, &mut best, format!("{name} lookahead"))?;
        report.lookahead_validation.push(v);
        go_on =
            pg_stage(task, cfg, &learning, started, &format!("{name} pg"), validate, &mut best, &mut curve, on_iter)?;
        stage(&mut report, &name);
    }
    report.final_validation = best.0;
    report.kept = best.2;
    Ok((best.1, report, curve, go_on))
}

/// What every learning stage shares: the network, the greedy predictor, the objective and the
/// recipe.
struct Learning<'a> {
    net: &'a PolicyNet,
    greedy: &'a Greedy,
    objective: Objective,
    recipe: &'a ScorerRecipe,
}

/// One round of expert iteration: look-ahead labels from the network's current scores as the
/// prior, each choice's rows played out with `base(e)` on training set `e`, rows within
/// `near_tie` of the cheapest tied (the better other metric decides); the labels drive
/// (pass 1), then the network does (pass 2, DAgger), each pass followed by fitting on all the
/// round's labels. Returns the labelled steps.
fn expert_round<'p>(
    task: &ScorerTask,
    l: &Learning<'_>,
    opt: &mut Opt,
    rng: &mut ChaCha8Rng,
    base: &(dyn (Fn(usize) -> &'p dyn Policy) + Sync),
    near_tie: f64,
) -> Result<usize, RlError> {
    let prior = Mlp::from_net(l.net)?;
    let mut data: Vec<Step> = Vec::new();
    for pass in 0..2 {
        let learner = if pass == 0 { None } else { Some(Mlp::from_net(l.net)?) };
        let more = par_episodes(&task.train, |e, ep| {
            lookahead_episode(
                task,
                ep,
                l.objective,
                base(e),
                &prior,
                learner.as_ref(),
                l.greedy,
                l.recipe.lookahead_top_k,
                near_tie,
            )
        })?;
        data.extend(more.into_iter().flatten());
        fit_epochs(l.net, opt, &data, l.recipe.imitation_epochs, rng)?;
    }
    Ok(data.len())
}

/// `cfg.iterations` policy-gradient iterations from a fresh optimiser, validating every
/// `validate_every` (and the last) and keeping the best in `best` (named `label N`). Returns
/// false when `on_iter` asked to stop.
#[allow(clippy::too_many_arguments)]
fn pg_stage(
    task: &ScorerTask,
    cfg: &TrainConfig,
    l: &Learning<'_>,
    started: Instant,
    label: &str,
    validate: &dyn Fn(&ScorerPolicy) -> Result<f64, RlError>,
    best: &mut (f64, ScorerPolicy, String),
    curve: &mut Vec<IterStats>,
    on_iter: &mut dyn FnMut(&IterStats) -> bool,
) -> Result<bool, RlError> {
    let mut opt = Opt::new(cfg.optimizer, l.net.vars(), cfg.lr)?;
    for it in 0..cfg.iterations {
        // The draws go on from the last stage's (its sets' windows and samples are not replayed).
        let draw = curve.len();
        let stats = pg_iteration(task, cfg, l.recipe, l.net, &mut opt, l.greedy, (it, draw), started)?;
        curve.push(stats);
        let last = it + 1 == cfg.iterations;
        let go_on = on_iter(&stats);
        if (it + 1) % l.recipe.validate_every.max(1) == 0 || last || !go_on {
            keep_if_better(task, l.net, validate, best, format!("{label} {}", it + 1))?;
        }
        if !go_on {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Validates the network's current weights (told the task's budget) and keeps them in `best`,
/// named `name`, when they score lower than it; returns their score.
fn keep_if_better(
    task: &ScorerTask,
    net: &PolicyNet,
    validate: &dyn Fn(&ScorerPolicy) -> Result<f64, RlError>,
    best: &mut (f64, ScorerPolicy, String),
    name: String,
) -> Result<f64, RlError> {
    let candidate = ScorerPolicy::new(net.snapshot()?)?.with_caller(task_caller(task));
    let v = validate(&candidate)?;
    if v < best.0 {
        *best = (v, candidate, name);
    }
    Ok(v)
}

/// `policy` told each training episode's budget (one per episode, in order): the policy that
/// plays an episode's futures out chooses within what its simulator admits.
fn told_each(task: &ScorerTask, policy: &ScorerPolicy) -> Vec<ScorerPolicy> {
    task.train.iter().map(|ep| policy.clone().with_caller(caller_of(task, ep))).collect()
}

/// Mean over the validation sets of `policy`'s objective / `reference`.
fn normalised(
    task: &ScorerTask,
    objective: Objective,
    reference: &[f64],
    policy: &ScorerPolicy,
) -> Result<f64, RlError> {
    Ok(ratio_mean(&costs(task, &task.validation, objective, policy)?, reference))
}

/// Mean of `costs[k] / reference[k]` (1 where the reference is not a positive number).
fn ratio_mean(costs: &[f64], reference: &[f64]) -> f64 {
    let n = costs.len().max(1) as f64;
    costs.iter().zip(reference).map(|(v, r)| if r.is_finite() && *r > 0.0 { v / r } else { 1.0 }).sum::<f64>() / n
}

/// The validation score training reports for `policy`: the mean over `task`'s validation sets
/// of its objective divided by the best of the recipe's rules there (1.0: as good as the best
/// rule on every set).
pub fn validation_score(
    task: &ScorerTask,
    objective: Objective,
    recipe: &ScorerRecipe,
    policy: &ScorerPolicy,
) -> Result<f64, RlError> {
    let (validation, rule_costs) =
        guarded_rule_costs(task, &task.validation, objective, recipe, &Rules::new(task, recipe, 0)?)?;
    let reference = lowest(&rule_costs, validation.len());
    Ok(ratio_mean(&costs(task, &validation, objective, policy)?, &reference))
}

#[cfg(test)]
mod tests;
