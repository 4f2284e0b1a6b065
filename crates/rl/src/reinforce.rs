//! REINFORCE with DeepRM's time-step baseline (thesis Fig. 6, eq. 2).
//!
//! Each iteration takes a window of the training job sets; on each job set it rolls out
//! `episodes` episodes in lockstep (one batched forward pass per step for all of them),
//! computes the discounted returns `v_t`, the baseline `b_t` (mean return at step `t` over the
//! episodes of that job set, shorter episodes padded with 0 as DeepRM does) and the advantage
//! `v_t - b_t`, and backpropagates the policy-gradient loss of all its steps in one batched
//! forward/backward. Job sets run in parallel (rayon); their gradients are averaged in a fixed
//! order, so results do not depend on the thread count.
//!
//! Steps where only one action is allowed are taken without the network and not recorded:
//! there log pi = 0, so they add nothing to the loss or its gradient (the loss still divides
//! by every step, so the gradient is exactly the one over all steps).

use std::time::Instant;

use candle_core::Tensor;
use rand::Rng;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::env::{Env, Task};
use crate::error::RlError;
use crate::net::{argmax, sample, Opt, OptimizerKind, PolicyNet};

/// Training hyper-parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    /// Policy-gradient iterations.
    pub iterations: usize,
    /// Episodes per job set per iteration (N of the baseline; DeepRM: 20).
    pub episodes: usize,
    /// Job sets per iteration (a window that cycles over all training job sets).
    pub jobsets_per_iter: usize,
    /// Learning rate.
    pub lr: f64,
    /// Optimiser.
    pub optimizer: OptimizerKind,
    /// Discount factor (DeepRM: 1).
    pub gamma: f64,
    /// Hidden layer sizes (DeepRM: one of 20).
    pub hidden: Vec<usize>,
    /// Cap on decisions per episode (the episode is truncated there).
    pub max_steps: usize,
    /// Seed of the network's initial weights and of every sampled action.
    pub seed: u64,
    /// What the GPU agents' reward measures (DeepRM's own environment ignores it). Files
    /// written before the field existed were trained on the makespan.
    #[serde(default = "Objective::makespan")]
    pub objective: Objective,
}

/// What training minimises (issue 10: stated and selectable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    /// Mean job completion time (finish - submit): reward -(jobs in the system) x dt per
    /// step, whose sum over an episode is minus the sum of the jobs' completion times.
    #[default]
    Jct,
    /// Makespan (the thesis's metric): reward -dt per step while jobs remain.
    Makespan,
}

impl Objective {
    /// The names `--objective` accepts.
    pub const NAMES: [&'static str; 2] = ["jct", "makespan"];

    /// The objective called `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "jct" => Some(Objective::Jct),
            "makespan" => Some(Objective::Makespan),
            _ => None,
        }
    }

    /// `Makespan` (serde's default for files older than the field).
    pub fn makespan() -> Self {
        Objective::Makespan
    }
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            iterations: 100,
            episodes: 20,
            jobsets_per_iter: 10,
            lr: 1e-3,
            optimizer: OptimizerKind::Rmsprop,
            gamma: 1.0,
            hidden: vec![20],
            max_steps: 2000,
            seed: 42,
            objective: Objective::default(),
        }
    }
}

/// The most training job sets per library a training draws (`train --jobsets`, the experiment's
/// `training.jobsets`): far past the defaults (5 per library, 10 for `thesis`), and a bound on
/// what is drawn before training starts.
pub const MAX_TRAIN_JOBSETS: usize = 10_000;

/// The most episodes per job set a training runs (`train --episodes`, the experiment's
/// `training.episodes`): far past the defaults (20 for the thesis's agents, 4 for the
/// scorer), and a bound on the episodes run side by side (each holds its own copy of the
/// simulator and its images), so a typo is refused instead of exhausting memory.
pub const MAX_EPISODES: usize = 1_000;

