//! Capacity checks shared by the packing heuristics.
//!
//! Heuristics reason about peaks: a job's demand is its peak over the rest of its profile,
//! and a GPU's committed load is the sum of its running jobs' remaining peaks. That is
//! conservative (peaks that never coincide are still added up) — it is what a scheduler
//! without time-varying profiles can do, and the gap the DqnGPU agent is meant to close.

use dqngpu_model::{GpuState, QueuedJob, Resources};

/// The job's peak demand over its whole profile (a waiting job starts from the beginning).
pub fn job_peak(job: &QueuedJob) -> Resources {
    job.profile.peak_from(0)
}

/// Load already committed on the GPU: the sum of its running jobs' remaining peaks.
pub fn committed(gpu: &GpuState) -> Resources {
    gpu.remaining_peak_sum()
}

/// True when `job` may share `gpu` with its current jobs and `extra` (jobs already chosen
/// for it in this decision): none of them is an app the job was OOM-killed beside, nor the
/// other way round. Apps are compared by `AppInfo::name`.
pub fn compatible(job: &QueuedJob, gpu: &GpuState, extra: &[&QueuedJob]) -> bool {
    let name = job.profile.app.name.as_str();
    let clash = |other: &str, other_avoid: &[String]| {
        job.avoid_apps.iter().any(|a| a == other) || other_avoid.iter().any(|a| a == name)
    };
    !gpu.running.iter().any(|r| clash(&r.profile.app.name, &[]))
        && !extra.iter().any(|e| clash(&e.profile.app.name, &e.avoid_apps))
}

/// True when `job`'s peak added to `load` stays within the GPU's capacity in all four resources.
pub fn fits_all(load: &Resources, job: &Resources, gpu: &GpuState) -> bool {
    load.add(job).fits_within(&gpu.spec.capacity())
}

/// True when `job`'s peak memory added to `load` stays within the GPU's memory.
pub fn fits_memory(load: &Resources, job: &Resources, gpu: &GpuState) -> bool {
    load.gpu_mem_mib + job.gpu_mem_mib <= gpu.spec.memory_mib + 1e-9
}
