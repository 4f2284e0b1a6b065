//! dqngpu-rl: the reinforcement-learning placement agents of the thesis (Section IV.2).
//!
//! - [`deeprm`]: DeepRM's own environment and baselines, to hold the learning code against
//!   the paper's numbers.
//! - [`net`]: the candle MLP policy and its optimisers; [`reinforce`]: REINFORCE with
//!   DeepRM's time-step baseline, batched parallel rollouts.
//! - [`env`]: the `Env` / `Task` interface the trainer drives.

pub mod deeprm;
pub mod env;
pub mod error;
pub mod net;
pub mod reinforce;

pub use error::RlError;
