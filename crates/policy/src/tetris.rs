//! Tetris (Grandl, Ananthanarayanan, Kandula, Rao, Akella, "Multi-Resource Packing for
//! Cluster Schedulers", SIGCOMM'14), with time-varying demands.
//!
//! Tetris places, on a machine with free resources, the task with the highest score
//! `a - ε p`, and repeats while tasks fit (§3):
//! - alignment `a`: the dot product of the task's demand vector with the machine's free
//!   resources, both normalised by the machine's capacity (§3.1). Our jobs' demands change
//!   over their profiles, so `a` is the mean over the job's profile of that dot product
//!   against the free capacity the residents leave at the same moment (everyone projected
//!   at rate 1, in windows of [`WINDOW_S`] seconds, each window at its peak);
//! - remaining work `p` (§3.2, shortest remaining time first generalised to many resources):
//!   the job's duration times the sum of its normalised mean demands; smaller is better, so
//!   the term enters as `-p`;
//! - `ε = m ā / p̄` (§3.3), with ā and p̄ the mean alignment and remaining work of the jobs
//!   that fit, so both terms weigh alike whatever their units, and `m` the knob ([`KNOB`] by
//!   default; 0 is pure packing).
//!
//! A job fits when, in every window of its profile, its demand plus the residents' stays
//! within the card in GPU util, SM and PCIe (Tetris never over-allocates a resource), and
//! its peak memory plus the residents' remaining peaks fits the memory (a hard limit that
//! phase drift under interference must not break). Jobs never join an app they were
//! OOM-killed beside. Ties go to the earlier arrival.

use std::sync::Arc;

use dqngpu_model::{Admission, AppProfile, ClusterView, Placement, Policy, QueuedJob, Resources};

use crate::fit;

/// Window of profile time over which demands are taken at their peak, s.
pub const WINDOW_S: f64 = 10.0;

/// Default weight `m` of the remaining-work term: 1, where both terms weigh alike. Swept on
/// training seeds 0..9 over the experiment's settings (`tetris_knob` example of
/// `dqngpu-sim`, docs/BASELINES.md): against the former 0.5, m = 1 has 6.3% lower mean JCT
/// (geometric mean over 20 (setting, class) pairs) at 0.7% higher makespan; m = 2 0.3% lower
/// JCT again, at 0.5% more makespan; m = 0 (packing alone) 34% higher JCT.
pub const KNOB: f64 = 1.0;

/// The Tetris packing heuristic.
#[derive(Debug, Clone)]
pub struct Tetris {
    knob: f64,
    /// The caller's slowdown budget, when it set one: a job it refuses on a GPU does not fit
    /// there.
    admission: Option<Arc<dyn Admission>>,
}

impl Default for Tetris {
    fn default() -> Self {
        Tetris { knob: KNOB, admission: None }
    }
}

impl Tetris {
    /// Tetris with remaining-work weight `m` (0: packing only).
    pub fn with_knob(knob: f64) -> Self {
        Tetris { knob: if knob.is_finite() { knob.max(0.0) } else { KNOB }, admission: None }
    }

    /// This Tetris choosing only among the jobs `admission` (the caller's budget) admits.
    pub fn within(self, admission: Option<Arc<dyn Admission>>) -> Self {
        Tetris { admission, ..self }
    }
}

/// The demand already placed on a GPU, window by window (rate-1 projection).
fn add_windows(acc: &mut Vec<Resources>, job: &[Resources]) {
    if acc.len() < job.len() {
        acc.resize(job.len(), Resources::ZERO);
    }
    for (a, j) in acc.iter_mut().zip(job) {
        *a = a.add(j);
    }
}

impl Policy for Tetris {
    fn name(&self) -> &str {
        "tetris"
    }

    /// Told a budget, asked at every tick: what the budget admits changes as the residents
    /// progress. Without one, asked when resources free up (a remaining peak drops), as Tetris
    /// is invoked when a machine frees resources (§3); asking it every tick as well would make
    /// the runs `dqngpu-plan` weighs as Tetris's differ from Tetris's own (docs/BASELINES.md).
    fn wants_every_tick(&self) -> bool {
        self.admission.is_some()
    }

