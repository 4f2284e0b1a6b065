//! Training the `dqngpu` scorer: evolution strategies (antithetic Gaussian perturbations of the
//! weights, the policy-gradient estimate of Salimans et al. 2017) on whole replays. The reward
//! of a weight vector is the mean GPU allocation over 100..=130% of capacity arrived, averaged
//! over pod sequences drawn with training seeds (from 1,000 up, never the evaluation seeds
//! 42..51). Every iteration draws fresh sequences, shared by the whole population. After the
//! last iteration the trained and the starting weights are replayed on validation seeds and
//! the better kept.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{Result, TraceError};
use crate::policies::learned::{Learned, Weights, FEATURES, FIRST_LEARNED};
use crate::reader::{NodeRow, PodRow};
use crate::replay::{replay, ReplayConfig, ReplayResult};

/// First training seed; evaluation uses 42..51.
pub const TRAIN_SEED_BASE: u64 = 1_000;
/// First validation seed: after training, the trained and the starting weights are compared
/// on these sequences and the better kept (never seen in training or evaluation).
pub const VALIDATION_SEED_BASE: u64 = 2_000;

/// Training settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearnConfig {
    /// Iterations.
    pub iterations: usize,
    /// Antithetic pairs per iteration.
    pub pairs: usize,
    /// Pod sequences (training seeds) per evaluation.
    pub sequences: usize,
    /// Perturbation scale.
    pub sigma: f64,
    /// Step length (the step is the normalised gradient times this).
    pub step: f64,
    /// Seed of the perturbations.
    pub seed: u64,
    /// Tune ratio of the replays.
    pub tune: f64,
    /// Weights to start from (`None`: FGD's, [`Weights::fgd_like`]).
    #[serde(default)]
    pub init: Option<Vec<f64>>,
    /// Validation sequences; 0 keeps the trained weights unchecked.
    #[serde(default)]
    pub validation: usize,
}

impl Default for LearnConfig {
    fn default() -> Self {
        LearnConfig {
            iterations: 20,
            pairs: 4,
            sequences: 3,
            sigma: 0.003,
            step: 0.002,
            seed: 7,
            tune: 1.3,
            init: None,
            validation: 10,
        }
    }
}

/// The reward of a replay: mean allocation (%) over 100..=130% arrived.
pub fn reward(r: &ReplayResult) -> f64 {
    let v: Vec<f64> = (100..=130).filter_map(|p| r.allocation_at(p)).collect();
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// One iteration's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IterationLog {
    /// Iteration.
    pub iteration: usize,
    /// Mean reward of the population.
    pub mean_reward: f64,
    /// Best reward in the population.
    pub best_reward: f64,
    /// Weights after the step.
    pub weights: Vec<f64>,
}

