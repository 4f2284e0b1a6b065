//! Interference models: how fast jobs progress when they share a GPU.
//!
//! (Being written: the `contention` model fitted to measured pairs, `measured`, `none`.)

use dqngpu_model::{GpuSpec, Resources};

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
}