    fn decide(&self, view: &ClusterView<'_>) -> Vec<Placement> {
        if view.queue.is_empty() {
            return Vec::new();
        }
        // Jobs of one profile share its windows (a queue holds many jobs of few apps):
        // `windows[row_of[i]]` are job i's.
        let (mut windows, mut row_of): (Vec<(&AppProfile, Vec<Resources>)>, Vec<usize>) = (Vec::new(), Vec::new());
        for q in view.queue {
            let k = windows.iter().position(|(p, _)| std::ptr::eq(*p, &*q.profile)).unwrap_or_else(|| {
                windows.push((&q.profile, fit::windows(&q.profile, 0.0, WINDOW_S)));
                windows.len() - 1
            });
            row_of.push(k);
        }
        let rows: Vec<&[Resources]> = row_of.iter().map(|&k| windows[k].1.as_slice()).collect();
        let peaks: Vec<_> = view.queue.iter().map(fit::job_peak).collect();
        let means: Vec<Resources> = view.queue.iter().map(|q| q.profile.summary().mean).collect();
        let mut taken = vec![false; view.queue.len()];
        let mut out = Vec::new();
        let mut admitter = fit::Admitter::new(self.admission.as_deref());
        for (g, gpu) in view.gpus.iter().enumerate() {
            let cap = gpu.spec.capacity();
            let mut mem_load = fit::committed(gpu).gpu_mem_mib;
            let mut used: Vec<Resources> = Vec::new();
            for r in &gpu.running {
                add_windows(&mut used, &fit::windows(&r.profile, r.progress_s, WINDOW_S));
            }
            let mut chosen: Vec<&QueuedJob> = Vec::new();
            loop {
                // (job, alignment, remaining work) of every job that fits.
                let mut fits: Vec<(usize, f64, f64)> = Vec::new();
                for (i, job) in view.queue.iter().enumerate() {
                    if taken[i]
                        || mem_load + peaks[i].gpu_mem_mib > cap.gpu_mem_mib + 1e-9
                        || !fit::compatible(job, gpu, &chosen)
                    {
                        continue;
                    }
                    let mut align = 0.0;
                    let mut ok = true;
                    for (k, d) in rows[i].iter().enumerate() {
                        let u = used.get(k).copied().unwrap_or(Resources::ZERO);
                        let after = u.add(d);
                        if after.gpu_util_pct > cap.gpu_util_pct + 1e-9
                            || after.sm_pct > cap.sm_pct + 1e-9
                            || after.pcie_mbps > cap.pcie_mbps + 1e-9
                        {
                            ok = false;
                            break;
                        }
                        let free = cap.sub(&u).normalised(&cap);
                        let dn = d.normalised(&cap);
                        align += free.iter().zip(dn.iter()).map(|(f, d)| f.max(0.0) * d).sum::<f64>();
                    }
                    if !ok {
                        continue;
                    }
                    let align = align / rows[i].len().max(1) as f64;
                    let mean = means[i].normalised(&cap);
                    let work = job.profile.solo_s() * mean.iter().sum::<f64>();
                    fits.push((i, align, work));
                }
                // The best-scoring job; under a budget, one it refuses does not fit, and the
                // scores are taken again over the rest (checked only as far as needed).
                let picked = loop {
                    if fits.is_empty() {
                        break None;
                    }
                    let n = fits.len() as f64;
                    let a_bar = fits.iter().map(|f| f.1).sum::<f64>() / n;
                    let p_bar = fits.iter().map(|f| f.2).sum::<f64>() / n;
                    let eps = if p_bar > 0.0 { self.knob * a_bar / p_bar } else { 0.0 };
                    let mut best: Option<(usize, f64)> = None;
                    for (k, &(_, a, p)) in fits.iter().enumerate() {
                        let score = a - eps * p;
                        if best.is_none_or(|(_, s)| score > s + 1e-12) {
                            best = Some((k, score));
                        }
                    }
                    let Some((k, _)) = best else { break None };
                    let i = fits[k].0;
                    if admitter.admits(view, g, &chosen, &view.queue[i]) {
                        break Some(i);
                    }
                    fits.remove(k);
                };
                let Some(i) = picked else { break };
                taken[i] = true;
                mem_load += peaks[i].gpu_mem_mib;
                add_windows(&mut used, rows[i]);
                chosen.push(&view.queue[i]);
            }
            if !chosen.is_empty() {
                out.push(Placement { gpu: g, jobs: chosen.iter().map(|j| j.id).collect() });
            }
        }
        out
    }
}
