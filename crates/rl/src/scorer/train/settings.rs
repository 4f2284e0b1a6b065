//! Where the training and validation job sets come from: the seeds, the settings (the
//! default training distribution) and the episodes they draw.

use std::sync::Arc;

use dqngpu_model::{AppLibrary, ClusterSpec};
use serde::{Deserialize, Serialize};

use super::episode::Episode;
use crate::error::RlError;

/// First seed of the scorer's training job sets under `seed`: 100,000 + 1,000 x seed (set `i`
/// adds `i`), so never an evaluation seed of the experiment (1000..) or of `simulate` examples.
pub fn train_seed_base(seed: u64) -> u64 {
    100_000u64.wrapping_add(seed.wrapping_mul(1000))
}

/// First seed of the scorer's validation job sets under `seed` (200,000 + 1,000 x seed).
pub fn validation_seed_base(seed: u64) -> u64 {
    200_000u64.wrapping_add(seed.wrapping_mul(1000))
}

/// `count` episodes per library on `cluster`: set `i` of library `k` of class
/// `classes[(k x count + i) % len]`, drawn with seed `first_seed + i` (the same seeds for
/// every library).
pub fn episodes(
    libraries: &[Arc<AppLibrary>],
    cluster: &ClusterSpec,
    classes: &[dqngpu_model::WorkloadClass],
    jobs: usize,
    arrivals: dqngpu_sim::Arrivals,
    count: usize,
    first_seed: u64,
) -> Result<Vec<Episode>, RlError> {
    if classes.is_empty() {
        return Err(RlError::Config { field: "workload", message: "no workload class to train on".into() });
    }
    let mut out = Vec::with_capacity(libraries.len() * count);
    for (k, library) in libraries.iter().enumerate() {
        for i in 0..count {
            // Each library goes on where the last one's classes stopped: a few sets per library
            // still cover every class over the libraries.
            let class = classes[(k * count + i) % classes.len()];
            let set = dqngpu_sim::draw(library, class, jobs, first_seed.wrapping_add(i as u64), arrivals)?;
            out.push(Episode::new(cluster.clone(), library.clone(), set));
        }
    }
    Ok(out)
}

/// One training setting of the scorer: libraries drawn on one cluster with one arrival
/// pattern.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Setting {
    /// App libraries (`thesis`, `lucid`, `generated:SEED`, a directory).
    pub libraries: Vec<String>,
    /// Cluster, as `--gpus` takes it.
    pub gpus: String,
    /// Jobs per set.
    pub jobs: usize,
    /// Poisson arrivals (jobs/s); absent: all at t = 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival_rate: Option<f64>,
    /// Training job sets per library.
    pub jobsets: usize,
    /// A slowdown budget in this setting, percent (the scorer then trains on the choices the
    /// budget leaves); absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_slowdown_pct: Option<f64>,
}

/// The default training distribution: the thesis's apps on one Titan Xp, 30 jobs at t = 0, 5
/// sets; fifteen generated libraries (`generated:1`..`generated:15`, apps of every shape the
/// thesis and Lucid span) there, 2 sets each (many libraries, few sets each: what it does on
/// apps it never saw varies less between training seeds); the thesis's apps, `generated:7`
/// and `:8` on 4 nodes x 2 Titan Xp, 60 jobs arriving Poisson at 0.1/s, 5 sets per library;
/// Lucid's apps on one RTX 3090, 5 sets; the thesis's apps and three generated libraries on
/// one Titan Xp under a 10% slowdown budget, 3 sets per library (the choices a budget leaves
/// differ in kind). Generated libraries from seed 1001 on are never drawn, so they stay
/// unseen. How it was chosen: docs/RL.md.
pub fn default_settings() -> Vec<Setting> {
    let libs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        Setting {
            libraries: libs(&["thesis"]),
            gpus: "titanxp:1".into(),
            jobs: 30,
            arrival_rate: None,
            jobsets: 5,
            max_slowdown_pct: None,
        },
        Setting {
            libraries: generated(1..=15).collect(),
            gpus: "titanxp:1".into(),
            jobs: 30,
            arrival_rate: None,
            jobsets: 2,
            max_slowdown_pct: None,
        },
        Setting {
            libraries: libs(&["thesis", "generated:7", "generated:8"]),
            gpus: "4xtitanxp:2".into(),
            jobs: 60,
            arrival_rate: Some(0.1),
            jobsets: 5,
            max_slowdown_pct: None,
        },
        Setting {
            libraries: libs(&["lucid"]),
            gpus: "rtx3090:1".into(),
            jobs: 30,
            arrival_rate: None,
            jobsets: 5,
            max_slowdown_pct: None,
        },
        Setting {
            libraries: libs(&["thesis", "generated:1", "generated:2", "generated:3"]),
            gpus: "titanxp:1".into(),
            jobs: 30,
            arrival_rate: None,
            jobsets: 3,
            max_slowdown_pct: Some(10.0),
        },
    ]
}

/// The libraries of a training of one setting of the caller's (`train --gpus ...`) that names
/// none: the thesis's apps and `generated:1`..`generated:6`.
pub fn single_setting_libraries() -> Vec<String> {
    std::iter::once("thesis".to_string()).chain(generated(1..=6)).collect()
}

/// `generated:A`..`generated:B`, by name.
fn generated(seeds: std::ops::RangeInclusive<u64>) -> impl Iterator<Item = String> {
    seeds.map(|i| format!("generated:{i}"))
}

/// The training and validation episodes of `settings` (training sets from
/// [`train_seed_base`], one validation set per class and library from
/// [`validation_seed_base`]); a library or cluster that cannot be resolved is named.
pub fn settings_episodes(
    settings: &[Setting],
    classes: &[dqngpu_model::WorkloadClass],
    seed: u64,
) -> Result<(Vec<Episode>, Vec<Episode>), RlError> {
    let (mut train, mut validation) = (Vec::new(), Vec::new());
    for s in settings {
        let mut libraries = Vec::new();
        for name in &s.libraries {
            libraries.push(Arc::new(dqngpu_model::library::resolve(name)?));
        }
        let cluster = ClusterSpec::parse_gpus(&s.gpus)?;
        let arrivals = match s.arrival_rate {
            None => dqngpu_sim::Arrivals::AllAtZero,
            Some(rate_per_s) => dqngpu_sim::Arrivals::Poisson { rate_per_s },
        };
        if s.jobs == 0 || s.jobsets == 0 {
            return Err(RlError::Config {
                field: "training setting",
                message: "jobs and jobsets must be at least 1".into(),
            });
        }
        let budget = s.max_slowdown_pct.map(|p| p / 100.0);
        let with_budget = |mut v: Vec<Episode>| {
            v.iter_mut().for_each(|e| e.max_slowdown = budget);
            v
        };
        train.extend(with_budget(episodes(
            &libraries,
            &cluster,
            classes,
            s.jobs,
            arrivals,
            s.jobsets,
            train_seed_base(seed),
        )?));
        validation.extend(with_budget(episodes(
            &libraries,
            &cluster,
            classes,
            s.jobs,
            arrivals,
            classes.len(),
            validation_seed_base(seed),
        )?));
    }
    Ok((train, validation))
}
