//! The slowdown budget: before a group of jobs starts on a GPU, predict how much slower than
//! alone every job there would finish, and how much memory they would hold at each moment, if
//! nothing else joined them; a group that would push any job past the budget, or the memory
//! past the card, is not started.
//!
//! The prediction is a small simulation of that GPU alone with the simulator's own stepping
//! rule ([`LoneGpu`]), so in the simulator, under the same interference model, it is exact for
//! the jobs placed so far. Jobs placed later on the same GPU are checked again then, against
//! the time the residents have already lost, so no job ends past the budget unless the model
//! is wrong. The caller that applies decisions (the simulator's `apply`) uses it for every
//! policy; DqnGPU's guard (crates/rl) uses it as an action mask.

use std::sync::Arc;

use dqngpu_interference::Interference;
use dqngpu_model::{Admission, AppProfile, ClusterView, GpuSpec, GpuState, JobId, Placement, QueuedJob};

use crate::step::{LoneGpu, LoneJob, RATE_FLOOR};

/// Safety margin of [`within_budget`], in steps of wall time per job: the prediction takes
/// whole steps from the decision, while the simulator's steps are also cut by arrivals and by
/// finishes on other GPUs, so demands are sampled at other progress points and spiky profiles
/// overlap a little differently. Seen against a 10% budget without a margin: 1.1002 with
/// Poisson arrivals, 1.1075 for an 8 s job beside another under `random` on two GPUs (0.14 s
/// more lost than predicted). So each job may lose at most `budget x solo - margin x step`;
/// the test `a_slowdown_budget_holds_for_every_policy` checks the outcome, not the prediction.
pub const BUDGET_MARGIN_STEPS: f64 = 0.5;

/// A job as the prediction sees it.
#[derive(Debug, Clone, Copy)]
pub struct BudgetJob<'a> {
    /// App name (for the interference model).
    pub app: &'a str,
    /// Its profile.
    pub profile: &'a AppProfile,
    /// Progress, s of solo time.
    pub progress_s: f64,
    /// Wall time already lost to sharing on this run, s.
    pub lost_s: f64,
}

impl<'a> BudgetJob<'a> {
    /// A waiting job as it would start: no progress, nothing lost.
    pub fn starting(q: &'a QueuedJob) -> Self {
        BudgetJob { app: &q.app, profile: &q.profile, progress_s: 0.0, lost_s: 0.0 }
    }
}

/// The jobs running on `gpu` at `now_s`, with the wall time each has lost to sharing so far.
pub fn resident_jobs(now_s: f64, gpu: &GpuState) -> Vec<BudgetJob<'_>> {
    gpu.running
        .iter()
        .map(|r| BudgetJob {
            app: &r.profile.app.name,
            profile: &r.profile,
            progress_s: r.progress_s,
            lost_s: (now_s - r.started_s - r.progress_s).max(0.0),
        })
        .collect()
}

/// What is predicted for a set of jobs on one GPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prediction {
    /// The largest predicted execution slowdown over the jobs, as a fraction (0.05 = 5%).
    /// When the prediction stopped early (a job past the limit, memory over), at least that.
    pub worst_slowdown: f64,
    /// Memory would exceed the card at some moment.
    pub memory_over: bool,
    /// Every job stays within the limit and memory fits.
    pub admitted: bool,
}

/// `jobs` on `gpu` as a [`LoneGpu`], and the most steps they can take: rates never fall below
/// [`RATE_FLOOR`], so every job finishes within that many.
fn stepper<'a>(
    gpu: &'a GpuSpec,
    model: &'a dyn Interference,
    jobs: &[BudgetJob<'a>],
    step_s: f64,
) -> (LoneGpu<'a>, usize) {
    let lone =
        jobs.iter().map(|j| LoneJob { app: j.app, profile: j.profile, progress_s: j.progress_s.max(0.0), rate: None });
    let longest = jobs.iter().map(|j| j.profile.solo_s()).fold(0.0, f64::max);
    let max_steps = (longest / RATE_FLOOR / step_s).ceil() as usize + jobs.len() + 1;
    (LoneGpu::new(gpu, model, lone.collect()), max_steps)
}

