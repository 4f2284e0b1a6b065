//! Results of a simulation and the formulas behind them (docs/SIMULATOR.md states them).

use dqngpu_model::JobId;
use serde::{Deserialize, Serialize};

use crate::event::SimEvent;

/// Execution slowdown up to which a job counts as not slowed (thesis: "within 2%").
pub const NO_SLOWDOWN_MAX: f64 = 1.02;

/// One job's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Job id.
    pub id: JobId,
    /// App name.
    pub app: String,
    /// GPU of its last (successful) run: index into the cluster's GPUs; `None` if it never ran.
    pub gpu: Option<usize>,
    /// Submission time, s.
    pub submit_s: f64,
    /// First start, s (`None` if it never started).
    pub start_s: Option<f64>,
    /// Start of the run that completed, s (differs from `start_s` after OOM restarts).
    pub last_start_s: Option<f64>,
    /// Finish, s (`None` if the simulation stopped first).
    pub finish_s: Option<f64>,
    /// Solo execution time, s (its profile's length).
    pub solo_s: f64,
    /// start_s - submit_s.
    pub wait_s: Option<f64>,
    /// finish_s - start_s (includes time lost to OOM kills and the wait before restarting).
    pub exec_s: Option<f64>,
    /// exec_s / solo_s (thesis slowdown).
    pub exec_slowdown: Option<f64>,
    /// (finish_s - submit_s) / solo_s (DeepRM slowdown).
    pub jct_slowdown: Option<f64>,
    /// Times it was killed out of memory and requeued.
    pub restarts: u32,
}

/// The thesis's slowdown buckets (counts of jobs by execution slowdown `s`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SlowdownBuckets {
    /// s <= 1.02.
    pub none: usize,
    /// 1.02 < s < 1.10.
    pub lt10: usize,
    /// 1.10 <= s < 1.20.
    pub from10to20: usize,
    /// s >= 1.20.
    pub ge20: usize,
}

impl SlowdownBuckets {
    /// Counts finished jobs into the buckets.
    pub fn from_slowdowns(slowdowns: impl IntoIterator<Item = f64>) -> Self {
        let mut b = SlowdownBuckets::default();
        for s in slowdowns {
            if s <= NO_SLOWDOWN_MAX {
                b.none += 1;
            } else if s < 1.10 {
                b.lt10 += 1;
            } else if s < 1.20 {
                b.from10to20 += 1;
            } else {
                b.ge20 += 1;
            }
        }
        b
    }

    /// The four counts in order none, <10%, 10-20%, >=20%.
    pub fn counts(&self) -> [usize; 4] {
        [self.none, self.lt10, self.from10to20, self.ge20]
    }
}

/// Mean job completion time (finish - submit) over the finished jobs, s (0 with none).
pub fn mean_jct_s(jobs: &[JobRecord]) -> f64 {
    let jcts: Vec<f64> = jobs.iter().filter_map(|j| j.finish_s.map(|f| f - j.submit_s)).collect();
    if jcts.is_empty() {
        0.0
    } else {
        jcts.iter().sum::<f64>() / jcts.len() as f64
    }
}

/// Share of the finished jobs whose execution slowdown exceeds 1.10, % (0 with none).
pub fn slowed_over_10_pct(jobs: &[JobRecord]) -> f64 {
    let s: Vec<f64> = jobs.iter().filter_map(|j| j.exec_slowdown).collect();
    if s.is_empty() {
        0.0
    } else {
        100.0 * s.iter().filter(|&&x| x > 1.10).count() as f64 / s.len() as f64
    }
}

