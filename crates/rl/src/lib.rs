//! dqngpu-rl: the reinforcement-learning placement agents of the thesis (Section IV.2).
//!
//! - [`gpu`]: DqnGPU (time-varying image state of 4 resources, combination actions) and
//!   DeepRM Max / Mean (constant peak / mean demands, one job per action) over the dqngpu
//!   simulator; the trained agents are [`Policy`]s ([`gpu::RlPolicy`]).
//! - [`deeprm`]: DeepRM's own environment and baselines, to hold the learning code against
//!   the paper's numbers.
//! - [`net`]: the candle MLP policy and its optimisers; [`reinforce`]: REINFORCE with
//!   DeepRM's time-step baseline and batched parallel rollouts; [`env`](mod@env): the `Env` / `Task`
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
pub mod scheduler;
pub mod scorer;

use std::path::Path;

use dqngpu_model::Policy;

pub use error::RlError;
pub use scheduler::SchedulerName;

/// A scheduler by name ([`SchedulerName`]: any case): an RL agent (`dqngpu`, `deeprm-max`,
/// `deeprm-mean`) loaded from `model`, or a heuristic from [`dqngpu_policy::by_name`] (`seed`
/// drives `random`; a `model` for a heuristic is refused). An unknown name is a usage error
/// listing every valid one.
pub fn policy_by_name(name: &str, model: Option<&Path>, seed: u64) -> Result<Box<dyn Policy>, RlError> {
    name.parse::<SchedulerName>()?.resolve(model, seed)
}
