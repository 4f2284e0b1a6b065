//! The network's updates on recorded steps: batching, imitation and policy-gradient losses,
//! epochs of imitation, and one policy-gradient iteration.

use std::time::Instant;

use candle_core::{Device, Tensor, Var, D};
use dqngpu_policy::Greedy;
use rand::Rng;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::episode::ScorerTask;
use super::labels::{sampled_episode, Step};
use super::recipe::ScorerRecipe;
use crate::error::RlError;
use crate::net::{Opt, PolicyNet};
use crate::reinforce::{IterStats, TrainConfig};
use crate::scorer::features::FEATURES;
use crate::scorer::Mlp;

/// Logit given to padding rows so they get no probability.
const PAD: f32 = -1.0e9;

/// The rows of `steps`, unpadded (rows x FEATURES), where each (step, slot) of the padded
/// (steps x width) layout reads its row: slot j < n of step k reads that step's row j, a
/// slot past n reads index `rows` (the [`PAD`] logit appended after the rows' logits); and
/// the width. The network runs on the real rows only: steps differ in width by two orders
/// of magnitude (one GPU against 8 GPUs with 120 jobs), so padding the inputs cost most of
/// a training's tensor work.
fn batch(steps: &[&Step]) -> Result<(Tensor, Tensor, usize), RlError> {
    let width = steps.iter().map(|s| s.n).max().unwrap_or(1).max(1);
    let rows: usize = steps.iter().map(|s| s.n).sum();
    let mut x = Vec::with_capacity(rows * FEATURES);
    let mut slot = vec![rows as u32; steps.len() * width];
    for (k, s) in steps.iter().enumerate() {
        let first = (x.len() / FEATURES) as u32;
        x.extend_from_slice(&s.rows[..s.n * FEATURES]);
        for (j, v) in slot[k * width..k * width + s.n].iter_mut().enumerate() {
            *v = first + j as u32;
        }
    }
    let x = Tensor::from_vec(x, (rows, FEATURES), &Device::Cpu)?;
    let slot = Tensor::from_vec(slot, steps.len() * width, &Device::Cpu)?;
    Ok((x, slot, width))
}

/// Log-probabilities (steps x width) of every row under `net`.
pub(super) fn log_probs(net: &PolicyNet, steps: &[&Step]) -> Result<(Tensor, usize), RlError> {
    let (x, slot, width) = batch(steps)?;
    let logits = net.logits(&x)?.flatten_all()?;
    let logits = Tensor::cat(&[&logits, &Tensor::new(&[PAD], &Device::Cpu)?], 0)?;
    let padded = logits.index_select(&slot, 0)?.reshape((steps.len(), width))?;
    Ok((candle_nn::ops::log_softmax(&padded, D::Minus1)?, width))
}

/// Gradients of `loss` for `net`'s variables, in order.
pub(super) fn gradients(net: &PolicyNet, loss: &Tensor) -> Result<Vec<Tensor>, RlError> {
    let store = loss.backward()?;
    net.vars()
        .iter()
        .map(|v: &Var| Ok(store.get(v.as_tensor()).map(|g| g.detach()).unwrap_or(v.as_tensor().zeros_like()?)))
        .collect()
}

/// One imitation update on `steps`: -log of the labelled rows' summed probability.
fn imitation_update(net: &PolicyNet, opt: &mut Opt, steps: &[&Step]) -> Result<f64, RlError> {
    let (logp, width) = log_probs(net, steps)?;
    let mut label = vec![PAD; steps.len() * width];
    for (k, s) in steps.iter().enumerate() {
        for &c in &s.chosen {
            label[k * width + c] = 0.0;
        }
    }
    let label = Tensor::from_vec(label, (steps.len(), width), &Device::Cpu)?;
    let w: Vec<f32> = steps.iter().map(|s| s.weight).collect();
    let total: f32 = w.iter().sum::<f32>().max(1e-6);
    let w = Tensor::from_vec(w, steps.len(), &Device::Cpu)?;
    let loss = ((logp + label)?.log_sum_exp(D::Minus1)?.mul(&w)?.sum_all()? * (-1.0 / total as f64))?;
    let value = loss.to_scalar::<f32>()? as f64;
    opt.step(&gradients(net, &loss)?)?;
    Ok(value)
}

