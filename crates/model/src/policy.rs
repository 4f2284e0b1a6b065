//! The one placement interface the simulator and the service share.
//!
//! A [`Policy`] is pure: it reads a [`ClusterView`] snapshot and returns [`Placement`]s. It
//! never mutates state, never does I/O and never reads the wall clock; the caller (simulator
//! or service placement loop) validates and applies the decision.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::gpu::GpuSpec;
use crate::job::JobId;
use crate::profile::AppProfile;
use crate::resources::Resources;

/// A job running on a GPU.
#[derive(Debug, Clone)]
pub struct RunningJob {
    /// Job id.
    pub id: JobId,
    /// Its app's profile (what it is expected to use over its own progress time).
    pub profile: Arc<AppProfile>,
    /// Progress so far, in the profile's own seconds (0 ..= solo_s).
    pub progress_s: f64,
    /// When it started on this GPU (cluster clock, s).
    pub started_s: f64,
}

impl RunningJob {
    /// Its demand now, per its profile.
    pub fn demand_now(&self) -> &Resources {
        self.profile.demand_at(self.progress_s)
    }

    /// Profile seconds left.
    pub fn remaining_s(&self) -> f64 {
        (self.profile.solo_s() - self.progress_s).max(0.0)
    }
}

/// A GPU, its capacity and what runs on it.
#[derive(Debug, Clone)]
pub struct GpuState {
    /// Node name.
    pub node: String,
    /// Index within the node.
    pub index: u32,
    /// Model and capacity.
    pub spec: GpuSpec,
    /// Jobs placed on it.
    pub running: Vec<RunningJob>,
    /// Usage measured by a monitor, when one runs (the service); `None` in the simulator.
    pub measured: Option<Resources>,
}

impl GpuState {
    /// Sum of the running jobs' current profile demands.
    pub fn demand_now(&self) -> Resources {
        self.running.iter().fold(Resources::ZERO, |acc, j| acc.add(j.demand_now()))
    }

    /// Sum of the running jobs' peak demands over the rest of their profiles (conservative).
    pub fn remaining_peak_sum(&self) -> Resources {
        self.running
            .iter()
            .fold(Resources::ZERO, |acc, j| acc.add(&j.profile.peak_from(j.profile.sample_index(j.progress_s))))
    }

    /// True when nothing runs on it.
    pub fn is_idle(&self) -> bool {
        self.running.is_empty()
    }
}

/// A job waiting to be placed.
#[derive(Debug, Clone)]
pub struct QueuedJob {
    /// Job id.
    pub id: JobId,
    /// App name.
    pub app: String,
    /// Its profile.
    pub profile: Arc<AppProfile>,
    /// Submission time (cluster clock, s).
    pub submit_s: f64,
    /// How many times it was restarted (OOM kills, failures).
    pub restarts: u32,
    /// Names (`AppInfo::name`) of the apps it was killed for lack of memory beside; do not
    /// co-place it with them again.
    pub avoid_apps: Vec<String>,
}

/// A snapshot of the cluster for a decision.
#[derive(Debug, Clone, Copy)]
pub struct ClusterView<'a> {
    /// Cluster clock, s.
    pub now_s: f64,
    /// All GPUs.
    pub gpus: &'a [GpuState],
    /// Waiting jobs, in arrival order.
    pub queue: &'a [QueuedJob],
}

/// Start `jobs` together on GPU `gpu` (an index into [`ClusterView::gpus`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// GPU index in the view.
    pub gpu: usize,
    /// Jobs to start there now, beside whatever already runs there.
    pub jobs: Vec<JobId>,
}

/// A placement policy. Implementations must be deterministic functions of the view (and of
/// their own immutable configuration, including any seed), so the same inputs replay.
pub trait Policy: Send + Sync {
    /// Name, as the CLI spells it.
    fn name(&self) -> &str;

    /// The groups of waiting jobs to start now; empty to wait. Each job at most once.
    fn decide(&self, view: &ClusterView<'_>) -> Vec<Placement>;

    /// True when decisions follow the running jobs' current demands and progress (not only
    /// events and their remaining peaks), so the policy wants to be asked at every decision
    /// tick while jobs wait. Peak-based heuristics would decide the same, so they say no and
    /// the simulator asks them less often.
    fn wants_every_tick(&self) -> bool {
        false
    }
}

/// A decision the caller must refuse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecisionError {
    /// The GPU index is out of range.
    #[error("policy `{policy}` chose GPU {gpu}, but the cluster has {count}")]
    NoSuchGpu {
        /// Policy name.
        policy: String,
        /// Index chosen.
        gpu: usize,
        /// GPUs in the view.
        count: usize,
    },
    /// The job is not waiting.
    #[error("policy `{policy}` placed job {job}, which is not waiting")]
    NotWaiting {
        /// Policy name.
        policy: String,
        /// Job.
        job: JobId,
    },
    /// The job was placed twice.
    #[error("policy `{policy}` placed job {job} twice")]
    Duplicate {
        /// Policy name.
        policy: String,
        /// Job.
        job: JobId,
    },
}

/// Checks a decision against the view: GPUs exist, each job is waiting and placed once.
pub fn validate_decision(policy: &str, view: &ClusterView<'_>, decision: &[Placement]) -> Result<(), DecisionError> {
    let mut seen = std::collections::HashSet::new();
    for p in decision {
        if p.gpu >= view.gpus.len() {
            return Err(DecisionError::NoSuchGpu { policy: policy.into(), gpu: p.gpu, count: view.gpus.len() });
        }
        for &j in &p.jobs {
            if !view.queue.iter().any(|q| q.id == j) {
                return Err(DecisionError::NotWaiting { policy: policy.into(), job: j });
            }
            if !seen.insert(j) {
                return Err(DecisionError::Duplicate { policy: policy.into(), job: j });
            }
        }
    }
    Ok(())
}
