//! The RL schedulers (`dqngpu`, `deeprm-max`, `deeprm-mean`): training and loading, through
//! `dqngpu-rl`. Until that crate offers a training API, each is skipped with the reason, and
//! the report says so.

use dqngpu_model::Policy;
use indicatif::MultiProgress;

use crate::config::ExperimentConfig;
use crate::error::ExperimentError;
use crate::results::{Skipped, TrainingRecord};
use crate::runner::Setup;

/// The schedulers that need training, as the CLI spells them.
pub const RL_SCHEDULERS: [&str; 3] = ["dqngpu", "deeprm-max", "deeprm-mean"];

/// A trained agent, ready to place jobs.
pub struct TrainedAgent {
    /// Scheduler name.
    pub name: String,
    /// The policy (pure; shared by every evaluation run).
    pub policy: Box<dyn Policy>,
    /// How it was trained.
    pub record: TrainingRecord,
}

/// Trains each of `names` (RL schedulers) on the config's training job sets; those that
/// cannot be trained come back in the second list, with why.
pub fn train(
    _cfg: &ExperimentConfig,
    _setup: &Setup,
    names: &[String],
    _bars: &MultiProgress,
) -> Result<(Vec<TrainedAgent>, Vec<Skipped>), ExperimentError> {
    let skipped = names
        .iter()
        .map(|n| Skipped {
            scheduler: n.clone(),
            reason: "the RL crate (dqngpu-rl) does not yet offer a training API for this agent in this build".into(),
        })
        .collect();
    Ok((Vec::new(), skipped))
}
