//! Lucid's packing rule (Hu et al., "Lucid: A Non-intrusive, Scalable and Interpretable
//! Scheduler for Deep Learning Training Jobs", ASPLOS'23; S-Lab-System-Group/Lucid,
//! `simulation/policy/lucid.py`, `Lucid.simulate` and `job_pair_picker_time_aware`).
//!
//! As Lucid does it, per decision:
//! - the queue is ordered by priority, the estimated duration (here the profile's solo time;
//!   Lucid multiplies by the job's GPU count, 1 here);
//! - each app has a sharing score 0/1/2 from its solo GPU utilisation: below
//!   [`TINY_BELOW_PCT`] is 0, below [`MEDIUM_BELOW_PCT`] is 1, else 2. Lucid's `sharescore`
//!   is a hand label per model (`analyzer/single_data.csv`), which our apps lack; this rule
//!   agrees with those labels on 48 of 66 and does better with them in our simulator
//!   (docs/BASELINES.md);
//! - when sharing is on, each job in order first looks for a partner: a job that runs alone
//!   on its GPU, whose memory leaves room for this job's, whose score summed with this job's
//!   is at most 2, and that this job is not more than twice as long as (`job.priority <=
//!   j.priority * 2`); the first such partner in start order wins, so a GPU holds at most two
//!   jobs. Without a partner the job takes a free GPU alone;
//! - Prescient Adaptive Sharing turns sharing off when the cluster will be quiet (Lucid asks
//!   a throughput forecast whether more than 2 jobs will arrive soon, on its Venus cluster
//!   only; elsewhere it always shares). Here the queue is the
//!   forecast: sharing is on only while more jobs wait than there are idle GPUs, that is
//!   when a job would otherwise queue; otherwise each job gets its own GPU.
//!
//! Memory is checked with peaks (the resident's remaining peak plus the newcomer's peak),
//! Lucid's `gmem` being each job's profiled peak.

use std::sync::Arc;

use dqngpu_model::{Admission, ClusterView, Placement, Policy, QueuedJob};

use crate::fit;

/// Mean solo GPU util (%) below which an app's sharing score is 0 (tiny).
pub const TINY_BELOW_PCT: f64 = 40.0;
/// Mean solo GPU util (%) below which an app's sharing score is 1 (medium); else 2 (jumbo).
pub const MEDIUM_BELOW_PCT: f64 = 70.0;

/// The Lucid packing heuristic.
#[derive(Debug, Clone, Default)]
pub struct Lucid {
    /// The caller's slowdown budget, when it set one: a pair it refuses is not made.
    admission: Option<Arc<dyn Admission>>,
}

impl Lucid {
    /// Lucid pairing only where `admission` (the caller's budget) admits the pair.
    pub fn within(admission: Option<Arc<dyn Admission>>) -> Self {
        Lucid { admission }
    }
}

/// Lucid's sharing score of a profile: 0, 1 or 2 by its mean solo GPU util.
pub fn share_score(profile: &dqngpu_model::AppProfile) -> u8 {
    let util = profile.summary().mean.gpu_util_pct;
    if util < TINY_BELOW_PCT {
        0
    } else if util < MEDIUM_BELOW_PCT {
        1
    } else {
        2
    }
}

/// A job that runs alone on a GPU, as a partner candidate.
struct Alone<'a> {
    gpu: usize,
    started_s: f64,
    solo_s: f64,
    score: u8,
    app: &'a str,
    avoid: &'a [String],
    /// Its remaining peak memory, MiB.
    mem_mib: f64,
}

impl Policy for Lucid {
    fn name(&self) -> &str {
        "lucid"
    }

    /// Told a budget, at every tick ([`Policy::wants_every_tick`] says why).
    fn wants_every_tick(&self) -> bool {
        self.admission.is_some()
    }

    fn decide(&self, view: &ClusterView<'_>) -> Vec<Placement> {
        let mut queue: Vec<&QueuedJob> = view.queue.iter().collect();
        queue.sort_by(|a, b| fit::shortest_first(a, b));
        let idle = view.gpus.iter().filter(|g| g.is_idle()).count();
        let sharing = queue.len() > idle;
        // Jobs alone on their GPU, in start order (Lucid's `run_list` order).
        let mut alone: Vec<Alone<'_>> = view
            .gpus
            .iter()
            .enumerate()
            .filter(|(_, g)| g.running.len() == 1)
            .map(|(g, gpu)| {
                let r = &gpu.running[0];
                Alone {
                    gpu: g,
                    started_s: r.started_s,
                    solo_s: r.profile.solo_s(),
                    score: share_score(&r.profile),
                    app: &r.profile.app.name,
                    avoid: &[],
                    mem_mib: fit::committed(gpu).gpu_mem_mib,
                }
            })
            .collect();
        alone.sort_by(|a, b| a.started_s.total_cmp(&b.started_s).then(a.gpu.cmp(&b.gpu)));
        let mut free: Vec<bool> = view.gpus.iter().map(|g| g.is_idle()).collect();
        let mut chosen: Vec<Vec<&QueuedJob>> = vec![Vec::new(); view.gpus.len()];
        let mut admitter = fit::Admitter::new(self.admission.as_deref());
        for job in queue {
            let mem = fit::job_peak(job).gpu_mem_mib;
            let score = share_score(&job.profile);
            let partner = sharing
                .then(|| {
                    alone.iter().position(|j| {
                        let cap = view.gpus[j.gpu].spec.memory_mib;
                        j.mem_mib + mem <= cap + 1e-9
                            && score + j.score <= 2
                            && job.profile.solo_s() <= 2.0 * j.solo_s
                            && !job.avoid_apps.iter().any(|a| a == j.app)
                            && !j.avoid.iter().any(|a| *a == job.profile.app.name)
                            && admitter.admits(view, j.gpu, &chosen[j.gpu], job)
                    })
                })
                .flatten();
            if let Some(k) = partner {
                let j = alone.remove(k);
                chosen[j.gpu].push(job);
                continue;
            }
            // Lucid's `job_placer`: a free GPU, the lowest-index one (Lucid consolidates onto the
            // fullest node; with one GPU per job and per-GPU interference that is the same), if
            // its memory holds the job.
            let Some(g) = (0..view.gpus.len()).find(|&g| free[g] && mem <= view.gpus[g].spec.memory_mib + 1e-9) else {
                continue;
            };
            free[g] = false;
            chosen[g].push(job);
            alone.push(Alone {
                gpu: g,
                started_s: view.now_s,
                solo_s: job.profile.solo_s(),
                score,
                app: &job.profile.app.name,
                avoid: &job.avoid_apps,
                mem_mib: mem,
            });
        }
        fit::placements(chosen)
    }
}
