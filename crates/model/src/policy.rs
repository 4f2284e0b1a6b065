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

/// A placement policy. Implementations must be deterministic functions of the views they
/// are shown, in order (and of their own configuration, including any seed), so the same
/// inputs replay. Most decide from the view alone; `dqngpu-plan` also keeps the future it
/// chose until the jobs or the clock show that another run or an arrival began (a fresh
/// instance, or a clone, per run).
pub trait Policy: Send + Sync {
    /// Name, as the CLI spells it.
    fn name(&self) -> &str;

    /// The groups of waiting jobs to start now; empty to wait. Each job at most once.
    fn decide(&self, view: &ClusterView<'_>) -> Vec<Placement>;

    /// True when decisions follow the running jobs' current demands and progress (not only
    /// events and their remaining peaks), so the policy wants to be asked at every decision
    /// tick while jobs wait (the thesis's agents; every sharing rule and `dqngpu` when told a
    /// slowdown budget, whose answer changes as the residents progress). Others are asked at
    /// events and when a remaining peak drops, when resources free up.
    fn wants_every_tick(&self) -> bool {
        false
    }
}

/// The caller's slowdown budget as a rule sees it: whether a group may start on a GPU beside
/// its residents. The simulator and the service refuse any group their budget does not admit
/// (`dqngpu_sim::budget`); a rule that knows the budget chooses among the groups it admits, as
/// it chooses among those whose memory fits, instead of proposing one that is then dropped.
pub trait Admission: Send + Sync + std::fmt::Debug {
    /// True when the waiting jobs `jobs` of `view` (by id) may start together on GPU `gpu`,
    /// beside the jobs running there. A waiting job counts only through its app and profile:
    /// two of the same app and profile are admitted alike (rules remember answers by them).
    fn admits(&self, view: &ClusterView<'_>, gpu: usize, jobs: &[JobId]) -> bool;
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

/// The liveness rule every caller applies after a policy's decision (the simulator's
/// `apply`, the service's placement loop): a job that fits an idle GPU never waits for ever.
///
/// When `decision` places nothing while some GPU runs nothing and a waiting job's peak memory
/// fits that GPU, the caller starts one job itself: the oldest waiting job (queue order, which
/// is arrival order) that fits some idle GPU, on the idle GPU where it fits tightest (least
/// memory left over; ties to the lower index). Returns that placement, or `None` when the
/// decision stands (it places something, no GPU is idle, or nothing waiting fits an idle GPU).
///
/// ```
/// # use dqngpu_model::{liveness_start, ClusterView};
/// let view = ClusterView { now_s: 0.0, gpus: &[], queue: &[] };
/// assert_eq!(liveness_start(&view, &[]), None);
/// ```
pub fn liveness_start(view: &ClusterView<'_>, decision: &[Placement]) -> Option<Placement> {
    if decision.iter().any(|p| !p.jobs.is_empty()) {
        return None;
    }
    let idle: Vec<usize> = (0..view.gpus.len()).filter(|&g| view.gpus[g].is_idle()).collect();
    if idle.is_empty() {
        return None;
    }
    view.queue.iter().find_map(|job| {
        let need = job.profile.peak_from(0).gpu_mem_mib;
        idle.iter()
            .copied()
            .filter(|&g| need <= view.gpus[g].spec.memory_mib + 1e-9)
            .min_by(|&a, &b| view.gpus[a].spec.memory_mib.total_cmp(&view.gpus[b].spec.memory_mib).then(a.cmp(&b)))
            .map(|g| Placement { gpu: g, jobs: vec![job.id] })
    })
}

/// True when every waiting job of `p` alone fits its GPU's memory at its peak (it starts from
/// the beginning of its profile). A group that fails this can only be killed out of memory,
/// for ever: the callers (the simulator, the service) drop it, as they apply the liveness
/// rule, whatever the policy.
pub fn fits_alone(view: &ClusterView<'_>, p: &Placement) -> bool {
    let Some(gpu) = view.gpus.get(p.gpu) else { return true };
    p.jobs.iter().all(|id| {
        view.queue
            .iter()
            .find(|q| q.id == *id)
            .is_none_or(|q| q.profile.peak_from(0).gpu_mem_mib <= gpu.spec.memory_mib)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{gpu, AppInfo};

    fn job(id: JobId, mem: f64) -> QueuedJob {
        let info = AppInfo { name: format!("a{id}"), ..Default::default() };
        let p = AppProfile::new(info, 1.0, vec![Resources::new(50.0, mem, 50.0, 0.0); 10]).unwrap();
        QueuedJob {
            id,
            app: format!("a{id}"),
            profile: Arc::new(p),
            submit_s: id as f64,
            restarts: 0,
            avoid_apps: vec![],
        }
    }

    fn gpu_state(model: &str, running: Vec<RunningJob>) -> GpuState {
        GpuState { node: "n".into(), index: 0, spec: gpu::lookup(model).unwrap(), running, measured: None }
    }

    #[test]
    fn liveness_starts_the_oldest_job_that_fits_an_idle_gpu() {
        let busy = RunningJob { id: 9, profile: job(9, 100.0).profile, progress_s: 0.0, started_s: 0.0 };
        // GPU 0 is busy; GPUs 1 (24 GiB) and 2 (12 GiB) are idle.
        let gpus = vec![gpu_state("titanxp", vec![busy]), gpu_state("rtx3090", vec![]), gpu_state("titanxp", vec![])];
        // Job 1 fits neither idle GPU's... it needs 20 GiB: only the 3090.
        let queue = vec![job(1, 20_000.0), job(2, 1000.0)];
        let view = ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue };
        assert_eq!(liveness_start(&view, &[]), Some(Placement { gpu: 1, jobs: vec![1] }));
        // A small job goes to the tightest idle GPU.
        let queue = vec![job(2, 1000.0)];
        let view = ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue };
        assert_eq!(liveness_start(&view, &[]), Some(Placement { gpu: 2, jobs: vec![2] }));
        // A decision that places something stands, and so does an empty one on a busy cluster.
        assert_eq!(liveness_start(&view, &[Placement { gpu: 0, jobs: vec![2] }]), None);
        let busy_only = &gpus[..1];
        let view = ClusterView { now_s: 0.0, gpus: busy_only, queue: &queue };
        assert_eq!(liveness_start(&view, &[]), None);
        // An empty placement list entry still counts as placing nothing.
        let view = ClusterView { now_s: 0.0, gpus: &gpus, queue: &queue };
        assert_eq!(
            liveness_start(&view, &[Placement { gpu: 0, jobs: vec![] }]),
            Some(Placement { gpu: 2, jobs: vec![2] })
        );
    }
}
