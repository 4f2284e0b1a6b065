//! The thesis's Section V end to end: draw job sets, train the RL agents, evaluate every
//! scheduler on every workload class over seeds never used in training, and write
//! `results.json`, `summary.csv`, `report.md`, `report.html` and the plots.

pub mod config;
pub mod error;
pub mod plots;
pub mod reported;
pub mod results;
pub mod stats;

pub use config::ExperimentConfig;
pub use error::ExperimentError;
pub use results::ExperimentResults;
