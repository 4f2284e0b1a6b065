//! The event log: what happened, when, as JSON lines. Recorded only when asked for
//! ([`crate::SimConfig::record_events`]), so the hot loop pays nothing otherwise.

use dqngpu_model::JobId;
use serde::{Deserialize, Serialize};

/// One job's share of a GPU's memory in a [`SimEvent::Memory`] record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobMemory {
    /// The job.
    pub job: JobId,
    /// Its progress, profile seconds (its memory is its profile's sample at this point).
    pub progress_s: f64,
    /// Its memory demand, MiB.
    pub mem_mib: f64,
}

/// Something that happened in a simulation. `t_s` is the cluster clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum SimEvent {
    /// A job was submitted and joined the queue.
    Arrival {
        /// Time, s.
        t_s: f64,
        /// The job.
        job: JobId,
        /// Its app.
        app: String,
    },
    /// A job started on a GPU (index into the cluster's GPUs, node by node).
    Start {
        /// Time, s.
        t_s: f64,
        /// The job.
        job: JobId,
        /// Its app.
        app: String,
        /// GPU index.
        gpu: usize,
    },
    /// The policy held while this GPU was idle and this job fitted it, so the simulator
    /// started the job itself (the liveness rule); a `Start` event follows.
    Liveness {
        /// Time, s.
        t_s: f64,
        /// The job.
        job: JobId,
        /// Its app.
        app: String,
        /// GPU index.
        gpu: usize,
    },
    /// The slowdown budget refused a group the policy placed: predicted to slow a job on the
    /// GPU past the budget, its jobs wait (counted in `budget_refusals`).
    Refused {
        /// Time, s.
        t_s: f64,
        /// GPU index.
        gpu: usize,
        /// The group's jobs.
        jobs: Vec<JobId>,
    },
    /// A group the policy placed was dropped: one of its jobs alone needs more memory at its
    /// peak than the GPU has (counted in `unfit_drops`).
    Unfit {
        /// Time, s.
        t_s: f64,
        /// GPU index.
        gpu: usize,
        /// The group's jobs.
        jobs: Vec<JobId>,
    },
    /// A job was killed for lack of GPU memory; it lost its progress and went back to the queue.
    Oom {
        /// Time, s.
        t_s: f64,
        /// The job.
        job: JobId,
        /// Its app.
        app: String,
        /// GPU index.
        gpu: usize,
        /// Memory the GPU's jobs asked for when it was killed, MiB.
        demand_mib: f64,
        /// The GPU's memory, MiB.
        capacity_mib: f64,
    },
    /// A job finished.
    Finish {
        /// Time, s (interpolated within the step).
        t_s: f64,
        /// The job.
        job: JobId,
        /// Its app.
        app: String,
        /// GPU index.
        gpu: usize,
    },
    /// A GPU's memory in use, written whenever it changes (placement, finish, kill, or a
    /// running job's profile moving to a sample with another memory value).
    Memory {
        /// Time, s.
        t_s: f64,
        /// GPU index.
        gpu: usize,
        /// Memory in use, MiB (the sum of `jobs`).
        used_mib: f64,
        /// The GPU's memory, MiB.
        capacity_mib: f64,
        /// The jobs holding it.
        jobs: Vec<JobMemory>,
    },
}

impl SimEvent {
    /// The event's time, s.
    pub fn t_s(&self) -> f64 {
        match self {
            SimEvent::Arrival { t_s, .. }
            | SimEvent::Start { t_s, .. }
            | SimEvent::Liveness { t_s, .. }
            | SimEvent::Refused { t_s, .. }
            | SimEvent::Unfit { t_s, .. }
            | SimEvent::Oom { t_s, .. }
            | SimEvent::Finish { t_s, .. }
            | SimEvent::Memory { t_s, .. } => *t_s,
        }
    }
}
