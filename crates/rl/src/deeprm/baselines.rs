//! DeepRM's baseline schedulers (`other_agents.py`) and the evaluation over job sets.

use rand::Rng;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{ClassicEnv, DeepRmParams, JobSequence};
use crate::env::Env;
use crate::error::RlError;
use crate::net::{argmax, PolicyNet};

/// A scheduler for DeepRM's environment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Baseline {
    /// Shortest job first among the jobs that fit now.
    Sjf,
    /// Largest dot product of free resources (now) and demand among the jobs that fit now.
    Packer,
    /// `knob x packer score + (1 - knob) x 1/len` (DeepRM's `get_packer_sjf_action`).
    TetrisStar {
        /// Weight of the packing score.
        knob: f64,
    },
    /// Uniform over the `M + 1` actions, as DeepRM's random agent.
    Random,
}

impl Baseline {
    /// Tetris* with the knob used in our measurements (see docs/BENCHMARKS.md).
    pub const TETRIS_STAR: Baseline = Baseline::TetrisStar { knob: 0.5 };

    /// Name as printed.
    pub fn name(&self) -> &'static str {
        match self {
            Baseline::Sjf => "sjf",
            Baseline::Packer => "packer",
            Baseline::TetrisStar { .. } => "tetris_star",
            Baseline::Random => "random",
        }
    }

    /// The action in `env` (slot index, or `M` to hold).
    pub fn act(&self, env: &ClassicEnv<'_>, p: &DeepRmParams, rng: &mut impl Rng) -> usize {
        let knob = match *self {
            Baseline::Random => return rng.gen_range(0..=p.num_nw),
            Baseline::Sjf => 0.0,
            Baseline::Packer => 1.0,
            Baseline::TetrisStar { knob } => knob,
        };
        let mut best = (0.0, p.num_nw);
        for i in 0..p.num_nw {
            let Some(job) = env.slot(i).filter(|_| env.fits_now(i)) else { continue };
            let align: f64 = (0..p.num_res).map(|r| (env.free(0, r) * job.res[r]) as f64).sum();
            let score = knob * align + (1.0 - knob) / job.len as f64;
            if score > best.0 {
                best = (score, i);
            }
        }
        best.1
    }
}

/// Average slowdown and completion time over every finished job of every job set.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EvalResult {
    /// Mean of (finish - enter) / len.
    pub avg_slowdown: f64,
    /// Mean of finish - enter, steps.
    pub avg_completion_time: f64,
    /// Jobs counted.
    pub jobs: usize,
}

/// Who decides in an evaluation.
#[derive(Debug, Clone, Copy)]
pub enum Scheduler<'a> {
    /// A heuristic.
    Baseline(Baseline),
    /// A trained network, greedy.
    Net(&'a PolicyNet),
}

/// Greedy average slowdown of `net` on `sets`, for choosing weights during training: the job
/// sets run in lockstep (one batched forward pass per step for all of them, in `chunk`s run
/// in parallel), and an episode stops at time step `max_time`; jobs not started by then count
/// as finishing at `max_time` (a lower bound of their slowdown), so a policy that holds jobs
/// forever scores badly instead of taking 20,000 steps. A policy that finishes every set
/// before `max_time` gets exactly [`evaluate`]'s average slowdown.
pub fn validate(p: &DeepRmParams, sets: &[JobSequence], net: &PolicyNet, max_time: usize) -> Result<f64, RlError> {
    let chunk = sets.len().div_ceil(rayon::current_num_threads().max(1)).max(1);
    let per_chunk: Vec<(usize, f64)> = sets
        .par_chunks(chunk)
        .map(|group| {
            let mut envs: Vec<ClassicEnv<'_>> = group.iter().map(|seq| ClassicEnv::new(p, seq)).collect();
            let (d, a) = (p.obs_len(), p.num_nw + 1);
            let mut obs = vec![0.0; envs.len() * d];
            let mut mask = vec![false; envs.len() * a];
            let mut live: Vec<usize> = (0..envs.len()).collect();
            let mut rows: Vec<Result<usize, usize>> = Vec::with_capacity(envs.len());
            while !live.is_empty() {
                let n = crate::reinforce::observe_batch(&live, &mut obs, &mut mask, (d, a), &mut rows, |e, o, m| {
                    envs[e].observe(o, m)
                });
                let probs = if n > 0 { net.probs(&obs[..n * d], &mask[..n * a], n)? } else { Vec::new() };
                for (&e, row) in live.iter().zip(&rows) {
                    let act = match *row {
                        Ok(k) => argmax(&probs[k * a..(k + 1) * a]),
                        Err(only) => only,
                    };
                    envs[e].step(act);
                }
                live.retain(|&e| !envs[e].is_done() && envs[e].now() < max_time);
            }
            let (mut n, mut sd) = (0usize, 0.0);
            for env in &envs {
                for (enter, finish, len) in env.finished() {
                    n += 1;
                    sd += (finish - enter) as f64 / len as f64;
                }
                for (enter, len) in env.unstarted() {
                    n += 1;
                    sd += (max_time.max(enter + len) - enter) as f64 / len as f64;
                }
            }
            Ok((n, sd))
        })
        .collect::<Result<_, RlError>>()?;
    let n: usize = per_chunk.iter().map(|c| c.0).sum();
    Ok(per_chunk.iter().map(|c| c.1).sum::<f64>() / n.max(1) as f64)
}

