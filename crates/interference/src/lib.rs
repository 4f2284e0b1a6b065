//! Interference models: how fast jobs progress when they share a GPU.
//!
//! - [`Contention`] (`contention`, the default): over-subscribed GPU compute, SM or PCIe slows
//!   every job on the card, plus a co-location overhead; parameters fitted to the Lucid pairs by
//!   [`calibrate`] (the fitted values are the built-in defaults).
//! - `contention-h100`: the same model with the parameters fitted to PyTorch pairs measured on
//!   an H100 under time-slicing ([`ContentionParams::H100_TIMESLICED`], data/gpu-pairs-h100/).
//! - [`Measured`] (`measured`): the measured speed of a pair found in the Lucid pairs table,
//!   `contention` elsewhere.
//! - [`NoInterference`] (`none`): every job runs as fast as alone.
//!
//! Models are called by the simulator every step for every GPU: they never allocate.

pub mod calibrate;
mod contention;
pub mod groups;
mod measured;
mod none;
pub mod pairs;

use dqngpu_model::{GpuSpec, ModelError, Resources};

pub use contention::{Contention, ContentionParams, MIN_RATE};
pub use measured::{Measured, PairTable};
pub use none::NoInterference;

/// What an interference model sees of one job sharing a GPU.
#[derive(Debug, Clone, Copy)]
pub struct JobLoad<'a> {
    /// App name (library key), for table-driven models.
    pub app: &'a str,
    /// The job's demand now, from its profile.
    pub demand: &'a Resources,
}

/// Predicts progress rates of co-located jobs.
pub trait Interference: Send + Sync {
    /// Name, as the CLI spells it.
    fn name(&self) -> &str;

    /// Writes into `rates[i]` the progress rate of `jobs[i]` (1.0 = as fast as alone, in
    /// (0, 1]) while exactly these jobs share `gpu`. `rates.len() == jobs.len()`.
    fn rates(&self, gpu: &GpuSpec, jobs: &[JobLoad<'_>], rates: &mut [f64]);

    /// True when [`Interference::rates`] answers exactly 1.0 for one job alone on `gpu` at any
    /// demand component-wise at most `peak`. Lets a prediction stop stepping a job left alone
    /// (its rate and losses can no longer change). `false` (the default) is always safe.
    fn alone_at_full_speed(&self, _gpu: &GpuSpec, _peak: &Resources) -> bool {
        false
    }
}

/// A model shows as its name, so settings that hold one can derive `Debug`.
impl std::fmt::Debug for dyn Interference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The model names [`by_name`] accepts; the first is the default.
pub const MODEL_NAMES: [&str; 4] = ["contention", "contention-h100", "measured", "none"];

/// The default model's name.
pub const DEFAULT_MODEL: &str = MODEL_NAMES[0];

/// A model by name. `measured` uses the built-in Lucid pairs ([`Measured::builtin`]); use
/// [`Measured::new`] to give a table.
/// An unknown name is a usage error listing the valid names.
pub fn by_name(name: &str) -> Result<Box<dyn Interference>, ModelError> {
    match name {
        "contention" => Ok(Box::new(Contention::default())),
        "contention-h100" => Ok(Box::new(Contention::h100())),
        "none" => Ok(Box::new(NoInterference)),
        "measured" => Ok(Box::new(Measured::builtin()?)),
        other => Err(ModelError::UnknownName {
            what: "interference model",
            name: other.to_string(),
            valid: MODEL_NAMES.iter().map(|s| s.to_string()).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_name_lists_the_valid_ones() {
        let e = by_name("ideal").err().map(|e| (e.is_usage(), e.to_string()));
        let (usage, msg) = e.unwrap_or_default();
        assert!(usage, "{msg}");
        for n in MODEL_NAMES {
            assert!(msg.contains(n), "{msg}");
        }
    }

    #[test]
    fn names_resolve() {
        assert_eq!(by_name("contention").map(|m| m.name().to_string()).ok().as_deref(), Some("contention"));
        assert_eq!(by_name("none").map(|m| m.name().to_string()).ok().as_deref(), Some("none"));
        // Every listed name resolves to a model that reports that name.
        for n in MODEL_NAMES {
            assert_eq!(by_name(n).map(|m| m.name().to_string()).ok().as_deref(), Some(n));
        }
    }
}
