//! DeepRM's own environment (Mao et al., HotNets 2016; hongzimao/deeprm), rebuilt so the
//! learning code can be held against the paper's published numbers.
//!
//! One machine with `num_res` resources of `res_slot` slots each; at each time step a job
//! arrives with probability `new_job_rate`; 80% are short (1-3 steps), 20% long (10-15); one
//! dominant resource needs 5-10 slots, the other 1-2. The agent sees an image: for each
//! resource the machine's occupancy over the next `time_horizon` steps and the `num_nw`
//! waiting jobs' demands, then the backlog and the time since the last arrival. Actions:
//! start job slot `i` (at the earliest step in the horizon where it fits, as DeepRM does) or
//! hold (`num_nw`): time moves on one step. Reward per step: `-sum 1/T_j` over the jobs in
//! the system, so an episode's return is minus the sum of the jobs' slowdowns.

mod baselines;
mod env;
mod recipe;

pub use baselines::{evaluate, validate, Baseline, EvalResult, Scheduler};
pub use env::{ClassicEnv, ClassicTask};
pub use recipe::{
    train_keep_best, val_max_time, Progress, Recipe, Selection, Trained, EVAL_SEED, TRAIN_SEED, VAL_SEED,
};

use rand::Rng;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// DeepRM's parameters (`parameters.py`; the paper's runs used `num_nw = 10`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeepRmParams {
    /// Resources per machine (2).
    pub num_res: usize,
    /// Slots per resource (10).
    pub res_slot: usize,
    /// Visible job slots M (5 in the code defaults, 10 in the paper's runs).
    pub num_nw: usize,
    /// Image rows, time steps (20).
    pub time_horizon: usize,
    /// Longest job, steps (15).
    pub max_job_len: usize,
    /// Largest demand on one resource, slots (10).
    pub max_job_size: usize,
    /// Backlog capacity (60).
    pub backlog_size: usize,
    /// Time since the last arrival saturates here (10).
    pub max_track_since_new: usize,
    /// Probability of an arrival per step (0.7, about 130% load).
    pub new_job_rate: f64,
    /// Steps during which jobs arrive, per job set (50).
    pub simu_len: usize,
    /// Episodes stop when the clock passes this (DeepRM's test: 20,000).
    pub episode_max_length: usize,
}

impl Default for DeepRmParams {
    fn default() -> Self {
        DeepRmParams {
            num_res: 2,
            res_slot: 10,
            num_nw: 10,
            time_horizon: 20,
            max_job_len: 15,
            max_job_size: 10,
            backlog_size: 60,
            max_track_since_new: 10,
            new_job_rate: 0.7,
            simu_len: 50,
            episode_max_length: 20_000,
        }
    }
}

impl DeepRmParams {
    /// Parameters at a load of `load_pct` percent (DeepRM: load is about 1.85 x arrival rate).
    pub fn at_load(load_pct: f64) -> Self {
        DeepRmParams { new_job_rate: (load_pct / 100.0 / LOAD_PER_RATE).clamp(0.0, 1.0), ..Default::default() }
    }

    /// Width of the backlog block in the image.
    pub fn backlog_width(&self) -> usize {
        self.backlog_size.div_ceil(self.time_horizon)
    }

    /// Columns of the image.
    pub fn image_width(&self) -> usize {
        (self.res_slot + self.max_job_size * self.num_nw) * self.num_res + self.backlog_width() + 1
    }

    /// Observation length.
    pub fn obs_len(&self) -> usize {
        self.time_horizon * self.image_width()
    }

    /// Checks the values are usable.
    pub fn validate(&self) -> Result<(), crate::RlError> {
        let bad = |field, message: String| Err(crate::RlError::Config { field, message });
        if self.num_res == 0 || self.res_slot == 0 || self.num_nw == 0 || self.simu_len == 0 {
            return bad("deeprm", "resources, slots, job slots and simu_len must be positive".into());
        }
        // Checked before any image or job set is allocated (a typo such as `--slots
        // 100000000000` is refused, not an abort on an allocation of terabytes; a checkpoint's
        // encoding is checked the same way).
        let sizes = [
            self.num_res,
            self.res_slot,
            self.num_nw,
            self.time_horizon,
            self.max_job_len,
            self.max_job_size,
            self.backlog_size,
            self.max_track_since_new,
        ];
        if sizes.iter().any(|&v| v > MAX_SIZE) || self.simu_len > MAX_SIMU_LEN {
            return bad(
                "deeprm",
                format!(
                    "each size (job slots {}) must be at most {MAX_SIZE}, simu_len ({}) at most {MAX_SIMU_LEN}",
                    self.num_nw, self.simu_len
                ),
            );
        }
        if self.max_job_len >= self.time_horizon || self.max_job_len < 15 {
            return bad(
                "time_horizon",
                format!("must exceed max_job_len ({}), which must be at least 15", self.max_job_len),
            );
        }
        if self.max_job_size < 10 || self.max_job_size > self.res_slot {
            return bad("max_job_size", "must be within 10..=res_slot".into());
        }
        if !(0.0..=1.0).contains(&self.new_job_rate) {
            return bad("new_job_rate", format!("{} is not a probability", self.new_job_rate));
        }
        Ok(())
    }
}

