//! Heuristic placement policies, one per file, chosen by name through [`by_name`].
//!
//! Every policy here is a pure function of the [`ClusterView`](dqngpu_model::ClusterView) (and its seed, for `random`):
//! - `fifo`, `sjf`: one job per GPU at a time (SJF = shortest solo time first, the thesis's
//!   baseline);
//! - `tetris`: Grandl et al. (SIGCOMM'14) multi-resource packing: alignment of the job's demand
//!   over its profile with the GPU's free capacity, plus their remaining-work (SRPT) term;
//! - `bestfit`: GPU-memory best fit, as Alibaba's gpushare scheduler extender does;
//! - `sjf-bestfit`: shortest job first, each onto the GPU where its peak memory fits tightest;
//! - `lucid`: the packing rule of Lucid (ASPLOS'23): sharing scores, pairs of at most two jobs,
//!   sharing only while jobs would otherwise queue;
//! - `greedy`: the (job, GPU) with the highest predicted gain in summed progress rate under the
//!   interference model the caller steps GPUs with, while a gain is positive (DqnGPU without
//!   learning);
//! - `random`: a random waiting job onto a random GPU where its memory fits.
//!
//! ```
//! let p = dqngpu_policy::by_name("sjf", 0).unwrap();
//! assert_eq!(p.name(), "sjf");
//! assert!(dqngpu_policy::by_name("nope", 0).is_err());
//! ```

mod bestfit;
mod exclusive;
pub mod fit;
mod greedy;
pub mod lucid;
mod random;
mod sjf_bestfit;
pub mod tetris;

use std::sync::Arc;

use dqngpu_interference::Interference;
use dqngpu_model::{Admission, ModelError, Policy};

pub use bestfit::BestFit;
pub use exclusive::{Exclusive, Order};
pub use greedy::{Gain, Greedy, Member};
pub use lucid::Lucid;
pub use random::RandomPolicy;
pub use sjf_bestfit::SjfBestFit;
pub use tetris::Tetris;

/// Names of the heuristic policies, as the CLI spells them.
pub const NAMES: &[&str] = &["fifo", "sjf", "tetris", "bestfit", "sjf-bestfit", "lucid", "greedy", "random"];

/// The heuristics a learned policy is measured against (issue 10's list: every rule but
/// `random`); the best of them in each setting is the bar.
pub const RIVALS: [&str; 7] = ["sjf", "fifo", "tetris", "bestfit", "sjf-bestfit", "lucid", "greedy"];

/// The heuristic called `name`; `seed` drives `random`. Unknown names list the valid ones.
/// `greedy` predicts with the default `contention` model: [`by_name_under`] names another.
pub fn by_name(name: &str, seed: u64) -> Result<Box<dyn Policy>, ModelError> {
    by_name_under(name, seed, None)
}

/// [`by_name`] for a caller that steps GPUs with `model`: `greedy` predicts with it (the
/// other rules read no interference model).
pub fn by_name_under(
    name: &str,
    seed: u64,
    model: Option<Arc<dyn Interference>>,
) -> Result<Box<dyn Policy>, ModelError> {
    by_name_within(name, seed, model, None)
}

/// [`by_name_under`] for a caller with a slowdown budget (`admission`): the packing rules
/// (`tetris`, `bestfit`, `sjf-bestfit`, `lucid`, `greedy`) choose only among the groups it
/// admits, as they choose only among those whose memory fits, rather than propose one the
/// caller then drops. `fifo` and `sjf` start jobs alone on idle GPUs, which a budget always
/// admits; `random` stays as it is (a reference point, not a rival).
pub fn by_name_within(
    name: &str,
    seed: u64,
    model: Option<Arc<dyn Interference>>,
    admission: Option<Arc<dyn Admission>>,
) -> Result<Box<dyn Policy>, ModelError> {
    Ok(match name.trim().to_ascii_lowercase().as_str() {
        "fifo" => Box::new(Exclusive::new(Order::Arrival)),
        "sjf" => Box::new(Exclusive::new(Order::ShortestFirst)),
        "tetris" => Box::new(Tetris::default().within(admission)),
        "bestfit" | "best-fit" => Box::new(BestFit::within(admission)),
        "sjf-bestfit" | "sjf-best-fit" => Box::new(SjfBestFit::within(admission)),
        "lucid" => Box::new(Lucid::within(admission)),
        "greedy" => Box::new(model.map_or_else(Greedy::default, Greedy::with_model).within(admission)),
        "random" => Box::new(RandomPolicy::new(seed)),
        _ => {
            return Err(ModelError::UnknownName {
                what: "scheduler",
                name: name.to_string(),
                valid: NAMES.iter().map(|s| s.to_string()).collect(),
            })
        }
    })
}

#[cfg(test)]
mod tests;
