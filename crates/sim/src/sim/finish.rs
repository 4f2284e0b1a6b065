//! The end of a run: the metrics of [`SimResult`] (formulas in docs/SIMULATOR.md).

use super::{GpuBook, Simulator};
use crate::metrics::{
    jct_lower_bound_s, lower_bound_s, mean_jct_s, slowed_over_10_pct, BoundJob, JctBoundJob, JobRecord, SimResult,
    SlowdownBuckets,
};

impl Simulator {
    /// Ends the simulation and computes the metrics (formulas in docs/SIMULATOR.md). Jobs
    /// that did not finish have `None` times and are left out of the slowdown buckets.
    pub fn finish(mut self) -> SimResult {
        if let Some(trace) = self.usage.as_mut() {
            trace.push(self.now_s, 0.0, 0.0);
        }
        let makespan_s =
            if self.done() { self.jobs.iter().filter_map(|j| j.finish_s).fold(0.0, f64::max) } else { self.now_s };
        let (bound_jobs, jct_jobs): (Vec<BoundJob>, Vec<JctBoundJob>) = self
            .jobs
            .iter()
            .map(|j| {
                let (t, submit_s, solo_s) = (j.profile.totals(), j.submit_s, j.profile.solo_s());
                (
                    BoundJob { submit_s, solo_s, util_work: t.util_work },
                    JctBoundJob { submit_s, solo_s, min_mem_mib: t.min_mem_mib, mem_work: t.mem_work },
                )
            })
            .unzip();
        let lower = lower_bound_s(&bound_jobs, self.gpus.len());
        let gpu_mem: Vec<f64> = self.gpus.iter().map(|g| g.spec.memory_mib).collect();
        let n_gpus = self.gpus.len() as f64;
        let avg = |f: fn(&GpuBook) -> f64| {
            if makespan_s > 0.0 {
                self.books.iter().map(f).sum::<f64>() / (n_gpus * makespan_s)
            } else {
                0.0
            }
        };
        let avg_gpu_util_pct = avg(|b| b.util_integral);
        let avg_gpu_mem_util_pct = avg(|b| b.mem_integral);
        let records: Vec<JobRecord> = self
            .jobs
            .iter()
            .map(|j| {
                let solo = j.profile.solo_s();
                let exec = match (j.first_start_s, j.finish_s) {
                    (Some(s), Some(f)) => Some(f - s),
                    _ => None,
                };
                JobRecord {
                    id: j.id,
                    app: j.app.clone(),
                    gpu: j.gpu,
                    submit_s: j.submit_s,
                    start_s: j.first_start_s,
                    last_start_s: j.last_start_s,
                    finish_s: j.finish_s,
                    solo_s: solo,
                    wait_s: j.first_start_s.map(|s| s - j.submit_s),
                    exec_s: exec,
                    exec_slowdown: exec.map(|e| e / solo),
                    jct_slowdown: j.finish_s.map(|f| (f - j.submit_s) / solo),
                    restarts: j.restarts,
                }
            })
            .collect();
        SimResult {
            scheduler: self.policy_name,
            interference: self.interference.name().to_string(),
            makespan_s,
            lower_bound_s: lower,
            makespan_over_bound: if lower > 0.0 { makespan_s / lower } else { 0.0 },
            jct_lower_bound_s: jct_lower_bound_s(&jct_jobs, &gpu_mem),
            mean_jct_s: mean_jct_s(&records),
            slowed_over_10_pct: slowed_over_10_pct(&records),
            avg_gpu_util_pct,
            avg_gpu_mem_util_pct,
            oom_kills: self.oom_kills,
            restarts: records.iter().map(|r| u64::from(r.restarts)).sum(),
            slowdown_buckets: SlowdownBuckets::from_slowdowns(records.iter().filter_map(|r| r.exec_slowdown)),
            completed: self.finished == self.jobs.len(),
            steps: self.steps,
            job_steps: self.job_steps,
            decisions: self.decisions,
            liveness_starts: self.liveness_starts,
            budget_refusals: self.budget_refusals,
            unfit_drops: self.unfit_drops,
            jobs: records,
            events: self.events,
            usage: self.usage,
        }
    }
}