/// The largest size of any DeepRM dimension (job slots, image rows, resource slots, ...):
/// ten times the paper's largest, and a bound on every image before it is allocated.
pub const MAX_SIZE: usize = 1000;
/// The most steps with arrivals per job set: 200 times the paper's 50.
pub const MAX_SIMU_LEN: usize = 10_000;
/// The most job sets a DeepRM training or evaluation draws: ten times the paper's 20,000.
pub const MAX_JOBSETS: usize = 200_000;

/// Load (fraction of capacity) per unit of arrival rate under DeepRM's job distribution:
/// `E[len] x E[slots on one resource]` / res_slot = (0.8 x 2 + 0.2 x 12.5) x (7.5 + 1.5) / 2 / 10
/// = 1.845, so rate 0.7 is about 130% load (checked by [`offered_load`] in the tests).
pub const LOAD_PER_RATE: f64 = 1.845;

/// A DeepRM job: length in steps and demand per resource in slots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassicJob {
    /// Duration, steps.
    pub len: usize,
    /// Demand per resource, slots.
    pub res: Vec<usize>,
}

/// A job set: what arrives at each step (`None`: nothing).
pub type JobSequence = Vec<Option<ClassicJob>>;

/// DeepRM's bi-modal job distribution (`job_distribution.py`, `bi_model_dist`).
pub fn draw_job(p: &DeepRmParams, rng: &mut impl Rng) -> ClassicJob {
    let len = if rng.gen::<f64>() < 0.8 {
        rng.gen_range(1..=p.max_job_len / 5)
    } else {
        rng.gen_range(p.max_job_len * 2 / 3..=p.max_job_len)
    };
    let dominant = rng.gen_range(0..p.num_res);
    let res = (0..p.num_res)
        .map(|r| {
            if r == dominant {
                rng.gen_range(p.max_job_size / 2..=p.max_job_size)
            } else {
                rng.gen_range(1..=p.max_job_size / 5)
            }
        })
        .collect();
    ClassicJob { len, res }
}

/// `count` job sets drawn from `seed` (job set `i` has its own stream, so sets are stable
/// whatever `count` is).
pub fn job_sets(p: &DeepRmParams, seed: u64, count: usize) -> Vec<JobSequence> {
    (0..count)
        .map(|i| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0x9E37_79B9).wrapping_add(i as u64));
            (0..p.simu_len).map(|_| (rng.gen::<f64>() < p.new_job_rate).then(|| draw_job(p, &mut rng))).collect()
        })
        .collect()
}

/// The offered load of job sets: mean over resources of demanded slot-steps per step per slot.
pub fn offered_load(p: &DeepRmParams, sets: &[JobSequence]) -> f64 {
    let steps = (sets.len() * p.simu_len).max(1) as f64;
    let work: f64 = sets.iter().flatten().flatten().map(|j| j.len as f64 * j.res.iter().sum::<usize>() as f64).sum();
    work / steps / (p.res_slot * p.num_res) as f64
}

/// Agent name of DeepRM-classic checkpoints.
pub const AGENT: &str = "deeprm-classic";

/// Trains a DeepRM network on `sets` and returns it with its training curve.
pub fn train(
    params: &DeepRmParams,
    sets: Vec<JobSequence>,
    cfg: &crate::reinforce::TrainConfig,
    on_iter: &mut dyn FnMut(&crate::reinforce::IterStats),
) -> Result<(crate::net::PolicyNet, Vec<crate::reinforce::IterStats>), crate::RlError> {
    train_until(params, sets, cfg, &crate::reinforce::Schedule::default(), &mut |s, _| {
        on_iter(s);
        true
    })
}

/// Like [`train`], with a learning-rate `schedule`; `on_iter` also sees the network and
/// returns false to stop early.
pub fn train_until(
    params: &DeepRmParams,
    sets: Vec<JobSequence>,
    cfg: &crate::reinforce::TrainConfig,
    schedule: &crate::reinforce::Schedule,
    on_iter: &mut dyn FnMut(&crate::reinforce::IterStats, &crate::net::PolicyNet) -> bool,
) -> Result<(crate::net::PolicyNet, Vec<crate::reinforce::IterStats>), crate::RlError> {
    params.validate()?;
    let task = ClassicTask { params: params.clone(), sets };
    let net = crate::net::PolicyNet::new(
        params.obs_len(),
        &cfg.hidden,
        params.num_nw + 1,
        crate::net::Head::Joint,
        cfg.seed,
    )?;
    let curve = crate::reinforce::train_scheduled(&task, &net, cfg, schedule, on_iter)?;
    Ok((net, curve))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_0_7_is_about_130_percent_load() {
        let p = DeepRmParams::default();
        let load = offered_load(&p, &job_sets(&p, 1, 200));
        assert!((1.15..1.45).contains(&load), "load {load}");
        assert!((DeepRmParams::at_load(130.0).new_job_rate - 0.7).abs() < 0.01);
    }

    #[test]
    fn jobs_follow_the_bimodal_distribution() {
        let p = DeepRmParams::default();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let jobs: Vec<_> = (0..2000).map(|_| draw_job(&p, &mut rng)).collect();
        let short = jobs.iter().filter(|j| j.len <= 3).count() as f64 / 2000.0;
        assert!((0.75..0.85).contains(&short), "{short}");
        assert!(jobs
            .iter()
            .all(|j| (1..=15).contains(&j.len) && j.res.iter().any(|&r| r >= 5) && j.res.iter().all(|&r| r >= 1)));
    }
}
