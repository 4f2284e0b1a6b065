//! Capacity checks shared by the packing heuristics.
//!
//! Heuristics reason about peaks: a job's demand is its peak over the rest of its profile,
//! and a GPU's committed load is the sum of its running jobs' remaining peaks. That is
//! conservative (peaks that never coincide are still added up) — it is what a scheduler
//! without time-varying profiles can do, and the gap the DqnGPU agent is meant to close.

use std::cmp::Ordering;

use dqngpu_model::{Admission, AppProfile, ClusterView, GpuState, JobId, Placement, QueuedJob, Resources};

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

/// Shortest solo time first; ties by arrival, then id (SJF's order).
pub fn shortest_first(a: &QueuedJob, b: &QueuedJob) -> Ordering {
    a.profile.solo_s().total_cmp(&b.profile.solo_s()).then(a.submit_s.total_cmp(&b.submit_s)).then(a.id.cmp(&b.id))
}

/// The caller's budget for one decision, its answers remembered: a job refused (or admitted)
/// on a GPU beside the same jobs is answered so again for any waiting job of the same app and
/// profile ([`Admission`] sees a waiting job only through them), without predicting again. A
/// queue holds many jobs of few apps, and under a budget the rules are asked at every tick.
pub struct Admitter<'a, 'q> {
    admission: Option<&'a dyn Admission>,
    /// (GPU, the jobs chosen there, a job of the app asked about, the answer).
    answers: Vec<(usize, Vec<JobId>, &'q QueuedJob, bool)>,
}

impl<'a, 'q> Admitter<'a, 'q> {
    /// Answers for `admission` (none: no budget, everything is admitted).
    pub fn new(admission: Option<&'a dyn Admission>) -> Self {
        Admitter { admission, answers: Vec::new() }
    }

    /// True when the caller's budget lets `job` start on GPU `g` of `view` beside the jobs
    /// running there and `chosen` (those placed there in this decision); remembered.
    pub fn admits(&mut self, view: &ClusterView<'_>, g: usize, chosen: &[&QueuedJob], job: &'q QueuedJob) -> bool {
        let Some(admission) = self.admission else { return true };
        let alike = |q: &QueuedJob| std::sync::Arc::ptr_eq(&q.profile, &job.profile) && q.app == job.app;
        let same_chosen = |ids: &[JobId]| ids.len() == chosen.len() && ids.iter().zip(chosen).all(|(a, c)| *a == c.id);
        if let Some(a) = self.answers.iter().find(|a| a.0 == g && alike(a.2) && same_chosen(&a.1)) {
            return a.3;
        }
        let mut ids: Vec<JobId> = chosen.iter().map(|c| c.id).collect();
        ids.push(job.id);
        let answer = admission.admits(view, g, &ids);
        ids.pop();
        self.answers.push((g, ids, job, answer));
        answer
    }
}

/// GPU-memory best fit over `jobs` in the order given: each goes to the GPU with the least
/// free memory (capacity minus committed peaks) that still holds its peak memory, has no app
/// it must avoid and, under a budget, admits it; a job that fits nowhere waits. Groups the
/// result by GPU.
pub fn best_fit_memory<'q>(
    view: &ClusterView<'q>,
    jobs: impl IntoIterator<Item = &'q QueuedJob>,
    admission: Option<&dyn Admission>,
) -> Vec<Placement> {
    let mut load: Vec<_> = view.gpus.iter().map(committed).collect();
    let mut chosen: Vec<Vec<&QueuedJob>> = vec![Vec::new(); view.gpus.len()];
    let mut admitter = Admitter::new(admission);
    for job in jobs {
        let peak = job_peak(job);
        let mut fitting: Vec<usize> = (0..view.gpus.len())
            .filter(|&g| fits_memory(&load[g], &peak, &view.gpus[g]) && compatible(job, &view.gpus[g], &chosen[g]))
            .collect();
        let free = |g: usize| view.gpus[g].spec.memory_mib - load[g].gpu_mem_mib;
        fitting.sort_by(|&a, &b| free(a).total_cmp(&free(b)).then(a.cmp(&b)));
        // The tightest fit the budget admits (checked in that order, so only as far as needed).
        let best = fitting.into_iter().find(|&g| admitter.admits(view, g, &chosen[g], job));
        if let Some(g) = best {
            load[g] = load[g].add(&peak);
            chosen[g].push(job);
        }
    }
    placements(chosen)
}

/// The non-empty groups, one placement per GPU, in GPU order.
pub fn placements(chosen: Vec<Vec<&QueuedJob>>) -> Vec<Placement> {
    chosen
        .into_iter()
        .enumerate()
        .filter(|(_, c)| !c.is_empty())
        .map(|(g, c)| Placement { gpu: g, jobs: c.iter().map(|j| j.id).collect() })
        .collect()
}

/// The profile from `progress_s` on, cut into windows of `width_s` seconds of its own time:
/// `out[k]` is the component-wise peak demand over `[progress + k w, progress + (k + 1) w)`.
/// Empty when the profile is over.
pub fn windows(profile: &AppProfile, progress_s: f64, width_s: f64) -> Vec<Resources> {
    let solo = profile.solo_s();
    let left = solo - progress_s;
    if left <= 0.0 || width_s <= 0.0 {
        return Vec::new();
    }
    let n = (left / width_s).ceil() as usize;
    let mut out = vec![Resources::ZERO; n.max(1)];
    let dt = profile.interval_s;
    for i in profile.sample_index(progress_s)..profile.samples.len() {
        let a = (i as f64 * dt - progress_s).max(0.0);
        let b = ((i + 1) as f64 * dt - progress_s).min(left);
        if b <= a {
            continue;
        }
        let first = ((a / width_s).floor() as usize).min(out.len() - 1);
        let last = (((b / width_s).ceil() as usize).saturating_sub(1)).clamp(first, out.len() - 1);
        for w in &mut out[first..=last] {
            *w = w.max(&profile.samples[i]);
        }
    }
    out
}