/// The most hidden layers, and the widest one, a network may have (`--hidden`): far past the
/// shipped 32,16 and 20, and checked before any weight is allocated.
pub const MAX_HIDDEN_LAYERS: usize = 16;
/// See [`MAX_HIDDEN_LAYERS`].
pub const MAX_HIDDEN_WIDTH: usize = 4096;

/// Checks hidden layer sizes (every network's, `--hidden`): 1 to [`MAX_HIDDEN_LAYERS`] layers,
/// each 1 to [`MAX_HIDDEN_WIDTH`] wide.
pub fn check_hidden(hidden: &[usize]) -> Result<(), RlError> {
    if hidden.is_empty() || hidden.len() > MAX_HIDDEN_LAYERS || hidden.iter().any(|&w| w == 0 || w > MAX_HIDDEN_WIDTH) {
        return Err(RlError::Config {
            field: "hidden",
            message: format!("1 to {MAX_HIDDEN_LAYERS} layers, each 1 to {MAX_HIDDEN_WIDTH} wide"),
        });
    }
    Ok(())
}

impl TrainConfig {
    /// Checks the values are usable.
    pub fn validate(&self) -> Result<(), RlError> {
        let bad = |field, message: &str| Err(RlError::Config { field, message: message.into() });
        if !(1..=MAX_EPISODES).contains(&self.episodes) {
            return Err(RlError::Config {
                field: "episodes",
                message: format!("{}; expected 1..={MAX_EPISODES}", self.episodes),
            });
        }
        if self.jobsets_per_iter < 1 {
            return bad("jobsets_per_iter", "must be at least 1");
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return bad("lr", "must be a positive number");
        }
        if !(0.0..=1.0).contains(&self.gamma) {
            return bad("gamma", "must be within 0..=1");
        }
        check_hidden(&self.hidden)?;
        if self.max_steps < 1 {
            return bad("max_steps", "must be at least 1");
        }
        Ok(())
    }
}

/// What one iteration achieved.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IterStats {
    /// Iteration (1-based).
    pub iteration: usize,
    /// Mean undiscounted episode return.
    pub mean_return: f64,
    /// Mean episode score (the environment's metric: average slowdown, makespan).
    pub mean_score: f64,
    /// Mean decisions per episode.
    pub mean_steps: f64,
    /// Wall time since training started, s.
    pub elapsed_s: f64,
    /// Learning rate of this iteration's update.
    pub lr: f64,
}

impl IterStats {
    /// The CSV header of [`IterStats::csv_row`].
    pub const CSV_HEADER: &'static str = "iteration,mean_return,mean_score,mean_steps,elapsed_s,lr";

    /// One CSV row.
    pub fn csv_row(&self) -> String {
        format!(
            "{},{:.4},{:.4},{:.1},{:.2},{:.3e}",
            self.iteration, self.mean_return, self.mean_score, self.mean_steps, self.elapsed_s, self.lr
        )
    }
}

/// One episode: what was done and earned at each decision.
#[derive(Debug, Clone, Default)]
pub struct Episode {
    /// Actions taken.
    pub actions: Vec<u32>,
    /// Rewards received.
    pub rewards: Vec<f64>,
    /// The environment's score at the end.
    pub score: f64,
}

/// The decisions of a rollout kept for training: those with more than one allowed action, in
/// lockstep order (every episode's step `t` before any step `t + 1`). One buffer for all the
/// episodes of a job set, so the loss reads it without copying per episode.
#[derive(Debug, Clone, Default)]
pub struct Record {
    /// Observations, row-major, one row per kept decision.
    pub obs: Vec<f32>,
    /// Allowed actions, one row per kept decision.
    pub mask: Vec<bool>,
    /// (episode, step) of each kept decision.
    pub at: Vec<(u32, u32)>,
}

/// How actions are chosen during a rollout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Sample from the policy (training).
    Sample,
    /// Take the most probable action (inference).
    Greedy,
}

