//! dqngpu-rl: the reinforcement-learning placement agents of the thesis (Section IV.2).
//!
//! - [`gpu`]: DqnGPU (time-varying image state of 4 resources, combination actions) and
//!   DeepRM Max / Mean (constant peak / mean demands, one job per action) over the dqngpu
//!   simulator; the trained agents are [`Policy`]s ([`gpu::RlPolicy`]).
//! - [`deeprm`]: DeepRM's own environment and baselines, to hold the learning code against
//!   the paper's numbers.
//! - [`net`]: the candle MLP policy and its optimisers; [`reinforce`]: REINFORCE with
//!   DeepRM's time-step baseline and batched parallel rollouts; [`env`]: the `Env` / `Task`
//!   interface the trainer drives.
//! - [`checkpoint`]: safetensors weights plus a JSON file of encoding and hyper-parameters.
//!
//! ```
//! // Heuristics resolve through the same entry point as trained agents.
//! let p = dqngpu_rl::policy_by_name("sjf", None, 0).unwrap();
//! assert_eq!(p.name(), "sjf");
//! assert!(dqngpu_rl::policy_by_name("dqngpu", None, 0).is_err()); // needs --model
//! ```

pub mod checkpoint;
pub mod deeprm;
pub mod env;
pub mod error;
pub mod gpu;
pub mod net;
pub mod progress;
pub mod reinforce;

use std::path::Path;

use dqngpu_model::{ModelError, Policy};

pub use error::RlError;

/// Every scheduler name [`policy_by_name`] accepts: the heuristics, then the RL agents.
pub fn names() -> Vec<String> {
    dqngpu_policy::NAMES.iter().chain(gpu::AgentKind::NAMES.iter()).map(|s| s.to_string()).collect()
}

/// A scheduler by name: an RL agent (`dqngpu`, `deeprm-max`, `deeprm-mean`) loaded from
/// `model`, or a heuristic from [`dqngpu_policy::by_name`] (`seed` drives `random`).
/// An unknown name is a usage error listing every valid one.
pub fn policy_by_name(name: &str, model: Option<&Path>, seed: u64) -> Result<Box<dyn Policy>, RlError> {
    if let Some(agent) = gpu::AgentKind::from_name(name) {
        let path = model.ok_or_else(|| RlError::ModelRequired { agent: agent.name().into() })?;
        return Ok(Box::new(gpu::RlPolicy::load(path, agent)?));
    }
    dqngpu_policy::by_name(name, seed).map_err(|e| match e {
        ModelError::UnknownName { what, name, .. } => {
            RlError::Model(ModelError::UnknownName { what, name, valid: names() })
        }
        other => RlError::Model(other),
    })
}
