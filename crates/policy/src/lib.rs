//! Heuristic placement policies, one per file, chosen by name through [`by_name`].
//!
//! Every policy here is a pure function of the [`ClusterView`] (and its seed, for `random`):
//! - `fifo`, `sjf`: one job per GPU at a time (SJF = shortest solo time first, the thesis's
//!   baseline);
//! - `tetris`: Grandl et al. (SIGCOMM'14) multi-resource packing by alignment of a job's peak
//!   demand with the GPU's free capacity, packing while jobs fit;
//! - `bestfit`: GPU-memory best fit, as Alibaba's gpushare scheduler extender does;
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
mod random;
mod tetris;

use dqngpu_model::{ModelError, Policy};

pub use bestfit::BestFit;
pub use exclusive::{Exclusive, Order};
pub use random::RandomPolicy;
pub use tetris::Tetris;

/// Names of the heuristic policies, as the CLI spells them.
pub const NAMES: &[&str] = &["fifo", "sjf", "tetris", "bestfit", "random"];

/// The heuristic called `name`; `seed` drives `random`. Unknown names list the valid ones.
pub fn by_name(name: &str, seed: u64) -> Result<Box<dyn Policy>, ModelError> {
    Ok(match name.trim().to_ascii_lowercase().as_str() {
        "fifo" => Box::new(Exclusive::new(Order::Arrival)),
        "sjf" => Box::new(Exclusive::new(Order::ShortestFirst)),
        "tetris" => Box::new(Tetris),
        "bestfit" | "best-fit" => Box::new(BestFit),
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