/// A seed for episode `episode` of job set `jobset` in iteration `iteration`.
fn episode_seed(seed: u64, iteration: usize, jobset: usize, episode: usize) -> u64 {
    let mut h = seed ^ 0x9E37_79B9_7F4A_7C15;
    for v in [iteration as u64, jobset as u64, episode as u64] {
        h = (h ^ v).wrapping_mul(0x100_0000_01B3).rotate_left(29);
    }
    h
}

/// Observes the live episodes `live` into consecutive rows of `obs`/`mask` (row widths
/// `d`, `a`), packing only those with a real choice; `rows` gets, per live episode, `Ok(its
/// row)` or `Err(its only allowed action)`. Returns the number of packed rows.
pub fn observe_batch(
    live: &[usize],
    obs: &mut [f32],
    mask: &mut [bool],
    (d, a): (usize, usize),
    rows: &mut Vec<Result<usize, usize>>,
    mut observe: impl FnMut(usize, &mut [f32], &mut [bool]),
) -> usize {
    rows.clear();
    let mut n = 0;
    for &e in live {
        let (o, m) = (&mut obs[n * d..(n + 1) * d], &mut mask[n * a..(n + 1) * a]);
        observe(e, o, m);
        let mut allowed = m.iter().enumerate().filter(|(_, &ok)| ok).map(|(i, _)| i);
        match (allowed.next(), allowed.next()) {
            (Some(only), None) => rows.push(Err(only)),
            _ => {
                rows.push(Ok(n));
                n += 1;
            }
        }
    }
    n
}

/// Runs `seeds.len()` episodes of `task`'s job set `jobset` in lockstep, batching the
/// network's forward pass across them. With `record`, appends the decisions training needs
/// (those with a choice). Decisions with one allowed action skip the network.
pub fn rollout<T: Task>(
    task: &T,
    net: &PolicyNet,
    jobset: usize,
    seeds: &[u64],
    mode: Mode,
    max_steps: usize,
    mut record: Option<&mut Record>,
) -> Result<Vec<Episode>, RlError> {
    let (d, a) = (task.obs_len(), task.n_actions());
    let mut envs: Vec<T::Env<'_>> = seeds.iter().map(|_| task.make(jobset)).collect();
    let mut rngs: Vec<ChaCha8Rng> = seeds.iter().map(|&s| ChaCha8Rng::seed_from_u64(s)).collect();
    let mut eps: Vec<Episode> = vec![Episode::default(); seeds.len()];
    let mut active: Vec<usize> = (0..seeds.len()).collect();
    let mut obs = vec![0.0; seeds.len() * d];
    let mut mask = vec![false; seeds.len() * a];
    // Per active episode: Ok(its row in the batch), or Err(its only allowed action).
    let mut rows: Vec<Result<usize, usize>> = Vec::with_capacity(seeds.len());
    let mut steps = 0;
    while !active.is_empty() && steps < max_steps {
        let n = observe_batch(&active, &mut obs, &mut mask, (d, a), &mut rows, |e, o, m| envs[e].observe(o, m));
        let probs = if n > 0 { net.probs(&obs[..n * d], &mask[..n * a], n)? } else { Vec::new() };
        let mut still = Vec::with_capacity(active.len());
        for (&e, row) in active.iter().zip(&rows) {
            let act = match *row {
                Ok(k) => {
                    let p = &probs[k * a..(k + 1) * a];
                    if let Some(rec) = record.as_deref_mut() {
                        rec.obs.extend_from_slice(&obs[k * d..(k + 1) * d]);
                        rec.mask.extend_from_slice(&mask[k * a..(k + 1) * a]);
                        rec.at.push((e as u32, steps as u32));
                    }
                    match mode {
                        Mode::Sample => sample(p, &mut rngs[e]),
                        Mode::Greedy => argmax(p),
                    }
                }
                Err(only) => {
                    // Draw anyway, so each episode's random stream stays aligned with its steps.
                    if mode == Mode::Sample {
                        let _: f32 = rngs[e].gen();
                    }
                    only
                }
            };
            eps[e].actions.push(act as u32);
            let tr = envs[e].step(act);
            eps[e].rewards.push(tr.reward);
            if !tr.done {
                still.push(e);
            }
        }
        active = still;
        steps += 1;
    }
    for (ep, env) in eps.iter_mut().zip(&envs) {
        ep.score = env.score();
    }
    Ok(eps)
}