/// Everything a simulation measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimResult {
    /// Policy that placed the jobs.
    pub scheduler: String,
    /// Interference model.
    pub interference: String,
    /// Time the last job finished, s (the clock when stopped, if not every job finished).
    pub makespan_s: f64,
    /// Makespan lower bound, s (see [`lower_bound_s`]).
    pub lower_bound_s: f64,
    /// makespan_s / lower_bound_s.
    pub makespan_over_bound: f64,
    /// Mean-JCT lower bound, s (see [`jct_lower_bound_s`]): the room any policy has.
    #[serde(default)]
    pub jct_lower_bound_s: f64,
    /// Mean job completion time (finish - submit) over the finished jobs, s: what users feel.
    #[serde(default)]
    pub mean_jct_s: f64,
    /// Share of the finished jobs whose execution slowdown exceeds 1.10, %.
    #[serde(default)]
    pub slowed_over_10_pct: f64,
    /// Mean over GPUs and [0, makespan] of min(100, sum of running jobs' util demand x rate).
    pub avg_gpu_util_pct: f64,
    /// Mean over GPUs and [0, makespan] of 100 x (sum of running jobs' memory) / GPU memory.
    pub avg_gpu_mem_util_pct: f64,
    /// OOM kills.
    pub oom_kills: u64,
    /// Sum of the jobs' restarts.
    pub restarts: u64,
    /// Jobs by execution slowdown.
    pub slowdown_buckets: SlowdownBuckets,
    /// True when every job finished.
    pub completed: bool,
    /// Simulation steps taken.
    pub steps: u64,
    /// Sum over steps of the jobs running in that step (the benchmark's unit of work).
    pub job_steps: u64,
    /// Decisions asked of the policy.
    pub decisions: u64,
    /// Jobs the simulator started itself because the policy held while a GPU was idle and a
    /// waiting job fitted it (the liveness rule, [`dqngpu_model::liveness_start`]).
    #[serde(default)]
    pub liveness_starts: u64,
    /// Groups the slowdown budget kept from starting ([`SimConfig::max_slowdown`](crate::SimConfig)).
    #[serde(default)]
    pub budget_refusals: u64,
    /// Groups dropped because one of their jobs alone needs more memory at its peak than the
    /// GPU has: they could only be killed out of memory, again and again.
    #[serde(default)]
    pub unfit_drops: u64,
    /// Per-job outcomes, in job-set order.
    pub jobs: Vec<JobRecord>,
    /// The event log (empty unless recording was asked for).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub events: Vec<SimEvent>,
    /// Cluster usage at every step (only when [`SimConfig::record_usage`](crate::SimConfig)).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub usage: Option<UsageTrace>,
}

/// Cluster-average usage over a simulation: one point at the start of every step (what that
/// step uses), and a last point of zeros at the end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageTrace {
    /// Cluster clock at each point, s.
    pub t_s: Vec<f64>,
    /// Mean over GPUs of min(100, sum of running jobs' util demand x rate), %.
    pub gpu_util_pct: Vec<f64>,
    /// Mean over GPUs of 100 x (sum of running jobs' memory) / GPU memory, %.
    pub gpu_mem_pct: Vec<f64>,
}

impl UsageTrace {
    /// Adds a point.
    pub fn push(&mut self, t_s: f64, gpu_util_pct: f64, gpu_mem_pct: f64) {
        self.t_s.push(t_s);
        self.gpu_util_pct.push(gpu_util_pct);
        self.gpu_mem_pct.push(gpu_mem_pct);
    }
}

/// What the lower bound needs of one job.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoundJob {
    /// Submission time, s.
    pub submit_s: f64,
    /// Solo execution time, s.
    pub solo_s: f64,
    /// GPU-util work: the integral of its util demand over its solo run, percent x s.
    pub util_work: f64,
}

/// What the mean-JCT bound needs of one job.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JctBoundJob {
    /// Submission time, s.
    pub submit_s: f64,
    /// Solo execution time, s.
    pub solo_s: f64,
    /// Its least memory over its profile, MiB: no moment of its run needs less.
    pub min_mem_mib: f64,
    /// Its memory over its solo run, MiB x s: a run at rates below 1 holds each sample longer,
    /// so every run that finishes holds at least this much.
    pub mem_work: f64,
}