/// Runs `scheduler` on every job set (to completion, DeepRM's `all_done`) and averages over
/// all jobs, as DeepRM's `slow_down_cdf.py` does. `seed` drives the random baseline.
pub fn evaluate(
    p: &DeepRmParams,
    sets: &[JobSequence],
    scheduler: Scheduler<'_>,
    seed: u64,
) -> Result<EvalResult, RlError> {
    let per_set: Vec<(usize, f64, f64)> = sets
        .par_iter()
        .enumerate()
        .map(|(i, seq)| {
            let mut env = ClassicEnv::new(p, seq);
            let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_add(i as u64));
            let mut obs = vec![0.0; env.obs_len()];
            let mut mask = vec![false; env.n_actions()];
            while !env.is_done() {
                let a = match scheduler {
                    Scheduler::Baseline(b) => b.act(&env, p, &mut rng),
                    Scheduler::Net(net) => {
                        env.observe(&mut obs, &mut mask);
                        let mut allowed = mask.iter().enumerate().filter(|(_, &ok)| ok).map(|(i, _)| i);
                        match (allowed.next(), allowed.next()) {
                            // One allowed action: the network's argmax is that one.
                            (Some(only), None) => only,
                            _ => argmax(&net.probs(&obs, &mask, 1)?),
                        }
                    }
                };
                env.step(a);
            }
            let (mut n, mut sd, mut ct) = (0, 0.0, 0.0);
            for (enter, finish, len) in env.finished() {
                n += 1;
                sd += (finish - enter) as f64 / len as f64;
                ct += (finish - enter) as f64;
            }
            Ok((n, sd, ct))
        })
        .collect::<Result<_, RlError>>()?;
    let n: usize = per_set.iter().map(|s| s.0).sum();
    let d = n.max(1) as f64;
    Ok(EvalResult {
        avg_slowdown: per_set.iter().map(|s| s.1).sum::<f64>() / d,
        avg_completion_time: per_set.iter().map(|s| s.2).sum::<f64>() / d,
        jobs: n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deeprm::job_sets;
    use crate::net::Head;
    use candle_core::Tensor;

    /// A network that ignores its input and prefers the lowest allowed slot, holding last.
    fn first_fit(p: &DeepRmParams) -> PolicyNet {
        let net = PolicyNet::new(p.obs_len(), &[4], p.num_nw + 1, Head::Joint, 1).unwrap();
        let vars = net.vars();
        for v in &vars {
            v.set(&v.as_tensor().zeros_like().unwrap()).unwrap();
        }
        let bias: Vec<f32> = (0..=p.num_nw).map(|i| if i == p.num_nw { -10.0 } else { -(i as f32) }).collect();
        vars[3].set(&Tensor::new(bias, &candle_core::Device::Cpu).unwrap()).unwrap();
        net
    }

    #[test]
    fn validation_matches_evaluation_when_every_set_finishes_and_charges_jobs_left_waiting() {
        let p = DeepRmParams::default();
        let sets = job_sets(&p, 5, 6);
        let net = first_fit(&p);
        let full = evaluate(&p, &sets, Scheduler::Net(&net), 0).unwrap().avg_slowdown;
        let v = validate(&p, &sets, &net, 1000).unwrap();
        assert!(full >= 1.0);
        assert!((v - full).abs() < 1e-12, "validation {v} vs evaluation {full}");
        // Stopped at step 20, with jobs still arriving: those waiting count, at least 1 each.
        let cut = validate(&p, &sets, &net, 20).unwrap();
        assert!(cut >= 1.0 && cut.is_finite(), "{cut}");
        assert!((cut - full).abs() > 1e-9, "a cut at step 20 should change the score");
    }
}