/// One policy-gradient update: every step of an episode weighted by its advantage, plus
/// `entropy` times the mean entropy of the choices.
fn pg_update(net: &PolicyNet, opt: &mut Opt, steps: &[&Step], adv: &[f32], entropy: f64) -> Result<(), RlError> {
    if steps.is_empty() {
        return Ok(());
    }
    let (logp, _) = log_probs(net, steps)?;
    let idx: Vec<u32> = steps.iter().map(|s| s.chosen[0] as u32).collect();
    let idx = Tensor::from_vec(idx, (steps.len(), 1), &Device::Cpu)?;
    let chosen = logp.gather(&idx, 1)?.squeeze(1)?;
    let adv = Tensor::from_slice(adv, steps.len(), &Device::Cpu)?;
    let n = steps.len() as f64;
    let mut loss = (chosen.mul(&adv)?.sum_all()? * (-1.0 / n))?;
    if entropy > 0.0 {
        // p log p is 0 on padding rows (p underflows to exactly 0).
        let h = (logp.exp()?.mul(&logp)?.sum_all()? * (1.0 / n))?;
        loss = (loss + (h * entropy)?)?;
    }
    opt.step(&gradients(net, &loss)?)
}

/// `epochs` passes over `data` in minibatches of 256 steps, shuffled by `rng`.
pub(super) fn fit_epochs(
    net: &PolicyNet,
    opt: &mut Opt,
    data: &[Step],
    epochs: usize,
    rng: &mut ChaCha8Rng,
) -> Result<(), RlError> {
    for _ in 0..epochs {
        let mut order: Vec<usize> = (0..data.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.gen_range(0..=i));
        }
        for chunk in order.chunks(256) {
            let steps: Vec<&Step> = chunk.iter().map(|&i| &data[i]).collect();
            imitation_update(net, opt, &steps)?;
        }
    }
    Ok(())
}

/// Each rollout's advantage within its job set: (the set's mean cost - its cost) / the
/// costs' standard deviation (a per-sequence baseline, as Decima and DeepRM, in units of the
/// rollouts' spread); 0 for all where they cost the same. Relative to the mean, as before,
/// advantages were about 0.06 and the entropy bonus's gradient 2.5 times the policy
/// gradient's, so the first iterations flattened the imitated policy (session 29's review).
pub(super) fn set_advantages(costs: &[f64]) -> Vec<f32> {
    let n = costs.len().max(1) as f64;
    let mean = costs.iter().sum::<f64>() / n;
    let sd = (costs.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / n).sqrt();
    let spread = sd > 1e-9 * mean.abs().max(1.0);
    costs.iter().map(|c| if spread { ((mean - c) / sd) as f32 } else { 0.0 }).collect()
}

/// Policy-gradient iteration `it` of its stage (`draw`: of the whole training, which seeds
/// its window of job sets and its samples): sampled rollouts on the window, advantages
/// against each set's mean in units of the set's spread, one update.
#[allow(clippy::too_many_arguments)]
pub(super) fn pg_iteration(
    task: &ScorerTask,
    cfg: &TrainConfig,
    recipe: &ScorerRecipe,
    net: &PolicyNet,
    opt: &mut Opt,
    greedy: &Greedy,
    (it, draw): (usize, usize),
    started: Instant,
) -> Result<IterStats, RlError> {
    let sets = task.train.len();
    let per_iter = cfg.jobsets_per_iter.clamp(1, sets);
    let episodes = cfg.episodes.max(2);
    let mlp = Mlp::from_net(net)?;
    let window: Vec<usize> = (0..per_iter).map(|k| (draw * per_iter + k) % sets).collect();
    let jobs: Vec<(usize, usize)> = window.iter().flat_map(|&s| (0..episodes).map(move |e| (s, e))).collect();
    let runs: Vec<(Vec<Step>, f64)> = jobs
        .par_iter()
        .map(|&(s, e)| {
            let seed = cfg.seed.wrapping_mul(1_000_003).wrapping_add((draw * 10_007 + s * 101 + e) as u64);
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            sampled_episode(task, &task.train[s], cfg.objective, &mlp, greedy, &mut rng)
        })
        .collect::<Result<_, _>>()?;
    let mut steps: Vec<&Step> = Vec::new();
    let mut adv: Vec<f32> = Vec::new();
    for (k, _) in window.iter().enumerate() {
        let group = &runs[k * episodes..(k + 1) * episodes];
        let costs: Vec<f64> = group.iter().map(|r| r.1).collect();
        for ((ep_steps, _), a) in group.iter().zip(set_advantages(&costs)) {
            for s in ep_steps.iter().filter(|s| s.n > 1) {
                steps.push(s);
                adv.push(a);
            }
        }
    }
    let entropy = recipe.entropy * (1.0 - it as f64 / cfg.iterations as f64);
    pg_update(net, opt, &steps, &adv, entropy)?;
    let mean_score = runs.iter().map(|r| r.1).sum::<f64>() / runs.len() as f64;
    Ok(IterStats {
        iteration: it + 1,
        mean_return: -mean_score,
        mean_score,
        mean_steps: runs.iter().map(|r| r.0.len()).sum::<usize>() as f64 / runs.len() as f64,
        elapsed_s: started.elapsed().as_secs_f64(),
        lr: cfg.lr,
    })
}