/// Mean-JCT lower bound, s, over a job set on GPUs of `gpu_mem_mib` memory each. Jobs
/// submitted at the same instant form a batch; within a batch the k-th job to finish ends no
/// sooner than each of
/// - the k-th shortest solo time (no model runs a job faster than alone);
/// - the k smallest memory works over the cluster's memory (memory is a hard capacity: a GPU
///   over it kills a job at once);
///
/// and, taken as a whole, the batch's summed JCT is no smaller than its jobs' solo times with
/// the *alone-only* jobs served shortest first on the GPUs. A job is alone-only when its least
/// memory plus the least memory of any other job of the set exceeds the largest GPU: a start
/// beside another job is an out-of-memory kill at once, so it needs a GPU to itself, and
/// shortest-first minimises the summed completion times on identical machines, preemption or
/// not. The batch counts the larger of the two sums.
///
/// A true bound for every model whose rates are at most 1 (`contention`, `contention-h100`,
/// `none`; a measured pair table's speeds above 1 could beat it). It says how much room a
/// (cluster, job set) leaves: where the best rule's mean JCT is within 5% of it, no policy can
/// be 5% better.
pub fn jct_lower_bound_s(jobs: &[JctBoundJob], gpu_mem_mib: &[f64]) -> f64 {
    if jobs.is_empty() || gpu_mem_mib.is_empty() {
        return 0.0;
    }
    let cap = gpu_mem_mib.iter().copied().fold(0.0, f64::max);
    let total_mem: f64 = gpu_mem_mib.iter().sum();
    // The least memory of any job but j: the smallest, or the second smallest for its owner.
    let (mut first, mut second) = ((f64::INFINITY, usize::MAX), f64::INFINITY);
    for (i, j) in jobs.iter().enumerate() {
        if j.min_mem_mib < first.0 {
            second = first.0;
            first = (j.min_mem_mib, i);
        } else if j.min_mem_mib < second {
            second = j.min_mem_mib;
        }
    }
    let alone_only = |i: usize| {
        let others = if i == first.1 { second } else { first.0 };
        others.is_finite() && jobs[i].min_mem_mib + others > cap
    };
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&a, &b| jobs[a].submit_s.total_cmp(&jobs[b].submit_s));
    // Buffers reused across batches (with arrivals, most batches are one job).
    let (mut solos, mut works, mut alone, mut ends) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut total = 0.0;
    for batch in order.chunk_by(|&a, &b| jobs[a].submit_s == jobs[b].submit_s) {
        solos.clear();
        works.clear();
        alone.clear();
        let mut shared = 0.0;
        for &i in batch {
            solos.push(jobs[i].solo_s);
            works.push(jobs[i].mem_work);
            if alone_only(i) {
                alone.push(jobs[i].solo_s);
            } else {
                shared += jobs[i].solo_s;
            }
        }
        solos.sort_by(f64::total_cmp);
        works.sort_by(f64::total_cmp);
        let mut by_rank = 0.0;
        let mut work_so_far = 0.0;
        for (solo, work) in solos.iter().zip(&works) {
            work_so_far += work;
            by_rank += solo.max(work_so_far / total_mem);
        }
        total += by_rank.max(shared + shortest_first(&mut alone, gpu_mem_mib.len(), &mut ends));
    }
    total / jobs.len() as f64
}

/// Summed completion times of `solos` served shortest first on `machines` identical machines
/// (`ends`: a buffer for their end times).
fn shortest_first(solos: &mut [f64], machines: usize, ends: &mut Vec<f64>) -> f64 {
    solos.sort_by(f64::total_cmp);
    // The k-th job ends after itself and the jobs k - m, k - 2m, ... before it on its machine.
    ends.clear();
    for (k, solo) in solos.iter().enumerate() {
        let end = solo + if k >= machines { ends[k - machines] } else { 0.0 };
        ends.push(end);
    }
    ends.iter().sum()
}

/// Makespan lower bound on `n_gpus` GPUs:
/// max( max_j (submit_j + solo_j),  max_T ( T + sum_{j: submit_j >= T} util_work_j / (100 x n_gpus) ) ),
/// with T ranging over the submission times. With every job at t = 0 this is
/// max(longest solo job, total GPU-util work / total capacity). It is a true bound whenever
/// co-located jobs together do at most 100% GPU-util work per second (rates shrink when the
/// sum of demands passes 100%); ideal sharing (`none`) can beat it.
pub fn lower_bound_s(jobs: &[BoundJob], n_gpus: usize) -> f64 {
    if jobs.is_empty() || n_gpus == 0 {
        return 0.0;
    }
    let cap = 100.0 * n_gpus as f64;
    let longest = jobs.iter().map(|j| j.submit_s + j.solo_s).fold(0.0, f64::max);
    let mut by_submit: Vec<&BoundJob> = jobs.iter().collect();
    by_submit.sort_by(|a, b| b.submit_s.total_cmp(&a.submit_s));
    // Walk from the latest submission back, accumulating the work submitted at or after T.
    let mut work_after = 0.0;
    let mut best = 0.0_f64;
    for j in by_submit {
        work_after += j.util_work;
        best = best.max(j.submit_s + work_after / cap);
    }
    longest.max(best)
}
