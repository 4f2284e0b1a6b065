//! `none`: ideal sharing, every job as fast as alone (for comparison).

use dqngpu_model::GpuSpec;

use crate::{Interference, JobLoad};

/// Every rate is 1.0.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoInterference;

impl Interference for NoInterference {
    fn name(&self) -> &str {
        "none"
    }

    fn rates(&self, _gpu: &GpuSpec, _jobs: &[JobLoad<'_>], rates: &mut [f64]) {
        rates.fill(1.0);
    }

    fn alone_at_full_speed(&self, _gpu: &GpuSpec, _peak: &dqngpu_model::Resources) -> bool {
        true
    }
}