/// Advantages `v_t - b_t` of each episode's steps, with DeepRM's time-step baseline.
pub fn advantages(episodes: &[Episode], gamma: f64) -> Vec<Vec<f64>> {
    let returns: Vec<Vec<f64>> = episodes
        .iter()
        .map(|ep| {
            let mut r = vec![0.0; ep.rewards.len()];
            let mut acc = 0.0;
            for t in (0..r.len()).rev() {
                acc = ep.rewards[t] + gamma * acc;
                r[t] = acc;
            }
            r
        })
        .collect();
    let len = returns.iter().map(Vec::len).max().unwrap_or(0);
    let mut baseline = vec![0.0; len];
    for r in &returns {
        for (b, v) in baseline.iter_mut().zip(r) {
            *b += v;
        }
    }
    baseline.iter_mut().for_each(|b| *b /= returns.len().max(1) as f64);
    returns.into_iter().map(|r| r.iter().zip(&baseline).map(|(v, b)| v - b).collect()).collect()
}

/// The gradient of the REINFORCE loss over all steps of `episodes` (one per variable), from
/// the kept decisions in `record`; the others have log pi = 0 and add nothing.
fn gradients(net: &PolicyNet, episodes: &[Episode], record: Record, gamma: f64) -> Result<Vec<Tensor>, RlError> {
    let adv = advantages(episodes, gamma);
    let steps: usize = episodes.iter().map(|e| e.actions.len()).sum();
    let actions: Vec<u32> = record.at.iter().map(|&(e, t)| episodes[e as usize].actions[t as usize]).collect();
    let adv: Vec<f32> = record.at.iter().map(|&(e, t)| adv[e as usize][t as usize] as f32).collect();
    net.pg_gradients(record.obs, &record.mask, &actions, &adv, steps)
}

/// How the learning rate falls from [`TrainConfig::lr`] to a final value over training.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum LrDecay {
    /// Half a cosine: slow at both ends.
    #[default]
    Cosine,
    /// A straight line.
    Linear,
}

/// The learning-rate schedule. Progress is the larger of the share of iterations done and
/// the share of the wall-time budget spent, so the schedule ends on time under either limit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Schedule {
    /// Learning rate at the end (None: constant [`TrainConfig::lr`]).
    pub lr_final: Option<f64>,
    /// Shape of the decay.
    pub decay: LrDecay,
    /// Wall-time budget, s (None: iterations only).
    pub time_limit_s: Option<f64>,
}

impl Schedule {
    /// Training progress in 0..=1 after `done` of `iterations` and `elapsed_s` seconds.
    pub fn progress(&self, done: usize, iterations: usize, elapsed_s: f64) -> f64 {
        let by_iter = done as f64 / iterations.max(1) as f64;
        let by_time = self.time_limit_s.filter(|l| *l > 0.0).map_or(0.0, |l| elapsed_s / l);
        by_iter.max(by_time).clamp(0.0, 1.0)
    }

    /// The learning rate at `progress`, starting from `lr`.
    pub fn lr_at(&self, lr: f64, progress: f64) -> f64 {
        let Some(end) = self.lr_final else { return lr };
        let x = progress.clamp(0.0, 1.0);
        let w = match self.decay {
            LrDecay::Cosine => 0.5 * (1.0 + (std::f64::consts::PI * x).cos()),
            LrDecay::Linear => 1.0 - x,
        };
        end + (lr - end) * w
    }

