//! A test double for [`GpuSampler`]: it replays recorded readings in order, then holds the
//! last one. It exists because no GPU was available where this crate was developed; tests use
//! it to drive the real sampling loop (real child process, real timing) without NVML.

use super::{DeviceInfo, GpuReading, GpuSampler};
use crate::ProfilerError;

/// Replays recorded readings (test double; see the module docs).
#[derive(Debug, Clone)]
pub struct ReplaySampler {
    device: DeviceInfo,
    readings: Vec<GpuReading>,
    next: usize,
    /// How many times [`GpuSampler::read`] was called.
    pub reads: usize,
}

impl ReplaySampler {
    /// A sampler for `device` that returns `readings` one per call.
    pub fn new(device: DeviceInfo, readings: Vec<GpuReading>) -> Self {
        ReplaySampler { device, readings, next: 0, reads: 0 }
    }
}

impl GpuSampler for ReplaySampler {
    fn device(&self) -> &DeviceInfo {
        &self.device
    }

    fn read(&mut self) -> Result<GpuReading, ProfilerError> {
        self.reads += 1;
        let r = self.readings.get(self.next).or(self.readings.last()).cloned().unwrap_or_default();
        self.next = (self.next + 1).min(self.readings.len());
        Ok(r)
    }
}
