//! dqngpu-profiler: records an application's resource-usage history (thesis Table 2) from a
//! real GPU through NVML, or imports it from the logs operators already keep (`nvidia-smi`
//! CSV, `nvidia-smi dmon`, DCGM exporter scrapes), and resamples it into an
//! [`AppProfile`](dqngpu_model::AppProfile) at a fixed interval.
//!
//! - [`import`]: parsers for the three log formats and the shared selection / resampling.
//! - [`sampler`]: the `profile run` loop: a real child process sampled through the
//!   [`sampler::GpuSampler`] trait. [`sampler::nvml::NvmlSampler`] is the real
//!   implementation; [`sampler::replay::ReplaySampler`] is a test double that replays recorded
//!   readings, written because no GPU was available where this crate was developed.
//! - [`plot`]: terminal sparklines and PNG charts of the four curves.
//!
//! Units follow the model: `_pct` percent, `_mib` MiB, `_mbps` MB/s (10^6 bytes per second).

mod error;
pub mod import;
pub mod plot;
pub mod resample;
pub mod sampler;
mod time;

pub use error::{LoadAttempt, ProfilerError};
pub use import::{import_file, import_str, ImportFormat, ImportOptions, Imported};
pub use sampler::{Attribution, GpuSampler, RunOutcome, Scope};
