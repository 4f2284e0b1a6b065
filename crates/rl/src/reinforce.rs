//! REINFORCE with DeepRM's time-step baseline (thesis Fig. 6, eq. 2).
//!
//! Each iteration takes a window of the training job sets; on each job set it rolls out
//! `episodes` episodes in lockstep (one batched forward pass per step for all of them),
//! computes the discounted returns `v_t`, the baseline `b_t` (mean return at step `t` over the
//! episodes of that job set, shorter episodes padded with 0 as DeepRM does) and the advantage
//! `v_t - b_t`, and backpropagates the policy-gradient loss of all its steps in one batched
//! forward/backward. Job sets run in parallel (rayon); their gradients are averaged in a fixed
//! order, so results do not depend on the thread count.

use std::time::Instant;

use candle_core::Tensor;
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
        }
    }
}

impl TrainConfig {
    /// Checks the values are usable.
    pub fn validate(&self) -> Result<(), RlError> {
        let bad = |field, message: &str| Err(RlError::Config { field, message: message.into() });
        if self.episodes < 1 {
            return bad("episodes", "must be at least 1");
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
        if self.hidden.is_empty() || self.hidden.contains(&0) {
            return bad("hidden", "needs at least one layer, each of positive width");
        }
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
}

impl IterStats {
    /// The CSV header of [`IterStats::csv_row`].
    pub const CSV_HEADER: &'static str = "iteration,mean_return,mean_score,mean_steps,elapsed_s";

    /// One CSV row.
    pub fn csv_row(&self) -> String {
        format!(
            "{},{:.4},{:.4},{:.1},{:.2}",
            self.iteration, self.mean_return, self.mean_score, self.mean_steps, self.elapsed_s
        )
    }
}

/// One recorded episode.
#[derive(Debug, Clone, Default)]
pub struct Episode {
    /// Observations, row-major, one row per decision.
    pub obs: Vec<f32>,
    /// Allowed actions, one row per decision.
    pub mask: Vec<bool>,
    /// Actions taken.
    pub actions: Vec<u32>,
    /// Rewards received.
    pub rewards: Vec<f64>,
    /// The environment's score at the end.
    pub score: f64,
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

/// Runs `seeds.len()` episodes of `task`'s job set `jobset` in lockstep, batching the
/// network's forward pass across them. With `record`, keeps observations for training.
pub fn rollout<T: Task>(
    task: &T,
    net: &PolicyNet,
    jobset: usize,
    seeds: &[u64],
    mode: Mode,
    max_steps: usize,
    record: bool,
) -> Result<Vec<Episode>, RlError> {
    let (d, a) = (task.obs_len(), task.n_actions());
    let mut envs: Vec<T::Env<'_>> = seeds.iter().map(|_| task.make(jobset)).collect();
    let mut rngs: Vec<ChaCha8Rng> = seeds.iter().map(|&s| ChaCha8Rng::seed_from_u64(s)).collect();
    let mut eps: Vec<Episode> = vec![Episode::default(); seeds.len()];
    let mut active: Vec<usize> = (0..seeds.len()).collect();
    let mut obs = Vec::new();
    let mut mask = Vec::new();
    let mut steps = 0;
    while !active.is_empty() && steps < max_steps {
        obs.resize(active.len() * d, 0.0);
        mask.resize(active.len() * a, false);
        for (k, &e) in active.iter().enumerate() {
            envs[e].observe(&mut obs[k * d..(k + 1) * d], &mut mask[k * a..(k + 1) * a]);
        }
        let probs = net.probs(&obs, &mask, active.len())?;
        let mut still = Vec::with_capacity(active.len());
        for (k, &e) in active.iter().enumerate() {
            let p = &probs[k * a..(k + 1) * a];
            let act = match mode {
                Mode::Sample => sample(p, &mut rngs[e]),
                Mode::Greedy => argmax(p),
            };
            if record {
                eps[e].obs.extend_from_slice(&obs[k * d..(k + 1) * d]);
                eps[e].mask.extend_from_slice(&mask[k * a..(k + 1) * a]);
            }
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

/// The gradient of the REINFORCE loss over all steps of `episodes` (one per variable).
fn gradients(net: &PolicyNet, episodes: &[Episode], gamma: f64) -> Result<Vec<Tensor>, RlError> {
    let adv = advantages(episodes, gamma);
    let mut obs: Vec<f32> = Vec::with_capacity(episodes.iter().map(|e| e.obs.len()).sum());
    for e in episodes {
        obs.extend_from_slice(&e.obs);
    }
    let mask: Vec<bool> = episodes.iter().flat_map(|e| e.mask.iter().copied()).collect();
    let actions: Vec<u32> = episodes.iter().flat_map(|e| e.actions.iter().copied()).collect();
    let adv: Vec<f32> = adv.iter().flatten().map(|&v| v as f32).collect();
    let loss = net.pg_loss(obs, &mask, &actions, &adv)?;
    let store = loss.backward()?;
    net.vars()
        .iter()
        // Detached: a gradient built from the variables would otherwise keep this whole
        // forward/backward graph (observations included) alive in the optimiser's state.
        .map(|v| match store.get(v.as_tensor()) {
            Some(g) => Ok(g.detach()),
            None => Ok(v.as_tensor().zeros_like()?),
        })
        .collect()
}

/// Trains `net` on `task`, calling `on_iter` after every iteration (it returns false to stop
/// early, e.g. at a wall-time budget). Returns the curve.
pub fn train<T: Task>(
    task: &T,
    net: &PolicyNet,
    cfg: &TrainConfig,
    on_iter: &mut dyn FnMut(&IterStats, &PolicyNet) -> bool,
) -> Result<Vec<IterStats>, RlError> {
    cfg.validate()?;
    let n_sets = task.jobsets();
    if n_sets == 0 {
        return Err(RlError::Config { field: "jobsets", message: "no training job sets".into() });
    }
    let per_iter = cfg.jobsets_per_iter.min(n_sets);
    let mut opt = Opt::new(cfg.optimizer, net.vars(), cfg.lr)?;
    let started = Instant::now();
    let mut curve = Vec::with_capacity(cfg.iterations);
    for it in 0..cfg.iterations {
        let sets: Vec<usize> = (0..per_iter).map(|k| (it * per_iter + k) % n_sets).collect();
        let results: Vec<(Vec<Tensor>, f64, f64, f64)> = sets
            .par_iter()
            .map(|&js| {
                let seeds: Vec<u64> = (0..cfg.episodes).map(|e| episode_seed(cfg.seed, it, js, e)).collect();
                let eps = rollout(task, net, js, &seeds, Mode::Sample, cfg.max_steps, true)?;
                let g = gradients(net, &eps, cfg.gamma)?;
                let n = eps.len() as f64;
                let ret = eps.iter().map(|e| e.rewards.iter().sum::<f64>()).sum::<f64>() / n;
                let score = eps.iter().map(|e| e.score).sum::<f64>() / n;
                let steps = eps.iter().map(|e| e.actions.len() as f64).sum::<f64>() / n;
                Ok((g, ret, score, steps))
            })
            .collect::<Result<_, RlError>>()?;
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
}