/// Predicts `jobs` running together on `gpu` under `model` until all finish, stopping early
/// once one loses more than `max_slowdown` (a fraction) of its solo time less `slack_s`, or
/// memory passes the card. It steps as the simulator does: the demands at a step's start hold
/// for the whole step of `step_s` wall seconds, which ends early when a job finishes.
pub fn predict(
    gpu: &GpuSpec,
    model: &dyn Interference,
    jobs: &[BudgetJob<'_>],
    max_slowdown: f64,
    slack_s: f64,
    step_s: f64,
) -> Prediction {
    let mut lost: Vec<f64> = jobs.iter().map(|j| j.lost_s.max(0.0)).collect();
    let mut worst: f64 = 0.0;
    for (j, l) in jobs.iter().zip(&lost) {
        worst = worst.max(l / j.profile.solo_s());
    }
    let refuse = |worst: f64, memory_over: bool| Prediction { worst_slowdown: worst, memory_over, admitted: false };
    let (mut on_gpu, max_steps) = stepper(gpu, model, jobs, step_s);
    // A steady stretch: per job, the progress below which the last whole step's demand (so
    // its rate, and the memory checked) still holds and it cannot finish within a step. While
    // every job is below, a step needs no model, no memory check and no division. Empty: not
    // in one (no whole step yet, or a demand changed).
    let mut steady: Vec<f64> = Vec::with_capacity(jobs.len());
    // Each job's progress at the start of the last step (where its demand was read): the
    // stretch's bounds are worked out after a whole step only. (Working them out before every
    // step, dropping the buffer, measured 20% slower on Lucid's pairs: `--bench budget`.)
    let mut before: Vec<f64> = Vec::with_capacity(jobs.len());
    for _ in 0..max_steps {
        if !steady.is_empty() {
            if steady_step(&mut on_gpu, jobs, &mut lost, max_slowdown, slack_s, step_s) {
                return refuse(worst_so_far(worst, jobs, &lost), false);
            }
            if within_stretch(&on_gpu, &steady) {
                continue;
            }
            // Leaving the stretch: the losses only grew, so the worst is at its end.
            worst = worst_so_far(worst, jobs, &lost);
            steady.clear();
        }
        // One pass: how many jobs are left (and the last of them), and the memory they hold
        // now, summed in job order.
        let (mut left, mut last, mut now) = (0, 0, 0.0);
        for (k, j) in on_gpu.jobs.iter().enumerate().filter(|(_, j)| !j.done()) {
            (left, last) = (left + 1, k);
            now += j.profile.demand_at(j.progress_s).gpu_mem_mib;
        }
        if left == 0 {
            return Prediction { worst_slowdown: worst, memory_over: false, admitted: true };
        }
        if now > gpu.memory_mib + 1e-9 {
            return refuse(worst, true);
        }
        if left == 1 && alone_at_full_speed(&on_gpu.jobs[last], gpu, model) {
            // Nothing changes any more but its progress: it loses no more time and its memory
            // stays within the card, so the outcome is what the next step would check.
            let (l, solo) = (lost[last], jobs[last].profile.solo_s());
            return if l > max_slowdown * solo - slack_s + 1e-9 {
                refuse(worst, false)
            } else {
                Prediction { worst_slowdown: worst, memory_over: false, admitted: true }
            };
        }
        before.clear();
        before.extend(on_gpu.jobs.iter().map(|j| j.progress_s));
        let dt = on_gpu.step(step_s);
        for ((j, l), lone) in jobs.iter().zip(lost.iter_mut()).zip(&on_gpu.jobs) {
            let Some(rate) = lone.rate else { continue };
            let solo = j.profile.solo_s();
            *l += dt * (1.0 - rate);
            worst = worst.max(*l / solo);
            if *l > max_slowdown * solo - slack_s + 1e-9 {
                return refuse(worst, false);
            }
        }
        if dt == step_s {
            // The demand this step ran at was the sample at its start; a job more than two
            // steps from its end cannot finish within one (its rate is at most 1).
            steady.extend(on_gpu.jobs.iter().zip(&before).map(|(j, &start)| {
                let profile = j.profile;
                profile.demand_held_below(profile.sample_index(start)).min(profile.solo_s() - 2.0 * step_s)
            }));
            if !within_stretch(&on_gpu, &steady) {
                steady.clear();
            }
        }
    }
    // Unreachable (rates are at least RATE_FLOOR); stay safe.
    refuse(worst_so_far(worst, jobs, &lost), false)
}

/// True when every job still running is below its bound of the steady stretch `steady`.
fn within_stretch(on_gpu: &LoneGpu<'_>, steady: &[f64]) -> bool {
    on_gpu.jobs.iter().zip(steady).all(|(j, &below)| j.rate.is_none() || j.progress_s < below)
}

/// The largest loss so far of any job, as a fraction of its solo time (`worst`: the largest
/// before; losses never shrink, so their current values are their largest).
fn worst_so_far(worst: f64, jobs: &[BudgetJob<'_>], lost: &[f64]) -> f64 {
    jobs.iter().zip(lost).fold(worst, |w, (j, l)| w.max(l / j.profile.solo_s()))
}

/// One step of `on_gpu` within a steady stretch (see [`predict`]), as [`LoneGpu::step`] and
/// [`predict`] would take it, with the same arithmetic: the jobs' demands and so their rates
/// are those of the last step, and none finishes, so the step is whole. Adds each job's loss
/// to `lost`; true once a job's passes the limit (checked as `predict` checks it, in job
/// order, stopping there).
fn steady_step(
    on_gpu: &mut LoneGpu<'_>,
    jobs: &[BudgetJob<'_>],
    lost: &mut [f64],
    max_slowdown: f64,
    slack_s: f64,
    step_s: f64,
) -> bool {
    for ((j, l), lone) in jobs.iter().zip(lost.iter_mut()).zip(on_gpu.jobs.iter_mut()) {
        let Some(rate) = lone.rate else { continue };
        lone.progress_s += rate * step_s;
        *l += step_s * (1.0 - rate);
        if *l > max_slowdown * j.profile.solo_s() - slack_s + 1e-9 {
            return true;
        }
    }
    false
}

/// True when `jobs` running together on `gpu` under `model`, stepped as [`predict`] steps them,
/// never hold more memory than the card: `predict` with no slowdown limit, `admitted`. It stops
/// once the unfinished jobs' remaining peaks fit together (no later moment can then pass
/// the card: each job's memory stays within its remaining peak, and float sums are monotone).
pub fn memory_fits(gpu: &GpuSpec, model: &dyn Interference, jobs: &[BudgetJob<'_>], step_s: f64) -> bool {
    let (mut on_gpu, max_steps) = stepper(gpu, model, jobs, step_s);
    let card = gpu.memory_mib + 1e-9;
    for _ in 0..max_steps {
        // One pass: whether any job is left, the memory now and the remaining peaks, both
        // summed in job order (as `predict` sums), so the bound holds after rounding too.
        let (mut left, mut now, mut peaks) = (false, 0.0, 0.0);
        for j in on_gpu.jobs.iter().filter(|j| !j.done()) {
            left = true;
            let i = j.profile.sample_index(j.progress_s);
            now += j.profile.samples[i].gpu_mem_mib;
            peaks += j.profile.peak_from(i).gpu_mem_mib;
        }
        if !left {
            return true;
        }
        if now > card {
            return false;
        }
        if peaks <= card {
            return true;
        }
        on_gpu.step(step_s);
    }
    false
}

/// True when `job`, alone on `gpu`, runs at full speed under `model` with its memory within
/// the card for the rest of its profile.
fn alone_at_full_speed(job: &LoneJob<'_>, gpu: &GpuSpec, model: &dyn Interference) -> bool {
    let peak = job.profile.peak_from(job.profile.sample_index(job.progress_s));
    peak.gpu_mem_mib <= gpu.memory_mib + 1e-9 && model.alone_at_full_speed(gpu, &peak)
}

/// The placements of `decision` that keep every job on their GPU within `max_slowdown`,
/// checked in order (a later group on the same GPU is checked beside the earlier ones kept),
/// and the groups refused. A group on an idle GPU alone is never refused for
/// slowdown (nothing slows it), so the budget cannot stall a cluster.
pub fn within_budget(
    now_s: f64,
    gpus: &[GpuState],
    queue: &[QueuedJob],
    decision: &[Placement],
    model: &dyn Interference,
    max_slowdown: f64,
    step_s: f64,
) -> (Vec<Placement>, Vec<Placement>) {
    let mut kept: Vec<Placement> = Vec::with_capacity(decision.len());
    let mut refused = Vec::new();
    for p in decision {
        if p.jobs.is_empty() {
            continue;
        }
        let Some(gpu) = gpus.get(p.gpu) else { continue };
        let mut jobs = resident_jobs(now_s, gpu);
        let earlier: Vec<JobId> = kept.iter().filter(|k| k.gpu == p.gpu).flat_map(|k| k.jobs.iter().copied()).collect();
        for id in earlier.iter().chain(&p.jobs) {
            if let Some(q) = queue.iter().find(|q| q.id == *id) {
                jobs.push(BudgetJob::starting(q));
            }
        }
        let slack_s = BUDGET_MARGIN_STEPS * step_s;
        if jobs.len() <= 1 || predict(&gpu.spec, model, &jobs, max_slowdown, slack_s, step_s).admitted {
            kept.push(p.clone());
        } else {
            refused.push(p.clone());
        }
    }
    (kept, refused)
}

/// A slowdown budget as a rule sees it ([`Admission`]): a group is admitted when
/// [`within_budget`] keeps it, so a rule that chooses among admitted groups proposes nothing
/// the simulator or the service would then refuse.
#[derive(Clone, Debug)]
pub struct Budget {
    /// The interference model the caller steps GPUs with.
    pub model: Arc<dyn Interference>,
    /// The budget, a fraction of each job's solo time.
    pub max_slowdown: f64,
    /// The caller's step, s (the simulator's `step_s`).
    pub step_s: f64,
}

impl Admission for Budget {
    fn admits(&self, view: &ClusterView<'_>, gpu: usize, jobs: &[JobId]) -> bool {
        let group = [Placement { gpu, jobs: jobs.to_vec() }];
        let (kept, _) =
            within_budget(view.now_s, view.gpus, view.queue, &group, &*self.model, self.max_slowdown, self.step_s);
        !kept.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dqngpu_interference::Contention;
    use dqngpu_model::{AppInfo, Resources, RunningJob};
    use std::sync::Arc;

    fn gpu() -> GpuSpec {
        dqngpu_model::gpu::lookup("titanxp").unwrap_or_else(|e| panic!("{e}"))
    }

    fn profile(name: &str, secs: usize, util: f64, mem: f64) -> Arc<AppProfile> {
        let samples = vec![Resources::new(util, mem, util, 100.0); secs];
        Arc::new(
            AppProfile::new(AppInfo { name: name.into(), ..Default::default() }, 1.0, samples)
                .unwrap_or_else(|e| panic!("{e}")),
        )
    }

    fn queued(id: JobId, p: &Arc<AppProfile>) -> QueuedJob {
        QueuedJob {
            id,
            app: p.app.name.clone(),
            profile: p.clone(),
            submit_s: 0.0,
            restarts: 0,
            avoid_apps: Default::default(),
        }
    }

    #[test]
    fn heavy_pairs_are_refused_light_ones_and_lone_jobs_kept() {
        let heavy = profile("heavy", 100, 80.0, 500.0);
        let light = profile("light", 100, 30.0, 500.0);
        let model = Contention::default();
        let mut g = GpuState {
            node: "n".into(),
            index: 0,
            spec: gpu(),
            running: vec![RunningJob { id: 9, profile: heavy.clone(), progress_s: 0.0, started_s: 0.0 }],
            measured: None,
        };
        let queue = vec![queued(1, &heavy), queued(2, &light)];
        let d = vec![Placement { gpu: 0, jobs: vec![1] }];
        let (kept, refused) = within_budget(0.0, std::slice::from_ref(&g), &queue, &d, &model, 0.10, 1.0);
        assert!(kept.is_empty() && refused == d, "{kept:?}");
        // Two light jobs on an idle GPU: 0.1841 x 0.3 x 0.3 = 1.7% each, within 10%.
        g.running.clear();
        let two_light = vec![Placement { gpu: 0, jobs: vec![2] }, Placement { gpu: 0, jobs: vec![3] }];
        let queue = vec![queued(2, &light), queued(3, &light)];
        let (kept, refused) = within_budget(0.0, std::slice::from_ref(&g), &queue, &two_light, &model, 0.10, 1.0);
        assert_eq!((kept.len(), refused.len()), (2, 0));
        // ... but not within 1%: the second group is checked beside the first one kept.
        let (kept, refused) = within_budget(0.0, std::slice::from_ref(&g), &queue, &two_light, &model, 0.01, 1.0);
        assert_eq!((kept.len(), refused.len()), (1, 1));
        // A lone job on an idle GPU is never refused, whatever the budget.
        let (kept, _) = within_budget(0.0, std::slice::from_ref(&g), &queue, &two_light[..1], &model, 0.0, 1.0);
        assert_eq!(kept.len(), 1);
    }

    /// [`predict`] as it was before its shortcuts: every step stepped, by hand (the rates asked
    /// of the model at every step, no [`LoneGpu`]).
    fn predict_stepping_all(
        gpu: &GpuSpec,
        jobs: &[BudgetJob<'_>],
        max_slowdown: f64,
        slack_s: f64,
        step_s: f64,
    ) -> Prediction {
        use crate::step::{advance, gpu_rates, time_to_finish, Advance};
        use dqngpu_interference::JobLoad;
        let model = Contention::default();
        let mut lost: Vec<f64> = jobs.iter().map(|j| j.lost_s.max(0.0)).collect();
        let mut worst: f64 = jobs.iter().zip(&lost).map(|(j, l)| l / j.profile.solo_s()).fold(0.0, f64::max);
        let mut progress: Vec<f64> = jobs.iter().map(|j| j.progress_s.max(0.0)).collect();
        loop {
            let left: Vec<usize> = (0..jobs.len()).filter(|&k| progress[k] < jobs[k].profile.solo_s()).collect();
            if left.is_empty() {
                return Prediction { worst_slowdown: worst, memory_over: false, admitted: true };
            }
            let mem: f64 = left.iter().map(|&k| jobs[k].profile.demand_at(progress[k]).gpu_mem_mib).sum();
            if mem > gpu.memory_mib + 1e-9 {
                return Prediction { worst_slowdown: worst, memory_over: true, admitted: false };
            }
            let loads: Vec<JobLoad> = left
                .iter()
                .map(|&k| JobLoad { app: jobs[k].app, demand: jobs[k].profile.demand_at(progress[k]) })
                .collect();
            let mut rates = vec![0.0; left.len()];
            gpu_rates(&model, gpu, &loads, &mut rates);
            let finish: Vec<f64> = left
                .iter()
                .zip(&rates)
                .map(|(&k, &r)| time_to_finish(jobs[k].profile.solo_s() - progress[k], r))
                .collect();
            let dt = finish.iter().fold(step_s, |dt, &tf| dt.min(tf));
            for ((&k, &r), &tf) in left.iter().zip(&rates).zip(&finish) {
                progress[k] = match advance(progress[k], r, tf, dt) {
                    Advance::Running { progress_s } => progress_s,
                    Advance::Finished { .. } => jobs[k].profile.solo_s(),
                };
            }
            for (&k, &r) in left.iter().zip(&rates) {
                let (l, solo) = (&mut lost[k], jobs[k].profile.solo_s());
                *l += dt * (1.0 - r);
                worst = worst.max(*l / solo);
                if *l > max_slowdown * solo - slack_s + 1e-9 {
                    return Prediction { worst_slowdown: worst, memory_over: false, admitted: false };
                }
            }
        }
    }

    fn phased(name: &str, phases: &[(usize, f64, f64)]) -> Arc<AppProfile> {
        let samples = phases.iter().flat_map(|&(n, u, m)| vec![Resources::new(u, m, u, 500.0); n]).collect();
        Arc::new(
            AppProfile::new(AppInfo { name: name.into(), ..Default::default() }, 1.0, samples)
                .unwrap_or_else(|e| panic!("{e}")),
        )
    }

    proptest::proptest! {
        /// The shortcuts (a job left alone at full speed; memory-only predictions stopping once
        /// the remaining peaks fit; steady stretches stepped without asking the model or
        /// checking memory again; rates kept while demands stay) answer exactly what stepping
        /// to the end answers, worst slowdown included, at any step length.
        #[test]
        fn shortcuts_answer_as_stepping_to_the_end(
            apps in proptest::collection::vec(
                proptest::collection::vec((1usize..40, 0.0..100.0f64, 0.0..7000.0f64), 1..4), 1..4),
            starts in proptest::collection::vec((0.0..60.0f64, 0.0..8.0f64), 4),
            limit in proptest::option::of(0.0..0.3f64),
            step_s in proptest::sample::select(vec![1.0, 0.5, 2.5, 7.0]),
        ) {
            let profiles: Vec<Arc<AppProfile>> =
                apps.iter().enumerate().map(|(k, p)| phased(&format!("a{k}"), p)).collect();
            let jobs: Vec<BudgetJob> = profiles
                .iter()
                .zip(&starts)
                .map(|(p, &(progress, lost))| BudgetJob {
                    app: &p.app.name,
                    profile: p,
                    progress_s: progress.min(p.solo_s() - 0.5).max(0.0),
                    lost_s: lost,
                })
                .collect();
            let gpu = gpu();
            let model = Contention::default();
            let max = limit.unwrap_or(f64::INFINITY);
            let slack = if limit.is_some() { 0.5 } else { 0.0 };
            let expected = predict_stepping_all(&gpu, &jobs, max, slack, step_s);
            proptest::prop_assert_eq!(predict(&gpu, &model, &jobs, max, slack, step_s), expected);
            let everything = predict_stepping_all(&gpu, &jobs, f64::INFINITY, 0.0, step_s);
            proptest::prop_assert_eq!(memory_fits(&gpu, &model, &jobs, step_s), everything.admitted);
        }
    }

    #[test]
    fn time_already_lost_counts() {
        let light = profile("light", 100, 30.0, 500.0);
        let model = Contention::default();
        let job = |lost_s| BudgetJob { app: "light", profile: &light, progress_s: 0.0, lost_s };
        assert!(predict(&gpu(), &model, &[job(0.0), job(0.0)], 0.02, 0.0, 1.0).admitted);
        assert!(!predict(&gpu(), &model, &[job(1.0), job(0.0)], 0.02, 0.0, 1.0).admitted);
        // The slack counts against the limit: 1.7% lost of 100 s passes 2%, not 2% less 0.5 s.
        assert!(!predict(&gpu(), &model, &[job(0.0), job(0.0)], 0.02, 0.5, 1.0).admitted);
    }
}
