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
                        argmax(&net.probs(&obs, &mask, 1)?)
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