    /// Checks the values are usable.
    pub fn validate(&self) -> Result<(), RlError> {
        if self.lr_final.is_some_and(|l| !(l.is_finite() && l > 0.0)) {
            return Err(RlError::Config { field: "lr_final", message: "must be a positive number".into() });
        }
        if self.time_limit_s.is_some_and(|l| !(l.is_finite() && l > 0.0)) {
            return Err(RlError::Config { field: "time_limit_s", message: "must be a positive number".into() });
        }
        Ok(())
    }
}

/// Trains `net` on `task`, calling `on_iter` after every iteration (it returns false to stop
/// early, e.g. at a wall-time budget). Returns the curve.
pub fn train<T: Task>(
    task: &T,
    net: &PolicyNet,
    cfg: &TrainConfig,
    on_iter: &mut dyn FnMut(&IterStats, &PolicyNet) -> bool,
) -> Result<Vec<IterStats>, RlError> {
    train_scheduled(task, net, cfg, &Schedule::default(), on_iter)
}

/// Like [`train`], with the learning rate following `schedule`.
pub fn train_scheduled<T: Task>(
    task: &T,
    net: &PolicyNet,
    cfg: &TrainConfig,
    schedule: &Schedule,
    on_iter: &mut dyn FnMut(&IterStats, &PolicyNet) -> bool,
) -> Result<Vec<IterStats>, RlError> {
    cfg.validate()?;
    schedule.validate()?;
    let n_sets = task.jobsets();
    if n_sets == 0 {
        return Err(RlError::Config { field: "jobsets", message: "no training job sets".into() });
    }
    let per_iter = cfg.jobsets_per_iter.min(n_sets);
    let mut opt = Opt::new(cfg.optimizer, net.vars(), cfg.lr)?;
    let started = Instant::now();
    let mut curve = Vec::with_capacity(cfg.iterations.min(1 << 20));
    // Kept decisions of each job set at its last visit: sizes the next buffer in one go.
    let mut kept: Vec<usize> = vec![0; n_sets];
    for it in 0..cfg.iterations {
        let lr = schedule.lr_at(cfg.lr, schedule.progress(it, cfg.iterations, started.elapsed().as_secs_f64()));
        opt.set_lr(lr);
        let sets: Vec<usize> = (0..per_iter).map(|k| (it * per_iter + k) % n_sets).collect();
        let (d, a) = (task.obs_len(), task.n_actions());
        let results: Vec<(Vec<Tensor>, f64, f64, f64, usize)> = sets
            .par_iter()
            .map(|&js| {
                let seeds: Vec<u64> = (0..cfg.episodes).map(|e| episode_seed(cfg.seed, it, js, e)).collect();
                let guess = kept[js] + kept[js] / 8;
                let mut record = Record {
                    obs: Vec::with_capacity(guess * d),
                    mask: Vec::with_capacity(guess * a),
                    at: Vec::with_capacity(guess),
                };
                let eps = rollout(task, net, js, &seeds, Mode::Sample, cfg.max_steps, Some(&mut record))?;
                let rows = record.at.len();
                let g = gradients(net, &eps, record, cfg.gamma)?;
                let n = eps.len() as f64;
                let ret = eps.iter().map(|e| e.rewards.iter().sum::<f64>()).sum::<f64>() / n;
                let score = eps.iter().map(|e| e.score).sum::<f64>() / n;
                let steps = eps.iter().map(|e| e.actions.len() as f64).sum::<f64>() / n;
                Ok((g, ret, score, steps, rows))
            })
            .collect::<Result<_, RlError>>()?;
        for (&js, r) in sets.iter().zip(&results) {
            kept[js] = r.4;
        }
        let k = results.len() as f64;
        let mut grads: Vec<Tensor> = results[0].0.clone();
        for r in &results[1..] {
            for (acc, g) in grads.iter_mut().zip(&r.0) {
                *acc = (&*acc + g)?;
            }
        }
        let grads = grads.iter().map(|g| g / k).collect::<Result<Vec<_>, _>>()?;
        opt.step(&grads)?;
        let stats = IterStats {
            iteration: it + 1,
            mean_return: results.iter().map(|r| r.1).sum::<f64>() / k,
            mean_score: results.iter().map(|r| r.2).sum::<f64>() / k,
            mean_steps: results.iter().map(|r| r.3).sum::<f64>() / k,
            elapsed_s: started.elapsed().as_secs_f64(),
            lr,
        };
        curve.push(stats);
        if !on_iter(&stats, net) {
            break;
        }
    }
    Ok(curve)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baseline_is_the_mean_return_at_each_step() {
        let a = Episode { rewards: vec![-1.0, -1.0, -1.0], ..Default::default() };
        let b = Episode { rewards: vec![-1.0], ..Default::default() };
        let adv = advantages(&[a, b], 1.0);
        // returns: a = [-3, -2, -1], b = [-1]; baselines (b padded with 0): [-2, -1, -0.5]
        assert_eq!(adv[0], vec![-1.0, -1.0, -0.5]);
        assert_eq!(adv[1], vec![1.0]);
    }

    #[test]
    fn schedule_decays_from_lr_to_lr_final_by_the_later_of_iterations_and_time() {
        let cos = Schedule { lr_final: Some(1e-4), decay: LrDecay::Cosine, time_limit_s: Some(100.0) };
        assert_eq!(cos.lr_at(1e-3, 0.0), 1e-3);
        assert!((cos.lr_at(1e-3, 1.0) - 1e-4).abs() < 1e-12);
        assert!((cos.lr_at(1e-3, 0.5) - 5.5e-4).abs() < 1e-12);
        let lin = Schedule { decay: LrDecay::Linear, ..cos };
        assert!((lin.lr_at(1e-3, 0.25) - 7.75e-4).abs() < 1e-12);
        // 10 of 1000 iterations but 60 of 100 s: time decides; and the other way round.
        assert!((cos.progress(10, 1000, 60.0) - 0.6).abs() < 1e-12);
        assert!((cos.progress(900, 1000, 1.0) - 0.9).abs() < 1e-12);
        assert_eq!(cos.progress(10, 1000, 500.0), 1.0);
        assert_eq!(Schedule::default().lr_at(2e-3, 0.7), 2e-3);
        assert!(Schedule { lr_final: Some(-1.0), ..cos }.validate().is_err());
    }

    #[test]
    fn training_settings_out_of_range_are_refused_before_any_weight_is_made() {
        let ok = TrainConfig::default();
        assert!(ok.validate().is_ok());
        let widest = TrainConfig { hidden: vec![MAX_HIDDEN_WIDTH; MAX_HIDDEN_LAYERS], ..ok.clone() };
        assert!(widest.validate().is_ok());
        assert!(TrainConfig { episodes: MAX_EPISODES, ..ok.clone() }.validate().is_ok());
        for bad in [
            TrainConfig { episodes: MAX_EPISODES + 1, ..ok.clone() },
            TrainConfig { hidden: vec![MAX_HIDDEN_WIDTH + 1], ..ok.clone() },
            TrainConfig { hidden: vec![4; MAX_HIDDEN_LAYERS + 1], ..ok.clone() },
            TrainConfig { hidden: vec![], ..ok.clone() },
            TrainConfig { lr: f64::NAN, ..ok.clone() },
            TrainConfig { lr: 0.0, ..ok.clone() },
            TrainConfig { episodes: 0, ..ok.clone() },
            TrainConfig { jobsets_per_iter: 0, ..ok.clone() },
        ] {
            assert!(bad.validate().is_err(), "{bad:?} accepted");
        }
    }
}