fn gaussian(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
    let u2: f64 = rng.gen();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Trains from FGD-equivalent weights; `log` sees each iteration.
pub fn train(
    nodes: &[NodeRow],
    pods: &[PodRow],
    cfg: &LearnConfig,
    log: &(dyn Fn(&IterationLog) + Sync),
) -> Result<(Weights, Vec<IterationLog>)> {
    let mut theta = match &cfg.init {
        Some(w) => {
            Weights::check(w).map_err(|e| TraceError::Unusable(format!("the starting weights: {e}")))?;
            w.clone()
        }
        None => Weights::fgd_like().w,
    };
    // Training draws seeds from TRAIN_SEED_BASE on; past VALIDATION_SEED_BASE the check that
    // picks the shipped weights would replay sequences they were trained on.
    let train_seeds = cfg.iterations.saturating_mul(cfg.sequences) as u64;
    if cfg.validation > 0 && train_seeds > VALIDATION_SEED_BASE - TRAIN_SEED_BASE {
        return Err(TraceError::Unusable(format!(
            "{} iterations x {} sequences draw training seeds {TRAIN_SEED_BASE}.. past the validation seeds from {VALIDATION_SEED_BASE}: at most {} sequences in all (or no validation)",
            cfg.iterations,
            cfg.sequences,
            VALIDATION_SEED_BASE - TRAIN_SEED_BASE
        )));
    }
    let start = theta.clone();
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let mut logs = Vec::new();
    for it in 0..cfg.iterations {
        let seeds: Vec<u64> = (0..cfg.sequences).map(|k| TRAIN_SEED_BASE + (it * cfg.sequences + k) as u64).collect();
        // The anchor features keep their weight: scores are only compared, so they set the scale.
        let eps: Vec<Vec<f64>> = (0..cfg.pairs)
            .map(|_| (0..FEATURES).map(|k| if k < FIRST_LEARNED { 0.0 } else { gaussian(&mut rng) }).collect())
            .collect();
        let mut jobs: Vec<(usize, f64, u64)> = Vec::new();
        for i in 0..cfg.pairs {
            for sgn in [1.0, -1.0] {
                jobs.extend(seeds.iter().map(|&s| (i, sgn, s)));
            }
        }
        let rewards: Vec<(usize, f64, f64)> = jobs
            .par_iter()
            .map(|&(i, sgn, seed)| {
                let w: Vec<f64> = theta.iter().zip(&eps[i]).map(|(t, e)| t + sgn * cfg.sigma * e).collect();
                let p = Learned { weights: Weights { w, provenance: String::new() } };
                let r = replay(nodes, pods, &p, &ReplayConfig { tune: cfg.tune, seed })?;
                Ok((i, sgn, reward(&r)))
            })
            .collect::<Result<_>>()?;
        let mut grad = vec![0.0; FEATURES];
        let mut all = Vec::new();
        for (i, e_i) in eps.iter().enumerate() {
            let mean_of = |sgn: f64| {
                let v: Vec<f64> = rewards.iter().filter(|r| r.0 == i && r.1 == sgn).map(|r| r.2).collect();
                v.iter().sum::<f64>() / v.len().max(1) as f64
            };
            let (plus, minus) = (mean_of(1.0), mean_of(-1.0));
            all.push(plus);
            all.push(minus);
            for (g, e) in grad.iter_mut().zip(e_i) {
                *g += (plus - minus) * e / (2.0 * cfg.pairs as f64 * cfg.sigma);
            }
        }
        let norm = grad.iter().map(|g| g * g).sum::<f64>().sqrt();
        if norm > 0.0 {
            for (t, g) in theta.iter_mut().zip(&grad) {
                *t += cfg.step * g / norm;
            }
        }
        let entry = IterationLog {
            iteration: it,
            mean_reward: all.iter().sum::<f64>() / all.len().max(1) as f64,
            best_reward: all.iter().copied().fold(f64::MIN, f64::max),
            weights: theta.clone(),
        };
        log(&entry);
        logs.push(entry);
    }
    let mut provenance = format!(
        "dqngpu trace train: evolution strategies, {} iterations x {} antithetic pairs x {} sequences, sigma {}, step {}, seed {}, training seeds from {}, from {}",
        cfg.iterations,
        cfg.pairs,
        cfg.sequences,
        cfg.sigma,
        cfg.step,
        cfg.seed,
        TRAIN_SEED_BASE,
        if cfg.init.is_some() { "given weights" } else { "FGD's weights" }
    );
    if cfg.validation > 0 {
        let (trained, started) = (validate(nodes, pods, &theta, cfg)?, validate(nodes, pods, &start, cfg)?);
        let kept = if trained > started { "the trained weights" } else { "the starting weights" };
        provenance += &format!(
            "; validation on seeds {}..{} (mean allocation over 100..130%): trained {trained:.3}, start {started:.3}, kept {kept}",
            VALIDATION_SEED_BASE,
            VALIDATION_SEED_BASE + cfg.validation as u64 - 1
        );
        if trained <= started {
            theta = start;
        }
    }
    Ok((Weights { w: theta, provenance }, logs))
}

/// Mean reward of `w` over the validation sequences.
fn validate(nodes: &[NodeRow], pods: &[PodRow], w: &[f64], cfg: &LearnConfig) -> Result<f64> {
    let p = Learned { weights: Weights { w: w.to_vec(), provenance: String::new() } };
    let rewards: Vec<f64> = (0..cfg.validation as u64)
        .into_par_iter()
        .map(|k| {
            let r = replay(nodes, pods, &p, &ReplayConfig { tune: cfg.tune, seed: VALIDATION_SEED_BASE + k })?;
            Ok(reward(&r))
        })
        .collect::<Result<_>>()?;
    Ok(rewards.iter().sum::<f64>() / rewards.len().max(1) as f64)
}
